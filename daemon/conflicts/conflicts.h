/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Conflicts: the other writers of the settings blkpolicyd manages. udev
 * rules, an active tuned profile, the GCE guest agent, sysfsutils'
 * sysfs.conf, systemd-tmpfiles' w lines, LVM's read-ahead and a kernel
 * elevator= each write a queue attribute at their own time; an admin who
 * does not know they are there sees blkpolicyd's value "drift" and blames
 * the wrong tool. conflicts_scan() finds them below a root (a fixture tree
 * in the tests), conflict_matches() says which apply to one disk. Both
 * only read files: no sysfs writes, no event loop. */

#include <stdbool.h>
#include <stddef.h>

#include "roots.h"

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

const char *conflict_source_to_string(ConflictSource s);
/* "WRITER" or "WRITER:ATTR" of blkpolicyd.conf's yield_to= and
 * reassert_over=: whether it names source (and tunable). -EINVAL: not
 * such a word. */
int conflict_writer_match(const char *word, ConflictSource source, unsigned tunable);

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

typedef struct UdevRule {
        RuleToken *tokens;
        size_t n_tokens;
} UdevRule;

/* Parses one logical rule line (continuations already joined, no
 * comment). 0 and an empty rule for blank lines; -EINVAL for a line udev
 * would reject; -ENOMEM. */
int udev_rule_parse(const char *line, UdevRule *ret);
void udev_rule_done(UdevRule *r);

typedef enum ConflictMatch {
        CONFLICT_MATCH_NO,
        CONFLICT_MATCH_MAYBE,   /* a condition blkpolicyd cannot evaluate (ENV{ID_*}, ATTRS, ...) */
        CONFLICT_MATCH_YES,
} ConflictMatch;

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

/* Where each reader looks: roots->root prefixes /etc, /usr/lib, /lib and
 * /run ("/": the system; NULL: the system when sysfs is live, else none
 * of them, as a fixture's disks are not this machine's); the command line
 * is <proc>/cmdline. */
int conflicts_scan(const Roots *roots, ConflictSet *ret);
void conflict_set_done(ConflictSet *s);

/* The parts of a scan, for the tests and the fuzzer. */
int conflicts_scan_udev(const char *root, ConflictSet *s);
int conflicts_scan_tuned(const char *root, ConflictSet *s);
int conflicts_scan_gce(const char *root, ConflictSet *s);
int conflicts_scan_cmdline(const char *proc, ConflictSet *s);
int conflicts_scan_sysfsd(const char *root, ConflictSet *s);
int conflicts_scan_tmpfiles(const char *root, ConflictSet *s);
int conflicts_scan_lvm(const char *root, ConflictSet *s);
/* One rules file's text, as if read from path. */
int conflicts_parse_udev_text(const char *path, const char *text, ConflictSet *s);
/* The line formats, the same way (the fuzzers' entry points): a sysfs.conf,
 * a tmpfiles.d file, an lvm.conf (whose activation/readahead, or the
 * default, is added as one conflict). */
int conflicts_parse_sysfsd_text(const char *path, const char *text, ConflictSet *s);
int conflicts_parse_tmpfiles_text(const char *path, const char *text, ConflictSet *s);
int conflicts_parse_lvm_text(const char *path, const char *text, ConflictSet *s);

/* Whether another writer's unit runs: a unit only installed writes nothing
 * until someone starts it. Enabled: a link of its name in a .wants/ or
 * .requires/ directory of /etc, /run, /usr/lib or /lib systemd/system;
 * masked: its name linked to /dev/null in /etc or /run. Active is asked of
 * systemd (its private socket) and only on the live root: on a fixture
 * root, or before systemd answers, enabled is all that is known. */
typedef enum UnitState {
        UNIT_ABSENT,            /* no unit file */
        UNIT_MASKED,
        UNIT_INSTALLED,         /* neither enabled nor active */
        UNIT_ENABLED,
        UNIT_ACTIVE,
} UnitState;

UnitState conflicts_unit_state(const char *root, const char *unit);
/* "installed, neither enabled nor running", ... for advice and logs. */
const char *unit_state_to_string(UnitState s);

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
/* KEY{attr}OP"value", as in a rules file. */
int rule_token_format(const RuleToken *t, char *buf, size_t size);

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
