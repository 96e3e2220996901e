/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --replay: the same decide() and dynamic_step() the daemon runs, over a
 * recording instead of a live system. Deterministic: the timeline depends
 * only on the recording and the policies. */
#include <cjson/cJSON.h>

#include "decide.h"
#include "dynamic.h"
#include "log.h"
#include "plan.h"
#include "record.h"
#include "replay.h"
#include "util.h"

typedef struct ReplayDevice {
        DeviceFacts facts;
        PlanBuffer buffer;
        Plan plan;
        DynState dyn;
        DiskCounters stat;
        bool have_stat;
} ReplayDevice;

typedef struct Replay {
        const PolicySet *policies;
        KernelCaps caps;
        bool have_header;
        ReplayDevice *devices;
        size_t n_devices;
        double last_t;
        uint64_t tick;
        FILE *out;
} Replay;

static ReplayDevice *replay_find(Replay *r, const char *name) {
        for (size_t i = 0; i < r->n_devices; i++)
                if (streq(r->devices[i].facts.name, name))
                        return &r->devices[i];
        return NULL;
}

/* As device_process() does: the state machine's rings are sized when the
 * plan is decided, not on every tick. */
static int replay_decide(Replay *r, ReplayDevice *d) {
        DecideInput in = { .facts = &d->facts, .caps = &r->caps, .policies = r->policies, .busy = d->dyn.busy };

        d->plan.items = d->buffer.items;        /* the arrays may have moved */
        d->plan.matched = d->buffer.matched;
        decide(&in, &d->plan);
        if (d->plan.managed && d->plan.dynamic)
                return dyn_state_fit(&d->dyn, d->plan.dynamic);
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
                d = &n[r->n_devices++];
                *d = (ReplayDevice) {};
        }
        d->facts = f;
        return replay_decide(r, d);
}

static int print_flip(Replay *r, double t, const ReplayDevice *d, const DynDecision *dec) {
        cJSON *j = cJSON_CreateObject();
        char *text;

        cJSON_AddNumberToObject(j, "t", t);
        cJSON_AddStringToObject(j, "device", d->facts.name);
        cJSON_AddStringToObject(j, "policy", d->plan.dynamic_source ?: "");
        cJSON_AddStringToObject(j, "from", dec->to_busy ? "base" : "busy");
        cJSON_AddStringToObject(j, "to", dec->to_busy ? "busy" : "base");
        cJSON_AddStringToObject(j, "condition", dec->reason);
        text = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!text)
                return -ENOMEM;
        fprintf(r->out, "%s\n", text);
        free(text);
        return 0;
}

static int replay_tick(Replay *r, const cJSON *j) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "t");
        const cJSON *stats = cJSON_GetObjectItemCaseSensitive(j, "stats"), *s;
        double interval;

        if (!cJSON_IsNumber(t) || !cJSON_IsObject(stats))
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
                if (!d->plan.managed || !d->plan.dynamic)
                        continue;
                if (dynamic_step(d->plan.dynamic, &d->dyn, &sig, r->tick, &dec) < 0)
                        return -ENOMEM;
                if (!dec.flip)
                        continue;
                if (print_flip(r, t->valuedouble, d, &dec) < 0 || replay_decide(r, d) < 0)
                        return -ENOMEM;
        }
        return 0;
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
        return replay_tick(r, j);
}

int replay_run(const char *path, const PolicySet *policies, FILE *out) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        Replay r = { .policies = policies, .last_t = -1, .out = out };
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
        for (size_t i = 0; i < r.n_devices; i++)
                dyn_state_done(&r.devices[i].dyn);
        free(r.devices);
        return ret;
}
