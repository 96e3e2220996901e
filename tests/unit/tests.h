/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The unit test harness, the only one in the tree. TEST() registers a
 * function; main() (tests.c) runs every case, or the ones named on the
 * command line, prints "ok N - name" or "not ok N - name" for each and
 * ends with "N passed, N failed" as the CI summary expects.
 *
 * The asserts are fatal for the case: a failed one prints file:line, the
 * expression and the values, and ends the case there (siglongjmp() back
 * to the runner), so nothing after it runs on a NULL or a short array it
 * let through. The runner counts the case failed and goes on with the
 * next. Cleanups of the frames left (_cleanup_, free() at the end of the
 * case, a temporary directory's removal) do not run: a failed case may
 * leak, and the binary fails anyway. */

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct TestCase {
        const char *name;
        void (*fn)(void);
} TestCase;

/* A fixed array: cases register from constructors, before main() could
 * report a failed allocation. What does not fit is counted, and the run
 * fails on it rather than leaving those cases out. */
typedef struct TestTable {
        TestCase *cases;
        size_t size;
        size_t n;
        size_t n_dropped;
} TestTable;

void test_table_add(TestTable *t, const char *name, void (*fn)(void));
int test_table_run(const TestTable *t, int argc, char *argv[]);
void test_register(const char *name, void (*fn)(void));

__attribute__((noreturn, format(printf, 3, 4)))
void test_fail(const char *file, int line, const char *format, ...);
__attribute__((noreturn))
void test_fail_eq_int(const char *file, int line, const char *a, const char *b,
                      bool a_signed, uintmax_t a_value, bool b_signed, uintmax_t b_value);

#define TEST(n)                                                                        \
        static void test_##n(void);                                                    \
        __attribute__((constructor)) static void register_##n(void) {                  \
                test_register(#n, test_##n);                                           \
        }                                                                              \
        static void test_##n(void)

/* Ends the case with a message of its own, for what the asserts below
 * cannot say (what a search wanted and what it got). */
#define TEST_FAIL(...) test_fail(__FILE__, __LINE__, __VA_ARGS__)

#define ASSERT_TRUE(expr)                                                              \
        do {                                                                           \
                if (!(expr))                                                           \
                        test_fail(__FILE__, __LINE__, "ASSERT_TRUE(%s) failed", #expr); \
        } while (0)

/* NULL equals nothing, not even NULL: a string the code under test did not
 * produce is a failure. */
#define ASSERT_STREQ(a, b)                                                             \
        do {                                                                           \
                const char *_test_a = (a), *_test_b = (b);                             \
                if (!_test_a || !_test_b || strcmp(_test_a, _test_b) != 0)             \
                        test_fail(__FILE__, __LINE__,                                  \
                                  "ASSERT_STREQ(%s, %s) failed: \"%s\" != \"%s\"",     \
                                  #a, #b, _test_a ?: "(null)", _test_b ?: "(null)");   \
        } while (0)

/* "< 1", not "< 0": -Wtype-limits calls the latter always false when it is */
#define TEST_IS_SIGNED(x) ((typeof(x)) -1 < (typeof(x)) 1)

/* Integers only: the unary plus does not compile for a pointer, nor "% 1"
 * for a double, which would print as nonsense. Each side is evaluated
 * once, promoted as "==" promotes it (the plus, which also takes a
 * bit-field), and compared as "a == b" would be; -Wsign-compare is off
 * for that comparison because a copied literal ("n == 3" with a size_t n)
 * is no longer a constant it can see is non-negative. */
#define ASSERT_EQ_INT(a, b)                                                            \
        do {                                                                           \
                __auto_type _test_a = +(a);                                            \
                __auto_type _test_b = +(b);                                            \
                (void) (_test_a % 1);                                                  \
                (void) (_test_b % 1);                                                  \
                _Pragma("GCC diagnostic push")                                         \
                _Pragma("GCC diagnostic ignored \"-Wsign-compare\"")                   \
                if (!(_test_a == _test_b))                                             \
                        test_fail_eq_int(__FILE__, __LINE__, #a, #b,                   \
                                         TEST_IS_SIGNED(_test_a), (uintmax_t) _test_a, \
                                         TEST_IS_SIGNED(_test_b), (uintmax_t) _test_b); \
                _Pragma("GCC diagnostic pop")                                          \
        } while (0)
