/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The other writers of blkpolicyd's settings (conflicts.c), matched
 * against the device table: for status, explain, doctor, metrics, the log
 * at start and reload, and the drift note. A writer "affects" a device when
 * it applies to it for sure and writes a setting that blkpolicyd manages
 * there: two owners of one value, whichever writes last wins. */
#include <limits.h>
#include <sys/sysmacros.h>

#include "conflicts-report.h"
#include "conflicts.h"
#include "device.h"
#include "log.h"
#include "tunables.h"
#include "util.h"

/* What the matcher reads of one device, for one report: its udev
 * properties are fetched once, at the first ENV{} condition (through
 * libudev a lookup walks the device's sysfs path), whatever the number of
 * rules that ask. */
typedef struct DeviceRead {
        const Roots *roots;
        const Device *device;
        bool env_read;
        int env_error;          /* of the fetch */
        char **env;             /* "KEY=value", all of them */
} DeviceRead;

static void device_read_done(DeviceRead *dr) {
        dr->env = strv_free(dr->env);
}

static const char *env_find(char *const *env, const char *key) {
        size_t n = strlen(key);

        for (char *const *e = env; e && *e; e++)
                if (strncmp(*e, key, n) == 0 && (*e)[n] == '=')
                        return *e + n + 1;
        return NULL;
}

/* ATTR{} of a rule: <sysfs>/block/<dev>/<attr>; nothing outside the disk. */
static int device_read_attr(void *userdata, const char *attr, char *buf, size_t size) {
        const DeviceRead *dr = userdata;
        char path[PATH_MAX];
        int r;

        if (strstr(attr, "..") || attr[0] == '/')
                return -EINVAL;
        r = block_path(path, sizeof(path), dr->roots, device_name(dr->device), attr);
        return r < 0 ? r : sysfs_read(path, buf, size);
}

/* ENV{} of a rule: udev's database, as a policy's property= reads it. */
static int device_read_env(void *userdata, const char *key, char *buf, size_t size) {
        DeviceRead *dr = userdata;
        const char *value;

        if (!dr->env_read) {
                dev_t n = device_devnum(dr->device);

                dr->env_error = udev_db_properties(dr->roots, major(n), minor(n), NULL, &dr->env);
                dr->env_read = true;
        }
        if (dr->env_error == -ENOENT)
                return -EIO;    /* no database: the condition stays unknown */
        if (dr->env_error < 0)
                return dr->env_error;
        value = env_find(dr->env, key);
        if (!value)
                return -ENOENT; /* the disk has no such property: udev matches "" */
        return strscpy(buf, size, value);
}

static ConflictDevice conflict_device(const Device *d, DeviceRead *dr) {
        DeviceFacts view;

        return (ConflictDevice) { .name = device_name(d), .blk_mq = device_facts(d, &view)->hw_queues > 0,
                                  .read_attr = device_read_attr,
                                  .read_env = device_read_env, .userdata = dr };
}

static const char *match_to_string(ConflictMatch m) {
        return m == CONFLICT_MATCH_YES ? "yes" : m == CONFLICT_MATCH_MAYBE ? "maybe" : "no";
}

/* blkpolicyd's item for the conflict's setting on d, if it manages it there. */
static const PlanItem *managed_item(const Device *d, const Conflict *c) {
        return device_plan(d)->managed ? plan_find(device_plan(d), c->tunable) : NULL;
}

static bool conflict_affects(const Conflict *c, const Device *d, ConflictMatch m) {
        return m == CONFLICT_MATCH_YES && managed_item(d, c);
}

static void add_why(cJSON *o, const RuleToken *why, ConflictMatch m) {
        char buf[512];

        if (!why || rule_token_format(why, buf, sizeof(buf)) < 0)
                cJSON_AddNullToObject(o, "condition");
        else
                cJSON_AddStringToObject(o, m == CONFLICT_MATCH_MAYBE ? "unknown" : "condition", buf);
}

