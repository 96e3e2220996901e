/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The metrics textfile: a new text after the first tick that sampled (and
 * checked for drift) and each whose number (ticks_total) is a multiple of
 * metrics_every_ticks, its live reads a slice per dispatch, written to the
 * dir configured when they are done; moved at once by a reload that moves the dir. It
 * watches the ticks from a post source, dispatched after the tick's end
 * before anything else pending: the tick calls nothing above it. */
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "metrics-textfile.h"
#include "sampler.h"
#include "util.h"

struct MetricsTextfile {
        Manager *manager;
        MetricsBuild *build;    /* the next text, while its reads run */
        sd_event_source *more;  /* the next slice of them */
        sd_event_source *watch; /* the post source that sees a tick end */
        uint64_t seen_tick;     /* the last sampled tick it looked at */
};

/* A due timer, not a defer source: the loop asks the kernel for the
 * socket's and the uevents' news before a due timer's dispatch, and never
 * while a defer source is on (one would starve them). */
static int textfile_more(MetricsTextfile *t) {
        int r = sd_event_source_set_time(t->more, clock_usec(CLOCK_MONOTONIC));

        return r < 0 ? r : sd_event_source_set_enabled(t->more, SD_EVENT_ONESHOT);
}

/* The reads are done: the text to the dir configured now (a reload may
 * have moved or dropped it meanwhile). */
static void textfile_finish(MetricsTextfile *t) {
        Manager *m = t->manager;
        const char *dir = m->config.metrics_textfile_dir;
        int r = dir ? metrics_write_textfile(m, t->build, dir) : 0;

        if (r < 0)
                log_warning_errno(r, "Cannot write metrics to %s, ignoring: %m", dir);
        t->build = metrics_build_free(t->build);
}

/* The next slice of the live reads, or the text. -ENOMEM only. */
static int textfile_slice(MetricsTextfile *t) {
        if (metrics_build_step(t->build, t->manager) > 0)
                return textfile_more(t);
        textfile_finish(t);
        return 0;
}

/* A tick that sampled (SamplerStats.sampled_tick), the first and every
 * metrics_every_ticks of them: a new text, unless one is still made (the
 * next is due then). The first at once: the file a stop left says the
 * daemon is down (blkpolicyd_up 0) until this one replaces it. -ENOMEM
 * only. */
static int textfile_tick(MetricsTextfile *t, uint64_t tick, bool first) {
        const Manager *m = t->manager;
        int r;

        if (!m->config.metrics_textfile_dir || (!first && tick % m->config.metrics_every_ticks != 0) || t->build)
                return 0;
        r = metrics_build_new(t->manager, &t->build);
        return r < 0 ? r : textfile_slice(t);
}

static int on_textfile_watch(sd_event_source *s _unused_, void *userdata) {
        MetricsTextfile *t = ASSERT_PTR(userdata);
        uint64_t tick = sampler_stats(t->manager->sampler)->sampled_tick;
        int r = 0;

        if (tick != t->seen_tick) {
                bool first = t->seen_tick == 0;

                t->seen_tick = tick;
                r = textfile_tick(t, tick, first);
        }
        return r < 0 ? manager_fatal(t->manager, r) : 0;
}

static int on_textfile_more(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        MetricsTextfile *t = ASSERT_PTR(userdata);
        int r = t->build ? textfile_slice(t) : 0;

        return r < 0 ? manager_fatal(t->manager, r) : 0;
}

void metrics_textfile_reloaded(MetricsTextfile *t, const Config *old) {
        if (t)
                metrics_move_textfile(t->manager, old->metrics_textfile_dir);
}

int metrics_textfile_new(Manager *m, MetricsTextfile **ret) {
        MetricsTextfile *t = calloc(1, sizeof(MetricsTextfile));
        int r;

        if (!t)
                return -ENOMEM;
        t->manager = m;
        r = sd_event_add_time(m->event, &t->more, CLOCK_MONOTONIC, UINT64_MAX, 1, on_textfile_more, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->more, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_post(m->event, &t->watch, on_textfile_watch, t);
        /* before any other source that became ready with the tick (a
         * SIGHUP, a reload request): the text is decided with the config
         * the tick ran with, as when the tick itself started it */
        if (r >= 0)
                r = sd_event_source_set_priority(t->watch, SD_EVENT_PRIORITY_IMPORTANT);
        if (r < 0) {
                metrics_textfile_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

MetricsTextfile *metrics_textfile_free(MetricsTextfile *t) {
        if (!t)
                return NULL;
        sd_event_source_disable_unref(t->more);
        sd_event_source_disable_unref(t->watch);
        metrics_build_free(t->build);
        free(t);
        return NULL;
}
