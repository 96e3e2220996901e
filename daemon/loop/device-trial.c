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
#include <time.h>

#include "decide.h"
#include "device-internal.h"
#include "device-trial.h"
#include "device-trial-memory.h"
#include "device.h"
#include "log.h"
#include "util.h"

/* What a plan names as the trial's arm's source (a policy's name would
 * point into a set the plan may outlive). */
static const char SOURCE_POLICY[] = "trial";
static const char SOURCE_BY_HAND[] = "blkpolicyctl trial";

static DeviceTrial *trial_of(const Device *d) {
        return d->extra ? d->extra->trial : NULL;
}

static bool trial_live(const DeviceTrial *t) {
        return t && (t->phase == TRIAL_PHASE_WAITING || t->phase == TRIAL_PHASE_RUNNING);
}

void device_trial_input(const Device *d, DecideInput *in) {
        const DeviceTrial *t = trial_of(d);

        in->trial_arm = t ? device_trial_arm(t) : NULL;
        in->trial_source = t && t->by_hand ? SOURCE_BY_HAND : SOURCE_POLICY;
}

/* Why d may not run a trial under plan now; NULL when it may. Only where
 * blkpolicyd writes, and not where a state machine flips the scheduler
 * too. */
static const char *trial_why_not(const DeviceContext *c, const Device *d, const Plan *plan) {
        const char *why;

        if (c->once)
                return "--once";
        if (c->stopping)
                return "stopping";
        why = device_write_why_not(c, d);
        if (why)
                return why;
        if (!plan->managed || !plan->policy)
                return "no policy manages it";
        if (plan->dynamic)
                return "its policy has [Dynamic]";
        if (d->kind->facts->classes & CLASS_BIT(CLASS_BIO_BASED))
                return "bio-based: no I/O scheduler";
        return NULL;
}

static void trial_free(Device *d) {
        if (!d->extra)
                return;
        d->extra->trial = mfree(d->extra->trial);
        device_extra_trim(d);
}

static uint64_t trial_seed(const Device *d) {
        return clock_usec(CLOCK_REALTIME) ^ ((uint64_t) device_devnum(d) * 0x9E3779B97F4A7C15ULL);
}

/* A new trial of config on d, waiting for the next tick; what an earlier
 * one kept is the incumbent of its first candidate. -EINVAL: config. */
static int trial_new(Device *d, const TrialPolicy *config, bool by_hand) {
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
        if (old && old->has_kept) {
                t->has_kept = true;
                t->kept = old->kept;
        }
        free(old);
        x->trial = t;
        return 0;
}

/* What is in force before the pending candidate, as scheduler= names it:
 * what a trial kept, else the plan's scheduler, else the kernel's. */
static void trial_incumbent(const Device *d, const Plan *plan, const DeviceTrial *t, char *buf, size_t size) {
        const PlanItem *s = plan_find(plan, TUNABLE_SCHEDULER);
        const PlanItem *dd = plan_find(plan, (unsigned) tunable_find("mq-deadline", "dispatch_direct"));

        if (t->has_kept)
                (void) sched_choice_format(&t->kept, buf, size);
        else if (s && s->result != RESULT_UNSUPPORTED) {
                SchedChoice c = { .dispatch_direct = streq(s->target, "mq-deadline") && dd && streq(dd->target, "1") };

                (void) strscpy(c.name, sizeof(c.name), s->target);
                (void) sched_choice_format(&c, buf, size);
        } else
                (void) strscpy(buf, size, device_facts_scheduler(d->kind->facts));
}

/* A [Trial]'s new trial: done at once when a verdict is remembered for
 * d (before the pass writes anything: a restart takes the disk over as the
 * last run left it), else its first candidate begins at the next tick. 1
 * when the arm in force changed. */
static int trial_first(const DeviceContext *c, Device *d, const Plan *plan) {
        DeviceTrial *t = trial_of(d);
        char incumbent[SCHED_NAME_MAX + 16];

        trial_incumbent(d, plan, t, incumbent, sizeof(incumbent));
        if (t->phase == TRIAL_PHASE_WAITING)
                log_info("%s: a trial of %u candidate(s) against %s", d->name, t->config.n_candidates, incumbent);
        return device_trial_memory_recall(d, t, device_trial_memory_find(c, d, t, incumbent, NULL));
}

