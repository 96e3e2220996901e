/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The applier: a small pool of worker threads that run apply passes, so a
 * queue freeze never blocks the event loop. See applier.h. */
#include <assert.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <time.h>

#include "applier.h"
#include "log.h"
#include "policy-set.h"
#include "util.h"

/* An apply pass needs a few KiB (two LiveValue tables, a Reconciled,
 * vfprintf): 256 KiB of address space, only what is touched is memory. */
#define WORKER_STACK_SIZE ((size_t) 256 * 1024)
#define WORKER_IDLE_SEC 1
#define WORKER_NICE 10

typedef struct Worker {
        struct Worker *next;
        Applier *applier;
        pthread_t thread;
        void *stack;
        bool exited;
} Worker;

/* Jobs out (submitted, not handed back yet) of one epoch. */
typedef struct EpochCount {
        uint64_t epoch;
        unsigned n;
} EpochCount;

typedef struct Waiter {
        struct Waiter *next;
        uint64_t epoch;         /* done once no job of this epoch or before is out */
        ApplierWaitDone done;
        void *userdata;
} Waiter;

struct Applier {
        const Roots *roots;
        const StateDir *state;
        unsigned parallelism;
        ApplierDone done;
        void *userdata;
        pthread_mutex_t lock;
        pthread_cond_t work;            /* a job waits, or the applier stops */
        pthread_cond_t progress;        /* a job finished, for drain */
        ApplyJob *pending, **pending_tail;
        dev_t *running;                 /* the numbers of the jobs running, n_running of them */
        ApplyJob *finished, **finished_tail;
        Worker *workers;                /* running, and exited but not joined */
        ApplyJob *spare_jobs;           /* freed while a burst lasts, for the next ones */
        unsigned n_spare_jobs;
        unsigned n_workers, n_idle, n_running;
        unsigned n_handing_back;        /* taken off finished, their callbacks not run yet */
        bool stopping;
        int efd;
        sd_event_source *source;

        /* The waiters, loop thread only. A job belongs to the epoch it was
         * submitted in, or to its cause's when a finished job's callback
         * submits it; applier_wait() ends an epoch. The jobs out are
         * counted by epoch, oldest first: there are at most as many
         * epochs with jobs out as waiters, plus the current one, so
         * applier_wait() makes room for them and a submit never
         * allocates. */
        uint64_t epoch;                 /* of the jobs submitted now */
        uint64_t cause;                 /* while a job's callback runs: its epoch; 0 otherwise */
        EpochCount *out;
        size_t n_out, out_size;
        Waiter *waiters, **waiters_tail;
        size_t n_waiters;
};

static size_t job_size(const char *dev) {
        return sizeof(ApplyJob) + strlen(dev) + 1;
}

/* A job is a mapping of its own, not heap: a storm makes and frees 1000s
 * of them between the devices' long-lived allocations, and the holes they
 * left kept 450 KiB of heap at 1000 devices (fragments malloc_trim cannot
 * give back). While a burst lasts the mappings are kept for the next jobs:
 * one a disk, their mmap, first touches and munmap (an IPI to the CPU a
 * worker runs on) were 6% of the loop's CPU in a 10,000-disk storm. The
 * spares go with the last worker (reap_workers()), so an idle daemon
 * keeps none. Loop thread only, as every job's making and freeing. */
#define SPARE_JOBS_MAX 64

ApplyJob *applier_job_new(Applier *a, const char *dev) {
        size_t size = job_size(dev);
        ApplyJob *j = a->spare_jobs;

        if (j && j->map_size >= size) {
                size = j->map_size;
                a->spare_jobs = j->next;
                a->n_spare_jobs--;
                memset(j, 0, size);
        } else {
                j = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (j == MAP_FAILED)
                        return NULL;
        }
        j->map_size = size;
        memcpy(j->dev, dev, strlen(dev) + 1);
        return j;
}

static void spare_jobs_free(Applier *a) {
        while (a->spare_jobs) {
                ApplyJob *j = a->spare_jobs;

                a->spare_jobs = j->next;
                (void) munmap(j, j->map_size);
        }
        a->n_spare_jobs = 0;
}

