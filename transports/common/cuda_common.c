/*
 * cuda_common.c - CUDA helpers shared by transports (cuda_common.h).
 */
#define _GNU_SOURCE

#include "transports/common/cuda_common.h"
#include "transports/common/tlog.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CU_DRIVER_VERSION 12000u /* ABI of the stream memory operation entry points */

#define CU_LOG(cu_, lvl, ...) RMACOLL__TLOG((cu_)->env, lvl, __VA_ARGS__)

static int cu_trace_on;  /* 1: stderr, 2: the in-memory ring */
static pthread_once_t cu_trace_once = PTHREAD_ONCE_INIT;

static void cu_trace_read(void)
{
    const char *v = getenv("RMACOLL_TRACE_STREAM");

    cu_trace_on = v == NULL || v[0] == '\0' || strcmp(v, "0") == 0 ? 0
                  : strcmp(v, "ring") == 0                       ? 2
                                                                 : 1;
}

int rmacoll__cu_tracing(void)
{
    pthread_once(&cu_trace_once, cu_trace_read);
    return cu_trace_on;
}

/* The last operations traced (or, without RMACOLL_TRACE_STREAM, that would
 * have been): a ring shared by the process's ranks, for
 * rmacoll__cu_ring_dump. A slot is claimed by one fetch-add; a slot being
 * rewritten while it is dumped may print torn, which a post-mortem dump
 * accepts. */
#define CU_RING_SLOTS 2048u
#define CU_RING_LINE 176
static char cu_ring[CU_RING_SLOTS][CU_RING_LINE];
static _Atomic unsigned long cu_ring_next;

void rmacoll__cu_ring_dump(FILE *out)
{
    unsigned long end = atomic_load(&cu_ring_next);
    unsigned long begin = end > CU_RING_SLOTS ? end - CU_RING_SLOTS : 0;

    fprintf(out, "rmacoll-ring: the last %lu of %lu stream operations of this process, "
            "oldest first\n", end - begin, end);
    for (unsigned long k = begin; k < end; k++) {
        fprintf(out, "%.*s\n", CU_RING_LINE, cu_ring[k % CU_RING_SLOTS]);
    }
    fflush(out);
}

void rmacoll__cu_trace(const rmacoll__cu_t *cu, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    if (!rmacoll__cu_tracing()) {
        return;
    }
    if (cu_trace_on == 2) {
        /* kept in memory only: formatting is cheap next to a write(2),
         * which hid the hang it is meant to show (docs/gpu.md) */
        char *slot = cu_ring[atomic_fetch_add(&cu_ring_next, 1) % CU_RING_SLOTS];
        n = snprintf(slot, CU_RING_LINE, "rmacoll-trace: %s r=%d ", cu->name, cu->env->rank);
        if (n > 0 && n < CU_RING_LINE) {
            va_start(ap, fmt);
            (void)vsnprintf(slot + n, (size_t)(CU_RING_LINE - n), fmt, ap);
            va_end(ap);
        }
        return;
    }
    n = snprintf(line, sizeof(line), "rmacoll-trace: %s r=%d ", cu->name, cu->env->rank);
    if (n < 0 || (size_t)n >= sizeof(line)) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    if (write(2, line, (size_t)n) < 0) {
        /* a trace line lost: nothing to do */
    }
}

_Static_assert(sizeof(rmacoll__cu_blob_t) == RMACOLL_EXPORT_BYTES,
               "cuda export blob must fill RMACOLL_EXPORT_BYTES");
_Static_assert(sizeof(cudaIpcMemHandle_t) == 64, "IPC handle size");

rmacoll_status_t rmacoll__cu_rt_error(rmacoll__cu_t *cu, cudaError_t e, int peer,
                                      const char *what)
{
    (void)cudaGetLastError(); /* clear a non-sticky error */
    if (peer >= 0) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: cuda: %s (peer %d) failed: %s (%s)", cu->name,
               what, peer, cudaGetErrorString(e), cudaGetErrorName(e));
    } else {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: cuda: %s failed: %s (%s)", cu->name, what,
               cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return RMACOLL_ERR_CUDA;
}

