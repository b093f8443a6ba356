/*
 * comm.c - communicator creation and destruction, and the communicator's
 * accessors. Creation runs named steps in order (comm_setup.c: topology,
 * config agreement, control windows, network peers; comm_xport.c: the
 * transports, the device path, the registrations), then starts the proxy
 * thread.
 */
#include "core/plan/plan_config.h"
#include "core/comm/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/exec/call.h"
#include "core/config/config_internal.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"

const char *rmacoll_build_transports(void)
{
    return rmacoll__tops_builtin_names();
}

const char *rmacoll_build_schedulers(void)
{
    return rmacoll__sched_builtin_names();
}

static rmacoll_status_t alloc_arrays(rmacoll_comm_t *comm)
{
    size_t n = (size_t)comm->nranks;
    int ls = comm->topo->node_size[comm->topo->node_of[comm->rank]];
    size_t nc = (size_t)comm->nin * ls + 1;

    comm->peer_ctrl = calloc(n, sizeof(*comm->peer_ctrl));
    comm->watch_fd = calloc(n, sizeof(int));
    comm->watch_rank = calloc(n, sizeof(int));
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
    comm->inplace_displs = calloc(n, sizeof(int64_t));
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
    comm->beat_puts = calloc(n, sizeof(rmacoll_put_t));
    comm->beat_seen = calloc(n, sizeof(uint64_t));
    comm->beat_when = calloc(n, sizeof(uint64_t));
    comm->dsig_addr = calloc(n, sizeof(uint64_t));
    comm->dsig_n = calloc(n, sizeof(uint32_t));
    if (!comm->dsig_addr || !comm->dsig_n ||
        !comm->peer_ctrl || !comm->watch_fd || !comm->watch_rank || !comm->peer_lay || !comm->peer_nsig || !comm->peer_signals || !comm->net_list ||
        !comm->net_slot_at || !comm->net_index || !comm->rec_holder || !comm->rec_slot ||
        !comm->views || !comm->path_peers[0] ||
        !comm->path_peers[1] || !comm->peer_ctrl_rkey || !comm->peer_relay_rkey ||
        !comm->peer_drelay_rkey || !comm->stage.ready_puts ||
        !comm->scratch || !comm->uniform || !comm->inplace_displs || !comm->peer_rcount || !comm->peer_rdispl ||
        !comm->peer_recv_addr || !comm->node_eager_off || !comm->eager_in_off || !comm->peer_recv_rkey ||
        !comm->direct_in ||
        !comm->chan_sendcount ||
        !comm->chan_rcount || !comm->chan_rdispl || !comm->meta_puts ||
        !comm->abort_puts || !comm->beat_puts || !comm->beat_seen || !comm->beat_when) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    return RMACOLL_SUCCESS;
}

/* The runtime's threads, registrations and device buffers, first of
 * comm_free's releases. */
static void comm_free_runtime(rmacoll_comm_t *comm)
{
    rmacoll__tinst_t *net;

    rmacoll__async_fini(comm);
    rmacoll__dcx_fini(comm);
    rmacoll__staged_fini(comm);
    rmacoll__memreg_fini(comm); /* through the proxy, before it goes */
    rmacoll__proxy_fini(&comm->proxy);
    net = rmacoll__inst_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
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
        rmacoll__tinst_t *ce = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
        ce->ops->mem.mem_free(ce->tp, comm->drelay_buf, RMACOLL_MEM_CUDA);
    }
    rmacoll__mem_fini(comm);
    if (comm->dsig_buf != NULL) { /* node peers passed the destroy barrier */
        rmacoll__tinst_t *ce = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
        ce->ops->mem.mem_free(ce->tp, comm->dsig_buf, RMACOLL_MEM_CUDA);
    }
}

/* The per-peer and per-call tables, last of comm_free's releases. */
static void comm_free_tables(rmacoll_comm_t *comm)
{
    free(comm->peer_ctrl);
    free(comm->watch_fd);
    free(comm->watch_rank);
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
    free(comm->beat_puts);
    free(comm->beat_seen);
    free(comm->beat_when);
    free(comm->uniform);
    free(comm->inplace_displs);
    free(comm->inplace_buf);
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
}

/* Releases in the reverse order of creation: runtime, transports, control
 * windows, planner state, bootstrap, locks, tables. */
