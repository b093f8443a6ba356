/*
 * test_dcx.c - rmacoll_alltoallv_device_counts in its host form (stream
 * NULL, counts and buffers in host memory) at one and several nodes: the
 * protocol the stream-triggered form across nodes runs once its counts
 * reach the host (core/exec/dcx.c; issue 31 item 3). Ranks are threads of
 * one process (built-in bootstrap), 1 x 4, 2 x 2 and 4 x 1 virtual nodes
 * over ofi tcp.
 *
 * Every iteration draws one count matrix from a seed all ranks share
 * (zeros, skew, everything to one rank, random), runs a dispatch (receive
 * side PRODUCED) and the combine that sends every block back (receive side
 * GIVEN: the dispatch's counts), and checks every element of both receive
 * buffers, the sentinel-filled tail after the received elements and a
 * guard after the capacity. Failures: a receive capacity one element too
 * small on one rank (OVERFLOW on every rank, naming that rank; no receive
 * buffer written; the produced counts are the sizes a retry needs), a
 * send count past the send capacity, a negative count, a given count that
 * differs from its sender's (MISMATCH), an argument error on one rank,
 * element sizes that differ, and stream NULL on one rank only (fails on
 * every rank); after them the communicator still works.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rmacoll.h"
#include "core/exec/state.h"

#define MAXR 4
#define CAP 600          /* receive and send capacity, elements */
#define GUARD 8          /* elements after the capacity */
#define SENT (-1234567)  /* sentinel */
#define ITERS 24
#define FAKE_STREAM ((void *)0x2) /* never touched: the stream steps are emulated */

typedef struct rank_arg {
    int rank, nranks, nodes;
    const rmacoll_unique_id_t *id;
    const rmacoll_config_t *cfg;
    int result;
    char why[512];
} rank_arg_t;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            snprintf(a->why, sizeof(a->why), __VA_ARGS__);                     \
            a->result = __LINE__;                                              \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* xorshift64*, one stream per iteration seed */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* The count matrix m[i][j] (rank i sends to j) of iteration it. */
static void matrix(int it, int n, int64_t m[MAXR][MAXR])
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(it + 1);
    int kind = it % 4, hot = (int)(rnd(&s) % (uint64_t)n);

    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            switch (kind) {
            case 0: /* zeros, but for one pair */
                m[i][j] = (i == hot && j == (hot + 1) % n) ? 7 : 0;
                break;
            case 1: /* skewed: the hot rank receives most */
                m[i][j] = j == hot ? 100 + (int64_t)(rnd(&s) % 50) : (int64_t)(rnd(&s) % 5);
                break;
            case 2: /* everything to one rank */
                m[i][j] = j == hot ? (int64_t)(CAP / n) : 0;
                break;
            default:
                m[i][j] = (int64_t)(rnd(&s) % 120);
                break;
            }
        }
    }
}

static int32_t val(int src, int dst, int64_t k, int it)
{
    return (int32_t)((src << 26) | (dst << 22) | ((it & 0x3f) << 16) | (int32_t)(k & 0xffff));
}

/* Fills sb with this rank's packed send blocks; the rest sentinel. */
static void fill_send(int32_t *sb, int me, int n, int64_t m[MAXR][MAXR], int it)
{
    int64_t off = 0;

    for (int i = 0; i < CAP + GUARD; i++) {
        sb[i] = SENT;
    }
    for (int j = 0; j < n; j++) {
        for (int64_t k = 0; k < m[me][j]; k++) {
            sb[off++] = val(me, j, k, it);
        }
    }
}

/* Checks rb: the blocks of every source in rank order, then sentinels up
 * to the capacity and the guard. Returns the first bad index, or -1. */
static int64_t check_recv(const int32_t *rb, int me, int n, int64_t m[MAXR][MAXR], int it,
                          int back)
{
    int64_t off = 0;

    for (int i = 0; i < n; i++) {
        /* dispatch: rank i's block for me; combine: my own block for i, back */
        int64_t cnt = back ? m[me][i] : m[i][me];

        for (int64_t k = 0; k < cnt; k++, off++) {
            if (rb[off] != (back ? val(me, i, k, it) : val(i, me, k, it))) {
                return off;
            }
        }
    }
    for (; off < CAP + GUARD; off++) {
        if (rb[off] != SENT) {
            return off;
        }
    }
    return -1;
}

