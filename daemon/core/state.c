/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state record: the model and its text form. Pure; the files are in
 * state-file.c. */
#include <inttypes.h>

#include "state.h"
#include "util.h"

#define STATE_HEADER "# blkpolicyd state v2"

void device_record_done(DeviceRecord *r) {
        if (!r)
                return;
        for (unsigned i = 0; i < device_record_count(r); i++) {
                free(r->attrs->at[i].found);
                free(r->attrs->at[i].written);
                free(r->attrs->at[i].intent);
        }
        r->attrs = mfree(r->attrs);
}

bool device_record_empty(const DeviceRecord *r) {
        return device_record_count(r) == 0;
}

static AttrRecord *record_find(const DeviceRecord *r, unsigned tunable) {
        for (unsigned i = 0; i < device_record_count(r); i++)
                if (r->attrs->at[i].tunable == tunable)
                        return &r->attrs->at[i];
        return NULL;
}

const AttrRecord *device_record_get(const DeviceRecord *r, unsigned tunable) {
        return record_find(r, tunable);
}

int device_record_found(DeviceRecord *r, unsigned tunable, const char *found) {
        unsigned n = device_record_count(r), at = 0;
        AttrRecords *l;
        char *copy;

        if (tunable >= n_tunables || !found)
                return -EINVAL;
        if (record_find(r, tunable))
                return 0;
        copy = strdup(found);
        if (!copy)
                return -ENOMEM;
        l = realloc(r->attrs, offsetof(AttrRecords, at) + sizeof(AttrRecord) * (n + 1));
        if (!l) {
                free(copy);
                return -ENOMEM;
        }
        r->attrs = l;
        l->n = n;       /* a first realloc() is a malloc() */
        /* kept in tunables[] order: that is the order of writes and of the file */
        while (at < n && l->at[at].tunable < tunable)
                at++;
        memmove(l->at + at + 1, l->at + at, sizeof(AttrRecord) * (n - at));
        l->at[at] = (AttrRecord) { .tunable = tunable, .found = copy };
        l->n++;
        return 1;
}

static int set_value(char **slot, const char *value) {
        char *copy = NULL;

        if (streq_ptr(*slot, value))
                return 0;
        if (value && !(copy = strdup(value)))
                return -ENOMEM;
        free(*slot);
        *slot = copy;
        return 1;
}

int device_record_written(DeviceRecord *r, unsigned tunable, const char *written) {
        AttrRecord *a = record_find(r, tunable);

        return a ? set_value(&a->written, written) : -ENOENT;
}

int device_record_intent(DeviceRecord *r, unsigned tunable, const char *intent) {
        AttrRecord *a = record_find(r, tunable);

        return a ? set_value(&a->intent, intent) : -ENOENT;
}

bool device_record_equal(const DeviceRecord *a, const DeviceRecord *b) {
        if (device_record_count(a) != device_record_count(b) || a->id.major != b->id.major ||
            a->id.minor != b->id.minor || a->id.queue_id != b->id.queue_id)
                return false;
        for (unsigned i = 0; i < device_record_count(a); i++) {
                const AttrRecord *x = &a->attrs->at[i], *y = &b->attrs->at[i];

                if (x->tunable != y->tunable || !streq(x->found, y->found) || !streq_ptr(x->written, y->written) ||
                    !streq_ptr(x->intent, y->intent))
                        return false;
        }
        return true;
}

int device_record_drop(DeviceRecord *r, unsigned tunable) {
        AttrRecord *a = record_find(r, tunable);
        size_t at;

        if (!a)
                return 0;
        free(a->found);
        free(a->written);
        free(a->intent);
        at = (size_t) (a - r->attrs->at);
        memmove(a, a + 1, sizeof(AttrRecord) * (r->attrs->n - at - 1));
        if (--r->attrs->n == 0)
                r->attrs = mfree(r->attrs);
        return 1;
}

int device_record_copy(const DeviceRecord *from, DeviceRecord *to) {
        DeviceRecord c = { .id = from->id };

        for (unsigned i = 0; i < device_record_count(from); i++) {
                const AttrRecord *a = &from->attrs->at[i];

                if (device_record_found(&c, a->tunable, a->found) < 0 ||
                    device_record_written(&c, a->tunable, a->written) < 0 ||
                    device_record_intent(&c, a->tunable, a->intent) < 0) {
                        device_record_done(&c);
                        return -ENOMEM;
                }
        }
        device_record_done(to);
        *to = c;
        return 0;
}

/* A queue id of 0 is unknown (the queue's inode could not be read): then
 * the number decides. Keeping a record that may be stale costs at worst a
 * value put back on the same number; dropping one loses an original. */
bool device_identity_same(const DeviceIdentity *a, const DeviceIdentity *b) {
        if (a->major != b->major || a->minor != b->minor)
                return false;
        return a->queue_id == 0 || b->queue_id == 0 || a->queue_id == b->queue_id;
}

/* A value as sysfs shows it: no space, no control character, not empty. */
bool state_value_valid(const char *v) {
        if (!*v || strlen(v) >= STATE_VALUE_MAX)
                return false;
        for (; *v; v++)
                if ((unsigned char) *v <= ' ' || *v == 0x7f)
                        return false;
        return true;
}

