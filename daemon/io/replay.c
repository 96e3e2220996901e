/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --replay: the same decide() and dynamic_step() the daemon runs, over a
 * recording instead of a live system. Deterministic: the timeline depends
 * only on the recording and the policies. */
#include <inttypes.h>

#include <cjson/cJSON.h>

#include "decide.h"
#include "dynamic.h"
#include "log.h"
#include "plan.h"
#include "record.h"
#include "replay.h"
#include "trial-report.h"
#include "util.h"

typedef struct ReplayDevice {
        DeviceFacts facts;
        PlanBuffer buffer;
        Plan plan;
        DynState dyn;
        DiskCounters stat;
        bool have_stat;
        DeviceTrial *trial;     /* NULL: none */
} ReplayDevice;

typedef struct Replay {
        const PolicySet *policies;
        bool writes;            /* not mode=observe: trials may run */
        KernelCaps caps;
        bool have_header;
        ReplayDevice *devices;
        size_t n_devices;
        double last_t;
        uint64_t tick;
        FILE *out;
        /* policy trials' seeds the recording has, not taken yet: one a device */
        RecordTrialStart *seeds;
        size_t n_seeds;
} Replay;

static ReplayDevice *replay_find(Replay *r, const char *name) {
        for (size_t i = 0; i < r->n_devices; i++)
                if (streq(r->devices[i].facts.name, name))
                        return &r->devices[i];
        return NULL;
}

static int replay_trial_after_decide(Replay *r, ReplayDevice *d, double t);

/* As device_process() does: with the trial's arm layered; the state
 * machine's rings are sized when the plan is decided, not on every tick. */
static int replay_decide_only(Replay *r, ReplayDevice *d) {
        DecideInput in = { .facts = &d->facts, .caps = &r->caps, .policies = r->policies, .busy = d->dyn.busy };

        device_trial_decide_input(d->trial, &in);
        d->plan.items = d->buffer.items;
        d->plan.matched = d->buffer.matched;
        decide(&in, &d->plan);
        if (d->plan.managed && d->plan.dynamic)
                return dyn_state_fit(&d->dyn, d->plan.dynamic);
        return 0;
}

/* As the daemon's pass: decide, then what the plan means for a trial. */
static int replay_decide(Replay *r, ReplayDevice *d, double t) {
        int k = replay_decide_only(r, d);

        return k < 0 ? k : replay_trial_after_decide(r, d, t);
}

/* One timeline line: the object j, consumed. */
static int print_line(Replay *r, cJSON *j) {
        char *text = j ? cJSON_PrintUnformatted(j) : NULL;

        cJSON_Delete(j);
        if (!text)
                return -ENOMEM;
        fprintf(r->out, "%s\n", text);
        free(text);
        return 0;
}

static cJSON *trial_line(double t, const ReplayDevice *d, const char *event) {
        cJSON *j = cJSON_CreateObject();

        cJSON_AddNumberToObject(j, "t", t);
        cJSON_AddStringToObject(j, "device", d->facts.name);
        cJSON_AddStringToObject(j, "trial", event);
        return j;
}

/* Why d may not run a trial: the daemon's rule (trial_plan_why_not())
 * after its mode; a pause or an override is the recording's stop line. */
static const char *replay_trial_why_not(const Replay *r, const ReplayDevice *d) {
        if (!r->writes)
                return "mode=observe";
        return trial_plan_why_not(&d->plan, &d->facts);
}

/* Stops d's trial and prints why; the arm it leaves is decided again. */
static int replay_trial_stop(Replay *r, ReplayDevice *d, double t, const char *why) {
        cJSON *j = trial_line(t, d, "stop");
        int changed = device_trial_stop(d->trial, why, (uint64_t) t);

        cJSON_AddStringToObject(j, "why", why);
        if (print_line(r, j) < 0)
                return -ENOMEM;
        return changed ? replay_decide_only(r, d) : 0;
}

/* A new trial on d; what one before kept carries over, as in the daemon. */
static int replay_trial_new(ReplayDevice *d, const TrialPolicy *config, bool by_hand, uint64_t seed) {
        DeviceTrial *t = calloc(1, sizeof(DeviceTrial));

        if (!t)
                return -ENOMEM;
        if (device_trial_init(t, config, by_hand, seed) < 0) {
                free(t);
                return -EINVAL;
        }
        device_trial_carry_kept(t, d->trial);
        device_trial_carry_switches(t, d->trial);
        free(d->trial);
        d->trial = t;
        return 0;
}

