/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The GCE guest agent and its local SSD script (conflicts-gce.c). */

#include "conflict-set.h"

int conflicts_scan_gce(const char *root, ConflictSet *s);
