/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <sys/stat.h>

#include "state-file.h"
#include "tests.h"
#include "util.h"

static unsigned T(const char *attr) {
        return (unsigned) tunable_find_attr(attr);
}

static void rm_rf(const char *dir) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ASSERT_EQ_INT(system(cmd), 0);
}

static void sample_record(DeviceRecord *r) {
        *r = (DeviceRecord) { .id = { .major = 7, .minor = 9, .queue_id = 18398, .diskseq = 12 } };
        ASSERT_EQ_INT(device_record_found(r, T("nr_requests"), "256"), 1);
        ASSERT_EQ_INT(device_record_found(r, TUNABLE_SCHEDULER, "mq-deadline"), 1);
        ASSERT_EQ_INT(device_record_found(r, TUNABLE_SCHEDULER, "none"), 0);        /* our own value never overwrites */
        ASSERT_EQ_INT(device_record_written(r, TUNABLE_SCHEDULER, "none"), 1);
        ASSERT_EQ_INT(device_record_written(r, T("nr_requests"), WRITTEN_UNKNOWN), 1);
        ASSERT_TRUE(device_record_intent(r, T("nr_requests"), "64") == 1 && device_record_intent(r, T("nr_requests"), NULL) == 1);
        ASSERT_EQ_INT(device_record_found(r, TUNABLES_MAX, "x"), -EINVAL);
}

TEST(record_model_and_text_round_trip) {
        DeviceRecord r, back = {};
        _cleanup_free_ char *text = NULL;

        sample_record(&r);
        /* kept in tunables[] order */
        ASSERT_TRUE(device_record_count(&r) == 2 && r.attrs->at[0].tunable == TUNABLE_SCHEDULER);
        text = device_record_format(&r, "loop9");
        ASSERT_STREQ(text, "# blkpolicyd state v2\ndevice loop9 7:9 queue=18398 diskseq=12\n"
                           "scheduler mq-deadline none -\nnr_requests 256 * -\n");
        ASSERT_EQ_INT(device_record_parse(text, strlen(text), &back, NULL), 0);
        ASSERT_TRUE(device_identity_same(&r.id, &back.id) && back.id.diskseq == 12);
        ASSERT_STREQ(device_record_get(&back, T("nr_requests"))->written, WRITTEN_UNKNOWN);
        ASSERT_TRUE(device_record_drop(&back, TUNABLE_SCHEDULER) == 1 && device_record_drop(&back, TUNABLE_SCHEDULER) == 0);
        ASSERT_EQ_INT(device_record_count(&back), 1);
        device_record_done(&back);
        device_record_done(&r);
        device_record_done(NULL);
}

TEST(record_parse_rejects_and_counts) {
        DeviceRecord r = {};
        static const char torn[] = "# blkpolicyd state v2\ndevice loop9 7:9 queue=1 diskseq=0\n"
                                   "scheduler none mq-deadline -\ngarbage\nunknown_attr 1 2 -\n"
                                   "scheduler bfq bfq -\nread_ahead_kb 128 4096 - extra\nnr_requests * 1 -\n"
                                   "rq_affinity 1 2\nread_ahead_kb 128 40";

        /* six bad lines and a torn last one (no newline: cut by a crash), counted */
        ASSERT_EQ_INT(device_record_parse(torn, strlen(torn), &r, NULL), 7);
        ASSERT_EQ_INT(device_record_count(&r), 1);
        ASSERT_STREQ(device_record_get(&r, TUNABLE_SCHEDULER)->found, "none");
        ASSERT_STREQ(device_record_get(&r, TUNABLE_SCHEDULER)->written, "mq-deadline");
        ASSERT_TRUE(!device_record_get(&r, TUNABLE_SCHEDULER)->intent);
        device_record_done(&r);
        ASSERT_EQ_INT(device_record_parse("# blkpolicyd originals v1\nscheduler=none\n", 40, &r, NULL), -EBADMSG);
        ASSERT_EQ_INT(device_record_parse("# blkpolicyd state v2\ndevice x\n", 30, &r, NULL), -EBADMSG);
        ASSERT_EQ_INT(device_record_parse("# blkpolicyd state v2\n\0device", 29, &r, NULL), -EBADMSG);
        ASSERT_EQ_INT(device_record_parse("", 0, &r, NULL), -EBADMSG);
}

