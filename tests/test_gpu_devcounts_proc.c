/*
 * test_gpu_devcounts_proc.c - rmacoll_alltoallv_device_counts on a GPU
 * with ranks as forked PROCESSES (issue 31 item 5; CTest label "gpu"):
 * the steps, capture and replays of test_gpu_devcounts.c (ranks as
 * threads), shared through gpu_devcounts_check.c. Ranks are forked by
 * tests/support/mprun.h; each picks device rank % device count right
 * after the fork, before its communicator is made (mprun_rank_setup), so
 * several ranks share a GPU when there are fewer GPUs than ranks.
 *
 * One node (intra_node nvlink_kernel), 2 ranks (uint32) and 4 ranks (int8,
 * blocks misaligned):
 *  - every rank on a GPU of its own: a host pointer as sendcounts
 *    (refused on every rank); dispatch then combine (round trip exact) for
 *    random counts with zeros, all zero, all to one rank, a skewed matrix;
 *    overflow of a receive capacity, a negative count, overflow of a send
 *    capacity (status RMACOLL_ERR_OVERFLOW on every rank, nothing written,
 *    rmacoll_device_counts_check reporting it once), a combine with wrong
 *    given counts (RMACOLL_ERR_MISMATCH), a good step after each; then
 *    dispatch + combine captured into one CUDA graph and 30 (2 ranks) or
 *    20 (4 ranks) replays with new counts and data before each;
 *  - ranks sharing a GPU (fewer GPUs than ranks): the documented refusal
 *    (rmacoll.h: kernels of separate processes on one GPU are time-sliced
 *    without MPS and cannot wait for each other): dispatch and combine
 *    return RMACOLL_ERR_UNSUPPORTED on every rank naming the shared GPU,
 *    nothing is written (status words, receive counts, buffers: all
 *    sentinel) or reported, no call is counted, and an ordinary
 *    rmacoll_alltoallv on the same device buffers (host counts, the
 *    dispatch's packed layout) then moves every block exactly.
 * Across 2 virtual nodes (4 ranks, 2 per node, uint32, intra_node ce,
 * inter_node ofi over tcp;ofi_rxm on lo): the stream-triggered form
 * (RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1) with every step above but the
 * host-pointer check, then a graph with 26 replays (an ordinary step after
 * the 25th); ranks may share a GPU there (no kernel waits for another).
 * Every byte is checked: receive blocks against the senders' data, the
 * rest of each buffer and a guard past its capacity against the sentinel,
 * the counts arrays and status words with guards past them. Exits 77
 * (skipped) without a usable GPU: the probe runs in a forked child, so
 * the parent never starts CUDA before forking ranks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gpu_threads.h" /* gt_sync, gt_fail: the bounded stream wait */
#pragma GCC diagnostic pop
#include "gpu_devcounts.h"
#include "mprun.h"

#define PD_MAX_RANKS 8
#define PD_BARRIER_S 150

/* What the ranks of one mprun share (MAP_SHARED, made before the forks). */
typedef struct pd_shared {
    atomic_int arrived;
    atomic_uint gen;
    atomic_int failed; /* the first rank that failed, plus 1 (0: none) */
    int n;
} pd_shared_t;

static pd_shared_t *pd_sh;
static int pd_ndev; /* from the forked probe */

/* Records the failure of rank in its process (gt_sync) and for the
 * others (the barrier below no longer waits). */
static void pd_fail(int rank)
{
    int none = 0;

    gt_fail(rank);
    atomic_compare_exchange_strong(&pd_sh->failed, &none, rank + 1);
}

/* A barrier of the rank processes, bounded: a rank that never arrives
 * ends this one with a message after PD_BARRIER_S; once a rank failed it
 * does not wait (the run fails anyway). */
static void pd_barrier(int rank, const char *what)
{
    unsigned gen = atomic_load(&pd_sh->gen);
    time_t dl = time(NULL) + PD_BARRIER_S;

    if (atomic_fetch_add(&pd_sh->arrived, 1) + 1 == pd_sh->n) {
        atomic_store(&pd_sh->arrived, 0);
        atomic_fetch_add(&pd_sh->gen, 1);
        return;
    }
    while (atomic_load(&pd_sh->gen) == gen && atomic_load(&pd_sh->failed) == 0) {
        struct timespec nap = {0, 200000};

        if (time(NULL) > dl) {
            fprintf(stderr, "rank %d (%s): the other ranks did not reach the barrier in "
                    "%d s: giving up\n", rank, what, PD_BARRIER_S);
            fflush(stderr);
            _exit(3);
        }
        nanosleep(&nap, NULL);
    }
}

static const dct_hooks_t pd_hooks = {gt_sync, pd_fail, pd_barrier};

/* mprun_rank_setup: the rank's GPU, before its communicator is made
 * (CUDA starts here, after the fork). */
static int pd_setup(int rank, int nranks)
{
    int ndev = 0;

    (void)nranks;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1 ||
        cudaSetDevice(rank % ndev) != cudaSuccess) {
        fprintf(stderr, "rank %d: no GPU to set (%d devices)\n", rank, ndev);
        return 1;
    }
    return 0;
}

