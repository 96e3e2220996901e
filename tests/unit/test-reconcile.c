/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* reconcile() without I/O: each case is a device's record, what is wanted
 * and what sysfs holds, and the writes and record that must come out. */
#include "reconcile.h"
#include "tests.h"
#include "util.h"

static unsigned T(const char *attr) {
        int t = tunable_find_attr(attr);

        ASSERT_TRUE(t >= 0);
        return (unsigned) t;
}

typedef struct Case {
        DeviceRecord record;
        const char *wanted[TUNABLES_MAX];
        LiveValue live[TUNABLES_MAX];
        bool take_over;
        bool new_media;
        const LiveValue *media_live;
        const char *kernel_default[TUNABLES_MAX];
        const unsigned *kernel_version;
} Case;

static void live(Case *c, const char *attr, const char *value) {
        c->live[T(attr)].state = LIVE_OK;
        (void) strscpy(c->live[T(attr)].value, VALUE_MAX, value);
}

static void recorded(Case *c, const char *attr, const char *found, const char *written) {
        ASSERT_EQ_INT(device_record_found(&c->record, T(attr), found), 1);
        ASSERT_TRUE(device_record_written(&c->record, T(attr), written) >= 0);
}

static void intended(Case *c, const char *attr, const char *intent) {
        ASSERT_TRUE(device_record_intent(&c->record, T(attr), intent) >= 0);
}

static void run(Case *c, Reconciled *out) {
        ReconcileInput in = { .record = &c->record, .wanted = c->wanted, .live = c->live, .take_over = c->take_over,
                              .new_media = c->new_media, .media_live = c->media_live,
                              .kernel_default = c->kernel_default, .kernel_version = c->kernel_version };

        ASSERT_EQ_INT(reconcile(&in, out), 0);
}

static const char *found_of(const Reconciled *r, const char *attr) {
        const AttrRecord *a = device_record_get(&r->record, T(attr));
        return a ? a->found : NULL;
}

static const char *written_of(const Reconciled *r, const char *attr) {
        const AttrRecord *a = device_record_get(&r->record, T(attr));
        return a ? a->written ?: "-" : NULL;
}

static const char *intent_of(const Reconciled *r, const char *attr) {
        const AttrRecord *a = device_record_get(&r->record, T(attr));
        return a ? a->intent ?: "-" : NULL;
}

/* The record as reconciled becomes the case's, as apply.c saves it. */
static void take(Case *c, Reconciled *r) {
        device_record_done(&c->record);
        ASSERT_EQ_INT(device_record_copy(&r->record, &c->record), 0);
        device_record_done(&r->record);
}

static void done(Case *c, Reconciled *r) {
        device_record_done(&c->record);
        device_record_done(&r->record);
}

/* The rules name these rows by number. */
TEST(row_constants_name_their_rows) {
        ASSERT_EQ_INT(T("scheduler"), TUNABLE_SCHEDULER);
        ASSERT_EQ_INT(T("nr_requests"), TUNABLE_NR_REQUESTS);
        ASSERT_EQ_INT(T("read_ahead_kb"), TUNABLE_READ_AHEAD_KB);
        ASSERT_EQ_INT(T("max_sectors_kb"), TUNABLE_MAX_SECTORS_KB);
}

/* Issue: a switch reset nr_requests and the old scheduler's tunables, and
 * they were read after it. Everything it resets is recorded before it. */
TEST(switch_records_what_it_resets_before_writing) {
        Case c = {};
        Reconciled r;

        c.wanted[TUNABLE_SCHEDULER] = "none";
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "50");
        live(&c, "iosched/fifo_batch", "7");
        live(&c, "read_ahead_kb", "128");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.switches);
        ASSERT_TRUE(r.steps[0].tunable == TUNABLE_SCHEDULER && r.steps[0].kind == STEP_SET);
        ASSERT_STREQ(r.steps[0].value, "none");
        ASSERT_STREQ(found_of(&r, "scheduler"), "mq-deadline");
        ASSERT_STREQ(intent_of(&r, "scheduler"), "none");         /* the intent, saved before the write */
        ASSERT_STREQ(written_of(&r, "scheduler"), "-");           /* nothing landed yet */
        ASSERT_STREQ(found_of(&r, "nr_requests"), "50");
        ASSERT_STREQ(intent_of(&r, "nr_requests"), WRITTEN_UNKNOWN);
        ASSERT_STREQ(found_of(&r, "iosched/fifo_batch"), "7");
        ASSERT_TRUE(!found_of(&r, "read_ahead_kb"));                 /* not wanted, not reset: not touched */
        done(&c, &r);
}

