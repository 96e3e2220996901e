/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* preview_diff() without I/O: a device's plan in force, the plan a
 * previewed file would give it, one live read and its record, in; only
 * what the file would change, out. */
#include "preview.h"
#include "tests.h"
#include "util.h"

static unsigned T(const char *attr) {
        int t = tunable_find_attr(attr);

        ASSERT_TRUE(t >= 0);
        return (unsigned) t;
}

typedef struct Case {
        PlanBuffer now, next;
        LiveValue live[TUNABLES_MAX];
        DeviceRecord record;
        PreviewDiff diff;
} Case;

static void init(Case *c) {
        *c = (Case) {};
        plan_buffer_init(&c->now);
        plan_buffer_init(&c->next);
        c->now.plan.managed = c->next.plan.managed = true;
        c->now.plan.policy = "50-now.policy";
        c->next.plan.policy = "90-new.policy";
        for (unsigned t = 0; t < TUNABLES_MAX; t++)
                c->live[t].state = LIVE_ABSENT;
}

static void sets(PlanBuffer *b, const char *attr, const char *target, const char *source) {
        PlanItem *it = &b->items[b->plan.n_items++];

        *it = (PlanItem) { .tunable = T(attr), .source = source };
        (void) strscpy(it->target, sizeof(it->target), target);
}

static void live(Case *c, const char *attr, const char *value) {
        c->live[T(attr)].state = LIVE_OK;
        (void) strscpy(c->live[T(attr)].value, VALUE_MAX, value);
}

static void recorded(Case *c, const char *attr, const char *found, const char *written) {
        ASSERT_EQ_INT(device_record_found(&c->record, T(attr), found), 1);
        ASSERT_TRUE(device_record_written(&c->record, T(attr), written) >= 0);
}

static const PreviewDiff *run(Case *c) {
        PreviewInput in = { .current = &c->now.plan, .preview = &c->next.plan, .live = c->live, .record = &c->record };

        preview_diff(&in, &c->diff);
        return &c->diff;
}

static void done(Case *c) {
        device_record_done(&c->record);
}

/* The i-th change is this one (live NULL: not read as a value). */
static void change_is(const PreviewDiff *d, unsigned i, PreviewKind kind, const char *attr, const char *from,
                      const char *to, const char *source) {
        const PreviewChange *ch;

        ASSERT_TRUE(i < d->n_changes);
        ch = &d->changes[i];
        ASSERT_EQ_INT(ch->kind, kind);
        ASSERT_STREQ(tunables[ch->tunable].attr, attr);
        if (from)
                ASSERT_STREQ(ch->live.value, from);
        else
                ASSERT_TRUE(ch->live.state != LIVE_OK);
        ASSERT_STREQ(ch->would_be, to);
        ASSERT_TRUE(streq_ptr(ch->source, source));
}

TEST(alike_in_effect_is_no_change) {
        Case c;

        init(&c);
        sets(&c.now, "read_ahead_kb", "256", "50-now.policy");
        sets(&c.next, "read_ahead_kb", "256", "90-new.policy");      /* another file, the same value */
        live(&c, "read_ahead_kb", "256");
        recorded(&c, "read_ahead_kb", "128", "256");
        ASSERT_TRUE(preview_diff_empty(run(&c)));
        done(&c);
}

TEST(a_new_value_where_live_differs) {
        Case c;
        const PreviewDiff *d;

        init(&c);
        sets(&c.now, "read_ahead_kb", "256", "50-now.policy");
        sets(&c.next, "read_ahead_kb", "1024", "90-new.policy");
        live(&c, "read_ahead_kb", "256");
        d = run(&c);
        ASSERT_EQ_INT(d->n_changes, 1);
        change_is(d, 0, PREVIEW_SET, "read_ahead_kb", "256", "1024", "90-new.policy");
        ASSERT_TRUE(d->managed_before && d->managed_after && !preview_diff_empty(d));
        done(&c);
}

/* Drift or a pending change under the set in force is verify's: a file
 * that wants the same is no change of its own. And a file that wants
 * what already holds writes nothing. */
