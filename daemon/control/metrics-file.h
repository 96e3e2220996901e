/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The metrics textfile on disk, <dir>/blkpolicyd.prom for node_exporter's
 * textfile collector: replaced whole and atomically, and at a stop
 * replaced by the few series that say the daemon is not running and why
 * (blkpolicyd_up 0). No Manager: `blkpolicyd --metrics-stopped`, systemd's
 * ExecStopPost=, writes that after any end of the daemon, a SIGKILL too. */

#include <stdio.h>

#define METRICS_TEXTFILE "blkpolicyd.prom"

/* Writes the text to f; f's errors are the caller's. -ENOMEM only. */
typedef int (*MetricsWriter)(FILE *f, void *userdata);

/* Atomically replaces <dir>/blkpolicyd.prom with what write() writes. */
int metrics_file_replace(const char *dir, MetricsWriter write, void *userdata);
/* Removes <dir>/blkpolicyd.prom (and a temp file of ours); NULL dir:
 * nothing to do. 0, or -errno of the first failure. */
int metrics_file_remove(const char *dir);
/* The file a stopped daemon leaves: blkpolicyd_up 0 and how it ended,
 * result as systemd's $SERVICE_RESULT says it ("success", "signal",
 * "exit-code", "core-dump", "watchdog", ...), code and status as its
 * $EXIT_CODE and $EXIT_STATUS (NULL: not known). */
int metrics_file_write_stopped(const char *dir, const char *result, const char *code, const char *status);
/* blkpolicyd_build_info, in every file written. */
void metrics_write_build_info(FILE *f);
/* A label value, escaped as the exposition format wants. */
void metrics_write_label(FILE *f, const char *value);
