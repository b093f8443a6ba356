/*
 * ce_cuda.c - the ce transport's CUDA backend: copy engine over CUDA IPC
 * mappings, signals and waits as stream memory operations.
 *
 * Device buffers of node peers are mapped here with CUDA IPC
 * (mem_export: cudaIpcGetMemHandle of the allocation holding the range and
 * the offset in it; mem_import: cudaIpcOpenMemHandle, cached by handle
 * bytes). A put is cudaMemcpyAsync(dst_addr, src, bytes, cudaMemcpyDefault)
 * on the caller's stream; its signal is a 64-bit stream write
 * (cuStreamWriteValue64 / cuStreamBatchMemOp, default flags, i.e. with a
 * memory barrier) into the TARGET's signal word, which lives in its host
 * control window: the core maps every node peer's window in this process
 * (env->peer_signals), and init registers those mappings with
 * cudaHostRegister(Mapped | Portable) so the GPU can write and poll them.
 * Stream order puts every signal after its copy and all earlier ones.
 * wait_stream is cuStreamWaitValue64(GEQ) on this rank's own words.
 *
 * Driver functions come from cudaGetDriverEntryPointByVersion; libcuda is
 * never linked, so the library starts on machines without a GPU driver,
 * where init leaves the backend off and the host backend works alone.
 *
 * Not thread-safe (like the rest of ce). See docs/transport-ce.md.
 */
#define _GNU_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"

#define CE_CUDA_BLOB_MAGIC 0x63654331u /* "ceC1" */
#define CE_CUDA_MAX_OPS 256u /* most memory operations in one batch */
#define CE_CUDA_DRIVER_VERSION 12000u /* ABI of the driver entry points */

#define CC_LOG(tp_, lvl, ...)                                              \
    do {                                                                   \
        if ((tp_)->env->log != NULL) {                                     \
            (tp_)->env->log((tp_)->env->log_ctx, (lvl),                    \
                            RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);    \
        }                                                                  \
    } while (0)

/* What mem_export writes (RMACOLL_EXPORT_BYTES). */
typedef struct ce_cuda_blob {
    uint32_t magic;        /* CE_CUDA_BLOB_MAGIC */
    uint32_t rank;         /* exporting rank */
    uint64_t base;         /* allocation base in the exporter */
    uint64_t offset;       /* of the exported address in the allocation */
    uint64_t bytes;        /* exported length */
    uint8_t handle[64];    /* cudaIpcMemHandle_t of the allocation */
} ce_cuda_blob_t;

_Static_assert(sizeof(ce_cuda_blob_t) == RMACOLL_EXPORT_BYTES,
               "ce cuda blob must fill RMACOLL_EXPORT_BYTES");
_Static_assert(sizeof(cudaIpcMemHandle_t) == 64, "IPC handle size");

/* One host range this backend registered (page-aligned). */
typedef struct ce_cuda_reg {
    void *base;
    size_t bytes;
    int owned;             /* 0: already registered by someone else */
} ce_cuda_reg_t;

/* One opened IPC handle. */
typedef struct ce_cuda_import {
    uint8_t handle[64];
    void *mapped;          /* allocation base mapped here */
    int peer;
} ce_cuda_import_t;

struct rmacoll__ce_cuda {
    int device;
    PFN_cuStreamWriteValue64_v11070 write64;
    PFN_cuStreamWaitValue64_v11070 wait64;
    PFN_cuStreamBatchMemOp_v11070 batch;
    PFN_cuMemGetAddressRange_v3020 get_range;
    PFN_cuGetErrorString_v6000 error_string;
    /* [nranks]: device address of each rank's signal words (self and node
     * peers), 0 where not mapped; word counts */
    CUdeviceptr *sig_dev;
    uint32_t *sig_n;
    ce_cuda_reg_t *regs;
    int nregs;
    ce_cuda_import_t *imports;
    size_t nimports;
    size_t cap_imports;
    cudaStream_t stream;   /* own stream of post_puts on CUDA memory */
    cudaEvent_t event;     /* recorded after each such queue */
    size_t pending;        /* puts before `event` */
    CUstreamBatchMemOpParams ops[CE_CUDA_MAX_OPS];
};

/* ---- errors ---------------------------------------------------------- */

