/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "roots.h"

/* A disk's identity, for what is remembered of it across restarts and
 * re-adds (trial-memory.h): the first of
 *   "wwid:<wwid>"      <disk>/wwid (an NVMe namespace), <disk>/device/wwid
 *                      (SCSI: VPD page 0x83, the LUN's world-wide name);
 *   "serial:<serial>"  <disk>/serial (virtio-blk), <disk>/device/serial;
 *   "path:<devpath>"   where the disk sits under /sys/devices (a null_blk,
 *                      a loop, a virtio disk QEMU gave no serial): the same
 *                      place is taken as the same disk.
 * Never empty on success; -ENODEV when the disk is gone. */
int device_identity_read(const Roots *r, const char *dev, char *buf, size_t size);
