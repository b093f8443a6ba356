/*
 * perf.c - rmacoll-perf: AlltoAllV benchmark in the style of nccl-tests'
 * alltoall_perf (sizes, columns, checking), on rmacoll.
 *
 * Started by hand it is its own launcher: it makes a unique id and
 * fork+execs itself as -np ranks on virtual nodes (RMACOLL_NODE_ID), then
 * waits for them (tools/common/launch.h). Under mpirun/srun/torchrun it
 * spawns nothing and bootstraps with rmacoll_comm_create_from_env. The
 * benchmark loop itself is shared with the MPI baseline
 * (tools/common/perfrun.h), so both measure exactly the same thing.
 *
 * --buffers cuda (built with the CUDA runtime, RMACOLL_PERF_HAVE_CUDA):
 * every rank picks GPU local_rank % device count before creating the
 * communicator (CUDA is first touched here, in the exec'd child, never in
 * the spawning parent), allocates its buffers with cudaMalloc and calls
 * rmacoll_alltoallv on a stream of its own; time is taken with CUDA events
 * on that stream. --baseline nccl (RMACOLL_PERF_HAVE_NCCL) times NCCL's
 * grouped ncclSend/ncclRecv (what PyTorch's all_to_all_single does) on the
 * same counts and buffers. See docs/perf.md and docs/gpu.md.
 *
 * --gemm N (RMACOLL_PERF_HAVE_CUBLAS): SM interference. Each rank also
 * makes a second stream and a cuBLAS handle on it, allocates bf16 N x N
 * A, B, C and hands perfrun a load (a batch of --gemm-iters cublasGemmEx
 * between two events on that stream), which is timed alone and while the
 * alltoallv (rmacoll, then NCCL) loops on the collective's stream.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cases.h"
#include "launch.h"
#include "perfrun.h"
#include "rmacoll.h"
#include "core/oob/bootstrap.h" /* unique id <-> hex text for spawned ranks */

/* Exit codes: 0 all right, 1 a rank failed, 2 wrong data, 64 bad usage or
 * configuration (sysexits' EX_USAGE), so scripts can tell them apart. */
#define PERF_EXIT_USAGE 64

#ifdef RMACOLL_PERF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda_graph.h"
#endif
#ifdef RMACOLL_PERF_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
#include <cublas_v2.h>

#endif

#define PERF_NAME "rmacoll-perf"

/* ---- the rmacoll backend ---- */

typedef struct perf_rmacoll {
    rmacoll_comm_t *comm;
    int rank, nranks;
    int64_t *counts;        /* 4 * nranks: barrier and gather scratch */
    int8_t *bar_send, *bar_recv;
    void *stream;           /* cudaStream_t with --buffers cuda, else NULL */
#ifdef RMACOLL_PERF_HAVE_CUDA
    int device, ndevices, local_rank, local_size;
    cudaEvent_t ev_start, ev_stop;
    rmacoll_tool_graph_t graph; /* -G: the row's captured calls */
#endif
#ifdef RMACOLL_PERF_HAVE_NCCL
    ncclComm_t nccl;        /* --baseline nccl, else NULL */
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
    /* --gemm: the interfering load, on a stream of its own */
    cublasHandle_t blas;    /* NULL when --gemm is off */
    cudaStream_t gemm_stream;
    cudaEvent_t gemm_start, gemm_stop;
    void *gemm_a, *gemm_b, *gemm_c; /* bf16 n x n, column-major */
    int gemm_n, gemm_iters;
#endif
} perf_rmacoll_t;

static rmacoll_status_t perf_fail(perf_rmacoll_t *p, rmacoll_status_t st,
                                  const char *what, char *err, size_t len)
{
    const char *msg = rmacoll_comm_last_error(p->comm);

    snprintf(err, len, "%s: %s", what,
             msg != NULL && *msg != '\0' ? msg : rmacoll_status_string(st));
    return st;
}

static rmacoll_status_t perf_a2av(void *ctx, const void *sendbuf,
                                  const int64_t *sendcounts,
                                  const int64_t *sdispls, void *recvbuf,
                                  const int64_t *recvcounts,
                                  const int64_t *rdispls,
                                  rmacoll_datatype_t dtype, char *err,
                                  size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;

    st = rmacoll_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                           rdispls, dtype, p->comm, p->stream);
    if (st != RMACOLL_SUCCESS)
        return perf_fail(p, st, "rmacoll_alltoallv", err, errlen);
    return RMACOLL_SUCCESS;
}

/* -R 1|2: the host send and receive buffers from rmacoll_mem_alloc on the
 * rank's communicator (nccl-tests' -R takes them from ncclMemAlloc). */
