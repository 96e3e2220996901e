/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ini.h>
#include <limits.h>
#include <sys/stat.h>

#include "policy-set.h"
#include "policy.h"
#include "policy-check.h"
#include "tests.h"
#include "util.h"

static char tmp[PATH_MAX];

static void make_dir(const char *sub, char *out) {
        ASSERT_TRUE(snprintf(out, PATH_MAX, "%s/%s", tmp, sub) < PATH_MAX);
        mkdir(out, 0755);
}

static void put(const char *dir, const char *name, const char *text) {
        char path[PATH_MAX];
        FILE *f;

        ASSERT_TRUE(snprintf(path, sizeof(path), "%s/%s", dir, name) < (int) sizeof(path));
        f = fopen(path, "we");
        fputs(text, f);
        fclose(f);
}

static PolicySet *load(const char *d1, const char *d2) {
        char *dirs[] = { (char *) d1, (char *) d2, NULL };
        PolicySet *s = NULL;

        ASSERT_EQ_INT(policy_set_load(dirs, &s), 0);
        return s;
}

static const Policy *find(const PolicySet *s, const char *name) {
        for (size_t i = 0; i < s->n_policies; i++)
                if (streq(s->policies[i]->name, name))
                        return s->policies[i];
        return NULL;
}

static void setup(void) {
        snprintf(tmp, sizeof(tmp), "/tmp/blkpolicyd-test-policy-XXXXXX");
        ASSERT_TRUE(mkdtemp(tmp) != NULL);
}

static void teardown(void) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        ASSERT_EQ_INT(system(cmd), 0);
}

static const char *GOOD =
        "# a comment\n"
        "[Match]\n"
        "class = single-queue !rotational\n"
        "name = vd* loop*\n"
        "driver = virtio_blk\n"
        "model = QEMU HARDDISK*\n"
        "rotational = yes\n"
        "hidden = no\n"
        "zoned = none host-aware\n"
        "hw_queues = 1-4\n"
        "kernel = >=6.1 <6.10\n"
        "property = ID_MODEL=Samsung*\n"
        "\n"
        "[Queue]\n"
        "scheduler = mq-deadline+dispatch_direct kyber none\n"
        "nr_requests = 64\n"
        "add_random = no\n"
        "wbt_lat_usec = -1\n"
        "\n"
        "[mq-deadline]\n"
        "fifo_batch = 8\n"
        "[bfq]\n"
        "low_latency = off\n";

TEST(parse_every_key) {
        char d[PATH_MAX];
        PolicySet *s;
        const Policy *p;

        setup();
        make_dir("a", d);
        put(d, "10-good.policy", GOOD);
        s = load(d, NULL);
        ASSERT_EQ_INT(s->errors.n_items, 0);
        ASSERT_EQ_INT(s->n_policies, 1);
        p = find(s, "10-good.policy");
        ASSERT_TRUE(p != NULL);
        ASSERT_EQ_INT(p->match.classes_required, CLASS_BIT(CLASS_SINGLE_QUEUE));
        ASSERT_EQ_INT(p->match.classes_excluded, CLASS_BIT(CLASS_ROTATIONAL));
        ASSERT_EQ_INT(strv_length(p->match.names), 2);
        ASSERT_STREQ(p->match.models[0], "QEMU HARDDISK*");
        ASSERT_TRUE(p->match.rotational == 1 && p->match.hidden == 0);
        ASSERT_EQ_INT(p->match.zoned_mask, ((1u << ZONED_NONE) | (1u << ZONED_HOST_AWARE)));
        ASSERT_TRUE(p->match.hwq_min == 1 && p->match.hwq_max == 4);
        ASSERT_TRUE(p->match.n_kernel == 2 && p->match.kernel[1].op == KOP_LT &&
                    p->match.kernel[1].version[1] == 10);
        ASSERT_TRUE(p->n_sched == 3 && p->sched[0].dispatch_direct && !p->sched[1].dispatch_direct);
        ASSERT_STREQ(p->sched[2].name, "none");
        ASSERT_STREQ(p->values[tunable_find("Queue", "nr_requests")], "64");
        ASSERT_STREQ(p->values[tunable_find("Queue", "add_random")], "0");
        ASSERT_STREQ(p->values[tunable_find("Queue", "wbt_lat_usec")], "-1");
        ASSERT_STREQ(p->values[tunable_find("mq-deadline", "fifo_batch")], "8");
        ASSERT_STREQ(p->values[tunable_find("bfq", "low_latency")], "0");
        policy_set_unref(s);
        teardown();
}

/* Every error class: the message names file:line, only that file is
 * rejected, the good file next to it still loads. */
