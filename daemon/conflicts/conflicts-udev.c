/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* udev rules: the rules.d directories in udev's order of precedence
 * (/etc, /run, /usr/local/lib, /usr/lib, /lib; a file masks every file of
 * its name in the directories after it, and a link to /dev/null or an
 * empty file masks without adding rules), ATTR{queue/...}= assignments
 * and RUN+= programs that echo into queue/ or run blockdev --setra. */
#include <fnmatch.h>
#include <limits.h>

#include "conflicts-files.h"
#include "conflicts-udev.h"
#include "tunables.h"
#include "util.h"

/* ---- the rule syntax ---- */

void udev_rule_done(UdevRule *r) {
        rule_tokens_free(r->tokens, r->n_tokens);
        *r = (UdevRule) {};
}


static const struct {
        const char *text;
        RuleOp op;
} rule_ops[] = {
        { "==", RULE_OP_MATCH },  { "!=", RULE_OP_NOMATCH },    { "+=", RULE_OP_ADD },
        { "-=", RULE_OP_REMOVE }, { ":=", RULE_OP_ASSIGN_FINAL }, { "=", RULE_OP_ASSIGN },
};

static const char *rule_op_text(RuleOp op) {
        for (size_t i = 0; i < ELEMENTSOF(rule_ops); i++)
                if (rule_ops[i].op == op)
                        return rule_ops[i].text;
        return "?";
}

/* "..." with \" and \\ as udev unescapes them; *p is at the opening quote. */
static int parse_quoted(const char **p, char **ret) {
        const char *s = *p + 1;
        char *v = malloc(strlen(s) + 1), *o = v;

        if (!v)
                return -ENOMEM;
        for (; *s && *s != '"'; s++) {
                if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
                        s++;
                *o++ = *s;
        }
        if (*s != '"') {
                free(v);
                return -EINVAL;
        }
        *o = 0;
        *p = s + 1;
        *ret = v;
        return 0;
}

static int parse_token(const char **p, RuleToken *t) {
        const char *s = *p, *k = s;
        size_t i;
        int r;

        while (*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9'))
                s++;
        if (s == k)
                return -EINVAL;
        t->key = strndup(k, (size_t) (s - k));
        if (!t->key)
                return -ENOMEM;
        if (*s == '{') {
                const char *end = strchr(s, '}');

                if (!end)
                        return -EINVAL;
                t->attr = strndup(s + 1, (size_t) (end - s - 1));
                if (!t->attr)
                        return -ENOMEM;
                s = end + 1;
        }
        s += strspn(s, " \t");
        for (i = 0; i < ELEMENTSOF(rule_ops); i++)
                if (startswith(s, rule_ops[i].text))
                        break;
        if (i == ELEMENTSOF(rule_ops))
                return -EINVAL;
        t->op = rule_ops[i].op;
        s += strlen(rule_ops[i].text);
        s += strspn(s, " \t");
        if (*s == 'e' && s[1] == '"')
                s++;    /* e"..." (C escapes): kept as written, good enough to report */
        if (*s != '"')
                return -EINVAL;
        r = parse_quoted(&s, &t->value);
        if (r < 0)
                return r;
        *p = s;
        return 0;
}

int udev_rule_parse(const char *line, UdevRule *ret) {
        UdevRule rule = {};
        const char *p = line;

        for (;;) {
                RuleToken t = {}, *a;
                int r;

                p += strspn(p, " \t,");
                if (!*p || *p == '\n')
                        break;
                r = parse_token(&p, &t);
                if (r >= 0) {
                        a = realloc(rule.tokens, (rule.n_tokens + 1) * sizeof(RuleToken));
                        if (!a)
                                r = -ENOMEM;
                        else {
                                rule.tokens = a;
                                rule.tokens[rule.n_tokens++] = t;
                        }
                }
                if (r < 0) {
                        rule_token_done(&t);
                        udev_rule_done(&rule);
                        return r;
                }
                /* tokens are separated: "KERNEL=="a"ATTR..." is an error in udev too */
                if (*p && !strchr(" \t,\n", *p)) {
                        udev_rule_done(&rule);
                        return -EINVAL;
                }
        }
        *ret = rule;
        return 0;
}

static bool rule_is_condition(const RuleToken *t) {
        return t->op == RULE_OP_MATCH || t->op == RULE_OP_NOMATCH;
}

bool udev_pattern_match(const char *pattern, const char *s) {
        _cleanup_free_ char *copy = strdup(pattern);
        char *save = NULL;

        if (!copy)
                return false;
        if (!*copy)
                return !*s;
        for (char *alt = strtok_r(copy, "|", &save); alt; alt = strtok_r(NULL, "|", &save))
                if (fnmatch(alt, s, 0) == 0)
                        return true;
        return false;
}

int rule_token_format(const RuleToken *t, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s%s%s%s%s\"%s\"", t->key, t->attr ? "{" : "", t->attr ?: "", t->attr ? "}" : "",
                         rule_op_text(t->op), t->value);

        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

/* The rule's device match as people write it: its KERNEL conditions, else
 * all of its conditions. */
static char *rule_match_text(const RuleToken *conds, size_t n) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        bool kernel = false, first = true;

        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++)
                kernel = kernel || streq(conds[i].key, "KERNEL");
        for (size_t i = 0; i < n; i++) {
                char buf[512];

                if ((kernel && !streq(conds[i].key, "KERNEL")) || rule_token_format(&conds[i], buf, sizeof(buf)) < 0)
                        continue;
                fprintf(f, "%s%s", first ? "" : ", ", buf);
                first = false;
        }
        if (fclose(f) != 0)
                return mfree(text);
        return text;
}