/* Logs a runtime error once, naming what and the peer (-1: none). */
static rmacoll_status_t cc_rt_error(rmacoll_transport_t *tp, cudaError_t e,
                                    int peer, const char *what)
{
    (void)cudaGetLastError(); /* clear a non-sticky error */
    if (peer >= 0) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: cuda: %s (peer %d) failed: %s (%s)",
               what, peer, cudaGetErrorString(e), cudaGetErrorName(e));
    } else {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: cuda: %s failed: %s (%s)", what,
               cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return RMACOLL_ERR_CUDA;
}

/* Logs a driver error once, naming what and the peer (-1: none). */
static rmacoll_status_t cc_drv_error(rmacoll_transport_t *tp, CUresult r,
                                     int peer, const char *what)
{
    const char *s = NULL;

    if (tp->cuda != NULL && tp->cuda->error_string != NULL) {
        tp->cuda->error_string(r, &s);
    }
    CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: cuda driver: %s (peer %d) failed: %s "
           "(CUresult %d)", what, peer, s != NULL ? s : "unknown error",
           (int)r);
    return RMACOLL_ERR_CUDA;
}

/* The backend is off: log why (every call that needed it) and return. */
static rmacoll_status_t cc_off(rmacoll_transport_t *tp, const char *op)
{
    CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: %s on CUDA memory impossible: %s", op,
           tp->cuda_why[0] != '\0' ? tp->cuda_why : "no usable GPU");
    return tp->cuda_status != RMACOLL_SUCCESS ? tp->cuda_status
                                              : RMACOLL_ERR_NO_DEVICE;
}

/* Records why the backend stays off (init). */
static void cc_set_off(rmacoll_transport_t *tp, rmacoll_status_t st,
                       const char *fmt, const char *a, const char *b)
{
    tp->cuda_status = st;
    snprintf(tp->cuda_why, sizeof(tp->cuda_why), fmt, a, b);
}

/* ---- init -------------------------------------------------------------- */

static int cc_entry(void **fn, const char *sym, unsigned version)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(sym, fn, version,
                                                     cudaEnableDefault, &q);

    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *fn == NULL) {
        (void)cudaGetLastError();
        *fn = NULL;
        return -1;
    }
    return 0;
}

/* Signal words of rank p mapped in this process, and their count. */
static volatile uint64_t *cc_words(const rmacoll_transport_t *tp, int p,
                                   uint32_t *n)
{
    const rmacoll_transport_env_t *env = tp->env;

    if (p == tp->rank) {
        *n = env->nsignals;
        return env->signals;
    }
    *n = env->peer_nsignals != NULL ? env->peer_nsignals[p] : env->nsignals;
    if (!env->peers[p] || env->peer_signals == NULL) {
        return NULL;
    }
    return (volatile uint64_t *)env->peer_signals[p];
}

static int cc_cmp_reg(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const ce_cuda_reg_t *)a)->base;
    uintptr_t y = (uintptr_t)((const ce_cuda_reg_t *)b)->base;

    return x < y ? -1 : x > y;
}

/*
 * Registers the page ranges holding every mapped signal array (merged:
 * windows may share pages, and cudaHostRegister refuses overlaps) and
 * computes each rank's device address of its words.
 */
