/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* reconcile: the only way anything gets written. Pure: the device's state
 * record, what the policies want and what sysfs holds now, in; the record
 * as it must be saved before any write, and the ordered writes, out.
 * Apply, reload, exclude, flip, drift, stop and --restore all call it; at
 * stop (and for an excluded or unmatched device) nothing is wanted, so it
 * puts back what blkpolicyd owns.
 *
 * First, writes that were in flight (the intents of the record: a crash,
 * or the round before) are resolved against live: what landed is written.
 * Then ownership of an attribute, from the record and the live value:
 *   - no record: the kernel's (blkpolicyd never changed it);
 *   - live equals what blkpolicyd wrote, or was writing: blkpolicyd's;
 *   - live equals the found value and nothing of blkpolicyd's ever landed:
 *     nobody changed it;
 *   - anything else, the found value put back by hand included: the
 *     admin's. Never written over (unless the caller takes over: resume,
 *     on_drift=reapply) and never put back.
 * New media (a new diskseq) makes the admin's value the found one of a new
 * device: recorded, written over, and put back at the end.
 *
 * A revalidation (a SCSI rescan, an NVMe rescan, a dm table load, a
 * virtio-blk resize) ends in a queue-limits update, which puts
 * read_ahead_kb back to the kernel's default (kernel-default.h) behind
 * blkpolicyd's back. Live at exactly that default, over a value of
 * blkpolicyd's that landed, is the kernel's doing, not an admin's: still
 * blkpolicyd's claim, its value written again (or, not wanted, the found
 * value put back). The found value stays what it was: nothing lost first,
 * even when the limits, and with them the default, changed since.
 *
 * Some writes make the kernel reset others: a scheduler switch resets
 * nr_requests and replaces the iosched files; a write of nr_requests
 * resets mq-deadline's async_depth; a write of max_sectors_kb (a limits
 * update, 6.9 on) resets read_ahead_kb, so max_sectors_kb is written, and
 * put back, before read_ahead_kb. Before such a write, what it resets is
 * recorded too (found, if not recorded yet) and marked as reset by it
 * (WRITTEN_UNKNOWN). Those are put back once what reset them is back at
 * its found value, and forgotten with it when the admin takes it over. A
 * value a policy no longer wants goes back at once, and stays recorded
 * while a switch that will reset it again is away. Nothing is written
 * whose resets cannot be read first. A round with a scheduler write ends
 * with it: the caller reads sysfs again and reconciles once more. */

#include <stdbool.h>

#include "owner.h"
#include "plan.h"
#include "state.h"
#include "tunables.h"

typedef enum StepKind {
        STEP_SET,               /* a policy's value */
        STEP_RESTORE,           /* the found value, put back */
} StepKind;

typedef struct Step {
        unsigned tunable;
        StepKind kind;
        char value[VALUE_MAX];
} Step;

typedef struct ReconcileInput {
        const DeviceRecord *record;
        const char *const *wanted;      /* [n_tunables]; NULL: no policy wants it */
        const LiveValue *live;          /* [n_tunables] */
        const bool *skip;               /* [n_tunables] or NULL: written once in this pass already:
                                         * not again (records are still kept up to date) */
        bool take_over;                 /* write over what the admin changed */
        bool new_media;                 /* a new medium is a new device: what the admin set
                                         * becomes the found value, put back at the end */
        const LiveValue *media_live;    /* [n_tunables] or NULL: with new_media, only what still
                                         * holds the value seen when the change came is adopted;
                                         * a later change is the admin's on the new medium */
        const char *const *kernel_default; /* [n_tunables] or NULL: what a queue-limits update (a
                                         * revalidation) leaves each at now (kernel-default.h);
                                         * NULL entries: nothing */
        const unsigned *kernel_version; /* [3] or NULL (not known): whether a write of
                                         * max_sectors_kb resets read_ahead_kb */
} ReconcileInput;

typedef struct Reconciled {
        DeviceRecord record;            /* to save before the first step */
        Step steps[TUNABLES_MAX];
        unsigned n_steps;
        bool overridden[TUNABLES_MAX];  /* wanted, but the admin changed it: left alone */
        bool unreadable[TUNABLES_MAX];  /* not written: what its write resets cannot be read */
        bool kernel_reset[TUNABLES_MAX]; /* the kernel's default over blkpolicyd's value: a
                                         * revalidation's, no override; written again (wanted)
                                         * or the found value put back (not wanted) */
        bool switches;                  /* the last step is a scheduler write: read again, reconcile again */
} Reconciled;

/* Which tunables a switch away from the scheduler `current` resets. */
bool tunable_reset_by_switch(unsigned tunable, const char *current);
/* Which tunables a write of nr_requests resets (mq-deadline's async_depth). */
bool tunable_reset_by_nr_requests(unsigned tunable);
/* Which tunables a write of max_sectors_kb resets on the kernel of
 * version[3] (NULL: not known): read_ahead_kb, 6.9 on. */
bool tunable_reset_by_max_sectors(unsigned tunable, const unsigned version[3]);

/* Fills *out (out->record is a new copy: device_record_done() it).
 * Returns 0 or -ENOMEM, which leaves out->record empty. */
int reconcile(const ReconcileInput *in, Reconciled *out);
