/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A device's passes: decide, then apply (on the loop for a look, in the
 * applier for writes), retry what was transient, flip its dynamic state,
 * and take the pass back when the applier is done. Per-device failures
 * are logged "…, ignoring"; only -ENOMEM is returned. */
#include <assert.h>
#include <time.h>

#include "applier.h"
#include "apply.h"
#include "classify.h"
#include "decide.h"
#include "device-internal.h"
#include "device-trial.h"
#include "device.h"
#include "log.h"
#include "shared.h"
#include "util.h"

/* ENOENT while add_disk() finishes: 10, 20, 40 ... 640 ms, then give up. */
#define RETRY_MAX 7
#define RETRY_BASE_USEC 10000ULL

static bool device_excluded(const DeviceContext *c, const Device *d) {
        return strv_fnmatch(c->config->exclude, d->name);
}

DecideInput device_decide_input(const DeviceContext *c, const Device *d, DeviceFacts *view) {
        DecideInput in = { .facts = device_facts(d, view), .caps = c->caps, .policies = *c->policies,
                           .excluded = device_excluded(c, d), .busy = d->dynamic && d->dynamic->state.busy };

        device_trial_input(d, &in);
        return in;
}

static void classes_format(ClassSet classes, char *buf, size_t size) {
        size_t n = 0;

        buf[0] = 0;
        for (int c = 0; c < _CLASS_MAX && n < size; c++)
                if (classes & CLASS_BIT(c))
                        n += (size_t) snprintf(buf + n, size - n, "%s%s", n ? "," : "", class_to_string(c));
}

static void log_item(const Device *d, const PlanItem *it, const char *why_not) {
        const char *attr = tunables[it->tunable].attr;
        LogDeviceEvent e = { .message_id = MESSAGE_ID_SETTING_CHANGED, .device = d->name, .policy = it->source,
                             .setting = attr, .old = it->before, .new = it->target,
                             .result = item_result_to_string(it->result) };

        switch (it->result) {
        case RESULT_APPLIED:
                log_device_event(LOG_INFO, &e, "%s: %s %s -> %s (%s)", d->name, attr, it->before, it->current,
                                 it->source);
                break;
        case RESULT_PLANNED:
        case RESULT_OVERRIDDEN:         /* left alone: what a write would change, as planned */
                log_info("%s: %s would change %s -> %s (%s)%s%s", d->name, attr,
                         *it->current ? it->current : "(with the new scheduler)", it->target, it->source,
                         why_not ? ", " : "", why_not ?: "");
                break;
        case RESULT_UNCHANGED:
                log_debug("%s: %s already %s", d->name, attr, it->current);
                break;
        case RESULT_RETRY:
                log_info("%s: %s -> %s: %s, will retry", d->name, attr, it->target, it->error);
                break;
        default:
                log_device_event(LOG_WARNING, &e, "%s: %s -> %s %s: %s, ignoring", d->name, attr, it->target,
                                 item_result_to_string(it->result), it->error);
        }
}

static void log_plan(const Device *d, const char *why_not) {
        const Plan *plan = device_plan(d);
        char classes[256];

        classes_format(d->kind->facts->classes, classes, sizeof(classes));
        if (!plan->managed || !plan->policy) {
                log_info("%s: [%s] %s", d->name, classes, plan->reason);
                return;
        }
        log_info("%s: [%s] policy %s%s%s", d->name, classes, plan->policy, plan->reason ? "; " : "",
                 plan->reason ?: "");
        for (unsigned i = 0; i < plan->n_items; i++)
                log_item(d, &plan->items[i], why_not);
}

/* userdata: the device's DeviceExtra, which the pass may free */
static int on_retry(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        DeviceExtra *x = ASSERT_PTR(userdata);
        DeviceContext *c = x->context;  /* d may be forgotten by its pass */
        Device *d = x->device;
        int r;

        x->retry_source = sd_event_source_disable_unref(x->retry_source);
        r = device_process(c, d);
        /* x may be empty now (an event reset the retries meanwhile) or
         * freed (a pass forgot d): d is still good in this dispatch */
        device_extra_trim(d);
        if (r < 0)
                c->fatal(c->userdata, r);
        return r < 0 ? r : 0;
}

