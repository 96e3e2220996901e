/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Without libFuzzer: run LLVMFuzzerTestOneInput over every file of the
 * directories (or files) given, as systemd's fuzzers do in `meson test`. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void) argc;
        (void) argv;
        return 0;
}

static int run_file(const char *path) {
        FILE *f = fopen(path, "re");
        uint8_t *data;
        long size;

        if (!f)
                return -1;
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        rewind(f);
        data = malloc(size > 0 ? (size_t) size : 1);
        if (!data || fread(data, 1, (size_t) size, f) != (size_t) size) {
                fclose(f);
                free(data);
                return -1;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(data, (size_t) size);
        free(data);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned n = 0;

        LLVMFuzzerInitialize(&argc, &argv);
        for (int i = 1; i < argc; i++) {
                struct stat st;
                DIR *d;
                struct dirent *de;

                if (stat(argv[i], &st) < 0)
                        return EXIT_FAILURE;
                if (!S_ISDIR(st.st_mode)) {
                        n += run_file(argv[i]) == 0;
                        continue;
                }
                d = opendir(argv[i]);
                while (d && (de = readdir(d))) {
                        char path[PATH_MAX];

                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        n += run_file(path) == 0;
                }
                if (d)
                        closedir(d);
        }
        printf("%u inputs replayed\n", n);
        return n > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
