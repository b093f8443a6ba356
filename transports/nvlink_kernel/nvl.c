/*
 * nvl.c - the nvlink_kernel transport ("nvlink_kernel"): node peers' device
 * buffers written by a CUDA kernel over IPC-mapped pointers (NVLink or
 * PCIe peer access), for queues of small puts where one kernel launch is
 * cheaper than one copy-engine operation per put.
 *
 * post_puts_stream packs the queue into launch descriptors of up to
 * RMACOLL__NVL_MAX_ENTRIES puts, passed by value as the kernel's parameter
 * (nvl.h), and launches one kernel per descriptor on the caller's stream;
 * the kernel (nvl.cu) copies and then raises each signal with a
 * system-scope release store into the target's host control window,
 * which init registered with cudaHostRegister (Mapped | Portable). The
 * stream ops without data (wait_stream, signal_stream) are stream memory
 * operations, as in ce.
 *
 * The small CUDA helpers (driver entry points, registration of the signal
 * windows, IPC export/import cache) duplicate those of transports/ce/
 * ce_cuda.c on purpose: transports do not include each other's files.
 * Export blobs of the two transports are not interchangeable (distinct
 * magic); the core imports through one of them.
 *
 * init succeeds without a GPU (the core initialises this transport on
 * every communicator when transports.intra_node is auto): every CUDA op
 * then returns RMACOLL_ERR_NO_DEVICE (or RMACOLL_ERR_CUDA) and logs why.
 * Not thread-safe: one instance per communicator, one thread at a time.
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
#include "transports/nvlink_kernel/nvl.h"

#define NVL_BLOB_MAGIC 0x6e766c31u /* "nvl1" */
#define NVL_MAX_OPS 256u           /* memory operations per batch call */
#define NVL_BYTES_PER_BLOCK (16u << 10)
#define NVL_MAX_BLOCKS_PER_ENTRY 32u

#define NVL_LOG(tp_, lvl, ...)                                             \
    do {                                                                   \
        if ((tp_)->env->log != NULL) {                                     \
            (tp_)->env->log((tp_)->env->log_ctx, (lvl),                    \
                            RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);    \
        }                                                                  \
    } while (0)

typedef struct nvl_blob {
    uint32_t magic;
    uint32_t rank;
    uint64_t base;
    uint64_t offset;
    uint64_t bytes;
    uint8_t handle[64];
} nvl_blob_t;

_Static_assert(sizeof(nvl_blob_t) == RMACOLL_EXPORT_BYTES,
               "nvl blob must fill RMACOLL_EXPORT_BYTES");

typedef struct nvl_reg {
    void *base;
    size_t bytes;
    int owned;
} nvl_reg_t;

typedef struct nvl_import {
    uint8_t handle[64];
    void *mapped;
    int peer;
} nvl_import_t;

struct rmacoll_transport {
    const rmacoll_transport_env_t *env;
    int rank;
    int nranks;
    int on;                        /* the GPU part is usable */
    rmacoll_status_t off_status;   /* why not: status and message */
    char off_why[256];
    int device;
    PFN_cuStreamWaitValue64_v11070 wait64;
    PFN_cuStreamWriteValue64_v11070 write64;
    PFN_cuStreamBatchMemOp_v11070 batch;
    PFN_cuMemGetAddressRange_v3020 get_range;
    PFN_cuGetErrorString_v6000 error_string;
    CUdeviceptr *sig_dev;          /* [nranks] device address of words */
    uint32_t *sig_n;               /* [nranks] word counts */
    nvl_reg_t *regs;
    int nregs;
    nvl_import_t *imports;
    size_t nimports, cap_imports;
    uint32_t *counters;            /* device: RING x MAX_ENTRIES, zero */
    uint32_t ring;                 /* next counter slot */
    cudaStream_t stream;           /* own stream of post_puts */
    cudaEvent_t event;
    size_t pending;
    int error_peer;
    int peer_of[RMACOLL__NVL_MAX_ENTRIES];  /* target of each entry */
    uint32_t eblocks[RMACOLL__NVL_MAX_ENTRIES];
    rmacoll__nvl_batch_t batch_desc;        /* reused; copied by the launch */
    CUstreamBatchMemOpParams ops[NVL_MAX_OPS];
};

