/*
 * test_e2e.c - multi-process integration tests over real transports:
 * ranks are processes, nodes are virtual, CE host backend inside a node,
 * libfabric (tcp;ofi_rxm by default, shm) between nodes. Every receive
 * buffer is checked byte for byte, gaps included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "case_file.h"

#include "e2e_body.h"
#include "mprun.h"

static const char *const case_files[] = {
    "all_zero.txt",        "half_idle.txt",          "incast_16_to_0.txt",
    "mismatch_2x2.txt",    "moe_zipf_2x4.txt",       "one_column_zero.txt",
    "single_rank_node_1_4.txt", "sparse_two_cross.txt", "symmetric_small_2x2.txt",
    "uneven_nodes_3_2.txt",
};

static rmacoll_config_t base_config(void)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    return cfg;
}

/* Runs `ncalls` calls cycling over cases on every rank; all must pass. */
static void run(const rmacoll_config_t *cfg, const rmacoll_case_t *cases, int ncases,
                int ncalls, rmacoll_status_t expect)
{
    int codes[64] = {0};
    e2e_arg_t arg = {cases, ncases, ncalls, expect, 1};
    mprun_opts_t o = {cases[0].nranks, cases[0].node_of, cfg, 240, -1};
    int failed = mprun(&o, e2e_body, &arg, codes);

    if (failed) {
        for (int r = 0; r < cases[0].nranks; r++) {
            print_message("rank %d exit %d\n", r, codes[r]);
        }
    }
    assert_int_equal(failed, 0);
}

/* Every shared case, three calls back to back, over tcp;ofi_rxm. */
static void test_cases_tcp(void **state)
{
    rmacoll_config_t cfg = base_config();

    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "tcp;ofi_rxm");
    for (size_t k = 0; k < sizeof(case_files) / sizeof(case_files[0]); k++) {
        rmacoll_case_t *c = load(case_files[k]);
        print_message("case %s\n", case_files[k]);
        run(&cfg, c, 1, 3, c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS);
        rmacoll_case_free(c);
    }
}

/* The same over the shm provider between virtual nodes, relay on and off. */
static void test_cases_shm(void **state)
{
    rmacoll_config_t cfg = base_config();

    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "shm");
    for (int relay = 1; relay >= 0; relay--) {
        cfg.relay_enabled = relay;
        for (size_t k = 0; k < sizeof(case_files) / sizeof(case_files[0]); k++) {
            rmacoll_case_t *c = load(case_files[k]);
            run(&cfg, c, 1, 2, c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS);
            rmacoll_case_free(c);
        }
    }
}

/* Random matrices over the topologies the issue names, several seeds and
 * schedulers, and a node numbering that is not contiguous. */
static void test_random_topologies(void **state)
{
    static const struct {
        int nnodes;
        int sizes[4];
    } topos[] = {{1, {4}}, {4, {1, 1, 1, 1}}, {2, {2, 2}}, {2, {3, 2}}, {2, {1, 4}}};
    static const char *const scheds[] = {"shift", "node_shift", "xor", "random"};
    static const char *const dists[] = {"random", "zipf:1.2", "sparse:0.3"};
    rmacoll_config_t cfg = base_config();

    for (size_t t = 0; t < sizeof(topos) / sizeof(topos[0]); t++) {
        for (int seed = 1; seed <= 3; seed++) {
            rmacoll_case_dist_t dist;
            rmacoll_case_t *cs[3];
            rmacoll_case_t calls[3];
            snprintf(cfg.scheduler, sizeof(cfg.scheduler), "%s", scheds[(t + seed) % 4]);
            for (int k = 0; k < 3; k++) {
                assert_int_equal(rmacoll_case_dist_parse(dists[k], &dist), RMACOLL_SUCCESS);
                assert_int_equal(rmacoll_case_random(topos[t].nnodes, topos[t].sizes, &dist,
                                                     100 + 37 * seed, (uint64_t)(seed * 10 + k),
                                                     k == 1 ? RMACOLL_INT8 : RMACOLL_FLOAT32,
                                                     &cs[k]),
                                 RMACOLL_SUCCESS);
                calls[k] = *cs[k];
            }
            run(&cfg, calls, 3, 3, RMACOLL_SUCCESS);
            for (int k = 0; k < 3; k++) {
                rmacoll_case_free(cs[k]);
            }
        }
    }
}