/* The buffers of one rank. */
typedef struct bufs {
    int64_t m[MAXR][MAXR], sc[MAXR], rc[MAXR + 1], rc2[MAXR + 1];
    int32_t *sb, *rb, *rb2;
    int32_t status, status2;
} bufs_t;

/* A communicator of a->nodes virtual nodes (node keys PREFIX-node-i). */
static rmacoll_comm_t *make_comm(rank_arg_t *a, const char *prefix)
{
    rmacoll_comm_params_t prm;
    rmacoll_comm_t *comm = NULL;
    char key[32];
    rmacoll_status_t st;

    memset(&prm, 0, sizeof(prm));
    prm.struct_size = sizeof(prm);
    prm.rank = a->rank;
    prm.nranks = a->nranks;
    prm.unique_id = a->id;
    prm.config = a->cfg;
    snprintf(key, sizeof(key), "%s-node-%d", prefix, a->rank / (a->nranks / a->nodes));
    prm.node_key = key;
    st = rmacoll_comm_create(&prm, &comm);
    if (st != RMACOLL_SUCCESS) {
        snprintf(a->why, sizeof(a->why), "create: %s", rmacoll_status_name(st));
        a->result = __LINE__;
        return NULL;
    }
    return comm;
}

/* b's three buffers of CAP + GUARD elements (send, receive, the combine's
 * receive), zeroed. 1: all allocated; 0: a->why says so (b holds what was
 * allocated, for bufs_free). */
static int bufs_alloc(rank_arg_t *a, bufs_t *b)
{
    b->sb = calloc(CAP + GUARD, sizeof(int32_t));
    b->rb = calloc(CAP + GUARD, sizeof(int32_t));
    b->rb2 = calloc(CAP + GUARD, sizeof(int32_t));
    if (b->sb == NULL || b->rb == NULL || b->rb2 == NULL) {
        snprintf(a->why, sizeof(a->why), "no memory");
        a->result = __LINE__;
        return 0;
    }
    return 1;
}

/* Frees what bufs_alloc allocated. */
static void bufs_free(bufs_t *b)
{
    free(b->sb);
    free(b->rb);
    free(b->rb2);
}

/* Iteration it: a dispatch (receive side produced) and the combine that
 * sends every block back (given), on `stream` (NULL: the host form), every
 * element, the sentinel tails and the guards checked. 1: all good. */
static int round_trip(rmacoll_comm_t *comm, rank_arg_t *a, bufs_t *b, int it, void *stream)
{
    int n = a->nranks, me = a->rank;
    int64_t bad;
    rmacoll_status_t st;

    matrix(it, n, b->m);
    fill_send(b->sb, me, n, b->m, it);
    for (int i = 0; i < CAP + GUARD; i++) {
        b->rb[i] = b->rb2[i] = SENT;
    }
    for (int j = 0; j < n; j++) {
        b->sc[j] = b->m[me][j];
        b->rc[j] = -5;
        b->rc2[j] = b->m[me][j];
    }
    b->rc[n] = b->rc2[n] = -99; /* guards after the count arrays */
    b->status = b->status2 = 77;
    st = rmacoll_alltoallv_device_counts(b->sb, b->sc, CAP, b->rb, b->rc, CAP,
                                         RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm, stream,
                                         &b->status);
    CHECK(st == RMACOLL_SUCCESS && b->status == 0, "iteration %d dispatch: %s, status %d (%s)",
          it, rmacoll_status_name(st), b->status, rmacoll_comm_last_error(comm));
    for (int i = 0; i < n; i++) {
        CHECK(b->rc[i] == b->m[i][me], "iteration %d: recvcounts[%d] = %lld, want %lld", it, i,
              (long long)b->rc[i], (long long)b->m[i][me]);
    }
    CHECK(b->rc[n] == -99, "iteration %d: written past recvcounts", it);
    bad = check_recv(b->rb, me, n, b->m, it, 0);
    CHECK(bad < 0, "iteration %d dispatch: element %lld is %d", it, (long long)bad,
          b->rb[bad]);
    st = rmacoll_alltoallv_device_counts(b->rb, b->rc, CAP, b->rb2, b->rc2, CAP,
                                         RMACOLL_RECV_GIVEN, RMACOLL_INT32, comm, stream,
                                         &b->status2);
    CHECK(st == RMACOLL_SUCCESS && b->status2 == 0, "iteration %d combine: %s, status %d (%s)",
          it, rmacoll_status_name(st), b->status2, rmacoll_comm_last_error(comm));
    CHECK(b->rc2[n] == -99, "iteration %d: written past the given recvcounts", it);
    bad = check_recv(b->rb2, me, n, b->m, it, 1);
    CHECK(bad < 0, "iteration %d combine: element %lld is %d", it, (long long)bad,
          b->rb2[bad]);
    return 1;
out:
    return 0;
}

