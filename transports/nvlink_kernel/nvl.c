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
 * release store into the target's signal word: its device-resident
 * array when the index carries RMACOLL_SIG_DEVICE (set_device_signals),
 * else its host control window, which init registered with
 * cudaHostRegister (Mapped | Portable). The stream ops without data
 * (wait_stream, signal_stream) are stream memory operations, as in ce.
 * Each launch picks the scope of its fences and signal stores (nvl.cu):
 * .gpu when all its words are device memory and all its peers share this
 * GPU (known from the cards exchanged at init), else .sys.
 *
 * The CUDA helpers it shares with ce's CUDA backend (driver entry points,
 * registration of the signal windows, IPC export/import cache, stream
 * waits and signals) are transports/common/cuda_common.c. Export blobs of
 * the two transports are not interchangeable (distinct magic); the core
 * imports through one of them.
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

#include "rmacoll_transport.h"
#include "transports/common/cuda_common.h"
#include "transports/common/tlog.h"
#include "transports/common/tops.h"
#include "transports/nvlink_kernel/nvl.h"
#include "transports/nvlink_kernel/nvl_keys.h"

#define NVL_BLOB_MAGIC 0x6e766c31u /* "nvl1" */
#define NVL_BYTES_PER_BLOCK (16u << 10)
#define NVL_MAX_BLOCKS_PER_ENTRY 32u

#define NVL_LOG(tp_, lvl, ...) RMACOLL__TLOG((tp_)->env, lvl, __VA_ARGS__)


struct rmacoll_transport {
    const rmacoll_transport_env_t *env; /* borrowed; rank and nranks there */
    int on;                        /* the GPU part is usable */
    rmacoll_status_t off_status;   /* why not: status and message */
    char off_why[256];
    rmacoll__cu_t *cu;             /* the shared CUDA part (cuda_common.h) */
    uint32_t *counters;            /* device: RING x MAX_ENTRIES, zero */
    uint32_t ring;                 /* next counter slot */
    int error_peer;
    int peer_of[RMACOLL__NVL_MAX_ENTRIES];  /* target of each entry */
    uint32_t eblocks[RMACOLL__NVL_MAX_ENTRIES];
    rmacoll__nvl_batch_t batch_desc;        /* reused; copied by the launch */
    /* the one-launch path (call_stream), RMACOLL_NVL_ONE_LAUNCH=1 */
    uint8_t *same_gpu;             /* [nranks]: rank p uses this GPU (cards at init) */
    int fused;                     /* usable: opted in, co-scheduling possible */
    uint32_t fused_max_blocks;     /* grid bound: every sharer's grid resident at once */
    uint32_t *ferr;                /* host-mapped error word of the kernel */
    uint32_t *ferr_dev;
    rmacoll__nvl_fused_t fdesc;    /* reused; copied by the launch */
};

static rmacoll_status_t nvl_off(rmacoll_transport_t *tp, const char *op)
{
    NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: %s impossible: %s", op,
            tp->off_why[0] != '\0' ? tp->off_why : "no usable GPU");
    return tp->off_status != RMACOLL_SUCCESS ? tp->off_status
                                             : RMACOLL_ERR_NO_DEVICE;
}

/* ---- init ------------------------------------------------------------ */

/* Releases the GPU part (idempotent). */
static void nvl_gpu_free(rmacoll_transport_t *tp)
{
    if (tp->ferr != NULL) {
        cudaFreeHost(tp->ferr);
        tp->ferr = NULL;
        tp->ferr_dev = NULL;
    }
    tp->fused = 0;
    if (tp->counters != NULL) {
        cudaFree(tp->counters);
        tp->counters = NULL;
    }
    rmacoll__cu_close(tp->cu);
    tp->cu = NULL;
    tp->on = 0;
}

static void nvl_free(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        nvl_gpu_free(tp);
        free(tp->same_gpu);
        free(tp);
    }
}

/* Sets up the GPU part; RMACOLL_SUCCESS with tp->on == 0 when no GPU is
 * usable (the reason in tp->off_why), an error only for lack of memory. */
