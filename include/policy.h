/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Policy files: *.policy INI files in drop-in directories, each parsed by
 * policy.c into a Policy (a PolicySet of them: policy-set.h). See
 * man/blkpolicyd.policy.5 for the language. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "facts.h"
#include "policy-error.h"
#include "sample.h"
#include "tunables.h"

#define SCHED_CHOICES_MAX 8
#define KERNEL_CONDS_MAX 4

typedef struct SchedChoice {
        char name[SCHED_NAME_MAX];
        bool dispatch_direct;   /* "mq-deadline+dispatch_direct": needs the kernel feature */
} SchedChoice;

typedef enum KernelOp { KOP_LT, KOP_LE, KOP_EQ, KOP_GE, KOP_GT } KernelOp;

typedef struct KernelCond {
        KernelOp op;
        unsigned version[3];
} KernelCond;

typedef struct PolicyMatch {
        ClassSet classes_required;
        ClassSet classes_excluded;
        char **names;           /* kernel name globs, any */
        char **drivers;         /* driver names, any */
        char **models;          /* device/model globs, any */
        char **properties;      /* "KEY=GLOB", all must hold */
        int rotational;         /* -1 any, else raw queue/rotational */
        int hidden;             /* -1 any */
        unsigned zoned_mask;    /* bit per ZonedModel, 0 any */
        unsigned hwq_min, hwq_max;
        unsigned stack_mask;    /* bit per StackRole, 0 any */
        char **dm_uuid_prefixes; /* "LVM-", "part": DeviceTopology's, any */
        char **md_levels;       /* md/level, any */
        unsigned nvme_mpath_mask; /* bit per NvmeMultipath, 0 any */
        KernelCond kernel[KERNEL_CONDS_MAX];
        unsigned n_kernel;
} PolicyMatch;

typedef enum CmpOp { CMP_LT, CMP_LE, CMP_GT, CMP_GE } CmpOp;

typedef struct Condition {
        SignalId signal;
        CmpOp op;
        double threshold;
} Condition;

/* plain numbers: the parser's messages spell them (STRINGIFY) */
#define CONDITIONS_MAX 4
#define DYNAMIC_WINDOW_MAX 8
#define DYNAMIC_FLIPS_CAP 64

/* [Dynamic] + [Busy]: a second settings set for when the device is busy,
 * entered and left on conditions over the sampled signals. */
typedef struct DynamicPolicy {
        bool enabled;
        Condition enter[CONDITIONS_MAX];        /* all must hold ... */
        unsigned n_enter;
        unsigned enter_ticks;                   /* ... for this many ticks in a row */
        Condition leave[CONDITIONS_MAX];
        unsigned n_leave;
        unsigned leave_ticks;
        unsigned window;                        /* signals averaged over this many ticks */
        unsigned min_dwell_ticks;               /* no flip sooner after the last one */
        unsigned max_flips;                     /* at most this many flips ... */
        unsigned flip_window_ticks;             /* ... in this many ticks */
        SchedChoice busy_sched[SCHED_CHOICES_MAX];
        unsigned n_busy_sched;
        char *busy_values[TUNABLES_MAX];
        bool has_busy;
} DynamicPolicy;

/* What a [Dynamic] section leaves unset, as blkpolicyd.policy(5) and
 * docs/policy-language.md say: a flip needs 3 ticks in, 5 out, 10 apart,
 * at most 6 in 600 ticks (10 minutes at the default tick). */
#define DYNAMIC_POLICY_DEFAULTS                                                         \
        ((DynamicPolicy) { .enter_ticks = 3, .leave_ticks = 5, .window = 1, .min_dwell_ticks = 10, \
                           .max_flips = 6, .flip_window_ticks = 600 })

int condition_parse(const char *s, Condition *ret);
int condition_format(const Condition *c, char *buf, size_t size);
bool dynamic_uses_signal(const DynamicPolicy *p, SignalId s);

/* [Trial]: candidate schedulers tried against the policy's own choice on
 * the device's live traffic (docs/trials.md). Plain data: two sections
 * are the same trial when trial_policy_equal() says so. */
typedef struct TrialPolicy {
        bool enabled;
        SchedChoice candidates[SCHED_CHOICES_MAX];     /* each one a trial of its own, in order */
        unsigned n_candidates;
        uint64_t window_ms;                     /* each counted window */
        uint64_t settle_ms;                     /* after a switch, not counted */
        uint64_t max_duration_ms;               /* of each candidate's trial */
        double min_gain;                        /* the margin a candidate must win by */
        unsigned max_switches_per_hour;
        uint64_t max_age_ms;                    /* a verdict older is taken again */
        bool retrial_on_shape;                  /* a workload of another shape takes it again */
} TrialPolicy;

/* What a [Trial] section leaves unset: trial_run_config_default() and
 * trial_config_default()'s margin (docs/trials.md). */
#define TRIAL_POLICY_DEFAULTS                                                                   \
        ((TrialPolicy) { .window_ms = 10000, .settle_ms = 2000, .max_duration_ms = 3600000,     \
                         .min_gain = 0.05, .max_switches_per_hour = 30,                        \
                         .max_age_ms = 30ULL * 24 * 3600 * 1000, .retrial_on_shape = true })

bool trial_policy_equal(const TrialPolicy *a, const TrialPolicy *b);

typedef struct Policy {
        char *name;             /* file name, e.g. "50-ublk.policy": what reports show */
        char *path;
        PolicyMatch match;
        SchedChoice sched[SCHED_CHOICES_MAX];
        unsigned n_sched;       /* 0: the policy does not choose a scheduler */
        char *values[TUNABLES_MAX]; /* normalised, NULL when unset; [0] unused */
        DynamicPolicy dynamic;
        TrialPolicy trial;
        /* [Policy] mode=observe: a canary. decide() leaves it out of what
         * is written; decide_canaries() says what it would change. */
        bool observe;
} Policy;

Policy *policy_free(Policy *p);
/* Parses one file. Errors are appended to errors with file:line; returns
 * -EINVAL if the file had any (and then *ret is NULL), -ENOMEM fatal. */
int policy_parse_file(const char *path, const char *name, PolicyErrors *errors, Policy **ret);
/* The same for a file's text that came without the file (verify --policy:
 * blkpolicyctl read it, maybe in another mount namespace): name is its
 * path too, so errors read "name:line: message". */
int policy_parse_text(const char *text, const char *name, PolicyErrors *errors, Policy **ret);

int sched_choices_parse(const char *value, SchedChoice *choices, unsigned *n, const char **error);
int sched_choice_format(const SchedChoice *c, char *buf, size_t size);
