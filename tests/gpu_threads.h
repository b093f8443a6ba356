/*
 * gpu_threads.h - helpers of the GPU tests whose ranks are threads of one
 * process (test_gpu_threads.c, test_gpu_graph.c): one thread per rank, each
 * on device rank % device count with its own non-blocking stream, all
 * ranks on one node (one node_key), sharing the process's CUDA context.
 * Buffers: the count matrix of a case, gapped receive blocks, one guard
 * byte past each buffer, pinned host copies for fill and check
 * (tools/common/cases.h). Header-only (static functions): the tests'
 * support library is built without CUDA.
 */
#ifndef RMACOLL_TESTS_GPU_THREADS_H
#define RMACOLL_TESTS_GPU_THREADS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cases.h"
#include "transports/common/cuda_common.h"
#include "gpu_try.h"
#include "rmacoll.h"

#define GT_MAX_RANKS 16

/* Body results. */
enum { GT_OK = 0, GT_WRONG_DATA = 1, GT_WRONG_STATUS = 2, GT_CUDA = 3, GT_CREATE = 4 };

#define GT_TRY(call) RMACOLL_TEST_CUDA_TRY(call, GT_CUDA)

/* One rank's buffers and counts for one case. */
typedef struct gt_buf {
    int64_t sc[GT_MAX_RANKS], sd[GT_MAX_RANKS];
    int64_t rc[GT_MAX_RANKS], rd[GT_MAX_RANKS];
    size_t es, sbytes, rbytes;
    void *hs, *hr; /* pinned host: fill, check */
    void *ds, *dr; /* device */
    rmacoll_datatype_t dtype;
} gt_buf_t;

static void gt_buf_free(gt_buf_t *k)
{
    if (k->hs != NULL)
        cudaFreeHost(k->hs);
    if (k->hr != NULL)
        cudaFreeHost(k->hr);
    if (k->ds != NULL)
        cudaFree(k->ds);
    if (k->dr != NULL)
        cudaFree(k->dr);
    memset(k, 0, sizeof(*k));
}

/* Counts of `rank` in c, receive blocks `gap` elements apart (0:
 * contiguous, as rmacoll_alltoall needs), buffers allocated (device receive
 * buffer set to the sentinel, synchronously). */
static int gt_buf_init(gt_buf_t *k, const rmacoll_case_t *c, int rank, int64_t gap)
{
    int n = c->nranks;
    int64_t sext, rext;

    memset(k, 0, sizeof(*k));
    k->dtype = c->dtype;
    k->es = rmacoll_datatype_size(c->dtype);
    for (int j = 0; j < n; j++) {
        k->sc[j] = c->send[(size_t)rank * n + j];
        k->rc[j] = c->recv[(size_t)j * n + rank];
    }
    sext = rmacoll_displs_contiguous(n, k->sc, k->sd);
    /* gap 0: rank order, rmacoll_alltoall's layout (gapped displacements
     * run in reverse rank order) */
    rext = gap > 0 ? rmacoll_displs_gapped(n, k->rc, gap, k->rd)
                   : rmacoll_displs_contiguous(n, k->rc, k->rd);
    k->sbytes = (size_t)sext * k->es;
    k->rbytes = (size_t)rext * k->es;
    if (cudaMallocHost(&k->hs, k->sbytes + 1) != cudaSuccess ||
        cudaMallocHost(&k->hr, k->rbytes + 1) != cudaSuccess ||
        cudaMalloc(&k->ds, k->sbytes + 1) != cudaSuccess ||
        cudaMalloc(&k->dr, k->rbytes + 1) != cudaSuccess) {
        fprintf(stderr, "rank %d: no memory for %zu + %zu bytes\n", rank, k->sbytes,
                k->rbytes);
        return GT_CUDA;
    }
    /* the legacy stream only: a device-wide synchronisation would also
     * wait for other ranks' streams, which may wait for this rank */
    if (cudaMemset(k->dr, RMACOLL_FILL_SENTINEL, k->rbytes + 1) != cudaSuccess ||
        cudaStreamSynchronize(0) != cudaSuccess)
        return GT_CUDA;
    return GT_OK;
}

/* Enqueues on s: the send buffer filled for stamp iter (host fill, then an
 * async upload: s must have drained the previous use of k->hs), and the
 * device receive buffer reset to the sentinel. */
