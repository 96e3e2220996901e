/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* classify: sysfs (and debugfs) → DeviceFacts + classes. Reads only; the
 * kernel's own facts beat names: a parentless disk's driver is its major's
 * registered name, its own name only when the major says nothing. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "classify.h"
#include "util.h"

static bool is_hctx_dir(const char *name) {
        return name[0] >= '0' && name[0] <= '9';
}

static unsigned count_hw_queues(const SysfsDir *dir) {
        unsigned n = 0;

        return sysfs_dir_count(dir, "mq", is_hctx_dir, &n) < 0 ? 0 : n;
}

/* null_blk and NVMe may add poll queues: they only serve polled I/O, so a
 * device with one default queue plus a poll queue schedules like a
 * single-queue one. Only debugfs tells a hctx's type. */
static unsigned count_poll_queues(const Roots *r, const char *name, unsigned hw_queues) {
        unsigned n = 0;

        for (unsigned i = 0; i < hw_queues; i++) {
                char path[PATH_MAX], type[32];

                if (hctx_path(path, sizeof(path), r, name, i, "type") == 0 &&
                    sysfs_read(path, type, sizeof(type)) == 0 && streq(type, "poll"))
                        n++;
        }
        return n;
}

/* Disks without a parent device, whose driver only their major tells
 * (registered: register_blkdev()'s name, as /proc/devices lists it) or,
 * when it cannot, their name (prefix). ublk asks for no major of its
 * own: add_disk() gives its disks blkext's, as NVMe's. */
static const struct {
        const char *registered;
        const char *prefix;
        const char *driver;
        DeviceClass class;
} parentless[] = {
        { NULL, "ublkb", "ublk_drv", CLASS_UBLK },
        { "nullb", "nullb", "null_blk", CLASS_NULL_BLK },      /* configfs names it as the admin likes */
        { "loop", "loop", "loop", CLASS_LOOP },
        { "nbd", "nbd", "nbd", CLASS_NBD },
        { "zram", "zram", "zram", _CLASS_MAX },
        { "device-mapper", "dm-", "device-mapper", _CLASS_MAX },       /* DM_NAME */
        { "md", "md", "md", _CLASS_MAX },
        { "mdp", NULL, "md", _CLASS_MAX },                     /* partitionable arrays, md_d0 */
        { "ramdisk", "ram", "brd", _CLASS_MAX },
};

/* /proc/devices can hold every character and block major: some 50 KiB at
 * worst, 1 KiB on the machines seen */
#define PROC_DEVICES_MAX ((size_t) 64 * 1024)

void major_cache_drop(MajorCache *c) {
        block_majors_done(&c->majors);
        c->reads = 0;
}

/* <proc>/devices into c. A file that cannot be read or parsed leaves c
 * empty: the disks' names tell what they can. Only -ENOMEM fails. */
static int majors_read(const Roots *r, MajorCache *c) {
        _cleanup_free_ char *text = NULL;
        char path[PATH_MAX];
        size_t len;
        int k;

        block_majors_done(&c->majors);
        c->reads++;
        k = snprintf(path, sizeof(path), "%s/devices", r->proc);
        if (k < 0 || (size_t) k >= sizeof(path))
                return 0;
        k = sysfs_read_all(path, PROC_DEVICES_MAX, &text, &len);
        if (k >= 0)
                k = block_majors_parse(text, len, &c->majors);
        if (k < 0)
                c->reads = 2;   /* unreadable now is unreadable for this dispatch: no re-read */
        return k == -ENOMEM ? k : 0;
}

/* The name major is registered under, NULL if none (MajorCache says when
 * the file is read). */
static int major_name(const Roots *r, MajorCache *c, unsigned major, const char **ret) {
        bool fresh = c->reads == 0;
        int k = fresh ? majors_read(r, c) : 0;

        *ret = NULL;
        if (k < 0)
                return k;
        *ret = block_majors_name(&c->majors, major);
        if (*ret || fresh || c->reads > 1)
                return 0;
        k = majors_read(r, c);
        if (k < 0)
                return k;
        *ret = block_majors_name(&c->majors, major);
        return 0;
}

