/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The applier: apply passes off the event loop. A scheduler write is a
 * queue freeze plus an RCU grace period, 10-70 ms; one after the other,
 * 1000 new disks took 26 s with the loop blocked (the socket unanswered,
 * the watchdog unfed), while concurrent writers share grace periods.
 *
 * The loop thread owns every Device and all state. It hands a job (a copy
 * of the device's plan and record) to a small pool of worker threads,
 * which run apply_device() on the copy: read, reconcile, save the record,
 * write. The finished job comes back to the loop through an eventfd, and
 * the loop installs the record and the results. One job per device at a
 * time, so a device's writes stay in order; what is asked of a device
 * while its job runs is decided again when the job is back. And one per
 * device number: a disk added again at the number of one whose pass still
 * runs waits for it, as both passes save to the same record file.
 *
 * Workers start when jobs wait and none is idle, up to `parallelism`, and
 * exit after a second without work: an idle daemon has no threads. Their
 * stacks are the applier's own mappings, unmapped when they are joined,
 * so the memory of a storm is given back. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "apply.h"

typedef struct ApplyJob {
        struct ApplyJob *next;
        dev_t devnum;
        uint64_t queue_id;              /* the device's identity when submitted */
        bool take_over;
        bool new_media;
        bool has_media_live;
        bool probe_dispatch_direct;     /* ApplyRequest's */
        unsigned kernel_version[3];     /* ApplyRequest's */
        LiveValue media_live[TUNABLES_MAX];     /* new_media: the values when the change was seen */
        bool restore;                   /* nothing wanted: put back (stop, restore) */
        Plan *plan;                     /* NULL for a restore, else into plan_copy, whose
                                         * policy set the job holds (applier_job_set_plan) */
        PlanBuffer plan_copy;
        DeviceRecord record;            /* in: the device's; out: as last saved */
        ApplyStats stats;
        ApplyOutcome out;
        int result;                     /* of apply_device() */
        uint64_t start_usec, end_usec;  /* CLOCK_MONOTONIC, in the worker */
        size_t map_size;                /* the job is a mapping of its own (applier.c) */
        uint64_t epoch;                 /* applier.c's: which waiters it holds (applier_wait) */
        char dev[];
} ApplyJob;

typedef struct Applier Applier;

/* Called in the loop thread for every finished job; it owns the job. */
typedef void (*ApplierDone)(ApplyJob *job, void *userdata);

int applier_new(const Roots *roots, const StateDir *state, unsigned parallelism, ApplierDone done, void *userdata,
                Applier **ret);
Applier *applier_free(Applier *a);
/* With an event loop, finished jobs are handed back from it; without one
 * (--once) only applier_drain() hands them back. */
int applier_attach_event(Applier *a, sd_event *e);

/* job->dev, devnum, queue_id, plan, record filled by the caller, who gives
 * it up. */
ApplyJob *applier_job_new(Applier *a, const char *dev);
/* j's own copy of plan, and a reference on the policy set it points into. */
void applier_job_set_plan(ApplyJob *j, const Plan *plan);
/* In the loop thread, as applier_job_new(); NULL is fine. */
ApplyJob *applier_job_free(Applier *a, ApplyJob *j);
void applier_submit(Applier *a, ApplyJob *j);
/* Drops the jobs not started yet for devnum (the device is gone); a
 * running one comes back as usual. Returns how many were dropped. */
unsigned applier_cancel(Applier *a, dev_t devnum);
/* Waits until no job waits or runs, handing every finished one back
 * (including any the callbacks submit meanwhile). Blocks the loop: for
 * --once and the stop, never for a request (applier_wait()). */
void applier_drain(Applier *a);

/* The same end without blocking the loop: done(userdata, 0) is called
 * from the loop once every job submitted before this call is back, and
 * with them the jobs their callbacks submit (a device's pass decided
 * again when its running one came back: the decision a reload asked
 * for). Jobs submitted after it are not waited for, so a steady stream
 * of new passes cannot hold it. Never called from within applier_wait(),
 * even when nothing is out; waiters are done in the order they were
 * made. -ENOMEM: done is not called. */
typedef void (*ApplierWaitDone)(void *userdata, int r);
int applier_wait(Applier *a, ApplierWaitDone done, void *userdata);
/* Every waiter not done yet gets done(userdata, -ECANCELED), now: the
 * stop (the loop is over; what they would answer goes nowhere). */
void applier_cancel_waiters(Applier *a);
bool applier_idle(Applier *a);
