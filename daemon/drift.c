/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Drift: what is live in sysfs against what blkpolicyd intends. Another
 * tool or an admin may change a setting behind blkpolicyd's back; by
 * default it is left alone and the device marked overridden (never fight
 * an admin), or with on_drift=reapply put back. */
#include "apply.h"
#include "conflicts-report.h"
#include "device.h"
#include "drift.h"
#include "log.h"
#include "manager.h"
#include "util.h"

/* The next managed setting, from *i on, whose live value differs from
 * the target. Only what blkpolicyd holds: planned (dry run, paused) is no
 * drift. */
static const PlanItem *device_next_drift(Manager *m, Device *d, unsigned *i, char *live, size_t size) {
        const Plan *plan = device_plan(d);

        for (; *i < plan->n_items; (*i)++) {
                const PlanItem *it = &plan->items[*i];

                if (it->result != RESULT_APPLIED && it->result != RESULT_UNCHANGED)
                        continue;
                if (attr_read_current(&m->roots, device_name(d), it->tunable, live, size) < 0)
                        continue;       /* gone or unreadable: the uevent path handles that */
                if (!streq(live, it->target)) {
                        (*i)++;
                        return it;
                }
        }
        return NULL;
}

static cJSON *device_drift_json(Manager *m, Device *d) {
        cJSON *a = cJSON_CreateArray();
        char live[VALUE_MAX];
        const PlanItem *it;

        for (unsigned i = 0; (it = device_next_drift(m, d, &i, live, sizeof(live)));) {
                /* the likely writer of the live value, as the drift log names it */
                _cleanup_free_ char *who = conflicts_report_drift_note(m, d, it->tunable, live);
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "attr", tunables[it->tunable].attr);
                cJSON_AddStringToObject(o, "intended", it->target);
                cJSON_AddStringToObject(o, "live", live);
                if (who)
                        cJSON_AddStringToObject(o, "writer", who);
                else
                        cJSON_AddNullToObject(o, "writer");
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

/* What a write would change (mode=observe, dry run, held): planned, not
 * applied. In observe mode this is what verify must show, never "no
 * drift": the policy is not in force. */
static cJSON *device_pending_json(const Device *d) {
        const Plan *plan = device_plan(d);
        cJSON *a = cJSON_CreateArray();

        for (unsigned i = 0; i < plan->n_items; i++) {
                const PlanItem *it = &plan->items[i];
                cJSON *o;

                if (it->result != RESULT_PLANNED)
                        continue;
                o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "attr", tunables[it->tunable].attr);
                cJSON_AddStringToObject(o, "intended", it->target);
                cJSON_AddStringToObject(o, "live", it->current);
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

int drift_verify_entry(Manager *m, Device *d, cJSON **ret, bool *drifted, bool *pending) {
        cJSON *e, *drift, *planned;

        *ret = NULL;
        *drifted = *pending = false;
        if (!device_plan(d)->managed || !device_plan(d)->policy)
                return 0;
        drift = device_drift_json(m, d);
        planned = device_pending_json(d);
        e = cJSON_CreateObject();
        if (!drift || !planned || !e) {
                cJSON_Delete(drift);
                cJSON_Delete(planned);
                cJSON_Delete(e);
                return -ENOMEM;
        }
        *drifted = cJSON_GetArraySize(drift) > 0;
        *pending = cJSON_GetArraySize(planned) > 0;
        cJSON_AddStringToObject(e, "name", device_name(d));
        cJSON_AddBoolToObject(e, "paused", device_is_paused(m, d));
        cJSON_AddBoolToObject(e, "overridden", device_overridden(d));
        cJSON_AddItemToObject(e, "drift", drift);
        cJSON_AddItemToObject(e, "pending", planned);
        *ret = e;
        return 1;
}

/* Returns 0, or -ENOMEM. May forget d (a reapply of a vanished disk). */
static int device_check_drift(Manager *m, Device *d) {
        _cleanup_free_ char *who = NULL;
        const char *name = device_name(d);
        char live[VALUE_MAX], *note = NULL;
        const PlanItem *it;
        unsigned first = 0;

        if (!device_plan(d)->managed || device_is_held(m, d) || device_pass_pending(d))
                return 0;       /* a pass in flight: what it writes is no drift */
        it = device_next_drift(m, d, &first, live, sizeof(live));
        if (!it)
                return 0;
        /* name the likely writer: the admin fixes that, not blkpolicyd */
        who = conflicts_report_drift_note(m, d, it->tunable, live);
        if (m->config.drift_reapply) {
                log_notice("%s: %s was changed to %s behind blkpolicyd's back%s%s, setting %s again", name,
                           tunables[it->tunable].attr, live, who ? ", likely by " : "", who ?: "", it->target);
                return device_process_again(m, d);
        }
        if (asprintf(&note, "%s changed to %s (blkpolicyd wanted %s)%s%s", tunables[it->tunable].attr, live,
                     it->target, who ? "; likely by " : "", who ?: "") < 0)
                return -ENOMEM;
        if (device_set_override(d, note) < 0)
                return -ENOMEM;
        log_notice("%s: %s; leaving it alone until 'blkpolicyctl resume %s' or new media", name, note, name);
        return 0;
}

int drift_check(Manager *m, unsigned n) {
        DeviceIter i = DEVICE_ITER_AT(m->drift_cursor);
        unsigned checked = 0;
        Device *d;
        int r = 0;

        if (n == 0)
                return 0;
        /* from the cursor on (a reapply may forget the device checked,
         * which the walk allows) */
        while (r >= 0 && device_iter_next(m, &i, &d)) {
                r = device_check_drift(m, d);
                if (++checked >= n)
                        break;
        }
        m->drift_cursor = device_iter_resume_slot(m, &i);
        return r;
}