/* One count mismatch, in turn inside a node, from the first node to the
 * second, back, and (three nodes) between two nodes neither of which holds
 * rank 0: every rank fails with RMACOLL_ERR_MISMATCH and every receive
 * buffer stays sentinel-filled (one or two nodes: the one-round verdict of
 * the metadata exchange; three nodes: the agreement); relay off too. */
static void test_mismatch_everywhere(void **state)
{
    static const struct {
        int nnodes;
        int sizes[3];
        int pairs[4][2]; /* (sender, receiver) whose counts disagree */
        int npairs;
    } topos[] = {
        {1, {4}, {{1, 2}, {3, 0}}, 2},
        {2, {2, 2}, {{1, 0}, {0, 3}, {3, 1}, {2, 3}}, 4},
        {2, {3, 2}, {{2, 4}, {4, 0}, {3, 3}}, 3},
        {2, {1, 4}, {{4, 0}, {0, 2}}, 2},
        {3, {2, 1, 2}, {{2, 4}, {4, 2}, {1, 3}}, 3},
    };
    rmacoll_config_t cfg = base_config();
    rmacoll_case_dist_t dist;

    assert_int_equal(rmacoll_case_dist_parse("random", &dist), RMACOLL_SUCCESS);
    for (size_t t = 0; t < sizeof(topos) / sizeof(topos[0]); t++) {
        for (int k = 0; k < topos[t].npairs; k++) {
            rmacoll_case_t *good, *bad;
            int s = topos[t].pairs[k][0], r = topos[t].pairs[k][1];
            int n;
            assert_int_equal(rmacoll_case_random(topos[t].nnodes, topos[t].sizes, &dist, 50,
                                                 (uint64_t)(t * 10 + k), RMACOLL_INT32,
                                                 &good),
                             RMACOLL_SUCCESS);
            assert_int_equal(rmacoll_case_random(topos[t].nnodes, topos[t].sizes, &dist, 50,
                                                 (uint64_t)(t * 10 + k), RMACOLL_INT32,
                                                 &bad),
                             RMACOLL_SUCCESS);
            n = bad->nranks;
            bad->recv[(size_t)s * n + r] += 1;
            rmacoll_case_update_mismatch(bad);
            assert_true(bad->has_mismatch);
            assert_false(good->has_mismatch);
            print_message("topology %zu: rank %d sends %lld to rank %d, which expects %lld\n",
                          t, s, (long long)bad->send[(size_t)s * n + r], r,
                          (long long)bad->recv[(size_t)s * n + r]);
            run(&cfg, bad, 1, 2, RMACOLL_ERR_MISMATCH);
            rmacoll_case_free(good);
            rmacoll_case_free(bad);
        }
    }
    cfg.relay_enabled = 0;
    {
        static const int sizes[2] = {2, 2};
        rmacoll_case_t *bad;
        assert_int_equal(rmacoll_case_random(2, sizes, &dist, 50, 99, RMACOLL_INT32, &bad),
                         RMACOLL_SUCCESS);
        bad->recv[0 * 4 + 3] += 2;
        rmacoll_case_update_mismatch(bad);
        run(&cfg, bad, 1, 2, RMACOLL_ERR_MISMATCH);
        rmacoll_case_free(bad);
    }
}

