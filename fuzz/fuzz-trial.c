/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "trial.h"

/* A config, a seed and windows from the input, fed to trial_feed() and
 * then idle windows: every trial ends within its max_windows, and after
 * its end nothing changes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        TrialWindow idle = { .valid = true, .duration_ms = 1000 };
        TrialConfig c;
        TrialState s;
        TrialAction a;
        uint64_t seed = 0;

        if (size < 12)
                return 0;
        trial_config_default(&c);
        c.max_pairs = 2 + data[0] % (TRIAL_PAIRS_MAX - 1);
        c.min_pairs = 2 + data[1] % (c.max_pairs - 1);
        c.max_windows = 2 * c.max_pairs + data[2];
        c.max_latency_regress = data[3] & 1 ? 0 : 1.5;
        memcpy(&seed, data + 4, sizeof(seed));
        if (trial_state_init(&s, &c, seed, data[3] & 2) < 0)
                abort();
        a = trial_next(&s);
        for (size_t i = 12; a == TRIAL_RUN_INCUMBENT || a == TRIAL_RUN_CANDIDATE; i += 4) {
                DiskStat before = { .c.rd_ios = 1u << 30, .c.rd_sectors = 1u << 30, .c.io_ticks = 1u << 30,
                                    .c.time_in_queue = 1u << 30 }, after = before;
                TrialWindow w = idle;

                if (i + 4 <= size) {
                        /* each byte a counter's delta, a backwards step for 0xff */
                        after.c.rd_ios += data[i] == 0xff ? -1 : data[i] * 40;
                        after.c.rd_sectors += data[i + 1] * 800;
                        after.c.io_ticks += data[i + 2] * 4;
                        after.c.time_in_queue += data[i + 3] * 40;
                        if (trial_window_from_samples(&before, &after, 1000, &w) < 0)
                                abort();
                }
                a = trial_feed(&s, &w);
                if (trial_result(&s)->windows > c.max_windows || trial_result(&s)->pairs > c.max_pairs)
                        abort();
        }
        if (trial_feed(&s, &idle) != a || trial_result(&s)->windows > c.max_windows)
                abort();
        return 0;
}
