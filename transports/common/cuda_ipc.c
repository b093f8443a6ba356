/*
 * cuda_ipc.c - device memory that node peers reach: the range checks of
 * registration, export of an allocation's IPC handle and its import
 * (mappings cached by handle; a reallocated range's stale mapping closed;
 * an export of this same process used directly), and the device-resident
 * signal words of set_device_signals.
 */
#define _GNU_SOURCE

#include "transports/common/cuda_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A cached mapping of b's handle: 1 with *addr set, else 0. One handle
 * may stand for several allocations: cudaMalloc sub-allocates small ones
 * from a larger block, and CUDA IPC shares the whole block (CUDA C++
 * Programming Guide, "Interprocess Communication"); the mapping covers the
 * block, so the address is the cached one moved by the difference of the
 * exporter's bases (0 for the allocation cached). */
static int cu_import_cached(rmacoll__cu_t *cu, int peer, const rmacoll__cu_blob_t *b,
                            uint64_t *addr)
{
    for (size_t i = 0; i < cu->nimports; i++) {
        const rmacoll__cu_import_t *m = &cu->imports[i];

        if (memcmp(m->handle, b->handle, sizeof(b->handle)) == 0) {
            *addr = (uint64_t)(uintptr_t)m->mapped + (b->base - m->base) + b->offset;
            if (m->base != b->base) {
                CU_LOG(cu, RMACOLL_LOG_DEBUG, "%s: rank %d's allocation at 0x%llx has the "
                       "IPC handle of its allocation at 0x%llx (one block): mapped at "
                       "0x%llx", cu->name, peer, (unsigned long long)b->base,
                       (unsigned long long)m->base, (unsigned long long)*addr);
            }
            rmacoll__cu_trace(cu, "import peer=%d base=0x%llx off=%llu same=%d hit=%zu "
                              "cached_base=0x%llx addr=0x%llx", peer,
                              (unsigned long long)b->base, (unsigned long long)b->offset,
                              m->same_process, i, (unsigned long long)m->base,
                              (unsigned long long)*addr);
            return 1;
        }
    }
    return 0;
}

/* Maps the allocation of b (room for one more cache entry made first):
 * *mapped its base here, *same 1 when the exporter is this process (used
 * directly). A stale mapping at the same exporter base is closed first; if
 * CUDA still finds the range mapped, every cached mapping of that peer. */
static rmacoll_status_t cu_import_map(rmacoll__cu_t *cu, int peer,
                                      const rmacoll__cu_blob_t *b, void **mapped, int *same)
{
    cudaIpcMemHandle_t h;
    cudaError_t e;

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
    memcpy(&h, b->handle, sizeof(h));
    *same = cu_same_process(cu, b);
    if (*same < 0) {
        return RMACOLL_ERR_CUDA;
    }
    if (*same) {
        *mapped = (void *)(uintptr_t)b->base;
        return RMACOLL_SUCCESS;
    }
    cu_close_stale(cu, peer, b->base, 0); /* a freed allocation's mapping */
    e = cudaIpcOpenMemHandle(mapped, h, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaErrorAlreadyMapped) {
        (void)cudaGetLastError();
        cu_close_stale(cu, peer, b->base, 1);
        e = cudaIpcOpenMemHandle(mapped, h, cudaIpcMemLazyEnablePeerAccess);
    }
    if (e != cudaSuccess) {
        return rmacoll__cu_rt_error(cu, e, peer, "cudaIpcOpenMemHandle of the peer's "
                                    "device buffer");
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t cu_import(rmacoll__cu_t *cu, int peer, const void *blob,
                                  uint64_t *addr)
{
    rmacoll__cu_blob_t b;
    void *mapped = NULL;
    int same = 0;
    rmacoll_status_t st;

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
    if (cu_import_cached(cu, peer, &b, addr)) {
        return RMACOLL_SUCCESS;
    }
    st = cu_import_map(cu, peer, &b, &mapped, &same);
    if (st != RMACOLL_SUCCESS) {
        return st;
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
