/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* kernel-default: what a queue-limits update resets (include/kernel-default.h). Pure. */
#include <inttypes.h>
#include <stdio.h>

#include "facts.h"
#include "kernel-default.h"
#include "tunables.h"
#include "util.h"

#define VM_READAHEAD_KB 128     /* include/linux/mm.h: VM_READAHEAD_PAGES = SZ_128K / PAGE_SIZE */

static int parse_u64(const char *s, uint64_t *ret) {
        long long v;
        int r = parse_ll(s, 0, INT64_MAX, &v);

        if (r < 0)
                return r;
        *ret = (uint64_t) v;
        return 0;
}

int queue_limits_parse(const char *io_opt, const char *max_sectors_kb, const char *rotational, unsigned page_kb,
                       QueueLimitsSeen *ret) {
        QueueLimitsSeen l = { .page_kb = page_kb };
        int r;

        if (page_kb == 0)
                return -EINVAL;
        r = parse_u64(io_opt, &l.io_opt);
        if (r < 0)
                return r;
        r = parse_u64(max_sectors_kb, &l.max_sectors_kb);
        if (r < 0)
                return r;
        r = parse_boolean(rotational);
        if (r < 0)
                return r;
        l.rotational = r;
        *ret = l;
        return 0;
}

uint64_t read_ahead_kernel_default(const QueueLimitsSeen *l, const unsigned version[3]) {
        static const unsigned rotational_max_sectors[3] = { 6, 17, 0 };        /* 459779d04ae8 */
        uint64_t io_opt = l->io_opt, pages;

        if (io_opt == 0 && l->rotational && kernel_version_compare(version, rotational_max_sectors) >= 0)
                io_opt = l->max_sectors_kb * 1024;
        /* io_opt * 2 / PAGE_SIZE: whole pages, rounded down */
        pages = io_opt * 2 / ((uint64_t) l->page_kb * 1024);
        return pages * l->page_kb > VM_READAHEAD_KB ? pages * l->page_kb : VM_READAHEAD_KB;
}

bool tunable_reset_by_limits(unsigned tunable) {
        return streq(tunables[tunable].attr, "read_ahead_kb");
}

bool max_sectors_write_resets_read_ahead(const unsigned version[3]) {
        static const unsigned atomic_limits[3] = { 6, 9, 0 };  /* queue_limits_commit_update() */

        return !version || kernel_version_compare(version, atomic_limits) >= 0;
}

int kernel_default_value(unsigned tunable, const QueueLimitsSeen *l, const unsigned version[3], char *buf,
                         size_t size) {
        int n;

        if (!tunable_reset_by_limits(tunable))
                return 0;
        n = snprintf(buf, size, "%" PRIu64, read_ahead_kernel_default(l, version));
        return n < 0 || (size_t) n >= size ? -ENOBUFS : 1;
}