/* The seed of d's policy trial: the recording's, else one of the device
 * (a what-if over a recording made without the trial). */
static uint64_t replay_policy_seed(Replay *r, ReplayDevice *d) {
        for (size_t i = 0; i < r->n_seeds; i++)
                if (streq(r->seeds[i].device, d->facts.name)) {
                        uint64_t seed = r->seeds[i].seed;

                        r->seeds[i] = r->seeds[--r->n_seeds];
                        return seed;
                }
        return device_trial_seed(0, d->facts.major, d->facts.minor);
}

static int replay_trial_after_decide(Replay *r, ReplayDevice *d, double t) {
        const char *why = replay_trial_why_not(r, d);
        int k;

        if (d->trial && !d->trial->by_hand && !(d->plan.trial && trial_policy_equal(d->plan.trial, &d->trial->config))) {
                d->trial = mfree(d->trial);
                k = replay_decide_only(r, d);
                if (k < 0)
                        return k;
        }
        if (device_trial_live(d->trial) && why)
                return replay_trial_stop(r, d, t, why);
        if (!d->trial && !why && d->plan.trial) {
                k = replay_trial_new(d, d->plan.trial, false, replay_policy_seed(r, d));
                if (k == -ENOMEM)
                        return k;
        }
        return 0;
}

static int replay_device(Replay *r, const cJSON *j) {
        DeviceFacts f;
        ReplayDevice *d, *n;

        if (record_parse_device(j, &f) < 0)
                return -EBADMSG;
        d = replay_find(r, f.name);
        if (!d) {
                n = realloc(r->devices, sizeof(ReplayDevice) * (r->n_devices + 1));
                if (!n)
                        return -ENOMEM;
                r->devices = n;
                for (size_t i = 0; i < r->n_devices; i++) {     /* the plans point into their buffers */
                        n[i].plan.items = n[i].buffer.items;
                        n[i].plan.matched = n[i].buffer.matched;
                }
                d = &n[r->n_devices++];
                *d = (ReplayDevice) {};
        }
        d->facts = f;
        return replay_decide(r, d, r->last_t >= 0 ? r->last_t : 0);
}

static int print_flip(Replay *r, double t, const ReplayDevice *d, const DynDecision *dec) {
        cJSON *j = cJSON_CreateObject();

        cJSON_AddNumberToObject(j, "t", t);
        cJSON_AddStringToObject(j, "device", d->facts.name);
        cJSON_AddStringToObject(j, "policy", d->plan.dynamic_source ?: "");
        cJSON_AddStringToObject(j, "from", dec->to_busy ? "base" : "busy");
        cJSON_AddStringToObject(j, "to", dec->to_busy ? "busy" : "base");
        cJSON_AddStringToObject(j, "condition", dec->reason);
        return print_line(r, j);
}

static int print_begin(Replay *r, double t, const ReplayDevice *d, TrialBegin begin) {
        const TrialOutcome *o = device_trial_last(d->trial);
        char name[SCHED_CHOICE_TEXT_MAX], seed[24];
        cJSON *j = trial_line(t, d, begin == TRIAL_BEGAN ? "start" : "skip");

        (void) sched_choice_format(&o->candidate, name, sizeof(name));
        cJSON_AddStringToObject(j, "candidate", name);
        cJSON_AddStringToObject(j, "incumbent", o->incumbent);
        if (begin == TRIAL_BEGAN) {
                /* a string: a number in JSON holds 53 bits */
                (void) snprintf(seed, sizeof(seed), "%" PRIu64, d->trial->seed);
                cJSON_AddStringToObject(j, "seed", seed);
                cJSON_AddStringToObject(j, "started_by", d->trial->by_hand ? "blkpolicyctl" : "policy");
        } else
                cJSON_AddStringToObject(j, "reason", o->result.reason);
        return print_line(r, j);
}

/* The verdict line: the outcome as device and explain show it. */
static int print_verdict(Replay *r, double t, const ReplayDevice *d) {
        cJSON *j = trial_line(t, d, "verdict"), *o = trial_outcome_json(device_trial_last(d->trial)), *c;

        if (!o) {
                cJSON_Delete(j);
                return -ENOMEM;
        }
        while ((c = o->child)) {
                cJSON_DetachItemViaPointer(o, c);
                cJSON_AddItemToObject(j, c->string, c);
        }
        cJSON_Delete(o);
        return print_line(r, j);
}