static rmacoll_status_t perf_host_alloc(void *ctx, size_t bytes, void **ptr,
                                        char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st = rmacoll_mem_alloc(p->comm, bytes, ptr);

    if (st != RMACOLL_SUCCESS)
        return perf_fail(p, st, "rmacoll_mem_alloc", err, errlen);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t perf_host_free(void *ctx, void *ptr, char *err,
                                       size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st = rmacoll_mem_free(p->comm, ptr);

    if (st != RMACOLL_SUCCESS)
        return perf_fail(p, st, "rmacoll_mem_free", err, errlen);
    return RMACOLL_SUCCESS;
}

/* Barrier: an AlltoAll of one byte per pair (no rank leaves before every
 * rank has entered). */
static rmacoll_status_t perf_barrier(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;

    st = rmacoll_alltoall(p->bar_send, p->bar_recv, 1, RMACOLL_INT8, p->comm,
                          NULL);
    if (st != RMACOLL_SUCCESS)
        return perf_fail(p, st, "barrier (rmacoll_alltoall)", err, errlen);
    return RMACOLL_SUCCESS;
}

/* Gather to rank 0: an AlltoAllV where only the column of rank 0 is
 * non-zero. */
static rmacoll_status_t perf_gather(void *ctx, const double *mine, int k,
                                    double *all, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    int n = p->nranks;
    int64_t *sc = p->counts, *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    rmacoll_status_t st;

    for (int j = 0; j < n; j++) {
        sc[j] = j == 0 ? k : 0;
        sd[j] = 0;
        rc[j] = p->rank == 0 ? k : 0;
        rd[j] = p->rank == 0 ? (int64_t)j * k : 0;
    }
    st = rmacoll_alltoallv(mine, sc, sd, p->rank == 0 ? all : NULL, rc, rd,
                           RMACOLL_FLOAT64, p->comm, NULL);
    if (st != RMACOLL_SUCCESS)
        return perf_fail(p, st, "gather (rmacoll_alltoallv)", err, errlen);
    return RMACOLL_SUCCESS;
}

/* All-gather of k doubles per rank (host memory): an AlltoAllV sending the
 * same k values to every rank. */
static rmacoll_status_t perf_allgather(void *ctx, const double *mine, int k,
                                       double *all, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    int n = p->nranks;
    int64_t *sc = p->counts, *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    rmacoll_status_t st;

    for (int j = 0; j < n; j++) {
        sc[j] = k;
        sd[j] = 0;
        rc[j] = k;
        rd[j] = (int64_t)j * k;
    }
    st = rmacoll_alltoallv(mine, sc, sd, all, rc, rd, RMACOLL_FLOAT64,
                           p->comm, NULL);
    if (st != RMACOLL_SUCCESS)
        return perf_fail(p, st, "allgather (rmacoll_alltoallv)", err, errlen);
    return RMACOLL_SUCCESS;
}

/* ---- CUDA memory: device hooks of the benchmark loop ---- */

#ifdef RMACOLL_PERF_HAVE_CUDA
static rmacoll_status_t perf_cuda(cudaError_t ce, const char *what,
                                  size_t bytes, const perf_rmacoll_t *p,
                                  char *err, size_t errlen)
{
    if (ce == cudaSuccess)
        return RMACOLL_SUCCESS;
    snprintf(err, errlen, "rank %d: %s of %zu bytes on device %d: %s",
             p->rank, what, bytes, p->device, cudaGetErrorString(ce));
    return RMACOLL_ERR_CUDA;
}

static rmacoll_status_t perf_dev_alloc(void *ctx, size_t bytes, void **buf,
                                       char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    *buf = NULL;
    return perf_cuda(cudaMalloc(buf, bytes), "cudaMalloc", bytes, p, err,
                     errlen);
}

static void perf_dev_release(void *ctx, void *buf)
{
    (void)ctx;
    cudaFree(buf);
}

/* Copies after the stream's earlier work, and waits for the copy. */
static rmacoll_status_t perf_dev_copy(perf_rmacoll_t *p, void *dst,
                                      const void *src, size_t bytes,
                                      enum cudaMemcpyKind kind,
                                      const char *what, char *err,
                                      size_t errlen)
{
    cudaStream_t s = (cudaStream_t)p->stream;
    rmacoll_status_t st;

    st = perf_cuda(cudaMemcpyAsync(dst, src, bytes, kind, s), what, bytes, p,
                   err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaStreamSynchronize(s), what, bytes, p, err, errlen);
    return st;
}

static rmacoll_status_t perf_dev_upload(void *ctx, void *dev, const void *host,
                                        size_t bytes, char *err, size_t errlen)
{
    return perf_dev_copy(ctx, dev, host, bytes, cudaMemcpyHostToDevice,
                         "host to device copy", err, errlen);
}

static rmacoll_status_t perf_dev_download(void *ctx, void *host,
                                          const void *dev, size_t bytes,
                                          char *err, size_t errlen)
{
    return perf_dev_copy(ctx, host, dev, bytes, cudaMemcpyDeviceToHost,
                         "device to host copy", err, errlen);
}

static rmacoll_status_t perf_dev_sync(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return perf_cuda(cudaStreamSynchronize((cudaStream_t)p->stream),
                     "stream synchronize", 0, p, err, errlen);
}

static rmacoll_status_t perf_dev_timer_start(void *ctx, char *err,
                                             size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return perf_cuda(cudaEventRecord(p->ev_start, (cudaStream_t)p->stream),
                     "event record", 0, p, err, errlen);
}

static rmacoll_status_t perf_dev_timer_stop(void *ctx, double *us, char *err,
                                            size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;
    float ms = 0;

    st = perf_cuda(cudaEventRecord(p->ev_stop, (cudaStream_t)p->stream),
                   "event record", 0, p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventSynchronize(p->ev_stop), "event synchronize",
                       0, p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventElapsedTime(&ms, p->ev_start, p->ev_stop),
                       "event elapsed time", 0, p, err, errlen);
    *us = (double)ms * 1e3;
    return st;
}

/* -G: the calls between begin and end captured into one graph
 * (tools/common/cuda_graph.h, shared with rmacoll-latency). */
static rmacoll_status_t perf_dev_graph_begin(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return rmacoll_tool_graph_begin((cudaStream_t)p->stream, err, errlen) == 0
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_CUDA;
}

static rmacoll_status_t perf_dev_graph_end(void *ctx, int ok, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return rmacoll_tool_graph_end(&p->graph, (cudaStream_t)p->stream, ok, err, errlen) == 0
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_CUDA;
}

static rmacoll_status_t perf_dev_graph_launch(void *ctx, int n, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return rmacoll_tool_graph_launch(&p->graph, (cudaStream_t)p->stream, n, err, errlen) == 0
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_CUDA;
}

static const rmacoll_perf_devops_t perf_cuda_devops = {
    perf_dev_alloc,       perf_dev_release,     perf_dev_upload,
    perf_dev_download,    perf_dev_sync,        perf_dev_timer_start,
    perf_dev_timer_stop,  perf_dev_graph_begin, perf_dev_graph_end,
    perf_dev_graph_launch,
};

/* The "# Using devices" line of this rank: its GPU, PCI bus id, name. */
static void perf_cuda_describe(void *ctx, int *device, char *busid,
                               size_t busid_len, char *name, size_t name_len)
{
    perf_rmacoll_t *p = ctx;
    struct cudaDeviceProp prop;
    char bus[32];

    if (p->stream == NULL)
        return;     /* host memory: the defaults */
    *device = p->device;
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), p->device) == cudaSuccess)
        snprintf(busid, busid_len, "%s", bus);
    if (cudaGetDeviceProperties(&prop, p->device) == cudaSuccess)
        snprintf(name, name_len, "%s", prop.name);
}

/* Picks the GPU and makes the stream and events; before the communicator
 * (so that the library sees the right current device). */
static int perf_cuda_setup(perf_rmacoll_t *p, const rmacoll_launch_env_t *env)
{
    cudaError_t ce;
    cudaStream_t s = NULL;

    rmacoll_launch_local(env, &p->local_rank, &p->local_size);
    ce = cudaGetDeviceCount(&p->ndevices);
    if (ce != cudaSuccess || p->ndevices < 1) {
        fprintf(stderr, PERF_NAME ": rank %d: --buffers cuda: no CUDA device "
                "(%s)\n", env->rank,
                ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return 1;
    }
    p->device = p->local_rank % p->ndevices;
    ce = cudaSetDevice(p->device);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&p->ev_start);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&p->ev_stop);
    if (ce != cudaSuccess) {
        fprintf(stderr, PERF_NAME ": rank %d: device %d setup failed: %s\n",
                env->rank, p->device, cudaGetErrorString(ce));
        if (s != NULL)
            cudaStreamDestroy(s);
        return 1;
    }
    p->stream = s;
    return 0;
}

static void perf_cuda_teardown(perf_rmacoll_t *p)
{
    if (p->stream == NULL)
        return;
    cudaStreamSynchronize((cudaStream_t)p->stream);
    rmacoll_tool_graph_free(&p->graph);
    cudaEventDestroy(p->ev_start);
    cudaEventDestroy(p->ev_stop);
    cudaStreamDestroy((cudaStream_t)p->stream);
    p->stream = NULL;
}
#endif /* RMACOLL_PERF_HAVE_CUDA */

/* ---- --gemm: the interfering bf16 GEMMs (cuBLAS) ---- */

#ifdef RMACOLL_PERF_HAVE_CUBLAS
static rmacoll_status_t perf_blas(cublasStatus_t bs, const char *what,
                                  const perf_rmacoll_t *p, char *err,
                                  size_t errlen)
{
    if (bs == CUBLAS_STATUS_SUCCESS)
        return RMACOLL_SUCCESS;
    snprintf(err, errlen, "rank %d: %s (n %d) on device %d: %s", p->rank,
             what, p->gemm_n, p->device, cublasGetStatusString(bs));
    return RMACOLL_ERR_CUDA;
}