/* ---- the rules files ---- */


/* Where udev reads rules from, most important first (systemd's
 * CONF_PATHS("udev/rules.d"), plus /lib for split-/usr systems). */
static const char *const udev_dirs[] = {
        "/etc/udev/rules.d", "/run/udev/rules.d", "/usr/local/lib/udev/rules.d", "/usr/lib/udev/rules.d",
        "/lib/udev/rules.d",
};

static const char *udev_advice(const char *path) {
        if (startswith(path, "/etc/"))
                return "remove the assignment from this file (or exclude= the disk in blkpolicyd.conf); udev writes it "
                       "again at every add or change event of the disk";
        if (startswith(path, "/run/"))
                return "this file is generated at run time: find the program that writes it, or mask it with a file of "
                       "the same name in /etc/udev/rules.d; udev writes the value at every add or change event";
        return "override the file: copy it to /etc/udev/rules.d/ under the same name without the assignment (or link "
               "that name to /dev/null to drop it all); udev writes the value at every add or change event";
}

/* A GOTO="label" line: until the label, the rules after it run only when
 * its condition did not hold. One condition negates exactly; more (or
 * none but an unconditional jump) cannot be expressed as conditions. */
typedef struct Guard {
        char *label;
        RuleToken cond;         /* negated; key NULL when not expressible */
        bool skip;              /* an unconditional GOTO: the rules up to the label never run */
} Guard;

typedef struct UdevFile {
        ConflictSet *set;
        const char *path;
        Guard *guards;
        size_t n_guards;
} UdevFile;

static void guards_free(Guard *g, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(g[i].label);
                rule_token_done(&g[i].cond);
        }
        free(g);
}

static const RuleToken *rule_find(const UdevRule *r, const char *key, bool condition) {
        for (size_t i = 0; i < r->n_tokens; i++)
                if (streq(r->tokens[i].key, key) && rule_is_condition(&r->tokens[i]) == condition)
                        return &r->tokens[i];
        return NULL;
}