static int gt_buf_stage(gt_buf_t *k, int rank, int nranks, uint64_t iter, cudaStream_t s)
{
    rmacoll_fill_send(k->hs, k->sbytes, k->es, rank, nranks, k->sc, k->sd, iter);
    if (cudaMemcpyAsync(k->ds, k->hs, k->sbytes + 1, cudaMemcpyHostToDevice, s) !=
            cudaSuccess ||
        cudaMemsetAsync(k->dr, RMACOLL_FILL_SENTINEL, k->rbytes + 1, s) != cudaSuccess)
        return GT_CUDA;
    return GT_OK;
}

static rmacoll_status_t gt_call(gt_buf_t *k, rmacoll_comm_t *comm, cudaStream_t s)
{
    return rmacoll_alltoallv(k->sbytes ? k->ds : NULL, k->sc, k->sd,
                             k->rbytes ? k->dr : NULL, k->rc, k->rd, k->dtype, comm, s);
}

/* The first rank of the running gt_run whose call returned a wrong status
 * or whose stream failed, plus 1 (0: none yet). */
static _Atomic int gt_first_failed;

/* Records that `rank` failed (the first one is kept). */
static void gt_fail(int rank)
{
    int none = 0;

    atomic_compare_exchange_strong(&gt_first_failed, &none, rank + 1);
}

/* Seconds a stream may take to drain: at most GT_SYNC_S, and at most
 * GT_SYNC_AFTER_FAIL_S once another rank has failed (its peers' streams
 * then wait for signals that never come; the test ends with a message
 * instead of waiting out the limit, which was past the 100 s a GPU run
 * allows the whole binary). */
#define GT_SYNC_S 60
#define GT_SYNC_AFTER_FAIL_S 10

/* Scratch of gt_fresh_probe, allocated by gt_probe (allocating while
 * streams hang may synchronise the device). */
static void *gt_scratch_dev, *gt_scratch_host;
static _Atomic int gt_fresh_probed, gt_fresh_done;

/* When a stream never drains: do a memset, a host-to-device and a
 * device-to-device copy on a stream made now still complete (within 2 s
 * each)? Yes: the GPU's queues and copy engines still take work, so the
 * hung stream waits for a value nobody wrote (RMACOLL_TRACE_STREAM=1 and
 * scripts/stream_trace_check.py find which). No: the new stream is stuck
 * behind the hung ones (shared hardware queue or copy channel). Printed
 * once per process. */
static void gt_fresh_probe(void)
{
    static const char *const what[] = {"memset", "host-to-device copy",
                                       "device-to-device copy"};
    cudaStream_t z = NULL;

    if (atomic_exchange(&gt_fresh_probed, 1)) {
        /* another rank probes: let it print before this one ends the process */
        for (int i = 0; i < 1000 && !gt_fresh_done; i++) {
            struct timespec nap = {0, 10000000};

            nanosleep(&nap, NULL);
        }
        return;
    }
    if (gt_scratch_dev == NULL ||
        cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking) != cudaSuccess) {
        gt_fresh_done = 1;
        return;
    }
    for (int op = 0; op < 3; op++) {
        struct timespec t0, t;
        cudaError_t e;
        int done = 0;

        e = op == 0 ? cudaMemsetAsync(gt_scratch_dev, 0x5a, 4096, z)
            : op == 1 ? cudaMemcpyAsync(gt_scratch_dev, gt_scratch_host, 4096,
                                        cudaMemcpyHostToDevice, z)
                      : cudaMemcpyAsync((char *)gt_scratch_dev + 4096, gt_scratch_dev,
                                        4096, cudaMemcpyDeviceToDevice, z);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (e == cudaSuccess) {
            struct timespec nap = {0, 1000000};

            e = cudaStreamQuery(z);
            if (e == cudaSuccess) {
                done = 1;
                break;
            }
            if (e != cudaErrorNotReady)
                break;
            e = cudaSuccess;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= 2)
                break;
            nanosleep(&nap, NULL);
        }
        fprintf(stderr, "fresh-stream probe: a %s on a new stream %s\n", what[op],
                done ? "completed: the GPU still takes work (look for a wait whose value "
                       "was never written)"
                     : e != cudaSuccess ? cudaGetErrorString(e)
                                        : "did not complete in 2 s: stuck behind the hung "
                                          "streams (shared hardware queue or copy channel)");
        if (!done)
            break; /* the stream is blocked: later work on it proves nothing */
    }
    fflush(stderr);
    gt_fresh_done = 1;
}

/* Waits for s to drain (limits above): a stream that never drains (a wait
 * on a signal that never comes) ends the process with a message instead
 * of hanging the test. */
