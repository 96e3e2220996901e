/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Manager: one event loop, one device table. Per-device failures are
 * logged "…, ignoring" and the daemon goes on; only -ENOMEM is fatal. */
#include <malloc.h>
#include <signal.h>
#include <sys/sysmacros.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "applier.h"
#include "apply.h"
#include "classify.h"
#include "conflicts-report.h"
#include "device.h"
#include "log.h"
#include "manager.h"
#include "policy-set.h"
#include "record.h"
#include "report.h"
#include "sampler.h"
#include "shared.h"
#include "state-v1.h"
#include "trial-memory-file.h"
#include "util.h"

/* New kernel capabilities change decisions: take them all again, once.
 * device.c only notes the news (m->ctx.redecide): deciding every device is
 * the manager's, after the event that brought it. */
static int manager_redecide(Manager *m) {
        if (!m->ctx.redecide)
                return 0;
        m->ctx.redecide = false;
        return device_process_all(&m->ctx);
}

static void manager_check_ready(Manager *m);

/* device_refresh(), and a recording names the device. */
static Device *manager_refresh(Manager *m, const char *name, int *error) {
        Device *d = device_refresh(&m->ctx, name, error);

        if (d)
                sampler_record_device(m->sampler, d);
        return d;
}

/* The disks next to d in its stack, both sides: those whose stack facts
 * d's event changes, though the kernel sends them none (block/holder.c
 * links holders/ silently; a path's link in its head's multipath/ too). */
static int stack_neighbours_add(const Manager *m, char ***l, const Device *d) {
        int r = device_stack_neighbours(&m->ctx, d, true, l);

        return r < 0 ? r : device_stack_neighbours(&m->ctx, d, false, l);
}

/* The disks next to an event's disk in its stack, before the event and
 * after, classified and decided again: a member's stack fact is then
 * never older than its map's or array's last event. Partitions among
 * them are not disks, and disks not of --device not the daemon's:
 * skipped. */
static int manager_refresh_neighbours(Manager *m, char *const *names) {
        for (char *const *n = names; n && *n; n++) {
                Device *d;
                int r;

                if (!discover_name_wanted(m->discover, *n))
                        continue;
                d = manager_refresh(m, *n, &r);
                if (r < 0)
                        return r;
                if (d && (r = device_process(&m->ctx, d)) < 0)
                        return r;
        }
        return 0;
}

static int manager_device_event(Manager *m, const char *name, dev_t devnum, UeventAction action) {
        _cleanup_strv_free_ char **neighbours = NULL;
        Device *d;
        int r;

        switch (action) {
        case UEVENT_ADD:
        case UEVENT_CHANGE:
                log_debug("%s: %s event", name, action == UEVENT_ADD ? "add" : "change");
                /* a table reload may leave disks its old table held */
                r = stack_neighbours_add(m, &neighbours, device_find_name(&m->ctx, name));
                if (r < 0)
                        return r;
                d = manager_refresh(m, name, &r);
                if (r < 0)
                        return r;
                if (d && ((r = stack_neighbours_add(m, &neighbours, d)) < 0 || (r = device_process(&m->ctx, d)) < 0))
                        return r;
                r = manager_refresh_neighbours(m, neighbours);
                if (r < 0 || (!d && !neighbours))
                        return r;
                return manager_redecide(m);
        case UEVENT_REMOVE:
                d = device_get(&m->ctx, devnum);
                if (stack_neighbours_add(m, &neighbours, d) < 0)
                        return -ENOMEM;
                if (d && device_removed(&m->ctx, d) < 0)
                        return -ENOMEM;
                r = manager_refresh_neighbours(m, neighbours);
                if (r < 0)
                        return r;
                if (neighbours && (r = manager_redecide(m)) < 0)
                        return r;
                /* its queued pass may have been the last of the first one */
                manager_check_ready(m);
                return 0;
        default:
                return 0;
        }
}

static int manager_scan_devices(Manager *m) {
        _cleanup_strv_free_ char **names = NULL;
        int r;

        r = discover_enumerate(m->discover, &names);
        if (r < 0)
                return log_error_errno(r, "Cannot enumerate block devices: %m");
        DEVICE_FOREACH(d, &m->ctx)
                device_set_seen(d, false);
        /* classify everything first: one device running mq-deadline tells
         * what the kernel can do before any decision is taken */
        for (char **name = names; name && *name; name++) {
                Device *d = manager_refresh(m, *name, &r);
                if (r == -ENOMEM)
                        return log_oom();
                /* listed is there, even if it could not be classified this time */
                if (d || (d = device_find_name(&m->ctx, *name)))
                        device_set_seen(d, true);
        }
        /* not listed: gone, unless its queue is still there */
        DEVICE_FOREACH(d, &m->ctx)
                if (!device_seen(d) && device_removed(&m->ctx, d) < 0)
                        return log_oom();
        r = device_process_all(&m->ctx);
        if (r < 0)
                return r;
        return manager_redecide(m);
}

