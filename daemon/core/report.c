/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>

#include "report.h"
#include "util.h"

/* cJSON returns NULL on allocation failure and its Add* functions accept
 * NULL, so building goes on and one check at the end suffices. */

static cJSON *add_string_or_null(cJSON *o, const char *key, const char *s) {
        return s && *s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key);
}

cJSON *report_classes(ClassSet classes) {
        cJSON *a = cJSON_CreateArray();

        for (int c = 0; c < _CLASS_MAX; c++)
                if (classes & CLASS_BIT(c))
                        cJSON_AddItemToArray(a, cJSON_CreateString(class_to_string(c)));
        return a;
}

cJSON *report_facts(const DeviceFacts *f) {
        cJSON *o = cJSON_CreateObject(), *s;
        char dev[32];

        snprintf(dev, sizeof(dev), "%u:%u", f->major, f->minor);
        cJSON_AddStringToObject(o, "dev", dev);
        cJSON_AddNumberToObject(o, "diskseq", (double) f->diskseq);
        add_string_or_null(o, "driver", f->driver);
        add_string_or_null(o, "subsystem", f->subsystem);
        add_string_or_null(o, "model", f->model);
        cJSON_AddNumberToObject(o, "hw_queues", f->hw_queues);
        cJSON_AddNumberToObject(o, "poll_queues", f->poll_queues);
        cJSON_AddNumberToObject(o, "nr_requests", f->nr_requests);
        cJSON_AddBoolToObject(o, "rotational", f->rotational);
        cJSON_AddBoolToObject(o, "hidden", f->hidden);
        cJSON_AddStringToObject(o, "zoned", zoned_to_string(f->zoned));
        s = cJSON_AddArrayToObject(o, "schedulers");
        for (unsigned i = 0; i < f->schedulers.n; i++)
                cJSON_AddItemToArray(s, cJSON_CreateString(scheduler_list_at(&f->schedulers, i)));
        add_string_or_null(o, "scheduler", device_facts_scheduler(f));
        return o;
}

static cJSON *report_names(char *const *l) {
        cJSON *a = cJSON_CreateArray();

        for (char *const *n = l; n && *n; n++)
                cJSON_AddItemToArray(a, cJSON_CreateString(*n));
        return a;
}

/* dm's and md's own, null on other disks */
static cJSON *report_dm(const DeviceTopology *t, const DeviceStack *s) {
        cJSON *o;

        if (!s || (!s->dm_name && !s->dm_uuid))
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        add_string_or_null(o, "name", s->dm_name);
        add_string_or_null(o, "uuid", s->dm_uuid);
        add_string_or_null(o, "uuid_prefix", t->dm_uuid_prefix);
        return o;
}

static cJSON *report_md(const DeviceTopology *t) {
        cJSON *o;

        if (!t->md_level[0] && t->md_raid_disks == 0)
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        add_string_or_null(o, "level", t->md_level);
        cJSON_AddNumberToObject(o, "raid_disks", t->md_raid_disks);
        return o;
}

cJSON *report_topology(const DeviceFacts *f) {
        const DeviceTopology *t = &f->topology;
        const DeviceStack *s = f->stack;
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "stack", stack_role_to_string(device_topology_role(t)));
        cJSON_AddItemToObject(o, "holders", report_names(s ? s->holders : NULL));
        cJSON_AddItemToObject(o, "slaves", report_names(s ? s->slaves : NULL));
        cJSON_AddItemToObject(o, "dm", report_dm(t, s));
        cJSON_AddItemToObject(o, "md", report_md(t));
        cJSON_AddStringToObject(o, "nvme_multipath", nvme_multipath_to_string(t->nvme_multipath));
        cJSON_AddItemToObject(o, "nvme_paths", report_names(s ? s->nvme_paths : NULL));
        return o;
}

static cJSON *report_items(const PlanItem *items, unsigned n) {
        cJSON *o = cJSON_CreateObject();

        for (unsigned i = 0; i < n; i++) {
                const PlanItem *item = &items[i];
                cJSON *s = cJSON_AddObjectToObject(o, tunables[item->tunable].attr);

                add_string_or_null(s, "current", item->current);
                cJSON_AddStringToObject(s, "target", item->target);
                cJSON_AddStringToObject(s, "result", item_result_to_string(item->result));
                add_string_or_null(s, "source", item->source);
                add_string_or_null(s, "error", item->error);
        }
        return o;
}

