/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* systemd-tmpfiles' w and w+ lines below /sys (tmpfiles.d(5)):
 *
 *   Type Path Mode User Group Age Argument
 *
 * *.conf in /etc/tmpfiles.d, /run/tmpfiles.d, /usr/local/lib/tmpfiles.d,
 * /usr/lib/tmpfiles.d (and /lib/tmpfiles.d without merged /usr), a file
 * masking the files of its name in the directories after it, a link to
 * /dev/null masking without lines. The first six fields are words
 * (quotes removed, C escapes resolved, as systemd's extract_first_word()
 * with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE); the argument is the rest of the
 * line, "-" or nothing meaning none. A w path may be a glob. Modifiers
 * after the type: '+' (append: for a sysfs file the same write), '!' (at
 * boot only), '-' (errors ignored), '=', '~' (the argument is base64),
 * '^' (it names a credential), '$' and '?'.
 *
 * systemd-tmpfiles-setup.service writes them at boot; it and blkpolicyd
 * both run before sysinit.target and neither is ordered after the other,
 * so which write stays is a race. */
#include <ctype.h>

#include "conflicts-files.h"
#include "conflicts-sysfsd.h"
#include "conflicts-tmpfiles.h"
#include "tunables.h"

static const char *const tmpfiles_dirs[] = {
        "/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/local/lib/tmpfiles.d", "/usr/lib/tmpfiles.d", "/lib/tmpfiles.d",
};

#define TMPFILES_FIELDS 6

static char unescape(char c) {
        switch (c) {
        case 'n':
                return '\n';
        case 't':
                return '\t';
        default:
                return c;
        }
}

/* One word of *p into out (at least strlen(*p) + 1 bytes): white space
 * separates, '"' and '\'' quote, '\\' escapes. -EINVAL for an open quote;
 * 0 at the end of the line. */
static int tmpfiles_word(const char **p, char *out) {
        const char *s = *p + strspn(*p, " \t");
        char quote = 0, *o = out;

        if (!*s) {
                *p = s;
                return 0;
        }
        for (; *s && (quote || !strchr(" \t", *s)); s++) {
                if (*s == '\\' && s[1])
                        *o++ = unescape(*++s);
                else if (quote && *s == quote)
                        quote = 0;
                else if (!quote && (*s == '"' || *s == '\''))
                        quote = *s;
                else
                        *o++ = *s;
        }
        if (quote)
                return -EINVAL;
        *o = 0;
        *p = s;
        return 1;
}

static const char *tmpfiles_advice(const char *path) {
        if (startswith(path, "/etc/"))
                return "remove the line from this file (or exclude= the disk in blkpolicyd.conf); "
                       "systemd-tmpfiles-setup.service writes it at boot, unordered with blkpolicyd's first pass "
                       "(blkpolicyd-settle.service runs after it)";
        return "put a file of the same name in /etc/tmpfiles.d without the line (or a link to /dev/null to drop it "
               "all); systemd-tmpfiles-setup.service writes it at boot, unordered with blkpolicyd's first pass "
               "(blkpolicyd-settle.service runs after it)";
}

/* The argument as tmpfiles writes it: \\x.. and the C escapes resolved; "?" when only the
 * boot knows it (a credential) or it is encoded. */
static void tmpfiles_value(const char *type, const char *arg, char *buf, size_t size) {
        size_t n = 0;

        if (strpbrk(type + 1, "~^")) {
                (void) strscpy(buf, size, "?");
                return;
        }
        for (const char *a = arg; *a && n + 1 < size; a++) {
                if (a[0] == '\\' && a[1] == 'x' && isxdigit(a[2]) && isxdigit(a[3])) {
                        char hex[3] = { a[2], a[3], 0 };

                        buf[n++] = (char) strtol(hex, NULL, 16);
                        a += 3;
                } else
                        buf[n++] = *a == '\\' && a[1] ? unescape(*++a) : *a;
        }
        buf[n] = 0;
}

static int tmpfiles_add(ConflictSet *s, const char *path, unsigned line, const char *type, const char *target,
                        const char *arg) {
        _cleanup_free_ char *glob = NULL;
        char value[256];
        unsigned tunable;
        RuleToken kernel;
        int r;

        if (!startswith(target, "/sys/"))
                return 0;
        r = conflicts_sysfs_path(target + strlen("/sys/"), &glob, &tunable);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        tmpfiles_value(type, arg, value, sizeof(value));
        kernel = (RuleToken) { .key = (char *) "KERNEL", .value = glob, .op = RULE_OP_MATCH };
        return conflict_add(s, CONFLICT_TMPFILES, path, line, tunable, value, &kernel, 1, target,
                            tmpfiles_advice(path), NULL);
}

/* One line, stripped, not a comment. */
static int tmpfiles_line(ConflictSet *s, const char *path, unsigned lineno, const char *line) {
        _cleanup_free_ char *buf = malloc(TMPFILES_FIELDS * (strlen(line) + 1));
        char *field[TMPFILES_FIELDS];
        const char *p = line, *arg;
        int n = 0, r;

        if (!buf)
                return -ENOMEM;
        for (; n < TMPFILES_FIELDS; n++) {
                field[n] = buf + (size_t) n * (strlen(line) + 1);
                r = tmpfiles_word(&p, field[n]);
                if (r < 0)
                        return conflict_warn(s, "%s:%u: unbalanced quoting, the line is skipped", path, lineno);
                if (r == 0)
                        break;
        }
        if (n < 2)
                return conflict_warn(s, "%s:%u: no path, the line is skipped", path, lineno);
        if (field[0][0] != 'w' || strspn(field[0] + 1, "+!-=~^$?") != strlen(field[0] + 1))
                return 0;       /* not a write, or not one tmpfiles takes */
        arg = p + strspn(p, " \t");
        if (!*arg || streq(arg, "-"))
                return 0;       /* tmpfiles refuses a w line without an argument */
        return tmpfiles_add(s, path, lineno, field[0], field[1], arg);
}

/* One line of a tmpfiles.d file: tmpfiles reads on after a bad one. */
static int tmpfiles_parse_line(ConflictSet *s, const char *path, unsigned lineno, char *line) {
        const char *l = strstrip(line);
        int r;

        if (!*l || *l == '#')
                return 0;
        r = tmpfiles_line(s, path, lineno, l);
        return r < 0 ? r : 0;
}

int conflicts_parse_tmpfiles_text(const char *path, const char *text, ConflictSet *s) {
        return conflicts_parse_lines(path, text, tmpfiles_parse_line, s);
}

int conflicts_scan_tmpfiles(const char *root, ConflictSet *s) {
        return conflicts_scan_files(root, tmpfiles_dirs, ELEMENTSOF(tmpfiles_dirs), ".conf",
                                    conflicts_parse_tmpfiles_text, s);
}