int manager_scan(Manager *m) {
        int r = manager_scan_devices(m);

        if (m->options->mode == RUN_ONCE)
                applier_drain(m->applier);      /* the report shows the results */
        devices_free_forgotten(&m->ctx);      /* no caller holds a device across a scan */
        major_cache_drop(&m->ctx.majors);       /* a module may load before the next */
        if (r >= 0 && m->fatal < 0)
                r = m->fatal;           /* from a callback the drain ran */

        /* A scan goes through libudev and a classification per device, and
         * frees all of it again; with 1000 devices that leaves about 1 MiB
         * of free heap that glibc keeps for a burst that will not come. */
        (void) malloc_trim(0);
        return r;
}

/* A controller's namespaces are scanned after its add and its change
 * (NVME_EVENT=connected) events: drivers/nvme/host/core.c
 * nvme_start_ctrl() queues the scan work and sends the change, and a path
 * the scan adds then sends no event (6.1, 6.12, 7.3 in QEMU: none came
 * after the change). So the names are listed again 0.1 s after such an
 * event, then after twice as long each time, 12.7 s in all, and a name
 * the daemon does not know yet means a rescan. */
#define NVME_WATCH_FIRST_USEC (100 * 1000ULL)
#define NVME_WATCH_ACCURACY_USEC (10 * 1000ULL)
#define NVME_WATCH_ROUNDS 7U

static int manager_scan_if_new(Manager *m) {
        _cleanup_strv_free_ char **names = NULL;
        int r = discover_enumerate(m->discover, &names);

        if (r < 0)
                return r == -ENOMEM ? r : 0;
        for (char **name = names; name && *name; name++)
                if (!device_find_name(&m->ctx, *name))
                        return manager_scan(m);
        return 0;
}

static int on_nvme_watch(sd_event_source *s, uint64_t usec _unused_, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        int r = manager_scan_if_new(m);

        if (r == -ENOMEM)
                return manager_fatal(m, r);
        if (++m->nvme_watch_round >= NVME_WATCH_ROUNDS)
                return 0;
        r = sd_event_source_set_time_relative(s, NVME_WATCH_FIRST_USEC << m->nvme_watch_round);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Cannot watch for NVMe paths any longer, ignoring: %m");
        return 0;
}

static int manager_watch_nvme(Manager *m) {
        int r;

        m->nvme_watch_round = 0;
        if (!m->nvme_watch)
                return sd_event_add_time_relative(m->event, &m->nvme_watch, CLOCK_MONOTONIC, NVME_WATCH_FIRST_USEC,
                                                  NVME_WATCH_ACCURACY_USEC, on_nvme_watch, m);
        r = sd_event_source_set_time_relative(m->nvme_watch, NVME_WATCH_FIRST_USEC);
        return r < 0 ? r : sd_event_source_set_enabled(m->nvme_watch, SD_EVENT_ONESHOT);
}

/* An NVMe controller's event: a scan now (paths gone with it are
 * forgotten), and the watch above for those its scan adds later. */
static int manager_nvme_event(Manager *m) {
        int r = manager_scan(m);

        if (r == -ENOMEM)
                return r;
        r = manager_watch_nvme(m);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_warning_errno(r, "Cannot watch for NVMe paths, ignoring: %m");
        return 0;
}

/* The uevent monitor is readable: its events, a batch per wakeup, each
 * handled here and below (the loop's source is the manager's, so a
 * uevent calls only down). Lost events, or an NVMe controller's (its
 * hidden paths send none): everything is scanned again. */
static int on_uevents(sd_event_source *s _unused_, int fd _unused_, uint32_t revents _unused_, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        for (unsigned n = discover_batch(m->discover); n > 0; n--) {
                DiscoverEvent ev;
                int r = discover_receive(m->discover, &ev);

                if (r == DISCOVER_NONE)
                        break;
                if (r == DISCOVER_EVENT)
                        r = manager_device_event(m, ev.name, ev.devnum, ev.action);
                else if (r == DISCOVER_LOST && manager_scan(m) == -ENOMEM)
                        r = -ENOMEM;
                else if (r == DISCOVER_RESCAN)
                        r = manager_nvme_event(m);
                if (r < 0)
                        return manager_fatal(m, r);
        }
        return 0;
}

