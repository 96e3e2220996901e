/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control socket: newline-delimited JSON requests and replies over a
 * unix stream socket, served from the event loop without ever blocking it.
 * One request per line, one reply per line; see docs/control-protocol.md. */

#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "protocol.h"

typedef struct ControlServer ControlServer;

#define CONTROL_REQUEST_MAX PROTOCOL_REQUEST_MAX

typedef struct Peer {
        pid_t pid;
        uid_t uid;
        gid_t gid;
} Peer;

/* A reply too large to build at once, written in parts as the client
 * reads them: a listing of every disk is about 1 KiB of JSON a disk, 9 MB
 * at 10,000, which built as one cJSON tree held the loop 0.3 s and left
 * 75 MiB resident. The server makes one part of about
 * CONTROL_PART_BYTES per dispatch, and the next once the client has
 * read it. */
typedef struct ControlStream ControlStream;
struct ControlStream {
        /* Writes the next piece of the reply to f (its end, with the
         * newline, after the last): 1 if more follow, 0 when the reply is
         * whole, CONTROL_STREAM_YIELD when a slice of the work behind it
         * is done and the rest waits for the next dispatch (the loop's
         * other sources first), -ENOMEM. userdata: the ControlHandler's. */
        int (*next)(ControlStream *s, void *userdata, FILE *f);
        void (*free)(ControlStream *s);
};

#define CONTROL_PART_BYTES ((size_t) 16 * 1024)
#define CONTROL_STREAM_YIELD 2

/* What a request gets: one JSON reply, or a stream, or later: the
 * handler took the request's ControlPending (control_reply_later());
 * none of the three only for -ENOMEM. */
typedef struct ControlReply {
        cJSON *json;
        ControlStream *stream;
        bool later;
} ControlReply;

#define CONTROL_REPLY_LATER ((ControlReply) { .later = true })

/* The connection a request came in on, for a reply that must wait; NULL
 * outside the server (a fuzzer, a unit test). */
typedef struct ControlClient ControlClient;

/* A reply that waits for work the request started (a reload's writes,
 * which a hung queue may hold for minutes), without holding the loop:
 * the handler calls control_reply_later() and returns CONTROL_REPLY_LATER,
 * and the reply goes out with control_pending_reply(), from the loop,
 * after the handler returned. Meanwhile that connection reads no further
 * request (one reply in flight, as ever) and has no idle timeout (it
 * waits for the daemon, not the other way round); every other client is
 * served as usual. A client that hangs up meanwhile only loses its
 * reply. NULL: -ENOMEM. */
typedef struct ControlPending ControlPending;
ControlPending *control_reply_later(ControlClient *c);
/* Sends reply (NULL json and stream: -ENOMEM, fatal) and frees p. */
void control_pending_reply(ControlPending *p, ControlReply reply);
/* No reply after all (the daemon stops): frees p; NULL is fine. */
ControlPending *control_pending_free(ControlPending *p);

/* What the server carries lines for: one request line in, one reply out
 * (commands.c's commands_run()). What the lines do is the caller's, and
 * so is what ends the daemon: the server knows only the loop it is
 * served from. userdata goes to both, and to the streams' next(). */
typedef struct ControlHandler {
        ControlReply (*request)(void *userdata, const Peer *peer, ControlClient *client, const char *line,
                                size_t len);
        /* -ENOMEM in one of the server's callbacks: the daemon ends with it */
        void (*fatal)(void *userdata, int r);
        void *userdata;
} ControlHandler;

/* Binds path (or takes the socket systemd passed) and starts serving from
 * event. config is read where it is used, not copied: socket_group at
 * the bind, max_clients, max_clients_per_uid and client_timeout_ms as a
 * reload leaves them. */
int control_server_new(sd_event *event, const char *path, const Config *config, const ControlHandler *handler,
                       ControlServer **ret);
ControlServer *control_server_free(ControlServer *s);

/* {"ok": false, "error": {"code": code, "message": message}} */
cJSON *control_reply_error(const char *code, const char *message);
