/*
 * nccl_oob.c - rmacoll_comm_create_from_nccl: an rmacoll_oob_t whose
 * allgather is an ncclAllGather of a device scratch buffer, so that an
 * rmacoll communicator can be made from an existing NCCL communicator
 * (see include/rmacoll_nccl.h). Compiled to nothing unless NCCL was found
 * (RMACOLL_HAVE_NCCL, cmake/nccl.cmake). Uses the CUDA runtime only; never
 * the driver library.
 *
 * libnccl is not linked: the six NCCL functions used here are resolved with
 * dlopen/dlsym on the first rmacoll_comm_create_from_nccl (as NCCL itself
 * loads libibverbs and its net plugins), from RMACOLL_NCCL_LIBRARY when set,
 * else libnccl.so.2. The caller already has an ncclComm_t, so libnccl is in
 * the process: dlopen finds that copy. librmacoll.so thus does not NEED
 * libnccl and users without NCCL can load it.
 */
#ifdef RMACOLL_HAVE_NCCL

#include "rmacoll_nccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

/* The NCCL functions of this file, resolved at run time. */
typedef struct nccl_fns {
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*user_rank)(const ncclComm_t, int *);
    ncclResult_t (*count)(const ncclComm_t, int *);
    ncclResult_t (*cu_device)(const ncclComm_t, int *);
    const char *(*error_string)(ncclResult_t);
    const char *(*last_error)(ncclComm_t);
} nccl_fns_t;

static nccl_fns_t nccl_fn;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static int nccl_loaded;          /* 1 when every function was found */
static char nccl_load_err[256];

static void *nccl_sym(void *h, const char *name)
{
    void *f = dlsym(h, name);

    if (f == NULL && nccl_load_err[0] == '\0')
        snprintf(nccl_load_err, sizeof(nccl_load_err),
                 "%s not found in libnccl: %s", name, dlerror());
    return f;
}

static void nccl_load(void)
{
    const char *path = getenv("RMACOLL_NCCL_LIBRARY");
    void *h;

    if (path == NULL || *path == '\0')
        path = "libnccl.so.2";
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL && strcmp(path, "libnccl.so.2") == 0)
        h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(nccl_load_err, sizeof(nccl_load_err), "cannot load %s: %s",
                 path, dlerror());
        return;
    }
    /* dlsym returns void *; POSIX guarantees the conversion to a function
     * pointer, memcpy keeps ISO C quiet about it. */
#define NCCL_LOAD(field, name)                                                \
    do {                                                                      \
        void *f_ = nccl_sym(h, name);                                         \
        memcpy(&nccl_fn.field, &f_, sizeof(f_));                              \
    } while (0)
    NCCL_LOAD(all_gather, "ncclAllGather");
    NCCL_LOAD(user_rank, "ncclCommUserRank");
    NCCL_LOAD(count, "ncclCommCount");
    NCCL_LOAD(cu_device, "ncclCommCuDevice");
    NCCL_LOAD(error_string, "ncclGetErrorString");
    NCCL_LOAD(last_error, "ncclGetLastError");
#undef NCCL_LOAD
    nccl_loaded = nccl_load_err[0] == '\0';
    /* h stays open for the life of the process (NCCL cannot be unloaded
     * under a live ncclComm_t anyway). */
}

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
    nr = nccl_fn.all_gather(slot, o->scratch, eff, ncclUint8, o->nccl, o->stream);
    if (nr != ncclSuccess) {
        rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "nccl oob: ncclAllGather of %zu bytes over %d ranks "
                     "failed: %s (%s)", eff, o->nranks,
                     nccl_fn.error_string(nr), nccl_fn.last_error(o->nccl));
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

/* Long because: one sequence of fallible steps (arguments, the NCCL
 * library's symbols, the scratch buffers, the out-of-band calls, the
 * communicator), each failing with its own cleanup and message. */
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
    pthread_once(&nccl_once, nccl_load);
    if (!nccl_loaded) {
        rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "nccl oob: %s (set RMACOLL_NCCL_LIBRARY to the libnccl "
                     "of the process)", nccl_load_err);
        free(o);
        return RMACOLL_ERR_BOOTSTRAP;
    }

    nr = nccl_fn.user_rank(nccl, &o->rank);
    if (nr == ncclSuccess)
        nr = nccl_fn.count(nccl, &o->nranks);
    if (nr == ncclSuccess)
        nr = nccl_fn.cu_device(nccl, &o->device);
    if (nr != ncclSuccess) {
        rmacoll__log(&o->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "nccl oob: cannot query the nccl communicator: %s",
                     nccl_fn.error_string(nr));
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
