/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The set the readers of the other writers fill (conflict-set.h). */
#include <stdarg.h>

#include "conflict-set.h"

void rule_token_done(RuleToken *t) {
        free(t->key);
        free(t->attr);
        free(t->value);
}

void rule_tokens_free(RuleToken *t, size_t n) {
        for (size_t i = 0; i < n; i++)
                rule_token_done(&t[i]);
        free(t);
}

int rule_token_copy(const RuleToken *t, RuleToken *ret) {
        *ret = (RuleToken) { .key = strdup(t->key), .attr = t->attr ? strdup(t->attr) : NULL,
                             .value = strdup(t->value), .op = t->op };
        if (!ret->key || !ret->value || (t->attr && !ret->attr)) {
                rule_token_done(ret);
                return -ENOMEM;
        }
        return 0;
}

static int tokens_push(RuleToken **tokens, size_t *n, const RuleToken *t) {
        RuleToken *a = realloc(*tokens, (*n + 1) * sizeof(RuleToken));

        if (!a)
                return -ENOMEM;
        *tokens = a;
        if (rule_token_copy(t, &a[*n]) < 0)
                return -ENOMEM;
        (*n)++;
        return 0;
}

static Conflict *conflict_push(ConflictSet *s) {
        Conflict *a = realloc(s->items, (s->n_items + 1) * sizeof(Conflict));

        if (!a)
                return NULL;
        s->items = a;
        a[s->n_items] = (Conflict) { .effective = true };
        return &a[s->n_items++];
}

/* Adds a conflict with copies of the strings; conditions are copied too. */
int conflict_add(ConflictSet *s, ConflictSource source, const char *path, unsigned line, unsigned tunable,
                        const char *value, const RuleToken *conds, size_t n_conds, const char *match,
                        const char *advice, Conflict **ret) {
        Conflict *c = conflict_push(s);

        if (!c)
                return -ENOMEM;
        c->source = source;
        c->line = line;
        c->tunable = tunable;
        c->path = strdup(path);
        c->value = strdup(value);
        c->match = match ? strdup(match) : NULL;
        c->advice = strdup(advice);
        if (!c->path || !c->value || (match && !c->match) || !c->advice)
                return -ENOMEM;
        for (size_t i = 0; i < n_conds; i++)
                if (tokens_push(&c->conditions, &c->n_conditions, &conds[i]) < 0)
                        return -ENOMEM;
        if (ret)
                *ret = c;
        return 0;
}

int conflict_warn(ConflictSet *s, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        m = vstrdupf(fmt, ap);
        va_end(ap);
        return m ? strv_push(&s->warnings, m) : -ENOMEM;
}

static void conflict_done(Conflict *c) {
        free(c->path);
        free(c->value);
        free(c->match);
        free(c->advice);
        rule_tokens_free(c->conditions, c->n_conditions);
}

void conflict_set_done(ConflictSet *s) {
        for (size_t i = 0; i < s->n_items; i++)
                conflict_done(&s->items[i]);
        free(s->items);
        strv_free(s->warnings);
        *s = (ConflictSet) {};
}