/* ---- errors ---------------------------------------------------------- */

static rmacoll_status_t nvl_rt_error(rmacoll_transport_t *tp, cudaError_t e,
                                     int peer, const char *what)
{
    (void)cudaGetLastError();
    NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: cuda: %s (peer %d) failed: "
            "%s (%s)", what, peer, cudaGetErrorString(e), cudaGetErrorName(e));
    return RMACOLL_ERR_CUDA;
}

static rmacoll_status_t nvl_drv_error(rmacoll_transport_t *tp, CUresult r,
                                      int peer, const char *what)
{
    const char *s = NULL;

    if (tp->error_string != NULL) {
        tp->error_string(r, &s);
    }
    NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: cuda driver: %s (peer %d) "
            "failed: %s (CUresult %d)", what, peer,
            s != NULL ? s : "unknown error", (int)r);
    return RMACOLL_ERR_CUDA;
}

static rmacoll_status_t nvl_off(rmacoll_transport_t *tp, const char *op)
{
    NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: %s impossible: %s", op,
            tp->off_why[0] != '\0' ? tp->off_why : "no usable GPU");
    return tp->off_status != RMACOLL_SUCCESS ? tp->off_status
                                             : RMACOLL_ERR_NO_DEVICE;
}

/* ---- init ------------------------------------------------------------ */

static int nvl_entry(void **fn, const char *sym, unsigned version)
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

static volatile uint64_t *nvl_words(const rmacoll_transport_t *tp, int p,
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

static int nvl_cmp_reg(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const nvl_reg_t *)a)->base;
    uintptr_t y = (uintptr_t)((const nvl_reg_t *)b)->base;

    return x < y ? -1 : x > y;
}

/* Registers the merged page ranges of all mapped signal arrays (the ce
 * transport may have registered them already: then they are not ours). */
static rmacoll_status_t nvl_register_windows(rmacoll_transport_t *tp)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    int n = 0;

    tp->regs = calloc((size_t)tp->nranks, sizeof(*tp->regs));
    if (tp->regs == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int p = 0; p < tp->nranks; p++) {
        uint32_t nw;
        volatile uint64_t *w = nvl_words(tp, p, &nw);

        if (w != NULL && nw > 0) {
            uintptr_t lo = (uintptr_t)w & ~(pg - 1);
            uintptr_t hi = ((uintptr_t)(w + nw) + pg - 1) & ~(pg - 1);

            tp->regs[n].base = (void *)lo;
            tp->regs[n++].bytes = hi - lo;
        }
    }
    qsort(tp->regs, (size_t)n, sizeof(*tp->regs), nvl_cmp_reg);
    for (int i = 0; i < n; i++) {
        nvl_reg_t *last = tp->nregs > 0 ? &tp->regs[tp->nregs - 1] : NULL;
        uintptr_t b = (uintptr_t)tp->regs[i].base;
        uintptr_t e = b + tp->regs[i].bytes;

        if (last != NULL && b <= (uintptr_t)last->base + last->bytes) {
            uintptr_t le = (uintptr_t)last->base + last->bytes;
            last->bytes = (e > le ? e : le) - (uintptr_t)last->base;
        } else {
            tp->regs[tp->nregs++] = tp->regs[i];
        }
    }
    for (int i = 0; i < tp->nregs; i++) {
        cudaError_t e = cudaHostRegister(tp->regs[i].base, tp->regs[i].bytes,
                                         cudaHostRegisterMapped |
                                             cudaHostRegisterPortable);
        if (e == cudaErrorHostMemoryAlreadyRegistered) {
            (void)cudaGetLastError();
            tp->regs[i].owned = 0;
        } else if (e != cudaSuccess) {
            tp->nregs = i;
            return nvl_rt_error(tp, e, -1, "cudaHostRegister of signal words");
        } else {
            tp->regs[i].owned = 1;
        }
    }
    for (int p = 0; p < tp->nranks; p++) {
        uint32_t nw;
        volatile uint64_t *w = nvl_words(tp, p, &nw);
        void *d = NULL;
        cudaError_t e;

        tp->sig_n[p] = nw;
        if (w == NULL || nw == 0) {
            continue;
        }
        e = cudaHostGetDevicePointer(&d, (void *)(uintptr_t)w, 0);
        if (e != cudaSuccess) {
            return nvl_rt_error(tp, e, p, "cudaHostGetDevicePointer of the "
                                "signal words");
        }
        tp->sig_dev[p] = (CUdeviceptr)(uintptr_t)d;
    }
    return RMACOLL_SUCCESS;
}

