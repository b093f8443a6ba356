/*
 * test_gpu_devcounts.c - rmacoll_alltoallv_device_counts on a GPU (issue
 * 31; CTest label "gpu"): counts written on the stream by a kernel (as a
 * router would), read only by the device. Ranks are threads of one process
 * on device rank % device count, one node, each with its own stream
 * (gpu_threads.h).
 *
 * Per communicator (2 ranks, uint32; 4 ranks, int8 so that blocks are
 * misaligned; intra_node nvlink_kernel and auto):
 *  - a host pointer as sendcounts on rank 0: RMACOLL_ERR_INVALID_ARG on
 *    every rank, naming sendcounts and rank 0, nothing enqueued;
 *  - ordinary steps: dispatch (receive counts produced) then combine
 *    (receive counts given: the round trip must give back the send buffer
 *    exactly), for random counts with zeros, all counts zero, all to one
 *    rank, a skewed matrix; overflow of a receive capacity, a negative
 *    count, overflow of a send capacity (status RMACOLL_ERR_OVERFLOW on
 *    every rank, no byte written anywhere, recvcounts still produced, and
 *    rmacoll_device_counts_check reporting it once); a combine whose given
 *    counts differ (RMACOLL_ERR_MISMATCH); good steps after each failure;
 *  - dispatch + combine captured into one CUDA graph (nothing moves at
 *    capture), then 100 replays with new counts and data before each
 *    (zeros, all to one, skew, overflow among them), every one checked.
 * Across 2 virtual nodes (4 ranks, uint32, intra_node ce): the same steps,
 * capture and replays through the experimental stream-triggered form
 * (RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1; not the host-pointer check, which
 * that form does not make).
 * Every byte is checked: receive blocks against the senders' data, the
 * rest of each buffer and a guard past its capacity against the sentinel,
 * the counts arrays and status words with guards past them. Exits 77
 * (skipped) without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gpu_threads.h"
#pragma GCC diagnostic pop
#include "gpu_devcounts.h"

#define SENT 0xa5u          /* sentinel byte */
#define GUARD 64u           /* bytes checked past each capacity */
#define NGUARD 4            /* int64 / int32 words checked past each array */
#define REPLAYS 100

/* One rank's device arrays and buffers and their host copies. */
typedef struct dct {
    size_t es;
    rmacoll_datatype_t dtype;
    int64_t *sc, *rc;          /* device, [n + NGUARD] */
    int32_t *st;               /* device, [2 * (1 + NGUARD)]: dispatch, combine */
    uint8_t *send, *recv, *back; /* device: capacity * es + GUARD */
    int64_t *hrc;
    int32_t *hst;
    uint8_t *hrecv, *hback;
    int ncalls;                /* device-count calls enqueued (SUCCESS) */
} dct_t;

#define ST_D 0                 /* dispatch's status word */
#define ST_C (1 + NGUARD)      /* combine's */

static size_t send_bytes(const dct_t *d)
{
    return (size_t)DCT_SEND_CAP * d->es + GUARD;
}
static size_t recv_bytes(const dct_t *d)
{
    return (size_t)DCT_RECV_CAP * d->es + GUARD;
}

static int dct_alloc(dct_t *d, int rank, int n, rmacoll_datatype_t dtype)
{
    int rcode = GT_OK;

    memset(d, 0, sizeof(*d));
    d->dtype = dtype;
    d->es = rmacoll_datatype_size(dtype);
    GT_TRY(cudaMalloc((void **)&d->sc, (size_t)(n + NGUARD) * 8));
    GT_TRY(cudaMalloc((void **)&d->rc, (size_t)(n + NGUARD) * 8));
    GT_TRY(cudaMalloc((void **)&d->st, 2 * (1 + NGUARD) * 4));
    GT_TRY(cudaMalloc((void **)&d->send, send_bytes(d)));
    GT_TRY(cudaMalloc((void **)&d->recv, recv_bytes(d)));
    GT_TRY(cudaMalloc((void **)&d->back, send_bytes(d)));
    GT_TRY(cudaMallocHost((void **)&d->hrc, (size_t)(n + NGUARD) * 8));
    GT_TRY(cudaMallocHost((void **)&d->hst, 2 * (1 + NGUARD) * 4));
    GT_TRY(cudaMallocHost((void **)&d->hrecv, recv_bytes(d)));
    GT_TRY(cudaMallocHost((void **)&d->hback, send_bytes(d)));
    /* the legacy stream only (gpu_threads.h says why) */
    GT_TRY(cudaMemset(d->sc, SENT, (size_t)(n + NGUARD) * 8));
    GT_TRY(cudaStreamSynchronize(0));
out:
    return rcode;
}

