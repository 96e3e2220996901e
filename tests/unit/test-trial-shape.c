/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* trial-shape.c: a workload's shape from two samples, and the watch that
 * tells a changed workload from a burst. */
#include <errno.h>
#include <math.h>

#include "tests.h"
#include "trial-shape.h"

#define SPAN_MS 3000

static DiskStat stat0(void) {
        return (DiskStat) { .major = 8, .minor = 16 };
}

/* ios requests of kib KiB each, reads or writes, merged into merged_into
 * requests (requests == merged_into + merges, as diskstats counts them) */
static void move(DiskStat *s, bool reads, uint64_t ios, uint64_t kib, uint64_t merged_into) {
        uint64_t *n = reads ? &s->c.rd_ios : &s->c.wr_ios, *m = reads ? &s->c.rd_merges : &s->c.wr_merges,
                 *sec = reads ? &s->c.rd_sectors : &s->c.wr_sectors;

        *n += merged_into;
        *m += ios - merged_into;
        *sec += ios * kib * 2;
        s->c.io_ticks += 100;
}

TEST(the_submitted_size_does_not_move_with_the_merging) {
        DiskStat a = stat0(), b = a, c = a;
        TrialShape none, merged;

        move(&b, false, 1000, 4, 1000);         /* none: no merge */
        move(&c, false, 1000, 4, 8);            /* a scheduler: 1000 4 KiB writes in 8 requests */
        ASSERT_EQ_INT(trial_shape_between(&a, &b, 100, &none), 0);
        ASSERT_EQ_INT(trial_shape_between(&a, &c, 8, &merged), 0);
        ASSERT_TRUE(none.read_share == 0 && none.request_bytes == 4096);
        ASSERT_TRUE(merged.read_share == 0 && merged.request_bytes == 4096);
        ASSERT_TRUE(!trial_shape_differs(&none, &merged));
}

TEST(too_little_io_has_no_shape_and_a_counter_back_is_refused) {
        DiskStat a = stat0(), b = a, other = a;
        TrialShape s;

        move(&b, true, 99, 4, 99);
        ASSERT_EQ_INT(trial_shape_between(&a, &b, 100, &s), -ENODATA);
        ASSERT_EQ_INT(trial_shape_between(&b, &a, 1, &s), -EINVAL);
        other.minor = 32;
        ASSERT_EQ_INT(trial_shape_between(&a, &other, 1, &s), -EINVAL);
}

TEST(the_mix_or_the_size_changes_the_shape_a_drift_does_not) {
        TrialShape reads = { 1.0, 4096 }, mostly = { 0.8, 4096 }, mixed = { 0.6, 4096 }, big = { 1.0, 9000 },
                   bigger = { 1.0, 6000 }, small = { 1.0, 2000 };

        ASSERT_TRUE(!trial_shape_differs(&reads, &mostly));
        ASSERT_TRUE(trial_shape_differs(&reads, &mixed));
        ASSERT_TRUE(trial_shape_differs(&reads, &big));
        ASSERT_TRUE(!trial_shape_differs(&reads, &bigger));
        ASSERT_TRUE(trial_shape_differs(&reads, &small) == (4096.0 / 2000 > TRIAL_SHAPE_SIZE_FACTOR));
}

/* Runs spans of reads or writes through the watch: the tick at which it
 * says the workload changed, 0 for never. reads[i]: span i's kind; -1 idle. */
static unsigned watch(const int *kinds, unsigned n) {
        TrialShape ref = { 1.0, 4096 };
        DiskStat s = stat0();
        ShapeWatch w;
        uint64_t now = 0;

        shape_watch_start(&w, &ref, now, &s);
        for (unsigned i = 0; i < n; i++) {
                if (kinds[i] >= 0)
                        move(&s, kinds[i], 1000, 4, 1000);
                now += SPAN_MS;
                if (shape_watch_tick(&w, now, &s, SPAN_MS, 100))
                        return i + 1;
        }
        return 0;
}

TEST(a_change_is_confirmed_over_three_spans_a_burst_is_not) {
        const int steady[] = { 1, 1, 1, 1, 1, 1 }, burst[] = { 1, 0, 0, 1, 0, 0, 1 },
                  change[] = { 1, 1, 0, 0, 0, 1 }, idle_between[] = { 1, 0, -1, -1, 0, 0 };

        ASSERT_EQ_INT(watch(steady, 6), 0);
        ASSERT_EQ_INT(watch(burst, 7), 0);
        ASSERT_EQ_INT(watch(change, 6), 5);
        /* idle spans neither confirm nor break a run */
        ASSERT_EQ_INT(watch(idle_between, 6), 6);
}

TEST(a_span_opens_only_after_its_time_and_time_back_stands_still) {
        TrialShape ref = { 1.0, 4096 };
        DiskStat s = stat0();
        ShapeWatch w;

        shape_watch_start(&w, &ref, 10000, &s);
        move(&s, false, 1000, 4, 1000);
        ASSERT_TRUE(!shape_watch_tick(&w, 12000, &s, SPAN_MS, 100));
        ASSERT_EQ_INT(w.differing, 0);
        ASSERT_TRUE(!shape_watch_tick(&w, 5000, &s, SPAN_MS, 100));    /* back: as standing still */
        ASSERT_TRUE(!shape_watch_tick(&w, 8000, &s, SPAN_MS, 100));
        ASSERT_EQ_INT(w.differing, 1);
        ASSERT_TRUE(w.has_last && w.last.read_share == 0);
}

TEST(format) {
        TrialShape s = { 0.125, 4096 };
        char buf[64];

        ASSERT_EQ_INT(trial_shape_format(&s, buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "reads 12%, 4.0 KiB a request");
        ASSERT_EQ_INT(trial_shape_format(&s, buf, 8), -ENOBUFS);
        ASSERT_TRUE(!isnan(s.read_share));
}
