/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>
#include <sys/stat.h>

#include "classify.h"
#include "record.h"
#include "report.h"
#include "shared.h"
#include "tests.h"
#include "util.h"

static Roots fixture(const char *machine, char bufs[3][PATH_MAX]) {
        snprintf(bufs[0], PATH_MAX, "%s/%s/sys", FIXTURES_DIR, machine);
        snprintf(bufs[1], PATH_MAX, "%s/%s/debug", FIXTURES_DIR, machine);
        snprintf(bufs[2], PATH_MAX, "%s/%s/proc", FIXTURES_DIR, machine);
        return (Roots) { bufs[0], bufs[1], bufs[2] };
}

TEST(scheduler_brackets_not_position) {
        SchedulerList l;

        ASSERT_EQ_INT(scheduler_list_parse("none [mq-deadline] kyber bfq ", &l), 0);
        ASSERT_EQ_INT(l.n, 4);
        ASSERT_STREQ(scheduler_list_current(&l), "mq-deadline");
        ASSERT_STREQ(scheduler_list_at(&l, 0), "none");
        ASSERT_STREQ(scheduler_list_at(&l, 3), "bfq");
        ASSERT_TRUE(scheduler_list_has(&l, "kyber") && !scheduler_list_has(&l, "kyb"));
        ASSERT_EQ_INT(scheduler_list_parse("mq-deadline kyber [bfq] none", &l), 0);
        ASSERT_STREQ(scheduler_list_current(&l), "bfq");
        ASSERT_EQ_INT(scheduler_list_parse("[none]", &l), 0);
        ASSERT_TRUE(l.n == 1 && streq(scheduler_list_current(&l), "none"));
        /* bio-based queues on old kernels: "none" without brackets */
        ASSERT_EQ_INT(scheduler_list_parse("none", &l), 0);
        ASSERT_TRUE(l.n == 1 && streq(scheduler_list_current(&l), ""));
        ASSERT_TRUE(scheduler_list_parse("", &l) == 0 && l.n == 0 && streq(scheduler_list_current(&l), ""));
        ASSERT_EQ_INT(scheduler_list_parse("none [adios] mq-deadline", &l), 0);
        ASSERT_STREQ(scheduler_list_current(&l), "adios");
}

TEST(scheduler_list_is_packed_and_bounded) {
        SchedulerList l;
        DeviceFacts zeroed = {};

        /* the in-tree four and two out-of-tree names fit */
        ASSERT_TRUE(scheduler_list_parse("none [mq-deadline] kyber bfq adios ssg-iosched", &l) == 0 && l.n == 6);
        ASSERT_STREQ(scheduler_list_at(&l, 5), "ssg-iosched");
        /* a name as long as SCHED_NAME_MAX, or names past the bytes, do not */
        ASSERT_EQ_INT(scheduler_list_parse("none abcdefghijklmnopqrstuvwx", &l), -EBADMSG);
        ASSERT_EQ_INT(scheduler_list_parse("aaaaaaaaa1 aaaaaaaaa2 aaaaaaaaa3 aaaaaaaaa4 aaaaaaaaa5 aaaaaaaaa6 aaaaaaaaa7", &l),
                      -EBADMSG);
        /* zeroed facts (a vanished device, a probe) have no current scheduler */
        ASSERT_STREQ(device_facts_scheduler(&zeroed), "");
}

TEST(scheduler_lists_compare_by_their_names_only) {
        SchedulerList a, b;

        ASSERT_EQ_INT(scheduler_list_parse("none [mq-deadline] kyber bfq", &a), 0);
        ASSERT_EQ_INT(scheduler_list_bytes(&a), 27);
        memset(&b, 'x', sizeof(b));     /* what lies after the names does not count */
        ASSERT_EQ_INT(scheduler_list_parse("none [mq-deadline] kyber bfq", &b), 0);
        b.names[30] = 'x';
        ASSERT_TRUE(scheduler_list_equal(&a, &b));
        ASSERT_TRUE(scheduler_list_parse("none mq-deadline kyber [bfq]", &b) == 0 && !scheduler_list_equal(&a, &b));
        ASSERT_TRUE(scheduler_list_parse("none [mq-deadline] kyber", &b) == 0 && !scheduler_list_equal(&a, &b));
}

