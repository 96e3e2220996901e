/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a Device holds: for device.c (its life) and device-pass.c (its
 * passes) only. Every other file asks through device.h. */

#include "decide.h"
#include "device-types.h"
#include "shared.h"
#include "state.h"
#include "trial-device.h"

/* What few devices have: an error, an override, a retry, the udev
 * properties some policy names, the names of its stack, what flips left. Apart, allocated at the first need and
 * freed when it is empty again, so that every other device carries one
 * pointer for them (device_extra()). */
typedef struct DeviceExtra {
        /* a retry's userdata is this: on_retry() finds both here */
        DeviceContext *context;
        Device *device;
        char **properties;      /* the udev properties some policy names */
        DeviceStack *stack;     /* the names of its stack, if it is in one (facts.h) */
        char *error;            /* last classify/apply error; NULL when none */
        char *override_note;    /* what someone else changed; set while overridden (left alone) */
        sd_event_source *retry_source;
        DeviceFlips *flips;     /* from the first flip, while d->dynamic */
        DeviceTrial *trial;     /* a [Trial]'s or blkpolicyctl's, running or what it kept */
        uint8_t retries;        /* at most RETRY_MAX + 1 */
} DeviceExtra;

/* Every device has one, so every byte counts: what most devices never
 * need is in the DeviceExtra, the context is the callers' (the functions
 * take it), and the table holds pointers to devices (device-table.h), so
 * a device carries no link for it. In c->devices by number (the
 * record's). */
struct Device {
        /* shared (intern.h): devices alike have the same facts and get the
         * same plan, one pair for both (shared.h). The shared facts have
         * name, number, diskseq, properties and stack blank: device_facts() puts
         * this device's in. */
        const DeviceKind *kind;
        DeviceExtra *extra;     /* NULL until something rare is needed */
        DeviceRecord record;    /* identity (number, queue, diskseq) and what blkpolicyd changed */
        DeviceDynamic *dynamic; /* NULL unless the policy has [Dynamic] */
        SampleState sample;     /* the sampler's; 64 bytes with no hole, so the bits follow it at
                                 * 120 and the name at 122: up to 13 characters, a 144-byte chunk */
        /* together at the end, and bits: a bool between pointers would
         * cost 7 bytes of padding, on every device */
        bool seen : 1;          /* marks survivors during a rescan */
        bool paused : 1;        /* pause DEV: left as it is until resume */
        bool record_unreadable : 1; /* its state record could not be read: nothing is written */
        bool job : 1;           /* an apply pass of its own runs in the applier */
        bool reprocess : 1;     /* asked for again while it ran: decide again when it is back */
        bool reprocess_take_over : 1;
        bool restore_pending : 1;       /* a put-back asked for while a pass ran: after it */
        bool new_media : 1;     /* diskseq moved: the next pass adopts what the admin set */
        bool gone : 1;          /* forgotten: out of the table, freed after this dispatch */
        bool busy_unreadable : 1; /* the sampler's (device_busy_unreadable()) */
        /* as long as it is (most are under 16 bytes, the kernel allows 31):
         * a refresh replaces the facts of the same name only */
        char name[];
};

/* Why a planned change is not written to d (dry run, observe, paused,
 * overridden, its record unreadable); NULL when it would be. */
const char *device_write_why_not(const DeviceContext *c, const Device *d);

/* What decide() takes for d now; view: storage for its facts. */
DecideInput device_decide_input(const DeviceContext *c, const Device *d, DeviceFacts *view);

/* Makes d's pair the one of facts and plan, whose holds the caller has
 * taken; the old pair is let go, not the holds on what it named.
 * -ENOMEM: d is as it was. */
_must_check_ int device_set_kind(DeviceContext *c, Device *d, const DeviceFacts *facts, const Plan *plan);

/* d's DeviceExtra, allocated if it has none; NULL without memory. It is
 * freed again when the last thing in it goes. */
DeviceExtra *device_extra(Device *d);
/* Frees d's DeviceExtra once nothing is left in it. */
void device_extra_trim(Device *d);
/* A fresh retry budget. */
void device_reset_retries(Device *d);

/* What the disk held when its new medium was seen, until its pass takes
 * it: only those values are the admin's from before the change. */
typedef struct MediaSnapshot {
        dev_t devnum;
        LiveValue live[TUNABLES_MAX];
} MediaSnapshot;

MediaSnapshot *device_media_find(DeviceContext *c, dev_t devnum);
void device_media_drop(DeviceContext *c, dev_t devnum);

/* The text is only for status: without memory for it the device goes on
 * without one. */
_printf_(2, 3) void device_set_errorf(Device *d, const char *format, ...);
void device_set_error(Device *d, int error, const char *what);
/* Back to base: no state machine, and no flips to remember. */
void device_dynamic_drop(Device *d);
/* Takes d out of the table and marks it gone; it is freed after the
 * dispatch (devices_free_forgotten()), so a caller's pointer stays good
 * until it returns. drop_state: its queue is gone, so is its record.
 * -ENOMEM (no room in c->forgotten): nothing is done. */
_must_check_ int device_forget(DeviceContext *c, Device *d, bool drop_state);
