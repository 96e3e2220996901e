/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* decide() is pure: synthetic facts and policies in, a plan out. */
#include "decide.h"
#include "plan.h"
#include "shared.h"
#include "tests.h"
#include "util.h"

static DeviceFacts sq_virtio(void) {
        DeviceFacts f = { .name = "vda", .major = 254, .hw_queues = 1, .rotational = true,
                          .classes = CLASS_BIT(CLASS_SINGLE_QUEUE) | CLASS_BIT(CLASS_VIRTIO),
                          .driver = "virtio_blk" };

        ASSERT_EQ_INT(scheduler_list_parse("none [mq-deadline] kyber bfq", &f.schedulers), 0);
        return f;
}

static KernelCaps kernel(unsigned major, unsigned minor, Tristate dd) {
        KernelCaps k = { .version = { major, minor, 0 }, .dispatch_direct = dd };
        snprintf(k.release, sizeof(k.release), "%u.%u.0", major, minor);
        return k;
}

static Policy *policy(const char *name, const char *sched) {
        Policy *p = calloc(1, sizeof(Policy));
        const char *error;

        p->name = strdup(name);
        p->match.rotational = p->match.hidden = -1;
        p->match.hwq_max = ~0u;
        if (sched)
                ASSERT_EQ_INT(sched_choices_parse(sched, p->sched, &p->n_sched, &error), 0);
        return p;
}

static void set_value(Policy *p, const char *section, const char *key, const char *value) {
        int t = tunable_find(section, key);
        ASSERT_TRUE(t > 0);
        p->values[t] = strdup(value);
}

static PolicySet *set_of(Policy *a, Policy *b) {
        PolicySet *s = calloc(1, sizeof(PolicySet));

        s->n_ref = 1;
        s->policies = calloc(2, sizeof(Policy *));
        s->policies[s->n_policies++] = a;
        if (b)
                s->policies[s->n_policies++] = b;
        return s;
}

static const PlanItem *item(Plan *p, const char *section, const char *key) {
        int t = tunable_find(section, key);
        return t < 0 ? NULL : plan_find(p, (unsigned) t);
}

static void run(const DeviceFacts *f, const KernelCaps *k, const PolicySet *s, Plan *plan) {
        DecideInput in = { .facts = f, .caps = k, .policies = s };
        decide(&in, plan);
}

TEST(fallback_without_dispatch_direct) {
        DeviceFacts f = sq_virtio();
        PolicySet *s = set_of(policy("20-fast.policy", "mq-deadline+dispatch_direct none"), NULL);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        for (Tristate dd = TRISTATE_UNKNOWN; dd <= TRISTATE_NO; dd++) {
                KernelCaps k = kernel(6, 18, dd);
                run(&f, &k, s, &plan);
                ASSERT_TRUE(plan.managed && plan.n_items == 1);
                ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
                ASSERT_TRUE(item(&plan, "mq-deadline", "dispatch_direct") == NULL);
        }
        policy_set_unref(s);
}

/* A kept plan holds the set it was decided from: a reload whose deciding
 * failed lets go of the old set, and the plans not decided again still
 * read their policy's names and choices (ASan: no use after free). */
TEST(kept_plan_holds_its_policy_set) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        PolicySet *s = set_of(policy("20-fast.policy", "mq-deadline none"), NULL);
        InternTable plans = { .type = &plan_intern_type };
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);
        const Plan *kept;

        run(&f, &k, s, &plan);
        kept = intern_ref(&plans, &plan);
        ASSERT_TRUE(kept && kept->set == s && s->n_ref == 2);
        policy_set_unref(s);            /* the manager's reference: a reload */
        ASSERT_STREQ(kept->policy, "20-fast.policy");
        ASSERT_STREQ(kept->items[0].source, "20-fast.policy");
        ASSERT_TRUE(kept->fallback_mask == 1u << 1 && streq(kept->choices[1].name, "none"));
        intern_unref(&plans, kept);     /* the last holder: the set goes (LSan: nothing leaks) */
        intern_table_done(&plans);
}

