/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure parsers and arithmetic of the sampler; the reads happen in the
 * manager through sysfs.c. No allocation but a moving disk's deltas
 * (SampleDelta), once. */
#include "sample.h"
#include "util.h"

static const char *const signal_names[_SIGNAL_MAX] = {
        [SIGNAL_IOPS] = "iops",
        [SIGNAL_RIOPS] = "riops",
        [SIGNAL_WIOPS] = "wiops",
        [SIGNAL_MBPS] = "mbps",
        [SIGNAL_RMBPS] = "rmbps",
        [SIGNAL_WMBPS] = "wmbps",
        [SIGNAL_LAT_MS] = "lat_ms",
        [SIGNAL_RLAT_MS] = "rlat_ms",
        [SIGNAL_WLAT_MS] = "wlat_ms",
        [SIGNAL_UTIL] = "util",
        [SIGNAL_QDEPTH] = "qdepth",
        [SIGNAL_INFLIGHT] = "inflight",
        [SIGNAL_DISPATCH_BUSY] = "dispatch_busy",
        [SIGNAL_WPCT] = "wpct",
        [SIGNAL_RKB] = "rkb",
        [SIGNAL_WKB] = "wkb",
        [SIGNAL_MERGE_PCT] = "merge_pct",
};

DEFINE_STRING_TABLE(signal, SignalId, signal_names, _SIGNAL_MAX)

/* The field behind each signal: one table for signals_get() and
 * signals_set(), so a new signal cannot be read and not written. */
static float *signal_field(Signals *s, SignalId id) {
        switch (id) {
        case SIGNAL_IOPS: return &s->iops;
        case SIGNAL_RIOPS: return &s->riops;
        case SIGNAL_WIOPS: return &s->wiops;
        case SIGNAL_MBPS: return &s->mbps;
        case SIGNAL_RMBPS: return &s->rmbps;
        case SIGNAL_WMBPS: return &s->wmbps;
        case SIGNAL_LAT_MS: return &s->lat_ms;
        case SIGNAL_RLAT_MS: return &s->rlat_ms;
        case SIGNAL_WLAT_MS: return &s->wlat_ms;
        case SIGNAL_UTIL: return &s->util;
        case SIGNAL_QDEPTH: return &s->qdepth;
        case SIGNAL_INFLIGHT: return &s->inflight;
        case SIGNAL_DISPATCH_BUSY: return &s->dispatch_busy;
        case SIGNAL_WPCT: return &s->wpct;
        case SIGNAL_RKB: return &s->rkb;
        case SIGNAL_WKB: return &s->wkb;
        case SIGNAL_MERGE_PCT: return &s->merge_pct;
        default: return NULL;
        }
}

double signals_get(const Signals *s, SignalId id) {
        const float *f = signal_field((Signals *) s, id);
        return f ? *f : 0;
}

