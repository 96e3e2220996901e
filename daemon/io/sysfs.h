/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sysfs.c is the only place that opens files below the roots. Everything
 * else takes Roots, so fixture trees and fault injection plug in here. */

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "roots.h"


/* Reads a small attribute file whole, trailing newline stripped.
 * -ENOENT/-ENODEV/... from open/read; -EFBIG if it does not fit. */
int sysfs_read(const char *path, char *buf, size_t size);
/* For a file read a piece at a time (/proc/diskstats), through the fault
 * seam like the rest. */
int sysfs_open_read(const char *path);
/* One read() of a file sysfs_open_read() opened (path: the same, for the
 * fault seam's "chunk" faults). Returns the bytes read, or -errno. */
ssize_t sysfs_read_chunk(const char *path, int fd, void *buf, size_t size);
/* A whole file of less than max bytes, read until its end: a seq_file
 * such as /proc/devices gives at most a page per read(). *ret (not
 * NUL-terminated) is the caller's. -EFBIG past max, -ENOMEM, -errno. */
int sysfs_read_all(const char *path, size_t max, char **ret, size_t *ret_size);
bool sysfs_exists(const char *path);
/* The inode of <sysfs>/block/<dev>/queue: which registered queue the name
 * stands for now (a disk removed and added again has another). */
int queue_inode(const Roots *r, const char *dev, uint64_t *ret);
/* Basename of a symlink's target. */
/* A symlink's whole target, as readlink() gives it. */
int sysfs_read_link(const char *path, char *buf, size_t size);
int sysfs_read_link_name(const char *path, char *buf, size_t size);

/* "<sysfs>/block/<dev>/<rel>" */
int block_path(char *buf, size_t size, const Roots *r, const char *dev, const char *rel);
/* debugfs's view of one hardware queue: <debugfs>/block/<dev>/hctx<N>/<attr> */
int hctx_path(char *buf, size_t size, const Roots *r, const char *dev, unsigned hctx, const char *attr);
/* <sysfs>/block/<dev>/queue/<attr>, by path: for readers, which may
 * read another disk of the same name (a remove and add) and see that by
 * its queue_inode(). Writers go through a QueueDir. */
int queue_attr_read(const Roots *r, const char *dev, const char *attr, char *buf, size_t size);

/* An open directory below the roots (O_PATH), and its path in full for the
 * fault seam, whose globs match whole paths as if each file were opened
 * by its path, and for logs. Reads below it walk one or two components
 * instead of /sys/block/<dev> -> ../devices/.../<dev>/...: each component
 * takes kernfs's lock, which add_disk() takes for writing, so in a storm of
 * new disks those walks were most of the daemon's CPU. And every file read
 * below it is of the same disk, whatever takes the name meanwhile. */
typedef struct SysfsDir {
        int fd;                 /* -EBADF when not open */
        char path[PATH_MAX];
} SysfsDir;

#define SYSFS_DIR_NULL ((SysfsDir) { .fd = -EBADF })

/* <sysfs>/block/<dev>, the link followed: the disk's own directory.
 * -ENOENT when there is no such disk. */
int block_dir_open(SysfsDir *d, const Roots *r, const char *dev);
void sysfs_dir_close(SysfsDir *d);
int sysfs_dir_read(const SysfsDir *d, const char *rel, char *buf, size_t size);
/* How many entries of the directory rel below d match; -errno. */
int sysfs_dir_count(const SysfsDir *d, const char *rel, bool (*match)(const char *name), unsigned *ret);
bool sysfs_dir_exists(const SysfsDir *d, const char *rel);
/* The names in the directory rel below d, sorted; *ret NULL when it is
 * empty. -ENOENT when there is no such directory, -ENOMEM. */
int sysfs_dir_list(const SysfsDir *d, const char *rel, char ***ret);
/* 0 when rel exists below d, else -errno (-ENOENT: it does not). */
int sysfs_dir_access(const SysfsDir *d, const char *rel);
int sysfs_dir_read_link_name(const SysfsDir *d, const char *rel, char *buf, size_t size);
/* The inode of the disk's queue/, as queue_inode(). */
int sysfs_dir_queue_inode(const SysfsDir *d, uint64_t *ret);

/* One disk's queue directory, held open for an apply pass: its reads and
 * writes go below the fd (openat(), iosched/<attr> too), so a disk removed
 * and another added under the same name meanwhile is never read or
 * written; its fds fail instead (openat() ENOENT, a write on a file open
 * before the removal ENODEV, seen on 6.18). */
typedef struct QueueDir {
        SysfsDir dir;           /* <sysfs>/block/<dev>/queue */
        uint64_t ino;           /* the directory's inode: the queue_id of the queue it is */
        bool on_sysfs;          /* sysfs itself, where the above holds; not a fixture tree */
} QueueDir;

/* -ENOENT (no such disk, or no queue yet), -errno. */
int queue_dir_open(const Roots *r, const char *dev, QueueDir *ret);
void queue_dir_close(QueueDir *q);
/* 0 when q's path still names q's queue; -ENODEV when it names another
 * queue or none (the disk was removed, or removed and added again), or
 * -errno when that cannot be told. */
int queue_dir_check(const QueueDir *q);
int queue_dir_read(const QueueDir *q, const char *attr, char *buf, size_t size);
int queue_dir_write(const QueueDir *q, const char *attr, const char *value);

/* The udev properties of a disk named in keys (NULL: all of them), as
 * "KEY=value"; *ret NULL when it has none of them. On the live root through libudev, as udev's
 * ENV{} sees them (the kernel's uevent ones, DEVTYPE=disk, too), in
 * libudev's order; under a fixture root from its copy of udevd's
 * database, <root>/run/udev/data/b<major>:<minor> ("E:KEY=value" lines),
 * in the file's order. -ENOENT when there is no entry (no udevd, a disk
 * it has not seen yet, or no root), -ENOMEM. */
int udev_db_properties(const Roots *r, unsigned major, unsigned minor, char *const *keys, char ***ret);

/* The number <proc>/diskstats gives the disk of that name. A hidden disk
 * (an NVMe multipath path) has no dev attribute, but block/genhd.c
 * device_add_disk() still takes it a minor of the extended major, held
 * until the disk is released, and diskstats prints it: no other disk has
 * that number while this one lives. -ENODEV when the name is not listed. */
int diskstats_number(const Roots *r, const char *name, unsigned *ret_major, unsigned *ret_minor);

/* Names of whole disks below <sysfs>/block, sorted. */
int sysfs_list_disks(const Roots *r, char ***ret);
