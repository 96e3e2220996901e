/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One device's life in the daemon: classify it (refresh), decide and apply
 * (process), retry what was transient, flip its dynamic state, forget it.
 * Per-device failures are logged "…, ignoring"; only -ENOMEM is fatal. */
#include <inttypes.h>
#include <stdarg.h>
#include <sys/sysmacros.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "applier.h"
#include "apply.h"
#include "classify.h"
#include "device.h"
#include "log.h"
#include "manager.h"
#include "record.h"
#include "shared.h"
#include "util.h"

/* ENOENT while add_disk() finishes: 10, 20, 40 ... 640 ms, then give up. */
#define RETRY_MAX 7
#define RETRY_BASE_USEC 10000ULL

struct Device {
        Manager *manager;
        DevNode node;           /* in m->devices, by number */
        /* shared (intern.h): devices alike have the same facts and get the
         * same plan. The shared facts have name, number, diskseq and
         * properties blank: device_facts() puts this device's in. */
        const DeviceFacts *facts;
        const Plan *plan;
        char **properties;      /* the udev properties some policy names */
        char *error;            /* last classify/apply error; NULL when none */
        DeviceRecord record;    /* identity (number, queue, diskseq) and what blkpolicyd changed */
        sd_event_source *retry_source;
        SampleState sample;     /* the sampler's */
        DeviceDynamic *dynamic; /* NULL unless the policy has [Dynamic] */
        char *override_note;    /* what someone else changed; set while overridden (left alone) */
        unsigned retries;
        /* together at the end: a bool between pointers costs 7 bytes of padding */
        bool seen;              /* marks survivors during a rescan */
        bool paused;            /* pause DEV: left as it is until resume */
        bool record_unreadable; /* its state record could not be read: nothing is written */
        bool job;               /* an apply pass of its own runs in the applier */
        bool reprocess;         /* asked for again while it ran: decide again when it is back */
        bool reprocess_take_over;
        bool new_media;         /* diskseq moved: the next pass adopts what the admin set */
        /* as long as it is (most are under 16 bytes, the kernel allows 31):
         * a refresh replaces the facts of the same name only */
        char name[];
};

static DeviceDynamic *device_dynamic_free(DeviceDynamic *y) {
        if (!y)
                return NULL;
        dyn_state_done(&y->state);
        free(y->history);
        free(y->flip);
        free(y);
        return NULL;
}

Device *device_of_node(DevNode *n) {
        return n ? (Device *) ((char *) n - offsetof(Device, node)) : NULL;
}

Device *device_get(const Manager *m, dev_t devnum) {
        return device_of_node(device_table_get(&m->devices, devnum));
}

Device *device_find_name(const Manager *m, const char *name) {
        DEVICE_FOREACH(d, m)
                if (streq(d->name, name))
                        return d;
        return NULL;
}

static int device_compare(const void *a, const void *b) {
        return strcmp((*(Device *const *) a)->name, (*(Device *const *) b)->name);
}

int devices_sorted(const Manager *m, Device ***ret) {
        Device **l = calloc(m->devices.n_devices + 1, sizeof(Device *));
        size_t n = 0;

        if (!l)
                return -ENOMEM;
        DEVICE_FOREACH(d, m)
                l[n++] = d;
        qsort(l, n, sizeof(Device *), device_compare);
        *ret = l;
        return (int) n;
}

const char *device_name(const Device *d) {
        return d->name;
}

dev_t device_devnum(const Device *d) {
        return d->node.devnum;
}

const Plan *device_plan(const Device *d) {
        return d->plan;
}

const DeviceRecord *device_record(const Device *d) {
        return &d->record;
}

DeviceDynamic *device_dynamic(const Device *d) {
        return d->dynamic;
}

SampleState *device_sample_state(Device *d) {
        return &d->sample;
}

bool device_overridden(const Device *d) {
        return d->override_note;
}

const char *device_override_note(const Device *d) {
        return d->override_note;
}

