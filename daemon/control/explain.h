/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* explain.c: what a device looks like to the control socket. */

#include "manager.h"

/* The report of --once, plus pause and override. */
cJSON *explain_device_report(Manager *m, Device *d);
/* That, plus every policy considered, the conflicts and the flip history. */
cJSON *explain_device(Manager *m, Device *d);