/* A failing call: the same code on every rank, the message naming
 * `who`, no receive element written, the status word set (when the call
 * got that far). */
static int expect_fail(rmacoll_comm_t *comm, rank_arg_t *a, rmacoll_status_t st,
                       rmacoll_status_t want, const char *who, const char *text,
                       const int32_t *rb, const char *name)
{
    const char *msg = rmacoll_comm_last_error(comm);

    if (st != want) {
        snprintf(a->why, sizeof(a->why), "%s: got %s, want %s (%s)", name,
                 rmacoll_status_name(st), rmacoll_status_name(want), msg);
        return 0;
    }
    if (who != NULL && strstr(msg, who) == NULL) {
        snprintf(a->why, sizeof(a->why), "%s: message does not name '%s': '%s'", name, who,
                 msg);
        return 0;
    }
    if (text != NULL && strstr(msg, text) == NULL) {
        snprintf(a->why, sizeof(a->why), "%s: message does not say '%s': '%s'", name, text,
                 msg);
        return 0;
    }
    for (int i = 0; i < CAP + GUARD; i++) {
        if (rb[i] != SENT) {
            snprintf(a->why, sizeof(a->why), "%s: receive element %d written (%d)", name, i,
                     rb[i]);
            return 0;
        }
    }
    return 1;
}

#define EXPECT_FAIL(...)                                                       \
    do {                                                                       \
        if (!expect_fail(__VA_ARGS__)) {                                       \
            a->result = __LINE__;                                              \
            goto out;                                                          \
        }                                                                      \
    } while (0)

