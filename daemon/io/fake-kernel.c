/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The block layer's write semantics over a fixture tree: see fake-kernel.h. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "facts.h"
#include "fake-kernel.h"
#include "kernel-default.h"
#include "util.h"

#if ENABLE_FAULT_INJECTION

typedef struct Default {
        const char *scheduler, *attr, *value;
} Default;

/* Each scheduler's tunables as a 6.x kernel creates them. */
static const Default defaults[] = {
        { "mq-deadline", "read_expire", "500" },       { "mq-deadline", "write_expire", "5000" },
        { "mq-deadline", "writes_starved", "2" },      { "mq-deadline", "fifo_batch", "16" },
        { "mq-deadline", "front_merges", "1" },        { "mq-deadline", "prio_aging_expire", "10000" },
        { "mq-deadline", "async_depth", "192" },       { "bfq", "low_latency", "1" },
        { "bfq", "slice_idle", "8" },                  { "bfq", "slice_idle_us", "8000" },
        { "bfq", "back_seek_max", "16384" },           { "bfq", "back_seek_penalty", "2" },
        { "bfq", "fifo_expire_async", "250" },         { "bfq", "fifo_expire_sync", "125" },
        { "bfq", "max_budget", "0" },                  { "bfq", "timeout_sync", "124" },
        { "bfq", "strict_guarantees", "0" },           { "kyber", "read_lat_nsec", "2000000" },
        { "kyber", "write_lat_nsec", "10000000" },
};

/* Whole or not at all, as a sysfs read sees an attribute: a reader must
 * never catch a truncated file. rel is below the queue directory q. */
static int write_file(int q, const char *rel, const char *text) {
        char tmp[PATH_MAX];
        size_t len = strlen(text);
        int fd, k = 0;

        snprintf(tmp, sizeof(tmp), "%s.fake-kernel-tmp", rel);
        fd = openat(q, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        if (write(fd, text, len) != (ssize_t) len)
                k = -EIO;
        (void) close(fd);
        if (k == 0 && renameat(q, tmp, q, rel) < 0)
                k = -errno;
        if (k < 0)
                (void) unlinkat(q, tmp, 0);
        return k;
}

static void remove_iosched(int q) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = openat(q, "iosched", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                (void) close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        (void) unlinkat(q, "iosched", AT_REMOVEDIR);
}

static int create_iosched(int q, const char *scheduler) {
        char rel[PATH_MAX];
        const char *mode = getenv("BLKPOLICYD_FAKE_KERNEL");

        if (mkdirat(q, "iosched", 0755) < 0 && errno != EEXIST)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
                if (!streq(defaults[i].scheduler, scheduler))
                        continue;
                snprintf(rel, sizeof(rel), "iosched/%s", defaults[i].attr);
                if (write_file(q, rel, defaults[i].value) < 0)
                        return -EIO;
        }
        if (streq(scheduler, "mq-deadline") && streq(mode, "dispatch_direct"))
                return write_file(q, "iosched/dispatch_direct", "1");
        return 0;
}

/* An elevator switch: what elevator_switch() does to the queue's files. */
static int switch_elevator(int q, const char *to) {
        remove_iosched(q);
        if (write_file(q, "nr_requests", streq(to, "none") ? "128" : "256") < 0)
                return -EIO;
        return streq(to, "none") ? 0 : create_iosched(q, to);
}

static int write_scheduler(int q, const char *path, const char *value, FakeKernelRead read_attr) {
        char raw[256], list[256] = "";
        SchedulerList l;
        size_t n = 0;
        int k;

        k = read_attr(q, "scheduler", path, raw, sizeof(raw));
        if (k < 0)
                return k;
        if (scheduler_list_parse(raw, &l) < 0 || !scheduler_list_has(&l, value))
                return -EINVAL;
        for (unsigned i = 0; i < l.n; i++) {
                const char *name = scheduler_list_at(&l, i);

                n += (size_t) snprintf(list + n, sizeof(list) - n, streq(name, value) ? "[%s] " : "%s ", name);
        }
        if (!streq(scheduler_list_current(&l), value) && switch_elevator(q, value) < 0)
                return -EIO;
        return write_file(q, "scheduler", list);
}

