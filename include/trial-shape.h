/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* trial-shape: the shape of a device's workload, and whether it changed
 * since a verdict was taken (issue #28: "re-trial when the workload's
 * shape changes (read/write mix, request size)"). A verdict holds for the
 * traffic it was measured on: a slow disk's mq-deadline wins under a
 * write flood and ties under random reads, so a verdict taken on reads is
 * wrong once the writes come. Pure: samples in, shapes and a yes/no out.
 *
 * Both measures are the application's, not the setting's: the share of
 * bytes read, and the size of a request as submitted, bytes over
 * (requests + merges): diskstats counts a request merged into another as
 * a merge, so a scheduler that merges 4 KiB writes into 512 KiB requests
 * leaves the submitted size where the application put it. */

#include <stdbool.h>
#include <stdint.h>

#include "sample.h"

typedef struct TrialShape {
        double read_share;      /* bytes read / bytes moved, 0..1 */
        double request_bytes;   /* bytes / (requests + merges): as submitted */
} TrialShape;

/* The shape of the I/O between two samples of one device: 0, -ENODATA
 * for fewer than min_ios requests (an idle span has no shape), -EINVAL
 * for samples of two devices or a counter that went back. */
int trial_shape_between(const DiskStat *before, const DiskStat *after, uint64_t min_ios, TrialShape *ret);

/* Whether b is another workload than a: the read share moved by more than
 * TRIAL_SHAPE_READ_SHARE_DELTA, or the request size by more than
 * TRIAL_SHAPE_SIZE_FACTOR either way. Wide on purpose: a verdict is
 * expensive to take again, and a mix that drifts by a few percent is the
 * same workload. */
#define TRIAL_SHAPE_READ_SHARE_DELTA 0.3
#define TRIAL_SHAPE_SIZE_FACTOR 2.0
bool trial_shape_differs(const TrialShape *a, const TrialShape *b);

/* "reads 12%, 4.0 KiB a request" */
int trial_shape_format(const TrialShape *s, char *buf, size_t size);

/* After a verdict: each `window_ms` span of I/O is compared with the
 * verdict's shape; TRIAL_SHAPE_CONFIRM spans in a row that differ are a
 * change (a burst of another kind is not). A span with too little I/O
 * neither confirms nor breaks a run: an idle minute between two phases
 * does not hide the change. Three: a burst that touches two spans never
 * counts, and a real change runs on the old verdict for three or four
 * spans only (the first is mixed). trial-device.c: a span is one trial
 * window; with three windows a span the watch alone cost a slow disk's
 * phase change 2% of ten minutes' throughput (docs/benchmarks.md). */
#define TRIAL_SHAPE_CONFIRM 3

typedef struct ShapeWatch {
        TrialShape reference;   /* the verdict's */
        DiskStat span_start;
        uint64_t span_start_ms;
        unsigned differing;     /* spans in a row that differ */
        TrialShape last;        /* the last span's shape with I/O */
        bool has_last;
} ShapeWatch;

void shape_watch_start(ShapeWatch *w, const TrialShape *reference, uint64_t now_ms, const DiskStat *sample);
/* At each tick: true once the change is confirmed (the new shape in
 * w->last); the caller starts again from there. */
bool shape_watch_tick(ShapeWatch *w, uint64_t now_ms, const DiskStat *sample, uint64_t window_ms,
                      uint64_t min_ios);