rmacoll_status_t rmacoll__cu_drv_error(rmacoll__cu_t *cu, CUresult r, int peer,
                                       const char *what)
{
    const char *s = NULL;

    if (cu->error_string != NULL) {
        cu->error_string(r, &s);
    }
    CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: cuda driver: %s (peer %d) failed: %s "
           "(CUresult %d)", cu->name, what, peer, s != NULL ? s : "unknown error", (int)r);
    return RMACOLL_ERR_CUDA;
}

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

rmacoll_status_t rmacoll__cu_open(const rmacoll_transport_env_t *env, const char *name,
                                  uint32_t blob_magic, rmacoll__cu_t **out, char *why,
                                  size_t len)
{
    rmacoll__cu_t *cu;
    int ndev = 0, v64 = 0, hostptr = 0;
    void *fn;
    PFN_cuDeviceGet_v2000 dev_get = NULL;
    PFN_cuDeviceGetAttribute_v2000 dev_attr = NULL;
    CUdevice cudev;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    rmacoll_status_t st;

    *out = NULL;
    if (e != cudaSuccess || ndev <= 0) {
        (void)cudaGetLastError();
        snprintf(why, len, "no usable GPU (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return RMACOLL_ERR_NO_DEVICE;
    }
    cu = calloc(1, sizeof(*cu));
    if (cu == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
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
        return RMACOLL_ERR_NO_MEMORY;
    }
    e = cudaGetDevice(&cu->device);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaGetDevice failed: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        cu_free(cu);
        return RMACOLL_ERR_CUDA;
    }
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
        cu_free(cu);
        return RMACOLL_ERR_CUDA;
    }
    if (dev_get(&cudev, cu->device) != CUDA_SUCCESS ||
        dev_attr(&v64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, cudev) !=
            CUDA_SUCCESS ||
        dev_attr(&hostptr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
                 cudev) != CUDA_SUCCESS) {
        snprintf(why, len, "device %d: cannot query its stream memory operation "
                 "attributes", cu->device);
        cu_free(cu);
        return RMACOLL_ERR_CUDA;
    }
    if (!v64) {
        snprintf(why, len, "device %d lacks CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS "
                 "(needed for signals in host control windows)", cu->device);
        cu_free(cu);
        return RMACOLL_ERR_CUDA;
    }
    /* Memory operations take the device address of registered host memory
     * from cudaHostGetDevicePointer, so host pointers need not be valid on
     * the device; the attribute is only reported. */
    CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: device %d: 64-bit stream memory operations yes, "
           "host pointers of registered memory usable on the device: %s", name,
           cu->device, hostptr ? "yes" : "no");
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

