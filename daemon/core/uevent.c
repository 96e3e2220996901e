/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure parser of raw kernel uevents: used by discover.c when no udevd runs,
 * and by the fuzzer. */
#include <inttypes.h>

#include "uevent.h"
#include "util.h"

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        if (*s < '0' || *s > '9')
                return -EBADMSG;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (*end || errno)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static int parse_u32(const char *s, unsigned *ret) {
        uint64_t v;

        if (parse_u64(s, &v) < 0 || v > UINT32_MAX)
                return -EBADMSG;
        *ret = (unsigned) v;
        return 0;
}

UeventAction uevent_action_from_string(const char *s) {
        if (!s)
                return UEVENT_OTHER;
        if (streq(s, "add"))
                return UEVENT_ADD;
        if (streq(s, "change"))
                return UEVENT_CHANGE;
        if (streq(s, "remove"))
                return UEVENT_REMOVE;
        return UEVENT_OTHER;
}

static int uevent_take(Uevent *u, const char *kv, bool *have_major, bool *have_minor) {
        const char *v = strchr(kv, '=');

        if (!v)
                return -EBADMSG;
        v++;
        if (startswith(kv, "ACTION="))
                u->action = uevent_action_from_string(v);
        else if (startswith(kv, "DEVPATH="))
                u->devpath = v;
        else if (startswith(kv, "SUBSYSTEM="))
                u->subsystem = v;
        else if (startswith(kv, "DEVNAME="))
                u->devname = v;
        else if (startswith(kv, "DEVTYPE="))
                u->devtype = v;
        else if (startswith(kv, "MAJOR=")) {
                *have_major = true;
                return parse_u32(v, &u->major);
        } else if (startswith(kv, "MINOR=")) {
                *have_minor = true;
                return parse_u32(v, &u->minor);
        } else if (startswith(kv, "DISKSEQ="))
                return parse_u64(v, &u->diskseq);
        else if (startswith(kv, "SEQNUM="))
                return parse_u64(v, &u->seqnum);
        return 0;
}

int uevent_parse(char *buf, size_t len, Uevent *ret) {
        Uevent u = { .action = UEVENT_OTHER };
        bool have_major = false, have_minor = false;
        size_t pos;
        char *at;

        if (len < 2)
                return -EBADMSG;
        buf[len - 1] = 0;
        if (streq(buf, "libudev"))
                return -EPROTO;
        at = strchr(buf, '@');
        if (!at || at == buf)
                return -EBADMSG;
        u.devpath = at + 1;
        for (pos = strlen(buf) + 1; pos < len; pos += strlen(buf + pos) + 1) {
                if (!buf[pos])
                        continue;
                if (uevent_take(&u, buf + pos, &have_major, &have_minor) < 0)
                        return -EBADMSG;
        }
        if (!u.subsystem || !u.devpath || !*u.devpath)
                return -EBADMSG;
        u.has_devnum = have_major && have_minor;
        *ret = u;
        return 0;
}

bool uevent_is_disk(const Uevent *u) {
        return streq(u->subsystem, "block") && u->devtype && streq(u->devtype, "disk") &&
               *uevent_sysname(u);
}

bool uevent_is_nvme_controller(const Uevent *u) {
        return streq(u->subsystem, "nvme") && u->action != UEVENT_OTHER && *uevent_sysname(u);
}

const char *uevent_sysname(const Uevent *u) {
        const char *slash = strrchr(u->devpath, '/');
        return slash ? slash + 1 : u->devpath;
}