TEST(kernel_versions) {
        unsigned v[3], w[3] = { 6, 10, 0 };

        ASSERT_TRUE(kernel_version_parse("6.12.38+deb13-amd64", v) == 0 && v[0] == 6 && v[1] == 12 && v[2] == 38);
        ASSERT_TRUE(kernel_version_compare(v, w) > 0);
        ASSERT_TRUE(kernel_version_parse("6.1.0-40-amd64", v) == 0 && kernel_version_compare(v, w) < 0);
        ASSERT_TRUE(kernel_version_parse("6.10", v) == 0 && kernel_version_compare(v, w) == 0);
        ASSERT_TRUE(kernel_version_parse("7.0-rc1", v) == 0 && v[0] == 7 && v[1] == 0);
        ASSERT_TRUE(kernel_version_parse("linux", v) < 0);
        ASSERT_TRUE(kernel_version_parse("6", v) < 0);
}

TEST(virtio_is_not_a_hard_disk) {
        char b[3][PATH_MAX];
        Roots r = fixture("kvm-6.18", b);
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, NULL, "vda", &f), 0);
        ASSERT_TRUE(f.rotational);
        ASSERT_TRUE(!(f.classes & CLASS_BIT(CLASS_ROTATIONAL)));
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_VIRTIO));
        ASSERT_STREQ(f.driver, "virtio_blk");
        ASSERT_STREQ(f.subsystem, "virtio");
        ASSERT_TRUE(f.major == 254 && f.minor == 0 && f.diskseq > 0);
}

TEST(partitions_and_missing_devices) {
        char b[3][PATH_MAX];
        Roots r = fixture("kvm-6.18", b), part = r;
        char tmp[] = "/tmp/blkpolicyd-test-part-XXXXXX", blockdir[PATH_MAX], link[PATH_MAX + 8],
             target[PATH_MAX + 64];
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, NULL, "vdz", &f), -ENODEV);
        ASSERT_TRUE(classify_device(&r, NULL, "../etc", &f) < 0);
        /* a root whose block/ lists a partition, as /sys/class/block does */
        ASSERT_TRUE(mkdtemp(tmp) != NULL);
        snprintf(blockdir, sizeof(blockdir), "%s/block", tmp);
        ASSERT_EQ_INT(mkdir(blockdir, 0755), 0);
        snprintf(link, sizeof(link), "%s/vda1", blockdir);
        snprintf(target, sizeof(target), "%s/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/vda1", b[0]);
        ASSERT_EQ_INT(symlink(target, link), 0);
        part.sysfs = tmp;
        ASSERT_EQ_INT(classify_device(&part, NULL, "vda1", &f), -ENOTBLK);
        ASSERT_TRUE(unlink(link) == 0 && rmdir(blockdir) == 0 && rmdir(tmp) == 0);
}

TEST(bio_based_devices) {
        char b[3][PATH_MAX];
        Roots r = fixture("kvm-6.18", b);
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, NULL, "zram0", &f), 0);
        ASSERT_TRUE(f.classes == CLASS_BIT(CLASS_BIO_BASED) && f.hw_queues == 0 && f.schedulers.n == 0);
        ASSERT_EQ_INT(classify_device(&r, NULL, "dm-0", &f), 0);
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_BIO_BASED));
}

TEST(nvme_driver_through_the_controller) {
        char b[3][PATH_MAX];
        Roots r = fixture("nvme-6.12", b);
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme0n1", &f), 0);
        ASSERT_STREQ(f.driver, "nvme");
        ASSERT_EQ_INT(f.classes, (CLASS_BIT(CLASS_NVME) | CLASS_BIT(CLASS_MULTI_QUEUE)));
        ASSERT_STREQ(f.model, "QEMU NVMe Ctrl");
        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme1c1n1", &f), 0);
        ASSERT_TRUE(f.hidden);
        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme1n1", &f), 0);
        ASSERT_TRUE(!f.hidden && (f.classes & CLASS_BIT(CLASS_BIO_BASED)) && (f.classes & CLASS_BIT(CLASS_NVME)));
        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme2n1", &f), 0);
        ASSERT_TRUE(f.zoned == ZONED_HOST_MANAGED && (f.classes & CLASS_BIT(CLASS_ZONED)));
}

