/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* apply: read, reconcile, save the record, write, read back. A scheduler
 * write costs 10-70 ms (queue freeze + RCU) even when the value is
 * unchanged, so nothing is written that is already in place; and the
 * record of what was there is on disk before anything is written. A pass
 * opens the disk's queue directory once and reads and writes below that
 * fd only: the disk's name may stand for another disk by the next write. */
#include <limits.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "apply.h"
#include "classify.h"
#include "kernel-default.h"
#include "log.h"
#include "util.h"

/* scheduler round, the rest, and the one that sees the values back; plus
 * one per scheduler fallback */
#define ROUNDS_MAX (3 + SCHED_CHOICES_MAX)
/* a put-back that meets EBUSY is written again, after 1, 2, 4 ... 512 ms */
#define PUT_BACK_BUSY_TRIES 10
#define PUT_BACK_BUSY_BASE_NSEC 1000000L

/* raw as read from the tunable's file: the value blkpolicyd compares */
static int current_value(unsigned tunable, const char *raw, char *buf, size_t size) {
        SchedulerList l;

        if (tunable != TUNABLE_SCHEDULER)
                return strscpy(buf, size, raw);
        if (scheduler_list_parse(raw, &l) < 0)
                return -EBADMSG;
        /* the kernel brackets the current one whenever a queue has a
         * choice (6.1-6.18, under the queue's sysfs or elevator lock), and
         * a queue without elevator support reads a bare "none" (current:
         * ""): any other list without a current entry is a read cut short
         * (the fault seam's), whose "" would pass for the admin's scheduler */
        if (l.current < 0 && !(l.n == 1 && scheduler_list_has(&l, "none")))
                return -EBADMSG;
        return strscpy(buf, size, scheduler_list_current(&l));
}

int attr_read_current(const Roots *r, const char *dev, unsigned tunable, char *buf, size_t size) {
        char raw[256];
        int k = queue_attr_read(r, dev, tunables[tunable].attr, raw, sizeof(raw));

        return k < 0 ? k : current_value(tunable, raw, buf, size);
}

/* The files a queue's limits are read from, in queue_limits_parse()'s order. */
static const char *const limits_attrs[] = { "optimal_io_size", "max_sectors_kb", "rotational" };

/* What a limits update leaves tunable at, from the limits read below the
 * queue a pass holds (q), or else by the disk's name. */
static int kernel_default_of(const QueueDir *q, const Roots *r, const char *dev, unsigned tunable,
                             const unsigned *kernel_version, char *buf, size_t size) {
        static const unsigned unknown[3] = {};
        long page = sysconf(_SC_PAGESIZE);
        char raw[ELEMENTSOF(limits_attrs)][32];
        QueueLimitsSeen l;
        int k = 0;

        if (!tunable_reset_by_limits(tunable))
                return 0;
        for (unsigned i = 0; k == 0 && i < ELEMENTSOF(limits_attrs); i++)
                k = q ? queue_dir_read(q, limits_attrs[i], raw[i], sizeof(raw[i]))
                      : queue_attr_read(r, dev, limits_attrs[i], raw[i], sizeof(raw[i]));
        if (k == 0)
                k = queue_limits_parse(raw[0], raw[1], raw[2], page > 0 ? (unsigned) (page / 1024) : 4, &l);
        return k < 0 ? k : kernel_default_value(tunable, &l, kernel_version ?: unknown, buf, size);
}

int kernel_default_read(const Roots *r, const char *dev, unsigned tunable, const unsigned *kernel_version,
                        char *buf, size_t size) {
        return kernel_default_of(NULL, r, dev, tunable, kernel_version, buf, size);
}

/* dev, or hidden for a disk that has no dev (an NVMe multipath path) */
static bool device_present(const Roots *r, const char *dev) {
        char path[PATH_MAX];

        return (block_path(path, sizeof(path), r, dev, "dev") == 0 && sysfs_exists(path)) ||
               (block_path(path, sizeof(path), r, dev, "hidden") == 0 && sysfs_exists(path));
}