int device_trial_after_decide(DeviceContext *c, Device *d, const Plan *plan) {
        DeviceTrial *t = trial_of(d);
        const char *why = trial_why_not(c, d, plan);
        int changed = 0, r;

        if (t && !t->by_hand && !(plan->trial && trial_policy_equal(plan->trial, &t->config))) {
                /* the [Trial] it ran is gone or another: what it kept goes too */
                log_info("%s: its [Trial] changed, the trial ends and the policies' scheduler is back", d->name);
                changed = device_trial_arm(t) != NULL;
                trial_free(d);
                t = NULL;
        }
        if (trial_live(t) && why) {
                log_info("%s: trial stopped (%s), the incumbent is back", d->name, why);
                changed |= device_trial_stop(t, why);
        }
        if (!t && !why && plan->trial) {
                r = trial_new(d, plan->trial, false);
                if (r == -ENOMEM)
                        return r;
                if (r == 0)
                        changed |= trial_first(c, d, plan);
        }
        return changed;
}

/* Whether d takes candidate: decided with it in force, the scheduler is
 * not unsupported. (Not excluded, not busy: d runs a trial.) */
static bool trial_usable(const DeviceContext *c, const Device *d, const SchedChoice *candidate) {
        DeviceFacts view;
        DecideInput in = { .facts = device_facts(d, &view), .caps = c->caps, .policies = *c->policies };
        PlanBuffer buf;
        Plan *plan = plan_buffer_init(&buf);
        const PlanItem *s;

        in.trial_arm = candidate;
        decide(&in, plan);
        s = plan_find(plan, TUNABLE_SCHEDULER);
        return s && s->result != RESULT_UNSUPPORTED;
}

static int trial_begin_candidate(const DeviceContext *c, Device *d, DeviceTrial *t, const DiskStat *st,
                                 uint64_t now_ms) {
        const SchedChoice *cand = device_trial_pending(t);
        char incumbent[SCHED_NAME_MAX + 16], name[SCHED_NAME_MAX + 16];

        trial_incumbent(d, device_plan(d), t, incumbent, sizeof(incumbent));
        (void) sched_choice_format(cand, name, sizeof(name));
        if (streq(name, incumbent)) {
                device_trial_skip(t, incumbent, "the candidate is what is in force already");
                return 0;
        }
        if (!trial_usable(c, d, cand)) {
                log_info("%s: trial candidate %s skipped: the device or kernel does not have it", d->name, name);
                device_trial_skip(t, incumbent, "the device or kernel does not have it");
                return 0;
        }
        log_info("%s: trial of %s against %s begins", d->name, name, incumbent);
        return device_trial_start(t, incumbent, now_ms, st) > 0;
}

static void log_outcome(const Device *d, const TrialOutcome *o) {
        char name[SCHED_NAME_MAX + 16];

        (void) sched_choice_format(&o->candidate, name, sizeof(name));
        log_notice("%s: trial of %s against %s: %s, %s kept (%.2fx [%.2f, %.2f], %u pairs): %s", d->name, name,
                   o->incumbent, trial_verdict_to_string(o->result.verdict),
                   o->result.keep_candidate ? name : o->incumbent, o->result.ratio, o->result.ratio_lo,
                   o->result.ratio_hi, o->result.pairs, o->result.reason);
}

/* Why the arm the trial runs is not what the device's last pass left in
 * force (the write failed, the kernel kept another): the windows would
 * measure the wrong arm. NULL when it is in force. */
static const char *trial_arm_not_written(const Device *d, const DeviceTrial *t) {
        const PlanItem *s = plan_find(device_plan(d), TUNABLE_SCHEDULER);

        if (!s)         /* the kernel's own, where no policy sets one, is the incumbent */
                return device_trial_arm(t) ? "its scheduler is not set" : NULL;
        switch (s->result) {
        case RESULT_FAILED:
        case RESULT_RETRY:
        case RESULT_UNSUPPORTED:
                return "its scheduler could not be written";
        case RESULT_NOT_KEPT:
                return "the kernel did not keep its scheduler";
        default:
                return NULL;
        }
}

