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
 * Indexes with RMACOLL_SIG_DEVICE name the device-resident words instead
 * (set_device_signals: each rank's array in its device memory, node
 * peers' mapped by the core through mem_import): the same stream
 * operations on device addresses, so no signal store or wait poll
 * crosses PCIe. The write's default flags (a memory barrier before it)
 * order it after the copies before it for the reader on any GPU.
 *
 * Driver functions come from cudaGetDriverEntryPointByVersion; libcuda is
 * never linked, so the library starts on machines without a GPU driver,
 * where init leaves the backend off and the host backend works alone.
 * The CUDA machinery shared with nvlink_kernel (entry points, signal
 * windows, IPC export/import, stream waits and signals) is
 * transports/common/cuda_common.c; this file is the copy engine.
 *
 * Not thread-safe (like the rest of ce). See docs/transport-ce.md.
 */
#define _GNU_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"
#include "transports/common/cuda_common.h"
#include "transports/common/tlog.h"

#define CE_CUDA_BLOB_MAGIC 0x63654331u /* "ceC1" */


struct rmacoll__ce_cuda {
    rmacoll__cu_t *cu;
    /* post_puts' batched copies (cudaMemcpyBatchAsync): its arrays */
    void **dsts;
    const void **srcs;
    size_t *sizes, cap;
    int batch_off;            /* the runtime refused a batch: one by one */
};

/* The backend is off: log why (every call that needed it) and return. */
static rmacoll_status_t cc_off(rmacoll_transport_t *tp, const char *op)
{
    CE_LOG(tp, RMACOLL_LOG_ERROR, "ce: %s on CUDA memory impossible: %s", op,
           tp->cuda_why[0] != '\0' ? tp->cuda_why : "no usable GPU");
    return tp->cuda_status != RMACOLL_SUCCESS ? tp->cuda_status
                                              : RMACOLL_ERR_NO_DEVICE;
}

/* ---- init -------------------------------------------------------------- */

rmacoll_status_t rmacoll__ce_cuda_init(rmacoll_transport_t *tp)
{
    rmacoll__cu_t *cu = NULL;
    rmacoll_status_t st;

    tp->cuda = NULL;
    tp->cuda_why[0] = '\0';
    st = rmacoll__cu_open(tp->env, "ce", CE_CUDA_BLOB_MAGIC, &cu, tp->cuda_why,
                          sizeof(tp->cuda_why));
    if (st == RMACOLL_ERR_NO_MEMORY) {
        return st;
    }
    if (cu != NULL) {
        tp->cuda = calloc(1, sizeof(*tp->cuda));
        if (tp->cuda == NULL) {
            rmacoll__cu_close(cu);
            return RMACOLL_ERR_NO_MEMORY;
        }
        tp->cuda->cu = cu;
        tp->cuda_status = RMACOLL_SUCCESS;
        CE_LOG(tp, RMACOLL_LOG_DEBUG, "ce: cuda backend on device %d, %d host "
               "ranges of signal words registered", cu->device, cu->nregs);
        return RMACOLL_SUCCESS;
    }
    tp->cuda_status = st;
    CE_LOG(tp, st == RMACOLL_ERR_NO_DEVICE ? RMACOLL_LOG_DEBUG : RMACOLL_LOG_WARN,
           "ce: cuda backend off, device buffers unsupported: %s", tp->cuda_why);
    return RMACOLL_SUCCESS;
}

void rmacoll__ce_cuda_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL && tp->cuda != NULL) {
        rmacoll__cu_close(tp->cuda->cu);
        free(tp->cuda->dsts);
        free(tp->cuda->srcs);
        free(tp->cuda->sizes);
        free(tp->cuda);
        tp->cuda = NULL;
    }
}

/* ---- registration, export, import -------------------------------------- */

rmacoll_status_t rmacoll__ce_cuda_mem_register(rmacoll_transport_t *tp,
                                               void *addr, size_t bytes,
                                               rmacoll_mem_t **mem,
                                               rmacoll_rkey_t *rkey)
{
    *mem = NULL;
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_register");
    }
    return rmacoll__cu_mem_register(tp->cuda->cu, addr, bytes, rkey);
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
        CE_LOG(tp, RMACOLL_LOG_ERROR, "ce: cudaHostRegister of %zu bytes at %p "
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
    if (tp == NULL || blob == NULL || addr == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_export");
    }
    return rmacoll__cu_export(tp->cuda->cu, addr, bytes, blob);
}

