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
 *     of nr_requests resets mq-deadline's async_depth to 3/4 of it; the
 *     schedulers' times in jiffies (read_expire, write_expire, bfq's
 *     fifo_expire_*, timeout_sync) show as multiples of 4 ms, as at HZ=250;
 *   - a write goes below the queue directory the pass holds open, by fd
 *     and not by name: a directory renamed away (a disk replaced under
 *     its name) still takes it, where the kernel would fail it; a removed
 *     one gives ENOENT, which apply.c tells from an add in progress by
 *     the disk's name no longer leading to that queue.
 *
 * BLKPOLICYD_FAKE_KERNEL=dispatch_direct gives mq-deadline the proposed
 * dispatch_direct tunable, reset to 1 by every switch, as seed 002's
 * patch does. */

#include "blkpolicyd-paths.h"

#include <stddef.h>

/* sysfs.c's reader, passed in: the fake kernel sits below it, and reads
 * the fixture's scheduler list as the daemon does (faults included, on
 * path), at rel below the directory fd dirfd. */
typedef int (*FakeKernelRead)(int dirfd, const char *rel, const char *path, char *buf, size_t size);

#if ENABLE_FAULT_INJECTION
/* A write of value to rel ("scheduler", "iosched/fifo_batch") below the
 * queue directory fd q; path is the same in full. Returns 1 when the fake
 * kernel is not on (do the real write), else 0 or the -errno the kernel
 * would give. */
int fake_kernel_write(int q, const char *rel, const char *path, const char *value, FakeKernelRead read_attr);
#else
static inline int fake_kernel_write(int q, const char *rel, const char *path, const char *value,
                                    FakeKernelRead read_attr) {
        (void) q;
        (void) rel;
        (void) path;
        (void) value;
        (void) read_attr;
        return 1;
}
#endif
