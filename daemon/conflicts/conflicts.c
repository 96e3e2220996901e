/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The other writers of blkpolicyd's settings, found by reading their
 * files below a root the way each tool reads them, a file per source:
 * udev rules (conflicts-udev.c), tuned profiles (conflicts-tuned.c), the
 * GCE guest agent (conflicts-gce.c), a kernel elevator=
 * (conflicts-cmdline.c), sysfsutils, tmpfiles.d and LVM
 * (conflicts-sysfsd.c, conflicts-tmpfiles.c, conflicts-lvm.c). Here: the
 * writers' names and the scan that runs every source.
 *
 * Nothing here writes anything; paths are reported as the system sees
 * them (without the root). */
#include "conflicts.h"
#include "tunables.h"
#include "util.h"

static const char *const source_names[_CONFLICT_SOURCE_MAX] = {
        [CONFLICT_UDEV] = "udev",
        [CONFLICT_TUNED] = "tuned",
        [CONFLICT_GCE] = "gce-guest-agent",
        [CONFLICT_CMDLINE] = "kernel-cmdline",
        [CONFLICT_SYSFSD] = "sysfsutils",
        [CONFLICT_TMPFILES] = "tmpfiles",
        [CONFLICT_LVM] = "lvm",
};

static int conflict_source_from_string(const char *s) {
        for (int i = 0; i < _CONFLICT_SOURCE_MAX; i++)
                if (streq(source_names[i], s))
                        return i;
        return -EINVAL;
}

int conflict_writer_match(const char *word, ConflictSource source, unsigned tunable) {
        const char *colon = strchr(word, ':');
        char name[32];
        int src, t = -1;

        if (strscpy(name, sizeof(name), word) < 0 && !colon)
                return -EINVAL;
        if (colon && (size_t) (colon - word) < sizeof(name))
                name[colon - word] = 0;
        src = conflict_source_from_string(name);
        if (colon)
                t = tunable_find_attr(colon + 1);
        if (src < 0 || (colon && t < 0))
                return -EINVAL;
        return src == (int) source && (!colon || t == (int) tunable);
}


const char *conflict_source_to_string(ConflictSource s) {
        return s >= 0 && s < _CONFLICT_SOURCE_MAX ? source_names[s] : NULL;
}

int conflicts_scan(const Roots *roots, ConflictSet *ret) {
        const char *root = roots_root(roots);
        ConflictSet s = {};
        int r = 0;

        if (root)
                r = conflicts_scan_udev(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_tuned(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_gce(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_sysfsd(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_tmpfiles(root, &s);
        if (r >= 0 && root)
                r = conflicts_scan_lvm(root, &s);
        if (r >= 0)
                r = conflicts_scan_cmdline(roots->proc, &s);
        if (r < 0) {
                conflict_set_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}