rmacoll_status_t rmacoll__cu_device_range(rmacoll__cu_t *cu, void *addr, size_t bytes,
                                          CUdeviceptr *base, size_t *size)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, addr);
    CUresult r;

    if (e != cudaSuccess) {
        return rmacoll__cu_rt_error(cu, e, -1, "cudaPointerGetAttributes");
    }
    if (a.type != cudaMemoryTypeDevice) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: %zu bytes at %p are not device memory "
               "(cudaMemoryType %d): only cudaMalloc'd buffers can be mapped by node "
               "peers", cu->name, bytes, addr, (int)a.type);
        return RMACOLL_ERR_INVALID_ARG;
    }
    r = cu->get_range(base, size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) {
        return rmacoll__cu_drv_error(cu, r, -1, "cuMemGetAddressRange");
    }
    if ((uint64_t)(uintptr_t)addr + bytes > (uint64_t)*base + *size) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: %zu bytes at %p run past their allocation "
               "(%zu bytes at 0x%llx)", cu->name, bytes, addr, *size,
               (unsigned long long)*base);
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__cu_mem_register(rmacoll__cu_t *cu, void *addr, size_t bytes,
                                          rmacoll_rkey_t *rkey)
{
    CUdeviceptr base;
    size_t size;

    if (bytes > 0) {
        rmacoll_status_t st = rmacoll__cu_device_range(cu, addr, bytes, &base, &size);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    if (rkey != NULL) {
        memset(rkey, 0, sizeof(*rkey));
        rkey->addr = (uint64_t)(uintptr_t)addr;
        rkey->bytes = (uint64_t)bytes;
    }
    return RMACOLL_SUCCESS;
}

/* Export and import make CUDA calls on the host (pointer attributes, IPC
 * handles, peer access) that a stream capture in the global or
 * thread-local mode may count as unsafe; like NCCL, they run in the
 * relaxed mode (cudaThreadExchangeStreamCaptureMode) and restore it. */
static enum cudaStreamCaptureMode cu_relax(void)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;

    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
        (void)cudaGetLastError();
        return cudaStreamCaptureModeRelaxed;
    }
    return m;
}

static void cu_restore(enum cudaStreamCaptureMode m)
{
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
        (void)cudaGetLastError();
    }
}

static rmacoll_status_t cu_export(rmacoll__cu_t *cu, void *addr, size_t bytes, void *blob)
{
    rmacoll__cu_blob_t b;
    cudaIpcMemHandle_t h;
    CUdeviceptr base;
    size_t size;
    cudaError_t e;
    rmacoll_status_t st = rmacoll__cu_device_range(cu, addr, bytes, &base, &size);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
        char what[160];

        snprintf(what, sizeof(what), "cudaIpcGetMemHandle of the %zu-byte allocation at "
                 "0x%llx (cuMem/VMM and managed allocations cannot be exported)", size,
                 (unsigned long long)base);
        return rmacoll__cu_rt_error(cu, e, -1, what);
    }
    memset(&b, 0, sizeof(b));
    b.magic = cu->blob_magic;
    b.rank = (uint32_t)cu->env->rank;
    b.base = (uint64_t)base;
    b.offset = (uint64_t)(uintptr_t)addr - (uint64_t)base;
    b.pid = (uint32_t)getpid();
    b.device = (int32_t)cu->device;
    memcpy(b.handle, &h, sizeof(b.handle));
    memcpy(blob, &b, sizeof(b));
    return RMACOLL_SUCCESS;
}

/*
 * 1 when the blob was exported by this process (ranks as threads): its pid
 * is ours, and the handle of the allocation at its base, taken here, is the
 * blob's (so a pid reused in another pid namespace cannot fool it). Then
 * peer access to the exporter's device is enabled when it is not ours.
 * 0: another process (IPC). -1: a CUDA error (logged).
 */
static int cu_same_process(rmacoll__cu_t *cu, const rmacoll__cu_blob_t *b)
{
    struct cudaPointerAttributes a;
    cudaIpcMemHandle_t mine;
    cudaError_t e;

    if (b->pid != (uint32_t)getpid()) {
        return 0;
    }
    e = cudaPointerGetAttributes(&a, (void *)(uintptr_t)b->base);
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice) {
        (void)cudaGetLastError();
        return 0;
    }
    e = cudaIpcGetMemHandle(&mine, (void *)(uintptr_t)b->base);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (memcmp(&mine, b->handle, sizeof(mine)) != 0) {
        return 0;
    }
    if (a.device != cu->device) {
        int can = 0;

        e = cudaDeviceCanAccessPeer(&can, cu->device, a.device);
        if (e != cudaSuccess) {
            rmacoll__cu_rt_error(cu, e, (int)b->rank, "cudaDeviceCanAccessPeer");
            return -1;
        }
        if (!can) {
            CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: device %d cannot access device %d (no "
                   "peer access between them): rank %u's buffer on it is unreachable",
                   cu->name, cu->device, a.device, b->rank);
            return -1;
        }
        e = cudaDeviceEnablePeerAccess(a.device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();
        } else if (e != cudaSuccess) {
            rmacoll__cu_rt_error(cu, e, (int)b->rank, "cudaDeviceEnablePeerAccess");
            return -1;
        }
    }
    CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: rank %u's buffer at 0x%llx is in this process "
           "(device %d): used directly, no IPC mapping", cu->name, b->rank,
           (unsigned long long)b->base, a.device);
    return 1;
}