TEST(null_blk_poll_queue_is_single_queue) {
        char b[3][PATH_MAX];
        Roots r = fixture("ublk-nullb-6.12", b), nodebug;
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, NULL, "nullb1", &f), 0);
        ASSERT_TRUE(f.hw_queues == 2 && f.poll_queues == 1);
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_SINGLE_QUEUE));
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_NULL_BLK));
        /* without debugfs the hctx types are unknown: two queues are two queues */
        nodebug = r;
        nodebug.debugfs = "/nonexistent";
        ASSERT_EQ_INT(classify_device(&nodebug, NULL, "nullb1", &f), 0);
        ASSERT_TRUE(f.poll_queues == 0 && (f.classes & CLASS_BIT(CLASS_MULTI_QUEUE)));
        ASSERT_EQ_INT(classify_device(&r, NULL, "ublkb0", &f), 0);
        ASSERT_EQ_INT(f.classes, (CLASS_BIT(CLASS_UBLK) | CLASS_BIT(CLASS_SINGLE_QUEUE)));
        ASSERT_STREQ(f.driver, "ublk_drv");
}

/* A parentless disk's driver is its major's registered name, whatever
 * the disk is called; blkext's major and an unlisted one leave it to the
 * name. */
TEST(parentless_driver_from_the_major) {
        char b[3][PATH_MAX];
        Roots r = fixture("majors-6.12", b), noproc = r;
        MajorCache c = MAJOR_CACHE_NULL;
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, &c, "dev_nullb", &f), 0);
        ASSERT_STREQ(f.driver, "null_blk");
        ASSERT_EQ_INT(f.classes, (CLASS_BIT(CLASS_NULL_BLK) | CLASS_BIT(CLASS_SINGLE_QUEUE)));
        ASSERT_EQ_INT(classify_device(&r, &c, "ublkb0", &f), 0);   /* blkext: the name says */
        ASSERT_STREQ(f.driver, "ublk_drv");
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_UBLK));
        ASSERT_EQ_INT(classify_device(&r, &c, "md127", &f), 0);
        ASSERT_STREQ(f.driver, "md");
        ASSERT_EQ_INT(classify_device(&r, &c, "dm-0", &f), 0);
        ASSERT_STREQ(f.driver, "device-mapper");
        ASSERT_EQ_INT(classify_device(&r, &c, "drbd0", &f), 0);    /* no row: the kernel's name */
        ASSERT_STREQ(f.driver, "drbd");
        ASSERT_EQ_INT(f.classes, CLASS_BIT(CLASS_BIO_BASED));
        ASSERT_EQ_INT(classify_device(&r, &c, "vda", &f), 0);      /* a parent: its driver link */
        ASSERT_STREQ(f.driver, "virtio_blk");
        ASSERT_EQ_INT(c.reads, 1);     /* one read for them all */
        major_cache_drop(&c);
        ASSERT_TRUE(c.reads == 0 && c.majors.n == 0);

        /* no <proc>/devices: the name's prefix, which dev_nullb does not have */
        noproc.proc = "/nonexistent";
        ASSERT_EQ_INT(classify_device(&noproc, NULL, "dev_nullb", &f), 0);
        ASSERT_STREQ(f.driver, "");
        ASSERT_EQ_INT(f.classes, CLASS_BIT(CLASS_SINGLE_QUEUE));
        ASSERT_EQ_INT(classify_device(&noproc, NULL, "loop0", &f), 0);
        ASSERT_TRUE(streq(f.driver, "loop") && (f.classes & CLASS_BIT(CLASS_LOOP)));
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        ASSERT_TRUE(f != NULL);
        ASSERT_TRUE(fputs(text, f) >= 0);
        ASSERT_EQ_INT(fclose(f), 0);
}

