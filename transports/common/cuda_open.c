/*
 * cuda_open.c - opening and closing a transport's GPU part
 * (rmacoll__cu_open / rmacoll__cu_close of cuda_common.h): the driver entry
 * points and the device's stream memory operation attributes, the node's
 * signal windows registered for the GPU (Mapped | Portable) with each
 * rank's device address of its words, the event, and the own stream of
 * host-driven puts (made on first use).
 */
#define _GNU_SOURCE

#include "transports/common/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Signal words of rank p mapped in this process, and their count. */
static volatile uint64_t *cu_words(const rmacoll__cu_t *cu, int p, uint32_t *n)
{
    const rmacoll_transport_env_t *env = cu->env;

    if (p == env->rank) {
        *n = env->nsignals;
        return env->signals;
    }
    *n = env->peer_nsignals != NULL ? env->peer_nsignals[p] : env->nsignals;
    if (!env->peers[p] || env->peer_signals == NULL) {
        return NULL;
    }
    return (volatile uint64_t *)env->peer_signals[p];
}

static int cu_cmp_reg(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const rmacoll__cu_reg_t *)a)->base;
    uintptr_t y = (uintptr_t)((const rmacoll__cu_reg_t *)b)->base;

    return x < y ? -1 : x > y;
}

/*
 * Registers the page ranges holding every mapped signal array (merged:
 * windows may share pages, and cudaHostRegister refuses overlaps; another
 * transport may have registered them already: then they are not ours) and
 * computes each rank's device address of its words.
 */
static rmacoll_status_t cu_register_windows(rmacoll__cu_t *cu)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    int nranks = cu->env->nranks;
    int n = 0;

    cu->regs = calloc((size_t)nranks, sizeof(*cu->regs));
    if (cu->regs == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int p = 0; p < nranks; p++) {
        uint32_t nw;
        volatile uint64_t *w = cu_words(cu, p, &nw);

        if (w != NULL && nw > 0) {
            uintptr_t lo = (uintptr_t)w & ~(pg - 1);
            uintptr_t hi = ((uintptr_t)(w + nw) + pg - 1) & ~(pg - 1);

            cu->regs[n].base = (void *)lo;
            cu->regs[n++].bytes = hi - lo;
        }
    }
    qsort(cu->regs, (size_t)n, sizeof(*cu->regs), cu_cmp_reg);
    cu->nregs = 0;
    for (int i = 0; i < n; i++) {
        rmacoll__cu_reg_t *last = cu->nregs > 0 ? &cu->regs[cu->nregs - 1] : NULL;
        uintptr_t b = (uintptr_t)cu->regs[i].base;
        uintptr_t e = b + cu->regs[i].bytes;

        if (last != NULL && b <= (uintptr_t)last->base + last->bytes) {
            uintptr_t le = (uintptr_t)last->base + last->bytes;
            last->bytes = (e > le ? e : le) - (uintptr_t)last->base;
        } else {
            cu->regs[cu->nregs++] = cu->regs[i];
        }
    }
    for (int i = 0; i < cu->nregs; i++) {
        cudaError_t e = cudaHostRegister(cu->regs[i].base, cu->regs[i].bytes,
                                         cudaHostRegisterMapped | cudaHostRegisterPortable);
        if (e == cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            cu->regs[i].owned = 0;
        } else if (e != cudaSuccess) {
            char what[128];

            snprintf(what, sizeof(what), "cudaHostRegister of %zu bytes of signal words "
                     "at %p", cu->regs[i].bytes, cu->regs[i].base);
            cu->nregs = i;
            return rmacoll__cu_rt_error(cu, e, -1, what);
        } else {
            cu->regs[i].owned = 1;
        }
    }
    for (int p = 0; p < nranks; p++) {
        uint32_t nw;
        volatile uint64_t *w = cu_words(cu, p, &nw);
        void *d = NULL;
        cudaError_t e;

        cu->sig_n[p] = nw;
        if (w == NULL || nw == 0) {
            continue;
        }
        e = cudaHostGetDevicePointer(&d, (void *)(uintptr_t)w, 0);
        if (e != cudaSuccess) {
            return rmacoll__cu_rt_error(cu, e, p, "cudaHostGetDevicePointer of the "
                                        "signal words");
        }
        cu->sig_dev[p] = (CUdeviceptr)(uintptr_t)d;
        rmacoll__cu_trace(cu, "hwords peer=%d base=0x%llx n=%u", p,
                          (unsigned long long)cu->sig_dev[p], nw);
    }
    return RMACOLL_SUCCESS;
}

