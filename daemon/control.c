/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control socket. Every client is non-blocking and bounded: at most
 * CONTROL_REQUEST_MAX bytes of pending request, one reply in flight (no new
 * request is read while a reply waits for the client to read it), an idle
 * timeout, and a client cap that evicts the longest-idle client rather than
 * refusing a new one, so idle connections cannot lock admins out. */
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "control.h"
#include "log.h"
#include "manager.h"
#include "util.h"

typedef struct Client Client;

struct Client {
        ControlServer *server;
        int fd;
        sd_event_source *io;
        sd_event_source *timeout;
        Peer peer;
        char *in;               /* grown on demand up to CONTROL_REQUEST_MAX */
        size_t in_len, in_size;
        char *out;              /* the reply being written, NULL when none */
        size_t out_len, out_done;
        bool closing;           /* close once the reply is out */
        uint64_t last_activity;
        Client *prev, *next;
};

struct ControlServer {
        Manager *manager;
        int fd;
        bool owns_path;         /* bound by us (not socket activation): unlink at exit */
        char path[sizeof(((struct sockaddr_un *) NULL)->sun_path)];
        sd_event_source *io;
        Client *clients;
        unsigned n_clients;
};

static uint64_t now_usec(void) {
        return clock_usec(CLOCK_MONOTONIC);
}

static void client_free(Client *c) {
        ControlServer *s;

        if (!c)
                return;
        s = c->server;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->clients = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_clients--;
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timeout);
        if (c->fd >= 0)
                close(c->fd);
        free(c->in);
        free(c->out);
        free(c);
}

static void client_touch(Client *c) {
        uint64_t usec = (uint64_t) c->server->manager->config.client_timeout_ms * 1000;

        c->last_activity = now_usec();
        (void) sd_event_source_set_time_relative(c->timeout, usec);
        (void) sd_event_source_set_enabled(c->timeout, SD_EVENT_ONESHOT);
}

static int client_update_events(Client *c) {
        /* while a reply is pending, read nothing more: backpressure */
        return sd_event_source_set_io_events(c->io, c->out ? EPOLLOUT : EPOLLIN);
}

/* Writes as much of the pending reply as the socket takes. */
static int client_flush(Client *c) {
        while (c->out && c->out_done < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_done, c->out_len - c->out_done, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                c->out_done += (size_t) n;
                client_touch(c);
        }
        if (c->out) {
                c->out = (free(c->out), NULL);
                c->out_len = c->out_done = 0;
        }
        return c->closing ? -ECONNRESET : 0;
}

static int client_queue_reply(Client *c, cJSON *reply) {
        char *text = reply ? cJSON_PrintUnformatted(reply) : NULL;
        size_t n;

        cJSON_Delete(reply);
        if (!text)
                return -ENOMEM;
        n = strlen(text);
        c->out = malloc(n + 2);
        if (!c->out) {
                free(text);
                return -ENOMEM;
        }
        memcpy(c->out, text, n);
        free(text);
        c->out[n] = '\n';
        c->out[n + 1] = 0;
        c->out_len = n + 1;
        c->out_done = 0;
        return client_flush(c);
}

/* Handles complete lines in c->in until a reply has to wait. */
static int client_process(Client *c) {
        while (!c->out && !c->closing) {
                char *nl = c->in_len ? memchr(c->in, '\n', c->in_len) : NULL;
                size_t len;
                int r;

                if (!nl) {
                        if (c->in_len < CONTROL_REQUEST_MAX)
                                return 0;
                        c->closing = true;
                        log_warning("Control client pid %d uid %u sent a request over %zu bytes, closing",
                                    (int) c->peer.pid, (unsigned) c->peer.uid, CONTROL_REQUEST_MAX);
                        return client_queue_reply(c, reply_error("request-too-large",
                                                                 "a request is one line of at most 65536 bytes"));
                }
                len = (size_t) (nl - c->in);
                r = client_queue_reply(c, command_run(c->server->manager, &c->peer, c->in, len));
                memmove(c->in, nl + 1, c->in_len - len - 1);
                c->in_len -= len + 1;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int client_read(Client *c) {
        ssize_t n;

        if (c->in_len == c->in_size) {
                size_t size = c->in_size ? c->in_size * 2 : 4096;
                char *b;

                if (size > CONTROL_REQUEST_MAX)
                        size = CONTROL_REQUEST_MAX;
                if (size == c->in_size)
                        return client_process(c);
                b = realloc(c->in, size);
                if (!b)
                        return -ENOMEM;
                c->in = b;
                c->in_size = size;
        }
        n = recv(c->fd, c->in + c->in_len, c->in_size - c->in_len, MSG_DONTWAIT);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0)
                return -ECONNRESET;
        c->in_len += (size_t) n;
        client_touch(c);
        return client_process(c);
}

static int on_client_io(sd_event_source *s _unused_, int fd _unused_, uint32_t revents, void *userdata) {
        Client *c = userdata;
        int r = 0;

        if (revents & (EPOLLERR | EPOLLHUP) && !(revents & EPOLLIN))
                r = -ECONNRESET;
        if (r == 0 && (revents & EPOLLOUT)) {
                r = client_flush(c);
                if (r == 0 && !c->out)
                        r = client_process(c);  /* lines that arrived behind the reply */
        }
        if (r == 0 && (revents & EPOLLIN))
                r = client_read(c);
        if (r == -ENOMEM) {
                log_oom();
                return sd_event_exit(sd_event_source_get_event(s), -ENOMEM);
        }
        if (r < 0 || client_update_events(c) < 0)
                client_free(c);
        return 0;
}

static int on_client_timeout(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Client *c = userdata;

        log_debug("Control client pid %d idle too long, closing", (int) c->peer.pid);
        client_free(c);
        return 0;
}

static void evict_idlest(ControlServer *s) {
        Client *idlest = s->clients;

        if (!idlest)
                return;
        for (Client *c = s->clients; c; c = c->next)
                if (c->last_activity < idlest->last_activity)
                        idlest = c;
        log_notice("Control socket full (%u clients): closing the longest idle one, pid %d",
                   s->n_clients, (int) idlest->peer.pid);
        client_free(idlest);
}

static int client_new(ControlServer *s, int fd) {
        Client *c = calloc(1, sizeof(Client));
        struct ucred cred;
        socklen_t len = sizeof(cred);
        sd_event *e = s->manager->event;
        int r;

        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->server = s;
        c->fd = fd;
        c->next = s->clients;
        if (s->clients)
                s->clients->prev = c;
        s->clients = c;
        s->n_clients++;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                client_free(c);
                return 0;
        }
        c->peer = (Peer) { .pid = cred.pid, .uid = cred.uid, .gid = cred.gid };
        r = sd_event_add_io(e, &c->io, fd, EPOLLIN, on_client_io, c);
        if (r >= 0)
                r = sd_event_add_time_relative(e, &c->timeout, CLOCK_MONOTONIC,
                                               (uint64_t) s->manager->config.client_timeout_ms * 1000, 0,
                                               on_client_timeout, c);
        if (r < 0) {
                client_free(c);
                return r == -ENOMEM ? r : 0;
        }
        client_touch(c);
        return 0;
}

