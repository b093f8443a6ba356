/*
 * comm_xport.c - the steps of communicator creation that bind and start the
 * transports: the transports to choose from, the bindings and one instance
 * each (xport/bind.h), how device buffers cross nodes, device-resident
 * signal words on one node, the network registrations of the control window
 * and relay buffers. Collective, in this order; failures recorded in
 * last_error (base/fail.h).
 */
#include "core/base/text.h"
#include "core/comm/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config/config_internal.h"
#include "core/plan/topo.h"

static void env_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys,
                    const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rmacoll__vlog(ctx, level, subsys, fmt, ap);
    va_end(ap);
}

static void fill_env(rmacoll_comm_t *comm, rmacoll_transport_env_t *env,
                     const uint8_t *peers)
{
    memset(env, 0, sizeof(*env));
    env->struct_size = sizeof(*env);
    env->rank = comm->rank;
    env->nranks = comm->nranks;
    env->topo = comm->topo;
    env->config = &comm->cfg;
    env->peers = peers;
    env->signals = comm->signals;
    env->nsignals = comm->lay.nsig;
    env->peer_signals = (volatile uint64_t *const *)comm->peer_signals;
    env->allgather = rmacoll__bootstrap_allgather_cb;
    env->oob_ctx = comm->bs;
    env->log = env_log;
    env->log_ctx = &comm->log;
    for (int r = 0; r < comm->nranks; r++) {
        comm->peer_nsig[r] = comm->peer_lay[r].nsig;
    }
    env->peer_nsignals = comm->peer_nsig;
    env->config_get = rmacoll_config_get;
}

/* The transports to choose from: every built-in, then the plugins the
 * config names. */
static rmacoll_status_t load_avail(rmacoll_comm_t *comm)
{
    const char *spec[2] = {comm->cfg.intra_node, comm->cfg.inter_node};
    const char *what[2] = {"transports.intra_node", "transports.inter_node"};
    char err[512];
    rmacoll_status_t st;

    for (int i = 0; rmacoll__builtin_transports[i] != NULL; i++) {
        if (comm->navail == RMACOLL__MAX_AVAIL) {
            break;
        }
        st = rmacoll__tops_adopt(rmacoll__builtin_transports[i],
                                 &comm->avail[comm->navail], err, sizeof(err));
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__fail(&comm->fail, st, "rank %d: built-in %s", comm->rank, err);
        }
        comm->navail++;
    }
    for (int k = 0; k < 2; k++) {
        int known = 0;
        for (int i = 0; i < comm->navail; i++) {
            known |= strcmp(comm->avail[i].spec, spec[k]) == 0;
        }
        if (known || strncmp(spec[k], "plugin:", 7) != 0 ||
            comm->navail == RMACOLL__MAX_AVAIL) {
            continue;
        }
        st = rmacoll__tops_find(spec[k], what[k], &comm->avail[comm->navail], err,
                                sizeof(err));
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__fail(&comm->fail, st, "rank %d: %s", comm->rank, err);
        }
        comm->navail++;
    }
    return RMACOLL_SUCCESS;
}

/* Bindings, then one instance per transport bound (each init is
 * collective; every rank resolves alike from the shared config). */
rmacoll_status_t rmacoll__comm_setup_transports(rmacoll_comm_t *comm)
{
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    char err[512];
    rmacoll_status_t st = load_avail(comm);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = rmacoll__bind_resolve(comm->avail, comm->navail, &comm->cfg, topo->nnodes > 1,
                               comm->rank, &comm->bp, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "%s", err);
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        comm->path_peers[RMACOLL__PATH_CE][rmacoll__topo_rank(topo, A, l)] = 1;
    }
    comm->path_peers[RMACOLL__PATH_CE][comm->rank] = 0;
    for (int i = 0; i < comm->bp.ninst; i++) {
        rmacoll__tinst_t *ti = &comm->inst[i];
        ti->ops = comm->bp.ops[i];
        fill_env(comm, &ti->env, comm->path_peers[comm->bp.path[i]]);
        st = ti->ops->base.init(&ti->env, &ti->tp);
        if (st != RMACOLL_SUCCESS) {
            ti->tp = NULL;
            return rmacoll__fail(&comm->fail, st, "rank %d: transport %s (%s) failed to "
                                 "initialise: %s", comm->rank, ti->ops->name,
                                 comm->bp.path[i] == RMACOLL__PATH_PROXY
                                     ? "transports.inter_node"
                                     : "transports.intra_node",
                                 rmacoll_status_string(st));
        }
    }
    return RMACOLL_SUCCESS;
}

