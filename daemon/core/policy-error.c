/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The errors of policy files (policy-error.h). Their own file because both
 * sides fill them: policy.c with a file's errors as it parses,
 * policy-set.c with the directories' errors; the set is made of policies,
 * not the other way around, so policy.c knows no PolicySet. */
#include <stdarg.h>

#include "policy-error.h"
#include "util.h"

int policy_error_add(PolicyErrors *e, const char *path, unsigned line, const char *fmt, ...) {
        PolicyError *n;
        char *msg;
        va_list ap;

        va_start(ap, fmt);
        msg = vstrdupf(fmt, ap);
        va_end(ap);
        if (!msg)
                return -ENOMEM;
        n = realloc(e->items, sizeof(PolicyError) * (e->n_items + 1));
        if (!n) {
                free(msg);
                return -ENOMEM;
        }
        e->items = n;
        n[e->n_items] = (PolicyError) { .path = strdup(path), .line = line, .message = msg };
        if (!n[e->n_items].path) {
                free(msg);
                return -ENOMEM;
        }
        e->n_items++;
        return 0;
}

void policy_errors_done(PolicyErrors *e) {
        for (size_t i = 0; i < e->n_items; i++) {
                free(e->items[i].path);
                free(e->items[i].message);
        }
        free(e->items);
        *e = (PolicyErrors) {};
}
