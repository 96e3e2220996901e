/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * library-floor: the resident memory any daemon built on blkpolicyd's
 * libraries pays before it keeps a byte of its own. It does what blkpolicyd
 * does with each library at start-up (sd-event loop with a timer and
 * signals, sd_notify, a udev enumeration of block devices, a kernel uevent
 * socket through libnl, an inih parse, a cJSON document, malloc_trim() after
 * the enumeration), holds nothing, and
 * runs its loop until SIGTERM. bench/scale.py measures its RSS next to
 * blkpolicyd's in the same run.
 *
 *   library-floor [tick-ms]
 */
#include <ini.h>
#include <libudev.h>
#include <linux/netlink.h>
#include <malloc.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include <cjson/cJSON.h>

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        uint64_t interval = *(uint64_t *) userdata;

        (void) sd_event_source_set_time(s, usec + interval);
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

static int on_key(void *user, const char *section, const char *name, const char *value) {
        return 1;
}

static void enumerate_block_devices(void) {
        struct udev *udev = udev_new();
        struct udev_enumerate *e = udev ? udev_enumerate_new(udev) : NULL;
        struct udev_list_entry *entry;

        if (!e)
                return;
        udev_enumerate_add_match_subsystem(e, "block");
        udev_enumerate_scan_devices(e);
        udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e)) {
                struct udev_device *d = udev_device_new_from_syspath(udev, udev_list_entry_get_name(entry));
                (void) udev_device_get_devtype(d);
                udev_device_unref(d);
        }
        udev_enumerate_unref(e);
        udev_unref(udev);
}

int main(int argc, char **argv) {
        uint64_t interval = (argc > 1 ? strtoull(argv[1], NULL, 10) : 1000) * 1000;
        sd_event *event = NULL;
        sigset_t mask;
        char *json;

        (void) ini_parse_string("[Daemon]\ntick_interval_ms = 1000\n", on_key, NULL);
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "floor", "yes");
        json = cJSON_PrintUnformatted(doc);
        cJSON_free(json);
        cJSON_Delete(doc);

        struct nl_sock *nl = nl_socket_alloc();
        if (!nl || nl_connect(nl, NETLINK_KOBJECT_UEVENT) < 0)
                return EXIT_FAILURE;
        enumerate_block_devices();
        (void) malloc_trim(0);          /* as blkpolicyd does after a scan */

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        if (sd_event_default(&event) < 0)
                return EXIT_FAILURE;
        (void) sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
        (void) sd_event_add_time_relative(event, NULL, CLOCK_MONOTONIC, interval, 0, on_tick, &interval);
        (void) sd_notify(false, "READY=1");
        (void) sd_event_loop(event);
        sd_event_unref(event);
        nl_socket_free(nl);
        return EXIT_SUCCESS;
}
