/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A kernel elevator= on <proc>/cmdline, which blk-mq ignores
 * (conflicts-cmdline.c). */

#include "conflict-set.h"

int conflicts_scan_cmdline(const char *proc, ConflictSet *s);