/* The whole way back, round by round, as apply.c drives it. */
TEST(stop_puts_back_scheduler_then_what_followed_it) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "mq-deadline", "none");
        recorded(&c, "nr_requests", "50", WRITTEN_UNKNOWN);
        recorded(&c, "iosched/fifo_batch", "7", WRITTEN_UNKNOWN);
        live(&c, "scheduler", "none");
        live(&c, "nr_requests", "128");
        /* fifo_batch is absent under none: kept while the scheduler is held */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.switches && r.steps[0].kind == STEP_RESTORE);
        ASSERT_STREQ(r.steps[0].value, "mq-deadline");
        ASSERT_STREQ(found_of(&r, "iosched/fifo_batch"), "7");
        take(&c, &r);

        /* the kernel reset them again with the switch back */
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "256");
        live(&c, "iosched/fifo_batch", "16");
        run(&c, &r);
        ASSERT_TRUE(!found_of(&r, "scheduler"));                     /* back: dropped */
        ASSERT_TRUE(r.n_steps == 2 && !r.switches);
        ASSERT_TRUE(r.steps[0].tunable == T("nr_requests") && r.steps[0].kind == STEP_RESTORE);
        ASSERT_STREQ(r.steps[0].value, "50");
        ASSERT_EQ_INT(r.steps[1].tunable, T("iosched/fifo_batch"));
        ASSERT_STREQ(r.steps[1].value, "7");
        take(&c, &r);

        live(&c, "nr_requests", "50");
        live(&c, "iosched/fifo_batch", "7");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && device_record_empty(&r.record));       /* all back: no record left */
        done(&c, &r);
}

/* Issue: the admin's kyber was set back to the original at stop. */
TEST(what_the_admin_changed_is_never_put_back) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "none", "bfq");
        recorded(&c, "nr_requests", "100", WRITTEN_UNKNOWN);
        recorded(&c, "read_ahead_kb", "128", "4096");
        live(&c, "scheduler", "kyber");
        live(&c, "nr_requests", "64");
        live(&c, "read_ahead_kb", "4096");
        run(&c, &r);
        /* the scheduler and what followed it are the admin's now; read_ahead_kb is still ours */
        ASSERT_TRUE(!found_of(&r, "scheduler") && !found_of(&r, "nr_requests"));
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("read_ahead_kb") && r.steps[0].kind == STEP_RESTORE);
        ASSERT_STREQ(r.steps[0].value, "128");
        done(&c, &r);
}

TEST(admin_change_is_left_unless_taken_over) {
        Case c = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        c.wanted[T("read_ahead_kb")] = "4096";
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "512");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && r.overridden[T("read_ahead_kb")]);
        device_record_done(&r.record);

        c.take_over = true;     /* resume, on_drift=reapply */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_SET);
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "128");       /* the original stays the original */
        done(&c, &r);
}

/* A loop device attached to a new file (diskseq moved) is a new device:
 * the scheduler the admin set on the old medium is what blkpolicyd finds
 * on the new one, so that is what goes back at the end, and what followed
 * the old switch is recorded again before the new one. */
