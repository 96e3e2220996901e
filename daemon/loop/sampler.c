/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tick: one pass over /proc/diskstats for all devices, signals per
 * device, the dynamic state machine, then the flips it decided. The steady
 * state allocates nothing: the read buffer is reused, lines are parsed in
 * place, devices are found by dev_t. */
#include <fcntl.h>
#include <limits.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "config.h"
#include "device-trial.h"
#include "device.h"
#include "drift.h"
#include "log.h"
#include "record.h"
#include "sampler.h"
#include "util.h"

/* A tick's read of /proc/diskstats, across dispatches. */
typedef struct TickRead {
        bool active;                    /* between the tick's start and its end */
        bool skipping;                  /* in a line longer than the buffer: not diskstats */
        int fd;
        int read_error;
        uint64_t now, interval_us;      /* of the tick: from the last read's start to this one's */
        unsigned read_ms;               /* how far into the read this slice started (SampleState.read_ms) */
        size_t kept;                    /* bytes of a cut line at the front of the buffer */
        bool drifting;                  /* the file is read: the drift check's slices */
        bool sampled;                   /* the read was good */
        unsigned drift_left;            /* devices still to read back this tick */
} TickRead;

/* A flip, from dynamic_step()'s decision to the end of its pass: pending
 * while its slice is read, then running while its pass is in the
 * applier, until the device's next pass comes back (sampler_pass_back()).
 * One a device: a new flip replaces the one still running. */
typedef struct SamplerFlip {
        dev_t devnum;
        DynDecision dec;
} SamplerFlip;

typedef struct FlipList {
        SamplerFlip *v;
        size_t n, size;
} FlipList;

struct Sampler {
        DeviceContext *devices;         /* the devices sampled, and the config, roots and loop */
        uint64_t start_usec;            /* the daemon's start, for the flips' uptime */
        sd_event_source *tick_source;
        sd_event_source *tick_more;     /* the next slice of a tick's read */
        TickRead read;                  /* the tick's read in progress, if active */
        uint64_t last_sample_usec;      /* CLOCK_MONOTONIC of the last diskstats read */
        char *diskstats;                /* read buffer of DISKSTATS_CHUNK, reused */
        char *diskstats_path;           /* <proc>/diskstats */
        FlipList pending;               /* decided during this slice, applied at its end */
        FlipList running;               /* applied, their passes not back yet */
        /* devices whose trial switched arm in this slice: a pass each at its end */
        dev_t *trial_switches;
        size_t n_trial_switches, trial_switches_size;
        SamplerStats stats;
        Recorder *record;               /* --record */
};

static uint64_t cpu_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

/* dispatch_busy: max over the default-type hctxs. Poll hctxs come last. */
/* Each device warns once when its dispatch_busy becomes unreadable, and
 * once when it is back: one bad device must not warn every tick, nor a
 * good one hide it from status (dispatch_busy_error: any this tick). */
