/*
 * nccl_oob.c - rmacoll_comm_create_from_nccl: an rmacoll_oob_t whose
 * allgather is an ncclAllGather of a device scratch buffer, so that an
 * rmacoll communicator can be made from an existing NCCL communicator
 * (see include/rmacoll_nccl.h). Compiled to nothing unless NCCL was found
 * (RMACOLL_HAVE_NCCL, cmake/nccl.cmake). Uses the CUDA runtime only; never
 * the driver library.
 */
#ifdef RMACOLL_HAVE_NCCL

#include "rmacoll_nccl.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

struct rmacoll_nccl_oob {
    ncclComm_t nccl;          /* borrowed */
    cudaStream_t stream;      /* the caller's, or own_stream */
    int own_stream;
    int device;               /* device of nccl */
    int rank, nranks;
    void *scratch;            /* device, scratch_bytes */
    size_t scratch_bytes;
    rmacoll__logger_t log;
};

/* Makes the oob's device current; *prev receives the caller's. */
static rmacoll_status_t nccl_oob_enter(rmacoll_nccl_oob_t *o, int *prev)
{
    cudaError_t ce = cudaGetDevice(prev);

    if (ce == cudaSuccess && *prev != o->device)
        ce = cudaSetDevice(o->device);
    if (ce != cudaSuccess) {
        rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "nccl oob: cannot select device %d: %s", o->device,
                     cudaGetErrorString(ce));
        return RMACOLL_ERR_CUDA;
    }
    return RMACOLL_SUCCESS;
}

static void nccl_oob_leave(rmacoll_nccl_oob_t *o, int prev)
{
    if (prev != o->device)
        cudaSetDevice(prev);
}

static rmacoll_status_t nccl_oob_cuda(rmacoll_nccl_oob_t *o, cudaError_t ce,
                                      const char *what, size_t bytes)
{
    if (ce == cudaSuccess)
        return RMACOLL_SUCCESS;
    rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "nccl oob: %s of %zu bytes failed on device %d: %s", what,
                 bytes, o->device, cudaGetErrorString(ce));
    return RMACOLL_ERR_CUDA;
}

/* allgather: bytes from every rank, rank r's at recv + r * bytes. In place
 * (send == recv + rank * bytes) is fine: send is copied to the device
 * before recv is written. bytes == 0 is a barrier (1 byte gathered). */
static rmacoll_status_t nccl_oob_allgather(void *ctx, const void *send,
                                           void *recv, size_t bytes)
{
    rmacoll_nccl_oob_t *o = ctx;
    size_t eff = bytes ? bytes : 1;
    size_t total;
    rmacoll_status_t st;
    ncclResult_t nr;
    char *slot;
    int prev = 0;

    if (bytes != 0 && (send == NULL || recv == NULL))
        return RMACOLL_ERR_NULL_BUFFER;
    if (eff > SIZE_MAX / (size_t)o->nranks)
        return RMACOLL_ERR_OVERFLOW;
    total = eff * (size_t)o->nranks;
    st = nccl_oob_enter(o, &prev);
    if (st != RMACOLL_SUCCESS)
        return st;
    if (total > o->scratch_bytes) {
        void *p = NULL;

        if (o->scratch != NULL)
            cudaFree(o->scratch);
        o->scratch = NULL;
        o->scratch_bytes = 0;
        st = nccl_oob_cuda(o, cudaMalloc(&p, total), "cudaMalloc", total);
        if (st != RMACOLL_SUCCESS)
            goto out;
        o->scratch = p;
        o->scratch_bytes = total;
    }
    slot = (char *)o->scratch + (size_t)o->rank * eff;
    if (bytes != 0)
        st = nccl_oob_cuda(o, cudaMemcpyAsync(slot, send, bytes,
                                              cudaMemcpyHostToDevice,
                                              o->stream),
                           "host to device copy", bytes);
    else
        st = nccl_oob_cuda(o, cudaMemsetAsync(slot, 0, 1, o->stream),
                           "memset", 1);
    if (st != RMACOLL_SUCCESS)
        goto out;
    /* In place: sendbuff == recvbuff + rank * count (NCCL's in-place rule). */
    nr = ncclAllGather(slot, o->scratch, eff, ncclUint8, o->nccl, o->stream);
    if (nr != ncclSuccess) {
        rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "nccl oob: ncclAllGather of %zu bytes over %d ranks "
                     "failed: %s (%s)", eff, o->nranks,
                     ncclGetErrorString(nr), ncclGetLastError(o->nccl));
        st = RMACOLL_ERR_BOOTSTRAP;
        goto out;
    }
    if (bytes != 0)
        st = nccl_oob_cuda(o, cudaMemcpyAsync(recv, o->scratch, total,
                                              cudaMemcpyDeviceToHost,
                                              o->stream),
                           "device to host copy", total);
    if (st == RMACOLL_SUCCESS)
        st = nccl_oob_cuda(o, cudaStreamSynchronize(o->stream),
                           "stream synchronize after allgather", total);
