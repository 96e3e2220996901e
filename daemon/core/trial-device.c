/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "trial-device.h"
#include "tunables.h"
#include "util.h"

static const char *const trial_phase_names[_TRIAL_PHASE_MAX] = {
        [TRIAL_PHASE_WAITING] = "waiting",
        [TRIAL_PHASE_RUNNING] = "running",
        [TRIAL_PHASE_DONE] = "done",
        [TRIAL_PHASE_STOPPED] = "stopped",
};

const char *trial_phase_to_string(TrialPhase p) {
        return p < _TRIAL_PHASE_MAX ? trial_phase_names[p] : NULL;
}

static void run_configs(const TrialPolicy *p, TrialRunConfig *rc, TrialConfig *tc) {
        trial_run_config_default(rc);
        rc->window_ms = p->window_ms;
        rc->settle_ms = p->settle_ms;
        rc->max_duration_ms = p->max_duration_ms;
        rc->max_switches_per_hour = p->max_switches_per_hour;
        trial_config_default(tc);
        tc->min_gain = p->min_gain;
}

int device_trial_init(DeviceTrial *t, const TrialPolicy *config, bool by_hand, uint64_t seed) {
        TrialRunConfig rc;
        TrialConfig tc;

        run_configs(config, &rc, &tc);
        if (config->n_candidates == 0 || config->n_candidates > SCHED_CHOICES_MAX ||
            trial_run_config_check(&rc) < 0 || trial_config_check(&tc) < 0)
                return -EINVAL;
        *t = (DeviceTrial) { .config = *config, .by_hand = by_hand, .seed = seed };
        t->config.enabled = true;
        return 0;
}

/* The same arm to a pass: both NULL (the policies'), or the same scheduler. */
static bool device_trial_arm_same(const SchedChoice *a, const SchedChoice *b) {
        if (!a || !b)
                return a == b;
        return sched_choice_equal(a, b);
}

void device_trial_carry_kept(DeviceTrial *t, const DeviceTrial *before) {
        if (before && before->has_kept) {
                t->has_kept = true;
                t->kept = before->kept;
        }
}

void device_trial_carry_switches(DeviceTrial *t, const DeviceTrial *before) {
        if (before)
                t->run.switches = before->run.switches;
}

unsigned device_trial_again_needs(const DeviceTrial *done, const TrialMemo *memo) {
        const SchedChoice *next = memo && memo->has_kept ? &memo->kept : NULL;

        /* to what memo kept (or the policies'), then a new trial's
         * candidate and back at the least */
        return !device_trial_arm_same(device_trial_arm(done), next) + (memo ? 0 : 2);
}

bool device_trial_may_switch(const DeviceTrial *t, uint64_t now_ms, unsigned n) {
        return n == 0 || (n <= t->config.max_switches_per_hour &&
                          switch_budget_allows(&t->run.switches, t->config.max_switches_per_hour - (n - 1), now_ms));
}

int device_trial_follow(DeviceTrial *t, const DeviceTrial *done, uint64_t now_ms) {
        t->retrials = done->retrials + 1;
        device_trial_carry_switches(t, done);
        if (device_trial_arm_same(device_trial_arm(t), device_trial_arm(done)))
                return 0;
        switch_budget_spend(&t->run.switches, now_ms);
        return 1;
}

uint64_t device_trial_seed(uint64_t entropy, unsigned major, unsigned minor) {
        uint64_t devnum = ((uint64_t) major << 32) | minor;

        return entropy ^ (devnum * 0x9E3779B97F4A7C15ULL);
}

bool device_trial_live(const DeviceTrial *t) {
        return t && (t->phase == TRIAL_PHASE_WAITING || t->phase == TRIAL_PHASE_RUNNING);
}

/* What a plan names as the trial's arm's source (a policy's name would
 * point into a set the plan may outlive). */
void device_trial_decide_input(const DeviceTrial *t, DecideInput *in) {
        in->trial_arm = t ? device_trial_arm(t) : NULL;
        in->trial_source = t && t->by_hand ? "blkpolicyctl trial" : "trial";
}


static const SchedChoice *kept_arm(const DeviceTrial *t) {
        return t->has_kept ? &t->kept : NULL;
}

const SchedChoice *device_trial_arm(const DeviceTrial *t) {
        if (t->phase == TRIAL_PHASE_RUNNING && t->arm == TRIAL_ARM_CANDIDATE)
                return &t->candidate_arm;
        return kept_arm(t);
}

