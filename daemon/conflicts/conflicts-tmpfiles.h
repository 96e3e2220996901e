/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* systemd-tmpfiles' w lines below /sys (conflicts-tmpfiles.c). */

#include "conflict-set.h"

int conflicts_scan_tmpfiles(const char *root, ConflictSet *s);
/* One tmpfiles.d file's text, as if read from path (the fuzzer's entry point). */
int conflicts_parse_tmpfiles_text(const char *path, const char *text, ConflictSet *s);
