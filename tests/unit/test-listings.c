/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The listings of every disk, made in parts (listings.c), against a
 * Manager that scanned a copy of a fixture machine in dry-run mode: what
 * changes between parts. */
#include <limits.h>
#include <stdarg.h>

#include "listings.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "tests.h"
#include "util.h"

static char tree[64];   /* a mkdtemp() name */

_printf_(1, 2) static void sh(const char *fmt, ...);

static void new_tree(void) {
        (void) strscpy(tree, sizeof(tree), "/tmp/blkpolicyd-test-listings-XXXXXX");
        ASSERT_TRUE(mkdtemp(tree) != NULL);
        sh("cp -a %s/kvm-6.18/. %s/", FIXTURES_DIR, tree);
}

_printf_(1, 2) static void sh(const char *fmt, ...) {
        char cmd[PATH_MAX * 2];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        ASSERT_EQ_INT(system(cmd), 0);
}

/* A disk like loop0, under name, with the number dev. */
static void add_loop(const char *name, const char *dev) {
        sh("cd %s/sys && cp -a devices/virtual/block/loop0 devices/virtual/block/%s && "
           "echo %s > devices/virtual/block/%s/dev && ln -s ../devices/virtual/block/%s block/%s",
           tree, name, dev, name, name, name);
}

static Manager *scanned_manager(Options *o, char dirs[3][PATH_MAX]) {
        static char *policy_dirs[] = { POLICIES_DIR, NULL };
        Manager *m = NULL;

        snprintf(dirs[0], PATH_MAX, "%s/sys", tree);
        snprintf(dirs[1], PATH_MAX, "%s/debug", tree);
        snprintf(dirs[2], PATH_MAX, "%s/proc", tree);
        *o = (Options) { .config_path = "/dev/null", .policy_dirs = policy_dirs,
                         .roots = { dirs[0], dirs[1], dirs[2] }, .state_dir = "/nonexistent", .dry_run = true,
                         .mode = RUN_ONCE, .log_level = LOG_EMERG };
        ASSERT_EQ_INT(manager_new(o, &m), 0);
        ASSERT_EQ_INT(manager_scan(m), 0);
        return m;
}

/* The names of a `devices` reply, in its order, joined by spaces. */
static void names_of(const char *reply, char *buf, size_t size) {
        cJSON *j = cJSON_Parse(reply), *d;
        size_t len = 0;

        ASSERT_TRUE(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
        buf[0] = 0;
        cJSON_ArrayForEach(d, cJSON_GetObjectItem(j, "result"))
                len += (size_t) snprintf(buf + len, size - len, "%s%s", len ? " " : "",
                                         cJSON_GetStringValue(cJSON_GetObjectItem(d, "name")));
        cJSON_Delete(j);
}

/* loop1 goes after the listing began and its number goes to a new disk,
 * loop9: the listing leaves loop1 out and does not take loop9 for it (it
 * would be out of name order, and was not there when asked). */
TEST(a_number_handed_on_between_parts_brings_no_new_disk) {
        char dirs[3][PATH_MAX], names[256], *text = NULL;
        size_t size = 0;
        Options o;
        Manager *m;
        ControlStream *s;
        FILE *f;
        int r;

        new_tree();
        add_loop("loop1", "7:1");
        add_loop("loop2", "7:2");
        log_set_max_level(LOG_EMERG);
        m = scanned_manager(&o, dirs);
        s = listing_devices(m);
        ASSERT_TRUE(s != NULL);
        f = open_memstream(&text, &size);
        ASSERT_TRUE(f != NULL);
        ASSERT_EQ_INT(s->next(s, m, f), 1);     /* the head */
        ASSERT_EQ_INT(s->next(s, m, f), 1);     /* dm-0 */
        sh("cd %s/sys && rm block/loop1 && rm -r devices/virtual/block/loop1", tree);
        add_loop("loop9", "7:1");
        ASSERT_EQ_INT(manager_scan(m), 0);
        while ((r = s->next(s, m, f)) > 0)
                ;
        ASSERT_EQ_INT(r, 0);
        ASSERT_EQ_INT(fclose(f), 0);
        s->free(s);
        names_of(text, names, sizeof(names));
        ASSERT_STREQ(names, "dm-0 loop0 loop2 vda zram0");
        free(text);
        manager_free(m);
        sh("rm -rf %s", tree);
}

/* A reply's whole text, from its parts (more than min_parts of them). */
static char *drain(ControlStream *s, Manager *m, int min_parts) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        int r, parts = 0;

        ASSERT_TRUE(f != NULL);
        while ((r = s->next(s, m, f)) > 0)
                parts++;
        ASSERT_EQ_INT(r, 0);
        ASSERT_TRUE(parts > min_parts);
        ASSERT_EQ_INT(fclose(f), 0);
        s->free(s);
        return text;
}

