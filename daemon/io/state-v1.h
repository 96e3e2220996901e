/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "state-file.h"
#include "sysfs.h"

/* Turns the records of the first format in the state dir into records of
 * today, and removes them. The names of those that stay (unreadable now,
 * or not taken over) come back in *pending: nothing may be written to
 * those disks, or their originals would be lost. Returns 0, or -ENOMEM. */
int state_import_v1(const StateDir *d, const Roots *roots, char ***pending);
