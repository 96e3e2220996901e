/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <syslog.h>

#include "util.h"

/* Log levels are syslog priorities. Messages go to stderr; the service
 * unit hands stderr to journald. Returns -abs(error) so call sites can
 * write "return log_error_errno(r, ...)". */
void log_set_max_level(int level);
int log_parse_level(const char *s);
int log_internal(int level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_full_errno(level, error, ...) log_internal(level, error, __VA_ARGS__)
#define log_debug(...) log_internal(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_internal(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_internal(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_internal(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_internal(LOG_DEBUG, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_internal(LOG_ERR, e, __VA_ARGS__)
#define log_oom() log_internal(LOG_ERR, ENOMEM, "Out of memory.")

/* journalctl MESSAGE_ID=... finds every event of a kind on a fleet. */
#define MESSAGE_ID_SETTING_CHANGED "3f1c9a5e0b7d4e21a6c8d2f4b9e07153"
#define MESSAGE_ID_FLIP "8b2d6f1a4c9e4b7d9f03a5c7e1d2b468"
#define MESSAGE_ID_POLICY_SET_BEHIND "c41e7a2d95b04f6e8a3d1b7c62f0e985"

typedef struct LogDeviceEvent {
        const char *message_id;
        const char *device, *policy, *setting, *old, *new, *result;
} LogDeviceEvent;

/* One line per change to a device. Under journald the fields go along as
 * DEVICE=, POLICY=, SETTING=, OLD=, NEW=, RESULT= (sd_journal_send); on a
 * terminal only the message is printed. */
void log_device_event(int level, const LogDeviceEvent *e, const char *fmt, ...) _printf_(3, 4);

/* The shipped policy set in use is older than the newest installed: under
 * journald with POLICY_SET=, POLICY_SET_NEWEST= and POLICY_SET_DIFFERS=
 * (the shipped files that differ, space-separated). */
typedef struct LogPolicySetEvent {
        unsigned in_use, newest;
        const char *differs;
        const char *message;
} LogPolicySetEvent;
void log_policy_set_event(int level, const LogPolicySetEvent *e);
