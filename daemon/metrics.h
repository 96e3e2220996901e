/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

typedef struct Manager Manager;

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4"

/* Prometheus text exposition format (version 0.0.4), whole to *ret. */
int metrics_build(Manager *m, char **ret);
/* Atomically replaces <dir>/blkpolicyd.prom (node_exporter textfile collector). */
int metrics_write_textfile(Manager *m, const char *dir);
/* Removes <dir>/blkpolicyd.prom (and a temp file of ours) when the daemon
 * stops; NULL dir: nothing to do. 0, or -errno of the first failure. */
int metrics_remove_textfile(const char *dir);
/* A reload moved metrics_textfile_dir from old_dir (NULL: there was
 * none) or dropped it: the file left in old_dir would be served as if
 * this daemon still wrote it, its gauges frozen. Removes it and writes
 * the new one. Failures are logged, as the ticks' writes. */
void metrics_move_textfile(Manager *m, const char *old_dir);
