/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The Manager owns the event loop, its sources, the loaded policies, the
 * kernel capabilities and the device table. Nothing else is global but the
 * parsed command line (Options). */

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <cjson/cJSON.h>

#include "apply.h"
#include "config.h"
#include "conflicts.h"
#include "device.h"
#include "discover.h"
#include "dynamic.h"
#include "facts.h"
#include "intern.h"
#include "plan.h"
#include "policy.h"
#include "report.h"
#include "state-file.h"
#include "shipped-sets.h"
#include "sysfs.h"
#include "device-table.h"
#include "log.h"
#include "util.h"

/* What this run of blkpolicyd is for (main.c picks it from the options). */
typedef enum RunMode {
        RUN_DAEMON,             /* the event loop, until SIGTERM */
        RUN_ONCE,               /* --once: one pass over all devices, a JSON report */
        RUN_RESTORE,            /* --restore: put back what the state records say */
        RUN_CHECK_CONFIG,       /* --check-config */
        RUN_REPLAY,             /* --replay=FILE: the decisions over a recording */
        RUN_METRICS_STOPPED,    /* --metrics-stopped: the textfile a stopped daemon leaves (ExecStopPost=) */
} RunMode;

typedef struct Options {
        RunMode mode;
        const char *config_path;
        bool config_required;   /* given with --config */
        char **policy_dirs;     /* --policy-dir, replaces the configured list */
        Roots roots;
        const char *state_dir;
        const char *socket_path;
        char **device_globs;
        bool dry_run;
        const char *record_path;        /* --record: append every tick's raw samples */
        const char *replay_path;        /* --replay=FILE */
        const char *trial_memory;       /* --trial-memory=PATH|no: over the config's */
        int log_level;          /* --log-level; -1: not given, the config's log_level= applies */
} Options;

typedef struct Manager Manager;

/* Apply passes that may run at once (scheduler writes share RCU grace
 * periods): see docs/benchmarks.md. */
#define APPLY_PARALLELISM 64

/* Who waits for a reload (manager_reload()). */
typedef struct ReloadWaiter ReloadWaiter;

/* What runs above the loop (main.c's: the control socket, the metrics
 * textfile), told of the loop's moments. Each is one hand-off up: the
 * loop knows nothing of what is done with them. Any may be NULL. */
typedef struct ManagerFront {
        /* The loop is set up (signals, the applier, the uevent monitor)
         * and the first scan not begun: a socket bound now is there for
         * the first pass. < 0 ends the run with it. */
        int (*start)(Manager *m, void *userdata);
        /* A reload took its config in, before deciding the devices
         * again; old is the config it replaced. */
        void (*reloaded)(Manager *m, const Config *old, void *userdata);
        void *userdata;
} ManagerFront;

struct Manager {
        const Options *options;
        Config config;
        Roots roots;
        sd_event *event;
        PolicySet *policies;
        ShippedSets sets;               /* the shipped set policies holds; zeroed with --policy-dir */
        KernelCaps caps;
        Discover *discover;
        sd_event_source *uevent_source; /* the monitor's fd (discover.c's), watched here */
        sd_event_source *nvme_watch;    /* the names listed again after an NVMe controller's event */
        unsigned nvme_watch_round;
        DeviceContext ctx;              /* the device table and what the devices' files work in */
        StateDir state;                 /* opened once at start: its fd outlives fd exhaustion */
        struct Applier *applier;        /* apply passes off the loop */
        bool ready_pending;             /* READY=1 once the first pass is done */
        bool first_pass_done;           /* READY=1 was sent: status says so (a container's readiness) */
        bool handover;                  /* the next stop leaves everything to the next daemon */
        int fatal;                      /* the first fatal error (manager_fatal()), 0 while none */

        /* sampling */
        struct Sampler *sampler;        /* the tick, and the flips it decides */

        /* control */
        const ManagerFront *front;      /* manager_run()'s, NULL outside it */
        uint64_t start_usec;
        uint64_t start_realtime_usec;   /* the same moment, CLOCK_REALTIME: the metrics' start time */
        cJSON *reload_errors;           /* why the last reload was refused (its config), NULL after a good one */
        uint64_t reload_failures;       /* reloads refused so far (blkpolicyd_reload_failures_total) */
        bool reloading;                 /* a reload's writes are being applied */
        int reload_result;              /* of the config and the decisions, for its waiters */
        cJSON *reload_result_errors;    /* why the config was refused, for its waiters */
        ReloadWaiter *reload_applying;  /* who asked for the reload being applied */
        ReloadWaiter *reload_queued;    /* who asked meanwhile: one reload after it, for all of them */
};

/* Inline: commands.c asks these of the Manager; a call into manager.c
 * would make a loop of files. */
static inline uint64_t manager_uptime_usec(const Manager *m) {
        return m->start_usec ? clock_usec(CLOCK_MONOTONIC) - m->start_usec : 0;
}
/* The shipped policy set in use and the newest installed (0 and 0 with
 * --policy-dir, which names no shipped set): for the metrics. */
static inline const ShippedSets *manager_policy_sets(const Manager *m) {
        return &m->sets;
}
/* The one way out on a fatal error (-ENOMEM) from an event source's (or
 * the applier's) callback: the loop ends with it, and main() exits
 * non-zero after the stop's put-back. Without a loop (--once), the scan
 * returns it. Returns r, for "return manager_fatal(m, r);". */
static inline int manager_fatal(Manager *m, int r) {
        if (r == -ENOMEM)
                log_oom();
        else
                log_error_errno(r, "Fatal: %m");
        if (m->fatal == 0)
                m->fatal = r;
        if (m->event)
                (void) sd_event_exit(m->event, r);
        return r;
}
/* Policy values are written: neither --dry-run nor mode=observe. */
static inline bool manager_writes(const Manager *m) {
        return device_context_writes(&m->ctx);  /* one rule for the devices and the rest */
}
/* What blkpolicyd changed may be put back: not --dry-run (which writes
 * nothing at all). mode=observe puts back what an earlier run changed. */
static inline bool manager_restores(const Manager *m) {
        return device_context_restores(&m->ctx);
}
/* Re-reads config and policies, by the rule of the start: policy files
 * with errors are skipped (they mask nothing) and listed in the set's
 * errors. A config with errors leaves the running config and policies in
 * force: r = -EINVAL, and errors names it (a JSON array, the callee's).
 * The reload is done when what it changed is applied: then READY=1, then
 * done (NULL: nobody waits, SIGHUP), from the loop, which serves
 * everything else meanwhile. A reload asked while one is applied waits
 * for it; all those asked meanwhile are one reload, which reads the files
 * after each of them asked. At the stop, done gets -ECANCELED. Returns 0,
 * or -ENOMEM (done is not called). */
typedef void (*ManagerReloadDone)(Manager *m, int r, const cJSON *errors, void *userdata);
int manager_reload(Manager *m, ManagerReloadDone done, void *userdata);
/* pause/resume one device, or all with d == NULL. Resume clears overrides. */
int manager_pause(Manager *m, Device *d, bool pause);

int manager_new(const Options *o, Manager **ret);
Manager *manager_free(Manager *m);
/* Discover all disks, classify them, then decide and apply for each. */
int manager_scan(Manager *m);
/* The loop, until SIGTERM, with front told of its moments. */
int manager_run(Manager *m, const ManagerFront *front);
/* The state dir, for the modes that change or restore devices. */
int manager_open_state_dir(Manager *m);
int manager_print_report(Manager *m);
