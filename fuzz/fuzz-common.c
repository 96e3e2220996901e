/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"

const char *fuzz_write_tmp(const uint8_t *data, size_t size, const char *suffix) {
        static char path[PATH_MAX];
        static char dir[] = "/tmp/blkpolicyd-fuzz-XXXXXX";
        static bool made;
        int fd;

        if (!made) {
                if (!mkdtemp(dir))
                        abort();
                made = true;
                log_set_max_level(LOG_EMERG);   /* parsers log every error they find */
        }
        snprintf(path, sizeof(path), "%s/input%s", dir, suffix);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || (size && write(fd, data, size) != (ssize_t) size))
                abort();
        close(fd);
        return path;
}