/* Releases the GPU part (idempotent). */
static void nvl_gpu_free(rmacoll_transport_t *tp)
{
    for (size_t i = 0; i < tp->nimports; i++) {
        cudaError_t e = cudaIpcCloseMemHandle(tp->imports[i].mapped);

        if (e != cudaSuccess) {
            nvl_rt_error(tp, e, tp->imports[i].peer, "cudaIpcCloseMemHandle");
        }
    }
    tp->nimports = 0;
    for (int i = 0; i < tp->nregs; i++) {
        if (tp->regs[i].owned) {
            cudaError_t e = cudaHostUnregister(tp->regs[i].base);

            if (e != cudaSuccess) {
                nvl_rt_error(tp, e, -1, "cudaHostUnregister of signal words");
            }
        }
    }
    tp->nregs = 0;
    if (tp->counters != NULL) {
        cudaFree(tp->counters);
        tp->counters = NULL;
    }
    if (tp->event != NULL) {
        cudaEventDestroy(tp->event);
        tp->event = NULL;
    }
    if (tp->stream != NULL) {
        cudaStreamDestroy(tp->stream);
        tp->stream = NULL;
    }
    tp->on = 0;
}

static void nvl_free(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        nvl_gpu_free(tp);
        free(tp->imports);
        free(tp->regs);
        free(tp->sig_dev);
        free(tp->sig_n);
        free(tp);
    }
}

/* Sets up the GPU part; RMACOLL_SUCCESS with tp->on == 0 when no GPU is
 * usable (the reason in tp->off_why), an error only for lack of memory. */
