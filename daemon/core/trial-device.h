/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* trial-device: one device's trials, candidate after candidate (issue
 * #28). trial-run.c runs one candidate against one incumbent in time; this
 * runs a [Trial]'s candidates in order, each against what is kept so far
 * (a winner is the incumbent of the next), and says which scheduler must
 * be in force: the arm decide() layers over the policies' own choice
 * (DecideInput.trial_arm). Pure: the caller passes the time and the
 * device's sample, writes what arm says through its passes, and decides
 * whether the device may run a trial at all. */

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "trial-memory.h"
#include "trial-run.h"
#include "trial-shape.h"

typedef enum TrialPhase {
        TRIAL_PHASE_WAITING,    /* the next candidate starts at the next tick */
        TRIAL_PHASE_RUNNING,
        TRIAL_PHASE_DONE,       /* every candidate tried: what is kept stays */
        TRIAL_PHASE_STOPPED,    /* ended before its verdict: the incumbent is back */
        _TRIAL_PHASE_MAX,
} TrialPhase;

const char *trial_phase_to_string(TrialPhase p);

/* One candidate's trial, as explain shows it. */
typedef struct TrialOutcome {
        SchedChoice candidate;
        char incumbent[SCHED_NAME_MAX + 16];    /* what it ran against, as scheduler= names it */
        bool skipped;           /* not run: the result's reason says why */
        bool stopped;           /* ended by hand, a pause, a reload ...: the result's reason says */
        TrialResult result;
} TrialOutcome;

typedef struct DeviceTrial {
        TrialPolicy config;     /* what started it: a reload that changes it ends it */
        bool by_hand;           /* blkpolicyctl trial, not the policy's [Trial] */
        TrialPhase phase;
        unsigned next;          /* the candidate running, or the next to run */
        bool has_kept;          /* a candidate won: the incumbent of what follows */
        SchedChoice kept;
        TrialArm arm;           /* in force while running */
        uint64_t seed;
        uint64_t started_ms;    /* of the candidate running */
        TrialRun run;
        TrialOutcome outcomes[SCHED_CHOICES_MAX];
        unsigned n_outcomes;
        /* the workload it decided on: from the first candidate's start
         * to the verdict (trial-shape.h), then watched for a change */
        DiskStat first;
        bool has_first, watching, has_shape;
        TrialShape shape;
        ShapeWatch watch;
        uint64_t decided_ms;    /* when it was done (a recalled verdict: when it was taken) */
        uint64_t recalled_age_ms;
        /* done from a remembered verdict (trial-memory.h), no candidate run */
        bool recalled;
        TrialVerdict recalled_verdict;
        double recalled_estimate;
        uint64_t recalled_at_sec;
        unsigned retrials;      /* trials of this [Trial] on the device before this one */
} DeviceTrial;

/* -EINVAL when config says no candidate or a bad time (policy.c checked a
 * [Trial]'s; blkpolicyctl's come through here). */
int device_trial_init(DeviceTrial *t, const TrialPolicy *config, bool by_hand, uint64_t seed);

/* The scheduler to layer over the policies' now, NULL for theirs. Points
 * into t. */
const SchedChoice *device_trial_arm(const DeviceTrial *t);

/* The same arm to a pass: both NULL (the policies'), or the same scheduler. */
bool device_trial_arm_same(const SchedChoice *a, const SchedChoice *b);

/* The candidate to start at this tick, NULL when none waits. */
const SchedChoice *device_trial_pending(const DeviceTrial *t);
/* The pending candidate is not run (it is the incumbent already, the
 * device cannot take it): why in its outcome; on to the next. */
void device_trial_skip(DeviceTrial *t, const char *incumbent, const char *why);
/* Starts the pending candidate against incumbent (as scheduler= names
 * what is in force now). Returns 1 when the arm in force changed (a pass
 * must write it), 0, or -EINVAL (t's config: never for one init took). */
int device_trial_start(DeviceTrial *t, const char *incumbent, uint64_t now_ms, const DiskStat *sample);
/* A tick of the running candidate: 1 when the arm in force changed. */
int device_trial_tick(DeviceTrial *t, uint64_t now_ms, const DiskStat *sample);
/* Ends what runs, why in its outcome, the incumbent of the running
 * candidate back (what was kept before it stays). 1 when the arm in force
 * changed. */
int device_trial_stop(DeviceTrial *t, const char *why);

/* Done at once, before any candidate, from a remembered verdict taken
 * age_ms ago: memo's setting kept (or the incumbent, when no candidate
 * won), its shape the one watched from the next device_trial_watch(). 1
 * when the arm in force changed. */
int device_trial_recall(DeviceTrial *t, const TrialMemo *memo, uint64_t age_ms);

/* Each tick once done: the first takes the shape of the trial's traffic
 * and starts watching it. True when the workload is no longer the one the
 * verdict was taken on (confirmed over TRIAL_SHAPE_CONFIRM spans of three
 * windows; the new shape in t->watch.last), or when a trial that counted
 * no window sees I/O at last: a new trial may decide. */
bool device_trial_watch(DeviceTrial *t, uint64_t now_ms, const DiskStat *sample);

/* What a remembered verdict holds of t, done and decided on I/O: false
 * when there is nothing to remember (stopped, recalled, no I/O). The key's
 * identity, model, kernel and fingerprint are the caller's. */
bool device_trial_memo(const DeviceTrial *t, uint64_t now_sec, TrialMemo *memo);

/* The running candidate's result so far, or the last outcome's; NULL
 * before any. */
const TrialOutcome *device_trial_last(const DeviceTrial *t);
