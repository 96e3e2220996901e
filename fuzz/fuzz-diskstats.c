/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "fuzz.h"
#include "sample.h"

/* The whole input as a diskstats file: every line parsed, and each pair of
 * consecutive samples turned into signals, as a tick does. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *p = (const char *) data, *end = p + size;
        DiskStat prev = {}, st;
        bool have = false;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *next = nl ? nl + 1 : end;
                char name[DISKSTAT_NAME_MAX];
                Signals s;

                if (diskstat_parse_line(p, (size_t) (next - p), &st, name) == 0) {
                        signals_compute(have ? &prev.c : NULL, &st, 1000, 3, &s);
                        prev = st;
                        have = true;
                }
                p = next;
        }
        return 0;
}