TEST(new_media_adopts_the_admins_values_as_found) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "none", "mq-deadline");
        recorded(&c, "nr_requests", "128", WRITTEN_UNKNOWN);
        c.wanted[TUNABLE_SCHEDULER] = "mq-deadline";
        live(&c, "scheduler", "kyber");
        live(&c, "nr_requests", "64");
        c.new_media = true;
        run(&c, &r);
        ASSERT_TRUE(!r.overridden[TUNABLE_SCHEDULER]);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_SET && r.switches);
        ASSERT_STREQ(r.steps[0].value, "mq-deadline");
        ASSERT_STREQ(found_of(&r, "scheduler"), "kyber");
        ASSERT_STREQ(found_of(&r, "nr_requests"), "64");
        ASSERT_STREQ(intent_of(&r, "nr_requests"), WRITTEN_UNKNOWN);
        take(&c, &r);

        /* the switch landed; at the end kyber and its depth go back */
        c.new_media = false;
        c.wanted[TUNABLE_SCHEDULER] = NULL;
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "256");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_RESTORE);
        ASSERT_STREQ(r.steps[0].value, "kyber");
        done(&c, &r);
}

/* Only what the disk held when the change was seen is adopted: an admin's
 * change after it (during the pass, or before a second change event's
 * pass) is theirs on the new medium, left alone. */
TEST(new_media_adopts_only_what_was_seen_at_the_change) {
        Case c = {};
        LiveValue seen[TUNABLES_MAX] = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        recorded(&c, "scheduler", "none", "mq-deadline");
        c.wanted[T("read_ahead_kb")] = "4096";
        c.wanted[TUNABLE_SCHEDULER] = "mq-deadline";
        live(&c, "read_ahead_kb", "512");
        live(&c, "scheduler", "kyber");
        live(&c, "nr_requests", "64");
        seen[T("read_ahead_kb")] = (LiveValue) { .state = LIVE_OK, .value = "512" };
        seen[TUNABLE_SCHEDULER] = (LiveValue) { .state = LIVE_OK, .value = "mq-deadline" };
        c.new_media = true;
        c.media_live = seen;
        run(&c, &r);
        ASSERT_TRUE(r.overridden[TUNABLE_SCHEDULER]);         /* kyber came after the change */
        ASSERT_TRUE(!r.overridden[T("read_ahead_kb")]);        /* 512 was there at the change */
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("read_ahead_kb"));
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "512");
        done(&c, &r);
}

/* SIGKILL after the record was saved, before the write landed: live is
 * still the found value. That is nobody's change: applied on restart, and
 * nothing to put back at stop. */
TEST(crash_between_record_and_write) {
        Case c = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", NULL);
        intended(&c, "read_ahead_kb", "4096");
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "128");
        c.wanted[T("read_ahead_kb")] = "4096";
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_SET && !r.overridden[T("read_ahead_kb")]);
        device_record_done(&r.record);

        c.wanted[T("read_ahead_kb")] = NULL;
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && device_record_empty(&r.record));
        done(&c, &r);
}

/* A reload that drops a policy, an exclude: nothing wanted any more. */
TEST(no_longer_wanted_is_put_back) {
        Case c = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "4096");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_RESTORE);
        ASSERT_STREQ(r.steps[0].value, "128");
        ASSERT_STREQ(intent_of(&r, "read_ahead_kb"), "128");
        ASSERT_STREQ(written_of(&r, "read_ahead_kb"), "4096");    /* still blkpolicyd's until it lands */
        done(&c, &r);
}

TEST(first_found_value_wins) {
        Case c = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        c.wanted[T("read_ahead_kb")] = "8192";      /* a reload changed the value */
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "4096");
        run(&c, &r);
        ASSERT_EQ_INT(r.n_steps, 1);
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "128");
        ASSERT_STREQ(intent_of(&r, "read_ahead_kb"), "8192");
        ASSERT_STREQ(written_of(&r, "read_ahead_kb"), "4096");
        done(&c, &r);
}

TEST(unreadable_scheduler_touches_nothing) {
        Case c = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        c.live[TUNABLE_SCHEDULER].state = LIVE_UNKNOWN;
        live(&c, "read_ahead_kb", "4096");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && device_record_count(&r.record) == 1);
        device_record_done(&r.record);

        /* an unreadable attribute keeps its record */
        live(&c, "scheduler", "none");
        c.live[T("read_ahead_kb")].state = LIVE_UNKNOWN;
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && device_record_count(&r.record) == 1);
        done(&c, &r);
}