static void parentless_set(DeviceFacts *f, size_t i) {
        (void) strscpy(f->driver, sizeof(f->driver), parentless[i].driver);
        if (parentless[i].class != _CLASS_MAX)
                f->classes |= CLASS_BIT(parentless[i].class);
}

/* The kernel's word: a driver of the table by its registered name, or one
 * it does not know under that name (its class then none of the above). */
static void parentless_by_major(DeviceFacts *f, const char *registered) {
        for (size_t i = 0; i < ELEMENTSOF(parentless); i++)
                if (streq_ptr(parentless[i].registered, registered)) {
                        parentless_set(f, i);
                        return;
                }
        (void) strscpy(f->driver, sizeof(f->driver), registered);
}

static void parentless_by_name(DeviceFacts *f, const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(parentless); i++)
                if (parentless[i].prefix && startswith(name, parentless[i].prefix)) {
                        parentless_set(f, i);
                        return;
                }
}

/* A renamed null_blk (blktests' configfs "dev_nullb") is still at nullb's
 * major. The name's prefix only when the major says nothing: not listed
 * (no <proc>/devices, as in a container or a fixture tree without one) or
 * blkext (BLOCK_EXT_MAJOR, 259), which holds the disks of every driver
 * that asks for no major of its own. */
static int classify_parentless(const Roots *r, MajorCache *majors, const char *name, DeviceFacts *f) {
        MajorCache once = MAJOR_CACHE_NULL;
        const char *registered;
        int k;

        k = major_name(r, majors ?: &once, f->major, &registered);
        if (k >= 0 && registered && !streq(registered, "blkext"))
                parentless_by_major(f, registered);
        else if (k >= 0)
                parentless_by_name(f, name);
        major_cache_drop(&once);
        return k;
}

static int classify_driver(const Roots *r, MajorCache *majors, const SysfsDir *dir, const char *name,
                           DeviceFacts *f) {
        if (!sysfs_dir_exists(dir, "device"))
                return classify_parentless(r, majors, name, f);
        (void) sysfs_dir_read(dir, "device/model", f->model, sizeof(f->model));
        (void) strscpy(f->model, sizeof(f->model), strstrip(f->model));
        (void) sysfs_dir_read_link_name(dir, "device/subsystem", f->subsystem, sizeof(f->subsystem));
        /* NVMe namespaces hang off the controller, whose parent has the driver */
        if (sysfs_dir_read_link_name(dir, "device/driver", f->driver, sizeof(f->driver)) < 0)
                (void) sysfs_dir_read_link_name(dir, "device/device/driver", f->driver, sizeof(f->driver));
        return 0;
}

static void classify_bus(DeviceFacts *f) {
        if (streq(f->subsystem, "virtio") || streq(f->driver, "virtio_blk"))
                f->classes |= CLASS_BIT(CLASS_VIRTIO);
        else if (streq(f->subsystem, "nvme") || streq(f->subsystem, "nvme-subsystem") ||
                 streq(f->driver, "nvme"))
                f->classes |= CLASS_BIT(CLASS_NVME);
        else if (streq(f->subsystem, "scsi"))
                f->classes |= CLASS_BIT(CLASS_SCSI);
        else if (streq(f->subsystem, "mmc"))
                f->classes |= CLASS_BIT(CLASS_MMC);
}

/* Drivers of virtual disks whose rotational flag says nothing about a
 * spinning medium: virtio-blk reports rotational=1 on every kernel seen. */
static bool is_virtual(const DeviceFacts *f) {
        return f->classes & (CLASS_BIT(CLASS_VIRTIO) | CLASS_BIT(CLASS_LOOP) | CLASS_BIT(CLASS_NULL_BLK) |
                             CLASS_BIT(CLASS_NBD) | CLASS_BIT(CLASS_UBLK));
}

