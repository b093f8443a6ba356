/*
 * gpu_devcounts_check.c - the steps and checks of the device-count tests
 * (gpu_devcounts.h): one rank's arrays and buffers, the inputs of a step
 * written on the stream, dispatch and combine, every byte of the outcome
 * checked, and the life of one communicator (steps, capture, replays).
 * Shared by test_gpu_devcounts.c (ranks as threads) and
 * test_gpu_devcounts_proc.c (ranks as processes); the harness comes in
 * as dct_hooks_t.
 */
#include <stdio.h>
#include <string.h>

#include "gpu_devcounts.h"
#include "gpu_try.h"

#define DCT_TRY(call) RMACOLL_TEST_CUDA_TRY(call, DCT_CUDA)

#define SENT DCT_SENT
#define GUARD DCT_GUARD
#define NGUARD DCT_NGUARD
#define ST_D DCT_ST_D
#define ST_C DCT_ST_C

static size_t send_bytes(const dct_t *d)
{
    return (size_t)DCT_SEND_CAP * d->es + GUARD;
}
static size_t recv_bytes(const dct_t *d)
{
    return (size_t)DCT_RECV_CAP * d->es + GUARD;
}

int dct_alloc(dct_t *d, int rank, int n, rmacoll_datatype_t dtype, const dct_hooks_t *h)
{
    int rcode = DCT_OK;

    memset(d, 0, sizeof(*d));
    d->dtype = dtype;
    d->h = h;
    d->es = rmacoll_datatype_size(dtype);
    DCT_TRY(cudaMalloc((void **)&d->sc, (size_t)(n + NGUARD) * 8));
    DCT_TRY(cudaMalloc((void **)&d->rc, (size_t)(n + NGUARD) * 8));
    DCT_TRY(cudaMalloc((void **)&d->st, 2 * (1 + NGUARD) * 4));
    DCT_TRY(cudaMalloc((void **)&d->send, send_bytes(d)));
    DCT_TRY(cudaMalloc((void **)&d->recv, recv_bytes(d)));
    DCT_TRY(cudaMalloc((void **)&d->back, send_bytes(d)));
    DCT_TRY(cudaMallocHost((void **)&d->hrc, (size_t)(n + NGUARD) * 8));
    DCT_TRY(cudaMallocHost((void **)&d->hst, 2 * (1 + NGUARD) * 4));
    DCT_TRY(cudaMallocHost((void **)&d->hrecv, recv_bytes(d)));
    DCT_TRY(cudaMallocHost((void **)&d->hback, send_bytes(d)));
    /* the legacy stream only (gpu_threads.h says why) */
    DCT_TRY(cudaMemset(d->sc, SENT, (size_t)(n + NGUARD) * 8));
    DCT_TRY(cudaStreamSynchronize(0));
out:
    return rcode;
}

void dct_free(dct_t *d)
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

int dct_prep(dct_t *d, int rank, int n, uint64_t seed, int pattern, cudaStream_t s)
{
    int rcode = DCT_OK;

    DCT_TRY(cudaMemsetAsync(d->sc, SENT, (size_t)(n + NGUARD) * 8, s));
    DCT_TRY(dct_write_counts(d->sc, n, rank, seed, pattern, s));
    DCT_TRY(dct_fill_send(d->send, (uint64_t)DCT_SEND_CAP * d->es, rank, seed, s));
    DCT_TRY(cudaMemsetAsync(d->send + (size_t)DCT_SEND_CAP * d->es, SENT, GUARD, s));
    DCT_TRY(cudaMemsetAsync(d->recv, SENT, recv_bytes(d), s));
    DCT_TRY(cudaMemsetAsync(d->back, SENT, send_bytes(d), s));
    DCT_TRY(cudaMemsetAsync(d->rc, SENT, (size_t)(n + NGUARD) * 8, s));
    DCT_TRY(cudaMemsetAsync(d->st, SENT, 2 * (1 + NGUARD) * 4, s));
out:
    return rcode;
}

/* The combine's given counts off by one (after the dispatch, on s). */
static int dct_spoil(dct_t *d, int rank, int n, uint64_t seed, cudaStream_t s)
{
    return dct_write_counts(d->sc, n, rank, seed, DCT_PLUS1, s) == cudaSuccess ? DCT_OK
                                                                             : DCT_CUDA;
}

rmacoll_status_t dct_dispatch(dct_t *d, rmacoll_comm_t *comm, cudaStream_t s)
{
    rmacoll_status_t st = rmacoll_alltoallv_device_counts(
        d->send, d->sc, DCT_SEND_CAP, d->recv, d->rc, DCT_RECV_CAP, RMACOLL_RECV_PRODUCE,
        d->dtype, comm, s, d->st + ST_D);

    d->ncalls += st == RMACOLL_SUCCESS;
    return st;
}

