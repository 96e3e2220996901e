/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control socket: newline-delimited JSON requests and replies over a
 * unix stream socket, served from the event loop without ever blocking it.
 * One request per line, one reply per line; see docs/control-protocol.md. */

#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

typedef struct Manager Manager;
typedef struct ControlServer ControlServer;

#define CONTROL_REQUEST_MAX ((size_t) 64 * 1024)

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
         * other sources first), -ENOMEM. */
        int (*next)(ControlStream *s, Manager *m, FILE *f);
        void (*free)(ControlStream *s);
};

#define CONTROL_PART_BYTES ((size_t) 16 * 1024)
#define CONTROL_STREAM_YIELD 2

/* What a request gets: one JSON reply, or a stream; neither only for
 * -ENOMEM. */
typedef struct ControlReply {
        cJSON *json;
        ControlStream *stream;
} ControlReply;

/* One request line in, one reply out: commands_run(). The server only
 * carries lines; what they do is the caller's, since the commands drive
 * the Manager that owns the server. */
typedef ControlReply (*ControlHandler)(Manager *m, const Peer *peer, const char *line, size_t len);

/* Binds (or takes the socket systemd passed) and starts serving. */
int control_server_new(Manager *m, const char *path, ControlHandler handler, ControlServer **ret);
ControlServer *control_server_free(ControlServer *s);

/* {"ok": false, "error": {"code": code, "message": message}} */
cJSON *control_reply_error(const char *code, const char *message);
