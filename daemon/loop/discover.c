/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <libudev.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "blkpolicyd-paths.h"
#include "discover.h"
#include "log.h"
#include "util.h"

struct Discover {
        Roots roots;
        char **globs;
        struct udev *udev;
        struct udev_monitor *udev_monitor;
        struct nl_sock *nl;
        int fd;                 /* the monitor's, -1 before discover_open_monitor() */
        const char *kind;
#if ENABLE_FAULT_INJECTION
        /* BLKPOLICYD_FAKE_UEVENTS: the senders waiting for a reply */
        int fake_fd;
        struct sockaddr_un fake_waiters[FAKE_UEVENT_WAITERS_MAX];
        socklen_t fake_waiter_len[FAKE_UEVENT_WAITERS_MAX];
        unsigned n_fake_waiters;
#endif
};

int discover_new(const Roots *roots, char *const *device_globs, Discover **ret) {
        Discover *d = calloc(1, sizeof(Discover));

        if (!d)
                return -ENOMEM;
        d->roots = *roots;
        d->kind = "none";
        d->fd = -1;
#if ENABLE_FAULT_INJECTION
        d->fake_fd = -1;
#endif
        for (char *const *g = device_globs; g && *g; g++)
                if (strv_push(&d->globs, *g) < 0) {
                        discover_free(d);
                        return -ENOMEM;
                }
        /* libudev reads the live /sys only; fixture roots go without it */
        if (roots_are_live(roots)) {
                d->udev = udev_new();
                if (!d->udev) {
                        discover_free(d);
                        return -ENOMEM;
                }
        }
        *ret = d;
        return 0;
}

Discover *discover_free(Discover *d) {
        if (!d)
                return NULL;
#if ENABLE_FAULT_INJECTION
        if (d->fake_fd >= 0)
                (void) close(d->fake_fd);
#endif
        if (d->udev_monitor)
                udev_monitor_unref(d->udev_monitor);
        if (d->nl)
                nl_socket_free(d->nl);
        if (d->udev)
                udev_unref(d->udev);
        strv_free(d->globs);
        free(d);
        return NULL;
}

bool discover_name_wanted(const Discover *d, const char *name) {
        return !d->globs || strv_fnmatch(d->globs, name);
}

