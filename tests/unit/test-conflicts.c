/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>
#include <sys/stat.h>

#include "conflicts-files.h"
#include "conflicts.h"
#include "tests.h"
#include "tunables.h"
#include "util.h"

#define ROOT FIXTURES_DIR "/conflicts/root"
#define PROC FIXTURES_DIR "/conflicts/proc"

static unsigned T(const char *attr) {
        return (unsigned) tunable_find_attr(attr);
}

/* A fake disk: attributes and udev properties from "name=value" lists. */
typedef struct FakeDisk {
        const char *const *attrs;
        const char *const *env;         /* NULL: no udev database */
} FakeDisk;

static int fake_lookup(const char *const *l, const char *name, char *buf, size_t size) {
        size_t n = strlen(name);

        for (; l && *l; l++)
                if (strncmp(*l, name, n) == 0 && (*l)[n] == '=')
                        return strscpy(buf, size, *l + n + 1);
        return -ENOENT;
}

static int fake_attr(void *userdata, const char *name, char *buf, size_t size) {
        return fake_lookup(((FakeDisk *) userdata)->attrs, name, buf, size);
}

static int fake_env(void *userdata, const char *name, char *buf, size_t size) {
        const FakeDisk *f = userdata;

        return f->env ? fake_lookup(f->env, name, buf, size) : -EIO;
}

static ConflictDevice disk(const char *name, bool mq, FakeDisk *f) {
        return (ConflictDevice) { .name = name, .blk_mq = mq, .read_attr = f ? fake_attr : NULL,
                                  .read_env = f ? fake_env : NULL, .userdata = f };
}

static const Conflict *find(const ConflictSet *s, const char *path, unsigned line) {
        for (size_t i = 0; i < s->n_items; i++)
                if (streq(s->items[i].path, path) && s->items[i].line == line)
                        return &s->items[i];
        return NULL;
}