static void dct_free(dct_t *d)
{
    cudaFree(d->sc);
    cudaFree(d->rc);
    cudaFree(d->st);
    cudaFree(d->send);
    cudaFree(d->recv);
    cudaFree(d->back);
    cudaFreeHost(d->hrc);
    cudaFreeHost(d->hst);
    cudaFreeHost(d->hrecv);
    cudaFreeHost(d->hback);
    memset(d, 0, sizeof(*d));
}

/* Enqueues the inputs of step (seed, pattern) on s, as a model's kernels
 * would: counts, send data; outputs back to the sentinel. */
static int dct_prep(dct_t *d, int rank, int n, uint64_t seed, int pattern, cudaStream_t s)
{
    int rcode = GT_OK;

    GT_TRY(cudaMemsetAsync(d->sc, SENT, (size_t)(n + NGUARD) * 8, s));
    GT_TRY(dct_write_counts(d->sc, n, rank, seed, pattern, s));
    GT_TRY(dct_fill_send(d->send, (uint64_t)DCT_SEND_CAP * d->es, rank, seed, s));
    GT_TRY(cudaMemsetAsync(d->send + (size_t)DCT_SEND_CAP * d->es, SENT, GUARD, s));
    GT_TRY(cudaMemsetAsync(d->recv, SENT, recv_bytes(d), s));
    GT_TRY(cudaMemsetAsync(d->back, SENT, send_bytes(d), s));
    GT_TRY(cudaMemsetAsync(d->rc, SENT, (size_t)(n + NGUARD) * 8, s));
    GT_TRY(cudaMemsetAsync(d->st, SENT, 2 * (1 + NGUARD) * 4, s));
out:
    return rcode;
}

/* The combine's given counts off by one (after the dispatch, on s). */
static int dct_spoil(dct_t *d, int rank, int n, uint64_t seed, cudaStream_t s)
{
    return dct_write_counts(d->sc, n, rank, seed, DCT_PLUS1, s) == cudaSuccess ? GT_OK
                                                                             : GT_CUDA;
}

static rmacoll_status_t dct_dispatch(dct_t *d, rmacoll_comm_t *comm, cudaStream_t s)
{
    rmacoll_status_t st = rmacoll_alltoallv_device_counts(
        d->send, d->sc, DCT_SEND_CAP, d->recv, d->rc, DCT_RECV_CAP, RMACOLL_RECV_PRODUCE,
        d->dtype, comm, s, d->st + ST_D);

    d->ncalls += st == RMACOLL_SUCCESS;
    return st;
}

/* The way back: what each rank received goes back to its sender, into
 * the sender's layout (its counts given). */
static rmacoll_status_t dct_combine(dct_t *d, rmacoll_comm_t *comm, cudaStream_t s)
{
    rmacoll_status_t st = rmacoll_alltoallv_device_counts(
        d->recv, d->rc, DCT_RECV_CAP, d->back, d->sc, DCT_SEND_CAP, RMACOLL_RECV_GIVEN,
        d->dtype, comm, s, d->st + ST_C);

    d->ncalls += st == RMACOLL_SUCCESS;
    return st;
}

/* Sentinel check of bytes [from, to) of h. */
static int all_sent(const uint8_t *h, size_t from, size_t to, int rank, const char *what,
                    const char *buf)
{
    for (size_t x = from; x < to; x++) {
        if (h[x] != SENT) {
            fprintf(stderr, "rank %d (%s): %s byte %zu written (0x%02x, sentinel expected; "
                    "data ends at %zu)\n", rank, what, buf, x, h[x], from);
            return GT_WRONG_DATA;
        }
    }
    return GT_OK;
}

