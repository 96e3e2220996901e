/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The line formats of the other writers (conflicts-sysfsd.c,
 * conflicts-tmpfiles.c, conflicts-lvm.c): the same input read as a
 * sysfs.conf, a tmpfiles.d file and an lvm.conf; every writer found is
 * matched against a disk, described and attributed, as the daemon does. */
#include <stdlib.h>
#include <string.h>

#include "conflicts.h"
#include "fuzz.h"
#include "util.h"

static int fuzz_read(void *userdata, const char *name, char *buf, size_t size) {
        return strscpy(buf, size, name);
}

static void use(const ConflictSet *s) {
        ConflictDevice devs[] = {
                { .name = "sda", .blk_mq = true, .read_attr = fuzz_read, .read_env = fuzz_read },
                { .name = "dm-0" },
        };

        for (size_t i = 0; i < s->n_items; i++) {
                free(conflict_describe(&s->items[i]));
                for (size_t k = 0; k < ELEMENTSOF(devs); k++) {
                        (void) conflict_matches(&s->items[i], &devs[k], NULL);
                        (void) conflicts_attribute(s, &devs[k], s->items[i].tunable, s->items[i].value);
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static int (*const parse[])(const char *, const char *, ConflictSet *) = {
                conflicts_parse_sysfsd_text,
                conflicts_parse_tmpfiles_text,
                conflicts_parse_lvm_text,
        };
        char *text = malloc(size + 1);

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        for (size_t i = 0; i < ELEMENTSOF(parse); i++) {
                ConflictSet s = {};

                if (parse[i]("/etc/fuzz.conf", text, &s) == 0)
                        use(&s);
                conflict_set_done(&s);
        }
        free(text);
        return 0;
}
