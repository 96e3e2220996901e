/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared read-only copies, counted. A thousand NVMe namespaces or loop
 * devices have the same facts apart from their name and number, and get
 * the same plan: each distinct value is kept once, and a device holds a
 * pointer to it. A value goes when its last holder lets go; what it
 * points into it holds itself (a plan its policy set, shared.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct InternType {
        uint64_t (*hash)(const void *value);
        bool (*equal)(const void *a, const void *b);
        void *(*dup)(const void *value);        /* a copy the table owns; NULL without memory */
        void (*free)(void *value);
} InternType;

typedef struct InternEntry InternEntry;

typedef struct InternTable {
        const InternType *type;
        InternEntry **buckets;
        size_t n_buckets;
        size_t n_entries;
} InternTable;

/* The shared copy equal to value, one more holder counted; NULL without
 * memory. value itself is only read. */
const void *intern_ref(InternTable *t, const void *value);
/* One holder lets go of what intern_ref() returned; NULL is fine. */
void intern_unref(InternTable *t, const void *shared);
/* Holders of the copy equal to value; 0 when there is none. */
unsigned intern_count(const InternTable *t, const void *value);
void intern_table_done(InternTable *t);

/* For the types' hash functions: FNV-1a over bytes (texts), and a
 * multiplicative mix for numbers and pointers. */
static inline uint64_t intern_hash_bytes(uint64_t h, const void *p, size_t n) {
        const unsigned char *c = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ c[i]) * 0x100000001b3ull;
        return h;
}

static inline uint64_t intern_hash_u64(uint64_t h, uint64_t v) {
        h = (h ^ v) * 0x9e3779b97f4a7c15ull;
        return h ^ (h >> 32);
}
#define INTERN_HASH_INIT 0xcbf29ce484222325ull
