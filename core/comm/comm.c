/*
 * comm.c - communicator creation and destruction: bootstrap, topology from
 * node keys, config agreement, control windows, relay buffer, transports
 * (CE inside a node, the network between nodes) and the proxy thread.
 */
#include "core/comm/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/exec/call.h"
#include "core/config/config_internal.h"
#include "core/plan/plan_config.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "core/base/text.h"

#define NODE_KEY_BYTES 128

rmacoll_status_t rmacoll__comm_fail(rmacoll_comm_t *comm, rmacoll_status_t st,
                                    const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(comm->last_error, sizeof(comm->last_error), fmt, ap);
    va_end(ap);
    rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE, "%s",
                 comm->last_error);
    return st;
}

static void env_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys,
                    const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rmacoll__vlog(ctx, level, subsys, fmt, ap);
    va_end(ap);
}

const char *rmacoll_build_transports(void)
{
    return rmacoll__tops_builtin_names();
}

rmacoll__tinst_t *rmacoll__comm_bound(rmacoll_comm_t *comm, int path,
                                      rmacoll_memtype_t mem, const rmacoll__task_t *t,
                                      size_t n)
{
    const rmacoll__binding_t *b = &comm->bp.bind[path][mem];
    uint64_t largest = 0;
    int i;

    if (b->n > 1) { /* size-bounded candidates: the queue's largest put picks */
        for (size_t k = 0; k < n; k++) {
            largest = t[k].bytes > largest ? t[k].bytes : largest;
        }
    }
    i = rmacoll__bind_pick(b, largest);
    return i >= 0 ? &comm->inst[i] : NULL;
}

rmacoll__tinst_t *rmacoll__comm_ctl(rmacoll_comm_t *comm, int path, rmacoll_memtype_t mem)
{
    int i = comm->bp.bind[path][mem].ctl;

    return i >= 0 && i < comm->bp.ninst ? &comm->inst[i] : NULL;
}

const char *rmacoll_build_schedulers(void)
{
    return rmacoll__sched_builtin_names();
}

static void node_key_of(const rmacoll_comm_params_t *params, char *key)
{
    const char *env = getenv("RMACOLL_NODE_ID");

    memset(key, 0, NODE_KEY_BYTES);
    if (params->node_key != NULL) {
        snprintf(key, NODE_KEY_BYTES, "%s", params->node_key);
    } else if (env != NULL && env[0] != '\0') {
        snprintf(key, NODE_KEY_BYTES, "%s", env);
    } else if (gethostname(key, NODE_KEY_BYTES - 1) != 0) {
        snprintf(key, NODE_KEY_BYTES, "localhost");
    }
}

/* Node keys of all ranks -> topology. */
static rmacoll_status_t make_topology(rmacoll_comm_t *comm,
                                      const rmacoll_comm_params_t *params)
{
    char mine[NODE_KEY_BYTES];
    char *all = malloc((size_t)comm->nranks * NODE_KEY_BYTES);
    int *ids = malloc((size_t)comm->nranks * sizeof(int));
    rmacoll_status_t st = RMACOLL_ERR_NO_MEMORY;

    if (all != NULL && ids != NULL) {
        node_key_of(params, mine);
        st = rmacoll__bootstrap_allgather(comm->bs, mine, all, NODE_KEY_BYTES);
    }
    if (st == RMACOLL_SUCCESS) {
        for (int r = 0; r < comm->nranks; r++) {
            ids[r] = r;
            for (int q = 0; q < r; q++) {
                if (memcmp(all + (size_t)q * NODE_KEY_BYTES,
                           all + (size_t)r * NODE_KEY_BYTES, NODE_KEY_BYTES) == 0) {
                    ids[r] = ids[q];
                    break;
                }
            }
        }
        st = rmacoll__topo_create(comm->nranks, ids, &comm->topo);
    }
    free(all);
    free(ids);
    return st;
}

/* Keys whose values travel one by one in the configuration agreement (the
 * first ones of rmacoll__config_keys; any later difference is still
 * caught by the whole hash, without a name). */
#define CFG_VOTE_KEYS 64

/* What every rank contributes to the configuration agreement. */
typedef struct cfg_vote {
    uint64_t hash;      /* rmacoll__config_hash */
    uint64_t comm_id;   /* rank 0's wins */
    int32_t code;       /* the rank's config validation (0 = valid) */
    int32_t pad;
    char msg[240];      /* its message, naming the key */
    uint64_t key_hash[CFG_VOTE_KEYS]; /* FNV-1a of each key's value as written */
} cfg_vote_t;

/* Hashes of the values of the first CFG_VOTE_KEYS keys (log keys, which may
 * differ between ranks, as 0). */