TEST(dispatch_direct_when_the_kernel_has_it) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(7, 2, TRISTATE_YES);
        PolicySet *s = set_of(policy("20-fast.policy", "mq-deadline+dispatch_direct none"), NULL);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);
        const PlanItem *sched, *dd;

        run(&f, &k, s, &plan);
        sched = item(&plan, "Queue", "scheduler");
        dd = item(&plan, "mq-deadline", "dispatch_direct");
        ASSERT_STREQ(sched->target, "mq-deadline");
        ASSERT_TRUE(plan.fallback_mask == 1u << 1 && streq(plan.choices[1].name, "none"));
        ASSERT_TRUE(dd && streq(dd->target, "1") && dd->result != RESULT_UNSUPPORTED);
        ASSERT_STREQ(dd->source, "20-fast.policy");
        /* scheduler first, its tunable after */
        ASSERT_EQ_INT(plan.items[0].tunable, TUNABLE_SCHEDULER);
        policy_set_unref(s);
}

TEST(zoned_keeps_mq_deadline_before_6_10) {
        DeviceFacts f = sq_virtio();
        KernelCaps old = kernel(6, 1, TRISTATE_NO), now = kernel(6, 12, TRISTATE_NO);
        PolicySet *s = set_of(policy("20-fast.policy", "none"), NULL);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        f.zoned = ZONED_HOST_MANAGED;
        f.classes |= CLASS_BIT(CLASS_ZONED);
        run(&f, &old, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "mq-deadline");
        ASSERT_TRUE(plan.reason && strstr(plan.reason, "6.10"));
        run(&f, &now, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        f.zoned = ZONED_HOST_AWARE;
        run(&f, &old, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "mq-deadline");
        policy_set_unref(s);
}

TEST(bio_based_and_excluded_are_left_alone) {
        DeviceFacts f = { .name = "dm-0", .classes = CLASS_BIT(CLASS_BIO_BASED) };
        DeviceFacts v = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        PolicySet *s = set_of(policy("00-all.policy", "none"), NULL);
        DecideInput in = { .facts = &v, .caps = &k, .policies = s, .excluded = true };
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        run(&f, &k, s, &plan);
        ASSERT_TRUE(!plan.managed && plan.n_items == 0 && strstr(plan.reason, "bio-based"));
        decide(&in, &plan);
        ASSERT_TRUE(!plan.managed && plan.n_items == 0 && strstr(plan.reason, "excluded"));
        policy_set_unref(s);
}

TEST(later_files_override_setting_by_setting) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *a = policy("20-vendor.policy", "bfq"), *b = policy("90-admin.policy", "kyber");
        PolicySet *s;
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        set_value(a, "Queue", "read_ahead_kb", "4096");
        set_value(a, "Queue", "nr_requests", "64");
        set_value(b, "Queue", "nr_requests", "32");
        s = set_of(a, b);
        run(&f, &k, s, &plan);
        ASSERT_STREQ(plan.policy, "90-admin.policy");
        ASSERT_EQ_INT(plan.n_matched, 2);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "kyber");
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->source, "90-admin.policy");
        ASSERT_STREQ(item(&plan, "Queue", "nr_requests")->target, "32");
        ASSERT_STREQ(item(&plan, "Queue", "read_ahead_kb")->target, "4096");
        ASSERT_STREQ(item(&plan, "Queue", "read_ahead_kb")->source, "20-vendor.policy");
        policy_set_unref(s);
}

