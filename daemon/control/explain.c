/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a device looks like to the control socket: the report of --once,
 * plus what only a running daemon knows (pause, override, flip history),
 * and "explain": every policy considered and why it matched or not. */
#include "conflicts-report.h"
#include "decide.h"
#include "device.h"
#include "explain.h"
#include "manager.h"
#include "report.h"
#include "util.h"

cJSON *explain_device_report(Manager *m, Device *d) {
        DeviceFacts facts;
        DeviceView view;
        ReportDevice rd = device_report_input(&m->ctx, d, &facts, &view);
        cJSON *o = report_device(&rd);

        cJSON_AddBoolToObject(o, "paused", device_is_paused(&m->ctx, d));
        cJSON_AddBoolToObject(o, "overridden", device_overridden(d));
        if (device_overridden(d))
                cJSON_AddStringToObject(o, "override", device_override_note(d));
        return o;
}

static cJSON *explain_policies(Manager *m, Device *d) {
        DeviceFacts view;
        const DeviceFacts *f = device_facts(d, &view);
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; i < m->policies->n_policies; i++) {
                const Policy *p = m->policies->policies[i];
                const char *why = NULL;
                bool match = decide_policy_matches(p, f, &m->caps, &why);
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "name", p->name);
                cJSON_AddStringToObject(o, "path", p->path);
                cJSON_AddBoolToObject(o, "matched", match);
                cJSON_AddStringToObject(o, "mode", p->observe ? "observe" : "enforce");
                if (why)
                        cJSON_AddStringToObject(o, "failed", why);
                else
                        cJSON_AddNullToObject(o, "failed");
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

static cJSON *explain_history(const Device *d) {
        const DeviceFlips *y = device_flips(d);
        cJSON *a = cJSON_CreateArray();

        for (unsigned k = 0; y && k < y->n_history; k++) {
                const FlipRecord *f = &y->history[(y->history_pos + FLIP_HISTORY - y->n_history + k) % FLIP_HISTORY];
                cJSON *o = cJSON_CreateObject();

                cJSON_AddNumberToObject(o, "tick", (double) f->tick);
                cJSON_AddNumberToObject(o, "uptime_s", f->uptime_s);
                cJSON_AddStringToObject(o, "to", f->to_busy ? "busy" : "base");
                cJSON_AddStringToObject(o, "condition", f->reason);
                cJSON_AddNumberToObject(o, "cost_ms", f->cost_ms);
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

cJSON *explain_device(Manager *m, Device *d) {
        cJSON *o = explain_device_report(m, d), *dyn;

        cJSON_AddItemToObject(o, "policies", explain_policies(m, d));
        cJSON_AddItemToObject(o, "conflicts", conflicts_report_device_json(&m->ctx, d));
        dyn = cJSON_GetObjectItemCaseSensitive(o, "dynamic");
        if (cJSON_IsObject(dyn))
                cJSON_AddItemToObject(dyn, "history", explain_history(d));
        return o;
}
