/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a device looks like to the control socket: the report of --once,
 * plus what only a running daemon knows (pause, override, flip history),
 * and "explain": every policy considered and why it matched or not. */
#include <math.h>

#include "conflicts-report.h"
#include "decide.h"
#include "device.h"
#include "explain.h"
#include "manager.h"
#include "report.h"
#include "util.h"

static cJSON *sched_choice_json(const SchedChoice *c) {
        char buf[SCHED_NAME_MAX + 16];

        if (!c)
                return cJSON_CreateNull();
        (void) sched_choice_format(c, buf, sizeof(buf));
        return cJSON_CreateString(buf);
}

/* A bound that is not known yet (+inf before a look) is null. */
static cJSON *finite_or_null(double v) {
        return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/* One candidate's trial: the evidence and the verdict. */
static cJSON *trial_outcome_json(const TrialOutcome *o) {
        cJSON *j = cJSON_CreateObject(), *i;
        char name[SCHED_NAME_MAX + 16];

        (void) sched_choice_format(&o->candidate, name, sizeof(name));
        cJSON_AddStringToObject(j, "candidate", name);
        cJSON_AddStringToObject(j, "incumbent", o->incumbent);
        cJSON_AddStringToObject(j, "verdict", o->skipped ? "skipped" : o->stopped ? "stopped" :
                                trial_verdict_to_string(o->result.verdict));
        if (o->result.verdict == TRIAL_UNDECIDED && !o->stopped)
                cJSON_AddNullToObject(j, "kept");
        else
                cJSON_AddStringToObject(j, "kept", o->result.keep_candidate ? name : o->incumbent);
        cJSON_AddNumberToObject(j, "windows", o->result.windows);
        cJSON_AddNumberToObject(j, "pairs", o->result.pairs);
        /* the incumbent's busy time per byte over the candidate's: above 1, the candidate is faster */
        cJSON_AddNumberToObject(j, "estimate", o->result.ratio);
        i = cJSON_AddArrayToObject(j, "interval");
        cJSON_AddItemToArray(i, cJSON_CreateNumber(o->result.ratio_lo));
        cJSON_AddItemToArray(i, finite_or_null(o->result.ratio_hi));
        cJSON_AddStringToObject(j, "reason", o->result.reason);
        return j;
}

static const char *const run_phase_names[] = {
        [TRIAL_RUN_SETTLING] = "settling",
        [TRIAL_RUN_COUNTING] = "counting",
        [TRIAL_RUN_HELD] = "held",
        [TRIAL_RUN_DONE] = "done",
};

static cJSON *shape_json(const TrialShape *s) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "read_share", s->read_share);
        cJSON_AddNumberToObject(o, "request_bytes", s->request_bytes);
        return o;
}

/* What a done trial's verdict rests on: the workload it was taken on, the
 * watch for another, and the memory it came from. */
static void trial_verdict_basis_json(cJSON *o, const DeviceTrial *t) {
        cJSON *r;

        cJSON_AddItemToObject(o, "shape", t->has_shape ? shape_json(&t->shape) : cJSON_CreateNull());
        if (t->watching) {
                r = cJSON_AddObjectToObject(o, "watch");
                cJSON_AddNumberToObject(r, "differing", t->watch.differing);
                cJSON_AddItemToObject(r, "last", t->watch.has_last ? shape_json(&t->watch.last) : cJSON_CreateNull());
        } else
                cJSON_AddNullToObject(o, "watch");
        cJSON_AddNumberToObject(o, "retrials", t->retrials);
        if (!t->recalled) {
                cJSON_AddNullToObject(o, "recalled");
                return;
        }
        r = cJSON_AddObjectToObject(o, "recalled");
        cJSON_AddStringToObject(r, "verdict", trial_verdict_to_string(t->recalled_verdict));
        cJSON_AddNumberToObject(r, "estimate", t->recalled_estimate);
        cJSON_AddNumberToObject(r, "at", (double) t->recalled_at_sec);
}

/* d's trial, null without one: its phase, the arm in force, and each
 * candidate's evidence, the running one's so far. */