static int device_schedule_retry(DeviceContext *c, Device *d) {
        DeviceExtra *x = device_extra(d);
        uint64_t delay;
        int r;

        if (!x)
                return -ENOMEM;
        /* counted up to RETRY_MAX + 1 and no further: a byte must not wrap
         * back to retrying, nor the shift below pass 63 */
        if (x->retries >= RETRY_MAX) {
                x->retries = RETRY_MAX + 1;
                device_set_errorf(d, "gave up after %d retries", RETRY_MAX);
                log_warning("%s: gave up after %d retries, ignoring", d->name, RETRY_MAX);
                return 0;
        }
        delay = RETRY_BASE_USEC << x->retries++;
        if (c->once) {
                /* no loop: wait here, bounded by RETRY_MAX */
                struct timespec ts = { .tv_sec = (time_t) (delay / 1000000), .tv_nsec = (long) (delay % 1000000) * 1000 };
                (void) nanosleep(&ts, NULL);
                return device_process(c, d);
        }
        if (x->retry_source)
                return 0;
        x->context = c;
        x->device = d;
        r = sd_event_add_time_relative(c->event, &x->retry_source, CLOCK_MONOTONIC, delay, 1000, on_retry, x);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_warning_errno(r, "%s: cannot schedule a retry, ignoring: %m", d->name);
        return 0;
}

static int device_keep_plan(DeviceContext *c, Device *d, const Plan *plan) {
        const Plan *kept = intern_ref(&c->plans, plan), *old = d->kind->plan;

        if (!kept)
                return -ENOMEM;
        if (device_set_kind(c, d, d->kind->facts, kept) < 0) {
                intern_unref(&c->plans, kept);
                return -ENOMEM;
        }
        intern_unref(&c->plans, old);
        return 0;
}

/* -ENOMEM: not overridden, which would write over the admin's change. */
static int device_note_override(Device *d, const Plan *plan, const ApplyOutcome *out) {
        const PlanItem *it = plan ? plan_find(plan, (unsigned) out->overridden) : NULL;
        char *note;

        if (asprintf(&note, "%s changed to %s (blkpolicyd wanted %s)", tunables[out->overridden].attr,
                     out->overridden_live, it ? it->target : "?") < 0 ||
            device_set_override(d, note) < 0)
                return -ENOMEM;
        return 0;
}

/* What apply found that the device must show: a record that could not be
 * saved, values not put back, and the admin's changes (overridden). */
static int device_note_outcome(Device *d, const Plan *plan, const ApplyOutcome *out, bool writes, bool take_over) {
        if (out->record_error)
                device_set_error(d, out->record_error, "cannot save the state record, nothing written");
        else if (out->restore_failed)
                device_set_errorf(d, "%u value(s) could not be put back", out->restore_failed);
        /* a pass from before new media saw the old medium's admin: no override of the new one */
        if (out->overridden >= 0 && writes && !take_over && !device_overridden(d) && !d->new_media)
                return device_note_override(d, plan, out);
        return 0;
}

/* A paused or overridden device, or a dry run: only looked at, on the loop
 * (reads only, microseconds). */
static int device_plan_only(DeviceContext *c, Device *d, Plan *plan) {
        ApplyRequest req = { .roots = c->roots, .dev = d->name, .record = &d->record,
                             .kernel_version = c->caps->version };
        ApplyOutcome out;
        int r = apply_device(&req, plan, &out);

        return device_note_outcome(d, plan, &out, false, false) < 0 ? -ENOMEM : r;
}