void applier_job_set_plan(ApplyJob *j, const Plan *plan) {
        j->plan = plan_buffer_copy(&j->plan_copy, plan);
        policy_set_ref(j->plan->set);
}

ApplyJob *applier_job_free(Applier *a, ApplyJob *j) {
        if (!j)
                return NULL;
        if (j->plan)
                policy_set_unref(j->plan->set);
        device_record_done(&j->record);
        /* a->workers changes only on the loop thread: a burst is on */
        if (a->workers && a->n_spare_jobs < SPARE_JOBS_MAX) {
                j->next = a->spare_jobs;
                a->spare_jobs = j;
                a->n_spare_jobs++;
        } else
                (void) munmap(j, j->map_size);
        return NULL;
}

static void notify_loop(Applier *a) {
        uint64_t one = 1;

        (void) !write(a->efd, &one, sizeof(one));
}

static void run_job(Applier *a, ApplyJob *j) {
        ApplyRequest req = { .roots = a->roots, .dev = j->dev, .record = &j->record, .state = a->state,
                             .take_over = j->take_over, .new_media = j->new_media,
                             .media_live = j->has_media_live ? j->media_live : NULL, .stats = &j->stats,
                             .probe_dispatch_direct = j->probe_dispatch_direct,
                             .kernel_version = j->kernel_version };

        j->start_usec = clock_usec(CLOCK_MONOTONIC);
        j->result = apply_device(&req, j->restore ? NULL : j->plan, &j->out);
        j->end_usec = clock_usec(CLOCK_MONOTONIC);
}

static bool devnum_running(const Applier *a, dev_t devnum) {
        for (unsigned i = 0; i < a->n_running; i++)
                if (a->running[i] == devnum)
                        return true;
        return false;
}

/* One pass per device number at a time, not only per Device: a disk
 * removed and added again at its number is a new Device, while the old
 * one's pass may still be inside the save of its record. Both passes
 * name the same file, and the old one would rename its record over the
 * new disk's, whose originals would then be lost. The new pass waits
 * instead; when it runs, the old one is done, and has removed what it
 * saved once it found its disk gone (apply_device()). Returns the link
 * to the first job no pass of its number runs ahead of, or NULL; with
 * the lock held. */
static ApplyJob **first_runnable(Applier *a) {
        for (ApplyJob **p = &a->pending; *p; p = &(*p)->next)
                if (!devnum_running(a, (*p)->devnum))
                        return p;
        return NULL;
}

/* Takes the job at link p out of the pending list, as running. */
static ApplyJob *start_pending(Applier *a, ApplyJob **p) {
        ApplyJob *j = *p;

        *p = j->next;
        if (a->pending_tail == &j->next)
                a->pending_tail = p;
        j->next = NULL;
        a->running[a->n_running++] = j->devnum;
        return j;
}

static void end_running(Applier *a, const ApplyJob *j) {
        for (unsigned i = 0; i < a->n_running; i++)
                if (a->running[i] == j->devnum) {
                        a->running[i] = a->running[--a->n_running];
                        return;
                }
}

/* Every job, whether it may run or not: for teardown. */
static ApplyJob *pop_pending(Applier *a) {
        ApplyJob *j = a->pending;

        a->pending = j->next;
        if (!a->pending)
                a->pending_tail = &a->pending;
        j->next = NULL;
        return j;
}

static void push_finished(Applier *a, ApplyJob *j) {
        *a->finished_tail = j;
        a->finished_tail = &j->next;
}

/* Waits for work with the lock held; false when the worker should exit
 * (a second without work, or the applier stops). A job that waits for a
 * pass of its number is no work: the worker of that pass takes it. */
static bool worker_wait(Applier *a) {
        struct timespec deadline;

        while (!first_runnable(a) || a->stopping) {
                if (a->stopping)
                        return false;
                clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_sec += WORKER_IDLE_SEC;
                a->n_idle++;
                int r = pthread_cond_timedwait(&a->work, &a->lock, &deadline);
                a->n_idle--;
                if (r == ETIMEDOUT && !first_runnable(a))
                        return false;
        }
        return true;
}

