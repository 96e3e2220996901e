/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cost of a flip, from the writer's side: writes two values to one
 * sysfs file in turn (open, write, close, as blkpolicyd does), COUNT times,
 * INTERVAL_MS apart, and prints how long each write took: min, median,
 * p90 and max in microseconds. bench/dd-vm.py and bench/flip-cost-loop.py
 * build it with `gcc -O2 -static` (the VM has no libc of its own) and run
 * it beside a fio reader, whose latency shows the stall.
 *
 *   flip-writer PATH VALUE_A VALUE_B COUNT INTERVAL_MS
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

int main(int argc, char *argv[]) {
        const char *values[2];
        double *us;
        int count, interval_ms, failed = 0;

        if (argc != 6) {
                fprintf(stderr, "usage: %s PATH VALUE_A VALUE_B COUNT INTERVAL_MS\n", argv[0]);
                return 2;
        }
        values[0] = argv[2];
        values[1] = argv[3];
        count = atoi(argv[4]);
        interval_ms = atoi(argv[5]);
        if (count < 1 || interval_ms < 0 || !(us = calloc((size_t) count, sizeof(double))))
                return 2;
        for (int i = 0; i < count; i++) {
                const char *v = values[i % 2];
                double t0 = now_us();
                int fd = open(argv[1], O_WRONLY | O_CLOEXEC);

                if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t) strlen(v))
                        failed++;
                if (fd >= 0)
                        close(fd);
                us[i] = now_us() - t0;
                if (interval_ms)
                        usleep((useconds_t) interval_ms * 1000);
        }
        qsort(us, (size_t) count, sizeof(double), cmp);
        printf("writes %d failed %d min_us %.1f median_us %.1f p90_us %.1f max_us %.1f\n", count, failed, us[0],
               us[count / 2], us[count * 9 / 10], us[count - 1]);
        free(us);
        return failed ? 1 : 0;
}
