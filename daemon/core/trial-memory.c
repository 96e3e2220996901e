/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trial-memory.h"
#include "util.h"

int trial_fingerprint(const char *incumbent, const TrialPolicy *p, char *buf, size_t size) {
        size_t n;
        int k = snprintf(buf, size, "%s >", incumbent);

        if (k < 0 || (size_t) k >= size)
                return -ENOBUFS;
        n = (size_t) k;
        for (unsigned i = 0; i < p->n_candidates; i++) {
                char name[SCHED_NAME_MAX + 16];

                if (sched_choice_format(&p->candidates[i], name, sizeof(name)) < 0)
                        return -ENOBUFS;
                k = snprintf(buf + n, size - n, "%s %s", i ? "," : "", name);
                if (k < 0 || (size_t) k >= size - n)
                        return -ENOBUFS;
                n += (size_t) k;
        }
        return 0;
}

void trial_memory_done(TrialMemory *m) {
        if (!m)
                return;
        m->memos = mfree(m->memos);
        m->n = m->allocated = 0;
}

static bool same_key(const TrialMemo *a, const TrialMemo *b) {
        return streq(a->identity, b->identity) && streq(a->model, b->model) && streq(a->kernel, b->kernel) &&
               streq(a->trial, b->trial);
}

static uint64_t age(const TrialMemo *memo, uint64_t now_sec) {
        return now_sec > memo->at_sec ? now_sec - memo->at_sec : 0;
}

const TrialMemo *trial_memory_find(const TrialMemory *m, const TrialMemo *key, const TrialShape *shape,
                                   uint64_t now_sec, uint64_t max_age_sec) {
        const TrialMemo *best = NULL;

        for (size_t i = 0; i < m->n; i++) {
                const TrialMemo *e = &m->memos[i];

                if (!same_key(e, key) || age(e, now_sec) > max_age_sec)
                        continue;
                if (shape && trial_shape_differs(&e->shape, shape))
                        continue;
                if (!best || e->at_sec > best->at_sec)
                        best = e;
        }
        return best;
}

static void drop(TrialMemory *m, size_t i) {
        memmove(&m->memos[i], &m->memos[i + 1], sizeof(TrialMemo) * (m->n - i - 1));
        m->n--;
}

/* The index of the oldest of memo's key (any key when memo is NULL), and
 * how many its key has. */
static size_t oldest(const TrialMemory *m, const TrialMemo *memo, size_t *ret_count) {
        size_t found = m->n, count = 0;

        for (size_t i = 0; i < m->n; i++) {
                if (memo && !same_key(&m->memos[i], memo))
                        continue;
                count++;
                if (found == m->n || m->memos[i].at_sec < m->memos[found].at_sec)
                        found = i;
        }
        *ret_count = count;
        return found;
}

int trial_memory_put(TrialMemory *m, const TrialMemo *memo) {
        size_t count, i;

        for (i = 0; i < m->n; i++)
                if (same_key(&m->memos[i], memo) && !trial_shape_differs(&m->memos[i].shape, &memo->shape)) {
                        m->memos[i] = *memo;
                        return 0;
                }
        i = oldest(m, memo, &count);
        if (count >= TRIAL_MEMORY_PER_KEY)
                drop(m, i);
        if (m->n >= TRIAL_MEMORY_MAX)
                drop(m, oldest(m, NULL, &count));
        if (array_grow((void **) &m->memos, &m->allocated, m->n, sizeof(TrialMemo)) < 0)
                return -ENOMEM;
        m->memos[m->n++] = *memo;
        return 0;
}