/* A major the cached table lacks is read again (a module loaded since),
 * once until the cache is dropped */
TEST(parentless_major_read_again_once) {
        char b[3][PATH_MAX], tmp[] = "/tmp/blkpolicyd-test-majors-XXXXXX", path[PATH_MAX];
        Roots r = fixture("majors-6.12", b);
        MajorCache c = MAJOR_CACHE_NULL;
        DeviceFacts f;

        ASSERT_TRUE(mkdtemp(tmp) != NULL);
        snprintf(path, sizeof(path), "%s/devices", tmp);
        write_file(path, "Character devices:\n  1 mem\n\nBlock devices:\n  7 loop\n");
        r.proc = tmp;
        ASSERT_EQ_INT(classify_device(&r, &c, "loop0", &f), 0);
        ASSERT_TRUE(streq(f.driver, "loop") && c.reads == 1);
        /* null_blk loaded: its major is new, and it is read again */
        write_file(path, "Block devices:\n  7 loop\n250 nullb\n");
        ASSERT_EQ_INT(classify_device(&r, &c, "dev_nullb", &f), 0);
        ASSERT_STREQ(f.driver, "null_blk");
        ASSERT_EQ_INT(c.reads, 2);
        /* a major nobody registered: not read a third time */
        ASSERT_EQ_INT(classify_device(&r, &c, "nbd0", &f), 0);
        ASSERT_TRUE(streq(f.driver, "nbd") && c.reads == 2);
        /* a fresh read that lacks it is not read again either */
        major_cache_drop(&c);
        ASSERT_EQ_INT(classify_device(&r, &c, "nbd0", &f), 0);
        ASSERT_TRUE(streq(f.driver, "nbd") && c.reads == 1);
        /* unparsable: the names say, as without the file */
        write_file(path, "garbage\n");
        major_cache_drop(&c);
        ASSERT_EQ_INT(classify_device(&r, &c, "dev_nullb", &f), 0);
        ASSERT_STREQ(f.driver, "");
        major_cache_drop(&c);
        ASSERT_TRUE(unlink(path) == 0 && rmdir(tmp) == 0);
}

TEST(scsi_rotational_and_smr) {
        char b[3][PATH_MAX];
        Roots r = fixture("hdd-6.1", b);
        DeviceFacts f;

        ASSERT_EQ_INT(classify_device(&r, NULL, "sda", &f), 0);
        ASSERT_STREQ(f.driver, "sd");
        ASSERT_EQ_INT(f.classes, (CLASS_BIT(CLASS_SCSI) | CLASS_BIT(CLASS_SINGLE_QUEUE) | CLASS_BIT(CLASS_ROTATIONAL)));
        ASSERT_EQ_INT(classify_device(&r, NULL, "sdb", &f), 0);
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_ZONED));
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_ROTATIONAL));
        ASSERT_EQ_INT(classify_device(&r, NULL, "sdc", &f), 0);
        ASSERT_STREQ(f.model, "scsi_debug");
        ASSERT_EQ_INT(classify_device(&r, NULL, "mmcblk0", &f), 0);
        ASSERT_TRUE(f.classes & CLASS_BIT(CLASS_MMC));
}

