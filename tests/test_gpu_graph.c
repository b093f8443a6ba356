/*
 * test_gpu_graph.c - rmacoll calls captured into CUDA graphs and replayed
 * (CTest label "gpu"). Graph mode is opt-in: main sets
 * RMACOLL_CUDA_GRAPH=1 before any call (docs/gpu.md, rmacoll.h). Ranks are
 * threads of one process on device rank % device count (no time-slicing
 * between processes), all on one node, each with its own stream.
 *
 * Per rank and case: an ordinary call (checked); the call captured with
 * cudaStreamCaptureModeThreadLocal (it must return RMACOLL_SUCCESS and
 * move no byte at capture: the receive buffer, set to the sentinel before,
 * stays so); then 1000 launches of the graph, each preceded on the
 * same stream by a fresh send buffer (new stamp) and a sentinel receive
 * buffer, each receive buffer checked byte for byte (gaps and guard);
 * every 100 replays an ordinary call with its own stamp (checked), and
 * after the replays three ordinary calls and one more replay (checked):
 * the epochs of replays and ordinary calls agree. Cases: uniform
 * rmacoll_alltoall over 2 and 4 ranks (small and 1 MiB blocks), and
 * alltoallv with the irregular counts of tests/cases files, over ce and
 * nvlink_kernel (split path and one-launch path). Every communicator must
 * report device-resident signal words (rmacoll_comm_get_stats) and calls
 * enqueued with them. Exits 77 (skipped) without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu_threads.h"

/* 1000 replays; RMACOLL_TEST_REPLAYS=N (N >= 100) for a shorter run */
static int replays = 1000;

typedef struct graph_arg {
    const rmacoll_case_t *c;
    int alltoall; /* rmacoll_alltoall (uniform cases, contiguous blocks) */
    int64_t count;
} graph_arg_t;

static rmacoll_status_t do_call(const graph_arg_t *a, gt_buf_t *k, rmacoll_comm_t *comm,
                                cudaStream_t s)
{
    if (a->alltoall)
        return rmacoll_alltoall(k->ds, k->dr, a->count, k->dtype, comm, s);
    return gt_call(k, comm, s);
}

/* One ordinary call with stamp, checked. */
static int ordinary(const graph_arg_t *a, gt_buf_t *k, rmacoll_comm_t *comm, int rank,
                    int nranks, uint64_t stamp, cudaStream_t s)
{
    rmacoll_status_t st;
    int rcode = gt_buf_stage(k, rank, nranks, stamp, s);

    if (rcode != GT_OK)
        return rcode;
    st = do_call(a, k, comm, s);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d (%s): ordinary call %llu: %s: %s\n", rank, a->c->name,
                (unsigned long long)stamp, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        gt_fail(rank);
        return GT_WRONG_STATUS;
    }
    return gt_buf_check(k, rank, nranks, stamp, 1, s, "ordinary call");
}

/* One replay of exec with stamp, checked. */
static int replay(const graph_arg_t *a, gt_buf_t *k, cudaGraphExec_t exec, int rank,
                  int nranks, uint64_t stamp, cudaStream_t s)
{
    int rcode = gt_buf_stage(k, rank, nranks, stamp, s);
    cudaError_t e;

    if (rcode != GT_OK)
        return rcode;
    e = cudaGraphLaunch(exec, s);
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d (%s): cudaGraphLaunch (stamp %llu): %s\n", rank,
                a->c->name, (unsigned long long)stamp, cudaGetErrorString(e));
        return GT_CUDA;
    }
    return gt_buf_check(k, rank, nranks, stamp, 1, s, "replay");
}

static int graph_body(rmacoll_comm_t *comm, int rank, int nranks, cudaStream_t s, void *p)
{
    const graph_arg_t *a = p;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    rmacoll_status_t st;
    gt_buf_t k;
    int rcode;

    rcode = gt_buf_init(&k, a->c, rank, a->alltoall ? 0 : 3);
    gt_barrier(rank, "buffers allocated");
    if (rcode == GT_OK)
        rcode = ordinary(a, &k, comm, rank, nranks, 1, s);
    if (rcode != GT_OK)
        goto out;
    /* capture: nothing moves, the receive buffer stays sentinel */
    GT_TRY(cudaMemsetAsync(k.dr, RMACOLL_FILL_SENTINEL, k.rbytes + 1, s));
    if (gt_sync(s, rank, "before capture") != GT_OK) {
        rcode = GT_CUDA;
        goto out;
    }
    GT_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    st = do_call(a, &k, comm, s);
    GT_TRY(cudaStreamEndCapture(s, &graph));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d (%s): call under capture: %s: %s\n", rank, a->c->name,
                rmacoll_status_name(st), rmacoll_comm_last_error(comm));
        gt_fail(rank);
        rcode = GT_WRONG_STATUS;
        goto out;
    }
    GT_TRY(cudaGraphInstantiate(&exec, graph, 0));
    rcode = gt_buf_check(&k, rank, nranks, 0, 0, s, "after capture");
    for (int r = 1; r <= replays && rcode == GT_OK; r++) {
        rcode = replay(a, &k, exec, rank, nranks, 1000 + (uint64_t)r, s);
        if (rcode == GT_OK && r % 100 == 0)
            rcode = ordinary(a, &k, comm, rank, nranks, 100000 + (uint64_t)r, s);
    }
    for (int i = 0; i < 3 && rcode == GT_OK; i++)
        rcode = ordinary(a, &k, comm, rank, nranks, 200000 + (uint64_t)i, s);
    if (rcode == GT_OK)
        rcode = replay(a, &k, exec, rank, nranks, 300000, s);