static int manager_watch_uevents(Manager *m) {
        int fd = discover_open_monitor(m->discover, m->config.uevent_buffer_bytes);

        if (fd < 0)
                return fd;
        return sd_event_add_io(m->event, &m->uevent_source, fd, EPOLLIN, on_uevents, m);
}

/* One view at a time (a DeviceView is some 7 KiB): the devices' JSON is
 * what the report holds. */
int manager_print_report(Manager *m) {
        _cleanup_free_ Device **sorted = NULL;
        _cleanup_free_ char *text = NULL;
        cJSON *j, *devices;
        int n;

        n = devices_sorted(&m->ctx, &sorted);
        if (n < 0)
                return log_oom();
        j = report_build(&m->caps, NULL, 0);
        devices = cJSON_GetObjectItemCaseSensitive(j, "devices");
        for (int i = 0; devices && i < n; i++) {
                DeviceFacts facts;
                DeviceView view;
                ReportDevice rd = device_report_input(&m->ctx, sorted[i], &facts, &view);

                /* the facts as this run's pass classified them, the
                 * kernel's scheduler before it among them (a view since
                 * then shows the one in use) */
                rd.facts = device_facts(sorted[i], &facts);
                if (!cJSON_AddItemToArray(devices, report_device(&rd)))
                        devices = NULL;         /* no memory for it */
        }
        text = devices ? cJSON_Print(j) : NULL;
        cJSON_Delete(j);
        if (!text)
                return log_oom();
        puts(text);
        return fflush(stdout) == 0 ? 0 : -errno;
}

/* Puts back every recorded original (restore_on_exit). Returns the count
 * of values left changed (their records stay on disk). */
static int manager_restore_all(Manager *m) {
        /* what runs finishes first: its record is the one to restore from */
        applier_drain(m->applier);
        m->ctx.restore_left = 0;
        DEVICE_FOREACH(d, &m->ctx)
                if (device_restore(&m->ctx, d) < 0)
                        return log_oom();
        applier_drain(m->applier);
        return (int) m->ctx.restore_left;
}

static void manager_check_ready(Manager *m) {
        if (!m->ready_pending || !applier_idle(m->applier))
                return;
        m->ready_pending = false;
        m->first_pass_done = true;
        log_info("Managing %zu block devices%s; watching %s uevents", m->ctx.devices.n_devices,
                 m->options->dry_run ? " (dry run: nothing is written)" :
                 m->config.observe ? " (mode=observe: changes are reported, not made)" : "",
                 discover_monitor_kind(m->discover));
        (void) sd_notifyf(false, "READY=1\nSTATUS=Managing %zu block devices", m->ctx.devices.n_devices);
        /* the first pass is done: which disks blkpolicyd manages is known.
         * After READY=1: the scan asks systemd whether tuned and the GCE
         * agent run (up to 1 s a question), and boot waits for READY=1 */
        conflicts_report_log(&m->ctx);
}

/* Resuming one device of "all paused" (pause, or restore, of all): the
 * others stay paused, each on its own, and that one is managed again. A
 * disk that appears later is managed, as after any resume: what was
 * asked for all is over. */
static void manager_split_pause_all(Manager *m, Device *except) {
        m->ctx.paused_all = false;
        DEVICE_FOREACH(x, &m->ctx)
                if (x != except)
                        device_pause(x);
        log_info("Pause of all devices ends for %s: the other %zu stay paused, each on its own",
                 device_name(except), m->ctx.devices.n_devices - 1);
}

int manager_pause(Manager *m, Device *d, bool pause) {
        _cleanup_free_ Device **sorted = NULL;
        int n;

        if (d && !pause && m->ctx.paused_all)
                manager_split_pause_all(m, d);
        if (!d) {
                m->ctx.paused_all = pause;
                DEVICE_FOREACH(x, &m->ctx)
                        if (!pause)
                                device_clear_hold(x);
        } else if (pause)
                device_pause(d);
        else
                device_clear_hold(d);
        log_info("%s %s", pause ? "Paused" : "Resumed", d ? device_name(d) : "all devices");
        if (pause)
                return 0;
        /* resume means manage it again: what someone else changed meanwhile
         * is written over (the originals recorded before stay) */
        if (d)
                return device_process_again(&m->ctx, d);
        n = devices_sorted(&m->ctx, &sorted);
        for (int i = 0; i < n; i++) {
                int r = device_process_again(&m->ctx, sorted[i]);

                if (r < 0)
                        return r;
        }
        return n < 0 ? n : 0;
}

