/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sample.h"
#include "tests.h"
#include "util.h"

static char name[DISKSTAT_NAME_MAX];

static int parse(const char *line, DiskStat *st) {
        return diskstat_parse_line(line, strlen(line), st, name);
}

TEST(diskstats_field_counts) {
        DiskStat st;

        /* 6.x: 20 fields */
        ASSERT_EQ_INT(parse(" 254       0 vda 5216 1722 402290 1571 4008 3419 188962 4393 0 6068 7104 0 0 0 0 1210 1138\n", &st), 0);
        ASSERT_TRUE(st.n_fields == 20 && st.major == 254 && streq(name, "vda"));
        ASSERT_TRUE(st.c.rd_ios == 5216 && st.c.wr_sectors == 188962 && st.c.time_in_queue == 7104);
        /* 4.18-5.4: 18 fields */
        ASSERT_EQ_INT(parse("   8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15", &st), 0);
        ASSERT_TRUE(st.n_fields == 18 && st.c.time_in_queue == 11);
        /* before 4.18: 14 fields */
        ASSERT_EQ_INT(parse("   8 0 sda 1 2 3 4 5 6 7 8 9 10 11", &st), 0);
        ASSERT_TRUE(st.n_fields == 14 && st.c.io_ticks == 10);
}

TEST(diskstats_malformed_lines) {
        DiskStat st;

        ASSERT_TRUE(parse("", &st) < 0);
        ASSERT_TRUE(parse("8 0 sda 1 2 3", &st) < 0);
        ASSERT_TRUE(parse("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12", &st) < 0);            /* 15 */
        ASSERT_TRUE(parse("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18", &st) < 0);
        ASSERT_TRUE(parse("8 0 sda 1 2 3 4 5 6 7 8 9 10 x1", &st) < 0);
        ASSERT_TRUE(parse("8 0 sda 1 2 3 4 5 6 7 8 9 10 -1", &st) < 0);
        ASSERT_TRUE(parse("8 0 sda 1 2 3 4 5 6 7 8 9 10 99999999999999999999999", &st) < 0);
        ASSERT_TRUE(parse("x 0 sda 1 2 3 4 5 6 7 8 9 10 11", &st) < 0);
        ASSERT_TRUE(parse("8 0 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1 2 3 4 5 6 7 8 9 10 11", &st) < 0);
        /* a line cut short by len is judged by what is inside len */
        ASSERT_EQ_INT(diskstat_parse_line("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12", strlen("8 0 sda 1 2 3 4 5 6 7 8 9 10 11"), &st,
                                          name), 0);
}

TEST(signals_from_two_samples) {
        DiskStat a = { .c.rd_ios = 1000, .c.rd_sectors = 8000, .c.rd_ticks = 500, .c.wr_ios = 0, .c.io_ticks = 100,
                       .c.time_in_queue = 1000 };
        DiskStat b = a;
        Signals s;

        /* one second: 2000 reads of 4 KiB taking 1 ms each, busy 500 ms, depth 2 */
        b.c.rd_ios += 2000;
        b.c.rd_sectors += 2000 * 8;
        b.c.rd_ticks += 2000;
        b.c.io_ticks += 500;
        b.c.time_in_queue += 2000;
        b.in_flight = 3;
        signals_compute(&a.c, &b, 1000, 4, &s);
        ASSERT_TRUE(s.valid);
        ASSERT_TRUE(s.riops == 2000 && s.iops == 2000 && s.wiops == 0);
        ASSERT_TRUE(s.rmbps > 8.19 && s.rmbps < 8.20);
        ASSERT_TRUE(s.rlat_ms == 1 && s.lat_ms == 1 && s.wlat_ms == 0);
        ASSERT_TRUE(s.util == 50 && s.qdepth == 2 && s.inflight == 3);
        ASSERT_TRUE(s.dispatch_busy == 4);
}

