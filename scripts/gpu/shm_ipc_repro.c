/*
 * shm_ipc_repro.c - libfabric shm, device memory with FI_HMEM_DEVICE_ONLY
 * (its CUDA IPC protocol), no rmacoll code: does an RMA write of device
 * memory into a peer's device memory complete, and under which progress
 * of the target? (issue 32: rmacoll's puts stalled with
 * ofi.hmem_device_only: "puts to peer 1 stalled for 20000 ms (1 in
 * flight)").
 *
 * Two processes (forked before CUDA starts), one GPU or two, each with an
 * shm RDM endpoint, a CQ, a cudaMalloc'ed buffer registered with
 * fi_mr_regattr(iface FI_HMEM_CUDA, flags FI_HMEM_DEVICE_ONLY or 0).
 * Rank 0 writes `size` bytes of a pattern into rank 1's buffer with
 * fi_writemsg(FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_DELIVERY_COMPLETE),
 * as rmacoll's ofi transport does, for sizes 4 KiB .. 64 MiB, 3 writes
 * each; rank 1 waits for the remote CQ data, copies its buffer back and
 * checks every byte. The mode says how rank 1 drives its endpoint:
 *   busy   fi_cq_read in a loop (always progressing)
 *   late   sleeps 2 s after each write was posted before it reads its CQ
 *          (the writer must wait for the target's progress: shm's IPC
 *          protocol copies on the target, in its progress)
 *   both   both ranks write into each other at once, each progressing
 *          only its own CQ while waiting (rmacoll's pattern)
 * Each wait is bounded (10 s): a write that does not complete is reported
 * with its size ("STALL") and the process exits 2; wrong bytes exit 3.
 *
 * Build (GPU machine, libfabric built with CUDA in $FI):
 *   gcc -O2 -o shm_ipc_repro scripts/gpu/shm_ipc_repro.c -I$FI/include \
 *       -I/usr/local/cuda/include -L$FI/lib -Wl,-rpath,$FI/lib -lfabric \
 *       -L/usr/local/cuda/lib64 -lcudart
 * Run: ./shm_ipc_repro [busy|late|both] [device_only 1|0]
 * FI_LOG_LEVEL=warn FI_LOG_PROV=shm shows shm's own complaints (IPC
 * refused, fallback to SAR, async copy errors).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define MAX_BYTES (64u << 20)
#define WAIT_S 10.0

static int me;

#define DIE(...)                                                                 \
    do {                                                                         \
        fprintf(stderr, "rank %d: ", me);                                        \
        fprintf(stderr, __VA_ARGS__);                                            \
        fprintf(stderr, "\n");                                                   \
        exit(1);                                                                 \
    } while (0)
#define FI(call)                                                                 \
    do {                                                                         \
        int r_ = (int)(call);                                                    \
        if (r_ != 0)                                                             \
            DIE("%s: %s", #call, fi_strerror(-r_));                              \
    } while (0)
#define CU(call)                                                                 \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess)                                                   \
            DIE("%s: %s", #call, cudaGetErrorString(e_));                        \
    } while (0)

typedef struct info {
    char name[256];
    size_t namelen;
    uint64_t addr, key;
} info_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void xfer(int fd, void *out, const void *in, size_t n)
{
    if (write(fd, in, n) != (ssize_t)n || read(fd, out, n) != (ssize_t)n)
        DIE("socketpair exchange failed");
}

/* Completions seen so far: own writes done, peers' remote CQ data. */
static int g_writes, g_data;

/* Reads what the CQ holds into the counters (this is also what drives
 * shm's progress). */
static void cq_poll(struct fid_cq *cq)
{
    struct fi_cq_data_entry e[8];
    ssize_t n = fi_cq_read(cq, e, 8);

    for (ssize_t i = 0; i < n; i++) {
        if (e[i].flags & FI_REMOTE_CQ_DATA)
            g_data++;
        else
            g_writes++;
    }
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof(err));
        fi_cq_readerr(cq, &err, 0);
        DIE("completion error: %s (prov errno %d)", fi_strerror(err.err), err.prov_errno);
    }
    if (n < 0 && n != -FI_EAGAIN && n != -FI_EAVAIL)
        DIE("fi_cq_read: %s", fi_strerror((int)-n));
}

