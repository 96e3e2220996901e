/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control protocol's requests: parse, authorise, run, reply. */
#include "blkpolicyd-paths.h"
#include "applier.h"
#include "commands.h"
#include "conflicts-report.h"
#include "device-trial.h"
#include "device.h"
#include "explain.h"
#include "listings.h"
#include "log.h"
#include "manager.h"
#include "policy-set.h"
#include "protocol.h"
#include "report.h"
#include "sampler.h"
#include "util.h"

/* req: the whole request, for a command with arguments beyond "device" */
typedef ControlReply (*CommandRun)(Manager *m, ControlClient *client, Device *d, const cJSON *req);

static ControlReply reply_ok(cJSON *result) {
        cJSON *r = cJSON_CreateObject();

        cJSON_AddBoolToObject(r, PROTOCOL_KEY_OK, true);
        cJSON_AddItemToObject(r, PROTOCOL_KEY_RESULT, result ?: cJSON_CreateNull());
        return (ControlReply) { .json = r };
}

static ControlReply reply_error(const char *code, const char *message) {
        return (ControlReply) { .json = control_reply_error(code, message) };
}

#define REPLY_NOMEM ((ControlReply) {})

/* RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF. */
static bool utf8_is_valid(const char *str, size_t len) {
        const unsigned char *s = (const unsigned char *) str, *end = s + len;

        while (s < end) {
                unsigned n, cp;

                if (*s < 0x80) {
                        s++;
                        continue;
                }
                if ((*s & 0xE0) == 0xC0)
                        n = 1, cp = *s & 0x1F;
                else if ((*s & 0xF0) == 0xE0)
                        n = 2, cp = *s & 0x0F;
                else if ((*s & 0xF8) == 0xF0)
                        n = 3, cp = *s & 0x07;
                else
                        return false;
                if ((size_t) (end - s) <= n)
                        return false;
                for (unsigned i = 1; i <= n; i++) {
                        if ((s[i] & 0xC0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i] & 0x3F);
                }
                if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
                    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                        return false;
                s += n + 1;
        }
        return true;
}

/* The drift sweep: how far it reaches a tick, and what it read so far. */
static void status_drift(cJSON *tick, const Config *config, const SamplerStats *ticks) {
        cJSON *o = cJSON_AddObjectToObject(tick, "drift");

        if (config->drift_checks_set)
                cJSON_AddNullToObject(o, "sweep_s");    /* the deprecated fixed count */
        else
                cJSON_AddNumberToObject(o, "sweep_s", config->drift_sweep_seconds);
        cJSON_AddNumberToObject(o, "per_tick", ticks->drift_per_tick);
        cJSON_AddNumberToObject(o, "checked", (double) ticks->drift_checked);
}

/* null with --policy-dir: no shipped set is read. in_use and newest are 0
 * for a vendor dir that is not numbered. */
static cJSON *policy_sets_json(const Manager *m) {
        const ShippedSets *s = manager_policy_sets(m);
        cJSON *o, *d;

        if (!s->vendor_dir)
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "in_use", s->in_use);
        cJSON_AddNumberToObject(o, "newest", s->newest);
        d = cJSON_AddArrayToObject(o, "differs");
        for (char **n = s->differs; n && *n; n++)
                cJSON_AddItemToArray(d, cJSON_CreateString(*n));
        return o;
}