static void classify_queue(const Roots *r, const SysfsDir *dir, const char *name, DeviceFacts *f) {
        char buf[256];
        unsigned long long v;

        if (sysfs_dir_read(dir, "queue/scheduler", buf, sizeof(buf)) == 0)
                (void) scheduler_list_parse(buf, &f->schedulers);
        if (sysfs_dir_read(dir, "queue/nr_requests", buf, sizeof(buf)) == 0 && sscanf(buf, "%llu", &v) == 1 &&
            v <= UINT_MAX)
                f->nr_requests = (unsigned) v;
        if (sysfs_dir_read(dir, "queue/rotational", buf, sizeof(buf)) == 0)
                f->rotational = streq(buf, "1");
        if (sysfs_dir_read(dir, "queue/zoned", buf, sizeof(buf)) == 0 && zoned_from_string(buf) > 0)
                f->zoned = (ZonedModel) zoned_from_string(buf);
        f->hw_queues = count_hw_queues(dir);
        if (f->hw_queues > 1)
                f->poll_queues = count_poll_queues(r, name, f->hw_queues);
}

/* The entries of rel below the disk, NULL when none or unreadable (an
 * old tree without the directory); *n their count. Only -ENOMEM fails. */
static int read_names(const SysfsDir *dir, const char *rel, char ***ret, unsigned *n) {
        int k = sysfs_dir_list(dir, rel, ret);

        *n = (unsigned) strv_length(*ret);
        return k == -ENOMEM ? k : 0;
}

/* The file's text as a new string; NULL when absent or empty. */
static int read_string(const SysfsDir *dir, const char *rel, char **ret) {
        char buf[256];

        *ret = NULL;
        if (sysfs_dir_read(dir, rel, buf, sizeof(buf)) < 0 || !buf[0])
                return 0;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}

/* dm's own directory (drivers/md/dm-sysfs.c: dm/name, dm/uuid; a map
 * made without a uuid reads an empty line) and md's (drivers/md/md.c:
 * md/level, "" while the array is not running, and md/raid_disks). Only
 * on their disks: four failed opens on every other disk are a storm's
 * cost for nothing. */
static int classify_dm_md(const SysfsDir *dir, const char *driver, DeviceTopology *t, DeviceStack *s) {
        char buf[64];
        int k = 0;

        if (streq(driver, "device-mapper")) {
                k = read_string(dir, "dm/name", &s->dm_name);
                if (k >= 0)
                        k = read_string(dir, "dm/uuid", &s->dm_uuid);
                if (k >= 0 && s->dm_uuid)
                        dm_uuid_prefix(s->dm_uuid, t->dm_uuid_prefix);
                return k;
        }
        if (!streq(driver, "md"))
                return 0;
        if (sysfs_dir_read(dir, "md/level", buf, sizeof(buf)) == 0)
                (void) strscpy(t->md_level, sizeof(t->md_level), buf);
        if (sysfs_dir_read(dir, "md/raid_disks", buf, sizeof(buf)) == 0)
                (void) sscanf(buf, "%u", &t->md_raid_disks);
        return 0;
}

/* NVMe native multipath. The head hangs off the subsystem device
 * (multipath.c: device_add_disk(&head->subsys->dev, ...)) and from 6.15
 * has multipath/, a link per path (sysfs.c: nvme_ns_mpath_attr_group,
 * visible on heads only). A path is the controller's namespace that core.c
 * nvme_alloc_ns() names nvmeXcYnZ and hides (GENHD_FL_HIDDEN) because a
 * head stands for it. */
