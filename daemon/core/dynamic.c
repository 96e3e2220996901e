/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hysteresis (separate enter and leave conditions), a duration for each,
 * a minimum dwell time and a cap on flips per window: load that oscillates
 * around a threshold must not make the device flap. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dynamic.h"
#include "util.h"

bool condition_holds(const Condition *c, const Signals *s) {
        double v = signals_get(s, c->signal);

        /* an unknown signal (dispatch_busy without debugfs, a ratio over a
         * tick without I/O) satisfies no condition, whichever way it points */
        if (!signal_known(v))
                return false;
        switch (c->op) {
        case CMP_LT: return v < c->threshold;
        case CMP_LE: return v <= c->threshold;
        case CMP_GT: return v > c->threshold;
        case CMP_GE: return v >= c->threshold;
        }
        return false;
}

static bool all_hold(const Condition *c, unsigned n, const Signals *s) {
        for (unsigned i = 0; i < n; i++)
                if (!condition_holds(&c[i], s))
                        return false;
        return n > 0;
}

/* s->extra, allocated if it has none; NULL without memory. */
static DynExtra *dyn_extra(DynState *s) {
        if (!s->extra)
                s->extra = calloc(1, sizeof(DynExtra));
        return s->extra;
}

/* Frees s->extra once nothing is in it. */
static void dyn_extra_trim(DynState *s) {
        const DynExtra *x = s->extra;

        if (x && !x->history && !x->flip_ticks && x->flips == 0 && x->capped == 0)
                s->extra = mfree(s->extra);
}

static float (*dyn_history(const DynState *s))[_SIGNAL_MAX] {
        return s->extra ? s->extra->history : NULL;
}

static uint32_t *dyn_flip_ticks(const DynState *s) {
        return s->extra ? s->extra->flip_ticks : NULL;
}

unsigned dyn_state_flips(const DynState *s) {
        return s->extra ? s->extra->flips : 0;
}

unsigned dyn_state_capped(const DynState *s) {
        return s->extra ? s->extra->capped : 0;
}

static void history_push(DynState *s, const Signals *sig) {
        for (int i = 0; i < _SIGNAL_MAX; i++)
                s->extra->history[s->history_pos][i] = (float) signals_get(sig, (SignalId) i);
        s->history_pos = (s->history_pos + 1) % DYNAMIC_WINDOW_MAX;
        if (s->n_history < DYNAMIC_WINDOW_MAX)
                s->n_history++;
}

/* Mean of the last `window` samples, signal by signal. An unknown value
 * (dispatch_busy without debugfs, a ratio over a tick without I/O) is
 * left out of its signal's mean, not counted as -1 or 0; a signal unknown
 * in every sample stays unknown. */
static void history_average(const DynState *s, unsigned window, Signals *ret) {
        unsigned n = window < s->n_history ? window : s->n_history, known[_SIGNAL_MAX] = {};
        double sum[_SIGNAL_MAX] = {};

        for (unsigned k = 0; k < n; k++) {
                const float *h = s->extra->history[(s->history_pos + DYNAMIC_WINDOW_MAX - 1 - k) % DYNAMIC_WINDOW_MAX];
                for (int i = 0; i < _SIGNAL_MAX; i++)
                        if (signal_known(h[i])) {
                                sum[i] += h[i];
                                known[i]++;
                        }
        }
        *ret = (Signals) { .valid = n > 0 };
        if (n == 0)
                return;
        for (int i = 0; i < _SIGNAL_MAX; i++)
                signals_set(ret, (SignalId) i, known[i] ? sum[i] / known[i] : SIGNAL_UNKNOWN);
}

static unsigned flips_within(const DynState *s, uint64_t tick, unsigned window) {
        unsigned n = 0;

        for (unsigned i = 0; i < s->n_flip_ticks; i++)
                if ((uint32_t) tick - s->extra->flip_ticks[i] < window)
                        n++;
        return n;
}

static void flip_ring_push(DynState *s, uint64_t tick) {
        s->extra->flip_ticks[s->flip_pos] = (uint32_t) tick;
        s->flip_pos = (s->flip_pos + 1) % s->flip_ring;
        if (s->n_flip_ticks < s->flip_ring)
                s->n_flip_ticks++;
}

/* A ring to keep has its s->extra already; the trim is the caller's. */
static int flip_ring_fit(DynState *s, unsigned size) {
        DynState old = *s;
        uint32_t *old_ticks = dyn_flip_ticks(s);
        unsigned keep = old_ticks ? old.n_flip_ticks : 0;
        uint32_t *ring = NULL;

        if (size == s->flip_ring)
                return 0;
        /* without flips to keep, the first flip allocates it */
        if (keep > 0 && size > 0 && !(ring = calloc(size, sizeof(uint32_t))))
                return -ENOMEM;
        if (s->extra)
                s->extra->flip_ticks = ring;
        s->flip_ring = size;
        s->n_flip_ticks = s->flip_pos = 0;
        /* the newest that fit, oldest of them first */
        if (!ring)
                keep = 0;
        else if (keep > size)
                keep = size;
        for (unsigned k = keep; k > 0; k--)
                flip_ring_push(s, old_ticks[(old.flip_pos + old.flip_ring - k) % old.flip_ring]);
        free(old_ticks);
        return 0;
}