static ControlReply cmd_status(Manager *m, ControlClient *client _unused_, Device *d _unused_,
                               const cJSON *req _unused_) {
        cJSON *o = cJSON_CreateObject(), *t, *e;
        const SamplerStats *ticks = sampler_stats(m->sampler);
        unsigned managed = 0, paused = 0, overridden = 0, busy = 0, trials = 0;

        DEVICE_FOREACH(x, &m->ctx) {
                const DeviceTrial *trial = device_trial(x);

                trials += trial && (trial->phase == TRIAL_PHASE_WAITING || trial->phase == TRIAL_PHASE_RUNNING);
                managed += device_plan(x)->managed;
                paused += device_is_paused(&m->ctx, x);
                overridden += device_overridden(x);
                busy += device_plan(x)->busy;
        }
        cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
        cJSON_AddNumberToObject(o, "uptime_s", (double) manager_uptime_usec(m) / 1e6);
        cJSON_AddBoolToObject(o, "dry_run", m->options->dry_run);
        cJSON_AddStringToObject(o, "mode", !manager_writes(m) ? "observe" : "enforce");
        cJSON_AddBoolToObject(o, "handover", m->handover);
        /* where no sd_notify is heard (a container's readiness probe):
         * the first pass over every device is done, as READY=1 says */
        cJSON_AddBoolToObject(o, "first_pass_done", m->first_pass_done);
        cJSON_AddItemToObject(o, "kernel", report_kernel(&m->caps));
        cJSON_AddStringToObject(o, "monitor", discover_monitor_kind(m->discover));
        t = cJSON_AddObjectToObject(o, "tick");
        cJSON_AddNumberToObject(t, "count", (double) ticks->ticks);
        cJSON_AddNumberToObject(t, "interval_ms", m->config.tick_interval_ms);
        cJSON_AddNumberToObject(t, "cost_us_avg",
                                ticks->ticks ? (double) ticks->cost_usec_total / (double) ticks->ticks : 0);
        cJSON_AddNumberToObject(t, "cpu_us_avg",
                                ticks->ticks ? (double) ticks->cpu_nsec_total / 1e3 / (double) ticks->ticks : 0);
        if (ticks->diskstats_error)
                cJSON_AddStringToObject(t, "error", strerror(-ticks->diskstats_error));
        else
                cJSON_AddNullToObject(t, "error");
        if (ticks->dispatch_busy_error)
                cJSON_AddStringToObject(t, "dispatch_busy", "unavailable: debugfs cannot be read");
        else
                cJSON_AddStringToObject(t, "dispatch_busy", "ok");
        status_drift(t, &m->config, ticks);
        t = cJSON_AddObjectToObject(o, "writes");
        cJSON_AddNumberToObject(t, "scheduler", (double) m->ctx.writes.scheduler_writes);
        cJSON_AddNumberToObject(t, "other", (double) m->ctx.writes.other_writes);
        cJSON_AddNumberToObject(o, "devices", (double) m->ctx.devices.n_devices);
        cJSON_AddNumberToObject(o, "managed", managed);
        cJSON_AddNumberToObject(o, "busy", busy);
        cJSON_AddNumberToObject(o, "trials", trials);
        cJSON_AddNumberToObject(o, "paused", paused);
        cJSON_AddNumberToObject(o, "overridden", overridden);
        cJSON_AddBoolToObject(o, "paused_all", m->ctx.paused_all);
        cJSON_AddNumberToObject(o, "policies_loaded", (double) m->policies->n_policies);
        cJSON_AddNumberToObject(o, "canaries", (double) policy_set_canaries(m->policies));
        cJSON_AddItemToObject(o, "policy_set", policy_sets_json(m));
        cJSON_AddNumberToObject(o, "policy_files_rejected", (double) m->policies->n_files_rejected);
        e = cJSON_AddArrayToObject(o, "policy_errors");
        for (size_t i = 0; i < m->policies->errors.n_items; i++)
                cJSON_AddItemToArray(e, report_policy_error(&m->policies->errors.items[i]));
        if (m->reload_errors)
                cJSON_AddItemToObject(o, "reload_errors", cJSON_Duplicate(m->reload_errors, true));
        else
                cJSON_AddNullToObject(o, "reload_errors");
        cJSON_AddItemToObject(o, "conflicts", conflicts_report_json(&m->ctx));
        return reply_ok(o);
}

static ControlReply cmd_devices(Manager *m, ControlClient *client _unused_, Device *d _unused_,
                                const cJSON *req _unused_) {
        return (ControlReply) { .stream = listing_devices(m) };
}

static ControlReply cmd_device(Manager *m, ControlClient *client _unused_, Device *d, const cJSON *req _unused_) {
        return reply_ok(explain_device_report(m, d));
}

static ControlReply cmd_explain(Manager *m, ControlClient *client _unused_, Device *d, const cJSON *req _unused_) {
        return reply_ok(explain_device(m, d));
}

