/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>

#include "json-writer.h"
#include "log.h"
#include "record.h"
#include "report.h"
#include "util.h"

/* The header and tick lines are streamed (json-writer.h): a cJSON tree
 * would allocate on every tick. A device line is a report's tree,
 * printed by cJSON. */
typedef struct TrialNote {
        char device[DISKSTAT_NAME_MAX];
        char why[160];          /* "": not stepped, else stopped */
} TrialNote;

struct Recorder {
        FILE *f;
        JsonWriter w;
        uint64_t start_ms;      /* 0: nothing written since the header */
        bool in_tick;
        /* the tick's trials' notes, written after its stats; reused */
        TrialNote *notes;
        size_t n_notes, notes_size;
};

/* Recordings go to places like /var/tmp, where anyone may have planted a
 * symlink, a FIFO or a hard link under the name: never follow a link
 * (O_NOFOLLOW), never block in open() on a FIFO (O_NONBLOCK), append only
 * to a regular file of our own with no other name, and create it 0600 (it
 * shows every disk's traffic). */
static int record_open_file(const char *path, FILE **ret) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        FILE *f;

        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0 && errno == ELOOP)
                return log_error_errno(errno, "%s is a symbolic link, refusing to record into it", path);
        if (fd < 0 && errno == ENXIO)   /* a FIFO nobody reads */
                return log_error_errno(errno, "%s is not a regular file, refusing to record into it", path);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return log_error_errno(EBADFD, "%s is not a regular file, refusing to record into it", path);
        /* someone else's file, or a hard link to one we may write (another
         * user can make either in /var/tmp): appending would write there */
        if (st.st_uid != geteuid() || st.st_nlink != 1)
                return log_error_errno(EPERM, "%s is owned by uid %u or has other hard links, "
                                       "refusing to record into it", path, (unsigned) st.st_uid);
        if (fcntl(fd, F_SETFL, O_APPEND) < 0)   /* clears O_NONBLOCK */
                return -errno;
        f = fdopen(fd, "ae");
        if (!f)
                return -errno;
        (void) take_fd(&fd);    /* owned by f now */
        *ret = f;
        return 0;
}

int record_open(const char *path, const KernelCaps *caps, unsigned tick_ms, Recorder **ret) {
        Recorder *r = calloc(1, sizeof(Recorder));
        int k;

        if (!r)
                return -ENOMEM;
        k = record_open_file(path, &r->f);
        if (k < 0) {
                free(r);
                return k;
        }
        setvbuf(r->f, NULL, _IOLBF, 0);
        json_writer_init(&r->w, r->f, JSON_SPACED);
        json_begin_object(&r->w);
        json_key(&r->w, "blkpolicyd_recording");
        json_uint(&r->w, 1);
        json_key(&r->w, "kernel");
        json_string(&r->w, caps->release);
        json_key(&r->w, "dispatch_direct");
        json_string(&r->w, tristate_to_string(caps->dispatch_direct));
        json_key(&r->w, "tick_ms");
        json_uint(&r->w, tick_ms);
        json_end_object(&r->w);
        json_newline(&r->w);
        *ret = r;
        return 0;
}

Recorder *record_close(Recorder *r) {
        if (!r)
                return NULL;
        fclose(r->f);
        free(r->notes);
        free(r);
        return NULL;
}

void record_write_device(Recorder *r, const DeviceFacts *facts) {
        cJSON *j = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(j, "device");
        char *text;

        cJSON_AddStringToObject(d, "name", facts->name);
        cJSON_AddItemToObject(d, "classes", report_classes(facts->classes));
        cJSON_AddItemToObject(d, "facts", report_facts(facts));
        cJSON_AddItemToObject(d, "topology", report_topology(facts));
        text = cJSON_PrintUnformatted(j);
        if (text) {     /* never amid a tick's line: with --record a tick is read whole */
                json_raw(&r->w, text);
                json_newline(&r->w);
        }
        free(text);
        cJSON_Delete(j);
}

/* Whole milliseconds of the clock less the start's: the trials' now_ms
 * are the clock's whole milliseconds, and their differences must be the
 * same in a replay. */
static uint64_t record_t(Recorder *r, uint64_t now_usec) {
        if (!r->start_ms)
                r->start_ms = now_usec / 1000;
        return now_usec / 1000 - r->start_ms;
}

void record_write_tick(Recorder *r, uint64_t now_usec, uint64_t tick) {
        r->in_tick = true;
        r->n_notes = 0;
        json_begin_object(&r->w);
        json_key(&r->w, "t");
        json_uint(&r->w, record_t(r, now_usec));
        json_key(&r->w, "tick");
        json_uint(&r->w, tick);
        json_key(&r->w, "stats");
        json_begin_object(&r->w);
}

