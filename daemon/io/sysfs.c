/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <libudev.h>
#include <limits.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "fake-kernel.h"
#include "fault.h"
#include "sample.h"
#include "sysfs.h"
#include "util.h"

/* The file at rel below dirfd (AT_FDCWD: rel is a path); path names it
 * in full for the fault seam. */
static int sysfs_read_at(int dirfd, const char *rel, const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = -1;
        int fault = fault_check("read", path);
        ssize_t n;

        if (fault < 0)
                return fault;
        fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, size);
        if (n < 0)
                return -errno;
        if (fault > 0)
                n /= 2;         /* a short read */
        if ((size_t) n >= size)
                return -EFBIG;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = 0;
        return 0;
}

int sysfs_read(const char *path, char *buf, size_t size) {
        return sysfs_read_at(AT_FDCWD, path, path, buf, size);
}

/* One write() of value to the file at rel below dirfd (path: the same in
 * full, for the fault seam); returns the kernel's -errno. */
static int sysfs_write_at(int dirfd, const char *rel, const char *path, const char *value) {
        _cleanup_close_ int fd = -1;
        size_t len = strlen(value);
        int fault = fault_check("write", path);
        ssize_t n;

        if (fault < 0)
                return fault;
        fault = fake_kernel_write(dirfd, rel, path, value, sysfs_read_at);
        if (fault <= 0)
                return fault;
        fd = openat(dirfd, rel, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = write(fd, value, len);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EIO;
}

/* O_PATH: a handle to walk from, nothing of the directory read; openat()
 * below it works on sysfs as anywhere. */
static int dir_open(SysfsDir *d, const char *path, int flags) {
        int k = strscpy(d->path, sizeof(d->path), path);

        d->fd = -EBADF;
        if (k < 0)
                return k;
        k = fault_check("read", path);
        if (k < 0)
                return k;
        k = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC | flags);
        if (k < 0)
                return -errno;
        d->fd = k;
        return 0;
}

void sysfs_dir_close(SysfsDir *d) {
        if (!d)
                return;
        closep(&d->fd);
        d->fd = -EBADF;
}

int block_dir_open(SysfsDir *d, const Roots *r, const char *dev) {
        char path[PATH_MAX];
        int k = block_path(path, sizeof(path), r, dev, "");

        d->fd = -EBADF;
        return k < 0 ? k : dir_open(d, path, 0);
}

/* <dir>/<rel> in full, for the fault seam. */
static int dir_rel_path(const SysfsDir *d, const char *rel, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s/%s", d->path, rel);

        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

int sysfs_dir_read(const SysfsDir *d, const char *rel, char *buf, size_t size) {
        char path[PATH_MAX];
        int k = dir_rel_path(d, rel, path, sizeof(path));

        return k < 0 ? k : sysfs_read_at(d->fd, rel, path, buf, size);
}

/* Calls fn for each entry of the directory rel below dirfd (path: the
 * same in full, for the fault seam), until fn fails. getdents64() on the
 * fd, not fdopendir(): that costs an fstat and two fcntls more, three
 * syscalls of about thirty a new disk's classification makes, each a trip
 * through this guest's paravirtualised entry. */
static int walk_at(int dirfd, const char *rel, const char *path, int (*fn)(const char *name, void *userdata),
                   void *userdata) {
        _cleanup_close_ int fd = -EBADF;
        union {
                struct dirent64 first;  /* for the entries' alignment */
                char bytes[4096];
        } buf;
        int k = fault_check("read", path);

        if (k < 0)
                return k;
        fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t got = getdents64(fd, buf.bytes, sizeof(buf.bytes));

                if (got < 0)
                        return -errno;
                if (got == 0)
                        return 0;
                for (ssize_t off = 0; off < got;) {
                        const struct dirent64 *de = (const struct dirent64 *) (buf.bytes + off);

                        k = fn(de->d_name, userdata);
                        if (k < 0)
                                return k;
                        off += de->d_reclen;
                }
        }
}

