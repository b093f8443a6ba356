/*
 * emunic.c - "emunic": an emulated GPUDirect RDMA NIC for virtual nodes
 * that share one host, as a transport plugin (public headers only; see
 * docs/transport-emunic.md). Load it as the network transport:
 *     transports: {inter_node: plugin:/path/librmacoll_emunic.so}
 *
 * It is a PROXY transport like ofi and verbs, and the core cannot tell it
 * from one: mem_register hands out rkeys, post_puts takes a queue of
 * PutSignals, progress() completes them and raises incoming signals,
 * error_peer names the culprit. Underneath, one host:
 *  - host memory: the bytes go at post time, by memcpy when the target
 *    rank is a thread of this process, else by cross-memory attach
 *    (process_vm_writev);
 *  - device memory (built with CUDA, a device present): mem_register
 *    takes an IPC handle of the allocation and publishes it in this
 *    rank's shared segment; a writer maps it (cudaIpcOpenMemHandle,
 *    cached by slot and generation; a thread of the same process uses the
 *    address as it is) and copies device to device with cudaMemcpyAsync
 *    on a stream of its own per peer, then records an event;
 *  - every put is paced (emunic_pace.h): a token bucket per direction per
 *    rail (emunic.rate, bytes/s) and a latency (emunic.latency_us); its
 *    signal is raised by this rank's progress() only once its copy has
 *    completed (the event), the emulated wire has carried it and the
 *    latency has passed, and after every earlier put to the same peer.
 *    Until then pending() counts it (its source is not reusable).
 * A signal is a release store of sig_value into the target's "shadow"
 * word (its shared segment); the target's progress() raises env->signals
 * from there (every word has one writer: the contract of
 * rmacoll_transport.h holds).
 *
 * Driver functions (cuMemGetAddressRange, cuPointerGetAttribute) come from
 * cudaGetDriverEntryPointByVersion; libcuda is never linked.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rmacoll_transport.h"

#include "emunic_maps.h"
#include "emunic_pace.h"

#ifdef EMUNIC_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#endif

#define EMU_NAME_BYTES 64
#define EMU_SLOTS 512          /* device registrations published per rank */
#define EMU_IPC_BYTES 64       /* cudaIpcMemHandle_t */
#define EMU_KEY_MAGIC 0x454d4e49u /* "EMNI" */
#define EMU_MAX_RAILS 16

#define EMU_LOG(tp_, lvl, ...)                                                 \
    do {                                                                       \
        if ((tp_)->env->log != NULL) {                                         \
            (tp_)->env->log((tp_)->env->log_ctx, (lvl),                        \
                            RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);        \
        }                                                                      \
    } while (0)

/* A published device registration: what a writer needs to map it. */
typedef struct emu_slot {
    uint64_t gen;                 /* odd while being written; even = valid */
    uint64_t base;                /* allocation base, owner's address */
    uint64_t size;                /* allocation size */
    uint64_t buffer_id;           /* CU_POINTER_ATTRIBUTE_BUFFER_ID (0 unknown) */
    uint8_t ipc[EMU_IPC_BYTES];
} emu_slot_t;

/* Each rank's shared segment (POSIX shared memory, mapped by every peer). */
typedef struct emu_shared {
    uint64_t rx_tat;              /* receive direction's bucket (ns) */
    uint64_t nsignals;
    emu_slot_t slot[EMU_SLOTS];
    uint64_t shadow[];            /* [nsignals]: signal words peers store */
} emu_shared_t;

/* What every rank tells the others at init. */
typedef struct emu_addr {
    int64_t pid;
    uint64_t nsignals;
    int32_t rail;
    int32_t has_cuda;
    char shm_name[EMU_NAME_BYTES];
} emu_addr_t;

/* rkey.key of a registration. */
typedef struct emu_key {
    uint32_t magic;
    uint32_t type;                /* rmacoll_memtype_t */
    uint32_t slot;                /* device: slot in the owner's segment */
    uint32_t pad;
    uint64_t gen;                 /* device: the slot's generation */
} emu_key_t;

