/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every reader of the other writers stands on (conflicts-files.h):
 * files below a root and the directories of a systemd-style configuration
 * with its masking. Below the readers, so that conflicts.c calls them and
 * they call nothing of it. */
#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>

#include "conflicts-files.h"
#include "tunables.h"

bool conflicts_root_is_system(const char *root) {
        return !root || !*root || streq(root, "/");
}

/* <root><path>, path absolute. */
char *conflicts_root_path(const char *root, const char *path) {
        char *p;

        if (conflicts_root_is_system(root))
                return strdup(path);
        return asprintf(&p, "%s%s", root, path) < 0 ? NULL : p;
}

/* "queue/scheduler" or "bdi/read_ahead_kb" (the same setting, seen from
 * the backing device) → the tunable, else -ENOENT. */
int conflicts_attr_tunable(const char *attr) {
        if (streq(attr, "bdi/read_ahead_kb"))
                return tunable_find_attr("read_ahead_kb");
        if (!startswith(attr, "queue/"))
                return -ENOENT;
        return tunable_find_attr(attr + strlen("queue/"));
}

typedef struct ConfFile {
        char *name;
        char *path;             /* as on the system */
        bool masked;
} ConfFile;

static int conf_file_compare(const void *a, const void *b) {
        return strcmp(((const ConfFile *) a)->name, ((const ConfFile *) b)->name);
}

/* Reads <root><path> whole. A link to /dev/null reads as empty (masked);
 * an absolute link under a fixture root resolves inside it. */
int conflicts_read_file(const char *root, const char *path, char **ret) {
        _cleanup_free_ char *full = conflicts_root_path(root, path), *target = NULL, *text = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        char link[PATH_MAX];
        struct stat st;
        size_t n;
        ssize_t k;
        int r;

        if (!full)
                return -ENOMEM;
        if (lstat(full, &st) < 0)
                return -errno;
        if (S_ISLNK(st.st_mode)) {
                k = readlink(full, link, sizeof(link) - 1);
                if (k < 0)
                        return -errno;
                link[k] = 0;
                if (streq(link, "/dev/null"))
                        return -ENODATA;
                if (link[0] == '/' && !conflicts_root_is_system(root)) {
                        target = conflicts_root_path(root, link);
                        if (!target)
                                return -ENOMEM;
                }
        }
        r = fopen_regular(target ?: full, &f);
        if (r < 0)
                return r;
        text = malloc(CONFLICT_FILE_MAX + 1);
        if (!text)
                return -ENOMEM;
        n = fread(text, 1, CONFLICT_FILE_MAX + 1, f);
        if (ferror(f))
                return -EIO;
        if (n > CONFLICT_FILE_MAX)
                return -EFBIG;
        text[n] = 0;
        if (n == 0)
                return -ENODATA;
        *ret = TAKE_PTR(text);
        return 0;
}

bool conflicts_file_masked(const char *root, const char *path) {
        _cleanup_free_ char *full = conflicts_root_path(root, path);
        char link[16];
        struct stat st;
        ssize_t k;

        if (!full || lstat(full, &st) < 0)
                return false;
        if (S_ISLNK(st.st_mode)) {
                k = readlink(full, link, sizeof(link) - 1);
                if (k < 0)
                        return false;
                link[k] = 0;
                return streq(link, "/dev/null");
        }
        return S_ISREG(st.st_mode) && st.st_size == 0;
}

static void conf_files_free(ConfFile *f, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(f[i].name);
                free(f[i].path);
        }
        free(f);
}

static bool conf_files_have(const ConfFile *f, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(f[i].name, name))
                        return true;
        return false;
}

/* Every name once, from the first directory that has it, sorted. */
static int conflicts_list_files(const char *root, const char *const *dirs, size_t n_dirs, const char *suffix,
                         ConfFile **ret, size_t *ret_n) {
        size_t suffix_len = strlen(suffix);
        ConfFile *files = NULL;
        size_t n = 0;

        for (size_t i = 0; i < n_dirs; i++) {
                _cleanup_free_ char *dir = conflicts_root_path(root, dirs[i]);
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;

                if (!dir)
                        goto oom;
                d = opendir(dir);
                if (!d)
                        continue;
                while ((de = readdir(d))) {
                        size_t len = strlen(de->d_name);
                        ConfFile *a;

                        if (de->d_name[0] == '.' || len <= suffix_len || !streq(de->d_name + len - suffix_len, suffix) ||
                            conf_files_have(files, n, de->d_name))
                                continue;
                        a = realloc(files, (n + 1) * sizeof(ConfFile));
                        if (!a)
                                goto oom;
                        files = a;
                        files[n] = (ConfFile) { .name = strdup(de->d_name) };
                        if (!files[n].name || asprintf(&files[n].path, "%s/%s", dirs[i], de->d_name) < 0) {
                                files[n].path = NULL;
                                n++;
                                goto oom;
                        }
                        files[n].masked = conflicts_file_masked(root, files[n].path);
                        n++;
                }
        }
        if (n > 0)
                qsort(files, n, sizeof(ConfFile), conf_file_compare);
        *ret = files;
        *ret_n = n;
        return 0;
oom:
        conf_files_free(files, n);
        return -ENOMEM;
}

int conflicts_scan_files(const char *root, const char *const *dirs, size_t n_dirs, const char *suffix,
                         ConfFileParse parse, ConflictSet *s) {
        ConfFile *files = NULL;
        size_t n = 0;
        int r;

        r = conflicts_list_files(root, dirs, n_dirs, suffix, &files, &n);
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *text = NULL;
                int k;

                if (files[i].masked)
                        continue;
                k = conflicts_read_file(root, files[i].path, &text);
                if (k == -ENOMEM)
                        r = k;
                else if (k == -ENODATA)
                        continue;
                else if (k < 0)
                        r = conflict_warn(s, "%s: cannot be read (%s), skipped", files[i].path, strerror(-k));
                else
                        r = parse(files[i].path, text, s);
        }
        conf_files_free(files, n);
        return r;
}

bool conflicts_path_exists(const char *root, const char *path) {
        _cleanup_free_ char *full = conflicts_root_path(root, path);
        struct stat st;

        return full && lstat(full, &st) == 0;
}

int conflicts_parse_lines(const char *path, const char *text, ConfLineParse parse, ConflictSet *s) {
        unsigned lineno = 0;

        if (!text)
                return -EINVAL;
        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                size_t n = nl ? (size_t) (nl - p) : strlen(p);
                _cleanup_free_ char *line = strndup(p, n);
                int r;

                if (!line)
                        return -ENOMEM;
                p = nl ? nl + 1 : p + n;
                r = parse(s, path, ++lineno, line);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        return 0;
}