/* Synchronises s and checks everything of step (seed, pattern): wd / wc
 * the statuses expected of dispatch and combine (-1: the call was not
 * made: its words stay sentinel), spoiled: the combine's given counts were
 * off by one. */
static int dct_check(dct_t *d, int rank, int n, uint64_t seed, int pattern, int wd, int wc,
                     cudaStream_t s, const char *what)
{
    int64_t c[DCT_MAX_N][DCT_MAX_N];
    int rcode = GT_OK;
    const int32_t sent32 = (int32_t)0xa5a5a5a5u;
    const int64_t sent64 = (int64_t)0xa5a5a5a5a5a5a5a5ull;
    size_t total = 0, mine = 0;

    if (gt_sync(s, rank, what) != GT_OK)
        return GT_CUDA;
    GT_TRY(cudaMemcpy(d->hrc, d->rc, (size_t)(n + NGUARD) * 8, cudaMemcpyDeviceToHost));
    GT_TRY(cudaMemcpy(d->hst, d->st, 2 * (1 + NGUARD) * 4, cudaMemcpyDeviceToHost));
    GT_TRY(cudaMemcpy(d->hrecv, d->recv, recv_bytes(d), cudaMemcpyDeviceToHost));
    GT_TRY(cudaMemcpy(d->hback, d->back, send_bytes(d), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            c[i][j] = dct_count(seed, pattern, i, j, n);
    /* status words and their guards */
    if (d->hst[ST_D] != (wd < 0 ? sent32 : wd) || d->hst[ST_C] != (wc < 0 ? sent32 : wc)) {
        fprintf(stderr, "rank %d (%s, seed %llu): status dispatch %d (want %d), combine %d "
                "(want %d)\n", rank, what, (unsigned long long)seed, d->hst[ST_D], wd,
                d->hst[ST_C], wc);
        return GT_WRONG_STATUS;
    }
    for (int g = 1; g <= NGUARD; g++) {
        if (d->hst[ST_D + g] != sent32 || d->hst[ST_C + g] != sent32) {
            fprintf(stderr, "rank %d (%s): word %d past a status written\n", rank, what, g);
            return GT_WRONG_DATA;
        }
    }
    /* recvcounts: produced by the dispatch (also when it failed on the
     * device), guards untouched */
    for (int i = 0; i < n + NGUARD; i++) {
        int64_t want = i >= n || wd < 0 ? sent64 : c[i][rank];

        if (d->hrc[i] != want) {
            fprintf(stderr, "rank %d (%s, seed %llu): recvcounts[%d] = %lld, want %lld\n",
                    rank, what, (unsigned long long)seed, i, (long long)d->hrc[i],
                    (long long)want);
            return GT_WRONG_DATA;
        }
    }
    /* the dispatch's receive buffer */
    if (wd == 0) {
        for (int i = 0; i < n; i++) {
            int64_t soff = 0;

            for (int k = 0; k < rank; k++)
                soff += c[i][k];
            for (size_t y = 0; y < (size_t)c[i][rank] * d->es; y++) {
                uint8_t want = dct_byte(seed, i, (uint64_t)soff * d->es + y);

                if (d->hrecv[total + y] != want) {
                    fprintf(stderr, "rank %d (%s, seed %llu): byte %zu of the block from "
                            "rank %d (at %zu) is 0x%02x, want 0x%02x\n", rank, what,
                            (unsigned long long)seed, y, i, total + y, d->hrecv[total + y],
                            want);
                    return GT_WRONG_DATA;
                }
            }
            total += (size_t)c[i][rank] * d->es;
        }
    }
    rcode = all_sent(d->hrecv, total, recv_bytes(d), rank, what, "receive");
    if (rcode != GT_OK)
        return rcode;
    /* the combine's: the send buffer again, exactly */
    if (wc == 0) {
        for (int j = 0; j < n; j++)
            mine += (size_t)c[rank][j] * d->es;
        for (size_t x = 0; x < mine; x++) {
            if (d->hback[x] != dct_byte(seed, rank, x)) {
                fprintf(stderr, "rank %d (%s, seed %llu): combine byte %zu is 0x%02x, want "
                        "0x%02x\n", rank, what, (unsigned long long)seed, x, d->hback[x],
                        dct_byte(seed, rank, x));
                return GT_WRONG_DATA;
            }
        }
    }
    rcode = all_sent(d->hback, mine, send_bytes(d), rank, what, "combine");
out:
    return rcode;
}

/* The host-visible report after a step: `want` once (naming `text`),
 * then nothing. */
static int dct_report(rmacoll_comm_t *comm, int rank, rmacoll_status_t want, const char *text,
                      const char *what)
{
    rmacoll_status_t st = rmacoll_device_counts_check(comm);

    if (st != want || (text != NULL && strstr(rmacoll_comm_last_error(comm), text) == NULL)) {
        fprintf(stderr, "rank %d (%s): device_counts_check: %s (want %s, text '%s'): %s\n",
                rank, what, rmacoll_status_name(st), rmacoll_status_name(want),
                text != NULL ? text : "", rmacoll_comm_last_error(comm));
        return GT_WRONG_STATUS;
    }
    st = rmacoll_device_counts_check(comm);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d (%s): second device_counts_check: %s\n", rank, what,
                rmacoll_status_name(st));
        return GT_WRONG_STATUS;
    }
    return GT_OK;
}