static ControlReply cmd_policies(Manager *m, ControlClient *client _unused_, Device *d _unused_,
                                 const cJSON *req _unused_) {
        cJSON *o = cJSON_CreateObject(), *l = cJSON_AddArrayToObject(o, "loaded"), *e;

        for (size_t i = 0; i < m->policies->n_policies; i++) {
                cJSON *p = cJSON_CreateObject();

                cJSON_AddStringToObject(p, "name", m->policies->policies[i]->name);
                cJSON_AddStringToObject(p, "path", m->policies->policies[i]->path);
                cJSON_AddBoolToObject(p, "dynamic", m->policies->policies[i]->dynamic.enabled);
                cJSON_AddStringToObject(p, "mode", m->policies->policies[i]->observe ? "observe" : "enforce");
                cJSON_AddItemToArray(l, p);
        }
        cJSON_AddNumberToObject(o, "files_rejected", (double) m->policies->n_files_rejected);
        e = cJSON_AddArrayToObject(o, "errors");
        for (size_t i = 0; i < m->policies->errors.n_items; i++)
                cJSON_AddItemToArray(e, report_policy_error(&m->policies->errors.items[i]));
        return reply_ok(o);
}

/* The reply of a reload, once it is applied. */
static void reload_replied(Manager *m, int r, const cJSON *errors, void *userdata) {
        ControlPending *p = userdata;
        cJSON *reply;

        if (r == -ECANCELED) {
                control_pending_free(p);
                return;
        }
        if (r != -EINVAL) {
                control_pending_reply(p, cmd_policies(m, NULL, NULL, NULL));
                return;
        }
        reply = control_reply_error("reload-failed", "the configuration file has errors; the running one stays");
        cJSON_AddItemToObject(cJSON_GetObjectItem(reply, PROTOCOL_KEY_ERROR), "errors",
                              errors ? cJSON_Duplicate(errors, true) : cJSON_CreateArray());
        control_pending_reply(p, (ControlReply) { .json = reply });
}

/* Replies once what the reload changed is applied, as `systemctl reload`
 * expects; the loop serves everyone else meanwhile. */
static ControlReply cmd_reload(Manager *m, ControlClient *client, Device *d _unused_, const cJSON *req _unused_) {
        ControlPending *p = control_reply_later(client);

        if (!p || manager_reload(m, reload_replied, p) < 0) {
                control_pending_free(p);
                return REPLY_NOMEM;
        }
        return CONTROL_REPLY_LATER;
}

static ControlReply cmd_doctor(Manager *m, ControlClient *client _unused_, Device *d _unused_,
                               const cJSON *req _unused_) {
        return reply_ok(conflicts_report_doctor(&m->ctx));
}

/* The name as the loader would read a file of it: a policy's, one file
 * of a drop-in dir (what it masks or adds to depends on it). */
static bool preview_name_valid(const char *name) {
        size_t n = strlen(name);

        return n > 7 && n < NAME_MAX && name[0] != '.' && !strchr(name, '/') && streq(name + n - 7, ".policy");
}

/* {"ok": false, "error": {"code": "policy-invalid", ..., "errors": [...]}}:
 * each error as --check-config prints it, path:line: message. */
static ControlReply reply_policy_invalid(const PolicyErrors *errors) {
        cJSON *reply = control_reply_error(PROTOCOL_ERROR_POLICY_INVALID,
                                           "the policy file has errors; nothing was previewed");
        cJSON *a = cJSON_AddArrayToObject(cJSON_GetObjectItem(reply, PROTOCOL_KEY_ERROR), "errors");

        for (size_t i = 0; i < errors->n_items; i++)
                cJSON_AddItemToArray(a, report_policy_error(&errors->items[i]));
        return (ControlReply) { .json = reply };
}

/* verify --policy: the text parsed as a file of its name is, into a set
 * of its own over the one in force (which is not touched), and every
 * disk decided from it; nothing is written. An empty text masks. */
static ControlReply cmd_verify_policy(Manager *m, const cJSON *policy) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(policy, PROTOCOL_KEY_POLICY_NAME);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(policy, PROTOCOL_KEY_POLICY_TEXT);
        _cleanup_(policy_errors_done) PolicyErrors errors = {};
        PolicySet *set = NULL;
        Policy *p = NULL;
        int r;

        if (!cJSON_IsObject(policy) || !cJSON_IsString(name) || !cJSON_IsString(text))
                return reply_error("invalid-argument", "\"policy\" must be {\"name\": ..., \"text\": ...}");
        if (!preview_name_valid(name->valuestring))
                return reply_error("invalid-argument", "a policy file's name ends in .policy, with no '/'");
        if (strlen(text->valuestring) > PROTOCOL_POLICY_TEXT_MAX) {
                char why[64];

                (void) snprintf(why, sizeof(why), "the policy text is longer than %zu bytes", PROTOCOL_POLICY_TEXT_MAX);
                return reply_error("invalid-argument", why);
        }
        if (text->valuestring[0]) {
                r = policy_parse_text(text->valuestring, name->valuestring, &errors, &p);
                if (r == -EINVAL)
                        return reply_policy_invalid(&errors);
                if (r < 0)
                        return REPLY_NOMEM;
                /* previewed as if enforced: a canary's file asks what its
                 * promotion would change */
                p->observe = false;
        }
        if (policy_set_overlay(m->policies, p, name->valuestring, &set) < 0)
                return REPLY_NOMEM;
        log_debug("Control: verify previews %s", name->valuestring);
        return (ControlReply) { .stream = listing_preview(m, set) };
}