/* mq-deadline derives async_depth from nr_requests (dd_depth_updated():
 * 3/4 of it, as measured on 6.18): a write of nr_requests resets it. */
static void reset_async_depth(int q, long long depth) {
        char value[32];

        if (faccessat(q, "iosched/async_depth", F_OK, 0) < 0)
                return;
        snprintf(value, sizeof(value), "%lld", depth * 3 / 4 > 0 ? depth * 3 / 4 : 1);
        (void) write_file(q, "iosched/async_depth", value);
}

/* A write of max_sectors_kb is a limits update: blk_apply_bdi_limits()
 * raises read-ahead to the default of the new limits, as 6.18 does
 * (kernel-default.h; measured on a rotational loop device: 64, then
 * max_sectors_kb 256 -> 512). */
static int write_max_sectors(int q, const char *path, const char *value, FakeKernelRead read_attr) {
        static const unsigned v6_18[3] = { 6, 18, 0 };
        char io_opt[32], rot[32], ra[32], def[32];
        QueueLimitsSeen l;
        long long cur;
        int k;

        k = write_file(q, "max_sectors_kb", value);
        if (k < 0)
                return k;
        /* a fixture without optimal_io_size: none, as the kernel shows 0 */
        if (read_attr(q, "optimal_io_size", path, io_opt, sizeof(io_opt)) < 0)
                strcpy(io_opt, "0");
        if (read_attr(q, "rotational", path, rot, sizeof(rot)) < 0 ||
            read_attr(q, "read_ahead_kb", path, ra, sizeof(ra)) < 0 ||
            queue_limits_parse(io_opt, value, rot, (unsigned) (sysconf(_SC_PAGESIZE) / 1024), &l) < 0 ||
            parse_ll(ra, 0, LLONG_MAX, &cur) < 0)
                return 0;       /* a fixture without them: nothing to model */
        if ((uint64_t) cur >= read_ahead_kernel_default(&l, v6_18))
                return 0;       /* never lowered, since 6.15 */
        snprintf(def, sizeof(def), "%" PRIu64, read_ahead_kernel_default(&l, v6_18));
        return write_file(q, "read_ahead_kb", def);
}

/* The fake kernel's HZ, as this project's VM's: 250. */
#define FAKE_HZ 250

/* Times the schedulers keep in jiffies, shown in ms (mq-deadline's
 * read_expire and write_expire, bfq's fifo_expire_* and timeout_sync):
 * msecs_to_jiffies() rounds up, jiffies_to_msecs() shows the multiple of
 * 1000/HZ: read_expire = 1 reads back 4. */
static bool in_jiffies(const char *rel) {
        static const char *const attrs[] = { "iosched/read_expire", "iosched/write_expire",
                                             "iosched/prio_aging_expire", "iosched/fifo_expire_sync",
                                             "iosched/fifo_expire_async",
                                             "iosched/timeout_sync" };

        for (size_t i = 0; i < ELEMENTSOF(attrs); i++)
                if (streq(rel, attrs[i]))
                        return true;
        return false;
}

static int write_jiffies(int q, const char *rel, long long ms) {
        long long tick = 1000 / FAKE_HZ, jiffies = (ms + tick - 1) / tick;
        char value[32];

        snprintf(value, sizeof(value), "%lld", jiffies * tick);
        return write_file(q, rel, value);
}

int fake_kernel_write(int q, const char *rel, const char *path, const char *value, FakeKernelRead read_attr) {
        long long v;

        if (!getenv("BLKPOLICYD_FAKE_KERNEL"))
                return 1;
        if (faccessat(q, rel, F_OK, 0) < 0)
                return -errno;
        if (streq(rel, "scheduler"))
                return write_scheduler(q, path, value, read_attr);
        if (parse_ll(value, -1, LLONG_MAX, &v) < 0)
                return -EINVAL;
        if (streq(rel, "nr_requests"))
                reset_async_depth(q, v);
        if (streq(rel, "max_sectors_kb"))
                return write_max_sectors(q, path, value, read_attr);
        if (in_jiffies(rel))
                return write_jiffies(q, rel, v);
        return write_file(q, rel, value);
}

#endif
