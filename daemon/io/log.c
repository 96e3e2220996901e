/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include "log.h"

static int max_level = LOG_INFO;
static int stderr_is_journal = -1;

/* systemd sets JOURNAL_STREAM=dev:ino when stderr is connected to journald;
 * only then is the "<N>" priority prefix understood rather than noise. */
static bool detect_journal_stream(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == dev && st.st_ino == ino;
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_parse_level(const char *s) {
        static const char *const names[] = {
                [LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (names[i] && strcasecmp(names[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

int log_internal(int level, int error, const char *fmt, ...) {
        int saved = errno;
        va_list ap;

        if (error < 0)
                error = -error;
        if (level <= max_level) {
                if (stderr_is_journal < 0)
                        stderr_is_journal = detect_journal_stream();
                flockfile(stderr);      /* one line, whole, when the applier's threads log too */
                if (stderr_is_journal)
                        fprintf(stderr, "<%d>", level);
                va_start(ap, fmt);
                errno = error;  /* so %m in fmt prints this error */
                vfprintf(stderr, fmt, ap); /* NOLINT(clang-analyzer-valist.Uninitialized): started just above */
                va_end(ap);
                fputc('\n', stderr);
                funlockfile(stderr);
        }
        errno = saved;
        return -error;
}

/* true: msg goes to the journal, with the caller's fields; else it is
 * printed here, as any line (or not at all, above the level). */
static bool log_event_to_journal(int level, const char *msg) {
        if (level > max_level)
                return false;
        if (stderr_is_journal < 0)
                stderr_is_journal = detect_journal_stream();
        if (!stderr_is_journal)
                log_internal(level, 0, "%s", msg);
        return stderr_is_journal;
}

void log_device_event(int level, const LogDeviceEvent *e, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        if (level > max_level)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap); /* NOLINT(clang-analyzer-valist.Uninitialized): started just above */
        va_end(ap);
        if (!log_event_to_journal(level, msg))
                return;
        (void) sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%i", level, "MESSAGE_ID=%s", e->message_id,
                               "DEVICE=%s", e->device ?: "", "POLICY=%s", e->policy ?: "",
                               "SETTING=%s", e->setting ?: "", "OLD=%s", e->old ?: "", "NEW=%s", e->new ?: "",
                               "RESULT=%s", e->result ?: "", "SYSLOG_IDENTIFIER=blkpolicyd", NULL);
}

void log_policy_set_event(int level, const LogPolicySetEvent *e) {
        if (!log_event_to_journal(level, e->message))
                return;
        (void) sd_journal_send("MESSAGE=%s", e->message, "PRIORITY=%i", level, "MESSAGE_ID=%s",
                               MESSAGE_ID_POLICY_SET_BEHIND, "POLICY_SET=%u", e->in_use, "POLICY_SET_NEWEST=%u",
                               e->newest, "POLICY_SET_DIFFERS=%s", e->differs ?: "", "SYSLOG_IDENTIFIER=blkpolicyd",
                               NULL);
}
