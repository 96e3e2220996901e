/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control protocol's requests: parse, authorise, run, reply. */

#include "control.h"

/* The ControlHandler of the daemon: one request in, one reply out (a
 * JSON reply, or a stream for the listings of every disk; neither only
 * for -ENOMEM). Pure of I/O on the socket; may change the Manager
 * (reload, pause...). */
ControlReply commands_run(Manager *m, const Peer *peer, const char *line, size_t len);
