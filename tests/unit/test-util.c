/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* memstream_open(): the text written, the size each fflush() leaves, and a
 * failure to grow that fclose() reports, where glibc's open_memstream()
 * reports none. */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "util.h"

TEST(memstream_gives_the_text_written) {
        char *text = (char *) 1;
        size_t size = 1;
        FILE *f = memstream_open(&text, &size);

        ASSERT_TRUE(f && !text && size == 0);
        for (int i = 0; i < 10000; i++)
                ASSERT_TRUE(fprintf(f, "line %d\n", i) > 0);
        ASSERT_EQ_INT(fclose(f), 0);
        ASSERT_EQ_INT(size, strlen(text));
        ASSERT_TRUE(strncmp(text, "line 0\nline 1\n", 14) == 0);
        ASSERT_TRUE(strcmp(text + size - 10, "line 9999\n") == 0);
        free(text);
}

/* control.c cuts a reply into parts by the size each fflush() leaves */
TEST(memstream_size_follows_each_fflush) {
        char *text;
        size_t size;
        FILE *f = memstream_open(&text, &size);

        ASSERT_TRUE(f != NULL);
        ASSERT_TRUE(fputs("abc", f) >= 0);
        ASSERT_EQ_INT(fflush(f), 0);
        ASSERT_EQ_INT(size, 3);
        ASSERT_TRUE(fprintf(f, "%d", 12345) > 0);
        ASSERT_EQ_INT(fflush(f), 0);
        ASSERT_EQ_INT(size, 8);
        ASSERT_EQ_INT(fclose(f), 0);
        ASSERT_TRUE(strcmp(text, "abc12345") == 0 && size == 8);
        free(text);
}

TEST(memstream_empty_is_an_empty_string) {
        char *text;
        size_t size;
        FILE *f = memstream_open(&text, &size);

        ASSERT_TRUE(f != NULL);
        ASSERT_EQ_INT(fclose(f), 0);
        ASSERT_TRUE(text && text[0] == 0 && size == 0);
        free(text);
}

/* In a child with its address space capped below what is written: the
 * buffer cannot grow, and fclose() must say so. (Not under ASan, which
 * reserves terabytes of address space up front.) */
#if !defined(__SANITIZE_ADDRESS__)
static int write_past_the_cap(void) {
        static char chunk[1 << 20];
        struct rlimit cap = { 256u << 20, 256u << 20 };
        char *text;
        size_t size;
        FILE *f;

        memset(chunk, 'x', sizeof(chunk) - 1);
        if (setrlimit(RLIMIT_AS, &cap) < 0)
                return 2;
        f = memstream_open(&text, &size);
        if (!f)
                return 2;
        for (int i = 0; i < 512; i++)
                (void) fputs(chunk, f);
        if (fclose(f) == 0)
                return 1;       /* a text cut short, passed off as whole */
        return text == NULL && size == 0 ? 0 : 1;
}

/* A write larger than stdio's buffer goes to the stream straight from the
 * caller's data; if it cannot grow, the stream must say it took nothing.
 * glibc takes a -1 from the cookie for SIZE_MAX bytes written and copies
 * the rest from past the data: here, from a page that cannot be read. */
static int big_write_that_cannot_grow(void) {
        size_t len = (1u << 20) + 4096;         /* past malloc's mmap threshold, not a multiple of BUFSIZ */
        long page = sysconf(_SC_PAGESIZE);
        char *data = mmap(NULL, len + (size_t) page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        struct rlimit cap;
        unsigned long pages;
        char *text;
        size_t size;
        FILE *statm, *f;

        if (data == MAP_FAILED || mprotect(data + len, (size_t) page, PROT_NONE) < 0)
                return 2;
        memset(data, 'x', len);
        f = memstream_open(&text, &size);
        statm = fopen("/proc/self/statm", "re");
        if (!f || !statm || fscanf(statm, "%lu", &pages) != 1)
                return 2;
        (void) fclose(statm);
        /* no new mapping from here on: a megabyte cannot be had */
        cap.rlim_cur = cap.rlim_max = pages * (unsigned long) page;
        if (setrlimit(RLIMIT_AS, &cap) < 0)
                return 2;
        if (fwrite(data, 1, len, f) == len || !ferror(f))
                return 1;
        return fclose(f) == 0 ? 1 : 0;
}

/* A case in a child of its own, whose exit status is the verdict (0). */
static void in_a_child(int (*run)(void)) {
        int status;
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0)
                _exit(run());
        ASSERT_TRUE(waitpid(pid, &status, 0) == pid);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ_INT(WEXITSTATUS(status), 0);
}
#endif

TEST(memstream_big_write_that_cannot_grow_reads_only_its_data) {
#if defined(__SANITIZE_ADDRESS__)
        printf("# skipped under AddressSanitizer: it needs the address space the cap takes away\n");
#else
        in_a_child(big_write_that_cannot_grow);
#endif
}

TEST(memstream_that_cannot_grow_fails_fclose) {
#if defined(__SANITIZE_ADDRESS__)
        printf("# skipped under AddressSanitizer: it needs the address space the cap takes away\n");
#else
        in_a_child(write_past_the_cap);
#endif
}

TEST(take_ptr_hands_over_and_leaves_null) {
        _cleanup_free_ char *p = strdup("x");
        char *q;

        ASSERT_TRUE(p);
        q = TAKE_PTR(p);
        ASSERT_TRUE(!p);
        ASSERT_STREQ(q, "x");
        free(q);
        ASSERT_TRUE(!TAKE_PTR(p));       /* a second take takes nothing */
}

TEST(assert_ptr_passes_the_pointer_through) {
        int x = 1;
        void *userdata = &x;
        int *y = ASSERT_PTR((int *) userdata);

        ASSERT_TRUE(y == &x);
}
