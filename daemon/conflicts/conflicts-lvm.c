/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* LVM's read-ahead. Each time LVM activates or resumes a logical volume
 * (at boot, lvchange, lvextend, snapshots) it sets the dm device's
 * read-ahead: the LV's own setting from the VG metadata (`lvchange -r`),
 * else lvm.conf's activation/readahead: "auto" (the default) raises it to
 * at least a value computed from the stripes or the first PV's read-ahead
 * (lvm2's dev_manager.c: DM_READ_AHEAD_MINIMUM_FLAG), "none" sets 0.
 * Any other value makes LVM refuse to run (toolcontext.c: "Invalid
 * readahead specification"). The per-LV settings live in the metadata on
 * the PVs, which doctor does not read: the finding says so.
 *
 * lvm.conf is not INI: "section { key = value }", values strings in
 * double quotes, numbers or [lists], '#' comments; lvmlocal.conf, read
 * after it, overrides it. Of a key given twice, the first is taken, as
 * libdm's lookup finds it. */
#include "conflicts-files.h"
#include "conflicts-lvm.h"
#include "tunables.h"

/* Sections nest a few deep in lvm.conf; a fuzzer's more is an error. */
#define LVM_DEPTH_MAX 32

typedef struct LvmRead {
        char value[16];         /* "auto", "none", or what was found */
        unsigned line;
        bool found;
} LvmRead;

typedef struct LvmLexer {
        const char *p;
        unsigned line;
} LvmLexer;

/* Skips white space and comments, counting lines. */
static void lvm_skip(LvmLexer *l) {
        for (;;) {
                if (*l->p == '\n')
                        l->line++;
                if (*l->p == ' ' || *l->p == '\t' || *l->p == '\r' || *l->p == '\n')
                        l->p++;
                else if (*l->p == '#')
                        l->p += strcspn(l->p, "\n");
                else
                        return;
        }
}

/* A word (section or key name, number) or a quoted string, copied into
 * buf (truncated, the rest skipped); -EINVAL at an unterminated string. */
static int lvm_word(LvmLexer *l, char *buf, size_t size) {
        size_t n = 0;

        if (*l->p == '"') {
                for (l->p++; *l->p && *l->p != '"'; l->p++) {
                        if (*l->p == '\\' && l->p[1])
                                l->p++;
                        if (*l->p == '\n')
                                l->line++;
                        if (n + 1 < size)
                                buf[n++] = *l->p;
                }
                if (*l->p != '"')
                        return -EINVAL;
                l->p++;
        } else
                for (; *l->p && !strchr(" \t\r\n#{}[]=,\"", *l->p); l->p++)
                        if (n + 1 < size)
                                buf[n++] = *l->p;
        buf[n] = 0;
        return 0;
}

/* A value after '=': a word, a string or a [list]; only a word or string
 * lands in buf. */
static int lvm_value(LvmLexer *l, char *buf, size_t size) {
        lvm_skip(l);
        if (*l->p != '[')
                return lvm_word(l, buf, size);
        buf[0] = 0;
        for (l->p++;;) {
                char skip[2];

                lvm_skip(l);
                if (*l->p == ']') {
                        l->p++;
                        return 0;
                }
                if (*l->p == ',') {
                        l->p++;
                        continue;
                }
                if (!*l->p || lvm_word(l, skip, sizeof(skip)) < 0 || strchr("{}[=", *l->p))
                        return -EINVAL;
        }
}

/* "activation/readahead" at the top, or readahead inside activation { }. */
static bool lvm_is_readahead(const char *key, bool in_activation) {
        return in_activation ? streq(key, "readahead") : streq(key, "activation/readahead");
}

static int lvm_parse(const char *text, LvmRead *ret) {
        LvmLexer l = { .p = text, .line = 1 };
        bool activation[LVM_DEPTH_MAX + 1] = {};
        unsigned depth = 0;

        for (;;) {
                char key[64], value[sizeof(ret->value)];
                unsigned line;

                lvm_skip(&l);
                if (!*l.p)
                        return depth == 0 ? 0 : -EINVAL;
                if (*l.p == '}') {
                        if (depth == 0)
                                return -EINVAL;
                        depth--;
                        l.p++;
                        continue;
                }
                line = l.line;
                if (lvm_word(&l, key, sizeof(key)) < 0 || !key[0])
                        return -EINVAL;
                lvm_skip(&l);
                if (*l.p == '{') {
                        if (depth >= LVM_DEPTH_MAX)
                                return -EINVAL;
                        l.p++;
                        depth++;
                        activation[depth] = depth == 1 && streq(key, "activation");
                        continue;
                }
                if (*l.p != '=')
                        return -EINVAL;
                l.p++;
                if (lvm_value(&l, value, sizeof(value)) < 0)
                        return -EINVAL;
                if (!ret->found && lvm_is_readahead(key, activation[depth])) {
                        (void) strscpy(ret->value, sizeof(ret->value), value);
                        ret->line = line;
                        ret->found = true;
                }
        }
}

static const char *lvm_advice(const char *value) {
        if (strcasecmp(value, "none") == 0)
                return "readahead = \"none\" sets read-ahead 0 on every logical volume without its own setting, at "
                       "each activation: remove it (the default, auto, only raises a lower read-ahead); a volume's own "
                       "setting (lvchange -r) is in the VG metadata, which doctor does not read";
        return "with readahead = auto (the default) LVM raises a logical volume's read-ahead, at each activation, to at "
               "least that of its first PV (twice the stripe for striped ones): give blkpolicyd's read_ahead_kb at or "
               "above that, or set the volume's own (lvchange -r, in 512-byte sectors); that setting is in the VG "
               "metadata, which doctor does not read, so a volume may have its own";
}

/* line 0: the default, set nowhere. */
static int lvm_add(ConflictSet *s, const char *path, unsigned line, const char *value) {
        /* LVM's logical volumes: dm devices whose uuid starts with LVM-. From
         * sysfs' dm/uuid, which udev's DM_UUID copies: without udevd (a
         * container, an initramfs) the database has none, and every map,
         * a plain linear or a multipath one, read as a maybe. */
        static const RuleToken lv[] = {
                { .key = (char *) "KERNEL", .value = (char *) "dm-*", .op = RULE_OP_MATCH },
                { .key = (char *) "ATTR", .attr = (char *) "dm/uuid", .value = (char *) "LVM-*", .op = RULE_OP_MATCH },
        };
        bool none = strcasecmp(value, "none") == 0;

        return conflict_add(s, CONFLICT_LVM, path, line, (unsigned) tunable_find_attr("read_ahead_kb"),
                            none ? "0" : "auto", lv, ELEMENTSOF(lv),
                            "logical volumes without their own read-ahead (lvchange -r)", lvm_advice(value), NULL);
}

int conflicts_parse_lvm_text(const char *path, const char *text, ConflictSet *s) {
        LvmRead ra = {};

        if (!text)
                return -EINVAL;
        if (lvm_parse(text, &ra) < 0)
                return conflict_warn(s, "%s: not valid LVM configuration, skipped", path);
        if (!ra.found)
                return 0;
        if (strcasecmp(ra.value, "auto") != 0 && strcasecmp(ra.value, "none") != 0)
                return conflict_warn(s, "%s:%u: readahead = \"%s\" is neither auto nor none: LVM refuses to run", path,
                                     ra.line, ra.value);
        return lvm_add(s, path, ra.line, ra.value);
}

int conflicts_scan_lvm(const char *root, ConflictSet *s) {
        static const char *const files[] = { "/etc/lvm/lvmlocal.conf", "/etc/lvm/lvm.conf" };
        size_t before = s->n_items;
        bool installed = false;
        int r;

        /* lvmlocal.conf overrides lvm.conf: the first that sets it wins */
        for (size_t i = 0; i < ELEMENTSOF(files) && s->n_items == before; i++) {
                _cleanup_free_ char *text = NULL;

                r = conflicts_read_file(root, files[i], &text);
                installed = installed || r != -ENOENT;
                if (r == -ENOMEM)
                        return r;
                if (r == -ENOENT || r == -ENODATA)
                        continue;
                if (r < 0)
                        r = conflict_warn(s, "%s: cannot be read (%s), skipped", files[i], strerror(-r));
                else
                        r = conflicts_parse_lvm_text(files[i], text, s);
                if (r < 0)
                        return r;
        }
        if (!installed || s->n_items != before)
                return 0;
        /* LVM installed, nothing set: the default, auto, writes too */
        return lvm_add(s, "/etc/lvm/lvm.conf", 0, "auto");
}