static void *worker_main(void *arg) {
        Worker *w = arg;
        Applier *a = w->applier;

        /* the workers mostly wait in the kernel (queue freezes, RCU); what
         * CPU they take must not keep the loop from the socket and the
         * watchdog: measured, 64 workers on 2 CPUs held a status answer
         * 260 ms at nice 0 */
        (void) setpriority(PRIO_PROCESS, (id_t) gettid(), WORKER_NICE);
        pthread_mutex_lock(&a->lock);
        while (worker_wait(a)) {
                ApplyJob *j = start_pending(a, first_runnable(a));

                pthread_mutex_unlock(&a->lock);
                run_job(a, j);
                pthread_mutex_lock(&a->lock);
                end_running(a, j);
                push_finished(a, j);
                notify_loop(a);
                pthread_cond_broadcast(&a->progress);
        }
        w->exited = true;
        a->n_workers--;
        notify_loop(a);         /* to be joined, and its stack unmapped */
        pthread_cond_broadcast(&a->progress);
        pthread_mutex_unlock(&a->lock);
        return NULL;
}

static Worker *worker_free(Worker *w) {
        if (w && w->stack)
                (void) munmap(w->stack, WORKER_STACK_SIZE);
        free(w);
        return NULL;
}

/* With the lock held. */
static int worker_spawn(Applier *a) {
        pthread_attr_t attr;
        Worker *w = calloc(1, sizeof(Worker));
        int r;

        if (!w)
                return -ENOMEM;
        w->applier = a;
        w->stack = mmap(NULL, WORKER_STACK_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (w->stack == MAP_FAILED) {
                w->stack = NULL;
                worker_free(w);
                return -ENOMEM;
        }
        (void) mprotect(w->stack, 4096, PROT_NONE);     /* a guard page at the bottom */
        pthread_attr_init(&attr);
        pthread_attr_setstack(&attr, w->stack, WORKER_STACK_SIZE);
        r = -pthread_create(&w->thread, &attr, worker_main, w);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                worker_free(w);
                return r;
        }
        w->next = a->workers;
        a->workers = w;
        a->n_workers++;
        return 0;
}

/* Joins the workers that exited and gives their stacks back. */
static void reap_workers(Applier *a) {
        Worker *dead = NULL;

        pthread_mutex_lock(&a->lock);
        for (Worker **p = &a->workers; *p;) {
                Worker *w = *p;

                if (!w->exited) {
                        p = &w->next;
                        continue;
                }
                *p = w->next;
                w->next = dead;
                dead = w;
        }
        pthread_mutex_unlock(&a->lock);
        while (dead) {
                Worker *next = dead->next;

                (void) pthread_join(dead->thread, NULL);
                worker_free(dead);
                dead = next;
                if (!dead && !a->workers) {
                        /* a burst is over: what its passes freed goes back
                         * to the kernel, as after a scan */
                        spare_jobs_free(a);
                        (void) malloc_trim(0);
                }
        }
}

/* One more job out in epoch e: the current one (the newest, appended)
 * or a cause's, which is out while its callback runs. */
static void epoch_add(Applier *a, uint64_t e) {
        for (size_t i = a->n_out; i > 0; i--)
                if (a->out[i - 1].epoch == e) {
                        a->out[i - 1].n++;
                        return;
                }
        assert(a->n_out < a->out_size && (a->n_out == 0 || a->out[a->n_out - 1].epoch < e));
        a->out[a->n_out++] = (EpochCount) { .epoch = e, .n = 1 };
}

static void epoch_del(Applier *a, uint64_t e) {
        for (size_t i = 0; i < a->n_out; i++) {
                if (a->out[i].epoch != e)
                        continue;
                if (--a->out[i].n == 0) {
                        memmove(a->out + i, a->out + i + 1, (a->n_out - i - 1) * sizeof(EpochCount));
                        a->n_out--;
                }
                return;
        }
}

/* Waiters whose jobs are all back, in order. A done callback may wait
 * again (a queued reload starts, a restore's second step): that waiter
 * is appended and looked at in turn. */