static void write_file(const char *dir, const char *rel, const char *text) {
        char path[PATH_MAX], *slash;
        FILE *f;

        snprintf(path, sizeof(path), "%s%s", dir, rel);
        for (slash = strchr(path + strlen(dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = 0;
                (void) mkdir(path, 0755);
                *slash = '/';
        }
        f = fopen(path, "we");
        ASSERT_TRUE(f);
        fputs(text, f);
        fclose(f);
}

TEST(udev_rule_tokens) {
        UdevRule r;

        ASSERT_EQ_INT(udev_rule_parse("ACTION==\"add|change\", KERNEL!=\"sd*\",ATTR{queue/scheduler}:=\"bfq\" "
                                      "ENV{X}+=\"a \\\"b\\\"\" RUN-=\"x\" GOTO=\"end\"", &r), 0);
        ASSERT_EQ_INT(r.n_tokens, 6);
        ASSERT_STREQ(r.tokens[0].key, "ACTION");
        ASSERT_TRUE(r.tokens[0].op == RULE_OP_MATCH && !r.tokens[0].attr);
        ASSERT_STREQ(r.tokens[0].value, "add|change");
        ASSERT_EQ_INT(r.tokens[1].op, RULE_OP_NOMATCH);
        ASSERT_STREQ(r.tokens[2].attr, "queue/scheduler");
        ASSERT_EQ_INT(r.tokens[2].op, RULE_OP_ASSIGN_FINAL);
        ASSERT_STREQ(r.tokens[3].value, "a \"b\"");
        ASSERT_TRUE(r.tokens[3].op == RULE_OP_ADD && r.tokens[4].op == RULE_OP_REMOVE);
        ASSERT_EQ_INT(r.tokens[5].op, RULE_OP_ASSIGN);
        udev_rule_done(&r);

        /* white space around the operator, as udev allows */
        ASSERT_EQ_INT(udev_rule_parse("KERNEL == \"vda\" , ATTR{queue/nr_requests} = \"64\"", &r), 0);
        ASSERT_TRUE(r.n_tokens == 2 && streq(r.tokens[1].value, "64"));
        udev_rule_done(&r);

        ASSERT_TRUE(udev_rule_parse("   ", &r) == 0 && r.n_tokens == 0);
        udev_rule_done(&r);
}

TEST(udev_rule_errors) {
        static const char *const bad[] = {
                "KERNEL==\"sda",                /* no closing quote */
                "KERNEL \"sda\"",               /* no operator */
                "KERNEL==sda",                  /* value not quoted */
                "KERNEL==\"a\"ATTR{x}=\"1\"",   /* tokens not separated */
                "ATTR{queue/scheduler=\"x\"",   /* no closing brace */
                "==\"x\"",                      /* no key */
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                UdevRule r = {};

                ASSERT_EQ_INT(udev_rule_parse(bad[i], &r), -EINVAL);
                ASSERT_TRUE(r.n_tokens == 0 && !r.tokens);
        }
}

TEST(udev_text_assignments_lines_and_guards) {
        ConflictSet s = {};
        const Conflict *c;

        ASSERT_EQ_INT(conflicts_parse_udev_text("/etc/udev/rules.d/t.rules",
                                                "# comment ATTR{queue/scheduler}=\"x\"\n"
                                                "ACTION==\"add\", KERNEL==\"sd*\", \\\n"
                                                "  ATTR{queue/scheduler}=\"bfq\", ATTR{queue/iosched/slice_idle}=\"0\"\n"
                                                "KERNEL==\"sd*\", ATTR{queue/scheduler}==\"bfq\", ATTR{queue/rotational}=\"0\"\n"
                                                "KERNEL!=\"vd*\", GOTO=\"vd_end\"\n"
                                                "ATTR{bdi/read_ahead_kb}=\"2048\"\n"
                                                "LABEL=\"vd_end\"\n"
                                                "SUBSYSTEM==\"block\", ACTION==\"add\", GOTO=\"two\"\n"
                                                "ATTR{queue/nomerges}=\"2\"\n"
                                                "LABEL=\"two\"\n"
                                                "GOTO=\"dead\"\n"
                                                "ATTR{queue/add_random}=\"0\"\n"
                                                "LABEL=\"dead\"\n"
                                                "RUN+=\"/bin/sh -c 'echo 512 > /sys/block/%k/queue/nr_requests'\"\n"
                                                "RUN+=\"/usr/bin/tune /sys/block/%k/queue/rq_affinity\"\n",
                                                &s), 0);
        /* 2 on line 2, none for the == match or queue/rotational (not managed),
         * 1 behind the guard, 1 behind the two-condition guard, none dead, 2 RUN */
        ASSERT_EQ_INT(s.n_items, 6);
        c = find(&s, "/etc/udev/rules.d/t.rules", 2);
        ASSERT_TRUE(c && c->tunable == TUNABLE_SCHEDULER && streq(c->value, "bfq") && c->source == CONFLICT_UDEV);
        ASSERT_TRUE(c && streq(c->match, "KERNEL==\"sd*\"") && c->n_conditions == 2 && !c->maybe);
        ASSERT_TRUE(s.n_items > 1 && s.items[1].tunable == T("iosched/slice_idle") && s.items[1].line == 2);
        c = find(&s, "/etc/udev/rules.d/t.rules", 6);
        /* the guard KERNEL!="vd*" becomes KERNEL=="vd*"; bdi/ is the same read-ahead */
        ASSERT_TRUE(c && c->tunable == T("read_ahead_kb") && streq(c->value, "2048"));
        ASSERT_TRUE(c && c->n_conditions == 1 && c->conditions[0].op == RULE_OP_MATCH && streq(c->match, "KERNEL==\"vd*\""));
        c = find(&s, "/etc/udev/rules.d/t.rules", 9);
        ASSERT_TRUE(c && c->maybe && c->n_conditions == 0 && !c->match);
        ASSERT_TRUE(!find(&s, "/etc/udev/rules.d/t.rules", 12));
        c = find(&s, "/etc/udev/rules.d/t.rules", 14);
        ASSERT_TRUE(c && c->tunable == T("nr_requests") && streq(c->value, "512"));
        c = find(&s, "/etc/udev/rules.d/t.rules", 15);
        ASSERT_TRUE(c && c->tunable == T("rq_affinity") && streq(c->value, "?"));
        ASSERT_TRUE(!s.warnings);
        conflict_set_done(&s);

        /* a broken line is skipped with a warning naming it; the rest is read */
        ASSERT_EQ_INT(conflicts_parse_udev_text("/x.rules", "KERNEL==\"a\n\nKERNEL==\"b\", ATTR{queue/scheduler}=\"none\"\n",
                                                &s), 0);
        ASSERT_TRUE(s.n_items == 1 && s.items[0].line == 3);
        ASSERT_TRUE(s.warnings && streq(s.warnings[0], "/x.rules:1: not a valid udev rule, skipped"));
        conflict_set_done(&s);
}

TEST(udev_matcher) {
        ConflictSet s = {};
        const RuleToken *why;
        FakeDisk rot = { .attrs = (const char *const[]) { "queue/rotational=1\n", NULL },
                         .env = (const char *const[]) { "ID_VENDOR=Google", NULL } };
        FakeDisk ssd = { .attrs = (const char *const[]) { "queue/rotational=0", NULL },
                         .env = (const char *const[]) { "ID_BUS=ata", NULL } };
        ConflictDevice sda = disk("sda", true, &rot), sdb = disk("sdb", true, &ssd), vda = disk("vda", true, NULL);

        ASSERT_EQ_INT(conflicts_parse_udev_text("/r",
                                                "ACTION==\"add|change\", KERNEL==\"sd[a-z]|mmcblk*\", "
                                                "ATTR{queue/rotational}==\"1\", ATTR{queue/scheduler}=\"bfq\"\n"
                                                "ACTION==\"remove\", ATTR{queue/scheduler}=\"none\"\n"
                                                "ENV{ID_VENDOR}==\"*Google*\", ENV{DEVTYPE}!=\"partition\", "
                                                "ATTR{queue/scheduler}=\"none\"\n"
                                                "ENV{DEVTYPE}==\"partition\", ATTR{queue/scheduler}=\"none\"\n"
                                                "KERNEL!=\"sda\", SUBSYSTEM==\"block\", ATTR{queue/nomerges}=\"1\"\n",
                                                &s), 0);
        ASSERT_EQ_INT(s.n_items, 5);
        /* attributes are read, trailing newline and all */
        ASSERT_TRUE(conflict_matches(&s.items[0], &sda, &why) == CONFLICT_MATCH_YES && !why);
        ASSERT_EQ_INT(conflict_matches(&s.items[0], &sdb, &why), CONFLICT_MATCH_NO);
        ASSERT_TRUE(why && streq(why->key, "ATTR") && streq(why->attr, "queue/rotational"));
        ASSERT_TRUE(conflict_matches(&s.items[0], &vda, &why) == CONFLICT_MATCH_NO && why && streq(why->key, "KERNEL"));
        /* a disk with nothing to read: the ATTR condition stays unknown */
        ASSERT_EQ_INT(conflict_matches(&s.items[0], &(ConflictDevice) { .name = "sdc", .blk_mq = true }, &why), CONFLICT_MATCH_MAYBE);
        ASSERT_TRUE(why && streq(why->key, "ATTR"));
        /* remove-only rules never write to a live disk */
        ASSERT_EQ_INT(conflict_matches(&s.items[1], &sda, NULL), CONFLICT_MATCH_NO);
        /* ENV from udev's database; a missing property is the empty string */
        ASSERT_EQ_INT(conflict_matches(&s.items[2], &sda, NULL), CONFLICT_MATCH_YES);
        ASSERT_EQ_INT(conflict_matches(&s.items[2], &sdb, NULL), CONFLICT_MATCH_NO);
        ASSERT_TRUE(conflict_matches(&s.items[2], &vda, &why) == CONFLICT_MATCH_MAYBE && why && streq(why->attr, "ID_VENDOR"));
        /* whole disks are never partitions */
        ASSERT_EQ_INT(conflict_matches(&s.items[3], &sda, NULL), CONFLICT_MATCH_NO);
        ASSERT_EQ_INT(conflict_matches(&s.items[4], &sda, NULL), CONFLICT_MATCH_NO);
        ASSERT_EQ_INT(conflict_matches(&s.items[4], &sdb, NULL), CONFLICT_MATCH_YES);
        conflict_set_done(&s);
}

TEST(udev_fixture_masking_and_order) {
        ConflictSet s = {};
        static const struct {
                const char *path;
                unsigned line;
                const char *attr, *value;
        } want[] = {
                { "/etc/udev/rules.d/60-ioschedulers.rules", 6, "scheduler", "bfq" },
                { "/etc/udev/rules.d/60-ioschedulers.rules", 10, "scheduler", "mq-deadline" },
                { "/etc/udev/rules.d/60-ioschedulers.rules", 14, "scheduler", "none" },
                { "/etc/udev/rules.d/60-ioschedulers.rules", 18, "scheduler", "mq-deadline" },
                { "/run/udev/rules.d/62-runtime.rules", 2, "read_ahead_kb", "1024" },
                { "/usr/lib/udev/rules.d/64-readahead.rules", 5, "read_ahead_kb", "4096" },
                { "/usr/lib/udev/rules.d/64-readahead.rules", 8, "wbt_lat_usec", "0" },
                { "/usr/lib/udev/rules.d/66-run-echo.rules", 2, "nomerges", "2" },
                /* blockdev --setra 1024 and --setfra 256: sectors, as KiB */
                { "/etc/udev/rules.d/68-blockdev.rules", 2, "read_ahead_kb", "512" },
                { "/etc/udev/rules.d/68-blockdev.rules", 3, "read_ahead_kb", "128" },
                { "/lib/udev/rules.d/99-gce.rules", 6, "scheduler", "none" },
        };

        ASSERT_EQ_INT(conflicts_scan_udev(ROOT, &s), 0);
        /* lexical order of names across the directories; /etc masks /usr/lib
         * and /run (60, 61 by a link to /dev/null, 63 by an empty file), /run
         * masks /usr/lib (62) */
        ASSERT_EQ_INT(s.n_items, ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want) && i < s.n_items; i++) {
                ASSERT_STREQ(s.items[i].path, want[i].path);
                ASSERT_EQ_INT(s.items[i].line, want[i].line);
                ASSERT_STREQ(tunables[s.items[i].tunable].attr, want[i].attr);
                ASSERT_STREQ(s.items[i].value, want[i].value);
        }
        ASSERT_TRUE(strv_length(s.warnings) == 1 &&
                    streq(s.warnings[0], "/usr/lib/udev/rules.d/66-run-echo.rules:3: not a valid udev rule, skipped"));
        conflict_set_done(&s);
}

TEST(tuned_fixture_include_chain) {
        ConflictSet s = {};
        FakeDisk fixed = { .attrs = (const char *const[]) { "removable=0", NULL } };
        FakeDisk usb = { .attrs = (const char *const[]) { "removable=1", NULL } };
        ConflictDevice vda = disk("vda", true, &fixed), loop0 = disk("loop0", true, &fixed), sdx = disk("sdx", true, &usb);
        const Conflict *c;

        ASSERT_EQ_INT(conflicts_scan_tuned(ROOT, &s), 0);
        ASSERT_TRUE(s.n_items == 3 && !s.warnings);
        /* the parent's readahead=>4096, where the parent sets it */
        c = find(&s, "/usr/lib/tuned/profiles/throughput-performance/tuned.conf", 16);
        ASSERT_TRUE(c && c->tunable == T("read_ahead_kb") && streq(c->value, "4096") && c->source == CONFLICT_TUNED);
        /* the admin's copy in /etc overrides the shipped elevator=mq-deadline
         * and its devices= applies to the whole merged [disk] unit */
        c = find(&s, "/etc/tuned/profiles/virtual-guest-blk/tuned.conf", 9);
        ASSERT_TRUE(c && c->tunable == TUNABLE_SCHEDULER && streq(c->value, "bfq"));
        ASSERT_TRUE(c && streq(c->match, "[disk] devices=!loop*"));
        ASSERT_TRUE(c && streq(c->advice, "add drop=elevator to [disk] of a profile virtual-guest-blk in /etc/tuned/profiles/ "
                                          "(/etc/tuned/ before tuned 2.23) with include=virtual-guest-blk, or set devices= "
                                          "there to leave out the disks blkpolicyd manages; tuned writes it at each profile "
                                          "load and at each disk's add event (to keep the profile but have blkpolicyd's "
                                          "value last at boot, enable blkpolicyd-settle.service)"));
        /* tuned.service is enabled in the fixture: it runs, it is a writer */
        ASSERT_TRUE(c && !c->dormant);
        ASSERT_TRUE(c && conflict_matches(c, &vda, NULL) == CONFLICT_MATCH_YES);
        ASSERT_TRUE(c && conflict_matches(c, &loop0, NULL) == CONFLICT_MATCH_NO);
        /* tuned's disk plugin leaves removable disks alone */
        ASSERT_TRUE(c && conflict_matches(c, &sdx, NULL) == CONFLICT_MATCH_NO);
        c = find(&s, "/etc/tuned/profiles/virtual-guest-blk/tuned.conf", 13);
        ASSERT_TRUE(c && c->tunable == T("nr_requests") && streq(c->value, "256") && streq(c->match, "/sys/block/vd*"));
        ASSERT_TRUE(c && conflict_matches(c, &vda, NULL) == CONFLICT_MATCH_YES);
        ASSERT_TRUE(c && conflict_matches(c, &loop0, NULL) == CONFLICT_MATCH_NO);
        conflict_set_done(&s);
}

TEST(tuned_merge_rules) {
        char dir[] = "/tmp/test-conflicts-XXXXXX";
        ConflictSet s = {};
        ConflictDevice sda = disk("sda", true, NULL);

        ASSERT_TRUE(mkdtemp(dir));
        /* legacy layout (tuned < 2.23), two active profiles, a conditional
         * include of a missing one, a loop, replace=1, enabled=false */
        write_file(dir, "/etc/tuned/active_profile", "base top\n");
        write_file(dir, "/usr/lib/tuned/base/tuned.conf",
                   "[main]\ninclude=-missing,top\n[disk]\nelevator=kyber\nreadahead=8192 s\n"
                   "[other]\ntype=disk\nelevator=bfq\n");
        write_file(dir, "/usr/lib/tuned/top/tuned.conf",
                   "[main]\ninclude=base\n[disk]\nreplace=1\ndevices=sd*\nreadahead_multiply=2\n"
                   "[other]\nenabled=false\n[vm]\ntransparent_hugepages=never\n");
        ASSERT_EQ_INT(conflicts_scan_tuned(dir, &s), 0);
        /* base: its include top first, then base over it (top's own include
         * of base is passed over: loaded once). Base's [disk] merges into
         * top's: devices= from base (none: every disk), options added to
         * top's; base's [other] sets enabled back to true */
        ASSERT_EQ_INT(s.n_items, 4);
        ASSERT_TRUE(s.items[0].tunable == T("read_ahead_kb") && streq(s.items[0].value, "x2"));
        ASSERT_TRUE(s.items[1].tunable == TUNABLE_SCHEDULER && streq(s.items[1].value, "kyber"));
        ASSERT_TRUE(s.items[2].tunable == T("read_ahead_kb") && streq(s.items[2].value, "4096"));
        ASSERT_TRUE(streq(s.items[1].match, "[disk] devices=*"));
        ASSERT_TRUE(streq(s.items[3].value, "bfq") && streq(s.items[3].match, "[other] devices=*"));
        ASSERT_EQ_INT(conflict_matches(&s.items[1], &sda, NULL), CONFLICT_MATCH_MAYBE);   /* removable unknown */
        /* no tuned.service at all: said so, and never the likely writer */
        ASSERT_TRUE(startswith(s.items[1].advice, "tuned.service is not installed: it writes nothing until tuned is "
                                                  "started; add drop=elevator"));
        ASSERT_TRUE(s.items[1].dormant && !conflicts_attribute(&s, &sda, TUNABLE_SCHEDULER, "kyber"));
        ASSERT_TRUE(conflicts_attribute_dormant(&s, &sda, TUNABLE_SCHEDULER, "kyber") == &s.items[1]);
        ASSERT_TRUE(!s.warnings);
        conflict_set_done(&s);

        write_file(dir, "/etc/tuned/active_profile", "top\n");
        ASSERT_EQ_INT(conflicts_scan_tuned(dir, &s), 0);
        /* top over base: replace=1 drops base's elevator, [other] disabled */
        ASSERT_TRUE(s.n_items == 1 && s.items[0].tunable == T("read_ahead_kb") && streq(s.items[0].value, "x2"));
        ASSERT_TRUE(s.n_items == 1 && streq(s.items[0].match, "[disk] devices=sd*"));
        conflict_set_done(&s);

        write_file(dir, "/etc/tuned/active_profile", "gone ../etc ${x}\n");
        ASSERT_EQ_INT(conflicts_scan_tuned(dir, &s), 0);
        ASSERT_TRUE(s.n_items == 0 && strv_length(s.warnings) == 3);
        conflict_set_done(&s);
}

/* The profile syntax as tuned's configparser reads it, through inih: the
 * lines inih alone would read otherwise (';', ':', an indented line, a
 * long one) as the profile means them. */
TEST(tuned_profile_syntax) {
        char dir[] = "/tmp/test-conflicts-XXXXXX";
        _cleanup_free_ char *text = NULL, *glob = NULL;
        ConflictSet s = {};

        ASSERT_TRUE(mkdtemp(dir));
        write_file(dir, "/etc/tuned/active_profile", "p\n");
        /* '#' is a comment only after white space; ';' never inline */
        write_file(dir, "/etc/tuned/profiles/p/tuned.conf",
                   "# a comment\n[disk] # the disks\nelevator=bfq#x\nreadahead = 4096\t# KiB\n"
                   "devices = sda ;sdb\n");
        ASSERT_EQ_INT(conflicts_scan_tuned(dir, &s), 0);
        ASSERT_EQ_INT(s.n_items, 2);
        ASSERT_TRUE(streq(s.items[0].value, "bfq#x") && s.items[0].line == 3);
        ASSERT_TRUE(streq(s.items[1].value, "4096") && s.items[1].line == 4);
        ASSERT_STREQ(s.items[0].match, "[disk] devices=sda ;sdb");
        conflict_set_done(&s);

        /* a section given twice is one unit, the last value of a key counts
         * (with its line); an indented line is no continuation: with '=' a
         * key of its own, without one nothing */
        write_file(dir, "/etc/tuned/profiles/p/tuned.conf",
                   "[disk]\nelevator=kyber\n[sysfs]\n/sys/block/sd*/queue/nr_requests = 64\n[disk]\n"
                   "elevator=bfq\n  mq-deadline\n  readahead=128\n");
        ASSERT_EQ_INT(conflicts_scan_tuned(dir, &s), 0);
        ASSERT_EQ_INT(s.n_items, 3);
        ASSERT_TRUE(streq(s.items[0].value, "bfq") && s.items[0].line == 6 && streq(s.items[0].match, "[disk] devices=*"));
        ASSERT_TRUE(streq(s.items[1].value, "128") && s.items[1].line == 8);
        ASSERT_TRUE(streq(s.items[2].value, "64") && streq(s.items[2].match, "/sys/block/sd*"));
        conflict_set_done(&s);

        /* ':' is no delimiter; a line past inih's buffer, whole */
        ASSERT_TRUE(asprintf(&glob, "%0200d", 0) > 0);
        ASSERT_TRUE(asprintf(&text, "[sysfs]\n/sys/block/%s*/queue/rq_affinity = 2\nx:y = 1\n", glob) > 0);
        write_file(dir, "/etc/tuned/profiles/p/tuned.conf", text);
        ASSERT_EQ_INT(conflicts_scan_tuned(dir, &s), 0);
        ASSERT_EQ_INT(s.n_items, 1);
        ASSERT_TRUE(streq(s.items[0].value, "2") && s.items[0].line == 2 && strlen(s.items[0].match) == 212);
        conflict_set_done(&s);
}

TEST(gce_agent) {
        char dir[] = "/tmp/test-conflicts-XXXXXX", path[PATH_MAX];
        ConflictSet s = {};
        ConflictDevice mq = disk("nvme0n1", true, NULL), bio = disk("dm-0", false, NULL);
        FakeDisk eph = { .attrs = (const char *const[]) { "device/model=nvme_card-EphemeralDisk", NULL } };
        ConflictDevice lssd = disk("sdb", true, &eph);

        /* the fixture: installed, optimize_local_ssd = false */
        ASSERT_EQ_INT(conflicts_scan_gce(ROOT, &s), 0);
        ASSERT_EQ_INT(s.n_items, 1);
        ASSERT_STREQ(s.items[0].path, "/usr/lib/systemd/system/google-guest-agent.service");
        ASSERT_TRUE(s.items[0].source == CONFLICT_GCE && streq(s.items[0].value, "none") && s.items[0].line == 0);
        ASSERT_EQ_INT(conflict_matches(&s.items[0], &mq, NULL), CONFLICT_MATCH_YES);
        ASSERT_EQ_INT(conflict_matches(&s.items[0], &bio, NULL), CONFLICT_MATCH_NO);
        ASSERT_TRUE(startswith(s.items[0].advice, "the agent writes none"));
        /* the advice is the cycle-free unit, not an After= on blkpolicyd.service */
        ASSERT_TRUE(strstr(s.items[0].advice, "enable blkpolicyd-settle.service"));
        ASSERT_TRUE(!strstr(s.items[0].advice, "a drop-in with After="));
        ASSERT_TRUE(!s.items[0].dormant);
        conflict_set_done(&s);

        ASSERT_TRUE(mkdtemp(dir));
        ASSERT_TRUE(conflicts_scan_gce(dir, &s) == 0 && s.n_items == 0);
        write_file(dir, "/lib/systemd/system/google-guest-agent.service", "[Service]\n");
        write_file(dir, "/usr/bin/google_optimize_local_ssd", "#!/bin/sh\n");
        /* the .template overrides the .cfg, as the agent reads them */
        write_file(dir, "/etc/default/instance_configs.cfg", "[InstanceSetup]\noptimize_local_ssd = false\n");
        write_file(dir, "/etc/default/instance_configs.cfg.template", "[instancesetup]\nOptimize_Local_SSD = true\n");
        ASSERT_EQ_INT(conflicts_scan_gce(dir, &s), 0);
        ASSERT_EQ_INT(s.n_items, 5);
        /* not enabled: the fixture's is, this one is not; nor can it be running
         * (a fixture root asks no systemd), so it writes nothing */
        ASSERT_TRUE(startswith(s.items[0].advice, "google-guest-agent.service is installed but neither enabled nor "
                                                  "running: it writes nothing until it is started; the agent writes"));
        for (size_t i = 0; i < s.n_items; i++)
                ASSERT_TRUE(s.items[i].dormant);
        ASSERT_TRUE(!conflicts_attribute(&s, &mq, TUNABLE_SCHEDULER, "none"));
        ASSERT_TRUE(conflicts_attribute_dormant(&s, &mq, TUNABLE_SCHEDULER, "none") == &s.items[0]);
        ASSERT_TRUE(s.items[1].tunable == T("add_random") && streq(s.items[1].value, "0"));
        ASSERT_EQ_INT(conflict_matches(&s.items[4], &lssd, NULL), CONFLICT_MATCH_YES);
        ASSERT_EQ_INT(conflict_matches(&s.items[4], &mq, NULL), CONFLICT_MATCH_MAYBE);
        conflict_set_done(&s);

        /* enabled by a link in some .wants/: it starts at boot, it writes */
        write_file(dir, "/etc/systemd/system/graphical.target.wants/.keep", "");
        snprintf(path, sizeof(path), "%s/etc/systemd/system/graphical.target.wants/google-guest-agent.service", dir);
        ASSERT_EQ_INT(symlink("/lib/systemd/system/google-guest-agent.service", path), 0);
        ASSERT_EQ_INT(conflicts_scan_gce(dir, &s), 0);
        ASSERT_TRUE(s.n_items == 5 && !s.items[0].dormant && startswith(s.items[0].advice, "the agent writes none"));
        ASSERT_TRUE(conflicts_attribute(&s, &mq, TUNABLE_SCHEDULER, "none") == &s.items[0]);
        conflict_set_done(&s);
        ASSERT_EQ_INT(unlink(path), 0);

        /* masked in /etc: the agent does not run */
        write_file(dir, "/etc/systemd/system/multi-user.target.wants/.keep", "");
        snprintf(path, sizeof(path), "%s/etc/systemd/system/google-guest-agent.service", dir);
        ASSERT_EQ_INT(symlink("/dev/null", path), 0);
        ASSERT_TRUE(conflicts_scan_gce(dir, &s) == 0 && s.n_items == 0);
        conflict_set_done(&s);
}

TEST(kernel_cmdline) {
        ConflictSet s = {};
        ConflictDevice vda = disk("vda", true, NULL);
        const RuleToken *why = (const RuleToken *) &s;

        ASSERT_EQ_INT(conflicts_scan_cmdline(PROC, &s), 0);
        ASSERT_EQ_INT(s.n_items, 1);
        ASSERT_TRUE(s.items[0].source == CONFLICT_CMDLINE && !s.items[0].effective);
        ASSERT_STREQ(s.items[0].value, "deadline");
        ASSERT_STREQ(s.items[0].path, "/proc/cmdline");
        /* blk-mq ignores it: it applies to no disk */
        ASSERT_TRUE(conflict_matches(&s.items[0], &vda, &why) == CONFLICT_MATCH_NO && !why);
        conflict_set_done(&s);
        ASSERT_TRUE(conflicts_scan_cmdline(FIXTURES_DIR "/kvm-6.18/proc", &s) == 0 && s.n_items == 0);
        conflict_set_done(&s);
}

TEST(drift_attribution) {
        Roots roots = { .proc = PROC, .root = ROOT };
        FakeDisk fixed = { .attrs = (const char *const[]) { "removable=0", "queue/rotational=1", NULL },
                           .env = (const char *const[]) { "ID_VENDOR=Google", NULL } };
        FakeDisk virtio = { .attrs = fixed.attrs, .env = (const char *const[]) { "ID_PATH=pci-0000:00:02.0", NULL } };
        FakeDisk lvm = { .attrs = fixed.attrs, .env = (const char *const[]) { "DM_UUID=LVM-0123", NULL } };
        ConflictDevice vda = disk("vda", true, &virtio), sda = disk("sda", true, &fixed), dm = disk("dm-0", false, &fixed);
        ConflictDevice lv = disk("dm-0", false, &lvm);
        ConflictSet s = {};
        const Conflict *c;
        char *text;

        ASSERT_EQ_INT(conflicts_scan(&roots, &s), 0);
        /* 14 of udev, tuned, the agent and the command line; 2 blockdev
         * rules, 2 of sysfsutils, 3 tmpfiles lines, 1 of LVM */
        ASSERT_EQ_INT(s.n_items, 22);
        /* the udev rule that names vda and writes what is live */
        c = conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "mq-deadline");
        ASSERT_TRUE(c && c->source == CONFLICT_UDEV && c->line == 18);
        text = c ? conflict_describe(c) : NULL;
        ASSERT_STREQ(text, "udev rule /etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline "
                           "(KERNEL==\"vd[a-z]\")");
        free(text);
        c = conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "bfq");
        ASSERT_TRUE(c && c->source == CONFLICT_TUNED);
        text = c ? conflict_describe(c) : NULL;
        ASSERT_STREQ(text, "tuned profile /etc/tuned/profiles/virtual-guest-blk/tuned.conf:9 sets queue/scheduler=bfq "
                           "([disk] devices=!loop*)");
        free(text);
        /* none on vda: only the GCE agent writes that there */
        c = conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "none");
        ASSERT_TRUE(c && c->source == CONFLICT_GCE);
        /* on a rotational Google sda, the rule that writes none, not the agent */
        c = conflicts_attribute(&s, &sda, TUNABLE_SCHEDULER, "none");
        ASSERT_TRUE(c && c->source == CONFLICT_UDEV && strstr(c->path, "99-gce.rules"));
        /* the kernel command line's elevator=deadline never counts */
        ASSERT_TRUE(!conflicts_attribute(&s, &dm, TUNABLE_SCHEDULER, "mq-deadline"));
        /* kyber on vda: /etc/sysfs.conf names it */
        c = conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "kyber");
        text = c ? conflict_describe(c) : NULL;
        ASSERT_STREQ(text, "sysfsutils /etc/sysfs.conf:11 sets queue/scheduler=kyber (/sys/block/vda/queue/scheduler)");
        free(text);
        ASSERT_TRUE(!conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "bfq-mq"));
        /* LVM's none on the logical volume dm-0 */
        c = conflicts_attribute(&s, &lv, T("read_ahead_kb"), "0");
        ASSERT_TRUE(c && c->source == CONFLICT_LVM);
        /* udev's 64-readahead.rules and tuned both write 4096 on vda: the rule */
        c = conflicts_attribute(&s, &vda, T("read_ahead_kb"), "4096");
        ASSERT_TRUE(c && c->source == CONFLICT_UDEV && c->line == 5);
        conflict_set_done(&s);

        /* "deadline" is the kernel's alias of mq-deadline */
        ASSERT_EQ_INT(conflicts_parse_udev_text("/r", "KERNEL==\"vda\", ATTR{queue/scheduler}=\"deadline\"\n", &s), 0);
        c = conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "mq-deadline");
        ASSERT_TRUE(c && streq(c->value, "deadline"));
        conflict_set_done(&s);
}

