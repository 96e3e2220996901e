/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ublk-null: the smallest ublk server that gives the VM test bed a real ublk
 * disk. One queue, every request completed at once, no data kept.
 *
 *   ublk-null            prints "ublkbN" once the disk exists, then serves
 *                        until SIGTERM, which stops the disk (a remove uevent)
 *
 * The order matters: START_DEV runs add_disk() inside the io_uring_enter()
 * of the thread that issues it, and add_disk() reads the partition table
 * through the new queue. So the queue is served by a thread of its own that
 * has fetched every tag first; issuing START_DEV from the serving thread
 * deadlocks the VM.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/ublk_cmd.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define QUEUE_DEPTH 32
#define IO_BUF_BYTES (64u << 10)
#define DEV_BYTES (256ull << 20)

/* The ioctl-encoded opcodes; Debian 12's uapi headers (6.1) predate their
 * names, and kernels without CONFIG_BLKDEV_UBLK_LEGACY_OPCODES take only
 * these. */
#define CTRL_OP(nr) ((uint32_t) _IOWR('u', nr, struct ublksrv_ctrl_cmd))
#define IO_OP(nr) ((uint32_t) _IOWR('u', nr, struct ublksrv_io_cmd))

typedef struct Server {
        int ctrl_fd, char_fd;
        struct io_uring ctrl_ring;
        struct ublksrv_ctrl_dev_info info;
        const struct ublksrv_io_desc *descs;
        void *bufs[QUEUE_DEPTH];
} Server;

/* The command area at the end of an SQE; with SQE128 it runs into the next
 * 64 bytes, which the compiler's bounds tracking of sqe->cmd[0] cannot know. */
static void *sqe_cmd(struct io_uring_sqe *sqe) {
        return (void *) ((uintptr_t) sqe + offsetof(struct io_uring_sqe, cmd));
}

static int ctrl_cmd(Server *s, uint32_t nr, void *buf, uint32_t len, uint64_t data0) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ctrl_ring);
        struct io_uring_cqe *cqe;
        int r;

        struct ublksrv_ctrl_cmd c = {
                .dev_id = s->info.dev_id,
                .queue_id = (uint16_t) -1,      /* ADD_DEV refuses anything else */
                .addr = (uint64_t) (uintptr_t) buf,
                .len = len,
                .data = { data0 },
        };

        if (!sqe)
                return -EBUSY;
        memset(sqe, 0, sizeof(*sqe));
        sqe->opcode = IORING_OP_URING_CMD;
        sqe->fd = s->ctrl_fd;
        sqe->cmd_op = CTRL_OP(nr);
        memcpy(sqe_cmd(sqe), &c, sizeof(c));    /* 32 bytes: needs the SQE128 ring */

        r = io_uring_submit_and_wait(&s->ctrl_ring, 1);
        if (r < 0)
                return r;
        r = io_uring_wait_cqe(&s->ctrl_ring, &cqe);
        if (r < 0)
                return r;
        r = cqe->res;
        io_uring_cqe_seen(&s->ctrl_ring, cqe);
        return r;
}

static void queue_io(struct io_uring *ring, Server *s, uint32_t nr, uint16_t tag, int32_t result) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

        if (!sqe)               /* cannot happen: the ring has a slot per tag */
                abort();
        memset(sqe, 0, sizeof(*sqe));
        sqe->opcode = IORING_OP_URING_CMD;
        sqe->fd = s->char_fd;
        sqe->cmd_op = IO_OP(nr);
        sqe->user_data = tag;
        struct ublksrv_io_cmd c = {
                .q_id = 0,
                .tag = tag,
                .result = result,
                .addr = (uint64_t) (uintptr_t) s->bufs[tag],
        };
        memcpy(sqe_cmd(sqe), &c, sizeof(c));    /* 16 bytes: fits a plain SQE */
}

static int32_t complete(const struct ublksrv_io_desc *d) {
        switch (ublksrv_get_op(d)) {
        case UBLK_IO_OP_READ:
        case UBLK_IO_OP_WRITE:
                return (int32_t) d->nr_sectors << 9;
        default:                /* flush, discard, write zeroes: nothing to do */
                return 0;
        }
}

