/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "uevent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 1);
        Uevent u;

        if (!buf)
                return 0;
        memcpy(buf, data, size);
        if (uevent_parse(buf, size, &u) == 0 && uevent_is_disk(&u))
                (void) uevent_sysname(&u);
        free(buf);
        return 0;
}
