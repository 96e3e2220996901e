/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sampler.c: one tick, one pass over /proc/diskstats for every device. */

#include "manager.h"

int sampler_start(Manager *m);
/* The tick's sources and a read in progress, gone. */
void sampler_stop(Manager *m);
