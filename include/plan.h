/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Plan: what decide.c wants for one device (decide.h), and (after
 * apply.c) what happened. */

#include <stdbool.h>
#include <string.h>

#include "facts.h"
#include "policy.h"

/* a kept plan only points at the set it was decided from (policy-set.h) */
typedef struct PolicySet PolicySet;

typedef enum ItemResult {
        RESULT_PLANNED,         /* dry run: a write would happen */
        RESULT_UNCHANGED,       /* already at target: nothing written */
        RESULT_APPLIED,         /* written and read back equal */
        RESULT_FAILED,
        RESULT_UNSUPPORTED,     /* the attribute or scheduler does not exist here */
        RESULT_RETRY,           /* transient error: will try again */
        RESULT_NOT_KEPT,        /* written, the kernel kept another value (owner.h) */
        RESULT_OVERRIDDEN,      /* someone else changed it after blkpolicyd held it (owner.h) */
        _RESULT_MAX,
} ItemResult;

const char *item_result_to_string(ItemResult r);

#define VALUE_MAX 32

typedef struct PlanItem {
        unsigned tunable;               /* index into tunables[] */
        ItemResult result;              /* filled in by apply, as are the fields after target */
        const char *source;             /* policy file name that set it */
        char target[VALUE_MAX];
        char before[VALUE_MAX];         /* read before writing */
        char current[VALUE_MAX];        /* read back after writing */
        char error[64];                 /* fits what apply and decide write, for values up to 19 characters */
} PlanItem;

#define MATCHED_MAX 16

typedef struct Plan {
        const char *reason;             /* why not managed, or a safety note */
        const char *policy;             /* highest-priority matching policy, NULL if none */
        const char *canary;             /* the last matching mode=observe policy (a canary), NULL if none */
        const char **matched;           /* decide() needs room for MATCHED_MAX */
        PlanItem *items;                /* decide() needs room for TUNABLES_MAX; the copy
                                         * keeps items and matched in one block */
        /* the scheduler candidates after the target, tried on EINVAL: the
         * bits of fallback_mask into `choices`, which points into `set` as
         * policy, matched[], sources and dynamic do */
        const SchedChoice *choices;
        const DynamicPolicy *dynamic;   /* of the last matching policy that has one */
        const char *dynamic_source;
        const TrialPolicy *trial;       /* [Trial] of the last matching policy that has one */
        const char *trial_source;
        /* the set decided from, NULL when no policy matched: a kept copy
         * (shared.c, an applier job) holds a reference on it */
        const PolicySet *set;
        unsigned n_matched;
        unsigned n_items;
        uint32_t fallback_mask;
        bool managed;                   /* false: the device is left alone */
        bool busy;                      /* the plan holds the busy settings */
} Plan;

/* Room for any plan: decide() writes here, the daemon keeps a shared copy
 * sized to what was decided (shared.h; a device typically has one to three
 * items). */
typedef struct PlanBuffer {
        Plan plan;
        PlanItem items[TUNABLES_MAX];
        const char *matched[MATCHED_MAX];
} PlanBuffer;

static inline Plan *plan_buffer_init(PlanBuffer *b) {
        b->plan = (Plan) { .items = b->items, .matched = b->matched };
        return &b->plan;
}

/* src copied into b (the items and matched it points to too). */
static inline Plan *plan_buffer_copy(PlanBuffer *b, const Plan *src) {
        Plan *p = plan_buffer_init(b);

        *p = *src;
        p->items = b->items;
        p->matched = b->matched;
        if (src->n_items)
                memcpy(b->items, src->items, sizeof(PlanItem) * src->n_items);
        if (src->n_matched)
                memcpy(b->matched, src->matched, sizeof(const char *) * src->n_matched);
        return p;
}

/* The item of tunable, NULL when the plan has none (a plan has one at most). */
const PlanItem *plan_find(const Plan *p, unsigned tunable);
