/*
 * dcx.c - packed-layout alltoallv whose receive side is produced, run by
 * the host on host-visible counts, at any number of nodes: the host form
 * of rmacoll_alltoallv_device_counts (stream NULL, every array and buffer
 * in host memory), and the protocol its stream-triggered form across nodes
 * runs once the counts have reached the host (issue 31, item 3).
 *
 * One call is two ordinary calls of the pipeline (exec.c), both with host
 * counts, so they take every path a host call takes (eager and one-round
 * at any node count, the relay, the agreement on argument errors):
 *
 *  1. Records. Each rank sends every rank the same record (one block,
 *     sdispls all 0): its send counts, its receive counts when given, its
 *     capacities, its element size and its own argument error, if any.
 *     After it every rank holds the whole count matrix.
 *  2. Verdict. Every rank computes the same verdict from the same matrix,
 *     with the rules and order of the one-node device-count kernel (the
 *     failure with the lowest key (rank, reason, peer) wins):
 *     a negative count, a sum past INT64_MAX, a send or receive capacity
 *     passed, a given receive count that differs from its sender's. So
 *     every rank returns the same error and none writes a byte of its
 *     receive buffer.
 *  3. Data. Packed layouts (displacements are prefix sums of the counts),
 *     the counts checked against the capacities: one alltoallv.
 *
 * Cost against a host-count alltoallv: one more exchange of
 * nranks * (2 nranks + 6) * 8 bytes per rank (the records).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec/call.h"
#include "core/base/trace.h"
#include "core/exec/state.h"

/* A record's words after the two count vectors (rec_len: 2n + DCX_TAIL).
 * The first three are the kernel's row layout (recv_cap, send_cap, given). */
enum {
    DCX_RECV_CAP = 0,
    DCX_SEND_CAP,
    DCX_GIVEN,
    DCX_ESIZE,
    DCX_ARG_STATUS, /* this rank's argument error (0: none) */
    DCX_ARG_WHAT,   /* which argument: an index into dcx_arg_text */
    DCX_TAIL
};

static const char *const dcx_arg_text[] = {
    "",
    "sendcounts is NULL (nranks int64 expected)",
    "recvcounts is NULL (nranks int64 expected)",
    "status is NULL (one int32 expected)",
    "mode is neither RMACOLL_RECV_PRODUCE nor RMACOLL_RECV_GIVEN",
    "send_capacity is negative",
    "recv_capacity is negative",
    "sendbuf is NULL with send_capacity > 0",
    "recvbuf is NULL with recv_capacity > 0",
    "send_capacity * element size passes 2^63 - 1 bytes",
    "recv_capacity * element size passes 2^63 - 1 bytes",
    "dtype is not a rmacoll_datatype_t",
};

static const char *const dcx_why_text[] = {
    "", "a negative count", "more elements to send than send_capacity",
    "more elements to receive than recv_capacity", "a sum of counts past INT64_MAX",
    "a receive count that differs from its sender's count"};

/* This rank's argument error: the status, and *what its text. */
static rmacoll_status_t dcx_check_args(const rmacoll__dcx_args_t *a, size_t esize, int *what)
{
    struct {
        int bad;
        rmacoll_status_t st;
    } const t[] = {
        {a->sendcounts == NULL, RMACOLL_ERR_INVALID_ARG},
        {a->recvcounts == NULL, RMACOLL_ERR_INVALID_ARG},
        {a->status == NULL, RMACOLL_ERR_INVALID_ARG},
        {a->mode != RMACOLL_RECV_PRODUCE && a->mode != RMACOLL_RECV_GIVEN,
         RMACOLL_ERR_INVALID_ARG},
        {a->send_capacity < 0, RMACOLL_ERR_INVALID_ARG},
        {a->recv_capacity < 0, RMACOLL_ERR_INVALID_ARG},
        {a->sendbuf == NULL && a->send_capacity > 0, RMACOLL_ERR_NULL_BUFFER},
        {a->recvbuf == NULL && a->recv_capacity > 0, RMACOLL_ERR_NULL_BUFFER},
        {esize != 0 && (uint64_t)a->send_capacity > (uint64_t)INT64_MAX / esize,
         RMACOLL_ERR_OVERFLOW},
        {esize != 0 && (uint64_t)a->recv_capacity > (uint64_t)INT64_MAX / esize,
         RMACOLL_ERR_OVERFLOW},
        {esize == 0, RMACOLL_ERR_DATATYPE},
    };

    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        if (t[k].bad) {
            *what = (int)k + 1;
            return t[k].st;
        }
    }
    *what = 0;
    return RMACOLL_SUCCESS;
}

