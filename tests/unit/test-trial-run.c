/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tests.h"
#include "trial-run.h"
#include "util.h"

#define TICK_MS 1000

/* A device under open-loop load: mib_per_s moved every second whatever
 * the arm, each MiB costing busy_ms of busy time under the incumbent and
 * effect times that under the candidate, with a few percent of noise. */
typedef struct Device {
        DiskStat stat;
        double mib_per_s, busy_ms, effect;
        uint64_t rng;
} Device;

static double noise(uint64_t *x) {
        *x = *x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        return 0.97 + 0.06 * (double) (*x >> 11) / 9007199254740992.0;
}

static void device_run_second(Device *d, TrialArm arm) {
        double mib = d->mib_per_s, busy = mib * d->busy_ms * (arm == TRIAL_ARM_CANDIDATE ? d->effect : 1) * noise(&d->rng);
        uint64_t ios = (uint64_t) (mib * 256);

        d->stat.c.rd_ios += ios;
        d->stat.c.rd_sectors += (uint64_t) (mib * 2048);
        d->stat.c.io_ticks += (uint64_t) (busy < 1000 ? busy : 1000);
        d->stat.c.time_in_queue += (uint64_t) (2 * busy);
}

typedef struct Outcome {
        TrialStep last;
        TrialResult result;
        unsigned switches, ticks, candidate_ticks;
        unsigned max_switches_in_an_hour;
        bool held;
} Outcome;

/* Ticks until the trial is done or limit ticks pass, with the arm the
 * steps say in force; counts the switches the caller would write. */
static Outcome drive(TrialRun *r, Device *d, const TrialRunConfig *rc, unsigned limit) {
        TrialConfig tc;
        TrialStep step;
        Outcome o = {};
        uint64_t now = 0;
        static uint64_t at[100000];

        trial_config_default(&tc);
        ASSERT_EQ_INT(trial_run_start(r, rc, &tc, 7, false, NULL, now, &d->stat, &step), 0);
        for (o.ticks = 0; o.ticks < limit && !step.done; o.ticks++) {
                if (step.switch_now)
                        at[o.switches++] = now;
                device_run_second(d, step.arm);
                o.candidate_ticks += step.arm == TRIAL_ARM_CANDIDATE;
                now += TICK_MS;
                step = trial_run_tick(r, now, &d->stat);
                o.held |= r->phase == TRIAL_RUN_HELD;
        }
        for (unsigned i = 0; i < o.switches; i++) {
                unsigned n = 0;

                for (unsigned j = i; j < o.switches && at[j] - at[i] < 3600 * 1000; j++)
                        n++;
                if (n > o.max_switches_in_an_hour)
                        o.max_switches_in_an_hour = n;
        }
        o.last = step;
        o.result = trial_run_result(r);
        return o;
}

static TrialRunConfig config(void) {
        TrialRunConfig c;

        trial_run_config_default(&c);
        return c;
}

TEST(config_checks) {
        TrialRunConfig c = config(), bad;

        ASSERT_EQ_INT(trial_run_config_check(&c), 0);
        bad = c, bad.window_ms = 0;
        ASSERT_EQ_INT(trial_run_config_check(&bad), -EINVAL);
        bad = c, bad.settle_ms = bad.window_ms;
        ASSERT_EQ_INT(trial_run_config_check(&bad), -EINVAL);
        bad = c, bad.max_switches_per_hour = 0;
        ASSERT_EQ_INT(trial_run_config_check(&bad), -EINVAL);
        bad = c, bad.max_switches_per_hour = TRIAL_SWITCHES_MAX + 1;
        ASSERT_EQ_INT(trial_run_config_check(&bad), -EINVAL);
        bad = c, bad.max_duration_ms = 0;
        ASSERT_EQ_INT(trial_run_config_check(&bad), -EINVAL);
}

