/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* device.c: one device's life. It calls nothing of the files above it
 * (manager.c, drift.c, sampler.c, commands.c): what the manager does
 * after a device's pass comes back is the manager's (its applier
 * callback), and the manager's state it needs it reads from the struct. */

#include "manager.h"

/* Classifies a disk that appeared or changed and finds (or makes) its Device
 * by dev_t. NULL for partitions, vanished devices and per-device errors
 * (logged); *error is set only for -ENOMEM. */
Device *device_refresh(Manager *m, const char *name, int *error);
/* Policies that name other udev properties: every device's read again. */
int device_refresh_properties(Manager *m);
/* decide + apply; may forget d if it vanished */
void device_process(Manager *m, Device *d);
/* decide and apply again, writing over what the admin changed (resume,
 * drift with on_drift=reapply) */
void device_process_again(Manager *m, Device *d);
/* Every device, by name; processing one never forgets another. */
int device_process_all(Manager *m);
/* Puts back what blkpolicyd changed on d (nothing wanted), in the
 * applier; the values left changed are counted in m->restore_left. */
int device_restore(Manager *m, Device *d);
/* A device's pass is back from the applier. True when it was a pass (not
 * a restore) of a device still known: then decisions may have to be taken
 * again (m->redecide) and READY=1 may be due, which is the manager's. */
bool device_apply_done(Manager *m, struct ApplyJob *j);
/* A remove event: forget d unless its queue is still there (a stale event
 * for a disk that came back under the same number is not this disk's). */
void device_removed(Manager *m, Device *d);
/* decide and apply again for a device whose dynamic state flipped */
void device_flip(Manager *m, Device *d, const DynDecision *dec);
void device_forget(Manager *m, Device *d, bool drop_state);
/* d's whole facts, in *view: the shared ones with its name, number,
 * diskseq and properties (borrowed: not for device_facts_done()). */
const DeviceFacts *device_facts(const Device *d, DeviceFacts *view);
/* What report.c reads of a device; view: storage for device_facts(), as
 * long as the result is used. */
ReportDevice device_report_input(const Device *d, DeviceFacts *view);
/* Paused (one or all) or overridden: looked at, never written to. */
bool device_is_held(const Manager *m, const Device *d);
/* resume: neither paused nor overridden any more */
void device_clear_hold(Device *d);
Device *device_free(Device *d);
DeviceDynamic *device_dynamic_free(DeviceDynamic *y);