TEST(state_dir_save_load_remove) {
        char dir[] = "/tmp/blkpolicyd-test-state-XXXXXX";
        StateDir sd = STATE_DIR_NULL;
        DeviceRecord r, back = {};
        unsigned (*list)[2] = NULL;
        size_t n;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), 0);
        sample_record(&r);
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), 0);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &back, NULL), 0);
        ASSERT_TRUE(device_record_count(&back) == 2 && device_identity_same(&r.id, &back.id));
        device_record_done(&back);
        ASSERT_TRUE(state_list(&sd, &list, &n) == 0 && n == 1 && list[0][0] == 7 && list[0][1] == 9);
        free(list);
        /* a record filed under another number is not that device's */
        ASSERT_EQ_INT(renameat(sd.fd, "7:9", sd.fd, "7:10"), 0);
        ASSERT_EQ_INT(state_load(&sd, 7, 10, &back, NULL), -EBADMSG);
        ASSERT_EQ_INT(state_remove(&sd, 7, 10), 0);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &back, NULL), -ENOENT);
        /* a value the file could not give back: refused, the record on disk kept */
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), 0);
        ASSERT_EQ_INT(device_record_written(&r, TUNABLE_SCHEDULER, ""), 1);
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), -EINVAL);
        ASSERT_EQ_INT(device_record_written(&r, TUNABLE_SCHEDULER, "-"), 1);
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), -EINVAL);
        ASSERT_EQ_INT(device_record_intent(&r, TUNABLE_SCHEDULER, "two words"), 1);
        ASSERT_EQ_INT(device_record_written(&r, TUNABLE_SCHEDULER, "none"), 1);
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), -EINVAL);
        ASSERT_EQ_INT(device_record_intent(&r, TUNABLE_SCHEDULER, NULL), 1);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &back, NULL), 0);
        ASSERT_STREQ(device_record_get(&back, TUNABLE_SCHEDULER)->written, "none");
        device_record_done(&back);
        /* an empty record is no file */
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), 0);
        while (device_record_count(&r))
                (void) device_record_drop(&r, r.attrs->at[0].tunable);
        ASSERT_TRUE(state_save(&sd, &r, "loop9") == 0 && state_load(&sd, 7, 9, &back, NULL) == -ENOENT);
        device_record_done(&r);
        state_dir_close(&sd);
        state_dir_close(&sd);
        rm_rf(dir);
}

/* A record with unreadable lines is kept as M:m.torn and its readable part
 * saved as M:m: renamed away, the originals were nowhere on disk until a
 * pass saved again, and a second crash before that lost them. */
TEST(state_set_aside_keeps_a_record_under_the_number) {
        static const char torn[] = "# blkpolicyd state v2\ndevice loop9 7:9 queue=18398 diskseq=12\n"
                                   "scheduler mq-deadline none -\ngarbage-line\n";
        char dir[] = "/tmp/blkpolicyd-test-state-XXXXXX";
        StateDir sd = STATE_DIR_NULL;
        DeviceRecord back = {}, again = {};
        int fd;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), 0);
        fd = openat(sd.fd, "7:9", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0 && write(fd, torn, strlen(torn)) == (ssize_t) strlen(torn) && close(fd) == 0);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &back, NULL), 1);          /* one unreadable line */
        ASSERT_EQ_INT(state_set_aside(&sd, &back, "loop9"), 0);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &again, NULL), 0);         /* the readable part, whole */
        ASSERT_TRUE(device_record_count(&again) == 1 && device_identity_same(&again.id, &back.id));
        ASSERT_STREQ(device_record_get(&again, TUNABLE_SCHEDULER)->found, "mq-deadline");
        ASSERT_EQ_INT(faccessat(sd.fd, "7:9.torn", F_OK, 0), 0);       /* the torn one, for the admin */
        /* an older .torn is replaced, the record stays */
        ASSERT_EQ_INT(state_set_aside(&sd, &again, "loop9"), 0);
        device_record_done(&again);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &again, NULL), 0);
        device_record_done(&again);
        device_record_done(&back);
        state_dir_close(&sd);
        rm_rf(dir);
}

/* Issue: another user's symlink at devices/loopN.tmp made root overwrite
 * an arbitrary file, and a planted record was written to sysfs at stop. */
