/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* --restore: every record in the state dir put back, no daemon. */
int restore_records(Manager *m);
