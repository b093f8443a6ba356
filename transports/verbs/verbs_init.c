/*
 * verbs_init.c - init and teardown of the ibverbs transport: the local
 * resources (device, PD, CQ, one RC QP per peer), the collective address
 * exchange (one allgather of every rank's QP addresses, whose header
 * carries each rank's outcome), and each QP taken to RTR and RTS.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transports/common/tops.h"
#include "transports/verbs/verbs_priv.h"

/* ------------------------------------------------------------ QP setup */

rmacoll_status_t rmacoll__verbs_post_recv_one(rmacoll_transport_t *tp, int pi)
{
    struct ibv_recv_wr wr;
    struct ibv_recv_wr *bad = NULL;
    int rc;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id = VERBS_WRID_RECV | (uint64_t)pi;
    wr.sg_list = NULL;   /* WRITE_WITH_IMM consumes a receive but places no bytes in it */
    wr.num_sge = 0;
    rc = ibv_post_recv(tp->peers[pi].qp, &wr, &bad);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_post_recv to rank %d (qp %u) failed: %s",
                  tp->peers[pi].rank, tp->peers[pi].qp->qp_num, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_create_qp(rmacoll_transport_t *tp, int pi)
{
    verbs_peer_t *p = &tp->peers[pi];
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr a;
    int rc;

    memset(&ia, 0, sizeof(ia));
    ia.send_cq = tp->cq;
    ia.recv_cq = tp->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = tp->max_inflight;
    ia.cap.max_recv_wr = tp->recv_depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    p->qp = ibv_create_qp(tp->pd, &ia);
    if (p->qp == NULL) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                  "ibv_create_qp for rank %d on %s failed (send %u, recv %u work requests): %s",
                  p->rank, tp->dev_name, tp->max_inflight, tp->recv_depth, strerror(errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = tp->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    rc = ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "qp %u for rank %d: modify to INIT failed: %s",
                  p->qp->qp_num, p->rank, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    for (uint32_t i = 0; i < tp->recv_depth; i++) {
        rmacoll_status_t st = rmacoll__verbs_post_recv_one(tp, pi);

        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_connect_qp(rmacoll_transport_t *tp, int pi,
                                         const verbs_addr_t *remote)
{
    verbs_peer_t *p = &tp->peers[pi];
    struct ibv_qp_attr a;
    int rc;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(remote->mtu < (uint32_t)tp->mtu ? remote->mtu
                                                                 : (uint32_t)tp->mtu);
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;   /* 0.64 ms */
    a.ah_attr.port_num = tp->port;
    a.ah_attr.sl = (uint8_t)tp->service_level;
    a.ah_attr.dlid = remote->lid;
    if (tp->use_grh || remote->link_layer == IBV_LINK_LAYER_ETHERNET) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)(tp->gid_index < 0 ? 0 : tp->gid_index);
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.grh.traffic_class = (uint8_t)tp->traffic_class;
    }
    rc = ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                  "qp %u to rank %d (remote qp %u, lid %u): modify to RTR failed: %s",
                  p->qp->qp_num, p->rank, remote->qpn, (unsigned)remote->lid, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;         /* 4.096 us * 2^14 = 67 ms per try */
    a.retry_cnt = 7;
    a.rnr_retry = 7;        /* 7 = retry forever while the target reposts */
    a.sq_psn = p->psn;
    a.max_rd_atomic = 1;
    rc = ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                      IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "qp %u to rank %d: modify to RTS failed: %s",
                  p->qp->qp_num, p->rank, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

/* Local resources: device, port, PD, CQ, one QP per peer in INIT. */
static rmacoll_status_t verbs_setup_local(rmacoll_transport_t *tp)
{
    const rmacoll_transport_env_t *env = tp->env;
    struct ibv_device_attr dattr;
    rmacoll_status_t st;
    unsigned seed;
    int cqe;
    int rc;

    st = rmacoll__verbs_open_device(tp);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    rc = ibv_query_device(tp->ctx, &dattr);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_query_device(%s) failed: %s", tp->dev_name,
                  strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    if (dattr.max_qp_wr > 0 && tp->max_inflight > (uint32_t)dattr.max_qp_wr) {
        VERBS_LOG(tp, RMACOLL_LOG_WARN, "verbs_max_inflight %u above %s's limit; using %d",
                  tp->max_inflight, tp->dev_name, dattr.max_qp_wr);
        tp->max_inflight = (uint32_t)dattr.max_qp_wr;
    }
    if (dattr.max_qp_wr > 0 && tp->recv_depth > (uint32_t)dattr.max_qp_wr) {
        tp->recv_depth = (uint32_t)dattr.max_qp_wr;
    }
    st = rmacoll__verbs_query_port(tp);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    tp->pd = ibv_alloc_pd(tp->ctx);
    if (tp->pd == NULL) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_alloc_pd(%s) failed: %s", tp->dev_name,
                  strerror(errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    /* Room for every send and receive completion that can be outstanding. */
    {
        uint64_t want = (uint64_t)(tp->npeers > 0 ? tp->npeers : 1) *
                        (tp->max_inflight + tp->recv_depth);

        if (dattr.max_cqe > 0 && want > (uint64_t)dattr.max_cqe) {
            VERBS_LOG(tp, RMACOLL_LOG_WARN,
                      "completion queue of %llu entries above %s's limit %d; "
                      "lower verbs_max_inflight if completions overflow",
                      (unsigned long long)want, tp->dev_name, dattr.max_cqe);
            want = (uint64_t)dattr.max_cqe;
        }
        cqe = (int)(want > INT_MAX ? INT_MAX : want);
    }
    tp->cq = ibv_create_cq(tp->ctx, cqe, NULL, NULL, 0);
    if (tp->cq == NULL) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_create_cq(%s, %d entries) failed: %s",
                  tp->dev_name, cqe, strerror(errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8) ^ (unsigned)env->rank;
    for (int i = 0; i < tp->npeers; i++) {
        tp->peers[i].psn = (unsigned)rand_r(&seed) & 0xffffffu;
        st = verbs_create_qp(tp, i);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

void rmacoll__verbs_destroy(rmacoll_transport_t *tp)
{
    rmacoll_mem_t *m;

    if (tp == NULL) {
        return;
    }
    for (int i = 0; tp->peers != NULL && i < tp->npeers; i++) {
        if (tp->peers[i].qp != NULL) {
            ibv_destroy_qp(tp->peers[i].qp);
        }
    }
    m = tp->regs;
    while (m != NULL) {
        rmacoll_mem_t *next = m->next;

        if (m->refs != 0) {
            VERBS_LOG(tp, RMACOLL_LOG_DEBUG,
                      "finalize: region at %p (%zu bytes) still has %u registrations",
                      (void *)m->addr, m->bytes, m->refs);
        }
        if (!m->revoked) {
            ibv_dereg_mr(m->mr);
        }
        free(m);
        m = next;
    }
    if (tp->cq != NULL) {
        ibv_destroy_cq(tp->cq);
    }
    if (tp->pd != NULL) {
        ibv_dealloc_pd(tp->pd);
    }
    if (tp->ctx != NULL) {
        ibv_close_device(tp->ctx);
    }
    pthread_mutex_destroy(&tp->reg_lock);
    free(tp->peers);
    free(tp->peer_index);
    free(tp);
}


/* The instance's settings from the config (defaults where it says 0). */
static void verbs_settings(rmacoll_transport_t *tp, const rmacoll_config_t *cfg)
{
    tp->port = (uint8_t)((cfg != NULL && cfg->verbs_port != 0) ? cfg->verbs_port : 1);
    tp->max_inflight = (cfg != NULL && cfg->verbs_max_inflight != 0)
                           ? cfg->verbs_max_inflight : VERBS_DEFAULT_MAX_INFLIGHT;
    tp->recv_depth = 2 * tp->max_inflight;
    if (tp->recv_depth < VERBS_MIN_RECV_DEPTH) {
        tp->recv_depth = VERBS_MIN_RECV_DEPTH;
    }
    tp->signal_every = tp->max_inflight / 2 ? tp->max_inflight / 2 : 1;
    tp->timeout_ms = (cfg != NULL && cfg->timeout_ms != 0) ? cfg->timeout_ms
                                                            : VERBS_DEFAULT_TIMEOUT_MS;
    tp->traffic_class = cfg != NULL ? cfg->verbs_traffic_class : 0;
    tp->service_level = cfg != NULL ? cfg->verbs_service_level : 0;
}

/* This rank's blob: the header with its outcome `local`, then (on
 * success) the address of its QP for each peer, at the peer's rank. */
static void verbs_pack_blob(rmacoll_transport_t *tp, uint8_t *blob, rmacoll_status_t local)
{
    verbs_blob_hdr_t hdr;
    verbs_addr_t *ent = (verbs_addr_t *)blob + 1;

    memset(&hdr, 0, sizeof(hdr));
    hdr.magic = VERBS_BLOB_MAGIC;
    hdr.status = (uint32_t)local;
    memcpy(blob, &hdr, sizeof(hdr));
    for (int i = 0; local == RMACOLL_SUCCESS && i < tp->npeers; i++) {
        verbs_addr_t *e = &ent[tp->peers[i].rank];

        e->valid = 1;
        e->qpn = tp->peers[i].qp->qp_num;
        e->psn = tp->peers[i].psn;
        e->mtu = (uint32_t)tp->mtu;
        e->lid = tp->port_attr.lid;
        e->link_layer = tp->port_attr.link_layer;
        e->is_global = (uint8_t)tp->use_grh;
        memcpy(e->gid, tp->gid.raw, 16);
    }
}

/* After the exchange: every rank's header says it set up (a malformed
 * blob or a failed rank fails this one, naming it). */
static rmacoll_status_t verbs_check_blobs(rmacoll_transport_t *tp, const uint8_t *all,
                                          size_t entry_bytes)
{
    for (int r = 0; r < tp->env->nranks; r++) {
        verbs_blob_hdr_t hdr;

        memcpy(&hdr, all + (size_t)r * entry_bytes, sizeof(hdr));
        if (hdr.magic != VERBS_BLOB_MAGIC) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "rank %d sent a malformed verbs address blob (%zu bytes)", r, entry_bytes);
            tp->err_peer = r;
            return RMACOLL_ERR_PEER;
        } else if (hdr.status != RMACOLL_SUCCESS && r != tp->env->rank) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR, "rank %d failed to set up verbs: %s", r,
                      rmacoll_status_string((rmacoll_status_t)hdr.status));
            tp->err_peer = r;
            return RMACOLL_ERR_PEER;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Connects each peer's QP to the address that peer made for this rank. */
static rmacoll_status_t verbs_connect_all(rmacoll_transport_t *tp, const uint8_t *all,
                                          size_t entry_bytes)
{
    const rmacoll_transport_env_t *env = tp->env;
    rmacoll_status_t local = RMACOLL_SUCCESS;

    for (int i = 0; local == RMACOLL_SUCCESS && i < tp->npeers; i++) {
        int r = tp->peers[i].rank;
        verbs_addr_t remote;

        memcpy(&remote, all + (size_t)r * entry_bytes + sizeof(verbs_addr_t) * (1 + (size_t)env->rank),
               sizeof(remote));
        if (!remote.valid) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "rank %d made no queue pair for rank %d (peer sets differ)", r, env->rank);
            tp->err_peer = r;
            return RMACOLL_ERR_TRANSPORT;
        }
        local = verbs_connect_qp(tp, i, &remote);
        if (local != RMACOLL_SUCCESS) {
            tp->err_peer = r;
        }
    }
    return local;
}

rmacoll_status_t rmacoll__verbs_init(const rmacoll_transport_env_t *env,
                                     rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    rmacoll_status_t st;
    rmacoll_status_t local;
    size_t entry_bytes;
    uint8_t *blob = NULL;
    uint8_t *all = NULL;

    tp = rmacoll__tops_new(env, tpp, 1, sizeof(*tp), &st);
    if (tp == NULL) {
        return st;
    }
    pthread_mutex_init(&tp->reg_lock, NULL);
    tp->env = env;
    tp->err_peer = -1;
    tp->sticky = RMACOLL_SUCCESS;
    tp->chain_peer = -1;
    verbs_settings(tp, env->config);

    tp->peer_index = malloc(sizeof(int) * (size_t)env->nranks);
    tp->peers = calloc((size_t)env->nranks, sizeof(verbs_peer_t));
    entry_bytes = sizeof(verbs_addr_t) * ((size_t)env->nranks + 1);
    blob = calloc(1, entry_bytes);
    all = calloc((size_t)env->nranks, entry_bytes);
    if (tp->peer_index == NULL || tp->peers == NULL || blob == NULL || all == NULL) {
        local = RMACOLL_ERR_NO_MEMORY;
    } else {
        for (int r = 0; r < env->nranks; r++) {
            tp->peer_index[r] = -1;
            if (r != env->rank && env->peers[r]) {
                tp->peer_index[r] = tp->npeers;
                tp->peers[tp->npeers].rank = r;
                tp->npeers++;
            }
        }
        local = verbs_setup_local(tp);
    }

    /* Every rank takes part in the exchange, even after a local failure,
     * so that no peer is left waiting; the header carries the outcome. */
    if (blob != NULL) {
        verbs_pack_blob(tp, blob, local);
    }
    if (blob != NULL && all != NULL) {
        st = env->allgather(env->oob_ctx, blob, all, entry_bytes);
        if (st != RMACOLL_SUCCESS) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR, "address exchange (%zu bytes per rank) failed: %s",
                      entry_bytes, rmacoll_status_string(st));
            if (local == RMACOLL_SUCCESS) {
                local = st;
            }
        }
    } else {
        /* Cannot even take part: the peers' exchange will time out in the
         * out-of-band layer, which names this rank. */
        local = RMACOLL_ERR_NO_MEMORY;
    }
    if (local == RMACOLL_SUCCESS) {
        local = verbs_check_blobs(tp, all, entry_bytes);
    }
    if (local == RMACOLL_SUCCESS) {
        local = verbs_connect_all(tp, all, entry_bytes);
    }
    free(blob);
    free(all);
    if (local != RMACOLL_SUCCESS) {
        rmacoll__verbs_destroy(tp);
        return local;
    }
    VERBS_LOG(tp, RMACOLL_LOG_INFO,
              "rank %d: %s port %u, %d peers, mtu %u, %s, max %u work requests in flight per peer",
              env->rank, tp->dev_name, (unsigned)tp->port, tp->npeers, verbs_mtu_bytes(tp->mtu),
              tp->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "infiniband",
              tp->max_inflight);
    *tpp = tp;
    return RMACOLL_SUCCESS;
}