static void check_bad(const char *text, unsigned line, const char *needle) {
        char d[PATH_MAX], expect_path[PATH_MAX];
        PolicySet *s;

        setup();
        make_dir("a", d);
        put(d, "10-good.policy", GOOD);
        put(d, "20-bad.policy", text);
        s = load(d, NULL);
        ASSERT_TRUE(snprintf(expect_path, sizeof(expect_path), "%s/20-bad.policy", d) < PATH_MAX);
        ASSERT_TRUE(s->n_policies == 1 && find(s, "10-good.policy"));
        ASSERT_TRUE(s->errors.n_items >= 1);
        ASSERT_STREQ(s->errors.items[0].path, expect_path);
        if (s->errors.items[0].line != line || !strstr(s->errors.items[0].message, needle))
                TEST_FAIL("got %u: %s, wanted %u: ...%s...", s->errors.items[0].line,
                          s->errors.items[0].message, line, needle);
        policy_set_unref(s);
        teardown();
}

TEST(parse_stack_keys) {
        char d[PATH_MAX];
        PolicySet *s;
        const Policy *p, *q;

        setup();
        make_dir("a", d);
        put(d, "10-member.policy", "[Match]\nstack = member alone\ndm_uuid_prefix = LVM- CRYPT-\n"
                                   "dm_uuid_prefix = part\nmd_level = raid1 raid10\nnvme_multipath = path\n");
        put(d, "20-any.policy", "[Match]\nstack = any\nnvme_multipath = head none\n");
        s = load(d, NULL);
        ASSERT_EQ_INT(s->errors.n_items, 0);
        p = find(s, "10-member.policy");
        q = find(s, "20-any.policy");
        ASSERT_TRUE(p && q);
        ASSERT_EQ_INT(p->match.stack_mask, ((1u << STACK_MEMBER) | (1u << STACK_ALONE)));
        ASSERT_TRUE(strv_length(p->match.dm_uuid_prefixes) == 3 && streq(p->match.dm_uuid_prefixes[2], "part"));
        ASSERT_TRUE(strv_length(p->match.md_levels) == 2 && streq(p->match.md_levels[1], "raid10"));
        ASSERT_EQ_INT(p->match.nvme_mpath_mask, 1u << NVME_MPATH_PATH);
        ASSERT_EQ_INT(q->match.stack_mask, (1u << _STACK_MAX) - 1);
        ASSERT_EQ_INT(q->match.nvme_mpath_mask, ((1u << NVME_MPATH_HEAD) | (1u << NVME_MPATH_NONE)));
        policy_set_unref(s);
        teardown();
}

TEST(error_bad_stack_keys) {
        check_bad("[Match]\nclass = loop\nstack = bottom\n", 3, "[Match] stack=bottom: expected top, member, alone or any");
        check_bad("[Match]\ndm_uuid_prefix = LVM\n", 2, "expected uuid prefixes such as LVM- CRYPT- mpath- or part");
        check_bad("[Match]\ndm_uuid_prefix = LVM-x-\n", 2, "expected uuid prefixes");
        check_bad("[Match]\n\nmd_level = RAID1\n", 3, "expected md levels such as raid1");
        check_bad("[Match]\nnvme_multipath = yes\n", 2, "expected head, path or none");
}

TEST(error_unknown_section) {
        check_bad("[Match]\nclass = loop\n[Qeueu]\nscheduler = none\n", 4, "unknown section");
}

TEST(error_bad_mode) {
        check_bad("[Policy]\nmode = canary\n[Queue]\nscheduler = none\n", 2, "expected enforce or observe");
        check_bad("[Policy]\nmodes = observe\n", 2, "unknown key in [Policy]");
}

TEST(mode_observe_is_a_canary) {
        PolicySet *s;
        char d[PATH_MAX];

        setup();
        make_dir("p", d);
        put(d, "10-base.policy", "[Policy]\nmode = enforce\n[Queue]\nscheduler = none\n");
        put(d, "90-new.policy", "[Policy]\nmode = observe\n[Queue]\nread_ahead_kb = 1024\n");
        s = load(d, NULL);
        ASSERT_TRUE(s->errors.n_items == 0 && s->n_policies == 2);
        ASSERT_TRUE(!find(s, "10-base.policy")->observe && find(s, "90-new.policy")->observe);
        ASSERT_EQ_INT((int) policy_set_canaries(s), 1);
        policy_set_unref(s);
        teardown();
}

TEST(error_unknown_match_key) {
        check_bad("[Match]\nclas = loop\n", 2, "unknown key in [Match]");
}

TEST(error_unknown_queue_key) {
        check_bad("[Match]\nclass = loop\n\n[Queue]\nnr_request = 4\n", 5, "unknown key");
}

TEST(error_bad_number) {
        check_bad("[Queue]\nnr_requests = lots\n", 2, "invalid value");
}

TEST(error_out_of_range) {
        check_bad("[Queue]\nrq_affinity = 3\n", 2, "invalid value");
}

TEST(error_unknown_class) {
        check_bad("[Match]\nclass = ssd\n", 2, "unknown device class");
}

TEST(error_bad_kernel_condition) {
        check_bad("[Match]\nkernel = <six\n", 2, "kernel version");
}

