/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A device's trial in the daemon (issue #28, docs/trials.md): whether d
 * may run one, its start from the plan's [Trial] or from blkpolicyctl, its
 * step at each tick, its end. The arm in force is a layer decide() puts
 * over the policies' scheduler (device_trial_input()), so every switch is
 * a pass like any other, through reconcile and the records. The trial's
 * state is d's (its DeviceExtra); the tick and the commands ask through
 * these functions, and make the passes that write a switch themselves
 * (device_process(): this file is below device-pass.c, which asks it
 * after each decide()). Only -ENOMEM is returned as an error. */
#include <inttypes.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "decide.h"
#include "device-internal.h"
#include "device-trial.h"
#include "device-trial-memory.h"
#include "device.h"
#include "log.h"
#include "record.h"
#include "util.h"

static DeviceTrial *trial_of(const Device *d) {
        return d->extra ? d->extra->trial : NULL;
}

void device_trial_input(const Device *d, DecideInput *in) {
        device_trial_decide_input(trial_of(d), in);
}

/* Why d may not run a trial under plan now; NULL when it may. Only where
 * blkpolicyd writes, and where the plan allows one (trial_plan_why_not(),
 * which --replay asks too). */
static const char *trial_why_not(const DeviceContext *c, const Device *d, const Plan *plan) {
        const char *why;

        if (c->once)
                return "--once";
        if (c->stopping)
                return "stopping";
        why = device_write_why_not(c, d);
        return why ?: trial_plan_why_not(plan, d->kind->facts);
}

static void trial_free(Device *d) {
        if (!d->extra)
                return;
        d->extra->trial = mfree(d->extra->trial);
        device_extra_trim(d);
}

static uint64_t trial_seed(const Device *d) {
        dev_t devnum = device_devnum(d);

        return device_trial_seed(clock_usec(CLOCK_REALTIME), major(devnum), minor(devnum));
}

/* A new trial of config on d, waiting for the next tick; what an earlier
 * one kept is the incumbent of its first candidate. -EINVAL: config. */
static int trial_new(const DeviceContext *c, Device *d, const TrialPolicy *config, bool by_hand) {
        DeviceTrial *old = trial_of(d), *t = calloc(1, sizeof(DeviceTrial));
        DeviceExtra *x = t ? device_extra(d) : NULL;
        int r;

        if (!x) {
                free(t);
                return -ENOMEM;
        }
        r = device_trial_init(t, config, by_hand, trial_seed(d));
        if (r < 0) {
                free(t);
                device_extra_trim(d);
                return r;
        }
        device_trial_carry_kept(t, old);
        device_trial_carry_switches(t, old);
        free(old);
        x->trial = t;
        if (c->record)
                record_trial_start(c->record, clock_usec(CLOCK_MONOTONIC), d->name, t);
        return 0;
}

/* A [Trial]'s new trial: done at once when a verdict is remembered for
 * d (before the pass writes anything: a restart takes the disk over as the
 * last run left it), else its first candidate begins at the next tick. 1
 * when the arm in force changed. */
static int trial_first(const DeviceContext *c, Device *d, const Plan *plan) {
        DeviceTrial *t = trial_of(d);
        char incumbent[SCHED_CHOICE_TEXT_MAX];
        DeviceFacts view;

        device_trial_incumbent(t, plan, device_facts(d, &view), incumbent, sizeof(incumbent));
        log_info("%s: a trial of %u candidate(s) against %s (%s)", d->name, t->config.n_candidates, incumbent,
                 plan->trial_source);
        return device_trial_memory_recall(d, t, device_trial_memory_find(c, d, t, incumbent, NULL));
}

/* Stops d's trial (why), in the recording too. */
static int trial_stop(const DeviceContext *c, Device *d, const char *why) {
        log_info("%s: trial stopped (%s), the incumbent is back", d->name, why);
        if (c->record)
                record_trial_stop(c->record, clock_usec(CLOCK_MONOTONIC), d->name, why);
        return device_trial_stop(trial_of(d), why, clock_usec(CLOCK_MONOTONIC) / 1000);
}

int device_trial_after_decide(DeviceContext *c, Device *d, const Plan *plan) {
        DeviceTrial *t = trial_of(d);
        const char *why = trial_why_not(c, d, plan);
        int changed = 0, r;

        if (t && !t->by_hand && !(plan->trial && trial_policy_equal(plan->trial, &t->config))) {
                /* the [Trial] it ran is gone or another: what it kept goes too */
                log_info("%s: its [Trial] changed, the trial ends and the policies' scheduler is back", d->name);
                if (c->record && device_trial_live(t))
                        record_trial_stop(c->record, clock_usec(CLOCK_MONOTONIC), d->name, "its [Trial] changed");
                changed = device_trial_arm(t) != NULL;
                trial_free(d);
                t = NULL;
        }
        if (device_trial_live(t) && why)
                changed |= trial_stop(c, d, why);
        if (!t && !why && plan->trial) {
                r = trial_new(c, d, plan->trial, false);
                if (r == -ENOMEM)
                        return r;
                if (r == 0)
                        changed |= trial_first(c, d, plan);
        }
        return changed;
}

