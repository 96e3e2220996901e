/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The device table: chained hash by dev_t over the nodes devices embed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "device-table.h"

static size_t bucket_of(dev_t devnum, size_t n_buckets) {
        uint64_t h = (uint64_t) major(devnum) * 0x9E3779B97F4A7C15ull ^ minor(devnum);
        return (size_t) (h ^ (h >> 29)) & (n_buckets - 1);
}

DevNode *device_table_get(const DeviceTable *t, dev_t devnum) {
        if (t->n_buckets == 0)
                return NULL;
        for (DevNode *n = t->buckets[bucket_of(devnum, t->n_buckets)]; n; n = n->next)
                if (t->devnum(n) == devnum)
                        return n;
        return NULL;
}

static int device_table_grow(DeviceTable *t) {
        size_t size = t->n_buckets ? t->n_buckets * 2 : 64;
        DevNode **b = calloc(size, sizeof(DevNode *));

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_buckets; i++)
                for (DevNode *n = t->buckets[i], *next; n; n = next) {
                        size_t k = bucket_of(t->devnum(n), size);
                        next = n->next;
                        n->next = b[k];
                        b[k] = n;
                }
        free(t->buckets);
        t->buckets = b;
        t->n_buckets = size;
        return 0;
}

int device_table_put(DeviceTable *t, DevNode *n) {
        size_t k;

        if (t->n_devices >= t->n_buckets && device_table_grow(t) < 0)
                return -ENOMEM;
        k = bucket_of(t->devnum(n), t->n_buckets);
        n->next = t->buckets[k];
        t->buckets[k] = n;
        t->n_devices++;
        return 0;
}

void device_table_remove(DeviceTable *t, DevNode *n) {
        if (t->n_buckets == 0)
                return;
        for (DevNode **p = &t->buckets[bucket_of(t->devnum(n), t->n_buckets)]; *p; p = &(*p)->next)
                if (*p == n) {
                        *p = n->next;
                        n->next = NULL;
                        t->n_devices--;
                        return;
                }
}

void device_table_done(DeviceTable *t) {
        free(t->buckets);
        *t = (DeviceTable) {};
}