TEST(stale_dispatch_busy_reads_as_idle) {
        DiskStat a = { .c.rd_ios = 10 }, b = a;
        Signals s;

        /* no I/O in the tick: the EWMA was not updated, it says nothing */
        signals_compute(&a.c, &b, 1000, 7, &s);
        ASSERT_TRUE(s.valid && s.dispatch_busy == 0);
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(s.dispatch_busy == -1);
}

TEST(counters_going_backwards_invalidate_the_tick) {
        DiskStat a = { .c.rd_ios = 4294967290u, .c.io_ticks = 50 }, b = { .c.rd_ios = 10, .c.io_ticks = 60 };
        Signals s;

        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(!s.valid);
        signals_compute(NULL, &b, 1000, -1, &s);
        ASSERT_TRUE(!s.valid);
        signals_compute(&b.c, &b, 0, -1, &s);
        ASSERT_TRUE(!s.valid);
}

/* The mix of one tick: 300 reads of 4 KiB, 100 writes of 128 KiB, and 100
 * merges (40 reads, 60 writes) into them. */
TEST(mix_signals_from_two_samples) {
        DiskStat a = { .c.rd_ios = 50, .c.rd_sectors = 400, .c.wr_ios = 7, .c.wr_sectors = 70, .c.rd_merges = 3,
                       .c.wr_merges = 9, .c.io_ticks = 10, .c.time_in_queue = 20 };
        DiskStat b = a;
        Signals s;

        b.c.rd_ios += 300;
        b.c.rd_sectors += 300 * 8;
        b.c.wr_ios += 100;
        b.c.wr_sectors += 100 * 256;
        b.c.rd_merges += 40;
        b.c.wr_merges += 60;
        b.c.io_ticks += 100;
        b.c.time_in_queue += 400;
        /* half a second: the mix does not depend on the tick's length */
        signals_compute(&a.c, &b, 500, -1, &s);
        ASSERT_TRUE(s.valid);
        ASSERT_TRUE(s.wpct == 25);
        ASSERT_TRUE(s.rkb == 4 && s.wkb == 128);
        ASSERT_TRUE(s.merge_pct == 20);
        ASSERT_TRUE(signals_get(&s, SIGNAL_WPCT) == 25 && signals_get(&s, SIGNAL_MERGE_PCT) == 20);
        ASSERT_TRUE(s.riops == 600 && s.wiops == 200);
}

/* A ratio with nothing to divide by is unknown, not 0: a tick of reads
 * only has no write size, and 0 KiB would be a size it never saw. */
TEST(mix_of_a_tick_without_io_is_unknown) {
        DiskStat a = { .c.rd_ios = 10, .c.rd_sectors = 80, .c.wr_ios = 5, .c.io_ticks = 7 }, b = a;
        Signals s;

        /* idle: valid, every ratio unknown */
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(s.valid && s.iops == 0);
        ASSERT_TRUE(!signal_known(s.wpct) && !signal_known(s.rkb) && !signal_known(s.wkb) &&
                    !signal_known(s.merge_pct));
        /* reads only: no write size, 0% writes, no merges */
        b.c.rd_ios += 4;
        b.c.rd_sectors += 4 * 16;
        b.c.io_ticks += 1;
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(s.valid && s.wpct == 0 && s.rkb == 8 && !signal_known(s.wkb) && s.merge_pct == 0);
        /* merges and no completion yet: every request seen was merged, the
         * rest of the mix is unknown (the idle shortcut must not hide it) */
        b = a;
        b.c.wr_merges += 3;
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(s.valid && s.merge_pct == 100 && !signal_known(s.wpct) && !signal_known(s.wkb));
}

/* A merge or sector counter that went back is a wrap or a replaced
 * device, as for the others: the whole tick is invalid, no mix is made of
 * a negative delta. */
TEST(mix_counters_going_backwards_invalidate_the_tick) {
        DiskStat a = { .c.rd_ios = 100, .c.rd_sectors = 800, .c.rd_merges = 50, .c.wr_merges = 50,
                       .c.wr_sectors = 900, .c.wr_ios = 20 };
        DiskStat b = a;
        Signals s;

        b.c.rd_merges = 10;     /* went back, nothing else moved */
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(!s.valid);
        b = a;
        b.c.wr_ios += 10;
        b.c.wr_sectors = 100;   /* went back while writes completed */
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(!s.valid);
        b = a;
        b.c.wr_merges -= 1;
        b.c.rd_ios += 5;
        signals_compute(&a.c, &b, 1000, -1, &s);
        ASSERT_TRUE(!s.valid);
}