/* A local registration. */
struct rmacoll_mem {
    void *addr;
    size_t bytes;
    rmacoll_memtype_t type;
    int slot;                     /* device: own slot, else -1 */
};

/* A put posted and not yet signalled. */
typedef struct emu_fly {
    int peer;
    uint32_t sig_index;
    uint64_t sig_value;
    uint64_t deliver_ns;
    uint64_t post_ns;             /* when it was posted (the finalize statistics) */
    int event;                    /* index in tp->events, or -1 (host copy) */
} emu_fly_t;

struct rmacoll_transport {
    const rmacoll_transport_env_t *env;
    int rank, nranks;
    emu_addr_t *addr;             /* [nranks] */
    emu_shared_t *own;
    size_t own_bytes;
    emu_shared_t **peer;          /* [nranks]: peers' segments */
    size_t *peer_bytes;
    int error_peer;

    /* the model */
    emunic_bucket_t tx, rx_of_rail[EMU_MAX_RAILS];
    uint64_t latency_ns;
    uint64_t tx_tat;

    /* in flight, FIFO in a ring */
    emu_fly_t *fly;
    size_t fly_cap, fly_head, fly_n;
    uint8_t *blocked;             /* [nranks]: scratch of progress */

    /* counters for the log at finalize; post -> signal times of device
     * puts (copy and wire) and of the others (wire only), and how much of
     * it a put waited for its copy after its wire time had passed */
    uint64_t puts, bytes, dev_puts;
    uint64_t dev_sig_ns, dev_sig_max_ns, dev_copy_late_ns, dev_signalled;
    uint64_t host_sig_ns, host_sig_max_ns, host_signalled;

    int cuda;                     /* device memory usable here */
    int slot_refs[EMU_SLOTS];     /* registrations using each own slot */
#ifdef EMUNIC_HAVE_CUDA
    int device;
    cudaStream_t *stream;         /* [nranks]: made at the first device put */
    cudaEvent_t *events;          /* [fly_cap]: one per ring position */
    emunic_map_t *maps;           /* [nranks * EMU_SLOTS]: mappings of peers' slots */
    CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*get_attr)(void *, CUpointer_attribute, CUdeviceptr);
#endif
};

static uint64_t emu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- configuration ---- */

/* The n-th value of a comma-separated list of numbers (the last one
 * repeats); -1 on a malformed list. */
static int emu_list_value(const char *list, int n, double *out)
{
    const char *p = list;
    double v = 0;
    int i = 0;

    for (;;) {
        char *end = NULL;
        errno = 0;
        v = strtod(p, &end);
        if (end == p || errno != 0 || v < 0) {
            return -1;
        }
        while (*end == ' ') {
            end++;
        }
        if (i == n || *end == '\0') {
            if (*end != '\0' && *end != ',') {
                return -1;
            }
            *out = v;
            return 0;
        }
        if (*end != ',') {
            return -1;
        }
        p = end + 1;
        i++;
    }
}

static rmacoll_status_t emu_config(rmacoll_transport_t *tp, int rail)
{
    const rmacoll_transport_env_t *env = tp->env;
    char rate[RMACOLL_CONFIG_STR_MAX] = "48.5e9", lat[RMACOLL_CONFIG_STR_MAX] = "3";
    char burst[64] = "0";
    double v;

    if (env->struct_size >= offsetof(rmacoll_transport_env_t, config_get) + sizeof(void *) &&
        env->config_get != NULL) {
        (void)env->config_get(env->config, "emunic.rate", rate, sizeof(rate));
        (void)env->config_get(env->config, "emunic.latency_us", lat, sizeof(lat));
        (void)env->config_get(env->config, "emunic.burst", burst, sizeof(burst));
    }
    for (int r = 0; r < EMU_MAX_RAILS; r++) {
        if (emu_list_value(rate, r, &v) != 0 || v > 1e15) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: emunic.rate '%s' is not a list of "
                    "rates in bytes/s (e.g. 48.5e9 or 48.5e9,25e9; 0 = no cap)", rate);
            return RMACOLL_ERR_CONFIG;
        }
        tp->rx_of_rail[r].rate = (uint64_t)v;
    }
    if (emu_list_value(lat, rail, &v) != 0 || v > 1e6) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: emunic.latency_us '%s' is not a list of "
                "latencies in microseconds (at most 1e6)", lat);
        return RMACOLL_ERR_CONFIG;
    }
    tp->latency_ns = (uint64_t)(v * 1000.0 + 0.5);
    {
        /* SIZE keys read back as text: digits with an optional suffix */
        char *end = NULL;
        double b = strtod(burst, &end);
        uint64_t mul = 1;
        if (end != NULL && *end != '\0') {
            mul = (*end == 'K' || *end == 'k')   ? 1024ull
                  : (*end == 'M' || *end == 'm') ? 1024ull * 1024
                  : (*end == 'G' || *end == 'g') ? 1024ull * 1024 * 1024
                                                 : 1;
        }
        for (int r = 0; r < EMU_MAX_RAILS; r++) {
            tp->rx_of_rail[r].burst = (uint64_t)(b * (double)mul);
        }
    }
    tp->tx = tp->rx_of_rail[rail < EMU_MAX_RAILS ? rail : EMU_MAX_RAILS - 1];
    return RMACOLL_SUCCESS;
}

