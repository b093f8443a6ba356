/*
 * test_validate.c - rmacoll__validate_args: each error code on its own
 * trigger, messages naming rank and argument, NULL buffers with zero
 * counts, extents, 2^40-element displacements, the int64 overflow edge,
 * and the overlap check against a brute-force reference.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/plan/validate.h"
#include "rmacoll.h"

#define N 6

typedef struct args {
    int nranks;
    int rank;
    const void *sendbuf;
    int64_t sendcounts[N];
    int64_t sdispls[N];
    const void *recvbuf;
    int64_t recvcounts[N];
    int64_t rdispls[N];
    rmacoll_datatype_t dtype;
    int64_t scratch[2 * N];
    uint64_t send_extent;
    uint64_t recv_extent;
    char err[256];
} args_t;

/* Large enough for every layout below (the largest addresses 144 bytes):
 * send and receive blocks must not share memory (RMACOLL_ERR_OVERLAP). */
static char sbuf[4096];
static char rbuf[4096];

/* A valid call: rank 3 of 6, blocks of (j + 1) int32 elements, packed. */
static void args_init(args_t *a)
{
    int64_t off = 0;

    memset(a, 0, sizeof(*a));
    a->nranks = N;
    a->rank = 3;
    a->sendbuf = sbuf;
    a->recvbuf = rbuf;
    a->dtype = RMACOLL_INT32;
    for (int j = 0; j < N; j++) {
        a->sendcounts[j] = j + 1;
        a->sdispls[j] = off;
        a->recvcounts[j] = N - j;
        a->rdispls[j] = off;
        off += N;
    }
    a->send_extent = 777;
    a->recv_extent = 777;
}

static rmacoll_status_t run(args_t *a)
{
    return rmacoll__validate_args(a->nranks, a->rank, a->sendbuf, a->sendcounts, a->sdispls,
                                  a->recvbuf, a->recvcounts, a->rdispls, a->dtype, a->scratch,
                                  &a->send_extent, &a->recv_extent, a->err, sizeof(a->err));
}

static void test_valid(void **state)
{
    args_t a;

    (void)state;
    args_init(&a);
    strcpy(a.err, "junk");
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_string_equal(a.err, "");
    /* send: last block j = 5 at 30, 6 elements: (30 + 6) * 4 bytes. */
    assert_int_equal(a.send_extent, 36 * 4);
    /* recv: block j = 5 at 30, 1 element: 31 * 4; block 4 at 24 + 2 = 26. */
    assert_int_equal(a.recv_extent, 31 * 4);
    /* Extents may be NULL, errbuf too. */
    assert_int_equal(rmacoll__validate_args(a.nranks, a.rank, a.sendbuf, a.sendcounts, a.sdispls,
                                            a.recvbuf, a.recvcounts, a.rdispls, a.dtype,
                                            a.scratch, NULL, NULL, NULL, 0),
                     RMACOLL_SUCCESS);
}

static void test_datatype(void **state)
{
    args_t a;

    (void)state;
    args_init(&a);
    a.dtype = RMACOLL_DATATYPE_COUNT;
    assert_int_equal(run(&a), RMACOLL_ERR_DATATYPE);
    assert_string_equal(a.err, "rank 3: unknown datatype 17");
    a.dtype = (rmacoll_datatype_t)-1;
    assert_int_equal(run(&a), RMACOLL_ERR_DATATYPE);
    /* Failure leaves the extents alone. */
    assert_int_equal(a.send_extent, 777);
    assert_int_equal(a.recv_extent, 777);
}