/* The kernel's failure key: the lowest wins (rank, then reason, then peer;
 * 255: no peer). */
static uint64_t dcx_key(int rank, int why, int peer)
{
    return ((uint64_t)(uint32_t)rank << 16) | ((uint64_t)(uint32_t)why << 8) |
           (uint64_t)(uint32_t)(peer & 0xff);
}

rmacoll_status_t rmacoll__dcx_verdict(int n, const int64_t *rows, size_t rec_len,
                                      rmacoll__dcx_verdict_t *v)
{
    uint64_t best = UINT64_MAX;

    memset(v, 0, sizeof(*v));
    v->rank = v->peer = -1;
#define DCX_TAKE(rk, wh, pr, nd, hv)                                                  \
    do {                                                                             \
        uint64_t kk_ = dcx_key((rk), (wh), (pr));                                    \
        if (kk_ < best) {                                                            \
            best = kk_;                                                              \
            v->rank = (rk);                                                          \
            v->why = (wh);                                                           \
            v->peer = (pr) == 255 ? -1 : (pr);                                       \
            v->need = (nd);                                                          \
            v->have = (hv);                                                          \
        }                                                                            \
    } while (0)
    for (int t = 0; t < n; t++) {
        const int64_t *rt = rows + (size_t)t * rec_len;
        const int64_t *tail = rt + 2 * (size_t)n;
        int64_t total = 0, stot = 0;

        /* column t: what t receives */
        for (int i = 0; i < n; i++) {
            int64_t c = rows[(size_t)i * rec_len + t];

            if (c < 0) {
                DCX_TAKE(i, RMACOLL_DCOUNTS_WHY_NEGATIVE, t, c, 0);
                continue;
            }
            if (total > INT64_MAX - c) {
                DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_SUM, i, c, total);
                total = INT64_MAX;
            } else {
                total += c;
            }
            if (tail[DCX_GIVEN] != 0 && rt[n + i] != c) {
                DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_MISMATCH, i, c, rt[n + i]);
            }
        }
        if (total > tail[DCX_RECV_CAP]) {
            DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_RECV_CAP, 255, total, tail[DCX_RECV_CAP]);
        }
        /* row t: what t sends */
        for (int j = 0; j < n; j++) {
            int64_t c = rt[j];

            if (c < 0) {
                continue; /* taken by column j */
            }
            if (stot > INT64_MAX - c) {
                DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_SUM, j, c, stot);
                stot = INT64_MAX;
            } else {
                stot += c;
            }
        }
        if (stot > tail[DCX_SEND_CAP]) {
            DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_SEND_CAP, 255, stot, tail[DCX_SEND_CAP]);
        }
    }
#undef DCX_TAKE
    if (best == UINT64_MAX) {
        return RMACOLL_SUCCESS;
    }
    v->code = v->why == RMACOLL_DCOUNTS_WHY_MISMATCH ? RMACOLL_ERR_MISMATCH
                                                      : RMACOLL_ERR_OVERFLOW;
    return v->code;
}

int rmacoll__dcx_verdict_text(const rmacoll__dcx_verdict_t *v, char *buf, size_t len)
{
    char peer[32] = "";

    if (v->peer >= 0) {
        snprintf(peer, sizeof(peer), " (peer: rank %d)", v->peer);
    }
    return snprintf(buf, len, "rank %d: %s%s: %lld against %lld elements", v->rank,
                    v->why > 0 && v->why < (int)(sizeof(dcx_why_text) / sizeof(dcx_why_text[0]))
                        ? dcx_why_text[v->why]
                        : "unknown reason",
                    peer, (long long)v->need, (long long)v->have);
}

