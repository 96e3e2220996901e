/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The shipped policy sets (docs/service.md, "Upgrades"). The package's
 * policies.d is the newest set, numbered by its policy-set file; every set
 * a release superseded stays, frozen, in policy-sets/N. policy_set= in
 * blkpolicyd.conf picks the one to run, so a package upgrade that changes a
 * shipped choice changes no disk until the admin says so. */

#include <stdbool.h>

/* The number file in each set's dir. */
#define SHIPPED_SET_FILE "policy-set"

typedef struct ShippedSets {
        unsigned in_use;        /* the set read; 0: the newest, unnumbered */
        unsigned newest;        /* policies.d's number; 0: it has no policy-set file */
        char *vendor_dir;       /* the dir of the set in use: policies.d, or policy-sets/N */
        char **differs;         /* *.policy names shipped differently in the newest set, sorted; NULL: none */
        char **policy_dirs;     /* the config's dirs as read (shipped_sets_policy_dirs()) */
} ShippedSets;

/* The set wanted (0: the newest) below root (NULL: /), and what the newest
 * changes in it. -ENOENT: no such set is shipped (logged by the caller,
 * which knows the config line); -ENOMEM. An unreadable shipped file counts
 * as changed. */
int shipped_sets_choose(const char *root, unsigned wanted, ShippedSets *ret);
void shipped_sets_done(ShippedSets *s);
/* The sets there are, for an error: "1, 2 (newest)"; "none" when none. */
void shipped_sets_list(const char *root, char *buf, size_t size);
/* The config's policy dirs as they are read, into s->policy_dirs: the
 * vendor dir by the set in use, each below root. */
int shipped_sets_policy_dirs(ShippedSets *s, const char *root, char *const *dirs);
/* in_use is older than the newest: the journal and status say so. */
static inline bool shipped_sets_behind(const ShippedSets *s) {
        return s->in_use != 0 && s->newest > s->in_use;
}