out:
    nccl_oob_leave(o, prev);
    return st;
}

static rmacoll_status_t nccl_oob_barrier(void *ctx)
{
    return nccl_oob_allgather(ctx, NULL, NULL, 0);
}

static void nccl_oob_free(rmacoll_nccl_oob_t *o)
{
    int prev = 0;

    if (o == NULL)
        return;
    if (nccl_oob_enter(o, &prev) == RMACOLL_SUCCESS) {
        if (o->scratch != NULL)
            cudaFree(o->scratch);
        if (o->own_stream)
            cudaStreamDestroy(o->stream);
        nccl_oob_leave(o, prev);
    }
    free(o);
}

rmacoll_status_t rmacoll_comm_create_from_nccl(ncclComm_t nccl,
                                               cudaStream_t stream,
                                               const rmacoll_config_t *config,
                                               rmacoll_comm_t **comm,
                                               rmacoll_nccl_oob_t **oob)
{
    rmacoll_nccl_oob_t *o;
    rmacoll_comm_params_t params;
    rmacoll_oob_t cb;
    rmacoll_status_t st;
    ncclResult_t nr;
    int prev = 0;

    if (comm != NULL)
        *comm = NULL;
    if (oob != NULL)
        *oob = NULL;
    if (nccl == NULL || comm == NULL || oob == NULL)
        return RMACOLL_ERR_INVALID_ARG;
    o = calloc(1, sizeof(*o));
    if (o == NULL)
        return RMACOLL_ERR_NO_MEMORY;
    o->nccl = nccl;
    o->stream = stream;
    rmacoll__logger_default(&o->log);
    if (config != NULL)
        o->log.level = config->log_level;

    nr = ncclCommUserRank(nccl, &o->rank);
    if (nr == ncclSuccess)
        nr = ncclCommCount(nccl, &o->nranks);
    if (nr == ncclSuccess)
        nr = ncclCommCuDevice(nccl, &o->device);
    if (nr != ncclSuccess) {
        rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "nccl oob: cannot query the nccl communicator: %s",
                     ncclGetErrorString(nr));
        free(o);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    o->log.rank = o->rank;
    if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks) {
        free(o);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (stream == NULL) {
        st = nccl_oob_enter(o, &prev);
        if (st != RMACOLL_SUCCESS) {
            free(o);
            return st;
        }
        st = nccl_oob_cuda(o, cudaStreamCreateWithFlags(&o->stream,
                                                        cudaStreamNonBlocking),
                           "stream create", 0);
        nccl_oob_leave(o, prev);
        if (st != RMACOLL_SUCCESS) {
            free(o);
            return st;
        }
        o->own_stream = 1;
    }

    cb.allgather = nccl_oob_allgather;
    cb.barrier = nccl_oob_barrier;
    cb.ctx = o;
    memset(&params, 0, sizeof(params));
    params.struct_size = sizeof(params);
    params.rank = o->rank;
    params.nranks = o->nranks;
    params.oob = &cb;             /* copied by the core; cb.ctx lives on */
    params.config = config;
    params.node_key = NULL;
    st = rmacoll_comm_create(&params, comm);
    if (st != RMACOLL_SUCCESS) {
        *comm = NULL;
        nccl_oob_free(o);
        return st;
    }
    *oob = o;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_comm_destroy_nccl(rmacoll_comm_t *comm,
                                           rmacoll_nccl_oob_t *oob)
{
    rmacoll_status_t st = rmacoll_comm_destroy(comm);

    nccl_oob_free(oob);
    return st;
}

#else
/* Without NCCL this translation unit is empty (ISO C wants a declaration). */
typedef int rmacoll__nccl_oob_unused_t;
#endif /* RMACOLL_HAVE_NCCL */
