/*
 * comm_setup.c - the steps of communicator creation before the transports:
 * topology from node keys, the configuration agreement, the relay rule,
 * the control windows, the network peers and direct streams. Each step is
 * collective (every rank takes it, in this order) and records its failure
 * in last_error (base/fail.h).
 */
#include "core/comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/proc.h"
#include "core/config/config_internal.h"
#include "core/plan/topo.h"

#define NODE_KEY_BYTES 128

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
rmacoll_status_t rmacoll__comm_topology(rmacoll_comm_t *comm,
                                      const rmacoll_comm_params_t *params)
{
    char mine[NODE_KEY_BYTES];
    char *all = malloc((size_t)comm->nranks * NODE_KEY_BYTES);
    int *ids = malloc((size_t)comm->nranks * sizeof(int));
    rmacoll_status_t st = RMACOLL_ERR_NO_MEMORY;

    if (all != NULL && ids != NULL) {
        node_key_of(params, mine);
        memcpy(comm->node_key, mine, sizeof(comm->node_key)); /* for a shrink */
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
rmacoll_status_t rmacoll__comm_check_config(rmacoll_comm_t *comm, rmacoll_status_t cfg_st,
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
                         ? rmacoll__fail(&comm->fail, (rmacoll_status_t)all[r].code,
                                         "rank %d: %s", r, all[r].msg)
                         : rmacoll__fail(&comm->fail, (rmacoll_status_t)all[r].code,
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
                         ? rmacoll__fail(&comm->fail, RMACOLL_ERR_CONFIG,
                                         "rank %d: the configuration differs between "
                                         "ranks: key %s is %s here and differs on rank "
                                         "%d (every rank must load the same config)",
                                         comm->rank, key, v, comm->rank == r ? 0 : r)
                         : rmacoll__fail(&comm->fail, RMACOLL_ERR_CONFIG,
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
rmacoll_status_t rmacoll__comm_check_relay(rmacoll_comm_t *comm)
{
    char why[384];

    if (!rmacoll__plan_relay_rule(comm->topo, &comm->pcfg, NULL, why, sizeof(why))) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_CONFIG, "rank %d: %s", comm->rank, why);
    }
    return RMACOLL_SUCCESS;
}

/* A watch on node peer j's process when it is another process of this PID
 * namespace (its window header holds its pid, start time and namespace);
 * its death
 * is then seen at once by the waits (exec/wait.c), not only through the
 * bootstrap root's report or its heartbeat. No watch otherwise. */
static void watch_peer(rmacoll_comm_t *comm, int j)
{
    const char *h = comm->peer_ctrl[j].addr;
    uint64_t pid = __atomic_load_n((const uint64_t *)(h + RMACOLL__CTRL_PID_OFF),
                                   __ATOMIC_ACQUIRE);
    uint64_t start = __atomic_load_n((const uint64_t *)(h + RMACOLL__CTRL_START_OFF),
                                     __ATOMIC_ACQUIRE);
    uint64_t ns = __atomic_load_n((const uint64_t *)(h + RMACOLL__CTRL_PIDNS_OFF),
                                  __ATOMIC_ACQUIRE);
    int fd;

    if (pid != 0 && pid != (uint64_t)getpid() &&
        (fd = rmacoll__proc_watch_open((long)pid, start, ns)) >= 0) {
        comm->watch_fd[comm->nwatch] = fd;
        comm->watch_rank[comm->nwatch++] = j;
    }
}

static void ctrl_name(const rmacoll_comm_t *comm, int rank, char *name, size_t len)
{
    const char *tag;

    (void)rmacoll__shm_tag(&tag); /* checked by rmacoll__comm_setup_ctrl */
    snprintf(name, len, "/rmacoll-%016llx-%d%s%s", (unsigned long long)comm->comm_id,
             rank, tag[0] ? "." : "", tag);
}

/* Own control window, then the node peers' (after a barrier). */
rmacoll_status_t rmacoll__comm_setup_ctrl(rmacoll_comm_t *comm)
{
    char name[96];
    const char *tag;
    rmacoll_status_t st;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    if (rmacoll__shm_tag(&tag) != 0) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_INVALID_ARG, "rank %d: "
                             "RMACOLL_SHM_TAG '%s': expected 1 to %d letters, digits or '_'",
                             comm->rank, tag, RMACOLL__SHM_TAG_MAX);
    }
    rmacoll__ctrl_layout(topo, &comm->pcfg, comm->rank, &comm->lay);
    ctrl_name(comm, comm->rank, name, sizeof(name));
    rmacoll__shm_sweep_stale(RMACOLL__CTRL_MAGIC, RMACOLL__CTRL_PID_OFF);
    st = rmacoll__shm_create(name, comm->lay.bytes, &comm->ctrl);
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: cannot create control window "
                             "%s of %zu bytes", comm->rank, name, comm->lay.bytes);
    }
    /* pid first: a sweeper that sees the magic also sees the pid */
    *(uint64_t *)((char *)comm->ctrl.addr + RMACOLL__CTRL_PID_OFF) = (uint64_t)getpid();
    *(uint64_t *)((char *)comm->ctrl.addr + RMACOLL__CTRL_START_OFF) =
        rmacoll__proc_start_ticks(0);
    *(uint64_t *)((char *)comm->ctrl.addr + RMACOLL__CTRL_PIDNS_OFF) = rmacoll__proc_pidns();
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
            return rmacoll__fail(&comm->fail, st, "rank %d: cannot map the control "
                                 "window of node peer %d (%s)", comm->rank, j, name);
        }
        comm->peer_signals[j] =
            (volatile uint64_t *)((char *)comm->peer_ctrl[j].addr + lay.off_sig);
        watch_peer(comm, j);
    }
    st = rmacoll__bootstrap_barrier(comm->bs);
    rmacoll__shm_unlink(&comm->ctrl);
    return st;
}

rmacoll_status_t rmacoll__comm_setup_net_peers(rmacoll_comm_t *comm)
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
rmacoll_status_t rmacoll__comm_setup_direct(rmacoll_comm_t *comm)
{
    const rmacoll_topo_t *topo = comm->topo;
    rmacoll__tinst_t *net = rmacoll__inst_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
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
