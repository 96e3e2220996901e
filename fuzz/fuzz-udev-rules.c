/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A udev rules file, as conflicts.c reads it: continuations, comments,
 * GOTO guards, ATTR{} and RUN+= writers; then every writer found is
 * matched against a disk whose attributes and properties echo its name,
 * described, and attributed, as status, explain and drift do. */
#include <stdlib.h>
#include <string.h>

#include "conflicts.h"
#include "fuzz.h"
#include "util.h"

static int fuzz_read(void *userdata, const char *name, char *buf, size_t size) {
        /* every attribute reads as its own name: "==" conditions on it can hold */
        return strscpy(buf, size, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ConflictDevice devs[] = {
                { .name = "sda", .blk_mq = true, .read_attr = fuzz_read, .read_env = fuzz_read },
                { .name = "dm-0" },
        };
        char *text = malloc(size + 1);
        ConflictSet s = {};

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        if (conflicts_parse_udev_text("/etc/udev/rules.d/fuzz.rules", text, &s) == 0)
                for (size_t i = 0; i < s.n_items; i++) {
                        char *d = conflict_describe(&s.items[i]);

                        free(d);
                        for (size_t k = 0; k < ELEMENTSOF(devs); k++) {
                                const RuleToken *why;
                                char buf[256];

                                if (conflict_matches(&s.items[i], &devs[k], &why) != CONFLICT_MATCH_YES && why)
                                        (void) rule_token_format(why, buf, sizeof(buf));
                                (void) conflicts_attribute(&s, &devs[k], s.items[i].tunable, s.items[i].value);
                        }
                }
        conflict_set_done(&s);
        free(text);
        return 0;
}