rmacoll_status_t dct_combine(dct_t *d, rmacoll_comm_t *comm, cudaStream_t s)
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
            return DCT_WRONG_DATA;
        }
    }
    return DCT_OK;
}

int dct_check(dct_t *d, int rank, int n, uint64_t seed, int pattern, int wd, int wc,
              cudaStream_t s, const char *what)
{
    int64_t c[DCT_MAX_N][DCT_MAX_N];
    int rcode = DCT_OK;
    const int32_t sent32 = (int32_t)0xa5a5a5a5u;
    const int64_t sent64 = (int64_t)0xa5a5a5a5a5a5a5a5ull;
    size_t total = 0, mine = 0;

    if (d->h->sync(s, rank, what) != DCT_OK)
        return DCT_CUDA;
    DCT_TRY(cudaMemcpy(d->hrc, d->rc, (size_t)(n + NGUARD) * 8, cudaMemcpyDeviceToHost));
    DCT_TRY(cudaMemcpy(d->hst, d->st, 2 * (1 + NGUARD) * 4, cudaMemcpyDeviceToHost));
    DCT_TRY(cudaMemcpy(d->hrecv, d->recv, recv_bytes(d), cudaMemcpyDeviceToHost));
    DCT_TRY(cudaMemcpy(d->hback, d->back, send_bytes(d), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            c[i][j] = dct_count(seed, pattern, i, j, n);
    /* status words and their guards */
    if (d->hst[ST_D] != (wd < 0 ? sent32 : wd) || d->hst[ST_C] != (wc < 0 ? sent32 : wc)) {
        fprintf(stderr, "rank %d (%s, seed %llu): status dispatch %d (want %d), combine %d "
                "(want %d)\n", rank, what, (unsigned long long)seed, d->hst[ST_D], wd,
                d->hst[ST_C], wc);
        return DCT_WRONG_STATUS;
    }
    for (int g = 1; g <= NGUARD; g++) {
        if (d->hst[ST_D + g] != sent32 || d->hst[ST_C + g] != sent32) {
            fprintf(stderr, "rank %d (%s): word %d past a status written\n", rank, what, g);
            return DCT_WRONG_DATA;
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
            return DCT_WRONG_DATA;
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
                    return DCT_WRONG_DATA;
                }
            }
            total += (size_t)c[i][rank] * d->es;
        }
    }
    rcode = all_sent(d->hrecv, total, recv_bytes(d), rank, what, "receive");
    if (rcode != DCT_OK)
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
                return DCT_WRONG_DATA;
            }
        }
    }
    rcode = all_sent(d->hback, mine, send_bytes(d), rank, what, "combine");
out:
    return rcode;
}

int dct_report(rmacoll_comm_t *comm, int rank, rmacoll_status_t want, const char *text,
               const char *what)
{
    rmacoll_status_t st = rmacoll_device_counts_check(comm);

    if (st != want || (text != NULL && strstr(rmacoll_comm_last_error(comm), text) == NULL)) {
        fprintf(stderr, "rank %d (%s): device_counts_check: %s (want %s, text '%s'): %s\n",
                rank, what, rmacoll_status_name(st), rmacoll_status_name(want),
                text != NULL ? text : "", rmacoll_comm_last_error(comm));
        return DCT_WRONG_STATUS;
    }
    st = rmacoll_device_counts_check(comm);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d (%s): second device_counts_check: %s\n", rank, what,
                rmacoll_status_name(st));
        return DCT_WRONG_STATUS;
    }
    return DCT_OK;
}

const dct_step_t dct_steps[] = {
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
const int dct_nsteps = (int)(sizeof(dct_steps) / sizeof(dct_steps[0]));

int dct_ordinary(dct_t *d, rmacoll_comm_t *comm, int rank, int n, const dct_step_t *k,
                 cudaStream_t s)
{
    char text[160] = "", what[64];
    rmacoll_status_t st;
    int rcode = dct_prep(d, rank, n, k->seed, k->pattern, s);

    snprintf(what, sizeof(what), "step %llu", (unsigned long long)k->seed);
    if (rcode != DCT_OK)
        return rcode;
    st = dct_dispatch(d, comm, s);
    if (st == RMACOLL_SUCCESS && k->spoil)
        rcode = dct_spoil(d, rank, n, k->seed, s);
    if (st == RMACOLL_SUCCESS && rcode == DCT_OK)
        st = dct_combine(d, comm, s);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d (%s): call: %s: %s\n", rank, what, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        d->h->fail(rank);
        return DCT_WRONG_STATUS;
    }
    if (rcode != DCT_OK)
        return rcode;
    rcode = dct_check(d, rank, n, k->seed, k->pattern, k->wd, k->wc, s, what);
    if (rcode == DCT_OK && k->text != NULL)
        snprintf(text, sizeof(text), k->text, (int)(k->seed % (uint64_t)n));
    if (rcode == DCT_OK)
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
        return DCT_WRONG_STATUS;
    }
    return DCT_OK;
}