TEST(error_bad_hw_queues) {
        check_bad("[Match]\nhw_queues = 8-2\n", 2, "hw queue range");
}

TEST(error_bad_scheduler_feature) {
        check_bad("[Queue]\nscheduler = bfq+dispatch_direct none\n", 2, "mq-deadline+dispatch_direct");
}

TEST(error_bad_boolean) {
        check_bad("[Match]\nrotational = maybe\n", 2, "yes or no");
}

TEST(error_syntax) {
        check_bad("[Match]\nclass = loop\nthis line has no equals sign\n", 3, "syntax error");
}

TEST(error_bad_zoned) {
        check_bad("[Match]\nzoned = sometimes\n", 2, "host-managed");
}

TEST(error_empty_value) {
        check_bad("[Queue]\nscheduler =\n", 2, "empty value");
}

TEST(all_errors_of_a_file_reported) {
        char d[PATH_MAX];
        PolicySet *s;

        setup();
        make_dir("a", d);
        put(d, "20-bad.policy", "[Match]\nclass = nope\n[Queue]\nnr_requests = x\nfoo = 1\n");
        s = load(d, NULL);
        ASSERT_EQ_INT(s->n_policies, 0);
        ASSERT_EQ_INT(s->errors.n_items, 3);
        ASSERT_TRUE(s->errors.n_items == 3 && s->errors.items[0].line == 2 && s->errors.items[1].line == 4 && s->errors.items[2].line == 5);
        policy_set_unref(s);
        teardown();
}

TEST(etc_masks_usr_lib) {
        char vendor[PATH_MAX], admin[PATH_MAX], path[PATH_MAX];
        PolicySet *s;
        const Policy *p;

        setup();
        make_dir("lib", vendor);
        make_dir("etc", admin);
        put(vendor, "50-x.policy", "[Queue]\nscheduler = bfq\n");
        put(admin, "50-x.policy", "[Queue]\nscheduler = none\n");
        put(vendor, "60-emptied.policy", "[Queue]\nscheduler = kyber\n");
        put(admin, "60-emptied.policy", "");
        put(vendor, "70-nulled.policy", "[Queue]\nscheduler = kyber\n");
        ASSERT_TRUE(snprintf(path, sizeof(path), "%s/70-nulled.policy", admin) < PATH_MAX);
        ASSERT_EQ_INT(symlink("/dev/null", path), 0);
        put(vendor, "40-vendor-only.policy", "[Queue]\nnr_requests = 32\n");
        put(admin, "45-admin-only.policy", "[Queue]\nnr_requests = 16\n");
        put(admin, "README", "not a policy\n");
        s = load(vendor, admin);
        ASSERT_EQ_INT(s->errors.n_items, 0);
        ASSERT_EQ_INT(s->n_policies, 3);
        /* sorted by file name across both directories */
        if (s->n_policies == 3) {
                ASSERT_STREQ(s->policies[0]->name, "40-vendor-only.policy");
                ASSERT_STREQ(s->policies[1]->name, "45-admin-only.policy");
                ASSERT_STREQ(s->policies[2]->name, "50-x.policy");
        }
        p = find(s, "50-x.policy");
        ASSERT_TRUE(p && p->n_sched == 1 && streq(p->sched[0].name, "none"));
        ASSERT_TRUE(snprintf(path, sizeof(path), "%s/50-x.policy", admin) < PATH_MAX);
        ASSERT_TRUE(p && streq(p->path, path));
        ASSERT_TRUE(!find(s, "60-emptied.policy") && !find(s, "70-nulled.policy"));
        policy_set_unref(s);
        teardown();
}

TEST(missing_dirs_are_fine) {
        PolicySet *s = load("/nonexistent/blkpolicyd/a", "/nonexistent/blkpolicyd/b");

        ASSERT_TRUE(s->n_policies == 0 && s->errors.n_items == 0);
        policy_set_unref(s);
}

TEST(property_keys_are_collected_once) {
        char d[PATH_MAX];
        PolicySet *s;

        setup();
        make_dir("a", d);
        put(d, "10-good.policy", GOOD);
        put(d, "20-serial.policy", "[Match]\nproperty = ID_SERIAL=S4EV*\nproperty = ID_MODEL=*\n[Queue]\nscheduler = none\n");
        s = load(d, NULL);
        ASSERT_TRUE(s->errors.n_items == 0 && strv_length(s->property_keys) == 2);
        ASSERT_STREQ(s->property_keys[0], "ID_MODEL");
        ASSERT_STREQ(s->property_keys[1], "ID_SERIAL");
        policy_set_unref(s);
        /* no property= anywhere: a device keeps no udev property at all */
        s = load("/nonexistent/blkpolicyd/a", NULL);
        ASSERT_TRUE(s->property_keys == NULL);
        policy_set_unref(s);
        teardown();
}

