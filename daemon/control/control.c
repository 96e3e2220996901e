/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control socket. Every client is non-blocking and bounded: at most
 * CONTROL_REQUEST_MAX bytes of pending request, one reply in flight (no new
 * request is read while a reply waits for the client to read it; a long
 * one is made in parts as the client reads, one a dispatch but where a
 * listing queued behind another starts in the dispatch that ended it), an idle
 * timeout, and a client cap that evicts the longest-idle client rather than
 * refusing a new one, so idle connections cannot lock admins out. A reply
 * that waits for writes (control_reply_later()) holds only its client.
 *
 * Root is never locked out: a uid other than root holds at most
 * max_clients_per_uid connections (one uid's reconnect flood cannot fill the
 * table), a non-root newcomer never evicts a root client, and root has one
 * slot beyond max_clients. accept() errors (out of fds or memory) do not
 * spin: the listening source is switched off and back on from a timer, with
 * backoff; a reserved fd lets us take one connection even at EMFILE, to
 * serve it if it is root's (evicting an idle client to get the fd back) or
 * to close it rather than leave it hanging. Log lines about either are
 * rate limited. */
#include <assert.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "control.h"
#include "fault.h"
#include "log.h"
#include "protocol.h"
#include "util.h"

typedef struct ControlClient Client;

struct ControlClient {
        ControlServer *server;
        int fd;
        sd_event_source *io;
        sd_event_source *timeout;
        Peer peer;
        char *in;               /* grown on demand up to CONTROL_REQUEST_MAX */
        size_t in_len, in_size;
        char *out;              /* the reply (or its part) being written, NULL when none */
        size_t out_len, out_done;
        ControlStream *stream;  /* the parts of the reply still to make, NULL when none */
        ControlPending *pending;        /* a reply that comes later (control_reply_later()), NULL when none */
        bool closing;           /* close once the reply is out */
        uint64_t last_activity;
        Client *prev, *next;
};

#define ACCEPT_BACKOFF_MIN_USEC UINT64_C(10000)
#define ACCEPT_BACKOFF_MAX_USEC UINT64_C(1000000)
#define LOG_LIMIT_USEC UINT64_C(1000000)

struct ControlPending {
        Client *client;         /* NULL once it hung up, or outside the server */
};

/* At most one line per LOG_LIMIT_USEC; the next one says how many were
 * held back. */
typedef struct LogLimit {
        uint64_t begin;
        unsigned suppressed;
} LogLimit;

struct ControlServer {
        sd_event *event;
        const Config *config;   /* the daemon's: a reload changes it in place */
        ControlHandler handler;
        int fd;
        int reserve_fd;         /* /dev/null, given up to accept() at EMFILE */
        bool owns_path;         /* bound by us (not socket activation): unlink at exit */
        dev_t path_dev;         /* what we bound, so we never unlink someone else's file */
        ino_t path_ino;
        char path[sizeof(((struct sockaddr_un *) NULL)->sun_path)];
        sd_event_source *io;
        sd_event_source *backoff;       /* switches io back on after accept() failed */
        uint64_t backoff_usec;
        unsigned accept_failures;
        LogLimit accept_log, full_log, uid_log;
        Client *clients;
        unsigned n_clients;
};

/* True if a line may be logged now; *suppressed is how many were not. */
static bool log_limit(LogLimit *l, unsigned *suppressed) {
        uint64_t now = clock_usec(CLOCK_MONOTONIC);

        if (l->begin && now - l->begin < LOG_LIMIT_USEC) {
                l->suppressed++;
                return false;
        }
        *suppressed = l->suppressed;
        l->suppressed = 0;
        l->begin = now;
        return true;
}

/* The handler's, for the fatal error of one of our callbacks; returns r,
 * for "return server_fatal(s, r);" from a callback (the loop ends). */
static int server_fatal(ControlServer *s, int r) {
        s->handler.fatal(s->handler.userdata, r);
        return r;
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
        if (c->pending)
                c->pending->client = NULL;      /* the reply, when it comes, goes nowhere */
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timeout);
        if (c->fd >= 0)
                close(c->fd);
        free(c->in);
        free(c->out);
        if (c->stream)
                c->stream->free(c->stream);
        free(c);
}