static int parse_header(char *line, DeviceRecord *r, char name[static STATE_NAME_MAX]) {
        unsigned major, minor;
        uint64_t queue, seq;
        int n = -1;

        if (sscanf(line, "device %31s %u:%u queue=%" SCNu64 " diskseq=%" SCNu64 "%n", name, &major, &minor, &queue,
                   &seq, &n) != 5 || n < 0 || line[n] != 0 || !state_value_valid(name))
                return -EBADMSG;
        r->id = (DeviceIdentity) { .major = major, .minor = minor, .queue_id = queue, .diskseq = seq };
        return 0;
}

static const char *dash_null(const char *v) {
        return streq(v, "-") ? NULL : v;
}

static int parse_attr(char *line, DeviceRecord *r) {
        char *save = NULL, *attr, *found, *written, *intent;
        int t, k;

        attr = strtok_r(line, " ", &save);
        found = strtok_r(NULL, " ", &save);
        written = strtok_r(NULL, " ", &save);
        intent = strtok_r(NULL, " ", &save);
        if (!attr || !found || !written || !intent || strtok_r(NULL, " ", &save))
                return -EBADMSG;
        t = tunable_find_attr(attr);
        if (t < 0 || !state_value_valid(found) || streq(found, "-") || streq(found, WRITTEN_UNKNOWN) ||
            !state_value_valid(written) || !state_value_valid(intent) || device_record_get(r, (unsigned) t))
                return -EBADMSG;
        k = device_record_found(r, (unsigned) t, found);
        if (k >= 0)
                k = device_record_written(r, (unsigned) t, dash_null(written));
        if (k >= 0)
                k = device_record_intent(r, (unsigned) t, dash_null(intent));
        return k < 0 ? -ENOMEM : 0;
}

static bool recorded_value_savable(const char *v) {
        return !v || (state_value_valid(v) && !streq(v, "-"));
}

bool device_record_savable(const DeviceRecord *r) {
        for (unsigned i = 0; i < device_record_count(r); i++) {
                const AttrRecord *a = &r->attrs->at[i];

                /* as parse_attr() takes a line back: "-" is none, and a found value is a value */
                if (!a->found || !recorded_value_savable(a->found) || streq(a->found, WRITTEN_UNKNOWN) ||
                    !recorded_value_savable(a->written) || !recorded_value_savable(a->intent))
                        return false;
        }
        return true;
}

/* Splits the next line off text (NUL-terminating it in place). */
static char *next_line(char **text, char *end) {
        char *line = *text, *nl;

        if (line >= end)
                return NULL;
        nl = memchr(line, '\n', (size_t) (end - line));
        *nl = 0;        /* the caller's copy ends in '\n' */
        *text = nl + 1;
        return line;
}

int device_record_parse(const char *text, size_t size, DeviceRecord *ret, char *ret_name) {
        _cleanup_free_ char *copy = NULL;
        DeviceRecord r = {};
        char name[STATE_NAME_MAX];
        char *p, *end, *line;
        int bad = 0, k;
        /* every line is written with its newline: one without was cut */
        bool torn = size > 0 && text[size - 1] != '\n';

        if (memchr(text, 0, size))
                return -EBADMSG;        /* binary garbage: not a record */
        copy = malloc(size + 2);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, text, size);
        copy[size] = '\n';
        copy[size + 1] = 0;
        p = copy;
        end = copy + size + 1;
        line = next_line(&p, end);
        if (!line || !streq(line, STATE_HEADER))
                return -EBADMSG;
        line = next_line(&p, end);
        if (!line)
                return -EBADMSG;
        k = parse_header(line, &r, name);
        if (k < 0) {
                device_record_done(&r);
                return k;
        }
        while ((line = next_line(&p, end))) {
                if (!*line || *line == '#')
                        continue;
                if (torn && p == end) {
                        bad++;
                        continue;
                }
                k = parse_attr(line, &r);
                if (k == -ENOMEM) {
                        device_record_done(&r);
                        return k;
                }
                bad += k < 0;   /* torn or foreign: never fatal, counted */
        }
        *ret = r;
        if (ret_name)
                (void) strscpy(ret_name, STATE_NAME_MAX, name);
        return bad;
}

char *device_record_format(const DeviceRecord *r, const char *name) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        bool ok;

        if (!f)
                return NULL;
        /* a memstream that cannot grow fails the fprintf() and nothing
         * else (glibc 2.36: ferror() and fclose() say 0): a record cut
         * short would lose the originals after the cut */
        ok = fprintf(f, STATE_HEADER "\ndevice %s %u:%u queue=%" PRIu64 " diskseq=%" PRIu64 "\n",
                     name ?: "-", r->id.major, r->id.minor, r->id.queue_id, r->id.diskseq) >= 0;
        for (unsigned i = 0; ok && i < device_record_count(r); i++) {
                const AttrRecord *a = &r->attrs->at[i];

                ok = fprintf(f, "%s %s %s %s\n", tunables[a->tunable].attr, a->found, a->written ?: "-",
                             a->intent ?: "-") >= 0;
        }
        if (fclose(f) != 0 || !ok) {
                free(text);
                return NULL;
        }
        return text;
}
