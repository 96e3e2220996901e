/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* apply: carries out what reconcile.c decides, for one device. Reads sysfs,
 * reconciles, saves the record, writes, reads back; again after a
 * scheduler switch (which resets what follows it). Every attribute is
 * written at most once a pass (the scheduler once per fallback): it never
 * loops on a failure, it reports it. */

#include <stdint.h>

#include "plan.h"
#include "reconcile.h"
#include "state-file.h"
#include "sysfs.h"

typedef struct ApplyStats {
        uint64_t scheduler_writes;      /* each costs a queue freeze: counted to prove none is redundant */
        uint64_t other_writes;
        uint64_t write_errors;          /* writes the kernel refused (not an EINVAL a fallback follows) */
        uint64_t kernel_resets;         /* values a queue-limits update had put back to the kernel's
                                         * default, written again or put back (reconcile's kernel_reset) */
} ApplyStats;

typedef struct ApplyRequest {
        const Roots *roots;
        const char *dev;
        DeviceRecord *record;   /* in and out; saved to `state` before every write */
        const StateDir *state;  /* NULL: plan only (dry run, held device) */
        bool take_over;         /* resume, on_drift=reapply: write over the admin's changes */
        bool new_media;         /* the admin's values are the found ones of a new medium */
        const LiveValue *media_live;    /* as seen when the new medium came, or NULL */
        ApplyStats *stats;      /* may be NULL */
        bool probe_dispatch_direct;     /* not known yet: look after a switch to mq-deadline */
        const unsigned *kernel_version; /* [3], whose rules the kernel's defaults follow; NULL:
                                         * unknown (the rules before 6.17) */
} ApplyRequest;

typedef struct ApplyOutcome {
        unsigned restored;              /* values put back */
        unsigned restore_failed;        /* values that could not be put back: their record stays */
        int record_error;               /* the record could not be saved: nothing was written */
        int overridden;                 /* a wanted attribute the admin changed (tunable), or -1 */
        char overridden_live[VALUE_MAX];
        Tristate dispatch_direct;       /* after a switch to mq-deadline: its iosched/ has it; else unknown */
} ApplyOutcome;

/* One pass for a device: plan NULL wants nothing (stop, --restore), which
 * puts back everything blkpolicyd owns. Fills the plan items' result,
 * before, current, error. Returns 0; -ENODEV when the device went away
 * (its record is moot); -EAGAIN when an item hit a transient error and the
 * pass should run again later; -ENOMEM. */
int apply_device(const ApplyRequest *req, Plan *plan, ApplyOutcome *out);

/* What a queue-limits update (a revalidation) leaves tunable at on dev
 * now: kernel-default.h, from the queue's limits as sysfs shows them.
 * Returns 1 and fills buf; 0 when no limits update resets tunable; a
 * negative errno when the limits cannot be read. */
int kernel_default_read(const Roots *r, const char *dev, unsigned tunable, const unsigned *kernel_version,
                        char *buf, size_t size);

/* The value blkpolicyd compares for an attribute: the bracketed name for
 * "scheduler", the whole text otherwise. */
int attr_read_current(const Roots *r, const char *dev, unsigned tunable, char *buf, size_t size);
