/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The physical limit of a tick: read /proc/diskstats whole, N times, into a
 * reused buffer, and nothing else. Prints CPU microseconds per read, measured
 * the way blkpolicyd measures its ticks (CLOCK_PROCESS_CPUTIME_ID around each
 * read). With an interval it sleeps between reads as the daemon does between
 * ticks, so both pay the same cold caches.
 *   diskstats-read READS [PATH] [INTERVAL_MS] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[4 << 20];

/* noinline: callgrind --toggle-collect=read_diskstats counts exactly this */
size_t read_diskstats(const char *path);

__attribute__((noinline)) size_t read_diskstats(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t n = 0;
        ssize_t k;

        if (fd < 0)
                return 0;
        while ((k = read(fd, buf + n, sizeof(buf) - n - 1)) > 0)
                n += (size_t) k;
        close(fd);
        return n;
}

static double cpu_ns(void) {
        struct timespec t;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char *argv[]) {
        unsigned long reads = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
        const char *path = argc > 2 ? argv[2] : "/proc/diskstats";
        long interval_ms = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
        struct timespec pause = { interval_ms / 1000, (interval_ms % 1000) * 1000000 };
        double total = 0;
        size_t bytes = 0;

        for (unsigned long i = 0; i < reads; i++) {
                double a = cpu_ns();

                bytes = read_diskstats(path);
                total += cpu_ns() - a;
                if (interval_ms > 0)
                        nanosleep(&pause, NULL);
        }
        printf("{\"reads\": %lu, \"bytes\": %zu, \"cpu_us_per_read\": %.3f}\n", reads, bytes, total / 1e3 / reads);
        return 0;
}
