/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests.h"

int test_failures;

static TestCase cases[256];
static int n_cases;

void test_register(const char *name, void (*fn)(void)) {
        if (n_cases < (int) (sizeof(cases) / sizeof(cases[0])))
                cases[n_cases++] = (TestCase) { name, fn };
}

int main(int argc, char *argv[]) {
        int passed = 0, failed = 0;

        for (int i = 0; i < n_cases; i++) {
                int before = test_failures;

                if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
                        continue;
                cases[i].fn();
                if (test_failures == before) {
                        printf("ok %d - %s\n", i + 1, cases[i].name);
                        passed++;
                } else {
                        printf("not ok %d - %s\n", i + 1, cases[i].name);
                        failed++;
                }
        }
        printf("%d passed, %d failed\n", passed, failed);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