static bool is_transient(int error) {
        /* ENOENT from a scheduler write while add_disk() has not finished */
        return error == -ENOENT || error == -EBUSY || error == -EAGAIN || error == -EINTR;
}

/* One pass's working state. */
typedef struct Pass {
        const ApplyRequest *req;
        QueueDir queue;                         /* the disk's queue, open for the whole pass */
        Plan *plan;
        const char *wanted[TUNABLES_MAX];
        LiveValue live[TUNABLES_MAX];
        LiveValue before[TUNABLES_MAX];         /* as first read in this pass */
        char kernel_default_buf[TUNABLES_MAX][VALUE_MAX];
        const char *kernel_default[TUNABLES_MAX]; /* what a limits update leaves (reconcile's); NULL: none known */
        bool skip[TUNABLES_MAX];                /* written once already */
        bool done[TUNABLES_MAX];                /* a result is in the plan item */
        bool overridden[TUNABLES_MAX];          /* wanted, but the admin's now */
        unsigned next_choice;                   /* scheduler fallbacks tried so far */
        bool scheduler_read_back;               /* live[scheduler] is the last write's read-back */
        bool retry;
        bool saved_once;                        /* the record is on disk as it is in memory */
} Pass;

static PlanItem *pass_item(Pass *p, unsigned t) {
        return p->plan ? (PlanItem *) plan_find(p->plan, t) : NULL;
}

/* Whether the disk's name still stands for the queue this pass holds. A
 * disk removed (and another added under its name) while the pass waited
 * or ran: the pass's reads and writes cannot reach the other disk, they
 * go below the fd it holds, and the kernel fails them; but what the pass
 * would go on with is moot, and a fixture tree would not fail them. */
static bool same_queue(const Pass *p) {
        return queue_dir_check(&p->queue) != -ENODEV;
}

/* Before a round and before each write. On sysfs the kernel answers for
 * them: below the fd of a removed queue directory every open fails and a
 * file opened before fails its read or write (kernfs deactivates the
 * nodes), and is_gone() then looks the name up. A fixture tree lets them
 * through, so there the name is looked up first. Not on sysfs: each look
 * walks the whole path, /sys/block/<dev> -> ../devices/.../queue, every
 * component under kernfs's lock, which add_disk() takes for writing: three
 * walks a new disk, which slowed a storm's adds (docs/benchmarks.md). */
static bool still_same_queue(const Pass *p) {
        return p->queue.on_sysfs || same_queue(p);
}

/* A disk that is still there is not gone, whatever the errno says. */
static bool is_gone(const Pass *p, int error) {
        return (error == -ENODEV || error == -ENXIO || error == -ENOENT) && !same_queue(p);
}

/* A read that gives no value (an empty file, or one cut short) is an
 * error: a record could not keep it as found, nor as what a write left,
 * and the next round would take it for the live value. The one "" that is
 * a value is the scheduler of a queue without any (current_value()). */
static int pass_read_current(const Pass *p, unsigned t, char *buf, size_t size) {
        char raw[256];
        int k = queue_dir_read(&p->queue, tunables[t].attr, raw, sizeof(raw));

        if (k == 0)
                k = current_value(t, raw, buf, size);
        if (k == 0 && !state_value_valid(buf) && !(t == TUNABLE_SCHEDULER && !*buf))
                k = -EBADMSG;
        return k;
}

static int read_one(Pass *p, unsigned t) {
        LiveValue *lv = &p->live[t];
        int k = pass_read_current(p, t, lv->value, sizeof(lv->value));

        if (is_gone(p, k))
                return -ENODEV;
        lv->state = k == 0 ? LIVE_OK : k == -ENOENT ? LIVE_ABSENT : LIVE_UNKNOWN;
        if (k < 0 && k != -ENOENT)
                log_warning_errno(k, "%s: cannot read %s, leaving it alone: %m", p->req->dev, tunables[t].attr);
        if (lv->state != LIVE_OK)
                lv->value[0] = 0;
        return 0;
}

static bool wanted_or_recorded(const Pass *p, unsigned t) {
        return p->wanted[t] || device_record_get(p->req->record, t);
}

