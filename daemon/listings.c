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
#include "listings.h"
#include "manager.h"
#include "protocol.h"
#include "util.h"

typedef struct Listing Listing;
/* d's item in *ret, 1; 0 to leave d out; -ENOMEM */
typedef int (*ListingItem)(Listing *l, Manager *m, Device *d, cJSON **ret);
/* what closes the reply, after the array: 0, or -ENOMEM */
typedef int (*ListingEnd)(const Listing *l, Manager *m, FILE *f);

struct Listing {
        ControlStream stream;   /* first: the stream is the listing */
        ListingItem item;
        ListingEnd end;
        const char *head;       /* what opens it, up to the array's '[' */
        dev_t *devnums;         /* in name order */
        char *names;            /* theirs, one after the other, each with its NUL */
        const char *name;       /* the next one's */
        size_t n, next;
        bool started, any;
        unsigned drifted, pending;      /* verify's counts */
};

/* The next disk of the listing that is still there, NULL after the last. */
static Device *listing_take(Listing *l, Manager *m) {
        while (l->next < l->n) {
                Device *d = device_get(m, l->devnums[l->next++]);
                const char *name = l->name;

                l->name += strlen(name) + 1;
                if (d && streq(device_name(d), name))
                        return d;
        }
        return NULL;
}

/* A memstream that cannot grow fails the write and says so nowhere else
 * (glibc 2.36: ferror() and fclose() give 0): each write is checked. */
static int listing_next(ControlStream *s, Manager *m, FILE *f) {
        Listing *l = (Listing *) s;
        Device *d;

        if (!l->started) {
                l->started = true;
                return fputs(l->head, f) < 0 ? -ENOMEM : 1;
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
                r = fprintf(f, "%s%s", l->any ? "," : "", text);
                free(text);
                l->any = true;
                return r < 0 ? -ENOMEM : 1;
        }
        return l->end(l, m, f);
}

static void listing_free(ControlStream *s) {
        Listing *l = (Listing *) s;

        if (!l)
                return;
        free(l->devnums);
        free(l->names);
        free(l);
}

static ControlStream *listing_new(Manager *m, const char *head, ListingItem item, ListingEnd end) {
        _cleanup_free_ Device **sorted = NULL;
        int n = devices_sorted(m, &sorted);
        size_t size = 0, at = 0;
        Listing *l;

        if (n < 0)
                return NULL;
        l = calloc(1, sizeof(Listing));
        if (!l)
                return NULL;
        l->stream = (ControlStream) { .next = listing_next, .free = listing_free };
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

static int devices_end(const Listing *l _unused_, Manager *m _unused_, FILE *f) {
        return fputs("]}\n", f) < 0 ? -ENOMEM : 0;
}

ControlStream *listing_devices(Manager *m) {
        return listing_new(m, "{\"" PROTOCOL_KEY_OK "\":true,\"" PROTOCOL_KEY_RESULT "\":[", device_item, devices_end);
}

static int verify_item(Listing *l, Manager *m, Device *d, cJSON **ret) {
        bool drifted, pending;
        int r = drift_verify_entry(m, d, ret, &drifted, &pending);

        l->drifted += drifted;
        l->pending += pending;
        return r;
}

static int verify_end(const Listing *l, Manager *m, FILE *f) {
        return fprintf(f, "],\"mode\":\"%s\",\"drifted\":%u,\"pending\":%u}}\n",
                       manager_writes(m) ? "enforce" : "observe", l->drifted, l->pending) < 0 ? -ENOMEM : 0;
}

ControlStream *listing_verify(Manager *m) {
        return listing_new(m, "{\"" PROTOCOL_KEY_OK "\":true,\"" PROTOCOL_KEY_RESULT "\":{\"devices\":[", verify_item,
                           verify_end);
}