/* C = A * B, bf16 in and out, fp32 compute, on the GEMM stream. */
static rmacoll_status_t perf_gemm_one(perf_rmacoll_t *p, char *err,
                                      size_t errlen)
{
    const float alpha = 1.0f, beta = 0.0f;
    int n = p->gemm_n;

    return perf_blas(cublasGemmEx(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n,
                                  &alpha, p->gemm_a, CUDA_R_16BF, n,
                                  p->gemm_b, CUDA_R_16BF, n, &beta, p->gemm_c,
                                  CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx", p, err, errlen);
}

static rmacoll_status_t perf_gemm_start(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;

    st = perf_cuda(cudaEventRecord(p->gemm_start, p->gemm_stream),
                   "gemm event record", 0, p, err, errlen);
    for (int i = 0; i < p->gemm_iters && st == RMACOLL_SUCCESS; i++)
        st = perf_gemm_one(p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventRecord(p->gemm_stop, p->gemm_stream),
                       "gemm event record", 0, p, err, errlen);
    return st;
}

static rmacoll_status_t perf_gemm_finish(void *ctx, double *us, char *err,
                                         size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;
    float ms = 0;

    st = perf_cuda(cudaEventSynchronize(p->gemm_stop),
                   "gemm event synchronize", 0, p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventElapsedTime(&ms, p->gemm_start, p->gemm_stop),
                       "gemm event elapsed time", 0, p, err, errlen);
    *us = (double)ms * 1e3;
    return st;
}

static const rmacoll_perf_loadops_t perf_gemm_loadops = {
    perf_gemm_start,
    perf_gemm_finish,
};

/* bf16 of a float: the top 16 bits (truncation is fine for test data). */
static uint16_t perf_bf16(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

/* Second stream, handle, A/B (pseudo-random values in [-1, 1), so the
 * tensor cores do not see zeros), C, events, then three warm-up GEMMs. */
static int perf_gemm_setup(perf_rmacoll_t *p, int n, int iters)
{
    size_t elems = (size_t)n * (size_t)n, bytes = elems * 2;
    uint16_t *h = NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)p->rank;
    char err[512] = "";
    rmacoll_status_t st;
    void **mats[3];

    p->gemm_n = n;
    p->gemm_iters = iters;
    mats[0] = &p->gemm_a;
    mats[1] = &p->gemm_b;
    mats[2] = &p->gemm_c;
    st = perf_cuda(cudaStreamCreateWithFlags(&p->gemm_stream,
                                             cudaStreamNonBlocking),
                   "gemm stream create", 0, p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventCreate(&p->gemm_start), "gemm event create",
                       0, p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventCreate(&p->gemm_stop), "gemm event create", 0,
                       p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_blas(cublasCreate(&p->blas), "cublasCreate", p, err,
                       sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_blas(cublasSetStream(p->blas, p->gemm_stream),
                       "cublasSetStream", p, err, sizeof(err));
    for (int m = 0; m < 3 && st == RMACOLL_SUCCESS; m++)
        st = perf_cuda(cudaMalloc(mats[m], bytes), "gemm matrix cudaMalloc",
                       bytes, p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS) {
        h = malloc(bytes);
        if (h == NULL) {
            snprintf(err, sizeof(err), "rank %d: no host memory for %zu "
                     "bytes of gemm input", p->rank, bytes);
            st = RMACOLL_ERR_NO_MEMORY;
        }
    }
    for (int m = 0; m < 2 && st == RMACOLL_SUCCESS; m++) {
        for (size_t i = 0; i < elems; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h[i] = perf_bf16((float)(int32_t)(x >> 32) / 2147483648.0f);
        }
        st = perf_cuda(cudaMemcpy(*mats[m], h, bytes, cudaMemcpyHostToDevice),
                       "gemm input copy", bytes, p, err, sizeof(err));
    }
    free(h);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaMemset(p->gemm_c, 0, bytes), "gemm output memset",
                       bytes, p, err, sizeof(err));
    for (int i = 0; i < 3 && st == RMACOLL_SUCCESS; i++)
        st = perf_gemm_one(p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaStreamSynchronize(p->gemm_stream),
                       "gemm warm-up", 0, p, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": --gemm %d: %s\n", n, err);
        return 1;
    }
    return 0;
}

/* Safe on a partial setup (every field NULL until made). */
static void perf_gemm_teardown(perf_rmacoll_t *p)
{
    if (p->gemm_stream != NULL)
        cudaStreamSynchronize(p->gemm_stream);
    if (p->blas != NULL)
        cublasDestroy(p->blas);
    cudaFree(p->gemm_a);
    cudaFree(p->gemm_b);
    cudaFree(p->gemm_c);
    if (p->gemm_start != NULL)
        cudaEventDestroy(p->gemm_start);
    if (p->gemm_stop != NULL)
        cudaEventDestroy(p->gemm_stop);
    if (p->gemm_stream != NULL)
        cudaStreamDestroy(p->gemm_stream);
    p->blas = NULL;
    p->gemm_a = p->gemm_b = p->gemm_c = NULL;
    p->gemm_start = p->gemm_stop = NULL;
    p->gemm_stream = NULL;
}
#endif /* RMACOLL_PERF_HAVE_CUBLAS */

/* ---- NCCL baseline ---- */

#ifdef RMACOLL_PERF_HAVE_NCCL
static ncclDataType_t perf_nccl_type(rmacoll_datatype_t d)
{
    switch (d) {
    case RMACOLL_INT8: return ncclInt8;
    case RMACOLL_UINT8: return ncclUint8;
    case RMACOLL_INT32: return ncclInt32;
    case RMACOLL_UINT32: return ncclUint32;
    case RMACOLL_INT64: return ncclInt64;
    case RMACOLL_UINT64: return ncclUint64;
    case RMACOLL_FLOAT16: return ncclFloat16;
    case RMACOLL_BFLOAT16: return ncclBfloat16;
    case RMACOLL_FLOAT32: return ncclFloat32;
    case RMACOLL_FLOAT64: return ncclFloat64;
    default: return ncclUint8;
    }
}

/* AlltoAllV as PyTorch's all_to_all_single with splits: one group of
 * ncclSend/ncclRecv, skipping zero counts. */
static rmacoll_status_t perf_nccl_a2av(void *ctx, const void *sendbuf,
                                       const int64_t *sendcounts,
                                       const int64_t *sdispls, void *recvbuf,
                                       const int64_t *recvcounts,
                                       const int64_t *rdispls,
                                       rmacoll_datatype_t dtype, char *err,
                                       size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    size_t es = rmacoll_datatype_size(dtype);
    ncclDataType_t t = perf_nccl_type(dtype);
    cudaStream_t s = (cudaStream_t)p->stream;
    ncclResult_t nr, nr2;

    nr = ncclGroupStart();
    for (int j = 0; j < p->nranks && nr == ncclSuccess; j++) {
        if (sendcounts[j] > 0)
            nr = ncclSend((const char *)sendbuf + (size_t)sdispls[j] * es,
                          (size_t)sendcounts[j], t, j, p->nccl, s);
        if (nr == ncclSuccess && recvcounts[j] > 0)
            nr = ncclRecv((char *)recvbuf + (size_t)rdispls[j] * es,
                          (size_t)recvcounts[j], t, j, p->nccl, s);
    }
    nr2 = ncclGroupEnd();
    if (nr == ncclSuccess)
        nr = nr2;
    if (nr != ncclSuccess) {
        snprintf(err, errlen, "rank %d: nccl send/recv group: %s (%s)",
                 p->rank, ncclGetErrorString(nr), ncclGetLastError(p->nccl));
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

/* NCCL communicator over the same ranks: rank 0 makes the id (after fork,
 * in this process) and sends it to every rank with a host AlltoAllV in
 * which only rank 0 sends. */
static int perf_nccl_setup(perf_rmacoll_t *p)
{
    ncclUniqueId id;
    int n = p->nranks;
    int64_t *sc = p->counts, *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    unsigned char msg[1 + sizeof(ncclUniqueId)];
    size_t msg_bytes;
    unsigned char *all = NULL;
    rmacoll_status_t st;
    ncclResult_t nr = ncclSuccess;

    if (p->local_size > p->ndevices) {
        if (p->rank == 0)
            fprintf(stderr, PERF_NAME ": --baseline nccl needs one rank per "
                    "GPU (NCCL rejects two ranks on one device): %d local "
                    "ranks, %d GPUs; use -np %d\n", p->local_size,
                    p->ndevices, p->ndevices);
        return 1;
    }
    /* msg = [ok byte][id]: a failed ncclGetUniqueId stops every rank
     * instead of leaving them in ncclCommInitRank. */
    msg_bytes = 1 + sizeof(id);
    memset(msg, 0, sizeof(msg));
    if (p->rank == 0) {
        nr = ncclGetUniqueId(&id);
        if (nr != ncclSuccess)
            fprintf(stderr, PERF_NAME ": rank 0: ncclGetUniqueId: %s\n",
                    ncclGetErrorString(nr));
        msg[0] = nr == ncclSuccess;
        memcpy(msg + 1, &id, sizeof(id));
        all = calloc((size_t)n, msg_bytes);
        if (all == NULL)
            msg[0] = 0;   /* sends nothing useful; the others stop too */
        else
            for (int j = 0; j < n; j++)
                memcpy(all + (size_t)j * msg_bytes, msg, msg_bytes);
    }
    for (int j = 0; j < n; j++) {
        sc[j] = p->rank == 0 && all != NULL ? (int64_t)msg_bytes : 0;
        sd[j] = p->rank == 0 ? (int64_t)((size_t)j * msg_bytes) : 0;
        rc[j] = j == 0 ? (int64_t)msg_bytes : 0;
        rd[j] = 0;
    }
    if (p->rank == 0 && all == NULL) {
        /* Cannot send: fail the exchange on every rank (count mismatch). */
        fprintf(stderr, PERF_NAME ": rank 0: out of memory for the nccl id\n");
    }
    st = rmacoll_alltoallv(all, sc, sd, msg, rc, rd, RMACOLL_UINT8, p->comm,
                           NULL);
    free(all);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rank %d: nccl id exchange failed: %s\n",
                p->rank, rmacoll_comm_last_error(p->comm));
        return 1;
    }
    if (msg[0] != 1) {
        fprintf(stderr, PERF_NAME ": rank %d: rank 0 has no nccl id\n",
                p->rank);
        return 1;
    }
    memcpy(&id, msg + 1, sizeof(id));
    nr = ncclCommInitRank(&p->nccl, n, id, p->rank);
    if (nr != ncclSuccess) {
        fprintf(stderr, PERF_NAME ": rank %d: ncclCommInitRank on device %d: "
                "%s\n", p->rank, p->device, ncclGetErrorString(nr));
        p->nccl = NULL;
        return 1;
    }
    return 0;
}
#endif /* RMACOLL_PERF_HAVE_NCCL */

/* ---- usage checks and the node map, shared by the spawner and ranks ---- */

/* 1 when name is one of the comma-separated list. */
static int perf_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);

        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = e != NULL ? e + 1 : NULL;
    }
    return 0;
}

