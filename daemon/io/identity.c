/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "identity.h"
#include "sysfs.h"
#include "util.h"

/* The first attribute of names with a value, trimmed, as "<prefix>:<value>". */
static int read_first(const SysfsDir *d, const char *const *names, const char *prefix, char *buf, size_t size) {
        for (const char *const *n = names; *n; n++) {
                char v[256];
                const char *s;
                int k;

                if (sysfs_dir_read(d, *n, v, sizeof(v)) < 0)
                        continue;
                s = strstrip(v);
                if (!*s)
                        continue;
                k = snprintf(buf, size, "%s:%s", prefix, s);
                return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
        }
        return -ENOENT;
}

/* "../devices/virtual/block/nullb0" -> "path:virtual/block/nullb0"; a
 * tree whose block/<dev> is a directory, not a link (a fixture's), is
 * "path:block/<dev>". */
static int read_path(const Roots *r, const char *dev, char *buf, size_t size) {
        char path[PATH_MAX], target[PATH_MAX];
        const char *s = target;
        int k = block_path(path, sizeof(path), r, dev, "");

        if (k < 0)
                return k;
        if (sysfs_read_link(path, target, sizeof(target)) < 0)
                (void) snprintf(target, sizeof(target), "block/%s", dev);
        while (startswith(s, "../"))
                s += 3;
        if (startswith(s, "devices/"))
                s += strlen("devices/");
        k = snprintf(buf, size, "path:%s", s);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

int device_identity_read(const Roots *r, const char *dev, char *buf, size_t size) {
        static const char *const wwids[] = { "wwid", "device/wwid", NULL };
        static const char *const serials[] = { "serial", "device/serial", NULL };
        _cleanup_(sysfs_dir_close) SysfsDir d = SYSFS_DIR_NULL;
        int k = block_dir_open(&d, r, dev);

        if (k < 0)
                return k == -ENOENT ? -ENODEV : k;
        if (read_first(&d, wwids, "wwid", buf, size) == 0 || read_first(&d, serials, "serial", buf, size) == 0)
                return 0;
        return read_path(r, dev, buf, size);
}
