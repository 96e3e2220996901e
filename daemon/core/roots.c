/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "roots.h"
#include "util.h"

bool roots_are_live(const Roots *r) {
        return streq(r->sysfs, "/sys");
}

const char *roots_root(const Roots *r) {
        return r->root ?: (r->sysfs && roots_are_live(r) ? "/" : NULL);
}