void signals_set(Signals *s, SignalId id, double v) {
        float *f = signal_field(s, id);
        if (f)
                *f = (float) v;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

static const char *skip_blanks(const char *s, const char *end) {
        while (s < end && is_blank(*s))
                s++;
        return s;
}

/* Scans one unsigned decimal that starts at s and ends at a blank, a
 * newline or the end; returns where it ends, NULL if it is not one. This
 * runs 20 times per device per tick: one pass, one compare per digit. */
static const char *scan_u64(const char *s, const char *end, uint64_t *ret) {
        const char *start = s;
        uint64_t v = 0;

        for (; s < end && (unsigned char) (*s - '0') < 10; s++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return NULL;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        if (s == start || (s < end && !is_blank(*s) && *s != '\n'))
                return NULL;
        *ret = v;
        return s;
}

static const char *scan_name(const char *s, const char *end, char *buf, size_t size) {
        size_t n = 0;

        while (s < end && !is_blank(*s) && *s != '\n') {
                if (n + 1 >= size)
                        return NULL;
                buf[n++] = *s++;
        }
        if (n == 0)
                return NULL;
        buf[n] = 0;
        return s;
}

/* The counters after the name, in one pass and without calls, since this
 * runs for every device on every tick; stores the first n_out of them.
 * Returns how many there are, at most max, or -EBADMSG. Written on top of
 * skip_blanks() and scan_u64(), even inlined, it costs 16% more
 * instructions on lines of zeros (idle devices, the common line). */
static int scan_counters(const char *p, const char *end, uint64_t *const out[], unsigned n_out, unsigned max) {
        uint64_t v = 0, ignored;
        unsigned n = 0;
        bool in = false;

        for (; p < end && *p != '\n'; p++) {
                unsigned d = (unsigned) (unsigned char) *p - '0';

                if (d < 10) {
                        if (v > (UINT64_MAX - 9) / 10)
                                return -EBADMSG;
                        v = v * 10 + d;
                        in = true;
                        continue;
                }
                if (!is_blank(*p))
                        return -EBADMSG;
                if (!in)
                        continue;
                if (n >= max)
                        return -EBADMSG;
                *(n < n_out ? out[n] : &ignored) = v;
                n++;
                v = 0;
                in = false;
        }
        if (in) {
                if (n >= max)
                        return -EBADMSG;
                *(n < n_out ? out[n] : &ignored) = v;
                n++;
        }
        return (int) n;
}

int diskstat_parse_line(const char *line, size_t len, DiskStat *ret, char name[DISKSTAT_NAME_MAX]) {
        uint64_t *const counters[] = {
                &ret->c.rd_ios, &ret->c.rd_merges, &ret->c.rd_sectors, &ret->c.rd_ticks,
                &ret->c.wr_ios, &ret->c.wr_merges, &ret->c.wr_sectors, &ret->c.wr_ticks,
                &ret->in_flight, &ret->c.io_ticks, &ret->c.time_in_queue,
        };
        const char *p = line, *end = line + len;
        uint64_t major, minor;
        int n;

        if (!(p = scan_u64(skip_blanks(p, end), end, &major)) ||
            !(p = scan_u64(skip_blanks(p, end), end, &minor)) ||
            !(p = scan_name(skip_blanks(p, end), end, name, DISKSTAT_NAME_MAX)) ||
            major > UINT32_MAX || minor > UINT32_MAX)
                return -EBADMSG;
        *ret = (DiskStat) { .major = (unsigned) major, .minor = (unsigned) minor };
        /* 11, 15 or 17 counters; the discard and flush ones after the first
         * 11 are checked, not kept */
        n = scan_counters(p, end, counters, ELEMENTSOF(counters), 17);
        if (n < 0)
                return n;
        ret->n_fields = (unsigned) n + 3;
        return ret->n_fields == 14 || ret->n_fields == 18 || ret->n_fields == 20 ? 0 : -EBADMSG;
}

bool disk_counters_backwards(const DiskCounters *a, const DiskCounters *b) {
        return b->rd_ios < a->rd_ios || b->wr_ios < a->wr_ios || b->rd_sectors < a->rd_sectors ||
               b->wr_sectors < a->wr_sectors || b->rd_ticks < a->rd_ticks || b->wr_ticks < a->wr_ticks ||
               b->io_ticks < a->io_ticks || b->time_in_queue < a->time_in_queue ||
               b->rd_merges < a->rd_merges || b->wr_merges < a->wr_merges;
}

/* a / b, or SIGNAL_UNKNOWN when b is 0: the tick had none of the I/O the
 * ratio is about, and 0 would be a value it did not see */
static double ratio_or_unknown(double a, double b) {
        return b > 0 ? a / b : SIGNAL_UNKNOWN;
}

/* One tick's counter deltas and what else its signals are made of: the
 * one input of signals_from_delta(), for signals_compute() and for a
 * SampleState. Not kept: a working value. */
typedef struct TickDelta {
        bool valid;             /* false: no previous sample, no interval, or a counter went backwards */
        double interval_ms;
        uint64_t rd_ios, wr_ios, merges, rd_sectors, wr_sectors;
        uint64_t rd_ticks, wr_ticks, io_ticks, time_in_queue;
        double in_flight;
        double dispatch_busy;   /* the debugfs value read this tick, -1 if not read */
} TickDelta;

/* The mix of the tick's I/O, from counter deltas (they did not go back). */
static void signals_mix(const TickDelta *d, Signals *ret) {
        double rd = (double) d->rd_ios, wr = (double) d->wr_ios, merges = (double) d->merges;

        ret->wpct = ratio_or_unknown(wr * 100.0, rd + wr);
        /* sectors are 512 bytes whatever the device's block size */
        ret->rkb = ratio_or_unknown((double) d->rd_sectors / 2.0, rd);
        ret->wkb = ratio_or_unknown((double) d->wr_sectors / 2.0, wr);
        ret->merge_pct = ratio_or_unknown(merges * 100.0, merges + rd + wr);
}

/* Pure: the signals of one tick. */
static void signals_from_delta(const TickDelta *d, Signals *ret) {
        double sec = d->interval_ms / 1000.0, rd, wr;

        *ret = (Signals) {
                .dispatch_busy = SIGNAL_UNKNOWN,
                .wpct = SIGNAL_UNKNOWN,
                .rkb = SIGNAL_UNKNOWN,
                .wkb = SIGNAL_UNKNOWN,
                .merge_pct = SIGNAL_UNKNOWN,
        };
        if (!d->valid)
                return;
        rd = (double) d->rd_ios;
        wr = (double) d->wr_ios;
        ret->valid = true;
        ret->riops = rd / sec;
        ret->wiops = wr / sec;
        ret->iops = ret->riops + ret->wiops;
        ret->rmbps = (double) d->rd_sectors * 512.0 / 1e6 / sec;
        ret->wmbps = (double) d->wr_sectors * 512.0 / 1e6 / sec;
        ret->mbps = ret->rmbps + ret->wmbps;
        ret->rlat_ms = rd > 0 ? (double) d->rd_ticks / rd : 0;
        ret->wlat_ms = wr > 0 ? (double) d->wr_ticks / wr : 0;
        ret->lat_ms = rd + wr > 0 ? (double) (d->rd_ticks + d->wr_ticks) / (rd + wr) : 0;
        ret->util = (double) d->io_ticks / d->interval_ms * 100.0;
        if (ret->util > 100.0)
                ret->util = 100.0;      /* io_ticks is updated at jiffy granularity */
        ret->qdepth = (double) d->time_in_queue / d->interval_ms;
        ret->inflight = d->in_flight;
        if (d->dispatch_busy >= 0)
                ret->dispatch_busy = rd + wr > 0 ? d->dispatch_busy : 0;
        signals_mix(d, ret);
}

/* The idle tick, as most devices' are most of the time: nothing moved
 * that a signal divides or is made of. The merges are compared too: a
 * request can take merges in a tick and complete in a later one, and
 * merge_pct counts them (100%). Its signals are those of deltas of 0
 * (rates 0, the mix unknown), whatever the sectors or the read and write
 * times did. */
static bool tick_idle(const DiskCounters *prev, const DiskCounters *now) {
        return prev->rd_ios == now->rd_ios && prev->wr_ios == now->wr_ios && prev->io_ticks == now->io_ticks &&
               prev->time_in_queue == now->time_in_queue && prev->rd_merges == now->rd_merges &&
               prev->wr_merges == now->wr_merges;
}

/* prev and now as they are kept, in the widths of a SampleState or in
 * full: the deltas of a tick, or !valid. */
static void delta_of(const DiskCounters *prev, const DiskCounters *now, double interval_ms, uint64_t in_flight,
                     double dispatch_busy, TickDelta *ret) {
        *ret = (TickDelta) { .interval_ms = interval_ms, .in_flight = (double) in_flight,
                             .dispatch_busy = dispatch_busy };
        /* A counter that went backwards wrapped (32-bit kernels, or a
         * 32-bit field) or the device was replaced under the same number:
         * this tick tells nothing. */
        if (!prev || interval_ms <= 0)
                return;
        if (tick_idle(prev, now)) {
                ret->valid = true;
                return;
        }
        if (disk_counters_backwards(prev, now))
                return;
        *ret = (TickDelta) {
                .valid = true,
                .interval_ms = interval_ms,
                .rd_ios = now->rd_ios - prev->rd_ios,
                .wr_ios = now->wr_ios - prev->wr_ios,
                .merges = now->rd_merges - prev->rd_merges + now->wr_merges - prev->wr_merges,
                .rd_sectors = now->rd_sectors - prev->rd_sectors,
                .wr_sectors = now->wr_sectors - prev->wr_sectors,
                .rd_ticks = now->rd_ticks - prev->rd_ticks,
                .wr_ticks = now->wr_ticks - prev->wr_ticks,
                .io_ticks = now->io_ticks - prev->io_ticks,
                .time_in_queue = now->time_in_queue - prev->time_in_queue,
                .in_flight = (double) in_flight,
                .dispatch_busy = dispatch_busy,
        };
}

void signals_compute(const DiskCounters *prev, const DiskStat *now, double interval_ms, double dispatch_busy,
                     Signals *ret) {
        TickDelta d;

        delta_of(prev, &now->c, interval_ms, now->in_flight, dispatch_busy, &d);
        signals_from_delta(&d, ret);
}

/* A sample in the widths a SampleState keeps. */
static DiskCounters counters_kept(const DiskCounters *c) {
        return (DiskCounters) {
                .rd_ios = c->rd_ios & COUNTER48_MASK,
                .rd_merges = c->rd_merges & COUNTER48_MASK,
                .rd_sectors = c->rd_sectors & COUNTER48_MASK,
                .rd_ticks = (uint32_t) c->rd_ticks,
                .wr_ios = c->wr_ios & COUNTER48_MASK,
                .wr_merges = c->wr_merges & COUNTER48_MASK,
                .wr_sectors = c->wr_sectors & COUNTER48_MASK,
                .wr_ticks = (uint32_t) c->wr_ticks,
                .io_ticks = (uint32_t) c->io_ticks,
                .time_in_queue = (uint32_t) c->time_in_queue,
        };
}

static DiskCounters sample_state_last(const SampleState *s) {
        return (DiskCounters) {
                .rd_ios = counter48_get(s->rd_ios),
                .rd_merges = counter48_get(s->rd_merges),
                .rd_sectors = counter48_get(s->rd_sectors),
                .rd_ticks = s->rd_ticks,
                .wr_ios = counter48_get(s->wr_ios),
                .wr_merges = counter48_get(s->wr_merges),
                .wr_sectors = counter48_get(s->wr_sectors),
                .wr_ticks = s->wr_ticks,
                .io_ticks = s->io_ticks,
                .time_in_queue = s->time_in_queue,
        };
}

uint64_t sample_state_interval(const SampleState *s, uint64_t tick_interval_us, unsigned read_ms) {
        uint64_t then_us = (uint64_t) s->read_ms * 1000, now_us = (uint64_t) read_ms * 1000;

        if (!tick_interval_us || !s->have_last)
                return tick_interval_us;
        /* never 0 or below: the last read's start is before this one's, and
         * a device read later in it than in this one is over a shorter time */
        return tick_interval_us + now_us > then_us ? tick_interval_us + now_us - then_us : 1;
}

/* Nothing to keep of the tick: no counter moved (or the tick tells
 * nothing), nothing in flight, dispatch_busy not read. */
static bool tick_still(const TickDelta *d) {
        return !d->rd_ios && !d->wr_ios && !d->merges && !d->rd_sectors && !d->wr_sectors && !d->rd_ticks &&
               !d->wr_ticks && !d->io_ticks && !d->time_in_queue && d->in_flight == 0 && d->dispatch_busy < 0;
}

void sample_state_done(SampleState *s) {
        if (s)
                s->delta = mfree(s->delta);
}

int sample_state_update(SampleState *s, const DiskStat *now, uint64_t interval_us, double dispatch_busy,
                        Signals *ret) {
        DiskCounters prev = sample_state_last(s), kept = counters_kept(&now->c);
        SampleDelta *x = s->delta;
        TickDelta d;

        /* µs in 48 bits: 8.9 years */
        if (interval_us > COUNTER48_MASK)
                interval_us = COUNTER48_MASK;
        delta_of(s->have_last ? &prev : NULL, &kept, (double) interval_us / 1000.0, now->in_flight, dispatch_busy,
                 &d);
        signals_from_delta(&d, ret);
        if (!x && !tick_still(&d) && !(x = malloc(sizeof(SampleDelta))))
                return -ENOMEM;
        *s = (SampleState) {
                .delta = x,
                .rd_ios = counter48_make(kept.rd_ios),
                .wr_ios = counter48_make(kept.wr_ios),
                .rd_merges = counter48_make(kept.rd_merges),
                .wr_merges = counter48_make(kept.wr_merges),
                .rd_sectors = counter48_make(kept.rd_sectors),
                .wr_sectors = counter48_make(kept.wr_sectors),
                .rd_ticks = (uint32_t) kept.rd_ticks,
                .wr_ticks = (uint32_t) kept.wr_ticks,
                .io_ticks = (uint32_t) kept.io_ticks,
                .time_in_queue = (uint32_t) kept.time_in_queue,
                .have_last = true,
                .valid = d.valid,
        };
        if (x)
                *x = (SampleDelta) {
                        /* each under its counter's width; merges, the sum of two,
                         * under 2^48 as long as a tick cannot see 2^47 of either */
                        .rd_ios = counter48_make(d.rd_ios),
                        .wr_ios = counter48_make(d.wr_ios),
                        .merges = counter48_make(d.merges),
                        .rd_sectors = counter48_make(d.rd_sectors),
                        .wr_sectors = counter48_make(d.wr_sectors),
                        .interval_us = counter48_make(interval_us),
                        .rd_ticks = (uint32_t) d.rd_ticks,
                        .wr_ticks = (uint32_t) d.wr_ticks,
                        .io_ticks = (uint32_t) d.io_ticks,
                        .time_in_queue = (uint32_t) d.time_in_queue,
                        .in_flight = ret->inflight,
                        .dispatch_busy = (float) dispatch_busy,
                };
        return 0;
}

void sample_state_signals(const SampleState *s, Signals *ret) {
        const SampleDelta *x = s->delta;
        /* never moved: a still tick, whose Signals are 0 over any interval */
        TickDelta d = { .valid = s->valid, .interval_ms = 1, .dispatch_busy = -1 };

        if (x)
                d = (TickDelta) {
                        .valid = s->valid,
                        .interval_ms = (double) counter48_get(x->interval_us) / 1000.0,
                        .rd_ios = counter48_get(x->rd_ios),
                        .wr_ios = counter48_get(x->wr_ios),
                        .merges = counter48_get(x->merges),
                        .rd_sectors = counter48_get(x->rd_sectors),
                        .wr_sectors = counter48_get(x->wr_sectors),
                        .rd_ticks = x->rd_ticks,
                        .wr_ticks = x->wr_ticks,
                        .io_ticks = x->io_ticks,
                        .time_in_queue = x->time_in_queue,
                        .in_flight = x->in_flight,
                        .dispatch_busy = x->dispatch_busy,
                };
        signals_from_delta(&d, ret);
}
