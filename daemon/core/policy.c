/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files: parse (inih) and load drop-in directories. Pure apart from
 * reading the files themselves: no sysfs, no global state. */
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "ini-reader.h"
#include "policy.h"
#include "trial-run.h"
#include "util.h"

typedef struct ParseState {
        const char *path;
        IniReader reader;       /* its line is the handler's */
        PolicyErrors *errors;
        Policy *policy;
        int n_errors;
        unsigned trial_line;    /* [Trial]'s first key: where the section's own errors point */
        bool oom;
} ParseState;

Policy *policy_free(Policy *p) {
        if (!p)
                return NULL;
        free(p->name);
        free(p->path);
        strv_free(p->match.names);
        strv_free(p->match.drivers);
        strv_free(p->match.models);
        strv_free(p->match.properties);
        strv_free(p->match.dm_uuid_prefixes);
        strv_free(p->match.md_levels);
        for (size_t i = 0; i < TUNABLES_MAX; i++) {
                free(p->values[i]);
                free(p->dynamic.busy_values[i]);
        }
        free(p);
        return NULL;
}

int sched_choices_parse(const char *value, SchedChoice *choices, unsigned *n, const char **error) {
        _cleanup_strv_free_ char **words = NULL;
        unsigned k = 0;

        if (strv_split(value, &words) < 0 || !words || !words[0]) {
                *error = "expected one or more scheduler names";
                return -EINVAL;
        }
        for (char **w = words; *w; w++) {
                char *plus = strchr(*w, '+');
                SchedChoice c = {};

                if (k >= SCHED_CHOICES_MAX) {
                        *error = "too many scheduler alternatives";
                        return -EINVAL;
                }
                if (plus) {
                        *plus = 0;
                        if (!streq(plus + 1, "dispatch_direct") || !streq(*w, "mq-deadline")) {
                                *error = "the only feature is mq-deadline+dispatch_direct";
                                return -EINVAL;
                        }
                        c.dispatch_direct = true;
                }
                if (!**w || strscpy(c.name, sizeof(c.name), *w) < 0 ||
                    strspn(*w, "abcdefghijklmnopqrstuvwxyz0123456789-_") != strlen(*w)) {
                        *error = "invalid scheduler name";
                        return -EINVAL;
                }
                choices[k++] = c;
        }
        *n = k;
        return 0;
}

int sched_choice_format(const SchedChoice *c, char *buf, size_t size) {
        int r = snprintf(buf, size, "%s%s", c->name, c->dispatch_direct ? "+dispatch_direct" : "");
        return r < 0 || (size_t) r >= size ? -ENAMETOOLONG : 0;
}

static int parse_classes(PolicyMatch *m, const char *value, const char **error) {
        _cleanup_strv_free_ char **words = NULL;

        if (strv_split(value, &words) < 0 || !words) {
                *error = "expected class names";
                return -EINVAL;
        }
        for (char **w = words; *w; w++) {
                bool neg = **w == '!';
                int c = class_from_string(*w + neg);

                if (c < 0) {
                        *error = "unknown device class";
                        return -EINVAL;
                }
                if (neg)
                        m->classes_excluded |= CLASS_BIT(c);
                else
                        m->classes_required |= CLASS_BIT(c);
        }
        return 0;
}

static int parse_kernel_conds(PolicyMatch *m, const char *value, const char **error) {
        static const struct { const char *s; KernelOp op; } ops[] = {
                { "<=", KOP_LE }, { ">=", KOP_GE }, { "<", KOP_LT }, { ">", KOP_GT }, { "=", KOP_EQ },
        };
        _cleanup_strv_free_ char **words = NULL;

        if (strv_split(value, &words) < 0 || !words) {
                *error = "expected version conditions such as <6.10";
                return -EINVAL;
        }
        for (char **w = words; *w; w++) {
                KernelCond c = { .op = KOP_EQ };
                const char *v = *w;

                for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                        if (startswith(v, ops[i].s)) {
                                c.op = ops[i].op;
                                v += strlen(ops[i].s);
                                break;
                        }
                if (m->n_kernel >= KERNEL_CONDS_MAX || kernel_version_parse(v, c.version) < 0 ||
                    strspn(v, "0123456789.") != strlen(v)) {
                        *error = "invalid kernel version condition (use e.g. <6.10 or >=6.1.0)";
                        return -EINVAL;
                }
                m->kernel[m->n_kernel++] = c;
        }
        return 0;
}