/* A fresh trial of d's [Trial] in place of the one done, done at once
 * from memo when there is one. 1 when the arm in force changed; -ENOMEM. */
static int trial_again(Device *d, const TrialMemo *memo) {
        SchedChoice before_copy;
        const SchedChoice *before = device_trial_arm(trial_of(d));
        TrialPolicy config = trial_of(d)->config;
        unsigned retrials = trial_of(d)->retrials + 1;
        int r;

        if (before) {
                before_copy = *before;
                before = &before_copy;
        }
        trial_free(d);
        r = trial_new(d, &config, false);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        trial_of(d)->retrials = retrials;
        (void) device_trial_memory_recall(d, trial_of(d), memo);
        return !device_trial_arm_same(device_trial_arm(trial_of(d)), before);
}

/* A [Trial]'s verdict, each tick: taken again once older than max_age, or
 * when the workload is no longer what it was taken on (from memory when
 * that shape was seen before). 1 when the arm in force changed. */
static int trial_keep_watch(DeviceContext *c, Device *d, DeviceTrial *t, const DiskStat *st, uint64_t now_ms) {
        char shape[64];
        TrialShape now;

        if (t->by_hand || t->phase != TRIAL_PHASE_DONE || d->job)
                return 0;
        if (t->watching && now_ms - t->decided_ms > t->config.max_age_ms) {
                log_info("%s: its trial's verdict is older than max_age, the trial runs again", d->name);
                return trial_again(d, NULL);
        }
        if (!device_trial_watch(t, now_ms, st) || !t->config.retrial_on_shape)
                return 0;
        now = t->watch.last;
        (void) trial_shape_format(&now, shape, sizeof(shape));
        log_info("%s: its workload changed (now %s), the trial runs again", d->name, shape);
        return trial_again(d, device_trial_memory_find(c, d, t, t->n_outcomes ? t->outcomes[0].incumbent : "", &now));
}

int device_trial_step(DeviceContext *c, Device *d, const DiskStat *st, uint64_t now_ms) {
        DeviceTrial *t = trial_of(d);
        const char *why;
        int changed, r;

        if (t && t->phase == TRIAL_PHASE_DONE)
                return trial_keep_watch(c, d, t, st, now_ms);
        if (!trial_live(t))
                return 0;
        /* a switch not written yet, or a pass that may write one: its
         * settle, or its window, begins once it is back; and d's plan is
         * the one before it until then */
        if (d->job)
                return 0;
        why = trial_why_not(c, d, device_plan(d));
        if (!why && t->phase == TRIAL_PHASE_RUNNING)
                why = trial_arm_not_written(d, t);
        if (why) {
                log_info("%s: trial stopped (%s), the incumbent is back", d->name, why);
                return device_trial_stop(t, why);
        }
        if (t->phase == TRIAL_PHASE_WAITING)
                return trial_begin_candidate(c, d, t, st, now_ms);
        changed = device_trial_tick(t, now_ms, st);
        if (t->phase != TRIAL_PHASE_RUNNING)
                log_outcome(d, device_trial_last(t));
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
        if (trial_live(t))
                (void) device_trial_stop(t, "another trial asked for");
        r = trial_new(d, &config, true);
        if (r == -EINVAL)
                *why_not = "the candidates or the [Trial] settings are not valid";
        if (r < 0)
                return r;
        log_info("%s: a trial of %u candidate(s) asked for, begins at the next tick", d->name, config.n_candidates);
        /* the arm of the trial stopped may differ from what it kept: the caller's pass writes it */
        return 1;
}

int device_trial_end(Device *d) {
        DeviceTrial *t = trial_of(d);

        if (!trial_live(t))
                return -ENOENT;
        log_info("%s: trial stopped by hand, the incumbent is back", d->name);
        return device_trial_stop(t, "blkpolicyctl trial --stop");
}