TEST(skip_stops_writes_not_bookkeeping) {
        Case c = {};
        bool skip[TUNABLES_MAX] = {};
        ReconcileInput in = { .record = &c.record, .wanted = c.wanted, .live = c.live, .skip = skip };
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        recorded(&c, "rq_affinity", "1", "2");
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "4096");
        live(&c, "rq_affinity", "1");
        skip[T("read_ahead_kb")] = skip[T("rq_affinity")] = true;
        ASSERT_EQ_INT(reconcile(&in, &r), 0);
        ASSERT_EQ_INT(r.n_steps, 0);
        ASSERT_TRUE(found_of(&r, "read_ahead_kb") && !found_of(&r, "rq_affinity"));  /* back: dropped */
        done(&c, &r);
}

/* A tunable the policy set under its scheduler is forgotten once that
 * scheduler is gone and blkpolicyd no longer holds the scheduler. */
TEST(absent_tunable_kept_only_while_scheduler_held) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "none", "mq-deadline");
        recorded(&c, "iosched/fifo_batch", "16", "4");
        live(&c, "scheduler", "bfq");   /* the admin's */
        run(&c, &r);
        ASSERT_TRUE(device_record_empty(&r.record) && r.n_steps == 0);
        done(&c, &r);
}

/* A crash in the middle of a restore (or of a reload's new value): live
 * may still be what blkpolicyd wrote before, or what it was writing. Both
 * are blkpolicyd's; neither is the admin's. */
TEST(crash_mid_restore_is_still_ours) {
        Case c = {};
        Reconciled r;

        recorded(&c, "read_ahead_kb", "128", "4096");
        intended(&c, "read_ahead_kb", "128");
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "4096");     /* the restore did not land */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_RESTORE);
        device_record_done(&r.record);
        live(&c, "read_ahead_kb", "128");      /* it did */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && device_record_empty(&r.record));
        done(&c, &r);

        recorded(&c, "read_ahead_kb", "128", "4096");
        intended(&c, "read_ahead_kb", "8192"); /* a reload's new value, in flight */
        live(&c, "scheduler", "none");
        live(&c, "read_ahead_kb", "8192");
        run(&c, &r);                            /* not wanted any more: put back */
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_RESTORE && !r.overridden[T("read_ahead_kb")]);
        done(&c, &r);
}

/* A switch that did not land (refused, or a crash before it): what it
 * would have reset was not reset, and the admin's later tuning of it is
 * the admin's. */
TEST(failed_switch_leaves_nothing_following) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "mq-deadline", NULL);
        intended(&c, "scheduler", "none");
        recorded(&c, "nr_requests", "50", NULL);
        intended(&c, "nr_requests", WRITTEN_UNKNOWN);
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "64");          /* the admin, after the failed switch */
        live(&c, "iosched/fifo_batch", "32");
        run(&c, &r);                            /* stop: nothing wanted */
        ASSERT_TRUE(r.n_steps == 0 && device_record_empty(&r.record));
        done(&c, &r);
}

/* A policy that wants the found scheduler back (a flip back to a base that
 * names it): once it is back, what its switch away reset comes back too. */
TEST(switch_back_by_policy_puts_back_what_followed) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "mq-deadline", "none");
        recorded(&c, "nr_requests", "50", WRITTEN_UNKNOWN);
        recorded(&c, "iosched/read_expire", "400", WRITTEN_UNKNOWN);
        c.wanted[TUNABLE_SCHEDULER] = "mq-deadline";
        live(&c, "scheduler", "none");
        live(&c, "nr_requests", "128");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.switches && r.steps[0].kind == STEP_SET);
        take(&c, &r);
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "256");
        live(&c, "iosched/read_expire", "500");
        run(&c, &r);
        ASSERT_TRUE(!found_of(&r, "scheduler"));      /* wanted, and as found: nothing of ours */
        ASSERT_TRUE(r.n_steps == 2 && r.steps[0].tunable == T("nr_requests") && r.steps[1].tunable == T("iosched/read_expire"));
        ASSERT_STREQ(r.steps[0].value, "50");
        ASSERT_STREQ(r.steps[1].value, "400");
        done(&c, &r);
}

