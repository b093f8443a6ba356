/*
 * test_safety.c - safety under bad input and faults (issue 10): ranks as
 * processes on virtual nodes (ce host backend inside a node, libfabric
 * tcp;ofi_rxm between nodes). Receive buffers are filled with a sentinel
 * and guarded; every byte is compared.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mprun.h"
#include "rmacoll.h"

#define SENT 0xA5u
#define GUARD 64 /* sentinel bytes before and after every receive buffer */

static rmacoll_config_t base_config(uint64_t timeout_ms)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = timeout_ms;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "tcp;ofi_rxm");
    return cfg;
}

/* Byte k of rank src's block for rank dst (never the sentinel). */
static unsigned char pattern(int src, int dst, size_t k)
{
    unsigned char v = (unsigned char)(src * 31 + dst * 7 + k * 13 + 1);
    return v == SENT ? 0x5A : v;
}

/* 1 when every byte of buf[0, n) is the sentinel. */
static int all_sentinel(const unsigned char *buf, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (buf[k] != SENT) {
            return 0;
        }
    }
    return 1;
}

/* ---- item 2: a datatype whose size differs between ranks ---- */

typedef struct dtype_arg {
    int odd_rank;                  /* the rank with another datatype */
    rmacoll_datatype_t common, odd;
    int64_t count;                 /* elements to every rank */
} dtype_arg_t;

static int dtype_body(rmacoll_comm_t *comm, int rank, int nranks, void *p)
{
    const dtype_arg_t *a = p;
    rmacoll_datatype_t dt = rank == a->odd_rank ? a->odd : a->common;
    size_t es = rmacoll_datatype_size(dt);
    size_t bytes = (size_t)a->count * es * (size_t)nranks;
    size_t cap = (size_t)a->count * 8 * (size_t)nranks; /* the widest datatype */
    unsigned char *send = malloc(cap), *rbuf = malloc(cap + 2 * GUARD);
    int64_t cnt[64], dsp[64];
    char want[128];
    const char *msg;
    rmacoll_status_t st;
    int rc = 0;

    if (send == NULL || rbuf == NULL) {
        return 3;
    }
    for (int r = 0; r < nranks; r++) {
        cnt[r] = a->count;
        dsp[r] = (int64_t)r * a->count;
        for (size_t k = 0; k < (size_t)a->count * es; k++) {
            send[(size_t)r * a->count * es + k] = pattern(rank, r, k);
        }
    }
    memset(rbuf, SENT, bytes + 2 * GUARD);
    st = rmacoll_alltoallv(send, cnt, dsp, rbuf + GUARD, cnt, dsp, dt, comm, NULL);
    msg = rmacoll_comm_last_error(comm);
    if (st != RMACOLL_ERR_DATATYPE) {
        fprintf(stderr, "rank %d: status %s (%s), expected RMACOLL_ERR_DATATYPE\n", rank,
                rmacoll_status_name(st), msg);
        rc = 2;
    }
    /* the one error names the odd rank with its element size, and a rank
     * with the common size */
    snprintf(want, sizeof(want), "rank %d has %zu-byte elements", a->odd_rank,
             rmacoll_datatype_size(a->odd));
    if (rc == 0 && (strstr(msg, want) == NULL ||
                    strstr(msg, "the datatype differs between ranks") == NULL)) {
        fprintf(stderr, "rank %d: message \"%s\" lacks \"%s\"\n", rank, msg, want);
        rc = 2;
    }
    snprintf(want, sizeof(want), "has %zu-byte elements", rmacoll_datatype_size(a->common));
    if (rc == 0 && strstr(msg, want) == NULL) {
        fprintf(stderr, "rank %d: message \"%s\" lacks \"%s\"\n", rank, msg, want);
        rc = 2;
    }
    if (!all_sentinel(rbuf, bytes + 2 * GUARD)) {
        fprintf(stderr, "rank %d: receive buffer written on a datatype error\n", rank);
        rc = 1;
    }
    /* the communicator stays usable: a correct call after the error */
    if (rc == 0) {
        dt = a->common;
        es = rmacoll_datatype_size(dt);
        bytes = (size_t)a->count * es * (size_t)nranks;
        for (int r = 0; r < nranks; r++) {
            for (size_t k = 0; k < (size_t)a->count * es; k++) {
                send[(size_t)r * a->count * es + k] = pattern(rank, r, k);
            }
        }
        memset(rbuf, SENT, bytes + 2 * GUARD);
        st = rmacoll_alltoallv(send, cnt, dsp, rbuf + GUARD, cnt, dsp, dt, comm, NULL);
        if (st != RMACOLL_SUCCESS) {
            fprintf(stderr, "rank %d: call after the error: %s\n", rank,
                    rmacoll_comm_last_error(comm));
            rc = 2;
        }
        for (int r = 0; r < nranks && rc == 0; r++) {
            for (size_t k = 0; k < (size_t)a->count * es; k++) {
                if (rbuf[GUARD + (size_t)r * a->count * es + k] != pattern(r, rank, k)) {
                    rc = 1;
                }
            }
        }
        if (!all_sentinel(rbuf, GUARD) || !all_sentinel(rbuf + GUARD + bytes, GUARD)) {
            rc = 1;
        }
    }
    free(send);
    free(rbuf);
    return rc;
}

static void run_dtype(const int *node_of, int nranks, int odd_rank,
                      rmacoll_datatype_t common, rmacoll_datatype_t odd)
{
    rmacoll_config_t cfg = base_config(20000);
    dtype_arg_t a = {odd_rank, common, odd, 5};
    int codes[64] = {0};
    mprun_opts_t o = {nranks, node_of, &cfg, 120, -1};
    int failed = mprun(&o, dtype_body, &a, codes);

    for (int r = 0; r < nranks && failed; r++) {
        print_message("rank %d exit %d\n", r, codes[r]);
    }
    assert_int_equal(failed, 0);
}

/* One node: rank 0 wider (float64 among float32), rank 2 narrower (int8). */
static void test_dtype_node(void **state)
{
    static const int node_of[4] = {0, 0, 0, 0};

    (void)state;
    run_dtype(node_of, 4, 0, RMACOLL_FLOAT32, RMACOLL_FLOAT64);
    run_dtype(node_of, 4, 2, RMACOLL_FLOAT32, RMACOLL_INT8);
}

/* Two nodes through the relay: the odd rank's blocks to the other node
 * travel through relays that see its record, not the receiver. */
static void test_dtype_relayed(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};

    (void)state;
    run_dtype(node_of, 4, 3, RMACOLL_FLOAT32, RMACOLL_FLOAT64);
    run_dtype(node_of, 4, 0, RMACOLL_FLOAT32, RMACOLL_INT8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_node),
        cmocka_unit_test(test_dtype_relayed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
