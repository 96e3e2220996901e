/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tick: one pass over /proc/diskstats for all devices, signals per
 * device, the dynamic state machine, then the flips it decided. The steady
 * state allocates nothing: the read buffer is reused, lines are parsed in
 * place, devices are found by dev_t. */
#include <fcntl.h>
#include <limits.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "device.h"
#include "drift.h"
#include "log.h"
#include "manager.h"
#include "record.h"
#include "sampler.h"
#include "util.h"

static uint64_t cpu_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/* dispatch_busy: max over the default-type hctxs. Poll hctxs come last. */
/* Each device warns once when its dispatch_busy becomes unreadable, and
 * once when it is back: one bad device must not warn every tick, nor a
 * good one hide it from status (m->dispatch_busy_error: any this tick). */
static double read_dispatch_busy(Manager *m, Device *d) {
        const char *name = device_name(d);
        DeviceFacts view;
        const DeviceFacts *f = device_facts(d, &view);
        unsigned n = f->hw_queues - f->poll_queues;
        double best = -1;

        for (unsigned i = 0; i < n; i++) {
                char path[PATH_MAX], buf[16];
                int r;

                r = hctx_path(path, sizeof(path), &m->roots, name, i, "dispatch_busy");
                if (r == 0)
                        r = sysfs_read(path, buf, sizeof(buf));
                if (r < 0) {
                        if (!device_busy_unreadable(d))
                                log_warning_errno(r, "%s: cannot read %s, dispatch_busy is unknown "
                                                  "(is debugfs mounted?): %m", name, path);
                        device_set_busy_unreadable(d, true);
                        m->dispatch_busy_error = r;
                        return -1;      /* no debugfs: the signal is unknown, not 0 */
                }
                if (atof(buf) > best)
                        best = atof(buf);
        }
        if (device_busy_unreadable(d))
                log_info("%s: dispatch_busy can be read again", name);
        device_set_busy_unreadable(d, false);
        return best;
}

/* Flips wait until the slice is read: a flip's pass (deciding it, and its
 * writes when the applier cannot start a thread) would otherwise delay
 * reading the devices after it, and inflate their rates. */
static int flips_push(Manager *m, const Device *d, const DynDecision *dec) {
        if (m->n_flips == m->flips_size) {
                size_t n = m->flips_size ? m->flips_size * 2 : 4;
                PendingFlip *f = reallocarray(m->flips, n, sizeof(PendingFlip));

                if (!f)
                        return -ENOMEM;
                m->flips = f;
                m->flips_size = n;
        }
        m->flips[m->n_flips++] = (PendingFlip) { .devnum = device_devnum(d), .dec = *dec };
        return 0;
}

/* The flips of a slice, at its end: in the dispatch that decided them, so
 * that no pause, reload or new disk under the number comes in between. A
 * flip may forget its device (gone while applying), never another one:
 * each is found again by number. */
static int flips_apply(Manager *m) {
        int r = 0;

        for (size_t i = 0; i < m->n_flips && r >= 0; i++) {
                Device *d = device_get(m, m->flips[i].devnum);

                if (d)
                        r = device_flip(m, d, &m->flips[i].dec);
        }
        m->n_flips = 0;
        return r;
}

/* One device's sample: its signals, then its dynamic step, whose flip
 * waits for the end of the pass. */
static int device_sample(Manager *m, Device *d, const DiskStat *st, const TickRead *t) {
        const Plan *plan = device_plan(d);
        const DynamicPolicy *dyn = plan->managed ? plan->dynamic : NULL;
        DeviceDynamic *y = device_dynamic(d);
        SampleState *s = device_sample_state(d);
        double busy = -1;
        DynDecision dec;
        Signals signals;

        if (dyn && y && dynamic_uses_signal(dyn, SIGNAL_DISPATCH_BUSY))
                busy = read_dispatch_busy(m, d);
        if (sample_state_update(s, st, sample_state_interval(s, t->interval_us, t->read_ms), busy, &signals) < 0)
                return -ENOMEM;
        s->read_ms = (uint16_t) t->read_ms;
        if (m->record)
                record_write_sample(m->record, device_name(d), st, busy);
        if (!dyn || !y || device_is_held(m, d))
                return 0;       /* paused or overridden: no flips */
        if (dynamic_step(dyn, &y->state, &signals, m->tick, &dec) < 0)
                return -ENOMEM;
        return dec.flip ? flips_push(m, d, &dec) : 0;
}

static int sample_line(Manager *m, const char *line, size_t len, const TickRead *t) {
        char name[DISKSTAT_NAME_MAX];
        DiskStat st;
        Device *d;

        if (diskstat_parse_line(line, len, &st, name) < 0)
                return 0;
        d = device_get(m, makedev(st.major, st.minor));
        return d && streq(device_name(d), name) ? device_sample(m, d, &st, t) : 0;
}

