/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Conflicts: the other writers of the settings blkpolicyd manages. udev
 * rules, an active tuned profile, the GCE guest agent, sysfsutils'
 * sysfs.conf, systemd-tmpfiles' w lines, LVM's read-ahead and a kernel
 * elevator= each write a queue attribute at their own time; an admin who
 * does not know they are there sees blkpolicyd's value "drift" and blames
 * the wrong tool. conflicts_scan() finds them below a root (a fixture tree
 * in the tests), conflict_matches() says which apply to one disk. Both
 * only read files: no sysfs writes, no event loop.
 *
 * This is the face the rest of the daemon sees: the set (conflict-set.h),
 * a header per source (conflicts-udev.h, ...; their parts, for the tests
 * and the fuzzers), the matcher (conflicts-match.h) and the scan that runs
 * every source. */

#include "conflict-set.h"
#include "conflicts-cmdline.h"
#include "conflicts-gce.h"
#include "conflicts-lvm.h"
#include "conflicts-match.h"
#include "conflicts-sysfsd.h"
#include "conflicts-tmpfiles.h"
#include "conflicts-tuned.h"
#include "conflicts-udev.h"
#include "conflicts-units.h"
#include "roots.h"

const char *conflict_source_to_string(ConflictSource s);
/* "WRITER" or "WRITER:ATTR" of blkpolicyd.conf's yield_to= and
 * reassert_over=: whether it names source (and tunable). -EINVAL: not
 * such a word. */
int conflict_writer_match(const char *word, ConflictSource source, unsigned tunable);

/* Where each reader looks: roots->root prefixes /etc, /usr/lib, /lib and
 * /run ("/": the system; NULL: the system when sysfs is live, else none
 * of them, as a fixture's disks are not this machine's); the command line
 * is <proc>/cmdline. */
int conflicts_scan(const Roots *roots, ConflictSet *ret);