static rmacoll_status_t nvl_gpu_init(rmacoll_transport_t *tp)
{
    int ndev = 0;
    int v64 = 0;
    void *fn;
    PFN_cuDeviceGet_v2000 dev_get = NULL;
    PFN_cuDeviceGetAttribute_v2000 dev_attr = NULL;
    CUdevice cudev;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    rmacoll_status_t st;
    size_t cbytes = (size_t)RMACOLL__NVL_RING * RMACOLL__NVL_MAX_ENTRIES *
                    sizeof(uint32_t);

    tp->off_status = RMACOLL_ERR_NO_DEVICE;
    if (e != cudaSuccess || ndev <= 0) {
        (void)cudaGetLastError();
        snprintf(tp->off_why, sizeof(tp->off_why), "no usable GPU "
                 "(cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        NVL_LOG(tp, RMACOLL_LOG_DEBUG, "nvlink_kernel: off: %s", tp->off_why);
        return RMACOLL_SUCCESS;
    }
    tp->off_status = RMACOLL_ERR_CUDA;
    e = cudaGetDevice(&tp->device);
    if (e != cudaSuccess) {
        snprintf(tp->off_why, sizeof(tp->off_why), "cudaGetDevice failed: %s",
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        goto off;
    }
    if (nvl_entry(&fn, "cuStreamWaitValue64", 12000) == 0) {
        memcpy(&tp->wait64, &fn, sizeof(fn));
    }
    if (nvl_entry(&fn, "cuStreamWriteValue64", 12000) == 0) {
        memcpy(&tp->write64, &fn, sizeof(fn));
    }
    if (nvl_entry(&fn, "cuStreamBatchMemOp", 12000) == 0) {
        memcpy(&tp->batch, &fn, sizeof(fn));
    }
    if (nvl_entry(&fn, "cuMemGetAddressRange", 3020) == 0) {
        memcpy(&tp->get_range, &fn, sizeof(fn));
    }
    if (nvl_entry(&fn, "cuGetErrorString", 6000) == 0) {
        memcpy(&tp->error_string, &fn, sizeof(fn));
    }
    if (nvl_entry(&fn, "cuDeviceGet", 2000) == 0) {
        memcpy(&dev_get, &fn, sizeof(fn));
    }
    if (nvl_entry(&fn, "cuDeviceGetAttribute", 2000) == 0) {
        memcpy(&dev_attr, &fn, sizeof(fn));
    }
    if (tp->wait64 == NULL || tp->write64 == NULL || tp->batch == NULL ||
        tp->get_range == NULL || dev_get == NULL || dev_attr == NULL) {
        snprintf(tp->off_why, sizeof(tp->off_why), "device %d: the driver "
                 "lacks stream memory operations or cuMemGetAddressRange "
                 "(entry points of CUDA 12.0 not found)", tp->device);
        goto off;
    }
    if (dev_get(&cudev, tp->device) != CUDA_SUCCESS ||
        dev_attr(&v64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                 cudev) != CUDA_SUCCESS || !v64) {
        snprintf(tp->off_why, sizeof(tp->off_why), "device %d lacks "
                 "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS",
                 tp->device);
        goto off;
    }
    st = nvl_register_windows(tp);
    if (st == RMACOLL_ERR_NO_MEMORY) {
        return st;
    }
    if (st != RMACOLL_SUCCESS) {
        snprintf(tp->off_why, sizeof(tp->off_why), "device %d: cannot map "
                 "the signal words for the GPU (cause logged above)",
                 tp->device);
        goto off;
    }
    e = cudaMalloc((void **)&tp->counters, cbytes);
    if (e == cudaSuccess) {
        e = cudaMemset(tp->counters, 0, cbytes); /* synchronous for the host */
    }
    if (e == cudaSuccess) {
        e = cudaStreamCreateWithFlags(&tp->stream, cudaStreamNonBlocking);
    }
    if (e == cudaSuccess) {
        e = cudaEventCreateWithFlags(&tp->event, cudaEventDisableTiming);
    }
    if (e == cudaSuccess) {
        e = cudaDeviceSynchronize(); /* counters are zero before any launch */
    }
    if (e != cudaSuccess) {
        nvl_rt_error(tp, e, -1, "allocating the kernel's counters and stream");
        snprintf(tp->off_why, sizeof(tp->off_why), "device %d: cannot "
                 "allocate %zu bytes of counters or a stream", tp->device,
                 cbytes);
        goto off;
    }
    tp->on = 1;
    tp->off_status = RMACOLL_SUCCESS;
    NVL_LOG(tp, RMACOLL_LOG_DEBUG, "nvlink_kernel: on device %d", tp->device);
    return RMACOLL_SUCCESS;
off:
    nvl_gpu_free(tp);
    NVL_LOG(tp, RMACOLL_LOG_WARN, "nvlink_kernel: off, device buffers "
            "unsupported: %s", tp->off_why);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_init(const rmacoll_transport_env_t *env,
                                 rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    rmacoll_status_t st;

    if (tpp == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *tpp = NULL;
    if (env == NULL || env->struct_size < sizeof(*env) || env->nranks < 1 ||
        env->rank < 0 || env->rank >= env->nranks || env->peers == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    tp->env = env;
    tp->rank = env->rank;
    tp->nranks = env->nranks;
    tp->error_peer = -1;
    tp->sig_dev = calloc((size_t)env->nranks, sizeof(*tp->sig_dev));
    tp->sig_n = calloc((size_t)env->nranks, sizeof(*tp->sig_n));
    if (tp->sig_dev == NULL || tp->sig_n == NULL) {
        nvl_free(tp);
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = nvl_gpu_init(tp);
    if (st != RMACOLL_SUCCESS) {
        nvl_free(tp);
        return st;
    }
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

static void nvl_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL && tp->on) {
        cudaStreamSynchronize(tp->stream);
    }
    nvl_free(tp);
}

/* ---- memory ----------------------------------------------------------- */

static rmacoll_status_t nvl_device_range(rmacoll_transport_t *tp, void *addr,
                                         size_t bytes, CUdeviceptr *base,
                                         size_t *size)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, addr);
    CUresult r;

    if (e != cudaSuccess) {
        return nvl_rt_error(tp, e, -1, "cudaPointerGetAttributes");
    }
    if (a.type != cudaMemoryTypeDevice) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: %zu bytes at %p are "
                "not device memory (cudaMemoryType %d)", bytes, addr,
                (int)a.type);
        return RMACOLL_ERR_INVALID_ARG;
    }
    r = tp->get_range(base, size, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) {
        return nvl_drv_error(tp, r, -1, "cuMemGetAddressRange");
    }
    if ((uint64_t)(uintptr_t)addr + bytes > (uint64_t)*base + *size) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: %zu bytes at %p run "
                "past their allocation (%zu bytes at 0x%llx)", bytes, addr,
                *size, (unsigned long long)*base);
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_mem_register(rmacoll_transport_t *tp, void *addr,
                                         size_t bytes, rmacoll_memtype_t type,
                                         rmacoll_mem_t **mem,
                                         rmacoll_rkey_t *rkey)
{
    CUdeviceptr base;
    size_t size;
    rmacoll_status_t st;

    if (tp == NULL || mem == NULL || (addr == NULL && bytes > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *mem = NULL;
    if (type != RMACOLL_MEM_CUDA) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: %zu bytes of host "
                "memory at %p: this transport moves device memory only "
                "(use ce)", bytes, addr);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if (!tp->on) {
        return nvl_off(tp, "mem_register");
    }
    if (bytes > 0) {
        st = nvl_device_range(tp, addr, bytes, &base, &size);
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

static rmacoll_status_t nvl_mem_deregister(rmacoll_transport_t *tp,
                                           rmacoll_mem_t *mem)
{
    return mem == NULL ? RMACOLL_SUCCESS : RMACOLL_ERR_INVALID_ARG;
}

static rmacoll_status_t nvl_mem_export(rmacoll_transport_t *tp, void *addr,
                                       size_t bytes, void *blob)
{
    nvl_blob_t b;
    cudaIpcMemHandle_t h;
    CUdeviceptr base;
    size_t size;
    cudaError_t e;
    rmacoll_status_t st;

    if (tp == NULL || blob == NULL || addr == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "mem_export");
    }
    st = nvl_device_range(tp, addr, bytes, &base, &size);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
        return nvl_rt_error(tp, e, -1, "cudaIpcGetMemHandle of the buffer's "
                            "allocation (cuMem/VMM and managed allocations "
                            "cannot be exported)");
    }
    memset(&b, 0, sizeof(b));
    b.magic = NVL_BLOB_MAGIC;
    b.rank = (uint32_t)tp->rank;
    b.base = (uint64_t)base;
    b.offset = (uint64_t)(uintptr_t)addr - (uint64_t)base;
    b.bytes = (uint64_t)bytes;
    memcpy(b.handle, &h, sizeof(b.handle));
    memcpy(blob, &b, sizeof(b));
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_mem_import(rmacoll_transport_t *tp, int peer,
                                       const void *blob, uint64_t *addr)
{
    nvl_blob_t b;
    cudaIpcMemHandle_t h;
    void *mapped = NULL;
    cudaError_t e;

    if (tp == NULL || blob == NULL || addr == NULL || peer < 0 ||
        peer >= tp->nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "mem_import");
    }
    memcpy(&b, blob, sizeof(b));
    if (b.magic != NVL_BLOB_MAGIC || b.rank != (uint32_t)peer) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: export blob of peer %d "
                "is not an nvlink_kernel export of that peer (magic 0x%x, "
                "rank %u)", peer, b.magic, b.rank);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (peer == tp->rank) {
        *addr = b.base + b.offset;
        return RMACOLL_SUCCESS;
    }
    for (size_t i = 0; i < tp->nimports; i++) {
        if (memcmp(tp->imports[i].handle, b.handle, sizeof(b.handle)) == 0) {
            *addr = (uint64_t)(uintptr_t)tp->imports[i].mapped + b.offset;
            return RMACOLL_SUCCESS;
        }
    }
    if (tp->nimports == tp->cap_imports) {
        size_t cap = tp->cap_imports ? 2 * tp->cap_imports : 16;
        nvl_import_t *n = realloc(tp->imports, cap * sizeof(*n));

        if (n == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        tp->imports = n;
        tp->cap_imports = cap;
    }
    memcpy(&h, b.handle, sizeof(h));
    e = cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        return nvl_rt_error(tp, e, peer, "cudaIpcOpenMemHandle of the peer's "
                            "device buffer");
    }
    memcpy(tp->imports[tp->nimports].handle, b.handle, sizeof(b.handle));
    tp->imports[tp->nimports].mapped = mapped;
    tp->imports[tp->nimports].peer = peer;
    tp->nimports++;
    *addr = (uint64_t)(uintptr_t)mapped + b.offset;
    return RMACOLL_SUCCESS;
}

/* ---- stream operations ------------------------------------------------ */

static rmacoll_status_t nvl_check_put(rmacoll_transport_t *tp,
                                      const rmacoll_put_t *p, size_t i,
                                      CUdeviceptr *sig)
{
    *sig = 0;
    if (p->peer < 0 || p->peer >= tp->nranks ||
        (p->peer != tp->rank && !tp->env->peers[p->peer])) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: put %zu of %llu bytes "
                "names peer %d, not a node peer of this instance", i,
                (unsigned long long)p->bytes, p->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->bytes > 0 && (p->src == NULL || p->dst_addr == 0 ||
                         p->dst_addr + p->bytes < p->dst_addr)) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: put %zu of %llu bytes "
                "to peer %d has src %p, dst 0x%llx", i,
                (unsigned long long)p->bytes, p->peer, p->src,
                (unsigned long long)p->dst_addr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->sig_index == RMACOLL_NO_SIGNAL) {
        return RMACOLL_SUCCESS;
    }
    if (tp->sig_dev[p->peer] == 0 || p->sig_index >= tp->sig_n[p->peer]) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: put %zu to peer %d "
                "signals word %u of %u%s", i, p->peer, p->sig_index,
                tp->sig_n[p->peer],
                tp->sig_dev[p->peer] == 0 ? ", but the peer's signal words "
                                            "are not mapped" : "");
        return RMACOLL_ERR_INVALID_ARG;
    }
    *sig = tp->sig_dev[p->peer] + (CUdeviceptr)p->sig_index * sizeof(uint64_t);
    return RMACOLL_SUCCESS;
}

