/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/devices' "Block devices:" section → major → registered name. The
 * kernel prints it in fs/proc/devices.c and block/genhd.c blkdev_show():
 * "Block devices:\n", then "%3u %s\n" per major, after the character
 * devices and an empty line. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proc-devices.h"
#include "util.h"

static bool line_is(const char *p, size_t n, const char *s) {
        return n == strlen(s) && memcmp(p, s, n) == 0;
}

/* "Character devices:", "Block devices:": a line of its own ending in a
 * colon, not an entry's (which starts with the major, padded by spaces). */
static bool line_is_header(const char *p, size_t n) {
        return n > 0 && p[n - 1] == ':' && p[0] != ' ' && !(p[0] >= '0' && p[0] <= '9');
}

/* A registered name as the kernel stores it: no space, nothing
 * unprintable (bytes outside ASCII too: locale-free). */
static bool name_valid(const char *p, size_t n) {
        if (n == 0 || n >= BLOCK_MAJOR_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (p[i] <= ' ' || p[i] > '~')
                        return false;
        return true;
}

/* "%3u %s": the major right-aligned in three columns, one space, the name. */
static bool entry_parse(const char *p, size_t n, BlockMajor *ret) {
        size_t i = 0, digits;
        unsigned major = 0;

        while (i < n && p[i] == ' ')
                i++;
        for (digits = i; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
                major = major * 10 + (unsigned) (p[i] - '0');
                if (major > BLOCK_MAJOR_MAX)
                        return false;
        }
        if (i == digits || i >= n || p[i] != ' ' || !name_valid(p + i + 1, n - i - 1))
                return false;
        ret->major = major;
        memcpy(ret->name, p + i + 1, n - i - 1);
        ret->name[n - i - 1] = 0;
        return true;
}

typedef struct Builder {
        BlockMajors m;
        size_t allocated;
        /* the majors taken: a file of repeated lines costs no search each */
        unsigned char seen[(BLOCK_MAJOR_MAX + 1) / 8];
} Builder;

static int builder_add(Builder *b, const BlockMajor *e) {
        unsigned char bit = (unsigned char) (1U << (e->major % 8));

        if (b->seen[e->major / 8] & bit)
                return 0;
        if (b->m.n == b->allocated) {
                size_t n = b->allocated ? b->allocated * 2 : 32;
                BlockMajor *grown = reallocarray(b->m.entries, n, sizeof(BlockMajor));

                if (!grown)
                        return -ENOMEM;
                b->m.entries = grown;
                b->allocated = n;
        }
        b->m.entries[b->m.n++] = *e;
        b->seen[e->major / 8] |= bit;
        return 0;
}

/* One line of the section; *in is false once the section has ended. */
static int section_line(Builder *b, const char *p, size_t n, bool *in) {
        BlockMajor e;

        if (n == 0 || line_is_header(p, n)) {
                *in = false;
                return 0;
        }
        return entry_parse(p, n, &e) ? builder_add(b, &e) : 0;
}

static void builder_done(Builder *b) {
        block_majors_done(&b->m);
}

int block_majors_parse(const char *text, size_t len, BlockMajors *ret) {
        _cleanup_(builder_done) Builder b = {};
        const char *p = text, *end = text + len;
        bool found = false, in = false;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = (size_t) ((nl ? nl : end) - p);
                int k = 0;

                if (in)
                        k = section_line(&b, p, n, &in);
                else if (line_is(p, n, "Block devices:"))
                        found = in = true;
                if (k < 0)
                        return k;
                p = nl ? nl + 1 : end;
        }
        if (!found)
                return -EBADMSG;
        block_majors_done(ret);
        *ret = b.m;
        b.m = BLOCK_MAJORS_NULL;
        return 0;
}

const char *block_majors_name(const BlockMajors *m, unsigned major) {
        for (size_t i = 0; i < m->n; i++)
                if (m->entries[i].major == major)
                        return m->entries[i].name;
        return NULL;
}

void block_majors_done(BlockMajors *m) {
        m->entries = mfree(m->entries);
        m->n = 0;
}