out:
    if (rcode != GT_CUDA)
        (void)gt_sync(s, rank, "before freeing");
    gt_barrier(rank, "before freeing"); /* no rank frees while another's stream runs */
    if (exec != NULL)
        cudaGraphExecDestroy(exec);
    if (graph != NULL)
        cudaGraphDestroy(graph);
    gt_buf_free(&k);
    return rcode;
}

static void run_graph(rmacoll_case_t *c, int alltoall, int64_t count, const char *intra)
{
    rmacoll_config_t cfg;
    char err[256];
    graph_arg_t a = {c, alltoall, count};
    int failed;

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    snprintf(cfg.intra_node, sizeof(cfg.intra_node), "%s", intra);
    print_message("graph: %s, %d ranks as threads, %s, %d replays\n", c->name, c->nranks,
                  intra, replays);
    gt_dsig_reset();
    failed = gt_run(c->nranks, &cfg, graph_body, &a);
    assert_int_equal(failed, 0);
    /* the captured and the ordinary calls ran on device-resident words */
    assert_true(gt_dsig_ok(1));
}

static rmacoll_case_t *uniform(int nranks, int64_t count, rmacoll_datatype_t dtype)
{
    rmacoll_case_t *c = NULL;

    assert_int_equal(rmacoll_case_create(nranks, NULL, dtype, &c), RMACOLL_SUCCESS);
    for (int i = 0; i < nranks * nranks; i++)
        c->send[i] = c->recv[i] = count;
    snprintf(c->name, sizeof(c->name), "alltoall %d x %lld", nranks, (long long)count);
    return c;
}

static void alltoall_on(const char *intra)
{
    static const int64_t counts[] = {1024, 1 << 18}; /* 4 KiB, 1 MiB of int32 */

    for (int nr = 2; nr <= 4; nr += 2) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            rmacoll_case_t *c = uniform(nr, counts[i], RMACOLL_INT32);

            run_graph(c, 1, counts[i], intra);
            rmacoll_case_free(c);
        }
    }
}

static void alltoallv_on(const char *intra)
{
    static const char *const files[] = {"symmetric_small_2x2.txt", "half_idle.txt",
                                        "moe_zipf_2x4.txt"};

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[1024], err[256];
        rmacoll_case_t *c = NULL;

        snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, files[i]);
        if (rmacoll_case_load(path, &c, err, sizeof(err)) != RMACOLL_SUCCESS)
            fail_msg("%s", err);
        run_graph(c, 0, 0, intra);
        rmacoll_case_free(c);
    }
}

static void test_alltoall_ce(void **state)
{
    (void)state;
    alltoall_on("ce");
}

static void test_alltoallv_ce(void **state)
{
    (void)state;
    alltoallv_on("ce");
}

static void test_alltoall_nvlink_kernel(void **state)
{
    (void)state;
    alltoall_on("nvlink_kernel");
}

static void test_alltoallv_nvlink_kernel(void **state)
{
    (void)state;
    alltoallv_on("nvlink_kernel");
}

/* The same over nvlink_kernel's one-launch path (RMACOLL_NVL_ONE_LAUNCH=1,
 * read at communicator creation): the kernel itself returns the words to 0. */
static void test_one_launch(void **state)
{
    (void)state;
    setenv("RMACOLL_NVL_ONE_LAUNCH", "1", 1);
    alltoall_on("nvlink_kernel");
    alltoallv_on("nvlink_kernel");
    unsetenv("RMACOLL_NVL_ONE_LAUNCH");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alltoall_ce),
        cmocka_unit_test(test_alltoallv_ce),
        cmocka_unit_test(test_alltoall_nvlink_kernel),
        cmocka_unit_test(test_alltoallv_nvlink_kernel),
        cmocka_unit_test(test_one_launch),
    };

    const char *rp = getenv("RMACOLL_TEST_REPLAYS");

    if (rp != NULL && atoi(rp) >= 100)
        replays = atoi(rp);
    setenv("RMACOLL_CUDA_GRAPH", "1", 1); /* before the first call of the process */
    if (gt_probe() < 1) {
        printf("test_gpu_graph: no usable CUDA device: skipped\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