static void comm_free(rmacoll_comm_t *comm)
{
    comm_free_runtime(comm);
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
    for (int k = 0; k < comm->nwatch; k++) {
        close(comm->watch_fd[k]);
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
    rmacoll__flow_fini(&comm->flow);
    free(comm->lane_cur);
    free(comm->mputs);
    free(comm->mtasks);
    rmacoll__topo_destroy(comm->topo);
    if (comm->bs != NULL) {
        rmacoll__bootstrap_destroy(comm->bs);
    }
    pthread_mutex_destroy(&comm->stage.lock);
    pthread_cond_destroy(&comm->stage.cond);
    pthread_mutex_destroy(&comm->async.lock);
    pthread_mutex_destroy(&comm->mem_lock);
    pthread_cond_destroy(&comm->async.cond);
    comm_free_tables(comm);
    free(comm);
}

/* A params struct of another size: logged with the caller's log function
 * (there is no communicator yet). */
static rmacoll_status_t params_size_error(const rmacoll_comm_params_t *params)
{
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

/* The configuration: the embedder's struct or the YAML file and
 * environment. A bad one on some ranks is replaced by the defaults, its
 * error kept in *cfg_st / cfg_err: those ranks still join the bootstrap, so
 * that every rank fails at once with the message naming the rank and the
 * key (rmacoll__comm_check_config), not after the others' bootstrap
 * timeout. Then the logger and the planner's configuration follow it. */
static void comm_config(rmacoll_comm_t *comm, const rmacoll_comm_params_t *params,
                        rmacoll_status_t *cfg_st, char *cfg_err, size_t len)
{
    if (params->config != NULL) {
        /* the embedder's struct passes the checks of the YAML and
         * environment paths */
        *cfg_st = rmacoll__config_check(params->config, cfg_err, len);
        if (*cfg_st == RMACOLL_SUCCESS) {
            comm->cfg = *params->config;
        } else {
            rmacoll_config_init(&comm->cfg);
        }
    } else {
        *cfg_st = rmacoll_config_load(NULL, &comm->cfg, cfg_err, len);
        if (*cfg_st != RMACOLL_SUCCESS) {
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
}

/* A new communicator: its locks, logger, error record and proxy (no
 * transport yet); NULL when out of memory. */
static rmacoll_comm_t *comm_new(const rmacoll_comm_params_t *params)
{
    rmacoll_comm_t *comm = calloc(1, sizeof(*comm));

    if (comm == NULL) {
        return NULL;
    }
    pthread_mutex_init(&comm->stage.lock, NULL);
    pthread_cond_init(&comm->stage.cond, NULL);
    pthread_mutex_init(&comm->async.lock, NULL);
    pthread_cond_init(&comm->async.cond, NULL);
    pthread_mutex_init(&comm->mem_lock, NULL);
    rmacoll__plan_init(&comm->plan);
    rmacoll__flow_init(&comm->flow);
    comm->rank = params->rank;
    comm->nranks = params->nranks;
    comm->fail_culprit = -1;
    comm->dead_rank = -1;
    rmacoll__logger_default(&comm->log);
    comm->log.rank = comm->rank;
    rmacoll__fail_init(&comm->fail, comm->last_error, sizeof(comm->last_error), &comm->log,
                       comm->rank, RMACOLL_LOG_SUBSYS_CORE);
    rmacoll__proxy_init(&comm->proxy, comm->rank, 0, &comm->log, comm->last_error,
                        sizeof(comm->last_error));
    return comm;
}

/* The bootstrap, from the unique id or the embedder's out-of-band calls. */
static rmacoll_status_t comm_bootstrap(rmacoll_comm_t *comm,
                                       const rmacoll_comm_params_t *params)
{
    rmacoll_status_t st;

    if (params->unique_id != NULL) {
        return rmacoll__bootstrap_create_ex(params->unique_id, comm->rank, comm->nranks,
                                            comm->cfg.timeout_ms, &comm->log, &comm->bs);
    }
    st = rmacoll__bootstrap_create_oob(params->oob, comm->rank, comm->nranks, &comm->bs);
    if (st == RMACOLL_SUCCESS) {
        rmacoll__bootstrap_set_logger(comm->bs, &comm->log);
    }
    return st;
}

/* The scheduler the config names (scheduler, scheduler_plugin, seed). */
static rmacoll_status_t comm_open_sched(rmacoll_comm_t *comm)
{
    char err[512];
    rmacoll_status_t st;

    st = rmacoll__sched_open(comm->cfg.scheduler, comm->cfg.scheduler_plugin, comm->topo,
                             comm->cfg.scheduler_seed, &comm->sched, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: %s", comm->rank, err);
    }
    comm->sched_open = 1;
    rmacoll__log(&comm->log, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_SCHED,
                 "rank %d: scheduler %s (seed %llu)", comm->rank,
                 comm->cfg.scheduler_plugin[0] ? comm->cfg.scheduler_plugin
                                               : comm->cfg.scheduler,
                 (unsigned long long)comm->cfg.scheduler_seed);
    return RMACOLL_SUCCESS;
}

/* The planner's signal states (before and after a call) and, with relay
 * channels, the relay buffer. */
static rmacoll_status_t comm_plan_state(rmacoll_comm_t *comm)
{
    rmacoll_status_t st;

    st = rmacoll__sigstate_create(comm->topo, &comm->pcfg, comm->rank, &comm->sig);
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__sigstate_create(comm->topo, &comm->pcfg, comm->rank,
                                      &comm->sig_next);
    }
    if (st == RMACOLL_SUCCESS && comm->nin > 0) {
        comm->relay_bytes = comm->cfg.relay_buffer_bytes;
        if (posix_memalign(&comm->relay_buf, 4096, comm->relay_bytes) != 0) {
            st = rmacoll__fail(&comm->fail, RMACOLL_ERR_NO_MEMORY,
                               "rank %d: cannot allocate the relay buffer "
                               "(relay.buffer_bytes = %llu)", comm->rank,
                               (unsigned long long)comm->relay_bytes);
        } else {
            memset(comm->relay_buf, 0, comm->relay_bytes);
        }
    }
    return st;
}

/* eager_max_bytes and direct_min_bytes as far as this topology allows
 * (a change logged at INFO). */
static void comm_fit_topology(rmacoll_comm_t *comm)
{
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
                         "nodes of at most %d ranks each, at most %d ranks in all on "
                         "three nodes or more, and the relay on)",
                         comm->rank,
                         !comm->pcfg.relay_enabled ? "the relay is off"
                                                   : "the topology is beyond those limits",
                         RMACOLL__ONE_ROUND_PAIR_MAX, RMACOLL__ONE_ROUND_MULTI_MAX);
        }
        comm->pcfg.direct_min_bytes = 0;
    }
}

