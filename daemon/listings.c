/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The replies that list every disk, written in parts: at 10,000 disks
 * `devices` is 9 MB of JSON, which built as one cJSON tree held the loop
 * 0.3 s and left 75 MiB resident. A part is printed one disk at a time,
 * each from its own small tree; the text is byte for byte what the whole
 * tree printed.
 *
 * A listing is of the disks known when the request came, in name order,
 * each as it is when its part is made: one gone by then is left out, one
 * added since is not in it. */
#include <stdlib.h>

#include "device.h"
#include "drift.h"
#include "explain.h"
#include "listings.h"
#include "manager.h"
#include "protocol.h"
#include "util.h"

typedef struct Listing Listing;
struct Listing {
        ControlStream stream;   /* first: the stream is the listing */
        /* d's item in *ret, 1; 0 to leave d out; -ENOMEM */
        int (*item)(Listing *l, Manager *m, Device *d, cJSON **ret);
        /* what closes the reply, after the array */
        void (*end)(const Listing *l, Manager *m, FILE *f);
        const char *head;       /* what opens it, up to the array's '[' */
        dev_t *devnums;         /* in name order */
        size_t n, next;
        bool started, any;
        unsigned drifted, pending;      /* verify's counts */
};

static int listing_next(ControlStream *s, Manager *m, FILE *f) {
        Listing *l = (Listing *) s;

        if (!l->started) {
                fputs(l->head, f);
                l->started = true;
                return 1;
        }
        while (l->next < l->n) {
                Device *d = device_get(m, l->devnums[l->next++]);
                cJSON *o = NULL;
                char *text;
                int r = d ? l->item(l, m, d, &o) : 0;

                if (r <= 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                text = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                if (!text)
                        return -ENOMEM;
                fprintf(f, "%s%s", l->any ? "," : "", text);
                free(text);
                l->any = true;
                return 1;
        }
        l->end(l, m, f);
        return 0;
}

static void listing_free(ControlStream *s) {
        Listing *l = (Listing *) s;

        if (!l)
                return;
        free(l->devnums);
        free(l);
}

static Listing *listing_new(Manager *m, const char *head) {
        _cleanup_free_ Device **sorted = NULL;
        int n = devices_sorted(m, &sorted);
        Listing *l;

        if (n < 0)
                return NULL;
        l = calloc(1, sizeof(Listing));
        if (!l)
                return NULL;
        l->stream = (ControlStream) { .next = listing_next, .free = listing_free };
        l->head = head;
        l->devnums = n > 0 ? calloc((size_t) n, sizeof(dev_t)) : NULL;
        if (n > 0 && !l->devnums) {
                free(l);
                return NULL;
        }
        for (int i = 0; i < n; i++)
                l->devnums[i] = device_devnum(sorted[i]);
        l->n = (size_t) n;
        return l;
}

static int device_item(Listing *l _unused_, Manager *m, Device *d, cJSON **ret) {
        *ret = explain_device_report(m, d);
        return *ret ? 1 : -ENOMEM;
}

static void devices_end(const Listing *l _unused_, Manager *m _unused_, FILE *f) {
        fputs("]}\n", f);
}

ControlStream *listing_devices(Manager *m) {
        Listing *l = listing_new(m, "{\"" PROTOCOL_KEY_OK "\":true,\"" PROTOCOL_KEY_RESULT "\":[");

        if (!l)
                return NULL;
        l->item = device_item;
        l->end = devices_end;
        return &l->stream;
}

static int verify_item(Listing *l, Manager *m, Device *d, cJSON **ret) {
        bool drifted, pending;
        int r = drift_verify_entry(m, d, ret, &drifted, &pending);

        l->drifted += drifted;
        l->pending += pending;
        return r;
}

static void verify_end(const Listing *l, Manager *m, FILE *f) {
        fprintf(f, "],\"mode\":\"%s\",\"drifted\":%u,\"pending\":%u}}\n", manager_writes(m) ? "enforce" : "observe",
                l->drifted, l->pending);
}

ControlStream *listing_verify(Manager *m) {
        Listing *l = listing_new(m, "{\"" PROTOCOL_KEY_OK "\":true,\"" PROTOCOL_KEY_RESULT "\":{\"devices\":[");

        if (!l)
                return NULL;
        l->item = verify_item;
        l->end = verify_end;
        return &l->stream;
}
