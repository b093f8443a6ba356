/*
 * perf_tool.h - what the pieces of rmacoll-perf share (tools/perf.c and
 * the files of tools/perf/; not installed, not used by other tools): the
 * exit code and name it prints, one rank's state (perf_rmacoll_t) and the
 * functions one piece calls in another. The CUDA, NCCL and cuBLAS parts
 * are there only when tools/extra.cmake found them (RMACOLL_PERF_HAVE_*).
 */
#ifndef RMACOLL_TOOLS_PERF_TOOL_H
#define RMACOLL_TOOLS_PERF_TOOL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "launch.h"
#include "perfrun.h"
#include "rmacoll.h"

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

/* One rank: its communicator, the scratch of the barrier and gather, and
 * the device, baseline and load it set up. */
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

/* hooks.c: the backend perfrun drives (rmacoll's calls, and the device,
 * load and baseline this rank set up). */
void perf_rank_backend(const rmacoll_launch_env_t *env, perf_rmacoll_t *p,
                       const char *header, const char *json,
                       rmacoll_perf_backend_t *be);

/* usage.c: option checks and the node map, shared by the spawner and the
 * ranks. */
void perf_transport_env(const rmacoll_perf_opts_t *o);
int perf_apply_config(const rmacoll_perf_opts_t *o, rmacoll_config_t *cfg,
                      char *err, size_t len);
int perf_node_map(const rmacoll_perf_opts_t *o, const rmacoll_case_t *c,
                  int *node_of, int *nranks, char *err, size_t len);

/* rank.c: one rank (a spawned child or a launcher's process). */
int perf_rank(const rmacoll_perf_opts_t *o, const rmacoll_launch_env_t *env);

#ifdef RMACOLL_PERF_HAVE_CUDA
/* cuda.c: --buffers cuda */
rmacoll_status_t perf_cuda(cudaError_t ce, const char *what, size_t bytes,
                           const perf_rmacoll_t *p, char *err, size_t errlen);
extern const rmacoll_perf_devops_t perf_cuda_devops;
void perf_cuda_describe(void *ctx, int *device, char *busid,
                        size_t busid_len, char *name, size_t name_len);
int perf_cuda_setup(perf_rmacoll_t *p, const rmacoll_launch_env_t *env);
void perf_cuda_teardown(perf_rmacoll_t *p);
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
/* gemm.c: --gemm */
extern const rmacoll_perf_loadops_t perf_gemm_loadops;
int perf_gemm_setup(perf_rmacoll_t *p, int n, int iters);
void perf_gemm_teardown(perf_rmacoll_t *p);
#endif
#ifdef RMACOLL_PERF_HAVE_NCCL
/* nccl.c: --baseline nccl */
rmacoll_status_t perf_nccl_a2av(void *ctx, const void *sendbuf,
                                const int64_t *sendcounts,
                                const int64_t *sdispls, void *recvbuf,
                                const int64_t *recvcounts,
                                const int64_t *rdispls,
                                rmacoll_datatype_t dtype, char *err,
                                size_t errlen);
int perf_nccl_setup(perf_rmacoll_t *p);
#endif

#endif /* RMACOLL_TOOLS_PERF_TOOL_H */
