/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The state record of one device: for every attribute blkpolicyd has
 * changed (or is about to change), the value found before its first write,
 * the value its writes left there (read back), and the value it is about
 * to write (the intent). From these and the live value, reconcile.c tells
 * who owns the attribute now: blkpolicyd (live is what it wrote, or what
 * it was writing), the admin (live changed behind it) or the kernel (no
 * record at all).
 *
 * The record is saved durably *before* each write, with the intent, so a
 * crash at any point leaves a record that says what was there before and
 * what may have landed. It is dropped, attribute by attribute, only once
 * the found value is back (or the device is gone).
 *
 * Identity: a record belongs to one request queue, not to a name. The
 * kernel's diskseq is the identity of the *media* (a loop attach or detach
 * changes it, and the queue with its settings stays), so the record keys
 * on major:minor plus the inode of <dev>/queue, which lives exactly as
 * long as the queue is registered; diskseq is kept to show. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tunables.h"

/* "written" of an attribute the kernel reset as a side effect of one of
 * blkpolicyd's writes (a scheduler switch resets nr_requests and iosched/,
 * a write of nr_requests async_depth, one of max_sectors_kb read_ahead_kb):
 * blkpolicyd caused it, the kernel chose the value. It is put back when
 * what reset it is back. As an intent: the write in flight will reset it. */
#define WRITTEN_UNKNOWN "*"

typedef struct AttrRecord {
        unsigned tunable;
        char *found;            /* before blkpolicyd's first write */
        char *written;          /* what its writes left, read back; NULL: nothing yet */
        char *intent;           /* what it is about to write; NULL: nothing in flight */
} AttrRecord;

typedef struct DeviceIdentity {
        unsigned major, minor;
        uint64_t queue_id;      /* inode of <dev>/queue; 0: unknown (never matches) */
        uint64_t diskseq;       /* informative */
} DeviceIdentity;

/* The attributes recorded, their count ahead of them: in the array's own
 * heap chunk, where it costs nothing (an array of 32-byte records is
 * rounded up 16 bytes anyway), and not in every Device's record. */
typedef struct AttrRecords {
        unsigned n;
        AttrRecord at[];        /* in tunables[] order */
} AttrRecords;

typedef struct DeviceRecord {
        DeviceIdentity id;
        AttrRecords *attrs;     /* NULL: nothing recorded */
        /* No name: every Device keeps one record and has the name already.
         * The parser gives a file's name apart (device_record_parse()). */
} DeviceRecord;

void device_record_done(DeviceRecord *r);
static inline unsigned device_record_count(const DeviceRecord *r) {
        return r->attrs ? r->attrs->n : 0;
}
bool device_record_empty(const DeviceRecord *r);
const AttrRecord *device_record_get(const DeviceRecord *r, unsigned tunable);
/* Records found for tunable unless it has a record already (the first
 * found value wins: a later one would be blkpolicyd's own). Returns 1 if
 * added, 0 if there, -EINVAL, -ENOMEM. */
int device_record_found(DeviceRecord *r, unsigned tunable, const char *found);
/* Sets what was written (read back), or what is about to be written; the
 * attribute must have a record. NULL clears it. Returns 1 if it changed,
 * 0, -ENOENT, -ENOMEM. */
int device_record_written(DeviceRecord *r, unsigned tunable, const char *written);
int device_record_intent(DeviceRecord *r, unsigned tunable, const char *intent);
bool device_record_equal(const DeviceRecord *a, const DeviceRecord *b);
/* Forgets the attribute. Returns 1 if it was recorded, 0 otherwise. */
int device_record_drop(DeviceRecord *r, unsigned tunable);
int device_record_copy(const DeviceRecord *from, DeviceRecord *to);

/* Identities match when both name the same registered queue (or when the
 * queue of either is unknown, by number). */
bool device_identity_same(const DeviceIdentity *a, const DeviceIdentity *b);

#define STATE_VALUE_MAX 32
/* A name in a record's file, with its NUL: a value (state_value_valid()) */
#define STATE_NAME_MAX STATE_VALUE_MAX

/* A value as sysfs shows it: no space, no control character, not empty. */
bool state_value_valid(const char *v);

/* The text form, one file per device:
 *
 *   # blkpolicyd state v2
 *   device loop8 7:8 queue=18398 diskseq=12
 *   scheduler mq-deadline none -
 *   nr_requests 50 * -
 *   read_ahead_kb 128 4096 8192
 *
 * (attribute, found, written, intent; "-" for none). Pure parser, fuzzed.
 * Unknown or malformed attribute lines, and a last line without its
 * newline (torn), are skipped and counted; a missing or malformed header
 * is -EBADMSG (nothing is taken from a file whose device is unknown).
 * Returns the count of skipped lines, -EBADMSG or -ENOMEM. ret_name: the
 * device's name in the file, for messages; NULL when not wanted. */
int device_record_parse(const char *text, size_t size, DeviceRecord *ret, char *ret_name /* STATE_NAME_MAX */);
/* Whether every value would be read back as it is: a record saved with
 * one that would not is torn (its line skipped), its found value lost. */
bool device_record_savable(const DeviceRecord *r);
/* Returns a malloc'd text, or NULL on -ENOMEM. name: the disk's, or NULL
 * ("-"). */
char *device_record_format(const DeviceRecord *r, const char *name);
