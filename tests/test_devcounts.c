/*
 * test_devcounts.c - the host side of rmacoll_alltoallv_device_counts
 * (issue 31) on any machine, GPU or not: ranks are threads of one process
 * (built-in bootstrap), one node or two virtual nodes. Every argument
 * error found on the host must come back with the same code on every
 * rank, naming the failing rank and the argument, and leave the
 * communicator usable (a host rmacoll_alltoall afterwards, checked byte
 * for byte). Across nodes the call is RMACOLL_ERR_UNSUPPORTED on every
 * rank. Without a GPU every well-formed call is refused too (no transport
 * runs it); with one, host pointers are refused as not device memory. The
 * device side is tests/test_gpu_devcounts.c (label gpu).
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

#define NR 2
#define FAKE_STREAM ((void *)0x2) /* cudaStreamPerThread's value; never used */

/* One call's arguments; `bad_rank` gets the broken ones, the other ranks
 * well-formed ones (host pointers: refused later, by the device checks).
 * The agreement returns the lowest rank's error on every rank, and every
 * rank's well-formed call fails too on a machine without a GPU (no
 * transport runs it): the broken rank is rank 0, so that its error is the
 * one every rank returns, its text travelling to rank 1's message. */
typedef struct dc_case {
    const char *name;
    int bad_rank;
    rmacoll_status_t want;       /* on every rank */
    const char *want_text;       /* in the failing rank's message */
    int null_sendcounts, null_recvcounts, null_status, null_sendbuf, null_recvbuf;
    int null_stream, bad_dtype, bad_mode;
    int64_t send_cap, recv_cap;  /* of bad_rank */
} dc_case_t;

static const dc_case_t arg_cases[] = {
    {"sendcounts NULL", 0, RMACOLL_ERR_INVALID_ARG, "sendcounts is NULL",
     1, 0, 0, 0, 0, 0, 0, 0, 4, 4},
    {"recvcounts NULL", 0, RMACOLL_ERR_INVALID_ARG, "recvcounts is NULL",
     0, 1, 0, 0, 0, 0, 0, 0, 4, 4},
    {"status NULL", 0, RMACOLL_ERR_INVALID_ARG, "status is NULL",
     0, 0, 1, 0, 0, 0, 0, 0, 4, 4},
    {"bad mode", 0, RMACOLL_ERR_INVALID_ARG, "mode is neither",
     0, 0, 0, 0, 0, 0, 0, 1, 4, 4},
    {"negative send capacity", 0, RMACOLL_ERR_INVALID_ARG, "send_capacity is negative",
     0, 0, 0, 0, 0, 0, 0, 0, -1, 4},
    {"negative recv capacity", 0, RMACOLL_ERR_INVALID_ARG, "recv_capacity is negative",
     0, 0, 0, 0, 0, 0, 0, 0, 4, -5},
    {"NULL sendbuf with capacity", 0, RMACOLL_ERR_NULL_BUFFER,
     "sendbuf is NULL with send_capacity > 0", 0, 0, 0, 1, 0, 0, 0, 0, 4, 4},
    {"NULL recvbuf with capacity", 0, RMACOLL_ERR_NULL_BUFFER,
     "recvbuf is NULL with recv_capacity > 0", 0, 0, 0, 0, 1, 0, 0, 0, 4, 4},
    {"send capacity in bytes past 2^63", 0, RMACOLL_ERR_OVERFLOW,
     "send_capacity * element size", 0, 0, 0, 0, 0, 0, 0, 0, INT64_MAX / 2, 4},
    {"recv capacity in bytes past 2^63", 0, RMACOLL_ERR_OVERFLOW,
     "recv_capacity * element size", 0, 0, 0, 0, 0, 0, 0, 0, 4, INT64_MAX / 4 + 1},
    {"unknown dtype", 0, RMACOLL_ERR_DATATYPE, NULL, 0, 0, 0, 0, 0, 0, 1, 0, 4, 4},
};