TEST(devices_with_the_same_plan_share_one_copy) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *a = policy("20-vendor.policy", "bfq"), *b = policy("90-admin.policy", NULL);
        InternTable plans = { .type = &plan_intern_type };
        PolicySet *s;
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);
        const Plan *first, *second, *other;
        int ra = tunable_find("Queue", "read_ahead_kb");

        set_value(a, "Queue", "read_ahead_kb", "4096");
        s = set_of(a, b);
        run(&f, &k, s, &plan);
        ASSERT_TRUE(plan.n_items == 2 && plan.n_matched == 2);
        first = intern_ref(&plans, &plan);
        ASSERT_TRUE(first && first != &plan && first->items != pb.items && first->matched != pb.matched);
        /* items and names in the copy's own block, right after it */
        ASSERT_TRUE(first->items == (PlanItem *) (first + 1));
        ASSERT_TRUE(first->matched == (const char **) (first->items + 2));
        ASSERT_STREQ(first->matched[1], "90-admin.policy");
        ASSERT_STREQ(item((Plan *) first, "Queue", "read_ahead_kb")->target, "4096");
        /* the same decision for a second device: the same copy */
        run(&f, &k, s, &plan);
        second = intern_ref(&plans, &plan);
        ASSERT_TRUE(second == first && intern_count(&plans, &plan) == 2);
        /* what apply read differs: another copy */
        (void) strscpy(pb.items[plan_find(&plan, (unsigned) ra) - pb.items].before, VALUE_MAX, "128");
        other = intern_ref(&plans, &plan);
        ASSERT_TRUE(other && other != first && plans.n_entries == 2);
        /* a smaller decision is another plan too */
        a->values[ra] = mfree(a->values[ra]);
        run(&f, &k, s, &plan);
        ASSERT_TRUE(plan.n_items == 1 && intern_count(&plans, &plan) == 0);
        intern_unref(&plans, other);
        ASSERT_EQ_INT(plans.n_entries, 1);
        intern_unref(&plans, second);
        ASSERT_TRUE(plans.n_entries == 1 && intern_count(&plans, first) == 1);
        intern_unref(&plans, first);
        ASSERT_EQ_INT(plans.n_entries, 0);
        intern_unref(&plans, NULL);
        /* a plan with no items and no names (undecided, unmanaged) */
        first = intern_ref(&plans, &(Plan) { .reason = "not decided yet" });
        ASSERT_TRUE(first && first->n_items == 0 && streq(first->reason, "not decided yet") && plans.n_entries == 1);
        intern_unref(&plans, first);
        intern_table_done(&plans);
        policy_set_unref(s);
}

TEST(a_later_file_without_scheduler_keeps_the_earlier_choice) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *a = policy("20-vendor.policy", "none"), *b = policy("90-admin.policy", NULL);
        PolicySet *s;
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        set_value(b, "Queue", "read_ahead_kb", "1024");
        s = set_of(a, b);
        run(&f, &k, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->source, "20-vendor.policy");
        ASSERT_STREQ(plan.policy, "90-admin.policy");
        policy_set_unref(s);
}

TEST(no_match_leaves_the_kernel_choice) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *p = policy("10-nvme.policy", "none");
        PolicySet *s;
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        p->match.classes_required = CLASS_BIT(CLASS_NVME);
        s = set_of(p, NULL);
        run(&f, &k, s, &plan);
        ASSERT_TRUE(plan.managed && plan.policy == NULL && plan.n_items == 0);
        ASSERT_TRUE(strstr(plan.reason, "no policy"));
        policy_set_unref(s);
}

TEST(iosched_tunables_of_another_scheduler_are_unsupported) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *p = policy("20-x.policy", "none");
        PolicySet *s;
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        set_value(p, "mq-deadline", "fifo_batch", "8");
        set_value(p, "Queue", "nomerges", "1");
        s = set_of(p, NULL);
        run(&f, &k, s, &plan);
        ASSERT_EQ_INT(item(&plan, "mq-deadline", "fifo_batch")->result, RESULT_UNSUPPORTED);
        ASSERT_TRUE(strstr(item(&plan, "mq-deadline", "fifo_batch")->error, "runs none"));
        ASSERT_EQ_INT(item(&plan, "Queue", "nomerges")->result, RESULT_PLANNED);
        policy_set_unref(s);
}

TEST(unavailable_schedulers_are_skipped) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        PolicySet *s = set_of(policy("20-x.policy", "bfq-mq kyber none"), NULL);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        run(&f, &k, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "kyber");
        ASSERT_EQ_INT(scheduler_list_parse("[none]", &f.schedulers), 0);    /* the queue takes no scheduler */
        policy_set_unref(s);
        s = set_of(policy("20-y.policy", "mq-deadline bfq"), NULL);
        run(&f, &k, s, &plan);
        ASSERT_EQ_INT(item(&plan, "Queue", "scheduler")->result, RESULT_UNSUPPORTED);
        policy_set_unref(s);
}

TEST(modular_schedulers_are_tried_before_they_are_loaded) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 12, TRISTATE_NO);
        PolicySet *s = set_of(policy("80-x.policy", "bfq mq-deadline"), NULL);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        /* Debian at boot: bfq and kyber not loaded yet */
        ASSERT_EQ_INT(scheduler_list_parse("none [mq-deadline]", &f.schedulers), 0);
        run(&f, &k, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "bfq");
        ASSERT_TRUE(plan.fallback_mask == 1u << 1 && streq(plan.choices[1].name, "mq-deadline"));
        policy_set_unref(s);
        /* an out-of-tree name must be listed to be chosen */
        s = set_of(policy("80-y.policy", "bfq-mq none"), NULL);
        run(&f, &k, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        policy_set_unref(s);
}

