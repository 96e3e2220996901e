/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* drift.c: what is live in sysfs against what blkpolicyd intends. */

#include "manager.h"

/* verify's entry for d, its drift and pending changes, in *ret: 1; 0 (and
 * NULL) when no policy manages d, nothing to verify; -ENOMEM. */
int drift_verify_entry(Manager *m, Device *d, cJSON **ret, bool *drifted, bool *pending);
/* Reads back the managed settings of the next n devices (round robin, so a
 * tick costs a bounded number of file reads whatever the device count). */
int drift_check(Manager *m, unsigned n);
