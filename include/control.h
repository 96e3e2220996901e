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

/* Binds (or takes the socket systemd passed) and starts serving. */
int control_server_new(Manager *m, const char *path, ControlServer **ret);
ControlServer *control_server_free(ControlServer *s);

/* commands.c: one request in, one reply out (never NULL unless -ENOMEM).
 * Pure of I/O on the socket; may change the Manager (reload, pause...). */
cJSON *command_run(Manager *m, const Peer *peer, const char *line, size_t len);
cJSON *reply_error(const char *code, const char *message);

bool utf8_is_valid(const char *s, size_t len);