static rmacoll_status_t cc_register_windows(rmacoll_transport_t *tp)
{
    rmacoll__ce_cuda_t *c = tp->cuda;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    int n = 0;

    c->regs = calloc((size_t)tp->nranks, sizeof(*c->regs));
    if (c->regs == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int p = 0; p < tp->nranks; p++) {
        uint32_t nw;
        volatile uint64_t *w = cc_words(tp, p, &nw);
        uintptr_t lo, hi;

        if (w == NULL || nw == 0) {
            continue;
        }
        lo = (uintptr_t)w & ~(pg - 1);
        hi = ((uintptr_t)(w + nw) + pg - 1) & ~(pg - 1);
        c->regs[n].base = (void *)lo;
        c->regs[n].bytes = hi - lo;
        n++;
    }
    qsort(c->regs, (size_t)n, sizeof(*c->regs), cc_cmp_reg);
    c->nregs = 0;
    for (int i = 0; i < n; i++) {
        ce_cuda_reg_t *last = c->nregs > 0 ? &c->regs[c->nregs - 1] : NULL;
        uintptr_t b = (uintptr_t)c->regs[i].base;
        uintptr_t e = b + c->regs[i].bytes;

        if (last != NULL && b <= (uintptr_t)last->base + last->bytes) {
            uintptr_t le = (uintptr_t)last->base + last->bytes;
            last->bytes = (e > le ? e : le) - (uintptr_t)last->base;
        } else {
            c->regs[c->nregs++] = c->regs[i];
        }
    }
    for (int i = 0; i < c->nregs; i++) {
        cudaError_t e = cudaHostRegister(c->regs[i].base, c->regs[i].bytes,
                                         cudaHostRegisterMapped |
                                             cudaHostRegisterPortable);
        if (e == cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError(); /* registered by the core or nvl */
            c->regs[i].owned = 0;
        } else if (e != cudaSuccess) {
            char what[128];

            snprintf(what, sizeof(what), "cudaHostRegister of %zu bytes of "
                     "signal words at %p", c->regs[i].bytes, c->regs[i].base);
            c->nregs = i;
            return cc_rt_error(tp, e, -1, what);
        } else {
            c->regs[i].owned = 1;
        }
    }
    for (int p = 0; p < tp->nranks; p++) {
        uint32_t nw;
        volatile uint64_t *w = cc_words(tp, p, &nw);
        void *d = NULL;
        cudaError_t e;

        c->sig_n[p] = nw;
        if (w == NULL || nw == 0) {
            continue;
        }
        e = cudaHostGetDevicePointer(&d, (void *)(uintptr_t)w, 0);
        if (e != cudaSuccess) {
            return cc_rt_error(tp, e, p, "cudaHostGetDevicePointer of the "
                               "signal words");
        }
        c->sig_dev[p] = (CUdeviceptr)(uintptr_t)d;
    }
    return RMACOLL_SUCCESS;
}

static void cc_free(rmacoll_transport_t *tp)
{
    rmacoll__ce_cuda_t *c = tp->cuda;

    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->nimports; i++) {
        cudaError_t e = cudaIpcCloseMemHandle(c->imports[i].mapped);

        if (e != cudaSuccess) {
            cc_rt_error(tp, e, c->imports[i].peer, "cudaIpcCloseMemHandle");
        }
    }
    for (int i = 0; i < c->nregs; i++) {
        if (c->regs[i].owned) {
            cudaError_t e = cudaHostUnregister(c->regs[i].base);

            if (e != cudaSuccess) {
                cc_rt_error(tp, e, -1, "cudaHostUnregister of signal words");
            }
        }
    }
    if (c->event != NULL) {
        cudaEventDestroy(c->event);
    }
    if (c->stream != NULL) {
        cudaStreamDestroy(c->stream);
    }
    free(c->imports);
    free(c->regs);
    free(c->sig_dev);
    free(c->sig_n);
    free(c);
    tp->cuda = NULL;
}

