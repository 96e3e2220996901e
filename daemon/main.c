/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkpolicyd: command line, then one of three drivers of the same stages:
 * --check-config, --once, or the daemon's event loop. */
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include "blkpolicyd-paths.h"
#include "classify.h"
#include "commands.h"
#include "control.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "metrics-file.h"
#include "metrics-textfile.h"
#include "policy-check.h"
#include "policy-set.h"
#include "replay.h"
#include "restore.h"
#include "sampler.h"
#include "state-file.h"
#include "util.h"

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "Gives every block device the I/O scheduler and queue settings its policy asks for.\n\n"
               "  -h --help               Show this help\n"
               "     --version            Show the version\n"
               "     --config=FILE        Daemon configuration (default %s)\n"
               "     --policy-dir=DIR     Policy directory; repeat, later ones mask earlier ones\n"
               "                          (default %s %s)\n"
               "     --sysfs-root=DIR     Where sysfs is (default /sys)\n"
               "     --debugfs-root=DIR   Where debugfs is (default /sys/kernel/debug)\n"
               "     --proc-root=DIR      Where procfs is (default /proc)\n"
               "     --root=DIR           Where /etc, /usr/lib and /run are: the other tools that set\n"
               "                          the same settings (default /, none with --sysfs-root), the\n"
               "                          config's policy dirs and the shipped policy sets (default /)\n"
               "     --state-dir=DIR      Where original settings are recorded (default /run/blkpolicyd)\n"
               "     --socket=PATH        Control socket (default %s)\n"
               "     --device=GLOB        Only consider whole disks whose kernel name matches; repeatable\n"
               "     --dry-run            Decide and report, write nothing\n"
               "     --once               One pass over all devices, print a JSON report, exit\n"
               "     --check-config       Validate the configuration and policies, exit non-zero on error\n"
               "     --restore            Put back what the state records say was there, exit\n"
               "                          (after --once, or a daemon that was killed)\n"
               "     --trial-memory=PATH  Where trials' verdicts are remembered, or no (default\n"
               "                          " TRIAL_MEMORY_PATH ")\n"
               "     --record=FILE        Append every tick's raw samples to FILE (JSON lines)\n"
               "     --replay=FILE        Run the decisions over a recording, print the timeline, exit\n"
               "     --metrics-stopped    Write the metrics textfile of a stopped daemon, as systemd's\n"
               "                          $SERVICE_RESULT says it ended, exit (ExecStopPost=)\n"
               "     --log-level=LEVEL    err, warning, notice, info or debug\n",
               program_invocation_short_name, CONFIG_PATH, POLICY_DIR_VENDOR, POLICY_DIR_ADMIN, CONTROL_SOCKET_PATH);
}

enum {
        ARG_VERSION = 0x100,
        ARG_CONFIG,
        ARG_POLICY_DIR,
        ARG_SYSFS_ROOT,
        ARG_DEBUGFS_ROOT,
        ARG_PROC_ROOT,
        ARG_ROOT,
        ARG_STATE_DIR,
        ARG_SOCKET,
        ARG_DEVICE,
        ARG_DRY_RUN,
        ARG_ONCE,
        ARG_CHECK_CONFIG,
        ARG_RESTORE,
        ARG_LOG_LEVEL,
        ARG_RECORD,
        ARG_REPLAY,
        ARG_METRICS_STOPPED,
        ARG_TRIAL_MEMORY,
};

