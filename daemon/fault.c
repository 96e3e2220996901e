/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test scaffolding, built only with -Dfault_injection=true: the table is
 * parsed once from the environment and lives for the process, like the
 * parsed command line. */
#include <fnmatch.h>
#include <signal.h>

#include "fault.h"
#include "util.h"

#if ENABLE_FAULT_INJECTION

#define FAULTS_MAX 16

typedef struct Fault {
        char op[8];
        char glob[256];
        int error;              /* negative errno, 1 for short, FAULT_KILL */
        long remaining;         /* -1: forever */
        long pass;              /* matching calls that go through first */
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
                f->remaining = count && *count ? strtol(count, NULL, 10) : -1;
                f->pass = pass ? strtol(pass, NULL, 10) : 0;
                if (f->error)
                        n_faults++;
        }
}

int fault_check(const char *op, const char *path) {
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
                if (f->error == FAULT_KILL)
                        (void) raise(SIGKILL);  /* a crash exactly here, not at a moment timing picks */
                return f->error;
        }
        return 0;
}

#endif
