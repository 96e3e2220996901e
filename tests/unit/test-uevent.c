/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests.h"
#include "uevent.h"
#include "util.h"

static size_t msg(char *buf, size_t size, const char *const *parts) {
        size_t n = 0;

        for (const char *const *p = parts; *p; p++) {
                size_t l = strlen(*p) + 1;
                if (n + l > size)
                        break;
                memcpy(buf + n, *p, l);
                n += l;
        }
        return n;
}

TEST(kernel_add_of_a_loop_disk) {
        const char *parts[] = { "add@/devices/virtual/block/loop8", "ACTION=add",
                                "DEVPATH=/devices/virtual/block/loop8", "SUBSYSTEM=block", "MAJOR=7",
                                "MINOR=8", "DEVNAME=loop8", "DEVTYPE=disk", "DISKSEQ=42", "SEQNUM=3001", NULL };
        char buf[512];
        size_t n = msg(buf, sizeof(buf), parts);
        Uevent u;

        ASSERT_EQ_INT(uevent_parse(buf, n, &u), 0);
        ASSERT_TRUE(u.action == UEVENT_ADD && u.has_devnum && u.major == 7 && u.minor == 8);
        ASSERT_TRUE(u.diskseq == 42 && u.seqnum == 3001);
        ASSERT_TRUE(uevent_is_disk(&u));
        ASSERT_STREQ(uevent_sysname(&u), "loop8");
}

TEST(change_and_remove) {
        const char *change[] = { "change@/devices/virtual/block/loop0", "ACTION=change",
                                 "DEVPATH=/devices/virtual/block/loop0", "SUBSYSTEM=block",
                                 "MAJOR=7", "MINOR=0", "DEVTYPE=disk", NULL };
        const char *rm[] = { "remove@/devices/virtual/block/loop0", "ACTION=remove",
                             "DEVPATH=/devices/virtual/block/loop0", "SUBSYSTEM=block",
                             "MAJOR=7", "MINOR=0", "DEVTYPE=disk", NULL };
        char buf[512];
        Uevent u;

        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), change), &u) == 0 && u.action == UEVENT_CHANGE);
        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), rm), &u) == 0 && u.action == UEVENT_REMOVE);
}

TEST(partitions_and_other_subsystems_are_not_disks) {
        const char *part[] = { "add@/devices/virtual/block/loop0/loop0p1", "ACTION=add",
                               "DEVPATH=/devices/virtual/block/loop0/loop0p1", "SUBSYSTEM=block",
                               "MAJOR=259", "MINOR=0", "DEVTYPE=partition", NULL };
        const char *bdi[] = { "add@/devices/virtual/bdi/7:8", "ACTION=add", "DEVPATH=/devices/virtual/bdi/7:8",
                              "SUBSYSTEM=bdi", NULL };
        char buf[512];
        Uevent u;

        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), part), &u) == 0 && !uevent_is_disk(&u));
        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), bdi), &u) == 0 && !uevent_is_disk(&u));
}

TEST(malformed_messages) {
        const char *libudev[] = { "libudev", "garbage", NULL };
        const char *noat[] = { "addloop", "SUBSYSTEM=block", NULL };
        const char *nosub[] = { "add@/devices/x", "ACTION=add", NULL };
        const char *badnum[] = { "add@/devices/x", "SUBSYSTEM=block", "MAJOR=7x", NULL };
        const char *novalue[] = { "add@/devices/x", "SUBSYSTEM=block", "JUNK", NULL };
        char buf[512];
        Uevent u;

        ASSERT_EQ_INT(uevent_parse(buf, msg(buf, sizeof(buf), libudev), &u), -EPROTO);
        ASSERT_EQ_INT(uevent_parse(buf, msg(buf, sizeof(buf), noat), &u), -EBADMSG);
        ASSERT_EQ_INT(uevent_parse(buf, msg(buf, sizeof(buf), nosub), &u), -EBADMSG);
        ASSERT_EQ_INT(uevent_parse(buf, msg(buf, sizeof(buf), badnum), &u), -EBADMSG);
        ASSERT_EQ_INT(uevent_parse(buf, msg(buf, sizeof(buf), novalue), &u), -EBADMSG);
        ASSERT_EQ_INT(uevent_parse(buf, 1, &u), -EBADMSG);
}

TEST(unterminated_buffer_is_safe) {
        char buf[] = { 'a', 'd', 'd', '@', '/', 'x', 0, 'S', 'U', 'B', 'S', 'Y', 'S', 'T', 'E', 'M', '=', 'b' };
        Uevent u;

        /* the last byte becomes the terminator: "SUBSYSTEM=" (empty, parsed) */
        ASSERT_EQ_INT(uevent_parse(buf, sizeof(buf), &u), 0);
        ASSERT_TRUE(!uevent_is_disk(&u));
}

/* what came when QEMU's second controller of a shared namespace was
 * removed and rescanned on 6.12: the controller's events, none of its
 * path's (nvme0c1n1), none of the head's */
TEST(nvme_controller_events_stand_for_their_hidden_paths) {
        const char *add[] = { "add@/devices/pci0000:00/0000:00:07.0/nvme/nvme1", "ACTION=add",
                              "DEVPATH=/devices/pci0000:00/0000:00:07.0/nvme/nvme1", "SUBSYSTEM=nvme",
                              "MAJOR=245", "MINOR=1", "DEVNAME=nvme1", "SEQNUM=911", NULL };
        const char *connected[] = { "change@/devices/pci0000:00/0000:00:07.0/nvme/nvme1", "ACTION=change",
                                    "DEVPATH=/devices/pci0000:00/0000:00:07.0/nvme/nvme1", "SUBSYSTEM=nvme",
                                    "NVME_EVENT=connected", "MAJOR=245", "MINOR=1", "DEVNAME=nvme1", NULL };
        const char *rm[] = { "remove@/devices/pci0000:00/0000:00:07.0/nvme/nvme1", "ACTION=remove",
                             "DEVPATH=/devices/pci0000:00/0000:00:07.0/nvme/nvme1", "SUBSYSTEM=nvme",
                             "MAJOR=245", "MINOR=1", "DEVNAME=nvme1", NULL };
        const char *unbind[] = { "unbind@/devices/pci0000:00/0000:00:07.0", "ACTION=unbind",
                                 "DEVPATH=/devices/pci0000:00/0000:00:07.0", "SUBSYSTEM=pci", NULL };
        const char *hwmon[] = { "remove@/devices/pci0000:00/0000:00:07.0/nvme/nvme1/hwmon0", "ACTION=remove",
                                "DEVPATH=/devices/pci0000:00/0000:00:07.0/nvme/nvme1/hwmon0", "SUBSYSTEM=hwmon",
                                NULL };
        char buf[512];
        Uevent u;

        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), add), &u) == 0 && uevent_is_nvme_controller(&u));
        ASSERT_TRUE(!uevent_is_disk(&u));
        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), connected), &u) == 0 && uevent_is_nvme_controller(&u));
        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), rm), &u) == 0 && uevent_is_nvme_controller(&u));
        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), unbind), &u) == 0 && !uevent_is_nvme_controller(&u));
        ASSERT_TRUE(uevent_parse(buf, msg(buf, sizeof(buf), hwmon), &u) == 0 && !uevent_is_nvme_controller(&u));
}