/* The arm in force now, copied: what t points to changes. */
static const SchedChoice *arm_copy(const DeviceTrial *t, SchedChoice *buf) {
        const SchedChoice *a = device_trial_arm(t);

        if (!a)
                return NULL;
        *buf = *a;
        return buf;
}

const SchedChoice *device_trial_pending(const DeviceTrial *t) {
        return t->phase == TRIAL_PHASE_WAITING ? &t->config.candidates[t->next] : NULL;
}

static TrialOutcome *outcome_new(DeviceTrial *t, const char *incumbent) {
        TrialOutcome *o = &t->outcomes[t->n_outcomes++];       /* one a candidate: never more */

        *o = (TrialOutcome) { .candidate = t->config.candidates[t->next] };
        (void) strscpy(o->incumbent, sizeof(o->incumbent), incumbent);
        return o;
}

static void next_candidate(DeviceTrial *t) {
        t->has_waiting_from = false;
        t->next++;
        t->phase = t->next < t->config.n_candidates ? TRIAL_PHASE_WAITING : TRIAL_PHASE_DONE;
}

void device_trial_skip(DeviceTrial *t, const char *incumbent, const char *why) {
        TrialOutcome *o;

        if (t->phase != TRIAL_PHASE_WAITING)
                return;
        o = outcome_new(t, incumbent);
        o->skipped = true;
        o->result = (TrialResult) { .verdict = TRIAL_INCONCLUSIVE, .ratio = 1 };
        (void) strscpy(o->result.reason, sizeof(o->result.reason), why);
        next_candidate(t);
}

/* The running candidate's outcome, the last one. */
static TrialOutcome *running_outcome(DeviceTrial *t) {
        return &t->outcomes[t->n_outcomes - 1];
}

/* A simpler scheduler costs less (CPU a request, a lock): kept when equal. */
static bool cheaper_than(const SchedChoice *candidate, const char *incumbent) {
        return streq(candidate->name, "none") && !streq(incumbent, "none");
}

/* The candidate in force over what is kept: a scheduler keeps a kept
 * nr_requests (written after the switch that resets it), an nr_requests
 * alone keeps the kept scheduler. */
static SchedChoice candidate_over_kept(const DeviceTrial *t, const SchedChoice *candidate) {
        SchedChoice c = t->has_kept ? t->kept : (SchedChoice) {};

        if (candidate->name[0]) {
                (void) strscpy(c.name, sizeof(c.name), candidate->name);
                c.dispatch_direct = candidate->dispatch_direct;
        }
        if (candidate->nr_requests)
                c.nr_requests = candidate->nr_requests;
        return c;
}

int device_trial_start(DeviceTrial *t, const char *incumbent, uint64_t now_ms, const DiskStat *sample) {
        SchedChoice before_copy;
        const SchedChoice *before = arm_copy(t, &before_copy);
        TrialRunConfig rc;
        TrialConfig tc;
        TrialStep step;
        int r;

        if (t->phase != TRIAL_PHASE_WAITING)
                return 0;
        if (!t->has_first) {
                t->first = *sample;
                t->has_first = true;
        }
        run_configs(&t->config, &rc, &tc);
        r = trial_run_start(&t->run, &rc, &tc, t->seed + t->next,
                            cheaper_than(&t->config.candidates[t->next], incumbent), &t->run.switches, now_ms,
                            sample, &step);
        if (r < 0)
                return r;
        (void) outcome_new(t, incumbent);
        running_outcome(t)->result = trial_run_result(&t->run);
        t->candidate_arm = candidate_over_kept(t, &t->config.candidates[t->next]);
        t->phase = TRIAL_PHASE_RUNNING;
        t->arm = step.arm;
        t->started_ms = now_ms;
        return !device_trial_arm_same(device_trial_arm(t), before);
}

int device_trial_tick(DeviceTrial *t, uint64_t now_ms, const DiskStat *sample) {
        SchedChoice before_copy;
        const SchedChoice *before = arm_copy(t, &before_copy);
        TrialStep step;

        if (t->phase != TRIAL_PHASE_RUNNING)
                return 0;
        step = trial_run_tick(&t->run, now_ms, sample);
        t->arm = step.arm;
        running_outcome(t)->result = trial_run_result(&t->run);
        if (step.done) {
                if (step.arm == TRIAL_ARM_CANDIDATE) {
                        t->kept = t->candidate_arm;
                        t->has_kept = true;
                }
                next_candidate(t);
        }
        return !device_trial_arm_same(device_trial_arm(t), before);
}

