/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Small helpers shared by every stage: cleanup attributes, string lists,
 * bounded string copies. */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
/* For what returns -ENOMEM among other things a caller must not drop */
#define _must_check_ __attribute__((warn_unused_result))

/* The pointer in p, and p NULL: ownership leaves a _cleanup_ variable
 * ("*ret = TAKE_PTR(l);") without the cleanup freeing it. */
#define TAKE_PTR(p)                                     \
        ({                                              \
                __typeof__(p) *_pp_ = &(p);             \
                __typeof__(p) _p_ = *_pp_;              \
                *_pp_ = NULL;                           \
                _p_;                                    \
        })
/* expr, asserted non-NULL: for a callback's userdata and arguments a
 * caller must never pass NULL ("Manager *m = ASSERT_PTR(userdata);"). */
#define ASSERT_PTR(expr)                                \
        ({                                              \
                __typeof__(expr) _e_ = (expr);          \
                assert(_e_);                            \
                _e_;                                    \
        })

/* vasprintf() that says failure with NULL (the string is then undefined). */
char *vstrdupf(const char *fmt, va_list ap) _printf_(1, 0);
/* A limit's number in a message's text, from the macro that sets it (a
 * plain number): changing the limit changes what the message says. */
#define STRINGIFY(x) STRINGIFY_(x)
#define STRINGIFY_(x) #x

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return streq(a, b);
}

static inline bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline void *memdup(const void *p, size_t n) {
        void *q = malloc(n);

        return q ? memcpy(q, p, n) : NULL;
}

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0)
                (void) close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Hands a _cleanup_close_ fd over (to fdopen(), to a struct): returns it
 * and leaves -1 behind, so the cleanup closes nothing. */
static inline int take_fd(int *fd) {
        int r = *fd;

        *fd = -1;
        return r;
}

static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Copies with truncation; returns -ENAMETOOLONG when it had to cut, so
 * callers reading kernel values notice a value that does not fit. */
static inline int strscpy(char *dst, size_t size, const char *src) {
        size_t n = strlen(src);

        if (size == 0)
                return -ENAMETOOLONG;
        if (n >= size) {
                memcpy(dst, src, size - 1);
                dst[size - 1] = 0;
                return -ENAMETOOLONG;
        }
        memcpy(dst, src, n + 1);
        return 0;
}

static inline uint64_t clock_usec(clockid_t clock) {
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* NULL-terminated string vectors, as in systemd's strv.h. */
char **strv_free(char **l);
int strv_push(char ***l, const char *s);      /* copies s */
size_t strv_length(char *const *l);
bool strv_contains(char *const *l, const char *s);
bool strv_equal(char *const *a, char *const *b);      /* NULL equals empty */
void strv_sort(char **l);      /* by strcmp(); NULL is fine */
bool strv_fnmatch(char *const *patterns, const char *s);
#define STRV_WORD_MAX 255
/* whitespace separated; -ENAMETOOLONG for a word over STRV_WORD_MAX */
int strv_split(const char *s, char ***ret);
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* "yes"/"no"/"1"/"0"/"true"/"false"/"on"/"off" → 1/0, else -EINVAL. */
int parse_boolean(const char *s);
/* Whole-string signed integer in [min, max], else -EINVAL / -ERANGE. */
int parse_ll(const char *s, long long min, long long max, long long *ret);
/* Strips leading and trailing white space in place; returns s. */
char *strstrip(char *s);
/* All of text to fd, again after EINTR and short writes. */
int write_all(int fd, const char *text);
/* Room for one more after n elements of size in *p, allocated of them:
 * doubled when full, from 4 (systemd's GREEDY_REALLOC). 0, or -ENOMEM with
 * *p as it was. */
int array_grow(void **p, size_t *allocated, size_t n, size_t size);

/* A memory stream like open_memstream(), but one whose failure shows: a
 * write that could not grow the buffer fails fclose() (EOF, errno
 * ENOMEM), where glibc's memstream drops it and fclose() says 0 (2.36),
 * so a text cut short passes for whole. Before fclose(), ferror() tells
 * (a fflush() with nothing left buffered says 0 even after a failure).
 * *size follows what each fflush() passed on; *text is set at fclose()
 * only: the text, NUL-terminated, or NULL and a *size of 0 on failure. */
FILE *memstream_open(char **text, size_t *size);

/* Opens a file to read that must be a regular file. O_NONBLOCK, so that
 * open() of a FIFO cannot block the daemon, then fstat(): anything else (a
 * FIFO, a directory, a device) is refused with -EBADFD before one byte is
 * read. /dev/null is accepted and reads as empty (the masking idiom). */
int fopen_regular(const char *path, FILE **ret);
