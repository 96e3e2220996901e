/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *path = fuzz_write_tmp(data, size, ".conf");
        Config c;

        if (config_init_defaults(&c) == 0)
                (void) config_load(&c, path, true);
        config_done(&c);
        return 0;
}