/* --log-level wins over the config's log_level=, at start and at every
 * reload; without either, the default. */
static void manager_set_log_level(const Manager *m) {
        if (m->options->log_level >= 0)
                log_set_max_level(m->options->log_level);
        else
                log_set_max_level(m->config.log_level >= 0 ? m->config.log_level : LOG_INFO);
}

/* The same lines at start and at reload: every error as file:line, for a
 * rejected file the file that stays in force instead, and the count of
 * files (not errors) rejected. */
static void log_policy_errors(const PolicySet *set) {
        char summary[128];

        for (size_t i = 0; i < set->errors.n_items; i++) {
                const PolicyError *e = &set->errors.items[i];
                const char *name = strrchr(e->path, '/');
                const Policy *p;

                if (e->line > 0)
                        log_error("%s:%u: %s", e->path, e->line, e->message);
                else
                        log_error("%s: %s", e->path, e->message);
                if (i + 1 < set->errors.n_items && streq(set->errors.items[i + 1].path, e->path))
                        continue;       /* once per file, after its last error */
                p = policy_set_find(set, name ? name + 1 : e->path);
                if (p && !streq(p->path, e->path))
                        log_warning("%s is rejected: %s stays in force", e->path, p->path);
        }
        if (set->errors.n_items > 0 && policy_set_summary(set, summary, sizeof(summary)) >= 0)
                log_warning("Policies: %s; the rejected files count as absent", summary);
}

/* enforce -> observe: blkpolicyd claims nothing any more, so an admin's
 * change is no override of anything; what it left on the disks goes back
 * in the passes that follow (reconcile keeps the admin's values). */
static void manager_end_claims(Manager *m) {
        DEVICE_FOREACH(d, &m->ctx)
                device_end_override(d);
}

/* The policies a config asks for: --policy-dir's as given (no shipped
 * set), else the config's dirs with the shipped set it names for the
 * vendor dir, below --root. -EINVAL: the set named is not shipped, logged
 * at its file:line (*error says why, for a reload's reply); -ENOMEM. */
static int manager_choose_policies(const Manager *m, const Config *c, ShippedSets *sets, PolicySet **ret) {
        const char *root = m->options->roots.root;
        char have[256];
        int r;

        *sets = (ShippedSets) {};
        if (m->options->policy_dirs)
                return policy_set_load(m->options->policy_dirs, ret);
        r = shipped_sets_choose(root, c->policy_set, sets);
        if (r == -ENOENT) {
                shipped_sets_list(root, have, sizeof(have));
                log_error("%s:%u: [Daemon] policy_set = %u: no such shipped policy set (shipped: %s)",
                          c->policy_set_path, c->policy_set_line, c->policy_set, have);
                return -EINVAL;         /* spelled out: the caller reads *ret unless this is < 0 */
        }
        if (r < 0)
                return r;
        r = shipped_sets_policy_dirs(sets, root, c->policy_dirs);
        if (r >= 0)
                r = policy_set_load(sets->policy_dirs, ret);
        if (r < 0)
                shipped_sets_done(sets);
        return r;
}

/* Once a start and once a reload, while an older set runs: the admin
 * opted in to that one, or the package upgrade did not, and a newer one
 * is there to read. */
static void log_policy_set(const Manager *m, const ShippedSets *s) {
        char differs[512] = "", message[1024];
        size_t k = 0;

        if (!shipped_sets_behind(s))
                return;
        for (char **n = s->differs; n && *n; n++) {
                int w = snprintf(differs + k, sizeof(differs) - k, "%s%s", k ? " " : "", *n);

                if (w < 0 || (size_t) w >= sizeof(differs) - k) {
                        differs[k] = 0;         /* whole names only; status lists them all */
                        break;
                }
                k += (size_t) w;
        }
        snprintf(message, sizeof(message), "Shipped policy set %u in use, set %u is installed and newer (it changes: "
                 "%s); to run it: policy_set = %u in %s.d/00-policy-set.conf, then systemctl reload blkpolicyd",
                 s->in_use, s->newest, differs[0] ? differs : "no file", s->newest, m->options->config_path);
        log_policy_set_event(LOG_NOTICE, &(LogPolicySetEvent) { s->in_use, s->newest, differs, message });
}

struct ReloadWaiter {
        ReloadWaiter *next;
        ManagerReloadDone done;
        void *userdata;
};

