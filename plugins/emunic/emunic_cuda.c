/*
 * emunic_cuda.c - emunic's device memory (built with CUDA, a device
 * present): the probe for a device and the driver entry points, the
 * allocation of a registration published with its IPC handle in the own
 * segment, a writer's mapping of a peer's slot (cached by slot and
 * generation), and the device copy on a stream per peer with its event.
 * Compiled to nothing without EMUNIC_HAVE_CUDA.
 */
#include "emunic_int.h"

#ifdef EMUNIC_HAVE_CUDA
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
        cudaIpcMemHandle_t h;
        void *p = NULL;
        cudaError_t e;

        if (m->ptr != NULL) {
            (void)cudaIpcCloseMemHandle(m->ptr);
            m->ptr = NULL;
        }
        memcpy(&h, sl->ipc, sizeof(h) < EMU_IPC_BYTES ? sizeof(h) : EMU_IPC_BYTES);
        e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
        if (e == cudaErrorAlreadyMapped) {
            /* this writer still maps memory the peer freed, and the peer's
             * cudaMalloc gave the new allocation the same addresses. The
             * stale mapping cannot be closed here: cudaIpcCloseMemHandle
             * waits for the whole context, whose user stream waits for
             * this data phase (a deadlock, seen on the GPU machine) */
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: rank %d: peer %d's slot %u (0x%" PRIx64
                    ", %" PRIu64 " bytes) overlaps memory of that peer this rank still "
                    "maps (freed and allocated again at the same addresses): not "
                    "supported yet (issue 32)", tp->rank, peer, k->slot, base, size);
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
    e = cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDefault, tp->stream[peer]);
    if (e == cudaSuccess) {
        e = cudaEventRecord(tp->events[ev], tp->stream[peer]);
    }
    return e == cudaSuccess ? RMACOLL_SUCCESS : emu_cuda_err(tp, peer, "cudaMemcpyAsync", e);
}
#endif /* EMUNIC_HAVE_CUDA */
