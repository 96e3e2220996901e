/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* JSON written as it goes, for the texts too big or too frequent for a
 * cJSON tree: the listings' replies (control/listings.c) and a
 * recording's tick lines (io/record.c). Every string, keys too, goes
 * through json_escape(), which escapes as cJSON prints (a part made by
 * cJSON and one made here read alike): ", \ and the control characters
 * escaped, every other byte as it is (UTF-8 or not, cJSON checks none).
 *
 * A write that fails leaves the writer failed (json_writer_failed()):
 * a caller checks once after a piece, not after every call. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What stands between items and between a key and its value. */
typedef enum JsonStyle {
        JSON_COMPACT,   /* "," ":" as cJSON_PrintUnformatted() */
        JSON_SPACED,    /* ", " ": " as recordings have always been */
} JsonStyle;

#define JSON_WRITER_DEPTH 32

typedef struct JsonWriter {
        FILE *f;                /* where the next write goes; a caller may change it between pieces */
        JsonStyle style;
        unsigned depth;
        uint32_t filled;        /* bit i: the container at depth i+1 has an item */
        bool after_key;         /* the next write is that key's value */
        bool in_string;         /* between json_string_begin() and _end() */
        bool failed;
} JsonWriter;

/* s's n bytes as they stand inside a JSON string, into out, which holds
 * 6 * n bytes; the bytes written. */
size_t json_escape(const char *s, size_t n, char *out);

void json_writer_init(JsonWriter *w, FILE *f, JsonStyle style);
/* -EIO once a write failed, 0 before */
int json_writer_failed(const JsonWriter *w);

void json_begin_object(JsonWriter *w);
void json_end_object(JsonWriter *w);
void json_begin_array(JsonWriter *w);
void json_end_array(JsonWriter *w);
void json_key(JsonWriter *w, const char *key);

void json_string(JsonWriter *w, const char *s);        /* NULL as "", as cJSON */
void json_bool(JsonWriter *w, bool b);
void json_uint(JsonWriter *w, uint64_t u);
/* %g: 6 significant digits, what recordings have of a ratio. */
void json_real_g(JsonWriter *w, double v);
/* A value printed already (cJSON_PrintUnformatted()'s), as it is. */
void json_raw(JsonWriter *w, const char *text);

/* The end of a line after a whole value: replies and recordings are a
 * value a line. */
void json_newline(JsonWriter *w);

/* A string written in pieces: too long to escape at once. */
void json_string_begin(JsonWriter *w);
void json_string_part(JsonWriter *w, const char *s, size_t n);
void json_string_end(JsonWriter *w);
