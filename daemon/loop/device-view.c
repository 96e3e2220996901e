/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a view shows of a device: its plan's settings from one live read
 * taken for the view, judged by setting_view() (owner.h). The last pass's
 * results say what it did; only a live read says what holds now, and an
 * admin's write, a put-back or the kernel's rounding happen between. */
#include <sys/sysmacros.h>

#include "apply.h"
#include "decide.h"
#include "device-internal.h"
#include "device.h"
#include "owner.h"
#include "policy-set.h"
#include "preview.h"
#include "util.h"

static void read_live(const DeviceContext *c, const Device *d, unsigned tunable, LiveValue *lv) {
        int k = attr_read_current(c->roots, d->name, tunable, lv->value, sizeof(lv->value));

        lv->state = k == 0 ? LIVE_OK : k == -ENOENT ? LIVE_ABSENT : LIVE_UNKNOWN;
        if (k < 0)
                lv->value[0] = 0;
}

/* What a view makes of d's item it with the live value lv: one judgement
 * for the views and the drift check alike. */
static ItemResult item_seen(const Device *d, bool enforced, const LiveValue *lv, const PlanItem *it) {
        SettingSeen seen = { .last = it->result, .target = it->target, .live = lv,
                             .record = device_record_get(&d->record, it->tunable), .enforced = enforced };

        return setting_view(&seen);
}

static void view_item(DeviceView *v, const Device *d, bool enforced, const LiveValue *lv, PlanItem *it) {
        ItemResult last = it->result;

        it->result = item_seen(d, enforced, lv, it);
        if (lv->state != LIVE_UNKNOWN)
                (void) strscpy(it->current, sizeof(it->current), lv->value);
        /* the error said of the last pass's result, or of what holds now */
        if (it->result == RESULT_OVERRIDDEN)
                (void) snprintf(it->error, sizeof(it->error), "someone else changed it to %s",
                                lv->state == LIVE_OK ? lv->value : "a scheduler without it");
        else if (it->result != last)
                it->error[0] = 0;
        v->pending += it->result == RESULT_PLANNED || it->result == RESULT_OVERRIDDEN;
        v->overridden += it->result == RESULT_OVERRIDDEN;
        v->not_kept += it->result == RESULT_NOT_KEPT;
}

/* A setting a canary drops goes back to what was found, where blkpolicyd
 * wrote it: nothing changes where it did not. */
static bool canary_drop_target(const Device *d, PlanItem *it) {
        const AttrRecord *a = device_record_get(&d->record, it->tunable);

        if (!a || !a->found)
                return false;
        (void) strscpy(it->target, sizeof(it->target), a->found);
        return true;
}

/* The canaries' settings, judged as a look that is never enforced: no
 * record (blkpolicyd never writes them), planned while live differs. The
 * enforced plan to compare with is decided now too: the kept one has a
 * pass's results in it (a fallback scheduler). In flight, unread: planned,
 * as the pass's own items are shown. */
static void view_canaries(const DeviceContext *c, const Device *d, DeviceView *v) {
        DeviceFacts facts;
        DecideInput in = device_decide_input(c, d, &facts);
        PlanBuffer enforced, preview;
        PlanItem all[TUNABLES_MAX];
        const Policy *source;
        unsigned n;

        decide(&in, plan_buffer_init(&enforced));
        n = decide_canaries(&in, &enforced.plan, plan_buffer_init(&preview), all);
        for (unsigned i = 0; i < n; i++) {
                PlanItem *it = &v->canary[v->n_canary];
                LiveValue lv = { .state = LIVE_UNKNOWN };
                SettingSeen seen = { .target = it->target, .live = &lv };

                *it = all[i];
                if (!it->target[0] && !canary_drop_target(d, it))
                        continue;
                v->n_canary++;
                if (!v->in_flight && it->tunable == TUNABLE_SCHEDULER)
                        lv = v->scheduler;
                else if (!v->in_flight)
                        read_live(c, d, it->tunable, &lv);
                seen.last = it->result;
                it->result = setting_view(&seen);
                if (lv.state != LIVE_UNKNOWN)
                        (void) strscpy(it->current, sizeof(it->current), lv.value);
                v->canary_pending += it->result == RESULT_PLANNED;
                /* the canary named is one whose change is listed: the last */
                source = policy_set_find(*c->policies, it->source);
                if (source && source->observe)
                        v->canary_policy = it->source;
        }
}

/* A device with a pass in flight is shown as that pass's last round left
 * it, unread: what it writes is no one else's change, and a read of
 * queue/scheduler or iosched/ waits for the elevator lock a switch holds
 * through its queue freeze (seconds on a hung nbd or iSCSI queue), on
 * the event loop. */
