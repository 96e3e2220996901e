/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The replies that list every disk, written in parts: at 10,000 disks
 * `devices` is 9 MB of JSON, which built as one cJSON tree held the loop
 * 0.3 s and left 75 MiB resident. A part is printed one disk at a time,
 * each from its own small tree; the text is byte for byte what the whole
 * tree printed.
 *
 * A listing is of the disks known when the request came, in name order,
 * each once, as it is when its part is made: one gone by then is left
 * out, one added since is not in it. A disk is found again by number and
 * name: a number that went to another disk meanwhile (NVMe's are handed
 * out again) finds that one, which was not asked for. One removed and
 * added again under both is listed as it is now: it is the same name. */
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "drift.h"
#include "explain.h"
#include "json-writer.h"
#include "listings.h"
#include "manager.h"
#include "metrics.h"
#include "policy-set.h"
#include "protocol.h"
#include "util.h"

typedef struct Listing Listing;
/* d's item in *ret, 1; 0 to leave d out; -ENOMEM */
typedef int (*ListingItem)(Listing *l, Manager *m, Device *d, cJSON **ret);
/* what opens the reply, up to the array (left open) */
typedef void (*ListingHead)(JsonWriter *w);
/* what closes the reply, after the array */
typedef void (*ListingEnd)(Listing *l, Manager *m);

struct Listing {
        ControlStream stream;   /* first: the stream is the listing */
        ListingHead head;
        ListingItem item;
        ListingEnd end;
        JsonWriter w;           /* its f each part's */
        dev_t *devnums;         /* in name order */
        char *names;            /* theirs, one after the other, each with its NUL */
        const char *name;       /* the next one's */
        size_t n, next;
        bool started;
        unsigned drifted, pending, not_kept, canary;    /* verify's counts: devices */
        PolicySet *preview;     /* verify --policy's set, held */
        unsigned changes, changed, managed, unmanaged, in_flight;      /* its counts */
};

/* The next disk of the listing that is still there, NULL after the last. */
static Device *listing_take(Listing *l, Manager *m) {
        while (l->next < l->n) {
                Device *d = device_get(&m->ctx, l->devnums[l->next++]);
                const char *name = l->name;

                l->name += strlen(name) + 1;
                if (d && streq(device_name(d), name))
                        return d;
        }
        return NULL;
}

/* A piece's writes are checked when it is written: a part cut short
 * stops there, rather than at the ferror() control.c asks after the part
 * (memstream_open()). */
