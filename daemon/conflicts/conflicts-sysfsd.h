/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sysfsutils' sysfs.conf and sysfs.d (conflicts-sysfsd.c). */

#include "conflict-set.h"

int conflicts_scan_sysfsd(const char *root, ConflictSet *s);
/* One file's text, as if read from path (the fuzzer's entry point). */
int conflicts_parse_sysfsd_text(const char *path, const char *text, ConflictSet *s);
/* A path below /sys, without the /sys/ ("block/sd*\/queue/scheduler",
 * "class/block/vda/queue/nr_requests", "devices/.../block/sda/queue/...")
 * → the disk glob it names and the tunable; -ENOENT when it is not a
 * queue setting blkpolicyd manages, -ENOMEM. */
int conflicts_sysfs_path(const char *rel, char **ret_glob, unsigned *ret_tunable);
