/*
 * cuda_stream.c - the stream side of the shared CUDA machinery: the device
 * address of a signal word, the checks of a put, 64-bit stream memory
 * operations (batched writes and waits) for wait_stream / signal_stream,
 * and the event that tracks host-driven puts on the own stream
 * (progress / pending).
 */
#define _GNU_SOURCE

#include "transports/common/cuda_internal.h"

#include <string.h>

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