typedef struct step {
    uint64_t seed;
    int pattern;
    int wd, wc;          /* statuses expected */
    int spoil;           /* the combine's given counts off by one */
    const char *text;    /* in the report, with "%d" for the rank the pattern names */
} step_t;

static const step_t steps[] = {
    {1, DCT_RANDOM, 0, 0, 0, NULL},
    {2, DCT_ZERO, 0, 0, 0, NULL},
    {3, DCT_TO_ONE, 0, 0, 0, NULL},
    {4, DCT_SKEW, 0, 0, 0, NULL},
    {5, DCT_OVER_RECV, RMACOLL_ERR_OVERFLOW, RMACOLL_ERR_OVERFLOW, 0,
     "rank %d: more elements to receive than recv_capacity"},
    {6, DCT_RANDOM, 0, 0, 0, NULL},
    {7, DCT_NEG, RMACOLL_ERR_OVERFLOW, RMACOLL_ERR_OVERFLOW, 0,
     "rank %d: a negative count"},
    {8, DCT_OVER_SEND, RMACOLL_ERR_OVERFLOW, RMACOLL_ERR_OVERFLOW, 0,
     "rank %d: more elements to send than send_capacity"},
    {9, DCT_RANDOM, 0, 0, 0, NULL},
    {10, DCT_RANDOM, 0, RMACOLL_ERR_MISMATCH, 1, "differs from its sender's count"},
    {11, DCT_RANDOM, 0, 0, 0, NULL},
};

/* One ordinary step (dispatch, combine), checked. */
static int ordinary(dct_t *d, rmacoll_comm_t *comm, int rank, int n, const step_t *k,
                    cudaStream_t s)
{
    char text[160] = "", what[64];
    rmacoll_status_t st;
    int rcode = dct_prep(d, rank, n, k->seed, k->pattern, s);

    snprintf(what, sizeof(what), "step %llu", (unsigned long long)k->seed);
    if (rcode != GT_OK)
        return rcode;
    st = dct_dispatch(d, comm, s);
    if (st == RMACOLL_SUCCESS && k->spoil)
        rcode = dct_spoil(d, rank, n, k->seed, s);
    if (st == RMACOLL_SUCCESS && rcode == GT_OK)
        st = dct_combine(d, comm, s);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d (%s): call: %s: %s\n", rank, what, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        gt_fail(rank);
        return GT_WRONG_STATUS;
    }
    if (rcode != GT_OK)
        return rcode;
    rcode = dct_check(d, rank, n, k->seed, k->pattern, k->wd, k->wc, s, what);
    if (rcode == GT_OK && k->text != NULL)
        snprintf(text, sizeof(text), k->text, (int)(k->seed % (uint64_t)n));
    if (rcode == GT_OK)
        rcode = dct_report(comm, rank,
                           k->wd != 0 ? (rmacoll_status_t)k->wd : (rmacoll_status_t)k->wc,
                           k->text != NULL ? text : NULL, what);
    return rcode;
}