static void cfg_key_hashes(const rmacoll_config_t *cfg, uint64_t *out)
{
    size_t n = 0;
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&n);

    for (size_t i = 0; i < CFG_VOTE_KEYS; i++) {
        char v[RMACOLL_CONFIG_STR_MAX + 64];
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        out[i] = 0;
        if (i >= n || strncmp(keys[i].key, "log.", 4) == 0 ||
            rmacoll__config_value_string(cfg, i, v, sizeof(v)) < 0) {
            continue;
        }
        for (const char *c = v; *c != '\0'; c++) {
            h = (h ^ (unsigned char)*c) * UINT64_C(0x100000001b3);
        }
        out[i] = h;
    }
}

/* The first key whose value differs between two votes, or NULL. */
static const char *cfg_key_differs(const cfg_vote_t *a, const cfg_vote_t *b)
{
    size_t n = 0;
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&n);

    for (size_t i = 0; i < CFG_VOTE_KEYS && i < n; i++) {
        if (a->key_hash[i] != b->key_hash[i]) {
            return keys[i].key;
        }
    }
    return NULL;
}

/* Every rank must run with the same, valid configuration: each rank's
 * validation outcome (rmacoll__config_check, the same checks as the YAML
 * and environment paths) travels with the hash of its config, so a bad
 * value on one rank fails on every rank, naming that rank and the key. */
static rmacoll_status_t check_config(rmacoll_comm_t *comm, rmacoll_status_t cfg_st,
                                     const char *cfg_err)
{
    cfg_vote_t mine;
    cfg_vote_t *all = malloc((size_t)comm->nranks * sizeof(mine));
    rmacoll_status_t st;

    memset(&mine, 0, sizeof(mine));
    mine.hash = rmacoll__config_hash(&comm->cfg);
    cfg_key_hashes(&comm->cfg, mine.key_hash);
    mine.code = (int32_t)cfg_st;
    snprintf(mine.msg, sizeof(mine.msg), "%s", cfg_err);
    if (comm->rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        mine.comm_id = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                       ((uint64_t)getpid() << 40);
    }
    if (all == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = rmacoll__bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    if (st == RMACOLL_SUCCESS) {
        comm->comm_id = all[0].comm_id;
        for (int r = 0; r < comm->nranks && st == RMACOLL_SUCCESS; r++) {
            if (all[r].code != RMACOLL_SUCCESS) {
                all[r].msg[sizeof(all[r].msg) - 1] = '\0';
                st = r == comm->rank
                         ? rmacoll__comm_fail(comm, (rmacoll_status_t)all[r].code,
                                              "rank %d: %s", r, all[r].msg)
                         : rmacoll__comm_fail(comm, (rmacoll_status_t)all[r].code,
                                              "rank %d: the configuration of rank %d is "
                                              "invalid: %s", comm->rank, r, all[r].msg);
            }
        }
        for (int r = 0; r < comm->nranks && st == RMACOLL_SUCCESS; r++) {
            if (all[r].hash != all[0].hash) {
                const char *key = cfg_key_differs(&all[r], &all[0]);
                char v[RMACOLL_CONFIG_STR_MAX + 64] = "";
                size_t n = 0;
                const rmacoll__config_key_t *keys = rmacoll__config_keys(&n);
                for (size_t i = 0; key != NULL && i < n; i++) {
                    if (keys[i].key == key) {
                        (void)rmacoll__config_value_string(&comm->cfg, i, v, sizeof(v));
                    }
                }
                st = key != NULL
                         ? rmacoll__comm_fail(comm, RMACOLL_ERR_CONFIG,
                                              "rank %d: the configuration differs between "
                                              "ranks: key %s is %s here and differs on rank "
                                              "%d (every rank must load the same config)",
                                              comm->rank, key, v, comm->rank == r ? 0 : r)
                         : rmacoll__comm_fail(comm, RMACOLL_ERR_CONFIG,
                                              "rank %d: configuration differs from rank 0's "
                                              "(every rank must load the same config)",
                                              r);
            }
        }
    }
    free(all);
    return st;
}

/* Every relay's slots must hold at least one element of the widest type;
 * a relay divides its buffer among all the senders it serves, so this
 * depends on the topology (the planner's rule, rmacoll__plan_relay_rule).
 * Every rank computes it for every relay, so every rank fails alike. */
static rmacoll_status_t check_relay_slots(rmacoll_comm_t *comm)
{
    char why[384];

    if (!rmacoll__plan_relay_rule(comm->topo, &comm->pcfg, NULL, why, sizeof(why))) {
        return rmacoll__comm_fail(comm, RMACOLL_ERR_CONFIG, "rank %d: %s", comm->rank, why);
    }
    return RMACOLL_SUCCESS;
}

static void ctrl_name(const rmacoll_comm_t *comm, int rank, char *name, size_t len)
{
    snprintf(name, len, "/rmacoll-%016llx-%d", (unsigned long long)comm->comm_id,
             rank);
}

/* Own control window, then the node peers' (after a barrier). */
static rmacoll_status_t setup_ctrl(rmacoll_comm_t *comm)
{
    char name[64];
    rmacoll_status_t st;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    rmacoll__ctrl_layout(topo, &comm->pcfg, comm->rank, &comm->lay);
    ctrl_name(comm, comm->rank, name, sizeof(name));
    rmacoll__shm_sweep_stale(RMACOLL__CTRL_MAGIC, RMACOLL__CTRL_PID_OFF);
    st = rmacoll__shm_create(name, comm->lay.bytes, &comm->ctrl);
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__comm_fail(comm, st, "rank %d: cannot create control window "
                                  "%s of %zu bytes", comm->rank, name, comm->lay.bytes);
    }
    /* pid first: a sweeper that sees the magic also sees the pid */
    *(uint64_t *)((char *)comm->ctrl.addr + RMACOLL__CTRL_PID_OFF) = (uint64_t)getpid();
    __atomic_store_n((uint64_t *)comm->ctrl.addr, RMACOLL__CTRL_MAGIC, __ATOMIC_RELEASE);
    comm->signals = (volatile uint64_t *)((char *)comm->ctrl.addr + comm->lay.off_sig);
    st = rmacoll__bootstrap_barrier(comm->bs);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__ctrl_layout_t lay;
        if (j == comm->rank) {
            comm->peer_signals[j] = comm->signals;
            comm->peer_lay[j] = comm->lay;
            comm->peer_ctrl[j] = comm->ctrl;
            comm->peer_ctrl[j].owner = 0;
            continue;
        }
        rmacoll__ctrl_layout(topo, &comm->pcfg, j, &lay);
        comm->peer_lay[j] = lay;
        ctrl_name(comm, j, name, sizeof(name));
        st = rmacoll__shm_attach(name, lay.bytes, comm->cfg.timeout_ms,
                                 &comm->peer_ctrl[j]);
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__comm_fail(comm, st, "rank %d: cannot map the control "
                                      "window of node peer %d (%s)", comm->rank, j, name);
        }
        comm->peer_signals[j] =
            (volatile uint64_t *)((char *)comm->peer_ctrl[j].addr + lay.off_sig);
    }
    st = rmacoll__bootstrap_barrier(comm->bs);
    rmacoll__shm_unlink(&comm->ctrl);
    return st;
}