static void client_touch(Client *c) {
        uint64_t usec = (uint64_t) c->server->config->client_timeout_ms * 1000;

        c->last_activity = clock_usec(CLOCK_MONOTONIC);
        (void) sd_event_source_set_time_relative(c->timeout, usec);
        (void) sd_event_source_set_enabled(c->timeout, SD_EVENT_ONESHOT);
}

static int client_update_events(Client *c) {
        /* while a reply is pending, read nothing more: backpressure; while
         * it is not made yet, only a hangup (EPOLLHUP comes unasked) */
        if (c->pending)
                return sd_event_source_set_io_events(c->io, 0);
        return sd_event_source_set_io_events(c->io, c->out || c->stream ? EPOLLOUT : EPOLLIN);
}

/* The next part of c's stream, into c->out: pieces until it is
 * CONTROL_PART_BYTES or the reply is whole (the stream is freed then). */
static int client_next_part(Client *c) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        int r = 1;

        if (!f)
                return -ENOMEM;
        while (r == 1 && size < CONTROL_PART_BYTES) {
                r = c->stream->next(c->stream, c->server->handler.userdata, f);
                if (fflush(f) != 0 || ferror(f))   /* memstream_open(): ferror() is what tells */
                        r = -ENOMEM;
        }
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(text);
                return r;
        }
        if (r == 0) {
                c->stream->free(c->stream);
                c->stream = NULL;
        }
        c->out = text;
        c->out_len = size;
        c->out_done = 0;
        return 0;
}

/* Writes as much of the pending reply as the socket takes. The next part
 * of a stream is made at the next dispatch that may write: a long reply
 * takes turns with everything else on the loop. */
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

static int client_queue_json(Client *c, cJSON *reply) {
        char *text = reply ? cJSON_PrintUnformatted(reply) : NULL, *line;
        size_t n;

        cJSON_Delete(reply);
        if (!text)
                return -ENOMEM;
        n = strlen(text);
        line = realloc(text, n + 2);
        if (!line) {
                free(text);
                return -ENOMEM;
        }
        line[n] = '\n';
        line[n + 1] = 0;
        c->out = line;
        c->out_len = n + 1;
        c->out_done = 0;
        return client_flush(c);
}

static int client_queue_reply(Client *c, ControlReply reply) {
        int r;

        if (reply.later) {
                assert(c->pending && !reply.json && !reply.stream);
                return 0;
        }
        if (!reply.stream)
                return client_queue_json(c, reply.json);
        assert(!reply.json);
        c->stream = reply.stream;
        r = client_next_part(c);
        return r < 0 ? r : client_flush(c);
}

