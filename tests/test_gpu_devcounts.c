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
 * the counts arrays and status words with guards past them. The steps and
 * checks are gpu_devcounts_check.c's, shared with test_gpu_devcounts_proc.c
 * (the same with ranks as processes). Exits 77 (skipped) without a usable
 * GPU.
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

#define REPLAYS 100

/* The steps and checks are gpu_devcounts_check.c's, shared with
 * test_gpu_devcounts_proc.c (ranks as processes); its result codes are
 * this harness's. */
_Static_assert((int)DCT_OK == (int)GT_OK && (int)DCT_WRONG_DATA == (int)GT_WRONG_DATA &&
                   (int)DCT_WRONG_STATUS == (int)GT_WRONG_STATUS &&
                   (int)DCT_CUDA == (int)GT_CUDA,
               "gpu_devcounts.h's result codes are gpu_threads.h's");

/* Ranks as threads: gpu_threads.h's bounded stream wait, failure record
 * and barrier. */
static const dct_hooks_t dc_hooks = {gt_sync, gt_fail, gt_barrier};

typedef struct dc_arg {
    rmacoll_datatype_t dtype;
    int across;          /* 2 virtual nodes: the stream-triggered form */
} dc_arg_t;

static int dc_body(rmacoll_comm_t *comm, int rank, int n, cudaStream_t s, void *p)
{
    const dc_arg_t *a = p;
    dct_run_t r = {a->dtype, a->across, REPLAYS, &dc_hooks};

    return dct_body(comm, rank, n, s, &r);
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