rmacoll_status_t rmacoll__ce_cuda_init(rmacoll_transport_t *tp)
{
    rmacoll__ce_cuda_t *c;
    int ndev = 0;
    int dev = -1;
    int v64 = 0;
    int hostptr = 0;
    char num[32];
    cudaError_t e;
    rmacoll_status_t st;
    void *fn;
    PFN_cuDeviceGet_v2000 dev_get = NULL;
    PFN_cuDeviceGetAttribute_v2000 dev_attr = NULL;
    CUdevice cudev;

    tp->cuda = NULL;
    tp->cuda_status = RMACOLL_ERR_NO_DEVICE;
    tp->cuda_why[0] = '\0';
    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) {
        (void)cudaGetLastError();
        cc_set_off(tp, RMACOLL_ERR_NO_DEVICE, "no usable GPU (cudaGetDeviceCount: %s%s)",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", "");
        CC_LOG(tp, RMACOLL_LOG_DEBUG, "ce: cuda backend off: %s", tp->cuda_why);
        return RMACOLL_SUCCESS;
    }
    e = cudaGetDevice(&dev);
    if (e != cudaSuccess) {
        cc_set_off(tp, RMACOLL_ERR_CUDA, "cudaGetDevice failed: %s%s",
                   cudaGetErrorString(e), "");
        (void)cudaGetLastError();
        goto off;
    }
    snprintf(num, sizeof(num), "%d", dev);
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    tp->cuda = c;
    c->device = dev;
    c->sig_dev = calloc((size_t)tp->nranks, sizeof(*c->sig_dev));
    c->sig_n = calloc((size_t)tp->nranks, sizeof(*c->sig_n));
    if (c->sig_dev == NULL || c->sig_n == NULL) {
        cc_free(tp);
        return RMACOLL_ERR_NO_MEMORY;
    }
    if (cc_entry(&fn, "cuStreamWriteValue64", CE_CUDA_DRIVER_VERSION) == 0) {
        memcpy(&c->write64, &fn, sizeof(fn));
    }
    if (cc_entry(&fn, "cuStreamWaitValue64", CE_CUDA_DRIVER_VERSION) == 0) {
        memcpy(&c->wait64, &fn, sizeof(fn));
    }
    if (cc_entry(&fn, "cuStreamBatchMemOp", CE_CUDA_DRIVER_VERSION) == 0) {
        memcpy(&c->batch, &fn, sizeof(fn));
    }
    if (cc_entry(&fn, "cuMemGetAddressRange", 3020) == 0) {
        memcpy(&c->get_range, &fn, sizeof(fn));
    }
    if (cc_entry(&fn, "cuGetErrorString", 6000) == 0) {
        memcpy(&c->error_string, &fn, sizeof(fn));
    }
    if (cc_entry(&fn, "cuDeviceGet", 2000) == 0) {
        memcpy(&dev_get, &fn, sizeof(fn));
    }
    if (cc_entry(&fn, "cuDeviceGetAttribute", 2000) == 0) {
        memcpy(&dev_attr, &fn, sizeof(fn));
    }
    if (c->write64 == NULL || c->wait64 == NULL || c->batch == NULL ||
        c->get_range == NULL || dev_get == NULL || dev_attr == NULL) {
        cc_set_off(tp, RMACOLL_ERR_CUDA, "device %s: the driver lacks stream "
                   "memory operations or cuMemGetAddressRange (entry points of "
                   "CUDA %s not found; driver too old?)", num, "12.0");
        goto off_free;
    }
    if (dev_get(&cudev, dev) != CUDA_SUCCESS ||
        dev_attr(&v64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                 cudev) != CUDA_SUCCESS ||
        dev_attr(&hostptr,
                 CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
                 cudev) != CUDA_SUCCESS) {
        cc_set_off(tp, RMACOLL_ERR_CUDA, "device %s: cannot query its %s",
                   num, "stream memory operation attributes");
        goto off_free;
    }
    if (!v64) {
        cc_set_off(tp, RMACOLL_ERR_CUDA, "device %s lacks %s (needed for "
                   "signals in host control windows)", num,
                   "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS");
        goto off_free;
    }
    /* Memory operations take the device address of registered host memory
     * from cudaHostGetDevicePointer, so host pointers need not be valid on
     * the device; the attribute is only reported. */
    CC_LOG(tp, RMACOLL_LOG_DEBUG, "ce: device %d: 64-bit stream memory "
           "operations yes, host pointers of registered memory usable on "
           "the device: %s", dev, hostptr ? "yes" : "no");
    st = cc_register_windows(tp);
    if (st == RMACOLL_ERR_NO_MEMORY) {
        cc_free(tp);
        return st;
    }
    if (st != RMACOLL_SUCCESS) {
        cc_set_off(tp, RMACOLL_ERR_CUDA, "device %s: cannot map the signal "
                   "words for the GPU (cudaHostRegister; cause logged %s)",
                   num, "above");
        goto off_free;
    }
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
        e = cudaEventCreateWithFlags(&c->event, cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
        cc_rt_error(tp, e, -1, "creating the backend's stream and event");
        cc_set_off(tp, RMACOLL_ERR_CUDA, "device %s: %s", num,
                   "cannot create a stream");
        goto off_free;
    }
    tp->cuda_status = RMACOLL_SUCCESS;
    CC_LOG(tp, RMACOLL_LOG_DEBUG, "ce: cuda backend on device %d, %d host "
           "ranges of signal words registered", dev, c->nregs);
    return RMACOLL_SUCCESS;
off_free:
    cc_free(tp);
off:
    CC_LOG(tp, RMACOLL_LOG_WARN, "ce: cuda backend off, device buffers "
           "unsupported: %s", tp->cuda_why);
    return RMACOLL_SUCCESS;
}

