/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The block majors the kernel registered (register_blkdev()), from the
 * "Block devices:" section of /proc/devices: which driver a disk's major
 * belongs to, whatever the disk is named. Pure: text in, table out. */

#include <stddef.h>

/* The kernel's blk_major_name.name is char[16]; a longer name is not one
 * it can print, so its line is skipped. */
#define BLOCK_MAJOR_NAME_MAX 16
/* dev_t's major has 12 bits (MINORBITS 20 of 32) */
#define BLOCK_MAJOR_MAX 4095U

typedef struct BlockMajor {
        unsigned major;
        char name[BLOCK_MAJOR_NAME_MAX];
} BlockMajor;

typedef struct BlockMajors {
        BlockMajor *entries;    /* in the file's order (the kernel's: by major) */
        size_t n;
} BlockMajors;

#define BLOCK_MAJORS_NULL ((BlockMajors) {})

/* The "Block devices:" section of text (len bytes, not NUL-terminated),
 * up to its end (an empty line or the next "...:" header). A line that is
 * not "<major> <name>" is skipped, a second line for a major too (the
 * kernel never prints one: a major has one name). -EBADMSG: there is no
 * such section; -ENOMEM. *ret is replaced, its old entries freed. */
int block_majors_parse(const char *text, size_t len, BlockMajors *ret);
/* The name the kernel registered major under; NULL if it is not listed. */
const char *block_majors_name(const BlockMajors *m, unsigned major);
void block_majors_done(BlockMajors *m);