void record_write_sample(Recorder *r, const char *name, const DiskStat *st, double dispatch_busy) {
        const uint64_t fields[] = {
                st->c.rd_ios, st->c.rd_merges, st->c.rd_sectors, st->c.rd_ticks,
                st->c.wr_ios, st->c.wr_merges, st->c.wr_sectors, st->c.wr_ticks,
                st->in_flight, st->c.io_ticks, st->c.time_in_queue,
        };

        json_key(&r->w, name);
        json_begin_array(&r->w);
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                json_uint(&r->w, fields[i]);
        json_real_g(&r->w, dispatch_busy);
        json_end_array(&r->w);
}

static void write_notes(Recorder *r) {
        json_key(&r->w, "trials");
        json_begin_object(&r->w);
        for (size_t i = 0; i < r->n_notes; i++) {
                json_key(&r->w, r->notes[i].device);
                json_begin_object(&r->w);
                json_key(&r->w, "event");
                json_string(&r->w, r->notes[i].why[0] ? "stop" : "wait");
                if (r->notes[i].why[0]) {
                        json_key(&r->w, "why");
                        json_string(&r->w, r->notes[i].why);
                }
                json_end_object(&r->w);
        }
        json_end_object(&r->w);
}

void record_end_tick(Recorder *r) {
        if (!r->in_tick)
                return;
        json_end_object(&r->w);         /* the stats */
        if (r->n_notes)
                write_notes(r);
        json_end_object(&r->w);
        json_newline(&r->w);
        r->in_tick = false;
}

/* A note of the tick open: dropped when there is no memory for it (the
 * recording is a debugging aid; the daemon goes on). */
static void add_note(Recorder *r, const char *name, const char *why) {
        if (r->n_notes == r->notes_size) {
                size_t n = r->notes_size ? r->notes_size * 2 : 4;
                TrialNote *v = reallocarray(r->notes, n, sizeof(TrialNote));

                if (!v) {
                        log_oom();
                        return;
                }
                r->notes = v;
                r->notes_size = n;
        }
        r->notes[r->n_notes] = (TrialNote) {};
        (void) strscpy(r->notes[r->n_notes].device, sizeof(r->notes[r->n_notes].device), name);
        (void) strscpy(r->notes[r->n_notes].why, sizeof(r->notes[r->n_notes].why), why);
        r->n_notes++;
}

static void trial_line_begin(Recorder *r, uint64_t now_usec, const char *name, const char *event) {
        json_begin_object(&r->w);
        json_key(&r->w, "t");
        json_uint(&r->w, record_t(r, now_usec));
        json_key(&r->w, "trial");
        json_begin_object(&r->w);
        json_key(&r->w, "device");
        json_string(&r->w, name);
        json_key(&r->w, "event");
        json_string(&r->w, event);
}

static void trial_line_end(Recorder *r) {
        json_end_object(&r->w);
        json_end_object(&r->w);
        json_newline(&r->w);
}

static void key_uint(Recorder *r, const char *key, uint64_t v) {
        json_key(&r->w, key);
        json_uint(&r->w, v);
}

void record_trial_start(Recorder *r, uint64_t now_usec, const char *name, const DeviceTrial *t) {
        char buf[SCHED_CHOICE_TEXT_MAX];

        if (r->in_tick)         /* passes run after the tick's line: never */
                return;
        trial_line_begin(r, now_usec, name, "start");
        json_key(&r->w, "started_by");
        json_string(&r->w, t->by_hand ? "blkpolicyctl" : "policy");
        json_key(&r->w, "seed");
        (void) snprintf(buf, sizeof(buf), "%" PRIu64, t->seed);
        json_string(&r->w, buf);
        json_key(&r->w, "candidates");
        json_begin_array(&r->w);
        for (unsigned i = 0; i < t->config.n_candidates; i++) {
                (void) sched_choice_format(&t->config.candidates[i], buf, sizeof(buf));
                json_string(&r->w, buf);
        }
        json_end_array(&r->w);
        key_uint(r, "window_ms", t->config.window_ms);
        key_uint(r, "settle_ms", t->config.settle_ms);
        key_uint(r, "max_duration_ms", t->config.max_duration_ms);
        json_key(&r->w, "min_gain");
        (void) snprintf(buf, sizeof(buf), "%.17g", t->config.min_gain);     /* exactly the double */
        json_raw(&r->w, buf);
        key_uint(r, "max_switches_per_hour", t->config.max_switches_per_hour);
        trial_line_end(r);
}