static cJSON *conflict_json(const Conflict *c) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "source", conflict_source_to_string(c->source));
        cJSON_AddStringToObject(o, "path", c->path);
        if (c->line)
                cJSON_AddNumberToObject(o, "line", c->line);
        else
                cJSON_AddNullToObject(o, "line");
        cJSON_AddStringToObject(o, "attr", tunables[c->tunable].attr);
        cJSON_AddStringToObject(o, "value", c->value);
        if (c->match)
                cJSON_AddStringToObject(o, "match", c->match);
        else
                cJSON_AddNullToObject(o, "match");
        cJSON_AddBoolToObject(o, "effective", c->effective);
        cJSON_AddBoolToObject(o, "dormant", c->dormant);
        cJSON_AddStringToObject(o, "advice", c->advice);
        return o;
}

/* One writer, and the devices it applies to (or may). */
static cJSON *conflict_devices_json(DeviceContext *ctx, const Conflict *c, Device **sorted, int n, bool *affects) {
        cJSON *o = conflict_json(c), *a = cJSON_AddArrayToObject(o, "devices");

        *affects = false;
        for (int i = 0; i < n; i++) {
                _cleanup_(device_read_done) DeviceRead dr = { ctx->roots, sorted[i] };
                ConflictDevice cd = conflict_device(sorted[i], &dr);
                ConflictMatch k = conflict_matches(c, &cd, NULL);
                const PlanItem *it = managed_item(sorted[i], c);
                cJSON *e;

                if (k == CONFLICT_MATCH_NO)
                        continue;
                e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "name", device_name(sorted[i]));
                cJSON_AddStringToObject(e, "match", match_to_string(k));
                cJSON_AddBoolToObject(e, "managed", it != NULL);
                if (it)
                        cJSON_AddStringToObject(e, "intended", it->target);
                cJSON_AddItemToArray(a, e);
                *affects = *affects || conflict_affects(c, sorted[i], k);
        }
        cJSON_AddBoolToObject(o, "affects_managed", *affects);
        return o;
}

static cJSON *conflicts_build(DeviceContext *ctx, const ConflictSet *set, unsigned *affecting) {
        _cleanup_free_ Device **sorted = NULL;
        /* status calls this each time: at 10,000 disks a sort of them all
         * was most of its cost, for a list that is empty on most hosts */
        int n = set->n_items > 0 ? devices_sorted(ctx, &sorted) : 0;
        cJSON *a = cJSON_CreateArray();

        *affecting = 0;
        for (size_t i = 0; i < set->n_items; i++) {
                bool affects;

                cJSON_AddItemToArray(a, conflict_devices_json(ctx, &set->items[i], sorted, n, &affects));
                *affecting += affects;
        }
        return a;
}

/* The files are a few dozen, but status is asked every second by `top`,
 * the metrics are written from the tick and every drift is annotated: all
 * of them share one scan, at most CONFLICTS_MAX_AGE_USEC old, so a rule
 * the admin fixes still disappears without a reload. doctor, start and
 * reload look afresh. NULL when the scan failed (logged). */
#define CONFLICTS_MAX_AGE_USEC ((uint64_t) 5000000)
/* The metrics file is written from the tick (every 15 s by default): a
 * scan per write would re-read every rules file and tuned profile there. */
#define CONFLICTS_METRICS_MAX_AGE_USEC ((uint64_t) 300000000)

static const ConflictSet *scanned_within(DeviceContext *ctx, uint64_t max_age_usec) {
        uint64_t now = clock_usec(CLOCK_MONOTONIC);
        int r;

        if (ctx->conflicts_usec && now - ctx->conflicts_usec < max_age_usec)
                return &ctx->conflicts;
        conflict_set_done(&ctx->conflicts);
        ctx->conflicts_usec = 0;
        r = conflicts_scan(ctx->roots, &ctx->conflicts);
        if (r < 0) {
                log_warning_errno(r, "Cannot look for other writers of the settings: %m");
                return NULL;
        }
        ctx->conflicts_usec = now;
        return &ctx->conflicts;
}

static const ConflictSet *scanned(DeviceContext *ctx, bool afresh) {
        return scanned_within(ctx, afresh ? 0 : CONFLICTS_MAX_AGE_USEC);
}