void device_view(const DeviceContext *c, const Device *d, DeviceView *v) {
        const Plan *plan = device_plan(d);
        bool enforced = device_context_writes(c) && !device_is_paused(c, d);

        *v = (DeviceView) { .plan = *plan, .in_flight = device_pass_pending(d) };
        v->plan.items = v->items;
        memcpy(v->items, plan->items, plan->n_items * sizeof(PlanItem));
        for (unsigned i = 0; v->in_flight && i < plan->n_items; i++)
                v->pending += v->items[i].result == RESULT_PLANNED;
        if (v->in_flight) {
                v->scheduler.state = LIVE_UNKNOWN;
                if (plan->managed && plan->canary)
                        view_canaries(c, d, v);
                return;
        }
        read_live(c, d, TUNABLE_SCHEDULER, &v->scheduler);
        if (!plan->managed)
                return;
        if (plan->canary)
                view_canaries(c, d, v);
        for (unsigned i = 0; i < plan->n_items; i++) {
                PlanItem *it = &v->items[i];
                LiveValue lv;

                if (it->tunable == TUNABLE_SCHEDULER)
                        lv = v->scheduler;
                else
                        read_live(c, d, it->tunable, &lv);
                view_item(v, d, enforced, &lv, it);
        }
}

bool device_first_drift(const DeviceContext *c, const Device *d, DeviceDrift *ret) {
        const Plan *plan = device_plan(d);
        bool enforced = device_context_writes(c) && !device_is_paused(c, d);

        if (!plan->managed || device_pass_pending(d))
                return false;
        for (unsigned i = 0; i < plan->n_items; i++) {
                const PlanItem *it = &plan->items[i];
                LiveValue lv;

                read_live(c, d, it->tunable, &lv);
                if (item_seen(d, enforced, &lv, it) != RESULT_OVERRIDDEN)
                        continue;
                /* the live value as device_view() shows it: an unread one
                 * leaves the last known */
                *ret = (DeviceDrift) { .tunable = it->tunable, .target = it->target };
                (void) strscpy(ret->current, sizeof(ret->current), lv.state != LIVE_UNKNOWN ? lv.value : it->current);
                return true;
        }
        return false;
}

/* Live, for the preview: what either plan sets or the record holds, or
 * while a pass is in flight the values its last round left. */
static void preview_live(const DeviceContext *c, const Device *d, const Plan *preview, bool in_flight,
                         LiveValue live[static TUNABLES_MAX]) {
        const Plan *plan = device_plan(d);
        bool want[TUNABLES_MAX] = {};

        for (unsigned i = 0; i < TUNABLES_MAX; i++)
                live[i] = (LiveValue) { .state = LIVE_UNKNOWN };
        if (in_flight) {
                for (unsigned i = 0; i < plan->n_items; i++)
                        if (plan->items[i].current[0]) {
                                live[plan->items[i].tunable].state = LIVE_OK;
                                (void) strscpy(live[plan->items[i].tunable].value, VALUE_MAX, plan->items[i].current);
                        }
                return;
        }
        for (unsigned i = 0; i < plan->n_items; i++)
                want[plan->items[i].tunable] = true;
        for (unsigned i = 0; i < preview->n_items; i++)
                want[preview->items[i].tunable] = true;
        for (unsigned i = 0; i < device_record_count(&d->record); i++)
                want[d->record.attrs->at[i].tunable] = true;
        for (unsigned t = 0; t < n_tunables; t++)
                if (want[t])
                        read_live(c, d, t, &live[t]);
}

int device_preview(const DeviceContext *c, const Device *d, const PolicySet *set, PreviewDiff *ret) {
        _cleanup_strv_free_ char **props = NULL;
        PlanBuffer b;
        Plan *preview = plan_buffer_init(&b);
        LiveValue live[TUNABLES_MAX];
        DeviceFacts view;
        DecideInput in = device_decide_input(c, d, &view);
        bool in_flight = device_pass_pending(d);
        int r;

        /* a property= of the file's that the set in force does not name:
         * d does not keep it, udev's database has it */
        r = device_properties_for(c, d, set, &props);
        if (r < 0)
                return r;
        if (r > 0)
                view.properties = props;
        in.policies = set;
        decide(&in, preview);
        preview_live(c, d, preview, in_flight, live);
        preview_diff(&(PreviewInput) { .current = device_plan(d), .preview = preview, .live = live,
                                       .record = &d->record },
                     ret);
        return !in_flight;
}

/* The facts as classified, but the scheduler in use now, in the list too
 * when it came after the classification (a module loaded since). */
static void view_facts_scheduler(DeviceFacts *f, const LiveValue *scheduler) {
        int k = -1;

        if (scheduler->state != LIVE_OK || !scheduler->value[0])
                return;
        for (unsigned i = 0; i < f->schedulers.n; i++)
                if (streq(scheduler_list_at(&f->schedulers, i), scheduler->value))
                        k = (int) i;
        if (k < 0)
                k = scheduler_list_add(&f->schedulers, scheduler->value);
        if (k >= 0)
                f->schedulers.current = (int8_t) k;
}

ReportDevice device_report_input(const DeviceContext *c, const Device *d, DeviceFacts *facts, DeviceView *v) {
        const DeviceFlips *y = device_flips(d);
        ReportDevice r = { .facts = device_facts(d, facts), .plan = &v->plan,
                           .error = d->extra ? d->extra->error : NULL,
                           .dyn = d->dynamic ? &d->dynamic->state : NULL, .flip_cost_ms = y ? y->cost_ms : 0 };

        device_view(c, d, v);
        r.canary = v->canary;
        r.n_canary = v->n_canary;
        r.canary_policy = v->canary_policy ?: device_plan(d)->canary;
        view_facts_scheduler(facts, &v->scheduler);
        sample_state_signals(&d->sample, &r.signals);
        return r;
}
