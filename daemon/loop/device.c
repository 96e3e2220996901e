/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One device's life in the daemon: classify it (refresh), keep its facts
 * and record, forget it. Its passes (decide, apply, retry, flip) are in
 * device-pass.c. Per-device failures are logged "…, ignoring"; only
 * -ENOMEM is fatal. */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/sysmacros.h>

#include "applier.h"
#include "apply.h"
#include "classify.h"
#include "device-internal.h"
#include "device.h"
#include "log.h"
#include "policy-set.h"
#include "shared.h"
#include "util.h"

static DeviceDynamic *device_dynamic_free(DeviceDynamic *y) {
        if (!y)
                return NULL;
        dyn_state_done(&y->state);
        free(y);
        return NULL;
}

static DeviceFlips *device_flips_free(DeviceFlips *y) {
        free(y);
        return NULL;
}

/* A slot is read when the walk comes to it, so a device forgotten in the
 * body (a tombstone) is no matter. */
bool device_iter_next(const DeviceContext *c, DeviceIter *i, Device **ret) {
        const DeviceTable *t = &c->devices;

        /* a put during a walk that rehashed would visit devices twice or
         * never: nothing does, and this says so if something starts to */
        if (i->visited == 0)
                i->rehashes = t->rehashes;
        assert(i->rehashes == t->rehashes);

        while (i->visited < t->n_slots) {
                Device *d = device_table_slot(t, (i->start + i->visited++) % t->n_slots);

                if (d) {
                        *ret = d;
                        return true;
                }
        }
        *ret = NULL;
        return false;
}

size_t device_iter_resume_slot(const DeviceContext *c, const DeviceIter *i) {
        return c->devices.n_slots ? (i->start + i->visited) % c->devices.n_slots : 0;
}

Device *device_get(const DeviceContext *c, dev_t devnum) {
        return device_table_get(&c->devices, devnum);
}

Device *device_find_name(const DeviceContext *c, const char *name) {
        DEVICE_FOREACH(d, c)
                if (streq(d->name, name))
                        return d;
        return NULL;
}

static int device_compare(const void *a, const void *b) {
        return strcmp((*(Device *const *) a)->name, (*(Device *const *) b)->name);
}

int devices_sorted(const DeviceContext *c, Device ***ret) {
        Device **l = calloc(c->devices.n_devices + 1, sizeof(Device *));
        size_t n = 0;

        if (!l)
                return -ENOMEM;
        DEVICE_FOREACH(d, c)
                l[n++] = d;
        qsort(l, n, sizeof(Device *), device_compare);
        *ret = l;
        return (int) n;
}

const char *device_name(const Device *d) {
        return d->name;
}

/* The number is the record's: a device keeps it once. */
dev_t device_devnum(const Device *d) {
        return makedev(d->record.id.major, d->record.id.minor);
}

const Plan *device_plan(const Device *d) {
        return d->kind->plan;
}

int device_set_kind(DeviceContext *c, Device *d, const DeviceFacts *facts, const Plan *plan) {
        const DeviceKind *kind = intern_ref(&c->kinds, &(DeviceKind) { .facts = facts, .plan = plan });

        if (!kind)
                return -ENOMEM;
        intern_unref(&c->kinds, d->kind);
        d->kind = kind;
        return 0;
}

const DeviceRecord *device_record(const Device *d) {
        return &d->record;
}

const DeviceDynamic *device_dynamic(const Device *d) {
        return d->dynamic;
}

const DeviceTrial *device_trial(const Device *d) {
        return d->extra ? d->extra->trial : NULL;
}

const DeviceFlips *device_flips(const Device *d) {
        return d->extra ? d->extra->flips : NULL;
}

int device_sample_update(Device *d, const DiskStat *st, uint64_t interval_us, unsigned read_ms, double busy,
                         Signals *ret) {
        SampleState *s = &d->sample;

        if (sample_state_update(s, st, sample_state_interval(s, interval_us, read_ms), busy, ret) < 0)
                return -ENOMEM;
        s->read_ms = (uint16_t) read_ms;
        return 0;
}

