/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdio.h>

typedef struct Manager Manager;
typedef struct MetricsBuild MetricsBuild;

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4"

/* A metrics text in the making: every setting shown is read live, which
 * at 10,000 disks is some 400 ms of reads, so they are made a slice per
 * dispatch (metrics_build_step() until it returns 0), and the text from
 * them (metrics_build_write()). Disks gone meanwhile are left out, disks
 * added come in the next text. -ENOMEM only. */
int metrics_build_new(Manager *m, MetricsBuild **ret);
/* Reads the next slice of devices: 1 while more are left, 0 when done. */
int metrics_build_step(MetricsBuild *b, Manager *m);
int metrics_build_write(MetricsBuild *b, Manager *m, FILE *f);
MetricsBuild *metrics_build_free(MetricsBuild *b);
/* Prometheus text exposition format (version 0.0.4), whole to *ret, all
 * in one go (tests, and --once-like callers without a loop). */
int metrics_build(Manager *m, char **ret);
/* Atomically replaces <dir>/blkpolicyd.prom (node_exporter textfile
 * collector) with the text of b, whose reads are done. */
int metrics_write_textfile(Manager *m, MetricsBuild *b, const char *dir);
/* A reload moved metrics_textfile_dir from old_dir (NULL: there was
 * none) or dropped it: the file left in old_dir would be served as if
 * this daemon still wrote it, its gauges frozen. Removes it and writes
 * the new one. Failures are logged, as the ticks' writes. */
void metrics_move_textfile(Manager *m, const char *old_dir);
