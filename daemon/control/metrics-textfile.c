/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The metrics textfile: a new text every metrics_every_ticks sampled
 * ticks (after the tick's drift check, as its ticks_total shows), its
 * live reads a slice per dispatch, written to the dir configured when
 * they are done; moved at once by a reload that moves the dir. The loop
 * only says when a tick sampled (ManagerFront's ticked). */
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "metrics-textfile.h"
#include "util.h"

struct MetricsTextfile {
        Manager *manager;
        MetricsBuild *build;    /* the next text, while its reads run */
        sd_event_source *more;  /* the next slice of them */
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

/* A tick that comes while a text is made starts none (the next is due
 * then). */
int metrics_textfile_ticked(MetricsTextfile *t) {
        const Manager *m;
        int r;

        if (!t)
                return 0;
        m = t->manager;
        if (!m->config.metrics_textfile_dir || m->tick % m->config.metrics_every_ticks != 0 || t->build)
                return 0;
        r = metrics_build_new(t->manager, &t->build);
        return r < 0 ? r : textfile_slice(t);
}

static int on_textfile_more(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        MetricsTextfile *t = userdata;
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
        metrics_build_free(t->build);
        free(t);
        return NULL;
}