static int udev_note_labels_and_gotos(UdevFile *u, const UdevRule *rule) {
        const RuleToken *label = rule_find(rule, "LABEL", false), *go = rule_find(rule, "GOTO", false);
        const RuleToken *only = NULL;
        size_t n_conds = 0;
        Guard *a;

        /* a label ends the guards that jump to it */
        for (size_t i = 0; label && i < u->n_guards;) {
                if (streq(u->guards[i].label, label->value)) {
                        free(u->guards[i].label);
                        rule_token_done(&u->guards[i].cond);
                        u->guards[i] = u->guards[--u->n_guards];
                } else
                        i++;
        }
        if (!go)
                return 0;
        for (size_t i = 0; i < rule->n_tokens; i++)
                if (rule_is_condition(&rule->tokens[i])) {
                        only = &rule->tokens[i];
                        n_conds++;
                }
        a = realloc(u->guards, (u->n_guards + 1) * sizeof(Guard));
        if (!a)
                return -ENOMEM;
        u->guards = a;
        a[u->n_guards] = (Guard) { .label = strdup(go->value), .skip = n_conds == 0 };
        if (!a[u->n_guards].label)
                return -ENOMEM;
        if (n_conds == 1) {
                if (rule_token_copy(only, &a[u->n_guards].cond) < 0) {
                        free(a[u->n_guards].label);
                        return -ENOMEM;
                }
                a[u->n_guards].cond.op = only->op == RULE_OP_MATCH ? RULE_OP_NOMATCH : RULE_OP_MATCH;
        }
        u->n_guards++;
        return 0;
}

/* RUN+="/sbin/blockdev --setra 8192 /dev/%k": BLKRASET and BLKFRASET set
 * the same read-ahead, in 512-byte sectors, which the kernel keeps in whole
 * pages (block/ioctl.c: ra_pages = arg * 512 / PAGE_SIZE). The value is
 * read_ahead_kb as the kernel then shows it, "?" when not a number. */
static int udev_run_blockdev(const char *program, char *value, size_t size) {
        long long page = sysconf(_SC_PAGESIZE), sectors;
        const char *o;
        char *end;

        if (!strstr(program, "blockdev") || page < 1024)
                return 0;
        for (o = strstr(program, "--set"); o; o = strstr(o + 1, "--set")) {
                const char *a = o + strlen("--set");

                if (startswith(a, "ra "))
                        a += strlen("ra ");
                else if (startswith(a, "fra "))
                        a += strlen("fra ");
                else
                        continue;
                a += strspn(a, " \t");
                errno = 0;
                sectors = strtoll(a, &end, 10);
                if (errno || end == a || sectors < 0 || sectors > LLONG_MAX / 512)
                        (void) strscpy(value, size, "?");
                else
                        snprintf(value, size, "%lld", sectors * 512 / page * (page / 1024));
                return 1;
        }
        return 0;
}

/* RUN+="/bin/sh -c 'echo none > /sys/block/%k/queue/scheduler'": old
 * guides set schedulers so. The value is the word after echo, if any. */
static int udev_run_writes(const char *program, unsigned *ret_tunable, char *value, size_t size) {
        const char *q = strstr(program, "queue/"), *e;
        char attr[64];
        size_t n;
        int t;

        if (udev_run_blockdev(program, value, size) > 0) {
                *ret_tunable = (unsigned) tunable_find_attr("read_ahead_kb");
                return 1;
        }
        if (!q)
                return 0;
        q += strlen("queue/");
        n = strspn(q, "abcdefghijklmnopqrstuvwxyz_/");
        if (n == 0 || n >= sizeof(attr))
                return 0;
        memcpy(attr, q, n);
        attr[n] = 0;
        t = tunable_find_attr(attr);
        if (t < 0)
                return 0;
        *ret_tunable = (unsigned) t;
        e = strstr(program, "echo ");
        if (e && e < q) {
                e += strlen("echo ");
                e += strspn(e, " \"'");
                n = strcspn(e, " \"'>");
                if (n > 0 && n < size) {
                        memcpy(value, e, n);
                        value[n] = 0;
                        return 1;
                }
        }
        (void) strscpy(value, size, "?");
        return 1;
}