/* ---- shared segments ---- */

static rmacoll_status_t emu_map_shm(const char *name, size_t bytes, int create, void **out)
{
    int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    void *p;

    if (fd < 0) {
        return RMACOLL_ERR_TRANSPORT;
    }
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        shm_unlink(name);
        return RMACOLL_ERR_TRANSPORT;
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        if (create) {
            shm_unlink(name);
        }
        return RMACOLL_ERR_TRANSPORT;
    }
    *out = p;
    return RMACOLL_SUCCESS;
}

static size_t emu_shared_bytes(uint64_t nsignals)
{
    return sizeof(emu_shared_t) + (size_t)nsignals * sizeof(uint64_t);
}

/* ---- CUDA ---- */

#ifdef EMUNIC_HAVE_CUDA
static int emu_cuda_probe(rmacoll_transport_t *tp)
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

static rmacoll_status_t emu_cuda_err(rmacoll_transport_t *tp, int peer, const char *what,
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
static rmacoll_status_t emu_publish(rmacoll_transport_t *tp, void *addr, size_t bytes,
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
static rmacoll_status_t emu_dev_target(rmacoll_transport_t *tp, int peer, const emu_key_t *k,
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

static rmacoll_status_t emu_dev_copy(rmacoll_transport_t *tp, int peer, void *dst,
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

/* ---- life cycle ---- */

static void emu_free(rmacoll_transport_t *tp)
{
#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda) {
        (void)cudaSetDevice(tp->device);
        for (int p = 0; tp->stream != NULL && p < tp->nranks; p++) {
            if (tp->stream[p] != NULL) {
                (void)cudaStreamSynchronize(tp->stream[p]);
                (void)cudaStreamDestroy(tp->stream[p]);
            }
        }
        for (size_t i = 0; tp->events != NULL && i < tp->fly_cap; i++) {
            if (tp->events[i] != NULL) {
                (void)cudaEventDestroy(tp->events[i]);
            }
        }
        for (size_t i = 0; tp->maps != NULL && i < (size_t)tp->nranks * EMU_SLOTS; i++) {
            if (tp->maps[i].ptr != NULL) {
                (void)cudaIpcCloseMemHandle(tp->maps[i].ptr);
            }
        }
    }
    free(tp->stream);
    free(tp->events);
    free(tp->maps);
#endif
    for (int p = 0; tp->peer != NULL && p < tp->nranks; p++) {
        if (tp->peer[p] != NULL && tp->peer[p] != tp->own) {
            munmap(tp->peer[p], tp->peer_bytes[p]);
        }
    }
    if (tp->own != NULL) {
        munmap(tp->own, tp->own_bytes);
    }
    free(tp->peer);
    free(tp->peer_bytes);
    free(tp->addr);
    free(tp->fly);
    free(tp->blocked);
    free(tp);
}

/* Collective: segments made, names exchanged, peers mapped, names
 * unlinked once everyone mapped them (nothing is left in /dev/shm). */
static rmacoll_status_t emu_init(const rmacoll_transport_env_t *env, rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    emu_addr_t mine;
    struct timespec ts;
    rmacoll_status_t st;
    void *p = NULL;
    int ok, *all_ok;

    *tpp = NULL;
    if (env == NULL || env->struct_size < sizeof(*env) || env->allgather == NULL ||
        env->topo == NULL) {
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
    tp->fly_cap = 4096;
    tp->addr = calloc((size_t)env->nranks, sizeof(*tp->addr));
    tp->peer = calloc((size_t)env->nranks, sizeof(*tp->peer));
    tp->peer_bytes = calloc((size_t)env->nranks, sizeof(*tp->peer_bytes));
    tp->fly = calloc(tp->fly_cap, sizeof(*tp->fly));
    tp->blocked = calloc((size_t)env->nranks, 1);
    all_ok = calloc((size_t)env->nranks, sizeof(int));
    if (tp->addr == NULL || tp->peer == NULL || tp->peer_bytes == NULL || tp->fly == NULL ||
        tp->blocked == NULL || all_ok == NULL) {
        free(all_ok);
        emu_free(tp);
        return RMACOLL_ERR_NO_MEMORY;
    }
    memset(&mine, 0, sizeof(mine));
    mine.pid = (int64_t)getpid();
    mine.nsignals = env->nsignals;
    mine.rail = env->topo->local_rank[env->rank];
    st = emu_config(tp, mine.rail);
#ifdef EMUNIC_HAVE_CUDA
    if (st == RMACOLL_SUCCESS) {
        tp->cuda = emu_cuda_probe(tp);
    }
#endif
    mine.has_cuda = tp->cuda;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(mine.shm_name, sizeof(mine.shm_name), "/rmacoll-emunic-%lld-%d-%lx",
             (long long)mine.pid, env->rank, (unsigned long)ts.tv_nsec);
    tp->own_bytes = emu_shared_bytes(env->nsignals);
    if (st == RMACOLL_SUCCESS) {
        st = emu_map_shm(mine.shm_name, tp->own_bytes, 1, &p);
        if (st == RMACOLL_SUCCESS) {
            tp->own = p;
            tp->own->nsignals = env->nsignals;
        } else {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: cannot create %s (%zu bytes): %s",
                    mine.shm_name, tp->own_bytes, strerror(errno));
        }
    }
    /* every rank takes part in every exchange, even after a local error */
    if (env->allgather(env->oob_ctx, &mine, tp->addr, sizeof(mine)) != RMACOLL_SUCCESS) {
        st = RMACOLL_ERR_BOOTSTRAP;
    }
    for (int q = 0; st == RMACOLL_SUCCESS && q < env->nranks; q++) {
        if (q == env->rank) {
            tp->peer[q] = tp->own;
            continue;
        }
        if (!env->peers[q]) {
            continue;
        }
        tp->peer_bytes[q] = emu_shared_bytes(tp->addr[q].nsignals);
        st = emu_map_shm(tp->addr[q].shm_name, tp->peer_bytes[q], 0, &p);
        if (st != RMACOLL_SUCCESS) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: cannot map %s of peer %d: %s",
                    tp->addr[q].shm_name, q, strerror(errno));
            tp->error_peer = q;
            break;
        }
        tp->peer[q] = p;
    }
    ok = st == RMACOLL_SUCCESS;
    if (env->allgather(env->oob_ctx, &ok, all_ok, sizeof(int)) != RMACOLL_SUCCESS) {
        st = RMACOLL_ERR_BOOTSTRAP;
    }
    if (tp->own != NULL) {
        shm_unlink(mine.shm_name);
    }
    for (int q = 0; st == RMACOLL_SUCCESS && q < env->nranks; q++) {
        if (!all_ok[q]) {
            st = RMACOLL_ERR_TRANSPORT;
            tp->error_peer = q;
        }
    }
    free(all_ok);
    if (st != RMACOLL_SUCCESS) {
        emu_free(tp);
        return st;
    }
    EMU_LOG(tp, RMACOLL_LOG_INFO, "emunic: rank %d rail %d: %.2f GB/s per direction%s, "
            "latency %.2f us, burst %" PRIu64 " bytes, device memory %s", tp->rank,
            mine.rail, (double)tp->tx.rate / 1e9, tp->tx.rate == 0 ? " (no cap)" : "",
            (double)tp->latency_ns / 1e3, tp->tx.burst, tp->cuda ? "by CUDA IPC" : "no");
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

static void emu_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        EMU_LOG(tp, RMACOLL_LOG_DEBUG, "emunic: rank %d: %" PRIu64 " puts (%" PRIu64
                " of device memory), %" PRIu64 " bytes; post to signal: device puts "
                "%.1f us mean (%.1f max; %.1f us of it past the wire time, waiting for "
                "the copy), others %.1f us mean (%.1f max)", tp->rank, tp->puts,
                tp->dev_puts, tp->bytes,
                tp->dev_signalled ? tp->dev_sig_ns / 1e3 / (double)tp->dev_signalled : 0.0,
                tp->dev_sig_max_ns / 1e3,
                tp->dev_signalled ? tp->dev_copy_late_ns / 1e3 / (double)tp->dev_signalled
                                  : 0.0,
                tp->host_signalled ? tp->host_sig_ns / 1e3 / (double)tp->host_signalled : 0.0,
                tp->host_sig_max_ns / 1e3);
        emu_free(tp);
    }
}

