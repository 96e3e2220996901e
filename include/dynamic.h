/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* dynamic: the busy/base state machine of one device. Pure: previous
 * state + this tick's signals + policy → next state and whether to flip;
 * no I/O, no clock (it only allocates the state's own extra). The daemon,
 * --replay and the unit tests run the same function. */

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "sample.h"

/* What a state needs only sometimes, apart: allocated when the first of
 * it is, freed with the last, so that a state without it (the default
 * window, no flip yet: most devices) carries one NULL pointer. */
typedef struct DynExtra {
        /* Ring of the last valid samples, DYNAMIC_WINDOW_MAX rows, only when
         * the policy's window is over 1 tick. */
        float (*history)[_SIGNAL_MAX];
        /* Ring of the last flips' tick numbers (mod 2^32), for the flip cap:
         * max_flips of them are all the cap looks at. Allocated at the first
         * flip: most devices never flip. */
        uint32_t *flip_ticks;
        /* What the flips came to, from the first: a state that never
         * flipped has 0 of each, and the cap only holds one back after a
         * flip, so they are kept with the flip ring. 24 bytes: a 32-byte
         * chunk. (What applying them cost is the daemon's: DeviceFlips.) */
        unsigned flips;
        unsigned capped;                        /* flips the cap held back */
} DynExtra;

/* Every dynamic device has one, so it fits a 32-byte heap chunk: the tick
 * and the streak, the pointer, then the ring positions (bytes: rings hold
 * at most DYNAMIC_WINDOW_MAX and DYNAMIC_FLIPS_CAP) and the flags, 24
 * bytes with 1 of padding. Ticks are kept mod 2^32, as the flip ring keeps
 * them: 136 years of 1 s ticks, and a dwell is a difference of two. */
typedef struct DynState {
        uint32_t since_tick;                    /* tick of the last flip (or the first sample) */
        /* ticks in a row the conditions to leave the current state held:
         * enter's in base, leave's in busy; a flip starts it again */
        uint32_t streak;
        DynExtra *extra;                        /* NULL while nothing in it is needed */
        uint8_t n_history, history_pos;
        uint8_t flip_ring, n_flip_ticks, flip_pos;
        bool busy;
        bool started;
} DynState;

_Static_assert(sizeof(DynState) <= 24, "a dynamic device's state fits a 32-byte heap chunk");

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

/* What s's flips came to: 0 before the first. */
unsigned dyn_state_flips(const DynState *s);
unsigned dyn_state_capped(const DynState *s);
bool condition_holds(const Condition *c, const Signals *s);
