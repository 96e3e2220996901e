/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "util.h"

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;

        if (l)
                while (l[n])
                        n++;
        return n;
}

int strv_push(char ***l, const char *s) {
        size_t n = strv_length(*l);
        char **nl, *c;

        c = strdup(s);
        if (!c)
                return -ENOMEM;
        nl = realloc(*l, sizeof(char *) * (n + 2));
        if (!nl) {
                free(c);
                return -ENOMEM;
        }
        nl[n] = c;
        nl[n + 1] = NULL;
        *l = nl;
        return 0;
}

bool strv_contains(char *const *l, const char *s) {
        for (char *const *p = l; p && *p; p++)
                if (streq(*p, s))
                        return true;
        return false;
}

bool strv_equal(char *const *a, char *const *b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

static int strv_compare(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

void strv_sort(char **l) {
        if (l)
                qsort(l, strv_length(l), sizeof(char *), strv_compare);
}

bool strv_fnmatch(char *const *patterns, const char *s) {
        if (!patterns)
                return false;
        for (char *const *p = patterns; *p; p++)
                if (fnmatch(*p, s, 0) == 0)
                        return true;
        return false;
}

int strv_split(const char *s, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *p = s;

        for (;;) {
                char word[STRV_WORD_MAX + 1];
                size_t n;

                p += strspn(p, " \t\n");
                if (!*p)
                        break;
                n = strcspn(p, " \t\n");
                if (n >= sizeof(word))
                        return -ENAMETOOLONG;
                memcpy(word, p, n);
                word[n] = 0;
                if (strv_push(&l, word) < 0)
                        return -ENOMEM;
                p += n;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "yes", "y", "true", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

int parse_ll(const char *s, long long min, long long max, long long *ret) {
        char *end;
        long long v;

        if (!*s || isspace((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE || v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

char *strstrip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

static bool stat_is_dev_null(const struct stat *st) {
        return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

int fopen_regular(const char *path, FILE **ret) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        FILE *f;
        int flags;

        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) && !stat_is_dev_null(&st))
                return -EBADFD;
        /* a regular file never blocks anyway; clear it so that stdio sees
         * ordinary reads */
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return -errno;
        f = fdopen(fd, "re");
        if (!f)
                return -errno;
        (void) take_fd(&fd);    /* owned by f now */
        *ret = f;
        return 0;
}

int array_grow(void **p, size_t *allocated, size_t n, size_t size) {
        size_t a;
        void *q;

        if (n < *allocated)
                return 0;
        a = *allocated ? *allocated * 2 : 4;
        q = reallocarray(*p, a, size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *allocated = a;
        return 0;
}

int write_all(int fd, const char *text) {
        size_t len = strlen(text);

        while (len > 0) {
                ssize_t k = write(fd, text, len);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                text += k;
                len -= (size_t) k;
        }
        return 0;
}

char *vstrdupf(const char *fmt, va_list ap) {
        char *s;

        return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

typedef struct MemStream {
        char **text;
        size_t *size;
        char *buf;
        size_t len, allocated;
        bool failed;
} MemStream;

/* 0, or -ENOMEM: the buffer is as it was. */
static int memstream_grow(MemStream *s, size_t need) {
        size_t want = s->allocated * 2 > need ? s->allocated * 2 : need;
        char *grown;

        if (need <= s->allocated)
                return 0;
        grown = realloc(s->buf, want);
        if (!grown)
                return -ENOMEM;
        s->buf = grown;
        s->allocated = want;
        return 0;
}

/* Once a write failed, every later one does: what follows a gap is no
 * use either. A failure returns 0, never -1 (fopencookie(3)): glibc takes
 * -1 for SIZE_MAX bytes written, and a write larger than its buffer then
 * copies from past the caller's data. */
static ssize_t memstream_write(void *cookie, const char *data, size_t n) {
        MemStream *s = cookie;

        if (s->failed || memstream_grow(s, s->len + n + 1) < 0) {
                s->failed = true;
                errno = ENOMEM;
                return 0;
        }
        memcpy(s->buf + s->len, data, n);
        s->len += n;
        *s->size = s->len;      /* what a fflush() has passed on, as open_memstream() tells */
        return (ssize_t) n;
}

static int memstream_close(void *cookie) {
        MemStream *s = cookie;
        int r = 0;

        if (!s->failed && !s->buf)
                s->buf = calloc(1, 1);
        if (s->failed || !s->buf) {
                free(s->buf);
                *s->size = 0;
                errno = ENOMEM;
                r = -1;
        } else {
                s->buf[s->len] = 0;
                *s->text = s->buf;
                *s->size = s->len;
        }
        free(s);
        return r;
}

FILE *memstream_open(char **text, size_t *size) {
        MemStream *s = calloc(1, sizeof(MemStream));
        FILE *f;

        *text = NULL;
        *size = 0;
        if (!s)
                return NULL;
        s->text = text;
        s->size = size;
        f = fopencookie(s, "w", (cookie_io_functions_t) { .write = memstream_write, .close = memstream_close });
        if (!f)
                free(s);
        return f;
}