/* One pipeline call with host counts (the caller has entered comm). */
static rmacoll_status_t dcx_alltoallv(rmacoll_comm_t *comm, const void *sbuf,
                                      const int64_t *scounts, const int64_t *sdispls,
                                      void *rbuf, const int64_t *rcounts,
                                      const int64_t *rdispls, rmacoll_datatype_t dtype)
{
    rmacoll__call_t call;
    rmacoll_status_t st = rmacoll__call_begin(&call, comm, sbuf, scounts, sdispls, rbuf,
                                              rcounts, rdispls, dtype, NULL);

    return st == RMACOLL_SUCCESS ? rmacoll__call_pipeline(&call) : st;
}

rmacoll_status_t rmacoll__dcx_host(rmacoll_comm_t *comm, const rmacoll__dcx_args_t *a)
{
    int n = comm->nranks, me = comm->rank, what = 0;
    size_t rec_len = 2 * (size_t)n + DCX_TAIL;
    size_t esize = rmacoll_datatype_size(a->dtype);
    int64_t *mine, *rows, *arr;
    rmacoll__dcx_verdict_t v;
    rmacoll_status_t st, arg_st;
    char text[256];

    /* the record, the matrix, and counts / displacements for both calls */
    mine = calloc(rec_len + (size_t)n * rec_len + 4 * (size_t)n, sizeof(int64_t));
    if (mine == NULL) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_NO_MEMORY, "rank %d: "
                             "rmacoll_alltoallv_device_counts: no memory for the count "
                             "records (%zu bytes)", me,
                             (rec_len * (size_t)(n + 1) + 4 * (size_t)n) * sizeof(int64_t));
    }
    rows = mine + rec_len;
    arr = rows + (size_t)n * rec_len;
    arg_st = dcx_check_args(a, esize, &what);
    if (arg_st == RMACOLL_SUCCESS) {
        memcpy(mine, a->sendcounts, (size_t)n * sizeof(int64_t));
        if (a->mode == RMACOLL_RECV_GIVEN) {
            memcpy(mine + n, a->recvcounts, (size_t)n * sizeof(int64_t));
        }
        mine[2 * n + DCX_RECV_CAP] = a->recv_capacity;
        mine[2 * n + DCX_SEND_CAP] = a->send_capacity;
        mine[2 * n + DCX_GIVEN] = a->mode == RMACOLL_RECV_GIVEN;
    }
    mine[2 * n + DCX_ESIZE] = (int64_t)esize;
    mine[2 * n + DCX_ARG_STATUS] = arg_st;
    mine[2 * n + DCX_ARG_WHAT] = what;
    /* 1. every rank's record to every rank: one send block, read n times */
    for (int j = 0; j < n; j++) {
        arr[j] = (int64_t)rec_len;           /* counts */
        arr[n + j] = 0;                      /* sdispls */
        arr[2 * n + j] = (int64_t)(j * rec_len); /* rdispls */
    }
    st = dcx_alltoallv(comm, mine, arr, arr + n, rows, arr, arr + 2 * n, RMACOLL_INT64);
    if (st != RMACOLL_SUCCESS) {
        free(mine);
        return st; /* the pipeline's message */
    }
    /* 2. the same verdict on every rank: argument errors (lowest rank),
     * element sizes, then the counts */
    for (int i = 0; i < n; i++) {
        const int64_t *tail = rows + (size_t)i * rec_len + 2 * (size_t)n;

        if (tail[DCX_ARG_STATUS] != RMACOLL_SUCCESS) {
            int w = (int)tail[DCX_ARG_WHAT];

            st = (rmacoll_status_t)tail[DCX_ARG_STATUS];
            free(mine);
            return rmacoll__fail(&comm->fail, st, "rank %d: rmacoll_alltoallv_device_counts: "
                                 "rank %d: %s; nothing was written", me, i,
                                 w > 0 && w < (int)(sizeof(dcx_arg_text) /
                                                    sizeof(dcx_arg_text[0]))
                                     ? dcx_arg_text[w]
                                     : "an invalid argument");
        }
        if (tail[DCX_ESIZE] != (int64_t)esize) {
            long long other = (long long)tail[DCX_ESIZE];

            free(mine);
            return rmacoll__fail(&comm->fail, RMACOLL_ERR_DATATYPE, "rank %d: "
                                 "rmacoll_alltoallv_device_counts: element sizes differ: "
                                 "rank %d's element is %lld bytes, rank %d's %zu; nothing was written",
                                 me, i, other, me, esize);
        }
    }
    for (int i = 0; i < n; i++) {
        arr[i] = rows[(size_t)me * rec_len + i];    /* send counts */
        arr[2 * n + i] = rows[(size_t)i * rec_len + me]; /* receive counts */
    }
    st = rmacoll__dcx_verdict(n, rows, rec_len, &v);
    if (a->mode == RMACOLL_RECV_PRODUCE) {
        /* also on a failure: the sizes a retry needs */
        memcpy(a->recvcounts, arr + 2 * n, (size_t)n * sizeof(int64_t));
    }
    if (st != RMACOLL_SUCCESS) {
        rmacoll__dcx_verdict_text(&v, text, sizeof(text));
        *a->status = (int32_t)st;
        free(mine);
        return rmacoll__fail(&comm->fail, st, "rank %d: rmacoll_alltoallv_device_counts "
                             "failed: %s; no receive buffer was written", me, text);
    }
    /* 3. packed layouts: displacements are prefix sums (checked above
     * against the capacities, so they cannot overflow) */
    arr[n] = arr[3 * n] = 0;
    for (int i = 1; i < n; i++) {
        arr[n + i] = arr[n + i - 1] + arr[i - 1];
        arr[3 * n + i] = arr[3 * n + i - 1] + arr[2 * n + i - 1];
    }
    st = dcx_alltoallv(comm, a->sendbuf, arr, arr + n, a->recvbuf, arr + 2 * n, arr + 3 * n,
                       a->dtype);
    *a->status = (int32_t)st;
    free(mine);
    return st;
}

