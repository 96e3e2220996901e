/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* apply: read, compare, write, read back. A scheduler write costs 10-16 ms
 * (queue freeze + RCU) even when the value is unchanged, so nothing is
 * written that is already in place. Never loops: a transient error is
 * reported as RESULT_RETRY and the caller decides when to come back. */
#include <limits.h>

#include "apply.h"
#include "classify.h"
#include "log.h"
#include "util.h"

int attr_read_current(const Roots *r, const char *dev, unsigned tunable, char *buf, size_t size) {
        char raw[256];
        SchedulerList l;
        int k;

        k = queue_attr_read(r, dev, tunables[tunable].attr, raw, sizeof(raw));
        if (k < 0)
                return k;
        if (tunable != TUNABLE_SCHEDULER)
                return strscpy(buf, size, raw);
        if (scheduler_list_parse(raw, &l) < 0)
                return -EBADMSG;
        return strscpy(buf, size, scheduler_list_current(&l));
}

static bool device_present(const Roots *r, const char *dev) {
        char path[PATH_MAX];

        return block_path(path, sizeof(path), r, dev, "dev") == 0 && sysfs_exists(path);
}

static bool is_transient(int error) {
        /* ENOENT from a scheduler write while add_disk() has not finished */
        return error == -ENOENT || error == -EBUSY || error == -EAGAIN || error == -EINTR;
}

static bool is_gone(int error) {
        return error == -ENODEV || error == -ENXIO;
}

static void item_fail(PlanItem *item, ItemResult result, int error, const char *what) {
        item->result = result;
        snprintf(item->error, sizeof(item->error), "%s: %s", what, strerror(-error));
}

/* One attempt at one value. Returns 0 or a -errno from the write. */
static int write_and_verify(const ApplyRequest *req, PlanItem *item, const char *value) {
        const char *attr = tunables[item->tunable].attr;
        int k;

        if (req->stats) {
                if (item->tunable == TUNABLE_SCHEDULER)
                        req->stats->scheduler_writes++;
                else
                        req->stats->other_writes++;
        }
        k = queue_attr_write(req->roots, req->dev, attr, value);
        if (k < 0)
                return k;
        k = attr_read_current(req->roots, req->dev, item->tunable, item->current, sizeof(item->current));
        if (k < 0)
                return k;
        if (streq(item->current, value)) {
                item->result = RESULT_APPLIED;
                item->error[0] = 0;
        } else {
                item->result = RESULT_FAILED;
                snprintf(item->error, sizeof(item->error), "wrote %s, the kernel kept %s", value, item->current);
        }
        return 0;
}

/* EINVAL from a scheduler write means "not available here": the next
 * alternative of the policy's list is tried, once each. */
static int apply_scheduler_fallbacks(const ApplyRequest *req, const Plan *plan, PlanItem *item) {
        for (unsigned i = 0; i < SCHED_CHOICES_MAX; i++) {
                const char *name;
                int k;

                if (!(plan->fallback_mask & (1u << i)))
                        continue;
                name = plan->choices[i].name;
                (void) strscpy(item->target, sizeof(item->target), name);
                if (streq(item->current, name)) {
                        item->result = RESULT_UNCHANGED;
                        return 0;
                }
                k = write_and_verify(req, item, name);
                if (k != -EINVAL)
                        return k;
        }
        return -EINVAL;
}

static int apply_item(const ApplyRequest *req, const Plan *plan, PlanItem *item, bool *originals_changed) {
        const char *attr = tunables[item->tunable].attr;
        int k;

        k = attr_read_current(req->roots, req->dev, item->tunable, item->current, sizeof(item->current));
        if (k == -ENOENT && !device_present(req->roots, req->dev))
                return -ENODEV;
        if (is_gone(k))
                return -ENODEV;
        if (k == -ENOENT) {
                item->result = RESULT_UNSUPPORTED;
                snprintf(item->error, sizeof(item->error), "queue/%s does not exist on this device", attr);
                return 0;
        }
        if (k < 0) {
                item_fail(item, RESULT_FAILED, k, "read");
                return 0;
        }
        (void) strscpy(item->before, sizeof(item->before), item->current);
        if (streq(item->current, item->target)) {
                item->result = RESULT_UNCHANGED;
                return 0;
        }
        if (req->dry_run) {
                item->result = RESULT_PLANNED;
                return 0;
        }

        k = originals_record(req->originals, item->tunable, item->current);
        if (k < 0)
                return k;
        if (k > 0)
                *originals_changed = true;

        k = write_and_verify(req, item, item->target);
        if (k == -EINVAL && item->tunable == TUNABLE_SCHEDULER)
                k = apply_scheduler_fallbacks(req, plan, item);
        if (k == 0)
                return 0;
        if (is_gone(k) || (k == -ENOENT && !device_present(req->roots, req->dev)))
                return -ENODEV;
        item_fail(item, is_transient(k) ? RESULT_RETRY : RESULT_FAILED, k, "write");
        return 0;
}

int apply_plan(const ApplyRequest *req, Plan *plan, bool *originals_changed) {
        bool retry = false, sched_planned = false;

        *originals_changed = false;
        for (unsigned i = 0; i < plan->n_items; i++) {
                PlanItem *item = &plan->items[i];
                int k;

                if (item->result == RESULT_UNSUPPORTED) {
                        /* decided as such: nothing to write, but show what is there */
                        (void) attr_read_current(req->roots, req->dev, item->tunable, item->current,
                                                 sizeof(item->current));
                        continue;
                }
                if (sched_planned && tunables[item->tunable].scheduler) {
                        /* dry run: the scheduler whose tunables these are is not set yet */
                        item->result = RESULT_PLANNED;
                        continue;
                }
                k = apply_item(req, plan, item, originals_changed);
                if (k < 0)
                        return k;
                if (item->result == RESULT_RETRY)
                        retry = true;
                if (item->tunable == TUNABLE_SCHEDULER && item->result == RESULT_PLANNED)
                        sched_planned = true;
        }
        return retry ? -EAGAIN : 0;
}

int restore_originals(const Roots *roots, const char *dev, const Originals *o, bool dry_run) {
        int writes = 0;

        for (size_t t = 0; t < n_tunables; t++) {
                const char *original = originals_get(o, (unsigned) t);
                char current[VALUE_MAX];
                int k;

                if (!original)
                        continue;
                k = attr_read_current(roots, dev, (unsigned) t, current, sizeof(current));
                if (is_gone(k) || (k == -ENOENT && !device_present(roots, dev)))
                        return -ENODEV;
                /* ENOENT: a tunable of a scheduler that the restore just replaced */
                if (k < 0 || streq(current, original) || dry_run)
                        continue;
                k = queue_attr_write(roots, dev, tunables[t].attr, original);
                if (is_gone(k))
                        return -ENODEV;
                if (k < 0)
                        log_warning_errno(k, "%s: restoring %s=%s failed, ignoring: %m", dev,
                                          tunables[t].attr, original);
                else
                        writes++;
        }
        return writes;
}
