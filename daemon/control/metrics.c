/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>

#include "blkpolicyd-paths.h"
#include "conflicts-report.h"
#include "device.h"
#include "manager.h"
#include "metrics.h"
#include "policy-set.h"
#include "sampler.h"
#include "util.h"

typedef struct Buf {
        FILE *f;
        char *text;
        size_t size;
} Buf;

static void help(Buf *b, const char *name, const char *type, const char *text) {
        fprintf(b->f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* Kernel names are [A-Za-z0-9_.!-]: nothing to escape, but be safe. */
static void label(Buf *b, const char *v) {
        for (; *v; v++) {
                if (*v == '\\' || *v == '"')
                        fputc('\\', b->f);
                if (*v == '\n')
                        fputs("\\n", b->f);
                else
                        fputc(*v, b->f);
        }
}

static void device_metric(Buf *b, const char *name, const Device *d, double v) {
        fprintf(b->f, "%s{device=\"", name);
        label(b, device_name(d));
        fprintf(b->f, "\"} %.17g\n", v);
}

/* What the metrics show of a device now: one live read (device_view()),
 * taken once for every series of it. */
typedef struct DeviceSeen {
        uint64_t queue_id;              /* of the device read: another under its number is not it */
        unsigned pending, overridden, not_kept;
        char scheduler[VALUE_MAX];      /* "" when it cannot be read */
} DeviceSeen;

/* Devices read live per dispatch: some 10 ms on sysfs (about 40 us a
 * managed disk, bench/views.py), so a text of 10,000 disks keeps no
 * client and no uevent waiting longer than that. */
#define METRICS_SLICE 256

/* A metrics text in the making: the devices as they were when it began,
 * in name order, read live METRICS_SLICE at a time; then the text. */
struct MetricsBuild {
        dev_t *devnums;
        DeviceSeen *seen;
        size_t n, read;
};

typedef double (*DeviceValue)(const Manager *m, const Device *d, const DeviceSeen *s);

static double v_busy(const Manager *m _unused_, const Device *d, const DeviceSeen *s _unused_) {
        return device_plan(d)->busy;
}
static double v_flips(const Manager *m _unused_, const Device *d, const DeviceSeen *s _unused_) {
        const DeviceDynamic *y = device_dynamic(d);
        return y ? dyn_state_flips(&y->state) : 0;
}
static double v_cost(const Manager *m _unused_, const Device *d, const DeviceSeen *s _unused_) {
        const DeviceFlips *y = device_flips(d);
        return y ? y->cost_ms / 1000.0 : 0;
}
/* as status counts it: "pause" of all devices pauses each */
static double v_paused(const Manager *m, const Device *d, const DeviceSeen *s _unused_) {
        return device_is_paused(&m->ctx, d);
}
/* someone else's value on a setting blkpolicyd held, now */
static double v_overridden(const Manager *m _unused_, const Device *d, const DeviceSeen *s) {
        return device_overridden(d) || s->overridden > 0;
}
/* the settings a write would change, as verify lists them: planned
 * (observe, paused) and overridden; 0 once the policy is in force */
static double v_pending(const Manager *m _unused_, const Device *d _unused_, const DeviceSeen *s) {
        return s->pending;
}
static double v_not_kept(const Manager *m _unused_, const Device *d _unused_, const DeviceSeen *s) {
        return s->not_kept;
}

/* No per-device load here: a gauge of the last tick is a random sample at
 * a 15 s scrape, and node_exporter's diskstats collector already exports
 * the counters these came from (node_disk_*_total): join on `device`. */
static const struct {
        const char *name, *type, *help;
        DeviceValue value;
} device_metrics[] = {
        { "blkpolicyd_device_busy", "gauge", "1 while the device runs its policy's busy settings", v_busy },
        { "blkpolicyd_device_flips_total", "counter", "Flips between base and busy settings", v_flips },
        { "blkpolicyd_device_flip_cost_seconds_total", "counter", "Time spent applying flips", v_cost },
        { "blkpolicyd_device_paused", "gauge", "1 while paused by an admin", v_paused },
        { "blkpolicyd_device_overridden", "gauge", "1 while a setting was changed by someone else", v_overridden },
        { "blkpolicyd_device_pending_changes", "gauge",
          "Settings a write would change, not made (mode=observe, paused, overridden)", v_pending },
        { "blkpolicyd_device_settings_not_kept", "gauge",
          "Settings written whose value the kernel did not keep (it rounds iosched times to jiffies)", v_not_kept },
};

static void seen_now(const Manager *m, const Device *d, DeviceSeen *s) {
        DeviceView v;

        device_view(&m->ctx, d, &v);
        *s = (DeviceSeen) { .queue_id = device_record(d)->id.queue_id, .pending = v.pending,
                            .overridden = v.overridden, .not_kept = v.not_kept };
        if (v.scheduler.state == LIVE_OK)
                (void) strscpy(s->scheduler, sizeof(s->scheduler), v.scheduler.value);
}

static void write_device_metrics(Buf *b, const Manager *m, Device **devs, const DeviceSeen *seen, int n) {
        for (size_t k = 0; k < ELEMENTSOF(device_metrics); k++) {
                help(b, device_metrics[k].name, device_metrics[k].type, device_metrics[k].help);
                for (int i = 0; i < n; i++)
                        if (device_plan(devs[i])->managed)
                                device_metric(b, device_metrics[k].name, devs[i],
                                              device_metrics[k].value(m, devs[i], &seen[i]));
        }
        help(b, "blkpolicyd_device_scheduler", "gauge", "The I/O scheduler the device runs (1 for the one in use)");
        for (int i = 0; i < n; i++) {
                if (!seen[i].scheduler[0])
                        continue;
                fputs("blkpolicyd_device_scheduler{device=\"", b->f);
                label(b, device_name(devs[i]));
                fputs("\",scheduler=\"", b->f);
                label(b, seen[i].scheduler);
                fputs("\"} 1\n", b->f);
        }
}

/* The host's sums, for an alert that fires once per host. */
static void write_host_states(Buf *b, const DeviceSeen *seen, int n) {
        unsigned not_kept = 0;

        for (int i = 0; i < n; i++)
                not_kept += seen[i].not_kept;
        help(b, "blkpolicyd_settings_not_kept", "gauge",
             "Settings written on this host whose value the kernel did not keep");
        fprintf(b->f, "blkpolicyd_settings_not_kept %u\n", not_kept);
}

MetricsBuild *metrics_build_free(MetricsBuild *b) {
        if (!b)
                return NULL;
        free(b->devnums);
        free(b->seen);
        free(b);
        return NULL;
}

int metrics_build_new(Manager *m, MetricsBuild **ret) {
        _cleanup_free_ Device **devs = NULL;
        MetricsBuild *b;
        int n;

        n = devices_sorted(&m->ctx, &devs);
        if (n < 0)
                return -ENOMEM;
        b = calloc(1, sizeof(MetricsBuild));
        if (!b)
                return -ENOMEM;
        b->devnums = calloc((size_t) n + 1, sizeof(dev_t));
        b->seen = calloc((size_t) n + 1, sizeof(DeviceSeen));
        if (!b->devnums || !b->seen) {
                metrics_build_free(b);
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++)
                b->devnums[i] = device_devnum(devs[i]);
        b->n = (size_t) n;
        *ret = b;
        return 0;
}

/* The device read at i, if it is still the one in the table. */
static Device *build_device(const MetricsBuild *b, Manager *m, size_t i) {
        Device *d = device_get(&m->ctx, b->devnums[i]);

        return d && device_record(d)->id.queue_id == b->seen[i].queue_id ? d : NULL;
}

int metrics_build_step(MetricsBuild *b, Manager *m) {
        size_t end = b->n - b->read < METRICS_SLICE ? b->n : b->read + METRICS_SLICE;

        for (; b->read < end; b->read++) {
                Device *d = device_get(&m->ctx, b->devnums[b->read]);

                if (d)
                        seen_now(m, d, &b->seen[b->read]);
                else
                        b->seen[b->read].queue_id = UINT64_MAX;         /* gone: matches none */
        }
        return b->read < b->n;
}

/* A build with every read done, in one go: callers that make the text
 * now. -ENOMEM. */
static int build_whole(Manager *m, MetricsBuild **ret) {
        int r = metrics_build_new(m, ret);

        while (r >= 0 && metrics_build_step(*ret, m) > 0)
                ;
        return r;
}

/* The devices read that are still there, and what was seen of them, in
 * place: the text shows no disk gone meanwhile. */
static int build_compact(MetricsBuild *b, Manager *m, Device ***ret) {
        Device **devs = calloc(b->n + 1, sizeof(Device *));
        size_t k = 0;

        if (!devs)
                return -ENOMEM;
        for (size_t i = 0; i < b->n; i++) {
                Device *d = build_device(b, m, i);

                if (!d)
                        continue;
                b->seen[k] = b->seen[i];
                b->devnums[k] = b->devnums[i];
                devs[k++] = d;
        }
        b->n = b->read = k;
        *ret = devs;
        return (int) k;
}

/* The whole text to f, from a build whose reads are done; the caller
 * checks f's errors (a memstream's at fclose(): memstream_open()).
 * -ENOMEM only for the disks' list. */
int metrics_build_write(MetricsBuild *mb, Manager *m, FILE *f) {
        _cleanup_free_ Device **devs = NULL;
        const SamplerStats *ticks = sampler_stats(m->sampler);
        Buf b = { .f = f };
        int n;

        assert(mb->read == mb->n);
        n = build_compact(mb, m, &devs);
        if (n < 0)
                return -ENOMEM;
        help(&b, "blkpolicyd_build_info", "gauge", "Always 1; the version of the running blkpolicyd");
        fputs("blkpolicyd_build_info{version=\"", b.f);
        label(&b, PACKAGE_VERSION);
        fputs("\"} 1\n", b.f);
        help(&b, "blkpolicyd_enforcing", "gauge", "1 when policies are written (mode=enforce), 0 when only observed");
        fprintf(b.f, "blkpolicyd_enforcing %d\n", manager_writes(m) ? 1 : 0);
        help(&b, "blkpolicyd_devices", "gauge", "Whole disks known");
        fprintf(b.f, "blkpolicyd_devices %zu\n", m->ctx.devices.n_devices);
        help(&b, "blkpolicyd_ticks_total", "counter", "Sampling ticks");
        fprintf(b.f, "blkpolicyd_ticks_total %llu\n", (unsigned long long) ticks->ticks);
        help(&b, "blkpolicyd_tick_seconds_total", "counter", "Time spent in ticks");
        fprintf(b.f, "blkpolicyd_tick_seconds_total %.6f\n", (double) ticks->cost_usec_total / 1e6);
        help(&b, "blkpolicyd_sysfs_writes_total", "counter",
             "Writes to queue attributes, by kind (each scheduler write freezes the queue)");
        fprintf(b.f, "blkpolicyd_sysfs_writes_total{kind=\"scheduler\"} %llu\n",
                (unsigned long long) m->ctx.writes.scheduler_writes);
        fprintf(b.f, "blkpolicyd_sysfs_writes_total{kind=\"other\"} %llu\n", (unsigned long long) m->ctx.writes.other_writes);
        help(&b, "blkpolicyd_sysfs_write_errors_total", "counter",
             "Writes to queue attributes the kernel refused (a scheduler fallback taken is not one)");
        fprintf(b.f, "blkpolicyd_sysfs_write_errors_total %llu\n", (unsigned long long) m->ctx.writes.write_errors);
        help(&b, "blkpolicyd_last_reload_successful", "gauge",
             "0 while the last reload was refused (its configuration has errors; the running one stays)");
        fprintf(b.f, "blkpolicyd_last_reload_successful %d\n", m->reload_errors ? 0 : 1);
        help(&b, "blkpolicyd_reload_failures_total", "counter", "Reloads refused (the configuration had errors)");
        fprintf(b.f, "blkpolicyd_reload_failures_total %llu\n", (unsigned long long) m->reload_failures);
        help(&b, "blkpolicyd_policy_files_rejected", "gauge",
             "Policy files rejected at the last (re)load: files, not errors; they count as absent");
        fprintf(b.f, "blkpolicyd_policy_files_rejected %zu\n", m->policies->n_files_rejected);
        help(&b, "blkpolicyd_policy_errors", "gauge", "Errors in the rejected policy files (a file may have several)");
        fprintf(b.f, "blkpolicyd_policy_errors %zu\n", m->policies->errors.n_items);
        help(&b, "blkpolicyd_sample_errors", "gauge", "1 while /proc/diskstats cannot be read");
        fprintf(b.f, "blkpolicyd_sample_errors %d\n", ticks->diskstats_error ? 1 : 0);
        write_host_states(&b, mb->seen, n);
        write_device_metrics(&b, m, devs, mb->seen, n);
        conflicts_report_metrics(&m->ctx, b.f);
        return 0;
}

int metrics_build(Manager *m, char **ret) {
        char *text = NULL;
        size_t size = 0;
        /* not open_memstream(): its writes fail unseen, and a text cut
         * short would be served as whole */
        FILE *f = memstream_open(&text, &size);
        MetricsBuild *mb = NULL;
        int r;

        if (!f)
                return -ENOMEM;
        r = build_whole(m, &mb);
        if (r >= 0)
                r = metrics_build_write(mb, m, f);
        metrics_build_free(mb);
        if (fclose(f) != 0 || r < 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}

#define TEXTFILE "blkpolicyd.prom"
#define TEXTFILE_TMP ".blkpolicyd.prom.tmp"

/* The textfile dir may be writable by others (node_exporter's often is):
 * everything is relative to the dir's fd, the temp file is created with
 * O_EXCL|O_NOFOLLOW so a planted symlink or file makes this write fail
 * instead of being followed, and rename() replaces a planted TEXTFILE
 * link itself, never its target. */
int metrics_write_textfile(Manager *m, MetricsBuild *b, const char *dir) {
        _cleanup_close_ int dfd = -1, fd = -1;
        _cleanup_fclose_ FILE *f = NULL;
        int r;

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        /* a temp file of ours left by a crash: unlinkat() removes a link, not its target */
        if (unlinkat(dfd, TEXTFILE_TMP, 0) < 0 && errno != ENOENT)
                return -errno;
        fd = openat(dfd, TEXTFILE_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        /* written as made, not built first: at 10,000 disks the text is
         * 4.6 MB, which every metrics_every_ticks would have held */
        f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                (void) unlinkat(dfd, TEXTFILE_TMP, 0);
                return r;
        }
        (void) take_fd(&fd);    /* owned by f now */
        r = metrics_build_write(b, m, f);
        errno = 0;      /* ferror() from an earlier write leaves no errno of its own */
        if (r >= 0 && (fflush(f) != 0 || ferror(f)))
                r = errno > 0 ? -errno : -EIO;
        if (r >= 0 && fsync(fileno(f)) < 0)
                r = -errno;
        if (r >= 0 && renameat(dfd, TEXTFILE_TMP, dfd, TEXTFILE) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dfd, TEXTFILE_TMP, 0);
        return r;
}

/* At stop: a file left behind would be served by node_exporter as if the
 * daemon still ran, its gauges frozen. Gone, the series go stale and
 * absent(blkpolicyd_build_info) can alert. */
int metrics_remove_textfile(const char *dir) {
        _cleanup_close_ int dfd = -1;
        int r = 0;

        if (!dir)
                return 0;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? 0 : -errno;
        /* unlinkat() removes the links, never what a planted link points to */
        if (unlinkat(dfd, TEXTFILE, 0) < 0 && errno != ENOENT)
                r = -errno;
        if (unlinkat(dfd, TEXTFILE_TMP, 0) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

void metrics_move_textfile(Manager *m, const char *old_dir) {
        const char *dir = m->config.metrics_textfile_dir;
        MetricsBuild *b = NULL;
        int r;

        /* the old dir's file is ours, or a killed predecessor's (we hold
         * the state dir's lock: no other daemon runs), ticked or not */
        if (streq_ptr(old_dir, dir))
                return;
        r = metrics_remove_textfile(old_dir);
        if (r < 0)
                log_warning_errno(r, "Cannot remove the metrics file in %s: %m", old_dir);
        if (!dir)
                return;
        /* now, not at the next metrics tick: a reader of the new dir finds it
         * at once (a reload decides every disk on the loop anyway) */
        r = build_whole(m, &b);
        if (r == 0)
                r = metrics_write_textfile(m, b, dir);
        metrics_build_free(b);
        if (r < 0)
                log_warning_errno(r, "Cannot write metrics to %s, ignoring: %m", dir);
}