static void test_invalid_arg(void **state)
{
    args_t a;

    (void)state;
    args_init(&a);
    assert_int_equal(rmacoll__validate_args(N, 3, sbuf, NULL, a.sdispls, rbuf, a.recvcounts,
                                            a.rdispls, RMACOLL_INT32, a.scratch, NULL, NULL,
                                            a.err, sizeof(a.err)),
                     RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(a.err, "rank 3: sendcounts is NULL");
    assert_int_equal(rmacoll__validate_args(N, 3, sbuf, a.sendcounts, NULL, rbuf, a.recvcounts,
                                            a.rdispls, RMACOLL_INT32, a.scratch, NULL, NULL,
                                            a.err, sizeof(a.err)),
                     RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(a.err, "rank 3: sdispls is NULL");
    assert_int_equal(rmacoll__validate_args(N, 3, sbuf, a.sendcounts, a.sdispls, rbuf, NULL,
                                            a.rdispls, RMACOLL_INT32, a.scratch, NULL, NULL,
                                            a.err, sizeof(a.err)),
                     RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(a.err, "rank 3: recvcounts is NULL");
    assert_int_equal(rmacoll__validate_args(N, 3, sbuf, a.sendcounts, a.sdispls, rbuf,
                                            a.recvcounts, NULL, RMACOLL_INT32, a.scratch, NULL,
                                            NULL, a.err, sizeof(a.err)),
                     RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(a.err, "rank 3: rdispls is NULL");
    assert_int_equal(rmacoll__validate_args(N, 3, sbuf, a.sendcounts, a.sdispls, rbuf,
                                            a.recvcounts, a.rdispls, RMACOLL_INT32, NULL, NULL,
                                            NULL, a.err, sizeof(a.err)),
                     RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(a.err, "rank 3: scratch is NULL");
    args_init(&a);
    a.rank = N;
    assert_int_equal(run(&a), RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(a.err, "rank 6: rank outside [0, 6)");
    args_init(&a);
    a.nranks = 0;
    a.rank = 0;
    assert_int_equal(run(&a), RMACOLL_ERR_INVALID_ARG);
}

static void test_null_buffer(void **state)
{
    args_t a;

    (void)state;
    args_init(&a);
    a.sendbuf = NULL;
    assert_int_equal(run(&a), RMACOLL_ERR_NULL_BUFFER);
    assert_string_equal(a.err, "rank 3: sendbuf is NULL but sendcounts[0] = 1");

    args_init(&a);
    a.recvbuf = NULL;
    a.recvcounts[0] = 0;
    assert_int_equal(run(&a), RMACOLL_ERR_NULL_BUFFER);
    assert_string_equal(a.err, "rank 3: recvbuf is NULL but recvcounts[1] = 5");

    /* Zero counts everywhere: NULL buffers are fine, extents are 0. */
    args_init(&a);
    memset(a.sendcounts, 0, sizeof(a.sendcounts));
    memset(a.recvcounts, 0, sizeof(a.recvcounts));
    a.sendbuf = NULL;
    a.recvbuf = NULL;
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.send_extent, 0);
    assert_int_equal(a.recv_extent, 0);

    /* NULL sendbuf with zero send counts, real receive side. */
    args_init(&a);
    memset(a.sendcounts, 0, sizeof(a.sendcounts));
    a.sendbuf = NULL;
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.send_extent, 0);
    assert_int_equal(a.recv_extent, 31 * 4);
}

static void test_overflow(void **state)
{
    args_t a;

    (void)state;
    args_init(&a);
    a.sendcounts[2] = -1;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
    assert_string_equal(a.err, "rank 3: sendcounts[2] = -1 is negative");

    args_init(&a);
    a.rdispls[4] = -8;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
    assert_string_equal(a.err, "rank 3: rdispls[4] = -8 is negative");

    /* A negative displacement is an error even for an empty block. */
    args_init(&a);
    a.sendcounts[1] = 0;
    a.sdispls[1] = -1;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
    assert_string_equal(a.err, "rank 3: sdispls[1] = -1 is negative");

    /* Overflow wins over a NULL buffer (checked first). */
    args_init(&a);
    a.recvbuf = NULL;
    a.recvcounts[0] = INT64_MIN;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
    assert_string_equal(a.err, "rank 3: recvcounts[0] = -9223372036854775808 is negative");

    /* (displ + count) * 4 > INT64_MAX. */
    args_init(&a);
    a.sdispls[5] = INT64_MAX / 4;
    a.sendcounts[5] = 1;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
    assert_string_equal(a.err, "rank 3: sdispls[5] = 2305843009213693951 + sendcounts[5] = 1 "
                               "elements of 4 bytes overflow a 64-bit byte offset");

    /* displ + count itself overflows int64 (1-byte type). */
    args_init(&a);
    a.dtype = RMACOLL_UINT8;
    a.rdispls[0] = INT64_MAX;
    a.recvcounts[0] = 1;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
    assert_non_null(strstr(a.err, "rdispls[0] = 9223372036854775807 + recvcounts[0] = 1"));
}

/* The last byte offset that fits, and one element past it. */
static void test_overflow_edge(void **state)
{
    static const rmacoll_datatype_t types[] = {RMACOLL_INT8, RMACOLL_BFLOAT16, RMACOLL_FLOAT32,
                                               RMACOLL_FLOAT64};
    args_t a;

    (void)state;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        int64_t esize = (int64_t)rmacoll_datatype_size(types[t]);
        int64_t max_end = INT64_MAX / esize; /* largest displ + count */

        int64_t cap_end = ((int64_t)1 << 48) / esize; /* largest extent, elements */

        /* 64-bit arithmetic fits at max_end elements, but no node has that
         * much memory: rejected as an extent, naming the buffer. */
        args_init(&a);
        a.dtype = types[t];
        memset(a.recvcounts, 0, sizeof(a.recvcounts));
        a.sdispls[0] = max_end - 7;
        a.sendcounts[0] = 7;
        a.rdispls[2] = max_end - 1;
        a.recvcounts[2] = 1;
        assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
        assert_non_null(strstr(a.err, "send buffer extent"));

        /* Fits: both blocks end exactly at 2^48 bytes. */
        a.sdispls[0] = cap_end - 7;
        a.rdispls[2] = cap_end - 1;
        assert_int_equal(run(&a), RMACOLL_SUCCESS);
        assert_int_equal(a.send_extent, (uint64_t)(cap_end * esize));
        assert_int_equal(a.recv_extent, (uint64_t)(cap_end * esize));
        a.recvcounts[2] = 2;
        assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
        assert_non_null(strstr(a.err, "receive buffer extent"));

        /* One element past the 64-bit limit names the displacement. */
        a.sdispls[0] = max_end - 7;
        a.rdispls[2] = max_end - 1;
        a.recvcounts[2] = 2;
        assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
        assert_non_null(strstr(a.err, "rdispls[2]"));
        a.recvcounts[2] = 1;
        a.sendcounts[0] = 8;
        assert_int_equal(run(&a), RMACOLL_ERR_OVERFLOW);
        assert_non_null(strstr(a.err, "sdispls[0]"));
    }
}

/* Displacements of 2^40 elements (1 TiB of int8) are accepted untouched. */
static void test_large_displacements(void **state)
{
    args_t a;
    const int64_t T = (int64_t)1 << 40;

    (void)state;
    args_init(&a);
    a.dtype = RMACOLL_INT8;
    for (int j = 0; j < N; j++) {
        a.sendcounts[j] = 3;
        a.sdispls[j] = T * (j + 1);
        a.recvcounts[j] = 5;
        a.rdispls[j] = T * (N - j); /* descending: sorting has work to do */
    }
    /* 2^43-byte extents: addresses far apart (never dereferenced) */
    a.sendbuf = (const void *)((uintptr_t)1 << 46);
    a.recvbuf = (const void *)((uintptr_t)1 << 47);
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.send_extent, (uint64_t)(T * N + 3));
    assert_int_equal(a.recv_extent, (uint64_t)(T * N + 5));
    /* Same with float64: 2^40 elements is 2^43 bytes. */
    a.dtype = RMACOLL_FLOAT64;
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.recv_extent, (uint64_t)(T * N + 5) * 8);
}

static void test_overlap(void **state)
{
    args_t a;

    (void)state;
    /* The example of the brief: block 2 = [10, 15), block 4 = [12, 16). */
    args_init(&a);
    memset(a.recvcounts, 0, sizeof(a.recvcounts));
    a.recvcounts[2] = 5;
    a.rdispls[2] = 10;
    a.recvcounts[4] = 4;
    a.rdispls[4] = 12;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);
    assert_string_equal(a.err,
                        "rank 3: recvcounts[2] = 5 with rdispls[2] = 10 overlaps rdispls[4] = 12 "
                        "(block of 4)");
    assert_int_equal(a.recv_extent, 777);

    /* Touching blocks do not overlap: [10, 15) and [15, 19). */
    a.rdispls[4] = 15;
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.recv_extent, 19 * 4);

    /* Same start, found in index order. */
    a.rdispls[4] = 10;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);
    assert_string_equal(a.err,
                        "rank 3: recvcounts[2] = 5 with rdispls[2] = 10 overlaps rdispls[4] = 10 "
                        "(block of 4)");

    /* An empty block inside another is not an overlap. */
    a.recvcounts[4] = 0;
    a.rdispls[4] = 12;
    assert_int_equal(run(&a), RMACOLL_SUCCESS);

    /* A block containing another, not neighbours in index. */
    args_init(&a);
    a.rdispls[0] = 0;
    a.recvcounts[0] = 100;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);
    assert_non_null(strstr(a.err, "recvcounts[0] = 100 with rdispls[0] = 0 overlaps rdispls[1]"));

    /* Send blocks may overlap: they are only read. */
    args_init(&a);
    memset(a.sdispls, 0, sizeof(a.sdispls));
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.send_extent, 6 * 4);
}