int device_dynamic_step(Device *d, const Signals *signals, uint64_t tick, DynDecision *ret) {
        const Plan *plan = device_plan(d);

        if (!plan->managed || !plan->dynamic || !d->dynamic) {
                ret->flip = false;      /* no state machine, nothing to step */
                return 0;
        }
        return dynamic_step(plan->dynamic, &d->dynamic->state, signals, tick, ret);
}

bool device_busy_unreadable(const Device *d) {
        return d->busy_unreadable;
}

void device_set_busy_unreadable(Device *d, bool b) {
        d->busy_unreadable = b;
}

DeviceExtra *device_extra(Device *d) {
        if (!d->extra)
                d->extra = calloc(1, sizeof(DeviceExtra));
        return d->extra;
}

void device_extra_trim(Device *d) {
        const DeviceExtra *x = d->extra;

        if (x && !x->properties && !x->stack && !x->error && !x->override_note && !x->retry_source && !x->flips &&
            !x->trial &&
            x->retries == 0)
                d->extra = mfree(d->extra);
}

void device_dynamic_drop(Device *d) {
        d->dynamic = device_dynamic_free(d->dynamic);
        if (!d->extra)
                return;
        d->extra->flips = device_flips_free(d->extra->flips);
        device_extra_trim(d);
}

void device_reset_retries(Device *d) {
        if (!d->extra)
                return;
        d->extra->retries = 0;
        device_extra_trim(d);
}

bool device_overridden(const Device *d) {
        return device_override_note(d);
}

const char *device_override_note(const Device *d) {
        return d->extra ? d->extra->override_note : NULL;
}

void device_end_override(Device *d) {
        if (!d->extra)
                return;
        d->extra->override_note = mfree(d->extra->override_note);
        device_extra_trim(d);
}

bool device_is_paused(const DeviceContext *c, const Device *d) {
        return c->paused_all || d->paused;
}

bool device_pass_pending(const Device *d) {
        return d->job || (d->extra && d->extra->retry_source);
}

void device_pause(Device *d) {
        d->paused = true;
}

int device_set_override(Device *d, char *note) {
        DeviceExtra *x = device_extra(d);

        if (!x) {
                free(note);
                return -ENOMEM;
        }
        free(x->override_note);
        x->override_note = note;
        log_notice("%s: %s; leaving it alone until 'blkpolicyctl resume %s', new media or a return from "
                   "mode=observe", d->name, note, d->name);
        return 0;
}

void device_set_seen(Device *d, bool seen) {
        d->seen = seen;
}

bool device_seen(const Device *d) {
        return d->seen;
}

/* The text is only for status: without memory for it the device goes on
 * without one. */
_printf_(2, 3) void device_set_errorf(Device *d, const char *format, ...) {
        DeviceExtra *x = device_extra(d);
        va_list ap;

        if (!x)
                return;
        free(x->error);
        va_start(ap, format);
        x->error = vstrdupf(format, ap);
        va_end(ap);
        device_extra_trim(d);   /* no memory for the text either */
}

void device_set_error(Device *d, int error, const char *what) {
        if (error != 0)
                device_set_errorf(d, "%s: %s", what, strerror(error < 0 ? -error : error));
        else if (d->extra) {
                d->extra->error = mfree(d->extra->error);
                device_extra_trim(d);
        }
}

/* The udev properties some policy names, from udev's database: the
 * daemon and --once alike (--once has no udev monitor, but udevd keeps
 * the database all the same). No database: none, property= matches
 * nothing. Only the named ones are kept: under udevd an NVMe disk has a
 * dozen ID_* ones, some 0.5 KiB a device. */
static int device_read_properties(DeviceContext *c, unsigned major, unsigned minor, char ***ret) {
        int r;

        *ret = NULL;
        if (!(*c->policies)->property_keys)
                return 0;
        r = udev_db_properties(c->roots, major, minor, (*c->policies)->property_keys, ret);
        return r == -ENOENT ? 0 : r;
}

