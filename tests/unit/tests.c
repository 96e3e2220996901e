/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>

#include "tests.h"

static TestCase registered_cases[256];
static TestTable registered = { .cases = registered_cases, .size = sizeof(registered_cases) / sizeof(registered_cases[0]) };

/* Where a failed assert returns to: the runner, around the case it runs. */
static sigjmp_buf case_end;
static bool case_running;

void test_table_add(TestTable *t, const char *name, void (*fn)(void)) {
        if (t->n >= t->size) {
                t->n_dropped++;
                return;
        }
        t->cases[t->n++] = (TestCase) { name, fn };
}

void test_register(const char *name, void (*fn)(void)) {
        test_table_add(&registered, name, fn);
}

__attribute__((noreturn)) static void end_case(void) {
        /* An assert outside a case (a constructor, the runner itself) has
         * no case to end and nothing to count it: stop here. */
        if (!case_running)
                abort();
        case_running = false;
        siglongjmp(case_end, 1);
}

void test_fail(const char *file, int line, const char *format, ...) {
        va_list ap;

        fprintf(stderr, "%s:%d: ", file, line);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputc('\n', stderr);
        end_case();
}

static const char *int_str(char *buf, size_t size, bool is_signed, uintmax_t v) {
        if (is_signed)
                snprintf(buf, size, "%" PRIdMAX, (intmax_t) v);
        else
                snprintf(buf, size, "%" PRIuMAX, v);
        return buf;
}

void test_fail_eq_int(const char *file, int line, const char *a, const char *b,
                      bool a_signed, uintmax_t a_value, bool b_signed, uintmax_t b_value) {
        char sa[24], sb[24];

        test_fail(file, line, "ASSERT_EQ_INT(%s, %s) failed: %s != %s", a, b,
                  int_str(sa, sizeof(sa), a_signed, a_value), int_str(sb, sizeof(sb), b_signed, b_value));
}

static bool run_case(const TestCase *c) {
        /* savemask: a case that failed with signals blocked leaves them
         * blocked for none of the next ones */
        if (sigsetjmp(case_end, 1) != 0)
                return false;
        case_running = true;
        c->fn();
        case_running = false;
        return true;
}

static bool named(int argc, char *argv[], const char *name) {
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], name) == 0)
                        return true;
        return false;
}

static bool known(const TestTable *t, const char *name) {
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->cases[i].name, name) == 0)
                        return true;
        return false;
}

/* argv[1..] name the cases to run, all of them when there is none. */
int test_table_run(const TestTable *t, int argc, char *argv[]) {
        unsigned passed = 0, failed = 0;

        /* Cases left out of the table, or a name that runs nothing (a typo,
         * a renamed case in a script), would pass without testing. */
        if (t->n_dropped > 0) {
                fprintf(stderr, "%zu test cases registered, the table holds %zu: enlarge it\n",
                        t->n + t->n_dropped, t->size);
                return EXIT_FAILURE;
        }
        if (t->n == 0) {
                fprintf(stderr, "No test cases registered\n");
                return EXIT_FAILURE;
        }
        for (int i = 1; i < argc; i++)
                if (!known(t, argv[i])) {
                        fprintf(stderr, "No test case named \"%s\"\n", argv[i]);
                        return EXIT_FAILURE;
                }

        for (size_t i = 0; i < t->n; i++) {
                if (argc > 1 && !named(argc, argv, t->cases[i].name))
                        continue;
                if (run_case(&t->cases[i])) {
                        printf("ok %zu - %s\n", i + 1, t->cases[i].name);
                        passed++;
                } else {
                        printf("not ok %zu - %s\n", i + 1, t->cases[i].name);
                        failed++;
                }
        }
        printf("%u passed, %u failed\n", passed, failed);
        return failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char *argv[]) {
        /* a failure's message (stderr) lands next to its case's line when
         * both go to one file, as in meson's log */
        setvbuf(stdout, NULL, _IOLBF, 0);
        return test_table_run(&registered, argc, argv);
}