static void complete_waiters(Applier *a) {
        while (a->waiters && (a->n_out == 0 || a->out[0].epoch > a->waiters->epoch)) {
                Waiter *w = a->waiters;

                a->waiters = w->next;
                if (!a->waiters)
                        a->waiters_tail = &a->waiters;
                a->n_waiters--;
                w->done(w->userdata, 0);
                free(w);
        }
}

/* Jobs handed back per wakeup of the loop: the rest wait for its next
 * turn, after the socket and the timers (the eventfd is signalled again). */
#define JOBS_PER_DISPATCH 32

/* Hands back at most `limit` finished jobs. */
static void hand_back(Applier *a, unsigned limit) {
        ApplyJob *list, **end;
        uint64_t count;
        unsigned n = 0;

        (void) !read(a->efd, &count, sizeof(count));
        pthread_mutex_lock(&a->lock);
        list = a->finished;
        for (end = &a->finished; *end && n < limit; end = &(*end)->next)
                n++;
        a->finished = *end;
        *end = NULL;
        a->n_handing_back += n;         /* a callback may hand back again (a drain) */
        if (!a->finished)
                a->finished_tail = &a->finished;
        else
                notify_loop(a);
        pthread_mutex_unlock(&a->lock);
        while (list) {
                ApplyJob *next = list->next;
                uint64_t e = list->epoch;

                list->next = NULL;
                a->cause = e;           /* what the callback submits belongs to e */
                /* idle to the callback only once no job of this batch
                 * waits for its own: READY=1 after every pass is back */
                a->n_handing_back--;
                a->done(list, a->userdata);
                a->cause = 0;
                epoch_del(a, e);
                list = next;
        }
        reap_workers(a);
        complete_waiters(a);
}

static int on_finished(sd_event_source *s _unused_, int fd _unused_, uint32_t revents _unused_, void *userdata) {
        hand_back(userdata, JOBS_PER_DISPATCH);
        return 0;
}

void applier_submit(Applier *a, ApplyJob *j) {
        bool inline_run = false;

        j->next = NULL;
        j->epoch = a->cause ?: a->epoch;
        epoch_add(a, j->epoch);
        pthread_mutex_lock(&a->lock);
        *a->pending_tail = j;
        a->pending_tail = &j->next;
        if (a->n_idle == 0 && a->n_workers < a->parallelism && worker_spawn(a) < 0 && a->n_workers == 0)
                inline_run = true;      /* no thread at all: do it here rather than never */
        pthread_cond_signal(&a->work);
        if (inline_run) {
                /* no worker, so no pass runs: the first job may */
                j = start_pending(a, &a->pending);
                pthread_mutex_unlock(&a->lock);
                log_warning("Cannot start an apply thread, applying %s on the event loop", j->dev);
                run_job(a, j);
                pthread_mutex_lock(&a->lock);
                end_running(a, j);
                push_finished(a, j);
                notify_loop(a);
        }
        pthread_mutex_unlock(&a->lock);
}

unsigned applier_cancel(Applier *a, dev_t devnum) {
        ApplyJob *dropped = NULL;
        unsigned n = 0;

        pthread_mutex_lock(&a->lock);
        a->pending_tail = &a->pending;
        for (ApplyJob **p = &a->pending; *p;) {
                ApplyJob *j = *p;

                if (j->devnum != devnum) {
                        a->pending_tail = &j->next;
                        p = &j->next;
                        continue;
                }
                *p = j->next;
                j->next = dropped;
                dropped = j;
                n++;
        }
        pthread_mutex_unlock(&a->lock);
        while (dropped) {
                ApplyJob *next = dropped->next;

                epoch_del(a, dropped->epoch);
                applier_job_free(a, dropped);
                dropped = next;
        }
        if (n > 0 && a->waiters)
                notify_loop(a);         /* a waiter may be done: from the loop, not from here */
        return n;
}

