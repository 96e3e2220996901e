/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The table of every queue attribute blkpolicyd may set. One row per
 * attribute: where it lives in a policy file, where it lives under
 * /sys/block/<dev>/queue/, and which values are valid. Index 0 is the
 * scheduler; the table order is also the apply order (scheduler first,
 * then queue attributes, then the scheduler's own tunables). */

#include <stdbool.h>
#include <stddef.h>

typedef struct Tunable {
        const char *section;    /* policy file section: "Queue", "mq-deadline", "bfq", "kyber" */
        const char *key;        /* key in that section */
        const char *attr;       /* path below queue/ */
        const char *scheduler;  /* set for iosched tunables: the scheduler they belong to */
        long long min, max;
        /* a request queue's (block/blk-sysfs.c blk_mq_queue_attrs[], and
         * every iosched/ file): a bio-based queue (dm, md, NVMe multipath
         * heads) has none of them, 6.10 on does not even show them */
        bool request_based;
} Tunable;

#define TUNABLE_SCHEDULER 0
/* Row 1; a constant, as the applier's worker threads read it with no lock. */
#define TUNABLE_NR_REQUESTS 1
/* Rows 2 and 6: a write of max_sectors_kb resets read_ahead_kb (kernel-default.h). */
#define TUNABLE_READ_AHEAD_KB 2
#define TUNABLE_MAX_SECTORS_KB 6

extern const Tunable tunables[];
extern const size_t n_tunables;

/* The largest row count any table can have; arrays indexed by tunable use it. */
#define TUNABLES_MAX 40

int tunable_find(const char *section, const char *key);
int tunable_find_attr(const char *attr);
/* Validates a value for a non-scheduler tunable and normalises it
 * (e.g. "yes" → "1" for boolean tunables). */
int tunable_parse_value(size_t index, const char *value, char *buf, size_t size);
