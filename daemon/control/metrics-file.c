/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>

#include "blkpolicyd-paths.h"
#include "metrics-file.h"
#include "util.h"

#define TEXTFILE_TMP ".blkpolicyd.prom.tmp"

void metrics_write_label(FILE *f, const char *v) {
        for (; *v; v++) {
                if (*v == '\\' || *v == '"')
                        fputc('\\', f);
                if (*v == '\n')
                        fputs("\\n", f);
                else
                        fputc(*v, f);
        }
}

void metrics_write_build_info(FILE *f) {
        fputs("# HELP blkpolicyd_build_info Always 1; the version of the running blkpolicyd\n"
              "# TYPE blkpolicyd_build_info gauge\nblkpolicyd_build_info{version=\"", f);
        metrics_write_label(f, PACKAGE_VERSION);
        fputs("\"} 1\n", f);
}

/* The textfile dir may be writable by others (node_exporter's often is):
 * everything is relative to the dir's fd, the temp file is created with
 * O_EXCL|O_NOFOLLOW so a planted symlink or file makes this write fail
 * instead of being followed, and rename() replaces a planted TEXTFILE
 * link itself, never its target. */
int metrics_file_replace(const char *dir, MetricsWriter write, void *userdata) {
        _cleanup_close_ int dfd = -1, fd = -1;
        _cleanup_fclose_ FILE *f = NULL;
        int r;

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        /* a temp file of ours left by a crash: unlinkat() removes a link, not its target */
        if (unlinkat(dfd, TEXTFILE_TMP, 0) < 0 && errno != ENOENT)
                return -errno;
        fd = openat(dfd, TEXTFILE_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        /* written as made, not built first: with per-device series at
         * 10,000 disks the text is some 4.6 MB */
        f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                (void) unlinkat(dfd, TEXTFILE_TMP, 0);
                return r;
        }
        (void) take_fd(&fd);    /* owned by f now */
        r = write(f, userdata);
        errno = 0;      /* ferror() from an earlier write leaves no errno of its own */
        if (r >= 0 && (fflush(f) != 0 || ferror(f)))
                r = errno > 0 ? -errno : -EIO;
        if (r >= 0 && fsync(fileno(f)) < 0)
                r = -errno;
        if (r >= 0 && renameat(dfd, TEXTFILE_TMP, dfd, METRICS_TEXTFILE) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dfd, TEXTFILE_TMP, 0);
        return r;
}

int metrics_file_remove(const char *dir) {
        _cleanup_close_ int dfd = -1;
        int r = 0;

        if (!dir)
                return 0;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? 0 : -errno;
        /* unlinkat() removes the links, never what a planted link points to */
        if (unlinkat(dfd, METRICS_TEXTFILE, 0) < 0 && errno != ENOENT)
                r = -errno;
        if (unlinkat(dfd, TEXTFILE_TMP, 0) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

typedef struct Stopped {
        const char *result, *code, *status;
} Stopped;

/* A label not known is left out: Prometheus drops an empty one anyway. */
static void exit_label(FILE *f, const char *name, const char *value) {
        if (!value || !*value)
                return;
        fprintf(f, ",%s=\"", name);
        metrics_write_label(f, value);
        fputc('"', f);
}

/* Only the series that say the daemon is not running: a gauge of the
 * last run's left in place would be served as if it still held. */
static int write_stopped(FILE *f, void *userdata) {
        const Stopped *s = ASSERT_PTR(userdata);

        metrics_write_build_info(f);
        fputs("# HELP blkpolicyd_up 1 while blkpolicyd runs; 0 in the file it leaves when it stops\n"
              "# TYPE blkpolicyd_up gauge\nblkpolicyd_up 0\n", f);
        fputs("# HELP blkpolicyd_exit_info Always 1; how blkpolicyd last ended, as systemd's SERVICE_RESULT, "
              "EXIT_CODE and EXIT_STATUS say (result=\"success\": stopped on purpose)\n"
              "# TYPE blkpolicyd_exit_info gauge\nblkpolicyd_exit_info{result=\"", f);
        metrics_write_label(f, s->result);
        fputc('"', f);
        exit_label(f, "code", s->code);
        exit_label(f, "status", s->status);
        fputs("} 1\n", f);
        fprintf(f, "# HELP blkpolicyd_exit_timestamp_seconds When blkpolicyd ended (Unix time)\n"
                   "# TYPE blkpolicyd_exit_timestamp_seconds gauge\nblkpolicyd_exit_timestamp_seconds %.3f\n",
                (double) clock_usec(CLOCK_REALTIME) / 1e6);
        return 0;
}

int metrics_file_write_stopped(const char *dir, const char *result, const char *code, const char *status) {
        Stopped s = { result, code, status };

        return dir ? metrics_file_replace(dir, write_stopped, &s) : 0;
}
