/*
 * nvl_stream.c - the stream ops of the nvlink_kernel transport:
 * post_puts_stream packs a queue into launch descriptors (nvl.h) and
 * launches one copy kernel per descriptor; call_stream checks a whole call
 * against the one-launch path and launches it as one kernel; wait_stream
 * and signal_stream are stream memory operations (cuda_common.c). Each
 * launch picks the scope of its fences (.gpu or .sys, see nvl.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rmacoll_transport.h"
#include "transports/nvlink_kernel/nvl_internal.h"


/* 1 when rank p runs on this GPU (or is this rank): .gpu scope reaches it. */
static int nvl_gpu_peer(const rmacoll_transport_t *tp, int p)
{
    return p == tp->env->rank || (p >= 0 && p < tp->env->nranks && tp->same_gpu[p]);
}

/* Places entry k (a put of `bytes` to `peer`) of a launch: records its
 * peer, its blocks (one per NVL_BYTES_PER_BLOCK, at least one, at most
 * NVL_MAX_BLOCKS_PER_ENTRY), and returns its group (nvl.h): the leader of
 * the first earlier entry to the same peer, else k itself. */
static uint8_t nvl_entry_place(rmacoll_transport_t *tp, uint32_t k, int peer, uint64_t bytes,
                               const uint8_t *group)
{
    uint64_t nb = (bytes + NVL_BYTES_PER_BLOCK - 1) / NVL_BYTES_PER_BLOCK;

    tp->peer_of[k] = peer;
    tp->eblocks[k] = nb == 0 ? 1u
                     : nb > NVL_MAX_BLOCKS_PER_ENTRY ? NVL_MAX_BLOCKS_PER_ENTRY
                                                     : (uint32_t)nb;
    for (uint32_t m = 0; m < k; m++) {
        if (tp->peer_of[m] == peer) {
            return group[m];
        }
    }
    return (uint8_t)k;
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
        return rmacoll__cu_rt_error(tp->cu, e, tp->peer_of[0], what);
    }
    b->n = 0;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__nvl_post_puts_stream(rmacoll_transport_t *tp,
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
        return rmacoll__nvl_off(tp, "post_puts_stream");
    }
    if (n == 0) {
        return rmacoll__cu_check_stream(tp->cu, s);
    }
    for (size_t i = 0; i < n; i++) {
        CUdeviceptr sig;

        st = rmacoll__cu_check_put(tp->cu, &puts[i], i, &sig);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    b = &tp->batch_desc;
    b->n = 0;
    b->scope = RMACOLL__NVL_SCOPE_GPU;
    for (size_t i = 0; i < n; i++) {
        if (!nvl_gpu_peer(tp, puts[i].peer) ||
            (puts[i].sig_index != RMACOLL_NO_SIGNAL &&
             !rmacoll__cu_word_is_device(puts[i].sig_index))) {
            b->scope = RMACOLL__NVL_SCOPE_SYS;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *p = &puts[i];
        CUdeviceptr sig;
        uint32_t k;

        (void)rmacoll__cu_check_put(tp->cu, p, i, &sig);
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
        if (rmacoll__cu_tracing()) {
            if (p->bytes > 0) {
                rmacoll__cu_trace(tp->cu, "copy s=%p peer=%d src=%p dst=0x%llx bytes=%llu "
                                  "kernel", (void *)s, p->peer, p->src,
                                  (unsigned long long)p->dst_addr,
                                  (unsigned long long)p->bytes);
            }
            if (sig != 0) {
                rmacoll__cu_trace(tp->cu, "write s=%p peer=%d idx=%u dev=%d addr=0x%llx "
                                  "val=%llu kernel", (void *)s, p->peer,
                                  p->sig_index & ~RMACOLL_SIG_DEVICE,
                                  rmacoll__cu_word_is_device(p->sig_index),
                                  (unsigned long long)sig, (unsigned long long)p->sig_value);
            }
        }
        b->e[k].src = (uint64_t)(uintptr_t)p->src;
        b->e[k].dst = p->dst_addr;
        b->e[k].bytes = p->bytes;
        b->e[k].sig = (uint64_t)sig;
        b->e[k].value = p->sig_value;
        b->group[k] = nvl_entry_place(tp, k, p->peer, p->bytes, b->group);
    }
    return nvl_launch(tp, s);
}

/* An earlier one-launch call that timed out on the GPU left its error
 * word: RMACOLL_ERR_TIMEOUT, naming the rank it waited for. */
static rmacoll_status_t nvl_fused_error(rmacoll_transport_t *tp)
{
    uint32_t w = *(volatile uint32_t *)tp->ferr;

    if (w == 0) {
        return RMACOLL_SUCCESS;
    }
    tp->error_peer = RMACOLL__NVL_ERR_PEER(w);
    NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: an earlier one-launch call timed "
            "out on the GPU after %llu ms waiting for %s of rank %d (that rank's "
            "kernel or stream never got there)",
            (unsigned long long)(tp->env->config != NULL ? tp->env->config->timeout_ms
                                                         : 0),
            RMACOLL__NVL_ERR_CODE(w) == RMACOLL__NVL_ERR_READY_TIMEOUT
                ? "the READY signal" : "the data signal",
            tp->error_peer);
    return RMACOLL_ERR_TIMEOUT;
}