/* Whether this round may write the scheduler. Wanted and in place, it is
 * left as it is (reconcile writes nothing that is in place); not wanted, a
 * recorded one may be put back. */
static bool switch_possible(const Pass *p, const char *sched) {
        const char *want = p->wanted[TUNABLE_SCHEDULER];

        return want ? !streq(want, sched) : wanted_or_recorded(p, TUNABLE_SCHEDULER);
}

/* Whether t is to be read: wanted or recorded, or reset by a write this
 * round may make (record_resets() records it before that write): a
 * scheduler switch, one of nr_requests or of max_sectors_kb. Not otherwise: after a switch
 * to mq-deadline that is eight files a disk, a quarter of a storm's CPU. */
static bool to_read(const Pass *p, unsigned t, const char *sched, bool may_switch) {
        if (wanted_or_recorded(p, t))
                return true;
        if (may_switch && tunable_reset_by_switch(t, sched))
                return true;
        if (tunable_reset_by_max_sectors(t, p->req->kernel_version) && wanted_or_recorded(p, TUNABLE_MAX_SECTORS_KB))
                return true;
        return tunable_reset_by_nr_requests(t) && wanted_or_recorded(p, TUNABLE_NR_REQUESTS);
}

/* The kernel's default of what a limits update resets, where it may tell
 * a revalidation from an admin's write: a value of blkpolicyd's that
 * landed and is no longer live. Three reads more, only then. */
static void read_kernel_defaults(Pass *p) {
        for (unsigned t = 1; t < n_tunables; t++) {
                const AttrRecord *a = device_record_get(p->req->record, t);
                int k;

                p->kernel_default[t] = NULL;
                if (!tunable_reset_by_limits(t) || p->live[t].state != LIVE_OK || !a || !a->written ||
                    streq(a->written, p->live[t].value))
                        continue;
                k = kernel_default_of(&p->queue, NULL, p->req->dev, t, p->req->kernel_version,
                                      p->kernel_default_buf[t], sizeof(p->kernel_default_buf[t]));
                if (k > 0)
                        p->kernel_default[t] = p->kernel_default_buf[t];
                else if (k < 0)
                        log_debug_errno(k, "%s: cannot read the queue's limits, %s at %s is taken as "
                                        "someone else's: %m", p->req->dev, tunables[t].attr, p->live[t].value);
        }
}

/* Reads what this pass may touch (to_read()). */
static int read_live(Pass *p) {
        const char *sched;
        bool may_switch;
        int k;

        if (!still_same_queue(p))
                return -ENODEV;
        /* only a scheduler write changes the scheduler: its read-back, a
         * few syscalls ago, is what a read now would give */
        k = p->scheduler_read_back ? 0 : read_one(p, TUNABLE_SCHEDULER);
        p->scheduler_read_back = false;
        /* absent: a bio-based queue (6.10 on shows it none), whose other
         * attributes are there all the same, and no iosched/ */
        if (k < 0 || p->live[TUNABLE_SCHEDULER].state == LIVE_UNKNOWN)
                return k;
        sched = p->live[TUNABLE_SCHEDULER].value;
        may_switch = switch_possible(p, sched);
        for (unsigned t = 1; t < n_tunables; t++) {
                const char *owner_sched = tunables[t].scheduler;

                p->live[t] = (LiveValue) { .state = LIVE_ABSENT };
                if (owner_sched && !streq(owner_sched, sched))
                        continue;       /* lives only under another scheduler */
                if (!to_read(p, t, sched, may_switch))
                        continue;
                k = read_one(p, t);
                if (k < 0)
                        return k;
        }
        read_kernel_defaults(p);
        return 0;
}

static void wanted_from_plan(Pass *p) {
        if (!p->plan || !p->plan->managed)
                return;
        for (unsigned i = 0; i < p->plan->n_items; i++) {
                const PlanItem *it = &p->plan->items[i];

                if (it->result != RESULT_UNSUPPORTED)
                        p->wanted[it->tunable] = it->target;
        }
}