static void cu_free(rmacoll__cu_t *cu)
{
    for (size_t i = 0; i < cu->nimports; i++) {
        cudaError_t e;

        if (cu->imports[i].same_process) {
            continue; /* the exporter's own allocation, used directly */
        }
        e = cudaIpcCloseMemHandle(cu->imports[i].mapped);

        if (e != cudaSuccess) {
            rmacoll__cu_rt_error(cu, e, cu->imports[i].peer, "cudaIpcCloseMemHandle");
        }
    }
    for (int i = 0; i < cu->nregs; i++) {
        if (cu->regs[i].owned) {
            cudaError_t e = cudaHostUnregister(cu->regs[i].base);

            if (e != cudaSuccess) {
                rmacoll__cu_rt_error(cu, e, -1, "cudaHostUnregister of signal words");
            }
        }
    }
    if (cu->event != NULL) {
        cudaEventDestroy(cu->event);
    }
    if (cu->stream != NULL) {
        cudaStreamDestroy(cu->stream);
    }
    free(cu->imports);
    free(cu->regs);
    free(cu->sig_dev);
    free(cu->sig_n);
    free(cu->dsig_dev);
    free(cu->dsig_n);
    free(cu);
}

/* A new cu with its per-rank arrays; NULL without memory. */
static rmacoll__cu_t *cu_new(const rmacoll_transport_env_t *env, const char *name,
                             uint32_t blob_magic)
{
    rmacoll__cu_t *cu = calloc(1, sizeof(*cu));

    if (cu == NULL) {
        return NULL;
    }
    cu->env = env;
    cu->name = name;
    cu->blob_magic = blob_magic;
    cu->sig_dev = calloc((size_t)env->nranks, sizeof(*cu->sig_dev));
    cu->sig_n = calloc((size_t)env->nranks, sizeof(*cu->sig_n));
    cu->dsig_dev = calloc((size_t)env->nranks, sizeof(*cu->dsig_dev));
    cu->dsig_n = calloc((size_t)env->nranks, sizeof(*cu->dsig_n));
    if (cu->sig_dev == NULL || cu->sig_n == NULL || cu->dsig_dev == NULL ||
        cu->dsig_n == NULL) {
        cu_free(cu);
        return NULL;
    }
    return cu;
}

/* The driver entry points of cu, and the device's stream memory operation
 * attributes: RMACOLL_ERR_CUDA with the reason in why when the driver or
 * the device lacks what the transports need. */
