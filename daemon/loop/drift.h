/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* drift.c: what is live in sysfs against what blkpolicyd intends. */

#include <cjson/cJSON.h>
#include <stdint.h>

#include "device-types.h"

typedef struct VerifyFlags {
        bool drifted;           /* someone else changed what blkpolicyd held */
        bool pending;           /* a write would change it: observe, paused */
        bool not_kept;          /* written, the kernel kept another value */
        bool canary;            /* a canary (mode=observe policy) would change it */
} VerifyFlags;

/* verify's entry for d from one live read, its drift, pending changes and
 * values the kernel did not keep, in *ret: 1; 0 (and NULL) when no policy
 * manages d, nothing to verify; -ENOMEM. */
int drift_verify_entry(DeviceContext *c, Device *d, cJSON **ret, VerifyFlags *flags);
typedef struct PreviewFlags {
        unsigned changes;       /* settings a write would change */
        bool managed;           /* a policy would match it, where none does */
        bool unmanaged;         /* no policy would match it any more */
        bool in_flight;         /* a pass runs: not read */
} PreviewFlags;

/* verify --policy's entry for d, decided from set (a preview's, with the
 * file in it) against its plan in force from one live read
 * (device_preview()), in *ret: 1; 0 (and NULL) when nothing differs;
 * -ENOMEM. */
int drift_preview_entry(DeviceContext *c, Device *d, const PolicySet *set, cJSON **ret, PreviewFlags *flags);
/* Reads back the managed settings of the next n devices, round robin from
 * where the last call stopped, until CLOCK_MONOTONIC passes until (one
 * device at least): the tick's share of the sweep, in slices that leave
 * the loop to the socket and the uevents. Returns the devices read (fewer
 * than n: the rest is for the next slice; at most one round of them), or
 * -ENOMEM. */
int drift_check(DeviceContext *c, unsigned n, uint64_t until);