static int classify_nvme_multipath(const SysfsDir *dir, DeviceFacts *f, DeviceStack *s) {
        int k;

        if (!(f->classes & CLASS_BIT(CLASS_NVME)))
                return 0;
        k = sysfs_dir_list(dir, "multipath", &s->nvme_paths);
        if (k == -ENOMEM)
                return k;
        if (k == 0 || streq(f->subsystem, "nvme-subsystem"))
                f->topology.nvme_multipath = NVME_MPATH_HEAD;
        else if (f->hidden)
                f->topology.nvme_multipath = NVME_MPATH_PATH;
        return 0;
}

/* A disk whose partition something is built on (a PV on sda2, an md
 * array on sdb1 and sdc1) is a member as much as one claimed whole: its
 * partitions' holders count as its own. Partitions are never in
 * /sys/block, only in their disk's directory, under the names
 * partition_of() knows; listing it is one getdents64() a disk. */
static int read_partition_holders(const SysfsDir *dir, const char *disk, DeviceStack *s, unsigned *n) {
        _cleanup_strv_free_ char **entries = NULL;
        int k = sysfs_dir_list(dir, ".", &entries);

        if (k == -ENOMEM)
                return k;
        for (char **e = entries; e && *e; e++) {
                _cleanup_strv_free_ char **held = NULL;
                char rel[NAME_MAX_LEN + sizeof("/holders")];

                if (!partition_of(disk, *e) || snprintf(rel, sizeof(rel), "%s/holders", *e) >= (int) sizeof(rel))
                        continue;
                if (sysfs_dir_list(dir, rel, &held) == -ENOMEM)
                        return -ENOMEM;
                for (char **h = held; h && *h; h++) {
                        if (strv_contains(s->holders, *h))
                                continue;
                        if (strv_push(&s->holders, *h) < 0)
                                return -ENOMEM;
                        (*n)++;
                }
        }
        return 0;
}

/* Where the disk sits in a stack. holders/ and slaves/ are links that
 * block/holder.c bd_link_disk_holder() makes when dm or md claims a disk
 * or a partition, with no uevent for the disk below: the daemon
 * classifies a map's or an array's slaves (their disks, for partitions)
 * again on its events (manager.c). */
static int classify_stack(const SysfsDir *dir, DeviceFacts *f) {
        _cleanup_(device_stack_freep) DeviceStack *s = calloc(1, sizeof(DeviceStack));
        DeviceTopology *t = &f->topology;
        int k;

        if (!s)
                return -ENOMEM;
        k = read_names(dir, "holders", &s->holders, &t->n_holders);
        if (k >= 0)
                k = read_partition_holders(dir, f->name, s, &t->n_holders);
        if (k >= 0)
                k = read_names(dir, "slaves", &s->slaves, &t->n_slaves);
        if (k >= 0)
                k = classify_dm_md(dir, f->driver, t, s);
        if (k >= 0)
                k = classify_nvme_multipath(dir, f, s);
        if (k < 0)
                return k;
        if (s->holders || s->slaves || s->nvme_paths || s->dm_name || s->dm_uuid)
                f->stack = TAKE_PTR(s);
        return 0;
}

/* The disk's number: its dev attribute; a hidden disk (an NVMe multipath
 * path: block/genhd.c gives it no devt, so no dev) has the one diskstats
 * lists (sysfs.h, diskstats_number()), which the kernel holds for it. */
static int classify_number(const Roots *r, const SysfsDir *dir, const char *name, DeviceFacts *f) {
        char buf[64];
        int k = sysfs_dir_read(dir, "dev", buf, sizeof(buf));

        if (k == -ENOENT && f->hidden)
                return diskstats_number(r, name, &f->major, &f->minor);
        if (k < 0)
                return k == -ENOENT ? -ENODEV : k;
        return sscanf(buf, "%u:%u", &f->major, &f->minor) == 2 ? 0 : -EBADMSG;
}

/* Every file is read relative to the disk's own directory, opened once:
 * the facts are all of one disk even if the name is taken by another
 * meanwhile, and each read walks one or two path components (sysfs.h). */