/* A config the reload refuses: nothing changes, and status shows why
 * (path:line, the line 0 for the whole file). */
static int reload_refuse(Manager *m, const char *path, unsigned line, const char *message, cJSON **errors) {
        PolicyError e = { .path = (char *) path, .line = line, .message = (char *) message };

        *errors = cJSON_CreateArray();
        cJSON_AddItemToArray(*errors, report_policy_error(&e));
        cJSON_Delete(m->reload_errors);        /* status shows why the running config stays */
        m->reload_errors = cJSON_Duplicate(*errors, true);
        m->reload_failures++;
        return -EINVAL;
}

/* The reload's part on the loop: the files read, every device decided
 * again; what that writes goes on in the applier. -EINVAL: the config
 * has errors (*errors), and nothing changed. */
static int reload_decide(Manager *m, cJSON **errors) {
        _cleanup_(config_done) Config c = {};
        _cleanup_(shipped_sets_done) ShippedSets sets = {};
        PolicySet *set = NULL, *old;
        Config swap;
        int r, k;

        (void) sd_notify(false, "RELOADING=1\nSTATUS=Reloading");
        r = config_init_defaults(&c);
        if (r < 0)
                return r;
        r = config_load(&c, m->options->config_path, m->options->config_required);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return reload_refuse(m, m->options->config_path, 0, "invalid configuration (see the log)", errors);
        r = manager_choose_policies(m, &c, &sets, &set);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                char message[96];

                snprintf(message, sizeof(message), "[Daemon] policy_set = %u: no such shipped policy set (see the log)",
                         c.policy_set);
                return reload_refuse(m, c.policy_set_path, c.policy_set_line, message, errors);
        }
        /* as at start: a rejected file is skipped (listed in status), the
         * others and the files it would have masked take effect */
        log_policy_errors(set);
        m->reload_errors = (cJSON_Delete(m->reload_errors), NULL);
        if (!m->options->state_dir && !streq(c.state_dir, m->config.state_dir))
                log_warning("state_dir=%s takes effect at the next start; the records stay in %s until then",
                            c.state_dir, m->state.path ?: m->config.state_dir);
        old = m->policies;
        m->policies = set;
        shipped_sets_done(&m->sets);
        m->sets = sets;
        sets = (ShippedSets) {};
        log_policy_set(m, &m->sets);
        swap = m->config;
        m->config = c;
        c = swap;
        manager_set_log_level(m);
        if (!swap.observe && m->config.observe)
                manager_end_claims(m);
        if (m->front && m->front->reloaded)
                m->front->reloaded(m, &swap, m->front->userdata);      /* the metrics textfile may move */
        /* every plan decided again from the new set; apply writes only what
         * the new decisions change. A device whose pass is running is
         * decided when it is back: from what that pass wrote. */
        r = strv_equal(old->property_keys, set->property_keys) ? 0 : device_refresh_properties(&m->ctx);
        k = device_process_all(&m->ctx);
        r = r < 0 ? r : k;
        if (!swap.observe && m->config.observe)
                log_notice("mode=observe: putting back what blkpolicyd changed; changes are reported, not made");
        /* the manager lets go of the old set: a plan not decided again (the
         * deciding failed) still holds it, and so does a pass in flight */
        policy_set_unref(old);
        return r;
}

static int reload_start(Manager *m);

static ReloadWaiter *reload_waiters_free(ReloadWaiter *w) {
        while (w) {
                ReloadWaiter *next = w->next;

                free(w);
                w = next;
        }
        return NULL;
}

/* The stop: nobody gets a reply any more. */
static void reload_cancel(Manager *m) {
        ReloadWaiter *all[2] = { m->reload_applying, m->reload_queued };

        m->reload_applying = m->reload_queued = NULL;
        m->reloading = false;
        m->reload_result_errors = (cJSON_Delete(m->reload_result_errors), NULL);
        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                for (ReloadWaiter *w = all[i]; w; w = w->next)
                        if (w->done)
                                w->done(m, -ECANCELED, NULL, w->userdata);
                reload_waiters_free(all[i]);
        }
}

/* What the reload wrote is applied: READY=1, then the replies. A reload
 * asked meanwhile starts after them (m->reloading until then: those the
 * replies' clients ask next are queued too). */
