/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PolicySet's error list. Its own file because both sides fill it:
 * policy.c with a file's errors as it parses, policy-set.c with the
 * directories' errors; the set is made of policies, not the other way
 * around, so policy.c must not call into policy-set.c. */
#include <stdarg.h>

#include "policy.h"
#include "util.h"

int policy_error_add(PolicySet *set, const char *path, unsigned line, const char *fmt, ...) {
        PolicyError *n;
        char *msg;
        va_list ap;

        va_start(ap, fmt);
        msg = vstrdupf(fmt, ap);
        va_end(ap);
        if (!msg)
                return -ENOMEM;
        n = realloc(set->errors, sizeof(PolicyError) * (set->n_errors + 1));
        if (!n) {
                free(msg);
                return -ENOMEM;
        }
        set->errors = n;
        n[set->n_errors] = (PolicyError) { .path = strdup(path), .line = line, .message = msg };
        if (!n[set->n_errors].path) {
                free(msg);
                return -ENOMEM;
        }
        set->n_errors++;
        return 0;
}
