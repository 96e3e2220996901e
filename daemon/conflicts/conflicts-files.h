/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the readers of the other writers share (a file per source:
 * conflicts-udev.c, conflicts-tuned.c, ...): files below a root and the
 * directories of a systemd-style configuration with its masking. Nothing
 * here is for the rest of the daemon, which has conflicts.h. */

#include "conflict-set.h"
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

/* Each line of text, without its newline, as a copy fn may cut up, with
 * its number from 1 and the file's path: fn returns 0 for the next line,
 * > 0 to read no further (0 is returned then), or -errno, which is
 * returned. -EINVAL for no text. */
typedef int (*ConfLineParse)(ConflictSet *s, const char *path, unsigned lineno, char *line);
int conflicts_parse_lines(const char *path, const char *text, ConfLineParse parse, ConflictSet *s);

/* "queue/<attr>" or "bdi/read_ahead_kb" → the tunable, else -ENOENT. */
int conflicts_attr_tunable(const char *attr);
