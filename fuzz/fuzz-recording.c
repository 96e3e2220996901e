/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy-set.h"
#include "policy.h"
#include "replay.h"

/* A recording replayed against a fixed dynamic policy that matches every
 * device whose name does not begin with t, so the whole decision path
 * runs, and a [Trial] on those that do (the corpus' tloop*), so the
 * trials' path runs too. */
static PolicySet *policies;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        static const char dynamic[] = "[Match]\nname = [!t]*\n"
                                      "[Queue]\nscheduler = none\n[Dynamic]\nenter = iops > 10\nenter_ticks = 1\n"
                                      "leave = iops < 5\nleave_ticks = 1\nmin_dwell_ticks = 0\n"
                                      "[Busy]\nscheduler = mq-deadline\n";
        static const char trial[] = "[Match]\nname = t*\n[Queue]\nscheduler = none\n"
                                    "[Trial]\ncandidates = mq-deadline kyber\nwindow = 0.5\nsettle = 0.1\n";
        char *dirs[2] = { NULL, NULL };
        const char *path = fuzz_write_tmp((const uint8_t *) dynamic, sizeof(dynamic) - 1, ".policy");
        char dir[4096];

        (void) argc;
        (void) argv;
        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = 0;
        (void) fuzz_write_tmp((const uint8_t *) trial, sizeof(trial) - 1, "-trial.policy");
        dirs[0] = dir;
        if (policy_set_load(dirs, &policies) < 0)
                abort();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *path = fuzz_write_tmp(data, size, ".jsonl");
        FILE *out = fopen("/dev/null", "we");

        if (!policies)
                LLVMFuzzerInitialize(NULL, NULL);
        (void) replay_run(path, policies, true, out);
        fclose(out);
        return 0;
}