/* transports.device_inter_node of cfg. */
static rmacoll__devnet_mode_t devnet_mode(const rmacoll_config_t *cfg)
{
    char v[RMACOLL_CONFIG_STR_MAX];

    if (rmacoll_config_get(cfg, "transports.device_inter_node", v, sizeof(v)) !=
        RMACOLL_SUCCESS) {
        return RMACOLL__DEVNET_AUTO;
    }
    return strcmp(v, "staged") == 0 ? RMACOLL__DEVNET_STAGED
           : strcmp(v, "hmem") == 0 ? RMACOLL__DEVNET_HMEM
                                    : RMACOLL__DEVNET_AUTO;
}

/*
 * How device buffers cross nodes (bind.h: rmacoll__bind_device_net), from
 * the instances' capabilities after init; with registration and relay
 * channels, the relay buffer in device memory. Collective: every rank
 * takes the registered path or none does (a rank that cannot makes all
 * stage; with transports.device_inter_node = hmem all fail). Logged at
 * INFO with the reason.
 */
rmacoll_status_t rmacoll__comm_setup_device_path(rmacoll_comm_t *comm)
{
    rmacoll__tinst_t *net = rmacoll__inst_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
    rmacoll__tinst_t *ce = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll__devnet_mode_t mode = devnet_mode(&comm->cfg);
    char desc[256], reason[640];
    int32_t mine = 0, *all;
    uint64_t caps;
    rmacoll_status_t st, lst;

    if (net == NULL) {
        return RMACOLL_SUCCESS; /* one node (alike on every rank) */
    }
    caps = rmacoll__tops_instance_caps(net->ops, net->tp, desc, sizeof(desc));
    lst = rmacoll__bind_device_net(net->ops->name, caps, desc, ce ? ce->ops->name : NULL,
                                   ce ? ce->ops->caps : 0, mode, &mine, reason,
                                   sizeof(reason));
    if (lst != RMACOLL_SUCCESS) {
        mine = -1;
    }
    if (mine == 1 && comm->nin > 0) {
        st = ce->ops->mem.mem_alloc(ce->tp, comm->relay_bytes, RMACOLL_MEM_CUDA,
                                    &comm->drelay_buf);
        if (st != RMACOLL_SUCCESS) {
            mine = mode == RMACOLL__DEVNET_HMEM ? -1 : 0;
            lst = mode == RMACOLL__DEVNET_HMEM ? st : RMACOLL_SUCCESS;
            snprintf(reason, sizeof(reason), "device path across nodes: host staging "
                     "(cannot allocate the relay buffer in device memory, %llu bytes, "
                     "with %s: %s)", (unsigned long long)comm->relay_bytes, ce->ops->name,
                     rmacoll_status_string(st));
        }
    }
    all = malloc((size_t)comm->nranks * sizeof(*all));
    if (all == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = rmacoll__bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    for (int r = 0; st == RMACOLL_SUCCESS && r < comm->nranks; r++) {
        if (all[r] == -1) {
            if (r == comm->rank) {
                st = rmacoll__fail(&comm->fail, lst, "rank %d: %s", comm->rank, reason);
            } else {
                st = rmacoll__fail(&comm->fail, RMACOLL_ERR_CONFIG, "rank %d: rank %d cannot "
                                   "take device buffers across nodes without staging "
                                   "(transports.device_inter_node = hmem; its log says "
                                   "why)", comm->rank, r);
            }
            break;
        }
        if (all[r] == 0 && mine == 1) {
            mine = 0;
            snprintf(reason, sizeof(reason), "device path across nodes: host staging (rank "
                     "%d stages: every rank takes the same path)", r);
        }
    }
    free(all);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (mine != 1 && comm->drelay_buf != NULL) {
        ce->ops->mem.mem_free(ce->tp, comm->drelay_buf, RMACOLL_MEM_CUDA);
        comm->drelay_buf = NULL;
    }
    comm->hmem = mine == 1;
    rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE, "rank %d: %s",
                 comm->rank, reason);
    return RMACOLL_SUCCESS;
}

/* What a rank tells the others about its device-resident signal words. */
typedef struct dsig_card {
    int32_t ok;       /* 1: allocated and exported, blob valid */
    uint32_t nwords;
    uint8_t blob[RMACOLL_EXPORT_BYTES];
} dsig_card_t;

/* RMACOLL_DEVICE_SIGNALS=0|no|off|false turns the device words off. */
static int dsig_env_off(void)
{
    return rmacoll__env_bool("RMACOLL_DEVICE_SIGNALS", 1) == 0;
}

/* Hands comm->dsig_addr / dsig_n to every instance of the CE x cuda
 * binding (its candidates and its control instance, once each). */
