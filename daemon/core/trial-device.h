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

#include "decide.h"
#include "plan.h"
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
        char incumbent[SCHED_CHOICE_TEXT_MAX];    /* what it ran against, as scheduler= names it */
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
        SchedChoice candidate_arm;      /* the running candidate over what is kept */
        DiskStat waiting_from;  /* the sample the pending candidate began waiting for I/O at */
        bool has_waiting_from;
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
        bool budget_held;       /* done, and a re-trial waits for a switch of the hour */
} DeviceTrial;

/* -EINVAL when config says no candidate or a bad time (policy.c checked a
 * [Trial]'s; blkpolicyctl's come through here). */
int device_trial_init(DeviceTrial *t, const TrialPolicy *config, bool by_hand, uint64_t seed);

/* What an earlier trial before kept is the incumbent of t's first
 * candidate (a new trial on the same device). */
void device_trial_carry_kept(DeviceTrial *t, const DeviceTrial *before);

/* The switches of the hour are the device's: a trial by hand after
 * another spends from what before spent. (A reload that changes the
 * [Trial] starts a new hour: another trial, the admin's.) */
void device_trial_carry_switches(DeviceTrial *t, const DeviceTrial *before);
/* The switches taking done's verdict again takes at the least: one to
 * memo's setting when it is not in force (memo NULL: to the policies'),
 * two more for a new trial (its candidate and back). */
unsigned device_trial_again_needs(const DeviceTrial *done, const TrialMemo *memo);
/* Whether t's budget (max_switches_per_hour) has n switches left now. */
bool device_trial_may_switch(const DeviceTrial *t, uint64_t now_ms, unsigned n);
/* t, new, takes done's place after its verdict (a re-trial): its
 * retrials count on, it spends from done's hour, and one switch more when
 * what it puts in force (the policies', a remembered verdict) is not what
 * done kept. 1 then, the arm in force changed. */
int device_trial_follow(DeviceTrial *t, const DeviceTrial *done, uint64_t now_ms);

/* A schedule's seed for the device major:minor from entropy (the daemon:
 * the clock; a replay: the recording's, else 0). */
uint64_t device_trial_seed(uint64_t entropy, unsigned major, unsigned minor);

/* Waiting for its next candidate or running one (NULL: no trial, no). */
bool device_trial_live(const DeviceTrial *t);

/* Layers t's arm over the policies' in a decide() (t NULL: none). */
void device_trial_decide_input(const DeviceTrial *t, DecideInput *in);

/* The scheduler to layer over the policies' now, NULL for theirs. Points
 * into t. */
const SchedChoice *device_trial_arm(const DeviceTrial *t);


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
 * candidate back (what was kept before it stays): a switch spent at
 * now_ms, never held. 1 when the arm in force changed. */
int device_trial_stop(DeviceTrial *t, const char *why, uint64_t now_ms);

/* Done at once, before any candidate, from a remembered verdict taken
 * age_ms ago: memo's setting kept (or the incumbent, when no candidate
 * won), its shape the one watched from the next device_trial_watch(). 1
 * when the arm in force changed. */
int device_trial_recall(DeviceTrial *t, const TrialMemo *memo, uint64_t age_ms);

/* Each tick once done: the first takes the shape of the trial's traffic
 * and starts watching it. True when the workload is no longer the one the
 * verdict was taken on (confirmed over TRIAL_SHAPE_CONFIRM windows in a
 * row; the new shape in t->watch.last), or when a trial that counted
 * no window sees I/O at last: a new trial may decide. */
bool device_trial_watch(DeviceTrial *t, uint64_t now_ms, const DiskStat *sample);

/* What a remembered verdict holds of t, done and decided on I/O: false
 * when there is nothing to remember (stopped, recalled, no I/O). The key's
 * identity, model, kernel and fingerprint are the caller's. */
bool device_trial_memo(const DeviceTrial *t, uint64_t now_sec, TrialMemo *memo);

/* Why a device may not run a trial under plan, for what the plan and its
 * facts say; NULL when they allow one. The daemon adds its modes (observe,
 * a pause, --once ...) before it; --replay asks the same. Only where a
 * policy manages the device, and not where a state machine flips the
 * scheduler too. */
const char *trial_plan_why_not(const Plan *plan, const DeviceFacts *facts);

/* What is in force before t's pending candidate, as scheduler= names it:
 * what a trial kept, else plan's scheduler, else the kernel's. */
void device_trial_incumbent(const DeviceTrial *t, const Plan *plan, const DeviceFacts *facts, char *buf, size_t size);

typedef enum TrialBegin {
        TRIAL_BEGAN,            /* the pending candidate runs */
        TRIAL_BEGIN_IN_FORCE,   /* skipped: it is what is in force already */
        TRIAL_BEGIN_LACKING,    /* skipped: the device or kernel does not have it */
        TRIAL_BEGIN_IDLE,       /* not yet: no I/O since it waits (an idle disk stays on its incumbent) */
} TrialBegin;

/* Starts t's pending candidate at a tick, or skips it: against what is in
 * force under plan, decided for in (its trial_arm is not looked at) with
 * the candidate layered to see whether the device takes it. The daemon's
 * tick and --replay both start candidates here. Returns 1 when the arm in
 * force changed (a pass must write it), 0, -EINVAL (t's config). */
int device_trial_begin(DeviceTrial *t, const Plan *plan, const DecideInput *in, uint64_t now_ms,
                       const DiskStat *sample, TrialBegin *ret);

/* The running candidate's result so far, or the last outcome's; NULL
 * before any. */
const TrialOutcome *device_trial_last(const DeviceTrial *t);
