/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Test-only fault injection at the sysfs seam, compiled in with
 * -Dfault_injection=true (the test command does; packages do not).
 *
 *   BLKPOLICYD_FAULTS="OP:GLOB:ERROR[:COUNT[:PASS]];..."
 *
 * OP is read or write (sysfs), chunk (one read() of a file read a piece
 * at a time: /proc/diskstats), save or load (a state record, GLOB on
 * "<state_dir>/devices/<major>:<minor>"), or listen (the control socket,
 * bound under its temporary name and not listening yet); GLOB an
 * fnmatch(3) pattern on the full path; ERROR an errno name (EIO, EINVAL, ENOENT, EBUSY, EAGAIN,
 * ENODEV, ENXIO, EACCES, EMFILE, ENOSPC), "short" (a read returns the first
 * half of the file), "KILL" (the process SIGKILLs itself there: a crash
 * at an exact step) or "DELAY=MS" (the call blocks MS milliseconds, then
 * goes on: a write the kernel holds; it logs "fault injection: OP PATH
 * held for MS ms" as it starts, the line a test waits for); COUNT how
 * many matching calls fail (default, or empty: all); PASS how many
 * matching calls go through first. */

#include <stdbool.h>
#include <stddef.h>

#include "blkpolicyd-paths.h"

#define FAULT_KILL 2
#define FAULT_DELAY 3

#if ENABLE_FAULT_INJECTION
/* Returns 0 (no fault), a negative errno to fail with, or 1 for "short". */
int fault_check(const char *op, const char *path);
#else
static inline int fault_check(const char *op, const char *path) {
        (void) op;
        (void) path;
        return 0;
}
#endif
