/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A trial's outcome as JSON: what explain and device show, and what
 * --replay prints at a verdict, field for field the same (a replayed
 * recording's verdict is compared to the daemon's as text). */

#include <cjson/cJSON.h>

#include "trial-device.h"

/* {"candidate", "incumbent", "verdict", "kept", "windows", "pairs",
 *  "estimate", "interval": [lo, hi or null], "reason"}; NULL on -ENOMEM. */
cJSON *trial_outcome_json(const TrialOutcome *o);