rmacoll_status_t rmacoll_alltoallv_device_counts(const void *sendbuf,
                                                 const int64_t *sendcounts,
                                                 int64_t send_capacity, void *recvbuf,
                                                 int64_t *recvcounts, int64_t recv_capacity,
                                                 rmacoll_recv_mode_t mode,
                                                 rmacoll_datatype_t dtype,
                                                 rmacoll_comm_t *comm, void *stream,
                                                 int32_t *status)
{
    rmacoll__dcounts_t dc = {sendcounts, send_capacity, recvcounts, recv_capacity,
                             (int)mode, status};
    rmacoll__call_t call;
    rmacoll_status_t st;
    int64_t *zero;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    st = rmacoll__enter(comm, "rmacoll_alltoallv_device_counts");
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (stream == NULL) {
        /* host memory: the host runs the call, at any node count */
        rmacoll__dcx_args_t a = {sendbuf, sendcounts, send_capacity, recvbuf, recvcounts,
                                 recv_capacity, (int)mode, dtype, status};

        rmacoll__trace_push("rmacoll:alltoallv_device_counts",
                            send_capacity > 0 ? (uint64_t)send_capacity *
                                                    rmacoll_datatype_size(dtype)
                                              : 0);
        comm->last_error[0] = '\0';
        st = rmacoll__dcx_host(comm, &a);
        rmacoll__trace_pop();
        rmacoll__leave(comm);
        return st;
    }
    /* the pipeline sees zero host counts: it validates, exchanges and
     * agrees; the device-count runner moves the data (run_stream.c) */
    zero = comm->uniform;
    memset(zero, 0, 2 * (size_t)comm->nranks * sizeof(*zero));
    st = rmacoll__call_begin(&call, comm, sendbuf, zero, zero + comm->nranks, recvbuf, zero,
                             zero + comm->nranks, dtype, stream);
    if (st == RMACOLL_SUCCESS) {
        call.runner = &rmacoll__run_dcounts;
        call.dc = &dc;
        /* the counts are on the device: the payload is the send capacity */
        rmacoll__trace_push("rmacoll:alltoallv_device_counts",
                            send_capacity > 0 ? (uint64_t)send_capacity *
                                                    rmacoll_datatype_size(dtype)
                                              : 0);
        st = rmacoll__call_pipeline(&call);
        rmacoll__trace_pop();
    }
    rmacoll__leave(comm);
    return st;
}
