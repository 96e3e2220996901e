/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "trial-shape.h"

static int counter_delta(uint64_t before, uint64_t after, uint64_t *ret) {
        if (after < before)
                return -EINVAL;
        *ret = after - before;
        return 0;
}

int trial_shape_between(const DiskStat *before, const DiskStat *after, uint64_t min_ios, TrialShape *ret) {
        uint64_t rd_ios, wr_ios, rd_merges, wr_merges, rd_sectors, wr_sectors;

        if (before->major != after->major || before->minor != after->minor)
                return -EINVAL;
        if (counter_delta(before->c.rd_ios, after->c.rd_ios, &rd_ios) < 0 ||
            counter_delta(before->c.wr_ios, after->c.wr_ios, &wr_ios) < 0 ||
            counter_delta(before->c.rd_merges, after->c.rd_merges, &rd_merges) < 0 ||
            counter_delta(before->c.wr_merges, after->c.wr_merges, &wr_merges) < 0 ||
            counter_delta(before->c.rd_sectors, after->c.rd_sectors, &rd_sectors) < 0 ||
            counter_delta(before->c.wr_sectors, after->c.wr_sectors, &wr_sectors) < 0)
                return -EINVAL;
        if (rd_ios + wr_ios < (min_ios > 0 ? min_ios : 1) || rd_sectors + wr_sectors == 0)
                return -ENODATA;
        *ret = (TrialShape) {
                .read_share = (double) rd_sectors / (double) (rd_sectors + wr_sectors),
                .request_bytes = 512.0 * (double) (rd_sectors + wr_sectors) /
                                 (double) (rd_ios + wr_ios + rd_merges + wr_merges),
        };
        return 0;
}

bool trial_shape_differs(const TrialShape *a, const TrialShape *b) {
        double size = a->request_bytes > 0 && b->request_bytes > 0 ? b->request_bytes / a->request_bytes : 1;

        return fabs(a->read_share - b->read_share) > TRIAL_SHAPE_READ_SHARE_DELTA ||
               size > TRIAL_SHAPE_SIZE_FACTOR || size < 1.0 / TRIAL_SHAPE_SIZE_FACTOR;
}

int trial_shape_format(const TrialShape *s, char *buf, size_t size) {
        int n = snprintf(buf, size, "reads %.0f%%, %.1f KiB a request", 100 * s->read_share,
                         s->request_bytes / 1024);

        return n < 0 || (size_t) n >= size ? -ENOBUFS : 0;
}

void shape_watch_start(ShapeWatch *w, const TrialShape *reference, uint64_t now_ms, const DiskStat *sample) {
        *w = (ShapeWatch) { .reference = *reference, .span_start = *sample, .span_start_ms = now_ms };
}

bool shape_watch_tick(ShapeWatch *w, uint64_t now_ms, const DiskStat *sample, uint64_t window_ms,
                      uint64_t min_ios) {
        TrialShape s;
        int r;

        if (now_ms < w->span_start_ms)  /* time went back: as standing still */
                w->span_start_ms = now_ms;
        if (now_ms - w->span_start_ms < window_ms)
                return false;
        r = trial_shape_between(&w->span_start, sample, min_ios, &s);
        w->span_start = *sample;
        w->span_start_ms = now_ms;
        if (r == -ENODATA)
                return false;
        if (r < 0) {            /* another device, a counter back: start over */
                w->differing = 0;
                return false;
        }
        w->last = s;
        w->has_last = true;
        w->differing = trial_shape_differs(&w->reference, &s) ? w->differing + 1 : 0;
        return w->differing >= TRIAL_SHAPE_CONFIRM;
}