static int listing_next(ControlStream *s, void *userdata, FILE *f) {
        Listing *l = (Listing *) s;
        Manager *m = ASSERT_PTR(userdata);
        Device *d;

        l->w.f = f;
        if (!l->started) {
                l->started = true;
                l->head(&l->w);
                return json_writer_failed(&l->w) < 0 ? -ENOMEM : 1;
        }
        while ((d = listing_take(l, m))) {
                cJSON *o = NULL;
                char *text;
                int r = l->item(l, m, d, &o);

                if (r <= 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                text = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                if (!text)
                        return -ENOMEM;
                json_raw(&l->w, text);
                free(text);
                return json_writer_failed(&l->w) < 0 ? -ENOMEM : 1;
        }
        l->end(l, m);
        json_newline(&l->w);
        return json_writer_failed(&l->w) < 0 ? -ENOMEM : 0;
}

static void listing_free(ControlStream *s) {
        Listing *l = (Listing *) s;

        if (!l)
                return;
        free(l->devnums);
        free(l->names);
        policy_set_unref(l->preview);
        free(l);
}

static ControlStream *listing_new(Manager *m, ListingHead head, ListingItem item, ListingEnd end) {
        _cleanup_free_ Device **sorted = NULL;
        int n = devices_sorted(&m->ctx, &sorted);
        size_t size = 0, at = 0;
        Listing *l;

        if (n < 0)
                return NULL;
        l = calloc(1, sizeof(Listing));
        if (!l)
                return NULL;
        l->stream = (ControlStream) { .next = listing_next, .free = listing_free };
        json_writer_init(&l->w, NULL, JSON_COMPACT);
        l->head = head;
        l->item = item;
        l->end = end;
        for (int i = 0; i < n; i++)
                size += strlen(device_name(sorted[i])) + 1;
        l->devnums = calloc((size_t) n + 1, sizeof(dev_t));
        l->name = l->names = malloc(size + 1);
        if (!l->devnums || !l->names) {
                listing_free(&l->stream);
                return NULL;
        }
        for (int i = 0; i < n; i++) {
                const char *name = device_name(sorted[i]);
                size_t len = strlen(name) + 1;

                l->devnums[i] = device_devnum(sorted[i]);
                memcpy(l->names + at, name, len);
                at += len;
        }
        l->n = (size_t) n;
        return &l->stream;
}

static int device_item(Listing *l _unused_, Manager *m, Device *d, cJSON **ret) {
        *ret = explain_device_report(m, d);
        return *ret ? 1 : -ENOMEM;
}

/* {"ok":true,"result": */
static void reply_ok_head(JsonWriter *w) {
        json_begin_object(w);
        json_key(w, PROTOCOL_KEY_OK);
        json_bool(w, true);
        json_key(w, PROTOCOL_KEY_RESULT);
}

static void devices_head(JsonWriter *w) {
        reply_ok_head(w);
        json_begin_array(w);
}

static void devices_end(Listing *l, Manager *m _unused_) {
        json_end_array(&l->w);
        json_end_object(&l->w);
}

ControlStream *listing_devices(Manager *m) {
        return listing_new(m, devices_head, device_item, devices_end);
}

static int verify_item(Listing *l, Manager *m, Device *d, cJSON **ret) {
        VerifyFlags f;
        int r = drift_verify_entry(&m->ctx, d, ret, &f);

        l->drifted += f.drifted;
        l->pending += f.pending;
        l->not_kept += f.not_kept;
        l->canary += f.canary;
        return r;
}

static void verify_head(JsonWriter *w) {
        reply_ok_head(w);
        json_begin_object(w);
        json_key(w, "devices");
        json_begin_array(w);
}

typedef struct ListingCount {
        const char *key;
        unsigned value;
} ListingCount;

/* What closes both of verify's replies: the array, the mode, the counts. */
static void verify_counts_end(Listing *l, Manager *m, const ListingCount *counts, size_t n) {
        JsonWriter *w = &l->w;

        json_end_array(w);
        json_key(w, "mode");
        json_string(w, manager_writes(m) ? "enforce" : "observe");
        for (size_t i = 0; i < n; i++) {
                json_key(w, counts[i].key);
                json_uint(w, counts[i].value);
        }
        json_end_object(w);
        json_end_object(w);
}

static void verify_end(Listing *l, Manager *m) {
        const ListingCount counts[] = { { "drifted", l->drifted }, { "pending", l->pending },
                                        { "not_kept", l->not_kept }, { "canary", l->canary } };

        verify_counts_end(l, m, counts, ELEMENTSOF(counts));
}

ControlStream *listing_verify(Manager *m) {
        return listing_new(m, verify_head, verify_item, verify_end);
}

static int preview_item(Listing *l, Manager *m, Device *d, cJSON **ret) {
        PreviewFlags f;
        int r = drift_preview_entry(&m->ctx, d, l->preview, ret, &f);

        l->changes += f.changes;
        l->changed += r > 0 && f.changes > 0;
        l->managed += f.managed;
        l->unmanaged += f.unmanaged;
        l->in_flight += f.in_flight;
        return r;
}

/* The counts say whether anything would change: the exit status of
 * blkpolicyctl verify --policy. */
static void preview_end(Listing *l, Manager *m) {
        const ListingCount counts[] = { { "changes", l->changes }, { "changed", l->changed },
                                        { "managed", l->managed }, { "unmanaged", l->unmanaged },
                                        { "in_flight", l->in_flight } };

        verify_counts_end(l, m, counts, ELEMENTSOF(counts));
}

ControlStream *listing_preview(Manager *m, PolicySet *set) {
        ControlStream *s = listing_new(m, verify_head, preview_item, preview_end);

        if (!s) {
                policy_set_unref(set);
                return NULL;
        }
        ((Listing *) s)->preview = set;
        return s;
}

/* metrics: the text is made whole (4.6 MB at 10,000 disks: one part each
 * would mean a disk re-found in every family), then served in parts as
 * the JSON string it is the value of, escaped as cJSON does; not copied
 * into a tree and printed escaped, two copies more of it. */
typedef struct TextReply {
        ControlStream stream;   /* first */
        char *text;
        size_t len, at;
        bool started;
        JsonWriter w;
} TextReply;

#define TEXT_SLICE 4096

static void text_reply_head(JsonWriter *w) {
        reply_ok_head(w);
        json_begin_object(w);
        json_key(w, "content_type");
        json_string(w, METRICS_CONTENT_TYPE);
        json_key(w, "text");
        json_string_begin(w);
}

static int text_reply_next(ControlStream *s, void *userdata _unused_, FILE *f) {
        TextReply *t = (TextReply *) s;
        size_t n;

        t->w.f = f;
        if (!t->started) {
                t->started = true;
                text_reply_head(&t->w);
                return json_writer_failed(&t->w) < 0 ? -ENOMEM : 1;
        }
        if (t->at == t->len) {
                json_string_end(&t->w);
                json_end_object(&t->w);
                json_end_object(&t->w);
                json_newline(&t->w);
                return json_writer_failed(&t->w) < 0 ? -ENOMEM : 0;
        }
        n = t->len - t->at < TEXT_SLICE ? t->len - t->at : TEXT_SLICE;
        json_string_part(&t->w, t->text + t->at, n);
        t->at += n;
        return json_writer_failed(&t->w) < 0 ? -ENOMEM : 1;
}

static void text_reply_free(ControlStream *s) {
        TextReply *t = (TextReply *) s;

        if (!t)
                return;
        free(t->text);
        free(t);
}

ControlStream *listing_metrics_text(char *text) {
        TextReply *t = calloc(1, sizeof(TextReply));

        if (!t) {
                free(text);
                return NULL;
        }
        t->stream = (ControlStream) { .next = text_reply_next, .free = text_reply_free };
        t->text = text;
        t->len = strlen(text);
        json_writer_init(&t->w, NULL, JSON_COMPACT);
        return &t->stream;
}

/* metrics: the live reads a slice per dispatch (metrics_build_step()),
 * then the text served as above. */
typedef struct MetricsReply {
        ControlStream stream;   /* first */
        MetricsBuild *build;    /* NULL once the text is made */
        ControlStream *text;
} MetricsReply;

static int metrics_reply_text(MetricsReply *r, Manager *m) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);
        int k;

        if (!f)
                return -ENOMEM;
        k = metrics_build_write(r->build, m, f);
        if (fclose(f) != 0 || k < 0) {
                free(text);
                return -ENOMEM;
        }
        r->build = metrics_build_free(r->build);
        r->text = listing_metrics_text(text);
        return r->text ? 0 : -ENOMEM;
}

static int metrics_reply_next(ControlStream *s, void *userdata, FILE *f) {
        MetricsReply *r = (MetricsReply *) s;
        Manager *m = ASSERT_PTR(userdata);

        if (r->build && metrics_build_step(r->build, m) > 0)
                return CONTROL_STREAM_YIELD;
        if (r->build && metrics_reply_text(r, m) < 0)
                return -ENOMEM;
        return r->text->next(r->text, m, f);
}

static void metrics_reply_free(ControlStream *s) {
        MetricsReply *r = (MetricsReply *) s;

        if (!r)
                return;
        metrics_build_free(r->build);
        if (r->text)
                r->text->free(r->text);
        free(r);
}

ControlStream *listing_metrics(Manager *m) {
        MetricsReply *r = calloc(1, sizeof(MetricsReply));

        if (!r)
                return NULL;
        r->stream = (ControlStream) { .next = metrics_reply_next, .free = metrics_reply_free };
        if (metrics_build_new(m, &r->build) < 0) {
                free(r);
                return NULL;
        }
        return &r->stream;
}