/* Completes the descriptor (blocks, groups, counters) and launches it. */
static rmacoll_status_t nvl_launch(rmacoll_transport_t *tp, cudaStream_t s)
{
    rmacoll__nvl_batch_t *b = &tp->batch_desc;
    uint32_t blk = 0;
    cudaError_t e;

    if (b->n == 0) {
        return RMACOLL_SUCCESS;
    }
    memset(b->gblocks, 0, sizeof(b->gblocks));
    for (uint32_t k = 0; k < b->n; k++) {
        b->first_block[k] = blk;
        blk += tp->eblocks[k];
    }
    b->first_block[b->n] = blk;
    b->nblocks = blk;
    /* a group with at least one signal counts all its blocks */
    for (uint32_t k = 0; k < b->n; k++) {
        if (b->e[k].sig != 0) {
            uint32_t g = b->group[k];

            if (b->gblocks[g] == 0) {
                for (uint32_t m = g; m < b->n; m++) {
                    if (b->group[m] == g) {
                        b->gblocks[g] += tp->eblocks[m];
                    }
                }
            }
        }
    }
    b->counters = tp->counters +
                  (size_t)(tp->ring++ % RMACOLL__NVL_RING) *
                      RMACOLL__NVL_MAX_ENTRIES;
    e = rmacoll__nvl_launch(b, s);
    if (e != cudaSuccess) {
        char what[96];

        snprintf(what, sizeof(what), "launch of the copy kernel for %u puts "
                 "(%u blocks)", b->n, b->nblocks);
        return nvl_rt_error(tp, e, tp->peer_of[0], what);
    }
    b->n = 0;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_check_stream(rmacoll_transport_t *tp,
                                         cudaStream_t s)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &cs);

    if (e != cudaSuccess) {
        return nvl_rt_error(tp, e, -1, "cudaStreamIsCapturing of the caller's "
                            "stream");
    }
    if (cs != cudaStreamCaptureStatusNone) {
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: the stream is being "
                "captured into a CUDA graph, which is not supported");
        return RMACOLL_ERR_UNSUPPORTED;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_post_puts_stream(rmacoll_transport_t *tp,
                                             const rmacoll_put_t *puts,
                                             size_t n, void *stream)
{
    rmacoll__nvl_batch_t *b;
    cudaStream_t s = (cudaStream_t)stream;
    rmacoll_status_t st;

    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "post_puts_stream");
    }
    if (n == 0) {
        return nvl_check_stream(tp, s);
    }
    for (size_t i = 0; i < n; i++) {
        CUdeviceptr sig;

        st = nvl_check_put(tp, &puts[i], i, &sig);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    b = &tp->batch_desc;
    b->n = 0;
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *p = &puts[i];
        CUdeviceptr sig;
        uint32_t k;
        uint64_t nb;

        (void)nvl_check_put(tp, p, i, &sig);
        if (p->bytes == 0 && sig == 0) {
            continue;
        }
        if (b->n == RMACOLL__NVL_MAX_ENTRIES) {
            /* later launches on the stream start after this one ends */
            st = nvl_launch(tp, s);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        k = b->n++;
        b->e[k].src = (uint64_t)(uintptr_t)p->src;
        b->e[k].dst = p->dst_addr;
        b->e[k].bytes = p->bytes;
        b->e[k].sig = (uint64_t)sig;
        b->e[k].value = p->sig_value;
        tp->peer_of[k] = p->peer;
        nb = (p->bytes + NVL_BYTES_PER_BLOCK - 1) / NVL_BYTES_PER_BLOCK;
        tp->eblocks[k] = nb == 0 ? 1u
                         : nb > NVL_MAX_BLOCKS_PER_ENTRY
                             ? NVL_MAX_BLOCKS_PER_ENTRY
                             : (uint32_t)nb;
        b->group[k] = (uint8_t)k;
        for (uint32_t m = 0; m < k; m++) {
            if (tp->peer_of[m] == p->peer) {
                b->group[k] = b->group[m];
                break;
            }
        }
    }
    return nvl_launch(tp, s);
}