static cJSON *trial_json(const Device *d) {
        const DeviceTrial *t = device_trial(d);
        cJSON *o, *a;

        if (!t)
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "phase", trial_phase_to_string(t->phase));
        cJSON_AddStringToObject(o, "started_by", t->by_hand ? "blkpolicyctl" : "policy");
        if (t->phase == TRIAL_PHASE_RUNNING) {
                cJSON_AddStringToObject(o, "arm", t->arm == TRIAL_ARM_CANDIDATE ? "candidate" : "incumbent");
                cJSON_AddStringToObject(o, "window", run_phase_names[t->run.phase]);
        } else {
                cJSON_AddNullToObject(o, "arm");
                cJSON_AddNullToObject(o, "window");
        }
        /* null: the policies' own choice */
        cJSON_AddItemToObject(o, "in_force", sched_choice_json(device_trial_arm(t)));
        cJSON_AddItemToObject(o, "kept", sched_choice_json(t->has_kept ? &t->kept : NULL));
        cJSON_AddNumberToObject(o, "window_s", (double) t->config.window_ms / 1000);
        cJSON_AddNumberToObject(o, "settle_s", (double) t->config.settle_ms / 1000);
        cJSON_AddNumberToObject(o, "min_gain", t->config.min_gain);
        a = cJSON_AddArrayToObject(o, "candidates");
        for (unsigned i = 0; i < t->config.n_candidates; i++)
                cJSON_AddItemToArray(a, sched_choice_json(&t->config.candidates[i]));
        a = cJSON_AddArrayToObject(o, "outcomes");
        for (unsigned i = 0; i < t->n_outcomes; i++)
                cJSON_AddItemToArray(a, trial_outcome_json(&t->outcomes[i]));
        trial_verdict_basis_json(o, t);
        return o;
}

cJSON *explain_device_report(Manager *m, Device *d) {
        DeviceFacts facts;
        DeviceView view;
        ReportDevice rd = device_report_input(&m->ctx, d, &facts, &view);
        cJSON *o = report_device(&rd);

        cJSON_AddBoolToObject(o, "paused", device_is_paused(&m->ctx, d));
        cJSON_AddBoolToObject(o, "overridden", device_overridden(d));
        if (device_overridden(d))
                cJSON_AddStringToObject(o, "override", device_override_note(d));
        cJSON_AddItemToObject(o, "trial", trial_json(d));
        return o;
}

static cJSON *explain_policies(Manager *m, Device *d) {
        DeviceFacts view;
        const DeviceFacts *f = device_facts(d, &view);
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; i < m->policies->n_policies; i++) {
                const Policy *p = m->policies->policies[i];
                const char *why = NULL;
                bool match = decide_policy_matches(p, f, &m->caps, &why);
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "name", p->name);
                cJSON_AddStringToObject(o, "path", p->path);
                cJSON_AddBoolToObject(o, "matched", match);
                cJSON_AddStringToObject(o, "mode", p->observe ? "observe" : "enforce");
                if (why)
                        cJSON_AddStringToObject(o, "failed", why);
                else
                        cJSON_AddNullToObject(o, "failed");
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

static cJSON *explain_history(const Device *d) {
        const DeviceFlips *y = device_flips(d);
        cJSON *a = cJSON_CreateArray();

        for (unsigned k = 0; y && k < y->n_history; k++) {
                const FlipRecord *f = &y->history[(y->history_pos + FLIP_HISTORY - y->n_history + k) % FLIP_HISTORY];
                cJSON *o = cJSON_CreateObject();

                cJSON_AddNumberToObject(o, "tick", (double) f->tick);
                cJSON_AddNumberToObject(o, "uptime_s", f->uptime_s);
                cJSON_AddStringToObject(o, "to", f->to_busy ? "busy" : "base");
                cJSON_AddStringToObject(o, "condition", f->reason);
                cJSON_AddNumberToObject(o, "cost_ms", f->cost_ms);
                cJSON_AddItemToArray(a, o);
        }
        return a;
}

#define STACK_DEPTH_MAX 8         /* deeper than any stack seen: LV on crypt on md on mpath is 4 */

/* The disks one level further below (or above) the names of a level; a
 * name that is no device of the daemon's (a partition) ends its branch. */