void rmacoll__ce_cuda_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL && tp->cuda != NULL) {
        cudaStreamSynchronize(tp->cuda->stream);
        cc_free(tp);
    }
}

/* ---- registration, export, import -------------------------------------- */

/* Checks that [addr, addr + bytes) is device memory of one allocation;
 * base/size receive the allocation. */
static rmacoll_status_t cc_device_range(rmacoll_transport_t *tp, void *addr,
                                        size_t bytes, CUdeviceptr *base,
                                        size_t *size)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, addr);
    CUresult r;

    if (e != cudaSuccess) {
        return cc_rt_error(tp, e, -1, "cudaPointerGetAttributes");
    }
    if (a.type != cudaMemoryTypeDevice) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: %zu bytes at %p are not device "
               "memory (cudaMemoryType %d): only cudaMalloc'd buffers can be "
               "mapped by node peers", bytes, addr, (int)a.type);
        return RMACOLL_ERR_INVALID_ARG;
    }
    r = tp->cuda->get_range(base, size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) {
        return cc_drv_error(tp, r, -1, "cuMemGetAddressRange");
    }
    if ((uint64_t)(uintptr_t)addr + bytes > (uint64_t)*base + *size) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: %zu bytes at %p run past their "
               "allocation (%zu bytes at 0x%llx)", bytes, addr, *size,
               (unsigned long long)*base);
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_cuda_mem_register(rmacoll_transport_t *tp,
                                               void *addr, size_t bytes,
                                               rmacoll_mem_t **mem,
                                               rmacoll_rkey_t *rkey)
{
    CUdeviceptr base;
    size_t size;
    rmacoll_status_t st;

    *mem = NULL;
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_register");
    }
    if (bytes > 0) {
        st = cc_device_range(tp, addr, bytes, &base, &size);
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

/* A pinned host range (the only non-NULL registration of this backend). */
struct rmacoll_mem {
    uint64_t magic;
    void *addr;
};

#define CC_PIN_MAGIC 0x63635f70696e6e64ull /* "cc_pinnd" */

rmacoll_status_t rmacoll__ce_cuda_host_pin(rmacoll_transport_t *tp, void *addr,
                                           size_t bytes, rmacoll_mem_t **mem)
{
    struct rmacoll_mem *m;
    cudaError_t e;

    *mem = NULL;
    if (tp->cuda == NULL) {
        return cc_off(tp, "host_pin");
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    e = cudaHostRegister(addr, bytes, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: cudaHostRegister of %zu bytes at %p "
               "failed: %s", bytes, addr, cudaGetErrorString(e));
        free(m);
        return RMACOLL_ERR_CUDA;
    }
    m->magic = CC_PIN_MAGIC;
    m->addr = addr;
    *mem = m;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_cuda_mem_deregister(rmacoll_transport_t *tp,
                                                 rmacoll_mem_t *mem)
{
    if (mem != NULL && mem->magic == CC_PIN_MAGIC) {
        cudaHostUnregister(mem->addr);
        mem->magic = 0;
        free(mem);
        return RMACOLL_SUCCESS;
    }
    return mem == NULL ? RMACOLL_SUCCESS : RMACOLL_ERR_INVALID_ARG;
}

rmacoll_status_t rmacoll__ce_cuda_mem_export(rmacoll_transport_t *tp,
                                             void *addr, size_t bytes,
                                             void *blob)
{
    ce_cuda_blob_t b;
    cudaIpcMemHandle_t h;
    CUdeviceptr base;
    size_t size;
    cudaError_t e;
    rmacoll_status_t st;

    if (tp == NULL || blob == NULL || addr == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_export");
    }
    st = cc_device_range(tp, addr, bytes, &base, &size);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
        char what[160];

        snprintf(what, sizeof(what), "cudaIpcGetMemHandle of the %zu-byte "
                 "allocation at 0x%llx (cuMem/VMM and managed allocations "
                 "cannot be exported)", size, (unsigned long long)base);
        return cc_rt_error(tp, e, -1, what);
    }
    memset(&b, 0, sizeof(b));
    b.magic = CE_CUDA_BLOB_MAGIC;
    b.rank = (uint32_t)tp->rank;
    b.base = (uint64_t)base;
    b.offset = (uint64_t)(uintptr_t)addr - (uint64_t)base;
    b.bytes = (uint64_t)bytes;
    memcpy(b.handle, &h, sizeof(b.handle));
    memcpy(blob, &b, sizeof(b));
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_cuda_mem_import(rmacoll_transport_t *tp,
                                             int peer, const void *blob,
                                             uint64_t *addr)
{
    rmacoll__ce_cuda_t *c;
    ce_cuda_blob_t b;
    cudaIpcMemHandle_t h;
    void *mapped = NULL;
    cudaError_t e;

    if (tp == NULL || blob == NULL || addr == NULL || peer < 0 ||
        peer >= tp->nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_import");
    }
    c = tp->cuda;
    memcpy(&b, blob, sizeof(b));
    if (b.magic != CE_CUDA_BLOB_MAGIC || b.rank != (uint32_t)peer) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: export blob of peer %d is not a "
               "ce cuda export of that peer (magic 0x%x, rank %u)", peer,
               b.magic, b.rank);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (peer == tp->rank) {
        *addr = b.base + b.offset; /* own memory: no mapping */
        return RMACOLL_SUCCESS;
    }
    for (size_t i = 0; i < c->nimports; i++) {
        if (memcmp(c->imports[i].handle, b.handle, sizeof(b.handle)) == 0) {
            *addr = (uint64_t)(uintptr_t)c->imports[i].mapped + b.offset;
            return RMACOLL_SUCCESS;
        }
    }
    if (c->nimports == c->cap_imports) {
        size_t cap = c->cap_imports ? 2 * c->cap_imports : 16;
        ce_cuda_import_t *n = realloc(c->imports, cap * sizeof(*n));

        if (n == NULL) {
            CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: out of memory for %zu IPC "
                   "mappings (peer %d)", cap, peer);
            return RMACOLL_ERR_NO_MEMORY;
        }
        c->imports = n;
        c->cap_imports = cap;
    }
    memcpy(&h, b.handle, sizeof(h));
    e = cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        return cc_rt_error(tp, e, peer, "cudaIpcOpenMemHandle of the peer's "
                           "device buffer");
    }
    memcpy(c->imports[c->nimports].handle, b.handle, sizeof(b.handle));
    c->imports[c->nimports].mapped = mapped;
    c->imports[c->nimports].peer = peer;
    c->nimports++;
    if (c->nimports % 64 == 0) {
        CC_LOG(tp, RMACOLL_LOG_WARN, "ce: %zu IPC mappings of peers' device "
               "buffers held (kept until the communicator is destroyed; "
               "buffers freed and reallocated by peers keep theirs alive)",
               c->nimports);
    }
    *addr = (uint64_t)(uintptr_t)mapped + b.offset;
    return RMACOLL_SUCCESS;
}