/* Random layouts on 64 ranks against an O(n^2) reference. */
static void test_overlap_random(void **state)
{
    enum { R = 64 };
    int64_t counts[R];
    int64_t displs[R];
    int64_t scratch[2 * R];
    int64_t zeros[R];
    char err[256];
    unsigned seed = 12345;
    int seen_overlap = 0;
    int seen_clean = 0;

    (void)state;
    memset(zeros, 0, sizeof(zeros));
    for (int iter = 0; iter < 2000; iter++) {
        int expect = 0;
        uint64_t ext = 0;
        uint64_t got_ext = 0;
        int spread = 1 + iter % 50;

        for (int j = 0; j < R; j++) {
            seed = seed * 1103515245u + 12345u;
            counts[j] = (seed >> 16) % 4; /* 0..3, zeros included */
            seed = seed * 1103515245u + 12345u;
            displs[j] = (int64_t)((seed >> 16) % (unsigned)(R * spread));
        }
        for (int i = 0; i < R; i++) {
            if (counts[i] > 0 && (uint64_t)(displs[i] + counts[i]) * 2 > ext) {
                ext = (uint64_t)(displs[i] + counts[i]) * 2;
            }
            for (int j = i + 1; j < R; j++) {
                if (counts[i] > 0 && counts[j] > 0 && displs[i] < displs[j] + counts[j] &&
                    displs[j] < displs[i] + counts[i]) {
                    expect = 1;
                }
            }
        }
        rmacoll_status_t st =
            rmacoll__validate_args(R, 0, sbuf, zeros, zeros, rbuf, counts, displs,
                                   RMACOLL_FLOAT16, scratch, NULL, &got_ext, err, sizeof(err));
        assert_int_equal(st, expect ? RMACOLL_ERR_OVERLAP : RMACOLL_SUCCESS);
        if (!expect) {
            assert_int_equal(got_ext, ext);
        }
        seen_overlap += expect;
        seen_clean += !expect;
    }
    /* The generator must exercise both outcomes. */
    assert_true(seen_overlap > 100);
    assert_true(seen_clean > 100);
}