static bool matches(const Policy *p, const DeviceFacts *f, const KernelCaps *k, const char *why) {
        const char *w = NULL;
        bool r = decide_policy_matches(p, f, k, &w);

        if (why && (!w || !streq(w, why)))
                fprintf(stderr, "  expected to fail on %s, failed on %s\n", why, w ?: "nothing");
        return r && !why ? true : (!r && why && w && streq(w, why));
}

TEST(match_conditions) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 12, TRISTATE_NO);
        char *props[] = { "ID_MODEL=Samsung_SSD_870", "ID_SERIAL=S1", NULL };
        Policy *p = policy("x.policy", NULL);
        const char *error;

        f.properties = props;
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        p->match.classes_excluded = CLASS_BIT(CLASS_VIRTIO);
        ASSERT_TRUE(matches(p, &f, &k, "class (excluded)"));
        p->match.classes_excluded = 0;
        ASSERT_EQ_INT(strv_push(&p->match.names, "sd*"), 0);
        ASSERT_TRUE(matches(p, &f, &k, "name"));
        ASSERT_EQ_INT(strv_push(&p->match.names, "vd[a-z]"), 0);
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        ASSERT_EQ_INT(strv_push(&p->match.drivers, "nvme"), 0);
        ASSERT_TRUE(matches(p, &f, &k, "driver"));
        ASSERT_EQ_INT(strv_push(&p->match.drivers, "virtio_blk"), 0);
        p->match.rotational = 0;
        ASSERT_TRUE(matches(p, &f, &k, "rotational"));
        p->match.rotational = 1;
        p->match.hwq_min = 2;
        ASSERT_TRUE(matches(p, &f, &k, "hw_queues"));
        p->match.hwq_min = 1;
        ASSERT_EQ_INT(strv_push(&p->match.properties, "ID_MODEL=Samsung*"), 0);
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        ASSERT_EQ_INT(strv_push(&p->match.properties, "ID_WWN=*"), 0);
        ASSERT_TRUE(matches(p, &f, &k, "property"));
        p->match.properties = strv_free(p->match.properties);
        p->match.zoned_mask = 1u << ZONED_HOST_MANAGED;
        ASSERT_TRUE(matches(p, &f, &k, "zoned"));
        p->match.zoned_mask = 0;
        p->match.hidden = 1;
        ASSERT_TRUE(matches(p, &f, &k, "hidden"));
        p->match.hidden = -1;
        p->match.kernel[0] = (KernelCond) { KOP_LT, { 6, 10, 0 } };
        p->match.n_kernel = 1;
        ASSERT_TRUE(matches(p, &f, &k, "kernel"));
        p->match.kernel[0].op = KOP_GE;
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        (void) error;
        f.properties = NULL;
        policy_free(p);
}

TEST(match_stack_conditions) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *p = policy("x.policy", NULL);

        /* alone: neither holders nor slaves */
        p->match.stack_mask = 1u << STACK_MEMBER;
        ASSERT_TRUE(matches(p, &f, &k, "stack"));
        p->match.stack_mask = 1u << STACK_ALONE;
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        /* a member whatever is below it: an LV on md0 holds md0 */
        f.topology.n_slaves = 2;
        f.topology.n_holders = 1;
        ASSERT_TRUE(matches(p, &f, &k, "stack"));
        p->match.stack_mask = 1u << STACK_MEMBER;
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        f.topology.n_holders = 0;
        ASSERT_TRUE(matches(p, &f, &k, "stack"));
        p->match.stack_mask = 1u << STACK_TOP;
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        p->match.stack_mask = 0;
        /* dm's uuid prefix: a disk that is no map has none */
        ASSERT_EQ_INT(strv_push(&p->match.dm_uuid_prefixes, "LVM-"), 0);
        ASSERT_TRUE(matches(p, &f, &k, "dm_uuid_prefix"));
        (void) strscpy(f.topology.dm_uuid_prefix, sizeof(f.topology.dm_uuid_prefix), "CRYPT-");
        ASSERT_TRUE(matches(p, &f, &k, "dm_uuid_prefix"));
        ASSERT_EQ_INT(strv_push(&p->match.dm_uuid_prefixes, "CRYPT-"), 0);
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        p->match.dm_uuid_prefixes = strv_free(p->match.dm_uuid_prefixes);
        ASSERT_EQ_INT(strv_push(&p->match.md_levels, "raid1"), 0);
        ASSERT_TRUE(matches(p, &f, &k, "md_level"));
        (void) strscpy(f.topology.md_level, sizeof(f.topology.md_level), "raid1");
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        p->match.nvme_mpath_mask = 1u << NVME_MPATH_HEAD;
        ASSERT_TRUE(matches(p, &f, &k, "nvme_multipath"));
        f.topology.nvme_multipath = NVME_MPATH_HEAD;
        ASSERT_TRUE(matches(p, &f, &k, NULL));
        p->match.nvme_mpath_mask = 1u << NVME_MPATH_NONE;
        ASSERT_TRUE(matches(p, &f, &k, "nvme_multipath"));
        policy_free(p);
}

