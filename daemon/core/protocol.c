/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control protocol's commands: compiled into blkpolicyd and
 * blkpolicyctl both, so the two never disagree on a name or an argument. */
#include <errno.h>
#include <string.h>

#include "protocol.h"

const ProtocolCommand protocol_commands[_PROTOCOL_COMMAND_MAX] = {
        [PROTOCOL_STATUS] = { "status", DEVICE_ARG_NONE, false },
        [PROTOCOL_DEVICES] = { "devices", DEVICE_ARG_NONE, false },
        [PROTOCOL_DEVICE] = { "device", DEVICE_ARG_REQUIRED, false },
        [PROTOCOL_EXPLAIN] = { "explain", DEVICE_ARG_REQUIRED, false },
        [PROTOCOL_POLICIES] = { "policies", DEVICE_ARG_NONE, false },
        [PROTOCOL_VERIFY] = { "verify", DEVICE_ARG_NONE, false },
        [PROTOCOL_DOCTOR] = { "doctor", DEVICE_ARG_NONE, false },
        [PROTOCOL_METRICS] = { "metrics", DEVICE_ARG_NONE, false },
        [PROTOCOL_RELOAD] = { "reload", DEVICE_ARG_NONE, true },
        [PROTOCOL_PAUSE] = { "pause", DEVICE_ARG_OPTIONAL, true },
        [PROTOCOL_RESUME] = { "resume", DEVICE_ARG_OPTIONAL, true },
        [PROTOCOL_RESTORE] = { "restore", DEVICE_ARG_OPTIONAL, true },
        [PROTOCOL_HANDOVER] = { "handover", DEVICE_ARG_NONE, true },
        [PROTOCOL_TRIAL] = { "trial", DEVICE_ARG_REQUIRED, true },
};

int protocol_command_from_string(const char *name) {
        for (int i = 0; i < _PROTOCOL_COMMAND_MAX; i++)
                if (strcmp(protocol_commands[i].name, name) == 0)
                        return i;
        return -EINVAL;
}