void record_trial_stop(Recorder *r, uint64_t now_usec, const char *name, const char *why) {
        if (r->in_tick) {
                add_note(r, name, why);
                return;
        }
        trial_line_begin(r, now_usec, name, "stop");
        json_key(&r->w, "why");
        json_string(&r->w, why);
        trial_line_end(r);
}

void record_trial_wait(Recorder *r, const char *name) {
        if (r->in_tick)
                add_note(r, name, "");
}

int record_parse_header(const cJSON *j, KernelCaps *caps) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kernel");
        const cJSON *dd = cJSON_GetObjectItemCaseSensitive(j, "dispatch_direct");

        *caps = (KernelCaps) { .dispatch_direct = TRISTATE_UNKNOWN };
        if (!cJSON_IsString(k) || strscpy(caps->release, sizeof(caps->release), k->valuestring) < 0)
                return -EBADMSG;
        if (cJSON_IsString(dd))
                caps->dispatch_direct = tristate_from_string(dd->valuestring);
        return kernel_version_parse(caps->release, caps->version) < 0 ? -EBADMSG : 0;
}

static const char *json_get_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : "";
}

/* A whole number in [0, max], or -EBADMSG: a recording is untrusted input,
 * and converting an out-of-range double to an integer is undefined. */
static int json_whole(double v, double max, uint64_t *ret) {
        if (!(v >= 0 && v <= max) || v != (double) (uint64_t) v)
                return -EBADMSG;
        *ret = (uint64_t) v;
        return 0;
}

static int json_unsigned(const cJSON *o, const char *key, unsigned *ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        uint64_t u = 0;

        if (v && (!cJSON_IsNumber(v) || json_whole(v->valuedouble, UINT32_MAX, &u) < 0))
                return -EBADMSG;
        *ret = (unsigned) u;
        return 0;
}

/* What decide() matches of a device's topology: its counts and kinds,
 * not the names. A recording older than the topology has none: alone. */
static int record_parse_topology(const cJSON *t, DeviceTopology *ret) {
        const cJSON *dm = cJSON_GetObjectItemCaseSensitive(t, "dm"), *md = cJSON_GetObjectItemCaseSensitive(t, "md");
        int n = nvme_multipath_from_string(json_get_string(t, "nvme_multipath"));

        *ret = (DeviceTopology) { .nvme_multipath = n > 0 ? (NvmeMultipath) n : NVME_MPATH_NONE };
        if (!t)
                return 0;
        ret->n_holders = (unsigned) cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "holders"));
        ret->n_slaves = (unsigned) cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "slaves"));
        (void) strscpy(ret->dm_uuid_prefix, sizeof(ret->dm_uuid_prefix), json_get_string(dm, "uuid_prefix"));
        (void) strscpy(ret->md_level, sizeof(ret->md_level), json_get_string(md, "level"));
        return json_unsigned(md, "raid_disks", &ret->md_raid_disks);
}

int record_parse_device(const cJSON *j, DeviceFacts *f) {
        const cJSON *facts = cJSON_GetObjectItemCaseSensitive(j, "facts");
        const cJSON *classes = cJSON_GetObjectItemCaseSensitive(j, "classes");
        const cJSON *c, *scheds;
        int z;

        *f = (DeviceFacts) {};
        if (!cJSON_IsObject(facts) || !cJSON_IsArray(classes) ||
            strscpy(f->name, sizeof(f->name), json_get_string(j, "name")) < 0 || !f->name[0])
                return -EBADMSG;
        cJSON_ArrayForEach(c, classes) {
                int k = cJSON_IsString(c) ? class_from_string(c->valuestring) : -EINVAL;
                if (k < 0)
                        return -EBADMSG;
                f->classes |= CLASS_BIT(k);
        }
        (void) strscpy(f->driver, sizeof(f->driver), json_get_string(facts, "driver"));
        (void) strscpy(f->subsystem, sizeof(f->subsystem), json_get_string(facts, "subsystem"));
        (void) strscpy(f->model, sizeof(f->model), json_get_string(facts, "model"));
        if (json_unsigned(facts, "hw_queues", &f->hw_queues) < 0 ||
            json_unsigned(facts, "poll_queues", &f->poll_queues) < 0 ||
            json_unsigned(facts, "nr_requests", &f->nr_requests) < 0 || f->poll_queues > f->hw_queues)
                return -EBADMSG;
        f->rotational = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(facts, "rotational"));
        f->hidden = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(facts, "hidden"));
        z = zoned_from_string(json_get_string(facts, "zoned"));
        f->zoned = z > 0 ? (ZonedModel) z : ZONED_NONE;
        scheds = cJSON_GetObjectItemCaseSensitive(facts, "schedulers");
        if (!cJSON_IsArray(scheds))
                scheds = NULL;
        f->schedulers.current = -1;     /* unless "scheduler" is one of the list */
        cJSON_ArrayForEach(c, scheds) {
                int k = cJSON_IsString(c) ? scheduler_list_add(&f->schedulers, c->valuestring) : -EBADMSG;

                if (k < 0)
                        return -EBADMSG;
                if (streq(c->valuestring, json_get_string(facts, "scheduler")))
                        f->schedulers.current = (int8_t) k;
        }
        if (sscanf(json_get_string(facts, "dev"), "%u:%u", &f->major, &f->minor) != 2)
                return -EBADMSG;
        return record_parse_topology(cJSON_GetObjectItemCaseSensitive(j, "topology"), &f->topology);
}

