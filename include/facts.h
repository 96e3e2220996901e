/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Facts: what classify.c learns about one whole-disk block device from
 * sysfs (and debugfs), and what the kernel can do. decide.c reads only these. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "string-table.h"

typedef enum DeviceClass {
        CLASS_SINGLE_QUEUE,
        CLASS_MULTI_QUEUE,
        CLASS_UBLK,
        CLASS_VIRTIO,
        CLASS_NVME,
        CLASS_SCSI,
        CLASS_MMC,
        CLASS_LOOP,
        CLASS_NULL_BLK,
        CLASS_NBD,
        CLASS_ROTATIONAL,
        CLASS_ZONED,
        CLASS_BIO_BASED,
        _CLASS_MAX,
} DeviceClass;

typedef uint32_t ClassSet;
#define CLASS_BIT(c) ((ClassSet) 1u << (c))

DECLARE_STRING_TABLE(class, DeviceClass);

typedef enum ZonedModel {
        ZONED_NONE,
        ZONED_HOST_AWARE,
        ZONED_HOST_MANAGED,
        _ZONED_MAX,
} ZonedModel;

DECLARE_STRING_TABLE(zoned, ZonedModel);

#define NAME_MAX_LEN 32
#define SCHED_NAME_MAX 24
/* a choice as text: "mq-deadline+dispatch_direct/nr_requests=1000000" */
#define SCHED_CHOICE_TEXT_MAX (SCHED_NAME_MAX + 48)
#define SCHED_LIST_BYTES 70

/* queue/scheduler, packed: the names NUL-terminated one after the other in
 * the kernel's order ("none\0mq-deadline\0kyber\0bfq\0" is 27 bytes), and
 * which one is in brackets: every device has one, so no slot per possible
 * name. */
typedef struct SchedulerList {
        char names[SCHED_LIST_BYTES];
        uint8_t n;
        int8_t current;         /* index of the bracketed name, -1 when none is */
} SchedulerList;

/* Pure. "none [mq-deadline] kyber bfq" → the list; -EBADMSG when a name is
 * over SCHED_NAME_MAX - 1 or the names over SCHED_LIST_BYTES. */
int scheduler_list_parse(const char *s, SchedulerList *ret);
/* Appends name; returns its index, or -EBADMSG as above. */
int scheduler_list_add(SchedulerList *l, const char *name);
/* The i-th name (i < l->n). */
const char *scheduler_list_at(const SchedulerList *l, unsigned i);
/* The bracketed name, "" when the queue has none to offer. */
const char *scheduler_list_current(const SchedulerList *l);
bool scheduler_list_has(const SchedulerList *l, const char *name);
/* What the names take of names[]: the bytes after them are not part of
 * the list (and may hold anything). */
size_t scheduler_list_bytes(const SchedulerList *l);
bool scheduler_list_equal(const SchedulerList *a, const SchedulerList *b);

/* Where a disk sits in a stack of block devices, from its holders/ and
 * slaves/ (block/holder.c: bd_link_disk_holder() links both when dm or
 * md claims a disk). A disk with holders is a member whatever lies below
 * it: a dm-crypt map on an LV is a member of nothing, the LV under it is. */
typedef enum StackRole {
        STACK_ALONE,            /* neither: a disk nothing is built on, built on nothing */
        STACK_TOP,              /* slaves and no holders: what a filesystem is on */
        STACK_MEMBER,           /* holders: something is built on it */
        _STACK_MAX,
} StackRole;

DECLARE_STRING_TABLE(stack_role, StackRole);

/* NVMe native multipath (drivers/nvme/host/multipath.c): the head nvmeXnY,
 * bio-based, and its paths nvmeXcYnZ, hidden. */
typedef enum NvmeMultipath {
        NVME_MPATH_NONE,
        NVME_MPATH_HEAD,
        NVME_MPATH_PATH,
        _NVME_MPATH_MAX,
} NvmeMultipath;

DECLARE_STRING_TABLE(nvme_multipath, NvmeMultipath);

#define DM_UUID_PREFIX_MAX 16
#define MD_LEVEL_MAX 16

/* The stack facts devices share (interned with the rest): counts and
 * kinds, no names. */
