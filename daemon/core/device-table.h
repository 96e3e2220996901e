/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The device table: Device pointers by dev_t, open addressing with linear
 * probing, so a uevent or a diskstats line finds its device in O(1) among
 * thousands, and a device carries nothing for it (a chained table's link
 * was 8 bytes on every device). The slots are 8 bytes a device at a load
 * of at most 3/4, grown by doubling.
 *
 * A removed device leaves a tombstone and nothing else moves: a walk over
 * the slots (device_table_slot()) goes on after the current device, or
 * another, is removed. A put may rehash (growing, or dropping the
 * tombstones): not during a walk. The table knows a device's number only
 * from the function it is given (device.c's: the number is kept once, in
 * the device's record); it never frees one. */

#include <stddef.h>
#include <sys/types.h>

typedef struct Device Device;

typedef struct DeviceTable {
        Device **slots;         /* NULL: never used; DEVICE_TABLE_TOMBSTONE: removed */
        size_t n_slots;         /* 0 or a power of 2 */
        size_t n_devices;
        size_t n_tombstones;
        unsigned rehashes;      /* a walk that sees this move was cut by a put (device_iter_next()) */
        dev_t (*devnum)(const Device *d);
} DeviceTable;

#define DEVICE_TABLE_INIT(key) ((DeviceTable) { .devnum = (key) })

Device *device_table_get(const DeviceTable *t, dev_t devnum);
/* d must not be in the table (nor another device of its number). */
int device_table_put(DeviceTable *t, Device *d);
/* Nothing if d is not in the table. */
void device_table_remove(DeviceTable *t, const Device *d);
/* The device in slot i (< n_slots); NULL for a free or removed one. */
Device *device_table_slot(const DeviceTable *t, size_t i);
void device_table_done(DeviceTable *t);