static int stack_level_next(Manager *m, char *const *level, bool below, char ***ret) {
        _cleanup_strv_free_ char **next = NULL;

        for (char *const *n = level; n && *n; n++) {
                int r = device_stack_neighbours(&m->ctx, device_find_name(&m->ctx, *n), below, &next);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(next);
        return 0;
}

/* "md0 (raid1)", "dm-0 (LVM-, vg0-root)" */
static void stack_label(Manager *m, const char *name, bool self, char *buf, size_t size) {
        Device *d = device_find_name(&m->ctx, name);
        DeviceFacts view;
        const DeviceFacts *f = d ? device_facts(d, &view) : NULL;
        const char *open = self ? "[" : "", *close = self ? "]" : "";

        if (f && f->stack && (f->stack->dm_name || f->topology.dm_uuid_prefix[0]))
                snprintf(buf, size, "%s%s (%s, %s)%s", open, name, f->topology.dm_uuid_prefix[0] ?
                         f->topology.dm_uuid_prefix : "no uuid", f->stack->dm_name ?: "", close);
        else if (f && f->topology.md_level[0])
                snprintf(buf, size, "%s%s (%s)%s", open, name, f->topology.md_level, close);
        else
                snprintf(buf, size, "%s%s%s", open, name, close);
}

static void stack_append_level(Manager *m, char *const *level, const char *self, char *buf, size_t size) {
        size_t n = strlen(buf);

        for (char *const *l = level; l && *l && n < size; l++) {
                char label[128];

                stack_label(m, *l, streq_ptr(*l, self), label, sizeof(label));
                n += (size_t) snprintf(buf + n, size - n, "%s%s", l == level ? (n ? " -> " : "") : " + ", label);
        }
}

/* The levels below d, deepest first, d, then the levels above:
 * "sda + sdb -> md0 (raid1) -> [dm-0 (LVM-, vg0-root)]", d in brackets.
 * NULL (JSON null) when d is in no stack. */
static int explain_stack(Manager *m, Device *d, cJSON **ret) {
        _cleanup_strv_free_ char **self = NULL;
        char **below[STACK_DEPTH_MAX] = {}, **above[STACK_DEPTH_MAX] = {};
        unsigned n_below = 0, n_above = 0;
        char text[1024] = "";
        int r;

        *ret = NULL;
        if (strv_push(&self, device_name(d)) < 0)
                return -ENOMEM;
        for (r = 0; r >= 0 && n_below < STACK_DEPTH_MAX; n_below++) {
                r = stack_level_next(m, n_below ? below[n_below - 1] : self, true, &below[n_below]);
                if (r < 0 || !below[n_below])
                        break;
        }
        for (; r >= 0 && n_above < STACK_DEPTH_MAX; n_above++) {
                r = stack_level_next(m, n_above ? above[n_above - 1] : self, false, &above[n_above]);
                if (r < 0 || !above[n_above])
                        break;
        }
        for (unsigned i = n_below; r >= 0 && i > 0; i--)
                stack_append_level(m, below[i - 1], NULL, text, sizeof(text));
        if (r >= 0 && (n_below || n_above))
                stack_append_level(m, self, device_name(d), text, sizeof(text));
        for (unsigned i = 0; r >= 0 && i < n_above; i++)
                stack_append_level(m, above[i], NULL, text, sizeof(text));
        for (unsigned i = 0; i < STACK_DEPTH_MAX; i++) {
                strv_free(below[i]);
                strv_free(above[i]);
        }
        if (r < 0)
                return r;
        *ret = text[0] ? cJSON_CreateString(text) : cJSON_CreateNull();
        return 0;
}

cJSON *explain_device(Manager *m, Device *d) {
        cJSON *o = explain_device_report(m, d), *dyn, *stack;

        cJSON_AddItemToObject(o, "policies", explain_policies(m, d));
        cJSON_AddItemToObject(o, "conflicts", conflicts_report_device_json(&m->ctx, d));
        if (explain_stack(m, d, &stack) < 0)
                return cJSON_Delete(o), NULL;
        cJSON_AddItemToObject(o, "stack", stack);
        dyn = cJSON_GetObjectItemCaseSensitive(o, "dynamic");
        if (cJSON_IsObject(dyn))
                cJSON_AddItemToObject(dyn, "history", explain_history(d));
        return o;
}