/* A SampleState gives a tick the same Signals as signals_compute() over
 * the full counters, and the same again when they are asked for later:
 * random ticks, idle ones (some with only the sectors or the times
 * moving), ones with a counter gone back, ones without an interval, from
 * counters near 2^32 (the kernel's own width of the time fields). */
static uint64_t rnd_state = 88172;

static uint64_t rnd(void) {
        rnd_state ^= rnd_state << 13;
        rnd_state ^= rnd_state >> 7;
        rnd_state ^= rnd_state << 17;
        return rnd_state;
}

static bool signals_same(const Signals *a, const Signals *b) {
        if (a->valid != b->valid)
                return false;
        for (int i = 0; i < _SIGNAL_MAX; i++) {
                float x = (float) signals_get(a, (SignalId) i), y = (float) signals_get(b, (SignalId) i);

                if (memcmp(&x, &y, sizeof(float)) != 0)
                        return false;
        }
        return true;
}

static void step(DiskCounters *c, uint64_t max_step) {
        uint64_t *f[] = { &c->rd_ios, &c->rd_merges, &c->rd_sectors, &c->rd_ticks, &c->wr_ios,
                          &c->wr_merges, &c->wr_sectors, &c->wr_ticks, &c->io_ticks, &c->time_in_queue };
        bool idle = rnd() % 4 == 0;

        for (size_t i = 0; i < ELEMENTSOF(f); i++) {
                bool time_or_sectors = i == 2 || i == 3 || i == 6 || i == 7;

                if (idle && !(time_or_sectors && rnd() % 2))
                        continue;
                if (!idle && rnd() % 64 == 0 && *f[i] > 3)
                        *f[i] -= rnd() % 3 + 1;         /* back */
                else
                        *f[i] += rnd() % max_step;
                /* the kernel prints the time fields as 32-bit: they wrap there */
                if (i == 3 || i == 7 || i == 8 || i == 9)
                        *f[i] = (uint32_t) *f[i];
        }
}

static unsigned sample_state_run(uint64_t start, uint64_t max_step, unsigned *valid) {
        DiskStat prev, now = { .c = { start, start, start, start, start, start, start, start, start, start } };
        SampleState s = {};
        unsigned mismatches = 0;

        *valid = 0;
        for (unsigned tick = 0; tick < 20000; tick++) {
                uint64_t interval_us = tick % 97 == 5 ? 0 : 1 + rnd() % 5000000;
                double busy = tick % 3 ? -1.0 : (double) (rnd() % 10);
                Signals want, got, again;

                prev = now;
                step(&now.c, max_step);
                now.in_flight = rnd() % 300;
                signals_compute(tick ? &prev.c : NULL, &now, (double) interval_us / 1000.0, busy, &want);
                ASSERT_EQ_INT(sample_state_update(&s, &now, interval_us, busy, &got), 0);
                sample_state_signals(&s, &again);
                mismatches += !signals_same(&want, &got) + !signals_same(&got, &again);
                *valid += want.valid;
        }
        sample_state_done(&s);
        return mismatches;
}

/* A disk that never moved keeps no deltas (SampleState.delta) and still
 * gives what signals_compute() gives, still ticks with or without an
 * interval, with sectors moving without an I/O completing; the first tick
 * that moves (a counter, I/O in flight, dispatch_busy read) makes them,
 * and still ticks after it keep them, at 0. */