TEST(state_dir_refuses_hostile_layouts) {
        char dir[] = "/tmp/blkpolicyd-test-state-XXXXXX", path[PATH_MAX], target[PATH_MAX];
        StateDir sd = STATE_DIR_NULL;
        DeviceRecord r;
        struct stat st;
        FILE *f;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        ASSERT_EQ_INT(chmod(dir, 0777), 0);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), -EPERM);         /* world-writable: refused */
        ASSERT_EQ_INT(chmod(dir, 0755), 0);
        snprintf(path, sizeof(path), "%s/devices", dir);
        ASSERT_TRUE(mkdir(path, 0770) == 0 || errno == EEXIST);
        ASSERT_EQ_INT(chmod(path, 0770), 0);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), -EPERM);         /* group-writable devices/ */
        ASSERT_EQ_INT(rmdir(path), 0);
        snprintf(target, sizeof(target), "%s/elsewhere", dir);
        ASSERT_TRUE(mkdir(target, 0700) == 0 && symlink(target, path) == 0);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), -ELOOP);         /* a symlink for devices/ */
        ASSERT_EQ_INT(unlink(path), 0);

        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), 0);
        snprintf(target, sizeof(target), "%s/victim", dir);
        f = fopen(target, "we");
        ASSERT_TRUE(f && fputs("precious\n", f) >= 0 && fclose(f) == 0);
        ASSERT_EQ_INT(symlinkat(target, sd.fd, ".7:9.tmp"), 0);       /* planted temporary */
        sample_record(&r);
        ASSERT_EQ_INT(state_save(&sd, &r, "loop9"), 0);
        ASSERT_TRUE(stat(target, &st) == 0 && st.st_size == 9);       /* not followed */
        ASSERT_TRUE(unlinkat(sd.fd, "7:9", 0) == 0 && symlinkat(target, sd.fd, "7:9") == 0);
        DeviceRecord back = {};
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &back, NULL), -EBADMSG);          /* a symlink is no record */
        device_record_done(&r);
        state_dir_close(&sd);
        rm_rf(dir);
}

typedef struct Saver {
        const StateDir *sd;
        uint64_t queue_id;
        int failed;
} Saver;

static void *save_many(void *arg) {
        Saver *s = arg;
        DeviceRecord r;

        sample_record(&r);
        r.id.queue_id = s->queue_id;
        for (int i = 0; i < 300; i++)
                s->failed += state_save(s->sd, &r, "loop9") != 0;
        device_record_done(&r);
        return NULL;
}

static bool has_temporary(int dirfd) {
        DIR *d = fdopendir(openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        struct dirent *de;
        bool found = false;

        ASSERT_TRUE(d != NULL);
        while ((de = readdir(d)))
                found |= de->d_name[0] == '.' && strstr(de->d_name, ".tmp") != NULL;
        closedir(d);
        return found;
}

/* Issue #32 item 4: two saves at one number (a disk replaced while a pass
 * of the old one saves, or the loop and a worker) shared ".M:m.tmp": one
 * unlinked the other's as stale and renamed a half-written file, or found
 * its own gone. Every save takes a temporary of its own; those a crash
 * left are removed when a writer opens the dir. */
TEST(state_temporaries_unique_and_cleaned) {
        char dir[] = "/tmp/blkpolicyd-test-state-XXXXXX", target[PATH_MAX];
        StateDir sd = STATE_DIR_NULL;
        Saver a = { .sd = &sd, .queue_id = 1001 }, b = { .sd = &sd, .queue_id = 1002 };
        pthread_t ta, tb;
        DeviceRecord back = {};
        struct stat st;
        FILE *f;
        int fd;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), 0);
        ASSERT_TRUE(pthread_create(&ta, NULL, save_many, &a) == 0 && pthread_create(&tb, NULL, save_many, &b) == 0);
        ASSERT_TRUE(pthread_join(ta, NULL) == 0 && pthread_join(tb, NULL) == 0);
        ASSERT_TRUE(a.failed == 0 && b.failed == 0);
        ASSERT_EQ_INT(state_load(&sd, 7, 9, &back, NULL), 0);          /* whole: one save's, not a mix */
        ASSERT_TRUE(device_record_count(&back) == 2 && (back.id.queue_id == 1001 || back.id.queue_id == 1002));
        device_record_done(&back);
        ASSERT_TRUE(!has_temporary(sd.fd));

        /* a crash's leftovers: a temporary, and a link planted under that name */
        snprintf(target, sizeof(target), "%s/victim", dir);
        f = fopen(target, "we");
        ASSERT_TRUE(f && fputs("precious\n", f) >= 0 && fclose(f) == 0);
        fd = openat(sd.fd, ".7:9.1001.7.tmp", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0 && close(fd) == 0);
        ASSERT_EQ_INT(symlinkat(target, sd.fd, ".7:8.tmp"), 0);
        fd = openat(sd.fd, ".keep", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0 && close(fd) == 0);
        state_dir_close(&sd);
        ASSERT_EQ_INT(state_dir_open(dir, false, &sd), 0);            /* a reader removes nothing */
        ASSERT_TRUE(has_temporary(sd.fd));
        state_dir_close(&sd);
        ASSERT_EQ_INT(state_dir_open(dir, true, &sd), 0);
        ASSERT_TRUE(!has_temporary(sd.fd));
        ASSERT_TRUE(fstatat(sd.fd, ".keep", &st, 0) == 0 && fstatat(sd.fd, "7:9", &st, 0) == 0);
        ASSERT_TRUE(stat(target, &st) == 0 && st.st_size == 9);       /* the link's target untouched */
        state_dir_close(&sd);
        rm_rf(dir);
}
