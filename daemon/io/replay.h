/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdio.h>

#include "policy.h"

/* Runs decide and the dynamic state machine over a recording, touching no
 * device, and prints the decision timeline as JSON lines:
 *   {"t": 3000, "device": "loop8", "policy": "...", "from": "base", "to": "busy", "condition": "..."}
 * Lines that do not parse are skipped with a warning (a recording cut
 * short by a crash ends in half a line). */
int replay_run(const char *path, const PolicySet *policies, FILE *out);