TEST(sample_state_of_a_disk_that_never_moved) {
        DiskStat prev, now = { .c = { .rd_ios = 5, .rd_sectors = 40, .io_ticks = 3 } };
        SampleState s = {};
        Signals want, got, again;
        struct { uint64_t sectors, ios, in_flight, interval_us; double busy; bool delta; } ticks[] = {
                { 0, 0, 0, 0, -1, false },              /* the first sample */
                { 0, 0, 0, 1000000, -1, false },
                { 0, 0, 0, 0, -1, false },              /* no interval */
                { 8, 0, 0, 1000000, -1, false },        /* sectors alone: still */
                { 0, 0, 2, 1000000, -1, true },         /* in flight */
                { 0, 0, 0, 1000000, -1, true },         /* still, the deltas kept at 0 */
                { 8, 1, 0, 500000, 3, true },
        };

        for (size_t i = 0; i < ELEMENTSOF(ticks); i++) {
                prev = now;
                now.c.rd_sectors += ticks[i].sectors;
                now.c.rd_ios += ticks[i].ios;
                now.c.io_ticks += ticks[i].ios;
                now.in_flight = ticks[i].in_flight;
                signals_compute(i ? &prev.c : NULL, &now, (double) ticks[i].interval_us / 1000.0, ticks[i].busy,
                                &want);
                ASSERT_EQ_INT(sample_state_update(&s, &now, ticks[i].interval_us, ticks[i].busy, &got), 0);
                sample_state_signals(&s, &again);
                ASSERT_TRUE(signals_same(&want, &got) && signals_same(&got, &again));
                ASSERT_TRUE((s.delta != NULL) == ticks[i].delta);
        }
        sample_state_done(&s);
        ASSERT_TRUE(s.delta == NULL);
        sample_state_done(NULL);
}

TEST(sample_state_gives_what_signals_compute_gives) {
        unsigned valid;

        ASSERT_TRUE(sample_state_run(0, 100000, &valid) == 0);
        ASSERT_TRUE(valid > 10000 && valid < 19900);
        /* the time fields cross 2^32 on the way: the kernel's wrap is a step back, as before */
        ASSERT_TRUE(sample_state_run(UINT32_MAX - 100000000, 10000000, &valid) == 0);
        ASSERT_TRUE(valid > 10000 && valid < 19900);
        /* steps past 32 bits: up to 2^33 sectors (4 TiB) in one tick */
        ASSERT_TRUE(sample_state_run(0, UINT64_C(1) << 33, &valid) == 0);
}

/* The kernel prints the time fields as 32-bit: when one wraps, the tick
 * is invalid (as signals_compute() says of it), and the one after is
 * fine again. The 64-bit counters are kept in 48 bits: a value past 2^32
 * still gives its exact delta. */
TEST(sample_state_wraps_and_widths) {
        DiskStat a = { .c.rd_ios = 100, .c.io_ticks = UINT32_MAX - 10, .c.time_in_queue = UINT32_MAX - 10,
                       .c.rd_sectors = (UINT64_C(1) << 40) + 5 };
        DiskStat b = a;
        SampleState s = {};
        Signals sig;

        ASSERT_EQ_INT(sample_state_update(&s, &a, 0, -1, &sig), 0);
        ASSERT_TRUE(!sig.valid);
        b.c.rd_ios += 10;
        b.c.io_ticks = 5;               /* wrapped in the kernel */
        b.c.time_in_queue = 20;
        b.c.rd_sectors += 80;
        ASSERT_EQ_INT(sample_state_update(&s, &b, 1000000, -1, &sig), 0);
        ASSERT_TRUE(!sig.valid);
        sample_state_signals(&s, &sig);
        ASSERT_TRUE(!sig.valid);
        a = b;
        b.c.rd_ios += 10;
        b.c.io_ticks += 500;
        b.c.time_in_queue += 1000;
        b.c.rd_sectors += (UINT64_C(1) << 33) + 80;     /* more than 2^32 in one tick */
        ASSERT_EQ_INT(sample_state_update(&s, &b, 1000000, -1, &sig), 0);
        ASSERT_TRUE(sig.valid && sig.riops == 10 && sig.util == 50 && sig.qdepth == 1);
        ASSERT_TRUE(sig.rkb == (float) ((double) ((UINT64_C(1) << 33) + 80) / 2 / 10));
        sample_state_signals(&s, &sig);
        ASSERT_TRUE(sig.valid && sig.riops == 10 && sig.rkb == (float) ((double) ((UINT64_C(1) << 33) + 80) / 2 / 10));
        /* a sector counter gone back is a step back however wide it is */
        b.c.rd_ios += 1;
        b.c.rd_sectors -= 8;
        ASSERT_EQ_INT(sample_state_update(&s, &b, 1000000, -1, &sig), 0);
        ASSERT_TRUE(!sig.valid);
        sample_state_done(&s);
}