static void *serve_queue(void *arg) {
        Server *s = arg;
        struct io_uring ring;
        unsigned live = QUEUE_DEPTH;

        if (io_uring_queue_init(QUEUE_DEPTH, &ring, 0) < 0) {
                perror("ublk-null: io_uring_queue_init");
                exit(EXIT_FAILURE);
        }
        for (uint16_t tag = 0; tag < QUEUE_DEPTH; tag++)
                queue_io(&ring, s, UBLK_IO_FETCH_REQ, tag, 0);

        while (live > 0) {
                struct io_uring_cqe *cqe;
                unsigned head, seen = 0;

                if (io_uring_submit_and_wait(&ring, 1) < 0 && errno != EINTR)
                        break;
                io_uring_for_each_cqe(&ring, head, cqe) {
                        uint16_t tag = (uint16_t) cqe->user_data;

                        seen++;
                        if (cqe->res != UBLK_IO_RES_OK) {       /* aborted: the disk is going */
                                live--;
                                continue;
                        }
                        queue_io(&ring, s, UBLK_IO_COMMIT_AND_FETCH_REQ, tag, complete(&s->descs[tag]));
                }
                io_uring_cq_advance(&ring, seen);
        }
        io_uring_queue_exit(&ring);
        return NULL;
}

static int setup(Server *s) {
        struct ublk_params p = {
                .len = sizeof(p),
                .types = UBLK_PARAM_TYPE_BASIC,
                .basic = {
                        .logical_bs_shift = 9,
                        .physical_bs_shift = 12,
                        .io_opt_shift = 12,
                        .io_min_shift = 9,
                        .max_sectors = IO_BUF_BYTES >> 9,
                        .dev_sectors = DEV_BYTES >> 9,
                },
        };
        char path[64];
        size_t desc_bytes = (QUEUE_DEPTH * sizeof(struct ublksrv_io_desc) + 4095) & ~(size_t) 4095;
        int r;

        s->info = (struct ublksrv_ctrl_dev_info) {
                .nr_hw_queues = 1,
                .queue_depth = QUEUE_DEPTH,
                .max_io_buf_bytes = IO_BUF_BYTES,
                .dev_id = (uint32_t) -1,        /* any free id */
        };
        r = ctrl_cmd(s, UBLK_CMD_ADD_DEV, &s->info, sizeof(s->info), 0);
        if (r < 0)
                return fprintf(stderr, "ublk-null: ADD_DEV: %s\n", strerror(-r)), r;
        r = ctrl_cmd(s, UBLK_CMD_SET_PARAMS, &p, sizeof(p), 0);
        if (r < 0)
                return fprintf(stderr, "ublk-null: SET_PARAMS: %s\n", strerror(-r)), r;

        snprintf(path, sizeof(path), "/dev/ublkc%u", s->info.dev_id);
        s->char_fd = open(path, O_RDWR | O_CLOEXEC);
        if (s->char_fd < 0)
                return fprintf(stderr, "ublk-null: %s: %m\n", path), -errno;
        s->descs = mmap(NULL, desc_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, s->char_fd,
                        UBLKSRV_CMD_BUF_OFFSET);
        if (s->descs == MAP_FAILED)
                return fprintf(stderr, "ublk-null: mmap: %m\n"), -errno;
        for (unsigned i = 0; i < QUEUE_DEPTH; i++)
                if (posix_memalign(&s->bufs[i], 4096, IO_BUF_BYTES) != 0)
                        return -ENOMEM;
        return 0;
}

int main(void) {
        Server s = { .char_fd = -1 };
        pthread_t queue;
        sigset_t stop;
        int r, sig;

        /* SIGTERM is taken by sigwait() below, in the main thread only */
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);

        s.ctrl_fd = open("/dev/ublk-control", O_RDWR | O_CLOEXEC);
        if (s.ctrl_fd < 0)
                return perror("ublk-null: /dev/ublk-control"), EXIT_FAILURE;
        if (io_uring_queue_init(4, &s.ctrl_ring, IORING_SETUP_SQE128) < 0)
                return perror("ublk-null: io_uring_queue_init"), EXIT_FAILURE;
        if (setup(&s) < 0)
                return EXIT_FAILURE;
        if (pthread_create(&queue, NULL, serve_queue, &s) != 0)
                return EXIT_FAILURE;

        /* Waits in the kernel until the queue thread has fetched every tag,
         * then adds the disk. */
        r = ctrl_cmd(&s, UBLK_CMD_START_DEV, NULL, 0, (uint64_t) getpid());
        if (r < 0)
                return fprintf(stderr, "ublk-null: START_DEV: %s\n", strerror(-r)), EXIT_FAILURE;
        printf("ublkb%u\n", s.info.dev_id);
        fflush(stdout);

        sigwait(&stop, &sig);
        r = ctrl_cmd(&s, UBLK_CMD_STOP_DEV, NULL, 0, 0);
        if (r < 0)
                return fprintf(stderr, "ublk-null: STOP_DEV: %s\n", strerror(-r)), EXIT_FAILURE;
        /* Exiting closes the rings, which aborts the fetches the queue thread
         * still has in the kernel; the control node /dev/ublkcN stays until
         * DEL_DEV, which this test server does not need. */
        return EXIT_SUCCESS;
}
