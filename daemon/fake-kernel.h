/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Test builds only (-Dfault_injection=true), and only when
 * BLKPOLICYD_FAKE_KERNEL is set: writes under a fixture tree behave as the
 * block layer's do, so apply, restore, reload, flip and drift can be
 * tested without root, as kmod's testsuite fakes its syscalls.
 *
 *   - queue/scheduler takes a name from its bracketed list (else EINVAL)
 *     and moves the brackets; a switch resets nr_requests (128 under none,
 *     256 under a scheduler, as for loop devices) and replaces iosched/
 *     with the new scheduler's defaults (none: no iosched/ at all);
 *   - other attributes take an integer (else EINVAL) and show it; a write
 *     of nr_requests resets mq-deadline's async_depth to 3/4 of it;
 *   - a disk whose directory is gone gives ENOENT, which apply.c tells
 *     from an add in progress by the missing "dev" file, as with sysfs.
 *
 * BLKPOLICYD_FAKE_KERNEL=dispatch_direct gives mq-deadline the proposed
 * dispatch_direct tunable, reset to 1 by every switch, as seed 002's
 * patch does. */

#include "blkpolicyd-paths.h"

#include <stddef.h>

/* sysfs_read(), passed in by sysfs.c: the fake kernel sits below it, and
 * reads the fixture's scheduler list as the daemon does (faults included). */
typedef int (*FakeKernelRead)(const char *path, char *buf, size_t size);

#if ENABLE_FAULT_INJECTION
/* Returns 1 when the fake kernel is not on (do the real write), else 0 or
 * the -errno the kernel would give. */
int fake_kernel_write(const char *path, const char *value, FakeKernelRead read_attr);
#else
static inline int fake_kernel_write(const char *path, const char *value, FakeKernelRead read_attr) {
        (void) path;
        (void) value;
        (void) read_attr;
        return 1;
}
#endif
