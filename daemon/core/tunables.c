/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <limits.h>

#include "tunables.h"
#include "util.h"

/* A queue attribute is named as its file; a scheduler's tunable is its
 * section's file under iosched/, while that scheduler runs. */
#define QUEUE(key, min, max) { "Queue", key, key, NULL, min, max, false }
#define QUEUE_RQ(key, min, max) { "Queue", key, key, NULL, min, max, true }
#define IOSCHED(scheduler, key, min, max) { scheduler, key, "iosched/" key, scheduler, min, max, true }

/* Ranges follow the kernel's own checks (block/blk-sysfs.c and the
 * iosched files); the kernel still has the last word and apply.c reads
 * every value back. */
const Tunable tunables[] = {
        QUEUE_RQ("scheduler", 0, 0),
        QUEUE_RQ("nr_requests", 4, 65536),
        QUEUE("read_ahead_kb", 0, INT_MAX),
        QUEUE_RQ("rq_affinity", 0, 2),
        QUEUE("nomerges", 0, 2),
        QUEUE_RQ("wbt_lat_usec", -1, INT64_MAX / 1000),
        QUEUE("max_sectors_kb", 4, INT_MAX),
        QUEUE("iostats", 0, 1),
        QUEUE("add_random", 0, 1),

        IOSCHED("mq-deadline", "dispatch_direct", 0, 1),
        IOSCHED("mq-deadline", "read_expire", 0, INT_MAX),
        IOSCHED("mq-deadline", "write_expire", 0, INT_MAX),
        IOSCHED("mq-deadline", "writes_starved", 0, INT_MAX),
        IOSCHED("mq-deadline", "fifo_batch", 0, INT_MAX),
        IOSCHED("mq-deadline", "front_merges", 0, 1),
        IOSCHED("mq-deadline", "prio_aging_expire", 0, INT_MAX),
        IOSCHED("mq-deadline", "async_depth", 1, INT_MAX),

        IOSCHED("bfq", "low_latency", 0, 1),
        IOSCHED("bfq", "slice_idle", 0, INT_MAX),
        IOSCHED("bfq", "slice_idle_us", 0, INT_MAX),
        IOSCHED("bfq", "back_seek_max", 0, INT_MAX),
        IOSCHED("bfq", "back_seek_penalty", 1, INT_MAX),
        IOSCHED("bfq", "fifo_expire_async", 0, INT_MAX),
        IOSCHED("bfq", "fifo_expire_sync", 0, INT_MAX),
        IOSCHED("bfq", "max_budget", 0, INT_MAX),
        IOSCHED("bfq", "timeout_sync", 1, INT_MAX),
        IOSCHED("bfq", "strict_guarantees", 0, 1),

        IOSCHED("kyber", "read_lat_nsec", 1, INT64_MAX),
        IOSCHED("kyber", "write_lat_nsec", 1, INT64_MAX),
};

const size_t n_tunables = ELEMENTSOF(tunables);

_Static_assert(ELEMENTSOF(tunables) <= TUNABLES_MAX, "TUNABLES_MAX too small");

int tunable_find(const char *section, const char *key) {
        for (size_t i = 0; i < n_tunables; i++)
                if (streq(tunables[i].section, section) && streq(tunables[i].key, key))
                        return (int) i;
        return -ENOENT;
}

int tunable_find_attr(const char *attr) {
        for (size_t i = 0; i < n_tunables; i++)
                if (streq(tunables[i].attr, attr))
                        return (int) i;
        return -ENOENT;
}

int tunable_parse_value(size_t index, const char *value, char *buf, size_t size) {
        const Tunable *t = &tunables[index];
        long long v;
        int r;

        if (t->min == 0 && t->max == 1) {
                r = parse_boolean(value);
                if (r < 0)
                        return r;
                v = r;
        } else {
                r = parse_ll(value, t->min, t->max, &v);
                if (r < 0)
                        return r;
        }
        snprintf(buf, size, "%lld", v);
        return 0;
}
