/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PolicySet: the policy files of the drop-in directories, masked and
 * sorted, each parsed by policy.c, with the errors of the rejected ones. */
#include <assert.h>
#include <sys/stat.h>

#include "policy-set.h"
#include "util.h"

const PolicySet *policy_set_ref(const PolicySet *s) {
        if (s)
                ((PolicySet *) s)->n_ref++;
        return s;
}

PolicySet *policy_set_unref(const PolicySet *cs) {
        PolicySet *s = (PolicySet *) cs;

        if (!s)
                return NULL;
        assert(s->n_ref > 0);
        if (--s->n_ref > 0)
                return NULL;
        if (s->base) {
                policy_free(s->own);
                policy_set_unref(s->base);
        } else
                for (size_t i = 0; i < s->n_policies; i++)
                        policy_free(s->policies[i]);
        free(s->policies);
        policy_errors_done(&s->errors);
        strv_free(s->property_keys);
        free(s);
        return NULL;
}

/* One file name and every file of that name, in increasing priority. */
typedef struct Candidate {
        char *name;
        char **paths;
} Candidate;

static int candidate_compare(const void *a, const void *b) {
        return strcmp(((const Candidate *) a)->name, ((const Candidate *) b)->name);
}

static void candidates_free(Candidate *c, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(c[i].name);
                strv_free(c[i].paths);
        }
        free(c);
}

/* Adds the file to the candidate of its name. A later directory does not
 * drop the earlier file yet: if the later one is rejected, the earlier one
 * is what stays in force. */
static int candidates_put(Candidate **c, size_t *n, const char *dir, const char *name) {
        _cleanup_free_ char *path = NULL;
        Candidate *nc;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < *n; i++)
                if (streq((*c)[i].name, name))
                        return strv_push(&(*c)[i].paths, path);
        nc = realloc(*c, sizeof(Candidate) * (*n + 1));
        if (!nc)
                return -ENOMEM;
        *c = nc;
        nc[*n] = (Candidate) { .name = strdup(name) };
        if (!nc[*n].name || strv_push(&nc[*n].paths, path) < 0) {
                free(nc[*n].name);
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
                return policy_error_add(&set->errors, dir, 0, "cannot read directory: %s", strerror(errno)) < 0 ? -ENOMEM : 0;
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

/* The file of the highest priority that is a mask or parses wins. A
 * rejected file counts as absent, so a typo in /etc never leaves a device
 * with less than the shipped file of the same name gave it. */
static int load_candidate(PolicySet *set, const Candidate *c) {
        for (size_t k = strv_length(c->paths); k > 0; k--) {
                const char *path = c->paths[k - 1];
                Policy *p;
                int r;

                if (path_is_mask(path))
                        return 0;
                r = policy_parse_file(path, c->name, &set->errors, &p);
                if (r == -EINVAL) {
                        set->n_files_rejected++;        /* its errors are listed */
                        continue;
                }
                if (r < 0)
                        return r;
                if (policy_set_append(set, p) < 0) {
                        policy_free(p);
                        return -ENOMEM;
                }
                return 0;
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
        set->n_ref = 1;
        for (char *const *d = dirs; d && *d && r >= 0; d++)
                r = collect_dir(*d, &c, &n, set);
        if (r >= 0 && n > 0)
                qsort(c, n, sizeof(Candidate), candidate_compare);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = load_candidate(set, &c[i]);
        candidates_free(c, n);
        if (r >= 0)
                r = collect_property_keys(set);
        if (r < 0) {
                policy_set_unref(set);
                return r;
        }
        *ret = set;
        return 0;
}

static void policy_set_unrefp(PolicySet **s) {
        policy_set_unref(*s);
}

int policy_set_overlay(const PolicySet *base, Policy *p, const char *name, PolicySet **ret) {
        _cleanup_(policy_set_unrefp) PolicySet *set = calloc(1, sizeof(PolicySet));
        bool placed = !p;

        if (!set) {
                policy_free(p);
                return -ENOMEM;
        }
        set->n_ref = 1;
        set->base = policy_set_ref(base);
        set->own = p;
        set->policies = calloc(base->n_policies + 1, sizeof(Policy *));
        if (!set->policies)
                return -ENOMEM;
        /* the loader's order: by file name, one file a name */
        for (size_t i = 0; i < base->n_policies; i++) {
                int k = strcmp(base->policies[i]->name, name);

                if (!placed && k > 0) {
                        set->policies[set->n_policies++] = p;
                        placed = true;
                }
                if (k != 0)
                        set->policies[set->n_policies++] = base->policies[i];
        }
        if (!placed)
                set->policies[set->n_policies++] = p;
        if (collect_property_keys(set) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(set);
        return 0;
}

const Policy *policy_set_find(const PolicySet *s, const char *name) {
        for (size_t i = 0; i < s->n_policies; i++)
                if (streq(s->policies[i]->name, name))
                        return s->policies[i];
        return NULL;
}

static const char *plural(size_t n, const char *one, const char *many) {
        return n == 1 ? one : many;
}

size_t policy_set_canaries(const PolicySet *s) {
        size_t n = 0;

        for (size_t i = 0; s && i < s->n_policies; i++)
                n += s->policies[i]->observe;
        return n;
}

int policy_set_summary(const PolicySet *s, char *buf, size_t size) {
        size_t canaries = policy_set_canaries(s);
        char tail[64] = "";
        int r;

        if (canaries > 0)
                (void) snprintf(tail, sizeof(tail), ", %zu %s (mode=observe, never written)", canaries,
                                plural(canaries, "canary", "canaries"));
        r = snprintf(buf, size, "%zu %s loaded, %zu %s rejected, %zu %s%s", s->n_policies,
                     plural(s->n_policies, "policy", "policies"), s->n_files_rejected,
                     plural(s->n_files_rejected, "file", "files"), s->errors.n_items,
                     plural(s->errors.n_items, "error", "errors"), tail);
        return r < 0 || (size_t) r >= size ? -ENAMETOOLONG : 0;
}