int device_trial_stop(DeviceTrial *t, const char *why, uint64_t now_ms) {
        SchedChoice before_copy;
        const SchedChoice *before = arm_copy(t, &before_copy);

        if (t->phase == TRIAL_PHASE_RUNNING) {
                TrialOutcome *o = running_outcome(t);

                o->result = trial_run_result(&t->run);
                o->stopped = true;
                o->result.keep_candidate = false;
                (void) snprintf(o->result.reason, sizeof(o->result.reason),
                                "stopped after %u pairs (%s): the incumbent is back", o->result.pairs, why);
        }
        if (t->phase == TRIAL_PHASE_RUNNING || t->phase == TRIAL_PHASE_WAITING)
                t->phase = TRIAL_PHASE_STOPPED;
        if (device_trial_arm_same(device_trial_arm(t), before))
                return 0;
        switch_budget_spend(&t->run.switches, now_ms);     /* never held: the incumbent back */
        return 1;
}

const TrialOutcome *device_trial_last(const DeviceTrial *t) {
        return t->n_outcomes ? &t->outcomes[t->n_outcomes - 1] : NULL;
}

int device_trial_recall(DeviceTrial *t, const TrialMemo *memo, uint64_t age_ms) {
        SchedChoice before_copy;
        const SchedChoice *before = arm_copy(t, &before_copy);

        if (t->phase != TRIAL_PHASE_WAITING || t->next != 0)
                return 0;
        t->phase = TRIAL_PHASE_DONE;
        t->next = t->config.n_candidates;
        t->has_kept = memo->has_kept;
        t->kept = memo->kept;
        t->recalled = true;
        t->recalled_verdict = memo->verdict;
        t->recalled_estimate = memo->estimate;
        t->recalled_at_sec = memo->at_sec;
        t->recalled_age_ms = age_ms;
        t->has_shape = true;
        t->shape = memo->shape;
        return !device_trial_arm_same(device_trial_arm(t), before);
}

/* A candidate that ran windows: an all-skipped trial has nothing to take
 * again. */
static bool outcome_ran(const TrialOutcome *o) {
        return !o->skipped;
}

/* A candidate's trial that found something: a pair counted, or a window
 * that regressed. One that ran on an idle device did not. */
static bool outcome_counted(const TrialOutcome *o) {
        return !o->skipped && !o->stopped && (o->result.pairs > 0 || o->result.verdict == TRIAL_ABORTED);
}

static bool any_outcome(const DeviceTrial *t, bool (*is)(const TrialOutcome *o)) {
        for (unsigned i = 0; i < t->n_outcomes; i++)
                if (is(&t->outcomes[i]))
                        return true;
        return false;
}

bool device_trial_watch(DeviceTrial *t, uint64_t now_ms, const DiskStat *sample) {
        TrialConfig tc;
        TrialRunConfig rc;

        if (t->phase != TRIAL_PHASE_DONE)
                return false;
        run_configs(&t->config, &rc, &tc);
        if (!t->watching) {
                t->watching = true;
                t->decided_ms = t->recalled ? (now_ms > t->recalled_age_ms ? now_ms - t->recalled_age_ms : 0)
                                            : now_ms;
                if (!t->recalled)
                        t->has_shape = t->has_first &&
                                       trial_shape_between(&t->first, sample, tc.min_ios, &t->shape) == 0 &&
                                       any_outcome(t, outcome_counted);
                /* no shape to compare with: any shape is another */
                shape_watch_start(&t->watch, &(TrialShape) { .read_share = -1 }, now_ms, sample);
                if (t->has_shape)
                        t->watch.reference = t->shape;
                return false;
        }
        if (!t->has_shape && !any_outcome(t, outcome_ran))
                return false;
        /* a span of one window, as a trial measures: a change costs what the old
         * verdict loses over TRIAL_SHAPE_CONFIRM windows of it, no more */
        return shape_watch_tick(&t->watch, now_ms, sample, rc.window_ms, tc.min_ios);
}

bool device_trial_memo(const DeviceTrial *t, uint64_t now_sec, TrialMemo *memo) {
        const TrialOutcome *o = device_trial_last(t);

        if (t->phase != TRIAL_PHASE_DONE || t->recalled || !t->has_shape || !o)
                return false;
        memo->shape = t->shape;
        memo->has_kept = t->has_kept;
        memo->kept = t->kept;
        memo->verdict = o->result.verdict;
        memo->estimate = o->result.ratio;
        memo->at_sec = now_sec;
        return true;
}

