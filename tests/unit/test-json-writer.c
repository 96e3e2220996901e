/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* json-writer.h: its strings read as cJSON prints them, byte for byte (a
 * listing's parts from cJSON and from the writer sit side by side), and
 * its separators as the listings and the recordings have them. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json-writer.h"
#include "tests.h"
#include "util.h"

/* s as cJSON_PrintUnformatted() prints a string of it, quotes and all */
static char *cjson_string(const char *s) {
        cJSON *j = cJSON_CreateString(s);
        char *text = cJSON_PrintUnformatted(j);

        cJSON_Delete(j);
        return text;
}

/* s as the writer writes it */
static char *writer_string(const char *s) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        JsonWriter w;

        ASSERT_TRUE(f != NULL);
        json_writer_init(&w, f, JSON_COMPACT);
        json_string(&w, s);
        ASSERT_EQ_INT(json_writer_failed(&w), 0);
        ASSERT_EQ_INT(fclose(f), 0);
        return text;
}

static void assert_as_cjson(const char *s) {
        char *want = cjson_string(s), *got = writer_string(s);

        ASSERT_STREQ(got, want);
        free(want);
        free(got);
}

TEST(json_escape_short_escapes_and_control_characters) {
        char out[64];
        size_t n = json_escape("\"\\\b\f\n\r\t\x01\x1f", 9, out);

        out[n] = 0;
        ASSERT_STREQ(out, "\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f");
}

TEST(json_escape_leaves_other_bytes_as_they_are) {
        /* UTF-8, DEL, a lone continuation byte, an overlong form, 0xff:
         * cJSON checks no UTF-8, and neither does the writer */
        const char s[] = "d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \x7f \x80 \xc0\xaf \xff /";
        char out[sizeof(s) * 6];
        size_t n = json_escape(s, sizeof(s) - 1, out);

        ASSERT_EQ_INT(n, sizeof(s) - 1);
        ASSERT_TRUE(memcmp(out, s, n) == 0);
}

TEST(json_strings_as_cjson_prints_every_byte) {
        char s[2] = {};

        for (int c = 1; c < 256; c++) {
                s[0] = (char) c;
                assert_as_cjson(s);
        }
        assert_as_cjson("");
        assert_as_cjson("sda \"quoted\" back\\slash\ttab\nline\x02\xe6\x97\xa5\xff\xfe end");
}

TEST(json_string_null_as_cjson) {
        char *got = writer_string(NULL);

        ASSERT_STREQ(got, "\"\"");
        free(got);
}

/* longer than the writer's escape buffer, in pieces */
TEST(json_string_in_pieces_as_cjson_whole) {
        size_t len = 5000;
        char *s = malloc(len + 1), *want, *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        JsonWriter w;

        ASSERT_TRUE(s && f);
        for (size_t i = 0; i < len; i++)
                s[i] = (char) (i % 255 + 1);
        s[len] = 0;
        want = cjson_string(s);
        json_writer_init(&w, f, JSON_COMPACT);
        json_string_begin(&w);
        json_string_part(&w, s, 1000);
        json_string_part(&w, s + 1000, len - 1000);
        json_string_end(&w);
        ASSERT_EQ_INT(fclose(f), 0);
        ASSERT_STREQ(text, want);
        free(s);
        free(want);
        free(text);
}

static char *write_sample(JsonStyle style) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        JsonWriter w;

        ASSERT_TRUE(f != NULL);
        json_writer_init(&w, f, style);
        json_begin_object(&w);
        json_key(&w, "ok");
        json_bool(&w, true);
        json_key(&w, "k\"ey");
        json_begin_array(&w);
        json_raw(&w, "{\"a\":1}");
        json_uint(&w, UINT64_MAX);
        json_real_g(&w, 0.5);
        json_begin_object(&w);
        json_end_object(&w);
        json_begin_array(&w);
        json_end_array(&w);
        json_string(&w, "x");
        json_end_array(&w);
        json_key(&w, "no");
        json_bool(&w, false);
        json_end_object(&w);
        json_newline(&w);
        ASSERT_EQ_INT(json_writer_failed(&w), 0);
        ASSERT_EQ_INT(fclose(f), 0);
        return text;
}

TEST(json_writer_compact_as_cjson_unformatted) {
        char *text = write_sample(JSON_COMPACT);

        ASSERT_STREQ(text, "{\"ok\":true,\"k\\\"ey\":[{\"a\":1},18446744073709551615,0.5,{},[],\"x\"],\"no\":false}\n");
        free(text);
}

TEST(json_writer_spaced_as_recordings) {
        char *text = write_sample(JSON_SPACED);

        ASSERT_STREQ(text, "{\"ok\": true, \"k\\\"ey\": [{\"a\":1}, 18446744073709551615, 0.5, {}, [], \"x\"], "
                           "\"no\": false}\n");
        free(text);
}

TEST(json_writer_failed_after_a_failed_write) {
        char buf[4];
        FILE *f = fmemopen(buf, sizeof(buf), "w");
        JsonWriter w;

        ASSERT_TRUE(f != NULL);
        setvbuf(f, NULL, _IONBF, 0);
        json_writer_init(&w, f, JSON_COMPACT);
        json_string(&w, "much too long for four bytes");
        ASSERT_EQ_INT(json_writer_failed(&w), -EIO);
        fclose(f);
}