/* The READY signals the call raises (each must signal a mapped word). */
static rmacoll_status_t nvl_fused_ready(rmacoll_transport_t *tp,
                                        const rmacoll_stream_call_t *c,
                                        rmacoll__nvl_fused_t *f)
{
    for (size_t i = 0; i < c->nready; i++) {
        CUdeviceptr sig;
        rmacoll_status_t st = rmacoll__cu_check_put(tp->cu, &c->ready[i], i, &sig);

        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (sig == 0) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (!rmacoll__cu_word_is_device(c->ready[i].sig_index) ||
            !nvl_gpu_peer(tp, c->ready[i].peer)) {
            f->scope = RMACOLL__NVL_SCOPE_SYS;
        }
        f->ready[f->nready].addr = (uint64_t)sig;
        f->ready[f->nready++].value = c->ready[i].sig_value;
    }
    return RMACOLL_SUCCESS;
}

/* The data waits of the call, on this rank's own words. */
static rmacoll_status_t nvl_fused_waits(rmacoll_transport_t *tp,
                                        const rmacoll_stream_call_t *c,
                                        rmacoll__nvl_fused_t *f)
{
    int me = tp->env->rank;

    for (size_t i = 0; i < c->nwait; i++) {
        CUdeviceptr a = rmacoll__cu_word(tp->cu, me, c->wait_idx[i], NULL);
        int writer = c->wait_peer != NULL ? c->wait_peer[i] : -1;

        if (a == 0) {
            NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: call_stream: wait %zu on own "
                    "word 0x%x, which is not mapped", i, c->wait_idx[i]);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (!rmacoll__cu_word_is_device(c->wait_idx[i]) || writer < 0 ||
            !nvl_gpu_peer(tp, writer)) {
            f->scope = RMACOLL__NVL_SCOPE_SYS;
        }
        f->wait[f->nwait].addr = (uint64_t)a;
        f->wait_peer[f->nwait] = (int16_t)writer;
        f->wait[f->nwait++].value = c->wait_val[i];
    }
    return RMACOLL_SUCCESS;
}

/* The READY waits: each on a mapped own word, each gating a put (else the
 * call does not fit the path: RMACOLL_ERR_UNSUPPORTED). */
static rmacoll_status_t nvl_fused_ready_waits(rmacoll_transport_t *tp,
                                              const rmacoll_stream_call_t *c,
                                              rmacoll__nvl_fused_t *f)
{
    for (size_t i = 0; i < c->nready_wait; i++) {
        int used = 0;

        if (rmacoll__cu_word(tp->cu, tp->env->rank, c->ready_idx[i], NULL) == 0) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (!rmacoll__cu_word_is_device(c->ready_idx[i]) ||
            !nvl_gpu_peer(tp, c->ready_peer[i])) {
            f->scope = RMACOLL__NVL_SCOPE_SYS;
        }
        for (size_t j = 0; j < c->nputs && !used; j++) {
            used = c->puts[j].peer == c->ready_peer[i];
        }
        if (!used) {
            return RMACOLL_ERR_UNSUPPORTED; /* a READY wait gating no put */
        }
    }
    return RMACOLL_SUCCESS;
}

