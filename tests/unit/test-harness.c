/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The harness itself. The cases that must fail run in a child, from a
 * table of their own, and what the child printed and returned is checked
 * here: their failures are what this binary looks for, not its result. */
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "util.h"

/* Ends its case from a frame below the case's own, as a helper's assert
 * does. */
static void fails_in_a_helper(void) {
        ASSERT_TRUE(1 + 1 == 3);
}
static const int helper_assert_line = __LINE__ - 2;

static void boom(void) {
        fails_in_a_helper();
        puts("REACHED");
}

static void fine(void) {
        ASSERT_EQ_INT(2, 2);
        ASSERT_STREQ("a", "a");
        ASSERT_TRUE(true);
        puts("FINE RAN");
}

static void eq_signed(void) {
        int r = -22;

        ASSERT_EQ_INT(r, 0);
        puts("REACHED");
}

static void eq_unsigned(void) {
        uint64_t v = UINT64_MAX;

        ASSERT_EQ_INT(v, 1);
        puts("REACHED");
}

static void streq_null(void) {
        const char *s = NULL;

        ASSERT_STREQ(s, "x");
        puts("REACHED");
}

/* Runs the table as main() runs the binary's own, in a child with stdout
 * and stderr in out; returns the child's exit status. */
static int run_table(const TestTable *t, char *argv[], char *out, size_t size) {
        int fds[2], status, argc = 0;
        size_t n = 0;
        ssize_t k;
        char buf[4096];
        pid_t pid;

        while (argv[argc])
                argc++;
        ASSERT_EQ_INT(pipe(fds), 0);
        /* what this process has buffered must not come out of the child too */
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int r;

                (void) dup2(fds[1], STDOUT_FILENO);
                (void) dup2(fds[1], STDERR_FILENO);
                (void) close(fds[0]);
                (void) close(fds[1]);
                r = test_table_run(t, argc, argv);
                fflush(stdout);
                _exit(r);
        }
        (void) close(fds[1]);
        /* read to the end even past size: a full pipe would block the child */
        while ((k = read(fds[0], buf, sizeof(buf))) > 0)
                for (ssize_t i = 0; i < k && n + 1 < size; i++)
                        out[n++] = buf[i];
        out[n] = 0;
        (void) close(fds[0]);
        ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        return WEXITSTATUS(status);
}

TEST(a_failed_assert_ends_its_case_and_the_next_runs) {
        TestCase cases[2];
        TestTable t = { .cases = cases, .size = ELEMENTSOF(cases) };
        char *argv[] = { (char *) "test-harness", NULL };
        char out[8192], where[128];

        test_table_add(&t, "boom", boom);
        test_table_add(&t, "fine", fine);
        ASSERT_EQ_INT(run_table(&t, argv, out, sizeof(out)), EXIT_FAILURE);
        snprintf(where, sizeof(where), "test-harness.c:%d: ASSERT_TRUE(1 + 1 == 3) failed\n", helper_assert_line);
        ASSERT_TRUE(strstr(out, where));
        ASSERT_TRUE(strstr(out, "not ok 1 - boom\n"));
        ASSERT_TRUE(!strstr(out, "REACHED"));
        ASSERT_TRUE(strstr(out, "FINE RAN\nok 2 - fine\n"));
        ASSERT_TRUE(strstr(out, "1 passed, 1 failed\n"));
}

TEST(failures_print_the_values) {
        TestCase cases[3];
        TestTable t = { .cases = cases, .size = ELEMENTSOF(cases) };
        char *argv[] = { (char *) "test-harness", NULL };
        char out[8192];

        test_table_add(&t, "eq_signed", eq_signed);
        test_table_add(&t, "eq_unsigned", eq_unsigned);
        test_table_add(&t, "streq_null", streq_null);
        ASSERT_EQ_INT(run_table(&t, argv, out, sizeof(out)), EXIT_FAILURE);
        ASSERT_TRUE(strstr(out, "ASSERT_EQ_INT(r, 0) failed: -22 != 0\n"));
        ASSERT_TRUE(strstr(out, "ASSERT_EQ_INT(v, 1) failed: 18446744073709551615 != 1\n"));
        ASSERT_TRUE(strstr(out, "ASSERT_STREQ(s, \"x\") failed: \"(null)\" != \"x\"\n"));
        ASSERT_TRUE(!strstr(out, "REACHED"));
        ASSERT_TRUE(strstr(out, "0 passed, 3 failed\n"));
}

TEST(named_cases_run_alone) {
        TestCase cases[2];
        TestTable t = { .cases = cases, .size = ELEMENTSOF(cases) };
        char *argv[] = { (char *) "test-harness", (char *) "fine", NULL };
        char out[8192];

        test_table_add(&t, "boom", boom);
        test_table_add(&t, "fine", fine);
        ASSERT_EQ_INT(run_table(&t, argv, out, sizeof(out)), EXIT_SUCCESS);
        ASSERT_TRUE(!strstr(out, "boom"));
        ASSERT_TRUE(strstr(out, "ok 2 - fine\n1 passed, 0 failed\n"));
}

TEST(a_name_that_matches_nothing_is_an_error) {
        TestCase cases[1];
        TestTable t = { .cases = cases, .size = ELEMENTSOF(cases) };
        char *argv[] = { (char *) "test-harness", (char *) "fine", (char *) "fien", NULL };
        char out[8192];

        test_table_add(&t, "fine", fine);
        ASSERT_EQ_INT(run_table(&t, argv, out, sizeof(out)), EXIT_FAILURE);
        ASSERT_TRUE(strstr(out, "No test case named \"fien\"\n"));
        /* not even the name that does match ran */
        ASSERT_TRUE(!strstr(out, "FINE RAN") && !strstr(out, "passed"));
}

TEST(cases_past_the_table_fail_the_run) {
        TestCase cases[1];
        TestTable t = { .cases = cases, .size = ELEMENTSOF(cases) };
        char *argv[] = { (char *) "test-harness", NULL };
        char out[8192];

        test_table_add(&t, "fine", fine);
        test_table_add(&t, "boom", boom);
        ASSERT_EQ_INT(t.n, 1);
        ASSERT_EQ_INT(t.n_dropped, 1);
        ASSERT_EQ_INT(run_table(&t, argv, out, sizeof(out)), EXIT_FAILURE);
        ASSERT_TRUE(strstr(out, "2 test cases registered, the table holds 1"));
        ASSERT_TRUE(!strstr(out, "FINE RAN") && !strstr(out, "passed"));
}

TEST(no_cases_fail_the_run) {
        TestTable t = {};
        char *argv[] = { (char *) "test-harness", NULL };
        char out[8192];

        ASSERT_EQ_INT(run_table(&t, argv, out, sizeof(out)), EXIT_FAILURE);
        ASSERT_TRUE(strstr(out, "No test cases registered\n"));
}