rmacoll_status_t rmacoll__cu_export(rmacoll__cu_t *cu, void *addr, size_t bytes, void *blob)
{
    enum cudaStreamCaptureMode m = cu_relax();
    rmacoll_status_t st = cu_export(cu, addr, bytes, blob);

    cu_restore(m);
    return st;
}

static rmacoll_status_t cu_import(rmacoll__cu_t *cu, int peer, const void *blob,
                                  uint64_t *addr);

rmacoll_status_t rmacoll__cu_import(rmacoll__cu_t *cu, int peer, const void *blob,
                                    uint64_t *addr)
{
    enum cudaStreamCaptureMode m = cu_relax();
    rmacoll_status_t st = cu_import(cu, peer, blob, addr);

    cu_restore(m);
    return st;
}

/* Closes and drops the cached IPC mappings of peer's allocations at
 * exporter base `base` (all of that peer's with every_one). */
static void cu_close_stale(rmacoll__cu_t *cu, int peer, uint64_t base, int every_one)
{
    size_t k = 0;

    for (size_t i = 0; i < cu->nimports; i++) {
        rmacoll__cu_import_t *m = &cu->imports[i];

        if (m->peer == peer && !m->same_process && !m->keep &&
            (every_one || m->base == base)) {
            cudaError_t e = cudaIpcCloseMemHandle(m->mapped);
            CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: closed the IPC mapping of peer %d's "
                   "allocation at 0x%llx (%s)", cu->name, peer, (unsigned long long)m->base,
                   every_one ? "a new allocation overlaps one of them" : "reallocated");
            if (e != cudaSuccess) {
                rmacoll__cu_rt_error(cu, e, peer, "cudaIpcCloseMemHandle of a stale mapping");
            }
            continue;
        }
        cu->imports[k++] = *m;
    }
    cu->nimports = k;
}

