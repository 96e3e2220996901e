/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Which of the other writers apply to one disk, and which of them most
 * likely wrote the value it has (conflicts-match.c). */

#include "conflict-set.h"

typedef enum ConflictMatch {
        CONFLICT_MATCH_NO,
        CONFLICT_MATCH_MAYBE,   /* a condition blkpolicyd cannot evaluate (ENV{ID_*}, ATTRS, ...) */
        CONFLICT_MATCH_YES,
} ConflictMatch;

/* What the matcher knows of a disk. read_attr reads <disk>/<attr> (the
 * udev ATTR{} path, e.g. "queue/rotational"); read_env a udev property
 * from udev's database, -ENOENT when the disk has no such property (udev
 * then matches the empty string), another error when the database cannot
 * be read. NULL: nothing is known, such conditions stay a MAYBE. */
typedef int (*ConflictRead)(void *userdata, const char *name, char *buf, size_t size);
typedef struct ConflictDevice {
        const char *name;
        bool blk_mq;
        ConflictRead read_attr;
        ConflictRead read_env;
        void *userdata;
} ConflictDevice;

/* Does c write its setting on dev? why: c's condition that decided a NO,
 * or the first that could not be evaluated for a MAYBE; NULL when none
 * (a NO for want of mq/, or for no effect at all). */
ConflictMatch conflict_matches(const Conflict *c, const ConflictDevice *dev, const RuleToken **why);

/* The writer most likely to have set tunable to live on dev: one that
 * applies to dev and writes that very value and is not dormant; a sure
 * match before a maybe, a udev rule before the others (the set's order),
 * and of udev rules the last (its write is the one that stays). NULL when
 * none is known. */
const Conflict *conflicts_attribute(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable,
                                    const char *live);
/* The same among the dormant writers only: one that would have written
 * the value had it run, to say that it did not. */
const Conflict *conflicts_attribute_dormant(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable,
                                            const char *live);

/* "udev rule /etc/udev/rules.d/60-io.rules:3 sets queue/scheduler=bfq
 * (KERNEL==\"sd*\")": malloc'd, NULL on ENOMEM. */
char *conflict_describe(const Conflict *c);
