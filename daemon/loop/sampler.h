/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sampler.c: the tick. One pass over /proc/diskstats for every device, the
 * dynamic state machines, and the flips they decide, from the decision to
 * the end of the flip's pass: a flip's state is the Sampler's, nowhere
 * else. The Manager owns one (m->sampler). */

#include "device-types.h"
#include "record.h"

typedef struct Sampler Sampler;

/* What status and the metrics show of the ticks. */
typedef struct SamplerStats {
        uint64_t ticks;                 /* ticks so far */
        uint64_t cost_usec_total;       /* wall time spent in ticks */
        uint64_t cpu_nsec_total;        /* CPU time spent in ticks (user + system) */
        int diskstats_error;            /* last read error, 0 when fine */
        int dispatch_busy_error;        /* a debugfs read error of this tick, 0 when none */
        /* the last tick that sampled /proc/diskstats and checked for drift
         * (0: none yet): the metrics textfile's moment, which it reads
         * after the tick's dispatch rather than being called from it */
        uint64_t sampled_tick;
        uint64_t sampled_realtime_usec; /* when it ended (CLOCK_REALTIME): the host's heartbeat */
        uint64_t flips_total;           /* flips applied, on every device there was */
        uint64_t flips_capped_total;    /* flips a device's cap held back: it thrashes */
        unsigned drift_per_tick;        /* the last tick's share of the drift sweep */
        uint64_t drift_checked;         /* devices read back by the sweep so far */
} SamplerStats;

/* ctx: what the ticks read and decide with, for the Sampler's life. */
int sampler_new(DeviceContext *ctx, Sampler **ret);
Sampler *sampler_free(Sampler *s);
/* start_usec: the daemon's start (CLOCK_MONOTONIC), for the flips'
 * uptime. */
int sampler_start(Sampler *s, uint64_t start_usec);
const SamplerStats *sampler_stats(const Sampler *s);

/* --record: every tick's samples go to r, which the Sampler takes. */
void sampler_set_recorder(Sampler *s, Recorder *r);
/* A recording names the devices it samples: d's facts, when recording. */
void sampler_record_device(Sampler *s, const Device *d);

/* A device's job is back from the applier (the manager's callback hands
 * them all here), after ms of the worker's time. pass: a pass (not a
 * put-back) of a device still known. The flip running on the device, if
 * any, is done then; for a number no device has any more, it is moot. */
void sampler_pass_back(Sampler *s, dev_t devnum, bool pass, double ms);