static rmacoll_status_t cu_import(rmacoll__cu_t *cu, int peer, const void *blob,
                                  uint64_t *addr)
{
    rmacoll__cu_blob_t b;
    cudaIpcMemHandle_t h;
    void *mapped = NULL;
    cudaError_t e;
    int same;

    memcpy(&b, blob, sizeof(b));
    if (b.magic != cu->blob_magic || b.rank != (uint32_t)peer) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: export blob of peer %d is not a %s export of "
               "that peer (magic 0x%x, rank %u)", cu->name, peer, cu->name, b.magic,
               b.rank);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (peer == cu->env->rank) {
        *addr = b.base + b.offset; /* own memory: no mapping */
        return RMACOLL_SUCCESS;
    }
    for (size_t i = 0; i < cu->nimports; i++) {
        const rmacoll__cu_import_t *m = &cu->imports[i];

        if (memcmp(m->handle, b.handle, sizeof(b.handle)) == 0) {
            /* one handle may stand for several allocations: cudaMalloc
             * sub-allocates small ones from a larger block, and CUDA IPC
             * shares the whole block (CUDA C++ Programming Guide,
             * "Interprocess Communication"); the mapping covers the block,
             * so the address is the cached one moved by the difference of
             * the exporter's bases (0 for the allocation cached) */
            *addr = (uint64_t)(uintptr_t)m->mapped + (b.base - m->base) + b.offset;
            if (m->base != b.base) {
                CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: rank %d's allocation at 0x%llx has the "
                       "IPC handle of its allocation at 0x%llx (one block): mapped at "
                       "0x%llx", cu->name, peer, (unsigned long long)b.base,
                       (unsigned long long)m->base, (unsigned long long)*addr);
            }
            rmacoll__cu_trace(cu, "import peer=%d base=0x%llx off=%llu same=%d hit=%zu "
                              "cached_base=0x%llx addr=0x%llx", peer,
                              (unsigned long long)b.base, (unsigned long long)b.offset,
                              m->same_process, i, (unsigned long long)m->base,
                              (unsigned long long)*addr);
            return RMACOLL_SUCCESS;
        }
    }
    if (cu->nimports == cu->cap_imports) {
        size_t cap = cu->cap_imports ? 2 * cu->cap_imports : 16;
        rmacoll__cu_import_t *n = realloc(cu->imports, cap * sizeof(*n));

        if (n == NULL) {
            CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: out of memory for %zu IPC mappings (peer "
                   "%d)", cu->name, cap, peer);
            return RMACOLL_ERR_NO_MEMORY;
        }
        cu->imports = n;
        cu->cap_imports = cap;
    }
    memcpy(&h, b.handle, sizeof(h));
    same = cu_same_process(cu, &b);
    if (same < 0) {
        return RMACOLL_ERR_CUDA;
    }
    if (same) {
        mapped = (void *)(uintptr_t)b.base;
    } else {
        cu_close_stale(cu, peer, b.base, 0); /* a freed allocation's mapping */
        e = cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess);
        if (e == cudaErrorAlreadyMapped) {
            (void)cudaGetLastError();
            cu_close_stale(cu, peer, b.base, 1);
            e = cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess);
        }
        if (e != cudaSuccess) {
            return rmacoll__cu_rt_error(cu, e, peer, "cudaIpcOpenMemHandle of the peer's "
                                        "device buffer");
        }
    }
    memcpy(cu->imports[cu->nimports].handle, b.handle, sizeof(b.handle));
    cu->imports[cu->nimports].mapped = mapped;
    cu->imports[cu->nimports].base = b.base;
    cu->imports[cu->nimports].peer = peer;
    cu->imports[cu->nimports].same_process = same;
    cu->imports[cu->nimports].keep = 0;
    cu->nimports++;
    if (cu->nimports % 64 == 0) {
        CU_LOG(cu, RMACOLL_LOG_WARN, "%s: %zu IPC mappings of peers' device buffers held "
               "(kept until the communicator is destroyed; buffers freed and "
               "reallocated by peers keep theirs alive)", cu->name, cu->nimports);
    }
    *addr = (uint64_t)(uintptr_t)mapped + b.offset;
    rmacoll__cu_trace(cu, "import peer=%d base=0x%llx off=%llu same=%d hit=- addr=0x%llx",
                      peer, (unsigned long long)b.base, (unsigned long long)b.offset, same,
                      (unsigned long long)*addr);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__cu_set_device_signals(rmacoll__cu_t *cu, const uint64_t *addr,
                                                const uint32_t *nwords)
{
    int nranks = cu->env->nranks;

    if (addr == NULL) {
        return RMACOLL_SUCCESS; /* a probe: 64-bit stream memory operations, which
                                 * rmacoll__cu_open required, work on device memory */
    }
    if (nwords == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (int p = 0; p < nranks; p++) {
        CUdeviceptr base = 0;
        size_t size = 0;

        cu->dsig_dev[p] = addr[p] != 0 && nwords[p] != 0 ? (CUdeviceptr)addr[p] : 0;
        cu->dsig_n[p] = cu->dsig_dev[p] != 0 ? nwords[p] : 0;
        if (p == cu->env->rank || cu->dsig_dev[p] == 0 ||
            cu->get_range(&base, &size, cu->dsig_dev[p]) != CUDA_SUCCESS) {
            continue;
        }
        /* the mapping of p's array must outlive every stale-mapping
         * clean-up (cu_close_stale, every_one included) */
        for (size_t i = 0; i < cu->nimports; i++) {
            if (cu->imports[i].peer == p && (CUdeviceptr)(uintptr_t)cu->imports[i].mapped == base) {
                cu->imports[i].keep = 1;
            }
        }
    }
    for (int p = 0; p < nranks && rmacoll__cu_tracing(); p++) {
        rmacoll__cu_trace(cu, "dwords peer=%d base=0x%llx n=%u", p,
                          (unsigned long long)cu->dsig_dev[p], cu->dsig_n[p]);
    }
    CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: device-resident signal words: %u own at 0x%llx",
           cu->name, cu->dsig_n[cu->env->rank],
           (unsigned long long)cu->dsig_dev[cu->env->rank]);
    return RMACOLL_SUCCESS;
}