/* At the first flip. -ENOMEM leaves s as it was. */
static int flip_ring_new(DynState *s) {
        DynExtra *x = dyn_extra(s);

        if (x && (x->flip_ticks = calloc(s->flip_ring, sizeof(uint32_t))))
                return 0;
        dyn_extra_trim(s);
        return -ENOMEM;
}

int dyn_state_fit(DynState *s, const DynamicPolicy *p) {
        bool want_history = p->window > 1;
        float (*old)[_SIGNAL_MAX] = dyn_history(s), (*history)[_SIGNAL_MAX] = old;

        /* the cap holds a flip back only after one, which made the extra
         * that counts it (policy.c refuses max_flips = 0) */
        assert(p->max_flips >= 1);
        if (want_history != (history != NULL)) {
                history = want_history ? calloc(DYNAMIC_WINDOW_MAX, sizeof(*history)) : NULL;
                if (want_history && !history)
                        return -ENOMEM;
        }
        if ((history && !dyn_extra(s)) || flip_ring_fit(s, p->max_flips) < 0) {
                if (history != old)
                        free(history);
                dyn_extra_trim(s);      /* the one allocated here, if it was */
                return -ENOMEM;
        }
        if (history != old) {
                free(old);
                if (s->extra)   /* a history dropped had it, a new one has it */
                        s->extra->history = history;
                s->n_history = s->history_pos = 0;
        }
        dyn_extra_trim(s);
        return 0;
}

void dyn_state_done(DynState *s) {
        if (!s)
                return;
        if (s->extra) {
                free(s->extra->history);
                free(s->extra->flip_ticks);
                s->extra = mfree(s->extra);
        }
        s->n_history = s->history_pos = s->flip_ring = s->n_flip_ticks = s->flip_pos = 0;
}

static void describe(const Condition *c, unsigned n, unsigned ticks, const Signals *avg, char *buf, size_t size) {
        size_t len = 0;

        buf[0] = 0;
        for (unsigned i = 0; i < n && len < size; i++) {
                char cond[64];

                (void) condition_format(&c[i], cond, sizeof(cond));
                len += (size_t) snprintf(buf + len, size - len, "%s%s (%.1f)", i ? " and " : "", cond,
                                         signals_get(avg, c[i].signal));
        }
        if (len < size)
                snprintf(buf + len, size - len, " for %u ticks", ticks);
}

int dynamic_step(const DynamicPolicy *p, DynState *s, const Signals *sig, uint64_t tick, DynDecision *ret) {
        const Condition *conds;
        unsigned n, need;
        Signals avg;

        *ret = (DynDecision) {};
        if (!s->started) {
                s->started = true;
                s->since_tick = (uint32_t) tick;
        }
        if (!sig->valid)
                return 0;       /* no baseline or a counter wrapped: hold everything */
        assert(s->flip_ring == p->max_flips && (p->window > 1) == (dyn_history(s) != NULL)); /* dyn_state_fit() */
        if (p->window > 1) {
                history_push(s, sig);
                history_average(s, p->window, &avg);
        } else
                avg = *sig;     /* the common case costs no ring at all */

        conds = s->busy ? p->leave : p->enter;
        n = s->busy ? p->n_leave : p->n_enter;
        need = s->busy ? p->leave_ticks : p->enter_ticks;
        /* saturating: a streak held for 2^32 ticks stays long enough */
        s->streak = all_hold(conds, n, &avg) ? s->streak + (s->streak < UINT32_MAX) : 0;
        if (s->streak < need || (uint32_t) ((uint32_t) tick - s->since_tick) < p->min_dwell_ticks)
                return 0;
        if (flips_within(s, tick, p->flip_window_ticks) >= p->max_flips) {
                s->extra->capped++;     /* a flip before: the flip ring is there */
                return 0;
        }
        if (!dyn_flip_ticks(s) && flip_ring_new(s) < 0)
                return -ENOMEM;

        ret->flip = true;
        ret->to_busy = !s->busy;
        describe(conds, n, need, &avg, ret->reason, sizeof(ret->reason));
        s->busy = !s->busy;
        s->since_tick = (uint32_t) tick;
        s->streak = 0;
        flip_ring_push(s, tick);
        s->extra->flips++;
        return 0;
}