_printf_(3, 4) static void item_error(PlanItem *it, ItemResult result, const char *fmt, ...) {
        va_list ap;

        it->result = result;
        va_start(ap, fmt);
        vsnprintf(it->error, sizeof(it->error), fmt, ap); /* NOLINT(clang-analyzer-valist.Uninitialized): started just above */
        va_end(ap);
}

/* EINVAL from a scheduler write means "not available here": the policy's
 * next choice is tried, once each. Returns true when there is one. */
static bool next_scheduler_choice(Pass *p) {
        PlanItem *it = pass_item(p, TUNABLE_SCHEDULER);

        if (!it)
                return false;
        for (; p->next_choice < SCHED_CHOICES_MAX; p->next_choice++) {
                if (!(p->plan->fallback_mask & (1u << p->next_choice)))
                        continue;
                (void) strscpy(it->target, sizeof(it->target), p->plan->choices[p->next_choice++].name);
                p->wanted[TUNABLE_SCHEDULER] = it->target;
                return true;
        }
        return false;
}

static void count_write(const Pass *p, unsigned t) {
        if (!p->req->stats)
                return;
        if (t == TUNABLE_SCHEDULER)
                p->req->stats->scheduler_writes++;
        else
                p->req->stats->other_writes++;
}

static void log_restore(const Pass *p, const Step *s, int error, const char *now) {
        const char *attr = tunables[s->tunable].attr;

        if (error == 0 && streq(now, s->value))
                log_info("%s: %s put back to %s", p->req->dev, attr, s->value);
        else if (error == 0)
                log_warning("%s: putting back %s=%s, the kernel kept %s, keeping the record", p->req->dev, attr,
                            s->value, now);
        else
                log_warning_errno(error, "%s: putting back %s=%s failed, keeping the record: %m", p->req->dev, attr,
                                  s->value);
}

static int save_record(Pass *p, const DeviceRecord *r) {
        int k = state_save(p->req->state, r, p->req->dev);

        if (k == -ENOMEM)
                return k;
        if (k < 0)
                log_error_errno(k, "%s: cannot save the state record under %s, writing nothing: %m", p->req->dev,
                                p->req->state->path);
        return k;
}

/* A put-back's write. Kernels with the trylock (7.3; not 6.12) fail a
 * scheduler switch or an nr_requests write with EBUSY while another disk
 * of the same tag set, any disk of the same SCSI host, is switching:
 * block/elevator.c elv_iosched_store() and blk-sysfs.c
 * queue_requests_store() take the tag set's update_nr_hwq_lock with
 * down_write_trylock(). A pass that sets is retried by the loop; a
 * put-back at stop has no later pass, so it waits out the other switch
 * here, bounded (1 s in all). Seen in tests/vm/stacktest.py: at SIGTERM,
 * one of a multipath map's two paths stayed on none. */
static int put_back_write(Pass *p, const char *attr, const char *value) {
        int k = queue_dir_write(&p->queue, attr, value);

        for (unsigned i = 0; k == -EBUSY && i < PUT_BACK_BUSY_TRIES; i++) {
                struct timespec ts = { .tv_nsec = PUT_BACK_BUSY_BASE_NSEC << i };

                (void) nanosleep(&ts, NULL);
                k = queue_dir_write(&p->queue, attr, value);
        }
        return k;
}

/* Writes one step and reads it back. Returns -ENODEV when the device is
 * gone, 0 otherwise (the outcome is in the item and the log; the record
 * learns what landed from the next round's read, see resolve_intents(),
 * which for the scheduler is this read back). */