CUdeviceptr rmacoll__cu_word(const rmacoll__cu_t *cu, int p, uint32_t idx, uint32_t *n)
{
    int dev = rmacoll__cu_word_is_device(idx);
    CUdeviceptr base = dev ? cu->dsig_dev[p] : cu->sig_dev[p];
    uint32_t nw = dev ? cu->dsig_n[p] : cu->sig_n[p];

    idx &= ~RMACOLL_SIG_DEVICE;
    if (n != NULL) {
        *n = base != 0 ? nw : 0;
    }
    if (base == 0 || idx >= nw) {
        return 0;
    }
    return base + (CUdeviceptr)idx * sizeof(uint64_t);
}

rmacoll_status_t rmacoll__cu_check_put(rmacoll__cu_t *cu, const rmacoll_put_t *p, size_t i,
                                       CUdeviceptr *sig)
{
    const rmacoll_transport_env_t *env = cu->env;
    uint32_t nw;

    *sig = 0;
    if (p->peer < 0 || p->peer >= env->nranks ||
        (p->peer != env->rank && !env->peers[p->peer])) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: stream put %zu of %llu bytes names peer %d, "
               "not a node peer of this instance", cu->name, i,
               (unsigned long long)p->bytes, p->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->bytes > 0 &&
        (p->src == NULL || p->dst_addr == 0 || p->dst_addr + p->bytes < p->dst_addr)) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: stream put %zu of %llu bytes to peer %d has "
               "src %p, dst 0x%llx", cu->name, i, (unsigned long long)p->bytes, p->peer,
               p->src, (unsigned long long)p->dst_addr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->sig_index == RMACOLL_NO_SIGNAL) {
        return RMACOLL_SUCCESS;
    }
    *sig = rmacoll__cu_word(cu, p->peer, p->sig_index, &nw);
    if (*sig == 0) {
        int dev = rmacoll__cu_word_is_device(p->sig_index);

        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: stream put %zu to peer %d signals %s word %u "
               "of %u%s", cu->name, i, p->peer, dev ? "device-resident" : "control-window",
               p->sig_index & ~RMACOLL_SIG_DEVICE, nw,
               nw == 0 ? ", but the peer's words of that kind are not mapped" : "");
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__cu_check_stream(rmacoll__cu_t *cu, cudaStream_t s)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &cs);

    if (e != cudaSuccess) {
        return rmacoll__cu_rt_error(cu, e, -1, "cudaStreamIsCapturing of the caller's "
                                    "stream");
    }
    if (cs != cudaStreamCaptureStatusNone) {
        /* DEBUG: the core decides (graph mode records the call) and words
         * the error when it refuses */
        CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: the stream is being captured into a CUDA "
               "graph", cu->name);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    return RMACOLL_SUCCESS;
}

void rmacoll__cu_op_write(rmacoll__cu_t *cu, unsigned n, CUdeviceptr a, uint64_t v)
{
    CUstreamBatchMemOpParams *op = &cu->ops[n];

    memset(op, 0, sizeof(*op));
    op->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op->writeValue.address = a;
    op->writeValue.value64 = v;
    op->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT; /* with barrier */
}

