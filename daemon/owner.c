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
        if (s->last == RESULT_APPLIED || s->last == RESULT_UNCHANGED || s->last == RESULT_OVERRIDDEN ||
            s->last == RESULT_NOT_KEPT)
                return RESULT_OVERRIDDEN;
        return s->last;
}

ItemResult setting_view(const SettingSeen *s) {
        if (s->last == RESULT_UNSUPPORTED || s->live->state != LIVE_OK)
                return s->last;         /* absent (another scheduler's) or unreadable: as the pass saw it */
        if (streq(s->live->value, s->target))
                return in_place(s);
        return away(s);
}
