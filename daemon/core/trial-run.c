/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>

#include "trial-run.h"
#include "util.h"

#define HOUR_MS (3600ULL * 1000)

void trial_run_config_default(TrialRunConfig *ret) {
        /* 10 s windows: a few hundred requests at the slowest device the
         * issue measured (a 400 IOPS cap); 2 s settle: a freeze is 24-44 ms
         * here and a deep queue drains well within it. 30 switches an hour
         * cost at most 1.3 s of freezes (0.04%). */
        *ret = (TrialRunConfig) {
                .window_ms = 10ULL * 1000,
                .settle_ms = 2ULL * 1000,
                .max_duration_ms = HOUR_MS,
                .max_switches_per_hour = 30,
        };
}

int trial_run_config_check(const TrialRunConfig *c) {
        if (c->window_ms == 0 || c->max_duration_ms == 0 || c->settle_ms >= c->window_ms)
                return -EINVAL;
        if (c->max_switches_per_hour < 1 || c->max_switches_per_hour > TRIAL_SWITCHES_MAX)
                return -EINVAL;
        return 0;
}

static TrialArm arm_of(TrialAction a) {
        return a == TRIAL_RUN_CANDIDATE ? TRIAL_ARM_CANDIDATE : TRIAL_ARM_INCUMBENT;
}

bool switch_budget_allows(const SwitchBudget *b, unsigned per_hour, uint64_t now_ms) {
        unsigned in_hour = 0;

        for (unsigned i = 0; i < b->n; i++)
                if (b->at_ms[i] > now_ms || now_ms - b->at_ms[i] < HOUR_MS)
                        in_hour++;
        return in_hour < per_hour;
}

void switch_budget_spend(SwitchBudget *b, uint64_t now_ms) {
        b->at_ms[b->next] = now_ms;
        b->next = (b->next + 1) % TRIAL_SWITCHES_MAX;
        if (b->n < TRIAL_SWITCHES_MAX)
                b->n++;
}

static void open_window(TrialRun *r, uint64_t now_ms, const DiskStat *sample) {
        r->phase = TRIAL_RUN_COUNTING;
        r->phase_ms = now_ms;
        r->window_start = *sample;
}

/* Puts arm in force: a switch (and settle) when it differs from the one
 * in force, a new window at once when it does not, a hold when the
 * budget has no switch left. */
static TrialStep go_to(TrialRun *r, TrialArm arm, uint64_t now_ms, const DiskStat *sample) {
        if (arm == r->arm) {
                open_window(r, now_ms, sample);
                return (TrialStep) { .arm = r->arm };
        }
        if (!switch_budget_allows(&r->switches, r->config.max_switches_per_hour, now_ms)) {
                r->phase = TRIAL_RUN_HELD;
                r->phase_ms = now_ms;
                return (TrialStep) { .arm = r->arm };
        }
        switch_budget_spend(&r->switches, now_ms);
        r->arm = arm;
        r->phase = TRIAL_RUN_SETTLING;
        r->phase_ms = now_ms;
        return (TrialStep) { .arm = arm, .switch_now = true };
}

/* The end: what to keep is put in force whatever the budget says, since
 * putting the incumbent back is the guardrail. */
static TrialStep finish(TrialRun *r, TrialArm keep, uint64_t now_ms) {
        TrialStep step = { .arm = keep, .switch_now = keep != r->arm, .done = true };

        if (step.switch_now)    /* spent all the same: the next trial sees it */
                switch_budget_spend(&r->switches, now_ms);

        r->arm = keep;
        r->phase = TRIAL_RUN_DONE;
        return step;
}

int trial_run_start(TrialRun *r, const TrialRunConfig *rc, const TrialConfig *tc, uint64_t seed,
                    bool candidate_cheaper, const SwitchBudget *spent, uint64_t now_ms, const DiskStat *sample,
                    TrialStep *ret_step) {
        SwitchBudget before = spent ? *spent : (SwitchBudget) {};       /* spent may be r's own */
        int k;

        if (trial_run_config_check(rc) < 0)
                return -EINVAL;
        *r = (TrialRun) { .config = *rc, .arm = TRIAL_ARM_INCUMBENT, .started_ms = now_ms, .window_start = *sample,
                          .switches = before };
        k = trial_state_init(&r->stats, tc, seed, candidate_cheaper);
        if (k < 0)
                return k;
        *ret_step = go_to(r, arm_of(trial_next(&r->stats)), now_ms, sample);
        return 0;
}

static TrialStep close_window(TrialRun *r, uint64_t now_ms, const DiskStat *sample) {
        TrialWindow w;
        TrialAction next;

        if (trial_window_from_samples(&r->window_start, sample, (double) (now_ms - r->phase_ms), &w) < 0)
                /* a window of no time (a clock that stood still): it tells nothing */
                w = (TrialWindow) { .duration_ms = 0 };
        next = trial_feed(&r->stats, &w);
        if (next == TRIAL_DECIDED)
                return finish(r, trial_result(&r->stats)->keep_candidate ? TRIAL_ARM_CANDIDATE : TRIAL_ARM_INCUMBENT,
                              now_ms);
        if (next == TRIAL_STOP)
                return finish(r, TRIAL_ARM_INCUMBENT, now_ms);
        return go_to(r, arm_of(next), now_ms, sample);
}

TrialStep trial_run_tick(TrialRun *r, uint64_t now_ms, const DiskStat *sample) {
        if (r->phase == TRIAL_RUN_DONE)
                return (TrialStep) { .arm = r->arm, .done = true };
        if (now_ms < r->phase_ms)
                now_ms = r->phase_ms;
        if (sample->major != r->window_start.major || sample->minor != r->window_start.minor) {
                /* the device went and another came under its name: what
                 * was measured was not this one's */
                r->device_changed = true;
                return finish(r, TRIAL_ARM_INCUMBENT, now_ms);
        }
        if (now_ms - r->started_ms >= r->config.max_duration_ms) {
                r->timed_out = true;
                return finish(r, TRIAL_ARM_INCUMBENT, now_ms);
        }
        switch (r->phase) {
        case TRIAL_RUN_SETTLING:
                if (now_ms - r->phase_ms >= r->config.settle_ms)
                        open_window(r, now_ms, sample);
                break;
        case TRIAL_RUN_HELD:
                return go_to(r, arm_of(trial_next(&r->stats)), now_ms, sample);
        case TRIAL_RUN_COUNTING:
                if (now_ms - r->phase_ms >= r->config.window_ms)
                        return close_window(r, now_ms, sample);
                break;
        case TRIAL_RUN_DONE:
                break;
        }
        return (TrialStep) { .arm = r->arm };
}

TrialResult trial_run_result(const TrialRun *r) {
        TrialResult res = *trial_result(&r->stats);

        if (res.verdict != TRIAL_UNDECIDED || !(r->timed_out || r->device_changed))
                return res;
        res.verdict = TRIAL_INCONCLUSIVE;
        res.keep_candidate = false;
        if (r->device_changed)
                snprintf(res.reason, sizeof(res.reason), "the device changed (%u:%u) after %u pairs: the incumbent is kept",
                         r->window_start.major, r->window_start.minor, res.pairs);
        else
                snprintf(res.reason, sizeof(res.reason), "max_duration reached after %u pairs: the incumbent is kept",
                         res.pairs);
        return res;
}