static rmacoll_status_t nvl_flush_ops(rmacoll_transport_t *tp, cudaStream_t s,
                                      unsigned n, int peer, int write)
{
    CUresult r;

    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    if (n == 1 && write) {
        r = tp->write64((CUstream)s, tp->ops[0].writeValue.address,
                        tp->ops[0].writeValue.value64,
                        tp->ops[0].writeValue.flags);
    } else if (n == 1) {
        r = tp->wait64((CUstream)s, tp->ops[0].waitValue.address,
                       tp->ops[0].waitValue.value64,
                       tp->ops[0].waitValue.flags);
    } else {
        r = tp->batch((CUstream)s, n, tp->ops, 0);
    }
    if (r != CUDA_SUCCESS) {
        return nvl_drv_error(tp, r, peer, write ? "stream write of a signal "
                                                  "word"
                                                : "stream wait on a signal "
                                                  "word");
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_wait_stream(rmacoll_transport_t *tp,
                                        const uint32_t *idx,
                                        const uint64_t *values, size_t n,
                                        void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned nops = 0;
    rmacoll_status_t st;

    if (tp == NULL || (n > 0 && (idx == NULL || values == NULL))) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "wait_stream");
    }
    for (size_t k = 0; k < n; k++) {
        if (idx[k] >= tp->sig_n[tp->rank] || tp->sig_dev[tp->rank] == 0) {
            NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: stream wait %zu on "
                    "own word %u of %u", k, idx[k], tp->sig_n[tp->rank]);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    for (size_t k = 0; k < n; k++) {
        CUstreamBatchMemOpParams *op;

        if (nops == NVL_MAX_OPS) {
            st = nvl_flush_ops(tp, s, nops, tp->rank, 0);
            nops = 0;
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        op = &tp->ops[nops++];
        memset(op, 0, sizeof(*op));
        op->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        op->waitValue.address =
            tp->sig_dev[tp->rank] + (CUdeviceptr)idx[k] * sizeof(uint64_t);
        op->waitValue.value64 = values[k];
        op->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    }
    return nvl_flush_ops(tp, s, nops, tp->rank, 0);
}

static rmacoll_status_t nvl_signal_stream(rmacoll_transport_t *tp, int peer,
                                          uint32_t idx, uint64_t value,
                                          void *stream)
{
    rmacoll_put_t p = {
        .peer = peer,
        .bytes = 0,
        .sig_index = idx,
        .sig_value = value,
    };
    CUdeviceptr sig;
    rmacoll_status_t st;

    if (tp == NULL || idx == RMACOLL_NO_SIGNAL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "signal_stream");
    }
    st = nvl_check_put(tp, &p, 0, &sig);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    memset(&tp->ops[0], 0, sizeof(tp->ops[0]));
    tp->ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    tp->ops[0].writeValue.address = sig;
    tp->ops[0].writeValue.value64 = value;
    tp->ops[0].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    return nvl_flush_ops(tp, (cudaStream_t)stream, 1, peer, 1);
}

/* ---- host-driven ops ---------------------------------------------------- */

/* Puts of device memory on the transport's own stream; pending() counts
 * them until the stream passed them. */
static rmacoll_status_t nvl_post_puts(rmacoll_transport_t *tp,
                                      const rmacoll_put_t *puts, size_t n)
{
    rmacoll_status_t st;
    cudaError_t e;

    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    if (!tp->on) {
        return nvl_off(tp, "post_puts");
    }
    st = nvl_post_puts_stream(tp, puts, n, tp->stream);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    e = cudaEventRecord(tp->event, tp->stream);
    if (e != cudaSuccess) {
        return nvl_rt_error(tp, e, -1, "cudaEventRecord after a queue");
    }
    tp->pending += n;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_progress(rmacoll_transport_t *tp)
{
    cudaError_t e;

    if (tp == NULL || !tp->on || tp->pending == 0) {
        return RMACOLL_SUCCESS;
    }
    e = cudaEventQuery(tp->event);
    if (e == cudaSuccess) {
        tp->pending = 0;
    } else if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
    } else {
        return nvl_rt_error(tp, e, -1, "cudaEventQuery of posted puts");
    }
    return RMACOLL_SUCCESS;
}

static size_t nvl_pending(rmacoll_transport_t *tp)
{
    if (tp == NULL) {
        return 0;
    }
    (void)nvl_progress(tp);
    return tp->pending;
}

static int nvl_error_peer(rmacoll_transport_t *tp)
{
    return tp != NULL ? tp->error_peer : -1;
}

static const rmacoll_transport_base_ops_t nvl_base_ops = {
    .size = sizeof(rmacoll_transport_base_ops_t),
    .init = nvl_init,
    .finalize = nvl_finalize,
    .progress = nvl_progress,
    .pending = nvl_pending,
    .error_peer = nvl_error_peer,
};

static const rmacoll_transport_mem_ops_t nvl_mem_ops = {
    .size = sizeof(rmacoll_transport_mem_ops_t),
    .mem_register = nvl_mem_register,
    .mem_deregister = nvl_mem_deregister,
    .mem_export = nvl_mem_export,
    .mem_import = nvl_mem_import,
};

/* device memory from the host thread, on the transport's own stream */
static const rmacoll_transport_host_ops_t nvl_host_ops = {
    .size = sizeof(rmacoll_transport_host_ops_t),
    .post_puts = nvl_post_puts,
};

static const rmacoll_transport_stream_ops_t nvl_stream_ops = {
    .size = sizeof(rmacoll_transport_stream_ops_t),
    .post_puts_stream = nvl_post_puts_stream,
    .wait_stream = nvl_wait_stream,
    .signal_stream = nvl_signal_stream,
};

const rmacoll_transport_ops_t rmacoll_transport_nvlink_kernel_ops = {
    .abi_version = RMACOLL_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(rmacoll_transport_ops_t),
    .name = "nvlink_kernel",
    .desc = "node peers, device memory: one CUDA kernel per queue copies over "
            "IPC-mapped peer pointers and signals (small messages)",
    .caps = RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA,
    .small_max_key = "nvlink_kernel_threshold",
    .base = &nvl_base_ops,
    .mem = &nvl_mem_ops,
    .host = &nvl_host_ops,
    .stream = &nvl_stream_ops,
};