static rmacoll_status_t setup_net_peers(rmacoll_comm_t *comm)
{
    const rmacoll_topo_t *topo = comm->topo;
    int *other = malloc((size_t)comm->nranks * sizeof(int));

    if (other == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    comm->nnet = rmacoll__net_peers(topo, &comm->pcfg, comm->rank, comm->net_list);
    for (int r = 0; r < comm->nranks; r++) {
        comm->net_index[r] = -1;
    }
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        int n = rmacoll__net_peers(topo, &comm->pcfg, p, other);
        comm->net_index[p] = k;
        comm->path_peers[RMACOLL__PATH_PROXY][p] = 1;
        rmacoll__ctrl_layout(topo, &comm->pcfg, p, &comm->peer_lay[p]);
        comm->net_slot_at[k] = -1;
        for (int i = 0; i < n; i++) {
            if (other[i] == comm->rank) {
                comm->net_slot_at[k] = i;
            }
        }
    }
    /* direct streams put into every rank of the other node: connect them
     * all (the records still go to the network peers alone) */
    for (int p = 0; comm->pcfg.direct_min_bytes != 0 && p < comm->nranks; p++) {
        if (topo->node_of[p] != topo->node_of[comm->rank] &&
            !comm->path_peers[RMACOLL__PATH_PROXY][p]) {
            comm->path_peers[RMACOLL__PATH_PROXY][p] = 1;
            rmacoll__ctrl_layout(topo, &comm->pcfg, p, &comm->peer_lay[p]);
        }
    }
    /* where each rank of the other node's record lands on this node */
    for (int a = 0; a < comm->nranks; a++) {
        int A = topo->node_of[comm->rank];
        int b = -1, m;
        comm->rec_slot[a] = -1;
        if (comm->lay.matrix && topo->node_of[a] != A) {
            b = comm->pcfg.relay_enabled ? rmacoll__topo_relay(topo, a, A) : comm->rank;
            m = rmacoll__net_peers(topo, &comm->pcfg, b, other);
            for (int i = 0; i < m; i++) {
                if (other[i] == a) {
                    comm->rec_slot[a] = i;
                }
            }
        }
        comm->rec_holder[a] = b;
    }
    free(other);
    return RMACOLL_SUCCESS;
}

/* Length of the network interface names compared across a node. */
#define NIC_NAME_MAX 96

/* Keeps direct streams only where every rank of each node names the same
 * network interface (the inter_node transport's local_nic): there the
 * rail-aligned relay buys aggregation only, and a large stream's forward
 * is one more copy. Every rank decides alike from the same allgather. */
