/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sample: /proc/diskstats (one pass per tick for all devices) and debugfs
 * dispatch_busy → per-device Signals. The parsers are pure. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "string-table.h"

/* The counters a tick needs of the one before: what a device keeps. */
typedef struct DiskCounters {
        uint64_t rd_ios, rd_merges, rd_sectors, rd_ticks;
        uint64_t wr_ios, wr_merges, wr_sectors, wr_ticks;
        uint64_t io_ticks, time_in_queue;
} DiskCounters;

/* One /proc/diskstats line (Documentation/admin-guide/iostats.rst).
 * 14-field lines (before 4.18) have no discard fields, 18-field lines (before
 * 5.5) no flush fields: those read as 0. */
typedef struct DiskStat {
        DiskCounters c;
        uint64_t in_flight;     /* a gauge: only the current one counts */
        unsigned major, minor;
        unsigned n_fields;      /* 14, 18 or 20 (counting major, minor, name) */
} DiskStat;

#define DISKSTAT_NAME_MAX 32

/* Pure. -EBADMSG unless the line has 14, 18 or 20 well-formed fields. The
 * discard and flush fields are checked but not kept: no signal uses them. */
int diskstat_parse_line(const char *line, size_t len, DiskStat *ret, char name[DISKSTAT_NAME_MAX]);

/* Every signal is >= 0; SIGNAL_UNKNOWN stands for one that has no value
 * this tick: dispatch_busy without debugfs, a ratio over a tick without
 * the I/O it divides by. No condition on it holds, and a window's mean
 * leaves it out (a ratio of 0 would claim a mix the tick never saw). */
#define SIGNAL_UNKNOWN (-1.0f)

static inline bool signal_known(double v) {
        return v >= 0;
}

/* What one tick saw on one device. Rates are per second over the tick.
 * Kept per device, so float: 7 digits are more than a rate over one tick
 * means, and halve what every device carries. Computed in double. */
typedef struct Signals {
        bool valid;             /* false: no previous sample, or a counter went backwards */
        float riops, wiops, iops;
        float rmbps, wmbps, mbps;
        float rlat_ms, wlat_ms, lat_ms;  /* average completion time, ms per I/O */
        float util;             /* % of the tick with I/O in flight */
        float qdepth;           /* average queue depth */
        float inflight;
        float dispatch_busy;    /* 0..9 EWMA, max over default hctxs; unknown without debugfs */
        /* The mix rather than the amount: a random-read phase and a
         * sequential-write one can have the same IOPS and queue depth. Each
         * is unknown in a tick without the I/O it divides by. */
        float wpct;             /* writes, % of completed I/Os */
        float rkb, wkb;         /* mean read and write size, KiB */
        float merge_pct;        /* merged, % of the requests seen (merged + completed) */
} Signals;

typedef enum SignalId {
        SIGNAL_IOPS,
        SIGNAL_RIOPS,
        SIGNAL_WIOPS,
        SIGNAL_MBPS,
        SIGNAL_RMBPS,
        SIGNAL_WMBPS,
        SIGNAL_LAT_MS,
        SIGNAL_RLAT_MS,
        SIGNAL_WLAT_MS,
        SIGNAL_UTIL,
        SIGNAL_QDEPTH,
        SIGNAL_INFLIGHT,
        SIGNAL_DISPATCH_BUSY,
        SIGNAL_WPCT,
        SIGNAL_RKB,
        SIGNAL_WKB,
        SIGNAL_MERGE_PCT,
        _SIGNAL_MAX,
} SignalId;

DECLARE_STRING_TABLE(signal, SignalId);
double signals_get(const Signals *s, SignalId id);
void signals_set(Signals *s, SignalId id, double v);

/* Pure: whether a counter of b is below a's: it wrapped (a 32-bit field)
 * or the device was replaced under the same number. Nothing between the
 * two samples can be told then. */
bool disk_counters_backwards(const DiskCounters *a, const DiskCounters *b);

/* Pure: the signals between two samples taken interval_ms apart.
 * dispatch_busy is the debugfs value read this tick (-1 if not read): it
 * only changes on dispatch, so with no I/O in the tick it is taken as 0.
 * wpct, rkb, wkb and merge_pct are SIGNAL_UNKNOWN when their denominator
 * is 0. */