TEST(dispatch_direct_is_probed_not_assumed) {
        char b[3][PATH_MAX];
        Roots with = fixture("dispatch-direct-7.2", b);
        char c[3][PATH_MAX];
        Roots without = fixture("kvm-6.18", c);
        KernelCaps caps;
        DeviceFacts f;

        ASSERT_EQ_INT(kernel_caps_read(&with, &caps), 0);
        ASSERT_TRUE(caps.dispatch_direct == TRISTATE_UNKNOWN && caps.version[0] == 7);
        ASSERT_EQ_INT(classify_device(&with, NULL, "vdb", &f), 0);   /* runs none: tells nothing */
        ASSERT_TRUE(!kernel_caps_learn(&caps, &with, f.name, device_facts_scheduler(&f)) && caps.dispatch_direct == TRISTATE_UNKNOWN);
        ASSERT_EQ_INT(classify_device(&with, NULL, "vda", &f), 0);
        ASSERT_TRUE(kernel_caps_learn(&caps, &with, f.name, device_facts_scheduler(&f)) && caps.dispatch_direct == TRISTATE_YES);

        ASSERT_EQ_INT(kernel_caps_read(&without, &caps), 0);
        ASSERT_EQ_INT(classify_device(&without, NULL, "vda", &f), 0);
        ASSERT_TRUE(kernel_caps_learn(&caps, &without, f.name, device_facts_scheduler(&f)) && caps.dispatch_direct == TRISTATE_NO);
}

/* What a pass saw after a switch: yes is for good (the kernel has it), no
 * is taken back by a yes, nothing seen changes nothing. */
TEST(dispatch_direct_noted_from_a_pass) {
        KernelCaps caps = { .dispatch_direct = TRISTATE_UNKNOWN };

        ASSERT_TRUE(!kernel_caps_note(&caps, TRISTATE_UNKNOWN) && caps.dispatch_direct == TRISTATE_UNKNOWN);
        ASSERT_TRUE(kernel_caps_note(&caps, TRISTATE_NO) && caps.dispatch_direct == TRISTATE_NO);
        ASSERT_TRUE(!kernel_caps_note(&caps, TRISTATE_NO) && caps.dispatch_direct == TRISTATE_NO);
        ASSERT_TRUE(!kernel_caps_note(&caps, TRISTATE_UNKNOWN) && caps.dispatch_direct == TRISTATE_NO);
        ASSERT_TRUE(kernel_caps_note(&caps, TRISTATE_YES) && caps.dispatch_direct == TRISTATE_YES);
        ASSERT_TRUE(!kernel_caps_note(&caps, TRISTATE_NO) && caps.dispatch_direct == TRISTATE_YES);
}

TEST(devices_alike_share_their_facts_but_not_their_name) {
        char bufs[3][PATH_MAX];
        Roots r = fixture("kvm-6.18", bufs);
        InternTable shared = { .type = &facts_intern_type };
        DeviceFacts a = {}, b = {};
        char *props[] = { (char *) "ID_SERIAL=x", NULL };
        const DeviceFacts *sa, *sb, *sc;

        ASSERT_TRUE(classify_device(&r, NULL, "vda", &a) == 0 && classify_device(&r, NULL, "vda", &b) == 0);
        /* another device of the same kind: only its own identity differs */
        (void) strscpy(b.name, sizeof(b.name), "vdb");
        b.minor += 16;
        b.diskseq = 99;
        b.properties = props;
        sa = intern_ref(&shared, &a);
        sb = intern_ref(&shared, &b);
        ASSERT_TRUE(sa && sa == sb && shared.n_entries == 1);
        ASSERT_STREQ(sa->name, "");
        ASSERT_TRUE(sa->major == 0 && sa->diskseq == 0 && !sa->properties);
        ASSERT_STREQ(sa->driver, a.driver);
        ASSERT_STREQ(device_facts_scheduler(sa), device_facts_scheduler(&a));
        /* another scheduler running is other facts */
        ASSERT_TRUE(a.schedulers.n > 1);
        b.schedulers.current = (int8_t) ((a.schedulers.current + 1) % a.schedulers.n);
        sc = intern_ref(&shared, &b);
        ASSERT_TRUE(sc && sc != sa && shared.n_entries == 2);
        intern_unref(&shared, sc);
        intern_unref(&shared, sb);
        ASSERT_EQ_INT(shared.n_entries, 1);
        intern_unref(&shared, sa);
        ASSERT_EQ_INT(shared.n_entries, 0);
        intern_table_done(&shared);
}

/* One disk of stacks-6.18, classified; the caller's to device_facts_done(). */
static void classify_stacked(const char *name, DeviceFacts *f) {
        char b[3][PATH_MAX];
        Roots r = fixture("stacks-6.18", b);

        ASSERT_EQ_INT(classify_device(&r, NULL, name, f), 0);
}