TEST(busy_settings_layer_over_the_base) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        Policy *base = policy("20-base.policy", "none"), *dyn = policy("30-dyn.policy", NULL);
        PolicySet *s;
        DecideInput in;
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);
        const char *error;

        set_value(base, "Queue", "nr_requests", "256");
        set_value(base, "Queue", "read_ahead_kb", "128");
        dyn->dynamic.enabled = dyn->dynamic.has_busy = true;
        ASSERT_EQ_INT(sched_choices_parse("mq-deadline", dyn->dynamic.busy_sched, &dyn->dynamic.n_busy_sched, &error), 0);
        dyn->dynamic.busy_values[tunable_find("Queue", "nr_requests")] = strdup("64");
        dyn->dynamic.busy_values[tunable_find("mq-deadline", "fifo_batch")] = strdup("8");
        s = set_of(base, dyn);

        in = (DecideInput) { .facts = &f, .caps = &k, .policies = s };
        decide(&in, &plan);
        ASSERT_TRUE(plan.dynamic == &dyn->dynamic && streq(plan.dynamic_source, "30-dyn.policy") && !plan.busy);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        ASSERT_STREQ(item(&plan, "Queue", "nr_requests")->target, "256");
        ASSERT_TRUE(item(&plan, "mq-deadline", "fifo_batch") == NULL);

        in.busy = true;
        decide(&in, &plan);
        ASSERT_TRUE(plan.busy);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "mq-deadline");
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->source, "30-dyn.policy");
        ASSERT_STREQ(item(&plan, "Queue", "nr_requests")->target, "64");
        ASSERT_STREQ(item(&plan, "Queue", "read_ahead_kb")->target, "128");
        ASSERT_TRUE(item(&plan, "mq-deadline", "fifo_batch")->result != RESULT_UNSUPPORTED);
        policy_set_unref(s);
}

TEST(a_scheduler_blkpolicyd_does_not_know_is_just_a_name) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_NO);
        PolicySet *s = set_of(policy("20-x.policy", "adios none"), NULL);
        Plan plan;
        PlanBuffer pb;

        plan = *plan_buffer_init(&pb);
        /* a kernel with a scheduler newer than blkpolicyd: listed, so usable */
        ASSERT_EQ_INT(scheduler_list_add(&f.schedulers, "adios"), 4);
        run(&f, &k, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "adios");
        /* and where it is not listed, the next one */
        f.schedulers.n--;
        run(&f, &k, s, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        policy_set_unref(s);
}

/* A bare "none" (a queue without elevator support: null_blk's no_sched=1
 * before 6.14) has no current scheduler: none is not planned there (a pass would see ""
 * and have no found value to record), and the rest of the policy still is. */
