/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Names and small pure helpers of the Facts contract. */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>

#include "facts.h"
#include "util.h"

static const char *const class_names[_CLASS_MAX] = {
        [CLASS_SINGLE_QUEUE] = "single-queue",
        [CLASS_MULTI_QUEUE] = "multi-queue",
        [CLASS_UBLK] = "ublk",
        [CLASS_VIRTIO] = "virtio",
        [CLASS_NVME] = "nvme",
        [CLASS_SCSI] = "scsi",
        [CLASS_MMC] = "mmc",
        [CLASS_LOOP] = "loop",
        [CLASS_NULL_BLK] = "null_blk",
        [CLASS_NBD] = "nbd",
        [CLASS_ROTATIONAL] = "rotational",
        [CLASS_ZONED] = "zoned",
        [CLASS_BIO_BASED] = "bio-based",
};

static const char *const zoned_names[_ZONED_MAX] = {
        [ZONED_NONE] = "none",
        [ZONED_HOST_AWARE] = "host-aware",
        [ZONED_HOST_MANAGED] = "host-managed",
};

DEFINE_STRING_TABLE(class, DeviceClass, class_names, _CLASS_MAX)

DEFINE_STRING_TABLE(zoned, ZonedModel, zoned_names, _ZONED_MAX)

static const char *const stack_role_names[_STACK_MAX] = {
        [STACK_ALONE] = "alone",
        [STACK_TOP] = "top",
        [STACK_MEMBER] = "member",
};

DEFINE_STRING_TABLE(stack_role, StackRole, stack_role_names, _STACK_MAX)

static const char *const nvme_multipath_names[_NVME_MPATH_MAX] = {
        [NVME_MPATH_NONE] = "none",
        [NVME_MPATH_HEAD] = "head",
        [NVME_MPATH_PATH] = "path",
};

DEFINE_STRING_TABLE(nvme_multipath, NvmeMultipath, nvme_multipath_names, _NVME_MPATH_MAX)

StackRole device_topology_role(const DeviceTopology *t) {
        if (t->n_holders > 0)
                return STACK_MEMBER;
        return t->n_slaves > 0 ? STACK_TOP : STACK_ALONE;
}

bool device_topology_equal(const DeviceTopology *a, const DeviceTopology *b) {
        return a->n_holders == b->n_holders && a->n_slaves == b->n_slaves &&
               a->md_raid_disks == b->md_raid_disks && a->nvme_multipath == b->nvme_multipath &&
               streq(a->dm_uuid_prefix, b->dm_uuid_prefix) && streq(a->md_level, b->md_level);
}

/* Who made a map says its uuid's first word (dm-ioctl.h leaves the uuid
 * to userspace): lvm2 "LVM-<vg uuid><lv uuid>", cryptsetup
 * "CRYPT-LUKS2-<uuid>-<name>", multipath-tools "mpath-<wwid>", kpartx
 * "part<N>-<the whole map's uuid>", where N differs per partition and says
 * nothing of the maker. A prefix too long to keep is none. */
void dm_uuid_prefix(const char *uuid, char ret[DM_UUID_PREFIX_MAX]) {
        size_t n = strcspn(uuid, "-");

        ret[0] = 0;
        if (startswith(uuid, "part") && n > 4 && strspn(uuid + 4, "0123456789") == n - 4 && uuid[n] == '-') {
                (void) strscpy(ret, DM_UUID_PREFIX_MAX, "part");
                return;
        }
        if (uuid[n] == '-' && n + 1 < DM_UUID_PREFIX_MAX) {
                memcpy(ret, uuid, n + 1);
                ret[n + 1] = 0;
        }
}

