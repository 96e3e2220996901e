/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control socket: newline-delimited JSON requests and replies over a
 * unix stream socket, served from the event loop without ever blocking it.
 * One request per line, one reply per line; see docs/control-protocol.md. */

#include <stdbool.h>
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

/* One request line in, one reply out (never NULL unless -ENOMEM):
 * commands_run(). The server only carries lines; what they do is the
 * caller's, since the commands drive the Manager that owns the server. */
typedef cJSON *(*ControlHandler)(Manager *m, const Peer *peer, const char *line, size_t len);

/* Binds (or takes the socket systemd passed) and starts serving. */
int control_server_new(Manager *m, const char *path, ControlHandler handler, ControlServer **ret);
ControlServer *control_server_free(ControlServer *s);

/* {"ok": false, "error": {"code": code, "message": message}} */
cJSON *control_reply_error(const char *code, const char *message);