/* Ranks of one node numbered non-contiguously: nodes 0,1,0,1,1. */
static void test_noncontiguous_nodes(void **state)
{
    static const int node_of[] = {0, 1, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    rmacoll_case_t *c;
    uint64_t rs = 7;

    assert_int_equal(rmacoll_case_create(5, node_of, RMACOLL_FLOAT64, &c), RMACOLL_SUCCESS);
    for (int k = 0; k < 25; k++) {
        c->send[k] = c->recv[k] = (int64_t)(rmacoll_case_rand(&rs) % 300);
    }
    run(&cfg, c, 1, 3, RMACOLL_SUCCESS);
    cfg.relay_enabled = 0;
    run(&cfg, c, 1, 2, RMACOLL_SUCCESS);
    rmacoll_case_free(c);
}

/* Relay buffer far smaller than the data: slots of 64 bytes reused many
 * times per call (and a single slot, which doubles the round stride). */
static void test_tiny_relay(void **state)
{
    rmacoll_config_t cfg = base_config();
    rmacoll_case_dist_t dist;
    rmacoll_case_t *c;
    int sizes[2] = {2, 3};

    assert_int_equal(rmacoll_case_dist_parse("random", &dist), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_case_random(2, sizes, &dist, 300, 42, RMACOLL_INT32, &c),
                     RMACOLL_SUCCESS);
    cfg.relay_buffer_bytes = 4 * 64 * 3; /* up to 3 channels x 4 slots x 64 B */
    cfg.relay_slots = 4;
    run(&cfg, c, 1, 3, RMACOLL_SUCCESS);
    cfg.relay_buffer_bytes = 3 * 24;
    cfg.relay_slots = 1;
    cfg.max_task_bytes = 16;
    run(&cfg, c, 1, 2, RMACOLL_SUCCESS);
    rmacoll_case_free(c);
}

/* The element types added in 0.x (bool, int16, uint16, complex, FP8):
 * exact across two nodes, relay on and off; complex128 (16-byte elements)
 * also through 24-byte relay slots and 40-byte tasks, so pieces split
 * elements. */
static void test_more_datatypes(void **state)
{
    static const rmacoll_datatype_t types[] = {
        RMACOLL_BOOL, RMACOLL_INT16, RMACOLL_UINT16, RMACOLL_COMPLEX64,
        RMACOLL_COMPLEX128, RMACOLL_FLOAT8_E4M3, RMACOLL_FLOAT8_E5M2};
    static const size_t sizes_of[] = {1, 2, 2, 8, 16, 1, 1};
    rmacoll_case_dist_t dist;
    int sizes[2] = {2, 2};

    assert_int_equal(rmacoll_case_dist_parse("zipf:1.2", &dist), RMACOLL_SUCCESS);
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        rmacoll_config_t cfg = base_config();
        rmacoll_case_t *c;

        assert_int_equal(rmacoll_datatype_size(types[t]), sizes_of[t]);
        assert_int_equal(rmacoll_case_random(2, sizes, &dist, 200, 31 + t, types[t], &c),
                         RMACOLL_SUCCESS);
        run(&cfg, c, 1, 2, RMACOLL_SUCCESS);
        cfg.relay_enabled = 0;
        run(&cfg, c, 1, 2, RMACOLL_SUCCESS);
        if (types[t] == RMACOLL_COMPLEX128) {
            cfg.relay_enabled = 1;
            cfg.relay_buffer_bytes = 2 * 24;
            cfg.relay_slots = 1;
            cfg.max_task_bytes = 40;
            run(&cfg, c, 1, 2, RMACOLL_SUCCESS);
        }
        rmacoll_case_free(c);
    }
}

/* In-place calls (RMACOLL_IN_PLACE, MPI_IN_PLACE's semantics): count
 * matrix symmetric, as in-place needs (rank i sends recvcounts_i[j] to j,
 * which expects recvcounts_j[i]). */
typedef struct inplace_arg {
    int64_t counts[8][8];
    int mixed;          /* odd ranks call out of place */
    int null_counts;    /* rank 2 passes recvcounts NULL: error everywhere */
    rmacoll_datatype_t dtype;
} inplace_arg_t;

