/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a queue-limits update (a revalidation) makes of a setting: the
 * kernel's own default for the queue's limits now. Pure: the limits as
 * sysfs shows them and the kernel's version in, a value out.
 *
 * Only read_ahead_kb has one. Every limits update ends in
 * blk_apply_bdi_limits() (block/blk-settings.c, called by
 * queue_limits_commit_update() and queue_limits_set() since the atomic
 * limits API of 6.9; sd moved to it in 6.11, 804e498e0496), which sets
 *
 *   ra_pages = max3(ra_pages, io_opt * 2 / PAGE_SIZE, VM_READAHEAD_PAGES)
 *
 * VM_READAHEAD_PAGES being 128 KiB. Before 7b720c720253 ("block: never
 * reduce ra_pages in blk_apply_bdi_limits", 6.15, and 6.12.26 on stable)
 * the current value was not in it: any value went back to the default.
 * Since 459779d04ae8 ("block: Improve read ahead size for rotational
 * devices", 6.17) a rotational queue with no io_opt takes max_sectors
 * for it, so a virtio disk (rotational=1) with max_sectors_kb 4096 gets
 * 8192 KiB. On 6.1, blk_queue_io_opt() and disk_update_readahead() set
 * the same max(io_opt * 2 / PAGE_SIZE, VM_READAHEAD_PAGES): NVMe's
 * nvme_update_disk_info() at every rescan, dm_table_set_restrictions() at
 * every table load; sd set io_opt without them and kept read-ahead.
 *
 * Either way, what a revalidation leaves on a value below the default (on
 * every kernel) or above it (before 6.15) is exactly the default computed
 * here; docs/reliability.md says what blkpolicyd makes of it.
 *
 * max_sectors_kb is kept: since 6.9 as max_user_sectors
 * (blk_validate_limits() caps max_sectors by it), before that sd_revalidate_disk()
 * set max_sectors only at the first scan; but a write of max_sectors_kb is
 * a limits update of its own, which resets read_ahead_kb as above
 * (max_sectors_write_resets_read_ahead()). nr_requests, the scheduler, its
 * iosched/ tunables and wbt_lat_usec are not queue limits: a limits update
 * does not touch them. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct QueueLimitsSeen {
        uint64_t io_opt;                /* queue/optimal_io_size, bytes */
        uint64_t max_sectors_kb;        /* queue/max_sectors_kb (the limit in force, max_user_sectors included) */
        bool rotational;                /* queue/rotational */
        unsigned page_kb;               /* the page size in KiB */
} QueueLimitsSeen;

/* Parses the three files' text, as read (no trailing newline). Returns
 * 0, -EINVAL or -ERANGE. */
int queue_limits_parse(const char *io_opt, const char *max_sectors_kb, const char *rotational, unsigned page_kb,
                       QueueLimitsSeen *ret);

/* The read_ahead_kb blk_apply_bdi_limits() sets on a queue at or below it,
 * on the kernel of version[3]. */
uint64_t read_ahead_kernel_default(const QueueLimitsSeen *l, const unsigned version[3]);

/* Whether a limits update resets tunable: read_ahead_kb only. */
bool tunable_reset_by_limits(unsigned tunable);

/* Whether a write of queue/max_sectors_kb, itself a limits update
 * (queue_max_sectors_store() -> queue_limits_commit_update() since 6.9),
 * resets read_ahead_kb on the kernel of version[3]: 6.9 on. Before, it set
 * only the bdi's io_pages. NULL (not known): taken as yes, which costs one
 * record more, never a value. */
bool max_sectors_write_resets_read_ahead(const unsigned version[3]);

/* The value tunable is left at by a limits update, as its file shows it.
 * Returns 1 and fills buf, 0 for a tunable no limits update resets,
 * -ENOBUFS. */
int kernel_default_value(unsigned tunable, const QueueLimitsSeen *l, const unsigned version[3], char *buf,
                         size_t size);