/* ---- stream operations ------------------------------------------------- */

/* Enqueues ops[0, n) (all writes or all waits) on s. */
static rmacoll_status_t cc_flush_ops(rmacoll_transport_t *tp, cudaStream_t s,
                                     unsigned n, int peer)
{
    rmacoll__ce_cuda_t *c = tp->cuda;
    CUresult r;

    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    if (n == 1 && c->ops[0].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64) {
        r = c->write64((CUstream)s, c->ops[0].writeValue.address,
                       c->ops[0].writeValue.value64, c->ops[0].writeValue.flags);
    } else if (n == 1) {
        r = c->wait64((CUstream)s, c->ops[0].waitValue.address,
                      c->ops[0].waitValue.value64, c->ops[0].waitValue.flags);
    } else {
        r = c->batch((CUstream)s, n, c->ops, 0);
    }
    if (r != CUDA_SUCCESS) {
        return cc_drv_error(tp, r, peer,
                            c->ops[0].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64
                                ? "stream write of a signal word"
                                : "stream wait on a signal word");
    }
    return RMACOLL_SUCCESS;
}

static void cc_op_write(CUstreamBatchMemOpParams *op, CUdeviceptr a,
                        uint64_t v)
{
    memset(op, 0, sizeof(*op));
    op->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op->writeValue.address = a;
    op->writeValue.value64 = v;
    op->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT; /* with barrier */
}

