/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* udev_db_properties() under a fixture root, what its callers count on:
 * the named keys in the file's order, 0 with none when the disk has none
 * of them, -ENOENT when there is no entry or no root. The live root's
 * libudev path needs udevd and the machine's disks: not here. */
#include <stdlib.h>
#include <sys/stat.h>

#include "sysfs.h"
#include "tests.h"
#include "util.h"

static void write_entry(const char *root, const char *name, const char *text) {
        char path[PATH_MAX];
        FILE *f;

        snprintf(path, sizeof(path), "%s/run", root);
        ASSERT_EQ_INT(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/run/udev", root);
        ASSERT_EQ_INT(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/run/udev/data", root);
        ASSERT_EQ_INT(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/run/udev/data/%s", root, name);
        f = fopen(path, "we");
        ASSERT_TRUE(f != NULL);
        fputs(text, f);
        ASSERT_EQ_INT(fclose(f), 0);
}

static void rm_rf(const char *dir) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ASSERT_EQ_INT(system(cmd), 0);
}

TEST(udev_db_fixture_entry) {
        char dir[] = "/tmp/test-udev-db-XXXXXX";
        char *keys[] = { "ID_MODEL", "ID_SERIAL", "ID_WWN", NULL }, *other[] = { "ID_WWN", NULL };
        char **l = (char **) 1;
        Roots r = { .sysfs = "/nonexistent/sys", .root = dir };

        ASSERT_TRUE(mkdtemp(dir));
        write_entry(dir, "b254:0", "S:disk/by-id/virtio-x\nI:1234\nE:ID_SERIAL=virtio-x\nE:ID_MODEL=A \\x20B\n"
                                   "E:ID_BROKEN\nG:systemd\nE:ID_SERIAL_SHORT=x");
        ASSERT_EQ_INT(udev_db_properties(&r, 254, 0, keys, &l), 0);
        ASSERT_TRUE(l && l[0] && l[1] && !l[2]);
        ASSERT_STREQ(l[0], "ID_SERIAL=virtio-x");
        ASSERT_STREQ(l[1], "ID_MODEL=A \\x20B");
        strv_free(l);

        l = (char **) 1;
        ASSERT_EQ_INT(udev_db_properties(&r, 254, 0, other, &l), 0);
        ASSERT_TRUE(l == NULL);

        l = (char **) 1;
        ASSERT_EQ_INT(udev_db_properties(&r, 254, 1, keys, &l), -ENOENT);
        ASSERT_TRUE(l == NULL);
        rm_rf(dir);
}

/* a fixture sysfs without --root has no database at all */
TEST(udev_db_no_root) {
        char *keys[] = { "ID_MODEL", NULL };
        char **l = (char **) 1;
        Roots r = { .sysfs = "/nonexistent/sys" };

        ASSERT_EQ_INT(udev_db_properties(&r, 254, 0, keys, &l), -ENOENT);
        ASSERT_TRUE(l == NULL);
}