static void on_reload_applied(void *userdata, int r) {
        Manager *m = ASSERT_PTR(userdata);
        ReloadWaiter *done = m->reload_applying;
        cJSON *errors = m->reload_result_errors;
        char summary[128];

        if (r < 0) {
                reload_cancel(m);
                return;
        }
        m->reload_applying = NULL;
        m->reload_result_errors = NULL;
        r = m->reload_result;
        if (r >= 0 && policy_set_summary(m->policies, summary, sizeof(summary)) >= 0)
                log_info("Reloaded: %s", summary);
        if (r >= 0)
                conflicts_report_log(&m->ctx);
        (void) sd_notifyf(false, "READY=1\nSTATUS=Managing %zu block devices", m->ctx.devices.n_devices);
        for (ReloadWaiter *w = done; w; w = w->next)
                if (w->done)
                        w->done(m, r, errors, w->userdata);
        reload_waiters_free(done);
        cJSON_Delete(errors);
        m->reloading = false;
        if (!m->reload_queued)
                return;
        m->reload_applying = m->reload_queued;
        m->reload_queued = NULL;
        r = reload_start(m);
        if (r < 0)
                manager_fatal(m, r);
}

static int reload_start(Manager *m) {
        int r;

        m->reloading = true;
        r = reload_decide(m, &m->reload_result_errors);
        if (r == -ENOMEM)
                return r;
        m->reload_result = r;
        return applier_wait(m->applier, on_reload_applied, m);
}

int manager_reload(Manager *m, ManagerReloadDone done, void *userdata) {
        ReloadWaiter *w = calloc(1, sizeof(ReloadWaiter)), **tail = &m->reload_queued;
        int r;

        if (!w)
                return -ENOMEM;
        *w = (ReloadWaiter) { .done = done, .userdata = userdata };
        if (m->reloading) {
                while (*tail)
                        tail = &(*tail)->next;
                *tail = w;
                return 0;
        }
        m->reload_applying = w;
        r = reload_start(m);
        if (r < 0) {
                /* -ENOMEM, fatal: done is not called, and no reload is left pending */
                m->reload_applying = reload_waiters_free(m->reload_applying);
                m->reloading = false;
        }
        return r;
}

/* The stop: the replies a reload owes go nowhere (the loop is over). */
static void manager_cancel_waits(Manager *m) {
        applier_cancel_waiters(m->applier);
        reload_cancel(m);
}

static int on_sighup(sd_event_source *s _unused_, const struct signalfd_siginfo *si _unused_, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        /* the errors are logged as file:line; nobody waits for a reply */
        if (manager_reload(m, NULL, NULL) == -ENOMEM)
                return manager_fatal(m, -ENOMEM);
        return 0;
}

static int load_policies(Manager *m) {
        int r;

        r = manager_choose_policies(m, &m->config, &m->sets, &m->policies);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return r;
        log_policy_errors(m->policies);
        /* where the disks are decided: not for --restore or --replay,
         * which the set does not change */
        if (m->options->mode != RUN_RESTORE && m->options->mode != RUN_REPLAY)
                log_policy_set(m, &m->sets);
        return 0;
}

/* Opened once, for the daemon's life: a state_dir= changed by a reload
 * takes effect at the next start, so no record is ever left behind in a
 * directory the daemon no longer reads. */
int manager_open_state_dir(Manager *m) {
        const char *path = m->options->state_dir ?: m->config.state_dir;
        int r;

        r = state_dir_open(path, manager_restores(m), &m->state);
        if (r == -ENOENT && m->options->dry_run)
                return 0;       /* nothing recorded, and a dry run records nothing */
        if (r == -EPERM)
                return log_error_errno(r, "%s (and its parent) must belong to the daemon's user or root and be "
                                          "writable by nobody else: a state record there is written to sysfs "
                                          "at stop", path);
        if (r == -EBUSY)
                return log_error_errno(r, "Another blkpolicyd (a daemon, --once or --restore) is using %s", path);
        if (r < 0)
                return log_error_errno(r, "Cannot open the state directory %s: %m", path);
        /* before any record is read: what an older version left goes back too */
        return manager_restores(m) ? state_import_v1(&m->state, &m->roots, &m->ctx.v1_pending) : 0;
}

/* Elevator switches on several disks at once hit a double free at boot
 * on 6.16.7, 6.16.9 and 6.17.0 (reported on linux-block 2025-09-28, fixed
 * for 6.18 by ba28afbd9eff): one at a time there, unless configured. */
