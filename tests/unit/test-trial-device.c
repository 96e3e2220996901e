/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* trial-device.c: a [Trial]'s candidates in order over a simulated device
 * whose busy time per byte depends on the scheduler in force (the arm
 * device_trial_arm() says, or the policies' own when it says none). */
#include <errno.h>
#include <string.h>

#include "decide.h"
#include "policy-set.h"
#include "tests.h"
#include "trial-device.h"
#include "util.h"

#define TICK_MS 1000

typedef struct Sim {
        DiskStat stat;
        const char *names[4];
        double busy[4];         /* ms per MiB under names[i] */
        const char *own;        /* the policies' scheduler */
        unsigned switches;
        bool writes;            /* the load writes, else it reads */
} Sim;

static double busy_of(const Sim *s, const char *sched) {
        for (unsigned i = 0; i < 4 && s->names[i]; i++)
                if (streq(s->names[i], sched))
                        return s->busy[i];
        ASSERT_TRUE(false);
        return 0;
}

/* a second of 64 MiB of reads (or writes) under what is in force */
static void run_second(Sim *s, const DeviceTrial *t) {
        const SchedChoice *arm = device_trial_arm(t);
        double busy = 64 * busy_of(s, arm ? arm->name : s->own);

        if (s->writes) {
                s->stat.c.wr_ios += 16384;
                s->stat.c.wr_sectors += 64 * 2048;
        } else {
                s->stat.c.rd_ios += 16384;
                s->stat.c.rd_sectors += 64 * 2048;
        }
        s->stat.c.io_ticks += (uint64_t) busy;
        s->stat.c.time_in_queue += (uint64_t) busy;
}

/* Ticks until t is done or stopped, or limit ticks. */
static unsigned drive(DeviceTrial *t, Sim *s, uint64_t *now, unsigned limit) {
        unsigned ticks = 0;

        for (; ticks < limit && t->phase != TRIAL_PHASE_DONE && t->phase != TRIAL_PHASE_STOPPED; ticks++) {
                const SchedChoice *pending = device_trial_pending(t);
                int r;

                if (pending) {
                        char incumbent[32];
                        const SchedChoice *arm = device_trial_arm(t);

                        (void) strscpy(incumbent, sizeof(incumbent), arm ? arm->name : s->own);
                        if (streq(pending->name, incumbent)) {
                                device_trial_skip(t, incumbent, "the candidate is what is in force already");
                                continue;
                        }
                        r = device_trial_start(t, incumbent, *now, &s->stat);
                } else
                        r = device_trial_tick(t, *now, &s->stat);
                ASSERT_TRUE(r >= 0);
                s->switches += r > 0;
                run_second(s, t);
                *now += TICK_MS;
        }
        return ticks;
}

static TrialPolicy config(const char *candidates) {
        TrialPolicy p = TRIAL_POLICY_DEFAULTS;
        const char *error;

        p.enabled = true;
        ASSERT_EQ_INT(sched_choices_parse(candidates, p.candidates, &p.n_candidates, &error), 0);
        return p;
}

static Sim sim(void) {
        return (Sim) { .stat = { .major = 8, .minor = 0 }, .names = { "none", "mq-deadline", "kyber" },
                       .busy = { 10, 5, 12 }, .own = "none" };
}

/* mq-deadline wins against none and is kept; kyber then runs against
 * mq-deadline, not none, and loses: mq-deadline stays in force. */
TEST(a_winner_is_the_incumbent_of_the_next) {
        TrialPolicy p = config("mq-deadline kyber");
        DeviceTrial t;
        Sim s = sim();
        uint64_t now = 0;

        ASSERT_EQ_INT(device_trial_init(&t, &p, false, 42), 0);
        ASSERT_TRUE(device_trial_arm(&t) == NULL && t.phase == TRIAL_PHASE_WAITING);
        drive(&t, &s, &now, 20000);
        ASSERT_TRUE(t.phase == TRIAL_PHASE_DONE && t.n_outcomes == 2);
        ASSERT_STREQ(t.outcomes[0].incumbent, "none");
        ASSERT_TRUE(t.outcomes[0].result.verdict == TRIAL_CANDIDATE_WINS && t.outcomes[0].result.keep_candidate);
        ASSERT_STREQ(t.outcomes[1].incumbent, "mq-deadline");
        ASSERT_TRUE(!t.outcomes[1].result.keep_candidate);
        ASSERT_TRUE(t.has_kept && streq(device_trial_arm(&t)->name, "mq-deadline"));
        /* done is done: ticks after it change nothing */
        ASSERT_EQ_INT(device_trial_tick(&t, now + 1000, &s.stat), 0);
        ASSERT_STREQ(device_trial_arm(&t)->name, "mq-deadline");
}

/* The hour's switches are the device's: the second candidate starts from
 * what the first spent, and a new trial carried from this one too. */
TEST(the_second_candidate_and_the_next_trial_spend_from_the_same_hour) {
        TrialPolicy p = config("mq-deadline kyber");
        DeviceTrial t, again;
        TrialMemo memo;
        Sim s = sim();
        uint64_t now = 0;
        unsigned first;

        p.max_switches_per_hour = 64;
        ASSERT_EQ_INT(device_trial_init(&t, &p, false, 42), 0);
        while (t.n_outcomes < 2)
                drive(&t, &s, &now, 1);
        first = t.run.switches.n;       /* spent by mq-deadline's run, as the second starts */
        ASSERT_TRUE(first >= 2);
        drive(&t, &s, &now, 20000);
        ASSERT_TRUE(t.phase == TRIAL_PHASE_DONE && t.run.switches.n > first);
        ASSERT_EQ_INT(t.run.switches.n, s.switches);
        /* a re-trial spends from the same hour, and its return from the
         * kept mq-deadline to the policies' none is a switch too */
        ASSERT_EQ_INT(device_trial_init(&again, &p, false, 43), 0);
        ASSERT_EQ_INT(device_trial_follow(&again, &t, now), 1);
        ASSERT_EQ_INT(again.retrials, 1);
        ASSERT_EQ_INT(again.run.switches.n, s.switches + 1);
        /* what taking t's verdict again needs: nothing to a remembered
         * mq-deadline, one to a remembered none, three for a new trial */
        memo = (TrialMemo) { .has_kept = true, .kept = t.kept };
        ASSERT_EQ_INT(device_trial_again_needs(&t, &memo), 0);
        memo.has_kept = false;
        ASSERT_EQ_INT(device_trial_again_needs(&t, &memo), 1);
        ASSERT_EQ_INT(device_trial_again_needs(&t, NULL), 3);
        t.config.max_switches_per_hour = s.switches + 2;
        ASSERT_TRUE(device_trial_may_switch(&t, now, 2) && !device_trial_may_switch(&t, now, 3));
        ASSERT_TRUE(device_trial_may_switch(&t, now, 0));
        ASSERT_TRUE(device_trial_may_switch(&t, now + 3600 * 1000, 3));
}

/* After a verdict on reads, writes are another workload once three
 * windows of them are seen: not sooner, and not windows later. */
TEST(a_change_of_workload_is_seen_after_three_windows) {
        TrialPolicy p = config("mq-deadline");
        DeviceTrial t;
        Sim s = sim();
        uint64_t now = 0, window = p.window_ms / TICK_MS;
        unsigned ticks = 0;

        ASSERT_EQ_INT(device_trial_init(&t, &p, false, 42), 0);
        drive(&t, &s, &now, 20000);
        ASSERT_TRUE(t.phase == TRIAL_PHASE_DONE);
        ASSERT_TRUE(!device_trial_watch(&t, now, &s.stat));    /* the first look takes the shape */
        for (unsigned i = 0; i < 10 * window; i++) {
                run_second(&s, &t);
                now += TICK_MS;
                ASSERT_TRUE(!device_trial_watch(&t, now, &s.stat));
        }
        s.writes = true;
        do {
                run_second(&s, &t);
                now += TICK_MS;
                ticks++;
        } while (!device_trial_watch(&t, now, &s.stat) && ticks < 100 * window);
        ASSERT_TRUE(ticks >= 3 * window && ticks <= 4 * window);
        ASSERT_TRUE(t.watch.last.read_share == 0);
}

/* A candidate that is what the policies chose already is skipped, with
 * why; an equal one leaves the policies' own in force (no arm). */
TEST(the_incumbent_itself_is_skipped_and_equal_keeps_it) {
        TrialPolicy p = config("none kyber");
        DeviceTrial t;
        Sim s = sim();
        uint64_t now = 0;

        s.busy[2] = 10;
        ASSERT_EQ_INT(device_trial_init(&t, &p, true, 1), 0);
        drive(&t, &s, &now, 20000);
        ASSERT_TRUE(t.phase == TRIAL_PHASE_DONE && t.n_outcomes == 2);
        ASSERT_TRUE(t.outcomes[0].skipped && strstr(t.outcomes[0].result.reason, "in force already"));
        ASSERT_TRUE(t.outcomes[1].result.verdict == TRIAL_EQUAL && !t.outcomes[1].result.keep_candidate);
        ASSERT_TRUE(device_trial_arm(&t) == NULL && !t.has_kept);
}

/* A stop while the candidate is in force puts the incumbent back (the arm
 * changes: a pass is due), says why, and nothing runs after it. */
TEST(stop_puts_the_incumbent_back) {
        TrialPolicy p = config("mq-deadline");
        DeviceTrial t;
        Sim s = sim();
        uint64_t now = 0;
        unsigned ticks = 0;

        ASSERT_EQ_INT(device_trial_init(&t, &p, false, 3), 0);
        while (!(t.phase == TRIAL_PHASE_RUNNING && t.arm == TRIAL_ARM_CANDIDATE)) {
                ASSERT_TRUE(ticks++ < 100);
                drive(&t, &s, &now, 1);
        }
        ASSERT_STREQ(device_trial_arm(&t)->name, "mq-deadline");
        ASSERT_EQ_INT(t.run.switches.n, s.switches);
        ASSERT_EQ_INT(device_trial_stop(&t, "paused", now), 1);
        ASSERT_TRUE(t.phase == TRIAL_PHASE_STOPPED && device_trial_arm(&t) == NULL);
        ASSERT_TRUE(t.outcomes[0].stopped && strstr(t.outcomes[0].result.reason, "paused"));
        ASSERT_EQ_INT(t.run.switches.n, s.switches + 1);       /* the way back is spent */
        ASSERT_EQ_INT(device_trial_stop(&t, "again", now), 0);
        ASSERT_EQ_INT(t.run.switches.n, s.switches + 1);
        ASSERT_EQ_INT(device_trial_tick(&t, now + 1000, &s.stat), 0);
        ASSERT_TRUE(device_trial_pending(&t) == NULL);
}

/* A regressing candidate ends its trial at once; the next candidate still
 * runs, against the incumbent. */
TEST(a_regression_ends_only_its_candidate) {
        TrialPolicy p = config("kyber mq-deadline");
        DeviceTrial t;
        Sim s = sim();
        uint64_t now = 0;

        s.busy[2] = 30;
        ASSERT_EQ_INT(device_trial_init(&t, &p, false, 9), 0);
        drive(&t, &s, &now, 20000);
        ASSERT_TRUE(t.phase == TRIAL_PHASE_DONE && t.n_outcomes == 2);
        ASSERT_TRUE(t.outcomes[0].result.verdict == TRIAL_ABORTED && t.outcomes[0].result.pairs <= 1);
        ASSERT_STREQ(t.outcomes[1].incumbent, "none");
        ASSERT_TRUE(t.outcomes[1].result.verdict == TRIAL_CANDIDATE_WINS);
        ASSERT_STREQ(device_trial_arm(&t)->name, "mq-deadline");
}

TEST(bad_configs_are_refused) {
        TrialPolicy p = config("none");
        DeviceTrial t;

        p.settle_ms = p.window_ms;
        ASSERT_EQ_INT(device_trial_init(&t, &p, true, 0), -EINVAL);
        p = config("none");
        p.n_candidates = 0;
        ASSERT_EQ_INT(device_trial_init(&t, &p, true, 0), -EINVAL);
        p = config("none");
        p.max_switches_per_hour = 0;
        ASSERT_EQ_INT(device_trial_init(&t, &p, true, 0), -EINVAL);
        ASSERT_STREQ(trial_phase_to_string(TRIAL_PHASE_STOPPED), "stopped");
}

/* The start of a candidate the daemon's tick and --replay share, with
 * decide() for real: a set of one policy of text. */
static PolicySet *set_of_text(const char *text) {
        PolicySet *s = calloc(1, sizeof(PolicySet));
        PolicyErrors errors = {};
        Policy *p = NULL;

        ASSERT_TRUE(s);
        ASSERT_EQ_INT(policy_parse_text(text, "50-trial.policy", &errors, &p), 0);
        policy_errors_done(&errors);
        s->n_ref = 1;
        s->policies = calloc(1, sizeof(Policy *));
        ASSERT_TRUE(s->policies);
        s->policies[s->n_policies++] = p;
        return s;
}

static DeviceFacts loop_disk(void) {
        DeviceFacts f = { .name = "loop0", .major = 7, .hw_queues = 1,
                          .classes = CLASS_BIT(CLASS_SINGLE_QUEUE) | CLASS_BIT(CLASS_LOOP) };

        ASSERT_EQ_INT(scheduler_list_parse("none mq-deadline [bfq]", &f.schedulers), 0);
        return f;
}

static const KernelCaps CAPS = { .release = "6.18.0", .version = { 6, 18, 0 }, .dispatch_direct = TRISTATE_NO };

/* What is in force already is skipped, what the device lacks (no module
 * could load deadline-x) too, each with why; the next starts against the
 * policies' none. */
TEST(begin_skips_what_is_in_force_and_what_the_device_lacks) {
        PolicySet *s = set_of_text("[Match]\nname = loop*\n[Queue]\nscheduler = none\n"
                                   "[Trial]\ncandidates = none deadline-x mq-deadline\n");
        DeviceFacts f = loop_disk();
        DecideInput in = { .facts = &f, .caps = &CAPS, .policies = s };
        DiskStat st = { .major = 7, .minor = 0 };
        PlanBuffer pb;
        Plan *plan = plan_buffer_init(&pb);
        TrialBegin begin;
        DeviceTrial t;

        decide(&in, plan);
        ASSERT_TRUE(plan->trial && !trial_plan_why_not(plan, &f));
        ASSERT_EQ_INT(device_trial_init(&t, plan->trial, false, 5), 0);
        ASSERT_EQ_INT(device_trial_begin(&t, plan, &in, 0, &st, &begin), 0);
        ASSERT_TRUE(begin == TRIAL_BEGIN_IN_FORCE && t.outcomes[0].skipped);
        ASSERT_STREQ(t.outcomes[0].incumbent, "none");
        ASSERT_EQ_INT(device_trial_begin(&t, plan, &in, 1000, &st, &begin), 0);
        ASSERT_TRUE(begin == TRIAL_BEGIN_LACKING && t.outcomes[1].skipped);
        ASSERT_STREQ(t.outcomes[1].result.reason, "the device or kernel does not have it");
        /* an idle device: the candidate waits, the incumbent stays in force */
        ASSERT_EQ_INT(device_trial_begin(&t, plan, &in, 2000, &st, &begin), 0);
        ASSERT_TRUE(begin == TRIAL_BEGIN_IDLE && t.phase == TRIAL_PHASE_WAITING && !device_trial_arm(&t));
        st.c.rd_ios += 99;
        ASSERT_EQ_INT(device_trial_begin(&t, plan, &in, 3000, &st, &begin), 0);
        ASSERT_TRUE(begin == TRIAL_BEGIN_IDLE);
        st.c.wr_ios += 1;
        ASSERT_TRUE(device_trial_begin(&t, plan, &in, 4000, &st, &begin) >= 0);
        ASSERT_TRUE(begin == TRIAL_BEGAN && t.phase == TRIAL_PHASE_RUNNING && t.started_ms == 4000);
        ASSERT_STREQ(device_trial_last(&t)->incumbent, "none");
        policy_set_unref(s);
}

/* Where a plan allows no trial, whoever asks: the daemon and --replay. */
TEST(plan_why_not) {
        PolicySet *other = set_of_text("[Match]\nname = sd*\n[Queue]\nscheduler = none\n");
        PolicySet *dynamic = set_of_text("[Match]\nname = loop*\n[Queue]\nscheduler = none\n"
                                         "[Dynamic]\nenter = iops > 10\nleave = iops < 5\n"
                                         "[Busy]\nscheduler = mq-deadline\n");
        DeviceFacts f = loop_disk(), bio = loop_disk();
        DecideInput in = { .facts = &f, .caps = &CAPS, .policies = other };
        PlanBuffer pb;
        Plan *plan = plan_buffer_init(&pb);

        decide(&in, plan);
        ASSERT_STREQ(trial_plan_why_not(plan, &f), "no policy manages it");
        in.policies = dynamic;
        decide(&in, plan);
        ASSERT_STREQ(trial_plan_why_not(plan, &f), "its policy has [Dynamic]");
        bio.classes |= CLASS_BIT(CLASS_BIO_BASED);
        plan->dynamic = NULL;
        ASSERT_STREQ(trial_plan_why_not(plan, &bio), "bio-based: no I/O scheduler");
        policy_set_unref(other);
        policy_set_unref(dynamic);
}

/* A seed is the entropy's, apart for each device; a new trial starts from
 * what the one before kept. */
TEST(seed_and_what_was_kept) {
        TrialPolicy p = config("kyber");
        DeviceTrial before, t;

        ASSERT_TRUE(device_trial_seed(0, 7, 0) != device_trial_seed(0, 7, 1));
        ASSERT_TRUE(device_trial_seed(0, 7, 0) != device_trial_seed(0, 8, 0));
        ASSERT_TRUE((device_trial_seed(12345, 7, 0) ^ device_trial_seed(0, 7, 0)) == 12345);
        ASSERT_EQ_INT(device_trial_init(&before, &p, false, 1), 0);
        before.has_kept = true;
        before.kept = (SchedChoice) { .name = "mq-deadline" };
        ASSERT_EQ_INT(device_trial_init(&t, &p, true, 2), 0);
        device_trial_carry_kept(&t, NULL);
        ASSERT_TRUE(!t.has_kept);
        device_trial_carry_kept(&t, &before);
        ASSERT_TRUE(t.has_kept && streq(t.kept.name, "mq-deadline") && device_trial_live(&t));
        ASSERT_TRUE(!device_trial_live(NULL));
}