TEST(unit_state_from_files) {
        char dir[] = "/tmp/test-conflicts-XXXXXX", path[PATH_MAX];

        ASSERT_TRUE(mkdtemp(dir));
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned.service"), UNIT_ABSENT);
        write_file(dir, "/usr/lib/systemd/system/tuned.service", "[Service]\n");
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned.service"), UNIT_INSTALLED);
        ASSERT_STREQ(unit_state_to_string(UNIT_INSTALLED), "installed but neither enabled nor running");
        /* a package's static dependency counts as enabled as systemctl enable's link does */
        write_file(dir, "/usr/lib/systemd/system/multi-user.target.wants/tuned.service", "");
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned.service"), UNIT_ENABLED);
        snprintf(path, sizeof(path), "%s/usr/lib/systemd/system/multi-user.target.wants/tuned.service", dir);
        ASSERT_EQ_INT(unlink(path), 0);
        write_file(dir, "/etc/systemd/system/sysinit.target.requires/.keep", "");
        snprintf(path, sizeof(path), "%s/etc/systemd/system/sysinit.target.requires/tuned.service", dir);
        ASSERT_EQ_INT(symlink("/usr/lib/systemd/system/tuned.service", path), 0);
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned.service"), UNIT_ENABLED);
        /* a link of another name, or in a directory that is not .wants/ */
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned-ppd.service"), UNIT_ABSENT);
        /* masked in /run (systemctl mask --runtime) beats enabled */
        write_file(dir, "/run/systemd/system/tuned.service", "");
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned.service"), UNIT_MASKED);
        snprintf(path, sizeof(path), "%s/run/systemd/system/tuned.service", dir);
        ASSERT_EQ_INT(unlink(path), 0);
        snprintf(path, sizeof(path), "%s/etc/systemd/system/tuned.service", dir);
        ASSERT_EQ_INT(symlink("/dev/null", path), 0);
        ASSERT_EQ_INT(conflicts_unit_state(dir, "tuned.service"), UNIT_MASKED);
        /* the fixture: both enabled by links in multi-user.target.wants */
        ASSERT_EQ_INT(conflicts_unit_state(ROOT, "google-guest-agent.service"), UNIT_ENABLED);
        ASSERT_EQ_INT(conflicts_unit_state(ROOT, "tuned.service"), UNIT_ENABLED);
}

