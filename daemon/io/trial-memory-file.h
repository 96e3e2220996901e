/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "trial-memory.h"

/* The remembered verdicts on disk (trial_memory= in blkpolicyd.conf,
 * /var/lib/blkpolicyd/trial-verdicts.json by default), one JSON document:
 *   {"blkpolicyd_trial_verdicts": 1, "verdicts": [
 *     {"identity": "wwid:naa.5000c500a1b2c3d4", "model": "ST4000NM0035",
 *      "kernel": "6.12.48+deb13-amd64", "trial": "none > mq-deadline",
 *      "shape": {"read_share": 0.02, "request_bytes": 4096},
 *      "kept": "mq-deadline", "verdict": "candidate-wins", "estimate": 2.61,
 *      "at": 1764900000}]}
 * "kept" is null when the incumbent stayed. A state file lost or
 * unreadable costs trials, nothing else. */

/* Into m (emptied first): 0, also for a missing file; -EBADMSG for one
 * that is not such a document (m empty: the next save replaces it);
 * -ENOMEM; another negative errno for one that cannot be read. */
int trial_memory_load(const char *path, TrialMemory *m);
/* Written whole to a temporary beside path, synced, renamed over it;
 * path's directory made (0755) when missing. */
int trial_memory_save(const char *path, const TrialMemory *m);
