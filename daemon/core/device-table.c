/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The device table: Device pointers by dev_t, linear probing, tombstones. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "device-table.h"

/* A removed device's slot: a probe goes on past it, a put may take it. */
#define DEVICE_TABLE_TOMBSTONE ((Device *) &tombstone)
static const char tombstone;

#define SLOTS_MIN 64

/* Fibonacci hashing: the top bits of the product. Numbers that differ
 * only in the low bits of the minor (loopN, nvme0nN) land spread over the
 * table rather than in one run. */
static size_t slot_of(dev_t devnum, size_t n_slots) {
        uint64_t key = (uint64_t) major(devnum) << 32 | minor(devnum);

        return (size_t) ((key * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(n_slots)));
}

static bool slot_live(const Device *s) {
        return s && s != DEVICE_TABLE_TOMBSTONE;
}

/* The slot of the device numbered devnum, or n_slots. */
static size_t device_table_find(const DeviceTable *t, dev_t devnum) {
        size_t mask = t->n_slots - 1;

        if (t->n_slots == 0)
                return 0;
        /* the load stays under 3/4, so a free slot ends every probe */
        for (size_t i = slot_of(devnum, t->n_slots);; i = (i + 1) & mask) {
                Device *s = t->slots[i];

                if (!s)
                        return t->n_slots;
                if (s != DEVICE_TABLE_TOMBSTONE && t->devnum(s) == devnum)
                        return i;
        }
}

Device *device_table_get(const DeviceTable *t, dev_t devnum) {
        size_t i = device_table_find(t, devnum);

        return i < t->n_slots ? t->slots[i] : NULL;
}

/* Into a table without tombstones (a fresh one). */
static void device_table_place(DeviceTable *t, Device *d) {
        size_t mask = t->n_slots - 1, i = slot_of(t->devnum(d), t->n_slots);

        while (t->slots[i])
                i = (i + 1) & mask;
        t->slots[i] = d;
}

/* Into n_slots slots: the devices again, the tombstones dropped. */
static int device_table_rehash(DeviceTable *t, size_t n_slots) {
        DeviceTable grown = { .slots = calloc(n_slots, sizeof(Device *)), .n_slots = n_slots,
                              .n_devices = t->n_devices, .rehashes = t->rehashes + 1, .devnum = t->devnum };

        if (!grown.slots)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_slots; i++)
                if (slot_live(t->slots[i]))
                        device_table_place(&grown, t->slots[i]);
        free(t->slots);
        *t = grown;
        return 0;
}

int device_table_put(DeviceTable *t, Device *d) {
        size_t used = t->n_devices + t->n_tombstones + 1, size = t->n_slots;

        /* a number stands for one device: the caller forgets the old one first */
        assert(device_table_find(t, t->devnum(d)) >= t->n_slots);
        /* at most 3/4 used, tombstones counted (they lengthen probes): twice
         * the slots when the devices alone fill half, else the same number
         * without the tombstones */
        if (used * 4 > size * 3) {
                while ((t->n_devices + 1) * 2 > size)
                        size = size ? size * 2 : SLOTS_MIN;
                if (device_table_rehash(t, size) < 0)
                        return -ENOMEM;
        }
        for (size_t mask = t->n_slots - 1, i = slot_of(t->devnum(d), t->n_slots);; i = (i + 1) & mask)
                if (!slot_live(t->slots[i])) {
                        t->n_tombstones -= t->slots[i] == DEVICE_TABLE_TOMBSTONE;
                        t->slots[i] = d;
                        t->n_devices++;
                        return 0;
                }
}

void device_table_remove(DeviceTable *t, const Device *d) {
        size_t i = device_table_find(t, t->devnum(d));

        if (i >= t->n_slots || t->slots[i] != d)
                return;
        /* the probes of the devices after it go through this slot: it stays
         * taken, and nothing moves under a walk */
        t->slots[i] = DEVICE_TABLE_TOMBSTONE;
        t->n_devices--;
        t->n_tombstones++;
}

Device *device_table_slot(const DeviceTable *t, size_t i) {
        return slot_live(t->slots[i]) ? t->slots[i] : NULL;
}

void device_table_done(DeviceTable *t) {
        free(t->slots);
        *t = (DeviceTable) {};
}