static unsigned apply_parallelism(const Manager *m) {
        static const unsigned affected[3] = { 6, 16, 0 }, fixed[3] = { 6, 18, 0 };

        if (m->config.apply_parallelism)
                return m->config.apply_parallelism;
        if (kernel_version_compare(m->caps.version, affected) >= 0 &&
            kernel_version_compare(m->caps.version, fixed) < 0) {
                log_notice("Kernel %s: scheduler writes one at a time (concurrent elevator switches are unsafe "
                           "before 6.18; apply_parallelism= overrides)", m->caps.release);
                return 1;
        }
        return APPLY_PARALLELISM;
}

/* The applier's callback: device.c takes its device's pass back, the
 * sampler the flip the pass ends; what a pass may start for every device
 * (redecide, READY=1) is the manager's. */
static void on_apply_done(ApplyJob *j, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        dev_t devnum = j->devnum;
        double ms = (double) (j->end_usec - j->start_usec) / 1000.0;
        int r = device_apply_done(&m->ctx, j);

        if (r >= 0)
                sampler_pass_back(m->sampler, devnum, r > 0, ms);
        if (r > 0)
                r = manager_redecide(m);
        if (r < 0)
                manager_fatal(m, r);
        /* also after the pass of a disk removed meanwhile: it may have
         * been the last of the first pass, and READY=1 must not wait for
         * an event that may never come */
        manager_check_ready(m);
}

/* After each dispatch: the devices it forgot are freed here, when no
 * callback holds one any more. */
static int on_post(sd_event_source *s _unused_, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        devices_free_forgotten(&m->ctx);
        /* the next batch's disks may be of a module loaded meanwhile */
        major_cache_drop(&m->ctx.majors);
#if ENABLE_FAULT_INJECTION
        discover_fake_settle(m->discover, applier_idle(m->applier));
#endif
        return 0;
}

static void on_device_fatal(void *userdata, int r) {
        manager_fatal(userdata, r);
}

/* What the devices' files see of the manager: pointers into it, which
 * stay valid for its life (the config and the policies are replaced in
 * place at a reload). The applier and the loop come later. */
static void manager_init_context(Manager *m) {
        m->ctx = (DeviceContext) {
                .roots = &m->roots,
                .config = &m->config,
                .policies = &m->policies,
                .caps = &m->caps,
                .state = &m->state,
                .dry_run = m->options->dry_run,
                .once = m->options->mode == RUN_ONCE,
                .fatal = on_device_fatal,
                .userdata = m,
                .devices = DEVICE_TABLE_INIT(device_devnum),
                .facts.type = &facts_intern_type,
                .plans.type = &plan_intern_type,
                .kinds.type = &kind_intern_type,
        };
}

/* The trials' remembered verdicts, where a daemon runs trials: a file
 * that cannot be read costs trials, not the start. */
static int manager_trial_memory(Manager *m) {
        const char *error = NULL;
        int r;

        if (m->options->trial_memory &&
            config_set_trial_memory(&m->config, m->options->trial_memory, &error) < 0)
                return error ? log_error_errno(EINVAL, "--trial-memory=%s: %s", m->options->trial_memory, error)
                             : log_oom();
        if (m->options->mode != RUN_DAEMON || !m->config.trial_memory)
                return 0;
        r = trial_memory_load(m->config.trial_memory, &m->ctx.trial_memory);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                log_warning_errno(r, "Cannot read the trials' verdicts in %s, ignoring (trials run again): %m",
                                  m->config.trial_memory);
        else if (m->ctx.trial_memory.n > 0)
                log_info("%zu trial verdict(s) remembered in %s", m->ctx.trial_memory.n, m->config.trial_memory);
        return 0;
}

static void manager_freep(Manager **m) {
        manager_free(*m);
}

