/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "state-file.h"
#include "sysfs.h"

/* Turns the records of the first format in the state dir into records of
 * today, and removes them; what cannot be read stays for the next start.
 * Returns 0, or -ENOMEM. */
int state_import_v1(const StateDir *d, const Roots *roots);