/* null when no canary matches; its settings are only what it would change */
static cJSON *report_canary(const ReportDevice *d) {
        cJSON *o;

        if (!d->plan->canary)
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "policy", d->canary_policy ?: d->plan->canary);
        cJSON_AddItemToObject(o, "settings", report_items(d->canary, d->n_canary));
        return o;
}

static cJSON *report_signals(const Signals *s) {
        cJSON *o = cJSON_CreateObject();

        for (int i = 0; i < _SIGNAL_MAX; i++) {
                double v = signals_get(s, (SignalId) i);

                if (!signal_known(v))   /* unknown, not 0: a tick without I/O has no mix */
                        cJSON_AddNullToObject(o, signal_to_string(i));
                else    /* two decimals: enough to read, stable in golden files */
                        cJSON_AddNumberToObject(o, signal_to_string(i), (double) (long long) (v * 100 + 0.5) / 100);
        }
        return o;
}

static cJSON *report_dynamic(const ReportDevice *d) {
        cJSON *o;

        if (!d->plan->managed || !d->plan->dynamic)
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "policy", d->plan->dynamic_source);
        cJSON_AddStringToObject(o, "state", d->plan->busy ? "busy" : "base");
        cJSON_AddNumberToObject(o, "flips", d->dyn ? dyn_state_flips(d->dyn) : 0);
        cJSON_AddNumberToObject(o, "flip_cost_ms", (double) (long long) (d->flip_cost_ms * 100) / 100);
        cJSON_AddNumberToObject(o, "capped", d->dyn ? dyn_state_capped(d->dyn) : 0);
        return o;
}

cJSON *report_device(const ReportDevice *d) {
        cJSON *o = cJSON_CreateObject(), *m;

        cJSON_AddStringToObject(o, "name", d->facts->name);
        cJSON_AddItemToObject(o, "classes", report_classes(d->facts->classes));
        add_string_or_null(o, "policy", d->plan->policy);
        m = cJSON_AddArrayToObject(o, "matched");
        for (unsigned i = 0; i < d->plan->n_matched; i++)
                cJSON_AddItemToArray(m, cJSON_CreateString(d->plan->matched[i]));
        cJSON_AddBoolToObject(o, "managed", d->plan->managed);
        add_string_or_null(o, "reason", d->plan->reason);
        cJSON_AddItemToObject(o, "facts", report_facts(d->facts));
        cJSON_AddItemToObject(o, "topology", report_topology(d->facts));
        cJSON_AddItemToObject(o, "settings", report_items(d->plan->items, d->plan->n_items));
        cJSON_AddItemToObject(o, "canary", report_canary(d));
        cJSON_AddItemToObject(o, "dynamic", report_dynamic(d));
        cJSON_AddItemToObject(o, "signals", d->signals.valid ? report_signals(&d->signals) : cJSON_CreateNull());
        add_string_or_null(o, "error", d->error);
        return o;
}

cJSON *report_kernel(const KernelCaps *caps) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "release", caps->release);
        cJSON_AddStringToObject(o, "dispatch_direct", tristate_to_string(caps->dispatch_direct));
        return o;
}

cJSON *report_build(const KernelCaps *caps, const ReportDevice *devices, size_t n) {
        cJSON *o = cJSON_CreateObject(), *a;

        cJSON_AddStringToObject(o, "kernel", caps->release);
        cJSON_AddItemToObject(o, "capabilities", report_kernel(caps));
        a = cJSON_AddArrayToObject(o, "devices");
        for (size_t i = 0; i < n; i++)
                cJSON_AddItemToArray(a, report_device(&devices[i]));
        return o;
}

cJSON *report_policy_error(const PolicyError *e) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "path", e->path);
        cJSON_AddNumberToObject(o, "line", e->line);
        cJSON_AddStringToObject(o, "message", e->message);
        return o;
}
