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
} DecideInput;

/* ret->items and ret->matched must have room for TUNABLES_MAX and
 * MATCHED_MAX (a PlanBuffer's); they are kept. */
void decide(const DecideInput *in, Plan *ret);
/* Whether p's [Match] takes f; if not, *why_not says which condition failed. */
bool decide_policy_matches(const Policy *p, const DeviceFacts *f, const KernelCaps *caps, const char **why_not);
