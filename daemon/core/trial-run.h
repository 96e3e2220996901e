/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* trial-run: a trial in time. trial.c turns windows into a verdict; this
 * turns the tick's clock and samples into windows, and says at each tick
 * which arm must be in force: the step between the statistics and the
 * daemon's writes (issue #28). Pure: the caller passes the time and the
 * device's cumulative sample; nothing here reads, writes or allocates.
 *
 * A switch is followed by a settle time whose I/O is not counted (the
 * queue freeze and the drain of requests queued under the other arm).
 * Switches are bounded per hour: when the budget is spent, the arm in
 * force stays and no window counts until a switch is allowed again. A
 * trial that runs out of time, or sees another device's sample (the
 * device went and another came under its name), keeps the incumbent. */

#include <stdbool.h>
#include <stdint.h>

#include "sample.h"
#include "trial.h"

/* The most switches an hour's budget can hold: the ring of their times. */
#define TRIAL_SWITCHES_MAX 64

/* The times of a device's last switches, across its candidates and its
 * trials: the budget is the device's, not one run's (a trial of two
 * candidates, or a re-trial after a workload's change, must not get a
 * fresh hour). The newest TRIAL_SWITCHES_MAX, enough for any budget. */
typedef struct SwitchBudget {
        uint64_t at_ms[TRIAL_SWITCHES_MAX];
        unsigned n, next;
} SwitchBudget;

/* Whether fewer than per_hour of b's switches fall in the hour up to now_ms
 * (one in the future, a clock that went back, counts). */
bool switch_budget_allows(const SwitchBudget *b, unsigned per_hour, uint64_t now_ms);
void switch_budget_spend(SwitchBudget *b, uint64_t now_ms);

typedef struct TrialRunConfig {
        uint64_t window_ms;             /* each counted window */
        uint64_t settle_ms;             /* after a switch, not counted */
        uint64_t max_duration_ms;       /* from the start: then the incumbent is kept */
        unsigned max_switches_per_hour; /* 1..TRIAL_SWITCHES_MAX */
} TrialRunConfig;

void trial_run_config_default(TrialRunConfig *ret);
/* 0 or -EINVAL: a window or duration of 0, a budget out of range, a
 * settle time not shorter than a window. */
int trial_run_config_check(const TrialRunConfig *c);

typedef enum TrialArm {
        TRIAL_ARM_INCUMBENT,
        TRIAL_ARM_CANDIDATE,
} TrialArm;

typedef enum TrialRunPhase {
        TRIAL_RUN_SETTLING,     /* switched; counting starts at settle's end */
        TRIAL_RUN_COUNTING,     /* a window is open */
        TRIAL_RUN_HELD,         /* the next arm needs a switch the budget has not */
        TRIAL_RUN_DONE,
} TrialRunPhase;

typedef struct TrialStep {
        TrialArm arm;           /* what must be in force after this tick */
        bool switch_now;        /* arm differs from what was in force before */
        bool done;              /* the trial is over: arm is what to keep */
} TrialStep;

typedef struct TrialRun {
        TrialRunConfig config;
        TrialState stats;
        TrialRunPhase phase;
        TrialArm arm;
        bool timed_out, device_changed;
        uint64_t started_ms, phase_ms;  /* when the trial, the phase began */
        DiskStat window_start;          /* the sample the open window counts from */
        SwitchBudget switches;          /* spent before it (the device's), and by it */
} TrialRun;

/* -EINVAL for a bad config. spent: the device's switches before this
 * run (NULL: none). The first arm the schedule asks for is in ret_step:
 * the caller writes it (a switch when it is the candidate) and calls
 * trial_run_tick() at each tick after. */
int trial_run_start(TrialRun *r, const TrialRunConfig *rc, const TrialConfig *tc, uint64_t seed,
                    bool candidate_cheaper, const SwitchBudget *spent, uint64_t now_ms, const DiskStat *sample,
                    TrialStep *ret_step);
/* Each tick, with the time (monotonic: a time before the current phase
 * began is taken as its start) and the device's sample. After done, the
 * same step again. */
TrialStep trial_run_tick(TrialRun *r, uint64_t now_ms, const DiskStat *sample);
/* The statistics' result; a run out of time or of its device reads as
 * inconclusive, with the reason. */
TrialResult trial_run_result(const TrialRun *r);