static int inplace_body(rmacoll_comm_t *comm, int me, int n, void *varg)
{
    const inplace_arg_t *a = varg;
    size_t es = rmacoll_datatype_size(a->dtype);
    int64_t cnt[8], rd[8], sd[8];
    int64_t ext;
    size_t bytes;
    unsigned char *buf, *sbuf = NULL;
    rmacoll_status_t st;
    int bad = 0;

    for (int j = 0; j < n; j++) {
        cnt[j] = a->counts[me][j];
    }
    ext = rmacoll_displs_gapped(n, cnt, 3, rd);
    bytes = (size_t)ext * es;
    buf = malloc(bytes);
    for (uint64_t iter = 1; iter <= 3 && !bad; iter++) {
        int inplace = !(a->mixed && (me & 1));

        memset(buf, RMACOLL_FILL_SENTINEL, bytes);
        if (inplace) {
            for (int j = 0; j < n; j++) {
                rmacoll_fill_block(buf + (size_t)rd[j] * es, es, me, j, 0, cnt[j], iter);
            }
            st = rmacoll_alltoallv(RMACOLL_IN_PLACE, NULL, NULL, buf,
                                   a->null_counts && me == 2 ? NULL : cnt, rd, a->dtype,
                                   comm, NULL);
        } else {
            int64_t sext = rmacoll_displs_contiguous(n, cnt, sd);

            free(sbuf);
            sbuf = malloc((size_t)sext * es + 1);
            rmacoll_fill_send(sbuf, (size_t)sext * es, es, me, n, cnt, sd, iter);
            st = rmacoll_alltoallv(sbuf, cnt, sd, buf, cnt, rd, a->dtype, comm, NULL);
        }
        if (a->null_counts) {
            /* every rank fails alike and its buffer keeps what it held */
            unsigned char *want = malloc(bytes);

            memset(want, RMACOLL_FILL_SENTINEL, bytes);
            for (int j = 0; j < n; j++) {
                rmacoll_fill_block(want + (size_t)rd[j] * es, es, me, j, 0, cnt[j], iter);
            }
            if (st != RMACOLL_ERR_NULL_BUFFER && st != RMACOLL_ERR_INVALID_ARG) {
                fprintf(stderr, "rank %d: NULL recvcounts on rank 2 gave %s\n", me,
                        rmacoll_status_name(st));
                bad = 1;
            } else if (memcmp(want, buf, bytes) != 0) {
                fprintf(stderr, "rank %d: failed call changed the buffer\n", me);
                bad = 1;
            } else if (strstr(rmacoll_comm_last_error(comm), "recvcounts") == NULL) {
                fprintf(stderr, "rank %d: error does not name recvcounts: %s\n", me,
                        rmacoll_comm_last_error(comm));
                bad = 1;
            }
            free(want);
            break;
        }
        if (st != RMACOLL_SUCCESS) {
            fprintf(stderr, "rank %d: in-place call %llu: %s: %s\n", me,
                    (unsigned long long)iter, rmacoll_status_name(st),
                    rmacoll_comm_last_error(comm));
            bad = 1;
        } else {
            rmacoll_check_report_t rep;

            if (rmacoll_check_recv(buf, bytes, es, me, n, cnt, rd, iter, &rep) != 0) {
                fprintf(stderr, "rank %d: in-place call %llu: %s\n", me,
                        (unsigned long long)iter, rep.msg);
                bad = 1;
            }
        }
    }
    free(sbuf);
    free(buf);
    return bad;
}

static void run_inplace(const int *node_of, int n, inplace_arg_t *a, int relay)
{
    rmacoll_config_t cfg = base_config();
    mprun_opts_t o = {n, node_of, &cfg, 120, -1};
    int codes[8] = {0};

    cfg.relay_enabled = relay;
    assert_int_equal(mprun(&o, inplace_body, a, codes), 0);
}

/* In place on 1 node x 4 and 2 nodes x 2 (relay on and off), every rank in
 * place or only the even ones, with empty blocks and 16-byte elements; and
 * a NULL recvcounts on one rank fails on every rank with nothing written. */
static void test_in_place(void **state)
{
    static const int one[] = {0, 0, 0, 0}, two[] = {0, 0, 1, 1};
    inplace_arg_t a;
    uint64_t rs = 11;

    memset(&a, 0, sizeof(a));
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j <= i; j++) {
            int64_t v = (int64_t)(rmacoll_case_rand(&rs) % 97);

            a.counts[i][j] = a.counts[j][i] = (i + j) % 3 == 1 ? 0 : v + 1;
        }
    }
    a.dtype = RMACOLL_FLOAT32;
    run_inplace(one, 4, &a, 1);
    run_inplace(two, 4, &a, 1);
    run_inplace(two, 4, &a, 0);
    a.mixed = 1;
    a.dtype = RMACOLL_COMPLEX128;
    run_inplace(two, 4, &a, 1);
    run_inplace(one, 4, &a, 1);
    a.mixed = 0;
    a.null_counts = 1;
    run_inplace(two, 4, &a, 1);
}

