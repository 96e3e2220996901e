/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <stddef.h>

#include "blkpolicyd-paths.h"
#include "config.h"
#include "conflicts.h"
#include "ini-reader.h"
#include "log.h"
#include "util.h"

typedef struct ConfigParse {
        Config *config;
        const char *path;
        IniReader reader;
        int errors;
        bool oom;
        bool exclude_seen, policy_dirs_seen, reassert_seen, yield_seen;
} ConfigParse;

static int set_string(char **dst, const char *value) {
        char *s = strdup(value);

        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

int config_set_trial_memory(Config *c, const char *value, const char **error) {
        if (parse_boolean(value) == 0) {
                c->trial_memory = mfree(c->trial_memory);
                return 0;
        }
        if (value[0] != '/') {
                *error = "expected an absolute path, or no";
                return -EINVAL;
        }
        return set_string(&c->trial_memory, value);
}

int config_init_defaults(Config *c) {
        *c = (Config) { .tick_interval_ms = 1000, .restore_on_exit = true, .log_level = -1, .max_clients = 128,
                        .max_clients_per_uid = 16, .client_timeout_ms = 30000, .drift_sweep_seconds = 50, .metrics_every_ticks = 15,
                        .uevent_buffer_bytes = 8 * 1024 * 1024 };
        if (set_string(&c->state_dir, "/run/blkpolicyd") < 0 ||
            set_string(&c->socket_path, CONTROL_SOCKET_PATH) < 0 ||
            set_string(&c->trial_memory, TRIAL_MEMORY_PATH) < 0 ||
            strv_push(&c->policy_dirs, POLICY_DIR_VENDOR) < 0 ||
            strv_push(&c->policy_dirs, POLICY_DIR_ADMIN) < 0)
                return -ENOMEM;
        return 0;
}

void config_done(Config *c) {
        if (!c)
                return;
        c->exclude = strv_free(c->exclude);
        c->reassert_over = strv_free(c->reassert_over);
        c->yield_to = strv_free(c->yield_to);
        c->policy_dirs = strv_free(c->policy_dirs);
        free(c->state_dir);
        free(c->socket_path);
        free(c->socket_group);
        free(c->metrics_textfile_dir);
        free(c->policy_set_path);
        c->trial_memory = mfree(c->trial_memory);
        c->state_dir = c->socket_path = c->socket_group = c->metrics_textfile_dir = c->policy_set_path = NULL;
}

static int config_set_number(Config *c, const char *key, const char *value, const char **error) {
        static const struct {
                const char *key;
                size_t offset;
                long long min, max;
                const char *error;
        } numbers[] = {
                { "tick_interval_ms", offsetof(Config, tick_interval_ms), 1, 3600000, "expected milliseconds, 1 to 3600000" },
                { "max_clients", offsetof(Config, max_clients), 1, 4096, "expected 1 to 4096" },
                { "max_clients_per_uid", offsetof(Config, max_clients_per_uid), 1, 4096, "expected 1 to 4096" },
                { "client_timeout_ms", offsetof(Config, client_timeout_ms), 100, 3600000, "expected milliseconds, 100 to 3600000" },
                { "drift_sweep_seconds", offsetof(Config, drift_sweep_seconds), 0, 86400, "expected seconds, 0 (off) to 86400" },
                { "drift_checks_per_tick", offsetof(Config, drift_checks_per_tick), 0, 1000000, "expected a number of devices, 0 (off) or more" },
                { "metrics_every_ticks", offsetof(Config, metrics_every_ticks), 1, 3600, "expected ticks, 1 to 3600" },
                { "uevent_buffer_bytes", offsetof(Config, uevent_buffer_bytes), 4096, 1 << 30, "expected bytes, 4096 to 1 GiB" },
                { "apply_parallelism", offsetof(Config, apply_parallelism), 0, 256, "expected 0 (auto) to 256" },
        };
        long long v;

        for (size_t i = 0; i < ELEMENTSOF(numbers); i++) {
                if (!streq(key, numbers[i].key))
                        continue;
                if (parse_ll(value, numbers[i].min, numbers[i].max, &v) < 0) {
                        *error = numbers[i].error;
                        return -EINVAL;
                }
                *(unsigned *) ((char *) c + numbers[i].offset) = (unsigned) v;
                return 0;
        }
        return -ENOENT;
}

/* A list key appends: the first assignment in the file replaces the
 * default, later ones (and inih's indented continuation lines, which come
 * as the same key again) add to it, and an empty one empties it. A long
 * list can so be split over lines without losing its start. */
static int config_set_list(char ***list, bool *seen, const char *value, const char **error) {
        _cleanup_strv_free_ char **words = NULL;
        int r;

        if (!*seen || !*value)
                *list = strv_free(*list);
        *seen = true;
        r = strv_split(value, &words);
        if (r == -ENAMETOOLONG)
                *error = "a word longer than " STRINGIFY(STRV_WORD_MAX) " characters";
        if (r < 0)
                return r == -ENOMEM ? r : -EINVAL;
        for (char **w = words; w && *w; w++)
                if (strv_push(list, *w) < 0)
                        return -ENOMEM;
        return 0;
}

/* yield_to= and reassert_over=: every word a writer doctor knows, with an
 * attribute blkpolicyd manages after a colon or none. */
static int writers_valid(char **words, const char **error) {
        for (char **w = words; w && *w; w++)
                if (conflict_writer_match(*w, 0, 0) < 0) {
                        *error = "expected WRITER or WRITER:SETTING, WRITER one of udev, tuned, gce-guest-agent, "
                                 "kernel-cmdline, sysfsutils, tmpfiles, lvm, SETTING a queue attribute "
                                 "(scheduler, read_ahead_kb, iosched/read_expire ...)";
                        return -EINVAL;
                }
        return 0;
}

/* The old fixed count still holds (a config of before the sweep must not
 * lose its drift check), but a count set for 100 devices is 42 minutes at
 * 10,000: said where it is, so the admin moves to the sweep. */
static void drift_checks_deprecated(ConfigParse *p) {
        p->config->drift_checks_set = true;
        log_warning("%s:%u: drift_checks_per_tick= is deprecated, use drift_sweep_seconds= (every device within "
                    "that time, whatever their number); this fixed count is used instead of the sweep",
                    p->path, p->reader.line);
}

/* The number is checked against the shipped sets later, by whoever knows
 * where they are (the root): the place is kept for that error. */
static int config_set_policy_set(ConfigParse *p, const char *value, const char **error) {
        Config *c = p->config;
        long long n = 0;
        int r;

        if (!streq(value, "latest") && parse_ll(value, 1, 1000000, &n) < 0) {
                *error = "expected latest or a set's number (1, 2 ...)";
                return -EINVAL;
        }
        r = set_string(&c->policy_set_path, p->path);
        if (r < 0)
                return r;
        c->policy_set_line = p->reader.line;
        c->policy_set = (unsigned) n;
        return 0;
}

static int config_set(ConfigParse *p, const char *key, const char *value, const char **error) {
        Config *c = p->config;
        int r;

        r = config_set_number(c, key, value, error);
        if (r == 0 && streq(key, "drift_checks_per_tick"))
                drift_checks_deprecated(p);
        if (r != -ENOENT)
                return r;
        if (streq(key, "on_drift")) {
                if (!streq(value, "leave") && !streq(value, "reapply")) {
                        *error = "expected leave or reapply";
                        return -EINVAL;
                }
                c->drift_reapply = streq(value, "reapply");
                return 0;
        }
        if (streq(key, "mode")) {
                if (!streq(value, "enforce") && !streq(value, "observe")) {
                        *error = "expected enforce or observe";
                        return -EINVAL;
                }
                c->observe = streq(value, "observe");
                return 0;
        }
        if (streq(key, "socket_group"))
                return set_string(&c->socket_group, value);
        if (streq(key, "exclude"))
                return config_set_list(&c->exclude, &p->exclude_seen, value, error);
        if (streq(key, "reassert_over") || streq(key, "yield_to")) {
                bool re = streq(key, "reassert_over");

                r = config_set_list(re ? &c->reassert_over : &c->yield_to, re ? &p->reassert_seen : &p->yield_seen,
                                    value, error);
                return r < 0 ? r : writers_valid(re ? c->reassert_over : c->yield_to, error);
        }
        if (streq(key, "policy_set"))
                return config_set_policy_set(p, value, error);
        if (streq(key, "policy_dirs")) {
                c->policy_dirs_configured = true;
                return config_set_list(&c->policy_dirs, &p->policy_dirs_seen, value, error);
        }
        if (streq(key, "restore_on_exit") || streq(key, "metrics_per_device")) {
                r = parse_boolean(value);
                if (r < 0) {
                        *error = "expected yes or no";
                        return -EINVAL;
                }
                *(streq(key, "restore_on_exit") ? &c->restore_on_exit : &c->metrics_per_device) = r;
                return 0;
        }
        if (streq(key, "log_level")) {
                r = log_parse_level(value);
                if (r < 0) {
                        *error = "expected err, warning, notice, info or debug";
                        return -EINVAL;
                }
                c->log_level = r;
                return 0;
        }
        if (streq(key, "trial_memory"))
                return config_set_trial_memory(c, value, error);
        if (streq(key, "state_dir") || streq(key, "socket") || streq(key, "metrics_textfile_dir")) {
                if (value[0] != '/') {
                        *error = "expected an absolute path";
                        return -EINVAL;
                }
                return set_string(streq(key, "state_dir") ? &c->state_dir :
                                  streq(key, "socket") ? &c->socket_path : &c->metrics_textfile_dir, value);
        }
        *error = "unknown key";
        return -EINVAL;
}

static int config_handler(void *user, const char *section, const char *key, const char *value) {
        ConfigParse *p = user;
        const char *error = "unknown section";
        int r = -EINVAL;

        if (streq(section, "Daemon"))
                r = config_set(p, key, value, &error);
        if (r == -ENOMEM)
                p->oom = true;
        else if (r < 0) {
                log_error("%s:%u: [%s] %s=%s: %s", p->path, p->reader.line, section, key, value, error);
                p->errors++;
        }
        return 1;
}

static int config_load_file(Config *c, const char *path, bool required) {
        _cleanup_fclose_ FILE *f = NULL;
        ConfigParse p = { .config = c, .path = path };
        int r;

        r = fopen_regular(path, &f);
        if (r == -ENOENT && !required)
                return 0;
        if (r == -EBADFD)
                return log_error_errno(r, "%s: not a regular file, refusing to read it", path);
        if (r < 0)
                return log_error_errno(r, "%s: cannot open: %m", path);
        p.reader = (IniReader) { .file = f, .comments = INI_COMMENTS_OURS };
        r = ini_reader_parse(&p.reader, config_handler, &p);
        if (p.oom || r == -ENOMEM)
                return log_oom();
        if (p.reader.long_line) {
                log_error("%s:%u: line longer than %d characters, refusing the file; split a list over several "
                          "lines of the same key", path, p.reader.long_line, INI_MAX_LINE - 2);
                p.errors++;
        } else if (r > 0 && p.errors == 0) {
                log_error("%s:%d: syntax error (expected [Section] or key = value)", path, r);
                p.errors++;
        }
        return p.errors > 0 ? -EINVAL : 0;
}

static int is_dropin(const struct dirent *de) {
        size_t n = strlen(de->d_name);

        return de->d_name[0] != '.' && n > 5 && streq(de->d_name + n - 5, ".conf");
}

/* <path>.d/NAME.conf, sorted: later files win, key by key. */
static int config_load_dropins(Config *c, const char *path) {
        _cleanup_free_ char *dir = NULL;
        struct dirent **list = NULL;
        int n, errors = 0;

        if (asprintf(&dir, "%s.d", path) < 0)
                return -ENOMEM;
        n = scandir(dir, &list, is_dropin, alphasort);
        if (n < 0)
                return errno == ENOENT || errno == ENOTDIR ? 0 : log_error_errno(errno, "%s: cannot read: %m", dir);
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *file = NULL;
                int r = asprintf(&file, "%s/%s", dir, list[i]->d_name) < 0 ? -ENOMEM :
                        config_load_file(c, file, true);

                if (r == -ENOMEM)
                        errors = -ENOMEM;
                else if (r < 0 && errors == 0)
                        errors = -EINVAL;
        }
        for (int i = 0; i < n; i++)
                free(list[i]);
        free(list);
        return errors;
}

int config_load(Config *c, const char *path, bool required) {
        int r = config_load_file(c, path, required), k;

        if (r == -ENOMEM)
                return r;
        k = config_load_dropins(c, path);
        return k == -ENOMEM ? k : r < 0 ? r : k;
}

unsigned config_drift_checks(const Config *c, size_t n_devices) {
        uint64_t sweep_ms = (uint64_t) c->drift_sweep_seconds * 1000, n;

        if (c->drift_checks_set)
                return (unsigned) (c->drift_checks_per_tick < n_devices ? c->drift_checks_per_tick : n_devices);
        if (sweep_ms == 0 || n_devices == 0)
                return 0;
        /* ceil(): the last tick of a sweep takes what is left, never a tick more */
        n = ((uint64_t) n_devices * c->tick_interval_ms + sweep_ms - 1) / sweep_ms;
        return (unsigned) (n < 1 ? 1 : n > n_devices ? n_devices : n);
}