static ControlReply cmd_verify(Manager *m, ControlClient *client _unused_, Device *d _unused_, const cJSON *req) {
        const cJSON *policy = cJSON_GetObjectItemCaseSensitive(req, PROTOCOL_KEY_POLICY);

        if (policy)
                return cmd_verify_policy(m, policy);
        return (ControlReply) { .stream = listing_verify(m) };
}

static ControlReply cmd_pause(Manager *m, ControlClient *client _unused_, Device *d, const cJSON *req _unused_) {
        if (manager_pause(m, d, true) < 0)
                return REPLY_NOMEM;
        return reply_ok(NULL);
}

/* {"ok": true, "result": null} once the passes it waits for are back. */
static void done_replied(void *userdata, int r) {
        ControlPending *p = userdata;

        if (r < 0)
                control_pending_free(p);
        else
                control_pending_reply(p, reply_ok(NULL));
}

static ControlReply cmd_resume(Manager *m, ControlClient *client, Device *d, const cJSON *req _unused_) {
        ControlPending *p = control_reply_later(client);

        if (!p || manager_pause(m, d, false) < 0)
                return control_pending_free(p), REPLY_NOMEM;
        /* the reply says it is done: what resume writes has landed */
        if (applier_wait(m->applier, done_replied, p) < 0)
                return control_pending_free(p), REPLY_NOMEM;
        return CONTROL_REPLY_LATER;
}

/* The next stop leaves every device as it is, with its record, for the
 * next daemon to take over: a package upgrade restarts the daemon without
 * putting everything back and setting it again (two queue freezes a disk). */
static ControlReply cmd_handover(Manager *m, ControlClient *client _unused_, Device *d _unused_,
                                 const cJSON *req _unused_) {
        cJSON *o = cJSON_CreateObject();

        m->handover = true;
        log_notice("Handover requested: the next stop leaves %zu devices to the next blkpolicyd",
                   m->ctx.devices.n_devices);
        cJSON_AddNumberToObject(o, "devices", (double) m->ctx.devices.n_devices);
        return reply_ok(o);
}

/* A restore in two steps, each the end of a wait: the passes in flight
 * land, then the restores run in the applier. Between them the loop
 * serves others, and devices may come and go: this holds numbers, and
 * each step looks its devices up again. */
typedef struct RestoreCall {
        ControlPending *reply;
        Manager *manager;
        bool all;
        dev_t devnum;           /* the one device asked for, unless all */
        dev_t *restored;        /* what the second step put back */
        size_t n_restored;
} RestoreCall;

static RestoreCall *restore_call_free(RestoreCall *c) {
        if (!c)
                return NULL;
        control_pending_free(c->reply);
        free(c->restored);
        free(c);
        return NULL;
}

/* Only those still in the table can be left changed. */
static void restore_replied(void *userdata, int r) {
        RestoreCall *c = userdata;
        cJSON *o, *left;

        if (r < 0) {
                restore_call_free(c);
                return;
        }
        o = cJSON_CreateObject();
        left = cJSON_AddArrayToObject(o, "not_restored");
        for (size_t i = 0; i < c->n_restored; i++) {
                Device *x = device_get(&c->manager->ctx, c->restored[i]);

                if (x && !device_record_empty(device_record(x)))
                        cJSON_AddItemToArray(left, cJSON_CreateString(device_name(x)));
        }
        control_pending_reply(c->reply, reply_ok(o));
        c->reply = NULL;
        restore_call_free(c);
}

/* A device still paused is restored; one resumed meanwhile (or a new disk
 * under the number) is not: the later request wins. */
