/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tuned: the profiles named in /etc/tuned/active_profile (and
 * post_loaded_profile), include= chains merged as tuned's merger does
 * (tuned/profiles/merger.py: a unit's options override, replace=1
 * replaces, devices= is taken from the last profile), [disk] elevator=
 * and readahead=, and [sysfs] keys below /sys/block/<glob>/queue/. */
#include "conflicts-files.h"
#include "conflicts-tuned.h"
#include "conflicts-units.h"
#include "ini-reader.h"
#include "tunables.h"
#include "util.h"

#define TUNED_INCLUDE_DEPTH 16

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

/* Profiles are read with inih (the shared reader, ini-reader.h), as
 * tuned's loader reads them with Python's configparser: [section],
 * key=value, '#' and ';' comment lines, and '#' an inline comment only
 * after white space (inline_comment_prefixes=('#',)): "elevator=bfq#x" is
 * "bfq#x". A section given twice is one unit, of a key given twice the
 * last value counts; [main] include= names the parents.
 *
 * Debian's inih is built with the defaults, which would read some lines
 * otherwise than blkpolicyd always has: ':' also separates a key, ';'
 * after white space starts a comment, an indented line continues the
 * value before it, a line without '=' is an error, a section name has 50
 * bytes at most and a line 200, a UTF-8 BOM starting the file is dropped,
 * and no handler runs for a section line. So a small pre-pass
 * (tuned_rewrite) hands inih each line in the form blkpolicyd reads it,
 * "[name]" or "key=value", stripped, and a blank line for what it skips
 * (a line without '=' or a '[' without ']', continuations among them); a
 * section line opens its unit there, since an empty [unit] counts in the
 * merge; and a name or value inih would not carry as it is goes in the
 * parse's stash, inih getting "\1<n>" in its place (tuned_token). */
typedef struct TunedParse {
        TunedProfile *profile;
        const char *path;
        IniReader reader;
        char **stash;
        int error;
} TunedParse;

/* inih's section name buffer, and room to spare. */
#define TUNED_INI_SECTION_MAX 48

static bool tuned_token_carries(const char *s, bool section) {
        if (section && (!*s || strlen(s) >= TUNED_INI_SECTION_MAX))
                return false;
        return !strpbrk(s, ":;\1") && !startswith(s, "\xef\xbb\xbf");
}

/* s, or "\1<n>" in ref for s kept in the stash; NULL on ENOMEM. */
static const char *tuned_token(TunedParse *t, const char *s, bool section, bool stash, char ref[static 24]) {
        if (!stash && tuned_token_carries(s, section))
                return s;
        snprintf(ref, 24, "\1%zu", strv_length(t->stash));
        return strv_push(&t->stash, s) < 0 ? NULL : ref;
}

static const char *tuned_untoken(const TunedParse *t, const char *s) {
        return s[0] == '\1' ? t->stash[strtoul(s + 1, NULL, 10)] : s;
}

static int tuned_open_unit(TunedProfile *p, const char *name) {
        TunedUnit *a;

        if (streq(name, "main") || tuned_unit_find(p, name))
                return 0;
        a = realloc(p->units, (p->n_units + 1) * sizeof(TunedUnit));
        if (!a)
                return -ENOMEM;
        p->units = a;
        a[p->n_units] = (TunedUnit) { .name = strdup(name), .enabled = true };
        return a[p->n_units++].name ? 0 : -ENOMEM;
}

static void tuned_rewrite_line(TunedParse *t, char *line, char *buf, size_t size) {
        char *l = strstrip(line), *end, *key, *value;
        char kref[24], vref[24];
        const char *k, *v;

        if (!*l || *l == '#' || *l == ';')
                return;
        if (*l == '[') {
                end = strchr(l, ']');
                if (!end)
                        return;
                *end = 0;
                k = tuned_token(t, l + 1, true, false, kref);
                if (!k || tuned_open_unit(t->profile, l + 1) < 0) {
                        t->error = -ENOMEM;
                        return;
                }
                snprintf(buf, size, "[%s]", k);
                return;
        }
        end = strchr(l, '=');
        if (!end)
                return;
        *end = 0;
        key = strstrip(l);
        value = strstrip(end + 1);
        k = tuned_token(t, key, false, false, kref);
        v = tuned_token(t, value, false, false, vref);
        if (k && v && strlen(k) + strlen(v) + 2 > size)
                v = tuned_token(t, value, false, true, vref);
        if (k && v && strlen(k) + strlen(v) + 2 > size)
                k = tuned_token(t, key, false, true, kref);
        if (!k || !v) {
                t->error = -ENOMEM;
                return;
        }
        snprintf(buf, size, "%s=%s", k, v);
}

static void tuned_rewrite(char *line, char *buf, size_t size, void *userdata) {
        TunedParse *t = userdata;

        buf[0] = 0;
        if (t->error >= 0)
                tuned_rewrite_line(t, line, buf, size);
}

static int tuned_include(TunedProfile *p, const char *value, unsigned line) {
        _cleanup_free_ char *copy = strdup(value);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        p->include = strv_free(p->include);
        p->include_line = line;
        for (char *w = strtok_r(copy, ",; \t", &save); w; w = strtok_r(NULL, ",; \t", &save))
                if (strv_push(&p->include, w) < 0)
                        return -ENOMEM;
        return 0;
}

static int tuned_handler(void *userdata, const char *section, const char *key, const char *value) {
        TunedParse *t = userdata;
        TunedUnit *u;
        int r = 0;

        if (t->error < 0 || !*section)
                return 1;       /* before the first section: not an option of any unit */
        section = tuned_untoken(t, section);
        key = tuned_untoken(t, key);
        value = tuned_untoken(t, value);
        if (streq(section, "main")) {
                if (streq(key, "include"))
                        r = tuned_include(t->profile, value, t->reader.line);
        } else if ((u = tuned_unit_find(t->profile, section)))
                r = tuned_unit_key(u, key, value, t->path, t->reader.line);
        if (r < 0)
                t->error = r;
        return 1;
}

static int tuned_parse(const char *path, const char *text, TunedProfile *p) {
        TunedParse t = { .profile = p, .path = path };
        int r;

        t.reader = (IniReader) { .text = text, .comments = INI_COMMENTS_TUNED, .rewrite = tuned_rewrite,
                                 .userdata = &t };
        r = ini_reader_parse(&t.reader, tuned_handler, &t);
        strv_free(t.stash);
        /* inih finds nothing wrong in what the pre-pass hands it */
        return t.error < 0 ? t.error : r < 0 ? r : 0;
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
        if (!unit_state_runs(unit) &&
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
        c->dormant = !unit_state_runs(l->unit);
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
