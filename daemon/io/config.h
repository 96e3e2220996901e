/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The daemon's own configuration: blkpolicyd.conf, section [Daemon].
 * Command-line options override it. */

#include <stdbool.h>
#include <stddef.h>

typedef struct Config {
        unsigned tick_interval_ms;
        char **exclude;         /* kernel name globs never touched */
        bool restore_on_exit;
        char *state_dir;
        char *socket_path;
        char **policy_dirs;     /* increasing priority */
        bool policy_dirs_configured;    /* set by the file, not the default */
        /* policy_set=: the shipped set to run (shipped-sets.h); 0: the newest
         * (latest, or no key). Where the key that chose it is, for the error
         * once the set is looked up; NULL: no key. */
        unsigned policy_set;
        char *policy_set_path;
        unsigned policy_set_line;
        int log_level;          /* -1: not set */
        char *socket_group;     /* group allowed read-only requests; NULL: root only */
        unsigned max_clients;
        unsigned max_clients_per_uid;   /* root is not capped: see control.c */
        unsigned client_timeout_ms;
        bool drift_reapply;     /* on_drift=reapply; default: leave it and mark overridden */
        /* WRITER[:ATTR] words: a drift attributed to that writer (one that
         * runs) is set again, or left alone, whatever on_drift says */
        char **reassert_over;
        char **yield_to;
        /* every managed device read back within this many seconds, a share
         * of the devices a tick (config_drift_checks()); 0: off */
        unsigned drift_sweep_seconds;
        /* deprecated: a fixed count a tick instead of the sweep, when
         * drift_checks_set (a config of before the sweep); 0: off */
        unsigned drift_checks_per_tick;
        bool drift_checks_set;
        char *metrics_textfile_dir;  /* node_exporter textfile collector, NULL: off */
        unsigned metrics_every_ticks;
        /* a series per device too (some 8 each: 80,000 at 10,000 disks);
         * off, a host's series are its sums, a few dozen whatever its disks */
        bool metrics_per_device;
        unsigned uevent_buffer_bytes;   /* receive buffer of the uevent socket */
        unsigned apply_parallelism;     /* apply passes at once; 0: chosen from the kernel */
        bool observe;           /* mode=observe: decide and report, write no policy (a rollout's first step) */
        char *trial_memory;     /* trials' remembered verdicts (trial-memory-file.h); NULL: none kept */
} Config;

#define TRIAL_MEMORY_PATH "/var/lib/blkpolicyd/trial-verdicts.json"

int config_init_defaults(Config *c);
/* trial_memory=: an absolute path, or "no" (none kept). -EINVAL with
 * *error; -ENOMEM. */
int config_set_trial_memory(Config *c, const char *value, const char **error);
void config_done(Config *c);
/* Missing file: defaults stand, returns 0 (unless required). Then the
 * drop-ins <path>.d/NAME.conf in lexical order, each over the one before
 * (config management drops one file to change one key). Errors are
 * logged as file:line and make it return -EINVAL; -ENOMEM fatal. */
int config_load(Config *c, const char *path, bool required);
/* How many devices of n_devices a tick reads back: the sweep's share,
 * ceil(n_devices * tick_interval / drift_sweep_seconds), at least 1 and at
 * most n_devices; or the fixed drift_checks_per_tick of an old config. */
unsigned config_drift_checks(const Config *c, size_t n_devices);