static rmacoll_status_t nvl_gpu_init(rmacoll_transport_t *tp)
{
    cudaError_t e;
    rmacoll_status_t st;
    size_t cbytes = (size_t)RMACOLL__NVL_RING * RMACOLL__NVL_MAX_ENTRIES *
                    sizeof(uint32_t);

    st = rmacoll__cu_open(tp->env, "nvlink_kernel", NVL_BLOB_MAGIC, &tp->cu, tp->off_why,
                          sizeof(tp->off_why));
    if (st == RMACOLL_ERR_NO_MEMORY) {
        return st;
    }
    if (tp->cu == NULL) {
        tp->off_status = st;
        NVL_LOG(tp, st == RMACOLL_ERR_NO_DEVICE ? RMACOLL_LOG_DEBUG : RMACOLL_LOG_WARN,
                "nvlink_kernel: off, device buffers unsupported: %s", tp->off_why);
        return RMACOLL_SUCCESS;
    }
    tp->off_status = RMACOLL_ERR_CUDA;
    e = cudaMalloc((void **)&tp->counters, cbytes);
    if (e == cudaSuccess) {
        e = cudaMemset(tp->counters, 0, cbytes); /* synchronous for the host */
    }
    if (e == cudaSuccess) {
        e = cudaDeviceSynchronize(); /* counters are zero before any launch */
    }
    if (e != cudaSuccess) {
        rmacoll__cu_rt_error(tp->cu, e, -1, "allocating the kernel's counters");
        snprintf(tp->off_why, sizeof(tp->off_why), "device %d: cannot "
                 "allocate %zu bytes of counters", tp->cu->device, cbytes);
        nvl_gpu_free(tp);
        NVL_LOG(tp, RMACOLL_LOG_WARN, "nvlink_kernel: off, device buffers "
                "unsupported: %s", tp->off_why);
        return RMACOLL_SUCCESS;
    }
    tp->on = 1;
    tp->off_status = RMACOLL_SUCCESS;
    NVL_LOG(tp, RMACOLL_LOG_DEBUG, "nvlink_kernel: on device %d", tp->cu->device);
    return RMACOLL_SUCCESS;
}

/* What each rank tells the others at init (the one-launch path). */
typedef struct nvl_card {
    uint32_t pid;
    uint32_t on;
    uint8_t uuid[16];
} nvl_card_t;

static int nvl_env_on(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "yes") == 0 ||
                         strcmp(v, "on") == 0 || strcmp(v, "true") == 0);
}

/*
 * The one-launch path needs the kernels of node peers that share a GPU to
 * run at the same time (they spin on each other's signals). Ranks that are
 * threads of one process share its context and do; ranks in separate
 * processes on one GPU are time-sliced without MPS (which cannot be
 * detected reliably), so any such peer turns the path off (the split path
 * of memory operations and copy kernels is used instead). The grid of a
 * call is bounded so that the grids of every rank on the GPU fit at once
 * (one block per SM each at worst). Collective: every rank exchanges its
 * card (allgather), GPU or not, opted in or not.
 */