bool device_is_paused(const Manager *m, const Device *d) {
        return m->paused_all || d->paused;
}

bool device_pass_pending(const Device *d) {
        return d->job || d->retry_source;
}

void device_pause(Device *d) {
        d->paused = true;
}

void device_set_override(Device *d, char *note) {
        free(d->override_note);
        d->override_note = note;
}

void device_set_seen(Device *d, bool seen) {
        d->seen = seen;
}

bool device_seen(const Device *d) {
        return d->seen;
}

static bool device_excluded(const Manager *m, const Device *d) {
        return strv_fnmatch(m->config.exclude, d->name);
}

/* The text is only for status: without memory for it the device goes on
 * without one. */
_printf_(2, 3) static void device_set_errorf(Device *d, const char *format, ...) {
        va_list ap;

        d->error = mfree(d->error);
        va_start(ap, format);
        if (vasprintf(&d->error, format, ap) < 0)
                d->error = NULL;
        va_end(ap);
}

static void device_set_error(Device *d, int error, const char *what) {
        if (error == 0)
                d->error = mfree(d->error);
        else
                device_set_errorf(d, "%s: %s", what, strerror(error < 0 ? -error : error));
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
        char classes[256];

        classes_format(d->facts->classes, classes, sizeof(classes));
        if (!d->plan->managed || !d->plan->policy) {
                log_info("%s: [%s] %s", d->name, classes, d->plan->reason);
                return;
        }
        log_info("%s: [%s] policy %s%s%s", d->name, classes, d->plan->policy,
                 d->plan->reason ? "; " : "", d->plan->reason ?: "");
        for (unsigned i = 0; i < d->plan->n_items; i++)
                log_item(d, &d->plan->items[i], why_not);
}

static int read_facts(Manager *m, const char *name, DeviceFacts *f) {
        char **props = NULL;
        int r;

        r = classify_device(&m->roots, name, f);
        if (r < 0)
                return r;
        r = discover_properties(m->discover, name, m->policies->property_keys, &props);
        if (r < 0)
                return r;
        f->properties = props;
        return 0;
}

/* What the disk held when its new medium was seen, until its pass takes
 * it: only those values are the admin's from before the change. */
typedef struct MediaSnapshot {
        dev_t devnum;
        LiveValue live[TUNABLES_MAX];
} MediaSnapshot;

static MediaSnapshot *media_find(Manager *m, dev_t devnum) {
        for (size_t i = 0; i < m->n_media; i++)
                if (m->media[i].devnum == devnum)
                        return &m->media[i];
        return NULL;
}

static void media_drop(Manager *m, dev_t devnum) {
        MediaSnapshot *s = media_find(m, devnum);

        if (s)
                *s = m->media[--m->n_media];
}

/* A failure leaves no snapshot: the pass then adopts whatever it finds,
 * as before snapshots. */
static void media_snapshot(Manager *m, const Device *d) {
        MediaSnapshot *s = media_find(m, d->node.devnum);

        if (!s) {
                MediaSnapshot *grown = reallocarray(m->media, m->n_media + 1, sizeof(MediaSnapshot));

                if (!grown)
                        return;
                m->media = grown;
                s = &m->media[m->n_media++];
        }
        s->devnum = d->node.devnum;
        for (unsigned t = 0; t < n_tunables; t++) {
                int k = attr_read_current(&m->roots, d->name, t, s->live[t].value, sizeof(s->live[t].value));

                s->live[t].state = k == 0 ? LIVE_OK : k == -ENOENT ? LIVE_ABSENT : LIVE_UNKNOWN;
        }
}

void device_forget(Manager *m, Device *d, bool drop_state) {
        log_debug("%s: forgotten", d->name);
        media_drop(m, d->node.devnum);
        /* its queue is gone, and with it every value it had: the record is moot */
        if (drop_state && manager_restores(m))
                (void) state_remove(&m->state, d->record.id.major, d->record.id.minor);
        /* a pass still queued for it is moot; one running comes back to no device */
        if (d->job && applier_cancel(m->applier, d->node.devnum) > 0)
                log_info("%s: gone, dropped its queued pass", d->name);
        device_table_remove(&m->devices, &d->node);
        device_free(d);
}

