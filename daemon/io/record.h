/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Recordings: JSON lines of raw samples, written by --record and read by
 * --replay.
 *   {"blkpolicyd_recording": 1, "kernel": "6.18.4", "dispatch_direct": "no", "tick_ms": 1000}
 *   {"device": {"name": "loop8", "classes": [...], "facts": {...}}}
 *   {"t": 1000, "stats": {"loop8": [rd_ios, rd_merges, rd_sectors, rd_ticks, wr_ios, wr_merges,
 *                                   wr_sectors, wr_ticks, in_flight, io_ticks, time_in_queue,
 *                                   dispatch_busy or -1]}}
 * t is in milliseconds since the recording started: the tick's clock in
 * whole milliseconds less the start's, so that the differences of two
 * ticks' t are those of the trials' now_ms (the tick's clock / 1000).
 *
 * Trials (issue #28, docs/trials.md "Record and replay"), lines a reader
 * without them skips or ignores:
 *   {"t": 1200, "trial": {"device": "loop8", "event": "start", "started_by": "policy",
 *                         "seed": "1234567890123456789", "candidates": ["mq-deadline"],
 *                         "window_ms": 10000, "settle_ms": 2000, "max_duration_ms": 3600000,
 *                         "min_gain": 0.05, "max_switches_per_hour": 30}}
 *     a trial is set up (policy [Trial] or blkpolicyctl trial), its first
 *     candidate begins at the next tick. The seed is a string: JSON
 *     numbers hold 53 bits.
 *   {"t": 9000, "trial": {"device": "loop8", "event": "stop", "why": "blkpolicyctl trial --stop"}}
 *     stopped by hand, a pause, an override, a reload, between ticks.
 * and a key after a tick's stats, for what a device's trial did at that
 * tick other than its step:
 *   "trials": {"loop8": {"event": "wait"}}     not stepped: a pass of its
 *                                              device was in flight
 *   "trials": {"loop8": {"event": "stop", "why": "paused"}}
 *                                              stopped at the tick, not stepped */

#include <stdio.h>

#include <cjson/cJSON.h>

#include "facts.h"
#include "policy.h"
#include "sample.h"
#include "trial-device.h"

#define RECORD_STAT_FIELDS 12

typedef struct Recorder Recorder;

int record_open(const char *path, const KernelCaps *caps, unsigned tick_ms, Recorder **ret);
Recorder *record_close(Recorder *r);
void record_write_device(Recorder *r, const DeviceFacts *facts);
void record_write_tick(Recorder *r, uint64_t now_usec, uint64_t tick);
void record_write_sample(Recorder *r, const char *name, const DiskStat *st, double dispatch_busy);
/* Ends the tick's line, with its trials' notes; nothing when none is open. */
void record_end_tick(Recorder *r);

/* A trial set up on name, or stopped (why): a line of its own between
 * ticks; a stop while a tick is written is that tick's note. */
void record_trial_start(Recorder *r, uint64_t now_usec, const char *name, const DeviceTrial *t);
void record_trial_stop(Recorder *r, uint64_t now_usec, const char *name, const char *why);
/* name's trial was not stepped at this tick. */
void record_trial_wait(Recorder *r, const char *name);

/* Pure parsers of one recording line's parts. */
int record_parse_header(const cJSON *j, KernelCaps *caps);
int record_parse_device(const cJSON *j, DeviceFacts *f);
int record_parse_stat(const cJSON *array, DiskStat *st, double *dispatch_busy);

typedef struct RecordTrialStart {
        char device[DISKSTAT_NAME_MAX];
        bool by_hand;
        uint64_t seed;
        TrialPolicy config;
} RecordTrialStart;

/* A "trial" line's value: 1 and ret filled for a start, 0 for a stop
 * (name and why point into j), -EBADMSG. */
int record_parse_trial(const cJSON *j, RecordTrialStart *ret, const char **name, const char **why);