static int print_arm(Replay *r, double t, const ReplayDevice *d, uint64_t now_ms) {
        cJSON *j = trial_line(t, d, "arm");

        cJSON_AddStringToObject(j, "arm", d->trial->arm == TRIAL_ARM_CANDIDATE ? "candidate" : "incumbent");
        cJSON_AddNumberToObject(j, "at_ms", (double) (now_ms - d->trial->started_ms));
        return print_line(r, j);
}

/* d's trial at a tick, as device_trial_step() in the daemon: unless the
 * recording says it was not stepped (a pass in flight) or was stopped. */
static int replay_trial_step(Replay *r, ReplayDevice *d, const cJSON *note, double t, const DiskStat *st) {
        DeviceTrial *tr = d->trial;
        uint64_t now_ms = (uint64_t) t;
        const char *event = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(note, "event"));
        const char *why;
        int changed;

        if (!device_trial_live(tr) || (event && streq(event, "wait")))
                return 0;
        if (event && streq(event, "stop"))
                why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(note, "why")) ?: "stopped";
        else
                why = replay_trial_why_not(r, d);
        if (why)
                return replay_trial_stop(r, d, t, why);
        if (tr->phase == TRIAL_PHASE_WAITING) {
                DecideInput in = { .facts = &d->facts, .caps = &r->caps, .policies = r->policies };
                TrialBegin begin = TRIAL_BEGIN_IN_FORCE;

                changed = device_trial_begin(tr, &d->plan, &in, now_ms, st, &begin);
                if (changed >= 0 && begin != TRIAL_BEGIN_IDLE && print_begin(r, t, d, begin) < 0)
                        return -ENOMEM;
        } else {
                changed = device_trial_tick(tr, now_ms, st);
                if (tr->phase != TRIAL_PHASE_RUNNING && print_verdict(r, t, d) < 0)
                        return -ENOMEM;
        }
        if (changed <= 0)
                return 0;
        return print_arm(r, t, d, now_ms) < 0 ? -ENOMEM : replay_decide_only(r, d);
}