static int parse_range(const char *value, long long *lo, long long *hi) {
        char buf[64], *dash;

        if (strscpy(buf, sizeof(buf), value) < 0)
                return -EINVAL;
        dash = strchr(buf, '-');
        if (!dash) {
                if (parse_ll(buf, 0, UINT_MAX, lo) < 0)
                        return -EINVAL;
                *hi = *lo;
                return 0;
        }
        *dash = 0;
        if (!*buf && !dash[1])
                return -EINVAL;
        if (*buf && parse_ll(buf, 0, UINT_MAX, lo) < 0)
                return -EINVAL;
        if (dash[1] && parse_ll(dash + 1, 0, UINT_MAX, hi) < 0)
                return -EINVAL;
        return *lo <= *hi ? 0 : -EINVAL;
}

static int parse_hw_queues(PolicyMatch *m, const char *value, const char **error) {
        long long lo = 0, hi = UINT_MAX;

        if (parse_range(value, &lo, &hi) < 0) {
                *error = "invalid hw queue range (use N, N-M, N- or -M)";
                return -EINVAL;
        }
        m->hwq_min = (unsigned) lo;
        m->hwq_max = (unsigned) hi;
        return 0;
}

/* Words that each name a value of an enum (from_string), as a bit mask. */
static int parse_mask(const char *value, int (*from_string)(const char *s), unsigned *mask, const char *expected,
                      const char **error) {
        _cleanup_strv_free_ char **words = NULL;

        if (strv_split(value, &words) < 0 || !words) {
                *error = expected;
                return -EINVAL;
        }
        for (char **w = words; *w; w++) {
                int v = from_string(*w);
                if (v < 0) {
                        *error = expected;
                        return -EINVAL;
                }
                *mask |= 1u << v;
        }
        return 0;
}

/* "any" is every role: a policy may say so, and it matches as if unsaid */
static int stack_from_string(const char *s) {
        return streq(s, "any") ? _STACK_MAX : stack_role_from_string(s);
}

static int parse_stack(PolicyMatch *m, const char *value, const char **error) {
        unsigned mask = 0;
        int r = parse_mask(value, stack_from_string, &mask, "expected top, member, alone or any", error);

        if (r < 0)
                return r;
        m->stack_mask |= mask & (1u << _STACK_MAX) ? (1u << _STACK_MAX) - 1 : mask;
        return 0;
}

/* As dm_uuid_prefix() keeps them: up to and with the first '-', or part. */
static bool dm_uuid_prefix_valid(const char *w) {
        size_t n = strlen(w);

        return streq(w, "part") ||
               (n >= 2 && n < DM_UUID_PREFIX_MAX && w[n - 1] == '-' && strcspn(w, "-") == n - 1);
}

/* Words added to *l, if valid (NULL: any) says each is. */
static int parse_words_checked(char ***l, const char *value, bool (*valid)(const char *w), const char *expected,
                               const char **error) {
        _cleanup_strv_free_ char **words = NULL;

        if (strv_split(value, &words) < 0 || !words) {
                *error = expected;
                return -EINVAL;
        }
        for (char **w = words; *w; w++)
                if (valid && !valid(*w)) {
                        *error = expected;
                        return -EINVAL;
                }
        for (char **w = words; *w; w++)
                if (strv_push(l, *w) < 0)
                        return -ENOMEM;
        return 0;
}