TEST(no_current_scheduler_takes_none_and_keeps_the_rest) {
        DeviceFacts f = { .name = "nullb0", .major = 251, .hw_queues = 1,
                          .classes = CLASS_BIT(CLASS_SINGLE_QUEUE) | CLASS_BIT(CLASS_NULL_BLK) };
        Policy *p = policy("50-nullb.policy", "none");
        PolicySet *s = set_of(p, NULL);
        KernelCaps k = kernel(6, 12, TRISTATE_UNKNOWN);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);

        set_value(p, "Queue", "read_ahead_kb", "4096");
        ASSERT_EQ_INT(scheduler_list_parse("none", &f.schedulers), 0);
        run(&f, &k, s, &plan);
        ASSERT_TRUE(plan.managed);
        ASSERT_EQ_INT(item(&plan, "Queue", "scheduler")->result, RESULT_UNSUPPORTED);
        ASSERT_STREQ(item(&plan, "Queue", "read_ahead_kb")->target, "4096");
        ASSERT_TRUE(item(&plan, "Queue", "read_ahead_kb")->result != RESULT_UNSUPPORTED);
        /* the same list with its entry current takes none as any queue does */
        ASSERT_EQ_INT(scheduler_list_parse("[none]", &f.schedulers), 0);
        run(&f, &k, s, &plan);
        ASSERT_TRUE(item(&plan, "Queue", "scheduler")->result != RESULT_UNSUPPORTED);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        policy_set_unref(s);
}

/* A canary (mode=observe) changes nothing that is written: the plan is the
 * one of the enforcing files alone; decide_canaries() says what it would
 * change over it, and only that. */
TEST(canary_is_left_out_and_previewed) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 12, TRISTATE_NO);
        Policy *base = policy("20-fast.policy", "none"), *canary = policy("90-new.policy", "mq-deadline");
        PolicySet *s = set_of(base, canary), *alone = set_of(policy("20-fast.policy", "none"), NULL);
        PlanBuffer pb, pa, pv;
        Plan plan = *plan_buffer_init(&pb), without = *plan_buffer_init(&pa), preview = *plan_buffer_init(&pv);
        PlanItem out[TUNABLES_MAX];
        DecideInput in = { .facts = &f, .caps = &k, .policies = s };
        unsigned n;

        set_value(base, "Queue", "read_ahead_kb", "128");
        set_value(alone->policies[0], "Queue", "read_ahead_kb", "128");
        set_value(canary, "Queue", "read_ahead_kb", "128");    /* the same as enforced: no change */
        set_value(canary, "Queue", "nr_requests", "64");
        canary->observe = true;
        decide(&in, &plan);
        run(&f, &k, alone, &without);
        ASSERT_STREQ(plan.canary, "90-new.policy");
        ASSERT_STREQ(plan.policy, "20-fast.policy");
        ASSERT_TRUE(plan.n_matched == 1 && plan.n_items == without.n_items);
        for (unsigned i = 0; i < plan.n_items; i++)
                ASSERT_TRUE(plan.items[i].tunable == without.items[i].tunable &&
                            streq(plan.items[i].target, without.items[i].target));
        n = decide_canaries(&in, &plan, &preview, out);
        ASSERT_EQ_INT((int) n, 2);
        ASSERT_TRUE(out[0].tunable == TUNABLE_SCHEDULER && streq(out[0].target, "mq-deadline"));
        ASSERT_STREQ(out[0].source, "90-new.policy");
        ASSERT_EQ_INT(out[0].result, RESULT_PLANNED);
        ASSERT_TRUE(out[1].tunable == (unsigned) tunable_find("Queue", "nr_requests") && streq(out[1].target, "64"));
        /* without a canary there is nothing to preview */
        decide(&(DecideInput) { .facts = &f, .caps = &k, .policies = alone }, &without);
        ASSERT_TRUE(without.canary == NULL);
        ASSERT_EQ_INT((int) decide_canaries(&(DecideInput) { .facts = &f, .caps = &k, .policies = alone }, &without,
                                            &preview, out), 0);
        policy_set_unref(s);
        policy_set_unref(alone);
}

/* A canary alone leaves the device as the kernel set it, names the canary
 * and holds the set its name points into; its [Dynamic] never runs, and a
 * scheduler it cannot have is shown unsupported, not planned. */