TEST(line_too_long_rejects_file) {
        char d[PATH_MAX], text[600];
        PolicySet *s;

        setup();
        make_dir("a", d);
        memset(text, 0, sizeof(text));
        strcpy(text, "[Match]\nname = ");
        memset(text + strlen(text), 'x', 400);
        strcat(text, "\n");
        put(d, "20-long.policy", text);
        s = load(d, NULL);
        ASSERT_TRUE(s->n_policies == 0 && s->errors.n_items == 1 && s->n_files_rejected == 1);
        ASSERT_TRUE(s->errors.n_items == 1 && s->errors.items[0].line == 2);
        policy_set_unref(s);
        teardown();
}

/* A rejected file in a later dir masks nothing: the earlier file of the
 * same name stays in force. A valid mask still masks. */
TEST(rejected_file_falls_back) {
        char vendor[PATH_MAX], admin[PATH_MAX], path[PATH_MAX], buf[128];
        PolicySet *s;
        const Policy *p;

        setup();
        make_dir("lib", vendor);
        make_dir("etc", admin);
        put(vendor, "20-fast.policy", "[Queue]\nscheduler = none\n");
        put(admin, "20-fast.policy", "[Queue]\nscheduler = none\nnr_requets = 8\nfoo = 1\n");
        put(vendor, "30-both-bad.policy", "[Queue]\nscheduler = BAD!\n");
        put(admin, "30-both-bad.policy", "[Quue]\nx = 1\n");
        put(vendor, "40-masked.policy", "[Queue]\nscheduler = kyber\n");
        put(admin, "40-masked.policy", "");
        ASSERT_TRUE(snprintf(path, sizeof(path), "%s/50-dir.policy", admin) < PATH_MAX);
        ASSERT_EQ_INT(mkdir(path, 0755), 0);
        put(vendor, "50-dir.policy", "[Queue]\nscheduler = bfq\n");
        s = load(vendor, admin);
        p = find(s, "20-fast.policy");
        ASSERT_TRUE(snprintf(path, sizeof(path), "%s/20-fast.policy", vendor) < PATH_MAX);
        ASSERT_TRUE(p && streq(p->path, path) && p->n_sched == 1);
        ASSERT_TRUE(!find(s, "30-both-bad.policy") && !find(s, "40-masked.policy"));
        p = find(s, "50-dir.policy");
        ASSERT_TRUE(p && p->n_sched == 1 && streq(p->sched[0].name, "bfq"));
        ASSERT_EQ_INT(s->n_policies, 2);
        /* files, not errors: 20 (2 errors), 30 twice (1 each), the directory (1) */
        ASSERT_TRUE(s->n_files_rejected == 4 && s->errors.n_items == 5);
        ASSERT_EQ_INT(policy_set_summary(s, buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "2 policies loaded, 4 files rejected, 5 errors");
        policy_set_unref(s);
        teardown();
}

TEST(sched_choices) {
        SchedChoice c[SCHED_CHOICES_MAX];
        const char *error = NULL;
        unsigned n = 0;
        char buf[64];

        ASSERT_EQ_INT(sched_choices_parse("mq-deadline+dispatch_direct none", c, &n, &error), 0);
        ASSERT_TRUE(n == 2 && c[0].dispatch_direct && streq(c[0].name, "mq-deadline") && streq(c[1].name, "none"));
        ASSERT_EQ_INT(sched_choice_format(&c[0], buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "mq-deadline+dispatch_direct");
        ASSERT_TRUE(sched_choices_parse("mq-deadline+fast", c, &n, &error) < 0);
        ASSERT_TRUE(sched_choices_parse("a b c d e f g h i", c, &n, &error) < 0);
        ASSERT_TRUE(sched_choices_parse("BFQ!", c, &n, &error) < 0);
        /* nr_requests only as a trial's candidate */
        ASSERT_TRUE(sched_choices_parse("nr_requests=64", c, &n, &error) < 0);
        ASSERT_EQ_INT(trial_choices_parse("nr_requests=64 mq-deadline+dispatch_direct/nr_requests=8 kyber", c, &n,
                                          &error), 0);
        ASSERT_TRUE(n == 3 && !c[0].name[0] && c[0].nr_requests == 64 && c[1].dispatch_direct &&
                    c[1].nr_requests == 8 && streq(c[2].name, "kyber") && !c[2].nr_requests);
        ASSERT_EQ_INT(sched_choice_format(&c[0], buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "nr_requests=64");
        ASSERT_EQ_INT(sched_choice_format(&c[1], buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "mq-deadline+dispatch_direct/nr_requests=8");
        ASSERT_TRUE(sched_choice_equal(&c[2], &(SchedChoice) { .name = "kyber" }) && !sched_choice_equal(&c[0], &c[1]));
        ASSERT_TRUE(trial_choices_parse("read_ahead_kb=128", c, &n, &error) < 0 && strstr(error, "bytes used"));
        ASSERT_TRUE(trial_choices_parse("nr_requests=0", c, &n, &error) < 0);
        ASSERT_TRUE(trial_choices_parse("kyber/", c, &n, &error) < 0);
        ASSERT_TRUE(trial_choices_parse("nr_requests=8/kyber", c, &n, &error) < 0);
}

TEST(dynamic_sections) {
        char d[PATH_MAX];
        PolicySet *s;
        const Policy *p;
        const DynamicPolicy *y;

        setup();
        make_dir("a", d);
        put(d, "30-dyn.policy",
            "[Match]\nclass = loop\n[Queue]\nscheduler = none\n"
            "[Dynamic]\nenter = qdepth > 8\nenter = util >= 90\nenter_ticks = 2\nleave = qdepth < 2\n"
            "leave_ticks = 4\nwindow = 3\nmin_dwell_ticks = 5\nmax_flips = 10\nflip_window_ticks = 300\n"
            "[Busy]\nscheduler = mq-deadline\nnr_requests = 32\n[Busy mq-deadline]\nfifo_batch = 4\n");
        s = load(d, NULL);
        ASSERT_TRUE(s->errors.n_items == 0 && s->n_policies == 1);
        p = find(s, "30-dyn.policy");
        ASSERT_TRUE(p != NULL);
        y = &p->dynamic;
        ASSERT_TRUE(y->enabled && y->n_enter == 2 && y->n_leave == 1);
        ASSERT_TRUE(y->enter[1].signal == SIGNAL_UTIL && y->enter[1].op == CMP_GE && y->enter[1].threshold == 90);
        ASSERT_TRUE(y->enter_ticks == 2 && y->leave_ticks == 4 && y->window == 3);
        ASSERT_TRUE(y->min_dwell_ticks == 5 && y->max_flips == 10 && y->flip_window_ticks == 300);
        ASSERT_TRUE(y->n_busy_sched == 1 && streq(y->busy_sched[0].name, "mq-deadline"));
        ASSERT_STREQ(y->busy_values[tunable_find("Queue", "nr_requests")], "32");
        ASSERT_STREQ(y->busy_values[tunable_find("mq-deadline", "fifo_batch")], "4");
        ASSERT_TRUE(p->values[tunable_find("Queue", "nr_requests")] == NULL);
        policy_set_unref(s);
        teardown();
}

TEST(error_dynamic_without_busy) {
        check_bad("[Dynamic]\nenter = iops > 1\nleave = iops < 1\n", 0, "[Busy]");
}

TEST(error_busy_without_conditions) {
        check_bad("[Busy]\nscheduler = none\n", 0, "enter=");
}

TEST(error_bad_condition) {
        check_bad("[Dynamic]\nenter = iops >> 1\n", 2, "SIGNAL OP NUMBER");
}

/* The mix signals are accepted in a policy file, a misspelled one rejects
 * the file as an unknown signal would. */
TEST(dynamic_mix_signals) {
        char d[PATH_MAX];
        PolicySet *s;
        const Policy *p;
        const DynamicPolicy *y;

        setup();
        make_dir("a", d);
        put(d, "30-mix.policy",
            "[Dynamic]\nenter = wpct > 50\nenter = wkb >= 64\nleave = rkb < 16\nleave = merge_pct <= 5\n"
            "[Busy]\nscheduler = mq-deadline\n");
        s = load(d, NULL);
        ASSERT_TRUE(s->errors.n_items == 0 && s->n_policies == 1);
        p = find(s, "30-mix.policy");
        ASSERT_TRUE(p != NULL);
        y = &p->dynamic;
        ASSERT_TRUE(y->n_enter == 2 && y->n_leave == 2);
        ASSERT_TRUE(y->enter[0].signal == SIGNAL_WPCT && y->enter[0].op == CMP_GT && y->enter[0].threshold == 50);
        ASSERT_TRUE(y->enter[1].signal == SIGNAL_WKB && y->enter[1].op == CMP_GE);
        ASSERT_TRUE(y->leave[0].signal == SIGNAL_RKB && y->leave[1].signal == SIGNAL_MERGE_PCT);
        policy_set_unref(s);
        teardown();
}

TEST(error_misspelled_mix_signal) {
        check_bad("[Dynamic]\nenter = wcpt > 50\n", 2, "SIGNAL OP NUMBER");
        check_bad("[Dynamic]\nleave = merge-pct < 5\n", 2, "SIGNAL OP NUMBER");
}

TEST(error_window_too_large) {
        check_bad("[Dynamic]\nwindow = 9\n", 2, "at most 8");
}

TEST(error_unknown_busy_section) {
        check_bad("[Busy cfq]\nslice_idle = 0\n", 2, "unknown section");
}

/* [Trial]: every key, a list of candidates over two lines, short
 * windows (the suites' are under a second), the defaults of what is not
 * said. */
TEST(trial_sections) {
        char d[PATH_MAX];
        PolicySet *s;
        const Policy *p;
        const TrialPolicy *t, def = TRIAL_POLICY_DEFAULTS;

        setup();
        make_dir("a", d);
        put(d, "30-trial.policy",
            "[Match]\nclass = loop\n[Queue]\nscheduler = none\n"
            "[Trial]\ncandidates = mq-deadline+dispatch_direct\ncandidates = kyber\nwindow = 0.5\nsettle = 0.1\n"
            "max_duration = 120\nmin_gain = 10%\nmax_switches_per_hour = 64\n");
        put(d, "40-short.policy", "[Match]\nname = vd*\n[Trial]\ncandidates = none\n");
        s = load(d, NULL);
        ASSERT_TRUE(s->errors.n_items == 0 && s->n_policies == 2);
        p = find(s, "30-trial.policy");
        ASSERT_TRUE(p != NULL);
        t = &p->trial;
        ASSERT_TRUE(t->enabled && t->n_candidates == 2);
        ASSERT_STREQ(t->candidates[0].name, "mq-deadline");
        ASSERT_TRUE(t->candidates[0].dispatch_direct && !t->candidates[1].dispatch_direct);
        ASSERT_STREQ(t->candidates[1].name, "kyber");
        ASSERT_TRUE(t->window_ms == 500 && t->settle_ms == 100 && t->max_duration_ms == 120000);
        ASSERT_TRUE(t->min_gain > 0.0999 && t->min_gain < 0.1001 && t->max_switches_per_hour == 64);
        ASSERT_TRUE(!p->dynamic.enabled);
        p = find(s, "40-short.policy");
        ASSERT_TRUE(p != NULL && p->trial.enabled && p->trial.n_candidates == 1);
        ASSERT_TRUE(p->trial.window_ms == def.window_ms && p->trial.settle_ms == def.settle_ms &&
                    p->trial.max_duration_ms == def.max_duration_ms && p->trial.min_gain == def.min_gain &&
                    p->trial.max_switches_per_hour == def.max_switches_per_hour);
        ASSERT_TRUE(!trial_policy_equal(&p->trial, &find(s, "30-trial.policy")->trial));
        ASSERT_TRUE(trial_policy_equal(&p->trial, &p->trial));
        policy_set_unref(s);
        teardown();
}

TEST(error_bad_trial_keys) {
        check_bad("[Trial]\ncandidates = mq-deadline+fast\n", 2, "mq-deadline+dispatch_direct");
        check_bad("[Trial]\ncandidates = none none\n", 2, "twice");
        check_bad("[Trial]\ncandidates = none\ncandidates = none\n", 3, "twice");
        check_bad("[Trial]\ncandidates = none\nwindow = 0\n", 3, "seconds");
        check_bad("[Trial]\ncandidates = none\nwindow = 10s\n", 3, "seconds");
        check_bad("[Trial]\ncandidates = none\nsettle = -1\n", 3, "seconds");
        check_bad("[Trial]\ncandidates = none\nmax_duration = 0.5\n", 3, "seconds");
        check_bad("[Trial]\ncandidates = none\nmin_gain = 0\n", 3, "margin");
        check_bad("[Trial]\ncandidates = none\nmin_gain = 150%\n", 3, "margin");
        check_bad("[Trial]\ncandidates = none\nmax_switches_per_hour = 65\n", 3, "1 to 64");
        check_bad("[Trial]\ncandidates = none\nwindows = 10\n", 3, "unknown key in [Trial]");
}

/* What the section says as a whole points at its first line. */
TEST(error_trial_as_a_whole) {
        check_bad("[Match]\nname = sd*\n[Trial]\nwindow = 5\n", 4, "needs candidates=");
        check_bad("[Trial]\ncandidates = none\nwindow = 1\nsettle = 1\n", 2, "shorter than window=");
}

/* '#' after white space starts a comment, as ';' does (inih); inside a
 * value it does not; the line numbers of errors stay right. */
TEST(inline_comments) {
        char d[PATH_MAX];
        PolicySet *s;
        const Policy *p;

        setup();
        make_dir("a", d);
        put(d, "10-inline.policy",
            "[Match]   # which disks\n"
            "name = loop*\t# tab before\n"
            "property = ID_SERIAL=a#b\n"
            "[Queue] ; the old way\n"
            "scheduler = kyber none   # fallback\n"
            "read_ahead_kb = 512 ; too\n");
        put(d, "20-bad.policy", "[Match]\nname = x  # fine\n[Queue]\nnr_requests = lots  # not a number\n");
        s = load(d, NULL);
        p = find(s, "10-inline.policy");
        ASSERT_TRUE(p != NULL);
        ASSERT_EQ_INT(p->n_sched, 2);
        ASSERT_STREQ(p->sched[0].name, "kyber");
        ASSERT_STREQ(p->sched[1].name, "none");
        ASSERT_STREQ(p->values[tunable_find("Queue", "read_ahead_kb")], "512");
        ASSERT_STREQ(p->match.names[0], "loop*");
        ASSERT_TRUE(p->match.names[1] == NULL);
        ASSERT_STREQ(p->match.properties[0], "ID_SERIAL=a#b");
        ASSERT_TRUE(s->errors.n_items == 1 && s->errors.items[0].line == 4 && strstr(s->errors.items[0].message, "lots") &&
                    !strstr(s->errors.items[0].message, "number\n"));
        policy_set_unref(s);
        teardown();
}

/* --check-config's warnings about valid values (policy-check.c). */
TEST(check_values_the_kernel_will_not_keep) {
        char d[PATH_MAX], text[1024];
        PolicySet *s;
        const Policy *p;

        setup();
        make_dir("d", d);
        put(d, "10-j.policy", "[Match]\nname = sd*\n[Queue]\nread_ahead_kb = 99999999\n"
                              "[mq-deadline]\nread_expire = 1\nwrite_expire = 5000\n");
        put(d, "15-busy.policy", "[Match]\nname = nvme*\n[Dynamic]\nenter = iops > 1000\nleave = iops < 10\n"
                                 "[Busy]\nscheduler = mq-deadline\n[Busy mq-deadline]\nwrite_expire = 3\n");
        put(d, "20-bio.policy", "[Match]\nclass = bio-based\n[Queue]\nscheduler = none\nread_ahead_kb = 1024\n");
        put(d, "25-dm.policy", "[Match]\nname = dm-*\n[Queue]\nread_ahead_kb = 1024\n");
        put(d, "26-bio.policy", "[Match]\nclass = bio-based\n[Queue]\nrq_affinity = 2\nread_ahead_kb = 1024\n");
        put(d, "30-fine.policy", "[Match]\nname = vd*\n[Queue]\nread_ahead_kb = 4096\n[mq-deadline]\nread_expire = 8\n");
        s = load(d, NULL);
        ASSERT_EQ_INT(s->errors.n_items, 0);
        /* HZ=250: 1 ms is one jiffy, shown as 4; 5000 is kept */
        ASSERT_EQ_INT(jiffies_kept_ms(1, 250), 4);
        ASSERT_EQ_INT(jiffies_kept_ms(5000, 250), 5000);
        ASSERT_EQ_INT(jiffies_kept_ms(1, 300), 4);
        ASSERT_EQ_INT(jiffies_kept_ms(10, 100), 10);
        p = find(s, "10-j.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, sizeof(text)), 2);
        ASSERT_TRUE(strstr(text, "read_expire = 1: the kernel keeps it in jiffies and will show 4 (HZ=250)"));
        ASSERT_TRUE(strstr(text, "read_ahead_kb = 99999999"));
        ASSERT_TRUE(!strstr(text, "write_expire"));
        /* HZ not known: a value that is a multiple of 4 and 10 ms only passes */
        ASSERT_EQ_INT(policy_check_values(p, 0, text, sizeof(text)), 2);
        ASSERT_TRUE(strstr(text, "HZ is not known"));
        /* the busy settings too */
        p = find(s, "15-busy.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, sizeof(text)), 1);
        ASSERT_TRUE(strstr(text, "[Busy mq-deadline] write_expire = 3: the kernel keeps it in jiffies and will show 4"));
        p = find(s, "20-bio.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, sizeof(text)), 1);
        ASSERT_TRUE(strstr(text, "[Queue] scheduler: the policy matches only bio-based disks"));
        p = find(s, "25-dm.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, sizeof(text)), 1);
        ASSERT_TRUE(strstr(text, "only a policy with class = bio-based (or dm_uuid_prefix=, md_level=) matches"));
        p = find(s, "26-bio.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, sizeof(text)), 1);
        ASSERT_TRUE(strstr(text, "[Queue] rq_affinity: the policy matches only bio-based disks, which have no request queue"));
        p = find(s, "30-fine.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, sizeof(text)), 0);
        ASSERT_STREQ(text, "");
        /* warnings past the buffer are counted, the text cut, never overrun */
        p = find(s, "10-j.policy");
        ASSERT_EQ_INT(policy_check_values(p, 250, text, 8), 2);
        ASSERT_EQ_INT(strlen(text), 7);
        policy_set_unref(s);
        teardown();
}

/* policy_parse_text() is policy_parse_file() without the file: the same
 * errors at the same lines, the same policy, for every kind of text. */
static void check_text_as_file(const char *text) {
        char d[PATH_MAX], path[PATH_MAX];
        PolicyErrors fe = {}, te = {};
        Policy *fp = NULL, *tp = NULL;
        int fr, tr;

        setup();
        make_dir("a", d);
        put(d, "30-x.policy", text);
        ASSERT_TRUE(snprintf(path, sizeof(path), "%s/30-x.policy", d) < (int) sizeof(path));
        fr = policy_parse_file(path, "30-x.policy", &fe, &fp);
        tr = policy_parse_text(text, "30-x.policy", &te, &tp);
        ASSERT_EQ_INT(tr, fr);
        ASSERT_EQ_INT(te.n_items, fe.n_items);
        for (size_t i = 0; i < fe.n_items; i++) {
                ASSERT_STREQ(te.items[i].path, "30-x.policy");
                ASSERT_EQ_INT(te.items[i].line, fe.items[i].line);
                ASSERT_STREQ(te.items[i].message, fe.items[i].message);
        }
        if (fr == 0) {
                ASSERT_STREQ(tp->name, "30-x.policy");
                ASSERT_STREQ(tp->path, "30-x.policy");
                ASSERT_EQ_INT(tp->n_sched, fp->n_sched);
                for (size_t t = 0; t < TUNABLES_MAX; t++)
                        ASSERT_TRUE(streq_ptr(tp->values[t], fp->values[t]));
                ASSERT_TRUE(strv_equal(tp->match.names, fp->match.names));
                ASSERT_EQ_INT(tp->match.classes_required, fp->match.classes_required);
        }
        policy_free(fp);
        policy_free(tp);
        policy_errors_done(&fe);
        policy_errors_done(&te);
        teardown();
}

TEST(text_parses_as_its_file) {
        char long_line[INI_MAX_LINE + 16];

        check_text_as_file(GOOD);
        check_text_as_file("[Match]\nclass = nope\n[Queue]\nnr_requests = x\nfoo = 1\n");
        check_text_as_file("[Match]\nclass = loop\nthis line has no equals sign\n");
        check_text_as_file("[Queue]\nread_ahead_kb = 512   # inline ; comments\n");
        check_text_as_file("[Dynamic]\nenter = iops > 10\n");
        check_text_as_file("[Queue]\nread_ahead_kb = 512");   /* no last newline */
        check_text_as_file("\n\n# only comments\n");
        /* around inih's buffer: the longest line that fits and the first too long */
        for (size_t n = INI_MAX_LINE - 3; n <= INI_MAX_LINE + 1; n++) {
                /* "[Match]\n" then a line "name = xxx..." of n characters */
                size_t k = (size_t) snprintf(long_line, sizeof(long_line), "[Match]\nname = ");

                memset(long_line + k, 'x', n - strlen("name = "));
                long_line[k + n - strlen("name = ")] = 0;
                check_text_as_file(long_line);
                (void) strcat(long_line, "\n");
                check_text_as_file(long_line);
        }
}

/* The overlay: the file added at its name's place, or in place of the
 * file of its name, or that file masked; the base untouched. */
TEST(overlay_adds_replaces_masks) {
        char d[PATH_MAX];
        PolicyErrors e = {};
        PolicySet *base, *o;
        Policy *p;

        setup();
        make_dir("a", d);
        put(d, "10-a.policy", "[Match]\nname = a\n");
        put(d, "30-c.policy", "[Match]\nname = c\n");
        base = load(d, NULL);
        ASSERT_EQ_INT(base->n_policies, 2);

        ASSERT_EQ_INT(policy_parse_text("[Match]\nproperty = ID_X=1\n", "20-b.policy", &e, &p), 0);
        ASSERT_EQ_INT(policy_set_overlay(base, p, "20-b.policy", &o), 0);
        ASSERT_EQ_INT(o->n_policies, 3);
        ASSERT_STREQ(o->policies[0]->name, "10-a.policy");
        ASSERT_STREQ(o->policies[1]->name, "20-b.policy");
        ASSERT_STREQ(o->policies[2]->name, "30-c.policy");
        ASSERT_TRUE(o->policies[0] == base->policies[0]);       /* borrowed, not copied */
        ASSERT_TRUE(strv_contains(o->property_keys, "ID_X"));
        ASSERT_EQ_INT(base->n_ref, 2);
        policy_set_unref(o);
        ASSERT_EQ_INT(base->n_ref, 1);

        ASSERT_EQ_INT(policy_parse_text("[Match]\nname = z\n", "99-z.policy", &e, &p), 0);
        ASSERT_EQ_INT(policy_set_overlay(base, p, "99-z.policy", &o), 0);
        ASSERT_TRUE(o->n_policies == 3 && streq(o->policies[2]->name, "99-z.policy"));
        policy_set_unref(o);

        ASSERT_EQ_INT(policy_parse_text("[Match]\nname = new\n", "10-a.policy", &e, &p), 0);
        ASSERT_EQ_INT(policy_set_overlay(base, p, "10-a.policy", &o), 0);
        ASSERT_TRUE(o->n_policies == 2 && o->policies[0] == p && o->policies[1] == base->policies[1]);
        policy_set_unref(o);

        ASSERT_EQ_INT(policy_set_overlay(base, NULL, "30-c.policy", &o), 0);
        ASSERT_TRUE(o->n_policies == 1 && o->policies[0] == base->policies[0]);
        policy_set_unref(o);

        ASSERT_EQ_INT(base->n_policies, 2);
        ASSERT_STREQ(base->policies[1]->name, "30-c.policy");
        ASSERT_EQ_INT(e.n_items, 0);
        policy_set_unref(base);
        teardown();
}
