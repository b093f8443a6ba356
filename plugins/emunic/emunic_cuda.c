/*
 * emunic_cuda.c - emunic's device memory (built with CUDA, a device
 * present): the probe for a device and the driver entry points, the
 * allocation of a registration published with its IPC handle in the own
 * segment, a writer's mapping of a peer's slot (cached by slot and
 * generation; stale ones closed first), the device copy on a stream per
 * peer with its event, and emunic's own context for peers in other
 * processes.
 * Compiled to nothing without EMUNIC_HAVE_CUDA.
 */
#include "emunic_int.h"

#ifdef EMUNIC_HAVE_CUDA
#include <cudaTypedefs.h>
#include <pthread.h>

#define EMU_MAX_DEVICES 64

/* Driver functions for emunic's own context, looked up once per process,
 * each at the version of the signature used here (a lookup at a later
 * version returns the latest variant by then: cuCtxCreate at 12000 is
 * cuCtxCreate_v3, with affinity parameters). */
typedef struct emu_drv {
    int loaded;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuCtxCreate_v3020 ctx_create;
    PFN_cuCtxDestroy_v4000 ctx_destroy;
    PFN_cuCtxPushCurrent_v4000 ctx_push;
    PFN_cuCtxPopCurrent_v4000 ctx_pop;
    PFN_cuMemcpyPeerAsync_v4000 memcpy_peer;
} emu_drv_t;

/* The process's contexts, one per device, counted by the instances that
 * took them. */
static struct {
    pthread_mutex_t mu;
    emu_drv_t drv;
    CUcontext ctx[EMU_MAX_DEVICES];
    int refs[EMU_MAX_DEVICES];
} emu_xctx_tab = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, {0}};

static int emu_driver_fn(const char *name, int version, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;

    *fn = NULL;
    if (cudaGetDriverEntryPointByVersion(name, fn, (unsigned int)version, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || *fn == NULL) {
        (void)cudaGetLastError();
        return 0;
    }
    return 1;
}

/* Under emu_xctx_tab.mu. */
static int emu_drv_load(emu_drv_t *d)
{
    void *f[6];

    if (d->loaded) {
        return 1;
    }
    if (!emu_driver_fn("cuDeviceGet", 2000, &f[0]) ||
        !emu_driver_fn("cuCtxCreate", 3020, &f[1]) ||
        !emu_driver_fn("cuCtxDestroy", 4000, &f[2]) ||
        !emu_driver_fn("cuCtxPushCurrent", 4000, &f[3]) ||
        !emu_driver_fn("cuCtxPopCurrent", 4000, &f[4]) ||
        !emu_driver_fn("cuMemcpyPeerAsync", 4000, &f[5])) {
        return 0;
    }
    d->device_get = (PFN_cuDeviceGet_v2000)f[0];
    d->ctx_create = (PFN_cuCtxCreate_v3020)f[1];
    d->ctx_destroy = (PFN_cuCtxDestroy_v4000)f[2];
    d->ctx_push = (PFN_cuCtxPushCurrent_v4000)f[3];
    d->ctx_pop = (PFN_cuCtxPopCurrent_v4000)f[4];
    d->memcpy_peer = (PFN_cuMemcpyPeerAsync_v4000)f[5];
    d->loaded = 1;
    return 1;
}

rmacoll_status_t emu_xctx_take(rmacoll_transport_t *tp)
{
    emu_drv_t *d = &emu_xctx_tab.drv;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    int need = 0;

    for (int q = 0; q < tp->nranks; q++) {
        need |= q != tp->rank && tp->peer[q] != NULL && tp->addr[q].has_cuda &&
                tp->addr[q].pid != tp->addr[tp->rank].pid;
    }
    if (!need) {
        return RMACOLL_SUCCESS; /* threads of one process: the user's context */
    }
    if (tp->device < 0 || tp->device >= EMU_MAX_DEVICES) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: device %d: at most %d devices", tp->device,
                EMU_MAX_DEVICES);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&emu_xctx_tab.mu);
    if (!emu_drv_load(d)) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: the driver lacks a context call "
                "(cuCtxCreate, cuCtxPushCurrent, cuMemcpyPeerAsync, ...)");
        st = RMACOLL_ERR_UNSUPPORTED;
    } else if (emu_xctx_tab.refs[tp->device] == 0) {
        CUdevice dev = 0;
        CUcontext c = NULL, prev = NULL;
        CUresult r = d->device_get(&dev, tp->device);

        if (r == CUDA_SUCCESS) {
            r = d->ctx_create(&c, CU_CTX_SCHED_AUTO, dev); /* current until popped */
        }
        if (r == CUDA_SUCCESS) {
            (void)d->ctx_pop(&prev);
            emu_xctx_tab.ctx[tp->device] = c;
        } else {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: cannot create a CUDA context on "
                    "device %d (CUresult %d)", tp->device, (int)r);
            st = RMACOLL_ERR_TRANSPORT;
        }
    }
    if (st == RMACOLL_SUCCESS) {
        emu_xctx_tab.refs[tp->device]++;
        tp->xctx = emu_xctx_tab.ctx[tp->device];
    }
    pthread_mutex_unlock(&emu_xctx_tab.mu);
    return st;
}