TEST(canary_alone_unsupported_and_no_dynamic) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 12, TRISTATE_NO);
        Policy *canary = policy("90-new.policy", "mq-deadline+dispatch_direct");
        PolicySet *s = set_of(canary, NULL);
        PlanBuffer pb, pv;
        Plan plan = *plan_buffer_init(&pb), preview = *plan_buffer_init(&pv);
        PlanItem out[TUNABLES_MAX];
        DecideInput in = { .facts = &f, .caps = &k, .policies = s };

        canary->observe = true;
        canary->dynamic.enabled = true;
        decide(&in, &plan);
        ASSERT_TRUE(plan.policy == NULL && plan.n_items == 0 && plan.n_matched == 0 && plan.dynamic == NULL);
        ASSERT_TRUE(plan.set == s && streq(plan.canary, "90-new.policy"));
        ASSERT_EQ_INT((int) decide_canaries(&in, &plan, &preview, out), 1);
        ASSERT_EQ_INT(out[0].result, RESULT_UNSUPPORTED);
        ASSERT_TRUE(preview.dynamic == NULL);
        policy_set_unref(s);
}

/* A bio-based queue (dm, md, an NVMe multipath head) gets the settings it
 * has, only from a policy that names the class: one written for disks
 * never reaches the stack above them. */
TEST(bio_based_only_by_class_and_only_what_it_has) {
        DeviceFacts f = { .name = "dm-0", .major = 253, .hw_queues = 0, .rotational = true,
                          .classes = CLASS_BIT(CLASS_BIO_BASED), .driver = "device-mapper" };
        KernelCaps k = kernel(6, 12, TRISTATE_NO);
        Policy *disks = policy("60-rotational.policy", "mq-deadline"), *dm = policy("80-dm.policy", "none");
        PolicySet *s = set_of(disks, dm);
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);
        const char *why = NULL;

        set_value(disks, "Queue", "read_ahead_kb", "4096");
        disks->match.rotational = 1;
        set_value(dm, "Queue", "read_ahead_kb", "1024");
        set_value(dm, "Queue", "nr_requests", "64");
        set_value(dm, "mq-deadline", "fifo_batch", "8");
        dm->match.classes_required = CLASS_BIT(CLASS_BIO_BASED);
        ASSERT_TRUE(!decide_policy_matches(disks, &f, &k, &why) && strstr(why, "bio-based"));
        run(&f, &k, s, &plan);
        ASSERT_TRUE(plan.managed && streq(plan.policy, "80-dm.policy") && plan.n_matched == 1);
        ASSERT_TRUE(strstr(plan.reason, "bio-based") != NULL);
        ASSERT_STREQ(item(&plan, "Queue", "read_ahead_kb")->target, "1024");
        ASSERT_EQ_INT(item(&plan, "Queue", "read_ahead_kb")->result, RESULT_PLANNED);
        ASSERT_EQ_INT(item(&plan, "Queue", "scheduler")->result, RESULT_UNSUPPORTED);
        ASSERT_EQ_INT(item(&plan, "Queue", "nr_requests")->result, RESULT_UNSUPPORTED);
        ASSERT_EQ_INT(item(&plan, "mq-deadline", "fifo_batch")->result, RESULT_UNSUPPORTED);
        ASSERT_STREQ(item(&plan, "Queue", "nr_requests")->error, "a bio-based queue has no nr_requests");

        /* without it, as before: left alone, and says why */
        s->n_policies = 1;
        run(&f, &k, s, &plan);
        ASSERT_TRUE(!plan.managed && plan.n_items == 0 && plan.set == NULL);
        ASSERT_STREQ(plan.reason, "bio-based: the device has no I/O scheduler");
        s->n_policies = 2;
        policy_set_unref(s);
}

/* What a canary brings along counts too: the tunables of its scheduler an
 * enforcing file sets, taken only under it; and what it drops goes (the
 * dispatch_direct of mq-deadline+dispatch_direct, under plain mq-deadline). */