int record_parse_stat(const cJSON *array, DiskStat *st, double *dispatch_busy) {
        uint64_t *fields[] = {
                &st->c.rd_ios, &st->c.rd_merges, &st->c.rd_sectors, &st->c.rd_ticks,
                &st->c.wr_ios, &st->c.wr_merges, &st->c.wr_sectors, &st->c.wr_ticks,
                &st->in_flight, &st->c.io_ticks, &st->c.time_in_queue,
        };
        const cJSON *c;
        unsigned i = 0;

        *st = (DiskStat) { .n_fields = 14 };
        if (!cJSON_IsArray(array) || cJSON_GetArraySize(array) != RECORD_STAT_FIELDS)
                return -EBADMSG;
        cJSON_ArrayForEach(c, array) {
                if (!cJSON_IsNumber(c))
                        return -EBADMSG;
                if (i < ELEMENTSOF(fields)) {
                        /* counters beyond 2^53 lose precision in JSON anyway */
                        if (json_whole(c->valuedouble, 9007199254740992.0, fields[i]) < 0)
                                return -EBADMSG;
                } else if (c->valuedouble >= -1 && c->valuedouble <= 1000)
                        *dispatch_busy = c->valuedouble;
                else
                        return -EBADMSG;
                i++;
        }
        return 0;
}

static int json_get_uint64(const cJSON *o, const char *key, uint64_t *ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsNumber(v) ? json_whole(v->valuedouble, 9007199254740992.0, ret) : -EBADMSG;
}

static int parse_candidates(const cJSON *a, TrialPolicy *config) {
        const cJSON *c;

        if (!cJSON_IsArray(a))
                return -EBADMSG;
        cJSON_ArrayForEach(c, a) {
                const char *error;
                unsigned n = 0;

                if (!cJSON_IsString(c) || config->n_candidates >= SCHED_CHOICES_MAX ||
                    trial_choices_parse(c->valuestring, &config->candidates[config->n_candidates], &n, &error) < 0 ||
                    n != 1)
                        return -EBADMSG;
                config->n_candidates++;
        }
        return 0;
}

static int parse_trial_start(const cJSON *j, RecordTrialStart *ret) {
        const cJSON *gain = cJSON_GetObjectItemCaseSensitive(j, "min_gain");
        const char *seed = json_get_string(j, "seed");
        uint64_t switches = 0;
        char *end;

        *ret = (RecordTrialStart) { .by_hand = streq(json_get_string(j, "started_by"), "blkpolicyctl") };
        if (strscpy(ret->device, sizeof(ret->device), json_get_string(j, "device")) < 0 || !ret->device[0])
                return -EBADMSG;
        errno = 0;
        ret->seed = strtoull(seed, &end, 10);
        if (!*seed || *end || errno != 0 || !cJSON_IsNumber(gain))
                return -EBADMSG;
        ret->config.min_gain = gain->valuedouble;
        if (parse_candidates(cJSON_GetObjectItemCaseSensitive(j, "candidates"), &ret->config) < 0 ||
            json_get_uint64(j, "window_ms", &ret->config.window_ms) < 0 ||
            json_get_uint64(j, "settle_ms", &ret->config.settle_ms) < 0 ||
            json_get_uint64(j, "max_duration_ms", &ret->config.max_duration_ms) < 0 ||
            json_get_uint64(j, "max_switches_per_hour", &switches) < 0 || switches > UINT_MAX)
                return -EBADMSG;
        ret->config.max_switches_per_hour = (unsigned) switches;
        ret->config.enabled = true;
        return 1;
}

int record_parse_trial(const cJSON *j, RecordTrialStart *ret, const char **name, const char **why) {
        const char *event = json_get_string(j, "event");

        *name = json_get_string(j, "device");
        *why = json_get_string(j, "why");
        if (!cJSON_IsObject(j) || !**name)
                return -EBADMSG;
        if (streq(event, "start"))
                return parse_trial_start(j, ret);
        return streq(event, "stop") ? 0 : -EBADMSG;
}
