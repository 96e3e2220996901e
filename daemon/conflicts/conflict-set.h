/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The contract between the readers of the other writers (a file per
 * source) and everyone else: one setting another tool writes, with the
 * udev-style conditions under which it does, and the set a scan fills.
 * Below every reader, so that the readers depend on it and conflicts.c,
 * which runs them all, on the readers only. */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef enum ConflictSource {
        CONFLICT_UDEV,
        CONFLICT_TUNED,
        CONFLICT_GCE,
        CONFLICT_CMDLINE,
        CONFLICT_SYSFSD,
        CONFLICT_TMPFILES,
        CONFLICT_LVM,
        _CONFLICT_SOURCE_MAX,
} ConflictSource;

typedef enum RuleOp {
        RULE_OP_MATCH,          /* == */
        RULE_OP_NOMATCH,        /* != */
        RULE_OP_ASSIGN,         /* = */
        RULE_OP_ASSIGN_FINAL,   /* := */
        RULE_OP_ADD,            /* += */
        RULE_OP_REMOVE,         /* -= */
} RuleOp;

/* One KEY{attr}OP"value" of a udev rule. */
typedef struct RuleToken {
        char *key;              /* KERNEL, ATTR, ENV, ... */
        char *attr;             /* what is between the braces, or NULL */
        char *value;            /* unquoted, escapes resolved */
        RuleOp op;
} RuleToken;

void rule_token_done(RuleToken *t);
void rule_tokens_free(RuleToken *t, size_t n);
int rule_token_copy(const RuleToken *t, RuleToken *ret);

/* One setting another tool writes. */
typedef struct Conflict {
        ConflictSource source;
        char *path;             /* where it is set, as found below the root */
        unsigned line;          /* 0: the whole file or the program */
        unsigned tunable;       /* index into tunables[] */
        char *value;            /* what it writes */
        /* udev: every condition of the rule, and the conditions of the
         * GOTO guards before it (negated); tuned: devices= */
        RuleToken *conditions;
        size_t n_conditions;
        char *match;            /* the device match as written, for people: KERNEL=="sd*", devices=sdb */
        char *advice;           /* what to do about it */
        bool needs_blk_mq;      /* GCE: only disks with mq/ */
        bool effective;         /* false: it cannot take effect (elevator= on blk-mq) */
        bool maybe;             /* a condition outside the rule could not be followed (a GOTO guard) */
        /* its program is installed but its unit neither enabled nor
         * running: reported, never named as the likely writer of a value */
        bool dormant;
} Conflict;

typedef struct ConflictSet {
        Conflict *items;
        size_t n_items;
        char **warnings;        /* files that could not be read or parsed, for the log */
} ConflictSet;

void conflict_set_done(ConflictSet *s);

/* Adds a conflict with copies of the strings and the conditions. */
int conflict_add(ConflictSet *s, ConflictSource source, const char *path, unsigned line, unsigned tunable,
                 const char *value, const RuleToken *conds, size_t n_conds, const char *match, const char *advice,
                 Conflict **ret);
/* A file that could not be read or parsed, for the log: 0 or -ENOMEM. */
int conflict_warn(ConflictSet *s, const char *fmt, ...) _printf_(2, 3);