/* Handles complete lines in c->in until a reply has to wait. */
static int client_process(Client *c) {
        const ControlHandler *h = &c->server->handler;

        while (!c->out && !c->stream && !c->pending && !c->closing) {
                char *nl = c->in_len ? memchr(c->in, '\n', c->in_len) : NULL;
                ControlReply reply;
                size_t len;
                int r;

                if (!nl) {
                        char why[64];

                        if (c->in_len < CONTROL_REQUEST_MAX)
                                return 0;
                        c->closing = true;
                        log_warning("Control client pid %d uid %u sent a request over %zu bytes, closing",
                                    (int) c->peer.pid, (unsigned) c->peer.uid, CONTROL_REQUEST_MAX);
                        snprintf(why, sizeof(why), "a request is one line of at most %zu bytes", CONTROL_REQUEST_MAX);
                        return client_queue_json(c, control_reply_error("request-too-large", why));
                }
                len = (size_t) (nl - c->in);
                reply = h->request(h->userdata, &c->peer, c, c->in, len);
                r = client_queue_reply(c, reply);
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
        Client *c = ASSERT_PTR(userdata);
        int r = 0;

        if (revents & (EPOLLERR | EPOLLHUP) && !(revents & EPOLLIN))
                r = -ECONNRESET;
        if (r == 0 && (revents & EPOLLOUT)) {
                if (!c->out && c->stream)
                        r = client_next_part(c);
                if (r == 0)
                        r = client_flush(c);
                if (r == 0 && !c->out && !c->stream)
                        r = client_process(c);  /* lines that arrived behind the reply */
        }
        if (r == 0 && (revents & EPOLLIN))
                r = client_read(c);
        if (r == -ENOMEM)
                return server_fatal(c->server, r);
        if (r < 0 || client_update_events(c) < 0)
                client_free(c);
        return 0;
}

ControlPending *control_reply_later(Client *c) {
        ControlPending *p = calloc(1, sizeof(ControlPending));

        if (!p || !c)
                return p;
        assert(!c->pending);
        p->client = c;
        c->pending = p;
        /* waiting for the daemon is not idling: no timeout until the reply */
        c->last_activity = clock_usec(CLOCK_MONOTONIC);
        (void) sd_event_source_set_enabled(c->timeout, SD_EVENT_OFF);
        return p;
}

ControlPending *control_pending_free(ControlPending *p) {
        if (p && p->client)
                p->client->pending = NULL;
        free(p);
        return NULL;
}

void control_pending_reply(ControlPending *p, ControlReply reply) {
        Client *c = p->client;
        int r;

        control_pending_free(p);
        if (!c) {
                cJSON_Delete(reply.json);
                if (reply.stream)
                        reply.stream->free(reply.stream);
                return;
        }
        if (!reply.json && !reply.stream) {
                (void) server_fatal(c->server, -ENOMEM);
                return;
        }
        client_touch(c);
        r = client_queue_reply(c, reply);
        if (r == 0 && !c->out && !c->stream)
                r = client_process(c);  /* lines that arrived behind the request */
        if (r == -ENOMEM)
                (void) server_fatal(c->server, r);
        else if (r < 0 || client_update_events(c) < 0)
                client_free(c);
}

static int on_client_timeout(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Client *c = ASSERT_PTR(userdata);

        log_debug("Control client pid %d idle too long, closing", (int) c->peer.pid);
        client_free(c);
        return 0;
}

/* The longest idle client: of any uid when any_uid, else not root's. */
static Client *find_idlest(ControlServer *s, bool any_uid) {
        Client *idlest = NULL;

        for (Client *c = s->clients; c; c = c->next)
                if ((any_uid || c->peer.uid != 0) && (!idlest || c->last_activity < idlest->last_activity))
                        idlest = c;
        return idlest;
}

static void evict(ControlServer *s, Client *c) {
        unsigned suppressed;

        if (log_limit(&s->full_log, &suppressed))
                log_notice("Control socket full (%u clients): closing the longest idle one, pid %d uid %u "
                           "(%u more not logged)", s->n_clients, (int) c->peer.pid, (unsigned) c->peer.uid,
                           suppressed);
        client_free(c);
}

static unsigned clients_of_uid(const ControlServer *s, uid_t uid) {
        unsigned n = 0;

        for (const Client *c = s->clients; c; c = c->next)
                n += c->peer.uid == uid;
        return n;
}

cJSON *control_reply_error(const char *code, const char *message) {
        cJSON *r = cJSON_CreateObject(), *e;

        cJSON_AddBoolToObject(r, PROTOCOL_KEY_OK, false);
        e = cJSON_AddObjectToObject(r, PROTOCOL_KEY_ERROR);
        cJSON_AddStringToObject(e, PROTOCOL_KEY_CODE, code);
        cJSON_AddStringToObject(e, PROTOCOL_KEY_MESSAGE, message);
        return r;
}

/* Best effort: one error line the client can read as the reply to its
 * request, then the connection is closed. */
static void refuse(int fd, const char *code, const char *message) {
        cJSON *reply = control_reply_error(code, message);
        char *text = reply ? cJSON_PrintUnformatted(reply) : NULL;
        struct iovec iov[2] = { { .iov_base = text, .iov_len = text ? strlen(text) : 0 },
                                { .iov_base = (char *) "\n", .iov_len = 1 } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

        cJSON_Delete(reply);
        if (text)
                (void) sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        free(text);
        (void) close(fd);
}

static int client_new(ControlServer *s, int fd, const Peer *peer) {
        Client *c = calloc(1, sizeof(Client));
        sd_event *e = s->event;
        int r;

        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->server = s;
        c->fd = fd;
        c->peer = *peer;
        c->next = s->clients;
        if (s->clients)
                s->clients->prev = c;
        s->clients = c;
        s->n_clients++;
        r = sd_event_add_io(e, &c->io, fd, EPOLLIN, on_client_io, c);
        if (r >= 0)
                r = sd_event_add_time_relative(e, &c->timeout, CLOCK_MONOTONIC,
                                               (uint64_t) s->config->client_timeout_ms * 1000, 0,
                                               on_client_timeout, c);
        if (r < 0) {
                client_free(c);
                return r == -ENOMEM ? r : 0;
        }
        client_touch(c);
        return 0;
}

static int peer_of(int fd, Peer *ret) {
        struct ucred cred = {};
        socklen_t len = sizeof(cred);

        /* never root by accident: an unknown peer is nobody's */
        *ret = (Peer) { .uid = (uid_t) -1, .gid = (gid_t) -1 };
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        *ret = (Peer) { .pid = cred.pid, .uid = cred.uid, .gid = cred.gid };
        return 0;
}

/* Takes a new connection in, or refuses it: the per-uid cap for everyone
 * but root, max_clients for all, one slot beyond it for root. */
static int admit(ControlServer *s, int fd) {
        const Config *cfg = s->config;
        unsigned suppressed;
        Client *victim;
        Peer peer;

        if (peer_of(fd, &peer) < 0) {
                (void) close(fd);
                return 0;
        }
        if (peer.uid != 0 && clients_of_uid(s, peer.uid) >= cfg->max_clients_per_uid) {
                if (log_limit(&s->uid_log, &suppressed))
                        log_warning("Control client pid %d refused: uid %u has max_clients_per_uid=%u connections "
                                    "open (%u more not logged)",
                                    (int) peer.pid, (unsigned) peer.uid, cfg->max_clients_per_uid, suppressed);
                refuse(fd, "too-many-clients", "this uid has max_clients_per_uid connections open already");
                return 0;
        }
        if (s->n_clients >= cfg->max_clients + (peer.uid == 0)) {
                /* root may evict anyone; the others never evict root */
                victim = find_idlest(s, false);
                if (!victim && peer.uid == 0)
                        victim = find_idlest(s, true);
                if (!victim) {
                        refuse(fd, "too-many-clients", "the control socket is full");
                        return 0;
                }
                evict(s, victim);
        }
        return client_new(s, fd, &peer);
}

static void reserve_open(ControlServer *s) {
        if (s->reserve_fd < 0)
                s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
}

/* Out of fds, the pending connection would stay in the backlog and wake us
 * again at once. Give up the reserved fd to take it: root's is served (an
 * idle non-root client is closed, so the reserve can be had back), anyone
 * else's is closed, so that client learns at once instead of hanging. */
static int accept_with_reserve(ControlServer *s) {
        Client *victim = NULL;
        Peer peer;
        int cfd, r = 0;

        if (s->reserve_fd < 0)
                return 0;
        s->reserve_fd = (close(s->reserve_fd), -1);
        cfd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd >= 0 && peer_of(cfd, &peer) >= 0 && peer.uid == 0)
                victim = find_idlest(s, false);
        if (victim) {
                evict(s, victim);
                r = client_new(s, cfd, &peer);
        } else if (cfd >= 0)
                refuse(cfd, "too-many-clients", "blkpolicyd is out of file descriptors");
        reserve_open(s);
        return r;
}

/* systemd's ERRNO_IS_ACCEPT_AGAIN(): the peer went away before we took it,
 * or a signal; take the next one. */
static bool errno_is_accept_again(int e) {
        switch (e) {
        case EINTR: case ECONNABORTED: case ECONNRESET: case EPROTO: case EPERM:
        case ENETDOWN: case ENETUNREACH: case EHOSTDOWN: case EHOSTUNREACH: case ENOPROTOOPT: case EOPNOTSUPP:
                return true;
        default:
                return false;
        }
}

/* Anything else (EMFILE, ENFILE, ENOBUFS, ENOMEM) would fail again at once:
 * stop listening for backoff_usec, 10 ms doubling up to 1 s, and log one
 * line per period at most. */
static int accept_backoff(ControlServer *s, int error) {
        unsigned suppressed;
        int r;

        s->accept_failures++;
        r = accept_with_reserve(s);
        if (log_limit(&s->accept_log, &suppressed)) {
                log_warning_errno(error, "accept() on the control socket failed: %m; not accepting for %llu ms "
                                  "(%u failures since the last message)",
                                  (unsigned long long) s->backoff_usec / 1000, s->accept_failures);
                s->accept_failures = 0;
        }
        (void) sd_event_source_set_enabled(s->io, SD_EVENT_OFF);
        (void) sd_event_source_set_time_relative(s->backoff, s->backoff_usec);
        (void) sd_event_source_set_enabled(s->backoff, SD_EVENT_ONESHOT);
        s->backoff_usec = s->backoff_usec * 2 > ACCEPT_BACKOFF_MAX_USEC ? ACCEPT_BACKOFF_MAX_USEC : s->backoff_usec * 2;
        return r;
}

static int on_accept_backoff(sd_event_source *src _unused_, uint64_t usec _unused_, void *userdata) {
        ControlServer *s = ASSERT_PTR(userdata);

        (void) sd_event_source_set_enabled(s->io, SD_EVENT_ON);
        return 0;
}

/* At most ACCEPT_BATCH connections per wakeup: the listening fd is level
 * triggered, so a flood of connects waits its turn behind the tick and
 * the clients already in. */
#define ACCEPT_BATCH 64

static int on_accept(sd_event_source *src _unused_, int fd, uint32_t revents _unused_, void *userdata) {
        ControlServer *s = ASSERT_PTR(userdata);

        for (unsigned i = 0; i < ACCEPT_BATCH; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), r;

                if (cfd < 0 && errno == EAGAIN)
                        return 0;
                if (cfd < 0 && errno_is_accept_again(errno))
                        continue;
                if (cfd < 0)
                        r = accept_backoff(s, errno);
                else {
                        s->backoff_usec = ACCEPT_BACKOFF_MIN_USEC;
                        r = admit(s, cfd);
                }
                if (r == -ENOMEM)
                        return server_fatal(s, r);
                if (cfd < 0)
                        return 0;
        }
        return 0;
}

