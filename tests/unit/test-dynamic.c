/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dynamic state machine over synthetic traces. */
#include "dynamic.h"
#include "tests.h"
#include "util.h"

static DynamicPolicy iops_policy(void) {
        DynamicPolicy p = { .enabled = true, .enter_ticks = 3, .leave_ticks = 5, .window = 1,
                            .min_dwell_ticks = 10, .max_flips = 4, .flip_window_ticks = 100, .has_busy = true };
        ASSERT_EQ_INT(condition_parse("iops > 10000", &p.enter[p.n_enter++]), 0);
        ASSERT_EQ_INT(condition_parse("iops < 5000", &p.leave[p.n_leave++]), 0);
        return p;
}

static Signals at(double iops) {
        return (Signals) { .valid = true, .iops = iops, .dispatch_busy = -1 };
}

/* Runs a trace of iops values from tick `first`; returns the ticks at which
 * flips happened, in flips[]. */
static unsigned run_trace(const DynamicPolicy *p, DynState *s, const double *iops, unsigned n, uint64_t first,
                          uint64_t *flips) {
        unsigned k = 0;

        ASSERT_EQ_INT(dyn_state_fit(s, p), 0);
        for (unsigned i = 0; i < n; i++) {
                Signals sig = at(iops[i]);
                DynDecision d;

                ASSERT_EQ_INT(dynamic_step(p, s, &sig, first + i, &d), 0);
                if (d.flip)
                        flips[k++] = first + i;
        }
        return k;
}

TEST(step_up_flips_after_enter_ticks) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[30];
        uint64_t flips[8];
        unsigned n;

        for (unsigned i = 0; i < 30; i++)
                trace[i] = i < 15 ? 100 : 50000;
        n = run_trace(&p, &s, trace, 30, 0, flips);
        /* load from tick 15: 3 ticks in a row → flip at tick 17 */
        ASSERT_TRUE(n == 1 && flips[0] == 17);
        ASSERT_TRUE(s.busy && dyn_state_flips(&s) == 1);
}

TEST(step_down_flips_back_after_leave_ticks) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[60];
        uint64_t flips[8];
        unsigned n;

        for (unsigned i = 0; i < 60; i++)
                trace[i] = i >= 15 && i < 40 ? 50000 : 100;
        n = run_trace(&p, &s, trace, 60, 0, flips);
        ASSERT_TRUE(n == 2 && flips[0] == 17 && flips[1] == 44);
        ASSERT_TRUE(!s.busy);
}

TEST(oscillation_around_one_threshold_does_not_flap) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[200];
        uint64_t flips[64];

        /* 9000..11000 around the enter threshold: never 3 ticks in a row above */
        for (unsigned i = 0; i < 200; i++)
                trace[i] = i % 3 == 2 ? 9000 : 11000;
        ASSERT_EQ_INT(run_trace(&p, &s, trace, 200, 0, flips), 0);
        /* once busy, the same oscillation never reaches the leave threshold */
        dyn_state_done(&s);
        s = (DynState) {};
        for (unsigned i = 0; i < 200; i++)
                trace[i] = i < 20 ? 50000 : (i % 2 ? 9000 : 11000);
        ASSERT_EQ_INT(run_trace(&p, &s, trace, 200, 0, flips), 1);
}

TEST(dwell_time_holds_a_fresh_state) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[40];
        uint64_t flips[8];
        unsigned n;

        /* busy for 4 ticks from tick 0, quiet after: the leave condition holds
         * from tick 4, but no flip before min_dwell (10) after the first sample */
        p.enter_ticks = 1;
        p.leave_ticks = 1;
        for (unsigned i = 0; i < 40; i++)
                trace[i] = i < 12 ? 50000 : 100;
        n = run_trace(&p, &s, trace, 40, 0, flips);
        ASSERT_TRUE(n == 2 && flips[0] == 10 && flips[1] == 20);
}

