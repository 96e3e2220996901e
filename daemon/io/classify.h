/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "facts.h"
#include "proc-devices.h"
#include "sysfs.h"

/* The kernel's registered block majors (<proc>/devices), which tell a
 * parentless disk's driver, kept between classifications: a storm of
 * 10,000 new loop devices would otherwise read the file 10,000 times,
 * three syscalls more on each disk's thirty. It is read when a disk first
 * needs it and held until major_cache_drop(), which the owner calls after
 * each dispatch (a batch of uevents, a scan) and when a disk goes away:
 * its driver may be unloading, and a dynamic major, once free, is the
 * next module's (register_blkdev(0, ...) hands out the highest free one).
 * A major the table lacks may be a module loaded since the read (its
 * major is registered before its first add_disk()), so it is read again,
 * once until the next drop: a driver that registers no major of its own
 * costs no read per disk. */
typedef struct MajorCache {
        BlockMajors majors;
        unsigned reads;         /* since the last drop: 0, 1, or 2 (read again for a major it lacked) */
} MajorCache;

#define MAJOR_CACHE_NULL ((MajorCache) {})

void major_cache_drop(MajorCache *c);

/* Reads the facts of one whole disk. majors: the cache above, or NULL to
 * read <proc>/devices afresh when the disk has no parent device.
 * -ENODEV: gone (or never there); -ENOTBLK: a partition, which
 * blkpolicyd ignores; -ENOMEM. Does not touch f->properties (udev's,
 * filled in by discover.c). */
int classify_device(const Roots *r, MajorCache *majors, const char *name, DeviceFacts *f);

int kernel_caps_read(const Roots *r, KernelCaps *caps);
/* Learns dispatch_direct from device dev when it runs `scheduler` and that
 * is mq-deadline: its iosched/ directory shows whether the tunable exists.
 * Returns true if caps changed. */
bool kernel_caps_learn(KernelCaps *caps, const Roots *r, const char *dev, const char *scheduler);
/* Takes what a pass saw after a switch to mq-deadline (ApplyOutcome's
 * dispatch_direct); yes is for good, no until a yes. Returns true if caps
 * changed. */
bool kernel_caps_note(KernelCaps *caps, Tristate dispatch_direct);
/* The running kernel's CONFIG_HZ (its jiffy), 0 when not known. */
unsigned kernel_config_hz(const Roots *r, const char *release);