int manager_new(const Options *o, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = calloc(1, sizeof(Manager));
        int r;

        if (!m)
                return log_oom();
        m->options = o;
        m->roots = o->roots;
        m->state = STATE_DIR_NULL;
        manager_init_context(m);
        r = config_init_defaults(&m->config);
        if (r < 0)
                return log_oom();
        r = config_load(&m->config, o->config_path, o->config_required);
        if (r < 0)
                return r;
        manager_set_log_level(m);
        r = load_policies(m);
        if (r < 0)
                return r;
        r = manager_trial_memory(m);
        if (r < 0)
                return r;
        r = kernel_caps_read(&m->roots, &m->caps);
        if (r < 0)
                log_warning_errno(r, "Cannot read the kernel release under %s, version conditions see 0.0.0: %m",
                                  m->roots.proc);
        r = sampler_new(&m->ctx, &m->sampler);
        if (r < 0)
                return log_oom();
        r = discover_new(&m->roots, o->device_globs, &m->discover);
        if (r < 0)
                return log_oom();
        r = applier_new(&m->roots, &m->state, apply_parallelism(m), on_apply_done, m, &m->applier);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the applier: %m");
        m->ctx.applier = m->applier;
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        if (m->applier)
                manager_cancel_waits(m);
        applier_free(m->applier);      /* joins its threads before the devices go */
        cJSON_Delete(m->reload_errors);
        DEVICE_FOREACH(d, &m->ctx)
                device_free(&m->ctx, d);
        devices_free_forgotten(&m->ctx);
        major_cache_drop(&m->ctx.majors);
        device_table_done(&m->ctx.devices);
        intern_table_done(&m->ctx.kinds);
        intern_table_done(&m->ctx.plans);
        intern_table_done(&m->ctx.facts);
        sampler_free(m->sampler);
        free(m->ctx.media);
        sd_event_source_disable_unref(m->nvme_watch);
        sd_event_source_disable_unref(m->uevent_source);       /* before discover closes its fd */
        discover_free(m->discover);
        policy_set_unref(m->policies);
        shipped_sets_done(&m->sets);
        config_done(&m->config);
        state_dir_close(&m->state);
        conflict_set_done(&m->ctx.conflicts);
        strv_free(m->ctx.v1_pending);
        trial_memory_done(&m->ctx.trial_memory);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

static int manager_setup_loop(Manager *m) {
        sigset_t mask;
        int r;

        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "Cannot create the event loop: %m");
        m->ctx.event = m->event;
        /* WatchdogSec= in the unit: sd-event pings from the loop itself, so a
         * stuck loop (not just a live process) is what systemd sees */
        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Cannot set up the watchdog, ignoring: %m");
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "sigprocmask: %m");
        r = sd_event_add_signal(m->event, NULL, SIGTERM, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGHUP, on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Cannot watch signals: %m");
        r = sd_event_add_post(m->event, NULL, on_post, m);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the event loop: %m");
        r = applier_attach_event(m->applier, m->event);
        if (r < 0)
                return log_error_errno(r, "Cannot watch the applier: %m");
        /* monitor before the scan: a device added during the scan is not lost */
        r = manager_watch_uevents(m);
        if (r < 0)
                return log_error_errno(r, "Cannot watch for block devices: %m");
        /* the front (the control socket) before the scan, too */
        return m->front && m->front->start ? m->front->start(m, m->front->userdata) : 0;
}

static int manager_run_loop(Manager *m) {
        int r;

        m->start_usec = clock_usec(CLOCK_MONOTONIC);
        m->start_realtime_usec = clock_usec(CLOCK_REALTIME);
        r = manager_setup_loop(m);
        if (r < 0)
                return r;
        if (m->options->record_path) {
                Recorder *rec;

                r = record_open(m->options->record_path, &m->caps, m->config.tick_interval_ms, &rec);
                if (r < 0)
                        return log_error_errno(r, "Cannot open %s for recording: %m", m->options->record_path);
                sampler_set_recorder(m->sampler, rec);
        }
        r = manager_scan(m);
        if (r < 0)
                return r;
        r = sampler_start(m->sampler, m->start_usec);
        if (r < 0)
                return log_error_errno(r, "Cannot start the sampling timer: %m");
        /* READY=1 once the first pass is done, from the loop: a storm of
         * disks at boot keeps the watchdog fed and the socket answered */
        m->ready_pending = true;
        manager_check_ready(m);
        r = sd_event_loop(m->event);
        m->ctx.stopping = true;
        (void) sd_notify(false, "STOPPING=1");
        /* Before the drains below, which hand jobs back: no reload is
         * finished (no READY=1 after STOPPING=1) and no request answered
         * now. The drains block the loop, which is over: systemd stops
         * the watchdog at STOPPING=1, and TimeoutStopSec= bounds a write
         * the kernel holds (then SIGKILL; the records stay for the next
         * start or --restore). */
        manager_cancel_waits(m);
        if (m->handover) {
                applier_drain(m->applier);
                log_info("Handing over: %zu devices keep their settings; the next blkpolicyd takes them over "
                         "from %s/devices", m->ctx.devices.n_devices, m->state.path ?: "the state dir");
        } else if (m->config.restore_on_exit && manager_restores(m) && manager_restore_all(m) > 0 && r >= 0)
                r = -EIO;       /* something stays changed: the exit status says so */
        return r;
}

int manager_run(Manager *m, const ManagerFront *front) {
        int r;

        m->front = front;
        r = manager_run_loop(m);
        m->front = NULL;        /* what it told goes away after the run */
        return r;
}