void emu_xctx_drop(rmacoll_transport_t *tp)
{
    if (tp->xctx == NULL) {
        return;
    }
    pthread_mutex_lock(&emu_xctx_tab.mu);
    if (--emu_xctx_tab.refs[tp->device] == 0) {
        (void)emu_xctx_tab.drv.ctx_destroy(emu_xctx_tab.ctx[tp->device]);
        emu_xctx_tab.ctx[tp->device] = NULL;
    }
    pthread_mutex_unlock(&emu_xctx_tab.mu);
    tp->xctx = NULL;
}

rmacoll_status_t emu_ctx_enter(rmacoll_transport_t *tp)
{
    CUresult r;

    if (tp->xctx == NULL) {
        return RMACOLL_SUCCESS;
    }
    r = emu_xctx_tab.drv.ctx_push(tp->xctx);
    if (r != CUDA_SUCCESS) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: rank %d: cuCtxPushCurrent of emunic's "
                "context failed (CUresult %d)", tp->rank, (int)r);
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

void emu_ctx_leave(rmacoll_transport_t *tp)
{
    if (tp->xctx != NULL) {
        CUcontext c = NULL;
        (void)emu_xctx_tab.drv.ctx_pop(&c);
    }
}

/* The context of device memory at p, or NULL (host memory, or memory
 * whose context the driver does not say, such as a pool's). */
static CUcontext emu_dev_ctx(rmacoll_transport_t *tp, const void *p)
{
    unsigned int type = 0;
    CUcontext c = NULL;

    if (tp->get_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) !=
            CUDA_SUCCESS ||
        type != CU_MEMORYTYPE_DEVICE ||
        tp->get_attr(&c, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)(uintptr_t)p) !=
            CUDA_SUCCESS) {
        return NULL;
    }
    return c;
}

int emu_cuda_probe(rmacoll_transport_t *tp)
{
    enum cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    int n = 0;

    if (getenv("RMACOLL_EMUNIC_NO_CUDA") != NULL) {
        return 0;
    }
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0 || cudaGetDevice(&tp->device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || fn == NULL) {
        (void)cudaGetLastError();
        return 0;
    }
    tp->get_range = (CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr))fn;
    fn = NULL;
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || fn == NULL) {
        (void)cudaGetLastError();
        return 0;
    }
    tp->get_attr = (CUresult(*)(void *, CUpointer_attribute, CUdeviceptr))fn;
    tp->maps = calloc((size_t)tp->nranks * EMU_SLOTS, sizeof(*tp->maps));
    tp->stream = calloc((size_t)tp->nranks, sizeof(*tp->stream));
    tp->events = calloc(tp->fly_cap, sizeof(*tp->events));
    return tp->maps != NULL && tp->stream != NULL && tp->events != NULL;
}

rmacoll_status_t emu_cuda_err(rmacoll_transport_t *tp, int peer, const char *what,
                              cudaError_t e)
{
    EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: %s (peer %d) failed: %s", what, peer,
            cudaGetErrorString(e));
    (void)cudaGetLastError();
    tp->error_peer = peer;
    return RMACOLL_ERR_TRANSPORT;
}

