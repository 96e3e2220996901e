/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whether another writer's unit runs. An installed GCE guest agent that
 * nobody enabled or started writes nothing, yet it was named as the likely
 * writer of a drift; so a writer with a unit counts only when the unit is
 * enabled (a link in a .wants/ or .requires/ directory, what `systemctl
 * enable` and a package's static dependencies leave) or active (asked of
 * systemd, on the live root only: a fixture root's units are not this
 * machine's). */
#include <dirent.h>
#include <systemd/sd-bus.h>

#include "conflicts-files.h"
#include "conflicts-units.h"

/* systemd's unit search path for the system manager, most important first. */
static const char *const unit_dirs[] = {
        "/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
        "/lib/systemd/system",
};

static const char *const unit_state_names[] = {
        [UNIT_ABSENT] = "not installed",
        [UNIT_MASKED] = "masked",
        [UNIT_INSTALLED] = "installed but neither enabled nor running",
        [UNIT_ENABLED] = "enabled",
        [UNIT_ACTIVE] = "running",
};

const char *unit_state_to_string(UnitState s) {
        return s >= 0 && s < (int) ELEMENTSOF(unit_state_names) ? unit_state_names[s] : NULL;
}

static bool path_join_exists(const char *root, const char *dir, const char *sub, const char *name) {
        _cleanup_free_ char *p = NULL;

        if (asprintf(&p, "%s/%s/%s", dir, sub, name) < 0)
                return false;
        return conflicts_path_exists(root, p);
}

/* <dir>/<anything>.wants/<unit> or .requires/<unit>. */
static bool unit_wanted_in(const char *root, const char *dir, const char *unit) {
        _cleanup_free_ char *full = conflicts_root_path(root, dir);
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        d = full ? opendir(full) : NULL;
        if (!d)
                return false;
        while ((de = readdir(d))) {
                size_t n = strlen(de->d_name);

                if ((n > 6 && streq(de->d_name + n - 6, ".wants")) || (n > 9 && streq(de->d_name + n - 9, ".requires")))
                        if (path_join_exists(root, dir, de->d_name, unit))
                                return true;
        }
        return false;
}

/* ActiveState of unit from systemd's private socket (PID 1 itself: no
 * D-Bus daemon needed, and none exists yet before sysinit.target, when
 * blkpolicyd starts; activating a bus socket from here would wait for a
 * bus that waits for sysinit.target). -ENOENT when the unit is not loaded. */
static int unit_active_state(const char *unit, bool *ret_active) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *state = NULL;
        const char *path;
        int r;

        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
        if (r >= 0)
                r = sd_bus_set_method_call_timeout(bus, 1000000);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "GetUnit", &error, &reply, "s", unit);
        if (r < 0)
                return sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit") ? -ENOENT : r;
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return r;
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Unit",
                                       "ActiveState", &error, &state);
        if (r < 0)
                return r;
        /* reloading and activating units run: they write */
        *ret_active = streq(state, "active") || streq(state, "reloading") || streq(state, "activating");
        return 0;
}

static bool unit_masked(const char *root, const char *unit) {
        static const char *const mask_dirs[] = { "/etc/systemd/system", "/run/systemd/system" };

        for (size_t i = 0; i < ELEMENTSOF(mask_dirs); i++) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/%s", mask_dirs[i], unit) < 0)
                        return false;
                if (conflicts_file_masked(root, p))
                        return true;
        }
        return false;
}

UnitState conflicts_unit_state(const char *root, const char *unit) {
        bool found = false, active = false;

        if (unit_masked(root, unit))
                return UNIT_MASKED;
        for (size_t i = 0; i < ELEMENTSOF(unit_dirs) && !found; i++)
                found = path_join_exists(root, unit_dirs[i], ".", unit);
        if (!found)
                return UNIT_ABSENT;
        /* a unit started by hand is not enabled, and writes all the same */
        if (conflicts_root_is_system(root) && unit_active_state(unit, &active) >= 0 && active)
                return UNIT_ACTIVE;
        for (size_t i = 0; i < ELEMENTSOF(unit_dirs); i++)
                if (unit_wanted_in(root, unit_dirs[i], unit))
                        return UNIT_ENABLED;
        return UNIT_INSTALLED;
}