static int on_retry(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Device *d = userdata;
        Manager *m = d->manager;        /* d may be forgotten by its pass */
        int r;

        d->retry_source = sd_event_source_disable_unref(d->retry_source);
        r = device_process(m, d);
        return r < 0 ? manager_fatal(m, r) : 0;
}

static int device_schedule_retry(Manager *m, Device *d) {
        uint64_t delay = RETRY_BASE_USEC << d->retries;
        int r;

        if (++d->retries > RETRY_MAX) {
                device_set_errorf(d, "gave up after %d retries", RETRY_MAX);
                log_warning("%s: gave up after %d retries, ignoring", d->name, RETRY_MAX);
                return 0;
        }
        if (m->options->mode == RUN_ONCE) {
                /* no loop: wait here, bounded by RETRY_MAX */
                struct timespec ts = { .tv_sec = (time_t) (delay / 1000000), .tv_nsec = (long) (delay % 1000000) * 1000 };
                (void) nanosleep(&ts, NULL);
                return device_process(m, d);
        }
        if (d->retry_source)
                return 0;
        r = sd_event_add_time_relative(m->event, &d->retry_source, CLOCK_MONOTONIC, delay, 1000, on_retry, d);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_warning_errno(r, "%s: cannot schedule a retry, ignoring: %m", d->name);
        return 0;
}

static void device_learn_caps(Manager *m, const Device *d);

static int device_keep_plan(Manager *m, Device *d, const Plan *plan) {
        const Plan *kept = intern_ref(&m->plans, plan);

        if (!kept)
                return -ENOMEM;
        intern_unref(&m->plans, d->plan);
        d->plan = kept;
        return 0;
}

static void device_note_override(Device *d, const ApplyOutcome *out) {
        const PlanItem *it = plan_find(d->plan, (unsigned) out->overridden);

        free(d->override_note);
        if (asprintf(&d->override_note, "%s changed to %s (blkpolicyd wanted %s)", tunables[out->overridden].attr,
                     out->overridden_live, it ? it->target : "?") < 0)
                d->override_note = NULL;
        log_notice("%s: %s; leaving it alone until 'blkpolicyctl resume %s' or new media", d->name,
                   d->override_note ?: "changed by someone else", d->name);
}

/* What apply found that the device must show: a record that could not be
 * saved, values not put back, and the admin's changes (overridden). */
static void device_note_outcome(Device *d, const ApplyOutcome *out, bool writes, bool take_over) {
        if (out->record_error)
                device_set_error(d, out->record_error, "cannot save the state record, nothing written");
        else if (out->restore_failed)
                device_set_errorf(d, "%u value(s) could not be put back", out->restore_failed);
        /* a pass from before new media saw the old medium's admin: no override of the new one */
        if (out->overridden >= 0 && writes && !take_over && !device_overridden(d) && !d->new_media)
                device_note_override(d, out);
}

/* A paused or overridden device, or a dry run: only looked at, on the loop
 * (reads only, microseconds). */
static int device_plan_only(Manager *m, Device *d, Plan *plan) {
        ApplyRequest req = { .roots = &m->roots, .dev = d->name, .record = &d->record };
        ApplyOutcome out;
        int r = apply_device(&req, plan, &out);

        device_note_outcome(d, &out, false, false);
        return r;
}

