/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The other writers of blkpolicyd's settings, found by reading their
 * files below a root the way each tool reads them:
 *
 *  - udev rules: the rules.d directories in udev's order of precedence
 *    (/etc, /run, /usr/local/lib, /usr/lib, /lib; a file masks every file
 *    of its name in the directories after it, and a link to /dev/null or an
 *    empty file masks without adding rules), ATTR{queue/...}= assignments
 *    and RUN+= programs that echo into queue/ or run blockdev --setra;
 *  - tuned: the profiles named in /etc/tuned/active_profile (and
 *    post_loaded_profile), include= chains merged as tuned's merger does
 *    (tuned/profiles/merger.py: a unit's options override, replace=1
 *    replaces, devices= is taken from the last profile), [disk] elevator=
 *    and readahead=, and [sysfs] keys below /sys/block/<glob>/queue/;
 *  - the GCE guest agent: it writes "none" to queue/scheduler of every
 *    disk with mq/ at each of its starts (setIOScheduler() in
 *    guest-agent's instance_setup.go, the iosched module of
 *    google-guest-agent's core plugin), unconditionally; with
 *    optimize_local_ssd (default true) google_optimize_local_ssd also
 *    sets add_random, nr_requests, rq_affinity and nomerges on local SSDs;
 *  - a kernel elevator= on the command line, which blk-mq ignores;
 *  - sysfsutils, tmpfiles.d and LVM, each in its own file
 *    (conflicts-sysfsd.c, conflicts-tmpfiles.c, conflicts-lvm.c).
 *
 * Nothing here writes anything; paths are reported as the system sees
 * them (without the root). */
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>

#include "conflicts-internal.h"
#include "tunables.h"
#include "util.h"

#define TUNED_INCLUDE_DEPTH 16

static const char *const source_names[_CONFLICT_SOURCE_MAX] = {
        [CONFLICT_UDEV] = "udev",
        [CONFLICT_TUNED] = "tuned",
        [CONFLICT_GCE] = "gce-guest-agent",
        [CONFLICT_CMDLINE] = "kernel-cmdline",
        [CONFLICT_SYSFSD] = "sysfsutils",
        [CONFLICT_TMPFILES] = "tmpfiles",
        [CONFLICT_LVM] = "lvm",
};

static int conflict_source_from_string(const char *s) {
        for (int i = 0; i < _CONFLICT_SOURCE_MAX; i++)
                if (streq(source_names[i], s))
                        return i;
        return -EINVAL;
}

int conflict_writer_match(const char *word, ConflictSource source, unsigned tunable) {
        const char *colon = strchr(word, ':');
        char name[32];
        int src, t = -1;

        if (strscpy(name, sizeof(name), word) < 0 && !colon)
                return -EINVAL;
        if (colon && (size_t) (colon - word) < sizeof(name))
                name[colon - word] = 0;
        src = conflict_source_from_string(name);
        if (colon)
                t = tunable_find_attr(colon + 1);
        if (src < 0 || (colon && t < 0))
                return -EINVAL;
        return src == (int) source && (!colon || t == (int) tunable);
}


const char *conflict_source_to_string(ConflictSource s) {
        return s >= 0 && s < _CONFLICT_SOURCE_MAX ? source_names[s] : NULL;
}

void udev_rule_done(UdevRule *r) {
        rule_tokens_free(r->tokens, r->n_tokens);
        *r = (UdevRule) {};
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

/* ---- udev rule syntax ---- */

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

/* udev patterns: shell globs, with | between alternatives. */
static bool udev_pattern_match(const char *pattern, const char *s) {
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

/* ---- udev ---- */

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

/* ---- tuned ---- */

typedef struct TunedOpt {
        char *key, *value, *path;
        unsigned line;
} TunedOpt;

typedef struct TunedUnit {
        char *name;
        char *type;
        char *devices;          /* NULL: "*" */
        char *devices_path;
        unsigned devices_line;
        bool enabled;
        bool replace;
        bool conditional;       /* devices_udev_regex, cpuinfo_regex or uname_regex */
        char **drop;
        TunedOpt *opts;
        size_t n_opts;
} TunedUnit;

typedef struct TunedProfile {
        TunedUnit *units;
        size_t n_units;
        char **include;         /* [main] include= of the file just parsed */
        unsigned include_line;
} TunedProfile;

static void tuned_unit_done(TunedUnit *u) {
        free(u->name);
        free(u->type);
        free(u->devices);
        free(u->devices_path);
        strv_free(u->drop);
        for (size_t i = 0; i < u->n_opts; i++) {
                free(u->opts[i].key);
                free(u->opts[i].value);
                free(u->opts[i].path);
        }
        free(u->opts);
        *u = (TunedUnit) {};
}

static void tuned_profile_done(TunedProfile *p) {
        for (size_t i = 0; i < p->n_units; i++)
                tuned_unit_done(&p->units[i]);
        free(p->units);
        strv_free(p->include);
        *p = (TunedProfile) {};
}

static TunedUnit *tuned_unit_find(TunedProfile *p, const char *name) {
        for (size_t i = 0; i < p->n_units; i++)
                if (streq(p->units[i].name, name))
                        return &p->units[i];
        return NULL;
}

static int tuned_opt_set(TunedUnit *u, const char *key, const char *value, const char *path, unsigned line) {
        TunedOpt *o = NULL, *a;

        for (size_t i = 0; i < u->n_opts; i++)
                if (streq(u->opts[i].key, key))
                        o = &u->opts[i];
        if (!o) {
                a = realloc(u->opts, (u->n_opts + 1) * sizeof(TunedOpt));
                if (!a)
                        return -ENOMEM;
                u->opts = a;
                o = &a[u->n_opts++];
                *o = (TunedOpt) { .key = strdup(key) };
                if (!o->key)
                        return -ENOMEM;
        }
        free(o->value);
        free(o->path);
        o->value = strdup(value);
        o->path = strdup(path);
        o->line = line;
        return o->value && o->path ? 0 : -ENOMEM;
}

static int set_str(char **dst, const char *v) {
        char *s = v ? strdup(v) : NULL;

        if (v && !s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

/* The keys tuned's Unit pops before the plugin sees the options. */
static int tuned_unit_key(TunedUnit *u, const char *key, const char *value, const char *path, unsigned line) {
        if (streq(key, "type"))
                return set_str(&u->type, value);
        if (streq(key, "enabled") || streq(key, "replace")) {
                /* tuned's Unit: only these spellings are true */
                bool v = strv_contains((char *[]) { (char *) "True", (char *) "true", (char *) "1", NULL }, value);

                if (streq(key, "enabled"))
                        u->enabled = v;
                else
                        u->replace = v;
                return 0;
        }
        if (streq(key, "devices")) {
                u->devices_line = line;
                return set_str(&u->devices, value) < 0 || set_str(&u->devices_path, path) < 0 ? -ENOMEM : 0;
        }
        if (streq(key, "drop")) {
                _cleanup_free_ char *copy = strdup(value);
                char *save = NULL;

                if (!copy)
                        return -ENOMEM;
                for (char *w = strtok_r(copy, ",; \t", &save); w; w = strtok_r(NULL, ",; \t", &save))
                        if (strv_push(&u->drop, w) < 0)
                                return -ENOMEM;
                return 0;
        }
        if (streq(key, "devices_udev_regex") || streq(key, "cpuinfo_regex") || streq(key, "uname_regex")) {
                u->conditional = true;  /* what they select is not known here */
                return 0;
        }
        if (streq(key, "priority") || streq(key, "prepend") || streq(key, "script_pre") || streq(key, "script_post"))
                return 0;
        return tuned_opt_set(u, key, value, path, line);
}

/* Python's configparser as tuned sets it up: [section], key=value,
 * '#' comments (inline ones after white space). */
static int tuned_parse(const char *path, const char *text, TunedProfile *p) {
        TunedUnit *unit = NULL;
        bool in_main = false;
        unsigned lineno = 0;

        for (const char *s = text; *s;) {
                const char *nl = strchr(s, '\n');
                size_t n = nl ? (size_t) (nl - s) : strlen(s);
                _cleanup_free_ char *line = strndup(s, n);
                char *l, *eq, *hash;
                int r = 0;

                s = nl ? nl + 1 : s + n;
                lineno++;
                if (!line)
                        return -ENOMEM;
                for (hash = line; (hash = strchr(hash, '#')); hash++)
                        if (hash == line || hash[-1] == ' ' || hash[-1] == '\t') {
                                *hash = 0;
                                break;
                        }
                l = strstrip(line);
                if (!*l || *l == ';')
                        continue;
                if (*l == '[') {
                        char *end = strchr(l, ']');
                        TunedUnit *a;

                        if (!end)
                                continue;
                        *end = 0;
                        in_main = streq(l + 1, "main");
                        unit = NULL;
                        if (in_main)
                                continue;
                        unit = tuned_unit_find(p, l + 1);
                        if (unit)
                                continue;
                        a = realloc(p->units, (p->n_units + 1) * sizeof(TunedUnit));
                        if (!a)
                                return -ENOMEM;
                        p->units = a;
                        unit = &a[p->n_units++];
                        *unit = (TunedUnit) { .name = strdup(l + 1), .enabled = true };
                        if (!unit->name)
                                return -ENOMEM;
                        continue;
                }
                eq = strchr(l, '=');
                if (!eq)
                        continue;
                *eq = 0;
                l = strstrip(l);
                eq = strstrip(eq + 1);
                if (in_main && streq(l, "include")) {
                        _cleanup_free_ char *copy = strdup(eq);
                        char *save = NULL;

                        if (!copy)
                                return -ENOMEM;
                        p->include = strv_free(p->include);
                        p->include_line = lineno;
                        for (char *w = strtok_r(copy, ",; \t", &save); w; w = strtok_r(NULL, ",; \t", &save))
                                if (strv_push(&p->include, w) < 0)
                                        return -ENOMEM;
                } else if (unit)
                        r = tuned_unit_key(unit, l, eq, path, lineno);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int tuned_unit_copy(const TunedUnit *u, TunedUnit *ret) {
        *ret = (TunedUnit) { .enabled = u->enabled, .replace = u->replace, .conditional = u->conditional,
                             .devices_line = u->devices_line };
        if (set_str(&ret->name, u->name) < 0 || set_str(&ret->type, u->type) < 0 ||
            set_str(&ret->devices, u->devices) < 0 || set_str(&ret->devices_path, u->devices_path) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < u->n_opts; i++)
                if (tuned_opt_set(ret, u->opts[i].key, u->opts[i].value, u->opts[i].path, u->opts[i].line) < 0)
                        return -ENOMEM;
        return 0;
}

/* tuned/profiles/merger.py's _merge_two(): acc is the older profile. */
static int tuned_merge(TunedProfile *acc, const TunedProfile *p) {
        for (size_t i = 0; i < p->n_units; i++) {
                const TunedUnit *u = &p->units[i];
                TunedUnit *old = tuned_unit_find(acc, u->name), *a;

                if (old && !u->replace) {
                        if (set_str(&old->type, u->type) < 0 || set_str(&old->devices, u->devices) < 0 ||
                            set_str(&old->devices_path, u->devices_path) < 0)
                                return -ENOMEM;
                        old->enabled = u->enabled;
                        old->devices_line = u->devices_line;
                        old->conditional = old->conditional || u->conditional;
                        for (char **d = u->drop; d && *d; d++)
                                for (size_t k = 0; k < old->n_opts; k++)
                                        if (streq(old->opts[k].key, *d))
                                                old->opts[k].value[0] = 0;      /* dropped: no value, not written */
                        for (size_t k = 0; k < u->n_opts; k++)
                                if (tuned_opt_set(old, u->opts[k].key, u->opts[k].value, u->opts[k].path,
                                                  u->opts[k].line) < 0)
                                        return -ENOMEM;
                        continue;
                }
                if (old) {
                        tuned_unit_done(old);
                        if (tuned_unit_copy(u, old) < 0)
                                return -ENOMEM;
                        continue;
                }
                a = realloc(acc->units, (acc->n_units + 1) * sizeof(TunedUnit));
                if (!a)
                        return -ENOMEM;
                acc->units = a;
                if (tuned_unit_copy(u, &a[acc->n_units++]) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Profile directories, the one that wins first: tuned >= 2.23 reads
 * /{usr/lib,etc}/tuned/profiles/, older ones /{usr/lib,etc}/tuned/. */
static const char *const tuned_dirs[] = {
        "/etc/tuned/profiles", "/usr/lib/tuned/profiles", "/etc/tuned", "/usr/lib/tuned",
};

static bool tuned_name_is_safe(const char *name) {
        static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";

        return *name && strspn(name, allowed) == strlen(name) &&
               !streq(name, ".") && !streq(name, "..");
}

typedef struct TunedLoad {
        const char *root;
        ConflictSet *set;
        UnitState unit;         /* tuned.service's */
        char **processed;
        TunedProfile acc;
} TunedLoad;

static int tuned_load(TunedLoad *l, char *const *names, unsigned depth);

static int tuned_load_one(TunedLoad *l, const char *name, unsigned depth) {
        bool conditional = name[0] == '-', skipped = false;
        _cleanup_(tuned_profile_done) TunedProfile p = {};
        _cleanup_free_ char *text = NULL, *path = NULL;
        int r = -ENOENT;

        if (conditional)
                name++;
        if (!tuned_name_is_safe(name))
                return conflict_warn(l->set, "tuned profile name '%s' is not one tuned loads, skipped", name);
        /* as tuned's Locator.get_config(): a file already loaded is passed
         * over, so /etc/tuned/profiles/X can include=X to extend the shipped X */
        for (size_t i = 0; i < ELEMENTSOF(tuned_dirs); i++) {
                path = mfree(path);
                if (asprintf(&path, "%s/%s/tuned.conf", tuned_dirs[i], name) < 0) {
                        path = NULL;
                        return -ENOMEM;
                }
                if (strv_contains(l->processed, path)) {
                        skipped = true;
                        continue;
                }
                r = conflicts_read_file(l->root, path, &text);
                if (r == -ENODATA)
                        r = 0;          /* empty: loaded, sets nothing */
                if (r != -ENOENT && r != -ENOTDIR)
                        break;
        }
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT || r == -ENOTDIR)
                return conditional || skipped ? 0 : conflict_warn(l->set, "tuned profile '%s' not found", name);
        if (r < 0)
                return conflict_warn(l->set, "%s: cannot be read (%s), skipped", path, strerror(-r));
        if (strv_push(&l->processed, path) < 0)
                return -ENOMEM;
        r = tuned_parse(path, text ?: "", &p);
        if (r < 0)
                return r;
        /* parents first, then this profile over them, as tuned's loader does */
        if (p.include) {
                if (depth >= TUNED_INCLUDE_DEPTH)
                        return conflict_warn(l->set, "%s:%u: includes nest too deep, stopped", path, p.include_line);
                r = tuned_load(l, p.include, depth + 1);
                if (r < 0)
                        return r;
        }
        return tuned_merge(&l->acc, &p);
}

static int tuned_load(TunedLoad *l, char *const *names, unsigned depth) {
        for (char *const *n = names; n && *n; n++) {
                int r;

                if (strstr(*n, "${"))
                        r = conflict_warn(l->set, "tuned include '%s' uses a variable, not followed", *n);
                else
                        r = tuned_load_one(l, *n, depth);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* readahead=[>]N[ s]: KiB, or 512-byte sectors with the s suffix
 * (plugin_disk.py's _parse_ra()). */
static void tuned_readahead_kb(const char *value, char *buf, size_t size) {
        const char *v = value + (value[0] == '>');
        char *end;
        long long n;

        errno = 0;
        n = strtoll(v, &end, 10);
        if (errno || end == v) {
                (void) strscpy(buf, size, value);
                return;
        }
        end += strspn(end, " \t");
        if (*end == 's')
                n /= 2;
        snprintf(buf, size, "%lld", n);
}

/* tuned's own way to take an option out of an included profile is drop=
 * (merger.py); a shipped profile is overridden by one of the same name in
 * /etc that includes it (the loader passes over the file already loaded). */
static bool unit_runs(UnitState s) {
        return s >= UNIT_ENABLED;
}

static char *tuned_advice(const TunedUnit *u, const TunedOpt *o, UnitState unit) {
        _cleanup_free_ char *idle = NULL;
        _cleanup_free_ char *dir = strdup(o->path);
        const char *name;
        char *slash, *a;

        if (!dir)
                return NULL;
        slash = strrchr(dir, '/');
        if (slash)
                *slash = 0;
        slash = strrchr(dir, '/');
        name = slash ? slash + 1 : dir;
        if (!unit_runs(unit) &&
            asprintf(&idle, "tuned.service is %s: it writes nothing until tuned is started; ",
                     unit_state_to_string(unit)) < 0)
                return NULL;
        if (asprintf(&a, "%sadd drop=%s to [%s] of a profile %s in /etc/tuned/profiles/ (/etc/tuned/ before tuned "
                         "2.23) with include=%s, or set devices= there to leave out the disks blkpolicyd manages; "
                         "tuned writes it at each profile load and at each disk's add event (to keep the profile but "
                         "have blkpolicyd's value last at boot, enable blkpolicyd-settle.service)",
                     idle ?: "", o->key, u->name, name, name) < 0)
                return NULL;
        return a;
}

static int tuned_add(TunedLoad *l, const TunedUnit *u, const TunedOpt *o, unsigned tunable, const char *value,
                     const char *glob) {
        RuleToken conds[3];
        _cleanup_free_ char *match = NULL, *advice = tuned_advice(u, o, l->unit);
        size_t n = 0;
        Conflict *c;
        int r;

        if (glob)
                conds[n++] = (RuleToken) { .key = (char *) "KERNEL", .value = (char *) glob, .op = RULE_OP_MATCH };
        else {
                conds[n++] = (RuleToken) { .key = (char *) "TUNED_DEVICES", .value = u->devices ?: (char *) "*",
                                           .op = RULE_OP_MATCH };
                /* the disk plugin takes only disks with removable=0 */
                conds[n++] = (RuleToken) { .key = (char *) "ATTR", .attr = (char *) "removable",
                                           .value = (char *) "0", .op = RULE_OP_MATCH };
        }
        if (glob)
                r = asprintf(&match, "/sys/block/%s", glob);
        else
                r = asprintf(&match, "[%s] devices=%s", u->name, u->devices ?: "*");
        if (r < 0)
                return match = NULL, -ENOMEM;
        if (!advice)
                return -ENOMEM;
        r = conflict_add(l->set, CONFLICT_TUNED, o->path, o->line, tunable, value, conds, n, match, advice, &c);
        if (r < 0)
                return r;
        c->maybe = u->conditional;
        c->dormant = !unit_runs(l->unit);
        return 0;
}

/* [sysfs] /sys/block/<glob>/queue/<attr> = value */
static int tuned_add_sysfs(TunedLoad *l, const TunedUnit *u, const TunedOpt *o) {
        const char *k = o->key, *q;
        _cleanup_free_ char *glob = NULL;
        int t;

        if (!startswith(k, "/sys/block/"))
                return 0;
        k += strlen("/sys/block/");
        q = strstr(k, "/queue/");
        if (!q)
                return 0;
        t = tunable_find_attr(q + strlen("/queue/"));
        if (t < 0)
                return 0;
        glob = strndup(k, (size_t) (q - k));
        if (!glob)
                return -ENOMEM;
        return tuned_add(l, u, o, (unsigned) t, o->value, glob);
}

static int tuned_emit(TunedLoad *l) {
        for (size_t i = 0; i < l->acc.n_units; i++) {
                const TunedUnit *u = &l->acc.units[i];
                const char *type = u->type ?: u->name;

                if (!u->enabled)
                        continue;
                for (size_t k = 0; k < u->n_opts; k++) {
                        const TunedOpt *o = &u->opts[k];
                        char ra[32];
                        int r = 0;

                        if (!o->value[0])
                                continue;
                        if (streq(type, "disk") && streq(o->key, "elevator"))
                                r = tuned_add(l, u, o, TUNABLE_SCHEDULER, o->value, NULL);
                        else if (streq(type, "disk") && streq(o->key, "readahead")) {
                                tuned_readahead_kb(o->value, ra, sizeof(ra));
                                r = tuned_add(l, u, o, (unsigned) tunable_find_attr("read_ahead_kb"), ra, NULL);
                        } else if (streq(type, "disk") && streq(o->key, "readahead_multiply")) {
                                snprintf(ra, sizeof(ra), "x%s", o->value);
                                r = tuned_add(l, u, o, (unsigned) tunable_find_attr("read_ahead_kb"), ra, NULL);
                        } else if (streq(type, "sysfs"))
                                r = tuned_add_sysfs(l, u, o);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* Words of a small file, or NULL. */
static int read_words(const char *root, const char *path, char ***ret) {
        _cleanup_free_ char *text = NULL;
        int r = conflicts_read_file(root, path, &text);

        if (r == -ENOENT || r == -ENODATA || r == -ENOTDIR) {
                *ret = NULL;
                return 0;
        }
        if (r < 0)
                return r;
        return strv_split(text, ret);
}

int conflicts_scan_tuned(const char *root, ConflictSet *s) {
        _cleanup_strv_free_ char **names = NULL, **post = NULL;
        TunedLoad l = { .root = root, .set = s };
        int r;

        r = read_words(root, "/etc/tuned/active_profile", &names);
        if (r == 0)
                r = read_words(root, "/etc/tuned/post_loaded_profile", &post);
        if (r < 0)
                return r == -ENOMEM ? r : conflict_warn(s, "/etc/tuned/active_profile: cannot be read (%s)", strerror(-r));
        for (char **p = post; p && *p; p++)
                if (strv_push(&names, *p) < 0)
                        return -ENOMEM;
        if (!names)
                return 0;
        l.unit = conflicts_unit_state(root, "tuned.service");
        r = tuned_load(&l, names, 0);
        if (r >= 0)
                r = tuned_emit(&l);
        tuned_profile_done(&l.acc);
        strv_free(l.processed);
        return r;
}

/* ---- the GCE guest agent ---- */

static const char *const gce_units[] = {
        "/etc/systemd/system/google-guest-agent.service",
        "/usr/lib/systemd/system/google-guest-agent.service",
        "/lib/systemd/system/google-guest-agent.service",
};

/* The agent's config, later files override earlier ones (cfg.go's
 * dataSources()); optimize_local_ssd defaults to true. */
static bool gce_optimize_local_ssd(const char *root) {
        static const char *const files[] = {
                "/etc/default/instance_configs.cfg",
                "/etc/default/instance_configs.cfg.distro",
                "/etc/default/instance_configs.cfg.template",
        };
        bool on = true;

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *text = NULL;
                bool in_setup = false;
                char *save = NULL;

                if (conflicts_read_file(root, files[i], &text) < 0)
                        continue;
                for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                        char *eq, *k = strstrip(l);

                        if (*k == '[')
                                in_setup = strncasecmp(k, "[InstanceSetup]", 15) == 0;
                        else if (in_setup && (eq = strchr(k, '='))) {
                                *eq = 0;
                                if (strcasecmp(strstrip(k), "optimize_local_ssd") == 0)
                                        on = parse_boolean(strstrip(eq + 1)) != 0;
                        }
                }
        }
        return on;
}

/* Why not order blkpolicyd.service after the agent: blkpolicyd runs
 * before sysinit.target and the agent, like every service with default
 * dependencies, after it, so After=google-guest-agent.service is a cycle
 * that systemd breaks by dropping blkpolicyd's start. The settle unit is
 * an ordinary service, After= the late writers. */
#define GCE_ADVICE                                                                                                  \
        "the agent writes none to every blk-mq disk at each of its starts and has no option to stop it: enable "    \
        "blkpolicyd-settle.service (systemctl enable blkpolicyd-settle.service), which runs after the agent and "   \
        "tuned and has blkpolicyd write its settings again, and set on_drift=reapply in blkpolicyd.conf for an "    \
        "agent restarted later; do not order blkpolicyd.service itself after the agent, which makes an ordering "   \
        "cycle through sysinit.target"

static int gce_add_local_ssd(const char *root, ConflictSet *s, bool dormant) {
        static const char *const ssd_attrs[][2] = {
                { "add_random", "0" }, { "nr_requests", "512" }, { "rq_affinity", "0" }, { "nomerges", "1" },
        };

        if (!conflicts_path_exists(root, "/usr/bin/google_optimize_local_ssd") || !gce_optimize_local_ssd(root))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(ssd_attrs); i++) {
                /* the script picks virtio-scsi disks whose model is EphemeralDisk */
                RuleToken model = { .key = (char *) "ATTR", .attr = (char *) "device/model",
                                    .value = (char *) "*EphemeralDisk*", .op = RULE_OP_MATCH };
                Conflict *c;
                int r;

                r = conflict_add(s, CONFLICT_GCE, "/usr/bin/google_optimize_local_ssd", 0,
                                 (unsigned) tunable_find_attr(ssd_attrs[i][0]), ssd_attrs[i][1], &model, 1,
                                 "local SSDs (model EphemeralDisk)",
                                 "set optimize_local_ssd = false in [InstanceSetup] of "
                                 "/etc/default/instance_configs.cfg; the agent runs the script at each of its starts",
                                 &c);
                if (r < 0)
                        return r;
                c->dormant = dormant;
        }
        return 0;
}

int conflicts_scan_gce(const char *root, ConflictSet *s) {
        UnitState state = conflicts_unit_state(root, "google-guest-agent.service");
        _cleanup_free_ char *advice = NULL;
        const char *unit = NULL;
        Conflict *c;
        int r;

        if (state == UNIT_ABSENT || state == UNIT_MASKED)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(gce_units) && !unit; i++)
                if (conflicts_path_exists(root, gce_units[i]))
                        unit = gce_units[i];
        if (!unit)
                unit = "google-guest-agent.service";    /* in /run or /usr/local: found, not named here */
        if (unit_runs(state))
                advice = strdup(GCE_ADVICE);
        else if (asprintf(&advice, "google-guest-agent.service is %s: it writes nothing until it is started; " GCE_ADVICE,
                          unit_state_to_string(state)) < 0)
                advice = NULL;
        if (!advice)
                return -ENOMEM;
        r = conflict_add(s, CONFLICT_GCE, unit, 0, TUNABLE_SCHEDULER, "none", NULL, 0, "every disk with mq/", advice,
                         &c);
        if (r < 0)
                return r;
        c->needs_blk_mq = true;
        c->dormant = !unit_runs(state);
        return gce_add_local_ssd(root, s, c->dormant);
}

/* ---- the kernel command line ---- */

int conflicts_scan_cmdline(const char *proc, ConflictSet *s) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        _cleanup_strv_free_ char **words = NULL;
        Conflict *c;
        int r;

        if (asprintf(&path, "%s/cmdline", proc ?: "/proc") < 0)
                return path = NULL, -ENOMEM;
        r = conflicts_read_file(NULL, path, &text);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        r = strv_split(text, &words);
        if (r < 0)
                return r;
        for (char **w = words; w && *w; w++) {
                if (!startswith(*w, "elevator="))
                        continue;
                r = conflict_add(s, CONFLICT_CMDLINE, "/proc/cmdline", 0, TUNABLE_SCHEDULER, *w + strlen("elevator="),
                                 NULL, 0, NULL,
                                 "remove elevator= from the kernel command line (GRUB_CMDLINE_LINUX in "
                                 "/etc/default/grub, then update-grub): blk-mq kernels ignore it since Linux 5.0",
                                 &c);
                if (r < 0)
                        return r;
                c->effective = false;
        }
        return 0;
}

int conflicts_scan(const Roots *roots, ConflictSet *ret) {
        const char *root = roots_root(roots);
        ConflictSet s = {};
        int r = 0;

        if (root)
                r = conflicts_scan_udev(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_tuned(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_gce(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_sysfsd(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_tmpfiles(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_lvm(root, &s);
        if (r >= 0)
                r = conflicts_scan_cmdline(roots->proc, &s);
        if (r < 0) {
                conflict_set_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

/* ---- matching ---- */

/* tuned's DeviceMatcher: globs separated by white space or commas, '!'
 * negates; no positive rule means every device. */
static bool tuned_devices_match(const char *rules, const char *name) {
        _cleanup_free_ char *copy = strdup(rules);
        bool positive = false, match = false;
        char *save = NULL;

        if (!copy)
                return false;
        for (char *w = strtok_r(copy, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
                if (w[0] == '!') {
                        if (fnmatch(w + 1, name, 0) == 0)
                                return false;
                        continue;
                }
                positive = true;
                match = match || fnmatch(w, name, 0) == 0;
        }
        return !positive || match;
}

static ConflictMatch bool_match(bool m, RuleOp op) {
        return m == (op == RULE_OP_MATCH) ? CONFLICT_MATCH_YES : CONFLICT_MATCH_NO;
}

static ConflictMatch condition_eval(const RuleToken *t, const ConflictDevice *dev) {
        char buf[256];

        if (streq(t->key, "KERNEL"))
                return bool_match(udev_pattern_match(t->value, dev->name), t->op);
        if (streq(t->key, "SUBSYSTEM"))
                return bool_match(udev_pattern_match(t->value, "block"), t->op);
        if (streq(t->key, "ACTION")) {
                /* the rule writes at add and change; remove-only rules never do */
                bool add = udev_pattern_match(t->value, "add"), change = udev_pattern_match(t->value, "change");

                if (t->op == RULE_OP_MATCH)
                        return add || change ? CONFLICT_MATCH_YES : CONFLICT_MATCH_NO;
                return add && change ? CONFLICT_MATCH_NO : CONFLICT_MATCH_YES;
        }
        if (streq(t->key, "ENV") && t->attr && streq(t->attr, "DEVTYPE"))
                return bool_match(udev_pattern_match(t->value, "disk"), t->op);
        if (streq(t->key, "ENV") && t->attr && dev->read_env) {
                int r = dev->read_env(dev->userdata, t->attr, buf, sizeof(buf));

                if (r == -ENOENT)
                        buf[0] = 0;
                if (r >= 0 || r == -ENOENT)
                        return bool_match(udev_pattern_match(t->value, buf), t->op);
        }
        if (streq(t->key, "TUNED_DEVICES"))
                return bool_match(tuned_devices_match(t->value, dev->name), t->op);
        if ((streq(t->key, "KERNELS") || streq(t->key, "SUBSYSTEMS")) && t->op == RULE_OP_MATCH &&
            udev_pattern_match(t->value, streq(t->key, "KERNELS") ? dev->name : "block"))
                return CONFLICT_MATCH_YES;      /* the device itself is the first of the chain */
        if (streq(t->key, "ATTR") && t->attr && dev->read_attr &&
            dev->read_attr(dev->userdata, t->attr, buf, sizeof(buf)) >= 0) {
                /* udev compares with trailing white space removed */
                for (size_t n = strlen(buf); n > 0 && strchr(" \t\n", buf[n - 1]); n--)
                        buf[n - 1] = 0;
                return bool_match(udev_pattern_match(t->value, buf), t->op);
        }
        return CONFLICT_MATCH_MAYBE;
}

ConflictMatch conflict_matches(const Conflict *c, const ConflictDevice *dev, const RuleToken **why) {
        ConflictMatch m = c->maybe ? CONFLICT_MATCH_MAYBE : CONFLICT_MATCH_YES;

        if (why)
                *why = NULL;
        /* a disk without mq/ has no elevator: a scheduler write fails there */
        if (!c->effective || ((c->needs_blk_mq || c->tunable == TUNABLE_SCHEDULER) && !dev->blk_mq))
                return CONFLICT_MATCH_NO;
        for (size_t i = 0; i < c->n_conditions; i++) {
                ConflictMatch k = condition_eval(&c->conditions[i], dev);

                if (k == CONFLICT_MATCH_NO) {
                        if (why)
                                *why = &c->conditions[i];
                        return k;
                }
                if (k == CONFLICT_MATCH_MAYBE && m == CONFLICT_MATCH_YES) {
                        m = k;
                        if (why)
                                *why = &c->conditions[i];
                }
        }
        return m;
}

/* The kernel takes "deadline" for mq-deadline (an alias), and numbers
 * with white space. */
static bool value_equivalent(unsigned tunable, const char *written, const char *live) {
        char *end;
        long long a, b;

        if (streq(written, live))
                return true;
        if (tunable == TUNABLE_SCHEDULER)
                return streq(written, "deadline") && streq(live, "mq-deadline");
        errno = 0;
        a = strtoll(written, &end, 10);
        if (errno || end == written || *strstrip(end))
                return false;
        b = strtoll(live, &end, 10);
        return !errno && end != live && a == b;
}

static const Conflict *attribute(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable, const char *live,
                                 bool dormant) {
        const Conflict *best = NULL;
        ConflictMatch best_m = CONFLICT_MATCH_NO;

        for (size_t i = 0; i < s->n_items; i++) {
                const Conflict *c = &s->items[i];
                ConflictMatch m;

                /* a program that does not run wrote nothing: naming it sent
                 * admins after an agent that was only installed */
                if (c->dormant != dormant || c->tunable != tunable || !value_equivalent(tunable, c->value, live))
                        continue;
                m = conflict_matches(c, dev, NULL);
                /* a sure match over a maybe; then a udev rule (it names the
                 * disk, and fires at every event) over a profile or an agent
                 * that write every disk, the set's order; among udev rules
                 * the last, whose write is the one that stays */
                if (m != CONFLICT_MATCH_NO &&
                    (m > best_m || (m == best_m && c->source == CONFLICT_UDEV && best->source == CONFLICT_UDEV))) {
                        best = c;
                        best_m = m;
                }
        }
        return best;
}

const Conflict *conflicts_attribute(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable,
                                    const char *live) {
        return attribute(s, dev, tunable, live, false);
}

const Conflict *conflicts_attribute_dormant(const ConflictSet *s, const ConflictDevice *dev, unsigned tunable,
                                            const char *live) {
        return attribute(s, dev, tunable, live, true);
}

char *conflict_describe(const Conflict *c) {
        const char *attr = tunables[c->tunable].attr;
        char *s = NULL;
        int r;

        switch (c->source) {
        case CONFLICT_UDEV:
                r = asprintf(&s, "udev rule %s:%u sets queue/%s=%s%s%s%s", c->path, c->line, attr, c->value,
                             c->match ? " (" : "", c->match ?: "", c->match ? ")" : "");
                break;
        case CONFLICT_TUNED:
                r = asprintf(&s, "tuned profile %s:%u sets queue/%s=%s (%s)", c->path, c->line, attr, c->value,
                             c->match ?: "");
                break;
        case CONFLICT_GCE:
                r = asprintf(&s, "the GCE guest agent (%s) sets queue/%s=%s on %s at each start", c->path, attr,
                             c->value, c->match ?: "every disk");
                break;
        case CONFLICT_SYSFSD:
                r = asprintf(&s, "sysfsutils %s:%u sets queue/%s=%s (%s)", c->path, c->line, attr, c->value,
                             c->match ?: "");
                break;
        case CONFLICT_TMPFILES:
                r = asprintf(&s, "tmpfiles.d %s:%u writes queue/%s=%s (%s)", c->path, c->line, attr, c->value,
                             c->match ?: "");
                break;
        case CONFLICT_LVM:
                r = asprintf(&s, "LVM (%s%s%.0u) sets the read-ahead of its logical volumes: %s", c->path,
                             c->line ? ":" : "", c->line, c->value);
                break;
        default:
                r = asprintf(&s, "the kernel command line sets elevator=%s, which blk-mq ignores", c->value);
                break;
        }
        return r < 0 ? NULL : s;
}