/* The job for the applier: copies of the plan and the record. */
static int device_submit(DeviceContext *c, Device *d, const Plan *plan, bool take_over, bool restore) {
        ApplyJob *j;

        /* one pass per device at a time: its writes stay in order, and the
         * pass that comes back is the one the device waits for */
        assert(!d->job);
        j = applier_job_new(c->applier, d->name);
        if (!j)
                return -ENOMEM;
        j->devnum = device_devnum(d);
        j->queue_id = d->record.id.queue_id;
        j->take_over = take_over;
        j->probe_dispatch_direct = c->caps->dispatch_direct != TRISTATE_YES;   /* a yes is for good */
        memcpy(j->kernel_version, c->caps->version, sizeof(j->kernel_version));
        j->new_media = d->new_media;
        if (d->new_media) {
                const MediaSnapshot *s = device_media_find(c, device_devnum(d));

                if (s) {
                        memcpy(j->media_live, s->live, sizeof(j->media_live));
                        j->has_media_live = true;
                }
                device_media_drop(c, device_devnum(d));
        }
        d->new_media = false;
        j->restore = restore;
        if (plan)
                applier_job_set_plan(j, plan);
        if (device_record_copy(&d->record, &j->record) < 0) {
                applier_job_free(c->applier, j);
                return -ENOMEM;
        }
        d->job = true;
        applier_submit(c->applier, j);
        return 0;
}

/* The end of a pass, on the loop: keep the plan, then what its result
 * asks for. May forget d. */
static int device_finish(DeviceContext *c, Device *d, const Plan *plan, int r) {
        if (device_keep_plan(c, d, plan) < 0 || r == -ENOMEM)
                return -ENOMEM;
        if (r == -ENODEV) {
                log_info("%s: gone while being set up", d->name);
                return device_forget(c, d, true);
        }
        log_plan(d, device_write_why_not(c, d));
        if (r == -EAGAIN)
                return device_schedule_retry(c, d);
        device_reset_retries(d);
        return 0;
}

/* mode=observe puts back what an earlier run in enforce mode changed, on
 * every disk it decides: at start, at reload and when a disk appears.
 * An overridden disk too: what the admin changed is theirs (reconcile
 * leaves it and drops the claim), what blkpolicyd left there goes back.
 * A paused one stays as it is until resume. */
static bool device_observes_with_record(const DeviceContext *c, const Device *d) {
        return !device_context_writes(c) && device_context_restores(c) && !device_is_paused(c, d) &&
               !d->record_unreadable &&
               !d->job && !device_record_empty(&d->record);
}

static bool device_writes(const DeviceContext *c, const Device *d) {
        return device_context_writes(c) && !device_is_held(c, d) && !d->record_unreadable;
}

/* An overridden device no policy wants anything of any more (removed,
 * excluded): what the
 * admin changed stays theirs (reconcile leaves it), but what blkpolicyd
 * still owns there goes back. A paused one stays as it is until resume. */
static bool device_gives_back(const DeviceContext *c, const Device *d, const Plan *plan) {
        return (!plan->managed || plan->n_items == 0) && device_context_restores(c) && device_overridden(d) &&
               !device_is_paused(c, d) &&
               !d->record_unreadable && !device_record_empty(&d->record);
}

/* decide, then apply: on the loop for a look (dry run, held, or look_only:
 * after a put-back, never another), in the applier for writes. decide
 * works in c->scratch; the device keeps a copy shared with the devices
 * that got the same. */
static int device_process_full(DeviceContext *c, Device *d, bool take_over, bool look_only) {
        DeviceFacts view;
        DecideInput in = device_decide_input(c, d, &view);
        Plan *plan = plan_buffer_init(&c->scratch);
        int r = 0, k;

        if (d->gone)
                return 0;       /* forgotten earlier in this dispatch (a drain, a rescan) */
        if (d->job) {
                /* one pass at a time: this one is decided when the running one is back */
                d->reprocess = true;
                d->reprocess_take_over |= take_over;
                return 0;
        }
        decide(&in, plan);
        /* a trial that may not run any more puts its incumbent back: decided again */
        k = device_trial_after_decide(c, d, plan);
        if (k < 0)
                return k;
        if (k > 0) {
                device_trial_input(d, &in);
                decide(&in, plan);
        }
        if (!plan->managed || !plan->dynamic)
                device_dynamic_drop(d);         /* no state machine: back to base */
        else if (!d->dynamic && !(d->dynamic = calloc(1, sizeof(DeviceDynamic))))
                r = -ENOMEM;
        else
                r = dyn_state_fit(&d->dynamic->state, plan->dynamic);
        /* an unmanaged device still goes through apply: it puts back what
         * blkpolicyd changed while a policy wanted it */
        if (r == 0 && (plan->managed || !device_record_empty(&d->record))) {
                if (!look_only && (device_writes(c, d) || device_gives_back(c, d, plan))) {
                        r = device_submit(c, d, plan, take_over, false);
                        if (r == 0)
                                return 0;       /* device_apply_done() goes on */
                } else
                        r = device_plan_only(c, d, plan);
        }
        k = device_finish(c, d, plan, r);
        if (k < 0 || r < 0 || d->gone)
                return k;
        /* one put-back per decision: one that leaves values changed (a
         * write refused, a value not kept) is not tried again until the
         * next event, reload or resume */
        return !look_only && device_observes_with_record(c, d) ? device_restore(c, d) : 0;
}

