/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A minimal unit test harness: TEST() registers a function, CHECK()
 * records a failure with file:line and goes on, main() runs them all and
 * ends with "N passed, N failed" as the CI summary expects. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct TestCase {
        const char *name;
        void (*fn)(void);
} TestCase;

extern int test_failures;

#define TEST(n)                                                                        \
        static void test_##n(void);                                                    \
        __attribute__((constructor)) static void register_##n(void) {                  \
                test_register(#n, test_##n);                                           \
        }                                                                              \
        static void test_##n(void)

#define CHECK(cond)                                                                    \
        do {                                                                           \
                if (!(cond)) {                                                         \
                        fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
                        test_failures++;                                               \
                }                                                                      \
        } while (0)

#define CHECK_STR(a, b)                                                                \
        do {                                                                           \
                const char *_a = (a), *_b = (b);                                       \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                               \
                        fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, \
                                _a ? _a : "(null)", _b ? _b : "(null)");               \
                        test_failures++;                                               \
                }                                                                      \
        } while (0)

void test_register(const char *name, void (*fn)(void));