/* Removes the socket a dead daemon left. Refuses to unlink the socket of
 * a daemon that is still running, and anything that is not a socket: a
 * mistyped --socket must not delete a file. */
static int remove_stale(const struct sockaddr_un *sa) {
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (lstat(sa->sun_path, &st) < 0) {
                if (errno == ENOENT)
                        return 0;
                return log_error_errno(errno, "Cannot check %s: %m", sa->sun_path);
        }
        if (!S_ISSOCK(st.st_mode))
                return log_error_errno(EADDRINUSE, "%s exists and is not a socket, refusing to replace it",
                                       sa->sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return log_error_errno(errno, "socket(): %m");
        if (connect(fd, (const struct sockaddr *) sa, sizeof(*sa)) == 0)
                return log_error_errno(EADDRINUSE, "Another blkpolicyd answers on %s", sa->sun_path);
        if (unlink(sa->sun_path) < 0 && errno != ENOENT)
                return log_error_errno(errno, "Cannot remove the stale socket %s: %m", sa->sun_path);
        return 0;
}

/* At exit: unlink the path only while it is still the socket we bound. */
static void unlink_own_socket(const ControlServer *s) {
        struct stat st;

        if (lstat(s->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == s->path_dev && st.st_ino == s->path_ino)
                (void) unlink(s->path);
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

/* The socket is bound under a name of its own and linked to path only
 * once it listens: a client (or another daemon's remove_stale()) that
 * sees the path can connect; between bind() and listen() it would be
 * refused. link() fails like bind() if another socket took the path. */
static int socket_temp_name(const char *path, struct sockaddr_un *ret) {
        int n = snprintf(ret->sun_path, sizeof(ret->sun_path), "%s.%d.new", path, (int) getpid());

        return n < 0 || (size_t) n >= sizeof(ret->sun_path) ? -ENAMETOOLONG : 0;
}

static int listen_at(ControlServer *s, const struct sockaddr_un *tmp, gid_t gid) {
        mode_t old = umask(0117);       /* 0660 from the start: no window with wider access */
        int r = bind(s->fd, (const struct sockaddr *) tmp, sizeof(*tmp));

        umask(old);
        if (r < 0)
                return log_error_errno(errno, "Cannot bind %s: %m", tmp->sun_path);
        if (gid != 0 && chown(tmp->sun_path, (uid_t) -1, gid) < 0)
                return log_error_errno(errno, "Cannot give %s to group %u: %m", tmp->sun_path, (unsigned) gid);
        r = fault_check("listen", tmp->sun_path);       /* DELAY: bound, not listening yet */
        if (r < 0)
                return log_error_errno(r, "listen(): %m");
        if (listen(s->fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "listen(): %m");
        return 0;
}

static int bind_socket(ControlServer *s, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX }, tmp = { .sun_family = AF_UNIX };
        struct stat st;
        char dir[PATH_MAX];
        gid_t gid = 0;
        int r;

        if (strscpy(sa.sun_path, sizeof(sa.sun_path), path) < 0 || socket_temp_name(path, &tmp) < 0)
                return log_error_errno(ENAMETOOLONG, "Control socket path too long: %s", path);
        r = resolve_group(s->config->socket_group, &gid);
        if (r < 0)
                return log_error_errno(r, "Unknown socket_group '%s': %m", s->config->socket_group);
        (void) strscpy(dir, sizeof(dir), path);
        if (mkdir(dirname(dir), 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Cannot create the directory of %s: %m", path);
        r = remove_stale(&sa);
        if (r < 0)
                return r;
        s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->fd < 0)
                return log_error_errno(errno, "socket(): %m");
        (void) unlink(tmp.sun_path);    /* an earlier daemon's of the same pid */
        r = listen_at(s, &tmp, gid);
        if (r >= 0 && lstat(tmp.sun_path, &st) < 0)
                r = log_error_errno(errno, "Cannot stat %s: %m", tmp.sun_path);
        if (r >= 0 && link(tmp.sun_path, path) < 0)
                r = log_error_errno(errno, errno == EEXIST ? "Another blkpolicyd took %s meanwhile" :
                                                             "Cannot put the control socket at %s: %m", path);
        (void) unlink(tmp.sun_path);
        if (r < 0)
                return r;
        s->owns_path = true;
        s->path_dev = st.st_dev;
        s->path_ino = st.st_ino;
        (void) strscpy(s->path, sizeof(s->path), path);
        return 0;
}

int control_server_new(sd_event *event, const char *path, const Config *config, const ControlHandler *handler,
                       ControlServer **ret) {
        ControlServer *s = calloc(1, sizeof(ControlServer));
        int n, r;

        if (!s)
                return log_oom();
        s->event = event;
        s->config = config;
        s->handler = *handler;
        s->fd = -1;
        s->reserve_fd = -1;
        s->backoff_usec = ACCEPT_BACKOFF_MIN_USEC;
        reserve_open(s);
        n = sd_listen_fds(true);
        if (n > 0 && sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) > 0) {
                s->fd = SD_LISTEN_FDS_START;    /* socket activation: systemd owns the path */
                (void) fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
                r = 0;
        } else
                r = bind_socket(s, path);
        if (r >= 0)
                r = sd_event_add_io(event, &s->io, s->fd, EPOLLIN, on_accept, s);
        /* made now, so that backing off at EMFILE needs no new fd */
        if (r >= 0)
                r = sd_event_add_time_relative(event, &s->backoff, CLOCK_MONOTONIC, ACCEPT_BACKOFF_MIN_USEC, 0,
                                               on_accept_backoff, s);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->backoff, SD_EVENT_OFF);
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
        sd_event_source_disable_unref(s->backoff);
        if (s->fd >= 0)
                close(s->fd);
        if (s->reserve_fd >= 0)
                close(s->reserve_fd);
        if (s->owns_path)
                unlink_own_socket(s);
        free(s);
        return NULL;
}
