/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proc-devices.h"

/* The whole input as /proc/devices, parsed twice into the same table (the
 * second replaces the first, as a re-read does); every entry is found by
 * its major, under the name it was parsed with. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        BlockMajors m = BLOCK_MAJORS_NULL;

        for (int pass = 0; pass < 2; pass++) {
                if (block_majors_parse((const char *) data, size, &m) < 0)
                        break;
                for (size_t i = 0; i < m.n; i++) {
                        const BlockMajor *e = &m.entries[i];
                        size_t len = strnlen(e->name, BLOCK_MAJOR_NAME_MAX);

                        if (len == 0 || len >= BLOCK_MAJOR_NAME_MAX || e->major > BLOCK_MAJOR_MAX ||
                            block_majors_name(&m, e->major) != e->name)
                                abort();
                }
        }
        block_majors_done(&m);
        return 0;
}