/* The admin puts the found value back by hand after blkpolicyd changed
 * it: that is the admin's value now, not a crash before a write. */
TEST(found_value_put_back_by_hand_is_the_admins) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "mq-deadline", "none");
        c.wanted[TUNABLE_SCHEDULER] = "none";
        live(&c, "scheduler", "mq-deadline");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && r.overridden[TUNABLE_SCHEDULER]);
        done(&c, &r);
}

/* A policy drops nr_requests while its scheduler switch stays: the found
 * value goes back now, and stays recorded: the switch back will reset it
 * again, and then it is put back once more. */
TEST(dropped_value_under_a_switch_stays_recorded) {
        Case c = {};
        Reconciled r;

        recorded(&c, "scheduler", "none", "bfq");
        recorded(&c, "nr_requests", "100", "64");
        c.wanted[TUNABLE_SCHEDULER] = "bfq";
        live(&c, "scheduler", "bfq");
        live(&c, "nr_requests", "64");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("nr_requests") && r.steps[0].kind == STEP_RESTORE);
        take(&c, &r);
        live(&c, "nr_requests", "100");
        run(&c, &r);
        ASSERT_EQ_INT(r.n_steps, 0);
        ASSERT_STREQ(written_of(&r, "nr_requests"), WRITTEN_UNKNOWN);
        done(&c, &r);
}

/* Measured on 6.18: a write of nr_requests resets mq-deadline's
 * async_depth. It is recorded before, as for a switch. */
TEST(nr_requests_write_records_async_depth) {
        Case c = {};
        Reconciled r;

        c.wanted[T("nr_requests")] = "64";
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "50");
        live(&c, "iosched/async_depth", "20");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("nr_requests"));
        ASSERT_STREQ(found_of(&r, "iosched/async_depth"), "20");
        ASSERT_STREQ(intent_of(&r, "iosched/async_depth"), WRITTEN_UNKNOWN);
        take(&c, &r);
        live(&c, "nr_requests", "64");
        live(&c, "iosched/async_depth", "48");
        c.wanted[T("nr_requests")] = NULL;     /* stop */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("nr_requests"));      /* async_depth waits for it */
        take(&c, &r);
        live(&c, "nr_requests", "50");
        live(&c, "iosched/async_depth", "37");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("iosched/async_depth"));
        ASSERT_STREQ(r.steps[0].value, "20");
        done(&c, &r);
}

/* A policy's max_sectors_kb 256 on a disk at 1280 with read-ahead 64:
 * the first round writes max_sectors_kb alone. */
static void first_max_sectors_write(Case *c, Reconciled *r) {
        c->wanted[T("max_sectors_kb")] = "256";
        live(c, "scheduler", "none");
        live(c, "max_sectors_kb", "1280");
        live(c, "read_ahead_kb", "64");
        run(c, r);
        ASSERT_TRUE(r->n_steps == 1 && r->steps[0].tunable == T("max_sectors_kb"));
}

/* Measured on 6.18 (a rotational loop device): a write of max_sectors_kb
 * is a limits update that raises read_ahead_kb. It is recorded before, as
 * for a switch; not wanted, it comes back after max_sectors_kb. */
TEST(max_sectors_write_records_read_ahead) {
        static const unsigned v6_18[3] = { 6, 18, 0 };
        Case c = { .kernel_version = v6_18 };
        Reconciled r;

        first_max_sectors_write(&c, &r);
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "64");
        ASSERT_STREQ(intent_of(&r, "read_ahead_kb"), WRITTEN_UNKNOWN);
        take(&c, &r);
        live(&c, "max_sectors_kb", "256");
        live(&c, "read_ahead_kb", "512");
        run(&c, &r);
        ASSERT_EQ_INT(r.n_steps, 0);    /* the kernel's while max_sectors_kb is away, as nr_requests under a switch */
        ASSERT_STREQ(written_of(&r, "read_ahead_kb"), WRITTEN_UNKNOWN);
        take(&c, &r);
        c.wanted[T("max_sectors_kb")] = NULL;  /* stop */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("max_sectors_kb"));    /* read_ahead_kb waits for it */
        take(&c, &r);
        live(&c, "max_sectors_kb", "1280");
        live(&c, "read_ahead_kb", "2560");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("read_ahead_kb"));
        ASSERT_STREQ(r.steps[0].value, "64");
        done(&c, &r);
}

