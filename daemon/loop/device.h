/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* device.c: one device's life, and the only file that knows what a Device
 * holds. The others ask it through the functions below. It calls nothing
 * of the files above it (manager.c, drift.c, sampler.c, commands.c): what
 * the manager does after a device's pass comes back is the manager's (its
 * applier callback).
 *
 * Functions that return int return 0 or a negative errno; the only error
 * they return is -ENOMEM (fatal): per-device failures are logged
 * "…, ignoring" and kept in the device's error. A function that may forget
 * the device says so: the device is then out of the table (device_get()
 * no longer finds it), and freed after the current event's dispatch, so
 * the caller's pointer stays valid until it returns to the loop. */

#include "device-types.h"
#include "policy-set.h"
#include "preview.h"

/* Lookup, O(1) by number. */
Device *device_get(const DeviceContext *c, dev_t devnum);
Device *device_find_name(const DeviceContext *c, const char *name);
/* Sorted by name, for reports and passes in order. Caller frees the array
 * (not the devices). Returns the count. */
int devices_sorted(const DeviceContext *c, Device ***ret);

/* A walk over the devices in table order, from a starting slot, once
 * round. The loop's body may forget the current device (a forgotten
 * device leaves a tombstone in its slot and nothing moves), but not add
 * one (device-table.h). */
typedef struct DeviceIter {
        size_t start, visited;  /* slots */
        unsigned rehashes;      /* the table's at the walk's first step */
        bool done;
} DeviceIter;

#define DEVICE_ITER_AT(slot) ((DeviceIter) { .start = (slot) })
bool device_iter_next(const DeviceContext *c, DeviceIter *i, Device **ret);
/* Where a walk that stops now should start again: the slot after the
 * last device it returned (drift's round-robin). */
size_t device_iter_resume_slot(const DeviceContext *c, const DeviceIter *i);

/* "break" ends the walk: the outer loop only gives the inner one its
 * iterator. */
/* NOLINTBEGIN(bugprone-macro-parentheses): d is the name of the loop variable */
#define DEVICE_FOREACH(d, c)                                                               \
        for (DeviceIter _i = DEVICE_ITER_AT(0); !_i.done; _i.done = true)                  \
                for (Device *d; device_iter_next((c), &_i, &d);)
/* NOLINTEND(bugprone-macro-parentheses) */

/* What the others may read. */
const char *device_name(const Device *d);
/* Also the device table's key (DEVICE_TABLE_INIT()). */
dev_t device_devnum(const Device *d);
const Plan *device_plan(const Device *d);
const DeviceRecord *device_record(const Device *d);
/* NULL unless the policy has [Dynamic]. */
const DeviceDynamic *device_dynamic(const Device *d);
/* NULL unless a trial ran or runs on d (trial-device.h): its state, for
 * the views. */
const DeviceTrial *device_trial(const Device *d);
/* NULL until the first flip, and without a DeviceDynamic. */
const DeviceFlips *device_flips(const Device *d);
/* The sampler's: d's signals from its counters st, over the time since d
 * was read last (sample_state_interval()); busy: dispatch_busy, -1 when
 * not read. -ENOMEM only. */
int device_sample_update(Device *d, const DiskStat *st, uint64_t interval_us, unsigned read_ms, double busy,
                         Signals *ret);
/* d's state machine, one step with the signals of tick: whether to flip,
 * in *ret (never without a DeviceDynamic, or a managed plan's [Dynamic]).
 * -ENOMEM only. */
int device_dynamic_step(Device *d, const Signals *signals, uint64_t tick, DynDecision *ret);
/* And whether its dispatch_busy could not be read last time (warned once). */
bool device_busy_unreadable(const Device *d);
void device_set_busy_unreadable(Device *d, bool b);
/* d's whole facts, in *view: the shared ones with its name, number,
 * diskseq and properties (borrowed: not for device_facts_done()). */
const DeviceFacts *device_facts(const Device *d, DeviceFacts *view);
/* Adds to *l, once each, the disks next to d (NULL: none) in its stack:
 * below it (its slaves, an NVMe head's paths), or above it (its holders,
 * an NVMe path's head if c has it). */
int device_stack_neighbours(const DeviceContext *c, const Device *d, bool below, char ***l);
/* A device's settings as a view shows them (device-view.c): its plan's
 * items from one live read taken now, judged by setting_view(), and the
 * counts of what is not in force. */
typedef struct DeviceView {
        Plan plan;                      /* the device's, its items these */
        PlanItem items[TUNABLES_MAX];
        LiveValue scheduler;            /* read whether a policy sets it or not */
        unsigned pending;               /* a write would change them: planned or overridden */
        unsigned overridden;
        unsigned not_kept;
        /* what the canaries (mode=observe policies) would change, from
         * decide_canaries() now: planned while live differs, else unchanged */
        PlanItem canary[TUNABLES_MAX];
        unsigned n_canary;
        unsigned canary_pending;        /* of them, planned: never written, never "pending" */
        const char *canary_policy;      /* the last canary whose change is listed; NULL: none is */
        bool in_flight;                 /* a pass runs: shown as it left it, unread */
} DeviceView;
void device_view(const DeviceContext *c, const Device *d, DeviceView *v);
/* The first of d's settings someone else changed, as device_view() judges
 * it, from only the reads that takes: its managed settings in plan order up
 * to that one (no scheduler read a policy does not ask for, no copy of the
 * plan, nothing allocated). The drift check's read, at 10,000 devices a
 * minute. false: none drifted, d is not managed, or a pass is in flight. */