/* Publishes the allocation holding [addr, addr + bytes) in a slot of the
 * own segment (the same allocation, by buffer id, reuses its slot). */
rmacoll_status_t emu_publish(rmacoll_transport_t *tp, void *addr, size_t bytes,
                             int *slot_out)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    unsigned long long id = 0;
    cudaIpcMemHandle_t h;
    cudaError_t e;
    int free_slot = -1, lru = -1;

    if (tp->get_range(&base, &size, (CUdeviceptr)(uintptr_t)addr) != CUDA_SUCCESS ||
        (uint64_t)(uintptr_t)addr + bytes > (uint64_t)base + size) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: %zu bytes at %p are not one device "
                "allocation (cuMemGetAddressRange)", bytes, addr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->get_attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, base) != CUDA_SUCCESS) {
        id = 0;
    }
    for (int s = 0; s < EMU_SLOTS; s++) {
        emu_slot_t *sl = &tp->own->slot[s];
        uint64_t g = __atomic_load_n(&sl->gen, __ATOMIC_RELAXED);
        if (g != 0 && sl->base == base && sl->size == size && id != 0 && sl->buffer_id == id) {
            tp->slot_refs[s]++;
            *slot_out = s;
            return RMACOLL_SUCCESS;
        }
        if (g == 0 && free_slot < 0) {
            free_slot = s;
        }
        if (g != 0 && tp->slot_refs[s] == 0 && lru < 0) {
            lru = s;
        }
    }
    if (free_slot < 0) {
        free_slot = lru;
    }
    if (free_slot < 0) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: more than %d device registrations in use",
                EMU_SLOTS);
        return RMACOLL_ERR_NO_MEMORY;
    }
    e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
        return emu_cuda_err(tp, tp->rank, "cudaIpcGetMemHandle", e);
    }
    {
        emu_slot_t *sl = &tp->own->slot[free_slot];
        uint64_t g = __atomic_load_n(&sl->gen, __ATOMIC_RELAXED);
        uint64_t w = (g & 1) ? g : g + 1;
        /* odd while written: a writer that reads it then (a stale key) is
         * refused; the new key, even, is handed out only afterwards */
        __atomic_store_n(&sl->gen, w, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        sl->base = base;
        sl->size = size;
        sl->buffer_id = id;
        memcpy(sl->ipc, &h, sizeof(h) < EMU_IPC_BYTES ? sizeof(h) : EMU_IPC_BYTES);
        __atomic_store_n(&sl->gen, w + 1, __ATOMIC_RELEASE);
    }
    tp->slot_refs[free_slot] = 1;
    *slot_out = free_slot;
    return RMACOLL_SUCCESS;
}