/* Both wanted: max_sectors_kb is written first, read_ahead_kb after it
 * (in the round after, once the reset is read), so the policy's read-ahead
 * is the last word; the found one is recorded before either write. */
TEST(max_sectors_written_before_read_ahead) {
        Case c = {};
        Reconciled r;

        c.wanted[T("read_ahead_kb")] = "32";
        first_max_sectors_write(&c, &r);
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "64");
        take(&c, &r);
        live(&c, "max_sectors_kb", "256");
        live(&c, "read_ahead_kb", "512");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("read_ahead_kb"));
        ASSERT_STREQ(r.steps[0].value, "32");
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "64");
        take(&c, &r);
        live(&c, "read_ahead_kb", "32");
        c.wanted[T("max_sectors_kb")] = c.wanted[T("read_ahead_kb")] = NULL;   /* stop */
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].tunable == T("max_sectors_kb"));    /* put back first */
        ASSERT_STREQ(intent_of(&r, "read_ahead_kb"), WRITTEN_UNKNOWN);
        done(&c, &r);
}

/* Before 6.9 a write of max_sectors_kb set only the bdi's io_pages:
 * read_ahead_kb is not touched, not recorded. */
TEST(max_sectors_write_before_6_9_leaves_read_ahead) {
        static const unsigned v6_8[3] = { 6, 8, 0 };
        Case c = { .kernel_version = v6_8 };
        Reconciled r;

        first_max_sectors_write(&c, &r);
        ASSERT_TRUE(found_of(&r, "read_ahead_kb") == NULL);
        done(&c, &r);
}

/* What a switch resets cannot be read: the switch waits, or its value
 * would be lost. */
TEST(unreadable_reset_blocks_the_switch) {
        Case c = {};
        Reconciled r;

        c.wanted[TUNABLE_SCHEDULER] = "none";
        live(&c, "scheduler", "mq-deadline");
        live(&c, "nr_requests", "50");
        c.live[T("iosched/fifo_batch")].state = LIVE_UNKNOWN;
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && r.unreadable[TUNABLE_SCHEDULER]);
        done(&c, &r);
}

/* Found by canary-attack.py (seed 3): wbt_lat_usec put back while the
 * scheduler was still away stayed recorded as reset by the switch ('*'),
 * which no switch resets; the admin's 5555 after it then passed for
 * blkpolicyd's, and the stop wrote 2000 over it. Back is back for what a
 * switch does not reset; nr_requests and a scheduler's tunables wait. */
TEST(put_back_is_dropped_unless_a_switch_resets_it) {
        Case c = {};
        Reconciled r;

        /* both put back by blkpolicyd, landed: the intents say so */
        recorded(&c, "scheduler", "none", "mq-deadline");
        recorded(&c, "wbt_lat_usec", "2000", "75000");
        intended(&c, "wbt_lat_usec", "2000");
        recorded(&c, "iosched/fifo_batch", "16", "4");
        intended(&c, "iosched/fifo_batch", "16");
        c.wanted[T("scheduler")] = "mq-deadline";
        live(&c, "scheduler", "mq-deadline");
        live(&c, "wbt_lat_usec", "2000");
        live(&c, "iosched/fifo_batch", "16");
        run(&c, &r);
        ASSERT_EQ_INT(r.n_steps, 0);
        ASSERT_TRUE(found_of(&r, "wbt_lat_usec") == NULL);
        ASSERT_STREQ(written_of(&r, "iosched/fifo_batch"), "*");       /* the switch back resets it again */
        take(&c, &r);

        live(&c, "wbt_lat_usec", "5555");                      /* the admin's, after */
        run(&c, &r);
        ASSERT_TRUE(found_of(&r, "wbt_lat_usec") == NULL && r.n_steps == 0);
        done(&c, &r);
}