static bool md_level_valid(const char *w) {
        return strlen(w) < MD_LEVEL_MAX && strspn(w, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(w);
}

static int append_words(char ***l, const char *value, const char **error) {
        return parse_words_checked(l, value, NULL, "expected one or more values", error);
}

static int parse_match_key(PolicyMatch *m, const char *key, const char *value, const char **error) {
        int b;

        if (streq(key, "class"))
                return parse_classes(m, value, error);
        if (streq(key, "name"))
                return append_words(&m->names, value, error);
        if (streq(key, "driver"))
                return append_words(&m->drivers, value, error);
        if (streq(key, "model"))
                /* models contain spaces: one glob per line */
                return strv_push(&m->models, value);
        if (streq(key, "property")) {
                if (!strchr(value, '=') || *value == '=') {
                        *error = "expected KEY=GLOB";
                        return -EINVAL;
                }
                return strv_push(&m->properties, value);
        }
        if (streq(key, "kernel"))
                return parse_kernel_conds(m, value, error);
        if (streq(key, "hw_queues"))
                return parse_hw_queues(m, value, error);
        if (streq(key, "zoned"))
                return parse_mask(value, zoned_from_string, &m->zoned_mask, "expected none, host-aware or host-managed",
                                  error);
        if (streq(key, "stack"))
                return parse_stack(m, value, error);
        if (streq(key, "dm_uuid_prefix"))
                return parse_words_checked(&m->dm_uuid_prefixes, value, dm_uuid_prefix_valid,
                                           "expected uuid prefixes such as LVM- CRYPT- mpath- or part", error);
        if (streq(key, "md_level"))
                return parse_words_checked(&m->md_levels, value, md_level_valid,
                                           "expected md levels such as raid1 raid10 linear", error);
        if (streq(key, "nvme_multipath"))
                return parse_mask(value, nvme_multipath_from_string, &m->nvme_mpath_mask,
                                  "expected head, path or none", error);
        if (streq(key, "rotational") || streq(key, "hidden")) {
                b = parse_boolean(value);
                if (b < 0) {
                        *error = "expected yes or no";
                        return -EINVAL;
                }
                *(streq(key, "rotational") ? &m->rotational : &m->hidden) = b;
                return 0;
        }
        *error = "unknown key in [Match]";
        return -EINVAL;
}

/* [Queue]/[mq-deadline]/... set the base settings, [Busy]/[Busy mq-deadline]/...
 * the busy-state ones. */
static int parse_setting(Policy *p, const char *section, const char *key, const char *value,
                         const char **error) {
        bool busy = startswith(section, "Busy");
        const char *table = busy ? (section[4] == ' ' ? section + 5 : "Queue") : section;
        char **values = busy ? p->dynamic.busy_values : p->values;
        char buf[64];
        int t = tunable_find(table, key);

        if (t < 0) {
                *error = "unknown key";
                return -EINVAL;
        }
        if (busy)
                p->dynamic.has_busy = true;
        if (t == TUNABLE_SCHEDULER)
                return busy ? sched_choices_parse(value, p->dynamic.busy_sched, &p->dynamic.n_busy_sched, error)
                            : sched_choices_parse(value, p->sched, &p->n_sched, error);
        if (tunable_parse_value((size_t) t, value, buf, sizeof(buf)) < 0) {
                *error = "invalid value";
                return -EINVAL;
        }
        free(values[t]);
        values[t] = strdup(buf);
        return values[t] ? 0 : -ENOMEM;
}

static const char *const cmp_names[] = { [CMP_LT] = "<", [CMP_LE] = "<=", [CMP_GT] = ">", [CMP_GE] = ">=" };

/* "iops > 20000" */
int condition_parse(const char *s, Condition *ret) {
        char name[32], op[4], num[64], *end;
        int sig, n = 0;

        if (sscanf(s, "%31s %3s %63s %n", name, op, num, &n) != 3 || s[n] != 0)
                return -EINVAL;
        sig = signal_from_string(name);
        if (sig < 0)
                return -EINVAL;
        ret->signal = (SignalId) sig;
        for (size_t i = 0; i <= ELEMENTSOF(cmp_names); i++) {
                if (i == ELEMENTSOF(cmp_names))
                        return -EINVAL;
                if (streq(op, cmp_names[i])) {
                        ret->op = (CmpOp) i;
                        break;
                }
        }
        errno = 0;
        ret->threshold = strtod(num, &end);
        if (*end || errno || ret->threshold != ret->threshold)
                return -EINVAL;
        return 0;
}

int condition_format(const Condition *c, char *buf, size_t size) {
        int r = snprintf(buf, size, "%s %s %g", signal_to_string(c->signal), cmp_names[c->op], c->threshold);
        return r < 0 || (size_t) r >= size ? -ENAMETOOLONG : 0;
}

bool dynamic_uses_signal(const DynamicPolicy *p, SignalId s) {
        for (unsigned i = 0; i < p->n_enter; i++)
                if (p->enter[i].signal == s)
                        return true;
        for (unsigned i = 0; i < p->n_leave; i++)
                if (p->leave[i].signal == s)
                        return true;
        return false;
}

static int parse_ticks(const char *value, long long min, unsigned *ret, const char **error) {
        long long v;

        if (parse_ll(value, min, 1000000, &v) < 0) {
                *error = "expected a number of ticks";
                return -EINVAL;
        }
        *ret = (unsigned) v;
        return 0;
}

static int parse_dynamic_key(DynamicPolicy *d, const char *key, const char *value, const char **error) {
        d->enabled = true;
        if (streq(key, "enter") || streq(key, "leave")) {
                bool enter = streq(key, "enter");
                unsigned *n = enter ? &d->n_enter : &d->n_leave;
                Condition *c = enter ? d->enter : d->leave;

                if (*n >= CONDITIONS_MAX || condition_parse(value, &c[*n]) < 0) {
                        *error = "expected SIGNAL OP NUMBER, e.g. iops > 20000 (at most " STRINGIFY(CONDITIONS_MAX) " per key)";
                        return -EINVAL;
                }
                (*n)++;
                return 0;
        }
        if (streq(key, "enter_ticks"))
                return parse_ticks(value, 1, &d->enter_ticks, error);
        if (streq(key, "leave_ticks"))
                return parse_ticks(value, 1, &d->leave_ticks, error);
        if (streq(key, "window")) {
                int r = parse_ticks(value, 1, &d->window, error);
                if (r == 0 && d->window > DYNAMIC_WINDOW_MAX) {
                        *error = "window is at most " STRINGIFY(DYNAMIC_WINDOW_MAX) " ticks";
                        return -EINVAL;
                }
                return r;
        }
        if (streq(key, "min_dwell_ticks"))
                return parse_ticks(value, 0, &d->min_dwell_ticks, error);
        if (streq(key, "max_flips")) {
                int r = parse_ticks(value, 1, &d->max_flips, error);
                if (r == 0 && d->max_flips > DYNAMIC_FLIPS_CAP) {
                        *error = "max_flips is at most " STRINGIFY(DYNAMIC_FLIPS_CAP);
                        return -EINVAL;
                }
                return r;
        }
        if (streq(key, "flip_window_ticks"))
                return parse_ticks(value, 1, &d->flip_window_ticks, error);
        *error = "unknown key in [Dynamic]";
        return -EINVAL;
}

/* Seconds, a decimal number ("0.5"), to ms within [min_ms, max_ms]. */
static int parse_seconds_ms(const char *value, uint64_t min_ms, uint64_t max_ms, uint64_t *ret) {
        char *end;
        double v;

        errno = 0;
        v = strtod(value, &end);
        if (end == value || *end || errno || !(v * 1000 >= (double) min_ms && v * 1000 <= (double) max_ms))
                return -EINVAL;
        *ret = (uint64_t) (v * 1000 + 0.5);
        return 0;
}

/* "5%" or "0.05": a margin above 0, at most 100%. */
static int parse_gain(const char *value, double *ret) {
        char *end;
        double v;

        errno = 0;
        v = strtod(value, &end);
        if (end != value && streq(end, "%"))
                v /= 100;
        else if (end == value || *end)
                return -EINVAL;
        if (errno || !(v > 0 && v <= 1))
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_trial_candidates(TrialPolicy *t, const char *value, const char **error) {
        SchedChoice c[SCHED_CHOICES_MAX];
        unsigned n = 0;
        int r = sched_choices_parse(value, c, &n, error);

        if (r < 0)
                return r;
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = 0; j < t->n_candidates; j++)
                        if (streq(c[i].name, t->candidates[j].name) &&
                            c[i].dispatch_direct == t->candidates[j].dispatch_direct) {
                                *error = "a candidate named twice";
                                return -EINVAL;
                        }
        if (t->n_candidates + n > SCHED_CHOICES_MAX) {
                *error = "at most " STRINGIFY(SCHED_CHOICES_MAX) " candidates";
                return -EINVAL;
        }
        for (unsigned i = 0; i < n; i++) {
                for (unsigned j = 0; j < i; j++)
                        if (streq(c[i].name, c[j].name) && c[i].dispatch_direct == c[j].dispatch_direct) {
                                *error = "a candidate named twice";
                                return -EINVAL;
                        }
                t->candidates[t->n_candidates++] = c[i];
        }
        return 0;
}

static int parse_trial_key(TrialPolicy *t, const char *key, const char *value, const char **error) {
        long long v;

        t->enabled = true;
        if (streq(key, "candidates"))
                return parse_trial_candidates(t, value, error);
        if (streq(key, "window")) {
                if (parse_seconds_ms(value, 10, 3600ULL * 1000, &t->window_ms) < 0) {
                        *error = "expected seconds from 0.01 to 3600, e.g. 10 or 0.5";
                        return -EINVAL;
                }
                return 0;
        }
        if (streq(key, "settle")) {
                if (parse_seconds_ms(value, 0, 3600ULL * 1000, &t->settle_ms) < 0) {
                        *error = "expected seconds from 0 to 3600, e.g. 2 or 0.2";
                        return -EINVAL;
                }
                return 0;
        }
        if (streq(key, "max_duration")) {
                if (parse_seconds_ms(value, 1000, 7ULL * 24 * 3600 * 1000, &t->max_duration_ms) < 0) {
                        *error = "expected seconds from 1 to 604800 (a week)";
                        return -EINVAL;
                }
                return 0;
        }
        if (streq(key, "min_gain")) {
                if (parse_gain(value, &t->min_gain) < 0) {
                        *error = "expected a margin above 0 and at most 1, e.g. 0.05 or 5%";
                        return -EINVAL;
                }
                return 0;
        }
        if (streq(key, "max_switches_per_hour")) {
                if (parse_ll(value, 1, TRIAL_SWITCHES_MAX, &v) < 0) {
                        *error = "expected a number from 1 to " STRINGIFY(TRIAL_SWITCHES_MAX);
                        return -EINVAL;
                }
                t->max_switches_per_hour = (unsigned) v;
                return 0;
        }
        if (streq(key, "max_age")) {
                if (parse_seconds_ms(value, 1000, 366ULL * 24 * 3600 * 1000, &t->max_age_ms) < 0) {
                        *error = "expected seconds from 1 to 31622400 (a year), e.g. 2592000 (30 days)";
                        return -EINVAL;
                }
                return 0;
        }
        if (streq(key, "retrial_on_shape_change")) {
                int b = parse_boolean(value);

                if (b < 0) {
                        *error = "expected yes or no";
                        return -EINVAL;
                }
                t->retrial_on_shape = b;
                return 0;
        }
        *error = "unknown key in [Trial]";
        return -EINVAL;
}

bool trial_policy_equal(const TrialPolicy *a, const TrialPolicy *b) {
        if (a->enabled != b->enabled || a->n_candidates != b->n_candidates || a->window_ms != b->window_ms ||
            a->settle_ms != b->settle_ms || a->max_duration_ms != b->max_duration_ms || a->min_gain != b->min_gain ||
            a->max_switches_per_hour != b->max_switches_per_hour || a->max_age_ms != b->max_age_ms ||
            a->retrial_on_shape != b->retrial_on_shape)
                return false;
        for (unsigned i = 0; i < a->n_candidates; i++)
                if (!streq(a->candidates[i].name, b->candidates[i].name) ||
                    a->candidates[i].dispatch_direct != b->candidates[i].dispatch_direct)
                        return false;
        return true;
}

/* What [Trial] says as a whole: candidates, and a settle time shorter
 * than a window (trial_run_config_check()'s rule). NULL when it holds. */
static const char *trial_policy_problem(const TrialPolicy *t) {
        if (!t->enabled)
                return NULL;
        if (t->n_candidates == 0)
                return "[Trial] needs candidates=";
        if (t->settle_ms >= t->window_ms)
                return "[Trial] settle= must be shorter than window=";
        return NULL;
}

/* [Policy]: how the file itself is taken. */
static int parse_policy_key(Policy *p, const char *key, const char *value, const char **error) {
        if (!streq(key, "mode")) {
                *error = "unknown key in [Policy]";
                return -EINVAL;
        }
        if (!streq(value, "enforce") && !streq(value, "observe")) {
                *error = "expected enforce or observe";
                return -EINVAL;
        }
        p->observe = streq(value, "observe");
        return 0;
}

static bool section_known(const char *section) {
        if (streq(section, "Policy") || streq(section, "Match") || streq(section, "Dynamic") ||
            streq(section, "Busy") || streq(section, "Trial"))
                return true;
        if (startswith(section, "Busy "))
                section += 5;
        else if (streq(section, "Queue"))
                return true;
        for (size_t i = 0; i < n_tunables; i++)
                if (!streq(section, "Queue") && streq(tunables[i].section, section))
                        return true;
        return false;
}

static int policy_ini_handler(void *user, const char *section, const char *key, const char *value) {
        ParseState *s = user;
        const char *error = NULL;
        int r = 0;

        if (!section_known(section))
                error = "unknown section";
        else if (!*value)
                error = "empty value";
        else if (streq(section, "Policy"))
                r = parse_policy_key(s->policy, key, value, &error);
        else if (streq(section, "Match"))
                r = parse_match_key(&s->policy->match, key, value, &error);
        else if (streq(section, "Dynamic"))
                r = parse_dynamic_key(&s->policy->dynamic, key, value, &error);
        else if (streq(section, "Trial")) {
                if (!s->trial_line)
                        s->trial_line = s->reader.line;
                r = parse_trial_key(&s->policy->trial, key, value, &error);
        } else
                r = parse_setting(s->policy, section, key, value, &error);

        if (!error && r == -ENOMEM)
                s->oom = true;
        if (!error)
                return 1;
        s->n_errors++;
        if (policy_error_add(s->errors, s->path, s->reader.line, "[%s] %s=%s: %s", section, key, value, error) < 0)
                s->oom = true;
        return 1;  /* keep going: report every error of the file at once */
}

/* One policy from the lines reader gives (a file's or a text's): path
 * names it in the errors. */
static int policy_parse(IniReader *reader, const char *path, const char *name, PolicyErrors *errors, Policy **ret) {
        Policy *p;
        ParseState s = { .path = path, .errors = errors };
        int r;

        p = calloc(1, sizeof(Policy));
        if (!p)
                return -ENOMEM;
        p->match.rotational = p->match.hidden = -1;
        p->match.hwq_max = UINT_MAX;
        p->dynamic = DYNAMIC_POLICY_DEFAULTS;
        p->trial = TRIAL_POLICY_DEFAULTS;
        p->name = strdup(name);
        p->path = strdup(path);
        s.policy = p;
        s.reader = *reader;
        if (!p->name || !p->path) {
                policy_free(p);
                return -ENOMEM;
        }

        r = ini_reader_parse(&s.reader, policy_ini_handler, &s);
        if (s.oom || r == -ENOMEM) {
                policy_free(p);
                return -ENOMEM;
        }
        if (s.reader.long_line) {
                s.n_errors++;
                if (policy_error_add(errors, path, s.reader.long_line, "line longer than %d characters", INI_MAX_LINE - 2) < 0)
                        return policy_free(p), -ENOMEM;
        } else if (r > 0 && s.n_errors == 0) {
                /* a syntax error inih found itself (e.g. a line with no '=') */
                s.n_errors++;
                if (policy_error_add(errors, path, (unsigned) r, "syntax error (expected [Section] or key = value)") < 0)
                        return policy_free(p), -ENOMEM;
        }
        if (s.n_errors == 0 && (p->dynamic.enabled || p->dynamic.has_busy) &&
            (p->dynamic.n_enter == 0 || p->dynamic.n_leave == 0 || !p->dynamic.has_busy)) {
                s.n_errors++;
                if (policy_error_add(errors, path, 0, "[Dynamic] needs enter=, leave= and a [Busy] section with settings") < 0)
                        return policy_free(p), -ENOMEM;
        }
        if (s.n_errors == 0 && trial_policy_problem(&p->trial)) {
                s.n_errors++;
                if (policy_error_add(errors, path, s.trial_line, "%s", trial_policy_problem(&p->trial)) < 0)
                        return policy_free(p), -ENOMEM;
        }
        if (s.n_errors > 0) {
                policy_free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

int policy_parse_file(const char *path, const char *name, PolicyErrors *errors, Policy **ret) {
        _cleanup_fclose_ FILE *f = NULL;
        IniReader reader;
        int r;

        *ret = NULL;
        r = fopen_regular(path, &f);
        if (r == -EBADFD)
                return policy_error_add(errors, path, 0, "not a regular file") < 0 ? -ENOMEM : -EINVAL;
        if (r < 0)
                return policy_error_add(errors, path, 0, "cannot open: %s", strerror(-r)) < 0 ? -ENOMEM : -EINVAL;
        reader = (IniReader) { .file = f, .comments = INI_COMMENTS_OURS };
        return policy_parse(&reader, path, name, errors, ret);
}

int policy_parse_text(const char *text, const char *name, PolicyErrors *errors, Policy **ret) {
        IniReader reader = { .text = text, .comments = INI_COMMENTS_OURS };

        *ret = NULL;
        return policy_parse(&reader, name, name, errors, ret);
}