void signals_compute(const DiskCounters *prev, const DiskStat *now, double interval_ms, double dispatch_busy,
                     Signals *ret);

/* 48 bits of a counter the kernel keeps in 64 (I/Os, merges, sectors):
 * 2^48 sectors are 128 PiB, 39 hours at 1 TB/s, and 2^48 I/Os 3 days at
 * a billion a second, so no delta over the longest tick the config allows
 * (an hour) comes near it. Unaligned: 6 bytes, not 8. */
typedef struct __attribute__((packed)) Counter48 {
        uint32_t lo;
        uint16_t hi;
} Counter48;

#define COUNTER48_MASK ((UINT64_C(1) << 48) - 1)

static inline uint64_t counter48_get(Counter48 c) {
        return (uint64_t) c.hi << 32 | c.lo;
}

static inline Counter48 counter48_make(uint64_t v) {
        return (Counter48) { .lo = (uint32_t) v, .hi = (uint16_t) (v >> 32) };
}

/* What a device keeps of its samples: the counters of the last one, to
 * take the next tick's deltas from, and that tick's deltas, to make its
 * Signals again when they are asked for (sample_state_signals()), once it
 * has moved: every device keeps one, and the Signals themselves are
 * larger.
 *
 * Each counter is kept as wide as the kernel keeps it, or 48 bits:
 * /proc/diskstats prints the time fields (rd_ticks, wr_ticks, io_ticks,
 * time_in_queue) and in_flight as 32-bit ("%u"), the I/Os, merges and
 * sectors as 64-bit. A counter went backwards when its new value, taken
 * to the kept width, is below the kept one: for every value under 2^32
 * (the time fields always) or 2^48 (the others) exactly what
 * signals_compute() says of the full values. A 32-bit time field that
 * wraps in the kernel is a step back here as there. A delta is never
 * wider than its counter: 32 bits of a 32-bit field, and a 48-bit one
 * cannot be reached in a tick (above). */
typedef struct SampleDelta {
        /* the last tick; all 0 when it was idle (signals_compute()'s
         * shortcut gives what the deltas of 0 give) */
        Counter48 rd_ios, wr_ios, merges, rd_sectors, wr_sectors;
        Counter48 interval_us;
        uint32_t rd_ticks, wr_ticks, io_ticks, time_in_queue;
        float in_flight;        /* as the Signals have them: the same float */
        float dispatch_busy;
} SampleDelta;

typedef struct SampleState {
        /* The last tick's deltas, made at the first tick that was not
         * still (a counter moved, I/O in flight, dispatch_busy read) and
         * kept from then on: a disk that never moved gives its Signals
         * from nothing (every rate 0), and 10,000 idle disks do without
         * 64 bytes each. */
        SampleDelta *delta;
        Counter48 rd_ios, wr_ios, rd_merges, wr_merges, rd_sectors, wr_sectors;
        uint32_t rd_ticks, wr_ticks, io_ticks, time_in_queue;
        bool have_last;         /* a sample was taken */
        bool valid;             /* the last tick had a sample before it, an interval, nothing backwards */
        uint16_t read_ms;       /* how far into its tick's read the last sample was taken (the
                                 * sampler's: sample_state_interval()); in the padding */
} SampleState;

/* Pure: the interval since s's last sample, of a device read read_ms into
 * its tick's read: the tick's interval (from the last read's start to this
 * one's) corrected by how far into each read the device was taken. A read
 * in slices takes the devices at different times; each gets its own. */
uint64_t sample_state_interval(const SampleState *s, uint64_t tick_interval_us, unsigned read_ms);

/* No I/O: takes a new sample, interval_us after the last (0: no
 * interval), and returns that tick's signals, the same as
 * signals_compute() gives of the two samples (for counters within the
 * widths above). 0, or -ENOMEM (the first tick a disk moves allocates its
 * SampleDelta) with s as it was. */
__attribute__((warn_unused_result)) int sample_state_update(SampleState *s, const DiskStat *now,
                                                           uint64_t interval_us, double dispatch_busy,
                                                           Signals *ret);
void sample_state_done(SampleState *s);
/* Pure: the Signals sample_state_update() returned last; !valid before
 * the second sample. */
void sample_state_signals(const SampleState *s, Signals *ret);