typedef struct DeviceTopology {
        unsigned n_holders;     /* entries of holders/ */
        unsigned n_slaves;      /* entries of slaves/ */
        unsigned md_raid_disks; /* md/raid_disks, 0 if not md */
        NvmeMultipath nvme_multipath;
        /* dm/uuid up to its first '-', kept: "LVM-", "CRYPT-", "mpath-";
         * kpartx's "part<N>-" is "part"; "" for no uuid or not dm */
        char dm_uuid_prefix[DM_UUID_PREFIX_MAX];
        char md_level[MD_LEVEL_MAX];    /* md/level: "raid1", "linear"; "" if not md */
} DeviceTopology;

StackRole device_topology_role(const DeviceTopology *t);
bool device_topology_equal(const DeviceTopology *a, const DeviceTopology *b);
/* "LVM-4f2...": the prefix as DeviceTopology keeps it; "" for "". */
void dm_uuid_prefix(const char *uuid, char ret[DM_UUID_PREFIX_MAX]);

/* The stack's names: each disk's own, like its name (identity: not in
 * the shared facts). NULL lists are empty. */
typedef struct DeviceStack {
        char **holders;         /* holders/: what is built on it */
        char **slaves;          /* slaves/: what it is built on */
        char **nvme_paths;      /* multipath/ of an NVMe head (6.15 on): its paths */
        char *dm_name;          /* dm/name: "vg0-root" */
        char *dm_uuid;          /* dm/uuid, NULL for none */
} DeviceStack;

/* The head of an NVMe path by its name: core.c nvme_alloc_ns() names a
 * path "nvme<subsys>c<ctrl>n<head>", multipath.c the head
 * "nvme<subsys>n<head>". -EINVAL when name is no path's. */
int nvme_path_head_name(const char *name, char *buf, size_t size);
/* Whether name is a partition of disk, by the kernel's naming. */
bool partition_of(const char *disk, const char *name);
/* The disk a partition's name says it is on: "sda2" -> "sda", "nvme0n1p2"
 * -> "nvme0n1". -EINVAL for a name with no partition number ("dm-1" is
 * taken as "dm-": the caller asks whether such a disk exists). */
int partition_disk_name(const char *name, char *buf, size_t size);

DeviceStack *device_stack_free(DeviceStack *s);
static inline void device_stack_freep(DeviceStack **s) {
        device_stack_free(*s);
}

typedef struct DeviceFacts {
        char name[NAME_MAX_LEN];
        unsigned major, minor;
        uint64_t diskseq;
        uint64_t queue_id;    /* inode of <dev>/queue: the registered queue's lifetime (state.h) */
        char driver[32];      /* kernel module/driver name, "" if unknown */
        char subsystem[32];   /* bus of the parent device, "" if parentless */
        char model[64];       /* device/model, trimmed, "" if none */
        unsigned hw_queues;   /* entries of mq/; 0 means bio-based */
        unsigned poll_queues; /* hctxs of type "poll" per debugfs; 0 if unknown */
        unsigned nr_requests;
        bool rotational;      /* raw queue/rotational */
        bool hidden;          /* e.g. NVMe multipath path device nvmeXcYnZ */
        ZonedModel zoned;
        SchedulerList schedulers;
        ClassSet classes;
        DeviceTopology topology;
        char **properties;    /* udev "KEY=VALUE" pairs where udev provides them */
        DeviceStack *stack;   /* NULL when it is in no stack and has no dm name */
} DeviceFacts;

void device_facts_done(DeviceFacts *f);
/* The scheduler the queue runs, "" when it has none to offer. */
static inline const char *device_facts_scheduler(const DeviceFacts *f) {
        return scheduler_list_current(&f->schedulers);
}

typedef enum Tristate {
        TRISTATE_UNKNOWN = -1,
        TRISTATE_NO = 0,
        TRISTATE_YES = 1,
} Tristate;

/* "unknown", "no", "yes": as the report, status and recordings spell it.
 * Any other string reads as unknown. */
const char *tristate_to_string(Tristate t);
Tristate tristate_from_string(const char *s);

typedef struct KernelCaps {
        char release[64];
        unsigned version[3];    /* major, minor, patch of release */
        /* mq-deadline's dispatch_direct (proposed, seed 002): visible only in the
         * iosched/ directory of a queue that runs mq-deadline, so it stays
         * unknown until some device does. */
        Tristate dispatch_direct;
} KernelCaps;

int kernel_version_parse(const char *release, unsigned version[3]);
/* <0, 0, >0 like strcmp, comparing major.minor.patch. */
int kernel_version_compare(const unsigned a[3], const unsigned b[3]);