TEST(what_the_set_in_force_wants_already_is_not_the_files) {
        Case c;

        init(&c);
        sets(&c.now, "read_ahead_kb", "256", "50-now.policy");
        sets(&c.next, "read_ahead_kb", "256", "50-now.policy");
        live(&c, "read_ahead_kb", "512");       /* an admin's */
        sets(&c.now, "nomerges", "1", "50-now.policy");
        sets(&c.next, "nomerges", "2", "90-new.policy");
        live(&c, "nomerges", "2");              /* what the file wants holds */
        ASSERT_EQ_INT(run(&c)->n_changes, 0);
        done(&c);
}

TEST(a_dropped_setting_goes_back_to_its_found_value) {
        Case c;
        const PreviewDiff *d;

        init(&c);
        sets(&c.now, "read_ahead_kb", "256", "50-now.policy");
        live(&c, "read_ahead_kb", "256");
        recorded(&c, "read_ahead_kb", "128", "256");
        d = run(&c);
        ASSERT_EQ_INT(d->n_changes, 1);
        change_is(d, 0, PREVIEW_PUT_BACK, "read_ahead_kb", "256", "128", NULL);
        done(&c);
}

/* Only what blkpolicyd's write holds goes back: never an admin's value,
 * and nothing that was never written (no record, or found in place). */
TEST(a_dropped_setting_blkpolicyd_does_not_hold_stays) {
        Case c;

        init(&c);
        sets(&c.now, "read_ahead_kb", "256", "50-now.policy");
        live(&c, "read_ahead_kb", "512");
        recorded(&c, "read_ahead_kb", "128", "256");
        sets(&c.now, "nomerges", "1", "50-now.policy");
        live(&c, "nomerges", "1");              /* the kernel's already: no record */
        sets(&c.now, "rq_affinity", "2", "50-now.policy");
        live(&c, "rq_affinity", "1");           /* found, nothing landed (observe) */
        recorded(&c, "rq_affinity", "1", NULL);
        ASSERT_EQ_INT(run(&c)->n_changes, 0);
        done(&c);
}

/* A scheduler that goes back takes back what its switch reset; one that
 * stays keeps them as they are. */
TEST(what_a_switch_reset_follows_its_scheduler) {
        Case c;
        const PreviewDiff *d;

        init(&c);
        sets(&c.now, "scheduler", "mq-deadline", "50-now.policy");
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "256");
        recorded(&c, "scheduler", "none", "mq-deadline");
        recorded(&c, "nr_requests", "128", WRITTEN_UNKNOWN);
        d = run(&c);
        ASSERT_EQ_INT(d->n_changes, 2);
        change_is(d, 0, PREVIEW_PUT_BACK, "scheduler", "mq-deadline", "none", NULL);
        change_is(d, 1, PREVIEW_PUT_BACK, "nr_requests", "256", "128", NULL);

        /* an iosched tunable of the scheduler that goes is gone with it */
        sets(&c.now, "iosched/read_expire", "100", "50-now.policy");
        live(&c, "iosched/read_expire", "100");
        recorded(&c, "iosched/read_expire", "500", "100");
        ASSERT_EQ_INT(run(&c)->n_changes, 2);

        sets(&c.next, "scheduler", "mq-deadline", "90-new.policy");
        ASSERT_EQ_INT(run(&c)->n_changes, 1);   /* read_expire: back, mq-deadline stays */
        change_is(&c.diff, 0, PREVIEW_PUT_BACK, "iosched/read_expire", "100", "500", NULL);
        c.next.plan.n_items = 0;
        sets(&c.next, "scheduler", "mq-deadline", "90-new.policy");
        sets(&c.next, "iosched/read_expire", "100", "90-new.policy");
        ASSERT_EQ_INT(run(&c)->n_changes, 0);
        done(&c);
}

TEST(unsupported_items_are_never_written) {
        Case c;

        init(&c);
        sets(&c.next, "iosched/low_latency", "0", "90-new.policy");
        c.next.items[0].result = RESULT_UNSUPPORTED;    /* bfq's, the device runs none */
        ASSERT_EQ_INT(run(&c)->n_changes, 0);
        done(&c);
}

