/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum UeventAction {
        UEVENT_ADD,
        UEVENT_CHANGE,
        UEVENT_REMOVE,
        UEVENT_OTHER,   /* move, online, offline, bind, unbind */
} UeventAction;

/* A kernel uevent as sent on NETLINK_KOBJECT_UEVENT: "action@devpath\0"
 * then "KEY=VALUE\0" pairs. Strings point into the caller's buffer. */
typedef struct Uevent {
        UeventAction action;
        const char *devpath;
        const char *subsystem;
        const char *devname;
        const char *devtype;
        unsigned major, minor;
        bool has_devnum;
        uint64_t diskseq;
        uint64_t seqnum;
} Uevent;

/* Pure. -EBADMSG for anything malformed, -EPROTO for udevd's "libudev"
 * messages (they belong on the udev group, not the kernel's). buf need not
 * be NUL-terminated; it is modified (the terminator is set at len - 1). */
int uevent_parse(char *buf, size_t len, Uevent *ret);

UeventAction uevent_action_from_string(const char *s);

/* Is this a whole-disk block device event blkpolicyd cares about? */
bool uevent_is_disk(const Uevent *u);
/* An NVMe controller came, changed (connected, reset) or went. Its
 * multipath paths (nvmeXcYnZ) come and go with it and send no uevent of
 * their own (block/genhd.c keeps a hidden disk's suppressed), nor does
 * the head they serve: this is what the daemon hears of them. */
bool uevent_is_nvme_controller(const Uevent *u);
/* The kernel name (as in /sys/block): the last component of DEVPATH. */
const char *uevent_sysname(const Uevent *u);
