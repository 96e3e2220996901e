/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* dynamic: the busy/base state machine of one device. Pure: previous
 * state + this tick's signals + policy → next state and whether to flip;
 * no I/O, no clock (it only allocates the state's own rings). The daemon,
 * --replay and the unit tests run the same function. */

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "sample.h"

/* The rings a state needs only sometimes, apart: allocated when the first
 * of them is, freed with the last, so that a state without them (the
 * default window, no flip yet: most devices) carries one NULL pointer. */
typedef struct DynRings {
        /* Ring of the last valid samples, DYNAMIC_WINDOW_MAX rows, only when
         * the policy's window is over 1 tick. */
        float (*history)[_SIGNAL_MAX];
        /* Ring of the last flips' tick numbers (mod 2^32), for the flip cap:
         * max_flips of them are all the cap looks at. Allocated at the first
         * flip: most devices never flip. */
        uint32_t *flip_ticks;
} DynRings;

/* Every dynamic device has one: the 32-bit fields first, then the
 * pointer, then the ring positions (bytes: rings hold at most
 * DYNAMIC_WINDOW_MAX and DYNAMIC_FLIPS_CAP) and the flags, so that nothing
 * is padding, 40 bytes. Ticks are kept mod 2^32, as the flip ring keeps
 * them: 136 years of 1 s ticks, and a dwell is a difference of two. */
typedef struct DynState {
        uint32_t since_tick;                    /* tick of the last flip (or the first sample) */
        float flip_cost_ms;                     /* time spent applying flips */
        unsigned enter_streak, leave_streak;
        unsigned flips;
        unsigned capped;                        /* flips the cap held back */
        DynRings *rings;                        /* NULL while neither ring is needed */
        uint8_t n_history, history_pos;
        uint8_t flip_ring, n_flip_ticks, flip_pos;
        bool busy;
        bool started;
} DynState;

_Static_assert(DYNAMIC_WINDOW_MAX <= UINT8_MAX && DYNAMIC_FLIPS_CAP <= UINT8_MAX, "ring positions are bytes");

typedef struct DynDecision {
        bool flip;
        bool to_busy;
        char reason[160];       /* the condition that fired, with the values seen */
} DynDecision;

/* Sizes the rings of s for policy p; s may be fresh (zeroed) or fitted to
 * an earlier policy (a reload): the averaging ring starts empty when the
 * window crosses 1 tick, the flip ring keeps the newest flips that fit.
 * -ENOMEM leaves s as it was. dynamic_step() needs s fitted to its policy. */
int dyn_state_fit(DynState *s, const DynamicPolicy *p);
void dyn_state_done(DynState *s);

/* -ENOMEM: no memory for the flip ring at the first flip; the flip did not
 * happen (the streak stays: the next tick tries again). */
int dynamic_step(const DynamicPolicy *p, DynState *s, const Signals *sig, uint64_t tick, DynDecision *ret);
bool condition_holds(const Condition *c, const Signals *s);