static int replay_tick(Replay *r, const cJSON *j) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "t");
        const cJSON *stats = cJSON_GetObjectItemCaseSensitive(j, "stats"), *s;
        const cJSON *notes = cJSON_GetObjectItemCaseSensitive(j, "trials");
        double interval;

        /* t is a trial's clock: a whole number of milliseconds */
        if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble < 9007199254740992.0) ||
            !cJSON_IsObject(stats))
                return -EBADMSG;
        interval = r->last_t >= 0 ? t->valuedouble - r->last_t : 0;
        r->last_t = t->valuedouble;
        r->tick++;
        cJSON_ArrayForEach(s, stats) {
                ReplayDevice *d = replay_find(r, s->string);
                DiskStat st;
                Signals sig;
                DynDecision dec;
                double busy = -1;

                if (!d || record_parse_stat(s, &st, &busy) < 0)
                        continue;
                signals_compute(d->have_stat ? &d->stat : NULL, &st, interval, busy, &sig);
                d->stat = st.c;
                d->have_stat = true;
                /* a trial's window is measured from the same sample */
                if (replay_trial_step(r, d, cJSON_GetObjectItemCaseSensitive(notes, s->string), t->valuedouble, &st) < 0)
                        return -ENOMEM;
                if (!d->plan.managed || !d->plan.dynamic)
                        continue;
                if (dynamic_step(d->plan.dynamic, &d->dyn, &sig, r->tick, &dec) < 0)
                        return -ENOMEM;
                if (!dec.flip)
                        continue;
                if (print_flip(r, t->valuedouble, d, &dec) < 0 || replay_decide(r, d, t->valuedouble) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Where the seed of name's policy trial goes: the one it had, or a new one. */
static RecordTrialStart *replay_seed_slot(Replay *r, const char *name) {
        RecordTrialStart *n;

        for (size_t i = 0; i < r->n_seeds; i++)
                if (streq(r->seeds[i].device, name))
                        return &r->seeds[i];
        n = reallocarray(r->seeds, r->n_seeds + 1, sizeof(RecordTrialStart));
        if (!n)
                return NULL;
        r->seeds = n;
        return &n[r->n_seeds++];
}

/* A policy trial set up in the daemon, with its seed: the trial the
 * replay's policies start on the device gets it, now if it waits for its
 * first candidate, else when the device's line comes. The daemon sets up
 * a policy trial only where the device has none: one the replay has that
 * ran is one the daemon dropped (a reload changed its [Trial]), and the
 * replay's policies start another, as the daemon's new ones did. */
static int replay_policy_start(Replay *r, const RecordTrialStart *start, double t) {
        ReplayDevice *d = replay_find(r, start->device);
        DeviceTrial done;
        RecordTrialStart *n;
        int k;

        if (d && d->trial && !d->trial->by_hand && d->trial->phase == TRIAL_PHASE_WAITING && d->trial->n_outcomes == 0) {
                d->trial->seed = start->seed;
                return 0;
        }
        n = replay_seed_slot(r, start->device);
        if (!n)
                return -ENOMEM;
        *n = *start;
        if (!d || !d->trial)
                return 0;
        done = *d->trial;
        d->trial = mfree(d->trial);
        k = replay_decide_only(r, d);
        if (k >= 0)
                k = replay_trial_after_decide(r, d, t);
        /* the daemon's re-trial after a verdict: the same hour of switches */
        if (k >= 0 && d->trial && done.phase == TRIAL_PHASE_DONE)
                (void) device_trial_follow(d->trial, &done, (uint64_t) t);
        return k;
}

/* blkpolicyctl trial: refused where the daemon would, replacing one that runs. */
static int replay_by_hand_start(Replay *r, ReplayDevice *d, double t, const RecordTrialStart *start) {
        int k;

        if (replay_trial_why_not(r, d))
                return 0;
        if (device_trial_live(d->trial)) {
                k = replay_trial_stop(r, d, t, "another trial asked for");
                if (k < 0)
                        return k;
        }
        k = replay_trial_new(d, &start->config, true, start->seed);
        if (k < 0)
                return k;
        return replay_decide_only(r, d);
}

static int replay_trial_line(Replay *r, const cJSON *j) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "t");
        RecordTrialStart start;
        const char *name, *why;
        ReplayDevice *d;
        int k = record_parse_trial(cJSON_GetObjectItemCaseSensitive(j, "trial"), &start, &name, &why);

        if (k < 0 || !cJSON_IsNumber(t))
                return -EBADMSG;
        if (k > 0 && !start.by_hand)
                return replay_policy_start(r, &start, t->valuedouble);
        d = replay_find(r, name);
        if (!d)
                return 0;
        if (k > 0)
                return replay_by_hand_start(r, d, t->valuedouble, &start);
        return device_trial_live(d->trial) ? replay_trial_stop(r, d, t->valuedouble, why) : 0;
}

static int replay_line(Replay *r, const cJSON *j) {
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(j, "device");

        if (cJSON_GetObjectItemCaseSensitive(j, "blkpolicyd_recording")) {
                r->have_header = true;
                return record_parse_header(j, &r->caps);
        }
        if (!r->have_header)
                return -EBADMSG;
        if (cJSON_IsObject(dev))
                return replay_device(r, dev);
        if (cJSON_GetObjectItemCaseSensitive(j, "trial"))
                return replay_trial_line(r, j);
        return replay_tick(r, j);
}

int replay_run(const char *path, const PolicySet *policies, bool writes, FILE *out) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        Replay r = { .policies = policies, .writes = writes, .last_t = -1, .out = out };
        size_t size = 0;
        unsigned lineno = 0;
        ssize_t len;
        int ret = 0;

        ret = fopen_regular(path, &f);
        if (ret == -EBADFD)
                return log_error_errno(ret, "%s: not a regular file, refusing to replay it", path);
        if (ret < 0)
                return log_error_errno(ret, "%s: cannot open: %m", path);
        while ((len = getline(&line, &size, f)) >= 0) {
                cJSON *j = cJSON_ParseWithLength(line, (size_t) len);
                int k;

                lineno++;
                k = j ? replay_line(&r, j) : -EBADMSG;
                cJSON_Delete(j);
                if (k == -ENOMEM) {
                        ret = log_oom();
                        break;
                }
                if (k < 0)
                        log_warning("%s:%u: not a recording line, skipping", path, lineno);
        }
        if (ret == 0 && !r.have_header)
                ret = log_error_errno(EBADMSG, "%s: no recording header", path);
        for (size_t i = 0; i < r.n_devices; i++) {
                dyn_state_done(&r.devices[i].dyn);
                free(r.devices[i].trial);
        }
        free(r.devices);
        free(r.seeds);
        return ret;
}