typedef struct pd_arg {
    rmacoll_datatype_t dtype;
    int across;  /* 2 virtual nodes: the stream-triggered form */
    int replays;
} pd_arg_t;

/* A device-count call refused because ranks of one GPU are separate
 * processes: the same code and reason on every rank. */
static int pd_refusal(rmacoll_status_t st, rmacoll_comm_t *comm, int rank, const char *what)
{
    const char *msg = rmacoll_comm_last_error(comm);

    if (st != RMACOLL_ERR_UNSUPPORTED ||
        strstr(msg, "device counts unsupported on this communicator") == NULL ||
        strstr(msg, "uses the same GPU from another process") == NULL) {
        fprintf(stderr, "rank %d (%s, ranks sharing a GPU): %s (want "
                "RMACOLL_ERR_UNSUPPORTED naming the shared GPU): '%s'\n", rank, what,
                rmacoll_status_name(st), msg);
        return DCT_WRONG_STATUS;
    }
    return DCT_OK;
}

/* After the refusals the communicator still works: an ordinary
 * rmacoll_alltoallv on the same device buffers with host counts of step
 * (seed, DCT_RANDOM) and the dispatch's packed layouts; its receive counts
 * and a 0 status are written as a dispatch would, so that dct_check checks
 * every byte (the combine's side stays sentinel). */
static int pd_ordinary_call(dct_t *d, rmacoll_comm_t *comm, int rank, int n, uint64_t seed,
                            cudaStream_t s)
{
    int64_t sc[DCT_MAX_N], sd[DCT_MAX_N], rc[DCT_MAX_N], rd[DCT_MAX_N];
    rmacoll_status_t st;
    int rcode = dct_prep(d, rank, n, seed, DCT_RANDOM, s);

    if (rcode != DCT_OK)
        return rcode;
    for (int j = 0; j < n; j++) {
        sc[j] = dct_count(seed, DCT_RANDOM, rank, j, n);
        rc[j] = dct_count(seed, DCT_RANDOM, j, rank, n);
        sd[j] = j == 0 ? 0 : sd[j - 1] + sc[j - 1];
        rd[j] = j == 0 ? 0 : rd[j - 1] + rc[j - 1];
    }
    st = rmacoll_alltoallv(d->send, sc, sd, d->recv, rc, rd, d->dtype, comm, s);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: rmacoll_alltoallv after the refusals: %s: %s\n", rank,
                rmacoll_status_name(st), rmacoll_comm_last_error(comm));
        pd_fail(rank);
        return DCT_WRONG_STATUS;
    }
    GT_TRY(cudaMemcpyAsync(d->rc, rc, (size_t)n * 8, cudaMemcpyHostToDevice, s));
    GT_TRY(cudaMemsetAsync(d->st + DCT_ST_D, 0, 4, s));
    /* rc (pageable) is read before dct_check's synchronisation returns */
    rcode = dct_check(d, rank, n, seed, DCT_RANDOM, 0, -1, s, "ordinary call after refusals");
out:
    return rcode;
}

/* Ranks sharing a GPU on one node: the refusal, twice each way, nothing
 * written or reported or counted; then the communicator still works. */
static int pd_refused(rmacoll_comm_t *comm, int rank, int n, cudaStream_t s,
                      const pd_arg_t *a)
{
    rmacoll_comm_stats_t cs;
    dct_t d;
    int rcode = dct_alloc(&d, rank, n, a->dtype, &pd_hooks);

    pd_barrier(rank, "buffers allocated");
    for (int round = 0; round < 2 && rcode == DCT_OK; round++) {
        uint64_t seed = 30 + (uint64_t)round;
        char what[48];

        snprintf(what, sizeof(what), "refused round %d", round);
        rcode = dct_prep(&d, rank, n, seed, DCT_RANDOM, s);
        if (rcode == DCT_OK)
            rcode = pd_refusal(dct_dispatch(&d, comm, s), comm, rank, "dispatch");
        if (rcode == DCT_OK)
            rcode = pd_refusal(dct_combine(&d, comm, s), comm, rank, "combine");
        if (rcode == DCT_OK)
            rcode = dct_check(&d, rank, n, seed, DCT_RANDOM, -1, -1, s, what);
        if (rcode == DCT_OK)
            rcode = dct_report(comm, rank, RMACOLL_SUCCESS, NULL, what);
    }
    if (rcode == DCT_OK)
        rcode = pd_ordinary_call(&d, comm, rank, n, 40, s);
    if (rcode == DCT_OK) {
        memset(&cs, 0, sizeof(cs));
        cs.struct_size = sizeof(cs);
        if (rmacoll_comm_get_stats(comm, &cs) != RMACOLL_SUCCESS ||
            cs.device_counts_calls != 0 || d.ncalls != 0) {
            fprintf(stderr, "rank %d: refused calls counted: device_counts_calls %llu, "
                    "%d accepted\n", rank, (unsigned long long)cs.device_counts_calls,
                    d.ncalls);
            rcode = DCT_WRONG_STATUS;
        }
    }
    if (rcode != DCT_CUDA)
        (void)gt_sync(s, rank, "before freeing");
    pd_barrier(rank, "before freeing");
    dct_free(&d);
    return rcode;
}

