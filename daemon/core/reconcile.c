/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* reconcile: record + wanted + live → the record to save, then the writes.
 * Pure: no I/O, no clock, no allocation but the record's copy. */
#include "kernel-default.h"
#include "reconcile.h"
#include "util.h"

bool tunable_reset_by_switch(unsigned tunable, const char *current) {
        const Tunable *t = &tunables[tunable];

        if (tunable == TUNABLE_NR_REQUESTS)
                return true;
        return t->scheduler && current && streq(t->scheduler, current);
}

/* Measured on 6.18: mq-deadline derives async_depth from nr_requests, so a
 * write of nr_requests resets it (3/4 of the new depth). */
bool tunable_reset_by_nr_requests(unsigned tunable) {
        return streq(tunables[tunable].attr, "iosched/async_depth");
}

/* A write of max_sectors_kb is a queue-limits update, which resets
 * read_ahead_kb (kernel-default.h; measured on 6.18, a rotational loop
 * device: read-ahead 64, then max_sectors_kb 256 -> 512). */
bool tunable_reset_by_max_sectors(unsigned tunable, const unsigned version[3]) {
        return tunable == TUNABLE_READ_AHEAD_KB && max_sectors_write_resets_read_ahead(version);
}

static const char *live_value(const ReconcileInput *in, unsigned t) {
        return in->live[t].state == LIVE_OK ? in->live[t].value : NULL;
}

/* The writes that reset others. */
static const unsigned resetters[] = { TUNABLE_SCHEDULER, TUNABLE_NR_REQUESTS, TUNABLE_MAX_SECTORS_KB };

static bool resets_others(unsigned t) {
        for (size_t i = 0; i < ELEMENTSOF(resetters); i++)
                if (t == resetters[i])
                        return true;
        return false;
}

/* Whether writer's write resets t (the scheduler's: a switch away from
 * the live one). */
static bool resets(const ReconcileInput *in, unsigned writer, unsigned t) {
        switch (writer) {
        case TUNABLE_SCHEDULER:
                return tunable_reset_by_switch(t, live_value(in, TUNABLE_SCHEDULER));
        case TUNABLE_NR_REQUESTS:
                return tunable_reset_by_nr_requests(t);
        case TUNABLE_MAX_SECTORS_KB:
                return tunable_reset_by_max_sectors(t, in->kernel_version);
        default:
                return false;
        }
}

/* Away: blkpolicyd holds it at another value than it found. What it
 * resets waits to be put back until it is back. */
static bool away(const ReconcileInput *in, const DeviceRecord *r, unsigned t) {
        const AttrRecord *a = device_record_get(r, t);
        const char *live = a ? live_value(in, t) : NULL;

        return a && live && !streq(live, a->found);
}

static bool resetters_away(const ReconcileInput *in, const DeviceRecord *r, unsigned t) {
        /* a switch resets nr_requests and a scheduler's own tunables, nothing
         * else: wbt_lat_usec put back is back, whatever the scheduler (kept
         * as reset, any later value would pass for blkpolicyd's, an admin's
         * too, and the stop would write over it) */
        if (away(in, r, TUNABLE_SCHEDULER) && (t == TUNABLE_NR_REQUESTS || tunables[t].scheduler))
                return true;
        if (tunable_reset_by_max_sectors(t, in->kernel_version) && away(in, r, TUNABLE_MAX_SECTORS_KB))
                return true;
        return tunable_reset_by_nr_requests(t) && away(in, r, TUNABLE_NR_REQUESTS);
}

/* Whether a reset ('*') of t in flight landed: with the switch, if one
 * was in flight (a round with a switch writes nothing else), else with
 * the write that resets t (nr_requests', max_sectors_kb'). */
static bool reset_landed(const ReconcileInput *in, unsigned t, const bool pending[], const bool landed[]) {
        if (pending[0])
                return landed[0];
        for (size_t i = 1; i < ELEMENTSOF(resetters); i++)
                if (resets(in, resetters[i], t))
                        return landed[i];
        return false;
}

/* Writes in flight before this pass (a crash, or the round before): what
 * landed is written now. A reset ('*') landed with the write that caused
 * it. */