/* A transport loaded from a shared object (transports.*: plugin:PATH, as
 * the config takes it): 1, 0 when t is no plugin: value, -1 (err names
 * the option and the path) when PATH cannot be read. */
static int perf_plugin(const char *opt, const char *t, char *err, size_t len)
{
    const char *path;

    if (strncmp(t, "plugin:", 7) != 0)
        return 0;
    path = t + 7;
    if (path[0] == '\0' || access(path, R_OK) != 0) {
        snprintf(err, len, "%s %s: cannot read the transport plugin '%s': %s", opt, t,
                 path, path[0] == '\0' ? "no path after plugin:" : strerror(errno));
        return -1;
    }
    return 1;
}

/* Applies --relay/--scheduler/--intra/--inter to cfg and checks the names
 * against what is built in (a plugin:PATH transport: that PATH can be
 * read; the library checks the rest when it loads it); err names the
 * option. 0 or -1. */
/* --intra/--inter win over the file and the environment: given to the
 * configuration loader as the environment variables (which override the
 * file), so a plugin named there declares its keys before the file and the
 * environment are read, and spawned ranks inherit the choice. */
static void perf_transport_env(const rmacoll_perf_opts_t *o)
{
    if (o->intra_node[0] != '\0')
        setenv("RMACOLL_TRANSPORTS_INTRA_NODE", o->intra_node, 1);
    if (o->inter_node[0] != '\0')
        setenv("RMACOLL_TRANSPORTS_INTER_NODE", o->inter_node, 1);
}

static int perf_apply_config(const rmacoll_perf_opts_t *o,
                             rmacoll_config_t *cfg, char *err, size_t len)
{
    int intra_plugin, inter_plugin;

    if (o->relay >= 0)
        cfg->relay_enabled = o->relay;
    if (o->scheduler[0] != '\0')
        snprintf(cfg->scheduler, sizeof(cfg->scheduler), "%s", o->scheduler);
    if (o->intra_node[0] != '\0')
        snprintf(cfg->intra_node, sizeof(cfg->intra_node), "%s", o->intra_node);
    if (o->inter_node[0] != '\0')
        snprintf(cfg->inter_node, sizeof(cfg->inter_node), "%s", o->inter_node);
    intra_plugin = perf_plugin(o->intra_node[0] ? "--intra" : "transports.intra_node",
                               cfg->intra_node, err, len);
    inter_plugin = perf_plugin(o->inter_node[0] ? "--inter" : "transports.inter_node",
                               cfg->inter_node, err, len);
    if (intra_plugin < 0 || inter_plugin < 0)
        return -1;
    if (!intra_plugin && strcmp(cfg->intra_node, "auto") != 0 &&
        (!perf_in_list(rmacoll_build_transports(), cfg->intra_node) ||
         !strcmp(cfg->intra_node, "ofi") || !strcmp(cfg->intra_node, "verbs"))) {
        snprintf(err, len, "%s %s: not a node transport of this build (ce, "
                 "nvlink_kernel, auto or plugin:PATH; built: %s)",
                 o->intra_node[0] ? "--intra" : "transports.intra_node",
                 cfg->intra_node, rmacoll_build_transports());
        return -1;
    }
    if (!inter_plugin && (!perf_in_list(rmacoll_build_transports(), cfg->inter_node) ||
        !strcmp(cfg->inter_node, "ce") ||
        !strcmp(cfg->inter_node, "nvlink_kernel"))) {
        snprintf(err, len, "%s %s: not a network transport of this build "
                 "(ofi, verbs or plugin:PATH; built: %s)",
                 o->inter_node[0] ? "--inter" : "transports.inter_node",
                 cfg->inter_node, rmacoll_build_transports());
        return -1;
    }
    if (cfg->scheduler_plugin[0] == '\0' &&
        !perf_in_list(rmacoll_build_schedulers(), cfg->scheduler)) {
        snprintf(err, len, "%s %s: no such scheduler (built: %s; or "
                 "scheduler_plugin in the config)",
                 o->scheduler[0] ? "--scheduler" : "scheduler", cfg->scheduler,
                 rmacoll_build_schedulers());
        return -1;
    }
    return 0;
}

