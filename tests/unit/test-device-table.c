/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The device table against a plain array of what it should hold: puts,
 * removes, rehashes (growing, and dropping tombstones), and walks over
 * the slots that remove devices as they go, as DEVICE_FOREACH's body may. */
#include <sys/sysmacros.h>

#include "device-table.h"
#include "tests.h"

/* The table only knows a device through its key function. */
struct Device {
        dev_t devnum;
        bool in;                /* what the table should hold */
        unsigned seen;          /* by the current walk */
};

static dev_t key(const Device *d) {
        return d->devnum;
}

#define N 3000
static Device devs[N];

static void devs_init(void) {
        for (unsigned i = 0; i < N; i++)
                /* loop-like runs, and numbers apart in the high bits */
                devs[i] = (Device) { .devnum = i % 3 ? makedev(7, i) : makedev(259 + i % 5, i * 16) };
}

static void check(const DeviceTable *t) {
        size_t in = 0, live = 0;

        for (unsigned i = 0; i < N; i++) {
                ASSERT_TRUE(device_table_get(t, devs[i].devnum) == (devs[i].in ? &devs[i] : NULL));
                in += devs[i].in;
        }
        for (size_t i = 0; i < t->n_slots; i++)
                live += !!device_table_slot(t, i);
        ASSERT_EQ_INT(t->n_devices, in);
        ASSERT_EQ_INT(live, in);
        /* at most 3/4 used, tombstones counted: every probe ends */
        ASSERT_TRUE((t->n_devices + t->n_tombstones) * 4 <= t->n_slots * 3);
}

static void put(DeviceTable *t, unsigned i) {
        ASSERT_EQ_INT(device_table_put(t, &devs[i]), 0);
        devs[i].in = true;
}

static void del(DeviceTable *t, unsigned i) {
        device_table_remove(t, &devs[i]);
        devs[i].in = false;
}

/* A walk knows the table was rehashed under it by the count of rehashes
 * (device_iter_next() asserts it did not change): growing counts, a
 * remove does not, a put without growing does not. */
TEST(device_table_counts_its_rehashes) {
        DeviceTable t = DEVICE_TABLE_INIT(key);
        unsigned before;

        devs_init();
        put(&t, 0);
        before = t.rehashes;
        ASSERT_TRUE(before > 0);                /* the first put makes the slots */
        del(&t, 0);
        put(&t, 1);
        ASSERT_EQ_INT(t.rehashes, before);
        for (unsigned i = 2; i < 100; i++)
                put(&t, i);
        ASSERT_TRUE(t.rehashes > before);
        device_table_done(&t);
}

TEST(device_table_put_get_remove) {
        DeviceTable t = DEVICE_TABLE_INIT(key);

        devs_init();
        ASSERT_TRUE(device_table_get(&t, makedev(7, 0)) == NULL);
        device_table_remove(&t, &devs[0]);      /* an empty table */
        for (unsigned i = 0; i < N; i++)
                put(&t, i);
        check(&t);
        ASSERT_EQ_INT(t.n_slots, 4096);         /* 3000 <= 4096 * 3/4 */
        for (unsigned i = 0; i < N; i += 2)
                del(&t, i);
        check(&t);
        device_table_remove(&t, &devs[0]);      /* not in it any more */
        check(&t);
        for (unsigned i = 0; i < N; i += 4)
                put(&t, i);
        check(&t);
        device_table_done(&t);
}

/* Devices that come and go in turn leave tombstones; the table rehashes
 * them away at its size rather than growing or filling up. */
TEST(device_table_churn) {
        DeviceTable t = DEVICE_TABLE_INIT(key);

        devs_init();
        for (unsigned i = 0; i < 100; i++)
                put(&t, i);
        for (unsigned round = 0; round < 200; round++) {
                for (unsigned i = 0; i < 100; i++)
                        del(&t, (round * 100 + i) % N);
                for (unsigned i = 0; i < 100; i++)
                        put(&t, (round * 100 + 100 + i) % N);
                check(&t);
        }
        ASSERT_EQ_INT(t.n_slots, 256);
        device_table_done(&t);
}

/* A walk from any slot, once round, removing as it goes: what the body
 * removes is the current device, or another one (nothing moves under the
 * walk). Every device in the table at the start is seen once, except one
 * removed before the walk came to it. */
static void walk(DeviceTable *t, size_t start, unsigned every) {
        for (unsigned i = 0; i < N; i++)
                devs[i].seen = 0;
        for (size_t v = 0; v < t->n_slots; v++) {
                Device *d = device_table_slot(t, (start + v) % t->n_slots);
                unsigned k;

                if (!d)
                        continue;
                d->seen++;
                k = (unsigned) (d - devs);
                if (k % every == 0)
                        del(t, k);
                if (k % every == 1 && k + 1 < N && devs[k + 1].in && !devs[k + 1].seen)
                        del(t, k + 1);  /* another, not seen yet: never seen */
        }
}

TEST(device_table_remove_while_walking) {
        DeviceTable t = DEVICE_TABLE_INIT(key);

        devs_init();
        for (unsigned i = 0; i < N; i++)
                put(&t, i);
        walk(&t, 1234, 3);
        for (unsigned i = 0; i < N; i++) {
                if (i % 3 == 0)
                        ASSERT_TRUE(!devs[i].in && devs[i].seen == 1);
                else if (devs[i].in)
                        ASSERT_EQ_INT(devs[i].seen, 1);
                else
                        ASSERT_TRUE(i % 3 == 2 && devs[i].seen == 0);
        }
        check(&t);
        /* all of them, in one walk */
        walk(&t, 0, 1);
        for (unsigned i = 0; i < N; i++)
                ASSERT_TRUE(!devs[i].in);
        check(&t);
        put(&t, 5);
        check(&t);
        device_table_done(&t);
}
