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
        char **properties;    /* udev "KEY=VALUE" pairs where udev provides them */
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
