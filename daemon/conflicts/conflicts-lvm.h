/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* LVM's read-ahead from lvm.conf and lvmlocal.conf (conflicts-lvm.c). */

#include "conflict-set.h"

int conflicts_scan_lvm(const char *root, ConflictSet *s);
/* One lvm.conf's text, as if read from path, its activation/readahead (or
 * the default) added as one conflict (the fuzzer's entry point). */
int conflicts_parse_lvm_text(const char *path, const char *text, ConflictSet *s);