/* Checks one put; *sig receives the device address of its signal word
 * (0: no signal). */
static rmacoll_status_t cc_check_put(rmacoll_transport_t *tp,
                                     const rmacoll_put_t *p, size_t i,
                                     CUdeviceptr *sig)
{
    rmacoll__ce_cuda_t *c = tp->cuda;

    *sig = 0;
    if (p->peer < 0 || p->peer >= tp->nranks ||
        (p->peer != tp->rank && !tp->env->peers[p->peer])) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: stream put %zu of %llu bytes names "
               "peer %d, not a node peer of this ce instance", i,
               (unsigned long long)p->bytes, p->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->bytes > 0 && (p->src == NULL || p->dst_addr == 0 ||
                         p->dst_addr + p->bytes < p->dst_addr)) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: stream put %zu of %llu bytes to "
               "peer %d has src %p, dst 0x%llx", i,
               (unsigned long long)p->bytes, p->peer, p->src,
               (unsigned long long)p->dst_addr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->sig_index == RMACOLL_NO_SIGNAL) {
        return RMACOLL_SUCCESS;
    }
    if (c->sig_dev[p->peer] == 0 || p->sig_index >= c->sig_n[p->peer]) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: stream put %zu to peer %d signals "
               "word %u of %u%s", i, p->peer, p->sig_index, c->sig_n[p->peer],
               c->sig_dev[p->peer] == 0 ? ", but the peer's signal words are "
                                          "not mapped" : "");
        return RMACOLL_ERR_INVALID_ARG;
    }
    *sig = c->sig_dev[p->peer] + (CUdeviceptr)p->sig_index * sizeof(uint64_t);
    return RMACOLL_SUCCESS;
}

/* n == 0 with a stream that is being captured: refused (the core checks
 * streams this way before a call). */
static rmacoll_status_t cc_check_stream(rmacoll_transport_t *tp,
                                        cudaStream_t s)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &cs);

    if (e != cudaSuccess) {
        return cc_rt_error(tp, e, -1, "cudaStreamIsCapturing of the caller's "
                           "stream");
    }
    if (cs != cudaStreamCaptureStatusNone) {
        CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: the stream is being captured into "
               "a CUDA graph; stream operations of rmacoll cannot be captured");
        return RMACOLL_ERR_UNSUPPORTED;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_cuda_post_puts_stream(rmacoll_transport_t *tp,
                                                   const rmacoll_put_t *puts,
                                                   size_t n, void *stream)
{
    rmacoll__ce_cuda_t *c;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned nops = 0;
    int ops_peer = -1;
    rmacoll_status_t st;

    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "post_puts_stream");
    }
    c = tp->cuda;
    if (n == 0) {
        return cc_check_stream(tp, s);
    }
    /* Check the whole queue before enqueueing anything. */
    for (size_t i = 0; i < n; i++) {
        CUdeviceptr sig;

        st = cc_check_put(tp, &puts[i], i, &sig);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *p = &puts[i];
        CUdeviceptr sig;

        (void)cc_check_put(tp, p, i, &sig);
        if (p->bytes > 0) {
            cudaError_t e;

            /* signals queued so far belong before this copy */
            st = cc_flush_ops(tp, s, nops, ops_peer);
            nops = 0;
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            e = cudaMemcpyAsync((void *)(uintptr_t)p->dst_addr, p->src,
                                (size_t)p->bytes, cudaMemcpyDefault, s);
            if (e != cudaSuccess) {
                char what[160];

                snprintf(what, sizeof(what), "cudaMemcpyAsync of %llu bytes "
                         "from %p to 0x%llx", (unsigned long long)p->bytes,
                         p->src, (unsigned long long)p->dst_addr);
                return cc_rt_error(tp, e, p->peer, what);
            }
        }
        if (sig != 0) {
            if (nops == CE_CUDA_MAX_OPS) {
                st = cc_flush_ops(tp, s, nops, ops_peer);
                nops = 0;
                if (st != RMACOLL_SUCCESS) {
                    return st;
                }
            }
            cc_op_write(&c->ops[nops++], sig, p->sig_value);
            ops_peer = p->peer;
        }
    }
    return cc_flush_ops(tp, s, nops, ops_peer);
}