/* Local address of the peer's device address dst (key k). */
rmacoll_status_t emu_dev_target(rmacoll_transport_t *tp, int peer, const emu_key_t *k,
                                uint64_t dst, uint64_t bytes, void **out)
{
    emu_slot_t *sl;
    emunic_map_t *m;
    uint64_t g, base, size;

    if (k->slot >= EMU_SLOTS) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    sl = &tp->peer[peer]->slot[k->slot];
    g = __atomic_load_n(&sl->gen, __ATOMIC_ACQUIRE);
    base = sl->base;
    size = sl->size;
    if (g != k->gen || dst < base || dst + bytes > base + size) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes to peer %d names "
                "a device registration that is gone (slot %u, generation %" PRIu64
                " against %" PRIu64 ")", bytes, peer, k->slot, k->gen, g);
        tp->error_peer = peer;
        return RMACOLL_ERR_TRANSPORT;
    }
    if (tp->addr[peer].pid == tp->addr[tp->rank].pid) {
        *out = (void *)(uintptr_t)dst; /* a thread of this process: one address space */
        return RMACOLL_SUCCESS;
    }
    m = &tp->maps[(size_t)peer * EMU_SLOTS + k->slot];
    if (m->ptr == NULL || m->gen != g) {
        emunic_map_t *pm = &tp->maps[(size_t)peer * EMU_SLOTS];
        unsigned char stale[EMU_SLOTS];
        cudaIpcMemHandle_t h;
        void *p = NULL;
        cudaError_t e;

        /* mappings of memory the peer freed (its allocator may hand the
         * same addresses out again: opening then fails with
         * cudaErrorAlreadyMapped) and the slot's older generation go
         * first. This runs in emunic's own context (tp->xctx, entered by
         * the caller: mappings exist only with it), so the close waits
         * for emunic's copies, not for the user's stream, which may be
         * waiting for this very call */
        if (emunic_maps_stale(pm, EMU_SLOTS, (int)k->slot, g, base, size, stale) > 0) {
            if (tp->stream[peer] != NULL) {
                (void)cudaStreamSynchronize(tp->stream[peer]); /* copies into them */
            }
            for (int t = 0; t < EMU_SLOTS; t++) {
                if (stale[t]) {
                    (void)cudaIpcCloseMemHandle(pm[t].ptr);
                    pm[t].ptr = NULL;
                }
            }
        }
        memcpy(&h, sl->ipc, sizeof(h) < EMU_IPC_BYTES ? sizeof(h) : EMU_IPC_BYTES);
        e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
        if (e == cudaErrorAlreadyMapped) {
            /* another instance of this process still maps the freed memory */
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: rank %d: peer %d's slot %u (0x%" PRIx64
                    ", %" PRIu64 " bytes) overlaps memory of that peer still mapped in "
                    "this process (freed and allocated again at the same addresses)",
                    tp->rank, peer, k->slot, base, size);
        }
        if (e != cudaSuccess) {
            return emu_cuda_err(tp, peer, "cudaIpcOpenMemHandle", e);
        }
        m->ptr = p;
        m->gen = g;
        m->base = base;
        m->size = size;
    }
    *out = (char *)m->ptr + (dst - base);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t emu_dev_copy(rmacoll_transport_t *tp, int peer, void *dst,
                              const void *src, uint64_t bytes, int ev)
{
    cudaError_t e;

    if (tp->stream[peer] == NULL) {
        e = cudaStreamCreateWithFlags(&tp->stream[peer], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            tp->stream[peer] = NULL;
            return emu_cuda_err(tp, peer, "cudaStreamCreateWithFlags", e);
        }
    }
    if (tp->events[ev] == NULL) {
        e = cudaEventCreateWithFlags(&tp->events[ev], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            tp->events[ev] = NULL;
            return emu_cuda_err(tp, peer, "cudaEventCreateWithFlags", e);
        }
    }
    if (tp->xctx != NULL) {
        /* own context: memory of two contexts (the user's, and peers'
         * mapped in this one) is copied as a peer copy where both say
         * theirs; otherwise (host memory, pool memory) by address */
        CUcontext sc = emu_dev_ctx(tp, src);
        CUcontext dc = tp->addr[peer].pid != tp->addr[tp->rank].pid
                           ? tp->xctx /* a mapping (emu_dev_target) */
                           : emu_dev_ctx(tp, dst);
        if (sc != NULL && dc != NULL) {
            CUresult r = emu_xctx_tab.drv.memcpy_peer((CUdeviceptr)(uintptr_t)dst, dc,
                                                      (CUdeviceptr)(uintptr_t)src, sc,
                                                      (size_t)bytes, tp->stream[peer]);
            if (r != CUDA_SUCCESS) {
                EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: cuMemcpyPeerAsync of %" PRIu64
                        " bytes to peer %d failed (CUresult %d)", bytes, peer, (int)r);
                tp->error_peer = peer;
                return RMACOLL_ERR_TRANSPORT;
            }
            e = cudaEventRecord(tp->events[ev], tp->stream[peer]);
            return e == cudaSuccess ? RMACOLL_SUCCESS
                                    : emu_cuda_err(tp, peer, "cudaEventRecord", e);
        }
    }
    e = cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDefault, tp->stream[peer]);
    if (e == cudaSuccess) {
        e = cudaEventRecord(tp->events[ev], tp->stream[peer]);
    }
    return e == cudaSuccess ? RMACOLL_SUCCESS : emu_cuda_err(tp, peer, "cudaMemcpyAsync", e);
}
#endif /* EMUNIC_HAVE_CUDA */