TEST(flip_cap_holds) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[100];
        uint64_t flips[64];
        unsigned n;

        p.enter_ticks = p.leave_ticks = 1;
        p.min_dwell_ticks = 0;
        p.max_flips = 3;
        p.flip_window_ticks = 50;
        for (unsigned i = 0; i < 100; i++)
                trace[i] = i % 2 ? 50000 : 100;   /* a flip-worthy change every tick */
        n = run_trace(&p, &s, trace, 100, 0, flips);
        /* 3 flips, then none until the first leaves the 50-tick window */
        ASSERT_EQ_INT(n, 6);
        ASSERT_TRUE(flips[2] - flips[0] <= 4 && flips[3] >= flips[0] + 50);
        ASSERT_TRUE(dyn_state_capped(&s) > 0);
}

TEST(refit_keeps_the_newest_flips) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[10];
        uint64_t flips[16];

        p.enter_ticks = p.leave_ticks = 1;
        p.min_dwell_ticks = 0;
        p.max_flips = 3;
        p.flip_window_ticks = 50;
        for (unsigned i = 0; i < 10; i++)
                trace[i] = i % 2 ? 50000 : 100;
        ASSERT_EQ_INT(run_trace(&p, &s, trace, 10, 0, flips), 3);
        ASSERT_TRUE(flips[0] == 1 && flips[2] == 3);
        /* a reload that lowers the cap keeps the two newest flips */
        p.max_flips = 2;
        ASSERT_EQ_INT(dyn_state_fit(&s, &p), 0);
        ASSERT_TRUE(s.n_flip_ticks == 2 && s.extra->flip_ticks[0] + s.extra->flip_ticks[1] == 2 + 3);
        /* raising it to 4 leaves room for two more in the same window */
        p.max_flips = 4;
        ASSERT_EQ_INT(run_trace(&p, &s, trace, 10, 10, flips), 2);
        ASSERT_EQ_INT(s.n_flip_ticks, 4);
        /* the averaging ring comes and goes with a window over 1 tick; the flips stay */
        p.window = 2;
        ASSERT_TRUE(dyn_state_fit(&s, &p) == 0 && s.extra->history && s.n_history == 0 && s.n_flip_ticks == 4);
        p.window = 1;
        ASSERT_TRUE(dyn_state_fit(&s, &p) == 0 && !s.extra->history && s.extra->flip_ticks && dyn_state_flips(&s) == 5);
}

TEST(the_flip_ring_comes_with_the_first_flip) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double idle[5] = { 100, 100, 100, 100, 100 }, busy[5] = { 50000, 50000, 50000, 50000, 50000 };
        uint64_t flips[8];

        p.min_dwell_ticks = 0;
        ASSERT_EQ_INT(run_trace(&p, &s, idle, 5, 0, flips), 0);
        ASSERT_TRUE(!s.extra && s.flip_ring == p.max_flips);
        /* a reload fits a state that never flipped without allocating */
        p.max_flips = 4;
        ASSERT_TRUE(dyn_state_fit(&s, &p) == 0 && !s.extra && s.flip_ring == 4);
        ASSERT_EQ_INT(run_trace(&p, &s, busy, 5, 5, flips), 1);
        ASSERT_TRUE(s.extra && s.extra->flip_ticks && s.n_flip_ticks == 1 && s.extra->flip_ticks[0] == flips[0]);
}

/* A state needs its extra only while something in it is needed. */
TEST(the_extra_goes_with_the_last_of_it) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};

        p.window = 2;
        ASSERT_TRUE(dyn_state_fit(&s, &p) == 0 && s.extra && s.extra->history && !s.extra->flip_ticks);
        p.window = 1;
        ASSERT_TRUE(dyn_state_fit(&s, &p) == 0 && !s.extra);
}

/* The counts are kept with the flip ring: a reload that drops the
 * averaging ring keeps them. */
TEST(flip_counts_outlive_a_refit) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double busy[3] = { 50000, 50000, 50000 };
        uint64_t flips[4];

        p.min_dwell_ticks = 0;
        p.window = 2;
        ASSERT_EQ_INT(dyn_state_fit(&s, &p), 0);
        ASSERT_TRUE(dyn_state_flips(&s) == 0 && dyn_state_capped(&s) == 0);
        ASSERT_EQ_INT(run_trace(&p, &s, busy, 3, 0, flips), 1);
        p.window = 1;
        ASSERT_EQ_INT(dyn_state_fit(&s, &p), 0);
        ASSERT_TRUE(s.extra && !s.extra->history);
        ASSERT_EQ_INT(dyn_state_flips(&s), 1);
}