cJSON *conflicts_report_json(DeviceContext *ctx) {
        const ConflictSet *set = scanned(ctx, false);
        unsigned affecting;

        return set ? conflicts_build(ctx, set, &affecting) : cJSON_CreateArray();
}

cJSON *conflicts_report_device_json(DeviceContext *ctx, Device *d) {
        const ConflictSet *set = scanned(ctx, false);
        _cleanup_(device_read_done) DeviceRead dr = { ctx->roots, d };
        ConflictDevice cd = conflict_device(d, &dr);
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; set && i < set->n_items; i++) {
                const Conflict *c = &set->items[i];
                const RuleToken *why;
                ConflictMatch k = conflict_matches(c, &cd, &why);
                const PlanItem *it = managed_item(d, c);
                cJSON *o;

                if (k == CONFLICT_MATCH_NO)
                        continue;
                o = conflict_json(c);
                cJSON_AddStringToObject(o, "applies", match_to_string(k));
                add_why(o, why, k);
                if (it)
                        cJSON_AddStringToObject(o, "intended", it->target);
                else
                        cJSON_AddNullToObject(o, "intended");
                cJSON_AddBoolToObject(o, "affects", conflict_affects(c, d, k));
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

cJSON *conflicts_report_doctor(DeviceContext *ctx) {
        const ConflictSet *set = scanned(ctx, true);
        cJSON *o = cJSON_CreateObject(), *w;
        unsigned affecting = 0;

        if (!set) {
                cJSON_AddArrayToObject(o, "conflicts");
                cJSON_AddNumberToObject(o, "affecting", 0);
                cJSON_AddStringToObject(o, "error", "the scan for other writers failed (see the log)");
                return o;
        }
        cJSON_AddItemToObject(o, "conflicts", conflicts_build(ctx, set, &affecting));
        cJSON_AddNumberToObject(o, "affecting", affecting);
        w = cJSON_AddArrayToObject(o, "warnings");
        for (char **s = set->warnings; s && *s; s++)
                cJSON_AddItemToArray(w, cJSON_CreateString(*s));
        return o;
}

/* The other writers of one managed device's settings. */
static unsigned device_conflicts(DeviceContext *ctx, const ConflictSet *set, Device *d) {
        _cleanup_(device_read_done) DeviceRead dr = { ctx->roots, d };
        ConflictDevice cd = conflict_device(d, &dr);
        unsigned count = 0;

        for (size_t k = 0; k < set->n_items; k++)
                count += conflict_affects(&set->items[k], d, conflict_matches(&set->items[k], &cd, NULL));
        return count;
}

int conflicts_report_metrics(DeviceContext *ctx, FILE *f, bool per_device) {
        const ConflictSet *set = scanned_within(ctx, CONFLICTS_METRICS_MAX_AGE_USEC);
        _cleanup_free_ Device **sorted = NULL;
        unsigned per_source[_CONFLICT_SOURCE_MAX] = {}, *counts;
        unsigned devices = 0;
        int n;

        if (!set)
                return 0;
        n = devices_sorted(ctx, &sorted);
        counts = n >= 0 ? calloc((size_t) n + 1, sizeof(unsigned)) : NULL;
        if (!counts)
                return -ENOMEM;
        for (size_t i = 0; i < set->n_items; i++)
                per_source[set->items[i].source]++;
        fputs("# HELP blkpolicyd_conflicts Other writers found of settings blkpolicyd manages (udev rules, tuned, "
              "the GCE guest agent, elevator=, sysfsutils, tmpfiles.d, LVM)\n# TYPE blkpolicyd_conflicts gauge\n", f);
        for (int s = 0; s < _CONFLICT_SOURCE_MAX; s++)
                fprintf(f, "blkpolicyd_conflicts{source=\"%s\"} %u\n", conflict_source_to_string(s), per_source[s]);
        for (int i = 0; i < n; i++)
                if (device_plan(sorted[i])->managed) {
                        counts[i] = device_conflicts(ctx, set, sorted[i]);
                        devices += counts[i] > 0;
                }
        fputs("# HELP blkpolicyd_conflicting_devices Managed devices whose settings another writer sets too\n"
              "# TYPE blkpolicyd_conflicting_devices gauge\n", f);
        fprintf(f, "blkpolicyd_conflicting_devices %u\n", devices);
        if (per_device) {
                fputs("# HELP blkpolicyd_device_conflicts Other writers that set a setting blkpolicyd manages on this "
                      "device\n# TYPE blkpolicyd_device_conflicts gauge\n", f);
                /* kernel names need no escaping: [A-Za-z0-9_.!-] */
                for (int i = 0; i < n; i++)
                        if (device_plan(sorted[i])->managed)
                                fprintf(f, "blkpolicyd_device_conflicts{device=\"%s\"} %u\n", device_name(sorted[i]),
                                        counts[i]);
        }
        free(counts);
        return 0;
}

/* "sda, sdb (managed), vdc (maybe)" */
static char *conflict_devices_text(DeviceContext *ctx, const Conflict *c, Device **sorted, int n, bool *affects) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        bool first = true;

        if (!f)
                return NULL;
        *affects = false;
        for (int i = 0; i < n; i++) {
                _cleanup_(device_read_done) DeviceRead dr = { ctx->roots, sorted[i] };
                ConflictDevice cd = conflict_device(sorted[i], &dr);
                ConflictMatch k = conflict_matches(c, &cd, NULL);

                if (k == CONFLICT_MATCH_NO)
                        continue;
                fprintf(f, "%s%s%s", first ? "" : ", ", device_name(sorted[i]),
                        k == CONFLICT_MATCH_MAYBE      ? " (maybe)"
                        : managed_item(sorted[i], c) ? " (managed)"
                                                       : "");
                *affects = *affects || conflict_affects(c, sorted[i], k);
                first = false;
        }
        if (first)
                fputs("no disk here", f);
        if (fclose(f) != 0)
                return mfree(text);
        return text;
}