int device_properties_for(const DeviceContext *c, const Device *d, const PolicySet *set, char ***ret) {
        int r;

        *ret = NULL;
        for (char *const *k = set->property_keys; k && *k; k++) {
                if (strv_contains((*c->policies)->property_keys, *k))
                        continue;
                r = udev_db_properties(c->roots, major(device_devnum(d)), minor(device_devnum(d)),
                                       set->property_keys, ret);
                return r < 0 && r != -ENOENT ? r : 1;   /* no entry: none of them */
        }
        return 0;
}

static int read_facts(DeviceContext *c, const char *name, DeviceFacts *f) {
        char **props = NULL;
        int r;

        r = classify_device(c->roots, &c->majors, name, f);
        if (r < 0)
                return r;
        r = device_read_properties(c, f->major, f->minor, &props);
        if (r < 0)
                return r;
        f->properties = props;
        return 0;
}

MediaSnapshot *device_media_find(DeviceContext *c, dev_t devnum) {
        for (size_t i = 0; i < c->n_media; i++)
                if (c->media[i].devnum == devnum)
                        return &c->media[i];
        return NULL;
}

void device_media_drop(DeviceContext *c, dev_t devnum) {
        MediaSnapshot *s = device_media_find(c, devnum);

        if (s)
                *s = c->media[--c->n_media];
}

/* A failure leaves no snapshot: the pass then adopts whatever it finds,
 * as before snapshots. */
static void media_snapshot(DeviceContext *c, const Device *d) {
        MediaSnapshot *s = device_media_find(c, device_devnum(d));

        if (!s) {
                MediaSnapshot *grown = reallocarray(c->media, c->n_media + 1, sizeof(MediaSnapshot));

                if (!grown)
                        return;
                c->media = grown;
                s = &c->media[c->n_media++];
        }
        s->devnum = device_devnum(d);
        for (unsigned t = 0; t < n_tunables; t++) {
                int k = attr_read_current(c->roots, d->name, t, s->live[t].value, sizeof(s->live[t].value));

                s->live[t].state = k == 0 ? LIVE_OK : k == -ENOENT ? LIVE_ABSENT : LIVE_UNKNOWN;
        }
}

/* Room for one more in c->forgotten, before anything is changed. */
static int devices_forgotten_reserve(DeviceContext *c) {
        size_t n = c->n_forgotten_allocated ? c->n_forgotten_allocated * 2 : 8;
        Device **l;

        if (c->n_forgotten < c->n_forgotten_allocated)
                return 0;
        l = reallocarray(c->forgotten, n, sizeof(Device *));
        if (!l)
                return -ENOMEM;
        c->forgotten = l;
        c->n_forgotten_allocated = n;
        return 0;
}

int device_forget(DeviceContext *c, Device *d, bool drop_state) {
        if (devices_forgotten_reserve(c) < 0)
                return -ENOMEM;
        log_debug("%s: forgotten", d->name);
        device_media_drop(c, device_devnum(d));
        /* its queue is gone, and with it every value it had: the record is moot */
        if (drop_state && device_context_restores(c))
                (void) state_remove(c->state, d->record.id.major, d->record.id.minor);
        /* a pass still queued for it is moot; one running comes back to no device */
        if (d->job && applier_cancel(c->applier, device_devnum(d)) > 0)
                log_info("%s: gone, dropped its queued pass", d->name);
        device_table_remove(&c->devices, d);
        /* its driver may be unloading, its major soon another module's */
        major_cache_drop(&c->majors);
        if (d->extra)
                d->extra->retry_source = sd_event_source_disable_unref(d->extra->retry_source);
        d->gone = true;
        c->forgotten[c->n_forgotten++] = d;
        return 0;
}

/* The list goes too: forgetting is rare, and a storm's list is large. */
void devices_free_forgotten(DeviceContext *c) {
        for (size_t i = 0; i < c->n_forgotten; i++)
                device_free(c, c->forgotten[i]);
        c->forgotten = mfree(c->forgotten);
        c->n_forgotten = c->n_forgotten_allocated = 0;
}

