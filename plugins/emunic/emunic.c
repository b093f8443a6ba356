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
 *    on a stream of its own per peer, then records an event; with a
 *    peer in another process, the mappings, streams, copies and events
 *    live in a CUDA context of emunic's own (one per process and device),
 *    so that closing a mapping the peer freed waits for emunic's copies
 *    only, never for the user's streams;
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
 * Driver functions (cuMemGetAddressRange, cuPointerGetAttribute, the
 * context calls, cuMemcpyPeerAsync) come from
 * cudaGetDriverEntryPointByVersion; libcuda is never linked.
 *
 * The pieces (one plugin, librmacoll_emunic.so): this file, the life
 * cycle (configuration, shared segments, init, finalize), memory
 * registration and the ops table; emunic_cuda.c the device-memory parts;
 * emunic_data.c the data path (post_puts, progress); emunic_int.h what
 * they share.
 */
#include "emunic_int.h"

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


/* ---- life cycle ---- */

static void emu_free(rmacoll_transport_t *tp)
{
#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda) {
        (void)cudaSetDevice(tp->device);
    }
    if (tp->cuda && emu_ctx_enter(tp) == RMACOLL_SUCCESS) {
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
        emu_ctx_leave(tp);
    }
    if (tp->cuda) {
        emu_xctx_drop(tp);
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

/* This rank's side before the exchange (mine, zeroed here): the model's
 * configuration, CUDA, and its own segment under a fresh name. */
static rmacoll_status_t emu_init_own(rmacoll_transport_t *tp, emu_addr_t *mine)
{
    const rmacoll_transport_env_t *env = tp->env;
    struct timespec ts;
    rmacoll_status_t st;
    void *p = NULL;

    memset(mine, 0, sizeof(*mine));
    mine->pid = (int64_t)getpid();
    mine->nsignals = env->nsignals;
    mine->rail = env->topo->local_rank[env->rank];
    st = emu_config(tp, mine->rail);
#ifdef EMUNIC_HAVE_CUDA
    if (st == RMACOLL_SUCCESS) {
        tp->cuda = emu_cuda_probe(tp);
    }
#endif
    mine->has_cuda = tp->cuda;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(mine->shm_name, sizeof(mine->shm_name), "/rmacoll-emunic-%lld-%d-%lx",
             (long long)mine->pid, env->rank, (unsigned long)ts.tv_nsec);
    tp->own_bytes = emu_shared_bytes(env->nsignals);
    if (st == RMACOLL_SUCCESS) {
        st = emu_map_shm(mine->shm_name, tp->own_bytes, 1, &p);
        if (st == RMACOLL_SUCCESS) {
            tp->own = p;
            tp->own->nsignals = env->nsignals;
        } else {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: cannot create %s (%zu bytes): %s",
                    mine->shm_name, tp->own_bytes, strerror(errno));
        }
    }
    return st;
}

/* Maps the segment of every peer, by the names in tp->addr. */
static rmacoll_status_t emu_map_peers(rmacoll_transport_t *tp)
{
    const rmacoll_transport_env_t *env = tp->env;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    void *p = NULL;

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
    return st;
}

/* Collective: segments made, names exchanged, peers mapped, names
 * unlinked once everyone mapped them (nothing is left in /dev/shm). */
static rmacoll_status_t emu_init(const rmacoll_transport_env_t *env, rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    emu_addr_t mine;
    rmacoll_status_t st;
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
    st = emu_init_own(tp, &mine);
    /* every rank takes part in every exchange, even after a local error */
    if (env->allgather(env->oob_ctx, &mine, tp->addr, sizeof(mine)) != RMACOLL_SUCCESS) {
        st = RMACOLL_ERR_BOOTSTRAP;
    }
    if (st == RMACOLL_SUCCESS) {
        st = emu_map_peers(tp);
    }
#ifdef EMUNIC_HAVE_CUDA
    if (st == RMACOLL_SUCCESS && tp->cuda) {
        st = emu_xctx_take(tp);
    }
#endif
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
