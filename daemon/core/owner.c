/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* owner: who owns a setting, and what a view shows of it. Pure. */
#include "owner.h"
#include "util.h"

bool attr_follows(const AttrRecord *a) {
        return a && streq_ptr(a->written, WRITTEN_UNKNOWN);
}

SettingOwner setting_owner(const AttrRecord *a, const char *live) {
        if (!a)
                return OWNER_KERNEL;
        if (attr_follows(a) || streq_ptr(live, a->written) || (a->intent && streq_ptr(live, a->intent)))
                return OWNER_BLKPOLICYD;
        if (!a->written && streq_ptr(live, a->found))
                return OWNER_NOBODY;
        return OWNER_ADMIN;
}

/* In force after the last pass: a change from it since is someone else's
 * (an iosched tunable gone with its scheduler too). */
static bool was_in_force(ItemResult last) {
        return last == RESULT_APPLIED || last == RESULT_UNCHANGED || last == RESULT_NOT_KEPT ||
               last == RESULT_OVERRIDDEN;
}

/* Live at the target: "applied" while the last pass's write is what
 * holds, else "unchanged" (a pass that found it in place wrote nothing,
 * and a view says what that pass did, as --once reports it). */
static ItemResult in_place(const SettingSeen *s) {
        return s->last == RESULT_APPLIED ? RESULT_APPLIED : RESULT_UNCHANGED;
}

/* Live elsewhere: whose doing. */
static ItemResult away(const SettingSeen *s) {
        const char *live = s->live->value;

        /* the value its write left, not the one it wrote: the kernel's rounding */
        if (s->last == RESULT_NOT_KEPT && setting_owner(s->record, live) == OWNER_BLKPOLICYD)
                return RESULT_NOT_KEPT;
        if (!s->enforced)
                return RESULT_PLANNED;
        /* in force after the last pass, and no longer: someone else's change */
        if (was_in_force(s->last))
                return RESULT_OVERRIDDEN;
        return s->last;
}

ItemResult setting_view(const SettingSeen *s) {
        /* gone: another scheduler's tunable since someone switched away */
        if (s->live->state == LIVE_ABSENT && was_in_force(s->last))
                return s->enforced ? RESULT_OVERRIDDEN : RESULT_PLANNED;
        if (s->last == RESULT_UNSUPPORTED || s->live->state != LIVE_OK)
                return s->last;         /* absent (waits for its scheduler) or unreadable: as the pass saw it */
        if (streq(s->live->value, s->target))
                return in_place(s);
        return away(s);
}
