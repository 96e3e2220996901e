/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A device's trial verdicts remembered (device-trial-memory.c). */

#include "device-types.h"
#include "trial-memory.h"

/* The verdict remembered for d under what t asks (incumbent: the policy's
 * scheduler, as scheduler= names it) whose shape is near shape (NULL: the
 * newest of any), fresh by t's max_age; NULL for none, or when no memory
 * is kept. */
const TrialMemo *device_trial_memory_find(const DeviceContext *c, const Device *d, const DeviceTrial *t,
                                          const char *incumbent, const TrialShape *shape);
/* t done at once from memo (NULL: nothing), logged. 1 when the arm in
 * force changed. */
int device_trial_memory_recall(const Device *d, DeviceTrial *t, const TrialMemo *memo);
/* What a [Trial]'s trial t decided, remembered and saved: a save that
 * fails costs a trial after the next restart, and is logged. -ENOMEM. */
int device_trial_memory_save(DeviceContext *c, const Device *d, const DeviceTrial *t);
