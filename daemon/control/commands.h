/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control protocol's requests: parse, authorise, run, reply. */

#include "control.h"

typedef struct Manager Manager;

/* The ControlHandler of the daemon: one request in, one reply out (a
 * JSON reply, or a stream for the listings of every disk, or later for
 * reload, resume and restore, which answer once their writes are
 * applied; none only for -ENOMEM). Pure of I/O on the socket; may
 * change the Manager (reload, pause...). client: where a later reply
 * goes, NULL for none (it is dropped). */
ControlReply commands_run(Manager *m, const Peer *peer, ControlClient *client, const char *line, size_t len);
/* What the daemon's control server serves with: commands_run() on m, and
 * a fatal error of the server's ends m's loop (manager_fatal()). */
ControlHandler commands_handler(Manager *m);