TEST(a_faster_candidate_is_kept) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 10, .busy_ms = 40, .effect = 0.5, .rng = 1 };
        TrialRun r;
        Outcome o = drive(&r, &d, &c, 3600);

        ASSERT_TRUE(o.last.done);
        ASSERT_EQ_INT(o.last.arm, TRIAL_ARM_CANDIDATE);
        ASSERT_EQ_INT(o.result.verdict, TRIAL_CANDIDATE_WINS);
        ASSERT_TRUE(o.result.ratio > 1.8 && o.result.ratio < 2.2);
        ASSERT_TRUE(o.max_switches_in_an_hour <= c.max_switches_per_hour);
        /* and done is done: later ticks switch nothing */
        for (int i = 0; i < 20; i++) {
                TrialStep s = trial_run_tick(&r, 10000000 + i * TICK_MS, &d.stat);
                ASSERT_TRUE(s.done && !s.switch_now && s.arm == TRIAL_ARM_CANDIDATE);
        }
}

TEST(an_equal_candidate_leaves_the_incumbent) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 10, .busy_ms = 40, .effect = 1, .rng = 2 };
        TrialRun r;
        Outcome o = drive(&r, &d, &c, 3600);

        ASSERT_TRUE(o.last.done);
        ASSERT_EQ_INT(o.last.arm, TRIAL_ARM_INCUMBENT);
        ASSERT_TRUE(o.result.verdict == TRIAL_EQUAL || o.result.verdict == TRIAL_INCUMBENT);
        ASSERT_TRUE(!o.result.keep_candidate);
}

TEST(a_regressing_window_puts_the_incumbent_back_at_once) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 10, .busy_ms = 20, .effect = 3, .rng = 3 };
        TrialRun r;
        Outcome o = drive(&r, &d, &c, 3600);

        ASSERT_TRUE(o.last.done);
        ASSERT_EQ_INT(o.result.verdict, TRIAL_ABORTED);
        ASSERT_EQ_INT(o.last.arm, TRIAL_ARM_INCUMBENT);
        /* the first candidate window compared with an incumbent's is the
         * last: a schedule that starts with the candidate has one window
         * before any incumbent's to compare with, so at most two */
        ASSERT_TRUE(o.candidate_ticks <= 2 * (c.window_ms + c.settle_ms) / TICK_MS + 2);
        ASSERT_TRUE(o.switches <= 3);
        /* and the trial ends there, not when its time runs out */
        ASSERT_TRUE(o.ticks <= 3 * (c.window_ms + c.settle_ms) / TICK_MS + 3);
}

TEST(the_switch_budget_holds_and_the_trial_goes_on) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 10, .busy_ms = 40, .effect = 0.5, .rng = 4 };
        TrialRun r;
        Outcome o;

        c.max_switches_per_hour = 3;
        c.max_duration_ms = 24ULL * 3600 * 1000;
        o = drive(&r, &d, &c, 24 * 3600);
        ASSERT_TRUE(o.held);
        ASSERT_TRUE(o.max_switches_in_an_hour <= 3);
        ASSERT_TRUE(o.last.done);
        ASSERT_EQ_INT(o.result.verdict, TRIAL_CANDIDATE_WINS);
}

TEST(the_budget_counts_the_hour_up_to_now) {
        SwitchBudget b = {};

        ASSERT_TRUE(switch_budget_allows(&b, 1, 0));
        for (uint64_t at = 0; at < 3000; at += 1000)
                switch_budget_spend(&b, at);
        ASSERT_TRUE(!switch_budget_allows(&b, 3, 3000));
        ASSERT_TRUE(switch_budget_allows(&b, 4, 3000));
        /* the first is an hour old at 3600 s: out of it */
        ASSERT_TRUE(switch_budget_allows(&b, 3, 3600 * 1000));
        ASSERT_TRUE(!switch_budget_allows(&b, 3, 3600 * 1000 - 1));
        /* a switch after now (the clock went back) counts */
        b = (SwitchBudget) {};
        switch_budget_spend(&b, 5000);
        ASSERT_TRUE(!switch_budget_allows(&b, 1, 1000));
        /* the ring keeps the newest TRIAL_SWITCHES_MAX: a full hour two
         * hours after a full one is full */
        b = (SwitchBudget) {};
        for (unsigned i = 0; i < TRIAL_SWITCHES_MAX; i++)
                switch_budget_spend(&b, 0);
        for (unsigned i = 0; i < TRIAL_SWITCHES_MAX; i++)
                switch_budget_spend(&b, 2 * 3600 * 1000);
        ASSERT_EQ_INT(b.n, TRIAL_SWITCHES_MAX);
        ASSERT_TRUE(!switch_budget_allows(&b, TRIAL_SWITCHES_MAX, 2 * 3600 * 1000 + 1));
}

