/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/devices' block section: the majors the kernel registered, as
 * fs/proc/devices.c and blkdev_show() print them. */
#include "proc-devices.h"
#include "tests.h"
#include "util.h"

/* As a 6.18 KVM guest prints it, with null_blk and dm loaded */
static const char guest[] =
        "Character devices:\n"
        "  1 mem\n"
        "  4 /dev/vc/0\n"
        "  7 vcs\n"
        "254 ndctl\n"
        "\n"
        "Block devices:\n"
        "  7 loop\n"
        "  9 md\n"
        "251 nullb\n"
        "252 device-mapper\n"
        "253 zram\n"
        "254 virtblk\n"
        "259 blkext\n";

static int parse(const char *text, BlockMajors *m) {
        return block_majors_parse(text, strlen(text), m);
}

TEST(block_majors_from_the_block_section_only) {
        BlockMajors m = BLOCK_MAJORS_NULL;

        ASSERT_EQ_INT(parse(guest, &m), 0);
        ASSERT_EQ_INT(m.n, 7);
        ASSERT_STREQ(block_majors_name(&m, 7), "loop");
        ASSERT_STREQ(block_majors_name(&m, 251), "nullb");
        ASSERT_STREQ(block_majors_name(&m, 252), "device-mapper");
        ASSERT_STREQ(block_majors_name(&m, 259), "blkext");
        /* 254 is virtblk here, ndctl among the character devices */
        ASSERT_STREQ(block_majors_name(&m, 254), "virtblk");
        ASSERT_TRUE(block_majors_name(&m, 1) == NULL);
        ASSERT_TRUE(block_majors_name(&m, 8) == NULL);
        block_majors_done(&m);
        ASSERT_TRUE(m.entries == NULL && m.n == 0);
}

TEST(block_majors_without_a_block_section) {
        BlockMajors m = BLOCK_MAJORS_NULL;

        ASSERT_EQ_INT(parse("Character devices:\n  1 mem\n", &m), -EBADMSG);
        ASSERT_EQ_INT(parse("", &m), -EBADMSG);
        ASSERT_EQ_INT(parse("block devices:\n  7 loop\n", &m), -EBADMSG);
        ASSERT_TRUE(m.entries == NULL && m.n == 0);
        /* a section with nothing registered is a table, an empty one */
        ASSERT_EQ_INT(parse("Block devices:\n", &m), 0);
        ASSERT_EQ_INT(m.n, 0);
        block_majors_done(&m);
}

TEST(block_majors_skip_what_the_kernel_cannot_print) {
        BlockMajors m = BLOCK_MAJORS_NULL;

        ASSERT_EQ_INT(parse("Block devices:\n"
                            "  7 loop\n"
                            "  7 other\n"                /* a major has one name: the first */
                            " 12 \n"                     /* no name */
                            " 13 two words\n"
                            "99999 big\n"                /* past dev_t's 12 bits */
                            " 14 abcdefghijklmnop\n"     /* 16 bytes: past blk_major_name.name */
                            " 15 abcdefghijklmno\n"      /* 15: fits */
                            " 16  spaced\n"
                            "x\n"
                            "4095 last", &m), 0);        /* the end of the text ends the line */
        ASSERT_EQ_INT(m.n, 3);
        ASSERT_STREQ(block_majors_name(&m, 7), "loop");
        ASSERT_STREQ(block_majors_name(&m, 15), "abcdefghijklmno");
        ASSERT_STREQ(block_majors_name(&m, 4095), "last");
        ASSERT_TRUE(!block_majors_name(&m, 12) && !block_majors_name(&m, 13) && !block_majors_name(&m, 14));
        block_majors_done(&m);
}

TEST(block_majors_section_ends_at_an_empty_line_or_a_header) {
        BlockMajors m = BLOCK_MAJORS_NULL;

        ASSERT_EQ_INT(parse("Block devices:\n  7 loop\n\n  8 sd\n", &m), 0);
        ASSERT_TRUE(m.n == 1 && !block_majors_name(&m, 8));
        ASSERT_EQ_INT(parse("Block devices:\n  7 loop\nOther devices:\n  8 sd\n", &m), 0);
        ASSERT_TRUE(m.n == 1 && !block_majors_name(&m, 8));
        block_majors_done(&m);
}

/* A re-read replaces the table; a failed one leaves it as it was */
TEST(block_majors_parse_replaces) {
        BlockMajors m = BLOCK_MAJORS_NULL;

        ASSERT_EQ_INT(parse("Block devices:\n250 zram\n", &m), 0);
        ASSERT_STREQ(block_majors_name(&m, 250), "zram");
        ASSERT_EQ_INT(parse("Block devices:\n250 nullb\n", &m), 0);
        ASSERT_TRUE(m.n == 1 && streq(block_majors_name(&m, 250), "nullb"));
        ASSERT_EQ_INT(parse("garbage", &m), -EBADMSG);
        ASSERT_STREQ(block_majors_name(&m, 250), "nullb");
        block_majors_done(&m);
}

/* Not NUL-terminated: the length is the end */
TEST(block_majors_by_length) {
        BlockMajors m = BLOCK_MAJORS_NULL;
        const char text[] = "Block devices:\n  7 loopXXXX";

        ASSERT_EQ_INT(block_majors_parse(text, strlen(text) - 4, &m), 0);
        ASSERT_STREQ(block_majors_name(&m, 7), "loop");
        block_majors_done(&m);
}

/* Every major dev_t can hold: the table grows past its first allocation */
TEST(block_majors_many) {
        BlockMajors m = BLOCK_MAJORS_NULL;
        char *text = NULL;
        size_t size = 0;
        FILE *f = memstream_open(&text, &size);

        ASSERT_TRUE(f != NULL);
        fputs("Block devices:\n", f);
        for (unsigned i = 0; i <= BLOCK_MAJOR_MAX; i++)
                fprintf(f, "%3u d%u\n", i, i);
        ASSERT_EQ_INT(fclose(f), 0);
        ASSERT_EQ_INT(block_majors_parse(text, size, &m), 0);
        ASSERT_EQ_INT(m.n, BLOCK_MAJOR_MAX + 1);
        ASSERT_STREQ(block_majors_name(&m, 4095), "d4095");
        ASSERT_STREQ(block_majors_name(&m, 0), "d0");
        block_majors_done(&m);
        free(text);
}
