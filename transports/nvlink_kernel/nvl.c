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
 *
 * Files (nvl_internal.h lists what they share): this one holds the ops
 * table, init, the memory ops and the host-driven ops; nvl_stream.c the
 * stream ops; nvl.cu the kernels.
 */
#define _GNU_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rmacoll_transport.h"
#include "transports/common/tops.h"
#include "transports/nvlink_kernel/nvl_internal.h"
#include "transports/nvlink_kernel/nvl_keys.h"

rmacoll_status_t rmacoll__nvl_off(rmacoll_transport_t *tp, const char *op)
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
    if (tp->dc_rep != NULL) {
        cudaFreeHost(tp->dc_rep);
        tp->dc_rep = NULL;
        tp->dc_rep_dev = NULL;
    }
    tp->dc_ok = 0;
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

/* Device-count calls (nvl.h): their kernels wait for each other as the
 * one-launch path's do, so the same rule: no rank on this GPU in another
 * process; the grid bounded likewise. Off (with the reason kept for the
 * call's message) when not possible. */
static void nvl_dc_init(rmacoll_transport_t *tp, const struct cudaDeviceProp *prop,
                        int nshare, int other)
{
    cudaError_t e;

    if (other >= 0) {
        snprintf(tp->dc_why, sizeof(tp->dc_why), "rank %d uses the same GPU from another "
                 "process (kernels of separate processes are time-sliced without MPS and "
                 "cannot wait for each other)", other);
        return;
    }
    e = cudaHostAlloc((void **)&tp->dc_rep, RMACOLL__NVL_DC_REP_BYTES, cudaHostAllocMapped);
    if (e == cudaSuccess) {
        memset(tp->dc_rep, 0, RMACOLL__NVL_DC_REP_BYTES);
        e = cudaHostGetDevicePointer((void **)&tp->dc_rep_dev, tp->dc_rep, 0);
    }
    if (e != cudaSuccess) {
        rmacoll__cu_rt_error(tp->cu, e, -1, "allocating the device-count report word");
        snprintf(tp->dc_why, sizeof(tp->dc_why), "cannot allocate %u bytes of mapped host "
                 "memory: %s", (unsigned)RMACOLL__NVL_DC_REP_BYTES, cudaGetErrorString(e));
        if (tp->dc_rep != NULL) {
            cudaFreeHost(tp->dc_rep);
        }
        tp->dc_rep = NULL;
        tp->dc_rep_dev = NULL;
        return;
    }
    e = rmacoll__nvl_dc_prepare();
    if (e != cudaSuccess) {
        snprintf(tp->dc_why, sizeof(tp->dc_why), "cannot give the device-count kernel its "
                 "shared memory: %s", cudaGetErrorString(e));
        cudaFreeHost(tp->dc_rep);
        tp->dc_rep = NULL;
        tp->dc_rep_dev = NULL;
        return;
    }
    tp->dc_max_blocks = (uint32_t)(prop->multiProcessorCount / nshare);
    if (tp->dc_max_blocks == 0) {
        tp->dc_max_blocks = 1;
    }
    if (tp->dc_max_blocks > RMACOLL__NVL_DC_MAX_BLOCKS) {
        tp->dc_max_blocks = RMACOLL__NVL_DC_MAX_BLOCKS;
    }
    tp->dc_ok = 1;
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
    if (mine.on) {
        nvl_dc_init(tp, &prop, nshare, other);
    }
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
        return rmacoll__nvl_off(tp, "mem_register");
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
        return rmacoll__nvl_off(tp, "mem_export");
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
        return rmacoll__nvl_off(tp, "mem_import");
    }
    return rmacoll__cu_import(tp->cu, peer, blob, addr);
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
        return rmacoll__nvl_off(tp, "post_puts");
    }
    st = rmacoll__cu_own_stream(tp->cu, &s);
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__nvl_post_puts_stream(tp, puts, n, s);
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
    .stream = RMACOLL__TOPS_STREAM(.post_puts_stream = rmacoll__nvl_post_puts_stream,
                                   .wait_stream = rmacoll__nvl_wait_stream,
                                   .signal_stream = rmacoll__nvl_signal_stream,
                                   .call_stream = rmacoll__nvl_call_stream,
                                   .set_device_signals = rmacoll__nvl_set_device_signals,
                                   .dcounts_stream = rmacoll__nvl_dcounts_stream,
                                   .dcounts_report = rmacoll__nvl_dcounts_report),
    .keys = rmacoll_transport_nvlink_kernel_keys,
    .nkeys = NVL_NKEYS,
};

