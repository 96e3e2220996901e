/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tick: one read of /proc/diskstats for all devices, signals per
 * device, the dynamic state machine, flips. The steady state allocates
 * nothing: the read buffer is reused, lines are parsed in place, devices
 * are found by dev_t. */
#include <fcntl.h>
#include <limits.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "record.h"
#include "util.h"

static uint64_t now_usec(void) {
        return clock_usec(CLOCK_MONOTONIC);
}

static uint64_t cpu_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/* Reads the whole file into m->diskstats, growing it only when it is full. */
static int read_diskstats(Manager *m, size_t *len) {
        char path[PATH_MAX];
        _cleanup_close_ int fd = -1;
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/diskstats", m->roots.proc);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t k;

                if (n + 1 >= m->diskstats_size) {
                        size_t size = m->diskstats_size ? m->diskstats_size * 2 : (size_t) 64 * 1024;
                        char *b = realloc(m->diskstats, size);
                        if (!b)
                                return -ENOMEM;
                        m->diskstats = b;
                        m->diskstats_size = size;
                }
                k = read(fd, m->diskstats + n, m->diskstats_size - n - 1);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        m->diskstats[n] = 0;
        *len = n;
        return 0;
}

/* dispatch_busy: max over the default-type hctxs. Poll hctxs come last. */
static double read_dispatch_busy(Manager *m, const Device *d) {
        unsigned n = d->facts->hw_queues - d->facts->poll_queues;
        double best = -1;

        for (unsigned i = 0; i < n; i++) {
                char path[PATH_MAX], buf[16];

                snprintf(path, sizeof(path), "%s/block/%s/hctx%u/dispatch_busy", m->roots.debugfs, d->name, i);
                int r = sysfs_read(path, buf, sizeof(buf));

                if (r < 0) {
                        if (r != m->dispatch_busy_error)
                                log_warning_errno(r, "%s: cannot read %s, dispatch_busy is unknown "
                                                  "(is debugfs mounted?): %m", d->name, path);
                        m->dispatch_busy_error = r;
                        return -1;      /* no debugfs: the signal is unknown, not 0 */
                }
                m->dispatch_busy_error = 0;
                if (atof(buf) > best)
                        best = atof(buf);
        }
        return best;
}

static void device_sample(Manager *m, Device *d, const DiskStat *st, double interval_ms) {
        const DynamicPolicy *dyn = d->plan->managed ? d->plan->dynamic : NULL;
        double busy = -1;
        DynDecision dec;

        if (dyn && dynamic_uses_signal(dyn, SIGNAL_DISPATCH_BUSY))
                busy = read_dispatch_busy(m, d);
        signals_compute(d->have_stat ? &d->stat : NULL, st, interval_ms, busy, &d->signals);
        d->stat = st->c;
        d->have_stat = true;
        if (m->record)
                record_write_sample(m->record, d->name, st, busy);
        if (!dyn || !d->dynamic || device_is_held(m, d))
                return;         /* paused or overridden: no flips */
        dynamic_step(dyn, &d->dynamic->state, &d->signals, m->tick, &dec);
        if (dec.flip)
                device_flip(m, d, &dec);
}

void manager_tick(Manager *m, uint64_t now) {
        double interval_ms = m->last_sample_usec ? (double) (now - m->last_sample_usec) / 1000.0 : 0;
        uint64_t start = now_usec(), cpu_start = cpu_nsec();
        size_t len = 0;
        int r;

        m->tick++;
        r = read_diskstats(m, &len);
        if (r < 0) {
                if (r != m->diskstats_error)
                        log_warning_errno(r, "Cannot read %s/diskstats, load is not sampled: %m", m->roots.proc);
                m->diskstats_error = r;
                return;
        }
        m->diskstats_error = 0;
        m->last_sample_usec = now;
        if (m->record)
                record_write_tick(m->record, now, m->tick);
        for (char *line = m->diskstats, *next; line < m->diskstats + len; line = next) {
                char *nl = strchr(line, '\n'), name[DISKSTAT_NAME_MAX];
                DiskStat st;
                Device *d;

                next = nl ? nl + 1 : m->diskstats + len;
                if (diskstat_parse_line(line, (size_t) (next - line), &st, name) < 0)
                        continue;
                d = device_table_get(&m->devices, makedev(st.major, st.minor));
                if (d && streq(d->name, name))
                        device_sample(m, d, &st, interval_ms);
        }
        if (m->record)
                record_end_tick(m->record);
        if (m->config.drift_checks_per_tick)
                manager_check_drift(m, m->config.drift_checks_per_tick);
        if (m->config.metrics_textfile_dir && m->tick % m->config.metrics_every_ticks == 0) {
                r = metrics_write_textfile(m, m->config.metrics_textfile_dir);
                if (r < 0)
                        log_warning_errno(r, "Cannot write metrics to %s, ignoring: %m", m->config.metrics_textfile_dir);
        }
        m->tick_cost_usec_total += now_usec() - start;
        m->tick_cpu_nsec_total += cpu_nsec() - cpu_start;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t next = usec + (uint64_t) m->config.tick_interval_ms * 1000, now = now_usec();

        manager_tick(m, now);
        /* keep the cadence, but never try to catch up on missed ticks */
        return sd_event_source_set_time(s, next > now ? next : now + (uint64_t) m->config.tick_interval_ms * 1000);
}

int manager_start_ticks(Manager *m) {
        uint64_t interval = (uint64_t) m->config.tick_interval_ms * 1000;
        int r;

        /* 5% slack lets the kernel coalesce wake-ups without blurring the rates */
        r = sd_event_add_time_relative(m->event, &m->tick_source, CLOCK_MONOTONIC, interval, interval / 20 ?: 1, on_tick, m);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(m->tick_source, SD_EVENT_ON);
}