/* /proc/diskstats gives at most a page of whole lines per read() however
 * large the buffer (seq_file), so a buffer for the whole file (64 KiB at
 * 1000 devices, 640 KiB at 10,000) would only hold lines already parsed.
 * Each chunk is parsed as it comes; a line cut at its end (a regular file,
 * as in the tests' fixture trees) moves to the front for the next read. */
#define DISKSTATS_CHUNK 8192

/* The kernel makes /proc/diskstats walking every disk for each page it
 * gives: at 10,000 disks one tick's read took 50-76 ms of kernel time,
 * the longest the event loop was held during a storm of new disks. A
 * tick reads for at most this long per dispatch of the loop, then lets the
 * socket, uevents and the applier have their turn. */
#define TICK_SLICE_USEC 2000

/* Ends a tick's read (a Manager's TickRead is zeroed, fd 0, before its
 * first: only an active one holds a file). */
static void tick_read_done(TickRead *t) {
        if (t->active)
                closep(&t->fd);
        *t = (TickRead) { .fd = -1 };
}

/* Parses what one read() gave; 1 at the end of the file, 0 to go on,
 * -ENOMEM. A failed read ends the file with t->read_error set. */
static int tick_read_chunk(Manager *m, TickRead *t) {
        char *buf = m->diskstats, *p = buf, *end, *nl;
        ssize_t k = sysfs_read_chunk(m->diskstats_path, t->fd, buf + t->kept, DISKSTATS_CHUNK - t->kept);
        int r = 0;

        if (k < 0) {
                t->read_error = (int) k;        /* the file's error, not the daemon's */
                return 1;
        }
        end = buf + t->kept + k;
        for (; (nl = memchr(p, '\n', (size_t) (end - p))) && r >= 0; p = nl + 1) {
                if (!t->skipping)
                        r = sample_line(m, p, (size_t) (nl + 1 - p), t);
                t->skipping = false;
        }
        if (r < 0)
                return r;
        t->kept = (size_t) (end - p);
        if (k == 0) {                   /* the last line may have no newline */
                r = t->kept && !t->skipping ? sample_line(m, p, t->kept, t) : 0;
                return r < 0 ? r : 1;
        }
        if (t->kept == DISKSTATS_CHUNK) {
                t->skipping = true;
                t->kept = 0;
        }
        memmove(buf, p, t->kept);
        return 0;
}

/* A device is read when its slice comes, and its rates are over the time
 * since it was read last (sample_state_interval()), however the loop's
 * work spreads the read. Only a read that would meet the next tick is
 * ended at once, whoever waits: after an interval, or a minute (read_ms). */
#define TICK_SPREAD_MAX_USEC (60 * 1000000ULL)

static uint64_t tick_spread_max_usec(const Manager *m) {
        uint64_t interval = (uint64_t) m->config.tick_interval_ms * 1000;

        return interval < TICK_SPREAD_MAX_USEC ? interval : TICK_SPREAD_MAX_USEC;
}

/* Reads for one slice; the whole file with --record (whose tick is one
 * block of the recording) or once the tick has spread too far. 1 when the
 * file is read, 0 to go on, -ENOMEM. */
static int tick_read_slice(Manager *m, TickRead *t) {
        uint64_t now = clock_usec(CLOCK_MONOTONIC), until = now + TICK_SLICE_USEC;
        bool whole = m->record || now - t->now >= tick_spread_max_usec(m);
        int r;

        t->read_ms = m->record ? 0 : (unsigned) ((now - t->now) / 1000);
        do
                r = tick_read_chunk(m, t);
        while (r == 0 && (whole || clock_usec(CLOCK_MONOTONIC) < until));
        return r;
}

/* Opens the tick's read. -ENOMEM only; an open that fails is the tick's
 * read error (the tick ends at once). */
static int tick_begin(Manager *m, uint64_t now) {
        TickRead *t = &m->tick_read;

        m->tick++;
        m->dispatch_busy_error = 0;     /* set again by any device that cannot read it this tick */
        if (!m->diskstats && !(m->diskstats = malloc(DISKSTATS_CHUNK)))
                return -ENOMEM;
        if (!m->diskstats_path && asprintf(&m->diskstats_path, "%s/diskstats", m->roots.proc) < 0) {
                m->diskstats_path = NULL;
                return -ENOMEM;
        }
        *t = (TickRead) { .active = true, .now = now,
                          .interval_us = m->last_sample_usec ? now - m->last_sample_usec : 0 };
        t->fd = sysfs_open_read(m->diskstats_path);
        if (t->fd < 0)
                t->read_error = t->fd;
        else if (m->record)
                record_write_tick(m->record, now, m->tick);
        return 0;
}

