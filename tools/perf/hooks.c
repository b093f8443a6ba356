/*
 * hooks.c - rmacoll-perf: rmacoll as the backend the benchmark loop
 * (tools/common/perfrun.h) drives: its AlltoAllV, the barrier, gather and
 * all-gather made of rmacoll calls, -R's buffers from rmacoll_mem_alloc,
 * and the table of hooks one rank hands perfrun.
 */
#include "perf_tool.h"

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

/* The backend perfrun drives: rmacoll's calls, and the device, load and
 * baseline this rank set up. */
void perf_rank_backend(const rmacoll_launch_env_t *env, perf_rmacoll_t *p,
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
