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
 *
 * The stream-triggered form that runs this on its worker thread is in
 * dcx_stream.c.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/exec/call.h"
#include "core/base/clock.h"
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
    DCX_ARG_WHAT,   /* which argument: rmacoll__dc_arg_check's number */
    DCX_TAIL
};

static const char *const dcx_why_text[] = {
    "", "a negative count", "more elements to send than send_capacity",
    "more elements to receive than recv_capacity", "a sum of counts past INT64_MAX",
    "a receive count that differs from its sender's count"};

/* This rank's argument error: the status, and *what its number. */
rmacoll_status_t rmacoll__dcx_check_args(const rmacoll__dcx_args_t *a, size_t esize, int *what)
{
    if (a->forced != 0) {
        *what = a->forced;
        return rmacoll__dc_arg_status(*what);
    }
    *what = rmacoll__dc_arg_check(a->sendbuf, a->sendcounts, a->send_capacity, a->recvbuf,
                                  a->recvcounts, a->recv_capacity, a->mode, a->status, esize);
    return rmacoll__dc_arg_status(*what);
}

/* The kernel's failure key, widened for any number of ranks: the lowest
 * wins (rank, then reason, then peer; DCX_NO_PEER sorts after every peer). */
#define DCX_NO_PEER (-1)
static uint64_t dcx_key(int rank, int why, int peer)
{
    return ((uint64_t)(uint32_t)rank << 40) | ((uint64_t)(uint8_t)why << 32) |
           (peer < 0 ? UINT32_MAX : (uint64_t)(uint32_t)peer);
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
            v->peer = (pr);                                                          \
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
            DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_RECV_CAP, DCX_NO_PEER, total, tail[DCX_RECV_CAP]);
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
            DCX_TAKE(t, RMACOLL_DCOUNTS_WHY_SEND_CAP, DCX_NO_PEER, stot, tail[DCX_SEND_CAP]);
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
    arg_st = rmacoll__dcx_check_args(a, esize, &what);
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
     * then element sizes (each against rank 0's), then the counts */
    for (int i = 0; i < n; i++) {
        const int64_t *tail = rows + (size_t)i * rec_len + 2 * (size_t)n;

        if (tail[DCX_ARG_STATUS] != RMACOLL_SUCCESS) {
            int w = (int)tail[DCX_ARG_WHAT];

            st = (rmacoll_status_t)tail[DCX_ARG_STATUS];
            free(mine);
            /* logged at ERROR once, by the rank it names (base/fail.h) */
            return (i == me ? rmacoll__fail : rmacoll__fail_secondary)(
                &comm->fail, st, "rank %d: rmacoll_alltoallv_device_counts: rank %d: %s; "
                "nothing was written", me, i, rmacoll__dc_arg_text(w));
        }
    }
    for (int i = 1; i < n; i++) {
        const int64_t e0 = rows[2 * (size_t)n + DCX_ESIZE];
        const int64_t ei = rows[(size_t)i * rec_len + 2 * (size_t)n + DCX_ESIZE];

        if (ei != e0) {
            free(mine);
            return (i == me ? rmacoll__fail : rmacoll__fail_secondary)(
                &comm->fail, RMACOLL_ERR_DATATYPE, "rank %d: "
                                 "rmacoll_alltoallv_device_counts: element sizes differ: "
                                 "rank 0's element is %lld bytes, rank %d's %lld; nothing "
                                 "was written", me, (long long)e0, i, (long long)ei);
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
        return (v.rank == me ? rmacoll__fail : rmacoll__fail_secondary)(
            &comm->fail, st, "rank %d: rmacoll_alltoallv_device_counts failed: %s; no "
            "receive buffer was written", me, text);
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