TEST(canary_brings_and_drops) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(7, 2, TRISTATE_YES);
        Policy *base = policy("50-base.policy", "kyber"), *canary = policy("90-new.policy", "mq-deadline");
        PolicySet *s = set_of(base, canary);
        PlanBuffer pb, pv;
        Plan plan = *plan_buffer_init(&pb), preview = *plan_buffer_init(&pv);
        PlanItem out[TUNABLES_MAX];
        DecideInput in = { .facts = &f, .caps = &k, .policies = s };
        int fifo = tunable_find("mq-deadline", "fifo_batch"), dd = tunable_find("mq-deadline", "dispatch_direct");

        set_value(base, "mq-deadline", "fifo_batch", "8");
        canary->observe = true;
        decide(&in, &plan);
        ASSERT_EQ_INT(item(&plan, "mq-deadline", "fifo_batch")->result, RESULT_UNSUPPORTED);
        ASSERT_EQ_INT((int) decide_canaries(&in, &plan, &preview, out), 2);
        ASSERT_TRUE(out[0].tunable == TUNABLE_SCHEDULER && streq(out[0].target, "mq-deadline"));
        ASSERT_TRUE(out[1].tunable == (unsigned) fifo && out[1].result == RESULT_PLANNED);
        ASSERT_STREQ(out[1].source, "50-base.policy");

        ASSERT_EQ_INT(sched_choices_parse("mq-deadline+dispatch_direct", base->sched, &base->n_sched,
                                          &(const char *) { NULL }), 0);
        free(base->values[fifo]);
        base->values[fifo] = NULL;
        decide(&in, &plan);
        ASSERT_STREQ(item(&plan, "mq-deadline", "dispatch_direct")->target, "1");
        ASSERT_EQ_INT((int) decide_canaries(&in, &plan, &preview, out), 1);
        ASSERT_TRUE(out[0].tunable == (unsigned) dd && !out[0].target[0]);
        ASSERT_STREQ(out[0].error, CANARY_DROPS);
        ASSERT_STREQ(out[0].source, "90-new.policy");
        policy_set_unref(s);
}

/* A trial's arm is the top layer: its scheduler over every file's, the
 * dispatch_direct it brings, its source; the incumbent (no arm) is the
 * files' own choice. The plan points at no arm, and names the [Trial]. */
TEST(trial_arm_layers_over_the_files) {
        DeviceFacts f = sq_virtio();
        KernelCaps k = kernel(6, 18, TRISTATE_YES);
        Policy *p = policy("20-fast.policy", "none");
        PolicySet *s = set_of(p, NULL);
        SchedChoice arm = { .name = "mq-deadline", .dispatch_direct = true };
        PlanBuffer pb;
        Plan plan = *plan_buffer_init(&pb);
        DecideInput in = { .facts = &f, .caps = &k, .policies = s };

        p->trial = TRIAL_POLICY_DEFAULTS;
        p->trial.enabled = true;
        p->trial.candidates[p->trial.n_candidates++] = arm;
        decide(&in, &plan);
        ASSERT_TRUE(plan.trial == &p->trial && plan.trial_source == p->name);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        ASSERT_TRUE(item(&plan, "mq-deadline", "dispatch_direct") == NULL);

        in.trial_arm = &arm;
        in.trial_source = p->name;
        decide(&in, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "mq-deadline");
        ASSERT_TRUE(item(&plan, "Queue", "scheduler")->source == p->name);
        ASSERT_STREQ(item(&plan, "mq-deadline", "dispatch_direct")->target, "1");
        ASSERT_TRUE(plan.choices == NULL && plan.fallback_mask == 0);

        /* plain mq-deadline against mq-deadline+dispatch_direct is the
         * flip: dispatch_direct 0 where the kernel has it, over a file's 1 */
        set_value(p, "mq-deadline", "dispatch_direct", "1");
        arm.dispatch_direct = false;
        decide(&in, &plan);
        ASSERT_STREQ(item(&plan, "mq-deadline", "dispatch_direct")->target, "0");
        k.dispatch_direct = TRISTATE_NO;
        decide(&in, &plan);
        ASSERT_STREQ(item(&plan, "mq-deadline", "dispatch_direct")->target, "1");
        k.dispatch_direct = TRISTATE_YES;

        /* nr_requests alone: the files' scheduler, the arm's depth */
        arm = (SchedChoice) { .nr_requests = 16 };
        set_value(p, "Queue", "nr_requests", "64");
        decide(&in, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "none");
        ASSERT_STREQ(item(&plan, "Queue", "nr_requests")->target, "16");
        ASSERT_TRUE(item(&plan, "Queue", "nr_requests")->source == p->name);
        arm = (SchedChoice) { .name = "mq-deadline", .nr_requests = 16 };
        decide(&in, &plan);
        ASSERT_STREQ(item(&plan, "Queue", "scheduler")->target, "mq-deadline");
        ASSERT_STREQ(item(&plan, "Queue", "nr_requests")->target, "16");

        /* a canary's [Trial] is never run */
        p->observe = true;
        in.trial_arm = NULL;
        decide(&in, &plan);
        ASSERT_TRUE(plan.trial == NULL);
        policy_set_unref(s);
}