/* The file is read (or failed): 1 when sampled, 0 when the read failed
 * (said once per new error, and the tick's other steps wait for a good
 * one). */
static int tick_sampled(Manager *m, TickRead *t) {
        if (m->record && t->fd >= 0)
                record_end_tick(m->record);
        if (t->read_error < 0) {
                if (t->read_error != m->diskstats_error)
                        log_warning_errno(t->read_error, "Cannot read %s/diskstats, load is not sampled: %m",
                                          m->roots.proc);
                m->diskstats_error = t->read_error;
                return 0;
        }
        m->diskstats_error = 0;
        m->last_sample_usec = t->now;
        return 1;
}

/* After the read: drift → the front's (the metrics textfile). */
static int tick_end(Manager *m) {
        int sampled = tick_sampled(m, &m->tick_read), r = 0;

        tick_read_done(&m->tick_read);
        if (sampled)
                r = drift_check(m, m->config.drift_checks_per_tick);
        if (r >= 0 && sampled)
                r = manager_front_ticked(m);
        return r;
}

/* The next slice as a timer due now, not a defer source: the loop asks
 * the kernel for the socket's and the uevents' news before a due timer's
 * dispatch, and never while a defer source is on (one would starve them). */
static int tick_more(Manager *m) {
        int r = sd_event_source_set_time(m->tick_more, clock_usec(CLOCK_MONOTONIC));

        return r < 0 ? r : sd_event_source_set_enabled(m->tick_more, SD_EVENT_ONESHOT);
}

/* The tick, as a pipeline: sample (each device's signals and dynamic
 * step, a slice of /proc/diskstats per dispatch) → the slice's flips (a
 * flip's write is the applier's: the devices read after it are not held
 * up) → drift → metrics. begin: a new tick; else the next slice of the
 * running one.
 * Returns 0, or -ENOMEM. noinline: bench/scale.py has callgrind count
 * from this symbol. */
static __attribute__((noinline)) int sampler_tick(Manager *m, uint64_t now, bool begin) {
        uint64_t start = clock_usec(CLOCK_MONOTONIC), cpu_start = cpu_nsec();
        int r = 0;

        if (begin)
                r = tick_begin(m, now);
        if (r >= 0 && m->tick_read.active) {
                TickRead *t = &m->tick_read;

                int k = t->fd >= 0 ? tick_read_slice(m, t) : 1;

                r = k < 0 ? k : flips_apply(m);
                if (r >= 0)
                        r = k == 0 ? tick_more(m) : tick_end(m);
        }
        m->tick_cost_usec_total += clock_usec(CLOCK_MONOTONIC) - start;
        m->tick_cpu_nsec_total += cpu_nsec() - cpu_start;
        return r < 0 ? r : 0;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t next = usec + (uint64_t) m->config.tick_interval_ms * 1000, now = clock_usec(CLOCK_MONOTONIC);
        int r = 0;

        /* a tick still reading (10,000 disks at a 10 ms tick) is not
         * started again: its rates would be over a part of an interval */
        if (!m->tick_read.active)
                r = sampler_tick(m, now, true);
        if (r < 0)
                return manager_fatal(m, r);
        /* keep the cadence, but never try to catch up on missed ticks */
        return sd_event_source_set_time(s, next > now ? next : now + (uint64_t) m->config.tick_interval_ms * 1000);
}

/* The next slice of a tick's read. */
static int on_tick_more(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Manager *m = userdata;
        int r = sampler_tick(m, 0, false);

        return r < 0 ? manager_fatal(m, r) : 0;
}

void sampler_stop(Manager *m) {
        /* a recording ends with whole ticks, even one cut short by an error */
        if (m->tick_read.active && m->tick_read.fd >= 0 && m->record)
                record_end_tick(m->record);
        tick_read_done(&m->tick_read);
        m->diskstats_path = mfree(m->diskstats_path);
        m->tick_more = sd_event_source_disable_unref(m->tick_more);
        m->tick_source = sd_event_source_disable_unref(m->tick_source);
}

int sampler_start(Manager *m) {
        uint64_t interval = (uint64_t) m->config.tick_interval_ms * 1000;
        int r;

        r = sd_event_add_time(m->event, &m->tick_more, CLOCK_MONOTONIC, UINT64_MAX, 1, on_tick_more, m);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(m->tick_more, SD_EVENT_OFF);
        if (r < 0)
                return r;
        /* 5% slack lets the kernel coalesce wake-ups without blurring the rates */
        r = sd_event_add_time_relative(m->event, &m->tick_source, CLOCK_MONOTONIC, interval, interval / 20 ?: 1, on_tick, m);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(m->tick_source, SD_EVENT_ON);
}
