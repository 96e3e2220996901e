/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the readers of the other writers share (conflicts.c and a file per
 * further source: conflicts-sysfsd.c, conflicts-tmpfiles.c,
 * conflicts-lvm.c): files below a root, the directories of a systemd-style
 * configuration with its masking, and the set the readers fill. Nothing
 * here is for the rest of the daemon, which has conflicts.h. */

#include "conflicts.h"
#include "util.h"

/* No reader takes more of a file: configuration files are small, and a
 * fuzzer or a stray image must not make a scan read gigabytes. */
#define CONFLICT_FILE_MAX ((size_t) 1024 * 1024)

bool conflicts_root_is_system(const char *root);
/* <root><path>, path absolute; malloc'd, NULL on ENOMEM. */
char *conflicts_root_path(const char *root, const char *path);
/* <root><path> whole, NUL-terminated. -ENODATA for an empty file or a link
 * to /dev/null (masked); an absolute link under a fixture root resolves
 * inside it; -EFBIG past CONFLICT_FILE_MAX. */
int conflicts_read_file(const char *root, const char *path, char **ret);
/* A link to /dev/null or an empty regular file: it masks its name. */
bool conflicts_file_masked(const char *root, const char *path);
bool conflicts_path_exists(const char *root, const char *path);

/* The files ending in suffix of dirs (most important first) as systemd's
 * conf-files and udev list them: every name once, from the first directory
 * that has it (it masks the others of its name), sorted by name; each one
 * not masked read and given to parse. One that cannot be read is a
 * warning of the set. */
typedef int (*ConfFileParse)(const char *path, const char *text, ConflictSet *s);
int conflicts_scan_files(const char *root, const char *const *dirs, size_t n_dirs, const char *suffix,
                         ConfFileParse parse, ConflictSet *s);

void rule_token_done(RuleToken *t);
void rule_tokens_free(RuleToken *t, size_t n);
int rule_token_copy(const RuleToken *t, RuleToken *ret);

/* Adds a conflict with copies of the strings and the conditions. */
int conflict_add(ConflictSet *s, ConflictSource source, const char *path, unsigned line, unsigned tunable,
                 const char *value, const RuleToken *conds, size_t n_conds, const char *match, const char *advice,
                 Conflict **ret);
/* A file that could not be read or parsed, for the log: 0 or -ENOMEM. */
int conflict_warn(ConflictSet *s, const char *fmt, ...) _printf_(2, 3);

/* "queue/<attr>" or "bdi/read_ahead_kb" → the tunable, else -ENOENT. */
int conflicts_attr_tunable(const char *attr);
/* A path below /sys, without the /sys/ ("block/sd*\/queue/scheduler",
 * "class/block/vda/queue/nr_requests", "devices/.../block/sda/queue/...")
 * → the disk glob it names and the tunable; -ENOENT when it is not a
 * queue setting blkpolicyd manages, -ENOMEM. */
int conflicts_sysfs_path(const char *rel, char **ret_glob, unsigned *ret_tunable);