TEST(udev_run_blockdev) {
        ConflictSet s = {};

        ASSERT_EQ_INT(conflicts_parse_udev_text("/r",
                                                "KERNEL==\"sd*\", RUN+=\"/sbin/blockdev --setra 8192 /dev/%k\"\n"
                                                "KERNEL==\"sd*\", RUN+=\"/bin/sh -c '/sbin/blockdev --setfra 255 /dev/%k'\"\n"
                                                "KERNEL==\"sd*\", RUN+=\"/sbin/blockdev --setra $env{RA} /dev/%k\"\n"
                                                "KERNEL==\"sd*\", RUN+=\"/sbin/blockdev --getra /dev/%k\"\n"
                                                "KERNEL==\"sd*\", RUN+=\"/sbin/blockdev --setro /dev/%k\"\n",
                                                &s), 0);
        ASSERT_EQ_INT(s.n_items, 3);
        /* 8192 sectors of 512 bytes: 4 MiB; 255 sectors are 31 whole 4 KiB pages */
        ASSERT_TRUE(s.n_items > 0 && s.items[0].tunable == T("read_ahead_kb") && streq(s.items[0].value, "4096"));
        ASSERT_TRUE(s.n_items > 1 && streq(s.items[1].value, "124") && s.items[1].line == 2);
        ASSERT_TRUE(s.n_items > 2 && streq(s.items[2].value, "?"));
        conflict_set_done(&s);
}

