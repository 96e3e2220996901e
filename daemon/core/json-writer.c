/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "json-writer.h"

/* cJSON's print_string_ptr(): the short escapes, \u00XX (lower case) for
 * the other control characters, everything else as it is. */
static size_t json_escape_byte(unsigned char c, char *out) {
        static const char short_escape[] = { ['"'] = '"', ['\\'] = '\\', ['\b'] = 'b', ['\f'] = 'f',
                                             ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't' };
        static const char hex[] = "0123456789abcdef";

        if (c < sizeof(short_escape) && short_escape[c]) {
                out[0] = '\\';
                out[1] = short_escape[c];
                return 2;
        }
        if (c < 0x20) {
                out[0] = '\\';
                out[1] = 'u';
                out[2] = '0';
                out[3] = '0';
                out[4] = hex[c >> 4];
                out[5] = hex[c & 0xf];
                return 6;
        }
        out[0] = (char) c;
        return 1;
}

size_t json_escape(const char *s, size_t n, char *out) {
        size_t len = 0;

        for (size_t i = 0; i < n; i++)
                len += json_escape_byte((unsigned char) s[i], out + len);
        return len;
}

void json_writer_init(JsonWriter *w, FILE *f, JsonStyle style) {
        *w = (JsonWriter) { .f = f, .style = style };
}

int json_writer_failed(const JsonWriter *w) {
        return w->failed ? -EIO : 0;
}

static void json_put(JsonWriter *w, const char *s, size_t n) {
        if (fwrite(s, 1, n, w->f) != n)   /* and write on: a recording skips what a full disk lost */
                w->failed = true;
}

static void json_puts(JsonWriter *w, const char *s) {
        json_put(w, s, strlen(s));
}

/* What goes before a value or a key: the separator after the container's
 * last item, none after a key or for the first. */
static void json_item(JsonWriter *w) {
        uint32_t bit;

        assert(!w->in_string);
        if (w->after_key) {
                w->after_key = false;
                return;
        }
        if (w->depth == 0)
                return;
        bit = UINT32_C(1) << (w->depth - 1);
        if (w->filled & bit)
                json_puts(w, w->style == JSON_SPACED ? ", " : ",");
        w->filled |= bit;
}

static void json_open(JsonWriter *w, char c) {
        json_item(w);
        json_put(w, &c, 1);
        assert(w->depth < JSON_WRITER_DEPTH);
        w->depth++;
        w->filled &= ~(UINT32_C(1) << (w->depth - 1));
}

static void json_close(JsonWriter *w, char c) {
        assert(w->depth > 0 && !w->after_key);
        w->depth--;
        json_put(w, &c, 1);
}

void json_begin_object(JsonWriter *w) {
        json_open(w, '{');
}

void json_end_object(JsonWriter *w) {
        json_close(w, '}');
}

void json_begin_array(JsonWriter *w) {
        json_open(w, '[');
}

void json_end_array(JsonWriter *w) {
        json_close(w, ']');
}

/* s escaped, in pieces small enough for the stack */
static void json_put_escaped(JsonWriter *w, const char *s, size_t n) {
        char out[512 * 6];

        for (size_t at = 0; at < n; at += 512) {
                size_t len = json_escape(s + at, n - at < 512 ? n - at : 512, out);

                json_put(w, out, len);
        }
}

void json_string_begin(JsonWriter *w) {
        json_item(w);
        json_puts(w, "\"");
        w->in_string = true;
}

void json_string_part(JsonWriter *w, const char *s, size_t n) {
        assert(w->in_string);
        json_put_escaped(w, s, n);
}

void json_string_end(JsonWriter *w) {
        assert(w->in_string);
        w->in_string = false;
        json_puts(w, "\"");
}

void json_string(JsonWriter *w, const char *s) {
        json_string_begin(w);
        if (s)
                json_string_part(w, s, strlen(s));
        json_string_end(w);
}

void json_key(JsonWriter *w, const char *key) {
        json_string(w, key);
        json_puts(w, w->style == JSON_SPACED ? ": " : ":");
        w->after_key = true;
}

void json_bool(JsonWriter *w, bool b) {
        json_raw(w, b ? "true" : "false");
}

void json_uint(JsonWriter *w, uint64_t u) {
        char buf[21];

        (void) snprintf(buf, sizeof(buf), "%" PRIu64, u);
        json_raw(w, buf);
}

void json_real_g(JsonWriter *w, double v) {
        char buf[32];

        (void) snprintf(buf, sizeof(buf), "%g", v);
        json_raw(w, buf);
}

void json_raw(JsonWriter *w, const char *text) {
        json_item(w);
        json_puts(w, text);
}

void json_newline(JsonWriter *w) {
        assert(w->depth == 0 && !w->in_string);
        json_puts(w, "\n");
}