/* The job for the applier: copies of the plan and the record. */
static int device_submit(Manager *m, Device *d, const Plan *plan, bool take_over, bool restore) {
        ApplyJob *j = applier_job_new(d->name);

        if (!j)
                return -ENOMEM;
        j->devnum = d->node.devnum;
        j->queue_id = d->record.id.queue_id;
        j->take_over = take_over;
        j->new_media = d->new_media;
        if (d->new_media) {
                const MediaSnapshot *s = media_find(m, d->node.devnum);

                if (s) {
                        memcpy(j->media_live, s->live, sizeof(j->media_live));
                        j->has_media_live = true;
                }
                media_drop(m, d->node.devnum);
        }
        d->new_media = false;
        j->restore = restore;
        if (plan)
                j->plan = plan_buffer_copy(&j->plan_copy, plan);
        if (device_record_copy(&d->record, &j->record) < 0) {
                applier_job_free(j);
                return -ENOMEM;
        }
        d->job = true;
        applier_submit(m->applier, j);
        return 0;
}

/* Why a planned change was not made, for the log; NULL when it would be. */
static const char *device_why_not(const Manager *m, const Device *d) {
        if (m->options->dry_run)
                return "dry run";
        if (!manager_writes(m))
                return "mode=observe";
        if (d->paused || m->paused_all)
                return "paused";
        if (device_overridden(d))
                return "overridden";
        return d->record_unreadable ? "state record unreadable" : NULL;
}

/* The end of a pass, on the loop: keep the plan, then what its result
 * asks for. May forget d. */
static int device_finish(Manager *m, Device *d, const Plan *plan, int r) {
        if (device_keep_plan(m, d, plan) < 0 || r == -ENOMEM)
                return -ENOMEM;
        if (r == -ENODEV) {
                log_info("%s: gone while being set up", d->name);
                device_forget(m, d, true);
                return 0;
        }
        log_plan(d, device_why_not(m, d));
        if (r == -EAGAIN)
                return device_schedule_retry(m, d);
        d->retries = 0;
        if (d->plan->managed)
                device_learn_caps(m, d);
        return 0;
}

/* mode=observe puts back what an earlier run in enforce mode changed, on
 * every disk it decides: at start, at reload and when a disk appears. */
static bool device_observes_with_record(const Manager *m, const Device *d) {
        return !manager_writes(m) && manager_restores(m) && !device_is_held(m, d) && !d->record_unreadable &&
               !d->job && !device_record_empty(&d->record);
}

static bool device_writes(const Manager *m, const Device *d) {
        return manager_writes(m) && !device_is_held(m, d) && !d->record_unreadable;
}

/* An overridden device no policy wants anything of any more (removed,
 * excluded): what the
 * admin changed stays theirs (reconcile leaves it), but what blkpolicyd
 * still owns there goes back. A paused one stays as it is until resume. */
static bool device_gives_back(const Manager *m, const Device *d, const Plan *plan) {
        return (!plan->managed || plan->n_items == 0) && manager_restores(m) && device_overridden(d) &&
               !d->paused && !m->paused_all &&
               !d->record_unreadable && !device_record_empty(&d->record);
}

/* decide, then apply: on the loop for a look (dry run, held), in the
 * applier for writes. decide works in m->scratch; the device keeps a copy
 * shared with the devices that got the same. */
static int device_process_full(Manager *m, Device *d, bool take_over) {
        DeviceFacts view;
        DecideInput in = { .facts = device_facts(d, &view), .caps = &m->caps, .policies = m->policies,
                           .excluded = device_excluded(m, d), .busy = d->dynamic && d->dynamic->state.busy };
        Plan *plan = plan_buffer_init(&m->scratch);
        int r = 0, k;

        if (d->job) {
                /* one pass at a time: this one is decided when the running one is back */
                d->reprocess = true;
                d->reprocess_take_over |= take_over;
                return 0;
        }
        decide(&in, plan);
        if (!plan->managed || !plan->dynamic)
                d->dynamic = device_dynamic_free(d->dynamic);   /* no state machine: back to base */
        else if (!d->dynamic && !(d->dynamic = calloc(1, sizeof(DeviceDynamic))))
                r = -ENOMEM;
        else
                r = dyn_state_fit(&d->dynamic->state, plan->dynamic);
        /* an unmanaged device still goes through apply: it puts back what
         * blkpolicyd changed while a policy wanted it */
        if (r == 0 && (plan->managed || !device_record_empty(&d->record))) {
                if (device_writes(m, d) || device_gives_back(m, d, plan)) {
                        r = device_submit(m, d, plan, take_over, false);
                        if (r == 0)
                                return 0;       /* device_apply_done() goes on */
                } else
                        r = device_plan_only(m, d, plan);
        }
        k = device_finish(m, d, plan, r);
        if (k < 0 || r < 0)
                return k;       /* r < 0: d may be forgotten */
        return device_observes_with_record(m, d) ? device_restore(m, d) : 0;
}