static int gt_sync(cudaStream_t s, int rank, const char *what)
{
    struct timespec t0, t, tf = {0, 0};
    cudaError_t e;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
        struct timespec nap = {0, 50000};
        int f = gt_first_failed;

        clock_gettime(CLOCK_MONOTONIC, &t);
        if (f != 0 && tf.tv_sec == 0) {
            tf = t;
        }
        if (t.tv_sec - t0.tv_sec > GT_SYNC_S ||
            (f != 0 && t.tv_sec - tf.tv_sec > GT_SYNC_AFTER_FAIL_S)) {
            char after[64] = "";

            if (f != 0) {
                snprintf(after, sizeof(after), ", %d s after rank %d failed",
                         GT_SYNC_AFTER_FAIL_S, f - 1);
            }
            fprintf(stderr, "rank %d (%s): the stream did not drain in %ld s%s (a stream "
                    "wait that never completes; RMACOLL_TRACE_STREAM=1 lists every wait "
                    "and write): giving up\n", rank, what, (long)(t.tv_sec - t0.tv_sec),
                    after);
            gt_fresh_probe();
            {
                /* the process's last stream operations, once (ranks are
                 * threads here): the waits and writes that led to it */
                static atomic_int dumped;
                if (atomic_exchange(&dumped, 1) == 0) {
                    rmacoll__cu_ring_dump(stderr);
                }
            }
            fflush(stdout);
            fflush(stderr);
            _exit(3);
        }
        nanosleep(&nap, NULL);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d (%s): stream failed: %s\n", rank, what,
                cudaGetErrorString(e));
        gt_fail(rank);
        return GT_CUDA;
    }
    return GT_OK;
}

/* Synchronises s, copies the receive buffer back and checks it: the blocks
 * of stamp iter (ok != 0) or all sentinel, the guard byte in both cases. */
static int gt_buf_check(gt_buf_t *k, int rank, int nranks, uint64_t iter, int ok,
                        cudaStream_t s, const char *what)
{
    rmacoll_check_report_t rep;

    if (gt_sync(s, rank, what) != GT_OK)
        return GT_CUDA;
    if (cudaMemcpy(k->hr, k->dr, k->rbytes + 1, cudaMemcpyDeviceToHost) != cudaSuccess) {
        fprintf(stderr, "rank %d (%s): stream or copy-back failed: %s\n", rank, what,
                cudaGetErrorString(cudaGetLastError()));
        return GT_CUDA;
    }
    if (((unsigned char *)k->hr)[k->rbytes] != RMACOLL_FILL_SENTINEL) {
        fprintf(stderr, "rank %d (%s): byte past the receive buffer written\n", rank,
                what);
        return GT_WRONG_DATA;
    }
    if (!ok) {
        for (size_t b = 0; b < k->rbytes; b++) {
            if (((unsigned char *)k->hr)[b] != RMACOLL_FILL_SENTINEL) {
                fprintf(stderr, "rank %d (%s): failed call wrote byte %zu\n", rank, what,
                        b);
                return GT_WRONG_DATA;
            }
        }
        return GT_OK;
    }
    if (rmacoll_check_recv(k->hr, k->rbytes, k->es, rank, nranks, k->rc, k->rd, iter,
                           &rep) != 0) {
        fprintf(stderr, "rank %d (%s, stamp %llu): %s\n", rank, what,
                (unsigned long long)iter, rep.msg);
        return GT_WRONG_DATA;
    }
    return GT_OK;
}

/* ---- ranks as threads ---- */

/* A barrier of the rank threads of one gt_run, bounded: a rank that never
 * arrives ends the process with a message after 150 s. The bodies meet in
 * it after allocating their buffers and before freeing them: cudaFree and
 * cudaFreeHost synchronise the device, so a rank that frees while another
 * rank's stream still waits for a signal from a third rank's thread (which
 * the synchronisation holds up) would deadlock the process; NCCL has the
 * same rule for communicators driven by threads of one process. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n, arrived;
    unsigned gen;
} gt_bar = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static void gt_barrier(int rank, const char *what)
{
    struct timespec dl;
    unsigned gen;

    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 150;
    pthread_mutex_lock(&gt_bar.lock);
    gen = gt_bar.gen;
    if (++gt_bar.arrived == gt_bar.n) {
        gt_bar.arrived = 0;
        gt_bar.gen++;
        pthread_cond_broadcast(&gt_bar.cond);
    }
    while (gen == gt_bar.gen) {
        if (pthread_cond_timedwait(&gt_bar.cond, &gt_bar.lock, &dl) != 0 &&
            gen == gt_bar.gen) {
            fprintf(stderr, "rank %d (%s): the other ranks did not reach the barrier in "
                    "150 s: giving up\n", rank, what);
            fflush(stderr);
            _exit(3);
        }
    }
    pthread_mutex_unlock(&gt_bar.lock);
}

typedef int (*gt_body_fn)(rmacoll_comm_t *comm, int rank, int nranks, cudaStream_t s,
                          void *arg);

typedef struct gt_thread {
    int rank, nranks;
    const rmacoll_unique_id_t *id;
    const rmacoll_config_t *cfg;
    gt_body_fn body;
    void *arg;
    int result;
} gt_thread_t;

/* Log lines seen (every rank): the one-launch path switched on, calls
 * that took it (TRACE), errors and warnings printed. */
