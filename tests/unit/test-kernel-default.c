/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* kernel-default.c without I/O: the read_ahead_kb a queue-limits update
 * leaves, as blk_apply_bdi_limits() computes it on each kernel. */
#include "kernel-default.h"
#include "tests.h"
#include "tunables.h"
#include "util.h"

static const unsigned v6_1[3] = { 6, 1, 0 }, v6_12[3] = { 6, 12, 117 }, v6_17[3] = { 6, 17, 0 },
                      v7_3[3] = { 7, 3, 4 };

static QueueLimitsSeen limits(const char *io_opt, const char *max_sectors_kb, const char *rotational) {
        QueueLimitsSeen l;

        ASSERT_EQ_INT(queue_limits_parse(io_opt, max_sectors_kb, rotational, 4, &l), 0);
        return l;
}

/* No io_opt: VM_READAHEAD_PAGES, 128 KiB, on every kernel for a
 * non-rotational disk, and before 6.17 for a rotational one. */
TEST(default_without_io_opt) {
        QueueLimitsSeen ssd = limits("0", "1280", "0"), disk = limits("0", "4096", "1");

        ASSERT_EQ_INT(read_ahead_kernel_default(&ssd, v6_1), 128);
        ASSERT_EQ_INT(read_ahead_kernel_default(&ssd, v7_3), 128);
        ASSERT_EQ_INT(read_ahead_kernel_default(&disk, v6_12), 128);
}

/* 459779d04ae8 (6.17): a rotational queue with no io_opt takes twice
 * max_sectors; measured in the VM bed: 7.3.4, virtio-blk rotational=1,
 * max_sectors_kb 4096, read_ahead_kb 8192 (issue #31). */
TEST(rotational_takes_max_sectors_since_6_17) {
        QueueLimitsSeen disk = limits("0", "4096", "1"), sd = limits("0", "1280", "1");

        ASSERT_EQ_INT(read_ahead_kernel_default(&disk, v6_17), 8192);
        ASSERT_EQ_INT(read_ahead_kernel_default(&disk, v7_3), 8192);
        ASSERT_EQ_INT(read_ahead_kernel_default(&sd, v7_3), 2560);     /* the commit's "2560 KB" for sd */
        /* an io_opt wins over max_sectors */
        QueueLimitsSeen raid = limits("524288", "4096", "1");
        ASSERT_EQ_INT(read_ahead_kernel_default(&raid, v7_3), 1024);
}

/* Twice io_opt, in whole pages, never below 128 KiB. */
TEST(twice_io_opt_in_whole_pages) {
        QueueLimitsSeen big = limits("1048576", "1280", "0"), odd = limits("6144", "1280", "0"),
                        small = limits("32768", "1280", "0");

        ASSERT_EQ_INT(read_ahead_kernel_default(&big, v6_1), 2048);
        ASSERT_EQ_INT(read_ahead_kernel_default(&small, v6_12), 128);
        /* 12288 bytes is 3 pages of 4 KiB: 12, below the floor */
        ASSERT_EQ_INT(read_ahead_kernel_default(&odd, v6_12), 128);
        QueueLimitsSeen odd_big = limits("1050624", "1280", "0");     /* 2 * that = 513 pages and a half */
        ASSERT_EQ_INT(read_ahead_kernel_default(&odd_big, v6_12), 2052);
        /* 64 KiB pages (arm64, ppc64le): the floor is still 128 KiB, steps of 64 */
        QueueLimitsSeen l;
        ASSERT_EQ_INT(queue_limits_parse("50000", "1280", "0", 64, &l), 0);   /* one page */
        ASSERT_EQ_INT(read_ahead_kernel_default(&l, v6_12), 128);
        ASSERT_EQ_INT(queue_limits_parse("1000000", "1280", "0", 64, &l), 0);
        ASSERT_EQ_INT(read_ahead_kernel_default(&l, v6_12), 1920);
}

TEST(only_read_ahead_has_a_default) {
        QueueLimitsSeen l = limits("0", "4096", "1");
        char buf[32];

        ASSERT_EQ_INT(kernel_default_value((unsigned) tunable_find_attr("read_ahead_kb"), &l, v7_3, buf, sizeof(buf)), 1);
        ASSERT_STREQ(buf, "8192");
        ASSERT_EQ_INT(kernel_default_value((unsigned) tunable_find_attr("max_sectors_kb"), &l, v7_3, buf, sizeof(buf)), 0);
        ASSERT_EQ_INT(kernel_default_value(TUNABLE_NR_REQUESTS, &l, v7_3, buf, sizeof(buf)), 0);
        ASSERT_EQ_INT(kernel_default_value((unsigned) tunable_find_attr("read_ahead_kb"), &l, v7_3, buf, 3), -ENOBUFS);
}

TEST(limits_that_do_not_parse) {
        QueueLimitsSeen l;

        ASSERT_EQ_INT(queue_limits_parse("", "1280", "0", 4, &l), -EINVAL);
        ASSERT_EQ_INT(queue_limits_parse("0", "x", "0", 4, &l), -EINVAL);
        ASSERT_EQ_INT(queue_limits_parse("0", "1280", "2", 4, &l), -EINVAL);
        ASSERT_EQ_INT(queue_limits_parse("-1", "1280", "0", 4, &l), -ERANGE);
        ASSERT_EQ_INT(queue_limits_parse("0", "1280", "0", 0, &l), -EINVAL);
}

/* A write of max_sectors_kb is a limits update since the atomic limits
 * API of 6.9; not known, taken as one. */
TEST(max_sectors_write_resets_read_ahead_since_6_9) {
        static const unsigned v6_8[3] = { 6, 8, 12 }, v6_9[3] = { 6, 9, 0 }, v6_18[3] = { 6, 18, 0 };

        ASSERT_TRUE(!max_sectors_write_resets_read_ahead(v6_8));
        ASSERT_TRUE(max_sectors_write_resets_read_ahead(v6_9));
        ASSERT_TRUE(max_sectors_write_resets_read_ahead(v6_18));
        ASSERT_TRUE(max_sectors_write_resets_read_ahead(NULL));
}
