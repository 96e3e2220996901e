/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* drift.c: what is live in sysfs against what blkpolicyd intends. */

#include "manager.h"

/* verify: every managed device's drift and pending changes. */
cJSON *drift_verify(Manager *m);
/* Reads back the managed settings of the next n devices (round robin, so a
 * tick costs a bounded number of file reads whatever the device count). */
int drift_check(Manager *m, unsigned n);