TEST(sysfsd_text) {
        ConflictSet s = {};
        ConflictDevice vda = disk("vda", true, NULL), sda = disk("sda", true, NULL);
        const Conflict *c;

        ASSERT_EQ_INT(conflicts_parse_sysfsd_text("/etc/sysfs.d/t.conf",
                                                  "# comment block/sda/queue/scheduler = bfq\n"
                                                  "block/sdb/queue/scheduler = kyber\n"
                                                  "mode block/sdb/queue/scheduler = 0644\n"
                                                  "owner block/sdb/queue/scheduler = root:disk\n"
                                                  "  class/block/vd*/queue/nr_requests=64   # after a value too\n"
                                                  "block/sda/queue/rotational = 0\n"
                                                  "devices/pci0000:00/0000:00:04.0/virtio2/block/vdb/queue/read_ahead_kb 512\n"
                                                  "block/sdc/bdi/read_ahead_kb = 1024\n"
                                                  "\n"
                                                  "block/sdd/queue/scheduler = mq deadline\n"
                                                  "block/sde/queue/scheduler = none\n",
                                                  &s), 0);
        ASSERT_EQ_INT(s.n_items, 4);
        c = find(&s, "/etc/sysfs.d/t.conf", 2);
        ASSERT_TRUE(c && c->source == CONFLICT_SYSFSD && c->tunable == TUNABLE_SCHEDULER && streq(c->value, "kyber"));
        ASSERT_TRUE(c && streq(c->match, "/sys/block/sdb/queue/scheduler") && c->n_conditions == 1);
        /* mode and owner lines set permissions; no value of them is reported */
        ASSERT_TRUE(!find(&s, "/etc/sysfs.d/t.conf", 3) && !find(&s, "/etc/sysfs.d/t.conf", 4));
        /* the script's glob is unquoted: vd* is every virtio disk */
        c = find(&s, "/etc/sysfs.d/t.conf", 5);
        ASSERT_TRUE(c && c->tunable == T("nr_requests") && streq(c->value, "64"));
        ASSERT_TRUE(c && conflict_matches(c, &vda, NULL) == CONFLICT_MATCH_YES);
        ASSERT_TRUE(c && conflict_matches(c, &sda, NULL) == CONFLICT_MATCH_NO);
        /* a line without '=' is split as it is: a write */
        c = find(&s, "/etc/sysfs.d/t.conf", 7);
        ASSERT_TRUE(c && c->tunable == T("read_ahead_kb") && streq(c->value, "512") && streq(c->conditions[0].value, "vdb"));
        c = find(&s, "/etc/sysfs.d/t.conf", 8);
        ASSERT_TRUE(c && c->tunable == T("read_ahead_kb") && streq(c->value, "1024"));
        /* a value with white space stops the script's reading of the file */
        ASSERT_TRUE(!find(&s, "/etc/sysfs.d/t.conf", 11));
        ASSERT_TRUE(strv_length(s.warnings) == 1 &&
                    streq(s.warnings[0], "/etc/sysfs.d/t.conf:10: syntax error, sysfsutils reads no further lines of it"));
        conflict_set_done(&s);

        /* a name alone is a syntax error too; "= x" has no attribute */
        ASSERT_EQ_INT(conflicts_parse_sysfsd_text("/x", "block/sda/queue/scheduler\n", &s), 0);
        ASSERT_TRUE(s.n_items == 0 && strv_length(s.warnings) == 1);
        conflict_set_done(&s);
        ASSERT_EQ_INT(conflicts_parse_sysfsd_text("/x", "= kyber\n", &s), 0);
        ASSERT_TRUE(s.n_items == 0 && strv_length(s.warnings) == 1);
        conflict_set_done(&s);
}