const char *trial_plan_why_not(const Plan *plan, const DeviceFacts *facts) {
        if (!plan->managed || !plan->policy)
                return "no policy manages it";
        if (plan->dynamic)
                return "its policy has [Dynamic]";
        if (facts->classes & CLASS_BIT(CLASS_BIO_BASED))
                return "bio-based: no I/O scheduler";
        return NULL;
}

/* What is in force before t's pending candidate, as scheduler= names it:
 * what t kept, else plan's scheduler, else the kernel's in facts. */
void device_trial_incumbent(const DeviceTrial *t, const Plan *plan, const DeviceFacts *facts, char *buf, size_t size) {
        const PlanItem *s = plan_find(plan, TUNABLE_SCHEDULER);
        const PlanItem *dd = plan_find(plan, (unsigned) tunable_find("mq-deadline", "dispatch_direct"));
        const PlanItem *nr = plan_find(plan, TUNABLE_NR_REQUESTS);
        const SchedChoice *pending = device_trial_pending(t);

        if (pending && !pending->name[0]) {     /* nr_requests against nr_requests */
                SchedChoice c = { .nr_requests = t->has_kept && t->kept.nr_requests ? t->kept.nr_requests :
                                                 nr && nr->result != RESULT_UNSUPPORTED ? (unsigned) atoi(nr->target) :
                                                 facts->nr_requests };

                (void) sched_choice_format(&c, buf, size);
        } else if (t->has_kept)
                (void) sched_choice_format(&t->kept, buf, size);
        else if (s && s->result != RESULT_UNSUPPORTED) {
                SchedChoice c = { .dispatch_direct = streq(s->target, "mq-deadline") && dd && streq(dd->target, "1") };

                (void) strscpy(c.name, sizeof(c.name), s->target);
                (void) sched_choice_format(&c, buf, size);
        } else
                (void) strscpy(buf, size, device_facts_scheduler(facts));
}

/* Whether the device takes candidate: decided with it in force, the
 * scheduler is not unsupported. */
static bool candidate_usable(const DecideInput *base, const SchedChoice *candidate) {
        DecideInput in = *base;
        PlanBuffer buf;
        Plan *plan = plan_buffer_init(&buf);
        const PlanItem *s;

        in.trial_arm = candidate;
        decide(&in, plan);
        s = plan_find(plan, candidate->name[0] ? TUNABLE_SCHEDULER : TUNABLE_NR_REQUESTS);
        return s && s->result != RESULT_UNSUPPORTED;
}

/* Whether the device moved min_ios requests since its pending candidate
 * began waiting (the first call only notes where that is). A candidate
 * starts on a busy device only: the first arm of a schedule may be the
 * candidate, and an idle disk would sit on it, no window counting, until
 * load came or the trial ran out of time. */
static bool io_since_waiting(DeviceTrial *t, const DiskStat *sample) {
        TrialConfig tc;
        const DiskStat *w = &t->waiting_from;

        trial_config_default(&tc);
        if (!t->has_waiting_from || w->major != sample->major || w->minor != sample->minor ||
            sample->c.rd_ios < w->c.rd_ios || sample->c.wr_ios < w->c.wr_ios) {
                t->waiting_from = *sample;
                t->has_waiting_from = true;
                return false;
        }
        return (sample->c.rd_ios - w->c.rd_ios) + (sample->c.wr_ios - w->c.wr_ios) >= tc.min_ios;
}

int device_trial_begin(DeviceTrial *t, const Plan *plan, const DecideInput *in, uint64_t now_ms,
                       const DiskStat *sample, TrialBegin *ret) {
        const SchedChoice *cand = device_trial_pending(t);
        char incumbent[SCHED_CHOICE_TEXT_MAX], name[SCHED_CHOICE_TEXT_MAX];

        if (!cand)
                return 0;
        device_trial_incumbent(t, plan, in->facts, incumbent, sizeof(incumbent));
        (void) sched_choice_format(cand, name, sizeof(name));
        if (streq(name, incumbent)) {
                device_trial_skip(t, incumbent, "the candidate is what is in force already");
                *ret = TRIAL_BEGIN_IN_FORCE;
                return 0;
        }
        if (!candidate_usable(in, cand)) {
                device_trial_skip(t, incumbent, "the device or kernel does not have it");
                *ret = TRIAL_BEGIN_LACKING;
                return 0;
        }
        if (!io_since_waiting(t, sample)) {
                *ret = TRIAL_BEGIN_IDLE;
                return 0;
        }
        *ret = TRIAL_BEGAN;
        return device_trial_start(t, incumbent, now_ms, sample);
}