static bool names_are(char *const *l, const char *a, const char *b) {
        return l && streq_ptr(l[0], a) && streq_ptr(l[1], b) && (!b || !l[2]);
}

TEST(dm_linear_on_a_disk) {
        _cleanup_(device_facts_done) DeviceFacts disk = {}, map = {};

        classify_stacked("vdb", &disk);
        ASSERT_TRUE(device_topology_role(&disk.topology) == STACK_MEMBER && disk.topology.n_holders == 1 &&
                    disk.topology.n_slaves == 0 && names_are(disk.stack->holders, "dm-0", NULL));
        ASSERT_TRUE(!disk.stack->dm_name && !disk.topology.dm_uuid_prefix[0]);
        classify_stacked("dm-0", &map);
        ASSERT_TRUE(device_topology_role(&map.topology) == STACK_TOP && names_are(map.stack->slaves, "vdb", NULL));
        ASSERT_STREQ(map.stack->dm_name, "linear0");
        /* dmsetup create without --uuid: an empty line, no uuid, no prefix */
        ASSERT_TRUE(!map.stack->dm_uuid && !map.topology.dm_uuid_prefix[0]);
        ASSERT_STREQ(map.driver, "device-mapper");
        /* 6.18: a bio-based queue has no scheduler file at all */
        ASSERT_TRUE((map.classes & CLASS_BIT(CLASS_BIO_BASED)) && map.schedulers.n == 0);
}

TEST(dm_crypt_on_lvm_on_a_disk) {
        _cleanup_(device_facts_done) DeviceFacts lv = {}, crypt = {};

        classify_stacked("dm-1", &lv);
        ASSERT_TRUE(device_topology_role(&lv.topology) == STACK_MEMBER && names_are(lv.stack->holders, "dm-2", NULL) &&
                    names_are(lv.stack->slaves, "vdc", NULL));
        ASSERT_STREQ(lv.topology.dm_uuid_prefix, "LVM-");
        ASSERT_STREQ(lv.stack->dm_name, "vg0-secret");
        classify_stacked("dm-2", &crypt);
        ASSERT_TRUE(device_topology_role(&crypt.topology) == STACK_TOP);
        ASSERT_STREQ(crypt.topology.dm_uuid_prefix, "CRYPT-");
        ASSERT_TRUE(startswith(crypt.stack->dm_uuid, "CRYPT-LUKS2-"));
}

TEST(md_raid1_over_two_disks) {
        _cleanup_(device_facts_done) DeviceFacts md = {}, sda = {};

        classify_stacked("md0", &md);
        ASSERT_STREQ(md.topology.md_level, "raid1");
        ASSERT_EQ_INT(md.topology.md_raid_disks, 2);
        ASSERT_TRUE(md.topology.n_slaves == 2 && names_are(md.stack->slaves, "sda", "sdb"));
        /* LVM on the array: a member itself */
        ASSERT_TRUE(device_topology_role(&md.topology) == STACK_MEMBER && names_are(md.stack->holders, "dm-3", NULL));
        ASSERT_TRUE(!md.stack->dm_name && !md.topology.dm_uuid_prefix[0]);
        classify_stacked("sda", &sda);
        ASSERT_TRUE(device_topology_role(&sda.topology) == STACK_MEMBER && !sda.topology.md_level[0] &&
                    names_are(sda.stack->holders, "md0", NULL));
}