static int udev_add_conflict(UdevFile *u, const UdevRule *rule, unsigned line, unsigned tunable, const char *value) {
        _cleanup_free_ RuleToken *conds = NULL;
        _cleanup_free_ char *match = NULL;
        size_t n = 0;
        bool maybe = false;
        Conflict *c;
        int r;

        conds = calloc(rule->n_tokens + u->n_guards, sizeof(RuleToken));
        if (!conds)
                return -ENOMEM;
        for (size_t i = 0; i < u->n_guards; i++) {
                if (u->guards[i].skip)
                        return 0;       /* dead: jumped over unconditionally */
                if (u->guards[i].cond.key)
                        conds[n++] = u->guards[i].cond;
                else
                        maybe = true;
        }
        for (size_t i = 0; i < rule->n_tokens; i++)
                if (rule_is_condition(&rule->tokens[i]))
                        conds[n++] = rule->tokens[i];
        match = rule_match_text(conds, n);
        if (!match)
                return -ENOMEM;
        /* the tokens are borrowed: conflict_add() copies them */
        r = conflict_add(u->set, CONFLICT_UDEV, u->path, line, tunable, value, conds, n, *match ? match : NULL,
                         udev_advice(u->path), &c);
        if (r < 0)
                return r;
        c->maybe = maybe;
        return 0;
}

static int udev_process_rule(UdevFile *u, const UdevRule *rule, unsigned line) {
        int r = 0;

        for (size_t i = 0; i < rule->n_tokens && r >= 0; i++) {
                const RuleToken *t = &rule->tokens[i];
                char value[64];
                unsigned tunable;
                int k;

                if (streq(t->key, "ATTR") && t->attr &&
                    (t->op == RULE_OP_ASSIGN || t->op == RULE_OP_ASSIGN_FINAL)) {
                        k = conflicts_attr_tunable(t->attr);
                        if (k >= 0)
                                r = udev_add_conflict(u, rule, line, (unsigned) k, t->value);
                } else if (streq(t->key, "RUN") && t->op != RULE_OP_MATCH && t->op != RULE_OP_NOMATCH &&
                           udev_run_writes(t->value, &tunable, value, sizeof(value)) > 0)
                        r = udev_add_conflict(u, rule, line, tunable, value);
        }
        if (r < 0)
                return r;
        return udev_note_labels_and_gotos(u, rule);
}

int conflicts_parse_udev_text(const char *path, const char *text, ConflictSet *s) {
        UdevFile u = { .set = s, .path = path };
        _cleanup_free_ char *logical = NULL;
        size_t len = 0;
        unsigned lineno = 0, first = 0;
        int r = 0;

        if (!text)
                return -EINVAL;
        /* a logical line (continuations joined) is never longer than the text */
        logical = malloc(strlen(text) + 1);
        if (!logical)
                return -ENOMEM;
        for (const char *p = text; *p && r >= 0;) {
                const char *nl = strchr(p, '\n');
                size_t n = nl ? (size_t) (nl - p) : strlen(p);
                bool cont;

                lineno++;
                if (len == 0) {
                        first = lineno;
                        /* comments are whole lines: '#' inside a value is data */
                        if (p[strspn(p, " \t")] == '#')
                                goto next;
                }
                cont = n > 0 && p[n - 1] == '\\';
                memcpy(logical + len, p, cont ? n - 1 : n);
                len += cont ? n - 1 : n;
                logical[len] = 0;
                if (!cont || !nl) {
                        UdevRule rule;
                        int k = udev_rule_parse(logical, &rule);

                        if (k == -ENOMEM)
                                r = k;
                        else if (k < 0)
                                r = conflict_warn(s, "%s:%u: not a valid udev rule, skipped", path, first);
                        else {
                                r = udev_process_rule(&u, &rule, first);
                                udev_rule_done(&rule);
                        }
                        len = 0;
                }
        next:
                p = nl ? nl + 1 : p + n;
        }
        guards_free(u.guards, u.n_guards);
        return r;
}

int conflicts_scan_udev(const char *root, ConflictSet *s) {
        return conflicts_scan_files(root, udev_dirs, ELEMENTSOF(udev_dirs), ".rules", conflicts_parse_udev_text, s);
}