static rmacoll_status_t setup_direct(rmacoll_comm_t *comm)
{
    const rmacoll_topo_t *topo = comm->topo;
    rmacoll__tinst_t *net = rmacoll__comm_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
    char mine[NIC_NAME_MAX], *all;
    int differ;
    rmacoll_status_t st;

    if (comm->pcfg.direct_min_bytes == 0) {
        return RMACOLL_SUCCESS;
    }
    memset(mine, 0, sizeof(mine));
    if (net != NULL) {
        net->ops->base.local_nic(net->tp, mine, sizeof(mine));
        mine[sizeof(mine) - 1] = '\0';
    }
    all = calloc((size_t)comm->nranks, sizeof(mine));
    if (all == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = rmacoll__bootstrap_allgather(comm->bs, mine, all, sizeof(mine));
    if (st == RMACOLL_SUCCESS) {
        differ = rmacoll__ctrl_nic_differs(topo, all, sizeof(mine));
        if (differ < 0) {
            rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: streams to the other node of at least %llu bytes go "
                         "direct (relay.direct_min_bytes; every rank of node %d on \"%s\")",
                         comm->rank, (unsigned long long)comm->pcfg.direct_min_bytes,
                         topo->node_of[comm->rank], mine);
        } else {
            const char *d = all + (size_t)differ * sizeof(mine);
            rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: no direct streams: rank %d %s%s%s (relay.direct_min_bytes "
                         "needs every rank of a node on one network interface)", comm->rank,
                         differ, d[0] ? "is on \"" : "does not name its network interface",
                         d[0] ? d : "", d[0] ? "\", not its node's first rank's" : "");
            comm->pcfg.direct_min_bytes = 0;
        }
    }
    free(all);
    return st;
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
            return rmacoll__comm_fail(comm, st, "rank %d: built-in %s", comm->rank, err);
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
            return rmacoll__comm_fail(comm, st, "rank %d: %s", comm->rank, err);
        }
        comm->navail++;
    }
    return RMACOLL_SUCCESS;
}

/* Bindings, then one instance per transport bound (each init is
 * collective; every rank resolves alike from the shared config). */