static void *rank_main(void *p)
{
    rank_arg_t *a = p;
    rmacoll_comm_t *comm = NULL;
    int n = a->nranks, me = a->rank;
    bufs_t b;
    int64_t (*m)[MAXR] = b.m, *sc = b.sc, *rc = b.rc, *rc2 = b.rc2;
    int32_t *sb, *rb;
    int32_t status;
    char who[96];
    rmacoll_status_t st;

    if (!bufs_alloc(a, &b)) {
        goto out;
    }
    sb = b.sb;
    rb = b.rb;
    comm = make_comm(a, "dcx");
    if (comm == NULL) {
        goto out;
    }
    for (int it = 0; it < ITERS; it++) {
        if (!round_trip(comm, a, &b, it, NULL)) {
            goto out;
        }
    }

    /* failures, on the matrix of iteration 3 (random counts) */
    matrix(3, n, m);
    for (int j = 0; j < n; j++) {
        sc[j] = m[me][j];
    }
    {
        int victim = n - 1;
        int64_t total = 0;

        for (int i = 0; i < n; i++) {
            total += m[i][victim];
        }
        /* 1. the last rank's receive capacity one element short */
        for (int i = 0; i < CAP + GUARD; i++) {
            rb[i] = SENT;
        }
        status = 77;
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc, me == victim ? total - 1 : CAP,
                                             RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm, NULL,
                                             &status);
        snprintf(who, sizeof(who), "rank %d: more elements to receive", victim);
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_OVERFLOW, who, "no receive buffer was written",
                          rb, "receive capacity");
        CHECK(status == RMACOLL_ERR_OVERFLOW, "receive capacity: status %d", status);
        for (int i = 0; i < n; i++) {
            CHECK(rc[i] == m[i][me], "receive capacity: recvcounts[%d] = %lld, want %lld", i,
                  (long long)rc[i], (long long)m[i][me]);
        }
        /* 2. rank 0 sends past its send capacity */
        st = rmacoll_alltoallv_device_counts(sb, sc, me == 0 ? 0 : CAP, rb, rc, CAP,
                                             RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm, NULL,
                                             &status);
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_OVERFLOW, "rank 0: more elements to send",
                          NULL, rb, "send capacity");
        /* 3. a negative count: rank 1's for rank 0 */
        if (me == 1) {
            sc[0] = -3;
        }
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc, CAP, RMACOLL_RECV_PRODUCE,
                                             RMACOLL_INT32, comm, NULL, &status);
        sc[0] = m[me][0];
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_OVERFLOW, "rank 1: a negative count "
                          "(peer: rank 0)", NULL, rb, "negative count");
        /* 4. combine with a given count that differs on the last rank */
        for (int j = 0; j < n; j++) {
            rc2[j] = m[j][me];
        }
        if (me == victim) {
            rc2[0] += 1;
        }
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc2, CAP, RMACOLL_RECV_GIVEN,
                                             RMACOLL_INT32, comm, NULL, &status);
        snprintf(who, sizeof(who), "rank %d: a receive count that differs", victim);
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_MISMATCH, who, "(peer: rank 0)", rb,
                          "mismatch");
        /* 5. an argument error on rank 1: every rank fails, naming it */
        st = rmacoll_alltoallv_device_counts(sb, me == 1 ? NULL : sc, CAP, rb, rc, CAP,
                                             RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm, NULL,
                                             &status);
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_INVALID_ARG, "rank 1: sendcounts is NULL",
                          NULL, rb, "NULL sendcounts");
        /* 6. element sizes that differ */
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP / 2, rb, rc, CAP / 2,
                                             RMACOLL_RECV_PRODUCE,
                                             me == 0 ? RMACOLL_INT64 : RMACOLL_INT32, comm,
                                             NULL, &status);
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_DATATYPE, NULL, "element sizes differ", rb,
                          "dtype");
        /* 6b. rank 0 with another element size, rank 1 with an argument
         * error: the argument error wins on every rank */
        st = rmacoll_alltoallv_device_counts(sb, me == 1 ? NULL : sc, CAP / 2, rb, rc, CAP / 2,
                                             RMACOLL_RECV_PRODUCE,
                                             me == 0 ? RMACOLL_INT64 : RMACOLL_INT32, comm,
                                             NULL, &status);
        EXPECT_FAIL(comm, a, st, RMACOLL_ERR_INVALID_ARG, "rank 1: sendcounts is NULL", NULL,
                    rb, "dtype and argument error");
        /* 7. stream NULL on rank 0 only (host form there, the device
         * form, refused without a GPU, elsewhere): fails on every rank */
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc, CAP, RMACOLL_RECV_PRODUCE,
                                             RMACOLL_INT32, comm,
                                             me == 0 ? NULL : (void *)0x2, &status);
        CHECK(st != RMACOLL_SUCCESS, "stream NULL on rank 0 only: succeeded");
        EXPECT_FAIL(comm, a, st, st, NULL, NULL, rb, "stream NULL on rank 0 only");
    }
    /* the communicator still works: a dispatch of iteration 3 */
    for (int i = 0; i < CAP + GUARD; i++) {
        rb[i] = SENT;
    }
    fill_send(sb, me, n, m, 3);
    st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc, CAP, RMACOLL_RECV_PRODUCE,
                                         RMACOLL_INT32, comm, NULL, &status);
    CHECK(st == RMACOLL_SUCCESS, "after the failures: %s (%s)", rmacoll_status_name(st),
          rmacoll_comm_last_error(comm));
    {
        int64_t bad = check_recv(rb, me, n, m, 3, 0);
        CHECK(bad < 0, "after the failures: element %lld is %d", (long long)bad, rb[bad]);
    }
