/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkpolicyctl: talks to blkpolicyd over its control socket. Human tables
 * by default, --json for the raw reply. Exit codes: 0 ok, 1 error reply,
 * 2 usage, 3 cannot connect, 4 the daemon answered but something needs an
 * admin (verify: a setting differs; status: the last reload failed or a
 * policy file is rejected; verify --policy: a setting would change), for
 * alerting, 5 the daemon did not answer in time, 6 verify --policy's file
 * has errors. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "blkpolicyd-paths.h"
#include "protocol.h"

#define EXIT_REPLY 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3
#define EXIT_ATTENTION 4        /* verify: drift; status: reload failed, policy file rejected */
#define EXIT_TIMEOUT 5
#define EXIT_POLICY_INVALID 6   /* verify --policy: the file has errors (file:line) */

/* A daemon whose loop is stuck still accepts (the backlog) and reads the
 * request (the socket buffer), so without a bound we would wait forever.
 * Twice the unit's WatchdogSec=30s: under systemd, a loop stopped that
 * long has been killed, and a reply that late will not come. Each connect,
 * send and recv gets this long; top sleeps between them, not in them. */
#define REPLY_TIMEOUT_SEC 60

typedef struct Ctl {
        const char *socket_path;
        bool json;
        int fd;
        unsigned iterations;    /* top: 0 = until interrupted */
        const char *policy_path;        /* verify --policy */
        cJSON *policy;          /* its {"name", "text"}, read before connecting */
        char **candidates;      /* trial DEV CANDIDATE...: argv's */
        unsigned n_candidates;
        bool stop;              /* trial DEV --stop */
} Ctl;

static int ctl_connect(Ctl *c) {
        const struct timeval timeout = { .tv_sec = REPLY_TIMEOUT_SEC };
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (strlen(c->socket_path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "Socket path too long: %s\n", c->socket_path);
                return -EXIT_USAGE;
        }
        memcpy(sa.sun_path, c->socket_path, strlen(c->socket_path) + 1);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        /* SO_SNDTIMEO bounds connect() too, on a full backlog */
        if (c->fd < 0 || setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) < 0 ||
            setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout)) < 0 ||
            connect(c->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int e = errno;

                if (e == EAGAIN) {
                        fprintf(stderr, "blkpolicyd did not accept the connection on %s within %d s.\n",
                                c->socket_path, REPLY_TIMEOUT_SEC);
                        return -EXIT_TIMEOUT;
                }
                if (e == ENOENT || e == ECONNREFUSED)
                        fprintf(stderr, "Cannot connect to %s: %s. Is blkpolicyd running? (systemctl status blkpolicyd)\n",
                                c->socket_path, strerror(e));
                else if (e == EACCES || e == EPERM)
                        fprintf(stderr, "Cannot connect to %s: permission denied. Run as root, or as a member of "
                                        "blkpolicyd.conf's socket_group.\n", c->socket_path);
                else
                        fprintf(stderr, "Cannot connect to %s: %s\n", c->socket_path, strerror(e));
                return -EXIT_CONNECT;
        }
        return 0;
}