int device_process(DeviceContext *c, Device *d) {
        return device_process_full(c, d, false, false);
}

int device_process_again(DeviceContext *c, Device *d) {
        device_reset_retries(d);
        return device_process_full(c, d, true, false);
}

int device_restore(DeviceContext *c, Device *d) {
        if (d->gone || device_record_empty(&d->record) || !device_context_restores(c))
                return 0;
        if (d->job) {
                /* one pass at a time: the put-back follows the running one,
                 * from the record it brings back (a restore's waiter waits
                 * for it too: it is submitted from that pass's return) */
                d->restore_pending = true;
                return 0;
        }
        return device_submit(c, d, NULL, false, true);
}

/* A put-back asked for while the pass that just came back ran. */
static int device_restore_deferred(DeviceContext *c, Device *d) {
        d->restore_pending = false;
        return device_restore(c, d);
}

/* A put-back changes what a look sees: where the next pass only looks
 * (observe, paused), the plan must say what sysfs holds after it, pending
 * changes and all, not what the look before it saw. A look, never a pass
 * that may put back again. */
static bool device_looks_after_restore(const DeviceContext *c, const Device *d) {
        return !device_context_writes(c) || device_is_paused(c, d);
}

/* After a put-back: an event that asked for d while it ran is decided in
 * full (it may put back again: it is the event's, one each); otherwise
 * only a look, where one is due. */
static int device_after_restore(DeviceContext *c, Device *d) {
        bool take_over = d->reprocess_take_over;

        if (c->stopping)
                return 0;
        if (d->restore_pending)
                return device_restore_deferred(c, d);
        if (d->reprocess) {
                d->reprocess = d->reprocess_take_over = false;
                return device_process_full(c, d, take_over, false);
        }
        return device_looks_after_restore(c, d) ? device_process_full(c, d, false, true) : 0;
}

static int device_restore_done(DeviceContext *c, Device *d, const ApplyJob *j) {
        if (j->result == -ENODEV) {
                (void) state_remove(c->state, d->record.id.major, d->record.id.minor);
                device_record_done(&d->record);
                return 0;
        }
        if (j->out.restored > 0)
                log_info("%s: put back %u original value(s)", d->name, j->out.restored);
        if (!device_record_empty(&d->record)) {
                log_warning("%s: %u value(s) not put back; their record stays in %s/devices for "
                            "'blkpolicyd --restore'", d->name, device_record_count(&d->record), c->state->path);
                c->restore_left += device_record_count(&d->record);
        }
        return device_after_restore(c, d);
}

/* A pass that switched a device to mq-deadline saw whether the kernel has
 * dispatch_direct, whatever became of the device since; when that news
 * arrives, decisions that wanted it change. */
static void device_learn_caps(DeviceContext *c, const ApplyJob *j) {
        if (!kernel_caps_note(c->caps, j->out.dispatch_direct))
                return;
        log_info("mq-deadline dispatch_direct: %s (seen on %s)",
                 c->caps->dispatch_direct == TRISTATE_YES ? "available" : "not available", j->dev);
        if (c->caps->dispatch_direct == TRISTATE_YES)
                c->redecide = true;
}

