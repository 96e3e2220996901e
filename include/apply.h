/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "plan.h"
#include "state.h"
#include "sysfs.h"

typedef struct ApplyStats {
        uint64_t scheduler_writes;      /* each costs a queue freeze: counted to prove none is redundant */
        uint64_t other_writes;
} ApplyStats;

typedef struct ApplyRequest {
        const Roots *roots;
        const char *dev;
        bool dry_run;
        Originals *originals;   /* gains the value before each first change */
        ApplyStats *stats;      /* may be NULL */
} ApplyRequest;

/* Applies plan->items in order: reads each attribute, writes only when it
 * differs, reads back. Fills current/result/error of every item.
 * Returns 0; -ENODEV when the device went away (drop it quietly);
 * -EAGAIN when an item hit a transient error and the plan should be
 * applied again later; -ENOMEM. Sets *originals_changed when a new
 * original was recorded (the caller persists it). */
int apply_plan(const ApplyRequest *req, Plan *plan, bool *originals_changed);

/* Writes originals back, scheduler first (which resets its tunables),
 * skipping values that are already in place. Returns the number of
 * writes, or -ENODEV/-ENOMEM. */
int restore_originals(const Roots *roots, const char *dev, const Originals *o, bool dry_run);

/* The value blkpolicyd compares for an attribute: the bracketed name for
 * "scheduler", the whole text otherwise. */
int attr_read_current(const Roots *r, const char *dev, unsigned tunable, char *buf, size_t size);
