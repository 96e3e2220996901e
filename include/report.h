/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One JSON shape for --once, the control socket and replay. */

#include <cjson/cJSON.h>

#include "dynamic.h"
#include "facts.h"
#include "plan.h"

typedef struct ReportDevice {
        const DeviceFacts *facts;
        const Plan *plan;
        const char *error;      /* NULL when none */
        const DynState *dyn;    /* NULL: no state machine ran (replay, tests) */
        double flip_cost_ms;    /* time spent applying its flips */
        Signals signals;        /* of the last tick; !valid before the first one */
        const PlanItem *canary; /* what plan->canary would change (decide_canaries()), as seen */
        unsigned n_canary;
        const char *canary_policy;      /* the canary to name: one whose change is listed */
} ReportDevice;

cJSON *report_policy_error(const PolicyError *e);

cJSON *report_device(const ReportDevice *d);
cJSON *report_facts(const DeviceFacts *f);
/* Where f sits in a stack: its role, holders, slaves, dm's and md's
 * facts, NVMe multipath. */
cJSON *report_topology(const DeviceFacts *f);
cJSON *report_classes(ClassSet classes);
cJSON *report_kernel(const KernelCaps *caps);
/* {"kernel": ..., "capabilities": {...}, "devices": [...]}, devices as given. */
cJSON *report_build(const KernelCaps *caps, const ReportDevice *devices, size_t n);