static int resolve_intents(const ReconcileInput *in, DeviceRecord *r) {
        bool pending[ELEMENTSOF(resetters)], landed[ELEMENTSOF(resetters)];

        for (size_t i = 0; i < ELEMENTSOF(resetters); i++) {
                const AttrRecord *cause = device_record_get(r, resetters[i]);
                const char *cause_live = live_value(in, resetters[i]);

                pending[i] = cause && cause->intent;
                if (pending[i] && !cause_live)
                        return 0;       /* cannot tell what landed: leave every intent for later */
                landed[i] = pending[i] && streq(cause_live, cause->intent);
        }
        for (unsigned i = 0; i < device_record_count(r); i++) {
                AttrRecord *a = &r->attrs->at[i];
                const char *live = live_value(in, a->tunable);
                int k = 0;

                if (!a->intent)
                        continue;
                if (streq(a->intent, WRITTEN_UNKNOWN)) {
                        if (reset_landed(in, a->tunable, pending, landed))
                                k = device_record_written(r, a->tunable, WRITTEN_UNKNOWN);
                } else if (!live && in->live[a->tunable].state == LIVE_UNKNOWN)
                        continue;
                else if (live && streq(live, a->intent))
                        k = device_record_written(r, a->tunable, a->intent);
                if (k < 0 || device_record_intent(r, a->tunable, NULL) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int add_step(Reconciled *out, unsigned tunable, StepKind kind, const char *value) {
        Step *s = &out->steps[out->n_steps++];

        *s = (Step) { .tunable = tunable, .kind = kind };
        (void) strscpy(s->value, sizeof(s->value), value);
        /* saved before the write: after a crash, live equal to it means it landed */
        return device_record_intent(&out->record, tunable, value) < 0 ? -ENOMEM : 0;
}

static int record_found(Reconciled *out, unsigned tunable, const char *value) {
        return device_record_found(&out->record, tunable, value) < 0 ? -ENOMEM : 0;
}

/* What `writer`'s write resets: read before it (found, if not recorded
 * yet) and marked as reset by it. Refuses (-EAGAIN) when one of them
 * cannot be read: its value would be lost. */
static int record_resets(const ReconcileInput *in, Reconciled *out, unsigned writer) {
        for (unsigned t = 1; t < n_tunables; t++) {
                const LiveValue *lv = &in->live[t];

                if (!resets(in, writer, t) || t == writer)
                        continue;
                if (lv->state == LIVE_UNKNOWN)
                        return -EAGAIN;
                if (lv->state == LIVE_OK && record_found(out, t, lv->value) < 0)
                        return -ENOMEM;
                if (device_record_get(&out->record, t) &&
                    device_record_intent(&out->record, t, WRITTEN_UNKNOWN) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* A write that resets others. Returns 0 without a step when one of
 * those cannot be read: nothing is written blind. */
static int write_with_resets(const ReconcileInput *in, Reconciled *out, unsigned t, StepKind kind,
                             const char *value) {
        int r = record_resets(in, out, t);

        if (r == -EAGAIN) {
                out->unreadable[t] = true;
                return 0;
        }
        if (r < 0)
                return r;
        if (t == TUNABLE_SCHEDULER)
                out->switches = true;
        return add_step(out, t, kind, value);
}

static int write_step(const ReconcileInput *in, Reconciled *out, unsigned t, StepKind kind, const char *value) {
        if (in->skip && in->skip[t])
                return 0;
        if (kind == STEP_SET && record_found(out, t, in->live[t].value) < 0)
                return -ENOMEM;
        return resets_others(t) ? write_with_resets(in, out, t, kind, value) : add_step(out, t, kind, value);
}

/* The admin took it over: it and what blkpolicyd's writes to it reset are
 * theirs now. */
static void drop_admins(const ReconcileInput *in, Reconciled *out, unsigned t) {
        (void) device_record_drop(&out->record, t);
        if (!resets_others(t))
                return;
        for (unsigned i = 1; i < n_tunables; i++)
                if (attr_follows(device_record_get(&out->record, i)) &&
                    (t == TUNABLE_SCHEDULER || resets(in, t, i)))
                        (void) device_record_drop(&out->record, i);
}

/* Live is what a limits update left over blkpolicyd's own value: the
 * kernel's default for the queue's limits now, which blkpolicyd did not
 * write. An admin who writes that very value is taken for the kernel
 * (docs/reliability.md, "Revalidation"). */
static bool reset_by_kernel(const ReconcileInput *in, const AttrRecord *a, unsigned t, const char *live) {
        const char *def = in->kernel_default ? in->kernel_default[t] : NULL;

        return def && a && a->written && !attr_follows(a) && streq(live, def) && !streq(live, a->written);
}

static bool seen_at_the_change(const ReconcileInput *in, unsigned t) {
        return !in->media_live ||
               (in->media_live[t].state == LIVE_OK && streq(in->media_live[t].value, in->live[t].value));
}

static int reconcile_wanted(const ReconcileInput *in, Reconciled *out, unsigned t, const char *want) {
        const AttrRecord *a = device_record_get(&out->record, t);
        const char *live = in->live[t].value;

        if (streq(live, want)) {
                /* in place: blkpolicyd's value if it differs from the found one;
                 * if it is the found one, nothing of blkpolicyd's is there */
                if (!a || attr_follows(a))
                        return 0;
                if (streq(want, a->found)) {
                        (void) device_record_drop(&out->record, t);
                        return 0;
                }
                return device_record_written(&out->record, t, want) < 0 ? -ENOMEM : 0;
        }
        if (setting_owner(a, live) == OWNER_ADMIN && in->new_media && seen_at_the_change(in, t))
                drop_admins(in, out, t);    /* theirs, found again below: put back at the end */
        else if (setting_owner(a, live) == OWNER_ADMIN && reset_by_kernel(in, a, t, live))
                out->kernel_reset[t] = true;    /* still blkpolicyd's: written again, found kept */
        else if (setting_owner(a, live) == OWNER_ADMIN && !in->take_over) {
                out->overridden[t] = true;
                return 0;
        }
        return write_step(in, out, t, STEP_SET, want);
}

/* Not wanted (any more): blkpolicyd's own value goes back. */
static int reconcile_unwanted(const ReconcileInput *in, Reconciled *out, unsigned t) {
        const AttrRecord *a = device_record_get(&out->record, t);
        const char *live = in->live[t].value;
        SettingOwner owner = setting_owner(a, live);
        bool waits = t != TUNABLE_SCHEDULER && resetters_away(in, &out->record, t);

        if (!a)
                return 0;
        if (owner == OWNER_ADMIN && reset_by_kernel(in, a, t, live))
                out->kernel_reset[t] = true;    /* the kernel's, not the admin's: the found value goes back */
        else if (owner == OWNER_ADMIN) {
                drop_admins(in, out, t);
                return 0;
        }
        if (streq(live, a->found)) {
                /* back; but what a switch still away will reset again stays
                 * recorded, to be put back after the switch back */
                if (waits)
                        return device_record_written(&out->record, t, WRITTEN_UNKNOWN) < 0 ? -ENOMEM : 0;
                (void) device_record_drop(&out->record, t);
                return 0;
        }
        if (attr_follows(a) && waits)
                return 0;       /* comes back after what reset it */
        return write_step(in, out, t, STEP_RESTORE, a->found);
}

static int reconcile_attr(const ReconcileInput *in, Reconciled *out, unsigned t) {
        const AttrRecord *a = device_record_get(&out->record, t);
        const char *want = in->wanted[t];

        /* a write in flight (this pass's, or one whose outcome cannot be
         * read): judged in the round after it */
        if (in->live[t].state == LIVE_UNKNOWN || (a && a->intent))
                return 0;
        if (in->live[t].state == LIVE_ABSENT) {
                /* another scheduler's tunable: kept while a switch that may
                 * bring its scheduler back is away, forgotten after */
                if (a && !away(in, &out->record, TUNABLE_SCHEDULER))
                        (void) device_record_drop(&out->record, t);
                return 0;
        }
        return want ? reconcile_wanted(in, out, t, want) : reconcile_unwanted(in, out, t);
}

/* The i-th tunable to reconcile: max_sectors_kb before read_ahead_kb, as
 * its write resets read-ahead, which is then set (or put back) after it;
 * tunables[]' order otherwise. */
static unsigned reconcile_order(unsigned i) {
        _Static_assert(TUNABLE_READ_AHEAD_KB < TUNABLE_MAX_SECTORS_KB, "the order below");

        if (i == TUNABLE_READ_AHEAD_KB)
                return TUNABLE_MAX_SECTORS_KB;
        if (i > TUNABLE_READ_AHEAD_KB && i <= TUNABLE_MAX_SECTORS_KB)
                return i - 1;
        return i;
}

static int reconcile_into(const ReconcileInput *in, Reconciled *out) {
        int r;

        *out = (Reconciled) {};
        r = device_record_copy(in->record, &out->record);
        if (r < 0)
                return r;
        /* unread, nothing that depends on the scheduler can be judged;
         * absent (a bio-based queue has none), nothing depends on it */
        if (in->live[TUNABLE_SCHEDULER].state == LIVE_UNKNOWN)
                return 0;
        r = resolve_intents(in, &out->record);
        if (r < 0)
                return r;
        /* the scheduler alone first: a switch resets what comes after it */
        r = reconcile_attr(in, out, TUNABLE_SCHEDULER);
        if (r < 0 || out->switches)
                return r;
        for (unsigned t = 1; t < n_tunables; t++) {
                r = reconcile_attr(in, out, reconcile_order(t));
                if (r < 0)
                        return r;
        }
        return 0;
}

int reconcile(const ReconcileInput *in, Reconciled *out) {
        int r = reconcile_into(in, out);

        if (r < 0)
                device_record_done(&out->record);       /* a failure hands back nothing */
        return r;
}