static rmacoll_status_t setup_transports(rmacoll_comm_t *comm)
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
        return rmacoll__comm_fail(comm, st, "%s", err);
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
            return rmacoll__comm_fail(comm, st, "rank %d: transport %s (%s) failed to "
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
static rmacoll_status_t setup_device_path(rmacoll_comm_t *comm)
{
    rmacoll__tinst_t *net = rmacoll__comm_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
    rmacoll__tinst_t *ce = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
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
                st = rmacoll__comm_fail(comm, lst, "rank %d: %s", comm->rank, reason);
            } else {
                st = rmacoll__comm_fail(comm, RMACOLL_ERR_CONFIG, "rank %d: rank %d cannot "
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
static rmacoll_status_t setup_device_signals(rmacoll_comm_t *comm)
{
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    size_t bytes = (size_t)comm->lay.nsig * sizeof(uint64_t);
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
static rmacoll_status_t setup_registrations(rmacoll_comm_t *comm)
{
    rmacoll_rkey_t mine[3];
    rmacoll_rkey_t *all;
    rmacoll_status_t st;

    rmacoll__tinst_t *net = rmacoll__comm_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);

    memset(mine, 0, sizeof(mine));
    if (net != NULL) {
        st = net->ops->mem.mem_register(net->tp, comm->ctrl.addr, comm->lay.bytes,
                                        RMACOLL_MEM_HOST, &comm->ctrl_mem, &mine[0]);
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__comm_fail(comm, st, "rank %d: cannot register the control "
                                      "window (%zu bytes)", comm->rank, comm->lay.bytes);
        }
        if (comm->relay_bytes > 0) {
            st = net->ops->mem.mem_register(net->tp, comm->relay_buf, comm->relay_bytes,
                                            RMACOLL_MEM_HOST, &comm->relay_mem, &mine[1]);
            if (st != RMACOLL_SUCCESS) {
                return rmacoll__comm_fail(comm, st, "rank %d: cannot register the "
                                          "relay buffer (%llu bytes)", comm->rank,
                                          (unsigned long long)comm->relay_bytes);
            }
        }
        if (comm->drelay_buf != NULL) {
            st = net->ops->mem.mem_register(net->tp, comm->drelay_buf, comm->relay_bytes,
                                            RMACOLL_MEM_CUDA, &comm->drelay_mem, &mine[2]);
            if (st != RMACOLL_SUCCESS) {
                return rmacoll__comm_fail(comm, st, "rank %d: cannot register the relay "
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

static rmacoll_status_t alloc_arrays(rmacoll_comm_t *comm)
{
    size_t n = (size_t)comm->nranks;
    int ls = comm->topo->node_size[comm->topo->node_of[comm->rank]];
    size_t nc = (size_t)comm->nin * ls + 1;

    comm->peer_ctrl = calloc(n, sizeof(*comm->peer_ctrl));
    comm->peer_lay = calloc(n, sizeof(*comm->peer_lay));
    comm->peer_nsig = calloc(n, sizeof(uint32_t));
    comm->peer_signals = calloc(n, sizeof(*comm->peer_signals));
    comm->net_list = calloc(n, sizeof(int));
    comm->net_slot_at = calloc(n, sizeof(int));
    comm->net_index = calloc(n, sizeof(int));
    comm->rec_holder = calloc(n, sizeof(int));
    comm->rec_slot = calloc(n, sizeof(int));
    comm->views = calloc(n, sizeof(*comm->views));
    comm->path_peers[RMACOLL__PATH_CE] = calloc(n, 1);
    comm->path_peers[RMACOLL__PATH_PROXY] = calloc(n, 1);
    comm->peer_ctrl_rkey = calloc(n, sizeof(rmacoll_rkey_t));
    comm->peer_relay_rkey = calloc(n, sizeof(rmacoll_rkey_t));
    comm->peer_drelay_rkey = calloc(n, sizeof(rmacoll_rkey_t));
    comm->stage.ready_puts = calloc(n, sizeof(rmacoll_put_t));
    comm->scratch = calloc(2 * n, sizeof(int64_t));
    comm->uniform = calloc(2 * n, sizeof(int64_t));
    comm->peer_rcount = calloc(n, sizeof(int64_t));
    comm->peer_rdispl = calloc(n, sizeof(int64_t));
    comm->peer_recv_addr = calloc(n, sizeof(uint64_t));
    comm->node_eager_off = calloc(n, sizeof(uint64_t));
    comm->eager_in_off = calloc(n, sizeof(uint64_t));
    comm->peer_recv_rkey = calloc(n, sizeof(rmacoll_rkey_t));
    comm->direct_in = calloc(n, 1);
    comm->chan_sendcount = calloc(nc, sizeof(int64_t));
    comm->chan_rcount = calloc(nc, sizeof(int64_t));
    comm->chan_rdispl = calloc(nc, sizeof(int64_t));
    comm->meta_puts = calloc(2 * n, sizeof(rmacoll_put_t));
    comm->abort_puts = calloc(n, sizeof(rmacoll_put_t));
    comm->dsig_addr = calloc(n, sizeof(uint64_t));
    comm->dsig_n = calloc(n, sizeof(uint32_t));
    if (!comm->dsig_addr || !comm->dsig_n ||
        !comm->peer_ctrl || !comm->peer_lay || !comm->peer_nsig || !comm->peer_signals || !comm->net_list ||
        !comm->net_slot_at || !comm->net_index || !comm->rec_holder || !comm->rec_slot ||
        !comm->views || !comm->path_peers[0] ||
        !comm->path_peers[1] || !comm->peer_ctrl_rkey || !comm->peer_relay_rkey ||
        !comm->peer_drelay_rkey || !comm->stage.ready_puts ||
        !comm->scratch || !comm->uniform || !comm->peer_rcount || !comm->peer_rdispl ||
        !comm->peer_recv_addr || !comm->node_eager_off || !comm->eager_in_off || !comm->peer_recv_rkey ||
        !comm->direct_in ||
        !comm->chan_sendcount ||
        !comm->chan_rcount || !comm->chan_rdispl || !comm->meta_puts ||
        !comm->abort_puts) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    return RMACOLL_SUCCESS;
}

static void comm_free(rmacoll_comm_t *comm)
{
    rmacoll__tinst_t *net;

    rmacoll__async_fini(comm);
    rmacoll__staged_fini(comm);
    rmacoll__proxy_fini(&comm->proxy);
    net = rmacoll__comm_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
    if (net != NULL && net->tp != NULL) {
        if (comm->relay_mem != NULL) {
            net->ops->mem.mem_deregister(net->tp, comm->relay_mem);
        }
        if (comm->drelay_mem != NULL) {
            net->ops->mem.mem_deregister(net->tp, comm->drelay_mem);
        }
        if (comm->ctrl_mem != NULL) {
            net->ops->mem.mem_deregister(net->tp, comm->ctrl_mem);
        }
    }
    if (comm->drelay_buf != NULL) {
        rmacoll__tinst_t *ce = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
        ce->ops->mem.mem_free(ce->tp, comm->drelay_buf, RMACOLL_MEM_CUDA);
    }
    rmacoll__mem_fini(comm);
    if (comm->dsig_buf != NULL) { /* node peers passed the destroy barrier */
        rmacoll__tinst_t *ce = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
        ce->ops->mem.mem_free(ce->tp, comm->dsig_buf, RMACOLL_MEM_CUDA);
    }
    for (int i = comm->bp.ninst - 1; i >= 0; i--) { /* reverse of init */
        if (comm->inst[i].tp != NULL) {
            comm->inst[i].ops->base.finalize(comm->inst[i].tp);
        }
    }
    for (int i = 0; i < comm->navail; i++) {
        rmacoll__tops_release(&comm->avail[i]);
    }
    for (int r = 0; comm->peer_ctrl != NULL && r < comm->nranks; r++) {
        if (r != comm->rank && comm->peer_ctrl[r].addr != NULL) {
            rmacoll__shm_destroy(&comm->peer_ctrl[r]);
        }
    }
    if (comm->ctrl.addr != NULL) {
        rmacoll__shm_destroy(&comm->ctrl);
    }
    free(comm->relay_buf);
    if (comm->sched_open) {
        rmacoll__sched_close(&comm->sched);
    }
    rmacoll__sigstate_destroy(comm->sig);
    rmacoll__sigstate_destroy(comm->sig_next);
    rmacoll__plan_fini(&comm->plan);
    rmacoll__topo_destroy(comm->topo);
    if (comm->bs != NULL) {
        rmacoll__bootstrap_destroy(comm->bs);
    }
    pthread_mutex_destroy(&comm->stage.lock);
    pthread_cond_destroy(&comm->stage.cond);
    pthread_mutex_destroy(&comm->async.lock);
    pthread_mutex_destroy(&comm->mem_lock);
    pthread_cond_destroy(&comm->async.cond);
    free(comm->peer_ctrl);
    free(comm->peer_lay);
    free(comm->peer_nsig);
    free(comm->rec_holder);
    free(comm->rec_slot);
    free(comm->views);
    free(comm->peer_signals);
    free(comm->net_list);
    free(comm->net_slot_at);
    free(comm->net_index);
    free(comm->path_peers[0]);
    free(comm->path_peers[1]);
    free(comm->peer_ctrl_rkey);
    free(comm->peer_relay_rkey);
    free(comm->peer_drelay_rkey);
    free(comm->stage.ready_puts);
    free(comm->scratch);
    free(comm->uniform);
    free(comm->peer_rcount);
    free(comm->peer_rdispl);
    free(comm->peer_recv_addr);
    free(comm->node_eager_off);
    free(comm->eager_in_off);
    free(comm->peer_recv_rkey);
    free(comm->direct_in);
    free(comm->chan_sendcount);
    free(comm->chan_rcount);
    free(comm->chan_rdispl);
    free(comm->meta_puts);
    free(comm->abort_puts);
    free(comm->dsig_addr);
    free(comm->dsig_n);
    free(comm->puts);
    free(comm->wait_idx);
    free(comm->wait_val);
    free(comm->wait_peer);
    free(comm);
}

rmacoll_status_t rmacoll_comm_create(const rmacoll_comm_params_t *params,
                                     rmacoll_comm_t **out)
{
    rmacoll_comm_t *comm;
    rmacoll_status_t st, cfg_st = RMACOLL_SUCCESS;
    char err[512], cfg_err[320] = "";

    if (params != NULL && params->struct_size != sizeof(*params)) {
        rmacoll__logger_t lg;
        rmacoll__logger_default(&lg);
        lg.fn = params->log_fn;
        lg.ctx = params->log_ctx;
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_comm_create: params->struct_size is %zu, not "
                     "sizeof(rmacoll_comm_params_t) = %zu", params->rank,
                     params->struct_size, sizeof(*params));
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (params == NULL || out == NULL || params->nranks < 1 || params->rank < 0 ||
        params->rank >= params->nranks ||
        (params->unique_id == NULL) == (params->oob == NULL)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&comm->stage.lock, NULL);
    pthread_cond_init(&comm->stage.cond, NULL);
    pthread_mutex_init(&comm->async.lock, NULL);
    pthread_cond_init(&comm->async.cond, NULL);
    pthread_mutex_init(&comm->mem_lock, NULL);
    rmacoll__plan_init(&comm->plan);
    comm->rank = params->rank;
    comm->nranks = params->nranks;
    comm->fail_culprit = -1;
    rmacoll__logger_default(&comm->log);
    comm->log.rank = comm->rank;
    rmacoll__proxy_init(&comm->proxy, comm->rank, 0, &comm->log, comm->last_error,
                        sizeof(comm->last_error));
    if (params->config != NULL) {
        /* the embedder's struct passes the checks of the YAML and
         * environment paths; a bad one still joins the bootstrap (with the
         * defaults) so that every rank fails with its message */
        cfg_st = rmacoll__config_check(params->config, cfg_err, sizeof(cfg_err));
        if (cfg_st == RMACOLL_SUCCESS) {
            comm->cfg = *params->config;
        } else {
            rmacoll_config_init(&comm->cfg);
        }
    } else {
        /* a bad YAML file or environment value on some ranks: those ranks
         * still join the bootstrap (with the defaults), so that every rank
         * fails at once with the message naming the rank and the key
         * (check_config), not after the others' bootstrap timeout */
        cfg_st = rmacoll_config_load(NULL, &comm->cfg, cfg_err, sizeof(cfg_err));
        if (cfg_st != RMACOLL_SUCCESS) {
            rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CONFIG,
                         "%s", cfg_err);
            rmacoll_config_init(&comm->cfg);
        }
    }
    comm->proxy.timeout_ms = comm->cfg.timeout_ms;
    comm->log.level = comm->cfg.log_level;
    comm->log.subsys = comm->cfg.log_subsystems;
    if (params->log_fn != NULL) {
        comm->log.fn = params->log_fn;
        comm->log.ctx = params->log_ctx;
    }
    rmacoll__plan_cfg_from(&comm->cfg, &comm->pcfg);

    if (params->unique_id != NULL) {
        st = rmacoll__bootstrap_create_ex(params->unique_id, comm->rank, comm->nranks,
                                          comm->cfg.timeout_ms, &comm->log, &comm->bs);
    } else {
        st = rmacoll__bootstrap_create_oob(params->oob, comm->rank, comm->nranks,
                                           &comm->bs);
        if (st == RMACOLL_SUCCESS) {
            rmacoll__bootstrap_set_logger(comm->bs, &comm->log);
        }
    }
    if (st == RMACOLL_SUCCESS) {
        st = make_topology(comm, params);
    }
    if (st == RMACOLL_SUCCESS) {
        st = check_config(comm, cfg_st, cfg_err);
    }
    if (st == RMACOLL_SUCCESS) {
        comm->nin = rmacoll__plan_nin(comm->topo, &comm->pcfg, comm->rank);
        st = check_relay_slots(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = alloc_arrays(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__sched_open(comm->cfg.scheduler, comm->cfg.scheduler_plugin,
                                 comm->topo, comm->cfg.scheduler_seed, &comm->sched,
                                 err, sizeof(err));
        if (st != RMACOLL_SUCCESS) {
            rmacoll__comm_fail(comm, st, "rank %d: %s", comm->rank, err);
        } else {
            comm->sched_open = 1;
            rmacoll__log(&comm->log, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_SCHED,
                         "rank %d: scheduler %s (seed %llu)", comm->rank,
                         comm->cfg.scheduler_plugin[0] ? comm->cfg.scheduler_plugin
                                                       : comm->cfg.scheduler,
                         (unsigned long long)comm->cfg.scheduler_seed);
        }
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__sigstate_create(comm->topo, &comm->pcfg, comm->rank, &comm->sig);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__sigstate_create(comm->topo, &comm->pcfg, comm->rank,
                                      &comm->sig_next);
    }
    if (st == RMACOLL_SUCCESS && comm->nin > 0) {
        comm->relay_bytes = comm->cfg.relay_buffer_bytes;
        if (posix_memalign(&comm->relay_buf, 4096, comm->relay_bytes) != 0) {
            st = rmacoll__comm_fail(comm, RMACOLL_ERR_NO_MEMORY,
                                    "rank %d: cannot allocate the relay buffer "
                                    "(relay.buffer_bytes = %llu)", comm->rank,
                                    (unsigned long long)comm->relay_bytes);
        } else {
            memset(comm->relay_buf, 0, comm->relay_bytes);
        }
    }
    if (st == RMACOLL_SUCCESS) {
        uint64_t eager = rmacoll__ctrl_eager_threshold(comm->topo, &comm->pcfg);
        if (eager != comm->pcfg.eager_max_bytes) {
            rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: eager_max_bytes %llu -> %llu on this topology "
                         "(%llu bytes of eager record slots per rank at most)", comm->rank,
                         (unsigned long long)comm->pcfg.eager_max_bytes,
                         (unsigned long long)eager,
                         (unsigned long long)RMACOLL__EAGER_WINDOW_BUDGET);
            comm->pcfg.eager_max_bytes = eager;
        }
        if (rmacoll__ctrl_direct_min(comm->topo, &comm->pcfg) == 0) {
            if (comm->pcfg.direct_min_bytes != 0 && comm->topo->nnodes > 1) {
                rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                             "rank %d: no direct streams: %s (relay.direct_min_bytes needs "
                             "two nodes of at most %d ranks each and the relay on)",
                             comm->rank,
                             !comm->pcfg.relay_enabled  ? "the relay is off"
                             : comm->topo->nnodes != 2 ? "more than two nodes"
                                                        : "a node is too large",
                             RMACOLL__ONE_ROUND_PAIR_MAX);
            }
            comm->pcfg.direct_min_bytes = 0;
        }
        st = setup_ctrl(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = setup_net_peers(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = setup_transports(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = setup_direct(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = setup_device_path(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = setup_device_signals(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = setup_registrations(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        rmacoll__tinst_t *net = rmacoll__comm_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
        if (net != NULL) {
            st = rmacoll__proxy_start(&comm->proxy, net->ops, net->tp);
        }
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__bootstrap_barrier(comm->bs);
    }
    if (st != RMACOLL_SUCCESS) {
        if (comm->last_error[0] == '\0') {
            rmacoll__comm_fail(comm, st, "rank %d: communicator creation failed: %s",
                               comm->rank, rmacoll_status_string(st));
        }
        comm_free(comm);
        return st;
    }
    rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                 "rank %d of %d: node %d (local %d of %d), %d network peers, "
                 "%d relay channels, intra %s, inter %s", comm->rank, comm->nranks,
                 comm->topo->node_of[comm->rank], comm->topo->local_rank[comm->rank],
                 comm->topo->node_size[comm->topo->node_of[comm->rank]], comm->nnet,
                 comm->nin,
                 comm->inst[comm->bp.bind[RMACOLL__PATH_CE][RMACOLL_MEM_HOST].ctl].ops->name,
                 comm->bp.bind[RMACOLL__PATH_PROXY][RMACOLL_MEM_HOST].n
                     ? comm->inst[comm->bp.bind[RMACOLL__PATH_PROXY][RMACOLL_MEM_HOST].ctl]
                           .ops->name
                     : "-");
    *out = comm;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_comm_create_from_env(const rmacoll_config_t *config,
                                              rmacoll_comm_t **comm)
{
    rmacoll_comm_params_t p;
    rmacoll_unique_id_t id;
    rmacoll_status_t st;

    memset(&p, 0, sizeof(p));
    st = rmacoll__bootstrap_from_env(&p.rank, &p.nranks, &id);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    p.struct_size = sizeof(p);
    p.unique_id = &id;
    p.config = config;
    return rmacoll_comm_create(&p, comm);
}

rmacoll_status_t rmacoll_comm_destroy(rmacoll_comm_t *comm)
{
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (comm == NULL) {
        return RMACOLL_SUCCESS;
    }
    /* a started host call, then a staged device call, still in flight
     * finish first */
    rmacoll__async_fini(comm);
    if (!comm->broken) {
        rmacoll__staged_drain(comm);
    }
    rmacoll__proxy_flush(&comm->proxy);
    /* no rank tears down while a peer may still write into it */
    if (!comm->broken) {
        st = rmacoll__bootstrap_barrier(comm->bs);
    }
    comm_free(comm);
    return st;
}

rmacoll_status_t rmacoll_comm_rank(const rmacoll_comm_t *comm, int *rank)
{
    if (comm == NULL || rank == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *rank = comm->rank;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_comm_size(const rmacoll_comm_t *comm, int *nranks)
{
    if (comm == NULL || nranks == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *nranks = comm->nranks;
    return RMACOLL_SUCCESS;
}

const char *rmacoll_comm_last_error(const rmacoll_comm_t *comm)
{
    return comm != NULL ? comm->last_error : "";
}

rmacoll_status_t rmacoll_comm_get_stats(const rmacoll_comm_t *comm,
                                        rmacoll_comm_stats_t *stats)
{
    rmacoll_comm_stats_t s;
    size_t want;

    if (comm == NULL || stats == NULL ||
        stats->struct_size < offsetof(rmacoll_comm_stats_t, device_path) +
                                 sizeof(stats->device_path)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    want = stats->struct_size < sizeof(s) ? stats->struct_size : sizeof(s);
    {
        /* whole fields only: down to the end of the last one that fits */
        static const size_t ends[] = {
#define STATS_END(f) offsetof(rmacoll_comm_stats_t, f) + sizeof(((rmacoll_comm_stats_t *)0)->f)
            STATS_END(device_path), STATS_END(staged_bytes),
            STATS_END(device_registered_bytes), STATS_END(device_calls_staged),
            STATS_END(device_calls_hmem), STATS_END(device_signals),
            STATS_END(device_calls_device_signals), STATS_END(eager_bytes_sent),
            STATS_END(eager_bytes_copied), STATS_END(node_eager_bytes_sent),
            STATS_END(node_eager_bytes_copied), STATS_END(direct_min_bytes),
            STATS_END(direct_bytes_sent)
#undef STATS_END
        };
        size_t fit = ends[0];
        for (size_t k = 0; k < sizeof(ends) / sizeof(ends[0]); k++) {
            if (ends[k] <= want) {
                fit = ends[k];
            }
        }
        want = want == sizeof(s) ? want : fit;
    }
    memset(&s, 0, sizeof(s));
    s.struct_size = want; /* what this library wrote: a newer caller sees how far */
    s.device_path = comm->topo->nnodes == 1 ? RMACOLL_DEVICE_PATH_NONE
                    : comm->hmem           ? RMACOLL_DEVICE_PATH_HMEM
                                           : RMACOLL_DEVICE_PATH_STAGED;
    s.staged_bytes = atomic_load(&comm->stats.staged_bytes);
    s.device_registered_bytes = atomic_load(&comm->stats.device_registered_bytes);
    s.device_calls_staged = atomic_load(&comm->stats.device_calls_staged);
    s.device_calls_hmem = atomic_load(&comm->stats.device_calls_hmem);
    s.device_signals = comm->dsig;
    s.device_calls_device_signals = atomic_load(&comm->stats.device_calls_dsig);
    s.eager_bytes_sent = atomic_load(&comm->stats.eager_bytes_sent);
    s.eager_bytes_copied = atomic_load(&comm->stats.eager_bytes_copied);
    s.node_eager_bytes_sent = atomic_load(&comm->stats.node_eager_bytes_sent);
    s.node_eager_bytes_copied = atomic_load(&comm->stats.node_eager_bytes_copied);
    s.direct_min_bytes = comm->pcfg.direct_min_bytes;
    s.direct_bytes_sent = atomic_load(&comm->stats.direct_bytes_sent);
    memcpy(stats, &s, want);
    return RMACOLL_SUCCESS;
}
