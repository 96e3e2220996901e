/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test scaffolding, built only with -Dfault_injection=true: the table is
 * parsed once from the environment and lives for the process, like the
 * parsed command line. */
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "fault.h"
#include "log.h"
#include "util.h"

#if ENABLE_FAULT_INJECTION

#define FAULTS_MAX 16

typedef struct Fault {
        char op[8];
        char glob[256];
        int error;              /* negative errno, 1 for short, FAULT_KILL */
        long remaining;         /* -1: forever */
        long pass;              /* matching calls that go through first */
        long delay_ms;          /* FAULT_DELAY: how long the call blocks before it goes on */
} Fault;

static Fault faults[FAULTS_MAX];
static unsigned n_faults;
static bool parsed;

static int errno_from_name(const char *s) {
        static const struct { const char *name; int value; } names[] = {
                { "EIO", EIO }, { "EINVAL", EINVAL }, { "ENOENT", ENOENT }, { "EBUSY", EBUSY },
                { "EAGAIN", EAGAIN }, { "ENODEV", ENODEV }, { "ENXIO", ENXIO }, { "EACCES", EACCES },
                { "EMFILE", EMFILE }, { "ENOSPC", ENOSPC },
        };

        if (streq(s, "short"))
                return 1;
        if (streq(s, "KILL"))
                return FAULT_KILL;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(names[i].name, s))
                        return -names[i].value;
        return 0;
}

static void parse_faults(void) {
        const char *env = getenv("BLKPOLICYD_FAULTS");
        char spec[4096], *save = NULL;

        parsed = true;
        if (!env || strscpy(spec, sizeof(spec), env) < 0)
                return;
        for (char *e = strtok_r(spec, ";", &save); e && n_faults < FAULTS_MAX; e = strtok_r(NULL, ";", &save)) {
                char *op = e, *glob = strchr(op, ':'), *err, *count, *pass = NULL;
                Fault *f = &faults[n_faults];

                if (!glob || !(err = strchr(glob + 1, ':')))
                        continue;
                *glob++ = 0;
                *err++ = 0;
                count = strchr(err, ':');
                if (count)
                        *count++ = 0;
                if (count && (pass = strchr(count, ':')))
                        *pass++ = 0;
                if (strscpy(f->op, sizeof(f->op), op) < 0 || strscpy(f->glob, sizeof(f->glob), glob) < 0)
                        continue;
                f->error = errno_from_name(err);
                if (startswith(err, "DELAY=")) {
                        f->error = FAULT_DELAY;
                        f->delay_ms = strtol(err + 6, NULL, 10);
                }
                f->remaining = count && *count ? strtol(count, NULL, 10) : -1;
                f->pass = pass ? strtol(pass, NULL, 10) : 0;
                if (f->error)
                        n_faults++;
        }
}

/* The table is shared by the applier's threads: counters change under a
 * lock, the fault itself happens outside it (a DELAY must not hold the
 * other threads). Returns the matching fault's error, 0 for none. */
static int fault_match(const char *op, const char *path, long *delay_ms) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        int error = 0;

        pthread_mutex_lock(&lock);
        if (!parsed)
                parse_faults();
        for (unsigned i = 0; i < n_faults; i++) {
                Fault *f = &faults[i];

                if (f->remaining == 0 || !streq(f->op, op) || fnmatch(f->glob, path, 0) != 0)
                        continue;
                if (f->pass > 0) {
                        f->pass--;
                        continue;
                }
                if (f->remaining > 0)
                        f->remaining--;
                error = f->error;
                *delay_ms = f->delay_ms;
                break;
        }
        pthread_mutex_unlock(&lock);
        return error;
}

int fault_check(const char *op, const char *path) {
        long delay_ms = 0;
        int error = fault_match(op, path, &delay_ms);

        if (error == FAULT_KILL)
                (void) raise(SIGKILL);  /* a crash exactly here, not at a moment timing picks */
        if (error == FAULT_DELAY) {
                /* a write the kernel holds for seconds (a queue freeze behind slow I/O) */
                struct timespec ts = { .tv_sec = delay_ms / 1000, .tv_nsec = (delay_ms % 1000) * 1000000L };

                /* what a test waits for to act while the call is held */
                log_info("fault injection: %s %s held for %ld ms", op, path, delay_ms);
                (void) nanosleep(&ts, NULL);
                return 0;
        }
        return error;
}

#endif