/* The virtual node of every rank from --nodes, --topology or -np/--ppn, or
 * from the matrix file when no topology option was given (c may be NULL).
 * 0, or -1 with err naming the option. */
static int perf_node_map(const rmacoll_perf_opts_t *o, const rmacoll_case_t *c,
                         int *node_of, int *nranks, char *err, size_t len)
{
    int sizes[RMACOLL_LAUNCH_MAX_RANKS];
    int nnodes = 0;
    rmacoll_status_t st;

    if (o->nodes[0] != '\0') {
        if (rmacoll_perf_parse_nodes(o->nodes, node_of,
                                     RMACOLL_LAUNCH_MAX_RANKS, nranks) != 0) {
            snprintf(err, len, "bad --nodes %.200s (node of every rank, e.g. "
                     "0,1,0,1)", o->nodes);
            return -1;
        }
        if (o->np_given && o->np != *nranks) {
            snprintf(err, len, "--nodes %.200s names %d ranks but -np is %d",
                     o->nodes, *nranks, o->np);
            return -1;
        }
    } else if (c != NULL && !o->topology_given) {
        /* A matrix file brings its own topology. */
        if (c->nranks > RMACOLL_LAUNCH_MAX_RANKS) {
            snprintf(err, len, "%.200s: too many ranks (%d)", o->dist + 7,
                     c->nranks);
            return -1;
        }
        *nranks = c->nranks;
        memcpy(node_of, c->node_of, (size_t)c->nranks * sizeof(int));
        return 0;
    } else {
        if (o->topology[0] != '\0')
            st = rmacoll_launch_parse_topology(o->topology, sizes,
                                               RMACOLL_LAUNCH_MAX_RANKS,
                                               &nnodes, nranks);
        else
            st = rmacoll_launch_even_topology(o->np, o->ppn, sizes,
                                              RMACOLL_LAUNCH_MAX_RANKS,
                                              &nnodes, nranks);
        if (st != RMACOLL_SUCCESS) {
            snprintf(err, len, "bad topology (%.200s)",
                     o->topology[0] ? o->topology : "-np/--ppn");
            return -1;
        }
        for (int nd = 0, r = 0; nd < nnodes; nd++)
            for (int k = 0; k < sizes[nd]; k++)
                node_of[r++] = nd;
    }
    if (c != NULL && c->nranks != *nranks) {
        snprintf(err, len, "%.200s has %d ranks, but the topology options give "
                 "%d (leave out -np/--ppn/--topology/--nodes to use the "
                 "file's)", o->dist + 7, c->nranks, *nranks);
        return -1;
    }
    return 0;
}

/* ---- child / externally launched rank ---- */

/* Test hooks of the launcher, honoured in --dry-run only:
 * RMACOLL_PERF_TEST_EXIT=R:CODE makes rank R exit with CODE,
 * RMACOLL_PERF_TEST_HANG=R makes rank R sleep until killed. */
static int perf_dry_run(const rmacoll_launch_env_t *env)
{
    const char *ex = getenv("RMACOLL_PERF_TEST_EXIT");
    const char *hang = getenv("RMACOLL_PERF_TEST_HANG");
    int r, code;

    printf("rank %d/%d node %d launch %s id %.40s%s\n", env->rank,
           env->nranks, env->node, rmacoll_launch_kind_name(env->kind),
           env->id_hex != NULL ? env->id_hex : "-",
           env->id_hex != NULL ? "..." : "");
    fflush(stdout);
    if (ex != NULL && sscanf(ex, "%d:%d", &r, &code) == 2 && r == env->rank)
        return code;
    if (hang != NULL && atoi(hang) == env->rank)
        for (;;)
            pause();
    return 0;
}

/* What a rank needs before its communicator: the CUDA device (--buffers
 * cuda), and the baseline and load of this build. -1 to go on, else the
 * exit status. */
static int perf_rank_devices(const rmacoll_perf_opts_t *o,
                             const rmacoll_launch_env_t *env, perf_rmacoll_t *p)
{
    (void)p;
    if (o->memory == RMACOLL_PERF_MEM_CUDA) {
#ifdef RMACOLL_PERF_HAVE_CUDA
        /* Before any NCCL init: NVLS (NVLink SHARP) off, unless asked. */
        setenv("NCCL_NVLS_ENABLE", "0", 0);
        /* -G: rmacoll records calls under capture only in graph mode, read
         * at the process's first call */
        if (o->graph_launches > 0)
            setenv("RMACOLL_CUDA_GRAPH", "1", 1);
        if (perf_cuda_setup(p, env) != 0)
            return 1;
#else
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": --buffers cuda: built without the "
                    "CUDA runtime (reconfigure with the CUDA toolkit)\n");
        return 1;
#endif
    }
#ifndef RMACOLL_PERF_HAVE_NCCL
    if (!strcmp(o->baseline, "nccl")) {
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": --baseline nccl: built without NCCL "
                    "(nccl.h/libnccl not found at configure time)\n");
        return 1;
    }
#endif
#ifndef RMACOLL_PERF_HAVE_CUBLAS
    if (o->gemm_n > 0) {
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": --gemm: built without cuBLAS "
                    "(CUDA::cublas not found at configure time)\n");
        return 1;
    }
#endif
    return -1;
}

/* The rank's configuration, loaded as the library loads it, under the
 * options. A load that fails is said by this rank (*cfg_bad = 1), then
 * the library is left to load the same configuration itself at create,
 * where a bad value on some ranks fails every rank at once, naming them
 * (under a launcher only this rank may have it). -1 to go on, else the
 * exit status. */
static int perf_rank_config(const rmacoll_perf_opts_t *o,
                            const rmacoll_launch_env_t *env,
                            rmacoll_config_t *cfg, int *cfg_bad)
{
    char err[512] = "";
    rmacoll_status_t st;

    cfg->struct_size = sizeof(*cfg);
    perf_transport_env(o);
    st = rmacoll_config_load(o->config_path[0] ? o->config_path : NULL, cfg,
                             err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rank %d: config: %s (%s)\n", env->rank, err,
                rmacoll_status_name(st));
        *cfg_bad = 1;
        if (o->config_path[0])
            setenv("RMACOLL_CONFIG", o->config_path, 1);
    }
    if (!*cfg_bad && perf_apply_config(o, cfg, err, sizeof(err)) != 0) {
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    return -1;
}

/* The communicator (p->comm): from the spawner's unique id, or from the
 * launcher's environment. 0, or 1 with the failure said. */
static int perf_rank_comm(const rmacoll_launch_env_t *env,
                          const rmacoll_config_t *cfg, int cfg_bad,
                          perf_rmacoll_t *p)
{
    rmacoll_comm_t *comm = NULL;
    rmacoll_status_t st;

    if (env->kind == RMACOLL_LAUNCH_SPAWNED) {
        rmacoll_unique_id_t id;
        rmacoll_comm_params_t params;

        if (rmacoll__unique_id_from_hex(env->id_hex, &id) != RMACOLL_SUCCESS) {
            fprintf(stderr, PERF_NAME ": rank %d: bad or missing %s\n",
                    env->rank, RMACOLL_LAUNCH_ENV_ID);
            return 1;
        }
        memset(&params, 0, sizeof(params));
        params.struct_size = sizeof(params);
        params.rank = env->rank;
        params.nranks = env->nranks;
        params.unique_id = &id;
        params.config = cfg_bad ? NULL : cfg;
        params.node_key = NULL; /* RMACOLL_NODE_ID, set by the launcher */
        st = rmacoll_comm_create(&params, &comm);
    } else {
        st = rmacoll_comm_create_from_env(cfg_bad ? NULL : cfg, &comm);
    }
    if (st == RMACOLL_SUCCESS && cfg_bad) { /* cannot be: the same load failed here */
        rmacoll_comm_destroy(comm);
        return 1;
    }
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rank %d: communicator create failed: %s\n",
                env->rank, rmacoll_status_name(st));
