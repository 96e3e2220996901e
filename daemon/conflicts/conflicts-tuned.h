/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* tuned: the active profile and what it includes (conflicts-tuned.c). */

#include "conflict-set.h"

int conflicts_scan_tuned(const char *root, ConflictSet *s);