typedef struct CountWalk {
        bool (*match)(const char *name);
        unsigned n;
} CountWalk;

static int count_one(const char *name, void *userdata) {
        CountWalk *w = userdata;

        w->n += w->match(name);
        return 0;
}

int sysfs_dir_count(const SysfsDir *d, const char *rel, bool (*match)(const char *name), unsigned *ret) {
        char path[PATH_MAX];
        CountWalk w = { .match = match };
        int k = dir_rel_path(d, rel, path, sizeof(path));

        if (k >= 0)
                k = walk_at(d->fd, rel, path, count_one, &w);
        if (k >= 0)
                *ret = w.n;
        return k;
}

static int list_one(const char *name, void *userdata) {
        return name[0] == '.' ? 0 : strv_push(userdata, name);
}

/* The entries of a directory, sorted, dot files left out. */
static int list_at(int dirfd, const char *rel, const char *path, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        int k = walk_at(dirfd, rel, path, list_one, &l);

        *ret = NULL;
        if (k < 0)
                return k;
        strv_sort(l);
        *ret = TAKE_PTR(l);
        return 0;
}

int sysfs_dir_list(const SysfsDir *d, const char *rel, char ***ret) {
        char path[PATH_MAX];
        int k = dir_rel_path(d, rel, path, sizeof(path));

        *ret = NULL;
        return k < 0 ? k : list_at(d->fd, rel, path, ret);
}

int sysfs_dir_access(const SysfsDir *d, const char *rel) {
        return faccessat(d->fd, rel, F_OK, 0) < 0 ? -errno : 0;
}

bool sysfs_dir_exists(const SysfsDir *d, const char *rel) {
        return sysfs_dir_access(d, rel) == 0;
}

int sysfs_open_read(const char *path) {
        int fault = fault_check("read", path), fd;

        if (fault < 0)
                return fault;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? -errno : fd;
}

ssize_t sysfs_read_chunk(const char *path, int fd, void *buf, size_t size) {
        int fault = fault_check("chunk", path);
        ssize_t n;

        if (fault < 0)
                return fault;
        n = read(fd, buf, size);
        return n < 0 ? -errno : n;
}

/* Room for buf to take another read: doubled from a page, up to max. */
static int read_all_grow(char **buf, size_t *allocated, size_t max) {
        size_t n = *allocated ? *allocated * 2 : 4096;
        char *grown;

        if (*allocated >= max)
                return -EFBIG;
        if (n > max)
                n = max;
        grown = realloc(*buf, n);
        if (!grown)
                return -ENOMEM;
        *buf = grown;
        *allocated = n;
        return 0;
}