#ifdef RMACOLL_PERF_HAVE_CUDA
        perf_cuda_teardown(p);
#endif
        return RMACOLL_PERF_EXIT_OF(st);
    }
    p->comm = comm;
    return 0;
}

/* The scratch of the barrier and gather, the NCCL baseline and the GEMM
 * load: 0, or 1 with the failure said. */
static int perf_rank_alloc(const rmacoll_perf_opts_t *o, perf_rmacoll_t *p)
{
    (void)o;
    rmacoll_comm_rank(p->comm, &p->rank);
    rmacoll_comm_size(p->comm, &p->nranks);
    p->counts = calloc((size_t)p->nranks * 4, sizeof(int64_t));
    p->bar_send = calloc((size_t)p->nranks, 1);
    p->bar_recv = calloc((size_t)p->nranks, 1);
    if (p->counts == NULL || p->bar_send == NULL || p->bar_recv == NULL) {
        fprintf(stderr, PERF_NAME ": rank %d: out of memory\n", p->rank);
        return 1;
    }
#ifdef RMACOLL_PERF_HAVE_NCCL
    if (!strcmp(o->baseline, "nccl") && perf_nccl_setup(p) != 0)
        return 1;
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
    if (o->gemm_n > 0 && perf_gemm_setup(p, o->gemm_n, o->gemm_iters) != 0)
        return 1;
#endif
    return 0;
}

/* The communicator's device path, where its signal words of device calls
 * live and its direct streams' threshold (rmacoll_comm_get_stats). 0, or
 * PERF_EXIT_USAGE when -G cannot run on it. */
static int perf_rank_paths(const rmacoll_perf_opts_t *o, const perf_rmacoll_t *p,
                           const char **devpath, int *dsig, uint64_t *direct_min)
{
    rmacoll_comm_stats_t cs;

    memset(&cs, 0, sizeof(cs));
    cs.struct_size = sizeof(cs);
    rmacoll_comm_get_stats(p->comm, &cs);
    *devpath = cs.device_path == RMACOLL_DEVICE_PATH_HMEM     ? "hmem (registered, no staging)"
               : cs.device_path == RMACOLL_DEVICE_PATH_STAGED ? "staged (pinned host buffers)"
                                                              : "none (one node)";
    *dsig = cs.device_signals;
    *direct_min = cs.direct_min_bytes;
    /* The tool's barrier and gather are host-memory calls on the same
     * communicator; between graph replays they are safe only when the
     * device calls' signal words are device-resident (their own words,
     * which graph mode resets: docs/gpu.md). */
    if (o->graph_launches > 0 && (cs.device_path != RMACOLL_DEVICE_PATH_NONE || !*dsig)) {
        if (p->rank == 0)
            fprintf(stderr, PERF_NAME ": -G %d: CUDA graphs need one node and device-"
                    "resident signal words (%s)\n", o->graph_launches,
                    cs.device_path != RMACOLL_DEVICE_PATH_NONE
                        ? "device calls across nodes cannot be captured"
                        : "this communicator keeps them in the host window: see the "
                          "INFO log of creation");
        return PERF_EXIT_USAGE;
    }
    return 0;
}

/* The "# cuda: ..." line of the header with --buffers cuda, else "". */
static void perf_rank_gpu(const perf_rmacoll_t *p, char *gpu, size_t len)
{
    (void)p;
    gpu[0] = '\0';
#ifdef RMACOLL_PERF_HAVE_CUDA
    if (p->stream != NULL) {
        int rt = 0;

        cudaRuntimeGetVersion(&rt);
        snprintf(gpu, len,
                 "# cuda: runtime %d, %d device(s), rank 0 on device %d "
                 "(device = local rank %% %d)%s\n",
                 rt, p->ndevices, p->device, p->ndevices,
                 getenv("NCCL_NVLS_ENABLE") && !strcmp(getenv("NCCL_NVLS_ENABLE"), "0")
                     ? ", NCCL_NVLS_ENABLE=0" : "");
    }
#endif
}

/* The header lines of the configuration in effect (perfrun prints them). */
static void perf_rank_header(const rmacoll_perf_opts_t *o, const perf_rmacoll_t *p,
                             const rmacoll_config_t *cfg, const char *devpath,
                             int dsig, uint64_t direct_min, char *header,
                             size_t len)
{
    char gpu[256], eager_max[64], node_eager_max[64], direct_str[64];
    char auto_thr[96] = "";

    perf_rank_gpu(p, gpu, sizeof(gpu));
    if (!strcmp(cfg->intra_node, "auto"))
        snprintf(auto_thr, sizeof(auto_thr), " (auto: nvlink_kernel up to "
                 "%llu B per queue, ce above)",
                 (unsigned long long)cfg->nvlink_kernel_threshold);
    snprintf(direct_str, sizeof(direct_str), "%llu B (relay.direct_min_bytes)",
             (unsigned long long)direct_min);
    if (rmacoll_config_get(cfg, "eager_max_bytes", eager_max, sizeof(eager_max)) !=
        RMACOLL_SUCCESS) {
        snprintf(eager_max, sizeof(eager_max), "?");
    }
    if (rmacoll_config_get(cfg, "node_eager_max_bytes", node_eager_max,
                           sizeof(node_eager_max)) != RMACOLL_SUCCESS) {
        snprintf(node_eager_max, sizeof(node_eager_max), "?");
    }
    snprintf(header, len,
             "%s# transports: intra_node %s%s, inter_node %s (built: %s)\n"
             "# device buffers across nodes: %s\n"
             "# signal words of device calls on one node: %s\n"
             "# relay: %s (buffer %llu B, %u slots; direct streams %s%s)\n"
             "# scheduler: %s%s%s (seed %llu)\n"
             "# max_task_bytes %llu, eager_max_bytes %s, node_eager_max_bytes %s, "
             "timeout_ms %llu, config %s\n",
             gpu, cfg->intra_node, auto_thr, cfg->inter_node,
             rmacoll_build_transports(), devpath,
             dsig ? "device memory" : "host control window",
             cfg->relay_enabled ? "on" : "off",
             (unsigned long long)cfg->relay_buffer_bytes, cfg->relay_slots,
             direct_min ? "from " : "off", direct_min ? direct_str : "",
             cfg->scheduler, cfg->scheduler_plugin[0] ? ", plugin " : "",
             cfg->scheduler_plugin, (unsigned long long)cfg->scheduler_seed,
             (unsigned long long)cfg->max_task_bytes, eager_max, node_eager_max,
             (unsigned long long)cfg->timeout_ms,
             o->config_path[0] ? o->config_path
             : getenv("RMACOLL_CONFIG") ? getenv("RMACOLL_CONFIG")
                                        : "defaults + environment");
}

