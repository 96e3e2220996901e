/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One JSON shape for --once, the control socket and replay. */

#include <cjson/cJSON.h>

#include "facts.h"
#include "plan.h"

typedef struct ReportDevice {
        const DeviceFacts *facts;
        const Plan *plan;
        const char *error;      /* NULL when none */
} ReportDevice;

cJSON *report_device(const ReportDevice *d);
cJSON *report_kernel(const KernelCaps *caps);
/* {"kernel": ..., "capabilities": {...}, "devices": [...]}, devices as given. */
cJSON *report_build(const KernelCaps *caps, const ReportDevice *devices, size_t n);
