/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Test-only fault injection at the sysfs seam, compiled in with
 * -Dfault_injection=true (the test command does; packages do not).
 *
 *   BLKPOLICYD_FAULTS="OP:GLOB:ERROR[:COUNT];..."
 *
 * OP is read or write, GLOB an fnmatch(3) pattern on the full path, ERROR an
 * errno name (EIO, EINVAL, ENOENT, EBUSY, EAGAIN, ENODEV, ENXIO) or "short"
 * (a read returns the first half of the file), COUNT how many matching calls
 * fail (default: all). */

#include <stdbool.h>
#include <stddef.h>

#include "blkpolicyd-paths.h"

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
