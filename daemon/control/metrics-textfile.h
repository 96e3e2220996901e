/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* metrics-textfile.c: the metrics textfile of node_exporter's textfile
 * collector, kept by the daemon's ticks (metrics.c makes its text). */

#include "config.h"

typedef struct Manager Manager;
typedef struct MetricsTextfile MetricsTextfile;

/* For m's loop, which is set up, and m's sampler. -ENOMEM only. */
int metrics_textfile_new(Manager *m, MetricsTextfile **ret);
/* The stop: a text in the making is dropped (the file stays; main.c
 * removes it). NULL is fine. */
MetricsTextfile *metrics_textfile_free(MetricsTextfile *t);
/* A reload replaced old: a moved or dropped metrics_textfile_dir moves
 * the file (metrics_move_textfile()). NULL: nothing to do. */
void metrics_textfile_reloaded(MetricsTextfile *t, const Config *old);
