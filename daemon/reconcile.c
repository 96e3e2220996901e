/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* reconcile: record + wanted + live → the record to save, then the writes.
 * Pure: no I/O, no clock, no allocation but the record's copy. */
#include "reconcile.h"
#include "util.h"

typedef enum Owner {
        OWNER_KERNEL,           /* no record */
        OWNER_NOBODY,           /* recorded, but nothing was written and nothing changed */
        OWNER_BLKPOLICYD,
        OWNER_ADMIN,
} Owner;

bool tunable_reset_by_switch(unsigned tunable, const char *current) {
        const Tunable *t = &tunables[tunable];

        if (streq(t->attr, "nr_requests"))
                return true;
        return t->scheduler && current && streq(t->scheduler, current);
}

static bool follows_scheduler(const AttrRecord *a) {
        return a && streq_ptr(a->written, WRITTEN_UNKNOWN);
}

/* Live equal to the found value is nobody's change: also the case of a
 * crash after the record was saved and before the write landed. */
static Owner attr_owner(const AttrRecord *a, const char *live) {
        if (!a)
                return OWNER_KERNEL;
        if (follows_scheduler(a) || streq_ptr(live, a->written))
                return OWNER_BLKPOLICYD;
        return streq(live, a->found) ? OWNER_NOBODY : OWNER_ADMIN;
}

static int add_step(Reconciled *out, unsigned tunable, StepKind kind, const char *value) {
        Step *s = &out->steps[out->n_steps++];

        *s = (Step) { .tunable = tunable, .kind = kind };
        (void) strscpy(s->value, sizeof(s->value), value);
        /* the intent goes into the record before the write: after a crash,
         * a live value equal to it says the write landed and is ours */
        return device_record_written(&out->record, tunable, value) < 0 ? -ENOMEM : 0;
}

static int record_found(Reconciled *out, unsigned tunable, const char *value) {
        return device_record_found(&out->record, tunable, value) < 0 ? -ENOMEM : 0;
}

/* The admin took the scheduler: what followed it is theirs too. */
static void drop_followers(Reconciled *out) {
        for (unsigned t = 0; t < n_tunables; t++)
                if (follows_scheduler(device_record_get(&out->record, t)))
                        (void) device_record_drop(&out->record, t);
}

static int switch_scheduler(const ReconcileInput *in, Reconciled *out, StepKind kind, const char *value) {
        const char *current = in->live[TUNABLE_SCHEDULER].value;

        if (kind == STEP_SET && record_found(out, TUNABLE_SCHEDULER, current) < 0)
                return -ENOMEM;
        for (unsigned t = 1; t < n_tunables; t++) {
                const LiveValue *lv = &in->live[t];

                if (!tunable_reset_by_switch(t, current))
                        continue;
                /* read before the switch that resets it, or it is lost */
                if (kind == STEP_SET && lv->state == LIVE_OK && record_found(out, t, lv->value) < 0)
                        return -ENOMEM;
                if (device_record_get(&out->record, t) &&
                    device_record_written(&out->record, t, WRITTEN_UNKNOWN) < 0)
                        return -ENOMEM;
        }
        out->switches = true;
        return add_step(out, TUNABLE_SCHEDULER, kind, value);
}

static bool skipped(const ReconcileInput *in, unsigned t) {
        return in->skip && in->skip[t];
}

static int reconcile_scheduler(const ReconcileInput *in, Reconciled *out) {
        const char *live = in->live[TUNABLE_SCHEDULER].value, *want = in->wanted[TUNABLE_SCHEDULER];
        const AttrRecord *a = device_record_get(&out->record, TUNABLE_SCHEDULER);
        Owner owner = attr_owner(a, live);

        if (want) {
                if (streq(live, want))
                        return a && device_record_written(&out->record, TUNABLE_SCHEDULER, want) < 0 ? -ENOMEM : 0;
                if (owner == OWNER_ADMIN && !in->take_over) {
                        out->overridden[TUNABLE_SCHEDULER] = true;
                        return 0;
                }
                return skipped(in, TUNABLE_SCHEDULER) ? 0 : switch_scheduler(in, out, STEP_SET, want);
        }
        if (!a)
                return 0;
        if (owner == OWNER_ADMIN) {
                (void) device_record_drop(&out->record, TUNABLE_SCHEDULER);
                drop_followers(out);
                return 0;
        }
        if (streq(live, a->found)) {
                /* back: what followed it is put back in this same pass */
                (void) device_record_drop(&out->record, TUNABLE_SCHEDULER);
                return 0;
        }
        return skipped(in, TUNABLE_SCHEDULER) ? 0 : switch_scheduler(in, out, STEP_RESTORE, a->found);
}

static int reconcile_attr(const ReconcileInput *in, Reconciled *out, unsigned t) {
        const AttrRecord *a = device_record_get(&out->record, t);
        const bool scheduler_held = device_record_get(&out->record, TUNABLE_SCHEDULER);
        const LiveValue *lv = &in->live[t];
        const char *want = in->wanted[t];
        Owner owner;

        if (lv->state == LIVE_UNKNOWN)
                return 0;
        if (lv->state == LIVE_ABSENT) {
                /* another scheduler's tunable: kept while blkpolicyd holds the
                 * scheduler that may bring it back, forgotten after */
                if (a && !scheduler_held)
                        (void) device_record_drop(&out->record, t);
                return 0;
        }
        owner = attr_owner(a, lv->value);
        if (want) {
                if (streq(lv->value, want))
                        return a && device_record_written(&out->record, t, want) < 0 ? -ENOMEM : 0;
                if (owner == OWNER_ADMIN && !in->take_over) {
                        out->overridden[t] = true;
                        return 0;
                }
                if (skipped(in, t))
                        return 0;
                if (record_found(out, t, lv->value) < 0)
                        return -ENOMEM;
                return add_step(out, t, STEP_SET, want);
        }
        if (!a || (follows_scheduler(a) && scheduler_held))
                return 0;       /* the kernel's; or it comes back with the scheduler */
        if (owner == OWNER_ADMIN || streq(lv->value, a->found)) {
                (void) device_record_drop(&out->record, t);
                return 0;
        }
        return skipped(in, t) ? 0 : add_step(out, t, STEP_RESTORE, a->found);
}

int reconcile(const ReconcileInput *in, Reconciled *out) {
        int r;

        *out = (Reconciled) {};
        r = device_record_copy(in->record, &out->record);
        if (r < 0)
                return r;
        /* without the scheduler nothing that depends on it can be judged */
        if (in->live[TUNABLE_SCHEDULER].state != LIVE_OK)
                return 0;
        r = reconcile_scheduler(in, out);
        if (r < 0 || out->switches)
                return r;
        for (unsigned t = 1; t < n_tunables; t++) {
                r = reconcile_attr(in, out, t);
                if (r < 0)
                        return r;
        }
        return 0;
}