static rmacoll_status_t cu_load_driver(rmacoll__cu_t *cu, char *why, size_t len)
{
    int v64 = 0, hostptr = 0;
    void *fn;
    PFN_cuDeviceGet_v2000 dev_get = NULL;
    PFN_cuDeviceGetAttribute_v2000 dev_attr = NULL;
    CUdevice cudev;

    if (rmacoll__cu_entry(&fn, "cuStreamWriteValue64", CU_DRIVER_VERSION) == 0) {
        memcpy(&cu->write64, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuStreamWaitValue64", CU_DRIVER_VERSION) == 0) {
        memcpy(&cu->wait64, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuStreamBatchMemOp", CU_DRIVER_VERSION) == 0) {
        memcpy(&cu->batch, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuMemGetAddressRange", 3020) == 0) {
        memcpy(&cu->get_range, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuGetErrorString", 6000) == 0) {
        memcpy(&cu->error_string, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuDeviceGet", 2000) == 0) {
        memcpy(&dev_get, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuDeviceGetAttribute", 2000) == 0) {
        memcpy(&dev_attr, &fn, sizeof(fn));
    }
    if (cu->write64 == NULL || cu->wait64 == NULL || cu->batch == NULL ||
        cu->get_range == NULL || dev_get == NULL || dev_attr == NULL) {
        snprintf(why, len, "device %d: the driver lacks stream memory operations or "
                 "cuMemGetAddressRange (entry points of CUDA 12.0 not found; driver too "
                 "old?)", cu->device);
        return RMACOLL_ERR_CUDA;
    }
    if (dev_get(&cudev, cu->device) != CUDA_SUCCESS ||
        dev_attr(&v64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, cudev) !=
            CUDA_SUCCESS ||
        dev_attr(&hostptr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
                 cudev) != CUDA_SUCCESS) {
        snprintf(why, len, "device %d: cannot query its stream memory operation "
                 "attributes", cu->device);
        return RMACOLL_ERR_CUDA;
    }
    if (!v64) {
        snprintf(why, len, "device %d lacks CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS "
                 "(needed for signals in host control windows)", cu->device);
        return RMACOLL_ERR_CUDA;
    }
    /* Memory operations take the device address of registered host memory
     * from cudaHostGetDevicePointer, so host pointers need not be valid on
     * the device; the attribute is only reported. */
    CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: device %d: 64-bit stream memory operations yes, "
           "host pointers of registered memory usable on the device: %s", cu->name,
           cu->device, hostptr ? "yes" : "no");
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__cu_open(const rmacoll_transport_env_t *env, const char *name,
                                  uint32_t blob_magic, rmacoll__cu_t **out, char *why,
                                  size_t len)
{
    rmacoll__cu_t *cu;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    rmacoll_status_t st;

    *out = NULL;
    if (e != cudaSuccess || ndev <= 0) {
        (void)cudaGetLastError();
        snprintf(why, len, "no usable GPU (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return RMACOLL_ERR_NO_DEVICE;
    }
    cu = cu_new(env, name, blob_magic);
    if (cu == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    e = cudaGetDevice(&cu->device);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaGetDevice failed: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        cu_free(cu);
        return RMACOLL_ERR_CUDA;
    }
    st = cu_load_driver(cu, why, len);
    if (st != RMACOLL_SUCCESS) {
        cu_free(cu);
        return st;
    }
    st = cu_register_windows(cu);
    if (st != RMACOLL_SUCCESS) {
        snprintf(why, len, "device %d: cannot map the signal words for the GPU "
                 "(cudaHostRegister; cause logged above)", cu->device);
        cu_free(cu);
        return st == RMACOLL_ERR_NO_MEMORY ? st : RMACOLL_ERR_CUDA;
    }
    /* the own stream is made on first use (rmacoll__cu_own_stream): ranks
     * as threads of one process each add a stream to the context, and
     * streams beyond CUDA_DEVICE_MAX_CONNECTIONS share hardware queues,
     * where a stream wait blocks the other streams queued behind it */
    e = cudaEventCreateWithFlags(&cu->event, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        rmacoll__cu_rt_error(cu, e, -1, "creating the transport's event");
        snprintf(why, len, "device %d: cannot create an event", cu->device);
        cu_free(cu);
        return RMACOLL_ERR_CUDA;
    }
    *out = cu;
    return RMACOLL_SUCCESS;
}

void rmacoll__cu_close(rmacoll__cu_t *cu)
{
    if (cu != NULL) {
        if (cu->stream != NULL) {
            cudaStreamSynchronize(cu->stream);
        }
        cu_free(cu);
    }
}

rmacoll_status_t rmacoll__cu_own_stream(rmacoll__cu_t *cu, cudaStream_t *s)
{
    if (cu->stream == NULL) {
        cudaError_t e = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);

        if (e != cudaSuccess) {
            cu->stream = NULL;
            return rmacoll__cu_rt_error(cu, e, -1, "creating the transport's stream");
        }
    }
    *s = cu->stream;
    return RMACOLL_SUCCESS;
}
