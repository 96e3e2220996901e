/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The daemon's side of conflicts.h: the other writers found below the
 * roots, matched against the device table, for status, explain, doctor,
 * metrics, the log and drift. Each call scans afresh (a few dozen small
 * files): what the admin just fixed shows at once, with no reload. */

#include <stdio.h>

#include <cjson/cJSON.h>

#include "conflicts.h"
#include "device-types.h"

/* status: every writer found, with the devices it applies to. */
cJSON *conflicts_report_json(DeviceContext *ctx);
/* explain: the writers that apply to d (or may). */
cJSON *conflicts_report_device_json(DeviceContext *ctx, Device *d);
/* doctor: conflicts, per device, warnings, and "affecting": how many
 * writers set a setting blkpolicyd manages on a managed device. */
cJSON *conflicts_report_doctor(DeviceContext *ctx);
/* metrics: blkpolicyd_conflicts{source=...}, blkpolicyd_conflicting_devices,
 * and with per_device blkpolicyd_device_conflicts{device=...}. -ENOMEM. */
int conflicts_report_metrics(DeviceContext *ctx, FILE *f, bool per_device);
/* At start and reload: one line per writer, with what to do. */
void conflicts_report_log(DeviceContext *ctx);
/* Drift: "udev rule /etc/udev/rules.d/60-io.rules:3 sets queue/scheduler=bfq
 * (KERNEL==\"sd*\")" when a writer found applies to d and writes live; NULL
 * when none is known (or on ENOMEM). Caller frees. ret_source (NULL: not
 * asked): the source of that writer when it runs, as the note names it,
 * else _CONFLICT_SOURCE_MAX. One attribution for both: matching may read
 * sysfs and udev's database, and drift runs in the tick. */
char *conflicts_report_drift_note(DeviceContext *ctx, const Device *d, unsigned tunable, const char *live,
                                  ConflictSource *ret_source);
