/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the drift sweep pays a device on a sysfs tree: the daemon's own
 * read-back, attr_read_current() (io/apply.c: the path, one open and one
 * read of the attribute, the scheduler's brackets), of each named queue
 * attribute of every disk whose name starts with PREFIX, ROUNDS times over.
 * It only reads: nothing is opened for writing, so it may run on the live
 * /sys next to devices that are not its own. Prints the CPU time of the
 * process (user + kernel, CLOCK_PROCESS_CPUTIME_ID, as the daemon counts
 * its ticks) and the wall time, per device and per read.
 *   readback SYSFS_ROOT PREFIX ROUNDS ATTR...
 *   readback /sys loop 20 scheduler read_ahead_kb */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply.h"
#include "tunables.h"

#define DISKS_MAX 100000
#define ATTRS_MAX 16

static double clock_ns(clockid_t clock) {
        struct timespec t;

        clock_gettime(clock, &t);
        return (double) t.tv_sec * 1e9 + (double) t.tv_nsec;
}

static size_t disks_named(const char *sysfs, const char *prefix, char **names) {
        char path[4096];
        DIR *d;
        struct dirent *de;
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/block", sysfs);
        d = opendir(path);
        if (!d)
                return 0;
        while ((de = readdir(d)) && n < DISKS_MAX)
                if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 && (names[n] = strdup(de->d_name)))
                        n++;
        closedir(d);
        return n;
}

int main(int argc, char *argv[]) {
        static char *names[DISKS_MAX];
        unsigned attrs[ATTRS_MAX], n_attrs = 0, rounds;
        Roots roots = ROOTS_DEFAULT;
        size_t n, failed = 0;
        double cpu, wall;

        if (argc < 5) {
                fprintf(stderr, "usage: readback SYSFS_ROOT PREFIX ROUNDS ATTR...\n");
                return 2;
        }
        roots.sysfs = argv[1];
        rounds = (unsigned) strtoul(argv[3], NULL, 10);
        for (int i = 4; i < argc && n_attrs < ATTRS_MAX; i++) {
                int t = tunable_find_attr(argv[i]);

                if (t < 0) {
                        fprintf(stderr, "%s: not a setting blkpolicyd manages\n", argv[i]);
                        return 2;
                }
                attrs[n_attrs++] = (unsigned) t;
        }
        n = disks_named(argv[1], argv[2], names);
        if (n == 0 || rounds == 0) {
                fprintf(stderr, "no disk named %s* below %s/block\n", argv[2], argv[1]);
                return 1;
        }
        cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        wall = clock_ns(CLOCK_MONOTONIC);
        for (unsigned r = 0; r < rounds; r++)
                for (size_t i = 0; i < n; i++)
                        for (unsigned a = 0; a < n_attrs; a++) {
                                char buf[64];

                                failed += attr_read_current(&roots, names[i], attrs[a], buf, sizeof(buf)) < 0;
                        }
        cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu;
        wall = clock_ns(CLOCK_MONOTONIC) - wall;
        printf("{\"disks\": %zu, \"attrs\": %u, \"rounds\": %u, \"failed\": %zu, "
               "\"cpu_ns_per_device\": %.0f, \"wall_ns_per_device\": %.0f, \"cpu_ns_per_read\": %.0f}\n",
               n, n_attrs, rounds, failed, cpu / (double) (n * rounds), wall / (double) (n * rounds),
               cpu / (double) (n * rounds * n_attrs));
        return 0;
}
