/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Whether another writer's unit runs: a unit only installed writes nothing
 * until someone starts it. Enabled: a link of its name in a .wants/ or
 * .requires/ directory of /etc, /run, /usr/lib or /lib systemd/system;
 * masked: its name linked to /dev/null in /etc or /run. Active is asked of
 * systemd (its private socket) and only on the live root: on a fixture
 * root, or before systemd answers, enabled is all that is known. */

#include <stdbool.h>

typedef enum UnitState {
        UNIT_ABSENT,            /* no unit file */
        UNIT_MASKED,
        UNIT_INSTALLED,         /* neither enabled nor active */
        UNIT_ENABLED,
        UNIT_ACTIVE,
} UnitState;

UnitState conflicts_unit_state(const char *root, const char *unit);
/* "installed, neither enabled nor running", ... for advice and logs. */
const char *unit_state_to_string(UnitState s);

/* Enabled or active: its program writes. */
static inline bool unit_state_runs(UnitState s) {
        return s >= UNIT_ENABLED;
}