static int enumerate_udev(Discover *d, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        struct udev_enumerate *e;
        struct udev_list_entry *entry;
        int r;

        e = udev_enumerate_new(d->udev);
        if (!e)
                return -ENOMEM;
        r = udev_enumerate_add_match_subsystem(e, "block");
        if (r >= 0)
                r = udev_enumerate_add_match_property(e, "DEVTYPE", "disk");
        if (r >= 0)
                r = udev_enumerate_scan_devices(e);
        udev_list_entry_foreach(entry, r >= 0 ? udev_enumerate_get_list_entry(e) : NULL) {
                const char *syspath = udev_list_entry_get_name(entry);
                const char *name = strrchr(syspath, '/');

                if (name && discover_name_wanted(d, name + 1) && strv_push(&l, name + 1) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        udev_enumerate_unref(e);
        if (r < 0)
                return r;
        strv_sort(l);
        *ret = TAKE_PTR(l);
        return 0;
}

int discover_enumerate(Discover *d, char ***ret) {
        _cleanup_strv_free_ char **all = NULL, **l = NULL;
        int r;

        if (d->udev)
                return enumerate_udev(d, ret);
        r = sysfs_list_disks(&d->roots, &all);
        if (r < 0)
                return r;
        for (char **n = all; n && *n; n++)
                if (discover_name_wanted(d, *n) && strv_push(&l, *n) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

/* After an overflow the kernel reports ENOBUFS once and then drops quietly
 * until the queue has been empty again (NETLINK_S_CONGESTED): empty it before
 * rescanning, so that a loss during the rescan is reported too. What is
 * dropped here is older than the rescan, which sees its effect in sysfs. */
static void drain(int fd) {
        char buf[8192];

        while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0 || errno == ENOBUFS || errno == EINTR)
                ;
}

static void udev_device_unrefp(struct udev_device **d) {
        if (*d)
                udev_device_unref(*d);
}

/* One message of udevd's monitor. */
static int receive_udev(Discover *d, DiscoverEvent *ret) {
        _cleanup_(udev_device_unrefp) struct udev_device *dev = udev_monitor_receive_device(d->udev_monitor);
        const char *name;

        if (!dev) {
                if (errno != ENOBUFS)
                        return DISCOVER_NONE;
                log_warning("udev monitor overflowed, rescanning all devices");
                drain(d->fd);
                return DISCOVER_LOST;
        }
        if (streq_ptr(udev_device_get_subsystem(dev), "nvme"))
                return DISCOVER_RESCAN;
        name = udev_device_get_sysname(dev);
        if (!name || !discover_name_wanted(d, name) || strscpy(ret->name, sizeof(ret->name), name) < 0)
                return DISCOVER_SKIPPED;
        ret->devnum = udev_device_get_devnum(dev);
        ret->action = uevent_action_from_string(udev_device_get_action(dev));
        return DISCOVER_EVENT;
}

/* A kernel-format uevent: an event of a wanted whole disk, or none. */
static int uevent_event(Discover *d, char *buf, size_t len, DiscoverEvent *ret) {
        Uevent u;

        if (uevent_parse(buf, len, &u) < 0)
                return DISCOVER_SKIPPED;
        if (uevent_is_nvme_controller(&u))
                return DISCOVER_RESCAN;
        if (!uevent_is_disk(&u) || !u.has_devnum ||
            !discover_name_wanted(d, uevent_sysname(&u)) ||
            strscpy(ret->name, sizeof(ret->name), uevent_sysname(&u)) < 0)
                return DISCOVER_SKIPPED;
        ret->devnum = makedev(u.major, u.minor);
        ret->action = u.action;
        return DISCOVER_EVENT;
}

/* libnl opens and joins the socket; a datagram is taken with recvmsg()
 * into one stack buffer, not with nl_recv(): that maps ENOBUFS (the
 * kernel dropped events: rescan) to NLE_NOMEM, as it maps ENOMEM, so a
 * loss could not be told from a failed allocation, and it mallocs a
 * buffer per message. nl_recvmsgs() and its callbacks parse netlink
 * messages, which a uevent is not: "ACTION@DEVPATH\0KEY=value\0...",
 * core/uevent.c's to parse. README's design notes say the same. */
static int receive_kernel(Discover *d, DiscoverEvent *ret) {
        char buf[8192];
        struct sockaddr_nl sender = {};
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr msg = { .msg_name = &sender, .msg_namelen = sizeof(sender), .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n = recvmsg(d->fd, &msg, MSG_DONTWAIT);

        if (n < 0) {
                if (errno == ENOBUFS) {
                        log_warning("Kernel uevents were lost (receive buffer full), rescanning all devices");
                        drain(d->fd);
                        return DISCOVER_LOST;
                }
                if (errno != EAGAIN && errno != EINTR)
                        log_warning_errno(errno, "Reading kernel uevents failed, ignoring: %m");
                return DISCOVER_NONE;
        }
        /* only the kernel (port 0) may speak on this group */
        if (sender.nl_pid != 0 || (msg.msg_flags & MSG_TRUNC))
                return DISCOVER_SKIPPED;
        return uevent_event(d, buf, (size_t) n, ret);
}

static int start_udev_monitor(Discover *d, unsigned rcvbuf) {
        int r;

        d->udev_monitor = udev_monitor_new_from_netlink(d->udev, "udev");
        if (!d->udev_monitor)
                return -errno ?: -ENOMEM;
        r = udev_monitor_filter_add_match_subsystem_devtype(d->udev_monitor, "block", "disk");
        if (r >= 0)     /* the controllers, for their hidden paths (uevent.h) */
                r = udev_monitor_filter_add_match_subsystem_devtype(d->udev_monitor, "nvme", NULL);
        if (r >= 0)
                r = udev_monitor_set_receive_buffer_size(d->udev_monitor, (int) rcvbuf);
        if (r < 0)
                log_warning_errno(r, "Cannot set the udev monitor's receive buffer, ignoring: %m");
        r = udev_monitor_enable_receiving(d->udev_monitor);
        if (r < 0)
                return r;
        d->kind = "udev";
        d->fd = udev_monitor_get_fd(d->udev_monitor);
        return d->fd;
}

static int start_kernel_monitor(Discover *d, unsigned rcvbuf) {
        int fd, size = (int) rcvbuf, r;

        d->nl = nl_socket_alloc();
        if (!d->nl)
                return -ENOMEM;
        nl_socket_disable_seq_check(d->nl);
        nl_join_groups(d->nl, 1);       /* the kernel's uevent multicast group */
        r = nl_connect(d->nl, NETLINK_KOBJECT_UEVENT);
        if (r < 0)
                return log_error_errno(EIO, "Cannot open the kernel uevent socket: %s", nl_geterror(r));
        fd = nl_socket_get_fd(d->nl);
        /* SO_RCVBUFFORCE passes rmem_max (root); a 212 KiB default lost 1872 of
         * 2000 events when the reader stalled 4 s here, 8 MiB lost none */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 &&
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0)
                log_warning_errno(errno, "Cannot enlarge the uevent receive buffer, ignoring: %m");
        d->kind = "kernel";
        d->fd = fd;
        return fd;
}

#if ENABLE_FAULT_INJECTION
/* Test builds: a datagram socket a test sends kernel-format uevents to,
 * handled as the kernel's are (a fixture tree has no uevents: libudev
 * reads only the live /sys, and the kernel's group takes no sender but
 * the kernel). Each sender is answered once every pass its event started
 * is done (discover_fake_settle()), so a test knows when to look; a
 * datagram that is no uevent ("settle") only waits for that. */
static int receive_fake(Discover *d, DiscoverEvent *ret) {
        char buf[8192];
        struct sockaddr_un from = {};
        socklen_t len = sizeof(from);
        ssize_t n = recvfrom(d->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *) &from, &len);

        if (n < 0)
                return DISCOVER_NONE;
        if ((size_t) n > sizeof(buf))
                return DISCOVER_SKIPPED;
        if (len > sizeof(sa_family_t) && d->n_fake_waiters < FAKE_UEVENT_WAITERS_MAX) {
                d->fake_waiters[d->n_fake_waiters] = from;
                d->fake_waiter_len[d->n_fake_waiters++] = len;
        }
        return uevent_event(d, buf, (size_t) n, ret);
}

static int start_fake_monitor(Discover *d, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        if (strscpy(sa.sun_path, sizeof(sa.sun_path), path) < 0)
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(path);    /* a daemon killed before left it */
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                (void) close(fd);
                return r;
        }
        d->fake_fd = d->fd = fd;
        d->kind = "fake";
        return fd;
}

void discover_fake_settle(Discover *d, bool idle) {
        if (!idle)
                return;
        for (unsigned i = 0; i < d->n_fake_waiters; i++)
                (void) sendto(d->fake_fd, "settled", 7, MSG_DONTWAIT, (struct sockaddr *) &d->fake_waiters[i],
                              d->fake_waiter_len[i]);
        d->n_fake_waiters = 0;
}
#endif

int discover_open_monitor(Discover *d, unsigned rcvbuf) {
#if ENABLE_FAULT_INJECTION
        const char *fake = getenv("BLKPOLICYD_FAKE_UEVENTS");

        if (fake)
                return start_fake_monitor(d, fake);
#endif
        /* udevd announces itself with its control socket, as libudev checks */
        if (d->udev && access("/run/udev/control", F_OK) == 0)
                return start_udev_monitor(d, rcvbuf);
        return start_kernel_monitor(d, rcvbuf);
}

int discover_receive(Discover *d, DiscoverEvent *ret) {
#if ENABLE_FAULT_INJECTION
        if (d->fake_fd >= 0)
                return receive_fake(d, ret);
#endif
        if (d->udev_monitor)
                return receive_udev(d, ret);
        return d->nl ? receive_kernel(d, ret) : DISCOVER_NONE;
}

unsigned discover_batch(const Discover *d) {
#if ENABLE_FAULT_INJECTION
        /* a sender's "settled" follows the dispatch that handled its event */
        if (d->fake_fd >= 0)
                return 1;
#endif
        /* a storm of a thousand adds, handled in one go, kept the control
         * socket waiting 250 ms; the rest wait for the next turn of the
         * loop (the fd stays readable), after the other sources */
        return 16;
}

const char *discover_monitor_kind(const Discover *d) {
        return d->kind;
}