TEST(sysfsd_fixture) {
        ConflictSet s = {};
        ConflictDevice vda = disk("vda", true, NULL), loop0 = disk("loop0", true, NULL);

        ASSERT_EQ_INT(conflicts_scan_sysfsd(ROOT, &s), 0);
        /* /etc/sysfs.conf first, then sysfs.d by name (10-power sets no queue) */
        ASSERT_EQ_INT(s.n_items, 2);
        ASSERT_TRUE(s.n_items == 2 && streq(s.items[0].path, "/etc/sysfs.conf") && s.items[0].line == 11);
        ASSERT_TRUE(s.n_items == 2 && streq(s.items[0].value, "kyber") && conflict_matches(&s.items[0], &vda, NULL) == CONFLICT_MATCH_YES);
        ASSERT_TRUE(s.n_items == 2 && streq(s.items[1].path, "/etc/sysfs.d/60-loop.conf") && s.items[1].line == 2);
        ASSERT_TRUE(s.n_items == 2 && conflict_matches(&s.items[1], &loop0, NULL) == CONFLICT_MATCH_YES);
        ASSERT_TRUE(strv_length(s.warnings) == 1 &&
                    streq(s.warnings[0], "/etc/sysfs.d/60-loop.conf:3: syntax error, sysfsutils reads no further lines of it"));
        conflict_set_done(&s);
}

