/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Originals: the value of every attribute blkpolicyd changed, as it was
 * before the first change. Persisted per device under the state dir so a
 * restarted daemon never takes its own values for the kernel's. */

#include <stdbool.h>

#include "tunables.h"

typedef struct Original {
        unsigned tunable;
        char *value;
} Original;

/* A device has one to three (the scheduler, a tunable or two): a list, not
 * a slot per tunable, which cost every changed device 320 bytes. */
typedef struct Originals {
        Original *list;
        unsigned n;
} Originals;

void originals_done(Originals *o);
bool originals_empty(const Originals *o);
const char *originals_get(const Originals *o, unsigned t);
/* Records value for tunable t unless one is recorded already.
 * Returns 1 if recorded, 0 if it was there, -ENOMEM. */
int originals_record(Originals *o, unsigned t, const char *value);

#define VALUE_MAX_STATE 32

/* <state_dir>/devices/<dev>. Load merges into o without overwriting;
 * -ENOENT when there is no file. Unknown or torn lines are skipped and
 * counted: returns how many (0 for a clean file). */
int originals_load(const char *state_dir, const char *dev, Originals *o);
int originals_save(const char *state_dir, const char *dev, const Originals *o);
int originals_remove(const char *state_dir, const char *dev);