/* What cJSON prints for {"ok":true,"result":{"content_type":..,"text":text}}. */
static char *cjson_metrics_reply(const char *text) {
        cJSON *o = cJSON_CreateObject(), *result;
        char *whole;

        ASSERT_TRUE(o != NULL);
        cJSON_AddBoolToObject(o, "ok", true);
        result = cJSON_AddObjectToObject(o, "result");
        cJSON_AddStringToObject(result, "content_type", METRICS_CONTENT_TYPE);
        cJSON_AddStringToObject(result, "text", text);
        whole = cJSON_PrintUnformatted(o);
        ASSERT_TRUE(whole != NULL);
        cJSON_Delete(o);
        return whole;
}

/* `metrics` served in slices of its text is byte for byte the reply cJSON
 * printed when the text was put in a tree: the quotes and newlines of
 * every line escaped the same, across the slices' edges. */
TEST(metrics_in_parts_is_the_reply_cjson_printed) {
        char dirs[3][PATH_MAX], name[16], dev[16], *text, *reply, *whole;
        Options o_;
        Manager *m;

        new_tree();
        for (int i = 1; i <= 40; i++) {  /* a text of many slices */
                snprintf(name, sizeof(name), "loop%d", i);
                snprintf(dev, sizeof(dev), "7:%d", i);
                add_loop(name, dev);
        }
        log_set_max_level(LOG_EMERG);
        m = scanned_manager(&o_, dirs);
        m->config.metrics_per_device = true;    /* a text of many slices */
        ASSERT_EQ_INT(metrics_build(m, &text), 0);
        ASSERT_TRUE(strlen(text) > 3 * 4096);
        reply = drain(listing_metrics(m), m, 3);        /* the head and several slices of the text */

        whole = cjson_metrics_reply(text);
        ASSERT_TRUE(strlen(reply) == strlen(whole) + 1 && reply[strlen(whole)] == '\n');
        ASSERT_TRUE(strncmp(reply, whole, strlen(whole)) == 0);
        free(whole);
        free(reply);
        free(text);
        manager_free(m);
        sh("rm -rf %s", tree);
}

/* Every byte a text may hold, escaped as cJSON escapes it: the short
 * escapes, "backslash u00XX" below 0x20, 0x7f and bytes of 0x80 and up
 * (invalid UTF-8 too) as they are; texts that end on a slice's edge, one
 * byte either side of it, and the empty text. */
TEST(metrics_text_escaped_as_cjson_escapes_every_byte) {
        static const size_t lengths[] = { 0, 1, 255, 4095, 4096, 4097, 8192, 12289 };

        for (size_t l = 0; l < ELEMENTSOF(lengths); l++) {
                char *text = malloc(lengths[l] + 1), *reply, *whole;

                ASSERT_TRUE(text != NULL);
                for (size_t i = 0; i < lengths[l]; i++)
                        text[i] = (char) (1 + (i * 7 + l) % 255);       /* 1..255, no NUL */
                text[lengths[l]] = 0;
                whole = cjson_metrics_reply(text);
                reply = drain(listing_metrics_text(text), NULL, 0);
                ASSERT_TRUE(strlen(reply) == strlen(whole) + 1 && reply[strlen(whole)] == '\n');
                ASSERT_TRUE(strncmp(reply, whole, strlen(whole)) == 0);
                free(whole);
                free(reply);
        }
}

/* `metrics` reads every disk live, METRICS_SLICE (256) a dispatch: a
 * reply over 260 disks gives the loop back once (CONTROL_STREAM_YIELD)
 * before its first byte, and its text is the one metrics_build() makes. */
TEST(metrics_reads_in_slices_between_dispatches) {
        char dirs[3][PATH_MAX], name[16], dev[16], *text = NULL, *whole;
        size_t size = 0;
        FILE *f;
        ControlStream *s;
        Options o_;
        Manager *m;
        int r, yields = 0;

        new_tree();
        for (int i = 1; i <= 260; i++) {
                snprintf(name, sizeof(name), "loop%d", i);
                snprintf(dev, sizeof(dev), "7:%d", i);
                add_loop(name, dev);
        }
        log_set_max_level(LOG_EMERG);
        m = scanned_manager(&o_, dirs);
        m->config.metrics_per_device = true;    /* the scheduler series of every disk */
        ASSERT_EQ_INT(metrics_build(m, &whole), 0);
        s = listing_metrics(m);
        ASSERT_TRUE(s != NULL);
        f = open_memstream(&text, &size);
        ASSERT_TRUE(f != NULL);
        while ((r = s->next(s, m, f)) == CONTROL_STREAM_YIELD) {
                ASSERT_EQ_INT(fflush(f), 0);
                ASSERT_EQ_INT(size, 0);         /* nothing sent while the reads run */
                yields++;
        }
        ASSERT_EQ_INT(yields, 1);
        while (r > 0)
                r = s->next(s, m, f);
        ASSERT_EQ_INT(r, 0);
        ASSERT_EQ_INT(fclose(f), 0);
        s->free(s);
        /* in its JSON string: the quotes escaped */
        ASSERT_TRUE(strstr(text, "blkpolicyd_device_scheduler{device=\\\"loop260\\\""));
        ASSERT_TRUE(strlen(text) > strlen(whole));      /* the text, escaped in its JSON string */
        free(whole);
        free(text);
        manager_free(m);
        sh("rm -rf %s", tree);
}