static _Atomic int gt_one_launch_on, gt_one_launch_calls;

/* Communicators made and destroyed by gt_main, those whose stats said the
 * device calls' signal words were device-resident (or, with
 * RMACOLL_DEVICE_SIGNALS=0 in the environment, in the host window), and
 * the calls they counted as enqueued with device words. */
static _Atomic int gt_comms, gt_dsig_comms_as_expected;
/* Virtual nodes the ranks of gt_run are spread over (1: one node). */
static int gt_nodes = 1;
static _Atomic long gt_dsig_calls;

/* 1 when the stream path is expected to use device-resident words. */
static int gt_dsig_expected(void)
{
    const char *v = getenv("RMACOLL_DEVICE_SIGNALS");

    return v == NULL || strcmp(v, "0") != 0;
}

/* Resets the counters above (before a gt_run whose communicators are
 * checked with gt_dsig_ok). */
static void gt_dsig_reset(void)
{
    gt_comms = 0;
    gt_dsig_comms_as_expected = 0;
    gt_dsig_calls = 0;
}

/* 1 when every communicator since gt_dsig_reset took the expected signal
 * words, and calls ran with device words exactly when they are expected on
 * and `enqueued` (0: every call failed before enqueueing anything, e.g. a
 * count mismatch); printed. */
static int gt_dsig_ok(int enqueued)
{
    int want = gt_dsig_expected() && enqueued;

    fprintf(stderr, "signal words: %d of %d communicators %s, %ld calls with device "
            "words\n", (int)gt_dsig_comms_as_expected, (int)gt_comms,
            gt_dsig_expected() ? "in device memory" : "in the host window",
            (long)gt_dsig_calls);
    return gt_comms > 0 && gt_dsig_comms_as_expected == gt_comms &&
           (want ? gt_dsig_calls > 0 : gt_dsig_calls == 0);
}

static void gt_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys, const char *msg)
{
    (void)ctx;
    (void)subsys;
    if (strstr(msg, "one-launch path on") != NULL)
        gt_one_launch_on++;
    if (strstr(msg, "one launch:") != NULL)
        gt_one_launch_calls++;
    if (level <= RMACOLL_LOG_WARN)
        fprintf(stderr, "rmacoll: %s\n", msg);
}

/* Rank r's stream, made once per process in gt_probe, before any other
 * stream: CUDA maps each new stream onto one of its
 * CUDA_DEVICE_MAX_CONNECTIONS hardware queues in turn, so streams made
 * for every communicator anew (8-16 per case) soon share queues with
 * live ones of other ranks, and a stream wait at the head of a shared
 * queue blocks the write queued behind it on the other rank's stream,
 * which it waits for (the hang of docs/gpu.md). Made first, the ranks'
 * streams keep distinct queues for the process's life.
 * RMACOLL_TEST_STREAM_PER_CALL=1 makes a stream per rank and case again
 * as before 2026-12-02 (the hang came back in 4 of 10 runs). */
static cudaStream_t gt_streams[GT_MAX_RANKS];