/* A host pointer as sendcounts on rank 0: refused on every rank. */
static int host_counts(dct_t *d, rmacoll_comm_t *comm, int rank, cudaStream_t s)
{
    int64_t hc[DCT_MAX_N + NGUARD];
    rmacoll_status_t st;

    memset(hc, 0, sizeof(hc));
    st = rmacoll_alltoallv_device_counts(d->send, rank == 0 ? hc : d->sc, DCT_SEND_CAP,
                                         d->recv, d->rc, DCT_RECV_CAP, RMACOLL_RECV_PRODUCE,
                                         d->dtype, comm, s, d->st + ST_D);
    if (st != RMACOLL_ERR_INVALID_ARG ||
        strstr(rmacoll_comm_last_error(comm), "rank 0") == NULL ||
        strstr(rmacoll_comm_last_error(comm), "sendcounts is not device memory") == NULL) {
        fprintf(stderr, "rank %d: host sendcounts: %s: '%s'\n", rank, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        return GT_WRONG_STATUS;
    }
    return GT_OK;
}

typedef struct dc_arg {
    rmacoll_datatype_t dtype;
    int across;          /* 2 virtual nodes: the stream-triggered form */
} dc_arg_t;

/* Long because: the sequence of one communicator's life (argument error,
 * ordinary steps, capture, replays) reads best as one list. */
static int dc_body(rmacoll_comm_t *comm, int rank, int n, cudaStream_t s, void *p)
{
    const dc_arg_t *a = p;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    rmacoll_status_t st1 = RMACOLL_SUCCESS, st2 = RMACOLL_SUCCESS;
    rmacoll_comm_stats_t cs;
    dct_t d;
    int rcode = dct_alloc(&d, rank, n, a->dtype);

    gt_barrier(rank, "buffers allocated");
    if (rcode == GT_OK && !a->across) /* across nodes pointers are not checked */
        rcode = host_counts(&d, comm, rank, s);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && rcode == GT_OK; i++)
        rcode = ordinary(&d, comm, rank, n, &steps[i], s);
    if (rcode != GT_OK)
        goto out;

    /* capture dispatch + combine: nothing moves, nothing is written */
    rcode = dct_prep(&d, rank, n, 20, DCT_RANDOM, s);
    if (rcode != GT_OK)
        goto out;
    if (gt_sync(s, rank, "before capture") != GT_OK) {
        rcode = GT_CUDA;
        goto out;
    }
    GT_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    st1 = dct_dispatch(&d, comm, s);
    if (st1 == RMACOLL_SUCCESS)
        st2 = dct_combine(&d, comm, s);
    GT_TRY(cudaStreamEndCapture(s, &graph));
    if (st1 != RMACOLL_SUCCESS || st2 != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: calls under capture: %s / %s: %s\n", rank,
                rmacoll_status_name(st1), rmacoll_status_name(st2),
                rmacoll_comm_last_error(comm));
        gt_fail(rank);
        rcode = GT_WRONG_STATUS;
        goto out;
    }
    GT_TRY(cudaGraphInstantiate(&exec, graph, 0));
    rcode = dct_check(&d, rank, n, 20, DCT_RANDOM, -1, -1, s, "after capture");
    /* replays, new counts and data before each */
    for (int r = 1; r <= REPLAYS && rcode == GT_OK; r++) {
        static const int pat[10] = {DCT_RANDOM, DCT_RANDOM, DCT_ZERO,    DCT_RANDOM,
                                    DCT_TO_ONE, DCT_SKEW,   DCT_RANDOM,  DCT_OVER_RECV,
                                    DCT_RANDOM, DCT_RANDOM};
        uint64_t seed = 1000 + (uint64_t)r;
        int pattern = pat[r % 10], over = pattern == DCT_OVER_RECV;
        char what[48];

        snprintf(what, sizeof(what), "replay %d", r);
        rcode = dct_prep(&d, rank, n, seed, pattern, s);
        if (rcode != GT_OK)
            break;
        GT_TRY(cudaGraphLaunch(exec, s));
        rcode = dct_check(&d, rank, n, seed, pattern, over ? RMACOLL_ERR_OVERFLOW : 0,
                          over ? RMACOLL_ERR_OVERFLOW : 0, s, what);
        if (rcode == GT_OK)
            rcode = dct_report(comm, rank, over ? RMACOLL_ERR_OVERFLOW : RMACOLL_SUCCESS,
                               over ? "more elements to receive than recv_capacity" : NULL,
                               what);
        /* ordinary calls between replays pair up alike */
        if (rcode == GT_OK && r % 25 == 0)
            rcode = ordinary(&d, comm, rank, n, &steps[0], s);
    }
    if (rcode == GT_OK) {
        memset(&cs, 0, sizeof(cs));
        cs.struct_size = sizeof(cs);
        if (rmacoll_comm_get_stats(comm, &cs) != RMACOLL_SUCCESS ||
            cs.device_counts_calls != (uint64_t)d.ncalls) {
            fprintf(stderr, "rank %d: stats: device_counts_calls %llu, want %d\n", rank,
                    (unsigned long long)cs.device_counts_calls, d.ncalls);
            rcode = GT_WRONG_STATUS;
        }
    }
