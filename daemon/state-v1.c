/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Records of the first format: "# blkpolicyd originals v1", one file per
 * device name, the original values only (blkpolicyd up to f21ed78). A
 * daemon of that version killed before it could put them back left them;
 * they become records of today once, before anything reads the state dir,
 * so that what they hold still goes back.
 *
 * That version put back every original at stop, whoever changed the value
 * since; so a live value that differs from its original is taken as
 * blkpolicyd's. After a switch away from the original scheduler, what the
 * switch reset (nr_requests, the old scheduler's iosched/) is marked as
 * reset by it: it goes back once the scheduler is back, as a record of
 * today says. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "apply.h"
#include "log.h"
#include "reconcile.h"
#include "state-file.h"
#include "state-v1.h"
#include "sysfs.h"
#include "util.h"

#define V1_HEADER "# blkpolicyd originals v1\n"

static int parse_v1(const char *text, size_t size, DeviceRecord *r) {
        _cleanup_free_ char *copy = strndup(text, size);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        if (!startswith(copy, V1_HEADER))
                return -EBADMSG;
        for (char *line = strtok_r(copy + strlen(V1_HEADER), "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                char *eq = strchr(line, '=');
                int t;

                if (!eq)
                        continue;
                *eq = 0;
                t = tunable_find_attr(line);
                if (t >= 0 && eq[1] && device_record_found(r, (unsigned) t, eq + 1) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The disk's identity now, as a record of today carries it. */
static int read_identity(const Roots *roots, const char *dev, DeviceIdentity *id) {
        char path[PATH_MAX], buf[64];
        int r;

        r = block_path(path, sizeof(path), roots, dev, "dev");
        if (r < 0)
                return r;
        r = sysfs_read(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        if (sscanf(buf, "%u:%u", &id->major, &id->minor) != 2)
                return -EBADMSG;
        if (block_path(path, sizeof(path), roots, dev, "diskseq") == 0 && sysfs_read(path, buf, sizeof(buf)) == 0)
                (void) sscanf(buf, "%" SCNu64, &id->diskseq);
        if (block_path(path, sizeof(path), roots, dev, "queue") == 0)
                (void) sysfs_inode(path, &id->queue_id);
        return 0;
}

static bool reset_by_the_switch(unsigned t) {
        return tunables[t].scheduler || streq(tunables[t].attr, "nr_requests") || tunable_reset_by_nr_requests(t);
}

/* found → found + written, from what the disk holds now. -EAGAIN: a value
 * could not be read; the file stays for the next start. */
static int mark_written(const Roots *roots, const char *dev, DeviceRecord *r) {
        const AttrRecord *s = device_record_get(r, TUNABLE_SCHEDULER);
        char live[VALUE_MAX];
        bool switched = false;
        int k;

        if (s) {
                k = attr_read_current(roots, dev, TUNABLE_SCHEDULER, live, sizeof(live));
                if (k < 0)
                        return k == -ENOENT ? -ENODEV : -EAGAIN;
                switched = !streq(live, s->found);
        }
        for (unsigned i = r->n_attrs; i-- > 0;) {
                unsigned t = r->attrs[i].tunable;
                const char *written;

                if (t != TUNABLE_SCHEDULER && switched && reset_by_the_switch(t))
                        written = WRITTEN_UNKNOWN;
                else {
                        k = attr_read_current(roots, dev, t, live, sizeof(live));
                        if (k < 0)
                                return -EAGAIN;
                        written = streq(live, r->attrs[i].found) ? NULL : live;
                }
                k = written ? device_record_written(r, t, written) : device_record_drop(r, t);
                if (k < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int import_one(const StateDir *d, const Roots *roots, const char *dev) {
        _cleanup_(device_record_done) DeviceRecord r = {};
        _cleanup_free_ char *text = NULL;
        DeviceRecord newer = {};
        size_t size;
        int k;

        k = state_read_named(d, dev, &text, &size);
        if (k < 0)
                return k;
        k = parse_v1(text, size, &r);
        if (k < 0)
                return k;
        k = read_identity(roots, dev, &r.id);
        if (k == -ENOENT || k == -ENODEV) {
                log_info("%s: a state record of the first format for a disk that is gone, dropping it", dev);
                return state_remove_named(d, dev);
        }
        if (k < 0)
                return k;
        if (state_load(d, r.id.major, r.id.minor, &newer) >= 0) {
                device_record_done(&newer);
                log_info("%s: a state record of the first format beside one of today, dropping the older", dev);
                return state_remove_named(d, dev);
        }
        k = mark_written(roots, dev, &r);
        if (k == -ENODEV)
                return state_remove_named(d, dev);
        if (k < 0)
                return k;
        if (!device_record_empty(&r)) {
                k = state_save(d, &r, dev);
                if (k < 0)
                        return k;
        }
        log_info("%s: state record of the first format taken over: %u value(s) to put back", dev, r.n_attrs);
        return state_remove_named(d, dev);
}

int state_import_v1(const StateDir *d, const Roots *roots) {
        _cleanup_strv_free_ char **names = NULL;
        int r = state_list_named(d, &names);

        if (r < 0)
                return log_warning_errno(r, "Cannot list the state dir for records of the first format, "
                                            "ignoring: %m");
        for (char **n = names; n && *n; n++) {
                int k = import_one(d, roots, *n);

                if (k == -ENOMEM)
                        return log_oom();
                if (k == -EBADMSG)
                        log_warning("%s/devices/%s is not a state record, ignoring it", d->path, *n);
                else if (k < 0)
                        log_warning_errno(k, "%s: cannot take over its state record of the first format, "
                                             "keeping it for the next start: %m", *n);
        }
        return 0;
}
