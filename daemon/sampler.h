/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sampler.c: one tick, one pass over /proc/diskstats for every device. */

#include "manager.h"

int sampler_start(Manager *m);
/* One tick (the timer's, or a test's): 0, or -ENOMEM. */
int sampler_tick(Manager *m, uint64_t now_usec);