typedef struct DeviceDrift {
        unsigned tunable;
        const char *target;             /* the plan's, valid until d's next pass */
        char current[VALUE_MAX];        /* live */
} DeviceDrift;
bool device_first_drift(const DeviceContext *c, const Device *d, DeviceDrift *ret);
/* verify --policy: d decided from set (as its pass decides, with the udev
 * properties set names) against its plan in force, from one live read of
 * what either plan sets or its record holds (preview.h), in *ret: 1. A
 * device with a pass in flight is not read (as device_view() leaves it):
 * its live values are what that pass's last round left, and 0 is
 * returned. -ENOMEM. */
int device_preview(const DeviceContext *c, const Device *d, const PolicySet *set, PreviewDiff *ret);
/* What report.c reads of a device, from a view taken now; facts and v:
 * storage, as long as the result is used. */
ReportDevice device_report_input(const DeviceContext *c, const Device *d, DeviceFacts *facts, DeviceView *v);

/* Holds: paused (one or all) or overridden, looked at, never written to. */
bool device_is_held(const DeviceContext *c, const Device *d);
bool device_is_paused(const DeviceContext *c, const Device *d);
bool device_overridden(const Device *d);
/* What someone else changed, while overridden; NULL otherwise. */
const char *device_override_note(const Device *d);
/* A pass queued, running or waiting to retry: what it writes is no drift. */
bool device_pass_pending(const Device *d);
void device_pause(Device *d);
/* resume: neither paused nor overridden any more */
void device_clear_hold(Device *d);
/* A mode change: blkpolicyd claims nothing the admin took over any more
 * (the override was against a claim that is gone). */
void device_end_override(Device *d);
/* Someone else changed what blkpolicyd set: leave it alone (note: what,
 * for status; taken, also on failure). -ENOMEM: not marked. */
_must_check_ int device_set_override(Device *d, char *note);

/* Rescans mark what is still listed. */
void device_set_seen(Device *d, bool seen);
bool device_seen(const Device *d);

/* Classifies a disk that appeared or changed and finds (or makes) its Device
 * by dev_t. NULL for partitions, vanished devices and per-device errors
 * (logged); *error is set only for -ENOMEM. May forget another device that
 * had the number. News of the disk (a uevent, or a rescan after lost
 * events) gives it a fresh retry budget. */
Device *device_refresh(DeviceContext *c, const char *name, int *error);
/* Policies that name other udev properties: every device's read again. */
int device_refresh_properties(DeviceContext *c);
/* The udev properties set names, for a set other than the one in force
 * (a preview's): d keeps only those the set in force names. 0 when those
 * serve (set names no other key), *ret NULL; 1 when they were read, in
 * *ret (NULL: d has none of them); -ENOMEM. */
int device_properties_for(const DeviceContext *c, const Device *d, const PolicySet *set, char ***ret);
/* decide + apply. May forget d (it vanished): out of the table, freed
 * after this dispatch. */
int device_process(DeviceContext *c, Device *d);
/* decide and apply again, writing over what the admin changed (resume,
 * drift with on_drift=reapply). May forget d. */
int device_process_again(DeviceContext *c, Device *d);
/* Every device, by name; processing one never forgets another. */
int device_process_all(DeviceContext *c);
/* Puts back what blkpolicyd changed on d (nothing wanted), in the
 * applier; the values left changed are counted in c->restore_left. */
int device_restore(DeviceContext *c, Device *d);
/* A device's pass is back from the applier. Returns 1 when it was a pass
 * (not a restore) of a device still known: then decisions may have to be
 * taken again (c->redecide) and READY=1 may be due, which is the
 * manager's; 0 otherwise. */
int device_apply_done(DeviceContext *c, struct ApplyJob *j);
/* A remove event: forget d unless its queue is still there (a stale event
 * for a disk that came back under the same number is not this disk's).
 * -ENOMEM: no room to keep it until it is freed; d is as it was. */
_must_check_ int device_removed(DeviceContext *c, Device *d);
/* decide and apply again for a device whose dynamic state flipped. May
 * forget d. Returns -ENOMEM, or what became of the flip's pass: */
enum {
        DEVICE_FLIP_DROPPED,    /* d is gone, or has no state machine any more */
        DEVICE_FLIP_DONE,       /* on the loop, now */
        DEVICE_FLIP_RUNNING,    /* in the applier: done when d's pass is back */
};
int device_flip(DeviceContext *c, Device *d, const DynDecision *dec);
/* The flip's pass is done, at tick and uptime_usec, after ms: into d's
 * ring of flips, which it has from the flip on (nothing without one: the
 * state machine is gone since). */
void device_flip_applied(Device *d, const DynDecision *dec, uint64_t tick, uint64_t uptime_usec, double ms);
/* A device forgotten (its disk is gone) stays allocated, out of the
 * table, until the event that forgot it is dispatched: no caller ever
 * holds a freed device. The manager frees them after each dispatch. */
void devices_free_forgotten(DeviceContext *c);
/* c: the tables its facts and plan are shared in. */
Device *device_free(DeviceContext *c, Device *d);
