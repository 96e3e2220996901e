/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PolicySet: the policy files of the drop-in directories, masked and
 * sorted, each parsed by policy.c, with the errors of the rejected ones. */
#include <stdarg.h>
#include <sys/stat.h>

#include "policy.h"
#include "util.h"

PolicySet *policy_set_free(PolicySet *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_policies; i++)
                policy_free(s->policies[i]);
        free(s->policies);
        for (size_t i = 0; i < s->n_errors; i++) {
                free(s->errors[i].path);
                free(s->errors[i].message);
        }
        free(s->errors);
        strv_free(s->property_keys);
        free(s);
        return NULL;
}

int policy_set_add_error(PolicySet *set, const char *path, unsigned line, const char *fmt, ...) {
        PolicyError *n;
        char *msg;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        n = realloc(set->errors, sizeof(PolicyError) * (set->n_errors + 1));
        if (!n) {
                free(msg);
                return -ENOMEM;
        }
        set->errors = n;
        n[set->n_errors] = (PolicyError) { .path = strdup(path), .line = line, .message = msg };
        if (!n[set->n_errors].path) {
                free(msg);
                return -ENOMEM;
        }
        set->n_errors++;
        return 0;
}

typedef struct Candidate {
        char *name;
        char *path;
} Candidate;

static int candidate_compare(const void *a, const void *b) {
        return strcmp(((const Candidate *) a)->name, ((const Candidate *) b)->name);
}

static void candidates_free(Candidate *c, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(c[i].name);
                free(c[i].path);
        }
        free(c);
}

/* Adds or replaces (masks) the candidate of the same name. */
static int candidates_put(Candidate **c, size_t *n, const char *dir, const char *name) {
        char *path;
        Candidate *nc;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < *n; i++)
                if (streq((*c)[i].name, name)) {
                        free((*c)[i].path);
                        (*c)[i].path = path;
                        return 0;
                }
        nc = realloc(*c, sizeof(Candidate) * (*n + 1));
        if (!nc) {
                free(path);
                return -ENOMEM;
        }
        *c = nc;
        nc[*n] = (Candidate) { .name = strdup(name), .path = path };
        if (!nc[*n].name) {
                free(path);
                return -ENOMEM;
        }
        (*n)++;
        return 0;
}

static bool name_is_policy(const char *name) {
        size_t n = strlen(name);
        return name[0] != '.' && n > 7 && streq(name + n - 7, ".policy");
}

static int collect_dir(const char *dir, Candidate **c, size_t *n, PolicySet *set) {
        _cleanup_closedir_ DIR *d = opendir(dir);
        struct dirent *de;

        if (!d) {
                if (errno == ENOENT)
                        return 0;
                return policy_set_add_error(set, dir, 0, "cannot read directory: %s", strerror(errno)) < 0 ? -ENOMEM : 0;
        }
        while ((de = readdir(d)))
                if (name_is_policy(de->d_name) && candidates_put(c, n, dir, de->d_name) < 0)
                        return -ENOMEM;
        return 0;
}

/* systemd's convention: an empty file or a link to /dev/null masks. */
static bool path_is_mask(const char *path) {
        struct stat st;

        if (stat(path, &st) < 0)
                return false;
        return S_ISCHR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_size == 0);
}

static int policy_set_append(PolicySet *set, Policy *p) {
        Policy **np = realloc(set->policies, sizeof(Policy *) * (set->n_policies + 1));

        if (!np)
                return -ENOMEM;
        set->policies = np;
        np[set->n_policies++] = p;
        return 0;
}

static int collect_property_keys(PolicySet *set) {
        for (size_t i = 0; i < set->n_policies; i++)
                for (char *const *c = set->policies[i]->match.properties; c && *c; c++) {
                        _cleanup_free_ char *key = strndup(*c, strcspn(*c, "="));

                        if (!key)
                                return -ENOMEM;
                        if (!strv_contains(set->property_keys, key) && strv_push(&set->property_keys, key) < 0)
                                return -ENOMEM;
                }
        return 0;
}

int policy_set_load(char *const *dirs, PolicySet **ret) {
        PolicySet *set;
        Candidate *c = NULL;
        size_t n = 0;
        int r = 0;

        set = calloc(1, sizeof(PolicySet));
        if (!set)
                return -ENOMEM;
        for (char *const *d = dirs; d && *d && r >= 0; d++)
                r = collect_dir(*d, &c, &n, set);
        if (r >= 0 && n > 0)
                qsort(c, n, sizeof(Candidate), candidate_compare);
        for (size_t i = 0; i < n && r >= 0; i++) {
                Policy *p;

                if (path_is_mask(c[i].path))
                        continue;
                r = policy_parse_file(c[i].path, c[i].name, set, &p);
                if (r == -EINVAL)
                        r = 0;  /* rejected whole, already listed in errors */
                else if (r >= 0 && policy_set_append(set, p) < 0) {
                        policy_free(p);
                        r = -ENOMEM;
                }
        }
        candidates_free(c, n);
        if (r >= 0)
                r = collect_property_keys(set);
        if (r < 0) {
                policy_set_free(set);
                return r;
        }
        *ret = set;
        return 0;
}
