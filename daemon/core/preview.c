/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* verify --policy's pure part: two plans and one live read → the changes
 * (preview.h). */
#include "preview.h"
#include "util.h"

static bool plan_manages(const Plan *p) {
        return p->managed && p->policy;
}

/* What a plan writes of tunable: an item decide() found unsupported
 * (no scheduler offered, another scheduler's tunable) is never written. */
static const PlanItem *plan_sets(const Plan *p, unsigned tunable) {
        const PlanItem *it = plan_manages(p) ? plan_find(p, tunable) : NULL;

        return it && it->result != RESULT_UNSUPPORTED ? it : NULL;
}

static PreviewChange *change_add(PreviewDiff *d, unsigned tunable, PreviewKind kind, const LiveValue *live,
                                 const char *would_be) {
        PreviewChange *c = &d->changes[d->n_changes++];

        *c = (PreviewChange) { .tunable = tunable, .kind = kind, .live = *live };
        (void) strscpy(c->would_be, sizeof(c->would_be), would_be);
        return c;
}

static bool live_is(const LiveValue *lv, const char *value) {
        return lv->state == LIVE_OK && streq(lv->value, value);
}

static void diff_set(const PreviewInput *in, PreviewDiff *d, const PlanItem *it) {
        const PlanItem *now = plan_sets(in->current, it->tunable);
        const LiveValue *lv = &in->live[it->tunable];

        if ((now && streq(now->target, it->target)) || live_is(lv, it->target))
                return;
        change_add(d, it->tunable, PREVIEW_SET, lv, it->target)->source = it->source;
}

/* A put-back, as reconcile makes it: what blkpolicyd's write holds goes
 * back to its found value; what a switch reset follows its scheduler. */
static bool diff_put_back(const PreviewInput *in, PreviewDiff *d, const AttrRecord *a, bool scheduler_back) {
        const LiveValue *lv = &in->live[a->tunable];

        if (plan_sets(in->preview, a->tunable))
                return false;
        if (attr_follows(a) ? !scheduler_back
                            : !plan_sets(in->current, a->tunable) ||
                                      setting_owner(a, lv->state == LIVE_OK ? lv->value : NULL) != OWNER_BLKPOLICYD)
                return false;
        if (live_is(lv, a->found))
                return false;
        change_add(d, a->tunable, PREVIEW_PUT_BACK, lv, a->found);
        return true;
}

/* The scheduler the device runs once the preview's writes are done: an
 * iosched tunable of another one is gone with the switch, not put back. */
static const char *scheduler_after(const PreviewInput *in, const AttrRecord *back) {
        const PlanItem *it = plan_sets(in->preview, TUNABLE_SCHEDULER);
        const LiveValue *lv = &in->live[TUNABLE_SCHEDULER];

        if (it)
                return it->target;
        if (back)
                return back->found;
        return lv->state == LIVE_OK ? lv->value : "";
}

void preview_diff(const PreviewInput *in, PreviewDiff *ret) {
        const AttrRecords *attrs = in->record ? in->record->attrs : NULL;
        const AttrRecord *sched = in->record ? device_record_get(in->record, TUNABLE_SCHEDULER) : NULL;
        const char *after;
        bool back;

        *ret = (PreviewDiff) { .managed_before = plan_manages(in->current), .managed_after = plan_manages(in->preview) };
        for (unsigned i = 0; ret->managed_after && i < in->preview->n_items; i++)
                if (in->preview->items[i].result != RESULT_UNSUPPORTED)
                        diff_set(in, ret, &in->preview->items[i]);
        /* the scheduler first, as reconcile puts it back: what its switch
         * reset follows it */
        back = sched && diff_put_back(in, ret, sched, false);
        after = scheduler_after(in, back ? sched : NULL);
        for (unsigned i = 0; attrs && i < attrs->n; i++) {
                const AttrRecord *a = &attrs->at[i];
                const char *owner = tunables[a->tunable].scheduler;

                if (a->tunable != TUNABLE_SCHEDULER && (!owner || streq(owner, after)))
                        (void) diff_put_back(in, ret, a, back);
        }
}

bool preview_diff_empty(const PreviewDiff *d) {
        return d->n_changes == 0 && d->managed_before == d->managed_after;
}