/* The idle shortcut of signals_compute(): sectors moving without an I/O
 * completing give rates of 0, and so do the kept deltas. */
TEST(sample_state_idle_tick) {
        DiskStat a = { .c.rd_ios = 7, .c.rd_sectors = 56, .c.rd_ticks = 3, .in_flight = 2 }, b = a;
        SampleState s = {};
        Signals sig;

        ASSERT_EQ_INT(sample_state_update(&s, &a, 0, -1, &sig), 0);
        b.c.rd_sectors += 8;
        b.c.rd_ticks += 9;
        ASSERT_EQ_INT(sample_state_update(&s, &b, 1000000, 4, &sig), 0);
        ASSERT_TRUE(sig.valid && sig.rmbps == 0 && sig.rlat_ms == 0 && sig.inflight == 2 && sig.dispatch_busy == 0);
        sample_state_signals(&s, &sig);
        ASSERT_TRUE(sig.valid && sig.rmbps == 0 && sig.rlat_ms == 0 && sig.inflight == 2 && sig.dispatch_busy == 0);
        ASSERT_TRUE(!signal_known(sig.rkb) && !signal_known(sig.wpct));
        sample_state_done(&s);
}

/* A read in slices takes devices at different times: a device read 300 ms
 * into the last tick's read and 20 ms into this one's was last read
 * 280 ms less than a tick ago, and its rates are over that. */
TEST(sample_interval_follows_each_device_into_the_read) {
        SampleState s = {};
        DiskStat st = { .c = { .rd_ios = 100 } };
        Signals sig;

        ASSERT_EQ_INT(sample_state_interval(&s, 1000000, 20), 1000000);        /* no sample yet */
        ASSERT_EQ_INT(sample_state_update(&s, &st, 0, -1, &sig), 0);
        s.read_ms = 300;
        ASSERT_EQ_INT(sample_state_interval(&s, 1000000, 20), 720000);
        ASSERT_EQ_INT(sample_state_interval(&s, 1000000, 300), 1000000);
        ASSERT_EQ_INT(sample_state_interval(&s, 1000000, 900), 1600000);
        ASSERT_EQ_INT(sample_state_interval(&s, 0, 900), 0);                   /* no interval: none */
        ASSERT_EQ_INT(sample_state_interval(&s, 200000, 0), 1);                /* never 0 or below */

        /* the rates are over the device's own interval: read 500 ms later
         * into this tick's read, 100 reads in 1.5 s */
        st.c.rd_ios = 200;
        ASSERT_EQ_INT(sample_state_update(&s, &st, sample_state_interval(&s, 1000000, 800), -1, &sig), 0);
        ASSERT_TRUE(sig.valid);
        ASSERT_TRUE(sig.riops > 66.6f && sig.riops < 66.7f);
        sample_state_done(&s);
}

TEST(signal_names) {
        for (int i = 0; i < _SIGNAL_MAX; i++)
                ASSERT_EQ_INT(signal_from_string(signal_to_string((SignalId) i)), i);
        ASSERT_TRUE(signal_from_string("bogus") < 0);
        ASSERT_TRUE(signal_from_string("wpct") == SIGNAL_WPCT && signal_from_string("rkb") == SIGNAL_RKB);
        ASSERT_TRUE(signal_from_string("wkb") == SIGNAL_WKB && signal_from_string("merge_pct") == SIGNAL_MERGE_PCT);
        ASSERT_TRUE(signal_from_string("merge") < 0 && signal_from_string("wpct ") < 0);
}