out:
    if (rcode != GT_CUDA)
        (void)gt_sync(s, rank, "before freeing");
    gt_barrier(rank, "before freeing"); /* no rank frees while another's stream runs */
    if (exec != NULL)
        cudaGraphExecDestroy(exec);
    if (graph != NULL)
        cudaGraphDestroy(graph);
    dct_free(&d);
    return rcode;
}

static void run_nodes(int nranks, rmacoll_datatype_t dtype, const char *intra, int nodes)
{
    rmacoll_config_t cfg;
    dc_arg_t a = {dtype, nodes > 1};
    char err[256];
    int failed;

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    snprintf(cfg.intra_node, sizeof(cfg.intra_node), "%s", intra);
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", "tcp;ofi_rxm");
    fprintf(stderr, "device counts: %d ranks on %d node(s), %s, intra_node %s\n", nranks,
            nodes, rmacoll_datatype_name(dtype), intra);
    gt_nodes = nodes;
    failed = gt_run(nranks, &cfg, dc_body, &a);
    gt_nodes = 1;
    assert_int_equal(failed, 0);
}

static void run(int nranks, rmacoll_datatype_t dtype, const char *intra)
{
    run_nodes(nranks, dtype, intra, 1);
}

/* Across 2 virtual nodes: the experimental stream-triggered form
 * (RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1), every step and replay of the
 * one-node test but the host-pointer check. */
static void test_two_nodes_triggered(void **state)
{
    (void)state;
    setenv("RMACOLL_DEVICE_COUNTS_ACROSS_NODES", "1", 1);
    run_nodes(4, RMACOLL_UINT32, "ce", 2);
    unsetenv("RMACOLL_DEVICE_COUNTS_ACROSS_NODES");
}

static void test_two_ranks_uint32(void **state)
{
    (void)state;
    run(2, RMACOLL_UINT32, "nvlink_kernel");
}

static void test_four_ranks_int8(void **state)
{
    (void)state;
    run(4, RMACOLL_INT8, "auto");
}

static void test_eight_ranks_bf16(void **state)
{
    (void)state;
    run(8, RMACOLL_BFLOAT16, "nvlink_kernel");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks_uint32),
        cmocka_unit_test(test_four_ranks_int8),
        cmocka_unit_test(test_eight_ranks_bf16),
        cmocka_unit_test(test_two_nodes_triggered),
    };

    if (gt_probe() < 1) {
        printf("test_gpu_devcounts: no usable CUDA device: skipped\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