int device_process(Manager *m, Device *d) {
        return device_process_full(m, d, false);
}

int device_process_again(Manager *m, Device *d) {
        d->retries = 0;
        return device_process_full(m, d, true);
}

int device_restore(Manager *m, Device *d) {
        if (device_record_empty(&d->record) || !manager_restores(m))
                return 0;
        return device_submit(m, d, NULL, false, true);
}

static void device_restore_done(Manager *m, Device *d, const ApplyJob *j) {
        if (j->result == -ENODEV) {
                (void) state_remove(&m->state, d->record.id.major, d->record.id.minor);
                device_record_done(&d->record);
                return;
        }
        if (j->out.restored > 0)
                log_info("%s: put back %u original value(s)", d->name, j->out.restored);
        if (!device_record_empty(&d->record)) {
                log_warning("%s: %u value(s) not put back; their record stays in %s/devices for "
                            "'blkpolicyd --restore'", d->name, d->record.n_attrs, m->state.path);
                m->restore_left += d->record.n_attrs;
        }
}

static int device_flip_done(Manager *m, Device *d, const ApplyJob *j);

/* A job is back from the applier, on the loop. */
int device_apply_done(Manager *m, ApplyJob *j) {
        Device *d = device_get(m, j->devnum);
        dev_t devnum = j->devnum;
        DeviceIdentity id;
        int r;

        m->writes.scheduler_writes += j->stats.scheduler_writes;
        m->writes.other_writes += j->stats.other_writes;
        m->writes.write_errors += j->stats.write_errors;
        if (!d || !d->job || d->record.id.queue_id != j->queue_id) {
                applier_job_free(j);    /* its device was forgotten meanwhile */
                return 0;
        }
        d->job = false;
        id = d->record.id;              /* the identity of now (diskseq may have moved) */
        device_record_done(&d->record);
        d->record = j->record;
        d->record.id = id;
        j->record = (DeviceRecord) {};
        if (j->restore) {
                device_restore_done(m, d, j);
                applier_job_free(j);
                return 0;
        }
        device_note_outcome(d, &j->out, true, j->take_over);
        r = device_flip_done(m, d, j);
        if (r >= 0)
                r = device_finish(m, d, j->plan, j->result);
        applier_job_free(j);
        if (r < 0)
                return r;
        d = device_get(m, devnum);      /* device_finish may forget it */
        if (d && d->reprocess && !d->job) {
                bool take_over = d->reprocess_take_over;

                d->reprocess = d->reprocess_take_over = false;
                r = device_process_full(m, d, take_over);
                if (r < 0)
                        return r;
        }
        return 1;
}

static int device_remember_flip(Manager *m, DeviceDynamic *y, const DynDecision *dec, double ms) {
        FlipRecord *f;

        if (!y->history && !(y->history = calloc(FLIP_HISTORY, sizeof(FlipRecord))))
                return -ENOMEM;
        f = &y->history[y->history_pos];
        *f = (FlipRecord) { .tick = (uint32_t) m->tick, .uptime_s = (float) manager_uptime_usec(m) / 1e6f,
                            .to_busy = dec->to_busy, .cost_ms = (float) ms };
        (void) strscpy(f->reason, sizeof(f->reason), dec->reason);
        y->history_pos = (y->history_pos + 1) % FLIP_HISTORY;
        if (y->n_history < FLIP_HISTORY)
                y->n_history++;
        return 0;
}