int nvme_path_head_name(const char *name, char *buf, size_t size) {
        unsigned subsys, ctrl, head;
        int n = 0, k;

        if (sscanf(name, "nvme%uc%un%u%n", &subsys, &ctrl, &head, &n) != 3 || name[n] != 0)
                return -EINVAL;
        k = snprintf(buf, size, "nvme%un%u", subsys, head);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

/* block/partitions/core.c add_partition(): a partition is "<disk><N>",
 * or "<disk>p<N>" when the disk's name ends in a digit (nvme0n1p2,
 * mmcblk0p1, loop0p1). */
bool partition_of(const char *disk, const char *name) {
        size_t n = strlen(disk);
        const char *p = name + n;

        if (n == 0 || strncmp(name, disk, n) != 0)
                return false;
        if (isdigit((unsigned char) disk[n - 1]) && *p++ != 'p')
                return false;
        return *p && strspn(p, "0123456789") == strlen(p);
}

int partition_disk_name(const char *name, char *buf, size_t size) {
        size_t n = strlen(name);
        int k;

        while (n > 0 && isdigit((unsigned char) name[n - 1]))
                n--;
        if (n == strlen(name))
                return -EINVAL;         /* no partition number */
        /* "nvme0n1p2": the p goes too, when a digit stands before it */
        if (n >= 2 && name[n - 1] == 'p' && isdigit((unsigned char) name[n - 2]))
                n--;
        else if (n == 0 || isdigit((unsigned char) name[n - 1]))
                return -EINVAL;
        k = snprintf(buf, size, "%.*s", (int) n, name);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

DeviceStack *device_stack_free(DeviceStack *s) {
        if (!s)
                return NULL;
        strv_free(s->holders);
        strv_free(s->slaves);
        strv_free(s->nvme_paths);
        free(s->dm_name);
        free(s->dm_uuid);
        free(s);
        return NULL;
}

/* indexed by Tristate + 1 */
static const char *const tristate_names[] = { "unknown", "no", "yes" };

const char *tristate_to_string(Tristate t) {
        return tristate_names[t + 1];
}

Tristate tristate_from_string(const char *s) {
        return streq(s, "yes") ? TRISTATE_YES : streq(s, "no") ? TRISTATE_NO : TRISTATE_UNKNOWN;
}

void device_facts_done(DeviceFacts *f) {
        if (!f)
                return;
        f->properties = strv_free(f->properties);
        f->stack = device_stack_free(f->stack);
}

size_t scheduler_list_bytes(const SchedulerList *l) {
        size_t used = 0;

        for (unsigned i = 0; i < l->n; i++)
                used += strlen(l->names + used) + 1;
        return used;
}

bool scheduler_list_equal(const SchedulerList *a, const SchedulerList *b) {
        size_t used = scheduler_list_bytes(a);

        return a->n == b->n && a->current == b->current && used == scheduler_list_bytes(b) &&
               memcmp(a->names, b->names, used) == 0;
}

int scheduler_list_add(SchedulerList *l, const char *name) {
        size_t used = scheduler_list_bytes(l), len = strlen(name);

        if (len == 0 || len >= SCHED_NAME_MAX || used + len + 1 > sizeof(l->names) || l->n == UINT8_MAX)
                return -EBADMSG;
        memcpy(l->names + used, name, len + 1);
        return l->n++;
}

const char *scheduler_list_at(const SchedulerList *l, unsigned i) {
        const char *p = l->names;

        assert(i < l->n);
        while (i-- > 0)
                p += strlen(p) + 1;
        return p;
}

const char *scheduler_list_current(const SchedulerList *l) {
        return l->current >= 0 && l->current < l->n ? scheduler_list_at(l, (unsigned) l->current) : "";
}

bool scheduler_list_has(const SchedulerList *l, const char *name) {
        for (unsigned i = 0; i < l->n; i++)
                if (streq(scheduler_list_at(l, i), name))
                        return true;
        return false;
}

int scheduler_list_parse(const char *s, SchedulerList *ret) {
        const char *p = s;

        *ret = (SchedulerList) { .current = -1 };
        for (;;) {
                char word[SCHED_NAME_MAX + 2];
                size_t n;
                bool current;
                int k;

                p += strspn(p, " \t\n");
                if (!*p)
                        return 0;
                n = strcspn(p, " \t\n");
                if (n >= sizeof(word))
                        return -EBADMSG;
                memcpy(word, p, n);
                word[n] = 0;
                p += n;
                current = n > 2 && word[0] == '[' && word[n - 1] == ']';
                if (current) {
                        word[n - 1] = 0;
                        memmove(word, word + 1, n - 1);
                }
                k = scheduler_list_add(ret, word);
                if (k < 0)
                        return k;
                if (current)
                        ret->current = (int8_t) k;
        }
}

/* "6.12.38+deb12-amd64" → {6, 12, 38}; "6.10" → {6, 10, 0}. */
int kernel_version_parse(const char *release, unsigned version[3]) {
        const char *p = release;

        for (int i = 0; i < 3; i++) {
                char *end;
                unsigned long v;

                version[i] = 0;
                if (i > 0) {
                        if (*p != '.')
                                return i >= 2 ? 0 : -EINVAL;
                        p++;
                }
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = strtoul(p, &end, 10);
                if (v > 1000000)
                        return -ERANGE;
                version[i] = (unsigned) v;
                p = end;
        }
        return 0;
}

int kernel_version_compare(const unsigned a[3], const unsigned b[3]) {
        for (int i = 0; i < 3; i++)
                if (a[i] != b[i])
                        return a[i] < b[i] ? -1 : 1;
        return 0;
}
