/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <limits.h>

#include "tunables.h"
#include "util.h"

/* Ranges follow the kernel's own checks (block/blk-sysfs.c and the
 * iosched files); the kernel still has the last word and apply.c reads
 * every value back. */
const Tunable tunables[] = {
        { "Queue", "scheduler", "scheduler", NULL, 0, 0 },
        { "Queue", "nr_requests", "nr_requests", NULL, 4, 65536 },
        { "Queue", "read_ahead_kb", "read_ahead_kb", NULL, 0, INT_MAX },
        { "Queue", "rq_affinity", "rq_affinity", NULL, 0, 2 },
        { "Queue", "nomerges", "nomerges", NULL, 0, 2 },
        { "Queue", "wbt_lat_usec", "wbt_lat_usec", NULL, -1, INT64_MAX / 1000 },
        { "Queue", "max_sectors_kb", "max_sectors_kb", NULL, 4, INT_MAX },
        { "Queue", "iostats", "iostats", NULL, 0, 1 },
        { "Queue", "add_random", "add_random", NULL, 0, 1 },

        { "mq-deadline", "dispatch_direct", "iosched/dispatch_direct", "mq-deadline", 0, 1 },
        { "mq-deadline", "read_expire", "iosched/read_expire", "mq-deadline", 0, INT_MAX },
        { "mq-deadline", "write_expire", "iosched/write_expire", "mq-deadline", 0, INT_MAX },
        { "mq-deadline", "writes_starved", "iosched/writes_starved", "mq-deadline", 0, INT_MAX },
        { "mq-deadline", "fifo_batch", "iosched/fifo_batch", "mq-deadline", 0, INT_MAX },
        { "mq-deadline", "front_merges", "iosched/front_merges", "mq-deadline", 0, 1 },
        { "mq-deadline", "prio_aging_expire", "iosched/prio_aging_expire", "mq-deadline", 0, INT_MAX },
        { "mq-deadline", "async_depth", "iosched/async_depth", "mq-deadline", 1, INT_MAX },

        { "bfq", "low_latency", "iosched/low_latency", "bfq", 0, 1 },
        { "bfq", "slice_idle", "iosched/slice_idle", "bfq", 0, INT_MAX },
        { "bfq", "slice_idle_us", "iosched/slice_idle_us", "bfq", 0, INT_MAX },
        { "bfq", "back_seek_max", "iosched/back_seek_max", "bfq", 0, INT_MAX },
        { "bfq", "back_seek_penalty", "iosched/back_seek_penalty", "bfq", 1, INT_MAX },
        { "bfq", "fifo_expire_async", "iosched/fifo_expire_async", "bfq", 0, INT_MAX },
        { "bfq", "fifo_expire_sync", "iosched/fifo_expire_sync", "bfq", 0, INT_MAX },
        { "bfq", "max_budget", "iosched/max_budget", "bfq", 0, INT_MAX },
        { "bfq", "timeout_sync", "iosched/timeout_sync", "bfq", 1, INT_MAX },
        { "bfq", "strict_guarantees", "iosched/strict_guarantees", "bfq", 0, 1 },

        { "kyber", "read_lat_nsec", "iosched/read_lat_nsec", "kyber", 1, INT64_MAX },
        { "kyber", "write_lat_nsec", "iosched/write_lat_nsec", "kyber", 1, INT64_MAX },
};

const size_t n_tunables = ELEMENTSOF(tunables);

_Static_assert(ELEMENTSOF(tunables) <= TUNABLES_MAX, "TUNABLES_MAX too small");

int tunable_find(const char *section, const char *key) {
        for (size_t i = 0; i < n_tunables; i++)
                if (streq(tunables[i].section, section) && streq(tunables[i].key, key))
                        return (int) i;
        return -ENOENT;
}

int tunable_find_attr(const char *attr) {
        for (size_t i = 0; i < n_tunables; i++)
                if (streq(tunables[i].attr, attr))
                        return (int) i;
        return -ENOENT;
}

int tunable_parse_value(size_t index, const char *value, char *buf, size_t size) {
        const Tunable *t = &tunables[index];
        long long v;
        int r;

        if (t->min == 0 && t->max == 1) {
                r = parse_boolean(value);
                if (r < 0)
                        return r;
                v = r;
        } else {
                r = parse_ll(value, t->min, t->max, &v);
                if (r < 0)
                        return r;
        }
        snprintf(buf, size, "%lld", v);
        return 0;
}
