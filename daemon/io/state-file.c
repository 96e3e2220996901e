/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* State records on disk, reached only through the directory's fd. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <limits.h>
#include <sys/stat.h>

#include "fault.h"
#include "state-file.h"
#include "util.h"

#define RECORD_SIZE_MAX ((size_t) 64 * 1024)

/* Ours and writable by nobody else, or a planted record could make the
 * daemon write someone else's values as root. */
static int check_private_dir(int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
                return -EPERM;
        return 0;
}

static int open_private_dir(int at, const char *path, bool create, mode_t mode) {
        int fd, r;

        if (create && mkdirat(at, path, mode) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOTDIR ? -ELOOP : -errno;      /* O_NOFOLLOW on a symlink */
        r = check_private_dir(fd);
        if (r < 0) {
                (void) close(fd);
                return r;
        }
        return fd;
}

/* Whoever can write the parent can rename the state dir away (and put
 * another in its place): root's, ours, or sticky. */
static int check_parent(int top) {
        struct stat st;

        if (fstatat(top, "..", &st, 0) < 0)
                return -errno;
        if (st.st_uid != 0 && st.st_uid != geteuid())
                return -EPERM;
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
                return -EPERM;
        return 0;
}

static int remove_temporaries(const StateDir *d);

int state_dir_open(const char *path, bool create, StateDir *ret) {
        _cleanup_close_ int top = -1;
        int fd, r;

        top = open_private_dir(AT_FDCWD, path, create, 0755);
        if (top < 0)
                return top;
        r = check_parent(top);
        if (r < 0)
                return r;
        fd = open_private_dir(top, "devices", create, 0700);
        if (fd < 0)
                return fd;
        /* one writer of records at a time: a daemon, --once or --restore */
        if (create && flock(fd, LOCK_EX | LOCK_NB) < 0) {
                r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                (void) close(fd);
                return r;
        }
        *ret = (StateDir) { .fd = fd, .path = strdup(path) };
        if (!ret->path) {
                state_dir_close(ret);
                return -ENOMEM;
        }
        /* the lock is ours: a temporary there is a crashed writer's; one
         * not removed (no fd to list with) is only clutter */
        if (create)
                (void) remove_temporaries(ret);
        return 0;
}

void state_dir_close(StateDir *d) {
        if (!d)
                return;
        if (d->fd >= 0)
                (void) close(d->fd);
        d->fd = -1;
        d->path = mfree(d->path);
}

static void record_name(char *buf, size_t size, unsigned major, unsigned minor) {
        snprintf(buf, size, "%u:%u", major, minor);
}

/* Fault injection names a record by its whole path. */
static int record_fault(const StateDir *d, const char *op, const char *name) {
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/devices/%s", d->path ?: "", name);
        return fault_check(op, path);
}

static int read_small_file(int fd, char **ret, size_t *size) {
        _cleanup_free_ char *buf = malloc(RECORD_SIZE_MAX);
        size_t n = 0;
        struct stat st;

        if (!buf)
                return -ENOMEM;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        while (n < RECORD_SIZE_MAX) {
                ssize_t k = read(fd, buf + n, RECORD_SIZE_MAX - n);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        if (n == RECORD_SIZE_MAX)
                return -EFBIG;
        *ret = TAKE_PTR(buf);
        *size = n;
        return 0;
}

int state_load(const StateDir *d, unsigned major, unsigned minor, DeviceRecord *ret, char *ret_name) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *text = NULL;
        char name[32];
        size_t size = 0;
        int r;

        if (d->fd < 0)
                return -ENOENT;
        record_name(name, sizeof(name), major, minor);
        r = record_fault(d, "load", name);
        if (r < 0)
                return r;
        fd = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ELOOP ? -EBADMSG : -errno;
        r = read_small_file(fd, &text, &size);
        if (r < 0)
                return r;
        r = device_record_parse(text, size, ret, ret_name);
        if (r >= 0 && (ret->id.major != major || ret->id.minor != minor)) {
                device_record_done(ret);
                return -EBADMSG;        /* a record under another device's name */
        }
        return r;
}

/* A temporary of a name no other save of this process takes: a stale one
 * of the same name is a crashed writer's (nobody else can write here, and
 * two saves of one process never share one), so it is removed and the
 * open tried once more. */
static int open_temporary(int dir, const char *tmp) {
        for (int attempt = 0; attempt < 2; attempt++) {
                int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

                if (fd >= 0 || errno != EEXIST)
                        return fd >= 0 ? fd : -errno;
                if (unlinkat(dir, tmp, 0) < 0 && errno != ENOENT)
                        return -errno;
        }
        return -EEXIST;
}

/* ".M:m.<queue>.<n>.tmp": unique for every save of this process. Saves
 * of two queues at one number (a disk replaced while a pass of the old
 * one is in here) or of one queue from the loop and a worker never write
 * the same temporary, and one never unlinks another's as stale. */
static void temporary_name(char *buf, size_t size, const char *name, const DeviceRecord *r) {
        static uint64_t counter;

        snprintf(buf, size, ".%s.%" PRIu64 ".%" PRIu64 ".tmp", name, r->id.queue_id,
                 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
}

int state_save(const StateDir *d, const DeviceRecord *r, const char *name_now) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -1;
        char name[32], tmp[96];
        int k;

        if (d->fd < 0)
                return -EBADF;
        if (device_record_empty(r))
                return state_remove(d, r->id.major, r->id.minor);
        /* the record on disk stays, and the caller writes nothing */
        if (!device_record_savable(r))
                return -EINVAL;
        text = device_record_format(r, name_now);
        if (!text)
                return -ENOMEM;
        record_name(name, sizeof(name), r->id.major, r->id.minor);
        k = record_fault(d, "save", name);
        if (k < 0)
                return k;
        temporary_name(tmp, sizeof(tmp), name, r);
        fd = open_temporary(d->fd, tmp);
        if (fd < 0)
                return fd;
        k = write_all(fd, text);
        if (k == 0 && fsync(fd) < 0)
                k = -errno;
        if (k == 0 && renameat(d->fd, tmp, d->fd, name) < 0)
                k = -errno;
        if (k < 0) {
                (void) unlinkat(d->fd, tmp, 0);
                return k;
        }
        /* the rename itself must reach the disk before the write it allows */
        return fsync(d->fd) < 0 ? -errno : 0;
}

int state_set_aside(const StateDir *d, const DeviceRecord *readable, const char *name_now) {
        char name[32], aside[48];

        if (d->fd < 0)
                return 0;
        record_name(name, sizeof(name), readable->id.major, readable->id.minor);
        snprintf(aside, sizeof(aside), "%s.torn", name);
        /* a second name for the torn file, then the readable part saved
         * over the first: at no moment is there no record under the
         * number (a crash here, and the next daemon finds the originals) */
        if (unlinkat(d->fd, aside, 0) < 0 && errno != ENOENT)
                return -errno;
        if (linkat(d->fd, name, d->fd, aside, 0) < 0)
                return -errno;
        return state_save(d, readable, name_now);
}

int state_remove(const StateDir *d, unsigned major, unsigned minor) {
        char name[32];

        if (d->fd < 0)
                return 0;
        record_name(name, sizeof(name), major, minor);
        if (unlinkat(d->fd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* A listing of the records' dir, through an fd of its own (readdir
 * moves it). NULL with errno set on failure. */
static DIR *open_listing(const StateDir *d) {
        int fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir;

        if (fd < 0)
                return NULL;
        dir = fdopendir(fd);
        if (!dir) {
                int saved = errno;

                (void) close(fd);
                errno = saved;
        }
        return dir;
}

/* Calls each(name) for every entry of the records' dir, in readdir order;
 * nothing when no dir is open. Stops at the first error each returns. */
static int for_each_entry(const StateDir *d, int (*each)(const char *name, void *userdata), void *userdata) {
        _cleanup_closedir_ DIR *dir = NULL;
        struct dirent *de;
        int r;

        if (d->fd < 0)
                return 0;
        dir = open_listing(d);
        if (!dir)
                return -errno;
        while ((de = readdir(dir)))
                if ((r = each(de->d_name, userdata)) < 0)
                        return r;
        return 0;
}

typedef struct NumberList {
        unsigned (*l)[2];
        size_t count;
} NumberList;

static int add_number(const char *name, void *userdata) {
        NumberList *nl = userdata;
        unsigned major, minor;
        char end;
        void *grown;

        if (sscanf(name, "%u:%u%c", &major, &minor, &end) != 2)
                return 0;       /* ".", temporaries, anything else */
        grown = realloc(nl->l, sizeof(*nl->l) * (nl->count + 1));
        if (!grown)
                return -ENOMEM;
        nl->l = grown;
        nl->l[nl->count][0] = major;
        nl->l[nl->count][1] = minor;
        nl->count++;
        return 0;
}

int state_list(const StateDir *d, unsigned (**ret)[2], size_t *n) {
        NumberList nl = {};
        int r;

        *ret = NULL;
        *n = 0;
        r = for_each_entry(d, add_number, &nl);
        if (r < 0) {
                free(nl.l);
                return r;
        }
        *ret = nl.l;
        *n = nl.count;
        return 0;
}

int state_read_named(const StateDir *d, const char *name, char **ret, size_t *size) {
        _cleanup_close_ int fd = -1;

        fd = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ELOOP ? -EBADMSG : -errno;
        return read_small_file(fd, ret, size);
}

int state_remove_named(const StateDir *d, const char *name) {
        if (unlinkat(d->fd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return fsync(d->fd) < 0 ? -errno : 0;
}

static bool is_temporary(const char *name) {
        size_t n = strlen(name);

        return name[0] == '.' && n > strlen(".tmp") && streq(name + n - strlen(".tmp"), ".tmp");
}

static int remove_temporary(const char *name, void *userdata) {
        const StateDir *d = userdata;

        if (!is_temporary(name))
                return 0;
        /* unlink never follows a link planted there; one that stays is no
         * harm: every save takes a name of its own */
        (void) unlinkat(d->fd, name, 0);
        return 0;
}

/* A crash between a save's open and its rename leaves a temporary, and
 * their names are unique: without this they would pile up. */
static int remove_temporaries(const StateDir *d) {
        return for_each_entry(d, remove_temporary, (void *) d);
}

/* Names that are neither records of today ("M:m", "M:m.torn") nor
 * temporaries (".M:m.<queue>.<n>.tmp"): a device's name, as the first
 * format had. */
static int add_named(const char *name, void *userdata) {
        if (name[0] == '.' || strchr(name, ':'))
                return 0;
        return strv_push(userdata, name) < 0 ? -ENOMEM : 0;
}

int state_list_named(const StateDir *d, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        *ret = NULL;
        r = for_each_entry(d, add_named, &l);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}
