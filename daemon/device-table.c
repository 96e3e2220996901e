/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The device table: chained hash by dev_t, grown at load factor 1, so a
 * uevent or a diskstats line finds its device in O(1) among thousands. */
#include <sys/sysmacros.h>

#include "manager.h"
#include "util.h"

static size_t bucket_of(dev_t devnum, size_t n_buckets) {
        uint64_t h = (uint64_t) major(devnum) * 0x9E3779B97F4A7C15ull ^ minor(devnum);
        return (size_t) (h ^ (h >> 29)) & (n_buckets - 1);
}

Device *device_table_get(const DeviceTable *t, dev_t devnum) {
        if (t->n_buckets == 0)
                return NULL;
        for (Device *d = t->buckets[bucket_of(devnum, t->n_buckets)]; d; d = d->hash_next)
                if (d->devnum == devnum)
                        return d;
        return NULL;
}

Device *device_table_find_name(const DeviceTable *t, const char *name) {
        DEVICE_TABLE_FOREACH(d, t)
                if (streq(d->name, name))
                        return d;
        return NULL;
}

static int device_table_grow(DeviceTable *t) {
        size_t n = t->n_buckets ? t->n_buckets * 2 : 64;
        Device **b = calloc(n, sizeof(Device *));

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_buckets; i++)
                for (Device *d = t->buckets[i], *next; d; d = next) {
                        size_t k = bucket_of(d->devnum, n);
                        next = d->hash_next;
                        d->hash_next = b[k];
                        b[k] = d;
                }
        free(t->buckets);
        t->buckets = b;
        t->n_buckets = n;
        return 0;
}

int device_table_put(DeviceTable *t, Device *d) {
        size_t k;

        if (t->n_devices >= t->n_buckets && device_table_grow(t) < 0)
                return -ENOMEM;
        k = bucket_of(d->devnum, t->n_buckets);
        d->hash_next = t->buckets[k];
        t->buckets[k] = d;
        t->n_devices++;
        return 0;
}

void device_table_remove(DeviceTable *t, Device *d) {
        Device **p;

        if (t->n_buckets == 0)
                return;
        for (p = &t->buckets[bucket_of(d->devnum, t->n_buckets)]; *p; p = &(*p)->hash_next)
                if (*p == d) {
                        *p = d->hash_next;
                        d->hash_next = NULL;
                        t->n_devices--;
                        return;
                }
}

static int device_compare(const void *a, const void *b) {
        return strcmp((*(Device *const *) a)->name, (*(Device *const *) b)->name);
}

int device_table_sorted(const DeviceTable *t, Device ***ret) {
        Device **l = calloc(t->n_devices + 1, sizeof(Device *));
        size_t n = 0;

        if (!l)
                return -ENOMEM;
        DEVICE_TABLE_FOREACH(d, t)
                l[n++] = d;
        qsort(l, n, sizeof(Device *), device_compare);
        *ret = l;
        return (int) n;
}

/* The devices are the caller's to free (device_free()): the table only
 * links them, and device.c is above it. */
void device_table_done(DeviceTable *t) {
        free(t->buckets);
        *t = (DeviceTable) {};
}