static int run_step(Pass *p, const Step *s, ApplyOutcome *out) {
        PlanItem *it = s->kind == STEP_SET ? pass_item(p, s->tunable) : NULL;
        char now[VALUE_MAX] = "";
        int k, w;

        if (!still_same_queue(p))
                return -ENODEV;
        count_write(p, s->tunable);
        k = w = s->kind == STEP_RESTORE ? put_back_write(p, tunables[s->tunable].attr, s->value) :
                                          queue_dir_write(&p->queue, tunables[s->tunable].attr, s->value);
        if (is_gone(p, k))
                return -ENODEV;
        if (k == 0)
                k = pass_read_current(p, s->tunable, now, sizeof(now));
        if (k == 0 && !streq(now, s->value)) {
                /* the kernel kept another value: that is what this write
                 * left, on disk before the next write, or a crash there
                 * would leave an intent live never equals: the value taken
                 * for the admin's, its found one lost */
                (void) device_record_intent(p->req->record, s->tunable, now);
                if (save_record(p, p->req->record) == -ENOMEM)
                        return -ENOMEM;
        }
        if (k == 0 && s->tunable == TUNABLE_SCHEDULER) {
                p->live[s->tunable] = (LiveValue) { .state = LIVE_OK };
                (void) strscpy(p->live[s->tunable].value, sizeof(p->live[s->tunable].value), now);
                p->scheduler_read_back = true;
        }
        if (s->kind == STEP_RESTORE) {
                log_restore(p, s, k, now);
                out->restored += k == 0 && streq(now, s->value);
                out->restore_failed += k < 0 || !streq(now, s->value);
        }
        p->skip[s->tunable] = true;
        if (s->tunable == TUNABLE_SCHEDULER && k == -EINVAL && s->kind == STEP_SET && next_scheduler_choice(p))
                p->skip[s->tunable] = false;    /* not an error: the policy's next choice */
        else if (w < 0 && p->req->stats)
                p->req->stats->write_errors++;
        if (!it)
                return 0;
        p->done[s->tunable] = true;
        (void) strscpy(it->current, sizeof(it->current), now);
        if (k == 0 && streq(now, s->value)) {
                it->result = RESULT_APPLIED;
                it->error[0] = 0;
        } else if (k == 0)
                item_error(it, RESULT_NOT_KEPT, "wrote %s, the kernel kept %s", s->value, now);
        else {
                item_error(it, is_transient(k) ? RESULT_RETRY : RESULT_FAILED, "%s: %s", w < 0 ? "write" : "read back",
                           strerror(-k));
                p->retry |= is_transient(k);
        }
        return 0;
}


/* The record as reconciled replaces the device's, on disk first. */
static int commit_record(Pass *p, Reconciled *rec) {
        DeviceRecord *r = p->req->record;
        int k;

        if (device_record_equal(r, &rec->record) && p->saved_once)
                return 0;
        k = save_record(p, &rec->record);
        if (k < 0)
                return k;
        device_record_done(r);
        *r = rec->record;
        rec->record = (DeviceRecord) {};
        p->saved_once = true;
        return 0;
}

static void fill_item(Pass *p, PlanItem *it, bool planning) {
        const LiveValue *lv = &p->live[it->tunable];
        const char *needs = tunables[it->tunable].scheduler;

        (void) strscpy(it->before, sizeof(it->before), p->before[it->tunable].value);
        (void) strscpy(it->current, sizeof(it->current), lv->value);
        if (p->done[it->tunable] || it->result == RESULT_UNSUPPORTED)
                return;
        it->error[0] = 0;
        if (lv->state == LIVE_OK && streq(lv->value, it->target))
                it->result = RESULT_UNCHANGED;
        else if (p->overridden[it->tunable])
                item_error(it, RESULT_OVERRIDDEN, "someone else changed it to %s", lv->value);
        else if (lv->state == LIVE_ABSENT && (!needs || streq(p->live[TUNABLE_SCHEDULER].value, needs)))
                item_error(it, RESULT_UNSUPPORTED, "queue/%s does not exist on this device", tunables[it->tunable].attr);
        else if (planning)
                it->result = RESULT_PLANNED;    /* in a dry run, also what waits for its scheduler */
        else if (lv->state == LIVE_ABSENT)
                item_error(it, RESULT_FAILED, "%s is not the scheduler", needs);
        else if (lv->state == LIVE_UNKNOWN)
                item_error(it, RESULT_FAILED, "cannot read queue/%s", tunables[it->tunable].attr);
        else
                item_error(it, RESULT_FAILED, "left at %s", lv->value);
}

static void fill_plan(Pass *p, bool planning) {
        if (!p->plan)
                return;
        for (unsigned i = 0; i < p->plan->n_items; i++)
                fill_item(p, &p->plan->items[i], planning);
}