static int device_account_flip(Manager *m, Device *d, double ms) {
        _cleanup_free_ DynDecision *dec = d->dynamic->flip;

        d->dynamic->flip = NULL;
        d->dynamic->state.flip_cost_ms += ms;
        if (device_remember_flip(m, d->dynamic, dec, ms) < 0)
                return -ENOMEM;
        log_debug("%s: flip applied in %.2f ms", d->name, ms);
        return 0;
}

/* The flip's pass is back: what it cost is the worker's time on it. */
static int device_flip_done(Manager *m, Device *d, const ApplyJob *j) {
        if (!d->dynamic || !d->dynamic->flip)
                return 0;
        return device_account_flip(m, d, (double) (j->end_usec - j->start_usec) / 1000.0);
}

/* dynamic_step() flipped d->dyn.busy: apply the other settings set, and
 * account what it cost (a scheduler switch freezes the queue) when the
 * pass is done. */
int device_flip(Manager *m, Device *d, const DynDecision *dec) {
        uint64_t start = clock_usec(CLOCK_MONOTONIC);
        dev_t devnum = d->node.devnum;       /* d may be freed by device_process */
        int r;

        LogDeviceEvent e = { .message_id = MESSAGE_ID_FLIP, .device = d->name, .policy = d->plan->dynamic_source,
                             .setting = "state", .old = dec->to_busy ? "base" : "busy",
                             .new = dec->to_busy ? "busy" : "base", .result = dec->reason };

        log_device_event(LOG_INFO, &e, "%s: %s -> %s: %s (%s)", d->name, e.old, e.new, dec->reason,
                         d->plan->dynamic_source);
        if (d->dynamic) {
                free(d->dynamic->flip);
                d->dynamic->flip = memdup(dec, sizeof(*dec));
                if (!d->dynamic->flip)
                        return -ENOMEM;
        }
        r = device_process(m, d);
        if (r < 0)
                return r;
        /* device_process may have forgotten a vanished device: d is then gone */
        if (device_get(m, devnum) != d || !d->dynamic || !d->dynamic->flip || d->job)
                return 0;
        return device_account_flip(m, d, (double) (clock_usec(CLOCK_MONOTONIC) - start) / 1000.0); /* done on the loop */
}

/* A device that now runs mq-deadline shows whether the kernel has
 * dispatch_direct; when that news arrives, decisions that wanted it change. */
static void device_learn_caps(Manager *m, const Device *d) {
        const PlanItem *s = plan_find(d->plan, TUNABLE_SCHEDULER);

        if (!s || s->result != RESULT_APPLIED)
                return;
        if (!kernel_caps_learn(&m->caps, &m->roots, d->name, s->current))
                return;
        log_info("mq-deadline dispatch_direct: %s (seen on %s)",
                 m->caps.dispatch_direct == TRISTATE_YES ? "available" : "not available", d->name);
        if (m->caps.dispatch_direct == TRISTATE_YES)
                m->redecide = true;
}

int device_process_all(Manager *m) {
        _cleanup_free_ Device **sorted = NULL;
        int n;

        /* processing a device may forget it, never another one, so the
         * sorted snapshot stays valid */
        n = devices_sorted(m, &sorted);
        if (n < 0)
                return n;
        for (int i = 0; i < n; i++) {
                int r = device_process(m, sorted[i]);

                if (r < 0)
                        return r;
        }
        return 0;
}

/* Policies that name other udev properties: read what each device keeps
 * again, before deciding with them. */
int device_refresh_properties(Manager *m) {
        DEVICE_FOREACH(d, m) {
                char **props = NULL;
                int r = discover_properties(m->discover, d->name, m->policies->property_keys, &props);

                if (r < 0)
                        return r;
                strv_free(d->properties);
                d->properties = props;
        }
        return 0;
}

const DeviceFacts *device_facts(const Device *d, DeviceFacts *view) {
        *view = *d->facts;
        (void) strscpy(view->name, sizeof(view->name), d->name);     /* it came from a DeviceFacts */
        view->major = major(d->node.devnum);
        view->minor = minor(d->node.devnum);
        view->diskseq = d->record.id.diskseq;
        view->queue_id = d->record.id.queue_id;
        view->properties = d->properties;
        return view;
}