TEST(dm_multipath_over_two_scsi_paths) {
        _cleanup_(device_facts_done) DeviceFacts map = {}, part = {}, sdc = {};

        classify_stacked("dm-4", &map);
        ASSERT_STREQ(map.topology.dm_uuid_prefix, "mpath-");
        ASSERT_TRUE(names_are(map.stack->slaves, "sdc", "sdd") && names_are(map.stack->holders, "dm-5", NULL));
        /* request-based: a queue of its own, with an elevator */
        ASSERT_TRUE((map.classes & CLASS_BIT(CLASS_SINGLE_QUEUE)) && !(map.classes & CLASS_BIT(CLASS_BIO_BASED)));
        ASSERT_STREQ(device_facts_scheduler(&map), "mq-deadline");
        /* kpartx's partition map: part<N>- says nothing of who made it but kpartx */
        classify_stacked("dm-5", &part);
        ASSERT_STREQ(part.topology.dm_uuid_prefix, "part");
        ASSERT_TRUE(device_topology_role(&part.topology) == STACK_TOP);
        classify_stacked("sdc", &sdc);
        ASSERT_TRUE(device_topology_role(&sdc.topology) == STACK_MEMBER && (sdc.classes & CLASS_BIT(CLASS_SCSI)));
}

TEST(nvme_native_multipath_head_and_paths) {
        _cleanup_(device_facts_done) DeviceFacts head = {}, path = {};

        classify_stacked("nvme0n1", &head);
        ASSERT_EQ_INT(head.topology.nvme_multipath, NVME_MPATH_HEAD);
        ASSERT_TRUE(names_are(head.stack->nvme_paths, "nvme0c0n1", "nvme0c1n1"));
        /* native multipath links no holders: the head is alone as far as stack= goes */
        ASSERT_TRUE(device_topology_role(&head.topology) == STACK_ALONE && !head.stack->slaves);
        classify_stacked("nvme0c1n1", &path);
        ASSERT_TRUE(path.topology.nvme_multipath == NVME_MPATH_PATH && path.hidden && !path.stack);
}

TEST(nvme_head_before_multipath_dir) {
        char b[3][PATH_MAX];
        Roots r = fixture("nvme-6.12", b);
        _cleanup_(device_facts_done) DeviceFacts f = {};

        /* no multipath/ before 6.15: the subsystem parent says head */
        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme1n1", &f), 0);
        ASSERT_TRUE(f.topology.nvme_multipath == NVME_MPATH_HEAD && !f.stack);
        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme1c1n1", &f), 0);
        ASSERT_EQ_INT(f.topology.nvme_multipath, NVME_MPATH_PATH);
        ASSERT_EQ_INT(classify_device(&r, NULL, "nvme0n1", &f), 0);
        ASSERT_TRUE(f.topology.nvme_multipath == NVME_MPATH_NONE && device_topology_role(&f.topology) == STACK_ALONE);
}

TEST(dm_uuid_prefixes) {
        char p[DM_UUID_PREFIX_MAX];

        dm_uuid_prefix("LVM-abc", p);
        ASSERT_STREQ(p, "LVM-");
        dm_uuid_prefix("CRYPT-LUKS2-0123-name", p);
        ASSERT_STREQ(p, "CRYPT-");
        dm_uuid_prefix("mpath-3600", p);
        ASSERT_STREQ(p, "mpath-");
        dm_uuid_prefix("part12-mpath-3600", p);
        ASSERT_STREQ(p, "part");
        dm_uuid_prefix("partial-x", p);            /* not kpartx's: a word of its own */
        ASSERT_STREQ(p, "partial-");
        dm_uuid_prefix("stratis-1-abc", p);
        ASSERT_STREQ(p, "stratis-");
        dm_uuid_prefix("nodash", p);
        ASSERT_STREQ(p, "");
        dm_uuid_prefix("averyveryverylongprefix-x", p);
        ASSERT_STREQ(p, "");
        dm_uuid_prefix("", p);
        ASSERT_STREQ(p, "");
}

TEST(nvme_path_heads_by_name) {
        char h[NAME_MAX_LEN];

        ASSERT_TRUE(nvme_path_head_name("nvme0c1n1", h, sizeof(h)) == 0 && streq(h, "nvme0n1"));
        ASSERT_TRUE(nvme_path_head_name("nvme12c3n45", h, sizeof(h)) == 0 && streq(h, "nvme12n45"));
        ASSERT_EQ_INT(nvme_path_head_name("nvme0n1", h, sizeof(h)), -EINVAL);
        ASSERT_EQ_INT(nvme_path_head_name("nvme0c1n1p1", h, sizeof(h)), -EINVAL);
        ASSERT_EQ_INT(nvme_path_head_name("sda", h, sizeof(h)), -EINVAL);
}