/* The configuration's members of the JSON output. */
static void perf_rank_json(const rmacoll_config_t *cfg, char *json, size_t len)
{
    snprintf(json, len,
             "\"intra_node\": \"%s\", \"inter_node\": \"%s\", "
             "\"relay\": %s, \"relay_buffer_bytes\": %llu, "
             "\"relay_slots\": %u, \"scheduler\": \"%s\", "
             "\"max_task_bytes\": %llu, \"nvlink_kernel_threshold\": %llu",
             cfg->intra_node, cfg->inter_node,
             cfg->relay_enabled ? "true" : "false",
             (unsigned long long)cfg->relay_buffer_bytes, cfg->relay_slots,
             cfg->scheduler, (unsigned long long)cfg->max_task_bytes,
             (unsigned long long)cfg->nvlink_kernel_threshold);
}

/* The backend perfrun drives: rmacoll's calls, and the device, load and
 * baseline this rank set up. */
static void perf_rank_backend(const rmacoll_launch_env_t *env, perf_rmacoll_t *p,
                              const char *header, const char *json,
                              rmacoll_perf_backend_t *be)
{
    memset(be, 0, sizeof(*be));
    be->name = PERF_NAME;
    be->rank = p->rank;
    be->nranks = p->nranks;
    be->ctx = p;
    be->alltoallv = perf_a2av;
    be->barrier = perf_barrier;
    be->gather_f64 = perf_gather;
    be->header = header;
    be->json_config = json;
    be->launch = rmacoll_launch_kind_name(env->kind);
    be->coll_name = "rmacoll";
    be->allgather_f64 = perf_allgather;
    be->host_alloc = perf_host_alloc;
    be->host_free = perf_host_free;
    be->host_alloc_name = "rmacoll_mem_alloc";
#ifdef RMACOLL_PERF_HAVE_CUBLAS
    if (p->blas != NULL)
        be->load = &perf_gemm_loadops;
#endif
#ifdef RMACOLL_PERF_HAVE_CUDA
    if (p->stream != NULL) {
        be->dev = &perf_cuda_devops;
        be->describe = perf_cuda_describe;
    }
#endif
#ifdef RMACOLL_PERF_HAVE_NCCL
    if (p->nccl != NULL) {
        be->baseline_name = "nccl";
        be->baseline_alltoallv = perf_nccl_a2av;
    }
#endif
}

/* The communicator's counters at log level debug. */
static void perf_rank_stats(const perf_rmacoll_t *p, const char *devpath)
{
    rmacoll_comm_stats_t cs;

    memset(&cs, 0, sizeof(cs));
    cs.struct_size = sizeof(cs);
    if (rmacoll_comm_get_stats(p->comm, &cs) == RMACOLL_SUCCESS)
        printf("# rank %d stats: device path %s, %llu bytes staged through host "
               "memory, %llu bytes of device memory registered with the network, "
               "%llu staged / %llu registered device calls across nodes\n",
               p->rank, devpath, (unsigned long long)cs.staged_bytes,
               (unsigned long long)cs.device_registered_bytes,
               (unsigned long long)cs.device_calls_staged,
               (unsigned long long)cs.device_calls_hmem);
    if (rmacoll_comm_get_stats(p->comm, &cs) == RMACOLL_SUCCESS)
        printf("# rank %d stats: eager path: %llu bytes sent in metadata records, "
               "%llu bytes copied out of them; node eager path: %llu bytes sent in "
               "the node payload, %llu bytes copied out of node peers'\n", p->rank,
               (unsigned long long)cs.eager_bytes_sent,
               (unsigned long long)cs.eager_bytes_copied,
               (unsigned long long)cs.node_eager_bytes_sent,
               (unsigned long long)cs.node_eager_bytes_copied);
    if (rmacoll_comm_get_stats(p->comm, &cs) == RMACOLL_SUCCESS)
        printf("# rank %d stats: direct streams: relay.direct_min_bytes %llu in effect "
               "(0: none), %llu bytes of streams that went straight to other nodes\n",
               p->rank, (unsigned long long)cs.direct_min_bytes,
               (unsigned long long)cs.direct_bytes_sent);
}

/* Frees what the rank set up and destroys its communicator: rc, or 1 when
 * rc was 0 and the destroy failed. */
static int perf_rank_close(perf_rmacoll_t *p, int rc)
{
    rmacoll_status_t st;

#ifdef RMACOLL_PERF_HAVE_NCCL
    if (p->nccl != NULL) {
        if (p->stream != NULL)
            cudaStreamSynchronize((cudaStream_t)p->stream);
        ncclCommDestroy(p->nccl);
    }
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
    perf_gemm_teardown(p);
#endif
    free(p->counts);
    free(p->bar_send);
    free(p->bar_recv);
    st = rmacoll_comm_destroy(p->comm);
    if (st != RMACOLL_SUCCESS && rc == 0) {
        fprintf(stderr, PERF_NAME ": rank %d: destroy failed: %s\n", p->rank,
                rmacoll_status_name(st));
        rc = 1;
    }
#ifdef RMACOLL_PERF_HAVE_CUDA
    perf_cuda_teardown(p);
#endif
    return rc;
}

/* One rank: devices, configuration, communicator, then perfrun's rows. */
static int perf_rank(const rmacoll_perf_opts_t *o,
                     const rmacoll_launch_env_t *env)
{
    rmacoll_config_t cfg;
    perf_rmacoll_t p;
    rmacoll_perf_backend_t be;
    char header[4096], json[2048];
    const char *devpath = "none (one node)";
    int rc, dsig = 0, cfg_bad = 0;
    uint64_t direct_min = 0;

    if (o->dry_run)
        return perf_dry_run(env);
    memset(&p, 0, sizeof(p));
    rc = perf_rank_devices(o, env, &p);
    if (rc >= 0)
        return rc;
    rc = perf_rank_config(o, env, &cfg, &cfg_bad);
    if (rc >= 0)
        return rc;
    rc = perf_rank_comm(env, &cfg, cfg_bad, &p);
    if (rc != 0)
        return rc;
    rc = perf_rank_alloc(o, &p);
    if (rc == 0)
        rc = perf_rank_paths(o, &p, &devpath, &dsig, &direct_min);
    if (rc == 0) {
        perf_rank_header(o, &p, &cfg, devpath, dsig, direct_min, header,
                         sizeof(header));
        perf_rank_json(&cfg, json, sizeof(json));
        perf_rank_backend(env, &p, header, json, &be);
        rc = rmacoll_perf_run(o, &be);
        if (cfg.log_level >= RMACOLL_LOG_DEBUG)
            perf_rank_stats(&p, devpath);
    }
    return perf_rank_close(&p, rc);
}

/* ---- parent: spawn the ranks ---- */

/* One rank's exit code in words: the rmacoll status it failed with
 * (RMACOLL_PERF_EXIT_OF), the data check, a usage error, a signal. */
static void perf_code_name(int code, char *buf, size_t len)
{
    if (code == -1)
        snprintf(buf, len, "stopped by the launcher");
    else if (code == 0)
        snprintf(buf, len, "ok");
    else if (code > RMACOLL_PERF_EXIT_STATUS && code < RMACOLL_PERF_EXIT_STATUS + 28)
        snprintf(buf, len, "%s",
                 rmacoll_status_name((rmacoll_status_t)(code - RMACOLL_PERF_EXIT_STATUS)));
    else if (code == 2)
        snprintf(buf, len, "data check failed");
    else if (code == RMACOLL_PERF_EXIT_USAGE)
        snprintf(buf, len, "usage error (exit 64)");
    else if (code > 128)
        snprintf(buf, len, "signal %d (%s)", code - 128, strsignal(code - 128));
    else
        snprintf(buf, len, "exit %d", code);
}

