/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Names and small pure helpers of the Facts contract. */
#include "facts.h"
#include "util.h"

static const char *const class_names[_CLASS_MAX] = {
        [CLASS_SINGLE_QUEUE] = "single-queue",
        [CLASS_MULTI_QUEUE] = "multi-queue",
        [CLASS_UBLK] = "ublk",
        [CLASS_VIRTIO] = "virtio",
        [CLASS_NVME] = "nvme",
        [CLASS_SCSI] = "scsi",
        [CLASS_MMC] = "mmc",
        [CLASS_LOOP] = "loop",
        [CLASS_NULL_BLK] = "null_blk",
        [CLASS_NBD] = "nbd",
        [CLASS_ROTATIONAL] = "rotational",
        [CLASS_ZONED] = "zoned",
        [CLASS_BIO_BASED] = "bio-based",
};

static const char *const zoned_names[_ZONED_MAX] = {
        [ZONED_NONE] = "none",
        [ZONED_HOST_AWARE] = "host-aware",
        [ZONED_HOST_MANAGED] = "host-managed",
};

const char *class_to_string(DeviceClass c) {
        return c < _CLASS_MAX ? class_names[c] : NULL;
}

int class_from_string(const char *s) {
        for (int i = 0; i < _CLASS_MAX; i++)
                if (streq(class_names[i], s))
                        return i;
        return -EINVAL;
}

const char *zoned_to_string(ZonedModel z) {
        return z < _ZONED_MAX ? zoned_names[z] : NULL;
}

int zoned_from_string(const char *s) {
        for (int i = 0; i < _ZONED_MAX; i++)
                if (streq(zoned_names[i], s))
                        return i;
        return -EINVAL;
}

void device_facts_done(DeviceFacts *f) {
        if (!f)
                return;
        f->properties = strv_free(f->properties);
}

bool device_facts_has_scheduler(const DeviceFacts *f, const char *name) {
        for (unsigned i = 0; i < f->n_schedulers; i++)
                if (streq(f->schedulers[i], name))
                        return true;
        return false;
}

/* "6.12.38+deb12-amd64" → {6, 12, 38}; "6.10" → {6, 10, 0}. */
int kernel_version_parse(const char *release, unsigned version[3]) {
        const char *p = release;

        for (int i = 0; i < 3; i++) {
                char *end;
                unsigned long v;

                version[i] = 0;
                if (i > 0) {
                        if (*p != '.')
                                return i >= 2 ? 0 : -EINVAL;
                        p++;
                }
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = strtoul(p, &end, 10);
                if (v > 1000000)
                        return -ERANGE;
                version[i] = (unsigned) v;
                p = end;
        }
        return 0;
}

int kernel_version_compare(const unsigned a[3], const unsigned b[3]) {
        for (int i = 0; i < 3; i++)
                if (a[i] != b[i])
                        return a[i] < b[i] ? -1 : 1;
        return 0;
}
