/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>

#include "state.h"
#include "tests.h"
#include "util.h"

TEST(originals_round_trip_and_first_value_wins) {
        char dir[] = "/tmp/blkpolicyd-test-state-XXXXXX", cmd[64], path[PATH_MAX];
        Originals o = {}, back = {};
        FILE *f;

        CHECK(mkdtemp(dir) != NULL);
        CHECK(originals_empty(&o) && !originals_get(&o, TUNABLE_SCHEDULER));
        /* recorded in another order than tunables[]: saved and restored in its order */
        CHECK(originals_record(&o, (unsigned) tunable_find("Queue", "nr_requests"), "256") == 1);
        CHECK(originals_record(&o, TUNABLE_SCHEDULER, "mq-deadline") == 1);
        CHECK(originals_record(&o, TUNABLE_SCHEDULER, "none") == 0);   /* our own value never overwrites */
        CHECK(o.n == 2 && !originals_empty(&o));
        CHECK(originals_record(&o, TUNABLES_MAX, "x") == -EINVAL);
        CHECK(originals_save(dir, "loop9", &o) == 0);
        CHECK(originals_load(dir, "loop9", &back) == 0);
        CHECK(back.n == 2 && back.list[0].tunable == TUNABLE_SCHEDULER);
        CHECK_STR(originals_get(&back, TUNABLE_SCHEDULER), "mq-deadline");
        CHECK_STR(originals_get(&back, tunable_find("Queue", "nr_requests")), "256");

        /* a torn or foreign line is skipped, the rest still loads */
        snprintf(path, sizeof(path), "%s/devices/loop9", dir);
        f = fopen(path, "ae");
        fputs("garbage without equals\nunknown_attr=1\nread_ahead_kb=4", f);
        fclose(f);
        originals_done(&back);
        CHECK(originals_load(dir, "loop9", &back) == 2);   /* two bad lines, counted */
        CHECK_STR(originals_get(&back, TUNABLE_SCHEDULER), "mq-deadline");
        CHECK_STR(originals_get(&back, tunable_find("Queue", "read_ahead_kb")), "4");

        CHECK(originals_remove(dir, "loop9") == 0);
        CHECK(originals_load(dir, "loop9", &back) == -ENOENT);
        CHECK(originals_remove(dir, "loop9") == 0);
        originals_done(&o);
        originals_done(&back);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
}