rmacoll_status_t rmacoll__ce_cuda_mem_type(rmacoll_transport_t *tp, const void *addr,
                                           rmacoll_memtype_t *type)
{
    int device;
    uint64_t buffer_id;

    if (tp == NULL || type == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return RMACOLL_ERR_UNSUPPORTED; /* the backend is off: cannot tell */
    }
    *type = rmacoll__cu_pointer_info(addr, &device, &buffer_id) == 0 ? RMACOLL_MEM_CUDA
                                                                      : RMACOLL_MEM_HOST;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_cuda_mem_import(rmacoll_transport_t *tp,
                                             int peer, const void *blob,
                                             uint64_t *addr)
{
    if (tp == NULL || blob == NULL || addr == NULL || peer < 0 ||
        peer >= tp->nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_import");
    }
    return rmacoll__cu_import(tp->cuda->cu, peer, blob, addr);
}

/* ---- stream operations ------------------------------------------------- */

rmacoll_status_t rmacoll__ce_cuda_post_puts_stream(rmacoll_transport_t *tp,
                                                   const rmacoll_put_t *puts,
                                                   size_t n, void *stream)
{
    rmacoll__cu_t *cu;
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
    cu = tp->cuda->cu;
    if (n == 0) {
        return rmacoll__cu_check_stream(cu, s);
    }
    /* Check the whole queue before enqueueing anything. */
    for (size_t i = 0; i < n; i++) {
        CUdeviceptr sig;

        st = rmacoll__cu_check_put(cu, &puts[i], i, &sig);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *p = &puts[i];
        CUdeviceptr sig;

        (void)rmacoll__cu_check_put(cu, p, i, &sig);
        if (p->bytes > 0) {
            cudaError_t e;

            /* signals queued so far belong before this copy */
            st = rmacoll__cu_flush_ops(cu, s, nops, ops_peer);
            nops = 0;
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            rmacoll__cu_trace(cu, "copy s=%p peer=%d src=%p dst=0x%llx bytes=%llu",
                              (void *)s, p->peer, p->src, (unsigned long long)p->dst_addr,
                              (unsigned long long)p->bytes);
            e = cudaMemcpyAsync((void *)(uintptr_t)p->dst_addr, p->src,
                                (size_t)p->bytes, cudaMemcpyDefault, s);
            if (e != cudaSuccess) {
                char what[160];

                snprintf(what, sizeof(what), "cudaMemcpyAsync of %llu bytes "
                         "from %p to 0x%llx", (unsigned long long)p->bytes,
                         p->src, (unsigned long long)p->dst_addr);
                return rmacoll__cu_rt_error(cu, e, p->peer, what);
            }
        }
        if (sig != 0) {
            if (nops == RMACOLL__CU_MAX_OPS) {
                st = rmacoll__cu_flush_ops(cu, s, nops, ops_peer);
                nops = 0;
                if (st != RMACOLL_SUCCESS) {
                    return st;
                }
            }
            rmacoll__cu_op_write(cu, nops++, sig, p->sig_value);
            rmacoll__cu_trace(cu, "write s=%p peer=%d idx=%u dev=%d addr=0x%llx val=%llu",
                              (void *)s, p->peer, p->sig_index & ~RMACOLL_SIG_DEVICE,
                              rmacoll__cu_word_is_device(p->sig_index),
                              (unsigned long long)sig, (unsigned long long)p->sig_value);
            ops_peer = p->peer;
        }
    }
    return rmacoll__cu_flush_ops(cu, s, nops, ops_peer);
}

rmacoll_status_t rmacoll__ce_cuda_wait_stream(rmacoll_transport_t *tp,
                                              const uint32_t *idx,
                                              const uint64_t *values,
                                              size_t n, void *stream)
{
    if (tp == NULL || (n > 0 && (idx == NULL || values == NULL))) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "wait_stream");
    }
    return rmacoll__cu_wait_stream(tp->cuda->cu, idx, values, n, (cudaStream_t)stream);
}

