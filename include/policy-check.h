/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What --check-config can tell of a valid policy before any disk has it
 * (pure): values the running kernel will not keep, values far outside
 * what any disk uses, and settings the disks it matches can never have.
 * Warnings, not errors: the policy still loads. */

#include <stddef.h>

#include "policy.h"

/* hz: the running kernel's CONFIG_HZ, 0 when not known. Writes up to
 * size bytes of warnings, one per line ("[Section] key = value: ..."),
 * into buf; returns how many there are. */
unsigned policy_check_values(const Policy *p, unsigned hz, char *buf, size_t size);
/* What the kernel shows after a write of ms to a time it keeps in
 * jiffies: msecs_to_jiffies() rounds up, jiffies_to_msecs() back. */
long long jiffies_kept_ms(long long ms, unsigned hz);