static double read_dispatch_busy(Sampler *s, Device *d) {
        const char *name = device_name(d);
        DeviceFacts view;
        const DeviceFacts *f = device_facts(d, &view);
        unsigned n = f->hw_queues - f->poll_queues;
        double best = -1;

        for (unsigned i = 0; i < n; i++) {
                char path[PATH_MAX], buf[16];
                int r;

                r = hctx_path(path, sizeof(path), s->devices->roots, name, i, "dispatch_busy");
                if (r == 0)
                        r = sysfs_read(path, buf, sizeof(buf));
                if (r < 0) {
                        if (!device_busy_unreadable(d))
                                log_warning_errno(r, "%s: cannot read %s, dispatch_busy is unknown "
                                                  "(is debugfs mounted?): %m", name, path);
                        device_set_busy_unreadable(d, true);
                        s->stats.dispatch_busy_error = r;
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

static int flips_reserve(FlipList *l) {
        size_t n = l->size ? l->size * 2 : 4;
        SamplerFlip *f;

        if (l->n < l->size)
                return 0;
        f = reallocarray(l->v, n, sizeof(SamplerFlip));
        if (!f)
                return -ENOMEM;
        l->v = f;
        l->size = n;
        return 0;
}

static SamplerFlip *flips_find(FlipList *l, dev_t devnum) {
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i].devnum == devnum)
                        return &l->v[i];
        return NULL;
}

static void flips_remove(FlipList *l, dev_t devnum) {
        SamplerFlip *f = flips_find(l, devnum);

        if (f)
                *f = l->v[--l->n];
}

/* Flips wait until the slice is read: a flip's pass (deciding it, and its
 * writes when the applier cannot start a thread) would otherwise delay
 * reading the devices after it, and inflate their rates. */
static int flips_push(FlipList *l, dev_t devnum, const DynDecision *dec) {
        if (flips_reserve(l) < 0)
                return -ENOMEM;
        l->v[l->n++] = (SamplerFlip) { .devnum = devnum, .dec = *dec };
        return 0;
}

/* The flip's pass is done: what it cost goes to d's ring of flips. */
static void flip_done(Sampler *s, Device *d, const DynDecision *dec, double ms) {
        uint64_t uptime = clock_usec(CLOCK_MONOTONIC) - s->start_usec;

        device_flip_applied(d, dec, s->stats.ticks, uptime, ms);
        s->stats.flips_total++;
}

/* A flip's pass, and what it cost when it is done on the loop; one in the
 * applier is done when the device's pass is back. */
static int flip_start(Sampler *s, Device *d, const SamplerFlip *f) {
        uint64_t start = clock_usec(CLOCK_MONOTONIC);
        int r;

        flips_remove(&s->running, f->devnum);   /* the new flip replaces it */
        if (flips_reserve(&s->running) < 0)
                return -ENOMEM;
        r = device_flip(s->devices, d, &f->dec);
        if (r == DEVICE_FLIP_RUNNING)
                return flips_push(&s->running, f->devnum, &f->dec);
        if (r == DEVICE_FLIP_DONE)
                flip_done(s, d, &f->dec, (double) (clock_usec(CLOCK_MONOTONIC) - start) / 1000.0);
        return r < 0 ? r : 0;
}

/* The flips of a slice, at its end: in the dispatch that decided them, so
 * that no pause, reload or new disk under the number comes in between. A
 * flip may forget its device (gone while applying), never another one:
 * each is found again by number. */
static int flips_apply(Sampler *s) {
        int r = 0;

        for (size_t i = 0; i < s->pending.n && r >= 0; i++) {
                Device *d = device_get(s->devices, s->pending.v[i].devnum);

                if (d)
                        r = flip_start(s, d, &s->pending.v[i]);
        }
        s->pending.n = 0;
        return r;
}

static int trial_switch_push(Sampler *s, dev_t devnum) {
        if (array_grow((void **) &s->trial_switches, &s->trial_switches_size, s->n_trial_switches,
                       sizeof(dev_t)) < 0)
                return -ENOMEM;
        s->trial_switches[s->n_trial_switches++] = devnum;
        return 0;
}

/* The trials' switches of a slice, at its end as the flips are: a pass
 * each, which decides with the arm now in force and writes it through the
 * records. */
static int trial_switches_apply(Sampler *s) {
        int r = 0;

        for (size_t i = 0; i < s->n_trial_switches && r >= 0; i++) {
                Device *d = device_get(s->devices, s->trial_switches[i]);

                if (d)
                        r = device_process(s->devices, d);
        }
        s->n_trial_switches = 0;
        return r;
}

void sampler_pass_back(Sampler *s, dev_t devnum, bool pass, double ms) {
        SamplerFlip *f = s->running.n ? flips_find(&s->running, devnum) : NULL;
        Device *d;

        if (!f)
                return;
        d = device_get(s->devices, devnum);
        if (!d)
                flips_remove(&s->running, devnum);      /* gone: the flip with it */
        else if (pass) {
                flip_done(s, d, &f->dec, ms);
                flips_remove(&s->running, devnum);
        }
}

/* One device's sample: its signals, then its dynamic step, whose flip
 * waits for the end of the pass. */
static int device_sample(Sampler *s, Device *d, const DiskStat *st, const TickRead *t) {
        const Plan *plan = device_plan(d);
        const DynamicPolicy *dyn = plan->managed ? plan->dynamic : NULL;
        bool dynamic = dyn && device_dynamic(d);
        double busy = -1;
        unsigned capped;
        DynDecision dec;
        Signals signals;

        if (dynamic && dynamic_uses_signal(dyn, SIGNAL_DISPATCH_BUSY))
                busy = read_dispatch_busy(s, d);
        if (device_sample_update(d, st, t->interval_us, t->read_ms, busy, &signals) < 0)
                return -ENOMEM;
        if (s->record)
                record_write_sample(s->record, device_name(d), st, busy);
        /* a trial's window is measured from the same sample */
        if (device_trial(d) && device_trial_step(s->devices, d, st, t->now / 1000) > 0 &&
            trial_switch_push(s, device_devnum(d)) < 0)
                return -ENOMEM;
        if (!dynamic || device_is_held(s->devices, d))
                return 0;       /* paused or overridden: no flips */
        capped = dyn_state_capped(&device_dynamic(d)->state);
        if (device_dynamic_step(d, &signals, s->stats.ticks, &dec) < 0)
                return -ENOMEM;
        s->stats.flips_capped_total += dyn_state_capped(&device_dynamic(d)->state) - capped;
        return dec.flip ? flips_push(&s->pending, device_devnum(d), &dec) : 0;
}

static int sample_line(Sampler *s, const char *line, size_t len, const TickRead *t) {
        char name[DISKSTAT_NAME_MAX];
        DiskStat st;
        Device *d;

        if (diskstat_parse_line(line, len, &st, name) < 0)
                return 0;
        d = device_get(s->devices, makedev(st.major, st.minor));
        return d && streq(device_name(d), name) ? device_sample(s, d, &st, t) : 0;
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

/* Ends a tick's read (a Sampler's TickRead is zeroed, fd 0, before its
 * first: only an active one holds a file). */
static void tick_read_done(TickRead *t) {
        if (t->active)
                closep(&t->fd);
        *t = (TickRead) { .fd = -1 };
}

/* Parses what one read() gave; 1 at the end of the file, 0 to go on,
 * -ENOMEM. A failed read ends the file with t->read_error set. */
static int tick_read_chunk(Sampler *s, TickRead *t) {
        char *buf = s->diskstats, *p = buf, *end, *nl;
        ssize_t k = sysfs_read_chunk(s->diskstats_path, t->fd, buf + t->kept, DISKSTATS_CHUNK - t->kept);
        int r = 0;

        if (k < 0) {
                t->read_error = (int) k;        /* the file's error, not the daemon's */
                return 1;
        }
        end = buf + t->kept + k;
        for (; (nl = memchr(p, '\n', (size_t) (end - p))) && r >= 0; p = nl + 1) {
                if (!t->skipping)
                        r = sample_line(s, p, (size_t) (nl + 1 - p), t);
                t->skipping = false;
        }
        if (r < 0)
                return r;
        t->kept = (size_t) (end - p);
        if (k == 0) {                   /* the last line may have no newline */
                r = t->kept && !t->skipping ? sample_line(s, p, t->kept, t) : 0;
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

static uint64_t tick_spread_max_usec(const Config *config) {
        uint64_t interval = (uint64_t) config->tick_interval_ms * 1000;

        return interval < TICK_SPREAD_MAX_USEC ? interval : TICK_SPREAD_MAX_USEC;
}

/* Reads until the slice's end; the whole file with --record (whose tick is
 * one block of the recording) or once the tick has spread too far. 1 when
 * the file is read, 0 to go on, -ENOMEM. */
static int tick_read_slice(Sampler *s, TickRead *t, uint64_t until) {
        uint64_t now = clock_usec(CLOCK_MONOTONIC);
        bool whole = s->record || now - t->now >= tick_spread_max_usec(s->devices->config);
        int r;

        t->read_ms = s->record ? 0 : (unsigned) ((now - t->now) / 1000);
        do
                r = tick_read_chunk(s, t);
        while (r == 0 && (whole || clock_usec(CLOCK_MONOTONIC) < until));
        return r;
}

/* Opens the tick's read. -ENOMEM only; an open that fails is the tick's
 * read error (the tick ends at once). */
static int tick_begin(Sampler *s, uint64_t now) {
        TickRead *t = &s->read;

        s->stats.ticks++;
        s->stats.dispatch_busy_error = 0;       /* set again by any device that cannot read it this tick */
        if (!s->diskstats && !(s->diskstats = malloc(DISKSTATS_CHUNK)))
                return -ENOMEM;
        if (!s->diskstats_path && asprintf(&s->diskstats_path, "%s/diskstats", s->devices->roots->proc) < 0) {
                s->diskstats_path = NULL;
                return -ENOMEM;
        }
        *t = (TickRead) { .active = true, .now = now,
                          .interval_us = s->last_sample_usec ? now - s->last_sample_usec : 0 };
        t->fd = sysfs_open_read(s->diskstats_path);
        if (t->fd < 0)
                t->read_error = t->fd;
        else if (s->record)
                record_write_tick(s->record, now, s->stats.ticks);
        return 0;
}

/* The file is read (or failed): 1 when sampled, 0 when the read failed
 * (said once per new error, and the tick's other steps wait for a good
 * one). */
static int tick_sampled(Sampler *s, TickRead *t) {
        if (s->record && t->fd >= 0)
                record_end_tick(s->record);
        if (t->read_error < 0) {
                if (t->read_error != s->stats.diskstats_error)
                        log_warning_errno(t->read_error, "Cannot read %s/diskstats, load is not sampled: %m",
                                          s->devices->roots->proc);
                s->stats.diskstats_error = t->read_error;
                return 0;
        }
        s->stats.diskstats_error = 0;
        s->last_sample_usec = t->now;
        return 1;
}

/* The file is read: the drift check's share of this tick, if it sampled
 * (the sweep waits for a good read, as the tick's other steps do). */
static void tick_read_end(Sampler *s, TickRead *t) {
        t->sampled = tick_sampled(s, t) > 0;
        closep(&t->fd);
        t->fd = -1;             /* tick_read_done() closes nothing more */
        t->drifting = true;
        t->drift_left = t->sampled ? config_drift_checks(s->devices->config, s->devices->devices.n_devices) : 0;
        s->stats.drift_per_tick = t->drift_left;
}

/* Reads back devices until the slice's end: 1 when the tick's share is
 * done, 0 to go on in the next slice, -ENOMEM. */
static int tick_drift_slice(Sampler *s, TickRead *t, uint64_t until) {
        int k = t->drift_left ? drift_check(s->devices, t->drift_left, until) : 0;

        if (k < 0)
                return k;
        s->stats.drift_checked += (unsigned) k;
        /* none read: no device left to read (all gone since the share was set) */
        t->drift_left = k == 0 ? 0 : t->drift_left - (unsigned) k;
        return t->drift_left == 0;
}

/* After the drift check. The metrics textfile (control/) sees the tick in
 * sampler_stats() after this dispatch: the tick calls nothing above it. */
static void tick_end(Sampler *s) {
        if (s->read.sampled) {
                s->stats.sampled_tick = s->stats.ticks;
                s->stats.sampled_realtime_usec = clock_usec(CLOCK_REALTIME);
        }
        tick_read_done(&s->read);
}

/* The next slice as a timer due now, not a defer source: the loop asks
 * the kernel for the socket's and the uevents' news before a due timer's
 * dispatch, and never while a defer source is on (one would starve them). */
static int tick_more(Sampler *s) {
        int r = sd_event_source_set_time(s->tick_more, clock_usec(CLOCK_MONOTONIC));

        return r < 0 ? r : sd_event_source_set_enabled(s->tick_more, SD_EVENT_ONESHOT);
}

/* One dispatch's slice of the tick: the file's read, then the drift
 * check. 1 when the tick is over, 0 to go on, -ENOMEM. */
static int tick_slice(Sampler *s, TickRead *t, uint64_t until) {
        int k = 1, r;

        if (!t->drifting) {
                k = t->fd >= 0 ? tick_read_slice(s, t, until) : 1;
                r = k < 0 ? k : flips_apply(s);
                if (r >= 0)
                        r = trial_switches_apply(s);
                if (r < 0)
                        return r;
                if (k == 0)
                        return 0;
                tick_read_end(s, t);
        }
        return tick_drift_slice(s, t, until);
}

/* The tick, as a pipeline: sample (each device's signals and dynamic
 * step, a slice of /proc/diskstats per dispatch) → the slice's flips (a
 * flip's write is the applier's: the devices read after it are not held
 * up) → drift (the tick's share of the sweep, in slices too) → metrics.
 * begin: a new tick; else the next slice of the running one.
 * Returns 0, or -ENOMEM. noinline: bench/scale.py has callgrind count
 * from this symbol. */
static __attribute__((noinline)) int sampler_tick(Sampler *s, uint64_t now, bool begin) {
        uint64_t start = clock_usec(CLOCK_MONOTONIC), cpu_start = cpu_nsec();
        int r = 0;

        if (begin)
                r = tick_begin(s, now);
        if (r >= 0 && s->read.active) {
                r = tick_slice(s, &s->read, start + TICK_SLICE_USEC);
                if (r == 0)
                        r = tick_more(s);
                else if (r > 0)
                        tick_end(s);
        }
        s->stats.cost_usec_total += clock_usec(CLOCK_MONOTONIC) - start;
        s->stats.cpu_nsec_total += cpu_nsec() - cpu_start;
        return r < 0 ? r : 0;
}

/* The one way out on -ENOMEM: the manager's (DeviceContext.fatal). */
static int sampler_fatal(Sampler *s, int r) {
        s->devices->fatal(s->devices->userdata, r);
        return r;
}

static int on_tick(sd_event_source *source, uint64_t usec, void *userdata) {
        Sampler *s = ASSERT_PTR(userdata);
        uint64_t interval = (uint64_t) s->devices->config->tick_interval_ms * 1000;
        uint64_t next = usec + interval, now = clock_usec(CLOCK_MONOTONIC);
        int r = 0;

        /* a tick still reading (10,000 disks at a 10 ms tick) or checking
         * its share of the drift sweep is not started again: its rates
         * would be over a part of an interval */
        if (!s->read.active)
                r = sampler_tick(s, now, true);
        if (r < 0)
                return sampler_fatal(s, r);
        /* keep the cadence, but never try to catch up on missed ticks */
        return sd_event_source_set_time(source, next > now ? next : now + interval);
}

/* The next slice of a tick's read. */
static int on_tick_more(sd_event_source *source _unused_, uint64_t usec _unused_, void *userdata) {
        Sampler *s = ASSERT_PTR(userdata);
        int r = sampler_tick(s, 0, false);

        return r < 0 ? sampler_fatal(s, r) : 0;
}

/* The tick's sources and a read in progress, gone. */
static void sampler_stop(Sampler *s) {
        /* a recording ends with whole ticks, even one cut short by an error */
        if (s->read.active && s->read.fd >= 0 && s->record)
                record_end_tick(s->record);
        tick_read_done(&s->read);
        s->diskstats_path = mfree(s->diskstats_path);
        s->tick_more = sd_event_source_disable_unref(s->tick_more);
        s->tick_source = sd_event_source_disable_unref(s->tick_source);
}

int sampler_new(DeviceContext *ctx, Sampler **ret) {
        Sampler *s = calloc(1, sizeof(Sampler));

        if (!s)
                return -ENOMEM;
        s->devices = ctx;
        *ret = s;
        return 0;
}

Sampler *sampler_free(Sampler *s) {
        if (!s)
                return NULL;
        sampler_stop(s);
        record_close(s->record);
        free(s->diskstats);
        free(s->pending.v);
        free(s->running.v);
        free(s->trial_switches);
        free(s);
        return NULL;
}

const SamplerStats *sampler_stats(const Sampler *s) {
        return &s->stats;
}

void sampler_set_recorder(Sampler *s, Recorder *r) {
        record_close(s->record);
        s->record = r;
}

void sampler_record_device(Sampler *s, const Device *d) {
        DeviceFacts view;

        if (s->record)
                record_write_device(s->record, device_facts(d, &view));
}

int sampler_start(Sampler *s, uint64_t start_usec) {
        uint64_t interval = (uint64_t) s->devices->config->tick_interval_ms * 1000;
        int r;

        s->start_usec = start_usec;
        r = sd_event_add_time(s->devices->event, &s->tick_more, CLOCK_MONOTONIC, UINT64_MAX, 1, on_tick_more, s);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(s->tick_more, SD_EVENT_OFF);
        if (r < 0)
                return r;
        /* 5% slack lets the kernel coalesce wake-ups without blurring the rates */
        r = sd_event_add_time_relative(s->devices->event, &s->tick_source, CLOCK_MONOTONIC, interval, interval / 20 ?: 1, on_tick, s);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(s->tick_source, SD_EVENT_ON);
}
