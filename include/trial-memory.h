/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* trial-memory: verdicts remembered per device identity (issue #28: "per
 * device identity (model + serial/WWID where present, kernel release),
 * persisted, so a restart or re-add does not re-trial"). A verdict is
 * remembered with the workload shape it was measured on; the same device
 * on the same kernel under the same [Trial] and a shape near that one
 * takes the remembered setting without a trial, until max_age. A device
 * whose workload alternates between two shapes keeps a verdict for each
 * (TRIAL_MEMORY_PER_KEY), and takes each again without a trial. Pure:
 * the table in memory; io/trial-memory-file.c reads and writes it. */

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "trial-shape.h"
#include "trial.h"

#define TRIAL_IDENTITY_MAX 160
#define TRIAL_KERNEL_MAX 64
#define TRIAL_FINGERPRINT_MAX 160
/* verdicts kept per device, [Trial] and kernel: one per shape seen */
#define TRIAL_MEMORY_PER_KEY 4
/* verdicts in all: the oldest go first (a host's disks times its shapes) */
#define TRIAL_MEMORY_MAX 4096

typedef struct TrialMemo {
        /* the key */
        char identity[TRIAL_IDENTITY_MAX];      /* "wwid:naa.5000c500a1b2c3d4", "serial:...", "path:..." */
        char model[64];
        char kernel[TRIAL_KERNEL_MAX];          /* the release: another kernel, another verdict */
        char trial[TRIAL_FINGERPRINT_MAX];      /* trial_fingerprint(): the incumbent and candidates */
        TrialShape shape;                       /* what it was measured on */
        /* what was found */
        bool has_kept;                          /* a candidate won: kept; else the incumbent stays */
        SchedChoice kept;
        TrialVerdict verdict;                   /* the last candidate's */
        double estimate;                        /* its */
        uint64_t at_sec;                        /* the wall clock at the verdict */
} TrialMemo;

typedef struct TrialMemory {
        TrialMemo *memos;
        size_t n, allocated;
} TrialMemory;

/* "none > mq-deadline, mq-deadline+dispatch_direct": what a verdict
 * answered. A policy that changes its scheduler or candidates asks
 * another question. -ENOBUFS. */
int trial_fingerprint(const char *incumbent, const TrialPolicy *p, char *buf, size_t size);

void trial_memory_done(TrialMemory *m);

/* The fresh verdict for key's identity, model, kernel and trial whose
 * shape is near shape (any shape when shape is NULL: the newest), taken
 * at most max_age_sec before now_sec; NULL for none. A verdict from the
 * future (the clock was set back) counts as taken now. */
const TrialMemo *trial_memory_find(const TrialMemory *m, const TrialMemo *key, const TrialShape *shape,
                                   uint64_t now_sec, uint64_t max_age_sec);

/* Remembers memo: replaces the verdict of the same key and a near shape,
 * else adds one, dropping the key's oldest beyond TRIAL_MEMORY_PER_KEY and
 * the table's oldest beyond TRIAL_MEMORY_MAX. -ENOMEM. */
int trial_memory_put(TrialMemory *m, const TrialMemo *memo);
