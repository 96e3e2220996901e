/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Recordings: JSON lines of raw samples, written by --record and read by
 * --replay.
 *   {"blkpolicyd_recording": 1, "kernel": "6.18.4", "dispatch_direct": "no", "tick_ms": 1000}
 *   {"device": {"name": "loop8", "classes": [...], "facts": {...}}}
 *   {"t": 1000, "stats": {"loop8": [rd_ios, rd_merges, rd_sectors, rd_ticks, wr_ios, wr_merges,
 *                                   wr_sectors, wr_ticks, in_flight, io_ticks, time_in_queue,
 *                                   dispatch_busy or -1]}}
 * t is in milliseconds since the recording started. */

#include <stdio.h>

#include <cjson/cJSON.h>

#include "facts.h"
#include "sample.h"

#define RECORD_STAT_FIELDS 12

typedef struct Recorder Recorder;

int record_open(const char *path, const KernelCaps *caps, unsigned tick_ms, Recorder **ret);
Recorder *record_close(Recorder *r);
void record_write_device(Recorder *r, const DeviceFacts *facts);
void record_write_tick(Recorder *r, uint64_t now_usec, uint64_t tick);
void record_write_sample(Recorder *r, const char *name, const DiskStat *st, double dispatch_busy);
void record_end_tick(Recorder *r);

/* Pure parsers of one recording line's parts. */
int record_parse_header(const cJSON *j, KernelCaps *caps);
int record_parse_device(const cJSON *j, DeviceFacts *f);
int record_parse_stat(const cJSON *array, DiskStat *st, double *dispatch_busy);
