/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The types of device.h, apart from its functions: device-internal.h
 * (what a Device holds) needs them, and including device.h would make it
 * depend on device.c, which includes it. */

#include <sys/types.h>
#include <systemd/sd-event.h>

#include "apply.h"
#include "classify.h"
#include "config.h"
#include "conflicts.h"
#include "device-table.h"
#include "dynamic.h"
#include "facts.h"
#include "intern.h"
#include "plan.h"
#include "policy.h"
#include "report.h"
#include "roots.h"
#include "sample.h"
#include "state-file.h"
#include "trial-device.h"
#include "util.h"

typedef struct Device Device;
struct ApplyJob;

/* Called when an event source of the devices' (a retry) or the tick's
 * fails fatally (-ENOMEM): the manager's to end the loop with
 * (manager_fatal()). */
typedef void (*DeviceFatal)(void *userdata, int r);

/* What the devices' files (device*.c, drift.c, conflicts-report.c) work
 * in: the devices and what they own, and what they read of the manager's
 * (pointers, which stay valid for the manager's life). The Manager holds
 * it (m->ctx); these files never see the Manager, which is above them. */
typedef struct DeviceContext {
        /* the manager's */
        const Roots *roots;
        const Config *config;           /* swapped in place at a reload */
        PolicySet *const *policies;     /* the set in force: replaced at a reload */
        KernelCaps *caps;               /* devices' passes learn into it */
        StateDir *state;
        struct Applier *applier;
        sd_event *event;                /* NULL without a loop (--once) */
        bool dry_run;                   /* --dry-run */
        bool once;                      /* --once: no loop, a retry waits in place */
        DeviceFatal fatal;
        void *userdata;                 /* fatal's */

        /* the devices' */
        DeviceTable devices;
        Device **forgotten;             /* devices forgotten in this dispatch, freed after it */
        size_t n_forgotten, n_forgotten_allocated;
        PlanBuffer scratch;             /* where decide() and apply work; devices keep a shared copy */
        InternTable facts;              /* of facts_intern_type */
        InternTable plans;              /* of plan_intern_type */
        InternTable kinds;              /* of kind_intern_type: pairs of the two */
        MajorCache majors;              /* <proc>/devices, dropped after each dispatch and scan (manager.c) */
        ApplyStats writes;
        struct MediaSnapshot *media;    /* disks whose new medium's pass is not submitted yet */
        size_t n_media;
        char **v1_pending;              /* disks with a record of the first format not taken over: held */
        ConflictSet conflicts;          /* the other writers, as last scanned (conflicts-report.c) */
        uint64_t conflicts_usec;        /* when; 0: never, or the scan failed */
        unsigned restore_left;          /* values a stop could not put back */
        bool paused_all;
        bool stopping;                  /* the loop is over: the stop's put-backs run */
        bool redecide;                  /* kernel capabilities changed: decide all again (the manager's) */
        size_t drift_cursor;            /* next table slot the drift check reads */
        TrialMemory trial_memory;       /* verdicts remembered (config->trial_memory's), loaded at start */
} DeviceContext;

/* Policy values are written: neither --dry-run nor mode=observe. */
static inline bool device_context_writes(const DeviceContext *c) {
        return !c->dry_run && !c->config->observe;
}
/* What blkpolicyd changed may be put back: not --dry-run (which writes
 * nothing at all). mode=observe puts back what an earlier run changed. */
static inline bool device_context_restores(const DeviceContext *c) {
        return !c->dry_run;
}

#define FLIP_HISTORY 8

typedef struct FlipRecord {
        uint32_t tick;
        float uptime_s;
        float cost_ms;
        bool to_busy;
        char reason[64];        /* the full text is in the log */
} FlipRecord;

/* What flips leave on a device: allocated at its first flip, since most
 * devices never flip, and kept while the device has a DeviceDynamic. A
 * flip in progress is the sampler's. */
typedef struct DeviceFlips {
        FlipRecord history[FLIP_HISTORY];       /* ring of the last flips, for explain */
        float cost_ms;          /* time spent applying flips */
        uint8_t n_history, history_pos;
} DeviceFlips;

/* Only devices whose policy has [Dynamic] carry this, 24 bytes (a 32-byte
 * chunk): what only some states need is apart (DynExtra), and so is what
 * flips leave (device_flips()), since most devices never flip. */
typedef struct DeviceDynamic {
        DynState state;
} DeviceDynamic;