static rmacoll_status_t nvl_fused_init(rmacoll_transport_t *tp)
{
    const rmacoll_transport_env_t *env = tp->env;
    nvl_card_t mine, *all;
    struct cudaDeviceProp prop;
    int want = nvl_env_on("RMACOLL_NVL_ONE_LAUNCH"), nshare = 1, other = -1;
    rmacoll_status_t st;
    cudaError_t e;

    if (env->allgather == NULL) {
        return RMACOLL_SUCCESS;
    }
    memset(&mine, 0, sizeof(mine));
    mine.pid = (uint32_t)getpid();
    if (tp->on && cudaGetDeviceProperties(&prop, tp->cu->device) == cudaSuccess) {
        mine.on = 1;
        memcpy(mine.uuid, prop.uuid.bytes, sizeof(mine.uuid));
    } else {
        (void)cudaGetLastError();
    }
    all = calloc((size_t)env->nranks, sizeof(*all));
    if (all == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = env->allgather(env->oob_ctx, &mine, all, sizeof(mine));
    if (st != RMACOLL_SUCCESS) {
        free(all);
        return st;
    }
    for (int p = 0; p < env->nranks; p++) {
        if (!mine.on || !all[p].on || memcmp(all[p].uuid, mine.uuid, sizeof(mine.uuid)) != 0) {
            continue;
        }
        tp->same_gpu[p] = 1;
        if (p == env->rank || !env->peers[p]) {
            continue;
        }
        if (all[p].pid == mine.pid) {
            nshare++;
        } else if (other < 0) {
            other = p;
        }
    }
    free(all);
    if (!want || !mine.on) {
        return RMACOLL_SUCCESS;
    }
    if (other >= 0) {
        NVL_LOG(tp, RMACOLL_LOG_INFO, "nvlink_kernel: one-launch path off: rank %d uses "
                "the same GPU from another process (kernels of separate processes are "
                "time-sliced without MPS and cannot wait for each other); memory "
                "operations and copy kernels instead", other);
        return RMACOLL_SUCCESS;
    }
    e = cudaHostAlloc((void **)&tp->ferr, sizeof(uint32_t), cudaHostAllocMapped);
    if (e == cudaSuccess) {
        *tp->ferr = 0;
        e = cudaHostGetDevicePointer((void **)&tp->ferr_dev, tp->ferr, 0);
    }
    if (e != cudaSuccess) {
        rmacoll__cu_rt_error(tp->cu, e, -1, "allocating the one-launch error word");
        if (tp->ferr != NULL) {
            cudaFreeHost(tp->ferr);
        }
        tp->ferr = NULL;
        return RMACOLL_SUCCESS; /* the path stays off */
    }
    tp->fused_max_blocks = (uint32_t)(prop.multiProcessorCount / nshare);
    if (tp->fused_max_blocks == 0) {
        tp->fused_max_blocks = 1;
    }
    tp->fused = 1;
    NVL_LOG(tp, RMACOLL_LOG_DEBUG, "nvlink_kernel: one-launch path on (device %d shared "
            "by %d ranks of this process, at most %u blocks per call)", tp->cu->device,
            nshare, tp->fused_max_blocks);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_init(const rmacoll_transport_env_t *env,
                                 rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    rmacoll_status_t st;

    tp = rmacoll__tops_new(env, tpp, 0, sizeof(*tp), &st);
    if (tp == NULL) {
        return st;
    }
    tp->env = env;
    tp->error_peer = -1;
    tp->same_gpu = calloc((size_t)env->nranks, sizeof(*tp->same_gpu));
    if (tp->same_gpu == NULL) {
        free(tp);
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = nvl_gpu_init(tp);
    if (st == RMACOLL_SUCCESS) {
        st = nvl_fused_init(tp);
    }
    if (st != RMACOLL_SUCCESS) {
        nvl_free(tp);
        return st;
    }
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

static void nvl_finalize(rmacoll_transport_t *tp)
{
    nvl_free(tp); /* rmacoll__cu_close synchronises the own stream */
}

/* ---- memory ----------------------------------------------------------- */

static rmacoll_status_t nvl_mem_register(rmacoll_transport_t *tp, void *addr,
                                         size_t bytes, rmacoll_memtype_t type,
                                         rmacoll_mem_t **mem,
                                         rmacoll_rkey_t *rkey)
{
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
    return rmacoll__cu_mem_register(tp->cu, addr, bytes, rkey);
}

static rmacoll_status_t nvl_mem_deregister(rmacoll_transport_t *tp,
                                           rmacoll_mem_t *mem)
{
    return mem == NULL ? RMACOLL_SUCCESS : RMACOLL_ERR_INVALID_ARG;
}

static rmacoll_status_t nvl_mem_export(rmacoll_transport_t *tp, void *addr,
                                       size_t bytes, void *blob)
{
    if (tp == NULL || blob == NULL || addr == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "mem_export");
    }
    return rmacoll__cu_export(tp->cu, addr, bytes, blob);
}

static rmacoll_status_t nvl_mem_import(rmacoll_transport_t *tp, int peer,
                                       const void *blob, uint64_t *addr)
{
    if (tp == NULL || blob == NULL || addr == NULL || peer < 0 ||
        peer >= tp->env->nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "mem_import");
    }
    return rmacoll__cu_import(tp->cu, peer, blob, addr);
}

/* ---- stream operations ------------------------------------------------ */

/* 1 when rank p runs on this GPU (or is this rank): .gpu scope reaches it. */
static int nvl_gpu_peer(const rmacoll_transport_t *tp, int p)
{
    return p == tp->env->rank || (p >= 0 && p < tp->env->nranks && tp->same_gpu[p]);
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
        uint64_t nb;

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

/* The whole call as one kernel (nvl.h); RMACOLL_ERR_UNSUPPORTED when the
 * path is off or the call does not fit it (nothing enqueued then). */
static rmacoll_status_t nvl_call_stream(rmacoll_transport_t *tp,
                                        const rmacoll_stream_call_t *c, void *stream)
{
    rmacoll__nvl_fused_t *f;
    rmacoll__cu_t *cu;
    int me;
    uint32_t blk = 0;
    uint64_t timeout_ms;
    cudaError_t e;
    rmacoll_status_t st;

    if (tp == NULL || c == NULL || c->struct_size < sizeof(*c)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "call_stream");
    }
    if (!tp->fused) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    cu = tp->cu;
    me = tp->env->rank;
    if (*(volatile uint32_t *)tp->ferr != 0) {
        uint32_t w = *(volatile uint32_t *)tp->ferr;

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
    if (c->nputs > RMACOLL__NVL_FUSED_MAX || c->nready > RMACOLL__NVL_FUSED_MAX ||
        c->nwait > RMACOLL__NVL_FUSED_MAX || c->nready_wait > RMACOLL__NVL_FUSED_MAX) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    for (size_t i = 0; i < c->nputs; i++) {
        CUdeviceptr sig;

        st = rmacoll__cu_check_put(cu, &c->puts[i], i, &sig);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    f = &tp->fdesc;
    memset(f, 0, sizeof(*f));
    f->scope = RMACOLL__NVL_SCOPE_GPU;
    for (size_t i = 0; i < c->nready; i++) {
        CUdeviceptr sig;

        st = rmacoll__cu_check_put(cu, &c->ready[i], i, &sig);
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
    for (size_t i = 0; i < c->nwait; i++) {
        CUdeviceptr a = rmacoll__cu_word(cu, me, c->wait_idx[i], NULL);
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
    for (size_t i = 0; i < c->nready_wait; i++) {
        int used = 0;

        if (rmacoll__cu_word(cu, me, c->ready_idx[i], NULL) == 0) {
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
    for (size_t i = 0; i < c->nputs; i++) {
        const rmacoll_put_t *p = &c->puts[i];
        CUdeviceptr sig;
        uint32_t k;
        uint64_t nb;

        (void)rmacoll__cu_check_put(cu, p, i, &sig);
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
                f->e[k].rdy = (uint64_t)rmacoll__cu_word(cu, me, c->ready_idx[r], NULL);
                f->e[k].rdy_value = c->ready_val[r];
            }
        }
        if (p->peer != me && f->e[k].rdy == 0) {
            NVL_LOG(tp, RMACOLL_LOG_ERROR, "nvlink_kernel: call_stream: put %zu to peer %d "
                    "has no READY wait", i, p->peer);
            return RMACOLL_ERR_INVALID_ARG;
        }
        tp->peer_of[k] = p->peer;
        nb = (p->bytes + NVL_BYTES_PER_BLOCK - 1) / NVL_BYTES_PER_BLOCK;
        tp->eblocks[k] = nb == 0 ? 1u
                         : nb > NVL_MAX_BLOCKS_PER_ENTRY ? NVL_MAX_BLOCKS_PER_ENTRY
                                                         : (uint32_t)nb;
        f->group[k] = (uint8_t)k;
        for (uint32_t m = 0; m < k; m++) {
            if (tp->peer_of[m] == p->peer) {
                f->group[k] = f->group[m];
                break;
            }
        }
    }
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
        return rmacoll__cu_rt_error(cu, e, -1, what);
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t nvl_set_device_signals(rmacoll_transport_t *tp,
                                               const uint64_t *addr, const uint32_t *nwords)
{
    if (tp == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) { /* a probe (addr NULL) stays quiet */
        return addr == NULL ? (tp->off_status != RMACOLL_SUCCESS ? tp->off_status
                                                                 : RMACOLL_ERR_NO_DEVICE)
                            : nvl_off(tp, "set_device_signals");
    }
    return rmacoll__cu_set_device_signals(tp->cu, addr, nwords);
}

static rmacoll_status_t nvl_wait_stream(rmacoll_transport_t *tp,
                                        const uint32_t *idx,
                                        const uint64_t *values, size_t n,
                                        void *stream)
{
    if (tp == NULL || (n > 0 && (idx == NULL || values == NULL))) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "wait_stream");
    }
    return rmacoll__cu_wait_stream(tp->cu, idx, values, n, (cudaStream_t)stream);
}

static rmacoll_status_t nvl_signal_stream(rmacoll_transport_t *tp, int peer,
                                          uint32_t idx, uint64_t value,
                                          void *stream)
{
    if (tp == NULL || idx == RMACOLL_NO_SIGNAL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!tp->on) {
        return nvl_off(tp, "signal_stream");
    }
    return rmacoll__cu_signal_stream(tp->cu, peer, idx, value, (cudaStream_t)stream);
}

/* ---- host-driven ops ---------------------------------------------------- */

/* Puts of device memory on the transport's own stream; pending() counts
 * them until the stream passed them. */
static rmacoll_status_t nvl_post_puts(rmacoll_transport_t *tp,
                                      const rmacoll_put_t *puts, size_t n)
{
    cudaStream_t s = NULL;
    rmacoll_status_t st;

    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    if (!tp->on) {
        return nvl_off(tp, "post_puts");
    }
    st = rmacoll__cu_own_stream(tp->cu, &s);
    if (st == RMACOLL_SUCCESS) {
        st = nvl_post_puts_stream(tp, puts, n, s);
    }
    return st == RMACOLL_SUCCESS ? rmacoll__cu_record(tp->cu, n) : st;
}

static rmacoll_status_t nvl_progress(rmacoll_transport_t *tp)
{
    return rmacoll__cu_progress(tp != NULL && tp->on ? tp->cu : NULL);
}

static size_t nvl_pending(rmacoll_transport_t *tp)
{
    return rmacoll__cu_pending(tp != NULL && tp->on ? tp->cu : NULL);
}

RMACOLL__TOPS_ERROR_PEER_FN(nvl_error_peer, error_peer)

const rmacoll_transport_ops_t rmacoll_transport_nvlink_kernel_ops = {
    RMACOLL__TOPS_ABI,
    .name = "nvlink_kernel",
    .desc = "node peers, device memory: one CUDA kernel per queue copies over "
            "IPC-mapped peer pointers and signals (small messages)",
    .caps = RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA,
    .small_max_key = "nvlink_kernel_threshold",
    .base = RMACOLL__TOPS_BASE(.init = nvl_init, .finalize = nvl_finalize,
                               .progress = nvl_progress, .pending = nvl_pending,
                               .error_peer = nvl_error_peer),
    .mem = RMACOLL__TOPS_MEM(.mem_register = nvl_mem_register,
                             .mem_deregister = nvl_mem_deregister,
                             .mem_export = nvl_mem_export, .mem_import = nvl_mem_import),
    /* device memory from the host thread, on the transport's own stream */
    .host = RMACOLL__TOPS_HOST(.post_puts = nvl_post_puts),
    .stream = RMACOLL__TOPS_STREAM(.post_puts_stream = nvl_post_puts_stream,
                                   .wait_stream = nvl_wait_stream,
                                   .signal_stream = nvl_signal_stream,
                                   .call_stream = nvl_call_stream,
                                   .set_device_signals = nvl_set_device_signals),
    .keys = rmacoll_transport_nvlink_kernel_keys,
    .nkeys = NVL_NKEYS,
};