/* The steps up to the transports: the communicator's agreed configuration,
 * topology, arrays, scheduler, planner state and control windows. */
static rmacoll_status_t comm_setup_core(rmacoll_comm_t *comm,
                                        const rmacoll_comm_params_t *params,
                                        rmacoll_status_t cfg_st, const char *cfg_err)
{
    rmacoll_status_t st = comm_bootstrap(comm, params);

    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__comm_topology(comm, params);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__comm_check_config(comm, cfg_st, cfg_err);
    }
    if (st == RMACOLL_SUCCESS) {
        comm->nin = rmacoll__plan_nin(comm->topo, &comm->pcfg, comm->rank);
        st = rmacoll__comm_check_relay(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = alloc_arrays(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = comm_open_sched(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = comm_plan_state(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        comm_fit_topology(comm);
        st = rmacoll__comm_setup_ctrl(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__comm_setup_net_peers(comm);
    }
    return st;
}

/* The proxy thread's heartbeat (core/ctrl/proxy.h, docs/protocol.md
 * "Heartbeat"): the count in this rank's window header, put into each
 * network peer's beat slot for this rank. */
static void comm_beat_setup(rmacoll_comm_t *comm)
{
    uint64_t v = 1000;
    volatile uint64_t *word =
        (volatile uint64_t *)((char *)comm->ctrl.addr + RMACOLL__CTRL_BEAT_OFF);

    if (rmacoll__config_get_count(&comm->cfg, "heartbeat_ms", &v) != RMACOLL_SUCCESS) {
        v = 1000;
    }
    comm->beat_ms = v;
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        rmacoll_put_t *put = &comm->beat_puts[k];

        memset(put, 0, sizeof(*put));
        put->peer = p;
        put->src = (const char *)word;
        put->src_mem = comm->ctrl_mem;
        put->bytes = 8;
        put->dst_rkey = &comm->peer_ctrl_rkey[p];
        put->dst_addr = put->dst_rkey->addr + comm->peer_lay[p].off_beat +
                        (uint64_t)comm->net_slot_at[k] * sizeof(uint64_t);
        put->sig_index = RMACOLL_NO_SIGNAL;
    }
    rmacoll__proxy_beat_set(&comm->proxy, v, word, comm->beat_puts,
                            comm->ctrl_mem != NULL ? (size_t)comm->nnet : 0);
}

/* The steps of the transports, the runner table and the proxy thread. */
static rmacoll_status_t comm_setup_xport(rmacoll_comm_t *comm)
{
    rmacoll_status_t st = rmacoll__comm_setup_transports(comm);

    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__comm_setup_direct(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__comm_setup_device_path(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        rmacoll__runners_bind(comm);
        st = rmacoll__comm_setup_device_signals(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__comm_setup_registrations(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        rmacoll__tinst_t *net = rmacoll__inst_ctl(comm, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST);
        if (net != NULL) {
            comm_beat_setup(comm);
            rmacoll__proxy_watch_set(&comm->proxy, rmacoll__flush_watch, comm);
            st = rmacoll__proxy_start(&comm->proxy, net->ops, net->tp);
        }
    }
    return st;
}

rmacoll_status_t rmacoll_comm_create(const rmacoll_comm_params_t *params,
                                     rmacoll_comm_t **out)
{
    rmacoll_comm_t *comm;
    rmacoll_status_t st, cfg_st = RMACOLL_SUCCESS;
    char cfg_err[320] = "";

    if (params != NULL && params->struct_size != sizeof(*params)) {
        return params_size_error(params);
    }
    if (params == NULL || out == NULL || params->nranks < 1 || params->rank < 0 ||
        params->rank >= params->nranks ||
        (params->unique_id == NULL) == (params->oob == NULL)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    comm = comm_new(params);
    if (comm == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    comm_config(comm, params, &cfg_st, cfg_err, sizeof(cfg_err));
    st = comm_setup_core(comm, params, cfg_st, cfg_err);
    if (st == RMACOLL_SUCCESS) {
        st = comm_setup_xport(comm);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__bootstrap_barrier(comm->bs);
    }
    if (st != RMACOLL_SUCCESS) {
        if (comm->last_error[0] == '\0') {
            rmacoll__fail(&comm->fail, st, "rank %d: communicator creation failed: %s",
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
    if (atomic_load_explicit(&comm->aborted, memory_order_acquire)) {
        rmacoll__abort_settle(comm); /* the peers learn of it; no barrier */
    }
    if (!comm->broken) {
        rmacoll__staged_drain(comm);
    } else {
        /* the flush delivers the abort word this rank passed on, within
         * RMACOLL__DESTROY_FLUSH_MS (seen in a fault campaign: a rank that
         * passed the word on and destroyed at once dropped its puts, and
         * the peers blamed it for the heartbeat its destroy stopped) */
        comm->destroy_flush_until_ms = rmacoll__now_ms() + RMACOLL__DESTROY_FLUSH_MS;
    }
    rmacoll__proxy_flush(&comm->proxy);
    /* no rank tears down while a peer may still write into it (after a
     * shrink none does: every survivor has agreed, the rest are excluded).
     * A peer still in a failing call reaches its own verdict within
     * timeout_ms of silence, or two heartbeat periods of a stopped rank,
     * and then leaves without the barrier: this rank's transports stay up
     * (its proxy progressing them) until every other rank has entered or
     * left, or for twice that long of silence, so no peer's call fails on
     * this rank's departure and blames it for a silence that is another's. */
    if (!comm->broken && !comm->shrunk) {
        uint64_t lim = comm->cfg.timeout_ms + comm->beat_ms;

        /* saturating: timeout_ms may be as large as UINT64_MAX */
        lim = lim < comm->cfg.timeout_ms || lim > UINT64_MAX / 2 ? UINT64_MAX : 2 * lim;
        st = rmacoll__bootstrap_barrier_for(comm->bs, lim);
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
            STATS_END(direct_bytes_sent),
            STATS_END(device_counts_calls), STATS_END(memreg_handles),
            STATS_END(memreg_bytes), STATS_END(memreg_buffers),
            STATS_END(call_registrations)
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
    s.device_counts_calls = atomic_load(&comm->stats.device_counts_calls);
    s.memreg_handles = atomic_load(&comm->stats.memreg_handles);
    s.memreg_bytes = atomic_load(&comm->stats.memreg_bytes);
    s.memreg_buffers = atomic_load(&comm->stats.memreg_buffers);
    s.call_registrations = atomic_load(&comm->stats.call_registrations);
    memcpy(stats, &s, want);
    return RMACOLL_SUCCESS;
}