ReportDevice device_report_input(const Device *d, DeviceFacts *view) {
        return (ReportDevice) { .facts = device_facts(d, view), .plan = d->plan, .error = d->error,
                                .dyn = d->dynamic ? &d->dynamic->state : NULL,
                                .signals = d->sample.signals.valid ? &d->sample.signals : NULL };
}

bool device_is_held(const Manager *m, const Device *d) {
        return m->paused_all || d->paused || device_overridden(d);
}

/* Paused or overridden: resume ends both. */
void device_clear_hold(Device *d) {
        d->paused = false;
        d->override_note = mfree(d->override_note);
}


Device *device_free(Device *d) {
        if (!d)
                return NULL;
        sd_event_source_disable_unref(d->retry_source);
        intern_unref(&d->manager->facts, d->facts);
        strv_free(d->properties);
        intern_unref(&d->manager->plans, d->plan);
        device_dynamic_free(d->dynamic);
        device_record_done(&d->record);
        free(d->override_note);
        free(d->error);
        free(d);
        return NULL;
}

/* Takes the properties of *f (also on failure), shares the rest. */
static int device_set_facts(Manager *m, Device *d, DeviceFacts *f) {
        const DeviceFacts *shared = intern_ref(&m->facts, f);

        strv_free(d->properties);
        d->properties = f->properties;
        f->properties = NULL;
        if (!shared)
                return -ENOMEM;
        intern_unref(&m->facts, d->facts);
        d->facts = shared;
        d->record.id.diskseq = f->diskseq;
        d->record.id.queue_id = f->queue_id;
        return 0;
}

/* The record an earlier run left for this queue, if any. A record for
 * another queue at the same number belonged to a disk that is gone. */
static int device_load_record(Manager *m, Device *d) {
        DeviceRecord found = {};
        int r;

        if (strv_contains(m->v1_pending, d->name)) {
                /* its originals are in a file not taken over yet */
                d->record_unreadable = true;
                device_set_error(d, -EBADMSG, "its state record of the first format is not taken over, nothing "
                                              "is written");
                return 0;
        }
        r = state_load(&m->state, d->record.id.major, d->record.id.minor, &found);

        if (r == -ENOENT)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r == -EBADMSG) {
                log_warning("%s: %s/devices/%u:%u is not a state record, ignoring it: the values blkpolicyd "
                            "finds now count as the originals", d->name, m->state.path, d->record.id.major,
                            d->record.id.minor);
                return 0;
        }
        if (r < 0) {
                /* the originals may be in there: change nothing until it can be read */
                d->record_unreadable = true;
                device_set_error(d, r, "cannot read its state record, nothing is written");
                return log_warning_errno(r, "%s: cannot read its state record, writing nothing to it: %m", d->name), 0;
        }
        if (r > 0) {
                log_warning("%s: %d unreadable line(s) in its state record (torn or corrupt); kept as "
                            "%s/devices/%u:%u.torn, the rest is used", d->name, r, m->state.path,
                            d->record.id.major, d->record.id.minor);
                if (manager_restores(m))
                        (void) state_set_aside(&m->state, d->record.id.major, d->record.id.minor);
        }
        if (!device_identity_same(&found.id, &d->record.id)) {
                log_info("%s: the state record for %u:%u was an earlier disk's (queue %" PRIu64 ", now %" PRIu64
                         "), dropping it", d->name, found.id.major, found.id.minor, found.id.queue_id,
                         d->record.id.queue_id);
                device_record_done(&found);
                if (manager_restores(m))
                        (void) state_remove(&m->state, d->record.id.major, d->record.id.minor);
                return 0;
        }
        log_info("%s: found what an earlier run changed (%u value(s))", d->name, found.n_attrs);
        found.id = d->record.id;        /* the diskseq of now */
        found.name = mfree(found.name);
        device_record_done(&d->record);
        d->record = found;
        return 0;
}