void conflicts_report_log(DeviceContext *ctx) {
        const ConflictSet *set = scanned(ctx, true);
        _cleanup_free_ Device **sorted = NULL;
        int n;

        if (!set)
                return;
        for (char **s = set->warnings; s && *s; s++)
                log_notice("Conflicts: %s", *s);
        n = devices_sorted(ctx, &sorted);
        for (size_t i = 0; i < set->n_items; i++) {
                const Conflict *c = &set->items[i];
                _cleanup_free_ char *what = conflict_describe(c), *on = NULL;
                bool affects;

                on = conflict_devices_text(ctx, c, sorted, n, &affects);
                if (!what || !on) {
                        log_oom();
                        return;
                }
                /* a writer of a setting blkpolicyd holds is a fight: warning */
                log_full_errno(affects ? LOG_WARNING : LOG_NOTICE, 0, "Conflict: %s; applies to %s; to fix: %s", what,
                               c->effective ? on : "nothing (no effect on blk-mq)", c->advice);
        }
}

static char *dormant_note(const Conflict *c) {
        _cleanup_free_ char *what = conflict_describe(c);
        char *s;

        if (!what || asprintf(&s, "an unknown writer (not %s, whose unit is neither enabled nor running)", what) < 0)
                return NULL;
        return s;
}

char *conflicts_report_drift_note(DeviceContext *ctx, const Device *d, unsigned tunable, const char *live,
                                  ConflictSource *ret_source) {
        const ConflictSet *set = scanned(ctx, false);
        _cleanup_(device_read_done) DeviceRead dr = { ctx->roots, d };
        ConflictDevice cd = conflict_device(d, &dr);
        const Conflict *c;

        if (ret_source)
                *ret_source = _CONFLICT_SOURCE_MAX;
        if (!set)
                return NULL;
        c = conflicts_attribute(set, &cd, tunable, live);
        if (c) {
                if (ret_source)
                        *ret_source = c->source;
                return conflict_describe(c);
        }
        /* one that would write the value but does not run: the change came
         * from elsewhere, and the admin must not go after that one */
        c = conflicts_attribute_dormant(set, &cd, tunable, live);
        return c ? dormant_note(c) : NULL;
}