/* A job is back from the applier, on the loop. */
int device_apply_done(DeviceContext *c, ApplyJob *j) {
        Device *d = device_get(c, j->devnum);
        DeviceIdentity id;
        int r;

        c->writes.scheduler_writes += j->stats.scheduler_writes;
        c->writes.other_writes += j->stats.other_writes;
        c->writes.write_errors += j->stats.write_errors;
        c->writes.kernel_resets += j->stats.kernel_resets;
        device_learn_caps(c, j);
        if (!d || !d->job || d->record.id.queue_id != j->queue_id) {
                applier_job_free(c->applier, j);    /* its device was forgotten meanwhile */
                return 0;
        }
        d->job = false;
        id = d->record.id;              /* the identity of now (diskseq may have moved) */
        device_record_done(&d->record);
        d->record = j->record;
        d->record.id = id;
        j->record = (DeviceRecord) {};
        if (j->restore) {
                r = device_restore_done(c, d, j);
                applier_job_free(c->applier, j);
                return r < 0 ? r : 0;
        }
        /* the job's plan: what it wanted, where the device's is the one before */
        r = device_note_outcome(d, j->plan, &j->out, true, j->take_over);
        if (r == 0)
                r = device_finish(c, d, j->plan, j->result);
        applier_job_free(c->applier, j);
        if (r < 0)
                return r;
        if (!d->gone && d->restore_pending && !d->job) {
                /* the put-back first; an event meanwhile is decided after it */
                r = device_restore_deferred(c, d);
                return r < 0 ? r : 1;
        }
        if (!d->gone && d->reprocess && !d->job) {
                bool take_over = d->reprocess_take_over;

                d->reprocess = d->reprocess_take_over = false;
                r = device_process_full(c, d, take_over, false);
                if (r < 0)
                        return r;
        }
        return 1;
}

void device_flip_applied(Device *d, const DynDecision *dec, uint64_t tick, uint64_t uptime_usec, double ms) {
        DeviceFlips *y = d->dynamic && d->extra ? d->extra->flips : NULL;
        FlipRecord *f;

        if (!y)
                return;
        f = &y->history[y->history_pos];
        *f = (FlipRecord) { .tick = (uint32_t) tick, .uptime_s = (float) uptime_usec / 1e6f,
                            .to_busy = dec->to_busy, .cost_ms = (float) ms };
        (void) strscpy(f->reason, sizeof(f->reason), dec->reason);
        y->history_pos = (y->history_pos + 1) % FLIP_HISTORY;
        if (y->n_history < FLIP_HISTORY)
                y->n_history++;
        y->cost_ms += (float) ms;
        log_debug("%s: flip applied in %.2f ms", d->name, ms);
}

/* dynamic_step() flipped d->dyn.busy: apply the other settings set. What
 * it cost (a scheduler switch freezes the queue) is the caller's to
 * account when the pass is done. */
int device_flip(DeviceContext *c, Device *d, const DynDecision *dec) {
        int r;

        LogDeviceEvent e = { .message_id = MESSAGE_ID_FLIP, .device = d->name, .policy = device_plan(d)->dynamic_source,
                             .setting = "state", .old = dec->to_busy ? "base" : "busy",
                             .new = dec->to_busy ? "busy" : "base", .result = dec->reason };

        log_device_event(LOG_INFO, &e, "%s: %s -> %s: %s (%s)", d->name, e.old, e.new, dec->reason,
                         device_plan(d)->dynamic_source);
        if (d->dynamic) {
                DeviceExtra *x = device_extra(d);

                /* the ring too: a flip that cannot be remembered is not made */
                if (!x || (!x->flips && !(x->flips = calloc(1, sizeof(DeviceFlips)))))
                        return -ENOMEM;
        }
        r = device_process(c, d);
        if (r < 0)
                return r;
        /* device_process may have forgotten a vanished device, or dropped
         * its state machine (and the ring with it) */
        if (d->gone || !d->dynamic || !d->extra || !d->extra->flips)
                return DEVICE_FLIP_DROPPED;
        return d->job ? DEVICE_FLIP_RUNNING : DEVICE_FLIP_DONE;
}

int device_process_all(DeviceContext *c) {
        _cleanup_free_ Device **sorted = NULL;
        int n;

        /* processing a device may forget it, never another one, so the
         * sorted snapshot stays valid */
        n = devices_sorted(c, &sorted);
        if (n < 0)
                return n;
        for (int i = 0; i < n; i++) {
                int r = device_process(c, sorted[i]);

                if (r < 0)
                        return r;
        }
        return 0;
}