static uint64_t emu_instance_caps(rmacoll_transport_t *tp, char *desc, size_t len)
{
    if (desc != NULL && len > 0) {
        snprintf(desc, len, "%s", tp->cuda ? "device memory by CUDA IPC (emulated GPUDirect)"
                                           : "no CUDA device: host memory only");
    }
    return tp->cuda ? RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA : 0;
}

/* One emulated NIC per rank: a rail each (direct streams never apply). */
static void emu_local_nic(rmacoll_transport_t *tp, char *name, size_t len)
{
    snprintf(name, len, "emunic %lld:%d", (long long)tp->addr[tp->rank].pid, tp->rank);
}

/* ---- memory ---- */

static rmacoll_status_t emu_mem_register(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                         rmacoll_memtype_t type, rmacoll_mem_t **mem,
                                         rmacoll_rkey_t *rkey)
{
    rmacoll_mem_t *m;
    emu_key_t k;

    if (tp == NULL || mem == NULL || addr == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (type != RMACOLL_MEM_HOST && (type != RMACOLL_MEM_CUDA || !tp->cuda)) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    m->addr = addr;
    m->bytes = bytes;
    m->type = type;
    m->slot = -1;
    memset(&k, 0, sizeof(k));
    k.magic = EMU_KEY_MAGIC;
    k.type = (uint32_t)type;
#ifdef EMUNIC_HAVE_CUDA
    if (type == RMACOLL_MEM_CUDA) {
        rmacoll_status_t st;
        (void)cudaSetDevice(tp->device);
        st = emu_publish(tp, addr, bytes, &m->slot);
        if (st != RMACOLL_SUCCESS) {
            free(m);
            return st;
        }
        k.slot = (uint32_t)m->slot;
        k.gen = __atomic_load_n(&tp->own->slot[m->slot].gen, __ATOMIC_RELAXED);
    }
#endif
    if (rkey != NULL) {
        memset(rkey, 0, sizeof(*rkey));
        rkey->addr = (uint64_t)(uintptr_t)addr;
        rkey->bytes = bytes;
        rkey->len = sizeof(k);
        memcpy(rkey->key, &k, sizeof(k));
    }
    *mem = m;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t emu_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    if (mem != NULL && mem->slot >= 0 && tp->slot_refs[mem->slot] > 0) {
        tp->slot_refs[mem->slot]--; /* the slot stays published for reuse */
    }
    free(mem);
    return RMACOLL_SUCCESS;
}

/* ---- data path ---- */

static rmacoll_status_t emu_host_write(rmacoll_transport_t *tp, const rmacoll_put_t *pt)
{
    uint64_t done = 0;

    if (tp->addr[pt->peer].pid == tp->addr[tp->rank].pid) {
        memcpy((void *)(uintptr_t)pt->dst_addr, pt->src, (size_t)pt->bytes);
        return RMACOLL_SUCCESS;
    }
    while (done < pt->bytes) {
        struct iovec l = {(char *)pt->src + done, (size_t)(pt->bytes - done)};
        struct iovec r = {(void *)(uintptr_t)(pt->dst_addr + done), (size_t)(pt->bytes - done)};
        ssize_t n = process_vm_writev((pid_t)tp->addr[pt->peer].pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: writing %" PRIu64 " bytes to peer %d "
                    "failed: %s", pt->bytes - done, pt->peer,
                    n < 0 ? strerror(errno) : "no progress");
            tp->error_peer = pt->peer;
            return RMACOLL_ERR_TRANSPORT;
        }
        done += (uint64_t)n;
    }
    return RMACOLL_SUCCESS;
}