/* read_ahead_kb recorded (found, written), wanted (NULL: not), live now,
 * and what a queue-limits update leaves it at now; the scheduler none. */
static void read_ahead(Case *c, const char *found, const char *written, const char *want, const char *now,
                       const char *kernel_default) {
        recorded(c, "read_ahead_kb", found, written);
        c->wanted[T("read_ahead_kb")] = want;
        live(c, "scheduler", "none");
        live(c, "read_ahead_kb", now);
        c->kernel_default[T("read_ahead_kb")] = kernel_default;
}

/* A revalidation's limits update put read_ahead_kb back to the kernel's
 * default, which is also the found value: the kernel's doing, not the
 * admin putting the found value back by hand. Written again, no override,
 * the found value kept. */
TEST(kernel_default_after_a_revalidation_is_written_again) {
        Case c = {};
        Reconciled r;

        read_ahead(&c, "8192", "128", "128", "8192", "8192");
        run(&c, &r);
        ASSERT_TRUE(r.kernel_reset[T("read_ahead_kb")] && !r.overridden[T("read_ahead_kb")]);
        ASSERT_EQ_INT(r.n_steps, 1);
        ASSERT_EQ_INT(r.steps[0].tunable, T("read_ahead_kb"));
        ASSERT_EQ_INT(r.steps[0].kind, STEP_SET);
        ASSERT_STREQ(r.steps[0].value, "128");
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "8192");
        ASSERT_STREQ(intent_of(&r, "read_ahead_kb"), "128");
        done(&c, &r);
}

/* The limits changed (a dm table load with a larger io_opt): the default
 * is now another value than the one found. Written again; the found value
 * stays what was found, and is what a stop puts back. */
TEST(kernel_default_of_new_limits_keeps_the_found_value) {
        Case c = {};
        Reconciled r;

        read_ahead(&c, "128", "64", "64", "2048", "2048");
        run(&c, &r);
        ASSERT_TRUE(r.kernel_reset[T("read_ahead_kb")]);
        ASSERT_TRUE(r.n_steps == 1 && streq(r.steps[0].value, "64"));
        ASSERT_STREQ(found_of(&r, "read_ahead_kb"), "128");
        take(&c, &r);

        /* a stop after another revalidation: the found value goes back,
         * not the kernel's new default left as the admin's */
        c.wanted[T("read_ahead_kb")] = NULL;
        run(&c, &r);
        ASSERT_TRUE(r.kernel_reset[T("read_ahead_kb")]);
        ASSERT_TRUE(r.n_steps == 1 && r.steps[0].kind == STEP_RESTORE && streq(r.steps[0].value, "128"));
        done(&c, &r);
}

/* What is not the kernel's default is an admin's write: today's rule
 * (overridden, left alone; not wanted, the claim dropped). */
TEST(a_value_that_is_not_the_kernel_default_is_the_admins) {
        Case c = {};
        Reconciled r;

        read_ahead(&c, "8192", "128", "128", "512", "8192");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && r.overridden[T("read_ahead_kb")] && !r.kernel_reset[T("read_ahead_kb")]);
        done(&c, &r);

        read_ahead(&c, "8192", "128", NULL, "512", "8192");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && !found_of(&r, "read_ahead_kb"));
        done(&c, &r);
}

/* blkpolicyd's own value equal to the default is no reset (nothing
 * changed), and without a kernel default nothing is taken for one. */
TEST(kernel_default_needs_a_value_of_blkpolicyds_under_it) {
        Case c = {};
        Reconciled r;

        read_ahead(&c, "128", "8192", "8192", "8192", "8192");
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && !r.kernel_reset[T("read_ahead_kb")]);
        take(&c, &r);

        /* found put back by hand, no kernel default known: the admin's */
        live(&c, "read_ahead_kb", "128");
        c.kernel_default[T("read_ahead_kb")] = NULL;
        run(&c, &r);
        ASSERT_TRUE(r.n_steps == 0 && r.overridden[T("read_ahead_kb")]);
        done(&c, &r);
}