/* Takes ownership of *f. */
static int device_new(Manager *m, DeviceFacts *f, Device **ret) {
        static const Plan undecided = { .reason = "not decided yet" };
        size_t len = strlen(f->name);
        Device *d = calloc(1, offsetof(Device, name) + len + 1);

        if (!d)
                return -ENOMEM;
        d->manager = m;
        memcpy(d->name, f->name, len + 1);
        d->node.devnum = makedev(f->major, f->minor);
        d->record.id = (DeviceIdentity) { .major = f->major, .minor = f->minor };
        d->plan = intern_ref(&m->plans, &undecided);
        if (!d->plan || device_set_facts(m, d, f) < 0 || device_load_record(m, d) < 0 ||
            device_table_put(&m->devices, &d->node) < 0) {
                device_free(d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

/* Classifies a disk that appeared or changed and finds (or makes) its
 * Device by dev_t: O(1). Returns NULL for partitions, vanished devices and
 * per-device errors (logged); *error is set only for -ENOMEM. */
Device *device_refresh(Manager *m, const char *name, int *error) {
        DeviceFacts f = {};
        Device *d;
        int r;

        *error = 0;
        r = read_facts(m, name, &f);
        if (r == -ENOMEM) {
                device_facts_done(&f);
                *error = r;
                return NULL;
        }
        if (r < 0) {
                device_facts_done(&f);
                d = r == -ENOTBLK ? NULL : device_find_name(m, name);
                if (r == -ENODEV && d)
                        device_forget(m, d, true);
                else if (r != -ENODEV && r != -ENOTBLK) {
                        log_warning_errno(r, "%s: cannot read its sysfs attributes, ignoring: %m", name);
                        if (d)
                                device_set_error(d, r, "classify");
                }
                return NULL;
        }
        d = device_get(m, makedev(f.major, f.minor));
        if (d && (!streq(d->name, name) || (f.queue_id && f.queue_id != d->record.id.queue_id))) {
                /* the number went to another disk (or the disk was removed and
                 * added again while events queued up): the old one is gone */
                log_info("%s: a new disk at %u:%u, forgetting the old one", name, f.major, f.minor);
                device_forget(m, d, true);
                d = NULL;
        }
        if (!d) {
                r = device_new(m, &f, &d);
                if (r < 0) {
                        device_facts_done(&f);
                        *error = r;
                        return NULL;
                }
        } else {
                /* new media (loop attach, disk swap) is a new device: an
                 * override ends, and what the admin set before it is what
                 * blkpolicyd found (reconcile's new_media) */
                if (f.diskseq && d->record.id.diskseq && f.diskseq != d->record.id.diskseq) {
                        if (device_overridden(d))
                                log_info("%s: new media, the override ends", name);
                        d->override_note = mfree(d->override_note);
                        d->new_media = true;
                        media_snapshot(m, d);
                }
                if (device_set_facts(m, d, &f) < 0) {
                        *error = -ENOMEM;
                        return NULL;
                }
        }
        device_set_error(d, 0, NULL);
        d->retries = 0;         /* news of the disk: a fresh retry budget */
        if (m->record) {
                DeviceFacts view;

                record_write_device(m->record, device_facts(d, &view));
        }
        if (kernel_caps_learn(&m->caps, &m->roots, d->name, device_facts_scheduler(d->facts)))
                log_debug("mq-deadline dispatch_direct %s (seen on %s)",
                          m->caps.dispatch_direct == TRISTATE_YES ? "available" : "not available", name);
        return d;
}


void device_removed(Manager *m, Device *d) {
        uint64_t queue_id = 0;

        if (queue_inode(&m->roots, d->name, &queue_id) == 0 && queue_id == d->record.id.queue_id) {
                log_debug("%s: a remove event, but its queue is still there: an old event, ignoring", d->name);
                return;
        }
        log_info("%s: removed", d->name);
        device_forget(m, d, true);
}