out:
    if (comm != NULL && rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS && a->result == 0) {
        a->result = __LINE__;
        snprintf(a->why, sizeof(a->why), "destroy failed");
    }
    bufs_free(&b);
    return NULL;
}

/* The device form across nodes, its stream steps emulated on the host
 * (RMACOLL_DCX_EMULATE_STREAM=1: the call copies what the stream would
 * into the slot's memory, raises DCX_GO, waits for the worker's DCX_DONE
 * and copies back): the slots, the worker, the constant-valued words and
 * the order of calls, everything but the CUDA stream operations. */

static void *rank_main_trig(void *p)
{
    rank_arg_t *a = p;
    rmacoll_comm_t *comm = NULL;
    int n = a->nranks, me = a->rank;
    bufs_t b;
    int64_t (*m)[MAXR] = b.m, *sc = b.sc, *rc = b.rc;
    int32_t *sb, *rb;
    int32_t status;
    rmacoll_comm_stats_t stats;
    char who[96];
    rmacoll_status_t st;

    if (!bufs_alloc(a, &b)) {
        goto out;
    }
    sb = b.sb;
    rb = b.rb;
    comm = make_comm(a, "dcxt");
    if (comm == NULL) {
        goto out;
    }
    /* the same pointers every iteration, new contents: one slot each for
     * the dispatch and the combine, as graph replays would use them */
    for (int it = 0; it < ITERS; it++) {
        if (!round_trip(comm, a, &b, it, FAKE_STREAM)) {
            goto out;
        }
    }
    CHECK(rmacoll_device_counts_check(comm) == RMACOLL_SUCCESS, "check after success: %s",
          rmacoll_comm_last_error(comm));
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    CHECK(rmacoll_comm_get_stats(comm, &stats) == RMACOLL_SUCCESS &&
              stats.device_counts_calls == 2 * ITERS,
          "device_counts_calls %llu, want %d", (unsigned long long)stats.device_counts_calls,
          2 * ITERS);

    /* a receive capacity one short on the last rank: found in the worker,
     * so every call returns SUCCESS; every status and every check report
     * it; no receive element changes */
    matrix(3, n, m);
    fill_send(sb, me, n, m, 3);
    for (int j = 0; j < n; j++) {
        sc[j] = m[me][j];
    }
    {
        int victim = n - 1;
        int64_t total = 0;

        for (int i = 0; i < n; i++) {
            total += m[i][victim];
        }
        for (int i = 0; i < CAP + GUARD; i++) {
            rb[i] = SENT;
        }
        status = 77;
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc,
                                             me == victim ? total - 1 : CAP,
                                             RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm,
                                             FAKE_STREAM, &status);
        CHECK(st == RMACOLL_SUCCESS, "short capacity: the call returned %s",
              rmacoll_status_name(st));
        CHECK(status == RMACOLL_ERR_OVERFLOW, "short capacity: status %d", status);
        for (int i = 0; i < CAP + GUARD; i++) {
            CHECK(rb[i] == SENT, "short capacity: receive element %d written", i);
        }
        for (int i = 0; i < n; i++) {
            CHECK(rc[i] == m[i][me], "short capacity: recvcounts[%d] = %lld, want %lld", i,
                  (long long)rc[i], (long long)m[i][me]);
        }
        st = rmacoll_device_counts_check(comm);
        snprintf(who, sizeof(who), "rank %d: more elements to receive", victim);
        CHECK(st == RMACOLL_ERR_OVERFLOW && strstr(rmacoll_comm_last_error(comm), who) != NULL,
              "short capacity: check gave %s '%s', want OVERFLOW naming '%s'",
              rmacoll_status_name(st), rmacoll_comm_last_error(comm), who);
        CHECK(rmacoll_device_counts_check(comm) == RMACOLL_SUCCESS,
              "the report was not forgotten");
        /* an argument error on rank 1: it returns it; every status has it */
        status = 77;
        st = rmacoll_alltoallv_device_counts(sb, me == 1 ? NULL : sc, CAP, rb, rc, CAP,
                                             RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm,
                                             FAKE_STREAM, &status);
        CHECK(st == (me == 1 ? RMACOLL_ERR_INVALID_ARG : RMACOLL_SUCCESS),
              "argument error: the call returned %s", rmacoll_status_name(st));
        CHECK(status == RMACOLL_ERR_INVALID_ARG, "argument error: status %d", status);
        for (int i = 0; i < CAP + GUARD; i++) {
            CHECK(rb[i] == SENT, "argument error: receive element %d written", i);
        }
        st = rmacoll_device_counts_check(comm);
        CHECK(st == RMACOLL_ERR_INVALID_ARG &&
                  strstr(rmacoll_comm_last_error(comm), "rank 1: sendcounts is NULL") != NULL,
              "argument error: check gave %s '%s'", rmacoll_status_name(st),
              rmacoll_comm_last_error(comm));
    }
    /* eager calls with a new argument set each time (as new tensors give):
     * more than the 16 slots, each reused once its job is done */
    for (int v = 0; v < 20; v++) {
        for (int i = 0; i < CAP + GUARD; i++) {
            rb[i] = SENT;
        }
        st = rmacoll_alltoallv_device_counts(sb, sc, CAP - v, rb, rc, CAP - v,
                                             RMACOLL_RECV_PRODUCE, RMACOLL_INT32, comm,
                                             FAKE_STREAM, &status);
        CHECK(st == RMACOLL_SUCCESS && status == 0, "argument set %d: %s, status %d (%s)", v,
              rmacoll_status_name(st), status, rmacoll_comm_last_error(comm));
        {
            int64_t bad = check_recv(rb, me, n, m, 3, 0);
            CHECK(bad < 0, "argument set %d: element %lld is %d", v, (long long)bad,
                  rb[bad]);
        }
    }
    /* a second stream is refused, on the rank that gives it (nothing
     * enqueued: every rank gives it here, so nothing is left to pair) */
    st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc, CAP, RMACOLL_RECV_PRODUCE,
                                         RMACOLL_INT32, comm, (void *)0x3, &status);
    CHECK(st == RMACOLL_ERR_UNSUPPORTED &&
              strstr(rmacoll_comm_last_error(comm), "one stream per communicator") != NULL,
          "second stream: %s '%s'", rmacoll_status_name(st), rmacoll_comm_last_error(comm));
    /* other calls on this communicator are refused, on every rank */
    st = rmacoll_alltoall(sb, rb, 1, RMACOLL_INT32, comm, NULL);
    CHECK(st == RMACOLL_ERR_UNSUPPORTED &&
              strstr(rmacoll_comm_last_error(comm), "communicator of their own") != NULL,
          "another call: %s '%s'", rmacoll_status_name(st), rmacoll_comm_last_error(comm));
    /* and the device form still works */
    st = rmacoll_alltoallv_device_counts(sb, sc, CAP, rb, rc, CAP, RMACOLL_RECV_PRODUCE,
                                         RMACOLL_INT32, comm, FAKE_STREAM, &status);
    CHECK(st == RMACOLL_SUCCESS && status == 0, "after the failures: %s, status %d",
          rmacoll_status_name(st), status);
    {
        int64_t bad = check_recv(rb, me, n, m, 3, 0);
        CHECK(bad < 0, "after the failures: element %lld is %d", (long long)bad, rb[bad]);
    }