rmacoll_status_t rmacoll__ce_cuda_wait_stream(rmacoll_transport_t *tp,
                                              const uint32_t *idx,
                                              const uint64_t *values,
                                              size_t n, void *stream)
{
    rmacoll__ce_cuda_t *c;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned nops = 0;
    rmacoll_status_t st;

    if (tp == NULL || (n > 0 && (idx == NULL || values == NULL))) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "wait_stream");
    }
    c = tp->cuda;
    for (size_t k = 0; k < n; k++) {
        if (idx[k] >= c->sig_n[tp->rank] || c->sig_dev[tp->rank] == 0) {
            CC_LOG(tp, RMACOLL_LOG_ERROR, "ce: stream wait %zu on own word %u "
                   "of %u", k, idx[k], c->sig_n[tp->rank]);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    for (size_t k = 0; k < n; k++) {
        CUstreamBatchMemOpParams *op;

        if (nops == CE_CUDA_MAX_OPS) {
            st = cc_flush_ops(tp, s, nops, tp->rank);
            nops = 0;
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        op = &c->ops[nops++];
        memset(op, 0, sizeof(*op));
        op->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        op->waitValue.address =
            c->sig_dev[tp->rank] + (CUdeviceptr)idx[k] * sizeof(uint64_t);
        op->waitValue.value64 = values[k];
        op->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    }
    return cc_flush_ops(tp, s, nops, tp->rank);
}

rmacoll_status_t rmacoll__ce_cuda_signal_stream(rmacoll_transport_t *tp,
                                                int peer, uint32_t idx,
                                                uint64_t value, void *stream)
{
    rmacoll_put_t p = {
        .peer = peer,
        .bytes = 0,
        .sig_index = idx,
        .sig_value = value,
    };

    if (idx == RMACOLL_NO_SIGNAL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    return rmacoll__ce_cuda_post_puts_stream(tp, &p, 1, stream);
}

/* ---- post_puts on CUDA memory (the backend's own stream) ---------------- */

rmacoll_memtype_t rmacoll__ce_cuda_queue_memtype(rmacoll_transport_t *tp,
                                                 const rmacoll_put_t *puts,
                                                 size_t n)
{
    struct cudaPointerAttributes a;

    if (tp->cuda == NULL) {
        return RMACOLL_MEM_HOST;
    }
    for (size_t i = 0; i < n; i++) {
        if (puts[i].bytes == 0 || puts[i].src == NULL) {
            continue;
        }
        if (cudaPointerGetAttributes(&a, puts[i].src) != cudaSuccess) {
            (void)cudaGetLastError();
            return RMACOLL_MEM_HOST;
        }
        return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
                   ? RMACOLL_MEM_CUDA
                   : RMACOLL_MEM_HOST;
    }
    return RMACOLL_MEM_HOST; /* signal-only queues: host stores */
}

rmacoll_status_t rmacoll__ce_cuda_post_puts(rmacoll_transport_t *tp,
                                            const rmacoll_put_t *puts,
                                            size_t n)
{
    rmacoll__ce_cuda_t *c = tp->cuda;
    rmacoll_status_t st;
    cudaError_t e;

    if (c == NULL) {
        return cc_off(tp, "post_puts");
    }
    st = rmacoll__ce_cuda_post_puts_stream(tp, puts, n, c->stream);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    e = cudaEventRecord(c->event, c->stream);
    if (e != cudaSuccess) {
        return cc_rt_error(tp, e, -1, "cudaEventRecord after a queue");
    }
    c->pending += n;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_cuda_progress(rmacoll_transport_t *tp)
{
    rmacoll__ce_cuda_t *c = tp != NULL ? tp->cuda : NULL;
    cudaError_t e;

    if (c == NULL || c->pending == 0) {
        return RMACOLL_SUCCESS;
    }
    e = cudaEventQuery(c->event);
    if (e == cudaSuccess) {
        c->pending = 0;
        return RMACOLL_SUCCESS;
    }
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return RMACOLL_SUCCESS;
    }
    return cc_rt_error(tp, e, -1, "cudaEventQuery of posted device puts");
}

size_t rmacoll__ce_cuda_pending(rmacoll_transport_t *tp)
{
    if (tp == NULL || tp->cuda == NULL) {
        return 0;
    }
    (void)rmacoll__ce_cuda_progress(tp);
    return tp->cuda->pending;
}
