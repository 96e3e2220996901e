/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* trial-memory.c: verdicts remembered per disk, kernel, trial and shape. */
#include <errno.h>
#include <string.h>

#include "tests.h"
#include "trial-memory.h"
#include "util.h"

static const TrialShape READS = { 1.0, 4096 }, WRITES = { 0.0, 4096 };

static TrialMemo memo(const char *identity, const char *kernel, TrialShape shape, uint64_t at, const char *kept) {
        TrialMemo m = { .shape = shape, .at_sec = at, .verdict = kept ? TRIAL_CANDIDATE_WINS : TRIAL_INCUMBENT,
                        .estimate = kept ? 2.5 : 0.9 };
        const char *error;
        unsigned n = 0;

        (void) strscpy(m.identity, sizeof(m.identity), identity);
        (void) strscpy(m.model, sizeof(m.model), "scsi_debug");
        (void) strscpy(m.kernel, sizeof(m.kernel), kernel);
        (void) strscpy(m.trial, sizeof(m.trial), "none > mq-deadline");
        if (kept) {
                ASSERT_EQ_INT(sched_choices_parse(kept, &m.kept, &n, &error), 0);
                m.has_kept = true;
        }
        return m;
}

TEST(the_fingerprint_is_the_question) {
        TrialPolicy p = TRIAL_POLICY_DEFAULTS;
        const char *error;
        char buf[TRIAL_FINGERPRINT_MAX];

        ASSERT_EQ_INT(sched_choices_parse("mq-deadline mq-deadline+dispatch_direct", p.candidates, &p.n_candidates,
                                          &error), 0);
        ASSERT_EQ_INT(trial_fingerprint("none", &p, buf, sizeof(buf)), 0);
        ASSERT_STREQ(buf, "none > mq-deadline, mq-deadline+dispatch_direct");
        ASSERT_EQ_INT(trial_fingerprint("none", &p, buf, 12), -ENOBUFS);
}

TEST(found_only_for_the_same_disk_kernel_trial_and_a_near_shape_while_fresh) {
        TrialMemory m = {};
        TrialMemo reads = memo("wwid:naa.1", "6.12.1", READS, 1000, "mq-deadline"), key = reads;
        TrialShape mostly = { 0.9, 4096 };

        ASSERT_EQ_INT(trial_memory_put(&m, &reads), 0);
        ASSERT_TRUE(trial_memory_find(&m, &key, NULL, 1500, 600) == &m.memos[0]);
        ASSERT_TRUE(trial_memory_find(&m, &key, &mostly, 1500, 600) == &m.memos[0]);
        ASSERT_TRUE(trial_memory_find(&m, &key, &WRITES, 1500, 600) == NULL);
        ASSERT_TRUE(trial_memory_find(&m, &key, NULL, 1601, 600) == NULL);     /* too old */
        ASSERT_TRUE(trial_memory_find(&m, &key, NULL, 10, 600) != NULL);       /* the clock set back */
        (void) strscpy(key.kernel, sizeof(key.kernel), "6.12.2");
        ASSERT_TRUE(trial_memory_find(&m, &key, NULL, 1500, 600) == NULL);
        key = reads;
        (void) strscpy(key.identity, sizeof(key.identity), "wwid:naa.2");
        ASSERT_TRUE(trial_memory_find(&m, &key, NULL, 1500, 600) == NULL);
        key = reads;
        (void) strscpy(key.trial, sizeof(key.trial), "mq-deadline > none");
        ASSERT_TRUE(trial_memory_find(&m, &key, NULL, 1500, 600) == NULL);
        trial_memory_done(&m);
        trial_memory_done(NULL);
}

TEST(a_verdict_per_shape_the_newest_for_any) {
        TrialMemory m = {};
        TrialMemo reads = memo("wwid:naa.1", "6.12.1", READS, 1000, "mq-deadline"),
                  writes = memo("wwid:naa.1", "6.12.1", WRITES, 2000, NULL),
                  again = memo("wwid:naa.1", "6.12.1", (TrialShape) { 0.95, 4096 }, 3000, NULL);

        ASSERT_EQ_INT(trial_memory_put(&m, &reads), 0);
        ASSERT_EQ_INT(trial_memory_put(&m, &writes), 0);
        ASSERT_TRUE(m.n == 2);
        ASSERT_TRUE(trial_memory_find(&m, &reads, NULL, 2500, 9999)->at_sec == 2000);
        ASSERT_TRUE(trial_memory_find(&m, &reads, &READS, 2500, 9999)->has_kept);
        /* a near shape replaces its verdict */
        ASSERT_EQ_INT(trial_memory_put(&m, &again), 0);
        ASSERT_TRUE(m.n == 2);
        ASSERT_TRUE(!trial_memory_find(&m, &reads, &READS, 3500, 9999)->has_kept);
        trial_memory_done(&m);
}

TEST(the_oldest_go_first_per_key_and_in_all) {
        TrialMemory m = {};
        char id[32];

        for (unsigned i = 0; i < TRIAL_MEMORY_PER_KEY + 2; i++) {
                TrialMemo x = memo("serial:A", "7.3", (TrialShape) { 0, 512.0 * (1U << (3 * i)) }, 100 + i, NULL);

                ASSERT_EQ_INT(trial_memory_put(&m, &x), 0);
        }
        ASSERT_TRUE(m.n == TRIAL_MEMORY_PER_KEY);
        for (size_t i = 0; i < m.n; i++)
                ASSERT_TRUE(m.memos[i].at_sec >= 102);
        for (unsigned i = 0; i < TRIAL_MEMORY_MAX; i++) {
                TrialMemo x;

                (void) snprintf(id, sizeof(id), "path:virtual/block/loop%u", i);
                x = memo(id, "7.3", READS, 1000 + i, NULL);
                ASSERT_EQ_INT(trial_memory_put(&m, &x), 0);
        }
        ASSERT_TRUE(m.n == TRIAL_MEMORY_MAX);
        for (size_t i = 0; i < m.n; i++)
                ASSERT_TRUE(!streq(m.memos[i].identity, "serial:A"));
        trial_memory_done(&m);
}