TEST(managed_and_unmanaged) {
        Case c;
        const PreviewDiff *d;

        init(&c);
        c.now.plan.policy = NULL;       /* no policy matched */
        sets(&c.next, "scheduler", "none", "90-new.policy");
        live(&c, "scheduler", "mq-deadline");
        d = run(&c);
        ASSERT_TRUE(!d->managed_before && d->managed_after);
        change_is(d, 0, PREVIEW_SET, "scheduler", "mq-deadline", "none", "90-new.policy");

        init(&c);
        sets(&c.now, "scheduler", "none", "50-now.policy");
        live(&c, "scheduler", "none");
        recorded(&c, "scheduler", "mq-deadline", "none");
        c.next.plan.managed = false;    /* excluded: nothing of any file applies */
        c.next.plan.policy = NULL;
        sets(&c.next, "scheduler", "kyber", "90-new.policy");   /* ignored: not managed */
        d = run(&c);
        ASSERT_TRUE(d->managed_before && !d->managed_after);
        ASSERT_EQ_INT(d->n_changes, 1);
        change_is(d, 0, PREVIEW_PUT_BACK, "scheduler", "none", "mq-deadline", NULL);
        done(&c);

        /* unmanaged before and after, and nothing recorded: nothing to say */
        init(&c);
        c.now.plan.policy = c.next.plan.policy = NULL;
        ASSERT_TRUE(preview_diff_empty(run(&c)));
}

/* A device with everything at once: drift the set in force has too, a
 * source moved with its value, a value that holds, one unreadable, a
 * scheduler of the file's with its own tunable still absent, a put-back,
 * an admin's value left. Only the file's own changes come out, in
 * tunables[] order for each kind. */
TEST(a_noisy_device) {
        Case c;
        const PreviewDiff *d;

        init(&c);
        sets(&c.now, "scheduler", "mq-deadline", "20-fast.policy");
        sets(&c.now, "nr_requests", "64", "50-now.policy");
        sets(&c.now, "read_ahead_kb", "256", "50-now.policy");
        sets(&c.now, "rq_affinity", "2", "50-now.policy");
        sets(&c.now, "add_random", "0", "50-now.policy");
        sets(&c.now, "iosched/read_expire", "100", "50-now.policy");
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "64");
        live(&c, "read_ahead_kb", "300");       /* drift under the set in force */
        live(&c, "rq_affinity", "2");
        live(&c, "add_random", "1");            /* an admin's, after blkpolicyd's 0 */
        live(&c, "iosched/read_expire", "100");
        c.live[T("max_sectors_kb")].state = LIVE_UNKNOWN;
        recorded(&c, "scheduler", "none", "mq-deadline");
        recorded(&c, "nr_requests", "128", "64");
        recorded(&c, "read_ahead_kb", "128", "256");
        recorded(&c, "add_random", "1", "0");
        recorded(&c, "iosched/read_expire", "500", "100");

        sets(&c.next, "scheduler", "bfq", "90-new.policy");
        sets(&c.next, "nr_requests", "64", "90-new.policy");     /* moved, the same value */
        sets(&c.next, "read_ahead_kb", "256", "50-now.policy");  /* the drift is verify's */
        sets(&c.next, "max_sectors_kb", "512", "90-new.policy"); /* unread: it may change */
        sets(&c.next, "iosched/low_latency", "0", "90-new.policy");  /* bfq's, after the switch */
        /* rq_affinity dropped, the kernel's value never written: no record, stays;
         * add_random dropped, the admin's: stays; read_expire dropped: gone
         * with mq-deadline, nothing to put back */
        d = run(&c);
        ASSERT_EQ_INT(d->n_changes, 3);
        change_is(d, 0, PREVIEW_SET, "scheduler", "mq-deadline", "bfq", "90-new.policy");
        change_is(d, 1, PREVIEW_SET, "max_sectors_kb", NULL, "512", "90-new.policy");
        change_is(d, 2, PREVIEW_SET, "iosched/low_latency", NULL, "0", "90-new.policy");

        /* the same file keeping mq-deadline: read_expire goes back */
        (void) strscpy(c.next.items[0].target, VALUE_MAX, "mq-deadline");
        c.next.plan.n_items--;          /* and no bfq tunable */
        d = run(&c);
        ASSERT_EQ_INT(d->n_changes, 2);
        change_is(d, 0, PREVIEW_SET, "max_sectors_kb", NULL, "512", "90-new.policy");
        change_is(d, 1, PREVIEW_PUT_BACK, "iosched/read_expire", "100", "500", NULL);
        done(&c);
}
