/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A preview of one policy file (verify --policy): what a device's plan
 * decided from the set with that file would change, against its plan in
 * force and what sysfs holds now. Pure (preview.c): two plans, the live
 * values and the device's record in, the changes out; nothing read,
 * nothing written. */

#include <stdbool.h>

#include "owner.h"
#include "plan.h"
#include "state.h"

typedef enum PreviewKind {
        PREVIEW_SET,            /* the new set's value, where live holds another */
        PREVIEW_PUT_BACK,       /* set now, no longer: the record's found value goes back */
} PreviewKind;

typedef struct PreviewChange {
        unsigned tunable;
        PreviewKind kind;
        LiveValue live;
        char would_be[VALUE_MAX];
        const char *source;     /* the new plan's file; NULL for a put-back */
} PreviewChange;

typedef struct PreviewInput {
        const Plan *current;            /* the device's, in force */
        const Plan *preview;            /* decided from the set with the file */
        const LiveValue *live;          /* [n_tunables]: read for the preview */
        const DeviceRecord *record;     /* the device's: what blkpolicyd found and wrote */
} PreviewInput;

typedef struct PreviewDiff {
        PreviewChange changes[TUNABLES_MAX];
        unsigned n_changes;
        bool managed_before, managed_after;     /* a policy matches it */
} PreviewDiff;

/* Only what differs: a setting both plans set alike is no change of the
 * file's, whatever holds live (that is verify's drift or pending); one
 * the new plan sets to what holds is no write. A setting the new plan no
 * longer sets goes back only where blkpolicyd's write holds it (an
 * admin's value is never put back), and with it what its scheduler
 * switch reset. */
void preview_diff(const PreviewInput *in, PreviewDiff *ret);
/* Whether the device's preview says anything: a change, or a device
 * managed or unmanaged by it. */
bool preview_diff_empty(const PreviewDiff *d);
