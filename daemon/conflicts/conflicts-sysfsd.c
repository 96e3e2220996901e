/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sysfsutils: /etc/sysfs.conf, then the .conf files of /etc/sysfs.d in the
 * order of their names, as Debian's /etc/init.d/sysfsutils (2.1.1-4) reads them:
 *
 *   - '#' starts a comment anywhere on a line; blank lines are skipped;
 *   - sed rewrites "A B = C" (A and B words without '=' or white space,
 *     either may be empty) to "A B C", then `read -r f1 f2 f3` splits it;
 *     a line without '=' is split as it is;
 *   - "mode ATTR = MODE" and "owner ATTR = USER" change permissions, not
 *     values: not writers;
 *   - f1 and f2 and no f3: f2 is written to every file of the unquoted
 *     glob /sys/f1 ("block/sd*\/queue/scheduler = kyber" sets every sd*);
 *   - anything else (a value with white space, no value) is a syntax
 *     error, and the script stops reading that file there.
 *
 * The script runs once at boot, in the multi-user runlevels (under
 * systemd: sysfsutils.service from systemd-sysv-generator), long after
 * blkpolicyd's first pass: its value is the one that stays. */

#include "conflicts-files.h"
#include "conflicts-sysfsd.h"
#include "tunables.h"

/* Disk globs and names are kernel names: short. */
#define SYSFS_GLOB_MAX 256

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);

        return n >= k && streq(s + n - k, suffix);
}

int conflicts_sysfs_path(const char *rel, char **ret_glob, unsigned *ret_tunable) {
        const char *q = NULL, *attr = NULL, *dev;
        int t;

        if (!startswith(rel, "block/") && !startswith(rel, "class/block/") && !startswith(rel, "devices/"))
                return -ENOENT;
        /* the disk is the component before queue/ (or bdi/, the read-ahead
         * seen from the backing device): the last one, as paths below
         * devices/ may hold "queue" in a parent's name */
        for (const char *p = strstr(rel, "/queue/"); p; p = strstr(p + 1, "/queue/"))
                q = p, attr = p + 1;
        if (!q && ends_with(rel, "/bdi/read_ahead_kb")) {
                q = rel + strlen(rel) - strlen("/bdi/read_ahead_kb");
                attr = q + 1;
        }
        if (!q)
                return -ENOENT;
        t = conflicts_attr_tunable(attr);
        if (t < 0)
                return -ENOENT;
        for (dev = q; dev > rel && dev[-1] != '/'; dev--)
                ;
        /* block/ and class/block/ hold the disks themselves */
        if ((startswith(rel, "block/") && dev != rel + strlen("block/")) ||
            (startswith(rel, "class/block/") && dev != rel + strlen("class/block/")))
                return -ENOENT;
        if (dev == q || (size_t) (q - dev) > SYSFS_GLOB_MAX)
                return -ENOENT;

        *ret_glob = strndup(dev, (size_t) (q - dev));
        if (!*ret_glob)
                return -ENOMEM;
        *ret_tunable = (unsigned) t;
        return 0;
}

static size_t count_words(const char *s, size_t n) {
        size_t words = 0;

        for (size_t i = 0; i < n; i++)
                words += !strchr(" \t", s[i]) && (i == 0 || strchr(" \t", s[i - 1]));
        return words;
}

/* The next word of *p, NUL-terminated in place; NULL at the end. */
static char *next_word(char **p) {
        char *s = *p + strspn(*p, " \t"), *e;

        if (!*s) {
                *p = s;
                return NULL;
        }
        e = s + strcspn(s, " \t");
        if (*e)
                *e++ = 0;
        *p = e;
        return s;
}

/* sed's "^\s*([^=\s]*)\s*([^=\s]*)\s*=\s*(.*)" → "\1 \2 \3" matches when
 * the text before the first '=' is at most two words; then read's split,
 * whose last variable takes the rest of the line. */
static void sysfsd_split(char *line, char **f1, char **f2, char **f3) {
        char *eq = strchr(line, '='), *p = line;

        if (eq && count_words(line, (size_t) (eq - line)) <= 2)
                *eq = ' ';
        *f1 = next_word(&p) ?: (char *) "";
        *f2 = next_word(&p) ?: (char *) "";
        *f3 = strstrip(p);
}

static int sysfsd_add(ConflictSet *s, const char *path, unsigned line, const char *attr, const char *value) {
        _cleanup_free_ char *glob = NULL, *match = NULL;
        unsigned tunable;
        RuleToken kernel;
        int r;

        r = conflicts_sysfs_path(attr, &glob, &tunable);
        if (r == -ENOENT)
                return 0;       /* not a queue setting blkpolicyd manages */
        if (r < 0)
                return r;
        kernel = (RuleToken) { .key = (char *) "KERNEL", .value = glob, .op = RULE_OP_MATCH };
        if (asprintf(&match, "/sys/%s", attr) < 0)
                return match = NULL, -ENOMEM;
        return conflict_add(s, CONFLICT_SYSFSD, path, line, tunable, value, &kernel, 1, match,
                            "remove the line (or exclude= the disk in blkpolicyd.conf); sysfsutils writes it once at "
                            "boot, after blkpolicyd's first pass, so its value stays",
                            NULL);
}

/* One line of a sysfs.conf; > 0 where sysfsutils stops reading it. */
static int sysfsd_line(ConflictSet *s, const char *path, unsigned lineno, char *line) {
        char *hash = strchr(line, '#'), *f1, *f2, *f3;
        int r;

        if (hash)
                *hash = 0;
        if (!*strstrip(line))
                return 0;
        sysfsd_split(line, &f1, &f2, &f3);
        if ((streq(f1, "mode") || streq(f1, "owner")) && *f2 && *f3)
                return 0;       /* permissions, not a value */
        if (*f1 && *f2 && !*f3) {
                r = sysfsd_add(s, path, lineno, f1, f2);
                return r < 0 ? r : 0;
        }
        /* the script's `exit 1` ends its loop over this file */
        r = conflict_warn(s, "%s:%u: syntax error, sysfsutils reads no further lines of it", path, lineno);
        return r < 0 ? r : 1;
}

int conflicts_parse_sysfsd_text(const char *path, const char *text, ConflictSet *s) {
        return conflicts_parse_lines(path, text, sysfsd_line, s);
}

static int sysfsd_scan_file(const char *root, const char *path, ConflictSet *s) {
        _cleanup_free_ char *text = NULL;
        int r = conflicts_read_file(root, path, &text);

        if (r == -ENOENT || r == -ENODATA)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return conflict_warn(s, "%s: cannot be read (%s), skipped", path, strerror(-r));
        return conflicts_parse_sysfsd_text(path, text, s);
}

int conflicts_scan_sysfsd(const char *root, ConflictSet *s) {
        static const char *const dirs[] = { "/etc/sysfs.d" };
        int r = sysfsd_scan_file(root, "/etc/sysfs.conf", s);

        /* then the .conf files of sysfs.d in the shell's glob order (at boot
         * the locale is C), a masked one writing nothing, as for the others */
        return r < 0 ? r : conflicts_scan_files(root, dirs, ELEMENTSOF(dirs), ".conf", conflicts_parse_sysfsd_text, s);
}