static int trial_begin_candidate(const DeviceContext *c, Device *d, DeviceTrial *t, const DiskStat *st,
                                 uint64_t now_ms) {
        DeviceFacts view;
        DecideInput in = { .facts = device_facts(d, &view), .caps = c->caps, .policies = *c->policies };
        char name[SCHED_CHOICE_TEXT_MAX];
        TrialBegin begin;
        int r;

        (void) sched_choice_format(device_trial_pending(t), name, sizeof(name));
        r = device_trial_begin(t, device_plan(d), &in, now_ms, st, &begin);
        if (begin == TRIAL_BEGIN_LACKING)
                log_info("%s: trial candidate %s skipped: the device or kernel does not have it", d->name, name);
        else if (begin == TRIAL_BEGAN && r >= 0)
                log_info("%s: trial of %s against %s begins", d->name, name, device_trial_last(t)->incumbent);
        return r > 0;
}

static void log_outcome(const Device *d, const TrialOutcome *o) {
        char name[SCHED_CHOICE_TEXT_MAX];

        (void) sched_choice_format(&o->candidate, name, sizeof(name));
        log_notice("%s: trial of %s against %s: %s, %s kept (%.2fx [%.2f, %.2f], %u pairs): %s", d->name, name,
                   o->incumbent, trial_verdict_to_string(o->result.verdict),
                   o->result.keep_candidate ? name : o->incumbent, o->result.ratio, o->result.ratio_lo,
                   o->result.ratio_hi, o->result.pairs, o->result.reason);
}

/* Why the arm the trial runs is not what the device's last pass left in
 * force (the write failed, the kernel kept another): the windows would
 * measure the wrong arm. NULL when it is in force. */
static const char *trial_item_not_written(const PlanItem *s) {
        switch (s->result) {
        case RESULT_FAILED:
        case RESULT_RETRY:
        case RESULT_UNSUPPORTED:
                return "its setting could not be written";
        case RESULT_NOT_KEPT:
                return "the kernel did not keep its setting";
        default:
                return NULL;
        }
}

static const char *trial_arm_not_written(const Device *d, const DeviceTrial *t) {
        const PlanItem *s = plan_find(device_plan(d), TUNABLE_SCHEDULER);
        const PlanItem *nr = plan_find(device_plan(d), TUNABLE_NR_REQUESTS);
        const SchedChoice *arm = device_trial_arm(t);

        if (arm && arm->nr_requests && (!nr || trial_item_not_written(nr)))
                return nr ? trial_item_not_written(nr) : "its nr_requests is not set";
        if (!s)         /* the kernel's own, where no policy sets one, is the incumbent */
                return arm && arm->name[0] ? "its scheduler is not set" : NULL;
        return trial_item_not_written(s);
}

/* A fresh trial of d's [Trial] in place of the one done, done at once
 * from memo when there is one; the hour's switches are still spent. 1
 * when the arm in force changed; -ENOMEM. */
static int trial_again(const DeviceContext *c, Device *d, const TrialMemo *memo, uint64_t now_ms) {
        DeviceTrial done = *trial_of(d);
        int r;

        trial_free(d);          /* not trial_new()'s carry: the policies' scheduler is the incumbent again */
        r = trial_new(c, d, &done.config, false);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        (void) device_trial_memory_recall(d, trial_of(d), memo);
        return device_trial_follow(trial_of(d), &done, now_ms);
}

/* Whether t's verdict may be taken again now (why), with memo or a new
 * trial: its hour has the switches that takes (a workload that changes
 * its shape every few windows must not switch the scheduler at each
 * change, nor drop a verdict for a trial that cannot run). Said once a
 * wait. */
static bool trial_again_allowed(Device *d, DeviceTrial *t, const TrialMemo *memo, uint64_t now_ms, const char *why) {
        if (device_trial_may_switch(t, now_ms, device_trial_again_needs(t, memo))) {
                t->budget_held = false;
                return true;
        }
        if (!t->budget_held)
                log_info("%s: %s, but its %u switches of the hour are spent: the verdict stays until they are "
                         "free", d->name, why, t->config.max_switches_per_hour);
        t->budget_held = true;
        return false;
}

/* A [Trial]'s verdict, each tick: taken again once older than max_age, or
 * when the workload is no longer what it was taken on (from memory when
 * that shape was seen before), when the switch budget allows. 1 when the
 * arm in force changed. */