TEST(sysfs_paths) {
        static const struct {
                const char *rel, *glob, *attr;
        } good[] = {
                { "block/sda/queue/scheduler", "sda", "scheduler" },
                { "class/block/nvme*n1/queue/iosched/slice_idle", "nvme*n1", "iosched/slice_idle" },
                { "devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/queue/nr_requests", "nvme0n1", "nr_requests" },
                { "block/vda/bdi/read_ahead_kb", "vda", "read_ahead_kb" },
        };
        static const char *const bad[] = {
                "block/sda/queue/rotational", "block/sda/sda1/queue/scheduler", "module/x/queue/scheduler",
                "block//queue/scheduler", "block/sda/queue/", "kernel/mm/transparent_hugepage/enabled",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                _cleanup_free_ char *glob = NULL;
                unsigned t = 0;

                ASSERT_EQ_INT(conflicts_sysfs_path(good[i].rel, &glob, &t), 0);
                ASSERT_STREQ(glob, good[i].glob);
                ASSERT_EQ_INT(t, T(good[i].attr));
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *glob = NULL;
                unsigned t;

                ASSERT_EQ_INT(conflicts_sysfs_path(bad[i], &glob, &t), -ENOENT);
                ASSERT_TRUE(!glob);
        }
}

TEST(tmpfiles_text) {
        ConflictSet s = {};
        ConflictDevice sdb = disk("sdb", true, NULL), vda = disk("vda", true, NULL);
        const Conflict *c;

        ASSERT_EQ_INT(conflicts_parse_tmpfiles_text("/etc/tmpfiles.d/t.conf",
                                                    "# w /sys/block/vda/queue/scheduler - - - - bfq\n"
                                                    "w /sys/block/vda/queue/scheduler - - - - mq-deadline\n"
                                                    "w+ /sys/class/block/sd*/queue/nr_requests - - - - 128\n"
                                                    "w- \"/sys/block/loop0/queue/read_ahead_kb\" - - - - 2048\n"
                                                    "w~ /sys/block/vda/queue/nomerges - - - - MQ==\n"
                                                    "w /sys/block/vda/queue/rq_affinity - - - - -\n"
                                                    "w /sys/block/vda/queue/rq_affinity - - - -\n"
                                                    "d /run/x 0755 root root -\n"
                                                    "w /proc/sys/vm/swappiness - - - - 10\n"
                                                    "wx /sys/block/vda/queue/scheduler - - - - none\n"
                                                    "w \"/sys/block/vda/queue/scheduler - - - - none\n"
                                                    "  w! /sys/block/vda/queue/wbt_lat_usec - - - - 0  \n"
                                                    "w /sys/block/vda/queue/iosched/fifo_batch - - - - 1\\x32\n"
                                                    "w\n",
                                                    &s), 0);
        ASSERT_EQ_INT(s.n_items, 6);
        c = find(&s, "/etc/tmpfiles.d/t.conf", 2);
        ASSERT_TRUE(c && c->source == CONFLICT_TMPFILES && c->tunable == TUNABLE_SCHEDULER && streq(c->value, "mq-deadline"));
        ASSERT_TRUE(c && streq(c->match, "/sys/block/vda/queue/scheduler") && conflict_matches(c, &vda, NULL) == CONFLICT_MATCH_YES);
        /* w+ appends, which to a sysfs file is the same write; a glob path */
        c = find(&s, "/etc/tmpfiles.d/t.conf", 3);
        ASSERT_TRUE(c && c->tunable == T("nr_requests") && streq(c->value, "128"));
        ASSERT_TRUE(c && conflict_matches(c, &sdb, NULL) == CONFLICT_MATCH_YES && conflict_matches(c, &vda, NULL) == CONFLICT_MATCH_NO);
        /* a quoted path */
        c = find(&s, "/etc/tmpfiles.d/t.conf", 4);
        ASSERT_TRUE(c && c->tunable == T("read_ahead_kb") && streq(c->value, "2048"));
        /* base64: the value is not known here */
        c = find(&s, "/etc/tmpfiles.d/t.conf", 5);
        ASSERT_TRUE(c && streq(c->value, "?"));
        /* no argument, not a write, not a queue, an unknown modifier: nothing */
        for (unsigned l = 6; l <= 11; l++)
                ASSERT_TRUE(!find(&s, "/etc/tmpfiles.d/t.conf", l));
        /* boot-only lines write at boot, which is when it matters */
        c = find(&s, "/etc/tmpfiles.d/t.conf", 12);
        ASSERT_TRUE(c && c->tunable == T("wbt_lat_usec") && streq(c->value, "0"));
        /* escapes in the argument are resolved as tmpfiles does */
        c = find(&s, "/etc/tmpfiles.d/t.conf", 13);
        ASSERT_TRUE(c && c->tunable == T("iosched/fifo_batch") && streq(c->value, "12"));
        ASSERT_TRUE(strv_length(s.warnings) == 2 &&
                    streq(s.warnings[0], "/etc/tmpfiles.d/t.conf:11: unbalanced quoting, the line is skipped") &&
                    streq(s.warnings[1], "/etc/tmpfiles.d/t.conf:14: no path, the line is skipped"));
        conflict_set_done(&s);
}