rmacoll_status_t rmacoll__cu_flush_ops(rmacoll__cu_t *cu, cudaStream_t s, unsigned n,
                                       int peer)
{
    int write = cu->ops[0].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    CUresult r;

    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    if (n == 1 && write) {
        r = cu->write64((CUstream)s, cu->ops[0].writeValue.address,
                        cu->ops[0].writeValue.value64, cu->ops[0].writeValue.flags);
    } else if (n == 1) {
        r = cu->wait64((CUstream)s, cu->ops[0].waitValue.address,
                       cu->ops[0].waitValue.value64, cu->ops[0].waitValue.flags);
    } else {
        r = cu->batch((CUstream)s, n, cu->ops, 0);
    }
    if (r != CUDA_SUCCESS) {
        return rmacoll__cu_drv_error(cu, r, peer, write ? "stream write of a signal word"
                                                        : "stream wait on a signal word");
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__cu_wait_stream(rmacoll__cu_t *cu, const uint32_t *idx,
                                         const uint64_t *values, size_t n, cudaStream_t s)
{
    int me = cu->env->rank;
    unsigned nops = 0;
    rmacoll_status_t st;

    for (size_t k = 0; k < n; k++) {
        uint32_t nw;

        if (rmacoll__cu_word(cu, me, idx[k], &nw) == 0) {
            CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: stream wait %zu on own %s word %u of %u",
                   cu->name, k, rmacoll__cu_word_is_device(idx[k]) ? "device-resident"
                                                                    : "control-window",
                   idx[k] & ~RMACOLL_SIG_DEVICE, nw);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    for (size_t k = 0; k < n; k++) {
        CUstreamBatchMemOpParams *op;

        if (nops == RMACOLL__CU_MAX_OPS) {
            st = rmacoll__cu_flush_ops(cu, s, nops, me);
            nops = 0;
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        op = &cu->ops[nops++];
        memset(op, 0, sizeof(*op));
        op->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        op->waitValue.address = rmacoll__cu_word(cu, me, idx[k], NULL);
        op->waitValue.value64 = values[k];
        op->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        rmacoll__cu_trace(cu, "wait s=%p idx=%u dev=%d addr=0x%llx geq=%llu", (void *)s,
                          idx[k] & ~RMACOLL_SIG_DEVICE, rmacoll__cu_word_is_device(idx[k]),
                          (unsigned long long)op->waitValue.address,
                          (unsigned long long)values[k]);
    }
    return rmacoll__cu_flush_ops(cu, s, nops, me);
}

rmacoll_status_t rmacoll__cu_signal_stream(rmacoll__cu_t *cu, int peer, uint32_t idx,
                                           uint64_t value, cudaStream_t s)
{
    rmacoll_put_t p = {
        .peer = peer,
        .bytes = 0,
        .sig_index = idx,
        .sig_value = value,
    };
    CUdeviceptr sig;
    rmacoll_status_t st;

    if (idx == RMACOLL_NO_SIGNAL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    st = rmacoll__cu_check_put(cu, &p, 0, &sig);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    rmacoll__cu_op_write(cu, 0, sig, value);
    rmacoll__cu_trace(cu, "write s=%p peer=%d idx=%u dev=%d addr=0x%llx val=%llu", (void *)s,
                      peer, idx & ~RMACOLL_SIG_DEVICE, rmacoll__cu_word_is_device(idx),
                      (unsigned long long)sig, (unsigned long long)value);
    return rmacoll__cu_flush_ops(cu, s, 1, peer);
}

rmacoll_status_t rmacoll__cu_record(rmacoll__cu_t *cu, size_t n)
{
    cudaError_t e = cudaEventRecord(cu->event, cu->stream);

    if (e != cudaSuccess) {
        return rmacoll__cu_rt_error(cu, e, -1, "cudaEventRecord after a queue");
    }
    cu->pending += n;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__cu_progress(rmacoll__cu_t *cu)
{
    cudaError_t e;

    if (cu == NULL || cu->pending == 0) {
        return RMACOLL_SUCCESS;
    }
    e = cudaEventQuery(cu->event);
    if (e == cudaSuccess) {
        cu->pending = 0;
    } else if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
    } else {
        return rmacoll__cu_rt_error(cu, e, -1, "cudaEventQuery of posted device puts");
    }
    return RMACOLL_SUCCESS;
}

size_t rmacoll__cu_pending(rmacoll__cu_t *cu)
{
    if (cu == NULL) {
        return 0;
    }
    (void)rmacoll__cu_progress(cu);
    return cu->pending;
}

/* ---- pointer identity (network registration caches) ---------------------- */

static PFN_cuPointerGetAttribute_v4000 cu_ptr_attr;
static PFN_cuCtxGetCurrent_v4000 cu_ctx_current;
static PFN_cuCtxSetCurrent_v4000 cu_ctx_set_current;
static pthread_once_t cu_ptr_attr_once = PTHREAD_ONCE_INIT;

static void cu_ptr_attr_load(void)
{
    void *fn = NULL;

    if (rmacoll__cu_entry(&fn, "cuPointerGetAttribute", 4000) == 0) {
        memcpy(&cu_ptr_attr, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuCtxGetCurrent", 4000) == 0) {
        memcpy(&cu_ctx_current, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuCtxSetCurrent", 4000) == 0) {
        memcpy(&cu_ctx_set_current, &fn, sizeof(fn));
    }
}

int rmacoll__cu_legacy_fence(void)
{
    if (cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}

void *rmacoll__cu_context_get(void)
{
    CUcontext ctx = NULL;

    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    if (cu_ctx_current == NULL || cu_ctx_current(&ctx) != CUDA_SUCCESS) {
        return NULL;
    }
    return (void *)ctx;
}

void rmacoll__cu_context_bind(void *ctx)
{
    static __thread void *bound;
    CUcontext cur;

    if (ctx == NULL || ctx == bound) {
        return;
    }
    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    if (cu_ctx_current == NULL || cu_ctx_set_current == NULL) {
        return;
    }
    cur = NULL;
    if (cu_ctx_current(&cur) != CUDA_SUCCESS) {
        return;
    }
    /* a thread of the user's with its own context keeps it */
    if (cur == NULL && cu_ctx_set_current((CUcontext)ctx) == CUDA_SUCCESS) {
        bound = ctx;
    } else if (cur == (CUcontext)ctx) {
        bound = ctx;
    }
}

int rmacoll__cu_context_current(void)
{
    CUcontext ctx = NULL;

    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    return cu_ctx_current != NULL && cu_ctx_current(&ctx) == CUDA_SUCCESS && ctx != NULL;
}

void *rmacoll__cu_probe_alloc(size_t bytes, int *device)
{
    void *p = NULL;

    if (!rmacoll__cu_context_current() || cudaGetDevice(device) != cudaSuccess ||
        cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

void rmacoll__cu_probe_free(void *p)
{
    if (p != NULL) {
        (void)cudaFree(p);
    }
}

int rmacoll__cu_pointer_info(const void *addr, int *device, uint64_t *buffer_id)
{
    struct cudaPointerAttributes a;
    unsigned long long id = 0;

    *device = -1;
    *buffer_id = 0;
    if (cudaPointerGetAttributes(&a, addr) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    if (a.type != cudaMemoryTypeDevice) {
        return -1;
    }
    *device = a.device;
    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    if (cu_ptr_attr != NULL &&
        cu_ptr_attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)addr) ==
            CUDA_SUCCESS) {
        *buffer_id = (uint64_t)id;
    }
    return 0;
}
