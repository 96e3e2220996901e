/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "facts.h"
#include "sysfs.h"

/* Reads the facts of one whole disk. -ENODEV: gone (or never there);
 * -ENOTBLK: a partition, which blkpolicyd ignores. Does not touch
 * f->properties (udev's, filled in by discover.c). */
int classify_device(const Roots *r, const char *name, DeviceFacts *f);

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