/* mprun body (the device was set by pd_setup). */
static int pd_body(rmacoll_comm_t *comm, int rank, int nranks, void *p)
{
    const pd_arg_t *a = p;
    dct_run_t r = {a->dtype, a->across, a->replays, &pd_hooks};
    cudaStream_t s = NULL;
    int ndev = 0, dev = -1, rcode = DCT_OK;

    GT_TRY(cudaGetDeviceCount(&ndev));
    GT_TRY(cudaGetDevice(&dev));
    if (dev != rank % ndev) {
        fprintf(stderr, "rank %d: on device %d, want %d\n", rank, dev, rank % ndev);
        return DCT_CUDA;
    }
    GT_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (!a->across && nranks > ndev)
        rcode = pd_refused(comm, rank, nranks, s, a);
    else
        rcode = dct_body(comm, rank, nranks, s, &r);
out:
    if (s != NULL)
        cudaStreamDestroy(s);
    return rcode;
}

/* ---- parent side (never touches CUDA) ---- */

static rmacoll_config_t pd_config(const char *intra)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 30000; /* generous: ranks may share a GPU */
    snprintf(cfg.intra_node, sizeof(cfg.intra_node), "%s", intra);
    return cfg;
}

static void pd_run(int nranks, const int *node_of, const rmacoll_config_t *cfg,
                   const pd_arg_t *a)
{
    static const int one_node[PD_MAX_RANKS];
    mprun_opts_t o = {nranks, node_of != NULL ? node_of : one_node, cfg, 400, -1};
    int codes[PD_MAX_RANKS] = {0};
    int failed;

    assert_true(nranks <= PD_MAX_RANKS);
    print_message("device counts, ranks as processes: %d ranks on %d node(s), %d GPU(s), "
                  "%s, intra_node %s: %s\n", nranks, a->across ? 2 : 1, pd_ndev,
                  rmacoll_datatype_name(a->dtype), cfg->intra_node,
                  a->across ? "stream-triggered form"
                  : nranks > pd_ndev ? "ranks share a GPU: the refusal"
                                     : "a GPU per rank: steps, capture, replays");
    pd_sh->n = nranks;
    atomic_store(&pd_sh->arrived, 0);
    atomic_store(&pd_sh->failed, 0);
    mprun_rank_setup = pd_setup;
    failed = mprun(&o, pd_body, (void *)a, codes);
    mprun_rank_setup = NULL;
    if (failed) {
        for (int r = 0; r < nranks; r++)
            print_message("rank %d exit %d\n", r, codes[r]);
    }
    assert_int_equal(failed, 0);
}

/* One node, 2 ranks, uint32: the full sequence on 2+ GPUs, the refusal on
 * one. */
static void test_one_node_two_procs(void **state)
{
    rmacoll_config_t cfg = pd_config("nvlink_kernel");
    pd_arg_t a = {RMACOLL_UINT32, 0, 30};

    (void)state;
    pd_run(2, NULL, &cfg, &a);
}

/* One node, 4 ranks, int8: the full sequence on 4+ GPUs, the refusal on
 * fewer (ranks sharing GPUs, also on 2 or 3). */
static void test_one_node_four_procs_int8(void **state)
{
    rmacoll_config_t cfg = pd_config("nvlink_kernel");
    pd_arg_t a = {RMACOLL_INT8, 0, 20};

    (void)state;
    pd_run(4, NULL, &cfg, &a);
}

/* Across 2 virtual nodes x 2 ranks: the experimental stream-triggered
 * form; skipped in a build without ofi. */
static void test_two_nodes_triggered(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_config_t cfg = pd_config("ce");
    pd_arg_t a = {RMACOLL_UINT32, 1, 26};

    (void)state;
    if (strstr(rmacoll_build_transports(), "ofi") == NULL) {
        print_message("no ofi transport in this build: skipped\n");
        skip();
    }
    snprintf(cfg.inter_node, sizeof(cfg.inter_node), "ofi");
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", "tcp;ofi_rxm");
    setenv("RMACOLL_DEVICE_COUNTS_ACROSS_NODES", "1", 1);
    pd_run(4, node_of, &cfg, &a);
    unsetenv("RMACOLL_DEVICE_COUNTS_ACROSS_NODES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_node_two_procs),
        cmocka_unit_test(test_one_node_four_procs_int8),
        cmocka_unit_test(test_two_nodes_triggered),
    };

    pd_ndev = mprun_forked(rmacoll_test_gpu_count, 60);
    if (pd_ndev < 1) {
        printf("test_gpu_devcounts_proc: no usable CUDA device: skipped\n");
        return 77;
    }
    pd_sh = mmap(NULL, sizeof(*pd_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
    if (pd_sh == MAP_FAILED)
        return 1;
    memset(pd_sh, 0, sizeof(*pd_sh));
    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
