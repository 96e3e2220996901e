/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* discover: which whole disks exist (enumeration) and which come, change
 * and go (monitor). udevd's monitor when udevd runs, else the kernel's
 * own uevent netlink group via libnl. Knows nothing of policies. */

#include <sys/types.h>
#include <systemd/sd-event.h>

#include "sysfs.h"
#include "uevent.h"

typedef struct Discover Discover;

typedef struct DiscoverCallbacks {
        void (*device)(void *userdata, const char *name, dev_t devnum, UeventAction action);
        /* events were lost (ENOBUFS): everything must be rescanned */
        void (*overflow)(void *userdata);
        void *userdata;
} DiscoverCallbacks;


int discover_new(const Roots *roots, char *const *device_globs, Discover **ret);
Discover *discover_free(Discover *d);

/* Sorted kernel names of whole disks that pass the --device globs. */
int discover_enumerate(Discover *d, char ***ret);

int discover_start_monitor(Discover *d, sd_event *e, const DiscoverCallbacks *cb, unsigned rcvbuf);
/* "udev", "kernel" or "none". */
const char *discover_monitor_kind(const Discover *d);