static int on_accept(sd_event_source *src _unused_, int fd, uint32_t revents _unused_, void *userdata) {
        ControlServer *s = userdata;

        for (;;) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning_errno(errno, "accept() on the control socket failed, ignoring: %m");
                        return 0;
                }
                if (s->n_clients >= s->manager->config.max_clients)
                        evict_idlest(s);
                if (client_new(s, cfd) == -ENOMEM)
                        return sd_event_exit(s->manager->event, -ENOMEM);
        }
}

/* Refuses to unlink the socket of a daemon that is still running. */
static int check_stale(const struct sockaddr_un *sa) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *) sa, sizeof(*sa)) == 0)
                return -EADDRINUSE;
        return 0;
}

static int resolve_group(const char *name, gid_t *ret) {
        struct group *g;

        if (!name || !*name) {
                *ret = 0;
                return 0;
        }
        errno = 0;
        g = getgrnam(name);
        if (!g)
                return errno ? -errno : -ESRCH;
        *ret = g->gr_gid;
        return 0;
}

static int bind_socket(ControlServer *s, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[PATH_MAX];
        gid_t gid = 0;
        mode_t old;
        int r;

        if (strscpy(sa.sun_path, sizeof(sa.sun_path), path) < 0)
                return log_error_errno(ENAMETOOLONG, "Control socket path too long: %s", path);
        r = resolve_group(s->manager->config.socket_group, &gid);
        if (r < 0)
                return log_error_errno(r, "Unknown socket_group '%s': %m", s->manager->config.socket_group);
        (void) strscpy(dir, sizeof(dir), path);
        if (mkdir(dirname(dir), 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Cannot create the directory of %s: %m", path);
        r = check_stale(&sa);
        if (r == -EADDRINUSE)
                return log_error_errno(r, "Another blkpolicyd answers on %s", path);
        (void) unlink(path);
        s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->fd < 0)
                return log_error_errno(errno, "socket(): %m");
        old = umask(0117);      /* 0660 from the start: no window with wider access */
        r = bind(s->fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return log_error_errno(errno, "Cannot bind %s: %m", path);
        s->owns_path = true;
        (void) strscpy(s->path, sizeof(s->path), path);
        if (gid != 0 && chown(path, (uid_t) -1, gid) < 0)
                return log_error_errno(errno, "Cannot give %s to group %u: %m", path, (unsigned) gid);
        if (listen(s->fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "listen(): %m");
        return 0;
}

int control_server_new(Manager *m, const char *path, ControlServer **ret) {
        ControlServer *s = calloc(1, sizeof(ControlServer));
        int n, r;

        if (!s)
                return log_oom();
        s->manager = m;
        s->fd = -1;
        n = sd_listen_fds(true);
        if (n > 0 && sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) > 0) {
                s->fd = SD_LISTEN_FDS_START;    /* socket activation: systemd owns the path */
                (void) fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
                r = 0;
        } else
                r = bind_socket(s, path);
        if (r >= 0)
                r = sd_event_add_io(m->event, &s->io, s->fd, EPOLLIN, on_accept, s);
        if (r < 0) {
                control_server_free(s);
                return r;
        }
        log_debug("Control socket on %s", s->owns_path ? s->path : "the socket systemd passed");
        *ret = s;
        return 0;
}

ControlServer *control_server_free(ControlServer *s) {
        if (!s)
                return NULL;
        while (s->clients)
                client_free(s->clients);
        sd_event_source_disable_unref(s->io);
        if (s->fd >= 0)
                close(s->fd);
        if (s->owns_path)
                (void) unlink(s->path);
        free(s);
        return NULL;
}

unsigned control_server_clients(const ControlServer *s) {
        return s ? s->n_clients : 0;
}