/* The puts of the call as entries; a put to a peer waits for that peer's
 * READY word (a put to another rank without one is refused). */
static rmacoll_status_t nvl_fused_entries(rmacoll_transport_t *tp,
                                          const rmacoll_stream_call_t *c,
                                          rmacoll__nvl_fused_t *f)
{
    int me = tp->env->rank;

    for (size_t i = 0; i < c->nputs; i++) {
        const rmacoll_put_t *p = &c->puts[i];
        CUdeviceptr sig;
        uint32_t k;

        (void)rmacoll__cu_check_put(tp->cu, p, i, &sig);
        if (p->bytes == 0 && sig == 0) {
            continue;
        }
        if (!nvl_gpu_peer(tp, p->peer) ||
            (sig != 0 && !rmacoll__cu_word_is_device(p->sig_index))) {
            f->scope = RMACOLL__NVL_SCOPE_SYS;
        }
        k = f->n++;
        f->peer[k] = (int16_t)p->peer;
        f->e[k].src = (uint64_t)(uintptr_t)p->src;
        f->e[k].dst = p->dst_addr;
        f->e[k].bytes = p->bytes;
        f->e[k].sig = (uint64_t)sig;
        f->e[k].value = p->sig_value;
        for (size_t r = 0; r < c->nready_wait && p->peer != me; r++) {
            if (c->ready_peer[r] == p->peer) {
                f->e[k].rdy = (uint64_t)rmacoll__cu_word(tp->cu, me, c->ready_idx[r], NULL);
                f->e[k].rdy_value = c->ready_val[r];
            }
        }
        if (p->peer != me && f->e[k].rdy == 0) {
            NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: call_stream: put %zu to peer %d "
                    "has no READY wait", i, p->peer);
            return RMACOLL_ERR_INVALID_ARG;
        }
        f->group[k] = nvl_entry_place(tp, k, p->peer, p->bytes, f->group);
    }
    return RMACOLL_SUCCESS;
}

/* The grid: each entry's first block, and each group's block count (0 for
 * a group without any signal, nor READY word to reset in graph mode).
 * RMACOLL_ERR_UNSUPPORTED when the grid could not be resident at once with
 * the grids of the ranks sharing the GPU. */
static rmacoll_status_t nvl_fused_blocks(rmacoll_transport_t *tp,
                                         const rmacoll_stream_call_t *c,
                                         rmacoll__nvl_fused_t *f)
{
    uint32_t blk = 0;

    for (uint32_t k = 0; k < f->n; k++) {
        f->first_block[k] = blk;
        blk += tp->eblocks[k];
    }
    f->first_block[f->n] = blk;
    if (blk > tp->fused_max_blocks) {
        return RMACOLL_ERR_UNSUPPORTED; /* too large to be resident with the peers */
    }
    f->nblocks = blk > 0 ? blk : 1;
    for (uint32_t k = 0; k < f->n; k++) {
        uint32_t g = f->group[k];

        if (g == k) {
            for (uint32_t m = k; m < f->n; m++) {
                if (f->group[m] == g) {
                    f->gblocks[g] += tp->eblocks[m];
                }
            }
        }
    }
    /* groups without any signal count nothing */
    for (uint32_t k = 0; k < f->n; k++) {
        uint32_t g = f->group[k];
        int any = 0;

        if (g != k) {
            continue;
        }
        for (uint32_t m = k; m < f->n; m++) {
            any |= f->group[m] == g && (f->e[m].sig != 0 || (c->reset && f->e[m].rdy));
        }
        if (!any) {
            f->gblocks[g] = 0;
        }
    }
    return RMACOLL_SUCCESS;
}

/* The whole call as one kernel (nvl.h); RMACOLL_ERR_UNSUPPORTED when the
 * path is off or the call does not fit it (nothing enqueued then). Steps:
 * the checks, the descriptor's READY signals, waits, READY waits, entries
 * and grid, then the launch. */
