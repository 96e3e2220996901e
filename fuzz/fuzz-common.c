/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"

static char dir[] = "/tmp/blkpolicyd-fuzz-XXXXXX";

/* The corpus replay runs every test build: leave no directory behind. */
static void remove_tmp(void) {
        DIR *d = opendir(dir);
        struct dirent *de;

        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.')
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        if (d)
                closedir(d);
        (void) rmdir(dir);
}

const char *fuzz_write_tmp(const uint8_t *data, size_t size, const char *suffix) {
        static char path[PATH_MAX];
        static bool made;
        int fd;

        if (!made) {
                if (!mkdtemp(dir))
                        abort();
                made = true;
                (void) atexit(remove_tmp);
                log_set_max_level(LOG_EMERG);   /* parsers log every error they find */
        }
        snprintf(path, sizeof(path), "%s/input%s", dir, suffix);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || (size && write(fd, data, size) != (ssize_t) size))
                abort();
        close(fd);
        return path;
}