TEST(invalid_samples_hold_everything) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        Signals invalid = { .valid = false };
        DynDecision d;

        /* two busy ticks, a gap (device vanished or a counter wrapped), one more busy */
        p.min_dwell_ticks = 0;
        ASSERT_EQ_INT(dyn_state_fit(&s, &p), 0);
        for (uint64_t t = 0; t < 2; t++) {
                Signals sig = at(50000);
                dynamic_step(&p, &s, &sig, t, &d);
                ASSERT_TRUE(!d.flip);
        }
        dynamic_step(&p, &s, &invalid, 2, &d);
        ASSERT_TRUE(!d.flip && s.streak == 2);
        {
                Signals sig = at(50000);
                dynamic_step(&p, &s, &sig, 3, &d);
                ASSERT_TRUE(d.flip && d.to_busy);
                ASSERT_TRUE(strstr(d.reason, "iops > 10000") && strstr(d.reason, "for 3 ticks"));
        }
}

TEST(window_averages_signals) {
        DynamicPolicy p = iops_policy();
        _cleanup_(dyn_state_done) DynState s = {};
        double trace[] = { 20000, 0, 20000, 0, 20000, 0, 20000, 0, 20000, 0, 20000, 0 };
        uint64_t flips[8];

        p.min_dwell_ticks = 0;
        /* without a window, no three busy ticks in a row */
        ASSERT_EQ_INT(run_trace(&p, &s, trace, ELEMENTSOF(trace), 0, flips), 0);
        /* over a two-tick window the mean is 10000: still not > 10000 */
        p.window = 2;
        dyn_state_done(&s);
        s = (DynState) {};
        ASSERT_EQ_INT(run_trace(&p, &s, trace, ELEMENTSOF(trace), 0, flips), 0);
        p.enter[0].threshold = 9000;
        dyn_state_done(&s);
        s = (DynState) {};
        ASSERT_EQ_INT(run_trace(&p, &s, trace, ELEMENTSOF(trace), 0, flips), 1);
}

TEST(unknown_dispatch_busy_satisfies_nothing) {
        Condition gt, lt;
        Signals unknown = { .valid = true, .dispatch_busy = -1 }, idle = { .valid = true, .dispatch_busy = 0 };

        ASSERT_EQ_INT(condition_parse("dispatch_busy > 3", &gt), 0);
        ASSERT_EQ_INT(condition_parse("dispatch_busy < 1", &lt), 0);
        ASSERT_TRUE(!condition_holds(&gt, &unknown) && !condition_holds(&lt, &unknown));
        ASSERT_TRUE(condition_holds(&lt, &idle));
}

/* A window over ticks where dispatch_busy was unknown (-1) on some:
 * the mean is of the known ones (3 and 3 here: 3), not (3 - 1) / 2. */
TEST(window_leaves_unknown_dispatch_busy_out) {
        DynamicPolicy p = { .enabled = true, .enter_ticks = 1, .leave_ticks = 1, .window = 2, .min_dwell_ticks = 0,
                            .max_flips = 4, .flip_window_ticks = 100, .has_busy = true };
        _cleanup_(dyn_state_done) DynState s = {};
        Signals known = { .valid = true, .dispatch_busy = 3 }, unknown = { .valid = true, .dispatch_busy = -1 };
        DynDecision d;

        ASSERT_EQ_INT(condition_parse("dispatch_busy > 2", &p.enter[p.n_enter++]), 0);
        ASSERT_EQ_INT(condition_parse("dispatch_busy < 1", &p.leave[p.n_leave++]), 0);
        ASSERT_EQ_INT(dyn_state_fit(&s, &p), 0);
        ASSERT_TRUE(dynamic_step(&p, &s, &unknown, 0, &d) == 0 && !d.flip);
        ASSERT_TRUE(dynamic_step(&p, &s, &known, 1, &d) == 0 && d.flip && d.to_busy);
}

