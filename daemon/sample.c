/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure parsers and arithmetic of the sampler; the reads happen in the
 * manager through sysfs.c. No allocation. */
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

const char *signal_to_string(SignalId s) {
        return s < _SIGNAL_MAX ? signal_names[s] : NULL;
}

int signal_from_string(const char *s) {
        for (int i = 0; i < _SIGNAL_MAX; i++)
                if (streq(signal_names[i], s))
                        return i;
        return -EINVAL;
}

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

static bool went_backwards(const DiskCounters *a, const DiskCounters *b) {
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

/* The mix of the tick's I/O, from counter deltas (they did not go back). */
static void signals_mix(const DiskCounters *prev, const DiskCounters *now, Signals *ret) {
        double rd = (double) (now->rd_ios - prev->rd_ios), wr = (double) (now->wr_ios - prev->wr_ios);
        double merges = (double) (now->rd_merges - prev->rd_merges + now->wr_merges - prev->wr_merges);

        ret->wpct = ratio_or_unknown(wr * 100.0, rd + wr);
        /* sectors are 512 bytes whatever the device's block size */
        ret->rkb = ratio_or_unknown((double) (now->rd_sectors - prev->rd_sectors) / 2.0, rd);
        ret->wkb = ratio_or_unknown((double) (now->wr_sectors - prev->wr_sectors) / 2.0, wr);
        ret->merge_pct = ratio_or_unknown(merges * 100.0, merges + rd + wr);
}

void signals_compute(const DiskCounters *prev, const DiskStat *now, double interval_ms, double dispatch_busy,
                     Signals *ret) {
        double sec = interval_ms / 1000.0, rd, wr;

        *ret = (Signals) {
                .dispatch_busy = SIGNAL_UNKNOWN,
                .wpct = SIGNAL_UNKNOWN,
                .rkb = SIGNAL_UNKNOWN,
                .wkb = SIGNAL_UNKNOWN,
                .merge_pct = SIGNAL_UNKNOWN,
        };
        /* The merges are compared too: a request can take merges in a tick
         * and complete in a later one, and merge_pct counts them (100%). */
        if (prev && interval_ms > 0 && prev->rd_ios == now->c.rd_ios && prev->wr_ios == now->c.wr_ios &&
            prev->io_ticks == now->c.io_ticks && prev->time_in_queue == now->c.time_in_queue &&
            prev->rd_merges == now->c.rd_merges && prev->wr_merges == now->c.wr_merges) {
                /* idle, as most devices are most of the time: nothing to divide, the mix is unknown */
                ret->valid = true;
                ret->inflight = (double) now->in_flight;
                if (dispatch_busy >= 0)
                        ret->dispatch_busy = 0;
                return;
        }
        /* A counter that went backwards wrapped (32-bit kernels) or the device
         * was replaced under the same number: this tick tells nothing. */
        if (!prev || interval_ms <= 0 || went_backwards(prev, &now->c))
                return;
        rd = (double) (now->c.rd_ios - prev->rd_ios);
        wr = (double) (now->c.wr_ios - prev->wr_ios);
        ret->valid = true;
        ret->riops = rd / sec;
        ret->wiops = wr / sec;
        ret->iops = ret->riops + ret->wiops;
        ret->rmbps = (double) (now->c.rd_sectors - prev->rd_sectors) * 512.0 / 1e6 / sec;
        ret->wmbps = (double) (now->c.wr_sectors - prev->wr_sectors) * 512.0 / 1e6 / sec;
        ret->mbps = ret->rmbps + ret->wmbps;
        ret->rlat_ms = rd > 0 ? (double) (now->c.rd_ticks - prev->rd_ticks) / rd : 0;
        ret->wlat_ms = wr > 0 ? (double) (now->c.wr_ticks - prev->wr_ticks) / wr : 0;
        ret->lat_ms = rd + wr > 0 ? (double) (now->c.rd_ticks - prev->rd_ticks + now->c.wr_ticks - prev->wr_ticks) / (rd + wr) : 0;
        ret->util = (double) (now->c.io_ticks - prev->io_ticks) / interval_ms * 100.0;
        if (ret->util > 100.0)
                ret->util = 100.0;      /* io_ticks is updated at jiffy granularity */
        ret->qdepth = (double) (now->c.time_in_queue - prev->time_in_queue) / interval_ms;
        ret->inflight = (double) now->in_flight;
        if (dispatch_busy >= 0)
                ret->dispatch_busy = rd + wr > 0 ? dispatch_busy : 0;
        signals_mix(prev, &now->c, ret);
}

void sample_update(SampleState *s, const DiskStat *now, double interval_ms, double dispatch_busy) {
        signals_compute(s->have_last ? &s->last : NULL, now, interval_ms, dispatch_busy, &s->signals);
        s->last = now->c;
        s->have_last = true;
}
