/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A device's trial in the daemon (device-trial.c): the tick's step, the
 * passes' hook and the commands'. */

#include "decide.h"
#include "device-types.h"

/* The arm in force of d's trial, if any, into in (device_decide_input()). */
void device_trial_input(const Device *d, DecideInput *in);
/* After decide(): a trial that may not run any more stops (its [Trial]
 * gone or changed, d paused, overridden, observe ...), one the plan's
 * [Trial] asks for is made (it begins at the next tick). 1 when the arm in
 * force changed: decide again. -ENOMEM. */
int device_trial_after_decide(DeviceContext *c, Device *d, const Plan *plan);
/* The tick's: d's trial one step on with its sample at now_ms. 1 when the
 * arm in force changed (a pass must write it: device_process()), 0,
 * -ENOMEM never (nothing allocated). */
int device_trial_step(DeviceContext *c, Device *d, const DiskStat *st, uint64_t now_ms);
/* blkpolicyctl trial DEV [CANDIDATE...]: a trial of candidates (none:
 * its policy's [Trial]'s) at the next tick, replacing one that runs.
 * -EPERM or -EINVAL with *why_not when d may not; -ENOMEM. 1: a pass must
 * write what is in force now (device_process()). */
int device_trial_request(DeviceContext *c, Device *d, const SchedChoice *candidates, unsigned n,
                         const char **why_not);
/* blkpolicyctl trial DEV --stop: -ENOENT when none runs; 1 when the arm
 * in force changed (a pass must write it), 0. */
int device_trial_end(const DeviceContext *c, Device *d);