static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        { "config", required_argument, NULL, ARG_CONFIG },
        { "policy-dir", required_argument, NULL, ARG_POLICY_DIR },
        { "sysfs-root", required_argument, NULL, ARG_SYSFS_ROOT },
        { "debugfs-root", required_argument, NULL, ARG_DEBUGFS_ROOT },
        { "proc-root", required_argument, NULL, ARG_PROC_ROOT },
        { "root", required_argument, NULL, ARG_ROOT },
        { "state-dir", required_argument, NULL, ARG_STATE_DIR },
        { "socket", required_argument, NULL, ARG_SOCKET },
        { "device", required_argument, NULL, ARG_DEVICE },
        { "dry-run", no_argument, NULL, ARG_DRY_RUN },
        { "once", no_argument, NULL, ARG_ONCE },
        { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
        { "restore", no_argument, NULL, ARG_RESTORE },
        { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
        { "record", required_argument, NULL, ARG_RECORD },
        { "replay", required_argument, NULL, ARG_REPLAY },
        { "metrics-stopped", no_argument, NULL, ARG_METRICS_STOPPED },
        { "trial-memory", required_argument, NULL, ARG_TRIAL_MEMORY },
        {}
};

static const char *const mode_options[] = {
        [RUN_ONCE] = "--once",
        [RUN_RESTORE] = "--restore",
        [RUN_CHECK_CONFIG] = "--check-config",
        [RUN_REPLAY] = "--replay",
        [RUN_METRICS_STOPPED] = "--metrics-stopped",
};

/* One run, one job: "--once --restore" would otherwise do whichever the
 * code tested first, silently. */
static int set_mode(Options *o, RunMode mode) {
        if (o->mode != RUN_DAEMON && o->mode != mode)
                return log_error_errno(EINVAL, "%s and %s exclude each other", mode_options[o->mode],
                                       mode_options[mode]);
        o->mode = mode;
        return 0;
}

/* Returns 1 to go on, 0 to exit successfully, <0 on error. */
static int parse_argv(int argc, char *argv[], Options *o) {
        int c, r;

        while ((c = getopt_long(argc, argv, "h", long_options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("blkpolicyd %s%s\n", PACKAGE_VERSION,
                               ENABLE_FAULT_INJECTION ? " +fault-injection" : "");
                        return 0;
                case ARG_CONFIG:
                        o->config_path = optarg;
                        o->config_required = true;
                        break;
                case ARG_POLICY_DIR:
                        if (strv_push(&o->policy_dirs, optarg) < 0)
                                return log_oom();
                        break;
                case ARG_SYSFS_ROOT:
                        o->roots.sysfs = optarg;
                        break;
                case ARG_DEBUGFS_ROOT:
                        o->roots.debugfs = optarg;
                        break;
                case ARG_PROC_ROOT:
                        o->roots.proc = optarg;
                        break;
                case ARG_ROOT:
                        o->roots.root = optarg;
                        break;
                case ARG_STATE_DIR:
                        o->state_dir = optarg;
                        break;
                case ARG_TRIAL_MEMORY:
                        o->trial_memory = optarg;
                        break;
                case ARG_SOCKET:
                        o->socket_path = optarg;
                        break;
                case ARG_DEVICE:
                        if (strv_push(&o->device_globs, optarg) < 0)
                                return log_oom();
                        break;
                case ARG_DRY_RUN:
                        o->dry_run = true;
                        break;
                case ARG_ONCE:
                        r = set_mode(o, RUN_ONCE);
                        if (r < 0)
                                return r;
                        break;
                case ARG_CHECK_CONFIG:
                        r = set_mode(o, RUN_CHECK_CONFIG);
                        if (r < 0)
                                return r;
                        break;
                case ARG_RESTORE:
                        r = set_mode(o, RUN_RESTORE);
                        if (r < 0)
                                return r;
                        break;
                case ARG_LOG_LEVEL:
                        r = log_parse_level(optarg);
                        if (r < 0)
                                return log_error_errno(r, "Unknown log level: %s", optarg);
                        log_set_max_level(r);
                        o->log_level = r;
                        break;
                case ARG_RECORD:
                        o->record_path = optarg;
                        break;
                case ARG_REPLAY:
                        r = set_mode(o, RUN_REPLAY);
                        if (r < 0)
                                return r;
                        o->replay_path = optarg;
                        break;
                case ARG_METRICS_STOPPED:
                        r = set_mode(o, RUN_METRICS_STOPPED);
                        if (r < 0)
                                return r;
                        break;
                default:        /* '?': getopt has said what was wrong */
                        return -EINVAL;
                }
        if (optind < argc) {
                /* name them: "blkpolicyd sda" is most likely meant as --device=sda */
                _cleanup_free_ char *extra = NULL;
                size_t size = 0;
                FILE *f = memstream_open(&extra, &size);

                if (!f)
                        return log_oom();
                for (int i = optind; i < argc; i++)
                        fprintf(f, "%s%s", i > optind ? " " : "", argv[i]);
                if (fclose(f) != 0)
                        return log_oom();
                return log_error_errno(EINVAL, "%s takes no arguments, got: %s (a disk is chosen with --device=)",
                                       program_invocation_short_name, extra);
        }
        /* the ticks are the daemon's: with another mode nothing would be recorded */
        if (o->record_path && o->mode != RUN_DAEMON)
                return log_error_errno(EINVAL, "--record records the daemon's ticks; %s has none",
                                       mode_options[o->mode]);
        return 1;
}

/* A policy dir named on purpose (--policy-dir, or policy_dirs= in the
 * config) that does not exist is most likely a typo, and fails the check.
 * The built-in default dirs may be missing: no admin policies yet, or a
 * run from the source tree. */
static int check_policy_dirs(const Manager *m) {
        char *const *dirs = m->options->policy_dirs ?: m->sets.policy_dirs;     /* below --root */
        int r = 0;

        if (!m->options->policy_dirs && !m->config.policy_dirs_configured)
                return 0;
        for (char *const *d = dirs; d && *d; d++) {
                struct stat st;

                if (stat(*d, &st) < 0)
                        r = log_error_errno(errno, "Policy directory %s: %m", *d);
                else if (!S_ISDIR(st.st_mode))
                        r = log_error_errno(ENOTDIR, "Policy directory %s: %m", *d);
        }
        return r;
}

/* The schedulers every kernel may have, and any a disk here lists. */
static const char *const known_schedulers[] = { "none", "mq-deadline", "bfq", "kyber" };

static bool kernel_lists_scheduler(const Manager *m, const char *name) {
        char path[PATH_MAX];
        _cleanup_closedir_ DIR *dir = NULL;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/block", m->roots.sysfs);
        dir = opendir(path);
        if (!dir)
                return false;
        while ((de = readdir(dir))) {
                _cleanup_fclose_ FILE *f = NULL;
                char line[512];

                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/block/%s/queue/scheduler", m->roots.sysfs, de->d_name);
                f = fopen(path, "re");
                if (!f || !fgets(line, sizeof(line), f))
                        continue;
                /* "mq-deadline kyber [bfq] none" */
                for (char *w = strtok(line, " []\n"); w; w = strtok(NULL, " []\n"))
                        if (streq(w, name))
                                return true;
        }
        return false;
}

static void warn_scheduler(const Manager *m, const Policy *p, const SchedChoice *c, const char *section) {
        for (size_t i = 0; i < ELEMENTSOF(known_schedulers); i++)
                if (streq(c->name, known_schedulers[i]))
                        return;
        if (kernel_lists_scheduler(m, c->name))
                return;
        /* a warning, not an error: a module may add it later, and the next
         * choice is taken meanwhile (EINVAL falls through) */
        fprintf(stderr, "%s: [%s] scheduler=%s: warning: not a known scheduler (none, mq-deadline, bfq, kyber, "
                        "or one a disk here lists); a typo? It will not be chosen where the kernel lacks it\n",
                p->path, section, c->name);
}

/* Misspelled scheduler names ("bfqq") are valid words, so the parser
 * takes them; the check says what it does not know. */
static void check_scheduler_names(const Manager *m) {
        for (size_t i = 0; i < m->policies->n_policies; i++) {
                const Policy *p = m->policies->policies[i];

                for (unsigned k = 0; k < p->n_sched; k++)
                        warn_scheduler(m, p, &p->sched[k], "Queue");
                for (unsigned k = 0; k < p->dynamic.n_busy_sched; k++)
                        warn_scheduler(m, p, &p->dynamic.busy_sched[k], "Busy");
        }
}

/* Valid values the kernel will not keep, or settings the disks a policy
 * matches cannot have: warnings, the policy loads all the same. */
static void check_policy_values(const Manager *m) {
        unsigned hz = kernel_config_hz(&m->roots, m->caps.release);

        for (size_t i = 0; i < m->policies->n_policies; i++) {
                const Policy *p = m->policies->policies[i];
                char text[2048], *line = text, *end;
                unsigned n = policy_check_values(p, hz, text, sizeof(text));

                for (; n > 0 && (end = strchr(line, '\n')); line = end + 1)
                        fprintf(stderr, "%s: warning: %.*s\n", p->path, (int) (end - line), line);
        }
}

static int check_config(Manager *m) {
        char summary[128];
        int r;

        r = check_policy_dirs(m);
        check_scheduler_names(m);
        check_policy_values(m);
        if (policy_set_summary(m->policies, summary, sizeof(summary)) >= 0)
                printf("%s\n", summary);
        for (size_t i = 0; i < m->policies->n_policies; i++)
                printf("  %s\n", m->policies->policies[i]->path);
        if (m->policies->errors.n_items > 0)
                r = -EINVAL;
        return r;
}

static int run_replay(Manager *m) {
        size_t n = m->policies->n_files_rejected;

        /* a what-if without one of its files answers another question */
        if (n > 0)
                return log_error_errno(EINVAL, "Not replaying: %zu policy file%s rejected (errors above); the "
                                               "timeline would be that of the policies without %s",
                                       n, n == 1 ? "" : "s", n == 1 ? "it" : "them");
        return replay_run(m->options->replay_path, m->policies, stdout);
}

/* What the daemon runs above the loop: the control socket and the
 * metrics textfile, started once the loop is set up (the socket is bound
 * before the first scan) and freed once it is over. */
typedef struct Front {
        ControlHandler handler;
        ControlServer *control;
        MetricsTextfile *textfile;
} Front;

/* Another daemon on the socket is fatal; a socket that cannot be had
 * for another reason is not, the disks are managed all the same. */
static int front_start(Manager *m, void *userdata) {
        Front *f = ASSERT_PTR(userdata);
        int r;

        f->handler = commands_handler(m);
        r = control_server_new(m->event, m->options->socket_path ?: m->config.socket_path, &m->config, &f->handler,
                               &f->control);
        if (r == -EADDRINUSE || r == -ENOMEM)
                return r;
        if (r < 0)
                log_warning("No control socket; blkpolicyctl will not reach this daemon");
        r = metrics_textfile_new(m, &f->textfile);
        return r < 0 ? log_error_errno(r, "Cannot set up the metrics textfile: %m") : 0;
}

static void front_reloaded(Manager *m _unused_, const Config *old, void *userdata) {
        Front *f = ASSERT_PTR(userdata);

        metrics_textfile_reloaded(f->textfile, old);
}

static int run_daemon(Manager *m) {
        Front f = {};
        const ManagerFront front = { .start = front_start, .reloaded = front_reloaded,
                                     .userdata = &f };
        int r = manager_run(m, &front);

        /* node_exporter would serve a file left behind as if the daemon
         * still ran: the stopped file replaces it, which says blkpolicyd
         * is not running and that it stopped on purpose (systemd's
         * ExecStopPost= says so too, and how any other end came). A daemon
         * that never ticked wrote none (and may have failed because another
         * one runs, with the same dir). */
        if (sampler_stats(m->sampler)->ticks > 0) {
                int k = metrics_file_write_stopped(m->config.metrics_textfile_dir, r < 0 ? "exit-code" : "success",
                                                   r < 0 ? "exited" : NULL, NULL);

                if (k < 0)
                        log_warning_errno(k, "Cannot write the stopped metrics file in %s: %m",
                                          m->config.metrics_textfile_dir);
        }
        metrics_textfile_free(f.textfile);
        control_server_free(f.control);
        return r;
}

/* ExecStopPost=: after every end of the daemon, a SIGKILL or a crash
 * too, the file says it is down and how it ended, so an alert tells a
 * stop on purpose from a death. Only the config is read (no Manager: no
 * policies, no applier), so a policy a daemon could not start with still
 * gets its death said. Never over a running daemon's file: the state
 * dir's lock says whether one runs. */
static int write_stopped_metrics(const Options *o) {
        _cleanup_(state_dir_close) StateDir sd = { .fd = -1 };
        _cleanup_(config_done) Config c = {};
        const char *state;
        int r;

        r = config_init_defaults(&c);
        if (r < 0)
                return log_oom();
        r = config_load(&c, o->config_path, o->config_required);
        if (r < 0)
                return r;
        if (!c.metrics_textfile_dir)
                return 0;
        state = o->state_dir ?: c.state_dir;
        r = state_dir_open(state, true, &sd);
        if (r == -EBUSY) {
                log_notice("A blkpolicyd runs with %s: its metrics file is its own", state);
                return 0;
        }
        if (r < 0)
                return log_error_errno(r, "Cannot open %s: %m", state);
        r = metrics_file_write_stopped(c.metrics_textfile_dir, getenv("SERVICE_RESULT") ?: "unknown",
                                       getenv("EXIT_CODE"), getenv("EXIT_STATUS"));
        return r < 0 ? log_error_errno(r, "Cannot write the stopped metrics file in %s: %m", c.metrics_textfile_dir)
                     : 0;
}

static int run(int argc, char *argv[]) {
        Options o = { .config_path = CONFIG_PATH, .roots = ROOTS_DEFAULT, .log_level = -1 };
        Manager *m = NULL;
        int r;

        r = parse_argv(argc, argv, &o);
        if (r <= 0)
                goto out;
        if (o.mode == RUN_METRICS_STOPPED) {
                r = write_stopped_metrics(&o);
                goto out;
        }
        r = manager_new(&o, &m);
        if (r < 0)
                goto out;
        if (o.mode == RUN_CHECK_CONFIG)
                r = check_config(m);
        else if (o.mode == RUN_REPLAY)
                r = run_replay(m);
        /* the modes that change devices or put them back: the records first */
        else if ((r = manager_open_state_dir(m)) < 0)
                goto out;
        else if (o.mode == RUN_RESTORE)
                r = restore_records(m);
        else if (o.mode == RUN_ONCE && (r = manager_scan(m)) >= 0)
                r = manager_print_report(m);
        else if (o.mode == RUN_DAEMON)
                r = run_daemon(m);
out:
        manager_free(m);
        strv_free(o.policy_dirs);
        strv_free(o.device_globs);
        return r;
}

/* glibc's defaults, pinned, unless the admin set them: left dynamic, one
 * freed large buffer (a metrics reply, 4.6 MB at 10,000 disks; the device
 * table's old slots) raises both for good, and the next ones come from
 * the heap and stay resident (13.7 MiB after three scrapes, not 5.7). */
static void malloc_pin_thresholds(void) {
        const char *glibc = getenv("GLIBC_TUNABLES");

        if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") ||
            (glibc && (strstr(glibc, "mmap_threshold") || strstr(glibc, "trim_threshold"))))
                return;
        (void) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        (void) mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

int main(int argc, char *argv[]) {
        /* a closed log pipe must not kill the daemon before it puts things back */
        (void) signal(SIGPIPE, SIG_IGN);
        /* one malloc arena: the apply workers' own arenas kept 580 KiB of
         * heap at 1000 devices after the first pass, for threads that are
         * gone; they allocate little and mostly wait in the kernel */
        (void) mallopt(M_ARENA_MAX, 1);
        malloc_pin_thresholds();
        return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
