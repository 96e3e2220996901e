/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A device's trial verdicts remembered (issue #28, docs/trials.md
 * "Memory"): the key a disk's verdicts are kept under (its identity, model,
 * the kernel, what the trial asks), finding one, taking it, and saving a
 * new one to the file trial_memory= names. Below device-trial.c. */
#include <time.h>

#include "device-internal.h"
#include "device-trial-memory.h"
#include "identity.h"
#include "log.h"
#include "trial-memory-file.h"
#include "util.h"

/* What d's verdicts are remembered under: its identity, model, this
 * kernel, and what the trial asks (incumbent: the policy's scheduler).
 * -ENOENT when none are kept (no trial_memory=, or d is gone). */
static int memo_key(const DeviceContext *c, const Device *d, const DeviceTrial *t, const char *incumbent,
                    TrialMemo *key) {
        int r;

        if (!c->config->trial_memory)
                return -ENOENT;
        *key = (TrialMemo) {};
        r = device_identity_read(c->roots, d->name, key->identity, sizeof(key->identity));
        if (r < 0)
                return r == -ENOMEM ? r : -ENOENT;
        (void) strscpy(key->model, sizeof(key->model), d->kind->facts->model);
        (void) strscpy(key->kernel, sizeof(key->kernel), c->caps->release);
        return trial_fingerprint(incumbent, &t->config, key->trial, sizeof(key->trial)) < 0 ? -ENOENT : 0;
}

static uint64_t now_sec(void) {
        return clock_usec(CLOCK_REALTIME) / 1000000;
}

/* The remembered verdict of d under what t asks whose shape is near
 * shape (NULL: the newest of any), fresh by t's max_age; NULL for none. */
const TrialMemo *device_trial_memory_find(const DeviceContext *c, const Device *d, const DeviceTrial *t,
                                  const char *incumbent, const TrialShape *shape) {
        TrialMemo key;

        if (memo_key(c, d, t, incumbent, &key) < 0)
                return NULL;
        return trial_memory_find(&c->trial_memory, &key, shape, now_sec(), t->config.max_age_ms / 1000);
}

static void log_recall(const Device *d, const TrialMemo *m) {
        char kept[SCHED_NAME_MAX + 16] = "the incumbent", shape[64];

        if (m->has_kept)
                (void) sched_choice_format(&m->kept, kept, sizeof(kept));
        (void) trial_shape_format(&m->shape, shape, sizeof(shape));
        log_notice("%s: a verdict is remembered for this disk, kernel and trial (%s, %.2fx, %s): %s kept, "
                   "no trial", d->name, trial_verdict_to_string(m->verdict), m->estimate, shape, kept);
}

/* What t decided, remembered under d's key and saved: a failure costs a
 * trial after the next restart, nothing else. -ENOMEM. */
int device_trial_memory_save(DeviceContext *c, const Device *d, const DeviceTrial *t) {
        TrialMemo memo;
        int r;

        if (t->by_hand || t->n_outcomes == 0 || memo_key(c, d, t, t->outcomes[0].incumbent, &memo) < 0 ||
            !device_trial_memo(t, now_sec(), &memo))
                return 0;
        r = trial_memory_put(&c->trial_memory, &memo);
        if (r < 0)
                return r;
        r = trial_memory_save(c->config->trial_memory, &c->trial_memory);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_warning_errno(r, "%s: cannot save the trial's verdict in %s, ignoring: %m", d->name,
                                  c->config->trial_memory);
        return 0;
}

/* Done at once from memo, when there is one. 1 when the arm in force
 * changed. */
int device_trial_memory_recall(const Device *d, DeviceTrial *t, const TrialMemo *memo) {
        uint64_t now = now_sec();

        if (!memo)
                return 0;
        log_recall(d, memo);
        return device_trial_recall(t, memo, now > memo->at_sec ? (now - memo->at_sec) * 1000 : 0);
}
