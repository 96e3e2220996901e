/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* policy_check_values(): --check-config's warnings about valid values. */
#include <limits.h>
#include <stdio.h>

#include "policy-check.h"
#include "util.h"

/* The schedulers' times kept in jiffies and shown in ms (mq-deadline's
 * dd_var_store() and bfq's bfq_var_store() with __CONV set). */
static const char *const jiffy_times[] = {
        "iosched/read_expire", "iosched/write_expire", "iosched/prio_aging_expire",
        "iosched/fifo_expire_sync", "iosched/fifo_expire_async", "iosched/timeout_sync",
};

/* An unusually large read-ahead: every sequential reader may pull this
 * much into the page cache (AKS issue 5743: 65536 took database reads
 * from 460 MiB/s to a few). No kernel default is above 8192. */
#define READ_AHEAD_KB_LARGE 65536

long long jiffies_kept_ms(long long ms, unsigned hz) {
        long long j = (ms * hz + 999) / 1000;

        return (j * 1000 + hz - 1) / hz;
}

static bool in_jiffies(unsigned t) {
        for (size_t i = 0; i < ELEMENTSOF(jiffy_times); i++)
                if (streq(tunables[t].attr, jiffy_times[i]))
                        return true;
        return false;
}

typedef struct Out {
        char *buf;
        size_t size, used;
        unsigned n;
} Out;

/* One warning line: counted always, kept while there is room. */
static void add(Out *o, const char *line) {
        o->n++;
        if (o->used + 1 < o->size)
                o->used += strscpy(o->buf + o->used, o->size - o->used, line) < 0 ? o->size - o->used - 1
                                                                                : strlen(line);
}

/* snprintf() into a line, then add() it: no va_list to pass on */
#define warn(o, ...)                                            \
        do {                                                    \
                char _line[512];                                \
                (void) snprintf(_line, sizeof(_line), __VA_ARGS__); \
                add(o, _line);                                  \
        } while (0)

/* "[mq-deadline]", or "[Busy mq-deadline]" for the busy settings */
static void section_name(const Tunable *t, bool busy, char *buf, size_t size) {
        if (!busy)
                (void) snprintf(buf, size, "[%s]", t->section);
        else if (streq(t->section, "Queue"))
                (void) snprintf(buf, size, "[Busy]");
        else
                (void) snprintf(buf, size, "[Busy %s]", t->section);
}

static void check_jiffies(Out *o, const char *section, const Tunable *t, long long v, unsigned hz) {
        if (hz > 0 && jiffies_kept_ms(v, hz) != v)
                warn(o, "%s %s = %lld: the kernel keeps it in jiffies and will show %lld (HZ=%u): it will "
                        "never read back as written\n", section, t->key, v, jiffies_kept_ms(v, hz), hz);
        else if (hz == 0 && v % 20 != 0)
                warn(o, "%s %s = %lld: the kernel keeps it in jiffies: a multiple of 4 ms at HZ=250, of 10 ms "
                        "at HZ=100, and this kernel's HZ is not known here (no /boot/config-RELEASE)\n",
                     section, t->key, v);
}

/* The drivers of bio-based disks, by their majors' registered names. */
static bool names_bio_based(const PolicyMatch *m) {
        static const char *const drivers[] = { "device-mapper", "md", "mdp" };

        for (size_t i = 0; i < ELEMENTSOF(drivers); i++)
                if (m->drivers && strv_contains(m->drivers, drivers[i]))
                        return true;
        for (char *const *n = m->names; n && *n; n++)
                if (startswith(*n, "dm-") || startswith(*n, "md"))
                        return true;
        return false;
}

/* A bio-based disk has no elevator: no scheduler, no iosched/, none of a
 * request queue's attributes; a policy that matches only those sets them
 * nowhere. And it is matched only by a policy that names the class. */
static void check_bio_based(Out *o, const Policy *p) {
        if (!(p->match.classes_required & CLASS_BIT(CLASS_BIO_BASED))) {
                if (names_bio_based(&p->match) && !p->match.dm_uuid_prefixes && !p->match.md_levels)
                        warn(o, "[Match]: dm and md disks are bio-based, which only a policy with class = bio-based "
                                "(or dm_uuid_prefix=, md_level=) matches: it never applies to them\n");
                return;
        }
        if (p->n_sched > 0)
                warn(o, "[Queue] scheduler: the policy matches only bio-based disks, which have no I/O scheduler: "
                        "it never applies\n");
        for (unsigned t = 1; t < n_tunables; t++)
                if (p->values[t] && tunables[t].request_based)
                        warn(o, "[%s] %s: the policy matches only bio-based disks, which have no %s: it never "
                                "applies\n", tunables[t].section, tunables[t].key,
                             tunables[t].scheduler ? "I/O scheduler" : "request queue");
}

/* The values of one settings set: the policy's, or its [Busy] ones. */
static void check_set(Out *o, char *const *values, bool busy, unsigned hz) {
        for (unsigned t = 1; t < n_tunables; t++) {
                char section[32];
                long long v;

                if (!values[t] || parse_ll(values[t], LLONG_MIN, LLONG_MAX, &v) < 0)
                        continue;
                section_name(&tunables[t], busy, section, sizeof(section));
                if (in_jiffies(t))
                        check_jiffies(o, section, &tunables[t], v, hz);
                if (t == (unsigned) tunable_find_attr("read_ahead_kb") && v >= READ_AHEAD_KB_LARGE)
                        warn(o, "%s read_ahead_kb = %lld: %lld MiB of read-ahead on every sequential reader; "
                                "no kernel default is above 8 MiB (a typo?)\n", section, v, v / 1024);
        }
}

unsigned policy_check_values(const Policy *p, unsigned hz, char *buf, size_t size) {
        Out o = { .buf = buf, .size = size };

        if (size > 0)
                buf[0] = 0;
        check_set(&o, p->values, false, hz);
        if (p->dynamic.has_busy)
                check_set(&o, p->dynamic.busy_values, true, hz);
        check_bio_based(&o, p);
        return o.n;
}