TEST(partitions_by_name) {
        char disk[NAME_MAX_LEN];

        ASSERT_TRUE(partition_of("sda", "sda1") && partition_of("sda", "sda12"));
        ASSERT_TRUE(partition_of("nvme0n1", "nvme0n1p2") && partition_of("mmcblk0", "mmcblk0p1"));
        ASSERT_TRUE(!partition_of("sda", "sdab1") && !partition_of("sda", "sda") && !partition_of("sda", "holders"));
        ASSERT_TRUE(!partition_of("nvme0n1", "nvme0n12") && !partition_of("nvme0n1", "nvme0n1p"));
        ASSERT_TRUE(!partition_of("loop1", "loop10") && partition_of("loop1", "loop1p1"));
        ASSERT_TRUE(partition_disk_name("sda2", disk, sizeof(disk)) == 0 && streq(disk, "sda"));
        ASSERT_TRUE(partition_disk_name("sdab15", disk, sizeof(disk)) == 0 && streq(disk, "sdab"));
        ASSERT_TRUE(partition_disk_name("nvme0n1p2", disk, sizeof(disk)) == 0 && streq(disk, "nvme0n1"));
        ASSERT_TRUE(partition_disk_name("mmcblk0p1", disk, sizeof(disk)) == 0 && streq(disk, "mmcblk0"));
        ASSERT_EQ_INT(partition_disk_name("sda", disk, sizeof(disk)), -EINVAL);
        ASSERT_EQ_INT(partition_disk_name("1", disk, sizeof(disk)), -EINVAL);
        ASSERT_EQ_INT(partition_disk_name("sda1", disk, 3), -ENAMETOOLONG);
}

TEST(members_share_their_facts_but_not_their_stack) {
        InternTable shared = { .type = &facts_intern_type };
        _cleanup_(device_facts_done) DeviceFacts a = {}, b = {}, c = {};
        const DeviceFacts *sa, *sb, *sc;

        /* the two paths of one map: alike, but for their names */
        classify_stacked("sdc", &a);
        classify_stacked("sdd", &b);
        sa = intern_ref(&shared, &a);
        sb = intern_ref(&shared, &b);
        ASSERT_TRUE(sa && sa == sb && !sa->stack && sa->topology.n_holders == 1);
        /* the same disk on its own is other facts */
        classify_stacked("sdc", &c);
        c.topology.n_holders = 0;
        sc = intern_ref(&shared, &c);
        ASSERT_TRUE(sc && sc != sa && shared.n_entries == 2);
        intern_unref(&shared, sc);
        intern_unref(&shared, sb);
        intern_unref(&shared, sa);
        intern_table_done(&shared);
}

/* A recording keeps what decide() matches of the topology: replay then
 * decides stack= and the others as the daemon did. */
TEST(topology_recorded_and_read_back) {
        _cleanup_(device_facts_done) DeviceFacts md = {}, back = {}, old = {};
        cJSON *j = cJSON_CreateObject();

        classify_stacked("md0", &md);
        cJSON_AddStringToObject(j, "name", md.name);
        cJSON_AddItemToObject(j, "classes", report_classes(md.classes));
        cJSON_AddItemToObject(j, "facts", report_facts(&md));
        cJSON_AddItemToObject(j, "topology", report_topology(&md));
        ASSERT_EQ_INT(record_parse_device(j, &back), 0);
        ASSERT_TRUE(device_topology_equal(&back.topology, &md.topology) && !back.stack);
        /* before the topology: none */
        cJSON_DeleteItemFromObject(j, "topology");
        ASSERT_EQ_INT(record_parse_device(j, &old), 0);
        ASSERT_TRUE(device_topology_role(&old.topology) == STACK_ALONE && !old.topology.md_level[0]);
        cJSON_Delete(j);
}