/* Polls until *ctr reaches want or limit seconds passed; 1 if it did. */
static int cq_wait(struct fid_cq *cq, const int *ctr, int want, double limit)
{
    double t0 = now_s();

    while (*ctr < want && now_s() - t0 < limit)
        cq_poll(cq);
    return *ctr >= want;
}

static int run(int fd, const char *mode, int device_only)
{
    struct fi_info *hints = fi_allocinfo(), *fi = NULL;
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_ep *ep;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_mr *mr;
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_DATA};
    struct fi_mr_attr mra;
    struct iovec iov;
    info_t mine, peer;
    fi_addr_t peer_addr;
    void *dbuf;
    unsigned char *hbuf = malloc(MAX_BYTES);
    int both = strcmp(mode, "both") == 0, late = strcmp(mode, "late") == 0, bad = 0;
    int want_w = 0, want_d = 0;

    CU(cudaSetDevice(0));
    CU(cudaMalloc(&dbuf, MAX_BYTES));
    CU(cudaMemset(dbuf, 0, MAX_BYTES));
    CU(cudaDeviceSynchronize());

    hints->caps = FI_RMA | FI_HMEM;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_HMEM;
    hints->fabric_attr->prov_name = strdup("shm");
    FI(fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, hints, &fi));
    FI(fi_fabric(fi->fabric_attr, &fab, NULL));
    FI(fi_domain(fab, fi, &dom, NULL));
    FI(fi_endpoint(dom, fi, &ep, NULL));
    FI(fi_av_open(dom, &ava, &av, NULL));
    FI(fi_cq_open(dom, &cqa, &cq, NULL));
    FI(fi_ep_bind(ep, &av->fid, 0));
    FI(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    FI(fi_enable(ep));

    memset(&mra, 0, sizeof(mra));
    iov.iov_base = dbuf;
    iov.iov_len = MAX_BYTES;
    mra.mr_iov = &iov;
    mra.iov_count = 1;
    mra.access = FI_REMOTE_WRITE | FI_WRITE;
    mra.iface = FI_HMEM_CUDA;
    mra.device.cuda = 0;
    FI(fi_mr_regattr(dom, &mra, device_only ? FI_HMEM_DEVICE_ONLY : 0, &mr));
    if (fi->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        FI(fi_mr_bind(mr, &ep->fid, 0));
        FI(fi_mr_enable(mr));
    }
    memset(&mine, 0, sizeof(mine));
    mine.namelen = sizeof(mine.name);
    FI(fi_getname(&ep->fid, mine.name, &mine.namelen));
    mine.addr = (uint64_t)(uintptr_t)dbuf;
    mine.key = fi_mr_key(mr);
    xfer(fd, &peer, &mine, sizeof(mine));
    if (fi_av_insert(av, peer.name, 1, &peer_addr, 0, NULL) != 1)
        DIE("fi_av_insert failed");
    printf("rank %d: libfabric %u.%u, provider %s, mode %s, FI_HMEM_DEVICE_ONLY %s\n", me,
           FI_MAJOR(fi_version()), FI_MINOR(fi_version()), fi->fabric_attr->prov_name, mode,
           device_only ? "on" : "off");
    fflush(stdout);

    for (size_t size = 4096; size <= MAX_BYTES; size *= 4) {
        for (int it = 0; it < 3; it++) {
            int writer = me == 0 || both, target = me == 1 || both;
            unsigned char pat = (unsigned char)(size / 4096 * 7 + it * 3 + me * 101 + 1);
            char sync = 0;

            if (writer) {
                /* the source: the pattern in the first `size` bytes of a
                 * second device buffer would do; the own buffer's upper
                 * half is not written by the peer in `both` mode only if
                 * size <= MAX/2, so use a scratch allocation */
                static void *src;
                if (src == NULL)
                    CU(cudaMalloc(&src, MAX_BYTES));
                CU(cudaMemset(src, pat, size));
                CU(cudaDeviceSynchronize());
                {
                    static struct fid_mr *smr;
                    struct fi_mr_attr sa = mra;
                    struct iovec siov = {src, MAX_BYTES};
                    struct fi_rma_iov rma = {peer.addr, size, peer.key};
                    struct iovec wiov = {src, size};
                    void *desc;
                    struct fi_msg_rma msg;
                    ssize_t ret;
                    double t0;
                    if (smr == NULL) {
                        sa.mr_iov = &siov;
                        /* shm takes the keys it is given (no FI_MR_PROV_KEY in
                         * the mode it returns): a second key 0 is -FI_ENOKEY,
                         * "Required key not available" */
                        sa.requested_key = 1;
                        FI(fi_mr_regattr(dom, &sa, device_only ? FI_HMEM_DEVICE_ONLY : 0, &smr));
                        if (fi->domain_attr->mr_mode & FI_MR_ENDPOINT) {
                            FI(fi_mr_bind(smr, &ep->fid, 0));
                            FI(fi_mr_enable(smr));
                        }
                    }
                    desc = fi_mr_desc(smr);
                    memset(&msg, 0, sizeof(msg));
                    msg.msg_iov = &wiov;
                    msg.desc = &desc;
                    msg.iov_count = 1;
                    msg.addr = peer_addr;
                    msg.rma_iov = &rma;
                    msg.rma_iov_count = 1;
                    msg.data = size + (uint64_t)it;
                    t0 = now_s();
                    do {
                        ret = fi_writemsg(ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE |
                                                        FI_REMOTE_CQ_DATA);
                        if (ret == -FI_EAGAIN)
                            cq_poll(cq);
                    } while (ret == -FI_EAGAIN && now_s() - t0 < WAIT_S);
                    if (ret != 0) {
                        printf("rank %d: STALL: fi_writemsg of %zu bytes: %s after %.1f s\n", me,
                               size, fi_strerror((int)-ret), now_s() - t0);
                        return 2;
                    }
                }
            }
            if (late && me == 1) {
                usleep(2000000); /* the target does not drive its endpoint */
            }
            {
                /* the writer waits for its write's completion, the target
                 * for the remote CQ data (in `late` mode rank 0's wait
                 * spans rank 1's sleep) */
                double t0 = now_s(), limit = WAIT_S + (late ? 2.0 : 0.0);
                int okw = !writer || cq_wait(cq, &g_writes, want_w + 1, limit);
                int okd = !target || cq_wait(cq, &g_data, want_d + 1, limit);
                if (!okw || !okd) {
                    printf("rank %d: STALL: %zu bytes: own write %s, peer's data %s after "
                           "%.1f s\n", me, size, !writer ? "-" : okw ? "done" : "NOT done",
                           !target ? "-" : okd ? "arrived" : "NOT arrived", now_s() - t0);
                    return 2;
                }
                want_w += writer;
                want_d += target;
                if (me == 0 && late && it == 0) {
                    printf("rank 0: %zu bytes: write completed after %.3f s (target slept "
                           "2 s)\n", size, now_s() - t0);
                }
            }
            if (target) {
                unsigned char want = (unsigned char)(size / 4096 * 7 + it * 3 +
                                                     (1 - me) * 101 + 1);
                CU(cudaMemcpy(hbuf, dbuf, size, cudaMemcpyDeviceToHost));
                for (size_t b = 0; b < size; b++) {
                    if (hbuf[b] != want) {
                        printf("rank %d: WRONG: %zu bytes, byte %zu is %u, expected %u\n", me,
                               size, b, hbuf[b], want);
                        bad = 1;
                        break;
                    }
                }
            }
            xfer(fd, &sync, &sync, 1); /* the next write after both checked */
        }
        if (me == 0)
            printf("rank 0: %zu bytes: 3 writes complete\n", size);
        fflush(stdout);
    }
    return bad ? 3 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "busy";
    int device_only = argc > 2 ? atoi(argv[2]) : 1;
    int sv[2], status = 0, rc;
    pid_t pid;

    if (strcmp(mode, "busy") && strcmp(mode, "late") && strcmp(mode, "both")) {
        fprintf(stderr, "usage: %s [busy|late|both] [device_only 1|0]\n", argv[0]);
        return 64;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        me = 1;
        alarm(120);
        _exit(run(sv[1], mode, device_only));
    }
    me = 0;
    alarm(120);
    rc = run(sv[0], mode, device_only);
    waitpid(pid, &status, 0);
    printf("shm_ipc_repro %s device_only=%d: rank 0 exit %d, rank 1 exit %d\n", mode,
           device_only, rc, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return rc != 0 ? rc : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
