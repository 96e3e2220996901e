/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The intern table: chained hash by the type's hash, grown at load factor
 * 1 like the device table. Entries are few (one per distinct value), so
 * the entry is a small allocation beside the value. */
#include <errno.h>
#include <stdlib.h>

#include "intern.h"

struct InternEntry {
        InternEntry *next;
        void *value;
        uint64_t hash;
        unsigned holders;
};

static InternEntry **bucket_of(const InternTable *t, uint64_t hash) {
        return &t->buckets[(hash ^ (hash >> 29)) & (t->n_buckets - 1)];
}

static InternEntry *intern_find(const InternTable *t, const void *value, uint64_t hash) {
        if (t->n_buckets == 0)
                return NULL;
        for (InternEntry *e = *bucket_of(t, hash); e; e = e->next)
                if (e->hash == hash && t->type->equal(e->value, value))
                        return e;
        return NULL;
}

static int intern_grow(InternTable *t) {
        size_t n = t->n_buckets ? t->n_buckets * 2 : 16;
        InternTable grown = { .type = t->type, .buckets = calloc(n, sizeof(InternEntry *)), .n_buckets = n };

        if (!grown.buckets)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_buckets; i++)
                for (InternEntry *e = t->buckets[i], *next; e; e = next) {
                        InternEntry **b = bucket_of(&grown, e->hash);

                        next = e->next;
                        e->next = *b;
                        *b = e;
                }
        free(t->buckets);
        t->buckets = grown.buckets;
        t->n_buckets = n;
        return 0;
}

static InternEntry *intern_add(InternTable *t, const void *value, uint64_t hash) {
        InternEntry *e, **b;

        if (t->n_entries >= t->n_buckets && intern_grow(t) < 0)
                return NULL;
        e = malloc(sizeof(InternEntry));
        if (!e)
                return NULL;
        *e = (InternEntry) { .value = t->type->dup(value), .hash = hash };
        if (!e->value) {
                free(e);
                return NULL;
        }
        b = bucket_of(t, hash);
        e->next = *b;
        *b = e;
        t->n_entries++;
        return e;
}

const void *intern_ref(InternTable *t, const void *value) {
        uint64_t hash = t->type->hash(value);
        InternEntry *e = intern_find(t, value, hash) ?: intern_add(t, value, hash);

        if (!e)
                return NULL;
        e->holders++;
        return e->value;
}

void intern_unref(InternTable *t, const void *shared) {
        InternEntry **p;

        if (!shared || t->n_buckets == 0)
                return;
        for (p = bucket_of(t, t->type->hash(shared)); *p; p = &(*p)->next) {
                InternEntry *e = *p;

                if (e->value != shared)
                        continue;
                if (--e->holders == 0) {
                        *p = e->next;
                        t->type->free(e->value);
                        free(e);
                        t->n_entries--;
                }
                return;
        }
}

unsigned intern_count(const InternTable *t, const void *value) {
        InternEntry *e = intern_find(t, value, t->type->hash(value));

        return e ? e->holders : 0;
}

void intern_table_done(InternTable *t) {
        for (size_t i = 0; i < t->n_buckets; i++)
                for (InternEntry *e = t->buckets[i], *next; e; e = next) {
                        next = e->next;
                        t->type->free(e->value);
                        free(e);
                }
        free(t->buckets);
        *t = (InternTable) { .type = t->type };
}
