/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "blkpolicyd-paths.h"
#include "conflicts-report.h"
#include "device.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "metrics-file.h"
#include "policy-set.h"
#include "sampler.h"
#include "util.h"

typedef struct Buf {
        FILE *f;
        char *text;
        size_t size;
} Buf;

static void help(Buf *b, const char *name, const char *type, const char *text) {
        fprintf(b->f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* Kernel names are [A-Za-z0-9_.!-]: nothing to escape, but be safe. */
static void label(Buf *b, const char *v) {
        metrics_write_label(b->f, v);
}

static void device_metric(Buf *b, const char *name, const Device *d, double v) {
        fprintf(b->f, "%s{device=\"", name);
        label(b, device_name(d));
        fprintf(b->f, "\"} %.17g\n", v);
}

/* A setting as a fleet counts it (blkpolicyd_settings{result=...}): in
 * force, or why not. Pending is what an alert on an enforcing host is
 * for: a write due and not done (a retry, a pass that waits); paused is
 * the admin's own hold. */
typedef enum SettingState {
        SETTING_IN_FORCE,
        SETTING_PENDING,
        SETTING_PAUSED,
        SETTING_OVERRIDDEN,
        SETTING_NOT_KEPT,
        SETTING_FAILED,
        SETTING_UNSUPPORTED,
        SETTING_CANARY,         /* a canary (mode=observe policy) would change it: never written */
        _SETTING_STATE_MAX,
} SettingState;

static const char *const setting_state_names[_SETTING_STATE_MAX] = {
        [SETTING_IN_FORCE] = "in_force",       [SETTING_PENDING] = "pending",
        [SETTING_PAUSED] = "paused",           [SETTING_OVERRIDDEN] = "overridden",
        [SETTING_NOT_KEPT] = "not_kept",       [SETTING_FAILED] = "failed",
        [SETTING_UNSUPPORTED] = "unsupported", [SETTING_CANARY] = "canary",
};

/* A device as a fleet counts it (blkpolicyd_devices_by_state{state=...}):
 * one state each, the first that holds from the last up. */
typedef enum DeviceState {
        DSTATE_UNMANAGED,       /* left alone: excluded, or nothing to set */
        DSTATE_NO_POLICY,
        DSTATE_IN_FORCE,
        DSTATE_PENDING,
        DSTATE_NOT_KEPT,
        DSTATE_FAILED,
        DSTATE_OVERRIDDEN,
        DSTATE_PAUSED,
        _DSTATE_MAX,
} DeviceState;

static const char *const device_state_names[_DSTATE_MAX] = {
        [DSTATE_UNMANAGED] = "unmanaged", [DSTATE_NO_POLICY] = "no_policy", [DSTATE_IN_FORCE] = "in_force",
        [DSTATE_PENDING] = "pending",     [DSTATE_NOT_KEPT] = "not_kept",   [DSTATE_FAILED] = "failed",
        [DSTATE_OVERRIDDEN] = "overridden", [DSTATE_PAUSED] = "paused",
};

static SettingState setting_state(ItemResult r, bool paused) {
        switch (r) {
        case RESULT_UNCHANGED:
        case RESULT_APPLIED: return SETTING_IN_FORCE;
        case RESULT_OVERRIDDEN: return SETTING_OVERRIDDEN;
        case RESULT_NOT_KEPT: return SETTING_NOT_KEPT;
        case RESULT_FAILED: return SETTING_FAILED;
        case RESULT_UNSUPPORTED: return SETTING_UNSUPPORTED;
        default: return paused ? SETTING_PAUSED : SETTING_PENDING;     /* planned, retry */
        }
}

/* What the metrics show of a device now: one live read (device_view()),
 * taken once for every series of it. */
typedef struct DeviceSeen {
        uint64_t queue_id;              /* of the device read: another under its number is not it */
        uint16_t settings[_SETTING_STATE_MAX];
        uint8_t state;                  /* DeviceState */
        bool paused;
        char scheduler[VALUE_MAX];      /* "" when it cannot be read */
} DeviceSeen;

static DeviceState device_state(const Plan *plan, const DeviceSeen *s) {
        static const struct { SettingState setting; DeviceState device; } worst[] = {
                { SETTING_OVERRIDDEN, DSTATE_OVERRIDDEN }, { SETTING_FAILED, DSTATE_FAILED },
                { SETTING_NOT_KEPT, DSTATE_NOT_KEPT },     { SETTING_PENDING, DSTATE_PENDING },
        };

        if (!plan->managed)
                return DSTATE_UNMANAGED;
        if (!plan->policy)
                return DSTATE_NO_POLICY;
        if (s->paused)
                return DSTATE_PAUSED;
        for (size_t i = 0; i < ELEMENTSOF(worst); i++)
                if (s->settings[worst[i].setting] > 0)
                        return worst[i].device;
        return DSTATE_IN_FORCE;
}

/* Devices read live per dispatch: some 10 ms on sysfs (about 40 us a
 * managed disk, bench/views.py), so a text of 10,000 disks keeps no
 * client and no uevent waiting longer than that. */
#define METRICS_SLICE 256

/* A metrics text in the making: the devices as they were when it began,
 * in name order, read live METRICS_SLICE at a time; then the text. */
struct MetricsBuild {
        dev_t *devnums;
        DeviceSeen *seen;
        size_t n, read;
};

typedef double (*DeviceValue)(const Device *d, const DeviceSeen *s);

static double v_busy(const Device *d, const DeviceSeen *s _unused_) {
        return device_plan(d)->busy;
}
static double v_flips(const Device *d, const DeviceSeen *s _unused_) {
        const DeviceDynamic *y = device_dynamic(d);
        return y ? dyn_state_flips(&y->state) : 0;
}
static double v_cost(const Device *d, const DeviceSeen *s _unused_) {
        const DeviceFlips *y = device_flips(d);
        return y ? y->cost_ms / 1000.0 : 0;
}
/* as status counts it: "pause" of all devices pauses each */
static double v_paused(const Device *d _unused_, const DeviceSeen *s) {
        return s->paused;
}
/* someone else's value on a setting blkpolicyd held, now */
static double v_overridden(const Device *d, const DeviceSeen *s) {
        return device_overridden(d) || s->settings[SETTING_OVERRIDDEN] > 0;
}
/* the settings a write would change, as verify lists them: planned
 * (observe, paused) and overridden; 0 once the policy is in force */
static double v_pending(const Device *d _unused_, const DeviceSeen *s) {
        return s->settings[SETTING_PENDING] + s->settings[SETTING_PAUSED] + s->settings[SETTING_OVERRIDDEN];
}
static double v_not_kept(const Device *d _unused_, const DeviceSeen *s) {
        return s->settings[SETTING_NOT_KEPT];
}

/* Per device, only with metrics_per_device = yes: a fleet's 10,000-disk
 * hosts would serve 80,000 series each. No per-device load: a gauge of
 * the last tick is a random sample at a 15 s scrape, and node_exporter's
 * diskstats collector exports the counters these came from
 * (node_disk_*_total): join on `device`. */
static const struct {
        const char *name, *type, *help;
        DeviceValue value;
        bool dynamic;           /* only devices whose policy has [Dynamic]: 0 on the others, always */
} device_metrics[] = {
        { "blkpolicyd_device_busy", "gauge", "1 while the device runs its policy's busy settings", v_busy, true },
        { "blkpolicyd_device_flips_total", "counter", "Flips between base and busy settings", v_flips, true },
        { "blkpolicyd_device_flip_cost_seconds_total", "counter", "Time spent applying flips", v_cost, true },
        { "blkpolicyd_device_paused", "gauge", "1 while paused by an admin", v_paused, false },
        { "blkpolicyd_device_overridden", "gauge", "1 while a setting was changed by someone else", v_overridden,
          false },
        { "blkpolicyd_device_pending_changes", "gauge",
          "Settings a write would change, not made (mode=observe, paused, overridden)", v_pending, false },
        { "blkpolicyd_device_settings_not_kept", "gauge",
          "Settings written whose value the kernel did not keep (it rounds iosched times to jiffies)", v_not_kept,
          false },
};

static void seen_now(const Manager *m, const Device *d, DeviceSeen *s) {
        DeviceView v;

        device_view(&m->ctx, d, &v);
        *s = (DeviceSeen) { .queue_id = device_record(d)->id.queue_id, .paused = device_is_paused(&m->ctx, d) };
        for (unsigned i = 0; i < v.plan.n_items; i++) {
                SettingState k = setting_state(v.items[i].result, s->paused);

                if (s->settings[k] < UINT16_MAX)
                        s->settings[k]++;
        }
        /* a canary's are apart: never due, so never "pending" */
        s->settings[SETTING_CANARY] = (uint16_t) v.canary_pending;
        s->state = (uint8_t) device_state(&v.plan, s);
        if (v.scheduler.state == LIVE_OK)
                (void) strscpy(s->scheduler, sizeof(s->scheduler), v.scheduler.value);
}

static void write_device_metrics(Buf *b, Device **devs, const DeviceSeen *seen, int n) {
        for (size_t k = 0; k < ELEMENTSOF(device_metrics); k++) {
                help(b, device_metrics[k].name, device_metrics[k].type, device_metrics[k].help);
                for (int i = 0; i < n; i++)
                        if (device_plan(devs[i])->managed && (!device_metrics[k].dynamic || device_dynamic(devs[i])))
                                device_metric(b, device_metrics[k].name, devs[i],
                                              device_metrics[k].value(devs[i], &seen[i]));
        }
        help(b, "blkpolicyd_device_scheduler", "gauge", "The I/O scheduler the device runs (1 for the one in use)");
        for (int i = 0; i < n; i++) {
                if (!seen[i].scheduler[0])
                        continue;
                fputs("blkpolicyd_device_scheduler{device=\"", b->f);
                label(b, device_name(devs[i]));
                fputs("\",scheduler=\"", b->f);
                label(b, seen[i].scheduler);
                fputs("\"} 1\n", b->f);
        }
}

/* One series per value of a label, 0s too: a state that ends shows as
 * 0, not as a series gone stale (an alert on it resolves at once). */
static void write_by_label(Buf *b, const char *name, const char *label_name, const char *const *values,
                           const unsigned *counts, size_t n) {
        for (size_t i = 0; i < n; i++)
                fprintf(b->f, "%s{%s=\"%s\"} %u\n", name, label_name, values[i], counts[i]);
}

/* The host's sums: what a fleet's alerts and dashboards read, a few dozen
 * series whatever the number of disks; each alert fires once per host. */
static void write_host_states(Buf *b, Device **devs, const DeviceSeen *seen, int n) {
        unsigned settings[_SETTING_STATE_MAX] = {}, states[_DSTATE_MAX] = {}, classes[_CLASS_MAX] = {};
        const char *class_labels[_CLASS_MAX];

        for (int i = 0; i < n; i++) {
                DeviceFacts view;
                ClassSet set = device_facts(devs[i], &view)->classes;

                for (int k = 0; k < _SETTING_STATE_MAX; k++)
                        settings[k] += seen[i].settings[k];
                states[seen[i].state]++;
                for (int c = 0; c < _CLASS_MAX; c++)
                        classes[c] += (set & CLASS_BIT(c)) != 0;
        }
        for (int c = 0; c < _CLASS_MAX; c++)
                class_labels[c] = class_to_string((DeviceClass) c);
        help(b, "blkpolicyd_devices_by_class", "gauge",
             "Whole disks known, by class (a disk is counted in every class it has)");
        write_by_label(b, "blkpolicyd_devices_by_class", "class", class_labels, classes, _CLASS_MAX);
        help(b, "blkpolicyd_devices_by_state", "gauge",
             "Whole disks known, by state (one each: paused, overridden, failed, not_kept, pending, in_force, "
             "no_policy, unmanaged)");
        write_by_label(b, "blkpolicyd_devices_by_state", "state", device_state_names, states, _DSTATE_MAX);
        help(b, "blkpolicyd_settings", "gauge",
             "Settings the policies set on this host's disks, by what holds now (pending: a write due, not done; "
             "canary: a mode=observe policy would change it, never written)");
        write_by_label(b, "blkpolicyd_settings", "result", setting_state_names, settings, _SETTING_STATE_MAX);
}

/* A verdict as a fleet tabulates it: the disk's model, the two arms and
 * what the trial said. */
typedef struct VerdictCount {
        const char *incumbent, *verdict;    /* the device's trial's: valid while the text is written */
        char model[sizeof(((DeviceFacts *) NULL)->model)];
        char candidate[SCHED_CHOICE_TEXT_MAX];
        unsigned n;
} VerdictCount;

static bool outcome_decided(const TrialOutcome *o) {
        return !o->skipped && !o->stopped && o->result.verdict != TRIAL_UNDECIDED;
}

/* The slot of o's labels in v (n of them, room for one more). */
static VerdictCount *verdict_slot(VerdictCount *v, size_t *n, const char *model, const TrialOutcome *o) {
        char candidate[SCHED_CHOICE_TEXT_MAX];

        (void) sched_choice_format(&o->candidate, candidate, sizeof(candidate));
        for (size_t i = 0; i < *n; i++)
                if (streq(v[i].model, model) && streq(v[i].candidate, candidate) &&
                    streq(v[i].incumbent, o->incumbent) && streq(v[i].verdict, trial_verdict_to_string(o->result.verdict)))
                        return &v[i];
        v[*n] = (VerdictCount) { .incumbent = o->incumbent, .verdict = trial_verdict_to_string(o->result.verdict) };
        (void) strscpy(v[*n].model, sizeof(v[*n].model), model);
        (void) strscpy(v[*n].candidate, sizeof(v[*n].candidate), candidate);
        return &v[(*n)++];
}

/* The trials that run, and the verdicts reached, summed by the disks'
 * model: a fleet adds them up across hosts (docs/trials.md), a few series
 * a host whatever its number of disks. */
static int write_trials(Buf *b, Device **devs, int n) {
        _cleanup_free_ VerdictCount *v = NULL;
        size_t n_v = 0, max = 0;
        unsigned running = 0;

        for (int i = 0; i < n; i++) {
                const DeviceTrial *t = device_trial(devs[i]);

                if (!t)
                        continue;
                running += t->phase == TRIAL_PHASE_WAITING || t->phase == TRIAL_PHASE_RUNNING;
                max += t->n_outcomes;
        }
        if (max && !(v = calloc(max, sizeof(VerdictCount))))
                return -ENOMEM;
        for (int i = 0; max && i < n; i++) {
                const DeviceTrial *t = device_trial(devs[i]);
                DeviceFacts view;
                const char *model = t ? device_facts(devs[i], &view)->model : NULL;

                for (unsigned k = 0; t && k < t->n_outcomes; k++)
                        if (outcome_decided(&t->outcomes[k]))
                                verdict_slot(v, &n_v, model, &t->outcomes[k])->n++;
        }
        help(b, "blkpolicyd_trials", "gauge", "Disks whose trial of candidate settings runs or waits for its next candidate");
        fprintf(b->f, "blkpolicyd_trials %u\n", running);
        help(b, "blkpolicyd_trial_verdicts", "gauge",
             "Trials of a candidate against an incumbent that reached a verdict, by the disks' model");
        for (size_t i = 0; i < n_v; i++) {
                fputs("blkpolicyd_trial_verdicts{model=\"", b->f);
                label(b, v[i].model);
                fputs("\",candidate=\"", b->f);
                label(b, v[i].candidate);
                fputs("\",incumbent=\"", b->f);
                label(b, v[i].incumbent);
                fprintf(b->f, "\",verdict=\"%s\"} %u\n", v[i].verdict, v[i].n);
        }
        return 0;
}

MetricsBuild *metrics_build_free(MetricsBuild *b) {
        if (!b)
                return NULL;
        free(b->devnums);
        free(b->seen);
        free(b);
        return NULL;
}

int metrics_build_new(Manager *m, MetricsBuild **ret) {
        _cleanup_free_ Device **devs = NULL;
        MetricsBuild *b;
        int n;

        n = devices_sorted(&m->ctx, &devs);
        if (n < 0)
                return -ENOMEM;
        b = calloc(1, sizeof(MetricsBuild));
        if (!b)
                return -ENOMEM;
        b->devnums = calloc((size_t) n + 1, sizeof(dev_t));
        b->seen = calloc((size_t) n + 1, sizeof(DeviceSeen));
        if (!b->devnums || !b->seen) {
                metrics_build_free(b);
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++)
                b->devnums[i] = device_devnum(devs[i]);
        b->n = (size_t) n;
        *ret = b;
        return 0;
}

/* The device read at i, if it is still the one in the table. */
static Device *build_device(const MetricsBuild *b, Manager *m, size_t i) {
        Device *d = device_get(&m->ctx, b->devnums[i]);

        return d && device_record(d)->id.queue_id == b->seen[i].queue_id ? d : NULL;
}

int metrics_build_step(MetricsBuild *b, Manager *m) {
        size_t end = b->n - b->read < METRICS_SLICE ? b->n : b->read + METRICS_SLICE;

        for (; b->read < end; b->read++) {
                Device *d = device_get(&m->ctx, b->devnums[b->read]);

                if (d)
                        seen_now(m, d, &b->seen[b->read]);
                else
                        b->seen[b->read].queue_id = UINT64_MAX;         /* gone: matches none */
        }
        return b->read < b->n;
}

/* A build with every read done, in one go: callers that make the text
 * now. -ENOMEM. */
static int build_whole(Manager *m, MetricsBuild **ret) {
        int r = metrics_build_new(m, ret);

        while (r >= 0 && metrics_build_step(*ret, m) > 0)
                ;
        return r;
}

/* The devices read that are still there, and what was seen of them, in
 * place: the text shows no disk gone meanwhile. */
static int build_compact(MetricsBuild *b, Manager *m, Device ***ret) {
        Device **devs = calloc(b->n + 1, sizeof(Device *));
        size_t k = 0;

        if (!devs)
                return -ENOMEM;
        for (size_t i = 0; i < b->n; i++) {
                Device *d = build_device(b, m, i);

                if (!d)
                        continue;
                b->seen[k] = b->seen[i];
                b->devnums[k] = b->devnums[i];
                devs[k++] = d;
        }
        b->n = b->read = k;
        *ret = devs;
        return (int) k;
}

static const char *mode_name(const Manager *m) {
        return m->ctx.dry_run ? "dry-run" : m->config.observe ? "observe" : "enforce";
}

/* What tells a running daemon from a stuck or stopped one: up, when it
 * started and last ticked, how often it writes (BlkpolicydMetricsStale
 * scales with it). */
static void write_liveness(Buf *b, const Manager *m, const SamplerStats *ticks) {
        metrics_write_build_info(b->f);
        help(b, "blkpolicyd_up", "gauge", "1 while blkpolicyd runs; 0 in the file it leaves when it stops");
        fputs("blkpolicyd_up 1\n", b->f);
        help(b, "blkpolicyd_start_time_seconds", "gauge", "When this blkpolicyd started (Unix time; 0: no loop)");
        fprintf(b->f, "blkpolicyd_start_time_seconds %.3f\n", (double) m->start_realtime_usec / 1e6);
        help(b, "blkpolicyd_last_tick_timestamp_seconds", "gauge",
             "When the last tick that read /proc/diskstats ended (Unix time; 0: none yet)");
        fprintf(b->f, "blkpolicyd_last_tick_timestamp_seconds %.3f\n", (double) ticks->sampled_realtime_usec / 1e6);
        help(b, "blkpolicyd_metrics_interval_seconds", "gauge",
             "How often this file is written (tick_interval_ms x metrics_every_ticks)");
        fprintf(b->f, "blkpolicyd_metrics_interval_seconds %.3f\n",
                (double) m->config.tick_interval_ms * m->config.metrics_every_ticks / 1000.0);
        help(b, "blkpolicyd_mode", "gauge", "1 for the mode in force: enforce, observe or dry-run");
        fprintf(b->f, "blkpolicyd_mode{mode=\"%s\"} 1\n", mode_name(m));
        help(b, "blkpolicyd_enforcing", "gauge", "1 when policies are written (mode=enforce), 0 when only observed");
        fprintf(b->f, "blkpolicyd_enforcing %d\n", manager_writes(m) ? 1 : 0);
}

static void write_counters(Buf *b, const Manager *m, const SamplerStats *ticks) {
        help(b, "blkpolicyd_devices", "gauge", "Whole disks known");
        fprintf(b->f, "blkpolicyd_devices %zu\n", m->ctx.devices.n_devices);
        help(b, "blkpolicyd_ticks_total", "counter", "Sampling ticks");
        fprintf(b->f, "blkpolicyd_ticks_total %llu\n", (unsigned long long) ticks->ticks);
        help(b, "blkpolicyd_tick_seconds_total", "counter", "Time spent in ticks");
        fprintf(b->f, "blkpolicyd_tick_seconds_total %.6f\n", (double) ticks->cost_usec_total / 1e6);
        help(b, "blkpolicyd_flips_total", "counter", "Flips between base and busy settings, on all disks");
        fprintf(b->f, "blkpolicyd_flips_total %llu\n", (unsigned long long) ticks->flips_total);
        help(b, "blkpolicyd_flips_capped_total", "counter",
             "Flips a disk's max_flips cap held back: its [Dynamic] thresholds thrash under its load");
        fprintf(b->f, "blkpolicyd_flips_capped_total %llu\n", (unsigned long long) ticks->flips_capped_total);
        help(b, "blkpolicyd_sysfs_writes_total", "counter",
             "Writes to queue attributes, by kind (each scheduler write freezes the queue)");
        fprintf(b->f, "blkpolicyd_sysfs_writes_total{kind=\"scheduler\"} %llu\n",
                (unsigned long long) m->ctx.writes.scheduler_writes);
        fprintf(b->f, "blkpolicyd_sysfs_writes_total{kind=\"other\"} %llu\n",
                (unsigned long long) m->ctx.writes.other_writes);
        help(b, "blkpolicyd_sysfs_write_errors_total", "counter",
             "Writes to queue attributes the kernel refused (a scheduler fallback taken is not one)");
        fprintf(b->f, "blkpolicyd_sysfs_write_errors_total %llu\n", (unsigned long long) m->ctx.writes.write_errors);
        help(b, "blkpolicyd_kernel_resets_total", "counter",
             "Settings a queue-limits update (a revalidation) had put back to the kernel's default, set again");
        fprintf(b->f, "blkpolicyd_kernel_resets_total %llu\n", (unsigned long long) m->ctx.writes.kernel_resets);
}

/* A fleet after a package upgrade: hosts whose in_use is below newest
 * run an older shipped set until the admin opts in (docs/alerts.md). */
static void write_policy_sets(Buf *b, const ShippedSets *s) {
        size_t differs = 0;

        for (char **n = s->differs; n && *n; n++)
                differs++;
        help(b, "blkpolicyd_policy_set_in_use", "gauge",
             "The shipped policy set read (policy_set=); 0: none is numbered, or --policy-dir replaces them");
        fprintf(b->f, "blkpolicyd_policy_set_in_use %u\n", s->vendor_dir ? s->in_use : 0);
        help(b, "blkpolicyd_policy_set_newest", "gauge", "The newest shipped policy set installed (0: as in_use)");
        fprintf(b->f, "blkpolicyd_policy_set_newest %u\n", s->vendor_dir ? s->newest : 0);
        help(b, "blkpolicyd_policy_set_files_differ", "gauge",
             "Shipped policy files the newest set changes over the one in use (0 when it is in use)");
        fprintf(b->f, "blkpolicyd_policy_set_files_differ %zu\n", s->vendor_dir ? differs : 0);
}

static void write_config_state(Buf *b, const Manager *m, const SamplerStats *ticks) {
        help(b, "blkpolicyd_last_reload_successful", "gauge",
             "0 while the last reload was refused (its configuration has errors; the running one stays)");
        fprintf(b->f, "blkpolicyd_last_reload_successful %d\n", m->reload_errors ? 0 : 1);
        help(b, "blkpolicyd_reload_failures_total", "counter", "Reloads refused (the configuration had errors)");
        fprintf(b->f, "blkpolicyd_reload_failures_total %llu\n", (unsigned long long) m->reload_failures);
        help(b, "blkpolicyd_policy_files_rejected", "gauge",
             "Policy files rejected at the last (re)load: files, not errors; they count as absent");
        fprintf(b->f, "blkpolicyd_policy_files_rejected %zu\n", m->policies->n_files_rejected);
        help(b, "blkpolicyd_policy_errors", "gauge", "Errors in the rejected policy files (a file may have several)");
        fprintf(b->f, "blkpolicyd_policy_errors %zu\n", m->policies->errors.n_items);
        write_policy_sets(b, manager_policy_sets(m));
        help(b, "blkpolicyd_sample_errors", "gauge", "1 while /proc/diskstats cannot be read");
        fprintf(b->f, "blkpolicyd_sample_errors %d\n", ticks->diskstats_error ? 1 : 0);
}

/* The whole text to f, from a build whose reads are done; the caller
 * checks f's errors (a memstream's at fclose(): memstream_open()).
 * -ENOMEM only. */
int metrics_build_write(MetricsBuild *mb, Manager *m, FILE *f) {
        _cleanup_free_ Device **devs = NULL;
        const SamplerStats *ticks = sampler_stats(m->sampler);
        Buf b = { .f = f };
        int n;

        assert(mb->read == mb->n);
        n = build_compact(mb, m, &devs);
        if (n < 0)
                return -ENOMEM;
        write_liveness(&b, m, ticks);
        write_counters(&b, m, ticks);
        write_config_state(&b, m, ticks);
        write_host_states(&b, devs, mb->seen, n);
        if (write_trials(&b, devs, n) < 0)
                return -ENOMEM;
        if (m->config.metrics_per_device)
                write_device_metrics(&b, devs, mb->seen, n);
        return conflicts_report_metrics(&m->ctx, b.f, m->config.metrics_per_device);
}

int metrics_build(Manager *m, char **ret) {
        char *text = NULL;
        size_t size = 0;
        /* not open_memstream(): its writes fail unseen, and a text cut
         * short would be served as whole */
        FILE *f = memstream_open(&text, &size);
        MetricsBuild *mb = NULL;
        int r;

        if (!f)
                return -ENOMEM;
        r = build_whole(m, &mb);
        if (r >= 0)
                r = metrics_build_write(mb, m, f);
        metrics_build_free(mb);
        if (fclose(f) != 0 || r < 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}


typedef struct BuildWrite {
        MetricsBuild *build;
        Manager *manager;
} BuildWrite;

static int write_build(FILE *f, void *userdata) {
        const BuildWrite *w = ASSERT_PTR(userdata);

        return metrics_build_write(w->build, w->manager, f);
}

int metrics_write_textfile(Manager *m, MetricsBuild *b, const char *dir) {
        return metrics_file_replace(dir, write_build, &(BuildWrite) { b, m });
}

void metrics_move_textfile(Manager *m, const char *old_dir) {
        const char *dir = m->config.metrics_textfile_dir;
        MetricsBuild *b = NULL;
        int r;

        /* the old dir's file is ours, or a killed predecessor's (we hold
         * the state dir's lock: no other daemon runs), ticked or not */
        if (streq_ptr(old_dir, dir))
                return;
        r = metrics_file_remove(old_dir);
        if (r < 0)
                log_warning_errno(r, "Cannot remove the metrics file in %s: %m", old_dir);
        if (!dir)
                return;
        /* now, not at the next metrics tick: a reader of the new dir finds it
         * at once (a reload decides every disk on the loop anyway) */
        r = build_whole(m, &b);
        if (r == 0)
                r = metrics_write_textfile(m, b, dir);
        metrics_build_free(b);
        if (r < 0)
                log_warning_errno(r, "Cannot write metrics to %s, ignoring: %m", dir);
}