/* Takes props (also on failure); NULL: none. */
static int device_set_properties(Device *d, char **props) {
        DeviceExtra *x = props ? device_extra(d) : d->extra;

        if (!x) {
                strv_free(props);
                return props ? -ENOMEM : 0;
        }
        strv_free(x->properties);
        x->properties = props;
        device_extra_trim(d);
        return 0;
}

/* Policies that name other udev properties: read what each device keeps
 * again, before deciding with them. */
int device_refresh_properties(DeviceContext *c) {
        DEVICE_FOREACH(d, c) {
                char **props = NULL;
                int r = device_read_properties(c, major(device_devnum(d)), minor(device_devnum(d)), &props);

                if (r < 0 || (r = device_set_properties(d, props)) < 0)
                        return r;
        }
        return 0;
}

/* Takes stack (also on failure); NULL: none. */
static int device_set_stack(Device *d, DeviceStack *stack) {
        DeviceExtra *x = stack ? device_extra(d) : d->extra;

        if (!x) {
                device_stack_free(stack);
                return stack ? -ENOMEM : 0;
        }
        device_stack_free(x->stack);
        x->stack = stack;
        device_extra_trim(d);
        return 0;
}

static int names_add(char ***l, char *const *names) {
        for (char *const *n = names; n && *n; n++)
                if (!strv_contains(*l, *n) && strv_push(l, *n) < 0)
                        return -ENOMEM;
        return 0;
}

/* A map's or an array's slaves, a partition by its disk's name: the disk
 * is what the daemon has, and what a partition's holder makes a member.
 * A name that is neither a device of the daemon's nor a partition of one
 * is kept as it is (a disk not discovered yet, classified on its own). */
