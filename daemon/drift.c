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

/* The first managed setting whose live value differs from the target. */
static const PlanItem *device_find_drift(Manager *m, Device *d, char *live, size_t size) {
        for (unsigned i = 0; i < d->plan->n_items; i++) {
                const PlanItem *it = &d->plan->items[i];

                if (it->result != RESULT_APPLIED && it->result != RESULT_UNCHANGED)
                        continue;
                if (attr_read_current(&m->roots, d->name, it->tunable, live, size) < 0)
                        continue;       /* gone or unreadable: the uevent path handles that */
                if (!streq(live, it->target))
                        return it;
        }
        return NULL;
}

static cJSON *device_drift_json(Manager *m, Device *d) {
        cJSON *a = cJSON_CreateArray();

        for (unsigned i = 0; i < d->plan->n_items; i++) {
                const PlanItem *it = &d->plan->items[i];
                char live[VALUE_MAX];
                cJSON *o;

                /* only what blkpolicyd holds: planned (dry run, paused) is no drift */
                if (it->result != RESULT_APPLIED && it->result != RESULT_UNCHANGED)
                        continue;
                if (attr_read_current(&m->roots, d->name, it->tunable, live, sizeof(live)) < 0 ||
                    streq(live, it->target))
                        continue;
                o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "attr", tunables[it->tunable].attr);
                cJSON_AddStringToObject(o, "intended", it->target);
                cJSON_AddStringToObject(o, "live", live);
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

/* What a write would change (mode=observe, dry run, held): planned, not
 * applied. In observe mode this is what verify must show, never "no
 * drift": the policy is not in force. */
static cJSON *device_pending_json(const Device *d) {
        cJSON *a = cJSON_CreateArray();

        for (unsigned i = 0; i < d->plan->n_items; i++) {
                const PlanItem *it = &d->plan->items[i];
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

cJSON *drift_verify(Manager *m) {
        _cleanup_free_ Device **sorted = NULL;
        cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "devices");
        int n = device_table_sorted(&m->devices, &sorted), drifted = 0, pending = 0;

        for (int i = 0; i < n; i++) {
                Device *d = sorted[i];
                cJSON *e, *drift, *planned;

                if (!d->plan->managed || !d->plan->policy)
                        continue;
                drift = device_drift_json(m, d);
                planned = device_pending_json(d);
                drifted += cJSON_GetArraySize(drift) > 0;
                pending += cJSON_GetArraySize(planned) > 0;
                e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "name", d->name);
                cJSON_AddBoolToObject(e, "paused", d->paused || m->paused_all);
                cJSON_AddBoolToObject(e, "overridden", device_overridden(d));
                cJSON_AddItemToObject(e, "drift", drift);
                cJSON_AddItemToObject(e, "pending", planned);
                cJSON_AddItemToArray(a, e);
        }
        cJSON_AddStringToObject(o, "mode", manager_writes(m) ? "enforce" : "observe");
        cJSON_AddNumberToObject(o, "drifted", drifted);
        cJSON_AddNumberToObject(o, "pending", pending);
        return o;
}

static void device_check_drift(Manager *m, Device *d) {
        _cleanup_free_ char *who = NULL;
        char live[VALUE_MAX];
        const PlanItem *it;

        if (!d->plan->managed || device_is_held(m, d) || d->retry_source || d->job)
                return;         /* a pass in flight: what it writes is no drift */
        it = device_find_drift(m, d, live, sizeof(live));
        if (!it)
                return;
        /* name the likely writer: the admin fixes that, not blkpolicyd */
        who = conflicts_report_drift_note(m, d, it->tunable, live);
        if (m->config.drift_reapply) {
                log_notice("%s: %s was changed to %s behind blkpolicyd's back%s%s, setting %s again", d->name,
                           tunables[it->tunable].attr, live, who ? ", likely by " : "", who ?: "", it->target);
                device_process_again(m, d);
                return;
        }
        free(d->override_note);
        if (asprintf(&d->override_note, "%s changed to %s (blkpolicyd wanted %s)%s%s",
                     tunables[it->tunable].attr, live, it->target, who ? "; likely by " : "", who ?: "") < 0) {
                d->override_note = NULL;
                log_oom();
                sd_event_exit(m->event, -ENOMEM);
                return;
        }
        log_notice("%s: %s; leaving it alone until 'blkpolicyctl resume %s' or new media", d->name,
                   d->override_note, d->name);
}

void drift_check(Manager *m, unsigned n) {
        DeviceTable *t = &m->devices;
        unsigned checked = 0;

        /* walk buckets from the cursor; a bucket's devices are checked together */
        for (size_t b = 0; b < t->n_buckets && checked < n; b++) {
                size_t k = (m->drift_cursor + b) % t->n_buckets;

                for (Device *d = t->buckets[k], *next; d; d = next) {
                        next = d->hash_next;    /* a reapply may forget d */
                        device_check_drift(m, d);
                        checked++;
                }
                m->drift_cursor = k + 1;
        }
}
