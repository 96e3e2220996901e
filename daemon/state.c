/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "state.h"
#include "util.h"

#define STATE_HEADER "# blkpolicyd originals v1\n"

void originals_done(Originals *o) {
        if (!o)
                return;
        for (unsigned i = 0; i < o->n; i++)
                free(o->list[i].value);
        o->list = mfree(o->list);
        o->n = 0;
}

bool originals_empty(const Originals *o) {
        return o->n == 0;
}

const char *originals_get(const Originals *o, unsigned t) {
        for (unsigned i = 0; i < o->n; i++)
                if (o->list[i].tunable == t)
                        return o->list[i].value;
        return NULL;
}

int originals_record(Originals *o, unsigned t, const char *value) {
        char *copy;
        Original *l;

        if (t >= TUNABLES_MAX)
                return -EINVAL;
        if (originals_get(o, t))
                return 0;
        copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        l = realloc(o->list, sizeof(Original) * (o->n + 1));
        if (!l) {
                free(copy);
                return -ENOMEM;
        }
        l[o->n++] = (Original) { .tunable = t, .value = copy };
        o->list = l;
        return 1;
}

static int state_path(char *buf, size_t size, const char *state_dir, const char *dev, const char *suffix) {
        int n = snprintf(buf, size, "%s/devices/%s%s", state_dir, dev, suffix);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

int originals_load(const char *state_dir, const char *dev, Originals *o) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        char path[PATH_MAX];
        size_t size = 0;
        ssize_t len;
        int r, bad = 0;

        r = state_path(path, sizeof(path), state_dir, dev, "");
        if (r < 0)
                return r;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while ((len = getline(&line, &size, f)) >= 0) {
                char *eq, *l;
                int t;

                if (memchr(line, 0, (size_t) len)) {
                        bad++;  /* binary garbage: the file is corrupt */
                        continue;
                }
                l = strstrip(line);
                if (*l == '#' || !*l)
                        continue;
                eq = strchr(l, '=');
                if (!eq) {
                        bad++;  /* torn line: the rename makes this rare, but never fatal */
                        continue;
                }
                *eq = 0;
                t = tunable_find_attr(l);
                if (t < 0 || !*(eq + 1) || strlen(eq + 1) >= VALUE_MAX_STATE) {
                        bad++;
                        continue;
                }
                if (originals_record(o, (unsigned) t, eq + 1) < 0)
                        return -ENOMEM;
        }
        return bad;
}

static int mkdir_p_devices(const char *state_dir) {
        char path[PATH_MAX];

        if (mkdir(state_dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(path, sizeof(path), "%s/devices", state_dir);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* Write to a temporary file and rename, so a crash leaves the old or the
 * new file, never half of one. */
int originals_save(const char *state_dir, const char *dev, const Originals *o) {
        char path[PATH_MAX], tmp[PATH_MAX];
        _cleanup_fclose_ FILE *f = NULL;
        int r;

        r = mkdir_p_devices(state_dir);
        if (r < 0)
                return r;
        if (state_path(path, sizeof(path), state_dir, dev, "") < 0 ||
            state_path(tmp, sizeof(tmp), state_dir, dev, ".tmp") < 0)
                return -ENAMETOOLONG;
        f = fopen(tmp, "we");
        if (!f)
                return -errno;
        fputs(STATE_HEADER, f);
        for (size_t i = 0; i < n_tunables; i++) {       /* in tunables[] order, whatever the record order */
                const char *v = originals_get(o, (unsigned) i);

                if (v)
                        fprintf(f, "%s=%s\n", tunables[i].attr, v);
        }
        if (fflush(f) != 0 || fsync(fileno(f)) < 0) {
                r = -errno;
                (void) unlink(tmp);
                return r;
        }
        if (rename(tmp, path) < 0) {
                r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

int originals_remove(const char *state_dir, const char *dev) {
        char path[PATH_MAX];

        if (state_path(path, sizeof(path), state_dir, dev, "") < 0)
                return -ENAMETOOLONG;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}