int sysfs_read_all(const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = sysfs_open_read(path);
        size_t size = 0, allocated = 0;

        if (fd < 0)
                return fd;
        for (;;) {
                ssize_t n;
                int k = size < allocated ? 0 : read_all_grow(&buf, &allocated, max);

                if (k < 0)
                        return k;
                n = sysfs_read_chunk(path, fd, buf + size, allocated - size);
                if (n < 0)
                        return (int) n;
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

bool sysfs_exists(const char *path) {
        return access(path, F_OK) == 0;
}

/* The inode number of rel below dirfd (not following a last symlink). */
static int inode_at(int dirfd, const char *rel, uint64_t *ret) {
        struct stat st;

        if (fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        *ret = (uint64_t) st.st_ino;
        return 0;
}

static int sysfs_inode(const char *path, uint64_t *ret) {
        return inode_at(AT_FDCWD, path, ret);
}

int sysfs_dir_queue_inode(const SysfsDir *d, uint64_t *ret) {
        return inode_at(d->fd, "queue", ret);
}

int queue_inode(const Roots *r, const char *dev, uint64_t *ret) {
        char path[PATH_MAX];
        int k = block_path(path, sizeof(path), r, dev, "queue");

        return k < 0 ? k : sysfs_inode(path, ret);
}

static int read_link_name_at(int dirfd, const char *rel, char *buf, size_t size) {
        char target[PATH_MAX];
        ssize_t n;
        const char *base;

        n = readlinkat(dirfd, rel, target, sizeof(target) - 1);
        if (n < 0)
                return -errno;
        target[n] = 0;
        base = strrchr(target, '/');
        return strscpy(buf, size, base ? base + 1 : target);
}

int sysfs_read_link(const char *path, char *buf, size_t size) {
        ssize_t n;

        if (size == 0)
                return -ENOBUFS;
        n = readlink(path, buf, size - 1);
        if (n < 0)
                return -errno;
        if ((size_t) n >= size - 1)
                return -ENAMETOOLONG;
        buf[n] = 0;
        return 0;
}

int sysfs_read_link_name(const char *path, char *buf, size_t size) {
        return read_link_name_at(AT_FDCWD, path, buf, size);
}

int sysfs_dir_read_link_name(const SysfsDir *d, const char *rel, char *buf, size_t size) {
        return read_link_name_at(d->fd, rel, buf, size);
}

/* Device names come from the kernel or from uevents: refuse anything that
 * could walk out of the tree. */
static bool dev_name_valid(const char *dev) {
        return *dev && !strchr(dev, '/') && !streq(dev, ".") && !streq(dev, "..");
}

int block_path(char *buf, size_t size, const Roots *r, const char *dev, const char *rel) {
        int n;

        if (!dev_name_valid(dev))
                return -EINVAL;
        n = snprintf(buf, size, "%s/block/%s%s%s", r->sysfs, dev, *rel ? "/" : "", rel);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

int hctx_path(char *buf, size_t size, const Roots *r, const char *dev, unsigned hctx, const char *attr) {
        int n;

        if (!dev_name_valid(dev)) {
                buf[0] = 0;     /* the sampler logs the path it could not read */
                return -EINVAL;
        }
        n = snprintf(buf, size, "%s/block/%s/hctx%u/%s", r->debugfs, dev, hctx, attr);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

int queue_attr_read(const Roots *r, const char *dev, const char *attr, char *buf, size_t size) {
        char path[PATH_MAX], rel[128];
        int k;

        snprintf(rel, sizeof(rel), "queue/%s", attr);
        k = block_path(path, sizeof(path), r, dev, rel);
        return k < 0 ? k : sysfs_read(path, buf, size);
}

int queue_dir_open(const Roots *r, const char *dev, QueueDir *ret) {
        char path[PATH_MAX];
        struct stat st;
        struct statfs sf;
        int k = block_path(path, sizeof(path), r, dev, "queue");

        ret->dir.fd = -EBADF;
        if (k < 0)
                return k;
        k = dir_open(&ret->dir, path, O_NOFOLLOW);
        if (k < 0)
                return k;
        if (fstat(ret->dir.fd, &st) < 0 || fstatfs(ret->dir.fd, &sf) < 0) {
                k = -errno;
                sysfs_dir_close(&ret->dir);
                return k;
        }
        ret->ino = (uint64_t) st.st_ino;
        ret->on_sysfs = sf.f_type == SYSFS_MAGIC;
        return 0;
}

void queue_dir_close(QueueDir *q) {
        if (q)
                sysfs_dir_close(&q->dir);
}

int queue_dir_check(const QueueDir *q) {
        uint64_t ino = 0;
        int k = sysfs_inode(q->dir.path, &ino);

        if (k == -ENOENT || k == -ENOTDIR)
                return -ENODEV;
        return k < 0 ? k : ino == q->ino ? 0 : -ENODEV;
}

int queue_dir_read(const QueueDir *q, const char *attr, char *buf, size_t size) {
        return sysfs_dir_read(&q->dir, attr, buf, size);
}

int queue_dir_write(const QueueDir *q, const char *attr, const char *value) {
        char path[PATH_MAX];
        int k = dir_rel_path(&q->dir, attr, path, sizeof(path));

        return k < 0 ? k : sysfs_write_at(q->dir.fd, attr, path, value);
}

int diskstats_number(const Roots *r, const char *name, unsigned *ret_major, unsigned *ret_minor) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[PATH_MAX], line[1024], listed[DISKSTAT_NAME_MAX];
        DiskStat st;

        snprintf(path, sizeof(path), "%s/diskstats", r->proc);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        /* the sampler's parser: a line is some 150 characters */
        while (fgets(line, sizeof(line), f))
                if (diskstat_parse_line(line, strlen(line), &st, listed) == 0 && streq(listed, name)) {
                        *ret_major = st.major;
                        *ret_minor = st.minor;
                        return 0;
                }
        return ferror(f) ? -EIO : -ENODEV;
}

int sysfs_list_disks(const Roots *r, char ***ret) {
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/block", r->sysfs);
        return list_at(AT_FDCWD, path, path, ret);
}

/* keys' properties of the live disk major:minor, through libudev: the
 * database's format is udevd's to change. A disk udevd has not seen (no
 * udevd, or not yet) has no entry. */
static int udev_db_properties_live(unsigned major, unsigned minor, char *const *keys, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        struct udev_list_entry *e;
        struct udev_device *dev;
        struct udev *udev = udev_new();
        int r = 0;

        if (!udev)
                return -ENOMEM;
        dev = udev_device_new_from_devnum(udev, 'b', makedev(major, minor));
        if (!dev) {
                r = errno == ENOMEM ? -ENOMEM : -ENOENT;
                udev_unref(udev);
                return r;
        }
        if (udev_device_get_is_initialized(dev) <= 0)
                r = -ENOENT;
        udev_list_entry_foreach(e, r == 0 ? udev_device_get_properties_list_entry(dev) : NULL) {
                const char *key = udev_list_entry_get_name(e), *value = udev_list_entry_get_value(e);
                _cleanup_free_ char *p = NULL;

                if (keys && !strv_contains(keys, key))
                        continue;
                if (asprintf(&p, "%s=%s", key, value ?: "") < 0) {
                        p = NULL;
                        r = -ENOMEM;
                        break;
                }
                if (strv_push(&l, p) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        udev_device_unref(dev);
        udev_unref(udev);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

/* keys' properties from a fixture root's copy of the database: udevd's
 * own "E:KEY=value" lines, read as they are. */
static int udev_db_properties_file(const char *root, unsigned major, unsigned minor, char *const *keys, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        char path[PATH_MAX];
        size_t size = 0;
        ssize_t n;

        snprintf(path, sizeof(path), "%s/run/udev/data/b%u:%u", root, major, minor);
        if (fopen_regular(path, &f) < 0)
                return -ENOENT;
        while ((n = getline(&line, &size, f)) >= 0) {
                char *eq;

                if (n > 0 && line[n - 1] == '\n')
                        line[n - 1] = 0;
                if (!startswith(line, "E:") || !(eq = strchr(line + 2, '=')))
                        continue;
                *eq = 0;
                if (keys && !strv_contains(keys, line + 2))
                        continue;
                *eq = '=';
                if (strv_push(&l, line + 2) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int udev_db_properties(const Roots *r, unsigned major, unsigned minor, char *const *keys, char ***ret) {
        const char *root = roots_root(r);

        *ret = NULL;
        if (!root)
                return -ENOENT;
        /* libudev finds the disk in the live /sys: a fixture's devices are not there */
        if (streq(root, "/") && roots_are_live(r))
                return udev_db_properties_live(major, minor, keys, ret);
        return udev_db_properties_file(streq(root, "/") ? "" : root, major, minor, keys, ret);
}