static int restore_one(RestoreCall *c, Device *x) {
        if (!x || !device_is_paused(&c->manager->ctx, x))
                return 0;
        c->restored[c->n_restored++] = device_devnum(x);
        return device_restore(&c->manager->ctx, x);
}

static void restore_passes_landed(void *userdata, int r) {
        RestoreCall *c = userdata;
        Manager *m = c->manager;
        _cleanup_free_ Device **sorted = NULL;
        int n;

        if (r < 0) {
                restore_call_free(c);
                return;
        }
        n = c->all ? devices_sorted(&m->ctx, &sorted) : 1;
        c->restored = n > 0 ? calloc((size_t) n, sizeof(dev_t)) : NULL;
        if (n < 0 || (n > 0 && !c->restored))
                goto oom;
        for (int i = 0; i < n; i++)
                if (restore_one(c, c->all ? sorted[i] : device_get(&m->ctx, c->devnum)) < 0)
                        goto oom;
        if (applier_wait(m->applier, restore_replied, c) < 0)
                goto oom;
        return;
oom:
        restore_call_free(c);
        (void) manager_fatal(m, -ENOMEM);
}

/* Puts back the originals and pauses, so that no event sets them again:
 * undoing blkpolicyd on a live system, device by device. */
static ControlReply cmd_restore(Manager *m, ControlClient *client, Device *d, const cJSON *req _unused_) {
        RestoreCall *c = calloc(1, sizeof(RestoreCall));

        if (!c || !(c->reply = control_reply_later(client)))
                return restore_call_free(c), REPLY_NOMEM;
        c->manager = m;
        c->all = !d;
        c->devnum = d ? device_devnum(d) : 0;
        /* passes in flight land first: the records to restore from are theirs */
        if (manager_pause(m, d, true) < 0 || applier_wait(m->applier, restore_passes_landed, c) < 0)
                return restore_call_free(c), REPLY_NOMEM;
        return CONTROL_REPLY_LATER;
}

/* The candidates of a trial request, as scheduler= takes them; NULL when
 * they are all good, else what is wrong. */
static const char *trial_candidates_parse(const cJSON *a, SchedChoice *ret, unsigned *n) {
        const cJSON *x;
        const char *error;

        *n = 0;
        if (!a)
                return NULL;
        if (!cJSON_IsArray(a))
                return "\"candidates\" must be an array of scheduler names";
        cJSON_ArrayForEach(x, a) {
                SchedChoice c[SCHED_CHOICES_MAX];
                unsigned k = 0;

                if (!cJSON_IsString(x) || strchr(x->valuestring, ' ') || strchr(x->valuestring, '\t'))
                        return "\"candidates\" must be an array of scheduler names";
                if (*n >= SCHED_CHOICES_MAX)
                        return "at most " STRINGIFY(SCHED_CHOICES_MAX) " candidates";
                if (trial_choices_parse(x->valuestring, c, &k, &error) < 0)
                        return error;
                ret[(*n)++] = c[0];
        }
        return NULL;
}

/* trial DEV [CANDIDATE...] starts one at the next tick; trial DEV --stop
 * ends it, the incumbent back. The reply is the device's trial, as
 * device shows it. */
static ControlReply cmd_trial(Manager *m, ControlClient *client _unused_, Device *d, const cJSON *req) {
        const cJSON *stop = cJSON_GetObjectItemCaseSensitive(req, PROTOCOL_KEY_STOP);
        SchedChoice candidates[SCHED_CHOICES_MAX];
        const char *why = NULL;
        unsigned n;
        int r;

        if (stop && !cJSON_IsBool(stop))
                return reply_error("invalid-argument", "\"stop\" must be true or false");
        why = trial_candidates_parse(cJSON_GetObjectItemCaseSensitive(req, PROTOCOL_KEY_CANDIDATES), candidates, &n);
        if (why)
                return reply_error("invalid-argument", why);
        if (cJSON_IsTrue(stop)) {
                if (n > 0)
                        return reply_error("invalid-argument", "\"stop\" takes no candidates");
                r = device_trial_end(&m->ctx, d);
                if (r == -ENOENT)
                        return reply_error("no-trial", "no trial runs on this device");
        } else {
                r = device_trial_request(&m->ctx, d, candidates, n, &why);
                if (r == -EPERM || r == -EINVAL)
                        return reply_error("trial-refused", why);
        }
        /* the arm in force changed: written as any pass writes */
        if (r > 0)
                r = device_process(&m->ctx, d);
        if (r < 0)
                return REPLY_NOMEM;
        /* its pass may have forgotten it (gone) */
        d = device_get(&m->ctx, device_devnum(d));
        return reply_ok(d ? explain_device_report(m, d) : NULL);
}