static int send_all(int fd, const char *p, size_t len) {
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

static int send_line(int fd, const char *text) {
        int r = send_all(fd, text, strlen(text));

        return r < 0 ? r : send_all(fd, "\n", 1);
}

/* One request, one reply line. -ETIMEDOUT: the daemon took longer than
 * REPLY_TIMEOUT_SEC to read the request or to answer. */
/* The request's line: {"command": ..., "device": ..., "policy": ...}. */
static char *request_line(const Ctl *c, ProtocolCommandId command, const char *device) {
        cJSON *req = cJSON_CreateObject();
        char *text;

        cJSON_AddStringToObject(req, PROTOCOL_KEY_COMMAND, protocol_commands[command].name);
        if (device)
                cJSON_AddStringToObject(req, PROTOCOL_KEY_DEVICE, device);
        if (c->policy && command == PROTOCOL_VERIFY)
                cJSON_AddItemReferenceToObject(req, PROTOCOL_KEY_POLICY, c->policy);
        if (command == PROTOCOL_TRIAL && c->stop)
                cJSON_AddBoolToObject(req, PROTOCOL_KEY_STOP, true);
        if (command == PROTOCOL_TRIAL && c->n_candidates > 0)
                cJSON_AddItemToObject(req, PROTOCOL_KEY_CANDIDATES,
                                      cJSON_CreateStringArray((const char *const *) c->candidates,
                                                              (int) c->n_candidates));
        text = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        return text;
}

static int ctl_call(Ctl *c, ProtocolCommandId command, const char *device, cJSON **ret) {
        char *text, *line = NULL;
        size_t size = 0, len = 0;
        int r;

        text = request_line(c, command, device);
        r = text ? send_line(c->fd, text) : -ENOMEM;
        free(text);
        if (r == -EAGAIN)
                return -ETIMEDOUT;
        /* a daemon that refuses the connection (too-many-clients) writes
         * why and closes, maybe before we wrote: read the reason anyway */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return r;
        for (r = -ECONNRESET;;) {
                char buf[65536], *nl, *p;
                ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = errno == EAGAIN ? -ETIMEDOUT : -errno;
                if (n <= 0)
                        break;          /* n == 0: closed before a whole line */
                if (len + (size_t) n + 1 > size) {
                        size = (len + (size_t) n + 1) * 2;
                        p = realloc(line, size);
                        if (!p) {
                                r = -ENOMEM;
                                break;
                        }
                        line = p;
                }
                memcpy(line + len, buf, (size_t) n);
                len += (size_t) n;
                line[len] = 0;
                nl = memchr(line, '\n', len);
                if (nl) {
                        *ret = cJSON_ParseWithLength(line, (size_t) (nl - line));
                        r = *ret ? 0 : -EBADMSG;
                        break;
                }
        }
        free(line);
        return r;
}

/* What a failed call means for the exit status, said once on stderr. */
static int call_failed(int error) {
        if (error == -ETIMEDOUT) {
                fprintf(stderr, "blkpolicyd did not answer within %d s.\n", REPLY_TIMEOUT_SEC);
                return EXIT_TIMEOUT;
        }
        fprintf(stderr, "No reply from blkpolicyd: %s.\n", strerror(-error));
        return EXIT_CONNECT;
}

static const char *str(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : "-";
}

static double num(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const cJSON *get(const cJSON *o, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A signal that can be unknown (null: a tick without I/O has no mix) is
 * shown as "-", not as 0. */
static const char *signal_text(const cJSON *g, const char *key, const char *unit, char *buf, size_t size) {
        const cJSON *v = get(g, key);

        if (!cJSON_IsNumber(v))
                return "-";
        snprintf(buf, size, "%.1f%s", v->valuedouble, unit);
        return buf;
}

static void classes_join(const cJSON *a, char *buf, size_t size) {
        const cJSON *c;
        size_t n = 0;

        buf[0] = 0;
        cJSON_ArrayForEach(c, a)
                if (cJSON_IsString(c) && n < size)
                        n += (size_t) snprintf(buf + n, size - n, "%s%s", n ? "," : "", c->valuestring);
}

/* The scheduler as last read: the settings' current value, else the facts'. */
static const char *device_scheduler(const cJSON *d) {
        const cJSON *s = get(get(d, "settings"), "scheduler");
        const char *cur = str(s, "current");
        return strcmp(cur, "-") ? cur : str(get(d, "facts"), "scheduler");
}

static const char *device_state(const cJSON *d) {
        if (cJSON_IsTrue(get(d, "paused")))
                return "paused";
        if (cJSON_IsTrue(get(d, "overridden")))
                return "overridden";
        if (!cJSON_IsTrue(get(d, "managed")))
                return "unmanaged";
        if (cJSON_IsObject(get(d, "dynamic")))
                return str(get(d, "dynamic"), "state");
        return cJSON_IsNull(get(d, "policy")) ? "kernel" : "static";
}

/* With the opt-in spelled out when an older shipped set runs: the admin
 * has a choice to make. Nothing with --policy-dir (null). */
static void print_policy_set(const cJSON *s) {
        const cJSON *x;

        if (!cJSON_IsObject(s))
                return;
        if (num(s, "newest") <= num(s, "in_use")) {
                if (num(s, "in_use") > 0)
                        printf("shipped policy set %.0f, the newest installed\n", num(s, "in_use"));
                return;
        }
        printf("shipped policy set %.0f in use; set %.0f is installed and newer, it changes:", num(s, "in_use"),
               num(s, "newest"));
        cJSON_ArrayForEach(x, get(s, "differs"))
                printf(" %s", cJSON_IsString(x) ? x->valuestring : "-");
        printf("\n  to run it: policy_set = %.0f in /etc/blkpolicyd/blkpolicyd.conf.d/00-policy-set.conf, then "
               "systemctl reload blkpolicyd\n", num(s, "newest"));
}

/* The sweep's reach: a deprecated fixed count has no sweep time (null). */
static void print_drift(const cJSON *d) {
        if (!cJSON_IsObject(d))
                return;
        if (cJSON_IsNumber(get(d, "sweep_s")))
                printf("drift: every setting read back within %.0f s, %.0f device%s a tick, %.0f read so far\n",
                       num(d, "sweep_s"), num(d, "per_tick"), num(d, "per_tick") == 1 ? "" : "s", num(d, "checked"));
        else
                printf("drift: %.0f device%s read back a tick (drift_checks_per_tick), %.0f read so far\n",
                       num(d, "per_tick"), num(d, "per_tick") == 1 ? "" : "s", num(d, "checked"));
}

static void print_status(const cJSON *r) {
        const cJSON *k = get(r, "kernel"), *t = get(r, "tick"), *e = get(r, "policy_errors"), *x;

        printf("blkpolicyd %s, up %.1f s%s\n", str(r, "version"), num(r, "uptime_s"),
               cJSON_IsTrue(get(r, "dry_run")) ? " (dry run: nothing is written)" : "");
        printf("kernel %s, dispatch_direct %s, monitor %s uevents\n", str(k, "release"), str(k, "dispatch_direct"),
               str(r, "monitor"));
        printf("devices %.0f, managed %.0f, busy %.0f, paused %.0f%s, overridden %.0f\n", num(r, "devices"),
               num(r, "managed"), num(r, "busy"), num(r, "paused"), cJSON_IsTrue(get(r, "paused_all")) ? " (all)" : "",
               num(r, "overridden"));
        printf("ticks %.0f every %.0f ms, %.1f us each%s%s\n", num(t, "count"), num(t, "interval_ms"),
               num(t, "cost_us_avg"), cJSON_IsString(get(t, "error")) ? ", sampling failed: " : "",
               cJSON_IsString(get(t, "error")) ? str(t, "error") : "");
        print_drift(get(t, "drift"));
        /* files, not errors: one typo can make many errors in one file */
        if (cJSON_GetArraySize(e))
                printf("policies %.0f loaded, %.0f file%s rejected (skipped), %d error%s:\n",
                       num(r, "policies_loaded"), num(r, "policy_files_rejected"),
                       num(r, "policy_files_rejected") == 1 ? "" : "s", cJSON_GetArraySize(e),
                       cJSON_GetArraySize(e) == 1 ? "" : "s");
        else
                printf("policies %.0f loaded, no errors\n", num(r, "policies_loaded"));
        if (num(r, "canaries") > 0)
                printf("canaries (mode=observe policies, never written): %.0f\n", num(r, "canaries"));
        cJSON_ArrayForEach(x, e)
                printf("  %s:%.0f: %s\n", str(x, "path"), num(x, "line"), str(x, "message"));
        print_policy_set(get(r, "policy_set"));
        if (cJSON_IsArray(get(r, "reload_errors"))) {
                printf("last reload failed, the running configuration stays in force:\n");
                cJSON_ArrayForEach(x, get(r, "reload_errors"))
                        printf("  %s:%.0f: %s\n", str(x, "path"), num(x, "line"), str(x, "message"));
        }
        if (cJSON_GetArraySize(get(r, "conflicts")) > 0) {
                int fights = 0;

                cJSON_ArrayForEach(x, get(r, "conflicts"))
                        fights += cJSON_IsTrue(get(x, "affects_managed"));
                printf("other writers of these settings: %d, %d setting what blkpolicyd manages "
                       "(blkpolicyctl doctor)\n", cJSON_GetArraySize(get(r, "conflicts")), fights);
        }
}

static void print_devices(const cJSON *r) {
        const cJSON *d;

        printf("%-12s %-36s %-12s %-10s %s\n", "DEVICE", "CLASSES", "SCHEDULER", "STATE", "POLICY");
        cJSON_ArrayForEach(d, r) {
                char classes[256];

                classes_join(get(d, "classes"), classes, sizeof(classes));
                printf("%-12s %-36s %-12s %-10s %s\n", str(d, "name"), classes, device_scheduler(d), device_state(d),
                       str(d, "policy"));
        }
}

/* A trial's state, as device and explain show it (the trial command's reply too). */
static void print_trial(const cJSON *t) {
        const cJSON *o, *i;

        if (!cJSON_IsObject(t))
                return;
        printf("  trial (%s): %s", str(t, "started_by"), str(t, "phase"));
        if (cJSON_IsString(get(t, "arm")))
                printf(", the %s in force (%s)", str(t, "arm"), str(t, "window"));
        printf("; kept so far: %s\n", cJSON_IsString(get(t, "kept")) ? str(t, "kept") : "the policies' choice");
        if (cJSON_IsObject(get(t, "recalled")))
                printf("    remembered for this disk, kernel and trial: %s, %.2fx, taken at %.0f (no trial run)\n",
                       str(get(t, "recalled"), "verdict"), num(get(t, "recalled"), "estimate"),
                       num(get(t, "recalled"), "at"));
        if (cJSON_IsObject(get(t, "shape")))
                printf("    decided on: reads %.0f%%, %.1f KiB a request%s\n", 100 * num(get(t, "shape"), "read_share"),
                       num(get(t, "shape"), "request_bytes") / 1024,
                       num(t, "retrials") > 0 ? " (taken again after a workload change or max_age)" : "");
        cJSON_ArrayForEach(o, get(t, "outcomes")) {
                i = get(o, "interval");
                printf("    %s against %s: %s, %.0f windows, %.0f pairs, %.2fx", str(o, "candidate"),
                       str(o, "incumbent"), str(o, "verdict"), num(o, "windows"), num(o, "pairs"), num(o, "estimate"));
                if (cJSON_IsNumber(cJSON_GetArrayItem(i, 1)))
                        printf(" [%.2f, %.2f]", cJSON_GetArrayItem(i, 0)->valuedouble,
                               cJSON_GetArrayItem(i, 1)->valuedouble);
                printf("%s%s: %s\n", cJSON_IsString(get(o, "kept")) ? ", kept " : "",
                       cJSON_IsString(get(o, "kept")) ? str(o, "kept") : "", str(o, "reason"));
        }
}

static void print_device(const cJSON *d) {
        const cJSON *s, *p, *h;
        char classes[256];

        classes_join(get(d, "classes"), classes, sizeof(classes));
        printf("%s: %s\n", str(d, "name"), classes);
        printf("  state: %s%s%s\n", device_state(d), cJSON_IsString(get(d, "reason")) ? ", " : "",
               cJSON_IsString(get(d, "reason")) ? str(d, "reason") : "");
        if (cJSON_IsString(get(d, "override")))
                printf("  override: %s\n", str(d, "override"));
        /* explain's: the whole stack, bottom to top, the device in brackets */
        if (cJSON_IsString(get(d, "stack")))
                printf("  stack: %s\n", str(d, "stack"));
        if (cJSON_IsArray(get(d, "policies"))) {
                printf("  policies considered, in order:\n");
                cJSON_ArrayForEach(p, get(d, "policies"))
                        printf("    %-32s %s%s%s\n", str(p, "name"), cJSON_IsTrue(get(p, "matched")) ? "matched" : "no: ",
                               cJSON_IsTrue(get(p, "matched")) ? "" : str(p, "failed"),
                               !strcmp(str(p, "mode"), "observe") ? " (canary: mode=observe)" : "");
        }
        printf("  settings:\n");
        cJSON_ArrayForEach(s, get(d, "settings"))
                printf("    %-26s %-12s -> %-12s %-11s from %s%s%s\n", s->string, str(s, "current"), str(s, "target"),
                       str(s, "result"), str(s, "source"), cJSON_IsString(get(s, "error")) ? ": " : "",
                       cJSON_IsString(get(s, "error")) ? str(s, "error") : "");
        if (cJSON_IsObject(get(d, "canary"))) {
                const cJSON *k = get(d, "canary");

                printf("  canaries (mode=observe: never written; the last is %s) would change:%s\n",
                       str(k, "policy"), cJSON_GetArraySize(get(k, "settings")) ? "" : " nothing");
                cJSON_ArrayForEach(s, get(k, "settings"))
                        printf("    %-26s %-12s -> %-12s %-11s from %s%s%s\n", s->string, str(s, "current"),
                               str(s, "target"), str(s, "result"), str(s, "source"),
                               cJSON_IsString(get(s, "error")) ? ": " : "",
                               cJSON_IsString(get(s, "error")) ? str(s, "error") : "");
        }
        if (cJSON_IsObject(get(d, "dynamic"))) {
                const cJSON *y = get(d, "dynamic");
                printf("  dynamic (%s): %s, %.0f flips costing %.2f ms\n", str(y, "policy"), str(y, "state"),
                       num(y, "flips"), num(y, "flip_cost_ms"));
                cJSON_ArrayForEach(h, get(y, "history"))
                        printf("    at %.1f s -> %s: %s (%.2f ms)\n", num(h, "uptime_s"), str(h, "to"),
                               str(h, "condition"), num(h, "cost_ms"));
        }
        print_trial(get(d, "trial"));
        if (cJSON_IsObject(get(d, "signals"))) {
                const cJSON *g = get(d, "signals");
                char w[32], rkb[32], wkb[32], m[32];

                printf("  load: %.0f IOPS, %.2f MB/s, util %.0f%%, queue depth %.2f, latency %.3f ms\n",
                       num(g, "iops"), num(g, "mbps"), num(g, "util"), num(g, "qdepth"), num(g, "lat_ms"));
                printf("  mix: writes %s, reads of %s, writes of %s, merged %s\n",
                       signal_text(g, "wpct", "%", w, sizeof(w)), signal_text(g, "rkb", " KiB", rkb, sizeof(rkb)),
                       signal_text(g, "wkb", " KiB", wkb, sizeof(wkb)), signal_text(g, "merge_pct", "%", m, sizeof(m)));
        }
}

static void print_policies(const cJSON *r) {
        const cJSON *p;

        cJSON_ArrayForEach(p, get(r, "loaded"))
                printf("%-32s %s%s%s\n", str(p, "name"), str(p, "path"), cJSON_IsTrue(get(p, "dynamic")) ? " (dynamic)" : "",
                       !strcmp(str(p, "mode"), "observe") ? " (canary: mode=observe)" : "");
        if (num(r, "files_rejected") > 0)
                printf("%.0f file%s rejected, skipped as if absent:\n", num(r, "files_rejected"),
                       num(r, "files_rejected") == 1 ? "" : "s");
        cJSON_ArrayForEach(p, get(r, "errors"))
                printf("error: %s:%.0f: %s\n", str(p, "path"), num(p, "line"), str(p, "message"));
}

static void print_verify(const cJSON *r) {
        const cJSON *d, *x;

        bool observing = !strcmp(str(r, "mode"), "observe");

        if (num(r, "drifted") == 0 && num(r, "not_kept") == 0 && !observing)
                printf("No drift: every managed setting is as blkpolicyd intends.\n");
        if (observing)
                printf("mode=observe: nothing is enforced; %.0f device%s with changes pending.\n", num(r, "pending"),
                       num(r, "pending") == 1 ? "" : "s");
        cJSON_ArrayForEach(d, get(r, "devices"))
                cJSON_ArrayForEach(x, get(d, "pending"))
                        printf("%s: %s is %s, would be %s (pending)\n", str(d, "name"), str(x, "attr"),
                               *str(x, "live") ? str(x, "live") : "(with the new scheduler)", str(x, "intended"));
        cJSON_ArrayForEach(d, get(r, "devices"))
                cJSON_ArrayForEach(x, get(d, "drift"))
                        printf("%s: %s is %s, blkpolicyd intends %s%s%s%s\n", str(d, "name"), str(x, "attr"),
                               str(x, "live"), str(x, "intended"),
                               cJSON_IsTrue(get(d, "overridden")) ? " (overridden: left alone)" : "",
                               cJSON_IsString(get(x, "writer")) ? "; likely set by " : "",
                               cJSON_IsString(get(x, "writer")) ? str(x, "writer") : "");
        cJSON_ArrayForEach(d, get(r, "devices"))
                cJSON_ArrayForEach(x, get(d, "not_kept"))
                        printf("%s: %s is %s: blkpolicyd wrote %s, the kernel did not keep it (not kept)\n",
                               str(d, "name"), str(x, "attr"), str(x, "live"), str(x, "intended"));
        cJSON_ArrayForEach(d, get(r, "devices"))
                cJSON_ArrayForEach(x, get(d, "canary"))
                        printf("%s: %s is %s, canary %s would set %s (mode=observe: not written)\n", str(d, "name"),
                               str(x, "attr"), *str(x, "live") ? str(x, "live") : "(with the new scheduler)",
                               str(x, "source"), str(x, "intended"));
        if (num(r, "canary") > 0)
                printf("%.0f device%s with changes a canary would make; canaries are never written.\n",
                       num(r, "canary"), num(r, "canary") == 1 ? "" : "s");
}

/* verify --policy: a line per change, then what it comes to. */
static void print_preview_device(const cJSON *d) {
        const char *name = str(d, "name");
        const cJSON *x;
        /* what holds it back: the change is the file's all the same */
        const char *held = cJSON_IsTrue(get(d, "paused"))       ? " [paused: written at resume]"
                           : cJSON_IsTrue(get(d, "overridden")) ? " [overridden: written at resume]"
                                                                : "";

        if (cJSON_IsTrue(get(d, "managed")) != cJSON_IsTrue(get(d, "would_be_managed")))
                printf("%s: %s\n", name, cJSON_IsTrue(get(d, "would_be_managed")) ? "would be managed"
                                                                                 : "would no longer be managed");
        cJSON_ArrayForEach(x, get(d, "changes")) {
                if (cJSON_IsTrue(get(x, "put_back")))
                        printf("%s: %s %s -> %s (put back: the value found before blkpolicyd's first write)%s\n",
                               name, str(x, "attr"), str(x, "live"), str(x, "would_be"), held);
                else
                        printf("%s: %s %s -> %s (%s)%s\n", name, str(x, "attr"), str(x, "live"), str(x, "would_be"),
                               str(x, "source"), held);
        }
        if (cJSON_IsTrue(get(d, "in_flight")))
                printf("%s: a pass was in flight, not read: live values are its last round's\n", name);
}

static void print_preview(const cJSON *r, const char *file) {
        const cJSON *d;

        cJSON_ArrayForEach(d, get(r, "devices"))
                print_preview_device(d);
        if (num(r, "changes") == 0 && num(r, "managed") == 0 && num(r, "unmanaged") == 0) {
                printf("%s: nothing would change.\n", file);
                return;
        }
        printf("%s: %.0f setting%s would change on %.0f device%s", file, num(r, "changes"),
               num(r, "changes") == 1 ? "" : "s", num(r, "changed"), num(r, "changed") == 1 ? "" : "s");
        if (num(r, "managed") > 0 || num(r, "unmanaged") > 0)
                printf("; %.0f device%s would be managed, %.0f no longer", num(r, "managed"),
                       num(r, "managed") == 1 ? "" : "s", num(r, "unmanaged"));
        printf("%s.\n", strcmp(str(r, "mode"), "observe") ? "" : " (the daemon observes: written once it enforces)");
}

/* verify's reply with "changes" is a preview's (verify --policy). */
static bool is_preview(const cJSON *result) {
        return cJSON_IsNumber(get(result, "changes"));
}

/* One paragraph per writer: what it sets, where, on which disks, what to do. */
static void print_doctor(const cJSON *r) {
        const cJSON *c, *d, *w;

        cJSON_ArrayForEach(c, get(r, "conflicts")) {
                bool first = true;
                char line[32] = "";

                if (cJSON_IsNumber(get(c, "line")))
                        snprintf(line, sizeof(line), ":%.0f", num(c, "line"));
                printf("%s%s: %s%s sets queue/%s=%s%s\n", c == get(r, "conflicts")->child ? "" : "\n",
                       str(c, "source"), str(c, "path"), line, str(c, "attr"), str(c, "value"),
                       cJSON_IsTrue(get(c, "effective")) ? "" : " (no effect on blk-mq)");
                if (cJSON_IsString(get(c, "match")))
                        printf("  match: %s\n", str(c, "match"));
                printf("  applies to:");
                cJSON_ArrayForEach(d, get(c, "devices")) {
                        printf("%s %s", first ? "" : ",", str(d, "name"));
                        if (!strcmp(str(d, "match"), "maybe"))
                                printf(" (maybe)");
                        else if (cJSON_IsTrue(get(d, "managed")))
                                printf(" (blkpolicyd sets %s)", str(d, "intended"));
                        first = false;
                }
                printf("%s\n", first ? " no disk here" : "");
                printf("  to fix: %s\n", str(c, "advice"));
        }
        if (cJSON_GetArraySize(get(r, "conflicts")) && cJSON_GetArraySize(get(r, "warnings")))
                putchar('\n');
        cJSON_ArrayForEach(w, get(r, "warnings"))
                printf("warning: %s\n", w->valuestring);
        if (!cJSON_GetArraySize(get(r, "conflicts")))
                printf("No other writer of blkpolicyd's settings found.\n");
        else
                printf("\n%d other writer%s found, %.0f setting what blkpolicyd manages on a managed disk.\n",
                       cJSON_GetArraySize(get(r, "conflicts")), cJSON_GetArraySize(get(r, "conflicts")) == 1 ? "" : "s",
                       num(r, "affecting"));
}

static int top(Ctl *c) {
        for (unsigned i = 0; !c->iterations || i < c->iterations; i++) {
                cJSON *st = NULL, *devs = NULL, *d;
                double interval;
                int r;

                r = ctl_call(c, PROTOCOL_STATUS, NULL, &st);
                if (r >= 0)
                        r = ctl_call(c, PROTOCOL_DEVICES, NULL, &devs);
                if (r < 0) {
                        cJSON_Delete(st);
                        return call_failed(r);
                }
                interval = num(get(get(st, PROTOCOL_KEY_RESULT), "tick"), "interval_ms");
                if (isatty(STDOUT_FILENO))
                        fputs("\033[H\033[2J", stdout);
                printf("%-12s %-12s %-10s %6s %10s %9s %7s %6s\n", "DEVICE", "SCHEDULER", "STATE", "UTIL%", "IOPS",
                       "MB/s", "QDEPTH", "FLIPS");
                cJSON_ArrayForEach(d, get(devs, PROTOCOL_KEY_RESULT)) {
                        const cJSON *g = get(d, "signals");
                        printf("%-12s %-12s %-10s %6.1f %10.0f %9.2f %7.2f %6.0f\n", str(d, "name"),
                               device_scheduler(d), device_state(d), num(g, "util"), num(g, "iops"), num(g, "mbps"),
                               num(g, "qdepth"), num(get(d, "dynamic"), "flips"));
                }
                fflush(stdout);
                cJSON_Delete(st);
                cJSON_Delete(devs);
                if (c->iterations && i + 1 >= c->iterations)
                        break;
                poll(NULL, 0, interval > 0 ? (int) interval : 1000);
        }
        return 0;
}

static void help(void) {
        printf("blkpolicyctl [--socket PATH] [--json] [-n N] [--policy FILE] COMMAND [DEVICE]\n"
               "blkpolicyctl --version | --help\n\n"
               "  status            Daemon, kernel, tick and policy errors\n"
               "  devices           Every whole disk, its classes, scheduler and state\n"
               "  device DEV        One device\n"
               "  explain DEV       Every policy considered, which file set each setting, flips\n"
               "  policies          Loaded policy files and their errors\n"
               "  reload            Re-read configuration and policies (root)\n"
               "  verify            Compare live sysfs with what blkpolicyd intends\n"
               "  verify --policy FILE\n"
               "                    What FILE would change on every disk, added to the policies in\n"
               "                    force (or in place of the file of its name); nothing is written\n"
               "  pause [DEV]       Stop managing DEV, or all devices (root)\n"
               "  resume [DEV]      Manage again; ends overrides (root)\n"
               "  restore [DEV]     Put back what blkpolicyd changed, then leave it paused (root)\n"
               "  handover          The next stop leaves every device to the next daemon (root; upgrades)\n"
               "  trial DEV [SCHEDULER...]\n"
               "                    Try schedulers against the one in force on DEV's own traffic and\n"
               "                    keep what wins (none: its policy's [Trial] candidates) (root)\n"
               "  trial DEV --stop  End DEV's trial, the incumbent back (root)\n"
               "  metrics           Prometheus text format\n"
               "  doctor            Other writers of the same settings (udev rules, tuned, the GCE\n"
               "                    guest agent, elevator=) and what to do about them\n"
               "  top               A live view, refreshed every tick (-n N: N refreshes, then exit)\n\n"
               "Options may come before or after the command. Exit status: 0 ok, 1 error reply,\n"
               "2 usage, 3 cannot connect, 4 verify found drift or a value the kernel did not\n"
               "keep (or pending changes in observe mode), or status found a failed reload\n"
               "or a rejected policy file, or verify --policy found a setting FILE would change,\n"
               "5 no answer within %d s, 6 verify --policy's FILE has errors (file:line).\n",
               REPLY_TIMEOUT_SEC);
}

/* top is blkpolicyctl's own: status and devices, again every tick. The
 * daemon's commands, and which take a device, are protocol.h's. */
#define COMMAND_TOP _PROTOCOL_COMMAND_MAX

static int command_from_string(const char *name) {
        return strcmp(name, "top") ? protocol_command_from_string(name) : COMMAND_TOP;
}

static DeviceArg command_device_arg(int command) {
        return command == COMMAND_TOP ? DEVICE_ARG_NONE : protocol_commands[command].device;
}

/* What an alerting system keys on: the daemon answered, but not all is as intended. */
static bool needs_attention(ProtocolCommandId cmd, const cJSON *result) {
        switch (cmd) {
        case PROTOCOL_VERIFY:   /* observing with changes pending is never "as intended" */
                if (is_preview(result))
                        return num(result, "changes") > 0 || num(result, "managed") > 0 ||
                               num(result, "unmanaged") > 0;
                return num(result, "drifted") > 0 || num(result, "not_kept") > 0 ||
                       (!strcmp(str(result, "mode"), "observe") &&
                                                      num(result, "pending") > 0);
        case PROTOCOL_DOCTOR:
                return num(result, "affecting") > 0;
        case PROTOCOL_STATUS:
                return cJSON_IsArray(get(result, "reload_errors")) || num(result, "policy_files_rejected") > 0;
        default:
                return false;
        }
}

static void print_result(const Ctl *c, ProtocolCommandId cmd, const char *arg, const cJSON *result) {
        switch (cmd) {
        case PROTOCOL_STATUS: print_status(result); break;
        case PROTOCOL_DEVICES: print_devices(result); break;
        case PROTOCOL_DEVICE: case PROTOCOL_EXPLAIN: print_device(result); break;
        case PROTOCOL_POLICIES: case PROTOCOL_RELOAD: print_policies(result); break;
        case PROTOCOL_VERIFY:
                if (is_preview(result))
                        print_preview(result, str(c->policy, PROTOCOL_KEY_POLICY_NAME));
                else
                        print_verify(result);
                break;
        case PROTOCOL_DOCTOR: print_doctor(result); break;
        case PROTOCOL_TRIAL:
                printf("trial %s: %s\n", arg, c->stop ? "stopped, the incumbent is back" : "begins at the next tick");
                print_trial(get(result, "trial"));
                break;
        case PROTOCOL_METRICS: fputs(str(result, "text"), stdout); break;
        default:
                printf("%s%s%s: done\n", protocol_commands[cmd].name, arg ? " " : "", arg ? arg : "");
        }
}

static int run_command(Ctl *c, ProtocolCommandId cmd, const char *arg) {
        cJSON *reply = NULL;
        const cJSON *result;
        int ret;

        ret = ctl_call(c, cmd, arg, &reply);
        if (ret < 0)
                return call_failed(ret);
        result = get(reply, PROTOCOL_KEY_RESULT);
        ret = cJSON_IsTrue(get(reply, PROTOCOL_KEY_OK)) ? 0 : EXIT_REPLY;
        if (ret == EXIT_REPLY && !strcmp(str(get(reply, PROTOCOL_KEY_ERROR), PROTOCOL_KEY_CODE),
                                         PROTOCOL_ERROR_POLICY_INVALID))
                ret = EXIT_POLICY_INVALID;
        if (ret == 0 && needs_attention(cmd, result))
                ret = EXIT_ATTENTION;
        if (c->json) {
                char *t = cJSON_Print(reply);
                puts(t);
                free(t);
        } else if (ret == EXIT_REPLY || ret == EXIT_POLICY_INVALID) {
                const cJSON *e = get(reply, PROTOCOL_KEY_ERROR), *x;
                /* name what the error is about: "no-such-device: sdx: ..." */
                fprintf(stderr, "%s: %s%s%s\n", str(e, PROTOCOL_KEY_CODE), arg ? arg : "", arg ? ": " : "",
                        str(e, PROTOCOL_KEY_MESSAGE));
                /* as --check-config prints them: file:line, or file for the whole file */
                cJSON_ArrayForEach(x, get(e, "errors"))
                        if (num(x, "line") > 0)
                                fprintf(stderr, "  %s:%.0f: %s\n", str(x, "path"), num(x, "line"), str(x, "message"));
                        else
                                fprintf(stderr, "  %s: %s\n", str(x, "path"), str(x, "message"));
        } else
                print_result(c, cmd, arg, result);
        cJSON_Delete(reply);
        return ret;
}

/* verify --policy FILE: read here, not by the daemon, which may see
 * another mount namespace (a container's), and sent as the request's
 * "policy" with the file's name, which says what it masks. */
static int read_policy(Ctl *c) {
        const char *name = strrchr(c->policy_path, '/');
        /* non-blocking: a FIFO's open would wait for a writer */
        int fd = open(c->policy_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        char *text = NULL, *line;
        struct stat st = {};
        size_t n = 0;
        FILE *f;

        if (fd < 0) {
                fprintf(stderr, "Cannot read %s: %s.\n", c->policy_path, strerror(errno));
                return -EXIT_USAGE;
        }
        /* as the daemon's loader refuses them: a FIFO, a device, a directory */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))) {
                fprintf(stderr, "Cannot read %s: %s.\n", c->policy_path,
                        S_ISREG(st.st_mode) ? strerror(errno) : "not a regular file");
                close(fd);
                return -EXIT_USAGE;
        }
        /* one byte more than allowed tells a file too long from one just so */
        text = malloc(PROTOCOL_POLICY_TEXT_MAX + 2);
        if (text)
                n = fread(text, 1, PROTOCOL_POLICY_TEXT_MAX + 1, f);
        if (!text || ferror(f)) {
                fprintf(stderr, "Cannot read %s: %s.\n", c->policy_path, text ? strerror(errno) : "out of memory");
                free(text);
                fclose(f);
                return -EXIT_USAGE;
        }
        fclose(f);
        if (n > PROTOCOL_POLICY_TEXT_MAX || memchr(text, 0, n)) {
                fprintf(stderr, "%s: %s; a policy file is text of at most %zu bytes.\n", c->policy_path,
                        n > PROTOCOL_POLICY_TEXT_MAX ? "too large" : "has a NUL byte", PROTOCOL_POLICY_TEXT_MAX);
                free(text);
                return -EXIT_USAGE;
        }
        text[n] = 0;
        c->policy = cJSON_CreateObject();
        cJSON_AddStringToObject(c->policy, PROTOCOL_KEY_POLICY_NAME, name ? name + 1 : c->policy_path);
        cJSON_AddStringToObject(c->policy, PROTOCOL_KEY_POLICY_TEXT, text);
        free(text);
        /* escaped, rare bytes take six: the line must still be one request */
        line = request_line(c, PROTOCOL_VERIFY, NULL);
        if (!line || strlen(line) > PROTOCOL_REQUEST_MAX) {
                fprintf(stderr, "%s: too large for one request once escaped (%zu bytes at most).\n",
                        c->policy_path, PROTOCOL_REQUEST_MAX);
                free(line);
                return -EXIT_USAGE;
        }
        free(line);
        return 0;
}

static int parse_count(const char *s, unsigned *ret) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end || *s == '-' || v == 0 || v > 1000000) {
                fprintf(stderr, "-n expects a number of refreshes from 1 to 1000000, not '%s'.\n", s);
                return -EXIT_USAGE;
        }
        *ret = (unsigned) v;
        return 0;
}

