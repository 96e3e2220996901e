/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The intern table types of what devices share (see intern.h). */

#include "intern.h"

/* Facts, without what is the device's own: name, number, diskseq,
 * properties and the stack's names (blank in the copy). */
extern const InternType facts_intern_type;
/* Plans: what decide() wrote and apply filled in, copied in one block. */
extern const InternType plan_intern_type;

/* A device's shared facts and shared plan as one pointer: devices alike
 * have the same of both, so they share the pair too, and each carries 8
 * bytes less. Equal means the same two copies. The pair holds neither:
 * every device that uses a pair holds its facts and its plan itself
 * (device.c), so neither goes while a pair names it. */
typedef struct DeviceKind {
        const struct DeviceFacts *facts;
        const struct Plan *plan;
} DeviceKind;

extern const InternType kind_intern_type;
