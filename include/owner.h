/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Who owns one setting of one device, and what a view of it shows. Pure:
 * the record, the policy's target and one live read in, a verdict out.
 * reconcile.c decides its writes by setting_owner(); every view (device,
 * devices, explain, verify, the metrics) and the drift check show
 * setting_view() of a live read taken for that view, so what they say is
 * what sysfs holds now, never what the last pass saw.
 *
 * The owners and their transitions (docs/reliability.md, "Owners"):
 *
 *   KERNEL      no record: blkpolicyd never changed it
 *     -> BLKPOLICYD   a pass records found, then writes (enforce)
 *   NOBODY      recorded, nothing of blkpolicyd's ever landed, unchanged
 *   BLKPOLICYD  live is what blkpolicyd wrote (or the write in flight)
 *     -> KERNEL       its put-back (unwanted, reload to observe, stop,
 *                     restore): the record goes with it; never an override
 *     -> ADMIN        live changed behind it
 *   ADMIN       live is someone else's: never written over, never put back
 *     -> BLKPOLICYD   only by resume (take over) or on_drift=reapply
 *     -> KERNEL       the claim dropped: reload to observe, no longer wanted
 *
 * PENDING (observe, dry run, paused) is no owner: blkpolicyd wants the
 * value and writes nothing, so it claims nothing either; a view shows it
 * as "planned". A value written that the kernel did not keep (it rounds
 * iosched times to jiffies: read_expire = 1 reads back 4) is blkpolicyd's
 * all the same (its write left it, its found value goes back at the
 * end), and shown as a state of its own, "not-kept". */

#include <stdbool.h>

#include "plan.h"
#include "state.h"

typedef enum LiveState {
        LIVE_ABSENT,            /* no such attribute (now): unsupported, or another scheduler's */
        LIVE_OK,
        LIVE_UNKNOWN,           /* could not be read: touch nothing that depends on it */
} LiveState;

typedef struct LiveValue {
        LiveState state;
        char value[VALUE_MAX];
} LiveValue;

typedef enum SettingOwner {
        OWNER_KERNEL,           /* no record */
        OWNER_NOBODY,           /* recorded, nothing of blkpolicyd's ever landed, unchanged */
        OWNER_BLKPOLICYD,
        OWNER_ADMIN,
} SettingOwner;

/* "written" of an attribute a write of blkpolicyd's reset: it follows
 * what reset it (state.h's WRITTEN_UNKNOWN). */
bool attr_follows(const AttrRecord *a);

/* Who owns an attribute whose live value is live (NULL: unreadable). A
 * value being written (the intent) counts as blkpolicyd's: after a crash,
 * live may be either. Live back at the found value counts as nobody's
 * change only if nothing of blkpolicyd's ever landed there; after that it
 * is the admin putting it back by hand. */
SettingOwner setting_owner(const AttrRecord *a, const char *live);

typedef struct SettingSeen {
        ItemResult last;        /* what the last pass made of it */
        const char *target;     /* the policy's value */
        const LiveValue *live;  /* read for this view */
        const AttrRecord *record; /* NULL: blkpolicyd never changed it */
        bool enforced;          /* enforce mode, neither paused nor a dry run */
} SettingSeen;

/* What a view shows of a setting now: "unchanged" (in place, nothing
 * written for it by the last pass), "applied" (the last pass's write, and
 * it still holds), "planned" (a write would
 * change it: observe, paused, or a pass still to come), "overridden"
 * (someone else changed it after blkpolicyd held it), "not-kept" (written,
 * the kernel kept another value); otherwise what the last pass said. */
ItemResult setting_view(const SettingSeen *s);