/* A run starts from what the device spent before it: a spent hour holds
 * its first switch until the oldest is an hour old; its last switch (to
 * what it keeps) is spent too, for the run after it. */
TEST(a_run_spends_from_the_devices_hour) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 10, .busy_ms = 40, .effect = 0.5, .rng = 9 };
        SwitchBudget spent = {};
        TrialConfig tc;
        TrialRun r;
        TrialStep step;
        uint64_t now = 0, first_switch = 0;
        unsigned switches = 0;

        c.max_switches_per_hour = 4;
        c.max_duration_ms = 24ULL * 3600 * 1000;
        trial_config_default(&tc);
        for (unsigned i = 0; i < 4; i++)
                switch_budget_spend(&spent, 1000ULL * i);
        now = 10 * 1000;
        ASSERT_EQ_INT(trial_run_start(&r, &c, &tc, 7, false, &spent, now, &d.stat, &step), 0);
        while (!step.done && now < 3 * 3600 * 1000ULL) {
                if (step.switch_now && !first_switch)
                        first_switch = now;
                switches += step.switch_now;
                device_run_second(&d, step.arm);
                now += TICK_MS;
                step = trial_run_tick(&r, now, &d.stat);
        }
        ASSERT_TRUE(step.done);
        ASSERT_TRUE(first_switch >= 3600 * 1000);       /* not before the first spent one is an hour old */
        ASSERT_EQ_INT(trial_run_result(&r).verdict, TRIAL_CANDIDATE_WINS);
        /* every switch is spent, the last one (to the winner) too */
        switches += step.switch_now;
        ASSERT_TRUE(step.switch_now);
        ASSERT_EQ_INT(r.switches.n, 4 + switches);
}

TEST(an_idle_device_never_decides_and_times_out_to_the_incumbent) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 0, .busy_ms = 40, .effect = 0.5, .rng = 5 };
        TrialRun r;
        Outcome o;

        c.max_duration_ms = 600 * 1000;
        o = drive(&r, &d, &c, 3600);
        ASSERT_TRUE(o.last.done);
        ASSERT_EQ_INT(o.ticks, 600);
        ASSERT_EQ_INT(o.last.arm, TRIAL_ARM_INCUMBENT);
        ASSERT_EQ_INT(o.result.verdict, TRIAL_INCONCLUSIVE);
        ASSERT_EQ_INT(o.result.pairs, 0);
        ASSERT_TRUE(strstr(o.result.reason, "max_duration") != NULL);
}

TEST(another_devices_sample_ends_the_trial_with_the_incumbent) {
        TrialRunConfig c = config();
        TrialConfig tc;
        TrialRun r;
        TrialStep step;
        DiskStat a = { .major = 7 }, b = { .major = 8 };

        trial_config_default(&tc);
        ASSERT_EQ_INT(trial_run_start(&r, &c, &tc, 7, false, NULL, 0, &a, &step), 0);
        step = trial_run_tick(&r, TICK_MS, &b);
        ASSERT_TRUE(step.done);
        ASSERT_EQ_INT(step.arm, TRIAL_ARM_INCUMBENT);
        ASSERT_EQ_INT(trial_run_result(&r).verdict, TRIAL_INCONCLUSIVE);
        ASSERT_TRUE(strstr(trial_run_result(&r).reason, "the device changed (7:0)") != NULL);
        /* and stays done whatever comes after */
        ASSERT_TRUE(trial_run_tick(&r, 2 * TICK_MS, &a).done);
}

TEST(time_going_back_is_taken_as_standing_still) {
        TrialRunConfig c = config();
        Device d = { .stat.major = 7, .mib_per_s = 10, .busy_ms = 40, .effect = 0.5, .rng = 6 };
        TrialConfig tc;
        TrialRun r;
        TrialStep step;

        trial_config_default(&tc);
        ASSERT_EQ_INT(trial_run_start(&r, &c, &tc, 7, false, NULL, 100000, &d.stat, &step), 0);
        device_run_second(&d, step.arm);
        step = trial_run_tick(&r, 5000, &d.stat);
        ASSERT_TRUE(!step.done && !step.switch_now);
        ASSERT_EQ_INT(trial_run_result(&r).windows, 0);
}