out:
    if (comm != NULL && rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS && a->result == 0) {
        a->result = __LINE__;
        snprintf(a->why, sizeof(a->why), "destroy failed");
    }
    bufs_free(&b);
    return NULL;
}

static void run_with(int nranks, int nodes, void *(*body)(void *))
{
    rmacoll_config_t cfg;
    rmacoll_unique_id_t id;
    pthread_t th[MAXR];
    rank_arg_t ra[MAXR];
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 30000;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", "tcp;ofi_rxm");
    assert_int_equal(rmacoll_get_unique_id(&id), RMACOLL_SUCCESS);
    for (int r = 0; r < nranks; r++) {
        memset(&ra[r], 0, sizeof(ra[r]));
        ra[r].rank = r;
        ra[r].nranks = nranks;
        ra[r].nodes = nodes;
        ra[r].id = &id;
        ra[r].cfg = &cfg;
        assert_int_equal(pthread_create(&th[r], NULL, body, &ra[r]), 0);
    }
    for (int r = 0; r < nranks; r++) {
        pthread_join(th[r], NULL);
    }
    for (int r = 0; r < nranks; r++) {
        if (ra[r].result != 0) {
            print_message("%d x %d, rank %d: line %d: %s\n", nodes, nranks / nodes, r,
                          ra[r].result, ra[r].why);
        }
    }
    for (int r = 0; r < nranks; r++) {
        assert_int_equal(ra[r].result, 0);
    }
}