/* Send blocks sharing bytes with receive blocks: in-place use with one
 * layout, a shifted buffer, a partial overlap; disjoint blocks inside one
 * buffer are fine. */
static void test_send_recv_overlap(void **state)
{
    args_t a;

    (void)state;
    args_init(&a);
    a.sendbuf = rbuf; /* sendbuf == recvbuf, same displacements */
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);
    assert_string_equal(a.err, "rank 3: send block 0 (sendcounts[0] = 1, sdispls[0] = 0) "
                               "overlaps receive block 0 (recvcounts[0] = 6, rdispls[0] = 0)"
                               ": send and receive buffers must not overlap");
    assert_int_equal(a.send_extent, 777);
    assert_int_equal(a.recv_extent, 777);

    /* One buffer, send blocks in the first half, receive blocks behind
     * them: no byte shared. Receive blocks are [24j, 24j + 4 (6 - j)). */
    args_init(&a);
    a.sendbuf = rbuf;
    for (int j = 0; j < N; j++) {
        a.rdispls[j] += 36; /* receive blocks start at byte 144 = send extent */
    }
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    assert_int_equal(a.send_extent, 36 * 4);
    assert_int_equal(a.recv_extent, (30 + 36 + 1) * 4);

    /* ... and one element further down, the last send block [140, 144)
     * touches the first receive block [140, 164). */
    for (int j = 0; j < N; j++) {
        a.rdispls[j] -= 1;
    }
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);
    assert_non_null(strstr(a.err, "send block 5 (sendcounts[5] = 6, sdispls[5] = 30) overlaps "
                                  "receive block 0"));

    /* An unaligned shift: send blocks 2 bytes into the receive buffer. */
    args_init(&a);
    a.sendbuf = rbuf + 2;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);

    /* Send buffer just behind the receive extent: disjoint. */
    args_init(&a);
    a.sendbuf = rbuf + (30 + 1) * 4;
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
    /* One byte earlier, send block 0 overlaps receive block 5's last byte. */
    a.sendbuf = rbuf + (30 + 1) * 4 - 1;
    assert_int_equal(run(&a), RMACOLL_ERR_OVERLAP);
    assert_non_null(strstr(a.err, "send block 0 (sendcounts[0] = 1, sdispls[0] = 0) overlaps "
                                  "receive block 5"));

    /* Empty blocks never overlap. */
    args_init(&a);
    a.sendbuf = rbuf;
    memset(a.sendcounts, 0, sizeof(a.sendcounts));
    assert_int_equal(run(&a), RMACOLL_SUCCESS);
}