static void note_overridden(Pass *p, const Reconciled *rec, ApplyOutcome *out) {
        for (unsigned t = 0; t < n_tunables; t++)
                p->overridden[t] |= rec->overridden[t];
        for (unsigned t = 0; t < n_tunables; t++)
                if (rec->overridden[t] && out->overridden < 0) {
                        out->overridden = (int) t;
                        (void) strscpy(out->overridden_live, sizeof(out->overridden_live), p->live[t].value);
                }
}

/* A revalidation's, not someone else's: said as such, neither drift nor
 * an override. */
static void log_kernel_resets(const Pass *p, const Reconciled *rec) {
        for (unsigned i = 0; i < rec->n_steps; i++) {
                const Step *s = &rec->steps[i];

                if (!rec->kernel_reset[s->tunable])
                        continue;
                if (p->req->stats)
                        p->req->stats->kernel_resets++;
                log_notice("%s: %s is back at the kernel's default %s (a queue-limits update: a revalidation), %s %s",
                           p->req->dev, tunables[s->tunable].attr, p->live[s->tunable].value,
                           s->kind == STEP_SET ? "setting it again to" : "putting back", s->value);
        }
}

/* Dry run or held device: what one pass would write, nothing written. */
static int plan_only(Pass *p, ApplyOutcome *out) {
        Reconciled rec;
        ReconcileInput in = { .record = p->req->record, .wanted = p->wanted, .live = p->live,
                              .kernel_default = p->kernel_default,
                              .kernel_version = p->req->kernel_version };
        int k = reconcile(&in, &rec);

        if (k < 0)
                return k;
        for (unsigned i = 0; i < rec.n_steps; i++)
                if (rec.steps[i].kind == STEP_RESTORE)
                        log_info("%s: would put back %s=%s", p->req->dev, tunables[rec.steps[i].tunable].attr,
                                 rec.steps[i].value);
        note_overridden(p, &rec, out);
        fill_plan(p, true);
        device_record_done(&rec.record);
        return 0;
}

/* New media adopts what the admin set before it, in every round (a switch
 * is a round of its own: the other tunables come after it), and only what
 * still holds the value seen at the change, or, without that snapshot, at
 * the pass's first read: what they set while the pass runs is an override
 * of the new medium. */
static int run_round(Pass *p, unsigned round, ApplyOutcome *out, bool *settled) {
        ReconcileInput in = { .record = p->req->record, .wanted = p->wanted, .live = p->live, .skip = p->skip,
                              .take_over = p->req->take_over, .new_media = p->req->new_media,
                              .media_live = p->req->media_live ?: round > 0 ? p->before : NULL,
                              .kernel_default = p->kernel_default,
                              .kernel_version = p->req->kernel_version };
        Reconciled rec;
        int k;

        k = reconcile(&in, &rec);
        if (k < 0)
                return k;
        note_overridden(p, &rec, out);
        log_kernel_resets(p, &rec);
        /* on disk before the first write: what is found, what is about to land */
        k = rec.n_steps > 0 || !device_record_equal(p->req->record, &rec.record) ? commit_record(p, &rec) : 0;
        for (unsigned i = 0; k == 0 && i < rec.n_steps; i++)
                k = run_step(p, &rec.steps[i], out);
        if (k == -ENOMEM || k == -ENODEV) {
                device_record_done(&rec.record);
                return k;
        }
        if (k < 0) {
                out->record_error = k;  /* nothing written: the items say why */
                for (unsigned i = 0; i < rec.n_steps; i++) {
                        PlanItem *it = rec.steps[i].kind == STEP_SET ? pass_item(p, rec.steps[i].tunable) : NULL;

                        if (it) {
                                item_error(it, RESULT_FAILED, "cannot save the state record: %s", strerror(-k));
                                p->done[it->tunable] = true;
                        }
                }
                *settled = true;
        } else
                *settled = rec.n_steps == 0;
        device_record_done(&rec.record);
        return 0;
}

