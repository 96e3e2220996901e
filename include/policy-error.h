/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The file:line errors of policy files: the parser (policy.c) fills them
 * for one file, the set (policy-set.c) for the directories, and a
 * PolicySet keeps them for status and the log. Neither knows the other
 * here: a PolicySet is made of policies, not the other way around. */

#include <stddef.h>

typedef struct PolicyError {
        char *path;
        unsigned line;          /* 0 when the error is about the whole file */
        char *message;
} PolicyError;

typedef struct PolicyErrors {
        PolicyError *items;
        size_t n_items;
} PolicyErrors;

/* Appends "path:line: message"; -ENOMEM only. */
int policy_error_add(PolicyErrors *e, const char *path, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void policy_errors_done(PolicyErrors *e);