rmacoll_status_t rmacoll__ce_cuda_signal_stream(rmacoll_transport_t *tp,
                                                int peer, uint32_t idx,
                                                uint64_t value, void *stream)
{
    if (tp == NULL || idx == RMACOLL_NO_SIGNAL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "signal_stream");
    }
    return rmacoll__cu_signal_stream(tp->cuda->cu, peer, idx, value, (cudaStream_t)stream);
}

rmacoll_status_t rmacoll__ce_cuda_set_device_signals(rmacoll_transport_t *tp,
                                                     const uint64_t *addr,
                                                     const uint32_t *nwords)
{
    if (tp == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->cuda == NULL) { /* a probe (addr NULL) stays quiet */
        return addr == NULL ? (tp->cuda_status != RMACOLL_SUCCESS ? tp->cuda_status
                                                                 : RMACOLL_ERR_NO_DEVICE)
                            : cc_off(tp, "set_device_signals");
    }
    return rmacoll__cu_set_device_signals(tp->cuda->cu, addr, nwords);
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

/* Room for n copies in the batch arrays. */
static int batch_room(struct rmacoll__ce_cuda *cc, size_t n)
{
    if (n > cc->cap) {
        size_t cap = n > 2 * cc->cap ? n : 2 * cc->cap;
        void **d = realloc(cc->dsts, cap * sizeof(*d));
        const void **sr = d != NULL ? realloc(cc->srcs, cap * sizeof(*sr)) : NULL;
        size_t *sz = sr != NULL ? realloc(cc->sizes, cap * sizeof(*sz)) : NULL;

        cc->dsts = d != NULL ? d : cc->dsts;
        cc->srcs = sr != NULL ? sr : cc->srcs;
        cc->sizes = sz != NULL ? sz : cc->sizes;
        if (sz == NULL) {
            return 0;
        }
        cc->cap = cap;
    }
    return 1;
}

/*
 * The copies of puts[0, n) as one cudaMemcpyBatchAsync on s (CUDA 12.8+:
 * one submission, the copies unordered among themselves, the batch in
 * stream order), then every signal after the whole batch. 1 when done, 0
 * when not taken (fewer than two copies, no room, or the runtime refused:
 * then batching stays off and the caller enqueues one by one; nothing was
 * enqueued), or -1 with *st set after a failure past the copies.
 */
static int post_batched(rmacoll_transport_t *tp, const rmacoll_put_t *puts, size_t n,
                        cudaStream_t s, rmacoll_status_t *st)
{
#if CUDART_VERSION >= 12080
    struct rmacoll__ce_cuda *cc = tp->cuda;
    rmacoll__cu_t *cu = cc->cu;
    struct cudaMemcpyAttributes attr;
    size_t k = 0, aidx = 0;
    unsigned nops = 0;
    int ops_peer = -1;
    cudaError_t e;

    if (cc->batch_off || n < 2 || !batch_room(cc, n)) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (puts[i].bytes > 0) {
            cc->dsts[k] = (void *)(uintptr_t)puts[i].dst_addr;
            cc->srcs[k] = puts[i].src;
            cc->sizes[k++] = (size_t)puts[i].bytes;
        }
    }
    if (k < 2) {
        return 0;
    }
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    e = cudaMemcpyBatchAsync(cc->dsts, cc->srcs, cc->sizes, k, &attr, &aidx, 1, s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cc->batch_off = 1;
        CE_LOG(tp, RMACOLL_LOG_INFO, "ce: cudaMemcpyBatchAsync of %zu copies refused (%s); "
               "copies go one by one from now on", k, cudaGetErrorString(e));
        return 0;
    }
    rmacoll__cu_trace(cu, "batch s=%p copies=%zu", (void *)s, k);
    for (size_t i = 0; i < n; i++) {
        CUdeviceptr sig;

        (void)rmacoll__cu_check_put(cu, &puts[i], i, &sig);
        if (sig == 0) {
            continue;
        }
        if (nops == RMACOLL__CU_MAX_OPS) {
            *st = rmacoll__cu_flush_ops(cu, s, nops, ops_peer);
            nops = 0;
            if (*st != RMACOLL_SUCCESS) {
                return -1;
            }
        }
        rmacoll__cu_op_write(cu, nops++, sig, puts[i].sig_value);
        ops_peer = puts[i].peer;
    }
    *st = rmacoll__cu_flush_ops(cu, s, nops, ops_peer);
    return *st == RMACOLL_SUCCESS ? 1 : -1;
#else
    (void)tp, (void)puts, (void)n, (void)s, (void)st;
    return 0;
#endif
}

