/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The device table: a chained hash by dev_t, grown at load factor 1, so a
 * uevent or a diskstats line finds its device in O(1) among thousands.
 * It knows only the DevNode each Device embeds, and the number of a node
 * from the function it is given (device.c's: the number is kept once, in
 * the device's record); it never frees one. */

#include <stddef.h>
#include <sys/types.h>

typedef struct DevNode {
        struct DevNode *next;
} DevNode;

typedef struct DeviceTable {
        DevNode **buckets;
        size_t n_buckets;
        size_t n_devices;
        dev_t (*devnum)(const DevNode *n);
} DeviceTable;

#define DEVICE_TABLE_INIT(key) ((DeviceTable) { .devnum = (key) })

DevNode *device_table_get(const DeviceTable *t, dev_t devnum);
int device_table_put(DeviceTable *t, DevNode *n);
void device_table_remove(DeviceTable *t, DevNode *n);
void device_table_done(DeviceTable *t);
