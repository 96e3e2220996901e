/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "policy.h"

/* Runs decide and the dynamic state machine over a recording, touching no
 * device, and prints the decision timeline as JSON lines:
 *   {"t": 3000, "device": "loop8", "policy": "...", "from": "base", "to": "busy", "condition": "..."}
 * and the trials (docs/trials.md, "Record and replay"), through the same
 * core code as the daemon's tick, with the recording's seeds:
 *   {"t": ..., "device": "loop8", "trial": "start", "candidate": "mq-deadline", "incumbent": "none",
 *    "seed": "123...", "started_by": "policy"}
 *   {"t": ..., "device": "loop8", "trial": "skip", "candidate": ..., "incumbent": ..., "reason": ...}
 *   {"t": ..., "device": "loop8", "trial": "arm", "arm": "candidate", "at_ms": 500}
 *   {"t": ..., "device": "loop8", "trial": "verdict", ...the outcome as device shows it}
 *   {"t": ..., "device": "loop8", "trial": "stop", "why": "paused"}
 * writes: not mode=observe (no trial runs in observe mode).
 * Lines that do not parse are skipped with a warning (a recording cut
 * short by a crash ends in half a line). */
int replay_run(const char *path, const PolicySet *policies, bool writes, FILE *out);