int main(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_STOP };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "iterations", required_argument, NULL, 'n' },
                { "policy", required_argument, NULL, 'p' },
                { "stop", no_argument, NULL, ARG_STOP },
                {}
        };
        Ctl c = { .socket_path = CONTROL_SOCKET_PATH, .fd = -1 };
        unsigned n_args, min_args, max_args;
        int o, r, cmd;

        /* GNU order: options anywhere, as in `blkpolicyctl status --json` */
        while ((o = getopt_long(argc, argv, "s:jhn:p:", opts, NULL)) >= 0)
                switch (o) {
                case 's': c.socket_path = optarg; break;
                case 'j': c.json = true; break;
                case 'n':
                        if (parse_count(optarg, &c.iterations) < 0)
                                return EXIT_USAGE;
                        break;
                case 'p': c.policy_path = optarg; break;
                case ARG_STOP: c.stop = true; break;
                case 'h': help(); return 0;
                case ARG_VERSION: printf("blkpolicyctl %s\n", PACKAGE_VERSION); return 0;
                default: return EXIT_USAGE;     /* getopt said what was wrong */
                }
        if (optind >= argc) {
                fprintf(stderr, "No command given. See 'blkpolicyctl --help'.\n");
                return EXIT_USAGE;
        }
        cmd = command_from_string(argv[optind]);
        if (cmd < 0) {
                fprintf(stderr, "Unknown command '%s'. See 'blkpolicyctl --help'.\n", argv[optind]);
                return EXIT_USAGE;
        }
        n_args = (unsigned) (argc - optind - 1);
        min_args = command_device_arg(cmd) == DEVICE_ARG_REQUIRED;
        max_args = command_device_arg(cmd) != DEVICE_ARG_NONE;
        if (cmd == PROTOCOL_TRIAL && n_args > 1 && !c.stop) {
                /* trial DEV CANDIDATE...: the rest are the candidates */
                c.candidates = argv + optind + 2;
                c.n_candidates = n_args - 1;
                max_args = n_args;
        }
        if (n_args < min_args) {
                fprintf(stderr, "'%s' needs a device name.\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (n_args > max_args) {
                fprintf(stderr, "'%s' takes %s; extra argument%s:", argv[optind],
                        max_args ? "one device name" : "no argument", n_args - max_args == 1 ? "" : "s");
                for (int i = optind + 1 + (int) max_args; i < argc; i++)
                        fprintf(stderr, " %s", argv[i]);
                fputc('\n', stderr);
                return EXIT_USAGE;
        }
        if (c.stop && cmd != PROTOCOL_TRIAL) {
                fprintf(stderr, "--stop is for trial: 'blkpolicyctl trial DEV --stop'.\n");
                return EXIT_USAGE;
        }
        if (c.policy_path && cmd != PROTOCOL_VERIFY) {
                fprintf(stderr, "--policy is for verify: 'blkpolicyctl verify --policy FILE'.\n");
                return EXIT_USAGE;
        }
        r = c.policy_path ? read_policy(&c) : 0;
        if (r >= 0)
                r = ctl_connect(&c);
        if (r < 0) {
                cJSON_Delete(c.policy);
                return -r;
        }
        r = cmd == COMMAND_TOP ? top(&c) : run_command(&c, (ProtocolCommandId) cmd, n_args ? argv[optind + 1] : NULL);
        close(c.fd);
        cJSON_Delete(c.policy);
        return r;
}
