/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control protocol as both ends know it: the commands, which of them
 * take a device, which are root's, and the keys of the request and of the
 * reply's envelope. blkpolicyd dispatches on this table (commands.c) and
 * blkpolicyctl parses its command line with it, so a command added here is
 * known to both. The default socket path, CONTROL_SOCKET_PATH, is set by
 * meson with the other paths. See docs/control-protocol.md. */

#include <stdbool.h>

#include "blkpolicyd-paths.h"

/* {"command": NAME, "device": DEV} in; {"ok": true, "result": ...} or
 * {"ok": false, "error": {"code": ..., "message": ...}} out */
#define PROTOCOL_KEY_COMMAND "command"
#define PROTOCOL_KEY_DEVICE "device"
#define PROTOCOL_KEY_OK "ok"
#define PROTOCOL_KEY_RESULT "result"
#define PROTOCOL_KEY_ERROR "error"
#define PROTOCOL_KEY_CODE "code"
#define PROTOCOL_KEY_MESSAGE "message"

/* A request is one line of at most this many bytes, newline excluded. */
#define PROTOCOL_REQUEST_MAX ((size_t) 64 * 1024)

/* verify's preview of one policy file, which blkpolicyctl reads itself
 * (the daemon may see another mount namespace): {"command": "verify",
 * "policy": {"name": "90-new.policy", "text": "..."}}. The text is at most
 * PROTOCOL_POLICY_TEXT_MAX bytes, half the request's line: escaped, a
 * newline or a tab is two bytes there (and blkpolicyctl checks the line
 * it makes, for the rarer escapes). A file with errors is refused with
 * PROTOCOL_ERROR_POLICY_INVALID and its "errors" (path, line, message). */
#define PROTOCOL_KEY_POLICY "policy"
#define PROTOCOL_KEY_POLICY_NAME "name"
#define PROTOCOL_KEY_POLICY_TEXT "text"
#define PROTOCOL_POLICY_TEXT_MAX ((size_t) 32 * 1024)
#define PROTOCOL_ERROR_POLICY_INVALID "policy-invalid"

/* trial: {"command": "trial", "device": DEV, "candidates": ["mq-deadline", ...]}
 * starts a trial at the next tick (no candidates: its policy's [Trial]'s);
 * {"command": "trial", "device": DEV, "stop": true} ends the one that runs. */
#define PROTOCOL_KEY_CANDIDATES "candidates"
#define PROTOCOL_KEY_STOP "stop"

typedef enum ProtocolCommandId {
        PROTOCOL_STATUS,
        PROTOCOL_DEVICES,
        PROTOCOL_DEVICE,
        PROTOCOL_EXPLAIN,
        PROTOCOL_POLICIES,
        PROTOCOL_VERIFY,
        PROTOCOL_DOCTOR,
        PROTOCOL_METRICS,
        PROTOCOL_RELOAD,
        PROTOCOL_PAUSE,
        PROTOCOL_RESUME,
        PROTOCOL_RESTORE,
        PROTOCOL_HANDOVER,
        PROTOCOL_TRIAL,
        _PROTOCOL_COMMAND_MAX,
} ProtocolCommandId;

typedef enum DeviceArg {
        DEVICE_ARG_NONE,        /* blkpolicyctl refuses one; the daemon only checks it names a disk */
        DEVICE_ARG_OPTIONAL,    /* one device, or all of them without */
        DEVICE_ARG_REQUIRED,
} DeviceArg;

typedef struct ProtocolCommand {
        const char *name;
        DeviceArg device;
        bool root_only;         /* it changes something */
} ProtocolCommand;

extern const ProtocolCommand protocol_commands[_PROTOCOL_COMMAND_MAX];

/* The command's id, or -EINVAL for a name the protocol does not have. */
int protocol_command_from_string(const char *name);