static void *gt_main(void *p)
{
    gt_thread_t *t = p;
    rmacoll_comm_params_t prm;
    rmacoll_comm_t *comm = NULL;
    cudaStream_t stream = NULL;
    char node_key[48];
    int ndev = 0, rcode = GT_OK, rank = t->rank;

    GT_TRY(cudaGetDeviceCount(&ndev));
    GT_TRY(cudaSetDevice(rank % ndev));
    stream = gt_streams[rank];
    if (getenv("RMACOLL_TEST_STREAM_PER_CALL") != NULL) {
        GT_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    }
    if (stream == NULL) {
        fprintf(stderr, "rank %d: no stream (gt_probe)\n", rank);
        t->result = GT_CUDA;
        return NULL;
    }
    memset(&prm, 0, sizeof(prm));
    prm.struct_size = sizeof(prm);
    prm.rank = rank;
    prm.nranks = t->nranks;
    prm.unique_id = t->id;
    prm.config = t->cfg;
    if (gt_nodes > 1) { /* virtual nodes of consecutive ranks */
        snprintf(node_key, sizeof(node_key), "gpu-threads-node-%d",
                 rank / ((t->nranks + gt_nodes - 1) / gt_nodes));
        prm.node_key = node_key;
    } else {
        prm.node_key = "gpu-threads-node";
    }
    prm.log_fn = gt_log;
    if (rmacoll_comm_create(&prm, &comm) != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: rmacoll_comm_create failed\n", rank);
        rcode = GT_CREATE;
        goto out;
    }
    rcode = t->body(comm, rank, t->nranks, stream, t->arg);
    {
        rmacoll_comm_stats_t cs;

        memset(&cs, 0, sizeof(cs));
        cs.struct_size = sizeof(cs);
        if (rmacoll_comm_get_stats(comm, &cs) == RMACOLL_SUCCESS) {
            gt_comms++;
            if (cs.device_signals == gt_dsig_expected())
                gt_dsig_comms_as_expected++;
            gt_dsig_calls += (long)cs.device_calls_device_signals;
        }
    }
    if (rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS && rcode == GT_OK) {
        fprintf(stderr, "rank %d: rmacoll_comm_destroy failed\n", rank);
        rcode = GT_CREATE;
    }
out:
    if (stream != gt_streams[rank])
        cudaStreamDestroy(stream);
    t->result = rcode;
    return NULL;
}

/* Runs body on nranks threads of this process; 0 when every rank returned
 * GT_OK, else the number of failed ranks (each printed). */
static int gt_run(int nranks, const rmacoll_config_t *cfg, gt_body_fn body, void *arg)
{
    rmacoll_unique_id_t id;
    pthread_t th[GT_MAX_RANKS];
    gt_thread_t ta[GT_MAX_RANKS];
    int failed = 0, started = 0;

    if (nranks > GT_MAX_RANKS || rmacoll_get_unique_id(&id) != RMACOLL_SUCCESS)
        return nranks > 0 ? nranks : 1;
    gt_bar.n = nranks;
    gt_bar.arrived = 0;
    gt_first_failed = 0;
    for (int r = 0; r < nranks; r++) {
        ta[r] = (gt_thread_t){r, nranks, &id, cfg, body, arg, -1};
        if (pthread_create(&th[r], NULL, gt_main, &ta[r]) != 0)
            break;
        started++;
    }
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < nranks; r++) {
        if (r >= started || ta[r].result != GT_OK) {
            fprintf(stderr, "rank %d: result %d\n", r, r >= started ? -1 : ta[r].result);
            failed++;
        }
    }
    return failed;
}

/* Device count, 0 when CUDA is unusable (the tests then exit 77). Call
 * first: it sets CUDA_DEVICE_MAX_CONNECTIONS to 32 (unless set) before
 * CUDA starts, so up to 32 ranks' streams get their own hardware queues
 * (a stream wait blocks the streams that share its queue). */
static int gt_probe(void)
{
    int n = 0;

    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    /* a value set outside (1 in many training setups) makes streams
     * share queues: say which one the run had */
    fprintf(stderr, "CUDA_DEVICE_MAX_CONNECTIONS=%s, CUDA_MODULE_LOADING=%s\n",
            getenv("CUDA_DEVICE_MAX_CONNECTIONS"),
            getenv("CUDA_MODULE_LOADING") != NULL ? getenv("CUDA_MODULE_LOADING")
                                                  : "(unset: lazy)");

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    for (int r = 0; r < GT_MAX_RANKS && n > 0; r++) {
        if (cudaSetDevice(r % n) != cudaSuccess ||
            cudaStreamCreateWithFlags(&gt_streams[r], cudaStreamNonBlocking) != cudaSuccess) {
            (void)cudaGetLastError();
            gt_streams[r] = NULL; /* that rank's thread fails, naming it */
        }
    }
    if (n > 0 && cudaSetDevice(0) != cudaSuccess) {
        (void)cudaGetLastError();
    }
    if (n > 0 && (cudaMalloc(&gt_scratch_dev, 8192) != cudaSuccess ||
                  cudaMallocHost(&gt_scratch_host, 4096) != cudaSuccess)) {
        (void)cudaGetLastError();
        gt_scratch_dev = NULL; /* gt_fresh_probe is skipped */
    }
    return n;
}

#endif /* RMACOLL_TESTS_GPU_THREADS_H */
