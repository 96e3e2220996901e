/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The state records on disk: <state_dir>/devices/<major>:<minor>.
 *
 * The directory is opened once and every file is reached through its fd,
 * so fd exhaustion later cannot keep a record from being saved or read, and
 * nobody can swap a path component underneath. It must belong to the
 * daemon's user and be writable by nobody else: a record is written to
 * sysfs at stop, so a planted one would be root writing someone else's
 * values. Files are written to an O_EXCL|O_NOFOLLOW temporary, fsync'ed and
 * renamed, then the directory is fsync'ed: a save returns only once the
 * record survives a crash of the machine. */

#include <stdbool.h>

#include "state.h"

typedef struct StateDir {
        int fd;                 /* <state_dir>/devices; -1: none (dry run without one) */
        char *path;             /* <state_dir>, for messages */
} StateDir;

#define STATE_DIR_NULL ((StateDir) { .fd = -1 })

/* -EPERM when the directory is another user's or group/world-writable,
 * or its parent lets others rename it; -ENOTDIR, -ELOOP for a symlink;
 * -ENOENT without create when it does not exist; with create (a writer),
 * -EBUSY when another writer holds it. */
int state_dir_open(const char *path, bool create, StateDir *ret);
void state_dir_close(StateDir *d);

/* Returns the count of skipped lines (0 for a clean file), -ENOENT when
 * there is no record, -EBADMSG for a file that is not one. */
int state_load(const StateDir *d, unsigned major, unsigned minor, DeviceRecord *ret, char *ret_name);
/* An empty record removes the file. name: the disk's kernel name now.
 * -EINVAL, the file left as it was, for a record with a value the file
 * could not give back (device_record_savable()). */
int state_save(const StateDir *d, const DeviceRecord *r, const char *name);
int state_remove(const StateDir *d, unsigned major, unsigned minor);
/* Keeps a record with unreadable lines as <major>:<minor>.torn, for the
 * admin to read, and saves what could be read (readable) as the record. */
int state_set_aside(const StateDir *d, const DeviceRecord *readable, const char *name_now);
/* The major:minor of every record, for --restore. */
int state_list(const StateDir *d, unsigned (**ret)[2], size_t *n);
/* Files of the first format, named by device (see state-v1.c): whole
 * content of one, its removal, and the names of all of them (strv). */
int state_read_named(const StateDir *d, const char *name, char **ret, size_t *size);
int state_remove_named(const StateDir *d, const char *name);
int state_list_named(const StateDir *d, char ***ret);