/* "ranks 0-2 RMACOLL_ERR_MISMATCH, rank 3 ok": runs of equal codes. */
static void perf_rank_codes(const int *codes, int n, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int r = 0; r < n && off + 1 < len;) {
        int e = r;
        char what[96];

        while (e + 1 < n && codes[e + 1] == codes[r])
            e++;
        perf_code_name(codes[r], what, sizeof(what));
        if (e > r)
            off += (size_t)snprintf(buf + off, len - off, "%sranks %d-%d %s",
                                    off ? ", " : "", r, e, what);
        else
            off += (size_t)snprintf(buf + off, len - off, "%srank %d %s",
                                    off ? ", " : "", r, what);
        r = e + 1;
    }
}

/* Every usage error is found here, once, before any rank starts: the
 * matrix file, the node map (node_of[*nranks]), the configuration and the
 * transport and scheduler names. 0, or PERF_EXIT_USAGE with it said. */
static int perf_spawn_check(const rmacoll_perf_opts_t *o, int *node_of,
                            int *nranks)
{
    rmacoll_case_t *c = NULL;
    rmacoll_config_t cfg;
    char err[512] = "";
    int bad;
    rmacoll_status_t st;

    if (strncmp(o->dist, "matrix:", 7) == 0 &&
        rmacoll_case_load(o->dist + 7, &c, err, sizeof(err)) !=
            RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    bad = perf_node_map(o, c, node_of, nranks, err, sizeof(err));
    rmacoll_case_free(c);
    if (bad) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    cfg.struct_size = sizeof(cfg);
    perf_transport_env(o);
    st = rmacoll_config_load(o->config_path[0] ? o->config_path : NULL,
                             &cfg, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": config: %s (%s)\n", err,
                rmacoll_status_name(st));
        return PERF_EXIT_USAGE;
    }
    if (perf_apply_config(o, &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    return 0;
}

/* The exit status of a launch that failed with st (res: what the
 * launcher saw, codes: each rank's exit code or NULL), with the failure
 * said: each rank's own code (st, the launcher's, is ERR_PEER for any
 * failed rank: not what the rank said). */
static int perf_spawn_verdict(rmacoll_status_t st, const rmacoll_launch_result_t *res,
                              const int *codes, int nranks)
{
    char own[2048] = "not known";

    /* A rank's own code when it reported wrong data (2), else 1. Exit 2 is
     * rank 0's verdict over every rank's check (the rank that found the
     * wrong values named them above): not a failure of the launch. */
    if (res->first_status == 2 && res->nfailed == 1 && !res->timed_out && !res->killed) {
        return 2;   /* rank 0 said "data check failed" */
    }
    (void)st;
    if (codes != NULL) {
        perf_rank_codes(codes, nranks, own, sizeof(own));
    }
    /* a rank killed by a signal of its own (a crash, kill -9) is the likely
     * cause; otherwise the ranks' own messages above say which failed
     * first (the launcher reaps ranks that fail together in rank order) */
    if (res->signal_rank >= 0) {
        fprintf(stderr, PERF_NAME ": rank %d died by signal %d (%s); %d of %d rank(s) "
                "failed%s, %d stopped by the launcher; each rank's own code: %s\n",
                res->signal_rank, res->signal_num,
                strsignal(res->signal_num), res->nfailed, nranks,
                res->timed_out ? ", deadline passed" : "", res->killed, own);
    } else {
        fprintf(stderr, PERF_NAME ": %d of %d rank(s) failed%s, %d stopped by the "
                "launcher; each rank's own code: %s (the ranks' messages above name "
                "the first failure)\n", res->nfailed, nranks,
                res->timed_out ? ", deadline passed" : "", res->killed, own);
    }
    return 1;
}

static int perf_spawn(const rmacoll_perf_opts_t *o, int argc, char **argv)
{
    int node_of[RMACOLL_LAUNCH_MAX_RANKS];
    int nranks = 0, *codes, rc;
    rmacoll_unique_id_t id;
    char hex[2 * RMACOLL_UNIQUE_ID_BYTES + 1];
    rmacoll_launch_spec_t spec;
    rmacoll_launch_result_t res;
    rmacoll_status_t st;
    char **cargv;

    if (perf_spawn_check(o, node_of, &nranks) != 0)
        return PERF_EXIT_USAGE;
    st = rmacoll_get_unique_id(&id);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rmacoll_get_unique_id failed: %s\n",
                rmacoll_status_name(st));
        return 1;
    }
    rmacoll__unique_id_to_hex(&id, hex);

    /* The children run the same command line; --spawn is dropped by
     * nothing: RMACOLL_RANK takes precedence over every other variable. */
    cargv = calloc((size_t)argc + 1, sizeof(*cargv));
    if (cargv == NULL) {
        fprintf(stderr, PERF_NAME ": out of memory\n");
        return 1;
    }
    for (int i = 0; i < argc; i++)
        cargv[i] = argv[i];

    memset(&spec, 0, sizeof(spec));
    spec.nranks = nranks;
    spec.node_of_rank = node_of;
    spec.exe = NULL; /* /proc/self/exe */
    spec.argv = cargv;
    spec.id_hex = hex;
    spec.timeout_s = o->timeout_s;
    codes = calloc((size_t)nranks, sizeof(*codes));
    spec.rank_codes = codes;
    st = rmacoll_launch_spawn(&spec, &res);
    free(cargv);
    if (st == RMACOLL_SUCCESS) {
        free(codes);
        return 0;
    }
    rc = perf_spawn_verdict(st, &res, codes, nranks);
    free(codes);
    return rc;
}

int main(int argc, char **argv)
{
    rmacoll_perf_opts_t o;
    rmacoll_launch_env_t env;
    char err[512] = "";
    int pr;

    rmacoll_perf_opts_init(&o);
    pr = rmacoll_perf_opts_parse(argc, argv, &o, stdout, err, sizeof(err));
    if (pr == 1)
        return 0;
    if (pr < 0) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    if (rmacoll_launch_detect(&env, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    if (o.force_spawn && env.kind != RMACOLL_LAUNCH_SPAWNED)
        env.kind = RMACOLL_LAUNCH_NONE;
    if (env.kind == RMACOLL_LAUNCH_NONE)
        return perf_spawn(&o, argc, argv);
    if (env.kind != RMACOLL_LAUNCH_SPAWNED && o.topology_given) {
        /* Under a launcher, --ppn/--topology/--nodes make virtual nodes on
         * the launcher's ranks (RMACOLL_NODE_ID of this process), e.g.
         * mpirun -np 4 rmacoll-perf --ppn 2: two nodes of two ranks. */
        static int node_of[RMACOLL_LAUNCH_MAX_RANKS];
        int n = 0;
        char id[32];

        if (!o.np_given)
            o.np = env.nranks;
        if (perf_node_map(&o, NULL, node_of, &n, err, sizeof(err)) != 0 ||
            (n != env.nranks &&
             snprintf(err, sizeof(err), "the topology options give %d ranks "
                      "but %s started %d", n,
                      rmacoll_launch_kind_name(env.kind), env.nranks) > 0)) {
            if (env.rank == 0)
                fprintf(stderr, PERF_NAME ": %s\n", err);
            return PERF_EXIT_USAGE;
        }
        snprintf(id, sizeof(id), "%d", node_of[env.rank]);
        setenv(RMACOLL_LAUNCH_ENV_NODE, id, 1);
        env.node = node_of[env.rank];
    }
    return perf_rank(&o, &env);
}
