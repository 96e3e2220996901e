/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* decide() is pure: Facts + KernelCaps + PolicySet → Plan (decide.c). */

#include <stdbool.h>

#include "facts.h"
#include "plan.h"
#include "policy-set.h"

typedef struct DecideInput {
        const DeviceFacts *facts;
        const KernelCaps *caps;
        const PolicySet *policies;
        bool excluded;                  /* by the daemon config's exclude= */
        bool busy;                      /* the dynamic state: apply [Busy] over the base */
        bool canaries;                  /* mode=observe policies count as the others (the preview) */
        /* a trial's arm in force (docs/trials.md): this scheduler over the
         * policies' own choice, the top layer; NULL: theirs. The plan
         * keeps no pointer to it. */
        const SchedChoice *trial_arm;
        const char *trial_source;       /* what the plan names as its source: a policy's name */
} DecideInput;

/* ret->items and ret->matched must have room for TUNABLES_MAX and
 * MATCHED_MAX (a PlanBuffer's); they are kept. */
void decide(const DecideInput *in, Plan *ret);
/* What the canaries (mode=observe policies) that match would change over
 * enforced, the plan decide() makes of in now: in's plan with them in
 * force, decided into preview (room as decide() needs), against enforced,
 * setting by setting: each one whose value or whose being taken differs
 * (the canaries' own, and a scheduler's tunables they bring along or
 * leave), as RESULT_PLANNED, or RESULT_UNSUPPORTED with the error; and
 * each one they drop, with no target and CANARY_DROPS as its error (the
 * caller knows what was found). Into ret (room for TUNABLES_MAX: a
 * setting is in one of the two at most);
 * returns how many. 0 when no canary matches (enforced->canary is NULL). */
#define CANARY_DROPS "no longer set: put back to the value found"
unsigned decide_canaries(const DecideInput *in, const Plan *enforced, Plan *preview, PlanItem *ret);
/* Whether p's [Match] takes f; if not, *why_not says which condition failed. */
bool decide_policy_matches(const Policy *p, const DeviceFacts *f, const KernelCaps *caps, const char **why_not);