/* 1000 back-to-back calls whose zero pattern changes every call. */
static void test_many_calls(void **state)
{
    enum { NCASES = 16 };
    rmacoll_config_t cfg = base_config();
    rmacoll_case_dist_t dist;
    rmacoll_case_t *cs[NCASES], calls[NCASES];
    int sizes[2] = {2, 2};

    assert_int_equal(rmacoll_case_dist_parse("sparse:0.5", &dist), RMACOLL_SUCCESS);
    for (int k = 0; k < NCASES; k++) {
        assert_int_equal(rmacoll_case_random(2, sizes, &dist, 8, (uint64_t)k + 1000,
                                             RMACOLL_UINT8, &cs[k]),
                         RMACOLL_SUCCESS);
        calls[k] = *cs[k];
    }
    cfg.relay_buffer_bytes = 256;
    run(&cfg, calls, NCASES, 1000, RMACOLL_SUCCESS);
    for (int k = 0; k < NCASES; k++) {
        rmacoll_case_free(cs[k]);
    }
}

/* Every rank must report a bad argument on any rank, nothing written. */
static int bad_arg_body(rmacoll_comm_t *comm, int rank, int nranks, void *arg)
{
    int64_t counts[8], displs[8];
    char sbuf[64], rbuf[64];
    rmacoll_status_t st;

    for (int r = 0; r < nranks; r++) {
        counts[r] = 2;
        displs[r] = 2 * r;
    }
    memset(rbuf, 0x5a, sizeof(rbuf));
    memset(sbuf, 1, sizeof(sbuf));
    /* rank 2 passes a NULL send buffer with non-zero counts */
    st = rmacoll_alltoallv(rank == 2 ? NULL : sbuf, counts, displs, rbuf, counts, displs,
                           RMACOLL_INT8, comm, NULL);
    if (st != RMACOLL_ERR_NULL_BUFFER || strstr(rmacoll_comm_last_error(comm), "rank 2") == NULL) {
        fprintf(stderr, "rank %d: got %s: %s\n", rank, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        return 2;
    }
    for (size_t b = 0; b < sizeof(rbuf); b++) {
        if ((unsigned char)rbuf[b] != 0x5a) {
            return 1;
        }
    }
    /* the communicator stays usable after an argument error */
    st = rmacoll_alltoallv(sbuf, counts, displs, rbuf, counts, displs, RMACOLL_INT8, comm,
                           NULL);
    return st == RMACOLL_SUCCESS ? 0 : 3;
}

/* The ERROR lines of every log file in dir (one per rank process, from
 * RMACOLL_LOG_FILE=dir/log.%p); the first kept in first. */
static int error_lines(const char *dir, char *first, size_t len)
{
    char cmd[512];
    FILE *p;
    int n = 0;
    char line[1024];

    snprintf(cmd, sizeof(cmd), "cat %s/log.* 2>/dev/null", dir);
    p = popen(cmd, "r");
    assert_non_null(p);
    first[0] = '\0';
    while (fgets(line, sizeof(line), p) != NULL) {
        if (strstr(line, " ERROR ") != NULL) {
            if (n++ == 0) {
                snprintf(first, len, "%s", line);
            }
        }
    }
    pclose(p);
    return n;
}

/* Also: the error is logged once, by the rank whose argument it is (the
 * others return it and log it at INFO only). */
static void test_bad_argument_everywhere(void **state)
{
    static const int node_of[] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    int codes[4] = {0};
    mprun_opts_t o = {4, node_of, &cfg, 60, -1};
    char dir[] = "/tmp/rmacoll-e2e-log-XXXXXX", path[128], cmd[160], first[1024];
    const char *old = getenv("RMACOLL_LOG_FILE");
    char *saved = old != NULL ? strdup(old) : NULL;
    int n;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/log.%%p", dir);
    setenv("RMACOLL_LOG_FILE", path, 1);
    assert_int_equal(mprun(&o, bad_arg_body, NULL, codes), 0);
    if (saved != NULL) {
        setenv("RMACOLL_LOG_FILE", saved, 1);
        free(saved);
    } else {
        unsetenv("RMACOLL_LOG_FILE");
    }
    n = error_lines(dir, first, sizeof(first));
    print_message("%d ERROR line(s); first: %s", n, first);
    assert_int_equal(n, 1);
    assert_non_null(strstr(first, "[2] rmacoll ERROR core: rank 2: sendbuf is NULL"));
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A killed rank: the others fail with a timeout within the configured time. */
static int killed_body(rmacoll_comm_t *comm, int rank, int nranks, void *arg)
{
    int64_t counts[8], displs[8];
    char sbuf[64], rbuf[64];
    struct timespec t0, t1;
    rmacoll_status_t st;
    double s;

    for (int r = 0; r < nranks; r++) {
        counts[r] = 4;
        displs[r] = 4 * r;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = rmacoll_alltoallv(sbuf, counts, displs, rbuf, counts, displs, RMACOLL_INT8, comm,
                           NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "rank %d after %.1f s: %s: %s\n", rank, s, rmacoll_status_name(st),
            rmacoll_comm_last_error(comm));
    if (st != RMACOLL_ERR_TIMEOUT && st != RMACOLL_ERR_TRANSPORT && st != RMACOLL_ERR_PEER) {
        return 2;
    }
    /* the ranks that wait on rank 3 directly name it */
    if ((rank == 1 || rank == 2) && strstr(rmacoll_comm_last_error(comm), "rank 3") == NULL) {
        return 4;
    }
    return s < 2 * 1.5 + 2 ? 0 : 5;
}

static void test_killed_rank(void **state)
{
    static const int node_of[] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    int codes[4] = {0};
    mprun_opts_t o = {4, node_of, &cfg, 60, 3};

    cfg.timeout_ms = 1500;
    assert_int_equal(mprun(&o, killed_body, NULL, codes), 0);
}

/* Asking for verbs with no RDMA device: every rank's create fails cleanly
 * (no crash, no hang). */
static int never_body(rmacoll_comm_t *comm, int rank, int nranks, void *arg)
{
    return 9; /* the communicator must not have been created */
}

static void test_verbs_without_device(void **state)
{
    static const int node_of[] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    int codes[4] = {0};
    mprun_opts_t o = {4, node_of, &cfg, 60, -1};

    snprintf(cfg.inter_node, sizeof(cfg.inter_node), "verbs");
    snprintf(cfg.verbs_device, sizeof(cfg.verbs_device), "mlx5_0");
    assert_int_equal(mprun(&o, never_body, NULL, codes), 4);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(codes[r], MPRUN_CREATE_FAILED);
    }
}

/* One rank with another eager_max_bytes (the message names the key: the
 * library logs "the configuration differs between ranks: key
 * eager_max_bytes ..."): every rank's create fails, none hangs. */
static void test_config_differs(void **state)
{
    static const int node_of[] = {0, 0, 1};
    rmacoll_config_t cfg = base_config(), other;
    const rmacoll_config_t *per_rank[3] = {&cfg, &other, &cfg};
    int codes[3] = {0};
    mprun_opts_t o = {3, node_of, &cfg, 60, -1};

    (void)state;
    other = cfg;
    assert_int_equal(rmacoll_config_set(&other, "eager_max_bytes", "64KiB"), RMACOLL_SUCCESS);
    mprun_rank_config = per_rank;
    assert_int_equal(mprun(&o, never_body, NULL, codes), 3);
    mprun_rank_config = NULL;
    for (int r = 0; r < 3; r++) {
        assert_int_equal(codes[r], MPRUN_CREATE_FAILED);
    }
}


/* A bad environment value on one rank only (every rank loads its
 * configuration from the environment): that rank still joins the
 * bootstrap, so every rank's create fails at once, none waits for its
 * bootstrap timeout (20 s here; the ranks' alarm is 15 s, so a rank that
 * waited would die of SIGALRM, 128 + 14, not fail with
 * MPRUN_CREATE_FAILED). */
static void test_config_bad_env_one_rank(void **state)
{
    static const int node_of[] = {0, 0, 1};
    static const rmacoll_config_t *const per_rank[3] = {NULL, NULL, NULL};
    static const char *const env[3] = {NULL, "RMACOLL_EAGER_MAX_BYTES=lots", NULL};
    int codes[3] = {0};
    mprun_opts_t o = {3, node_of, NULL, 15, -1};

    (void)state;
    assert_int_equal(setenv("RMACOLL_TIMEOUT_MS", "20000", 1), 0);
    mprun_rank_config = per_rank;
    mprun_rank_env = env;
    assert_int_equal(mprun(&o, never_body, NULL, codes), 3);
    mprun_rank_config = NULL;
    mprun_rank_env = NULL;
    unsetenv("RMACOLL_TIMEOUT_MS");
    for (int r = 0; r < 3; r++) {
        assert_int_equal(codes[r], MPRUN_CREATE_FAILED);
    }
}

/* Host calls, then the device path the communicator chose and its
 * counters: staged (no libfabric provider here registers CUDA memory),
 * nothing staged or registered, as no device call was made; a smaller
 * struct_size gets only the head of the struct. */
static int devpath_body(rmacoll_comm_t *comm, int rank, int nranks, void *arg)
{
    rmacoll_comm_stats_t s, t;
    int rc = e2e_body(comm, rank, nranks, arg);

    if (rc != 0) {
        return rc;
    }
    memset(&s, 0xa5, sizeof(s));
    s.struct_size = sizeof(s);
    if (rmacoll_comm_get_stats(comm, &s) != RMACOLL_SUCCESS ||
        s.device_path != RMACOLL_DEVICE_PATH_STAGED) {
        fprintf(stderr, "rank %d: device path %d, expected staged\n", rank,
                (int)s.device_path);
        return 20;
    }
    if (s.staged_bytes != 0 || s.device_registered_bytes != 0 ||
        s.device_calls_staged != 0 || s.device_calls_hmem != 0) {
        fprintf(stderr, "rank %d: host calls counted as device traffic\n", rank);
        return 21;
    }
    memset(&t, 0x5a, sizeof(t));
    t.struct_size = offsetof(rmacoll_comm_stats_t, staged_bytes);
    if (rmacoll_comm_get_stats(comm, &t) != RMACOLL_SUCCESS ||
        t.device_path != RMACOLL_DEVICE_PATH_STAGED ||
        t.staged_bytes != 0x5a5a5a5a5a5a5a5aull || t.device_calls_hmem != 0x5a5a5a5a5a5a5a5aull) {
        fprintf(stderr, "rank %d: a short struct_size was not honoured\n", rank);
        return 22;
    }
    /* a caller built against a newer, larger struct: this library writes
     * its own fields only and says how far (struct_size), the rest kept */
    {
        unsigned char big[sizeof(rmacoll_comm_stats_t) + 64];
        rmacoll_comm_stats_t *b = (rmacoll_comm_stats_t *)(void *)big;
        memset(big, 0x77, sizeof(big));
        b->struct_size = sizeof(big);
        if (rmacoll_comm_get_stats(comm, b) != RMACOLL_SUCCESS ||
            b->struct_size != sizeof(rmacoll_comm_stats_t) ||
            b->device_path != RMACOLL_DEVICE_PATH_STAGED ||
            big[sizeof(rmacoll_comm_stats_t)] != 0x77 || big[sizeof(big) - 1] != 0x77) {
            fprintf(stderr, "rank %d: a larger struct_size was not answered with the "
                    "library's own (%zu)\n", rank, b->struct_size);
            return 24;
        }
    }
    /* a size inside a field writes none of it */
    memset(&t, 0x5a, sizeof(t));
    t.struct_size = offsetof(rmacoll_comm_stats_t, staged_bytes) + 3;
    if (rmacoll_comm_get_stats(comm, &t) != RMACOLL_SUCCESS ||
        t.struct_size != offsetof(rmacoll_comm_stats_t, device_path) + sizeof(t.device_path) ||
        t.staged_bytes != 0x5a5a5a5a5a5a5a5aull) {
        fprintf(stderr, "rank %d: a struct_size inside a field wrote part of it\n", rank);
        return 25;
    }
    t.struct_size = 4;
    if (rmacoll_comm_get_stats(comm, &t) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_comm_get_stats(NULL, &s) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_comm_get_stats(comm, NULL) != RMACOLL_ERR_INVALID_ARG) {
        return 23;
    }
    return 0;
}

/* Lines of the file at path containing needle; the first copied to first. */
static int count_lines(const char *path, const char *needle, char *first, size_t len)
{
    char line[2048];
    int n = 0;
    FILE *f = fopen(path, "r");

    first[0] = '\0';
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, needle) != NULL && n++ == 0) {
            snprintf(first, len, "%s", line);
        }
    }
    fclose(f);
    return n;
}

