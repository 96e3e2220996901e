/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Where the machine is: the kernel's file systems and the root the other
 * writers' files are below. Every reader takes Roots, so fixture trees
 * plug in; what a path below them means is each reader's own. */

#include <stdbool.h>

typedef struct Roots {
        const char *sysfs;      /* default /sys */
        const char *debugfs;    /* default /sys/kernel/debug */
        const char *proc;       /* default /proc */
        const char *root;       /* --root: where /etc, /usr/lib and /run are, for conflicts.c; NULL: /
                                 * on a live system, nothing under a fixture sysfs */
} Roots;

#define ROOTS_DEFAULT ((Roots) { "/sys", "/sys/kernel/debug", "/proc", NULL })

bool roots_are_live(const Roots *r);
/* Where /etc, /usr/lib and /run are: --root, else / on a live system;
 * NULL under a fixture sysfs without --root (this machine's are about
 * other disks). */
const char *roots_root(const Roots *r);