/* Room for one more put in flight: the ring doubles (rarely: 4096 first). */
static rmacoll_status_t emu_fly_room(rmacoll_transport_t *tp)
{
    size_t cap = tp->fly_cap * 2;
    emu_fly_t *f;

    if (tp->fly_n < tp->fly_cap) {
        return RMACOLL_SUCCESS;
    }
    f = calloc(cap, sizeof(*f));
    if (f == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda) {
        cudaEvent_t *ev = calloc(cap, sizeof(*ev));
        if (ev == NULL) {
            free(f);
            return RMACOLL_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i < tp->fly_n; i++) {
            size_t at = (tp->fly_head + i) % tp->fly_cap;
            ev[i] = tp->events[at];
            tp->events[at] = NULL;
        }
        for (size_t i = 0; i < tp->fly_cap; i++) {
            if (tp->events[i] != NULL) {
                ev[tp->fly_n + i] = tp->events[i]; /* idle ones move along */
            }
        }
        free(tp->events);
        tp->events = ev;
    }
#endif
    for (size_t i = 0; i < tp->fly_n; i++) {
        size_t at = (tp->fly_head + i) % tp->fly_cap;
        f[i] = tp->fly[at];
        if (f[i].event >= 0) {
            f[i].event = (int)i;
        }
    }
    free(tp->fly);
    tp->fly = f;
    tp->fly_head = 0;
    tp->fly_cap = cap;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t emu_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                      size_t n)
{
#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda) {
        (void)cudaSetDevice(tp->device);
    }