static ControlReply cmd_metrics(Manager *m, ControlClient *client _unused_, Device *d _unused_,
                                const cJSON *req _unused_) {
        return (ControlReply) { .stream = listing_metrics(m) };
}

/* The names, arguments and who may run what are protocol.h's, shared with
 * blkpolicyctl; this is only what each one runs. */
static const CommandRun command_runs[] = {
        [PROTOCOL_STATUS] = cmd_status,
        [PROTOCOL_DEVICES] = cmd_devices,
        [PROTOCOL_DEVICE] = cmd_device,
        [PROTOCOL_EXPLAIN] = cmd_explain,
        [PROTOCOL_POLICIES] = cmd_policies,
        [PROTOCOL_VERIFY] = cmd_verify,
        [PROTOCOL_DOCTOR] = cmd_doctor,
        [PROTOCOL_METRICS] = cmd_metrics,
        [PROTOCOL_RELOAD] = cmd_reload,
        [PROTOCOL_PAUSE] = cmd_pause,
        [PROTOCOL_RESUME] = cmd_resume,
        [PROTOCOL_RESTORE] = cmd_restore,
        [PROTOCOL_HANDOVER] = cmd_handover,
        [PROTOCOL_TRIAL] = cmd_trial,
};
_Static_assert(ELEMENTSOF(command_runs) == _PROTOCOL_COMMAND_MAX, "every protocol command runs something");

static ControlReply command_execute(Manager *m, const Peer *peer, ControlClient *client, const cJSON *req) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(req, PROTOCOL_KEY_COMMAND);
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(req, PROTOCOL_KEY_DEVICE);
        const ProtocolCommand *c;
        Device *d = NULL;
        int id;

        if (!cJSON_IsObject(req))
                return reply_error("invalid-request", "a request is a JSON object");
        if (!cJSON_IsString(name))
                return reply_error("invalid-request", "\"command\" must be a string");
        id = protocol_command_from_string(name->valuestring);
        if (id < 0)
                return reply_error("unknown-command", "unknown command; see docs/control-protocol.md");
        c = &protocol_commands[id];
        if (dev && !cJSON_IsString(dev))
                return reply_error("invalid-argument", "\"device\" must be a string");
        if (c->device == DEVICE_ARG_REQUIRED && !dev)
                return reply_error("invalid-argument", "this command needs \"device\"");
        if (c->root_only && peer->uid != 0) {
                log_warning("Control: %s denied to uid %u pid %d (root only)", c->name, (unsigned) peer->uid,
                            (int) peer->pid);
                return reply_error("permission-denied", "this command is for root only");
        }
        if (dev) {
                d = device_find_name(&m->ctx, dev->valuestring);
                if (!d)
                        return reply_error("no-such-device", "no whole disk of that name is known");
        }
        if (c->root_only)
                log_info("Control: %s%s%s by uid %u pid %d", c->name, d ? " " : "", d ? device_name(d) : "",
                         (unsigned) peer->uid, (int) peer->pid);
        return command_runs[id](m, client, d, req);
}

ControlReply commands_run(Manager *m, const Peer *peer, ControlClient *client, const char *line, size_t len) {
        ControlReply reply;
        cJSON *req;

        if (len > 0 && line[len - 1] == '\r')
                len--;
        if (!utf8_is_valid(line, len))
                return reply_error("invalid-utf8", "requests are UTF-8");
        req = cJSON_ParseWithLength(line, len);
        if (!req)
                return reply_error("malformed-json", "the line is not one JSON object");
        reply = command_execute(m, peer, client, req);
        cJSON_Delete(req);
        return reply;
}

static ControlReply handler_request(void *userdata, const Peer *peer, ControlClient *client, const char *line,
                                    size_t len) {
        return commands_run(userdata, peer, client, line, len);
}

static void handler_fatal(void *userdata, int r) {
        (void) manager_fatal(userdata, r);
}

ControlHandler commands_handler(Manager *m) {
        return (ControlHandler) { .request = handler_request, .fatal = handler_fatal, .userdata = m };
}