/* Long because: the sequence of one communicator's life (argument error,
 * ordinary steps, capture, replays) reads best as one list. */
int dct_body(rmacoll_comm_t *comm, int rank, int n, cudaStream_t s, const dct_run_t *a)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    rmacoll_status_t st1 = RMACOLL_SUCCESS, st2 = RMACOLL_SUCCESS;
    rmacoll_comm_stats_t cs;
    dct_t d;
    int rcode = dct_alloc(&d, rank, n, a->dtype, a->h);

    a->h->barrier(rank, "buffers allocated");
    if (rcode == DCT_OK && !a->across) /* across nodes pointers are not checked */
        rcode = host_counts(&d, comm, rank, s);
    for (int i = 0; i < dct_nsteps && rcode == DCT_OK; i++)
        rcode = dct_ordinary(&d, comm, rank, n, &dct_steps[i], s);
    if (rcode != DCT_OK)
        goto out;

    /* capture dispatch + combine: nothing moves, nothing is written */
    rcode = dct_prep(&d, rank, n, 20, DCT_RANDOM, s);
    if (rcode != DCT_OK)
        goto out;
    if (a->h->sync(s, rank, "before capture") != DCT_OK) {
        rcode = DCT_CUDA;
        goto out;
    }
    DCT_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    st1 = dct_dispatch(&d, comm, s);
    if (st1 == RMACOLL_SUCCESS)
        st2 = dct_combine(&d, comm, s);
    DCT_TRY(cudaStreamEndCapture(s, &graph));
    if (st1 != RMACOLL_SUCCESS || st2 != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: calls under capture: %s / %s: %s\n", rank,
                rmacoll_status_name(st1), rmacoll_status_name(st2),
                rmacoll_comm_last_error(comm));
        a->h->fail(rank);
        rcode = DCT_WRONG_STATUS;
        goto out;
    }
    DCT_TRY(cudaGraphInstantiate(&exec, graph, 0));
    rcode = dct_check(&d, rank, n, 20, DCT_RANDOM, -1, -1, s, "after capture");
    /* replays, new counts and data before each */
    for (int r = 1; r <= a->replays && rcode == DCT_OK; r++) {
        static const int pat[10] = {DCT_RANDOM, DCT_RANDOM, DCT_ZERO,    DCT_RANDOM,
                                    DCT_TO_ONE, DCT_SKEW,   DCT_RANDOM,  DCT_OVER_RECV,
                                    DCT_RANDOM, DCT_RANDOM};
        uint64_t seed = 1000 + (uint64_t)r;
        int pattern = pat[r % 10], over = pattern == DCT_OVER_RECV;
        char what[48];

        snprintf(what, sizeof(what), "replay %d", r);
        rcode = dct_prep(&d, rank, n, seed, pattern, s);
        if (rcode != DCT_OK)
            break;
        DCT_TRY(cudaGraphLaunch(exec, s));
        rcode = dct_check(&d, rank, n, seed, pattern, over ? RMACOLL_ERR_OVERFLOW : 0,
                          over ? RMACOLL_ERR_OVERFLOW : 0, s, what);
        if (rcode == DCT_OK)
            rcode = dct_report(comm, rank, over ? RMACOLL_ERR_OVERFLOW : RMACOLL_SUCCESS,
                               over ? "more elements to receive than recv_capacity" : NULL,
                               what);
        /* ordinary calls between replays pair up alike */
        if (rcode == DCT_OK && r % 25 == 0)
            rcode = dct_ordinary(&d, comm, rank, n, &dct_steps[0], s);
    }
    if (rcode == DCT_OK) {
        memset(&cs, 0, sizeof(cs));
        cs.struct_size = sizeof(cs);
        if (rmacoll_comm_get_stats(comm, &cs) != RMACOLL_SUCCESS ||
            cs.device_counts_calls != (uint64_t)d.ncalls) {
            fprintf(stderr, "rank %d: stats: device_counts_calls %llu, want %d\n", rank,
                    (unsigned long long)cs.device_counts_calls, d.ncalls);
            rcode = DCT_WRONG_STATUS;
        }
    }
out:
    if (rcode != DCT_CUDA)
        (void)a->h->sync(s, rank, "before freeing");
    a->h->barrier(rank, "before freeing"); /* no rank frees while another's stream runs */
    if (exec != NULL)
        cudaGraphExecDestroy(exec);
    if (graph != NULL)
        cudaGraphDestroy(graph);
    dct_free(&d);
    return rcode;
}
