/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "blkpolicyd-paths.h"
#include "conflicts-files.h"      /* conflicts_root_path(): <root><path>, as the other writers' files are read */
#include "shipped-sets.h"
#include "util.h"

/* The first line that is not a comment: the set's number. 0 when there is
 * none to read: a vendor dir from before the sets, or one a test made.
 * Whole lines (getline()): a piece of a long comment is no number. */
static unsigned read_set_number(const char *dir) {
        _cleanup_free_ char *path = NULL, *line = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        size_t size = 0;
        long long n;

        if (asprintf(&path, "%s/" SHIPPED_SET_FILE, dir) < 0 || fopen_regular(path, &f) < 0)
                return 0;
        while (getline(&line, &size, f) >= 0) {
                char *s = strstrip(line);

                if (*s == '#' || !*s)
                        continue;
                return parse_ll(s, 1, 1000000, &n) < 0 ? 0 : (unsigned) n;
        }
        return 0;
}

static bool is_dir(const char *path) {
        struct stat st;

        return stat(path, &st) >= 0 && S_ISDIR(st.st_mode);
}

/* 1: the two differ, or one of them is missing or unreadable. Read in
 * step, a block at a time: a regular file gives whole blocks until its end. */
static int files_differ(const char *a_dir, const char *b_dir, const char *name) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        _cleanup_fclose_ FILE *fa = NULL, *fb = NULL;
        char ba[4096], bb[4096];

        if (asprintf(&a, "%s/%s", a_dir, name) < 0 || asprintf(&b, "%s/%s", b_dir, name) < 0)
                return -ENOMEM;
        if (fopen_regular(a, &fa) < 0 || fopen_regular(b, &fb) < 0)
                return 1;
        for (;;) {
                size_t na = fread(ba, 1, sizeof(ba), fa), nb = fread(bb, 1, sizeof(bb), fb);

                if (na != nb || memcmp(ba, bb, na) != 0 || ferror(fa) || ferror(fb))
                        return 1;
                if (na < sizeof(ba))
                        return 0;
        }
}

static int is_policy_name(const struct dirent *de) {
        size_t n = strlen(de->d_name);

        return de->d_name[0] != '.' && n > 7 && streq(de->d_name + n - 7, ".policy");
}

/* The *.policy names of dir added to *names, without repeats. */
static int add_names(const char *dir, char ***names) {
        struct dirent **list = NULL;
        int n = scandir(dir, &list, is_policy_name, alphasort), r = 0;

        for (int i = 0; i < n; i++) {
                if (r == 0 && !strv_contains(*names, list[i]->d_name))
                        r = strv_push(names, list[i]->d_name);
                free(list[i]);
        }
        free(list);
        return r;
}

/* The names shipped differently in the two sets, a file one of them lacks
 * among them. */
static int sets_differ(const char *old_dir, const char *new_dir, char ***ret) {
        _cleanup_strv_free_ char **names = NULL, **differs = NULL;
        int r;

        if (add_names(old_dir, &names) < 0 || add_names(new_dir, &names) < 0)
                return -ENOMEM;
        strv_sort(names);
        for (char **n = names; n && *n; n++) {
                r = files_differ(old_dir, new_dir, *n);
                if (r < 0)
                        return r;
                if (r > 0 && strv_push(&differs, *n) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(differs);
        return 0;
}

int shipped_sets_choose(const char *root, unsigned wanted, ShippedSets *ret) {
        _cleanup_free_ char *newest_dir = conflicts_root_path(root, POLICY_DIR_VENDOR), *sets = conflicts_root_path(root, POLICY_SETS_DIR);
        ShippedSets s = {};
        int r;

        if (!newest_dir || !sets)
                return -ENOMEM;
        s.newest = read_set_number(newest_dir);
        s.in_use = wanted ?: s.newest;
        if (s.in_use == s.newest) {
                s.vendor_dir = TAKE_PTR(newest_dir);
                *ret = s;
                return 0;
        }
        if (asprintf(&s.vendor_dir, "%s/%u", sets, s.in_use) < 0)
                return -ENOMEM;
        if (!is_dir(s.vendor_dir)) {
                shipped_sets_done(&s);
                return -ENOENT;
        }
        r = sets_differ(s.vendor_dir, newest_dir, &s.differs);
        if (r < 0) {
                shipped_sets_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

void shipped_sets_done(ShippedSets *s) {
        if (!s)
                return;
        s->vendor_dir = mfree(s->vendor_dir);
        s->differs = strv_free(s->differs);
        s->policy_dirs = strv_free(s->policy_dirs);
}

static int is_number_name(const struct dirent *de) {
        return de->d_name[0] >= '1' && de->d_name[0] <= '9' && strspn(de->d_name, "0123456789") == strlen(de->d_name);
}

static int number_compare(const struct dirent **a, const struct dirent **b) {
        return strlen((*a)->d_name) != strlen((*b)->d_name) ? (strlen((*a)->d_name) > strlen((*b)->d_name)) * 2 - 1 :
               strcmp((*a)->d_name, (*b)->d_name);
}

void shipped_sets_list(const char *root, char *buf, size_t size) {
        _cleanup_free_ char *newest_dir = conflicts_root_path(root, POLICY_DIR_VENDOR), *sets = conflicts_root_path(root, POLICY_SETS_DIR);
        struct dirent **list = NULL;
        unsigned newest = newest_dir ? read_set_number(newest_dir) : 0;
        int n = sets ? scandir(sets, &list, is_number_name, number_compare) : -1;
        size_t k = 0;

        buf[0] = 0;
        for (int i = 0; i < n; i++) {
                if (k < size)
                        k += (size_t) snprintf(buf + k, size - k, "%s%s", k ? ", " : "", list[i]->d_name);
                free(list[i]);
        }
        free(list);
        if (newest > 0 && k < size)
                k += (size_t) snprintf(buf + k, size - k, "%s%u (newest)", k ? ", " : "", newest);
        if (k == 0)
                snprintf(buf, size, "none");
}

int shipped_sets_policy_dirs(ShippedSets *s, const char *root, char *const *dirs) {
        _cleanup_strv_free_ char **l = NULL;

        for (char *const *d = dirs; d && *d; d++) {
                _cleanup_free_ char *p = streq(*d, POLICY_DIR_VENDOR) ? strdup(s->vendor_dir) : conflicts_root_path(root, *d);

                if (!p || strv_push(&l, p) < 0)
                        return -ENOMEM;
        }
        strv_free(s->policy_dirs);
        s->policy_dirs = TAKE_PTR(l);
        return 0;
}