/* Random send/receive layouts in one buffer against an O(n^2) reference. */
static void test_send_recv_overlap_random(void **state)
{
    enum { R = 32 };
    static char buf[1 << 16];
    int64_t sc[R], sd[R], rc[R], rd[R], scratch[2 * R];
    char err[256];
    unsigned seed = 777;
    int seen[2] = {0, 0};

    (void)state;
    for (int iter = 0; iter < 2000; iter++) {
        int expect = 0;
        int shift = iter % 7; /* bytes between sendbuf and recvbuf */

        /* receive blocks: packed in a random order, some empty */
        int64_t off = 0;
        for (int j = 0; j < R; j++) {
            seed = seed * 1103515245u + 12345u;
            rc[j] = (seed >> 16) % 3;
            rd[j] = off;
            off += rc[j] + (int64_t)((seed >> 20) % 2);
        }
        for (int j = 0; j < R; j++) {
            seed = seed * 1103515245u + 12345u;
            sc[j] = (seed >> 16) % 3;
            seed = seed * 1103515245u + 12345u;
            /* send blocks from a little before the end of the receive
             * blocks on: sometimes clear of them, sometimes not */
            sd[j] = off - (iter % 4) * 3 + (int64_t)((seed >> 16) % (unsigned)(2 * R));
            sd[j] = sd[j] < 0 ? 0 : sd[j];
        }
        for (int i = 0; i < R; i++) {
            int64_t slo = shift + sd[i] * 4, shi = slo + sc[i] * 4;

            for (int k = 0; k < R; k++) {
                int64_t rlo = rd[k] * 4, rhi = rlo + rc[k] * 4;

                if (sc[i] > 0 && rc[k] > 0 && slo < rhi && rlo < shi) {
                    expect = 1;
                }
            }
        }
        rmacoll_status_t st = rmacoll__validate_args(R, 1, buf + shift, sc, sd, buf, rc, rd,
                                                     RMACOLL_UINT32, scratch, NULL, NULL, err,
                                                     sizeof(err));
        assert_int_equal(st, expect ? RMACOLL_ERR_OVERLAP : RMACOLL_SUCCESS);
        seen[expect]++;
    }
    assert_true(seen[0] > 100);
    assert_true(seen[1] > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_datatype),
        cmocka_unit_test(test_invalid_arg),
        cmocka_unit_test(test_null_buffer),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_overflow_edge),
        cmocka_unit_test(test_large_displacements),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_overlap_random),
        cmocka_unit_test(test_send_recv_overlap),
        cmocka_unit_test(test_send_recv_overlap_random),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