#endif
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *pt = &puts[i];
        emu_key_t k;
        emu_fly_t *f;
        size_t at;
        uint64_t now, txd, rxd;
        rmacoll_status_t st;
        int dev;

        if (pt->peer < 0 || pt->peer >= tp->nranks || tp->peer[pt->peer] == NULL) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put %zu names peer %d, which is not a "
                    "peer of this instance", i, pt->peer);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (pt->sig_index != RMACOLL_NO_SIGNAL && pt->sig_index >= tp->addr[pt->peer].nsignals) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put %zu to peer %d signals word %u of "
                    "%" PRIu64, i, pt->peer, pt->sig_index, tp->addr[pt->peer].nsignals);
            return RMACOLL_ERR_INVALID_ARG;
        }
        memset(&k, 0, sizeof(k));
        if (pt->bytes > 0) {
            if (pt->dst_rkey == NULL || pt->dst_rkey->len != sizeof(k)) {
                EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes to peer %d "
                        "without an emunic rkey", pt->bytes, pt->peer);
                return RMACOLL_ERR_INVALID_ARG;
            }
            memcpy(&k, pt->dst_rkey->key, sizeof(k));
            if (k.magic != EMU_KEY_MAGIC || pt->dst_addr < pt->dst_rkey->addr ||
                pt->dst_addr + pt->bytes > pt->dst_rkey->addr + pt->dst_rkey->bytes) {
                EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes to peer %d "
                        "at 0x%" PRIx64 " lies outside its registration", pt->bytes, pt->peer,
                        pt->dst_addr);
                tp->error_peer = pt->peer;
                return RMACOLL_ERR_INVALID_ARG;
            }
        }
        if ((st = emu_fly_room(tp)) != RMACOLL_SUCCESS) {
            return st;
        }
        at = (tp->fly_head + tp->fly_n) % tp->fly_cap;
        f = &tp->fly[at];
        f->peer = pt->peer;
        f->sig_index = pt->sig_index;
        f->sig_value = pt->sig_value;
        f->event = -1;
        dev = pt->bytes > 0 && (k.type == RMACOLL_MEM_CUDA ||
                                (pt->src_mem != NULL && pt->src_mem->type == RMACOLL_MEM_CUDA));
        if (pt->bytes > 0 && !dev) {
            if ((st = emu_host_write(tp, pt)) != RMACOLL_SUCCESS) {
                return st;
            }
        } else if (dev) {
#ifdef EMUNIC_HAVE_CUDA
            void *dst = (void *)(uintptr_t)pt->dst_addr;
            if (!tp->cuda) {
                return RMACOLL_ERR_UNSUPPORTED;
            }
            if (k.type == RMACOLL_MEM_CUDA) {
                st = emu_dev_target(tp, pt->peer, &k, pt->dst_addr, pt->bytes, &dst);
            } else if (tp->addr[pt->peer].pid != tp->addr[tp->rank].pid) {
                EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes of device "
                        "memory into host memory of peer %d, another process: not supported",
                        pt->bytes, pt->peer);
                tp->error_peer = pt->peer;
                st = RMACOLL_ERR_UNSUPPORTED;
            }
            if (st == RMACOLL_SUCCESS) {
                st = emu_dev_copy(tp, pt->peer, dst, pt->src, pt->bytes, (int)at);
            }
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            f->event = (int)at;
            tp->dev_puts++;
