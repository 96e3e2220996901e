/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The GCE guest agent: it writes "none" to queue/scheduler of every disk
 * with mq/ at each of its starts (setIOScheduler() in guest-agent's
 * instance_setup.go, the iosched module of google-guest-agent's core
 * plugin), unconditionally; with optimize_local_ssd (default true)
 * google_optimize_local_ssd also sets add_random, nr_requests,
 * rq_affinity and nomerges on local SSDs. */
#include <strings.h>

#include "conflicts-files.h"
#include "conflicts-gce.h"
#include "conflicts-units.h"
#include "tunables.h"
#include "util.h"

static const char *const gce_units[] = {
        "/etc/systemd/system/google-guest-agent.service",
        "/usr/lib/systemd/system/google-guest-agent.service",
        "/lib/systemd/system/google-guest-agent.service",
};

/* The agent's config, later files override earlier ones (cfg.go's
 * dataSources()); optimize_local_ssd defaults to true. */
static bool gce_optimize_local_ssd(const char *root) {
        static const char *const files[] = {
                "/etc/default/instance_configs.cfg",
                "/etc/default/instance_configs.cfg.distro",
                "/etc/default/instance_configs.cfg.template",
        };
        bool on = true;

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *text = NULL;
                bool in_setup = false;
                char *save = NULL;

                if (conflicts_read_file(root, files[i], &text) < 0)
                        continue;
                for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                        char *eq, *k = strstrip(l);

                        if (*k == '[')
                                in_setup = strncasecmp(k, "[InstanceSetup]", 15) == 0;
                        else if (in_setup && (eq = strchr(k, '='))) {
                                *eq = 0;
                                if (strcasecmp(strstrip(k), "optimize_local_ssd") == 0)
                                        on = parse_boolean(strstrip(eq + 1)) != 0;
                        }
                }
        }
        return on;
}

/* Why not order blkpolicyd.service after the agent: blkpolicyd runs
 * before sysinit.target and the agent, like every service with default
 * dependencies, after it, so After=google-guest-agent.service is a cycle
 * that systemd breaks by dropping blkpolicyd's start. The settle unit is
 * an ordinary service, After= the late writers. */
#define GCE_ADVICE                                                                                                  \
        "the agent writes none to every blk-mq disk at each of its starts and has no option to stop it: enable "    \
        "blkpolicyd-settle.service (systemctl enable blkpolicyd-settle.service), which runs after the agent and "   \
        "tuned and has blkpolicyd write its settings again, and set on_drift=reapply in blkpolicyd.conf for an "    \
        "agent restarted later; do not order blkpolicyd.service itself after the agent, which makes an ordering "   \
        "cycle through sysinit.target"

static int gce_add_local_ssd(const char *root, ConflictSet *s, bool dormant) {
        static const char *const ssd_attrs[][2] = {
                { "add_random", "0" }, { "nr_requests", "512" }, { "rq_affinity", "0" }, { "nomerges", "1" },
        };

        if (!conflicts_path_exists(root, "/usr/bin/google_optimize_local_ssd") || !gce_optimize_local_ssd(root))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(ssd_attrs); i++) {
                /* the script picks virtio-scsi disks whose model is EphemeralDisk */
                RuleToken model = { .key = (char *) "ATTR", .attr = (char *) "device/model",
                                    .value = (char *) "*EphemeralDisk*", .op = RULE_OP_MATCH };
                Conflict *c;
                int r;

                r = conflict_add(s, CONFLICT_GCE, "/usr/bin/google_optimize_local_ssd", 0,
                                 (unsigned) tunable_find_attr(ssd_attrs[i][0]), ssd_attrs[i][1], &model, 1,
                                 "local SSDs (model EphemeralDisk)",
                                 "set optimize_local_ssd = false in [InstanceSetup] of "
                                 "/etc/default/instance_configs.cfg; the agent runs the script at each of its starts",
                                 &c);
                if (r < 0)
                        return r;
                c->dormant = dormant;
        }
        return 0;
}

int conflicts_scan_gce(const char *root, ConflictSet *s) {
        UnitState state = conflicts_unit_state(root, "google-guest-agent.service");
        _cleanup_free_ char *advice = NULL;
        const char *unit = NULL;
        Conflict *c;
        int r;

        if (state == UNIT_ABSENT || state == UNIT_MASKED)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(gce_units) && !unit; i++)
                if (conflicts_path_exists(root, gce_units[i]))
                        unit = gce_units[i];
        if (!unit)
                unit = "google-guest-agent.service";    /* in /run or /usr/local: found, not named here */
        if (unit_state_runs(state))
                advice = strdup(GCE_ADVICE);
        else if (asprintf(&advice, "google-guest-agent.service is %s: it writes nothing until it is started; " GCE_ADVICE,
                          unit_state_to_string(state)) < 0)
                advice = NULL;
        if (!advice)
                return -ENOMEM;
        r = conflict_add(s, CONFLICT_GCE, unit, 0, TUNABLE_SCHEDULER, "none", NULL, 0, "every disk with mq/", advice,
                         &c);
        if (r < 0)
                return r;
        c->needs_blk_mq = true;
        c->dormant = !unit_state_runs(state);
        return gce_add_local_ssd(root, s, c->dormant);
}