int classify_device(const Roots *r, MajorCache *majors, const char *name, DeviceFacts *f) {
        _cleanup_(sysfs_dir_close) SysfsDir dir = SYSFS_DIR_NULL;
        char buf[64];
        int k;

        *f = (DeviceFacts) {};
        k = strscpy(f->name, sizeof(f->name), name);
        if (k < 0)
                return k;
        k = block_dir_open(&dir, r, name);
        if (k < 0)
                return k == -ENOENT ? -ENODEV : k;
        if (sysfs_dir_read(&dir, "hidden", buf, sizeof(buf)) == 0)
                f->hidden = streq(buf, "1");
        k = classify_number(r, &dir, name, f);
        if (k < 0)
                return k;
        if (sysfs_dir_exists(&dir, "partition"))
                return -ENOTBLK;
        (void) sysfs_dir_queue_inode(&dir, &f->queue_id);
        if (sysfs_dir_read(&dir, "diskseq", buf, sizeof(buf)) == 0)
                (void) sscanf(buf, "%" SCNu64, &f->diskseq);

        k = classify_driver(r, majors, &dir, name, f);
        if (k < 0)
                return k;
        classify_bus(f);
        classify_queue(r, &dir, name, f);
        k = classify_stack(&dir, f);
        if (k < 0)
                return k;

        if (f->hw_queues == 0)
                f->classes |= CLASS_BIT(CLASS_BIO_BASED);
        else if (f->hw_queues - f->poll_queues <= 1)
                f->classes |= CLASS_BIT(CLASS_SINGLE_QUEUE);
        else
                f->classes |= CLASS_BIT(CLASS_MULTI_QUEUE);
        if (f->rotational && !is_virtual(f))
                f->classes |= CLASS_BIT(CLASS_ROTATIONAL);
        if (f->zoned != ZONED_NONE)
                f->classes |= CLASS_BIT(CLASS_ZONED);
        return 0;
}

int kernel_caps_read(const Roots *r, KernelCaps *caps) {
        char path[PATH_MAX];
        int k;

        *caps = (KernelCaps) { .dispatch_direct = TRISTATE_UNKNOWN };
        snprintf(path, sizeof(path), "%s/sys/kernel/osrelease", r->proc);
        k = sysfs_read(path, caps->release, sizeof(caps->release));
        if (k < 0)
                return k;
        return kernel_version_parse(caps->release, caps->version);
}

/* CONFIG_HZ from <root>/boot/config-<release>, as Debian installs it;
 * 0 when it cannot be read (a kernel of one's own, a container). */
unsigned kernel_config_hz(const Roots *r, const char *release) {
        const char *root = roots_root(r);
        _cleanup_fclose_ FILE *f = NULL;
        char path[PATH_MAX], line[256];
        unsigned hz = 0;

        if (!root)
                return 0;
        snprintf(path, sizeof(path), "%s/boot/config-%s", streq(root, "/") ? "" : root, release);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "CONFIG_HZ=%u", &hz) == 1)
                        break;
        return hz;
}

bool kernel_caps_note(KernelCaps *caps, Tristate dispatch_direct) {
        if (dispatch_direct == TRISTATE_UNKNOWN || dispatch_direct == caps->dispatch_direct ||
            caps->dispatch_direct == TRISTATE_YES)
                return false;
        caps->dispatch_direct = dispatch_direct;
        return true;
}

bool kernel_caps_learn(KernelCaps *caps, const Roots *r, const char *dev, const char *scheduler) {
        char path[PATH_MAX];

        if (!streq(scheduler, "mq-deadline") || caps->dispatch_direct == TRISTATE_YES)
                return false;
        if (block_path(path, sizeof(path), r, dev, "queue/iosched/dispatch_direct") < 0)
                return false;
        return kernel_caps_note(caps, sysfs_exists(path) ? TRISTATE_YES : TRISTATE_NO);
}
