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
 * today says. A file that cannot be taken over now stays, and its disk is
 * not written to (the caller holds it) until it can. */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "apply.h"
#include "log.h"
#include "reconcile.h"
#include "state-file.h"
#include "state-v1.h"
#include "sysfs.h"
#include "util.h"

#define V1_HEADER "# blkpolicyd originals v1\n"

/* -EBADMSG for anything the first format's own loader did not accept: the
 * file is then kept, not half taken over. */
static int parse_v1(const char *text, size_t size, DeviceRecord *r) {
        _cleanup_free_ char *copy = strndup(text, size);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        if (!startswith(copy, V1_HEADER))
                return -EBADMSG;
        for (char *line = strtok_r(copy + strlen(V1_HEADER), "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                char *eq = strchr(line, '='), *value;
                int t;

                if (!eq)
                        return -EBADMSG;
                *eq = 0;
                t = tunable_find_attr(strstrip(line));
                value = strstrip(eq + 1);
                if (t < 0 || !state_value_valid(value))
                        return -EBADMSG;
                if (device_record_found(r, (unsigned) t, value) < 0)
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
        (void) queue_inode(roots, dev, &id->queue_id);
        return 0;
}

/* A file older than this boot speaks of disks that are gone: every queue
 * setting starts from the kernel's at boot. */
static bool written_before_boot(const StateDir *d, const Roots *roots, const char *name) {
        char path[PATH_MAX], line[128];
        _cleanup_fclose_ FILE *f = NULL;
        unsigned long long btime = 0;
        struct stat st;

        if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        snprintf(path, sizeof(path), "%s/stat", roots->proc);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "btime %llu", &btime) == 1)
                        break;
        return btime > 0 && (unsigned long long) st.st_mtime < btime;
}

/* found → found + written, from what the disk holds now, for what today's
 * record (newer, merged in already) does not know better. -EAGAIN: a
 * value could not be read now; the file stays for the next start. */
static int mark_written(const Roots *roots, const char *dev, DeviceRecord *r, const DeviceRecord *newer) {
        const AttrRecord *s = device_record_get(r, TUNABLE_SCHEDULER);
        char live[VALUE_MAX];
        bool switched = false;
        int k;

        if (s) {
                k = attr_read_current(roots, dev, TUNABLE_SCHEDULER, live, sizeof(live));
                if (k < 0)
                        return -EAGAIN; /* ENOENT too: the disk is there (its dev was read), being added */
                switched = !streq(live, s->found);
        }
        for (unsigned i = device_record_count(r); i-- > 0;) {
                unsigned t = r->attrs->at[i].tunable;
                const char *written = NULL;

                if (device_record_get(newer, t))
                        continue;       /* today's daemon recorded what it wrote */
                /* the switch away from the found scheduler reset these */
                if (t != TUNABLE_SCHEDULER && switched &&
                    (tunable_reset_by_switch(t, s->found) || tunable_reset_by_nr_requests(t)))
                        written = WRITTEN_UNKNOWN;
                else {
                        k = attr_read_current(roots, dev, t, live, sizeof(live));
                        if (k < 0 && k != -ENOENT)
                                return -EAGAIN;
                        /* absent (another scheduler's, unsupported): nothing to put back */
                        if (k == 0 && !streq(live, r->attrs->at[i].found))
                                written = live;
                }
                k = written ? device_record_written(r, t, written) : device_record_drop(r, t);
                if (k < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* A record of today for the same disk: it was made after the first
 * format's daemon changed things, so its found values are not the
 * originals where the old file has one. The old found wins; what
 * today's daemon wrote or was writing stays its own. */
static int merge_newer(DeviceRecord *r, const DeviceRecord *newer) {
        for (unsigned i = 0; i < device_record_count(newer); i++) {
                const AttrRecord *a = &newer->attrs->at[i];

                if (device_record_found(r, a->tunable, a->found) < 0 ||
                    (a->written && device_record_written(r, a->tunable, a->written) < 0) ||
                    (a->intent && device_record_intent(r, a->tunable, a->intent) < 0))
                        return -ENOMEM;
        }
        return 0;
}

static int take_over(const StateDir *d, const Roots *roots, const char *dev, DeviceRecord *r) {
        DeviceRecord newer = {};
        int k;

        k = read_identity(roots, dev, &r->id);
        if (k == -ENOENT || k == -ENODEV) {
                log_info("%s: a state record of the first format for a disk that is gone, dropping it", dev);
                return state_remove_named(d, dev);
        }
        if (k < 0)
                return k;
        k = state_load(d, r->id.major, r->id.minor, &newer, NULL);
        if (k < 0 && k != -ENOENT)
                return k;       /* today's record unreadable: touch neither */
        if (k >= 0 && !device_identity_same(&newer.id, &r->id)) {
                /* an earlier disk's at the number, as the daemon drops it */
                log_info("%s: the state record for %u:%u was an earlier disk's, dropping it", dev, r->id.major,
                         r->id.minor);
                device_record_done(&newer);
                k = state_remove(d, r->id.major, r->id.minor);
                if (k < 0)
                        return k;
        } else if (k > 0) {
                /* torn: kept beside, as the daemon keeps it, before the merge is saved over it */
                log_warning("%s: %d unreadable line(s) in its state record; kept as %u:%u.torn", dev, k,
                            r->id.major, r->id.minor);
                k = state_set_aside(d, &newer, dev);
                if (k < 0) {
                        device_record_done(&newer);
                        return k;
                }
        }
        /* merged first: a value the old daemon's original has again is
         * dropped only where today's record has nothing to say */
        k = merge_newer(r, &newer);
        if (k == 0)
                k = mark_written(roots, dev, r, &newer);
        device_record_done(&newer);
        if (k < 0)
                return k;
        if (!device_record_empty(r)) {
                k = state_save(d, r, dev);
                if (k < 0)
                        return k;
        }
        log_info("%s: state record of the first format taken over: %u value(s) to put back", dev,
                 device_record_count(r));
        return state_remove_named(d, dev);
}

static int import_one(const StateDir *d, const Roots *roots, const char *dev) {
        _cleanup_(device_record_done) DeviceRecord r = {};
        _cleanup_free_ char *text = NULL;
        size_t size;
        int k;

        if (written_before_boot(d, roots, dev)) {
                log_info("%s: a state record of the first format from before this boot, dropping it", dev);
                return state_remove_named(d, dev);
        }
        k = state_read_named(d, dev, &text, &size);
        if (k < 0)
                return k;
        k = parse_v1(text, size, &r);
        if (k < 0)
                return k;
        return take_over(d, roots, dev, &r);
}

int state_import_v1(const StateDir *d, const Roots *roots, char ***pending) {
        _cleanup_strv_free_ char **names = NULL, **left = NULL;
        int r = state_list_named(d, &names);

        *pending = NULL;
        if (r < 0)
                return log_warning_errno(r, "Cannot list the state dir for records of the first format, "
                                            "ignoring: %m");
        for (char **n = names; n && *n; n++) {
                int k = import_one(d, roots, *n);

                if (k == -ENOMEM)
                        return log_oom();
                if (k >= 0)
                        continue;
                if (k == -EBADMSG)
                        log_warning("%s/devices/%s: not a state record blkpolicyd can take over; nothing is written "
                                    "to %s until it is moved away", d->path, *n, *n);
                else
                        log_warning_errno(k, "%s: cannot take over its state record of the first format, writing "
                                             "nothing to it until the next start: %m", *n);
                if (strv_push(&left, *n) < 0)
                        return log_oom();
        }
        *pending = TAKE_PTR(left);
        return 0;
}