static int slaves_add(const DeviceContext *c, char ***l, char *const *slaves) {
        for (char *const *n = slaves; n && *n; n++) {
                char disk[NAME_MAX_LEN];
                const char *name = *n;

                if (!device_find_name(c, name) && partition_disk_name(name, disk, sizeof(disk)) == 0 &&
                    device_find_name(c, disk))
                        name = disk;
                if (names_add(l, (char *[]) { (char *) name, NULL }) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int device_stack_neighbours(const DeviceContext *c, const Device *d, bool below, char ***l) {
        const DeviceStack *s = d && d->extra ? d->extra->stack : NULL;
        char head[NAME_MAX_LEN];
        int r;

        if (below) {
                r = slaves_add(c, l, s ? s->slaves : NULL);
                return r < 0 ? r : names_add(l, s ? s->nvme_paths : NULL);
        }
        r = names_add(l, s ? s->holders : NULL);
        /* the head named after a path is there only with multipath on */
        if (r < 0 || !d || nvme_path_head_name(d->name, head, sizeof(head)) < 0 || !device_find_name(c, head))
                return r;
        return names_add(l, (char *[]) { head, NULL });
}

const DeviceFacts *device_facts(const Device *d, DeviceFacts *view) {
        *view = *d->kind->facts;
        (void) strscpy(view->name, sizeof(view->name), d->name);     /* it came from a DeviceFacts */
        view->major = major(device_devnum(d));
        view->minor = minor(device_devnum(d));
        view->diskseq = d->record.id.diskseq;
        view->queue_id = d->record.id.queue_id;
        view->properties = d->extra ? d->extra->properties : NULL;
        view->stack = d->extra ? d->extra->stack : NULL;
        return view;
}

const char *device_write_why_not(const DeviceContext *c, const Device *d) {
        if (c->dry_run)
                return "dry run";
        if (!device_context_writes(c))
                return "mode=observe";
        if (device_is_paused(c, d))
                return "paused";
        if (device_overridden(d))
                return "overridden";
        return d->record_unreadable ? "state record unreadable" : NULL;
}

bool device_is_held(const DeviceContext *c, const Device *d) {
        return device_is_paused(c, d) || device_overridden(d);
}

/* Paused or overridden: resume ends both. */
void device_clear_hold(Device *d) {
        d->paused = false;
        device_end_override(d);
}

static DeviceExtra *device_extra_free(DeviceExtra *x) {
        if (!x)
                return NULL;
        sd_event_source_disable_unref(x->retry_source);
        device_flips_free(x->flips);
        free(x->trial);
        strv_free(x->properties);
        device_stack_free(x->stack);
        free(x->override_note);
        free(x->error);
        free(x);
        return NULL;
}

Device *device_free(DeviceContext *c, Device *d) {
        if (!d)
                return NULL;
        device_extra_free(d->extra);
        if (d->kind) {
                /* the pair first: no pair names what is gone (shared.h) */
                const DeviceFacts *facts = d->kind->facts;
                const Plan *plan = d->kind->plan;

                intern_unref(&c->kinds, d->kind);
                intern_unref(&c->facts, facts);
                intern_unref(&c->plans, plan);
        }
        device_dynamic_free(d->dynamic);
        device_record_done(&d->record);
        sample_state_done(&d->sample);
        free(d);
        return NULL;
}

/* Takes the properties and the stack of *f (also on failure), shares the
 * rest. */
static int device_set_facts(DeviceContext *c, Device *d, DeviceFacts *f) {
        const DeviceFacts *shared = intern_ref(&c->facts, f), *old = d->kind->facts;
        int r = device_set_properties(d, f->properties), s = device_set_stack(d, f->stack);

        f->properties = NULL;
        f->stack = NULL;
        if (!shared || r < 0 || s < 0 || device_set_kind(c, d, shared, d->kind->plan) < 0) {
                intern_unref(&c->facts, shared);
                return -ENOMEM;
        }
        intern_unref(&c->facts, old);
        /* an inode or a diskseq not read (the disk going away) is no new
         * queue or medium: the pass in flight, and the record, stay this
         * disk's */
        if (f->diskseq)
                d->record.id.diskseq = f->diskseq;
        if (f->queue_id)
                d->record.id.queue_id = f->queue_id;
        return 0;
}

/* The record an earlier run left for this queue, if any. A record for
 * another queue at the same number belonged to a disk that is gone. */
static int device_load_record(DeviceContext *c, Device *d) {
        DeviceRecord found = {};
        int r;

        if (strv_contains(c->v1_pending, d->name)) {
                /* its originals are in a file not taken over yet */
                d->record_unreadable = true;
                device_set_error(d, -EBADMSG, "its state record of the first format is not taken over, nothing "
                                              "is written");
                return 0;
        }
        r = state_load(c->state, d->record.id.major, d->record.id.minor, &found, NULL);

        if (r == -ENOENT)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r == -EBADMSG) {
                log_warning("%s: %s/devices/%u:%u is not a state record, ignoring it: the values blkpolicyd "
                            "finds now count as the originals", d->name, c->state->path, d->record.id.major,
                            d->record.id.minor);
                return 0;
        }
        if (r < 0) {
                /* the originals may be in there: change nothing until it can be read */
                d->record_unreadable = true;
                device_set_error(d, r, "cannot read its state record, nothing is written");
                return log_warning_errno(r, "%s: cannot read its state record, writing nothing to it: %m", d->name), 0;
        }
        if (!device_identity_same(&found.id, &d->record.id)) {
                log_info("%s: the state record for %u:%u was an earlier disk's (queue %" PRIu64 ", now %" PRIu64
                         "), dropping it", d->name, found.id.major, found.id.minor, found.id.queue_id,
                         d->record.id.queue_id);
                device_record_done(&found);
                if (device_context_restores(c))
                        (void) state_remove(c->state, d->record.id.major, d->record.id.minor);
                return 0;
        }
        if (r > 0) {
                log_warning("%s: %d unreadable line(s) in its state record (torn or corrupt); kept as "
                            "%s/devices/%u:%u.torn, the rest is used", d->name, r, c->state->path,
                            d->record.id.major, d->record.id.minor);
                if (device_context_restores(c) && state_set_aside(c->state, &found, d->name) < 0)
                        log_warning("%s: cannot keep the readable part as its record; the torn record stays "
                                    "as it is", d->name);
        }
        log_info("%s: found what an earlier run changed (%u value(s))", d->name, device_record_count(&found));
        found.id = d->record.id;        /* the diskseq of now */
        device_record_done(&d->record);
        d->record = found;
        return 0;
}

/* Every device has one: a Device named like most disks (nvme12n1, sdabc,
 * loop10000) must stay in a 144-byte heap chunk (136 bytes usable). */
_Static_assert(offsetof(Device, name) + sizeof("loop10000") <= 136, "a Device outgrew its 144-byte chunk");

/* Takes ownership of *f. */
static int device_new(DeviceContext *c, DeviceFacts *f, Device **ret) {
        static const Plan undecided = { .reason = "not decided yet" };
        size_t len = strlen(f->name);
        Device *d = calloc(1, offsetof(Device, name) + len + 1);
        const Plan *plan;

        if (!d)
                return -ENOMEM;
        memcpy(d->name, f->name, len + 1);
        d->record.id = (DeviceIdentity) { .major = f->major, .minor = f->minor };
        plan = intern_ref(&c->plans, &undecided);
        if (!plan || device_set_kind(c, d, NULL, plan) < 0) {
                intern_unref(&c->plans, plan);
                free(d);
                return -ENOMEM;
        }
        if (device_set_facts(c, d, f) < 0 || device_load_record(c, d) < 0 ||
            device_table_put(&c->devices, d) < 0) {
                device_free(c, d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

/* Classifies a disk that appeared or changed and finds (or makes) its
 * Device by dev_t: O(1). Returns NULL for partitions, vanished devices and
 * per-device errors (logged); *error is set only for -ENOMEM. */
Device *device_refresh(DeviceContext *c, const char *name, int *error) {
        DeviceFacts f = {};
        Device *d;
        int r;

        *error = 0;
        r = read_facts(c, name, &f);
        if (r == -ENOMEM) {
                device_facts_done(&f);
                *error = r;
                return NULL;
        }
        if (r < 0) {
                device_facts_done(&f);
                d = r == -ENOTBLK ? NULL : device_find_name(c, name);
                if (r == -ENODEV && d)
                        *error = device_forget(c, d, true);
                else if (r != -ENODEV && r != -ENOTBLK) {
                        log_warning_errno(r, "%s: cannot read its sysfs attributes, ignoring: %m", name);
                        if (d)
                                device_set_error(d, r, "classify");
                }
                return NULL;
        }
        d = device_get(c, makedev(f.major, f.minor));
        if (d && (!streq(d->name, name) || (f.queue_id && f.queue_id != d->record.id.queue_id))) {
                /* the number went to another disk (or the disk was removed and
                 * added again while events queued up): the old one is gone */
                log_info("%s: a new disk at %u:%u, forgetting the old one", name, f.major, f.minor);
                r = device_forget(c, d, true);
                if (r < 0) {
                        device_facts_done(&f);
                        *error = r;
                        return NULL;
                }
                d = NULL;
        }
        if (!d) {
                r = device_new(c, &f, &d);
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
                        device_end_override(d);
                        d->new_media = true;
                        media_snapshot(c, d);
                }
                if (device_set_facts(c, d, &f) < 0) {
                        *error = -ENOMEM;
                        return NULL;
                }
        }
        device_set_error(d, 0, NULL);
        device_reset_retries(d);        /* news of the disk: a fresh retry budget */
        if (kernel_caps_learn(c->caps, c->roots, d->name, device_facts_scheduler(d->kind->facts)))
                log_debug("mq-deadline dispatch_direct %s (seen on %s)",
                          c->caps->dispatch_direct == TRISTATE_YES ? "available" : "not available", name);
        return d;
}

int device_removed(DeviceContext *c, Device *d) {
        uint64_t queue_id = 0;

        if (queue_inode(c->roots, d->name, &queue_id) == 0 && queue_id == d->record.id.queue_id) {
                log_debug("%s: a remove event, but its queue is still there: an old event, ignoring", d->name);
                return 0;
        }
        log_info("%s: removed", d->name);
        return device_forget(c, d, true);
}