static int trial_keep_watch(DeviceContext *c, Device *d, DeviceTrial *t, const DiskStat *st, uint64_t now_ms) {
        const TrialMemo *memo;
        char shape[64];
        TrialShape now;

        /* nor where no trial may run now (paused, overridden): a re-trial
         * there would be stopped at once, and the verdict lost with it */
        if (t->by_hand || t->phase != TRIAL_PHASE_DONE || d->job || trial_why_not(c, d, device_plan(d)))
                return 0;
        if (t->watching && now_ms - t->decided_ms > t->config.max_age_ms) {
                if (!trial_again_allowed(d, t, NULL, now_ms, "its trial's verdict is older than max_age"))
                        return 0;
                log_info("%s: its trial's verdict is older than max_age, the trial runs again", d->name);
                return trial_again(c, d, NULL, now_ms);
        }
        if (!device_trial_watch(t, now_ms, st) || !t->config.retrial_on_shape) {
                if (t->watch.differing == 0)    /* the change is gone: a new one is said again */
                        t->budget_held = false;
                return 0;
        }
        now = t->watch.last;
        memo = device_trial_memory_find(c, d, t, t->n_outcomes ? t->outcomes[0].incumbent : "", &now);
        if (!trial_again_allowed(d, t, memo, now_ms, "its workload changed"))
                return 0;
        (void) trial_shape_format(&now, shape, sizeof(shape));
        log_info("%s: its workload changed (now %s), the trial runs again", d->name, shape);
        return trial_again(c, d, memo, now_ms);
}

int device_trial_step(DeviceContext *c, Device *d, const DiskStat *st, uint64_t now_ms) {
        DeviceTrial *t = trial_of(d);
        const char *why;
        int changed, r;

        if (!t)
                return 0;
        if (t->phase == TRIAL_PHASE_DONE)
                return trial_keep_watch(c, d, t, st, now_ms);
        if (!device_trial_live(t))
                return 0;
        /* a switch not written yet, or a pass that may write one: its
         * settle, or its window, begins once it is back; and d's plan is
         * the one before it until then */
        if (d->job) {
                if (c->record)  /* a replay must not step it either */
                        record_trial_wait(c->record, d->name);
                return 0;
        }
        why = trial_why_not(c, d, device_plan(d));
        if (!why && t->phase == TRIAL_PHASE_RUNNING)
                why = trial_arm_not_written(d, t);
        if (why)
                return trial_stop(c, d, why);
        if (t->phase == TRIAL_PHASE_WAITING)
                changed = trial_begin_candidate(c, d, t, st, now_ms);
        else {
                changed = device_trial_tick(t, now_ms, st);
                if (t->phase != TRIAL_PHASE_RUNNING)
                        log_outcome(d, device_trial_last(t));
        }
        if (changed > 0)
                log_info("%s: trial switch to the %s, %" PRIu64 " ms into the trial of its candidate", d->name,
                         t->arm == TRIAL_ARM_CANDIDATE ? "candidate" : "incumbent", now_ms - t->started_ms);
        if (t->phase == TRIAL_PHASE_DONE) {
                /* the first look takes the shape of what it decided on */
                (void) device_trial_watch(t, now_ms, st);
                r = device_trial_memory_save(c, d, t);
                if (r < 0)
                        return r;
        }
        return changed;
}

int device_trial_request(DeviceContext *c, Device *d, const SchedChoice *candidates, unsigned n,
                         const char **why_not) {
        const Plan *plan = device_plan(d);
        DeviceTrial *t = trial_of(d);
        TrialPolicy config = plan->trial ? *plan->trial : TRIAL_POLICY_DEFAULTS;
        int r;

        *why_not = trial_why_not(c, d, plan);
        if (*why_not)
                return -EPERM;
        if (n > 0) {
                memcpy(config.candidates, candidates, sizeof(SchedChoice) * n);
                config.n_candidates = n;
        } else if (!plan->trial) {
                *why_not = "no candidate given, and its policy has no [Trial]";
                return -EINVAL;
        }
        if (device_trial_live(t))
                (void) device_trial_stop(t, "another trial asked for", clock_usec(CLOCK_MONOTONIC) / 1000);
        r = trial_new(c, d, &config, true);
        if (r == -EINVAL)
                *why_not = "the candidates or the [Trial] settings are not valid";
        if (r < 0)
                return r;
        log_info("%s: a trial of %u candidate(s) asked for, begins at the next tick", d->name, config.n_candidates);
        /* the arm of the trial stopped may differ from what it kept: the caller's pass writes it */
        return 1;
}

int device_trial_end(const DeviceContext *c, Device *d) {
        DeviceTrial *t = trial_of(d);

        if (!device_trial_live(t))
                return -ENOENT;
        return trial_stop(c, d, "blkpolicyctl trial --stop");
}
