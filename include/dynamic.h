/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* dynamic: the busy/base state machine of one device. Pure: previous
 * state + this tick's signals + policy → next state and whether to flip.
 * The daemon, --replay and the unit tests run the same function. */

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "sample.h"

#define DYNAMIC_FLIPS_MAX DYNAMIC_FLIPS_CAP

typedef struct DynState {
        bool busy;
        bool started;
        uint64_t since_tick;                    /* tick of the last flip (or the first sample) */
        unsigned enter_streak, leave_streak;
        /* Ring of the last valid samples, DYNAMIC_WINDOW_MAX rows. The caller
         * provides it when the policy's window is over 1 tick, and leaves it
         * NULL otherwise: the default window of 1 needs none, and 1000
         * devices would carry 416 KB of it for nothing. */
        float (*history)[_SIGNAL_MAX];
        unsigned n_history, history_pos;
        uint32_t flip_ticks[DYNAMIC_FLIPS_MAX]; /* ring, for the flip cap (tick numbers mod 2^32) */
        unsigned n_flip_ticks, flip_pos;
        unsigned flips;
        unsigned capped;                        /* flips the cap held back */
        double flip_cost_ms;                    /* time spent applying flips */
        Signals last;                           /* the averaged signals of the last tick */
} DynState;

typedef struct DynDecision {
        bool flip;
        bool to_busy;
        char reason[160];       /* the condition that fired, with the values seen */
} DynDecision;

void dynamic_step(const DynamicPolicy *p, DynState *s, const Signals *sig, uint64_t tick, DynDecision *ret);
bool condition_holds(const Condition *c, const Signals *s);