#else
            return RMACOLL_ERR_UNSUPPORTED;
#endif
        }
        /* the wire: both directions' buckets, then the latency */
        now = emu_now();
        txd = emunic_bucket_take(&tp->tx, &tp->tx_tat, now, pt->bytes);
        rxd = emunic_bucket_take_shared(
            &tp->rx_of_rail[tp->addr[pt->peer].rail < EMU_MAX_RAILS ? tp->addr[pt->peer].rail
                                                                     : EMU_MAX_RAILS - 1],
            &tp->peer[pt->peer]->rx_tat, now, pt->bytes);
        f->deliver_ns = emunic_deliver_at(txd, rxd, tp->latency_ns);
        f->post_ns = now;
        tp->fly_n++;
        tp->puts++;
        tp->bytes += pt->bytes;
    }
    return RMACOLL_SUCCESS;
}

/* Whether put f's copy has completed (host copies completed at post). */
static int emu_copied(rmacoll_transport_t *tp, const emu_fly_t *f, rmacoll_status_t *st)
{
    if (f->event < 0) {
        return 1;
    }
#ifdef EMUNIC_HAVE_CUDA
    {
        cudaError_t e = cudaEventQuery(tp->events[f->event]);
        if (e == cudaSuccess) {
            return 1;
        }
        if (e != cudaErrorNotReady) {
            *st = emu_cuda_err(tp, f->peer, "device copy", e);
        } else {
            (void)cudaGetLastError();
        }
    }
#endif
    return 0;
}

/* Raises the signals of completed puts (per peer in post order), then
 * this rank's words from the shadow peers stored into. */