/* Device buffers across nodes with a provider that cannot register them
 * (tcp;ofi_rxm of Debian's libfabric, no GPU): every rank chooses host
 * staging at create and logs why at INFO; transports.device_inter_node =
 * hmem then makes every rank's create fail, saying why. The GPU tests run
 * the staged path's data and counters (test_gpu_e2e). */
static void test_device_path_fallback(void **state)
{
    static const int node_of[] = {0, 0, 1, 1};
    char path[] = "/tmp/rmacoll-test-devpath-XXXXXX", first[2048];
    rmacoll_config_t cfg = base_config();
    rmacoll_case_t *c = load("symmetric_small_2x2.txt");
    e2e_arg_t arg = {c, 1, 2, RMACOLL_SUCCESS, 1};
    mprun_opts_t o = {4, node_of, &cfg, 120, -1};
    int codes[4] = {0}, fd = mkstemp(path), n;

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    setenv("RMACOLL_LOG_FILE", path, 1); /* the ranks' log (read once per process) */
    cfg.log_level = RMACOLL_LOG_INFO;
    cfg.log_subsystems = RMACOLL_LOG_SUBSYS_ALL;
    /* auto: the fallback decided from the transports (the default is staged) */
    assert_int_equal(rmacoll_config_set(&cfg, "transports.device_inter_node", "auto"),
                     RMACOLL_SUCCESS);
    assert_int_equal(mprun(&o, devpath_body, &arg, codes), 0);
    n = count_lines(path, "device path across nodes: host staging (", first, sizeof(first));
    assert_null(strstr(first, "device_inter_node = staged")); /* a reason, not the key */
    print_message("%d ranks logged: %s", n, first);
    assert_int_equal(n, 4);

    assert_int_equal(rmacoll_config_set(&cfg, "transports.device_inter_node", "hmem"),
                     RMACOLL_SUCCESS);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(mprun(&o, never_body, NULL, codes), 4);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(codes[r], MPRUN_CREATE_FAILED);
    }
    n = count_lines(path, "transports.device_inter_node = hmem, but ", first, sizeof(first));
    print_message("hmem required: %s", first);
    assert_true(n >= 1);
    unsetenv("RMACOLL_LOG_FILE");
    unlink(path);
    rmacoll_case_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_path_fallback), /* first: log file per process */
        cmocka_unit_test(test_cases_tcp),
        cmocka_unit_test(test_cases_shm),
        cmocka_unit_test(test_random_topologies),
        cmocka_unit_test(test_noncontiguous_nodes),
        cmocka_unit_test(test_mismatch_everywhere),
        cmocka_unit_test(test_tiny_relay),
        cmocka_unit_test(test_more_datatypes),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_many_calls),
        cmocka_unit_test(test_bad_argument_everywhere),
        cmocka_unit_test(test_killed_rank),
        cmocka_unit_test(test_verbs_without_device),
        cmocka_unit_test(test_config_differs),
        cmocka_unit_test(test_config_bad_env_one_rank),
    };

    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);
    if (getenv("RMACOLL_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("RMACOLL_TEST_FILTER")); /* one test, by name */
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
