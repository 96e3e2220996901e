/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sample: /proc/diskstats (one pass per tick for all devices) and debugfs
 * dispatch_busy → per-device Signals. The parsers are pure. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

const char *signal_to_string(SignalId s);
int signal_from_string(const char *s);
double signals_get(const Signals *s, SignalId id);
void signals_set(Signals *s, SignalId id, double v);

/* Pure: the signals between two samples taken interval_ms apart.
 * dispatch_busy is the debugfs value read this tick (-1 if not read): it
 * only changes on dispatch, so with no I/O in the tick it is taken as 0.
 * wpct, rkb, wkb and merge_pct are SIGNAL_UNKNOWN when their denominator
 * is 0. */
void signals_compute(const DiskCounters *prev, const DiskStat *now, double interval_ms, double dispatch_busy,
                     Signals *ret);

/* What the tick keeps of a device between samples: the counters of the
 * last one and the signals computed from the last two. */
typedef struct SampleState {
        DiskCounters last;
        Signals signals;
        bool have_last;
} SampleState;

/* Pure: the signals of now against the last sample; now becomes the last. */
void sample_update(SampleState *s, const DiskStat *now, double interval_ms, double dispatch_busy);