TEST(tmpfiles_fixture_masking) {
        ConflictSet s = {};
        static const struct {
                const char *path;
                unsigned line;
                const char *attr, *value, *glob;
        } want[] = {
                { "/usr/lib/tmpfiles.d/blk-latency.conf", 2, "wbt_lat_usec", "0", "vd*" },
                /* blk-masked.conf: /etc links it to /dev/null; blk-runtime.conf:
                 * /run's copy is read, not /usr/lib's */
                { "/run/tmpfiles.d/blk-runtime.conf", 1, "rq_affinity", "2", "loop*" },
                { "/etc/tmpfiles.d/zz-local.conf", 2, "add_random", "0", "vda" },
        };

        ASSERT_EQ_INT(conflicts_scan_tmpfiles(ROOT, &s), 0);
        ASSERT_EQ_INT(s.n_items, ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want) && i < s.n_items; i++) {
                ASSERT_STREQ(s.items[i].path, want[i].path);
                ASSERT_EQ_INT(s.items[i].line, want[i].line);
                ASSERT_STREQ(tunables[s.items[i].tunable].attr, want[i].attr);
                ASSERT_STREQ(s.items[i].value, want[i].value);
                ASSERT_STREQ(s.items[i].conditions[0].value, want[i].glob);
        }
        ASSERT_TRUE(s.n_items == 3 && startswith(s.items[0].advice, "put a file of the same name in /etc/tmpfiles.d"));
        ASSERT_TRUE(s.n_items == 3 && startswith(s.items[2].advice, "remove the line from this file"));
        ASSERT_TRUE(!s.warnings);
        conflict_set_done(&s);
}

TEST(lvm_config) {
        /* sysfs' dm/uuid, with no udev database: a container, an initramfs */
        FakeDisk lv = { .attrs = (const char *const[]) { "dm/uuid=LVM-abcdef", NULL } };
        FakeDisk crypt = { .attrs = (const char *const[]) { "dm/uuid=CRYPT-LUKS2-abcdef", NULL } };
        ConflictDevice dm0 = disk("dm-0", false, &lv), dm1 = disk("dm-1", false, &crypt), vda = disk("vda", true, NULL);
        char dir[] = "/tmp/test-conflicts-XXXXXX";
        ConflictSet s = {};

        /* the fixture: readahead = "none" in activation { }, not the commented
         * one in devices { } */
        ASSERT_EQ_INT(conflicts_scan_lvm(ROOT, &s), 0);
        ASSERT_TRUE(s.n_items == 1 && !s.warnings);
        ASSERT_TRUE(s.n_items == 1 && s.items[0].source == CONFLICT_LVM && streq(s.items[0].path, "/etc/lvm/lvm.conf"));
        ASSERT_TRUE(s.n_items == 1 && s.items[0].line == 13 && streq(s.items[0].value, "0") &&
                    s.items[0].tunable == T("read_ahead_kb"));
        /* only LVM's logical volumes; the per-LV setting is said to be unread */
        ASSERT_TRUE(s.n_items == 1 && conflict_matches(&s.items[0], &dm0, NULL) == CONFLICT_MATCH_YES);
        ASSERT_TRUE(s.n_items == 1 && conflict_matches(&s.items[0], &dm1, NULL) == CONFLICT_MATCH_NO);
        ASSERT_TRUE(s.n_items == 1 && conflict_matches(&s.items[0], &vda, NULL) == CONFLICT_MATCH_NO);
        ASSERT_TRUE(s.n_items == 1 && strstr(s.items[0].advice, "in the VG metadata, which doctor does not read"));
        conflict_set_done(&s);

        ASSERT_TRUE(mkdtemp(dir));
        /* no LVM: nothing */
        ASSERT_TRUE(conflicts_scan_lvm(dir, &s) == 0 && s.n_items == 0);
        /* installed, readahead nowhere: the default, auto, writes too */
        write_file(dir, "/etc/lvm/lvm.conf", "activation {\n\tudev_rules = 1\n}\n");
        ASSERT_EQ_INT(conflicts_scan_lvm(dir, &s), 0);
        ASSERT_TRUE(s.n_items == 1 && s.items[0].line == 0 && streq(s.items[0].value, "auto"));
        ASSERT_TRUE(s.n_items == 1 && startswith(s.items[0].advice, "with readahead = auto (the default)"));
        conflict_set_done(&s);
        /* lvmlocal.conf overrides lvm.conf; the path form at the top */
        write_file(dir, "/etc/lvm/lvm.conf", "activation {\n  readahead = \"none\"\n}\n");
        write_file(dir, "/etc/lvm/lvmlocal.conf", "# local\nactivation/readahead = \"AUTO\"\n");
        ASSERT_EQ_INT(conflicts_scan_lvm(dir, &s), 0);
        ASSERT_TRUE(s.n_items == 1 && streq(s.items[0].path, "/etc/lvm/lvmlocal.conf") && s.items[0].line == 2 &&
                    streq(s.items[0].value, "auto"));
        conflict_set_done(&s);

        /* what LVM refuses, and what is not LVM's syntax */
        ASSERT_EQ_INT(conflicts_parse_lvm_text("/l", "activation { readahead = \"fast\" }\n", &s), 0);
        ASSERT_TRUE(s.n_items == 0 && strv_length(s.warnings) == 1 &&
                    streq(s.warnings[0], "/l:1: readahead = \"fast\" is neither auto nor none: LVM refuses to run"));
        conflict_set_done(&s);
        static const char *const broken[] = {
                "activation {\n", "}\n", "activation { readahead = \"none }\n", "a = [ 1, { ]\n", "{ }\n",
                "activation readahead\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(broken); i++) {
                ASSERT_EQ_INT(conflicts_parse_lvm_text("/l", broken[i], &s), 0);
                ASSERT_TRUE(s.n_items == 0 && strv_length(s.warnings) == 1);
                conflict_set_done(&s);
        }
        /* readahead outside activation, or nested deeper, is another key */
        ASSERT_EQ_INT(conflicts_parse_lvm_text("/l", "devices { readahead = \"none\" }\n"
                                                     "global { activation { readahead = \"none\" } }\n", &s), 0);
        ASSERT_TRUE(s.n_items == 0 && !s.warnings);
        conflict_set_done(&s);
}

TEST(dormant_writer_not_named) {
        char dir[] = "/tmp/test-conflicts-XXXXXX";
        Roots roots = { .proc = PROC };
        ConflictDevice vda = disk("vda", true, NULL);
        ConflictSet s = {};
        const Conflict *c;

        /* the bug: the agent was installed, not running, and named "likely" */
        ASSERT_TRUE(mkdtemp(dir));
        roots.root = dir;
        write_file(dir, "/usr/lib/systemd/system/google-guest-agent.service", "[Service]\n");
        ASSERT_EQ_INT(conflicts_scan(&roots, &s), 0);
        c = find(&s, "/usr/lib/systemd/system/google-guest-agent.service", 0);
        ASSERT_TRUE(c && c->dormant);
        ASSERT_TRUE(!conflicts_attribute(&s, &vda, TUNABLE_SCHEDULER, "none"));
        ASSERT_TRUE(conflicts_attribute_dormant(&s, &vda, TUNABLE_SCHEDULER, "none") == c);
        conflict_set_done(&s);
}