/* No queue directory to work on, and the disk is there (its queue not
 * registered yet, or no fd left): nothing read, nothing written. */
static int pass_unopened(Pass *p, int error) {
        /* out of fds or memory: another try may find some */
        bool transient = is_transient(error) || error == -EMFILE || error == -ENFILE || error == -ENOMEM;

        log_warning_errno(error, "%s: cannot open its queue directory, leaving it alone: %m", p->req->dev);
        for (unsigned i = 0; p->plan && i < p->plan->n_items; i++) {
                PlanItem *it = &p->plan->items[i];

                if (it->result != RESULT_UNSUPPORTED)
                        item_error(it, transient ? RESULT_RETRY : RESULT_FAILED, "cannot open queue/: %s",
                                   strerror(-error));
        }
        return transient ? -EAGAIN : 0;
}

/* The queue the whole pass works on: the one the name stands for now,
 * which must be the record's when the record knows its queue (queue_id;
 * 0: not known, the one opened is the pass's). */
static int pass_open(Pass *p) {
        const ApplyRequest *req = p->req;
        int k = queue_dir_open(req->roots, req->dev, &p->queue);

        if ((k == -ENOENT || k == -ENOTDIR) && !device_present(req->roots, req->dev))
                return -ENODEV;
        if (k < 0)
                return pass_unopened(p, k);
        if (req->record->id.queue_id && p->queue.ino != req->record->id.queue_id)
                return -ENODEV;         /* removed and added again while the pass waited */
        return 1;
}

/* After a switch to mq-deadline, whether this kernel's mq-deadline has
 * dispatch_direct (kernel_caps_note()): looked up below the held queue,
 * where the switch just made iosched/, not by the whole path after the
 * pass. */
static void probe_dispatch_direct(Pass *p, ApplyOutcome *out) {
        const PlanItem *it = pass_item(p, TUNABLE_SCHEDULER);
        int k;

        if (!p->req->probe_dispatch_direct || !it || it->result != RESULT_APPLIED ||
            !streq(it->current, "mq-deadline"))
                return;
        k = sysfs_dir_access(&p->queue.dir, "iosched/dispatch_direct");
        /* another error (ENOMEM, say) tells nothing */
        out->dispatch_direct = k == 0 ? TRISTATE_YES : k == -ENOENT ? TRISTATE_NO : TRISTATE_UNKNOWN;
}

static int apply_pass(Pass *p, ApplyOutcome *out) {
        const ApplyRequest *req = p->req;
        bool settled = false;
        int k;

        k = pass_open(p);
        if (k <= 0)
                return k;
        k = read_live(p);
        if (k < 0)
                return k;
        memcpy(p->before, p->live, sizeof(p->live));
        if (!req->state)
                return plan_only(p, out);
        for (unsigned round = 0; !settled; round++) {
                if (round > 0 && (k = read_live(p)) < 0)
                        return k;
                if (round == ROUNDS_MAX)        /* bounded: the last round only settles the record */
                        memset(p->skip, true, sizeof(p->skip));
                k = run_round(p, round, out, &settled);
                if (k < 0)
                        return k;
                settled |= round == ROUNDS_MAX;
        }
        fill_plan(p, false);
        probe_dispatch_direct(p, out);
        return p->retry ? -EAGAIN : 0;
}

int apply_device(const ApplyRequest *req, Plan *plan, ApplyOutcome *out) {
        Pass p = { .req = req, .plan = plan, .queue = { .dir = SYSFS_DIR_NULL } };
        int k;

        *out = (ApplyOutcome) { .overridden = -1, .dispatch_direct = TRISTATE_UNKNOWN };
        wanted_from_plan(&p);
        k = apply_pass(&p, out);
        /* gone: what this pass saved names a queue that is no more. Left,
         * it would outlive a clean stop when the next disk at the number
         * (whose pass waits for this one, applier.c) has nothing to save;
         * no other save at the number runs meanwhile */
        if (k == -ENODEV && p.saved_once)
                (void) state_remove(req->state, req->record->id.major, req->record->id.minor);
        queue_dir_close(&p.queue);
        return k;
}
