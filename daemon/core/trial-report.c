/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <math.h>

#include "trial-report.h"

/* A bound that is not known yet (+inf before a look) is null. */
static cJSON *finite_or_null(double v) {
        return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

cJSON *trial_outcome_json(const TrialOutcome *o) {
        cJSON *j = cJSON_CreateObject(), *i;
        char name[SCHED_CHOICE_TEXT_MAX];

        (void) sched_choice_format(&o->candidate, name, sizeof(name));
        cJSON_AddStringToObject(j, "candidate", name);
        cJSON_AddStringToObject(j, "incumbent", o->incumbent);
        cJSON_AddStringToObject(j, "verdict", o->skipped ? "skipped" : o->stopped ? "stopped" :
                                trial_verdict_to_string(o->result.verdict));
        if (o->result.verdict == TRIAL_UNDECIDED && !o->stopped)
                cJSON_AddNullToObject(j, "kept");
        else
                cJSON_AddStringToObject(j, "kept", o->result.keep_candidate ? name : o->incumbent);
        cJSON_AddNumberToObject(j, "windows", o->result.windows);
        cJSON_AddNumberToObject(j, "pairs", o->result.pairs);
        /* the incumbent's busy time per byte over the candidate's: above 1, the candidate is faster */
        cJSON_AddNumberToObject(j, "estimate", o->result.ratio);
        i = cJSON_AddArrayToObject(j, "interval");
        cJSON_AddItemToArray(i, cJSON_CreateNumber(o->result.ratio_lo));
        cJSON_AddItemToArray(i, finite_or_null(o->result.ratio_hi));
        cJSON_AddStringToObject(j, "reason", o->result.reason);
        return j;
}