rmacoll_status_t rmacoll__ce_cuda_post_puts(rmacoll_transport_t *tp,
                                            const rmacoll_put_t *puts,
                                            size_t n)
{
    cudaStream_t s = NULL;
    rmacoll_status_t st;

    if (tp->cuda == NULL) {
        return cc_off(tp, "post_puts");
    }
    /* a host thread of the core (the device path across nodes) may call
     * this: the backend's device first */
    if (cudaSetDevice(tp->cuda->cu->device) != cudaSuccess) {
        return rmacoll__cu_rt_error(tp->cuda->cu, cudaGetLastError(), -1,
                                    "cudaSetDevice before host-driven device puts");
    }
    st = rmacoll__cu_own_stream(tp->cuda->cu, &s);
    if (st == RMACOLL_SUCCESS) {
        /* several copies (a merged submission, core/plan/flow.h): checked,
         * then one batch; else, or when refused, one by one */
        for (size_t i = 0; i < n && st == RMACOLL_SUCCESS; i++) {
            CUdeviceptr sig;
            st = rmacoll__cu_check_put(tp->cuda->cu, &puts[i], i, &sig);
        }
        if (st == RMACOLL_SUCCESS && post_batched(tp, puts, n, s, &st) == 0) {
            st = rmacoll__ce_cuda_post_puts_stream(tp, puts, n, s);
        }
    }
    return st == RMACOLL_SUCCESS ? rmacoll__cu_record(tp->cuda->cu, n) : st;
}

rmacoll_status_t rmacoll__ce_cuda_mem_alloc(rmacoll_transport_t *tp, size_t bytes,
                                            rmacoll_memtype_t type, void **addr)
{
    cudaError_t e;
    void *p = NULL;

    *addr = NULL;
    if (type != RMACOLL_MEM_CUDA || bytes == 0) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if (tp->cuda == NULL) {
        return cc_off(tp, "mem_alloc");
    }
    e = cudaSetDevice(tp->cuda->cu->device);
    if (e == cudaSuccess) {
        e = cudaMalloc(&p, bytes);
    }
    if (e == cudaSuccess) {
        /* zero before any peer's stream may use it, waiting for the memset
         * alone: on a stream of its own, non-blocking (the legacy stream
         * or the whole device could hold work that waits for a peer) */
        cudaStream_t z = NULL;

        e = cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking);
        if (e == cudaSuccess) {
            e = cudaMemsetAsync(p, 0, bytes, z);
            if (e == cudaSuccess) {
                e = cudaStreamSynchronize(z);
            }
            cudaStreamDestroy(z);
        }
        if (e != cudaSuccess) {
            cudaFree(p);
        }
    }
    if (e != cudaSuccess) {
        char what[96];

        snprintf(what, sizeof(what), "cudaMalloc of %zu bytes", bytes);
        return rmacoll__cu_rt_error(tp->cuda->cu, e, -1, what);
    }
    *addr = p;
    return RMACOLL_SUCCESS;
}

void rmacoll__ce_cuda_mem_free(rmacoll_transport_t *tp, void *addr, rmacoll_memtype_t type)
{
    if (addr != NULL && type == RMACOLL_MEM_CUDA) {
        cudaFree(addr);
    }
}

rmacoll_status_t rmacoll__ce_cuda_progress(rmacoll_transport_t *tp)
{
    return rmacoll__cu_progress(tp != NULL && tp->cuda != NULL ? tp->cuda->cu : NULL);
}

size_t rmacoll__ce_cuda_pending(rmacoll_transport_t *tp)
{
    return rmacoll__cu_pending(tp != NULL && tp->cuda != NULL ? tp->cuda->cu : NULL);
}
