/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The device table: a chained hash by dev_t, grown at load factor 1, so a
 * uevent or a diskstats line finds its device in O(1) among thousands.
 * It knows only the DevNode each Device embeds (device.c turns a node
 * back into its device), and never frees one. */

#include <stddef.h>
#include <sys/types.h>

typedef struct DevNode {
        struct DevNode *next;
        dev_t devnum;
} DevNode;

typedef struct DeviceTable {
        DevNode **buckets;
        size_t n_buckets;
        size_t n_devices;
} DeviceTable;

DevNode *device_table_get(const DeviceTable *t, dev_t devnum);
int device_table_put(DeviceTable *t, DevNode *n);
void device_table_remove(DeviceTable *t, DevNode *n);
void device_table_done(DeviceTable *t);