typedef struct rank_arg {
    int rank;
    int nodes;                   /* 1: one node; 2: one rank per virtual node */
    const rmacoll_unique_id_t *id;
    const rmacoll_config_t *cfg;
    int result;                  /* 0, or the line of the first failed check */
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

/* Host buffers standing in for device memory: the host checks never read
 * them; the device check (GPU machines) refuses them. */
typedef struct host_args {
    int64_t sc[NR], rc[NR];
    int32_t status;
    float sb[8], rb[8];
} host_args_t;

static rmacoll_status_t call_case(const dc_case_t *k, host_args_t *h, int rank,
                                  rmacoll_comm_t *comm)
{
    int bad = k != NULL && rank == k->bad_rank;

    return rmacoll_alltoallv_device_counts(
        bad && k->null_sendbuf ? NULL : h->sb, bad && k->null_sendcounts ? NULL : h->sc,
        bad ? k->send_cap : 4, bad && k->null_recvbuf ? NULL : h->rb,
        bad && k->null_recvcounts ? NULL : h->rc, bad ? k->recv_cap : 4,
        bad && k->bad_mode ? (rmacoll_recv_mode_t)7 : RMACOLL_RECV_PRODUCE,
        bad && k->bad_dtype ? (rmacoll_datatype_t)99 : RMACOLL_FLOAT32, comm,
        bad && k->null_stream ? NULL : FAKE_STREAM, bad && k->null_status ? NULL : &h->status);
}

/* A host alltoall of 3 int32 per pair, checked: the communicator works. */
static int host_alltoall_ok(rmacoll_comm_t *comm, int rank, char *why, size_t len)
{
    int32_t s[3 * NR], r[3 * NR + 1];

    for (int i = 0; i < 3 * NR; i++) {
        s[i] = rank * 1000 + i;
    }
    for (int i = 0; i < 3 * NR + 1; i++) {
        r[i] = -7;
    }
    if (rmacoll_alltoall(s, r, 3, RMACOLL_INT32, comm, NULL) != RMACOLL_SUCCESS) {
        snprintf(why, len, "host alltoall failed: %s", rmacoll_comm_last_error(comm));
        return 0;
    }
    for (int j = 0; j < NR; j++) {
        for (int e = 0; e < 3; e++) {
            if (r[3 * j + e] != j * 1000 + 3 * rank + e) {
                snprintf(why, len, "host alltoall: element %d from rank %d is %d", e, j,
                         r[3 * j + e]);
                return 0;
            }
        }
    }
    if (r[3 * NR] != -7) {
        snprintf(why, len, "host alltoall wrote past the receive buffer");
        return 0;
    }
    return 1;
}

static void *rank_main(void *p)
{
    rank_arg_t *a = p;
    rmacoll_comm_params_t prm;
    rmacoll_comm_t *comm = NULL;
    host_args_t h;
    char key[32];
    rmacoll_status_t st;

    memset(&h, 0, sizeof(h));
    memset(&prm, 0, sizeof(prm));
    prm.struct_size = sizeof(prm);
    prm.rank = a->rank;
    prm.nranks = NR;
    prm.unique_id = a->id;
    prm.config = a->cfg;
    snprintf(key, sizeof(key), "devcounts-node-%d", a->nodes == 1 ? 0 : a->rank);
    prm.node_key = key;
    st = rmacoll_comm_create(&prm, &comm);
    CHECK(st == RMACOLL_SUCCESS, "create: %s", rmacoll_status_name(st));

    if (a->nodes == 1) {
        for (size_t c = 0; c < sizeof(arg_cases) / sizeof(arg_cases[0]); c++) {
            const dc_case_t *k = &arg_cases[c];
            const char *msg;
            char mine[32];

            st = call_case(k, &h, a->rank, comm);
            msg = rmacoll_comm_last_error(comm);
            CHECK(st == k->want, "%s: got %s, want %s (%s)", k->name,
                  rmacoll_status_name(st), rmacoll_status_name(k->want), msg);
            snprintf(mine, sizeof(mine), "rank %d", k->bad_rank);
            CHECK(strstr(msg, mine) != NULL, "%s: message does not name %s: '%s'", k->name,
                  mine, msg);
            CHECK(k->want_text == NULL || strstr(msg, k->want_text) != NULL,
                  "%s: message does not say '%s': '%s'", k->name, k->want_text, msg);
            CHECK(h.status == 0 && h.rc[0] == 0 && h.rc[1] == 0 && h.rb[0] == 0.0f,
                  "%s: an argument array was written", k->name);
        }
        /* well-formed arguments in host memory: no GPU, no transport runs
         * the call (UNSUPPORTED); with a GPU the device check refuses host
         * memory (INVALID_ARG) */
        st = call_case(NULL, &h, a->rank, comm);
        CHECK(st == RMACOLL_ERR_UNSUPPORTED || st == RMACOLL_ERR_INVALID_ARG,
              "host pointers: got %s (%s)", rmacoll_status_name(st),
              rmacoll_comm_last_error(comm));
        CHECK(strstr(rmacoll_comm_last_error(comm), "rank ") != NULL,
              "host pointers: message names no rank: '%s'", rmacoll_comm_last_error(comm));
        /* nothing ran on a device: nothing to report */
        st = rmacoll_device_counts_check(comm);
        CHECK(st == RMACOLL_SUCCESS, "device_counts_check: %s", rmacoll_status_name(st));
    } else {
        char want[64];

        /* across nodes: unsupported on every rank, naming the argument,
         * even with host pointers (checked before any device check) */
        st = call_case(NULL, &h, a->rank, comm);
        CHECK(st == RMACOLL_ERR_UNSUPPORTED, "across nodes: got %s (%s)",
              rmacoll_status_name(st), rmacoll_comm_last_error(comm));
        snprintf(want, sizeof(want), "rank %d: rmacoll_alltoallv_device_counts: sendcounts",
                 a->rank);
        CHECK(strstr(rmacoll_comm_last_error(comm), want) != NULL ||
                  strstr(rmacoll_comm_last_error(comm), "rmacoll_alltoallv_device_counts: "
                                                        "sendcounts") != NULL,
              "across nodes: message '%s' lacks '%s'", rmacoll_comm_last_error(comm), want);
        CHECK(strstr(rmacoll_comm_last_error(comm), "across nodes") != NULL,
              "across nodes: message '%s' does not say so", rmacoll_comm_last_error(comm));
        CHECK(h.status == 0 && h.rc[0] == 0 && h.rb[0] == 0.0f, "across nodes: written");
    }
    if (!host_alltoall_ok(comm, a->rank, a->why, sizeof(a->why))) {
        a->result = __LINE__;
    }
out:
    if (comm != NULL && rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS && a->result == 0) {
        a->result = __LINE__;
        snprintf(a->why, sizeof(a->why), "destroy failed");
    }
    return NULL;
}

static void run(int nodes)
{
    rmacoll_config_t cfg;
    rmacoll_unique_id_t id;
    pthread_t th[NR];
    rank_arg_t ra[NR];
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", "tcp;ofi_rxm");
    assert_int_equal(rmacoll_get_unique_id(&id), RMACOLL_SUCCESS);
    for (int r = 0; r < NR; r++) {
        memset(&ra[r], 0, sizeof(ra[r]));
        ra[r].rank = r;
        ra[r].nodes = nodes;
        ra[r].id = &id;
        ra[r].cfg = &cfg;
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &ra[r]), 0);
    }
    for (int r = 0; r < NR; r++) {
        pthread_join(th[r], NULL);
    }
    for (int r = 0; r < NR; r++) {
        if (ra[r].result != 0) {
            print_message("%d node(s), rank %d: line %d: %s\n", nodes, r, ra[r].result,
                          ra[r].why);
        }
    }
    for (int r = 0; r < NR; r++) {
        assert_int_equal(ra[r].result, 0);
    }
}

static void test_one_node_arg_errors(void **state)
{
    (void)state;
    run(1);
}

static void test_two_nodes_unsupported(void **state)
{
    (void)state;
    run(2);
}

static void test_null_comm(void **state)
{
    int64_t c[2] = {0, 0};
    int32_t s = 0;

    (void)state;
    assert_int_equal(rmacoll_alltoallv_device_counts(NULL, c, 0, NULL, c, 0,
                                                     RMACOLL_RECV_PRODUCE, RMACOLL_INT8,
                                                     NULL, FAKE_STREAM, &s),
                     RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_device_counts_check(NULL), RMACOLL_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_comm),
        cmocka_unit_test(test_one_node_arg_errors),
        cmocka_unit_test(test_two_nodes_unsupported),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
