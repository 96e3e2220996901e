/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A kernel elevator= on the command line: blk-mq kernels ignore it, so it
 * is reported as a writer that cannot take effect. */
#include "conflicts-cmdline.h"
#include "conflicts-files.h"
#include "tunables.h"
#include "util.h"

int conflicts_scan_cmdline(const char *proc, ConflictSet *s) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        _cleanup_strv_free_ char **words = NULL;
        Conflict *c;
        int r;

        if (asprintf(&path, "%s/cmdline", proc ?: "/proc") < 0)
                return path = NULL, -ENOMEM;
        r = conflicts_read_file(NULL, path, &text);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        r = strv_split(text, &words);
        if (r < 0)
                return r;
        for (char **w = words; w && *w; w++) {
                if (!startswith(*w, "elevator="))
                        continue;
                r = conflict_add(s, CONFLICT_CMDLINE, "/proc/cmdline", 0, TUNABLE_SCHEDULER, *w + strlen("elevator="),
                                 NULL, 0, NULL,
                                 "remove elevator= from the kernel command line (GRUB_CMDLINE_LINUX in "
                                 "/etc/default/grub, then update-grub): blk-mq kernels ignore it since Linux 5.0",
                                 &c);
                if (r < 0)
                        return r;
                c->effective = false;
        }
        return 0;
}
