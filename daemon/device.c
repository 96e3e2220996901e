/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One device's life in the daemon: classify it (refresh), decide and apply
 * (process), retry what was transient, flip its dynamic state, forget it.
 * Per-device failures are logged "…, ignoring"; only -ENOMEM is fatal. */
#include <stdarg.h>
#include <sys/sysmacros.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "apply.h"
#include "classify.h"
#include "log.h"
#include "manager.h"
#include "record.h"
#include "util.h"

/* ENOENT while add_disk() finishes: 10, 20, 40 ... 640 ms, then give up. */
#define RETRY_MAX 7
#define RETRY_BASE_USEC 10000ULL

const char *manager_state_dir(const Manager *m) {
        return m->options->state_dir ?: m->config.state_dir;
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

static void log_item(const Device *d, const PlanItem *it, bool dry_run) {
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
                log_info("%s: %s would change %s -> %s (%s)%s", d->name, attr,
                         *it->current ? it->current : "(with the new scheduler)", it->target, it->source,
                         dry_run ? ", dry run" : "");
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

static void log_plan(const Device *d, bool dry_run) {
        char classes[256];

        classes_format(d->facts->classes, classes, sizeof(classes));
        if (!d->plan->managed || !d->plan->policy) {
                log_info("%s: [%s] %s", d->name, classes, d->plan->reason);
                return;
        }
        log_info("%s: [%s] policy %s%s%s", d->name, classes, d->plan->policy,
                 d->plan->reason ? "; " : "", d->plan->reason ?: "");
        for (unsigned i = 0; i < d->plan->n_items; i++)
                log_item(d, &d->plan->items[i], dry_run);
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

void device_forget(Manager *m, Device *d, bool drop_state) {
        log_debug("%s: forgotten", d->name);
        if (drop_state && !m->options->dry_run)
                (void) originals_remove(manager_state_dir(m), d->name);
        device_table_remove(&m->devices, d);
        device_free(d);
}

static int on_retry(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Device *d = userdata;

        d->retry_source = sd_event_source_disable_unref(d->retry_source);
        device_process(d->manager, d);
        return 0;
}

static void device_schedule_retry(Manager *m, Device *d) {
        uint64_t delay = RETRY_BASE_USEC << d->retries;
        int r;

        if (++d->retries > RETRY_MAX) {
                device_set_errorf(d, "gave up after %d retries", RETRY_MAX);
                log_warning("%s: gave up after %d retries, ignoring", d->name, RETRY_MAX);
                return;
        }
        if (!m->event) {
                /* --once has no loop: wait here, bounded by RETRY_MAX */
                struct timespec ts = { .tv_sec = (time_t) (delay / 1000000), .tv_nsec = (long) (delay % 1000000) * 1000 };
                (void) nanosleep(&ts, NULL);
                device_process(m, d);
                return;
        }
        if (d->retry_source)
                return;
        r = sd_event_add_time_relative(m->event, &d->retry_source, CLOCK_MONOTONIC, delay, 1000, on_retry, d);
        if (r < 0)
                log_warning_errno(r, "%s: cannot schedule a retry, ignoring: %m", d->name);
}

static void device_persist_originals(Manager *m, Device *d) {
        int r = originals_save(manager_state_dir(m), d->name, &d->originals);

        if (r < 0)
                log_warning_errno(r, "%s: cannot save original settings under %s, ignoring: %m", d->name,
                                  manager_state_dir(m));
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

/* decide + apply for one device: both work in m->scratch, the device keeps
 * a copy shared with the devices that got the same. */
void device_process(Manager *m, Device *d) {
        DeviceFacts view;
        DecideInput in = { .facts = device_facts(d, &view), .caps = &m->caps, .policies = m->policies,
                           .excluded = device_excluded(m, d), .busy = d->dynamic && d->dynamic->state.busy };
        /* a paused or overridden device is only looked at: what would change */
        ApplyRequest req = { .roots = &m->roots, .dev = d->name,
                             .dry_run = m->options->dry_run || device_is_held(m, d),
                             .originals = &d->originals, .stats = &m->writes };
        Plan *plan = plan_buffer_init(&m->scratch);
        bool changed = false;
        int r = 0;

        decide(&in, plan);
        if (!plan->managed || !plan->dynamic)
                d->dynamic = device_dynamic_free(d->dynamic);   /* no state machine: back to base */
        else if (!d->dynamic && !(d->dynamic = calloc(1, sizeof(DeviceDynamic))))
                r = -ENOMEM;
        else
                r = dyn_state_fit(&d->dynamic->state, plan->dynamic);
        if (plan->managed && r == 0)
                r = apply_plan(&req, plan, &changed);
        if (device_keep_plan(m, d, plan) < 0)
                r = -ENOMEM;
        if (changed)
                device_persist_originals(m, d);
        if (r == -ENODEV) {
                log_info("%s: gone while being set up", d->name);
                device_forget(m, d, true);
                return;
        }
        if (r == -ENOMEM) {
                log_oom();
                sd_event_exit(m->event, -ENOMEM);
                return;
        }
        log_plan(d, req.dry_run);
        if (r == -EAGAIN) {
                device_schedule_retry(m, d);
                return;
        }
        d->retries = 0;
        if (d->plan->managed)
                device_learn_caps(m, d);
}

void device_process_again(Manager *m, Device *d) {
        d->retries = 0;
        device_process(m, d);
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

/* dynamic_step() flipped d->dyn.busy: apply the other settings set and
 * account what it cost (a scheduler switch freezes the queue). */
void device_flip(Manager *m, Device *d, const DynDecision *dec) {
        uint64_t start = clock_usec(CLOCK_MONOTONIC);
        dev_t devnum = d->devnum;       /* d may be freed by device_process */
        double ms;

        LogDeviceEvent e = { .message_id = MESSAGE_ID_FLIP, .device = d->name, .policy = d->plan->dynamic_source,
                             .setting = "state", .old = dec->to_busy ? "base" : "busy",
                             .new = dec->to_busy ? "busy" : "base", .result = dec->reason };

        log_device_event(LOG_INFO, &e, "%s: %s -> %s: %s (%s)", d->name, e.old, e.new, dec->reason,
                         d->plan->dynamic_source);
        device_process(m, d);
        ms = (double) (clock_usec(CLOCK_MONOTONIC) - start) / 1000.0;
        /* device_process may have forgotten a vanished device: d is then gone */
        if (device_table_get(&m->devices, devnum) != d || !d->dynamic)
                return;
        d->dynamic->state.flip_cost_ms += ms;
        if (device_remember_flip(m, d->dynamic, dec, ms) < 0) {
                log_oom();
                sd_event_exit(m->event, -ENOMEM);
                return;
        }
        log_debug("%s: flip applied in %.2f ms", d->name, ms);
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

int manager_process_all(Manager *m) {
        _cleanup_free_ Device **sorted = NULL;
        int n;

        /* processing a device may forget it, never another one, so the
         * sorted snapshot stays valid */
        n = device_table_sorted(&m->devices, &sorted);
        if (n < 0)
                return log_oom();
        for (int i = 0; i < n; i++)
                device_process(m, sorted[i]);
        return 0;
}

/* Policies that name other udev properties: read what each device keeps
 * again, before deciding with them. */
int manager_refresh_properties(Manager *m) {
        DEVICE_TABLE_FOREACH(d, &m->devices) {
                char **props = NULL;
                int r = discover_properties(m->discover, d->name, m->policies->property_keys, &props);

                if (r < 0)
                        return r;
                strv_free(d->properties);
                d->properties = props;
        }
        return 0;
}

/* New kernel capabilities change decisions: take them all again, once. */
int manager_redecide(Manager *m) {
        if (!m->redecide)
                return 0;
        m->redecide = false;
        return manager_process_all(m);
}

const DeviceFacts *device_facts(const Device *d, DeviceFacts *view) {
        *view = *d->facts;
        (void) strscpy(view->name, sizeof(view->name), d->name);     /* it came from a DeviceFacts */
        view->major = major(d->devnum);
        view->minor = minor(d->devnum);
        view->diskseq = d->diskseq;
        view->properties = d->properties;
        return view;
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
        d->diskseq = f->diskseq;
        return 0;
}

/* Takes ownership of *f. */
static int device_new(Manager *m, DeviceFacts *f, Device **ret) {
        static const Plan undecided = { .reason = "not decided yet" };
        size_t len = strlen(f->name);
        Device *d = calloc(1, offsetof(Device, name) + len + 1);
        int r;

        if (!d)
                return -ENOMEM;
        d->manager = m;
        memcpy(d->name, f->name, len + 1);
        d->devnum = makedev(f->major, f->minor);
        d->plan = intern_ref(&m->plans, &undecided);
        if (!d->plan || device_set_facts(m, d, f) < 0) {
                device_free(d);
                return -ENOMEM;
        }
        r = originals_load(manager_state_dir(m), d->name, &d->originals);
        if (r == -ENOMEM || device_table_put(&m->devices, d) < 0) {
                device_free(d);
                return -ENOMEM;
        }
        if (r > 0)
                log_warning("%s: %d unreadable line(s) in %s/devices/%s (torn or corrupt), ignoring them",
                            d->name, r, manager_state_dir(m), d->name);
        if (r >= 0 && !originals_empty(&d->originals))
                log_info("%s: found original settings recorded by an earlier run", d->name);
        *ret = d;
        return 0;
}

/* Classifies a disk that appeared or changed and finds (or makes) its
 * Device by dev_t: O(1). Returns NULL for partitions, vanished devices and
 * per-device errors (logged); *error is set only for -ENOMEM. */
Device *manager_refresh(Manager *m, const char *name, int *error) {
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
                d = r == -ENOTBLK ? NULL : device_table_find_name(&m->devices, name);
                if (r == -ENODEV && d)
                        device_forget(m, d, true);
                else if (r != -ENODEV && r != -ENOTBLK) {
                        log_warning_errno(r, "%s: cannot read its sysfs attributes, ignoring: %m", name);
                        if (d)
                                device_set_error(d, r, "classify");
                }
                return NULL;
        }
        d = device_table_get(&m->devices, makedev(f.major, f.minor));
        if (d && !streq(d->name, name)) {
                /* the number went to another disk: the old one is gone */
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
                /* new media (loop attach, disk swap) is a new device to an override */
                if (device_overridden(d) && f.diskseq && f.diskseq != d->diskseq) {
                        log_info("%s: new media, the override ends", name);
                        d->override_note = mfree(d->override_note);
                }
                if (device_set_facts(m, d, &f) < 0) {
                        *error = -ENOMEM;
                        return NULL;
                }
        }
        device_set_error(d, 0, NULL);
        if (m->record) {
                DeviceFacts view;

                record_write_device(m->record, device_facts(d, &view));
        }
        if (kernel_caps_learn(&m->caps, &m->roots, d->name, device_facts_scheduler(d->facts)))
                log_debug("mq-deadline dispatch_direct %s (seen on %s)",
                          m->caps.dispatch_direct == TRISTATE_YES ? "available" : "not available", name);
        return d;
}