/* wpct in a tick without I/O is unknown: neither "mostly writes" nor
 * "mostly reads" holds, so an idle tick neither enters nor leaves. */
TEST(unknown_mix_satisfies_nothing) {
        Condition gt, lt;
        Signals idle = { .valid = true, .dispatch_busy = SIGNAL_UNKNOWN, .wpct = SIGNAL_UNKNOWN,
                         .rkb = SIGNAL_UNKNOWN, .wkb = SIGNAL_UNKNOWN, .merge_pct = SIGNAL_UNKNOWN };
        Signals reads = idle;

        reads.wpct = 0;
        ASSERT_TRUE(condition_parse("wpct > 50", &gt) == 0 && gt.signal == SIGNAL_WPCT);
        ASSERT_EQ_INT(condition_parse("wpct < 10", &lt), 0);
        ASSERT_TRUE(!condition_holds(&gt, &idle) && !condition_holds(&lt, &idle));
        ASSERT_TRUE(condition_holds(&lt, &reads) && !condition_holds(&gt, &reads));
        ASSERT_TRUE(condition_parse("merge_pct >= 0", &gt) == 0 && !condition_holds(&gt, &idle));
}

/* A window of 3 over an idle tick, writes of 256 KiB and writes of 512
 * KiB: the mean write size is 384 KiB, not 256 (idle counted as 0) or 255.7
 * (counted as the -1 that stands for unknown). A window of idle ticks only
 * stays unknown, and "wkb < 64" does not fire on it. */
TEST(window_leaves_unknown_mix_out) {
        DynamicPolicy p = { .enabled = true, .enter_ticks = 1, .leave_ticks = 1, .window = 3, .min_dwell_ticks = 0,
                            .max_flips = 4, .flip_window_ticks = 100, .has_busy = true };
        _cleanup_(dyn_state_done) DynState s = {};
        Signals idle = { .valid = true, .wpct = SIGNAL_UNKNOWN, .rkb = SIGNAL_UNKNOWN, .wkb = SIGNAL_UNKNOWN },
                w256 = { .valid = true, .wpct = 100, .rkb = SIGNAL_UNKNOWN, .wkb = 256 },
                w512 = { .valid = true, .wpct = 100, .rkb = SIGNAL_UNKNOWN, .wkb = 512 };
        DynDecision d;

        ASSERT_EQ_INT(condition_parse("wkb > 350", &p.enter[p.n_enter++]), 0);
        ASSERT_EQ_INT(condition_parse("wkb < 64", &p.leave[p.n_leave++]), 0);
        ASSERT_EQ_INT(dyn_state_fit(&s, &p), 0);
        ASSERT_TRUE(dynamic_step(&p, &s, &idle, 0, &d) == 0 && !d.flip);
        ASSERT_TRUE(dynamic_step(&p, &s, &w256, 1, &d) == 0 && !d.flip);
        ASSERT_TRUE(dynamic_step(&p, &s, &w512, 2, &d) == 0 && d.flip && d.to_busy);
        ASSERT_STREQ(d.reason, "wkb > 350 (384.0) for 1 ticks");
        for (uint64_t t = 3; t < 8; t++)
                ASSERT_TRUE(dynamic_step(&p, &s, &idle, t, &d) == 0 && !d.flip);
        ASSERT_TRUE(s.busy);
}

TEST(conditions_parse) {
        Condition c;
        char buf[64];

        ASSERT_TRUE(condition_parse("util >= 80.5", &c) == 0 && c.signal == SIGNAL_UTIL && c.op == CMP_GE);
        ASSERT_EQ_INT(condition_format(&c, buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "util >= 80.5");
        ASSERT_TRUE(condition_parse("util => 80", &c) < 0);
        ASSERT_TRUE(condition_parse("speed > 1", &c) < 0);
        ASSERT_TRUE(condition_parse("util > fast", &c) < 0);
        ASSERT_TRUE(condition_parse("util > 1 extra", &c) < 0);
        ASSERT_TRUE(condition_parse("util >", &c) < 0);
}