static rmacoll_status_t emu_progress(rmacoll_transport_t *tp)
{
    volatile uint64_t *sig = tp->env->signals;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (tp->fly_n > 0) {
        uint64_t now = emu_now();
        size_t kept = 0, n = tp->fly_n;

#ifdef EMUNIC_HAVE_CUDA
        if (tp->cuda) {
            (void)cudaSetDevice(tp->device);
        }
#endif
        memset(tp->blocked, 0, (size_t)tp->nranks);
        /* compact in place: entries kept move towards the head, in order */
        for (size_t i = 0; i < n; i++) {
            size_t at = (tp->fly_head + i) % tp->fly_cap;
            emu_fly_t f = tp->fly[at];
            int done = !tp->blocked[f.peer] && now >= f.deliver_ns && emu_copied(tp, &f, &st);

            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            if (done) {
                uint64_t took = now - f.post_ns;
                if (f.event >= 0) {
                    tp->dev_signalled++;
                    tp->dev_sig_ns += took;
                    tp->dev_sig_max_ns = took > tp->dev_sig_max_ns ? took : tp->dev_sig_max_ns;
                    tp->dev_copy_late_ns += now - f.deliver_ns;
                } else {
                    tp->host_signalled++;
                    tp->host_sig_ns += took;
                    tp->host_sig_max_ns = took > tp->host_sig_max_ns ? took
                                                                     : tp->host_sig_max_ns;
                }
                if (f.sig_index != RMACOLL_NO_SIGNAL) {
                    __atomic_store_n(&tp->peer[f.peer]->shadow[f.sig_index], f.sig_value,
                                     __ATOMIC_RELEASE);
                }
                continue;
            }
            tp->blocked[f.peer] = 1;
            {
                size_t to = (tp->fly_head + kept) % tp->fly_cap;
                if (to != at) {
#ifdef EMUNIC_HAVE_CUDA
                    if (f.event >= 0) {
                        cudaEvent_t t = tp->events[to];
                        tp->events[to] = tp->events[at];
                        tp->events[at] = t;
                        f.event = (int)to;
                    }
#endif
                    tp->fly[to] = f;
                }
            }
            kept++;
        }
        tp->fly_n = kept;
    }
    for (uint32_t i = 0; i < tp->env->nsignals; i++) {
        uint64_t v = __atomic_load_n(&tp->own->shadow[i], __ATOMIC_ACQUIRE);
        if (v > __atomic_load_n(&sig[i], __ATOMIC_RELAXED)) {
            __atomic_store_n(&sig[i], v, __ATOMIC_RELEASE);
        }
    }
    return st;
}

static size_t emu_pending(rmacoll_transport_t *tp)
{
    return tp->fly_n;
}

static int emu_error_peer(rmacoll_transport_t *tp)
{
    return tp != NULL ? tp->error_peer : -1;
}

/* ---- the table ---- */

static const rmacoll_transport_key_t emu_keys[] = {
    {"rate", RMACOLL_CONFIG_STRING, "48.5e9",
     "emulated NIC rate per direction in bytes/s, per rail as a list (48.5e9,25e9; the last "
     "repeats); 0 = no cap", 0, 0},
    {"latency_us", RMACOLL_CONFIG_STRING, "3",
     "emulated NIC latency before a put's signal, microseconds, per rail as a list", 0, 0},
    {"burst", RMACOLL_CONFIG_SIZE, "0",
     "bytes a direction's token bucket lets go at once after idling", 0, 0},
};

static const rmacoll_transport_base_ops_t emu_base = {
    .size = sizeof(rmacoll_transport_base_ops_t),
    .init = emu_init,
    .finalize = emu_finalize,
    .progress = emu_progress,
    .pending = emu_pending,
    .error_peer = emu_error_peer,
    .instance_caps = emu_instance_caps,
    .local_nic = emu_local_nic,
};

static const rmacoll_transport_mem_ops_t emu_mem = {
    .size = sizeof(rmacoll_transport_mem_ops_t),
    .mem_register = emu_mem_register,
    .mem_deregister = emu_mem_deregister,
};

static const rmacoll_transport_host_ops_t emu_host = {
    .size = sizeof(rmacoll_transport_host_ops_t),
    .post_puts = emu_post_puts,
};

const rmacoll_transport_ops_t RMACOLL_TRANSPORT_PLUGIN_SYMBOL = {
    .abi_version = RMACOLL_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(rmacoll_transport_ops_t),
    .name = "emunic",
    .desc = "emulated GPUDirect NIC for virtual nodes on one host: rate and latency per "
            "rail, CUDA IPC copies (docs/transport-emunic.md)",
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST,
    .base = &emu_base,
    .mem = &emu_mem,
    .host = &emu_host,
    .keys = emu_keys,
    .nkeys = sizeof(emu_keys) / sizeof(emu_keys[0]),
};