static rmacoll_status_t dsig_hand_out(rmacoll_comm_t *comm, int probe, char *why, size_t len)
{
    const rmacoll__binding_t *b = &comm->bp.bind[RMACOLL__PATH_CE][RMACOLL_MEM_CUDA];
    int seen[RMACOLL__MAX_INST] = {0};

    for (int k = 0; k <= b->n; k++) {
        int i = k < b->n ? b->inst[k] : b->ctl;
        rmacoll__tinst_t *ti;
        rmacoll_status_t st;

        if (i < 0 || i >= comm->bp.ninst || seen[i]) {
            continue;
        }
        seen[i] = 1;
        ti = &comm->inst[i];
        st = ti->ops->stream.set_device_signals(ti->tp, probe ? NULL : comm->dsig_addr,
                                                probe ? NULL : comm->dsig_n);
        if (st != RMACOLL_SUCCESS) {
            snprintf(why, len, "transport %s cannot use them: %s", ti->ops->name,
                     rmacoll_status_string(st));
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/*
 * Device-resident signal words for device calls on one node (docs/protocol.md,
 * "Device memory"): each rank allocates lay.nsig words of device memory with
 * the CE x cuda control transport, exports them, and maps every node peer's;
 * then every CE x cuda instance gets the addresses. Collective, in two
 * exchanges: every rank of the node must have its array (first), and every
 * rank must have mapped and handed out all of them (second); otherwise every
 * rank keeps the host words, so writer and reader always agree. Logged at
 * INFO with the reason (DEBUG, and no exchange, when no transport takes
 * device memory or the communicator spans nodes).
 */
/* Long because: two collective exchanges whose outcome every rank must
 * compute alike; kept in one function so that no rank can return between
 * them. */
rmacoll_status_t rmacoll__comm_setup_device_signals(rmacoll_comm_t *comm)
{
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    /* the words, then the region of device-count calls (state.h) */
    size_t bytes = rmacoll__dc_region_off(comm->lay.nsig) +
                   (comm->nranks <= RMACOLL_DCOUNTS_MAX_RANKS
                        ? RMACOLL_DCOUNTS_REGION_BYTES((size_t)comm->nranks)
                        : 0);
    dsig_card_t mine, *all;
    int32_t ok2 = 0, *all2 = NULL;
    char why[320] = "";
    rmacoll_status_t st;
    int on;

    if (comm->topo->nnodes != 1 || ctl == NULL) {
        /* device calls across nodes never take the stream runner; without
         * a transport for device memory (alike on every rank: the bindings
         * come from the agreed config) there are none on one node */
        rmacoll__log(&comm->log, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_CORE, "rank %d: no "
                     "device-resident signal words (%s)", comm->rank,
                     ctl == NULL ? "no transport for node peers takes device memory"
                                 : "device calls across nodes are staged or registered");
        return RMACOLL_SUCCESS;
    }
    memset(&mine, 0, sizeof(mine));
    if (dsig_env_off()) {
        snprintf(why, sizeof(why), "RMACOLL_DEVICE_SIGNALS=%s", getenv("RMACOLL_DEVICE_SIGNALS"));
    } else if (dsig_hand_out(comm, 1, why, sizeof(why)) == RMACOLL_SUCCESS) {
        st = ctl->ops->mem.mem_alloc(ctl->tp, bytes, RMACOLL_MEM_CUDA, &comm->dsig_buf);
        if (st != RMACOLL_SUCCESS) {
            comm->dsig_buf = NULL;
            snprintf(why, sizeof(why), "cannot allocate %zu bytes of device memory with %s: %s",
                     bytes, ctl->ops->name, rmacoll_status_string(st));
        } else {
            st = ctl->ops->mem.mem_export(ctl->tp, comm->dsig_buf, bytes, mine.blob);
            if (st != RMACOLL_SUCCESS) {
                snprintf(why, sizeof(why), "cannot export them with %s: %s", ctl->ops->name,
                         rmacoll_status_string(st));
            } else {
                mine.ok = 1;
                mine.nwords = comm->lay.nsig;
            }
        }
    }
    all = calloc((size_t)comm->nranks, sizeof(*all));
    if (all == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = rmacoll__bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    if (st != RMACOLL_SUCCESS) {
        free(all);
        return st;
    }
    on = 1;
    for (int r = 0; r < comm->nranks && on; r++) {
        if (!all[r].ok || all[r].nwords != comm->peer_lay[r].nsig) {
            on = 0;
            if (mine.ok) {
                snprintf(why, sizeof(why), "rank %d has none (its log says why)", r);
            }
        }
    }
    /* every rank computed the same `on`: either all take the second
     * exchange or none */
    if (on) {
        ok2 = 1;
        for (int r = 0; r < comm->nranks && ok2; r++) {
            comm->dsig_n[r] = all[r].nwords;
            if (r == comm->rank) {
                comm->dsig_addr[r] = (uint64_t)(uintptr_t)comm->dsig_buf;
            } else if (ctl->ops->mem.mem_import(ctl->tp, r, all[r].blob, &comm->dsig_addr[r]) !=
                       RMACOLL_SUCCESS) {
                snprintf(why, sizeof(why), "cannot map rank %d's (%s's log says why)", r,
                         ctl->ops->name);
                ok2 = 0;
            }
        }
        if (ok2 && dsig_hand_out(comm, 0, why, sizeof(why)) != RMACOLL_SUCCESS) {
            ok2 = 0;
        }
        all2 = malloc((size_t)comm->nranks * sizeof(*all2));
        st = all2 == NULL ? RMACOLL_ERR_NO_MEMORY
                          : rmacoll__bootstrap_allgather(comm->bs, &ok2, all2, sizeof(ok2));
        for (int r = 0; st == RMACOLL_SUCCESS && r < comm->nranks && on; r++) {
            if (!all2[r]) {
                on = 0;
                if (ok2) {
                    snprintf(why, sizeof(why), "rank %d could not map every rank's (its log "
                             "says why)", r);
                }
            }
        }
        free(all2);
    }
    free(all);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    comm->dsig = on;
    if (!on && comm->dsig_buf != NULL) {
        ctl->ops->mem.mem_free(ctl->tp, comm->dsig_buf, RMACOLL_MEM_CUDA);
        comm->dsig_buf = NULL;
    }
    if (on) {
        rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: device calls on one node: signal words in device memory (%u "
                     "words at %p, every node peer's mapped)", comm->rank, comm->lay.nsig,
                     comm->dsig_buf);
    } else {
        rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE, "rank %d: "
                     "device calls on one node: signal words in the host control window "
                     "(%s)", comm->rank, why);
    }
    return RMACOLL_SUCCESS;
}

/* Relay buffers and control window registered with the network; keys to all. */
rmacoll_status_t rmacoll__comm_setup_registrations(rmacoll_comm_t *comm)
{
    rmacoll_rkey_t mine[3];
    rmacoll_rkey_t *all;
    rmacoll_status_t st;

    rmacoll__tinst_t *net = rmacoll__inst_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);

    memset(mine, 0, sizeof(mine));
    if (net != NULL) {
        st = net->ops->mem.mem_register(net->tp, comm->ctrl.addr, comm->lay.bytes,
                                        RMACOLL_MEM_HOST, &comm->ctrl_mem, &mine[0]);
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__fail(&comm->fail, st, "rank %d: cannot register the control "
                                 "window (%zu bytes)", comm->rank, comm->lay.bytes);
        }
        if (comm->relay_bytes > 0) {
            st = net->ops->mem.mem_register(net->tp, comm->relay_buf, comm->relay_bytes,
                                            RMACOLL_MEM_HOST, &comm->relay_mem, &mine[1]);
            if (st != RMACOLL_SUCCESS) {
                return rmacoll__fail(&comm->fail, st, "rank %d: cannot register the "
                                     "relay buffer (%llu bytes)", comm->rank,
                                     (unsigned long long)comm->relay_bytes);
            }
        }
        if (comm->drelay_buf != NULL) {
            st = net->ops->mem.mem_register(net->tp, comm->drelay_buf, comm->relay_bytes,
                                            RMACOLL_MEM_CUDA, &comm->drelay_mem, &mine[2]);
            if (st != RMACOLL_SUCCESS) {
                return rmacoll__fail(&comm->fail, st, "rank %d: cannot register the relay "
                                     "buffer in device memory (%llu bytes) with %s",
                                     comm->rank,
                                     (unsigned long long)comm->relay_bytes,
                                     net->ops->name);
            }
            atomic_fetch_add(&comm->stats.device_registered_bytes, comm->relay_bytes);
        }
    }
    all = malloc((size_t)comm->nranks * sizeof(mine));
    if (all == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = rmacoll__bootstrap_allgather(comm->bs, mine, all, sizeof(mine));
    for (int r = 0; st == RMACOLL_SUCCESS && r < comm->nranks; r++) {
        comm->peer_ctrl_rkey[r] = all[3 * r];
        comm->peer_relay_rkey[r] = all[3 * r + 1];
        comm->peer_drelay_rkey[r] = all[3 * r + 2];
    }
    free(all);
    return st;
}

