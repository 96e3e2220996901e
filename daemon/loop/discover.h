/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* discover: which whole disks exist (enumeration) and which come, change
 * and go (monitor). udevd's monitor when udevd runs, else the kernel's
 * own uevent netlink group via libnl. Knows nothing of policies. */

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "blkpolicyd-paths.h"

#include "sysfs.h"
#include "uevent.h"

typedef struct Discover Discover;

/* What discover_receive() took from the monitor. */
typedef enum DiscoverReceived {
        DISCOVER_NONE,          /* nothing waits: the loop waits for the fd again */
        DISCOVER_EVENT,         /* *ret is an event of a wanted whole disk */
        DISCOVER_SKIPPED,       /* a message that is no such event */
        DISCOVER_LOST,          /* events were lost (ENOBUFS): everything must be rescanned */
        DISCOVER_RESCAN,        /* an NVMe controller came, changed or went: its hidden multipath
                                 * paths, which send no event, are found by a rescan (uevent.h) */
} DiscoverReceived;

typedef struct DiscoverEvent {
        char name[NAME_MAX + 1];        /* the kernel's name of the disk */
        dev_t devnum;
        UeventAction action;
} DiscoverEvent;

int discover_new(const Roots *roots, char *const *device_globs, Discover **ret);
Discover *discover_free(Discover *d);

/* Sorted kernel names of whole disks that pass the --device globs. */
int discover_enumerate(Discover *d, char ***ret);
/* Whether name is a disk of the daemon's (--device globs): the disks
 * next to one in a stack are refreshed by name, not through discover. */
bool discover_name_wanted(const Discover *d, const char *name);

/* The monitor: udevd's, else the kernel's uevents. Returns its fd,
 * which the loop watches for EPOLLIN and Discover closes; -errno. */
int discover_open_monitor(Discover *d, unsigned rcvbuf);
/* The monitor's next message, without blocking: a DiscoverReceived. The
 * loop takes at most discover_batch() per wakeup, whatever they were. */
int discover_receive(Discover *d, DiscoverEvent *ret);
unsigned discover_batch(const Discover *d);
/* "udev", "kernel", "none" (or "fake"). */
const char *discover_monitor_kind(const Discover *d);

/* Test builds only (-Dfault_injection=true), and only when
 * BLKPOLICYD_FAKE_UEVENTS=<socket path> is set: the monitor is a datagram
 * socket bound there instead, and what a test sends to it goes through
 * the kernel uevent parser and handler ("add@/devices/virtual/block/loop0"
 * then ACTION=, DEVPATH=, SUBSYSTEM=block, DEVTYPE=disk, DEVNAME=, MAJOR=,
 * MINOR=, DISKSEQ=, NUL-separated). A sender bound to an address of its
 * own gets "settled" back once the event is handled and the applier is
 * idle: the manager calls discover_fake_settle() after every dispatch. */
#define FAKE_UEVENT_WAITERS_MAX 8
#if ENABLE_FAULT_INJECTION
void discover_fake_settle(Discover *d, bool idle);
#endif
