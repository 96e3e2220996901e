/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Drift: what is live in sysfs against what blkpolicyd intends, from one
 * live read (device_view() for verify, device_first_drift() for the
 * sweep). Another tool or an admin may change a setting
 * behind blkpolicyd's back; by default it is left alone and the device
 * marked overridden (never fight an admin), or with on_drift=reapply put
 * back. Only what blkpolicyd holds can drift: planned (observe, dry run,
 * paused) is pending, and a value the kernel did not keep is its own
 * state, never somebody else's change. */
#include "apply.h"
#include "conflicts-report.h"
#include "device.h"
#include "drift.h"
#include "log.h"
#include "util.h"

/* The view's items of one result, as verify lists them. */
static cJSON *view_items_json(DeviceContext *c, Device *d, const PlanItem *items, unsigned n, ItemResult result) {
        cJSON *a = cJSON_CreateArray();

        for (unsigned i = 0; i < n; i++) {
                const PlanItem *it = &items[i];
                cJSON *o;

                if (it->result != result)
                        continue;
                o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "attr", tunables[it->tunable].attr);
                cJSON_AddStringToObject(o, "intended", it->target);
                cJSON_AddStringToObject(o, "live", it->current);
                if (it->source)
                        cJSON_AddStringToObject(o, "source", it->source);
                if (result == RESULT_OVERRIDDEN) {
                        /* the likely writer of the live value, as the drift log names it */
                        _cleanup_free_ char *who = conflicts_report_drift_note(c, d, it->tunable, it->current, NULL);

                        if (who)
                                cJSON_AddStringToObject(o, "writer", who);
                        else
                                cJSON_AddNullToObject(o, "writer");
                }
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

int drift_verify_entry(DeviceContext *c, Device *d, cJSON **ret, VerifyFlags *flags) {
        cJSON *e;
        DeviceView v;

        *ret = NULL;
        *flags = (VerifyFlags) {};
        if (!device_plan(d)->managed || (!device_plan(d)->policy && !device_plan(d)->canary))
                return 0;
        device_view(c, d, &v);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", device_name(d));
        cJSON_AddBoolToObject(e, "paused", device_is_paused(c, d));
        cJSON_AddBoolToObject(e, "overridden", device_overridden(d));
        /* in observe mode this is what verify must show, never "no drift":
         * the policy is not in force */
        cJSON_AddItemToObject(e, "drift", view_items_json(c, d, v.items, v.plan.n_items, RESULT_OVERRIDDEN));
        cJSON_AddItemToObject(e, "pending", view_items_json(c, d, v.items, v.plan.n_items, RESULT_PLANNED));
        cJSON_AddItemToObject(e, "not_kept", view_items_json(c, d, v.items, v.plan.n_items, RESULT_NOT_KEPT));
        /* a canary's are no attention: the host holds what it enforces */
        cJSON_AddItemToObject(e, "canary", view_items_json(c, d, v.canary, v.n_canary, RESULT_PLANNED));
        if (!cJSON_GetObjectItemCaseSensitive(e, "canary")) {
                cJSON_Delete(e);
                return -ENOMEM;
        }
        *flags = (VerifyFlags) { .drifted = v.overridden > 0, .pending = v.pending > v.overridden,
                                 .not_kept = v.not_kept > 0, .canary = v.canary_pending > 0 };
        *ret = e;
        return 1;
}

static cJSON *string_or_null(const char *s) {
        return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *preview_changes_json(const PreviewDiff *diff) {
        cJSON *a = cJSON_CreateArray();

        for (unsigned i = 0; i < diff->n_changes; i++) {
                const PreviewChange *ch = &diff->changes[i];
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "attr", tunables[ch->tunable].attr);
                cJSON_AddItemToObject(o, "live", string_or_null(ch->live.state == LIVE_OK ? ch->live.value : NULL));
                cJSON_AddStringToObject(o, "would_be", ch->would_be);
                cJSON_AddItemToObject(o, "source", string_or_null(ch->source));
                cJSON_AddBoolToObject(o, "put_back", ch->kind == PREVIEW_PUT_BACK);
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

int drift_preview_entry(DeviceContext *c, Device *d, const PolicySet *set, cJSON **ret, PreviewFlags *flags) {
        PreviewDiff diff;
        int read = device_preview(c, d, set, &diff);
        cJSON *e;

        *ret = NULL;
        *flags = (PreviewFlags) {};
        if (read < 0)
                return read;
        if (preview_diff_empty(&diff))
                return 0;
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", device_name(d));
        cJSON_AddBoolToObject(e, "paused", device_is_paused(c, d));
        cJSON_AddBoolToObject(e, "overridden", device_overridden(d));
        /* a pass in flight is not read: its live values are its last round's */
        cJSON_AddBoolToObject(e, "in_flight", !read);
        cJSON_AddBoolToObject(e, "managed", diff.managed_before);
        cJSON_AddBoolToObject(e, "would_be_managed", diff.managed_after);
        cJSON_AddItemToObject(e, "changes", preview_changes_json(&diff));
        if (!cJSON_GetObjectItemCaseSensitive(e, "changes")) {
                cJSON_Delete(e);
                return -ENOMEM;
        }
        *flags = (PreviewFlags) { .changes = diff.n_changes, .managed = !diff.managed_before && diff.managed_after,
                                  .unmanaged = diff.managed_before && !diff.managed_after, .in_flight = !read };
        *ret = e;
        return 1;
}

/* A writer named in reassert_over= or yield_to= (its setting too, if the
 * word names one) decides; else on_drift=. */
static bool writer_listed(char *const *words, ConflictSource source, unsigned tunable) {
        for (char *const *w = words; w && *w; w++)
                if (conflict_writer_match(*w, source, tunable) > 0)
                        return true;
        return false;
}

/* source: the writer the drift is put down to, _CONFLICT_SOURCE_MAX: none. */
static bool drift_reapplies(const DeviceContext *c, unsigned tunable, ConflictSource source) {
        if (source != _CONFLICT_SOURCE_MAX) {
                if (writer_listed(c->config->reassert_over, source, tunable))
                        return true;
                if (writer_listed(c->config->yield_to, source, tunable))
                        return false;
        }
        return c->config->drift_reapply;
}

/* Whether live is what a queue-limits update leaves the setting at: the
 * kernel's default for the queue's limits now (a revalidation: a SCSI
 * rescan, an NVMe rescan, a dm table load, a resize). The kernel sends no
 * event for most (a rescan that keeps the size sends none: block/genhd.c
 * set_capacity_and_notify() sends RESIZE=1 only on a new size), so the
 * sweep is where blkpolicyd learns it. */
static bool drift_is_kernel_default(const DeviceContext *c, const Device *d, const DeviceDrift *it) {
        char def[VALUE_MAX];

        return kernel_default_read(c->roots, device_name(d), it->tunable, c->caps->version, def, sizeof(def)) > 0 &&
               streq(def, it->current);
}

/* Returns 0, or -ENOMEM. May forget d (a reapply of a vanished disk). */
static int device_check_drift(DeviceContext *c, Device *d) {
        _cleanup_free_ char *who = NULL;
        const char *name = device_name(d);
        const char *attr;
        char *note = NULL;
        ConflictSource source;
        DeviceDrift it;

        /* observe: blkpolicyd holds nothing, so nothing can drift from it;
         * a pass in flight: what it writes is no drift */
        if (!device_context_writes(c) || !device_plan(d)->managed || device_is_held(c, d) || device_pass_pending(d))
                return 0;
        if (!device_first_drift(c, d, &it))
                return 0;
        attr = tunables[it.tunable].attr;
        /* the kernel's doing, not someone else's: a pass (no take-over)
         * whose reconcile() tells it again, from a read of its own, and
         * writes the policy's value once; a write that fails is reported
         * there, never a drift again, so nothing loops */
        if (drift_is_kernel_default(c, d, &it)) {
                log_info("%s: %s is at the kernel's default %s (a queue-limits update: a revalidation), "
                         "not someone else's change", name, attr, it.current);
                return device_process(c, d);
        }
        /* name the likely writer: the admin fixes that, not blkpolicyd */
        who = conflicts_report_drift_note(c, d, it.tunable, it.current, &source);
        if (drift_reapplies(c, it.tunable, source)) {
                log_notice("%s: %s was changed to %s behind blkpolicyd's back%s%s, setting %s again", name, attr,
                           it.current, who ? ", likely by " : "", who ?: "", it.target);
                return device_process_again(c, d);
        }
        if (asprintf(&note, "%s changed to %s (blkpolicyd wanted %s)%s%s", attr, it.current, it.target,
                     who ? "; likely by " : "", who ?: "") < 0)
                return -ENOMEM;
        return device_set_override(d, note) < 0 ? -ENOMEM : 0;
}

int drift_check(DeviceContext *c, unsigned n, uint64_t until) {
        DeviceIter i = DEVICE_ITER_AT(c->drift_cursor);
        unsigned checked = 0;
        Device *d;
        int r = 0;

        if (n == 0)
                return 0;
        /* from the cursor on (a reapply may forget the device checked,
         * which the walk allows); one device at least, so that a slice
         * the diskstats read took whole still moves the sweep on */
        while (r >= 0 && device_iter_next(c, &i, &d)) {
                r = device_check_drift(c, d);
                if (++checked >= n || clock_usec(CLOCK_MONOTONIC) >= until)
                        break;
        }
        c->drift_cursor = device_iter_resume_slot(c, &i);
        return r < 0 ? r : (int) checked;
}
