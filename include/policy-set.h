/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A PolicySet: the *.policy files of the drop-in directories, masked and
 * sorted, each parsed by policy.c, with the errors of the rejected ones
 * (policy-set.c). */

#include <stddef.h>

#include "policy-error.h"
#include "policy.h"

typedef struct PolicySet {
        unsigned n_ref;         /* policy_set_ref()/unref(); 1 from policy_set_load() */
        Policy **policies;      /* sorted by file name */
        size_t n_policies;
        PolicyErrors errors;
        size_t n_files_rejected;        /* files with errors: what counts is files, not errors */
        /* The KEYs of every property= condition, without repeats: the only
         * udev properties a device needs to keep (NULL when none is named). */
        char **property_keys;
        /* An overlay's (policy_set_overlay()): policies[] are base's, held
         * by a reference on it, but for own, the one it parsed itself. */
        const struct PolicySet *base;
        Policy *own;
} PolicySet;

/* A set is counted: the manager holds the set in force, and every kept
 * plan decided from it holds it too (its names, choices and [Dynamic]
 * point into the set), so a reload's old set goes with the last plan of
 * it, whether or not deciding again succeeded. The count is bookkeeping,
 * not content: holders of a const set count too. The last unref frees. */
const PolicySet *policy_set_ref(const PolicySet *s);
PolicySet *policy_set_unref(const PolicySet *s);

/* Loads "*.policy" from dirs, in order of increasing priority: a file in a
 * later dir masks the file of the same name in an earlier one. A file that
 * is empty or a symlink to /dev/null masks without contributing. Bad files
 * are rejected whole, listed in errors, and count as absent: they mask
 * nothing, so the file of the same name in an earlier dir loads instead.
 * Only -ENOMEM fails. */
int policy_set_load(char *const *dirs, PolicySet **ret);
/* A set for a preview (verify --policy): base with p added, or in place
 * of the file of p's name, at the place the loader gives its name, as if
 * p were a file in the last directory; p NULL with a name: the file of
 * that name masked (an empty file). Takes p, also on -ENOMEM; base's
 * policies are borrowed (base is held), not copied. Errors are not
 * carried: the overlay is only decided from. */
int policy_set_overlay(const PolicySet *base, Policy *p, const char *name, PolicySet **ret);
const Policy *policy_set_find(const PolicySet *s, const char *name);
/* How many of s's policies are canaries (mode=observe). */
size_t policy_set_canaries(const PolicySet *s);
/* "8 policies loaded, 1 file rejected, 13 errors" */
int policy_set_summary(const PolicySet *s, char *buf, size_t size);