rmacoll_status_t rmacoll__nvl_call_stream(rmacoll_transport_t *tp,
                                          const rmacoll_stream_call_t *c, void *stream)
{
    rmacoll__nvl_fused_t *f;
    uint64_t timeout_ms;
    cudaError_t e;
    rmacoll_status_t st;

    if (tp == NULL || c == NULL || c->struct_size < sizeof(*c)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return rmacoll__nvl_off(tp, "call_stream");
    }
    if (!tp->fused) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    st = nvl_fused_error(tp);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (c->nputs > RMACOLL__NVL_FUSED_MAX || c->nready > RMACOLL__NVL_FUSED_MAX ||
        c->nwait > RMACOLL__NVL_FUSED_MAX || c->nready_wait > RMACOLL__NVL_FUSED_MAX) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    for (size_t i = 0; i < c->nputs; i++) {
        CUdeviceptr sig;

        st = rmacoll__cu_check_put(tp->cu, &c->puts[i], i, &sig);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    f = &tp->fdesc;
    memset(f, 0, sizeof(*f));
    f->scope = RMACOLL__NVL_SCOPE_GPU;
    st = nvl_fused_ready(tp, c, f);
    if (st == RMACOLL_SUCCESS) {
        st = nvl_fused_waits(tp, c, f);
    }
    if (st == RMACOLL_SUCCESS) {
        st = nvl_fused_ready_waits(tp, c, f);
    }
    if (st == RMACOLL_SUCCESS) {
        st = nvl_fused_entries(tp, c, f);
    }
    if (st == RMACOLL_SUCCESS) {
        st = nvl_fused_blocks(tp, c, f);
    }
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    timeout_ms = tp->env->config != NULL ? tp->env->config->timeout_ms : 0;
    f->timeout_ns = (timeout_ms > 0 ? timeout_ms : 60000u) * 1000000ull;
    f->err = tp->ferr_dev;
    f->reset = c->reset != 0;
    f->counters = tp->counters +
                  (size_t)(tp->ring++ % RMACOLL__NVL_RING) * RMACOLL__NVL_MAX_ENTRIES;
    NVL_LOG(tp, RMACOLL_LOG_TRACE, "nvlink_kernel: one launch: %u puts, %u READY "
            "signals, %u waits, %u blocks, %s scope%s", f->n, f->nready, f->nwait,
            f->nblocks, f->scope == RMACOLL__NVL_SCOPE_GPU ? "gpu" : "sys",
            f->reset ? ", words reset (graph mode)" : "");
    e = rmacoll__nvl_launch_fused(f, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        char what[96];

        snprintf(what, sizeof(what), "launch of the one-launch kernel (%u puts, %u "
                 "blocks)", f->n, f->nblocks);
        return rmacoll__cu_rt_error(tp->cu, e, -1, what);
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__nvl_set_device_signals(rmacoll_transport_t *tp,
                                               const uint64_t *addr, const uint32_t *nwords)
{
    if (tp == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) { /* a probe (addr NULL) stays quiet */
        return addr == NULL ? (tp->off_status != RMACOLL_SUCCESS ? tp->off_status
                                                                 : RMACOLL_ERR_NO_DEVICE)
                            : rmacoll__nvl_off(tp, "set_device_signals");
    }
    return rmacoll__cu_set_device_signals(tp->cu, addr, nwords);
}

rmacoll_status_t rmacoll__nvl_wait_stream(rmacoll_transport_t *tp,
                                        const uint32_t *idx,
                                        const uint64_t *values, size_t n,
                                        void *stream)
{
    if (tp == NULL || (n > 0 && (idx == NULL || values == NULL))) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return rmacoll__nvl_off(tp, "wait_stream");
    }
    return rmacoll__cu_wait_stream(tp->cu, idx, values, n, (cudaStream_t)stream);
}

rmacoll_status_t rmacoll__nvl_signal_stream(rmacoll_transport_t *tp, int peer,
                                          uint32_t idx, uint64_t value,
                                          void *stream)
{
    if (tp == NULL || idx == RMACOLL_NO_SIGNAL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return rmacoll__nvl_off(tp, "signal_stream");
    }
    return rmacoll__cu_signal_stream(tp->cu, peer, idx, value, (cudaStream_t)stream);
}

/* ---- device-count calls (nvl.h: rmacoll__nvl_dc_t) ---------------------- */

/* c->msg gets why; returns st. */
static rmacoll_status_t nvl_dc_refuse(const rmacoll_dcounts_call_t *c, rmacoll_status_t st,
                                      const char *fmt, const char *arg, const char *why)
{
    if (c->msg != NULL && c->msg_len > 0) {
        snprintf(c->msg, c->msg_len, fmt, arg, why);
    }
    return st;
}

/* Checks that [p, p + bytes) (bytes 0: p alone, when not NULL) is device
 * memory of this rank's GPU; names the argument. */
static rmacoll_status_t nvl_dc_check_ptr(rmacoll_transport_t *tp,
                                         const rmacoll_dcounts_call_t *c, const void *p,
                                         uint64_t bytes, const char *arg)
{
    int dev = -1;
    uint64_t id = 0;
    CUdeviceptr base = 0;
    size_t size = 0;

    if (p == NULL) {
        return RMACOLL_SUCCESS; /* NULL with a capacity was refused by the core */
    }
    if (rmacoll__cu_pointer_info(p, &dev, &id) != 0) {
        return nvl_dc_refuse(c, RMACOLL_ERR_INVALID_ARG, "%s is not device memory "
                             "(host memory, or no CUDA driver)%s", arg, "");
    }
    if (dev != tp->cu->device) {
        char why[64];

        snprintf(why, sizeof(why), " (device %d, this rank uses device %d)", dev,
                 tp->cu->device);
        return nvl_dc_refuse(c, RMACOLL_ERR_INVALID_ARG, "%s is memory of another GPU%s",
                             arg, why);
    }
    if (bytes > 0 &&
        rmacoll__cu_device_range(tp->cu, (void *)(uintptr_t)p, (size_t)bytes, &base, &size) !=
            RMACOLL_SUCCESS) {
        char why[96];

        snprintf(why, sizeof(why), " (%llu bytes from %p)", (unsigned long long)bytes, p);
        return nvl_dc_refuse(c, RMACOLL_ERR_INVALID_ARG, "%s: its capacity passes the end "
                             "of its device allocation%s", arg, why);
    }
    return RMACOLL_SUCCESS;
}

/* check_only: can the call run here? (nvl.h; c->msg says why not) */
static rmacoll_status_t nvl_dc_check(rmacoll_transport_t *tp, const rmacoll_dcounts_call_t *c)
{
    int n = tp->env->nranks;
    rmacoll_status_t st;

    if (!tp->on) {
        return nvl_dc_refuse(c, tp->off_status != RMACOLL_SUCCESS ? tp->off_status
                                                                  : RMACOLL_ERR_NO_DEVICE,
                             "sendcounts: device counts need the nvlink_kernel transport's "
                             "GPU part, which is off%s: %s", "",
                             tp->off_why[0] != '\0' ? tp->off_why : "no usable GPU");
    }
    if (!tp->dc_ok) {
        return nvl_dc_refuse(c, RMACOLL_ERR_UNSUPPORTED, "sendcounts: device counts "
                             "unsupported on this communicator%s: %s", "",
                             tp->dc_why[0] != '\0' ? tp->dc_why
                                                   : "no out-of-band allgather at init");
    }
    if (n > RMACOLL_DCOUNTS_MAX_RANKS) {
        return nvl_dc_refuse(c, RMACOLL_ERR_UNSUPPORTED, "sendcounts: device counts take "
                             "at most 64 ranks%s%s", "", "");
    }
    st = nvl_dc_check_ptr(tp, c, c->sendcounts, (uint64_t)n * 8u, "sendcounts");
    if (st == RMACOLL_SUCCESS) {
        st = nvl_dc_check_ptr(tp, c, c->recvcounts, (uint64_t)n * 8u, "recvcounts");
    }
    if (st == RMACOLL_SUCCESS) {
        st = nvl_dc_check_ptr(tp, c, c->status, 4u, "status");
    }
    if (st == RMACOLL_SUCCESS) {
        st = nvl_dc_check_ptr(tp, c, c->sendbuf, (uint64_t)c->send_capacity * c->esize,
                              "sendbuf");
    }
    if (st == RMACOLL_SUCCESS) {
        st = nvl_dc_check_ptr(tp, c, c->recvbuf, (uint64_t)c->recv_capacity * c->esize,
                              "recvbuf");
    }
    return st;
}

rmacoll_status_t rmacoll__nvl_dcounts_stream(rmacoll_transport_t *tp,
                                            const rmacoll_dcounts_call_t *c, void *stream)
{
    rmacoll__nvl_dc_t *d;
    uint32_t w;
    uint64_t timeout_ms;
    int n, me;
    cudaError_t e;

    if (tp == NULL || c == NULL || c->struct_size < sizeof(*c)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (c->check_only) {
        return nvl_dc_check(tp, c);
    }
    if (!tp->on || !tp->dc_ok || c->region == NULL || c->recv_addr == NULL) {
        return RMACOLL_ERR_UNSUPPORTED; /* check_only said so first */
    }
    n = tp->env->nranks;
    me = tp->env->rank;
    w = *(volatile uint32_t *)(tp->dc_rep + RMACOLL__NVL_DC_REP_WORDS);
    if (w != 0) {
        tp->error_peer = RMACOLL__NVL_ERR_PEER(w);
        NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: an earlier device-count call timed "
                "out on the GPU waiting for %s of rank %d (that rank's kernel never got "
                "there)", RMACOLL__NVL_ERR_CODE(w) == RMACOLL__NVL_ERR_READY_TIMEOUT
                              ? "the arrival" : "the completion",
                tp->error_peer);
        return RMACOLL_ERR_TIMEOUT;
    }
    d = &tp->dc_desc;
    memset(d, 0, sizeof(*d));
    d->sendbuf = (uint64_t)(uintptr_t)c->sendbuf;
    d->sendcounts = (uint64_t)(uintptr_t)c->sendcounts;
    d->recvcounts = (uint64_t)(uintptr_t)c->recvcounts;
    d->status = (uint64_t)(uintptr_t)c->status;
    d->rep = (uint64_t)(uintptr_t)tp->dc_rep_dev;
    d->terr = (uint64_t)(uintptr_t)(tp->dc_rep_dev + RMACOLL__NVL_DC_REP_WORDS);
    timeout_ms = tp->env->config != NULL ? tp->env->config->timeout_ms : 0;
    d->timeout_ns = (timeout_ms > 0 ? timeout_ms : 60000u) * 1000000ull;
    d->send_cap = c->send_capacity;
    d->recv_cap = c->recv_capacity;
    d->n = (uint32_t)n;
    d->me = (uint32_t)me;
    d->esize = c->esize;
    d->given = c->given != 0;
    d->scope = RMACOLL__NVL_SCOPE_GPU;
    for (int p = 0; p < n; p++) {
        if (c->region[p] == 0) {
            NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: device-count call: no region "
                    "of rank %d", p);
            return RMACOLL_ERR_INVALID_ARG;
        }
        d->region[p] = c->region[p];
        d->recv_addr[p] = c->recv_addr[p];
        if (!nvl_gpu_peer(tp, p)) {
            d->scope = RMACOLL__NVL_SCOPE_SYS;
        }
    }
    NVL_LOG(tp, RMACOLL_LOG_TRACE, "nvlink_kernel: device-count call: %d ranks, %u blocks, "
            "%s scope, %s", n, tp->dc_max_blocks,
            d->scope == RMACOLL__NVL_SCOPE_GPU ? "gpu" : "sys",
            d->given ? "receive counts given" : "receive counts produced");
    e = rmacoll__nvl_launch_dc(d, tp->dc_max_blocks, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        return rmacoll__cu_rt_error(tp->cu, e, -1, "launch of the device-count kernel");
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__nvl_dcounts_report(rmacoll_transport_t *tp,
                                            rmacoll_dcounts_report_t *r)
{
    volatile uint64_t *rep;

    if (tp == NULL || r == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memset(r, 0, sizeof(*r));
    r->peer = -1;
    if (tp->dc_rep == NULL) {
        return RMACOLL_SUCCESS;
    }
    rep = (volatile uint64_t *)tp->dc_rep;
    if (rep[0] == 0) {
        return RMACOLL_SUCCESS;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the fields were written before word 0 */
    r->code = (rmacoll_status_t)(int64_t)rep[1];
    r->rank = (int)(int64_t)rep[2];
    r->reason = (int)(int64_t)rep[3];
    r->peer = (int)(int64_t)rep[4];
    r->need = (int64_t)rep[5];
    r->have = (int64_t)rep[6];
    r->seq = rep[0];
    rep[0] = 0; /* free for the next failure */
    return RMACOLL_SUCCESS;
}