void applier_drain(Applier *a) {
        for (;;) {
                bool busy;

                hand_back(a, UINT_MAX);
                pthread_mutex_lock(&a->lock);
                while (!a->finished && (a->pending || a->n_running))
                        pthread_cond_wait(&a->progress, &a->lock);
                busy = a->finished || a->pending || a->n_running;
                pthread_mutex_unlock(&a->lock);
                if (!busy)
                        return;
        }
}

int applier_wait(Applier *a, ApplierWaitDone done, void *userdata) {
        size_t need = a->n_waiters + 2;         /* their epochs, this one's and the next */
        Waiter *w;

        if (a->out_size < need) {
                EpochCount *out = reallocarray(a->out, need, sizeof(EpochCount));

                if (!out)
                        return -ENOMEM;
                a->out = out;
                a->out_size = need;
        }
        w = calloc(1, sizeof(Waiter));
        if (!w)
                return -ENOMEM;
        *w = (Waiter) { .epoch = a->epoch++, .done = done, .userdata = userdata };
        *a->waiters_tail = w;
        a->waiters_tail = &w->next;
        a->n_waiters++;
        if (a->n_out == 0 || a->out[0].epoch > w->epoch)
                notify_loop(a);         /* nothing to wait for: done at the loop's next turn */
        return 0;
}

void applier_cancel_waiters(Applier *a) {
        while (a->waiters) {
                Waiter *w = a->waiters;

                a->waiters = w->next;
                if (!a->waiters)
                        a->waiters_tail = &a->waiters;
                a->n_waiters--;
                w->done(w->userdata, -ECANCELED);
                free(w);
        }
}

bool applier_idle(Applier *a) {
        bool idle;

        pthread_mutex_lock(&a->lock);
        idle = !a->pending && !a->finished && a->n_running == 0 && a->n_handing_back == 0;
        pthread_mutex_unlock(&a->lock);
        return idle;
}

int applier_new(const Roots *roots, const StateDir *state, unsigned parallelism, ApplierDone done, void *userdata,
                Applier **ret) {
        Applier *a = calloc(1, sizeof(Applier));

        if (!a)
                return -ENOMEM;
        *a = (Applier) { .roots = roots, .state = state, .parallelism = parallelism ?: 1, .done = done,
                         .userdata = userdata, .epoch = 1 };
        a->pending_tail = &a->pending;
        a->waiters_tail = &a->waiters;
        a->finished_tail = &a->finished;
        a->out = calloc(1, sizeof(EpochCount));        /* the current epoch's, while no one waits */
        /* the workers' passes, and one on the loop when no worker starts */
        a->running = calloc(a->parallelism + 1, sizeof(dev_t));
        if (!a->out || !a->running) {
                free(a->out);
                free(a->running);
                free(a);
                return -ENOMEM;
        }
        a->out_size = 1;
        pthread_mutex_init(&a->lock, NULL);
        pthread_cond_init(&a->work, NULL);
        pthread_cond_init(&a->progress, NULL);
        a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (a->efd < 0) {
                int r = -errno;
                applier_free(a);
                return r;
        }
        *ret = a;
        return 0;
}

int applier_attach_event(Applier *a, sd_event *e) {
        return sd_event_add_io(e, &a->source, a->efd, EPOLLIN, on_finished, a);
}

Applier *applier_free(Applier *a) {
        if (!a)
                return NULL;
        applier_cancel_waiters(a);
        pthread_mutex_lock(&a->lock);
        a->stopping = true;
        pthread_cond_broadcast(&a->work);
        while (a->n_workers > 0)
                pthread_cond_wait(&a->progress, &a->lock);
        pthread_mutex_unlock(&a->lock);
        reap_workers(a);
        while (a->pending)
                applier_job_free(a, pop_pending(a));
        while (a->finished) {
                ApplyJob *j = a->finished;

                a->finished = j->next;
                applier_job_free(a, j);
        }
        spare_jobs_free(a);
        free(a->out);
        sd_event_source_disable_unref(a->source);
        if (a->efd >= 0)
                (void) close(a->efd);
        pthread_cond_destroy(&a->progress);
        pthread_cond_destroy(&a->work);
        pthread_mutex_destroy(&a->lock);
        free(a->running);
        free(a);
        return NULL;
}
