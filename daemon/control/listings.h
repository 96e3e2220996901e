/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* listings.c: the replies that list every disk, written in parts
 * (control.h's ControlStream). */

#include "control.h"

typedef struct Manager Manager;
typedef struct PolicySet PolicySet;

/* `devices`: every disk's report, as `device` gives it. NULL: -ENOMEM. */
ControlStream *listing_devices(Manager *m);
/* `verify`: every managed disk's drift and pending changes, then the
 * mode and the counts. NULL: -ENOMEM. */
ControlStream *listing_verify(Manager *m);
/* `verify` with "policy": what the set would change on every disk, each
 * disk with a difference, then the mode and the counts. Takes set (also
 * on NULL: -ENOMEM), holding it while the listing lasts. */
ControlStream *listing_preview(Manager *m, PolicySet *set);
/* `metrics`: {"content_type": ..., "text": the Prometheus text}, the text
 * made whole and served escaped in parts. NULL: -ENOMEM. */
ControlStream *listing_metrics(Manager *m);
/* The same reply for a text of the caller's, which it takes (and frees
 * on -ENOMEM too). */
ControlStream *listing_metrics_text(char *text);