static void run(int nranks, int nodes)
{
    run_with(nranks, nodes, rank_main);
}

static void test_triggered_two_nodes(void **state)
{
    (void)state;
    setenv("RMACOLL_DCX_EMULATE_STREAM", "1", 1);
    run_with(4, 2, rank_main_trig);
    unsetenv("RMACOLL_DCX_EMULATE_STREAM");
}

static void test_triggered_three_nodes(void **state)
{
    (void)state;
    setenv("RMACOLL_DCX_EMULATE_STREAM", "1", 1);
    run_with(3, 3, rank_main_trig);
    unsetenv("RMACOLL_DCX_EMULATE_STREAM");
}

/* The verdict on a matrix of 300 ranks: peers past 255 are named (the
 * one-node kernel's key has 8 bits for them; this one has 32). */
static void test_verdict_many_ranks(void **state)
{
    const int n = 300;
    size_t rec_len = 2 * (size_t)n + 6;
    int64_t *rows = calloc((size_t)n * rec_len, sizeof(int64_t));
    rmacoll__dcx_verdict_t v;

    (void)state;
    assert_non_null(rows);
    for (int i = 0; i < n; i++) {
        rows[(size_t)i * rec_len + 2 * (size_t)n] = 1000;     /* recv_capacity */
        rows[(size_t)i * rec_len + 2 * (size_t)n + 1] = 1000; /* send_capacity */
    }
    assert_int_equal(rmacoll__dcx_verdict(n, rows, rec_len, &v), RMACOLL_SUCCESS);
    rows[0 * rec_len + 256] = -1; /* rank 0 to 256 */
    assert_int_equal(rmacoll__dcx_verdict(n, rows, rec_len, &v), RMACOLL_ERR_OVERFLOW);
    assert_int_equal(v.rank, 0);
    assert_int_equal(v.peer, 256);
    rows[0 * rec_len + 255] = -2; /* the lower peer wins */
    assert_int_equal(rmacoll__dcx_verdict(n, rows, rec_len, &v), RMACOLL_ERR_OVERFLOW);
    assert_int_equal(v.peer, 255);
    assert_int_equal(v.need, -2);
    rows[0 * rec_len + 255] = rows[0 * rec_len + 256] = 0;
    rows[299 * rec_len + 2 * (size_t)n + 1] = 2000; /* its send_capacity */
    rows[299 * rec_len + 299] = 1001; /* rank 299 receives past its capacity */
    assert_int_equal(rmacoll__dcx_verdict(n, rows, rec_len, &v), RMACOLL_ERR_OVERFLOW);
    assert_int_equal(v.rank, 299);
    assert_int_equal(v.why, RMACOLL_DCOUNTS_WHY_RECV_CAP);
    assert_int_equal(v.peer, -1);
    assert_int_equal(v.need, 1001);
    assert_int_equal(v.have, 1000);
    free(rows);
}

static void test_one_node(void **state)
{
    (void)state;
    run(4, 1);
}

static void test_two_nodes(void **state)
{
    (void)state;
    run(4, 2);
}

static void test_four_nodes(void **state)
{
    (void)state;
    run(4, 4);
}

static void test_three_nodes(void **state)
{
    (void)state;
    run(3, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict_many_ranks),
        cmocka_unit_test(test_one_node),
        cmocka_unit_test(test_two_nodes),
        cmocka_unit_test(test_three_nodes),
        cmocka_unit_test(test_four_nodes),
        cmocka_unit_test(test_triggered_two_nodes),
        cmocka_unit_test(test_triggered_three_nodes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
