/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The intern table types of what devices share (see intern.h). */

#include "intern.h"

/* Facts, without what is the device's own: name, number, diskseq and
 * properties (blank in the copy). */
extern const InternType facts_intern_type;
/* Plans: what decide() wrote and apply filled in, copied in one block. */
extern const InternType plan_intern_type;
