/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --restore: put back what the state records say, with no daemon running
 * (after --once, or a run that was killed). Every record goes through the
 * same reconcile as a stop: only what blkpolicyd wrote and still owns is
 * written back; a record whose queue is gone is dropped. */
#include <inttypes.h>
#include <limits.h>

#include "apply.h"
#include "log.h"
#include "manager.h"
#include "restore.h"
#include "util.h"

/* A hidden disk (an NVMe multipath path) has no <sysfs>/dev/block link:
 * the recorded name, if diskstats still gives it the recorded number
 * (sysfs.h, diskstats_number()). */
static int hidden_record_name(const Roots *roots, const DeviceIdentity *id, const char *recorded_name, char *name,
                              size_t size) {
        unsigned major, minor;
        int r = diskstats_number(roots, recorded_name, &major, &minor);

        if (r < 0)
                return r == -ENOENT ? -ENODEV : r;
        if (major != id->major || minor != id->minor)
                return -ENODEV;
        return strscpy(name, size, recorded_name);
}

/* The disk's name now, and whether its queue is the recorded one. */
static int record_device(const Roots *roots, const DeviceIdentity *id, const char *recorded_name, char *name,
                         size_t size) {
        char path[PATH_MAX];
        DeviceIdentity now;
        uint64_t queue_id;
        int r;

        snprintf(path, sizeof(path), "%s/dev/block/%u:%u", roots->sysfs, id->major, id->minor);
        r = sysfs_read_link_name(path, name, size);
        if (r == -ENOENT)
                r = hidden_record_name(roots, id, recorded_name, name, size);
        if (r < 0)
                return r == -ENOENT ? -ENODEV : r;
        r = queue_inode(roots, name, &queue_id);
        if (r < 0)
                return r == -ENOENT ? -ENODEV : r;
        now = (DeviceIdentity) { .major = id->major, .minor = id->minor, .queue_id = queue_id };
        return device_identity_same(id, &now) ? 0 : -ENODEV;
}

/* Returns how many values stay changed, or -ENOMEM. */
static int restore_one(Manager *m, unsigned major, unsigned minor) {
        _cleanup_(device_record_done) DeviceRecord rec = {};
        char name[64], recorded_name[STATE_NAME_MAX] = "?";
        ApplyOutcome out;
        ApplyRequest req = { .roots = &m->roots, .dev = name, .record = &rec,
                             .state = m->options->dry_run ? NULL : &m->state, .kernel_version = m->caps.version };
        int r, torn;

        r = state_load(&m->state, major, minor, &rec, recorded_name);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_warning_errno(r, "%u:%u: cannot read its state record, leaving it: %m", major, minor);
                return 1;
        }
        torn = r;
        if (torn > 0) {
                /* what was on the lost lines cannot be put back: say so, keep them */
                log_error("%u:%u: %d unreadable line(s) in its state record; kept as %s/devices/%u:%u.torn, "
                          "the rest is put back", major, minor, torn, m->state.path, major, minor);
                if (!m->options->dry_run && state_set_aside(&m->state, &rec, recorded_name) < 0)
                        log_warning("%u:%u: cannot keep the readable part as its record; the torn record stays "
                                    "as it is", major, minor);
        }
        r = record_device(&m->roots, &rec.id, recorded_name, name, sizeof(name));
        if (r == -ENODEV) {
                log_info("%u:%u (%s): the disk is gone, dropping its record", major, minor, recorded_name);
                if (!m->options->dry_run)
                        (void) state_remove(&m->state, major, minor);
                return 0;
        }
        if (r < 0) {
                log_warning_errno(r, "%u:%u: cannot find its disk, leaving the record: %m", major, minor);
                return (int) device_record_count(&rec);
        }
        if (m->options->device_globs && !strv_fnmatch(m->options->device_globs, name))
                return 0;
        r = apply_device(&req, NULL, &out);
        if (r == -ENOMEM)
                return r;
        if (r == -ENODEV) {
                if (!m->options->dry_run)
                        (void) state_remove(&m->state, major, minor);
                return 0;
        }
        log_info("%s: put back %u value(s)%s", name, out.restored, m->options->dry_run ? " (dry run: none)" : "");
        return (m->options->dry_run ? 0 : (int) device_record_count(&rec)) + torn;
}

int restore_records(Manager *m) {
        _cleanup_free_ unsigned (*records)[2] = NULL;
        size_t n;
        int r, left = 0;

        r = state_list(&m->state, &records, &n);
        if (r < 0)
                return log_error_errno(r, "Cannot list %s/devices: %m", m->state.path);
        for (size_t i = 0; i < n; i++) {
                r = restore_one(m, records[i][0], records[i][1]);
                if (r < 0)
                        return log_oom();
                left += r;
        }
        if (left > 0)
                return log_error_errno(EIO, "%d value(s) could not be put back; their records stay", left);
        if (m->ctx.v1_pending)
                return log_error_errno(EIO, "%zu record(s) of the first format could not be taken over (see above); "
                                            "their disks were not put back", strv_length(m->ctx.v1_pending));
        log_info("%zu record(s) handled, nothing left changed", n);
        return 0;
}
