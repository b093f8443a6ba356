/*
 * verbs_put.c - the data path of the ibverbs transport: post_puts builds
 * chains of RDMA WRITE work requests per peer (the last of a signalled put
 * a WRITE_WITH_IMM), signalled often enough that completions retire them,
 * waiting for room when a QP is full; progress polls the CQ, raises signal
 * words on receive completions and fails a peer whose QP errs.
 */
#include <arpa/inet.h>
#include <string.h>

#include "transports/verbs/verbs_priv.h"

/* ------------------------------------------------------------ data path */

static void verbs_fail_peer(rmacoll_transport_t *tp, int pi)
{
    verbs_peer_t *p = &tp->peers[pi];

    if (!p->failed) {
        p->failed = 1;
        /* Nothing posted to it will be retired usefully any more. */
        tp->pending -= (size_t)(p->posted - p->retired);
        p->retired = p->posted;
    }
    if (tp->err_peer < 0) {
        tp->err_peer = p->rank;
    }
    if (tp->sticky == RMACOLL_SUCCESS) {
        tp->sticky = RMACOLL_ERR_TRANSPORT;
    }
}

static rmacoll_status_t verbs_handle_wc(rmacoll_transport_t *tp, const struct ibv_wc *wc)
{
    int pi = (int)(wc->wr_id & VERBS_WRID_PEER_MASK);
    int recv = (wc->wr_id & VERBS_WRID_RECV) != 0;
    verbs_peer_t *p;

    if (pi >= tp->npeers) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "completion with unknown wr_id 0x%llx on qp %u (%s)",
                  (unsigned long long)wc->wr_id, wc->qp_num, ibv_wc_status_str(wc->status));
        return RMACOLL_ERR_INTERNAL;
    }
    p = &tp->peers[pi];
    if (wc->status != IBV_WC_SUCCESS) {
        if (!p->failed) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "%s rank %d failed on qp %u: %s (status %d, vendor error 0x%x)",
                      recv ? "receive from" : "rdma write to", p->rank, wc->qp_num,
                      ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
        }
        verbs_fail_peer(tp, pi);
        return RMACOLL_ERR_TRANSPORT;
    }
    if (recv) {
        uint32_t idx;

        if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "unexpected receive (opcode %d) from rank %d on qp %u", (int)wc->opcode,
                      p->rank, wc->qp_num);
            verbs_fail_peer(tp, pi);
            return RMACOLL_ERR_TRANSPORT;
        }
        idx = ntohl(wc->imm_data);
        if (idx >= tp->env->nsignals) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "rank %d signalled word %u on qp %u, but only %u words exist", p->rank,
                      idx, wc->qp_num, tp->env->nsignals);
            verbs_fail_peer(tp, pi);
            return RMACOLL_ERR_TRANSPORT;
        }
        /* Contract: one writer per word, raised by one per signal. */
        __atomic_fetch_add(&tp->env->signals[idx], 1, __ATOMIC_RELEASE);
        return rmacoll__verbs_post_recv_one(tp, pi);
    }
    {
        uint64_t seq = (wc->wr_id >> VERBS_WRID_SEQ_SHIFT) & VERBS_WRID_SEQ_MASK;
        uint64_t done = p->retired & ~VERBS_WRID_SEQ_MASK;

        done |= seq;
        if (done < p->retired) {
            done += VERBS_WRID_SEQ_MASK + 1;   /* the 39-bit field wrapped */
        }
        if (done > p->posted) {
            done = p->posted;
        }
        if (done > p->retired) {
            tp->pending -= (size_t)(done - p->retired);
            p->retired = done;
        }
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__verbs_progress(rmacoll_transport_t *tp)
{
    struct ibv_wc wc[VERBS_POLL_BATCH];
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (int round = 0; round < VERBS_POLL_ROUNDS; round++) {
        int n = ibv_poll_cq(tp->cq, VERBS_POLL_BATCH, wc);

        if (n < 0) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_poll_cq on %s failed (%d)", tp->dev_name, n);
            if (tp->sticky == RMACOLL_SUCCESS) {
                tp->sticky = RMACOLL_ERR_TRANSPORT;
            }
            return RMACOLL_ERR_TRANSPORT;
        }
        for (int i = 0; i < n; i++) {
            rmacoll_status_t s = verbs_handle_wc(tp, &wc[i]);

            if (s != RMACOLL_SUCCESS && st == RMACOLL_SUCCESS) {
                st = s;
            }
        }
        if (n < VERBS_POLL_BATCH) {
            break;
        }
    }
    if (st == RMACOLL_SUCCESS) {
        st = tp->sticky;
    }
    return st;
}

/* Posts the chain built for one peer. The last WR is signalled, and so is
 * any WR after signal_every unsignalled ones, so that every WR is retired
 * by a later completion and the send queue never fills with WRs that no
 * completion will ever free. */
static rmacoll_status_t verbs_flush(rmacoll_transport_t *tp)
{
    int pi = tp->chain_peer;
    int n = tp->chain_len;
    verbs_peer_t *p;
    struct ibv_send_wr *bad = NULL;
    int rc;

    if (n == 0 || pi < 0) {
        tp->chain_len = 0;
        return RMACOLL_SUCCESS;
    }
    p = &tp->peers[pi];
    for (int i = 0; i < n; i++) {
        struct ibv_send_wr *wr = &tp->chain[i];
        uint64_t seq = p->posted + (uint64_t)i + 1;

        wr->next = (i + 1 < n) ? &tp->chain[i + 1] : NULL;
        p->unsignalled++;
        if (i + 1 == n || p->unsignalled >= tp->signal_every) {
            wr->send_flags |= IBV_SEND_SIGNALED;
            p->unsignalled = 0;
        }
        wr->wr_id = (uint64_t)pi | ((seq & VERBS_WRID_SEQ_MASK) << VERBS_WRID_SEQ_SHIFT);
    }
    tp->chain_len = 0;
    rc = ibv_post_send(p->qp, &tp->chain[0], &bad);
    if (rc != 0) {
        int ok = 0;

        for (int i = 0; i < n && &tp->chain[i] != bad; i++) {
            ok++;
        }
        p->posted += (uint64_t)ok;
        tp->pending += (size_t)ok;
        VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                  "ibv_post_send to rank %d (qp %u) failed after %d of %d work requests: %s",
                  p->rank, p->qp->qp_num, ok, n, strerror(rc));
        verbs_fail_peer(tp, pi);
        return RMACOLL_ERR_TRANSPORT;
    }
    p->posted += (uint64_t)n;
    tp->pending += (size_t)n;
    return RMACOLL_SUCCESS;
}

/* Waits (driving progress) until peer pi has room for one more send WR. */
static rmacoll_status_t verbs_wait_room(rmacoll_transport_t *tp, int pi, uint64_t *deadline)
{
    verbs_peer_t *p = &tp->peers[pi];

    while (p->posted - p->retired >= tp->max_inflight) {
        rmacoll_status_t st = rmacoll__verbs_progress(tp);

        if (p->failed) {
            return RMACOLL_ERR_TRANSPORT;
        }
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (p->posted - p->retired < tp->max_inflight) {
            break;
        }
        if (*deadline == 0) {
            *deadline = rmacoll__tclock_ms() + tp->timeout_ms;
        } else if (rmacoll__tclock_ms() >= *deadline) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "timed out after %llu ms waiting for room to post to rank %d "
                      "(qp %u, %llu work requests in flight, limit %u)",
                      (unsigned long long)tp->timeout_ms, p->rank, p->qp->qp_num,
                      (unsigned long long)(p->posted - p->retired), tp->max_inflight);
            tp->err_peer = p->rank;
            return RMACOLL_ERR_TIMEOUT;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_check_put(rmacoll_transport_t *tp, const rmacoll_put_t *put,
                                        int *pip)
{
    int pi;

    if (put->peer < 0 || put->peer >= tp->env->nranks ||
        (pi = tp->peer_index[put->peer]) < 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "put of %llu bytes to rank %d, which is not a verbs peer",
                  (unsigned long long)put->bytes, put->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->peers[pi].failed) {
        /* Logged when the QP failed; fail at once, never wait. */
        return RMACOLL_ERR_TRANSPORT;
    }
    if (put->bytes > 0) {
        const rmacoll_mem_t *m = put->src_mem;
        uintptr_t s = (uintptr_t)put->src;
        const rmacoll_rkey_t *rk = put->dst_rkey;

        if (m == NULL || s < m->addr || s + put->bytes < s ||
            s + put->bytes > m->addr + m->bytes) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "put of %llu bytes to rank %d: source %p is not inside its registration",
                      (unsigned long long)put->bytes, put->peer, put->src);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (rk == NULL || rk->len != sizeof(uint32_t) || put->dst_addr < rk->addr ||
            put->dst_addr + put->bytes < put->dst_addr ||
            put->dst_addr + put->bytes > rk->addr + rk->bytes) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "put of %llu bytes to rank %d at 0x%llx is outside the remote region",
                      (unsigned long long)put->bytes, put->peer,
                      (unsigned long long)put->dst_addr);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    *pip = pi;
    return RMACOLL_SUCCESS;
}

/* Chains the work requests of one checked put to peer pi (pieces of at
 * most max_msg bytes; the last one a WRITE_WITH_IMM when it signals),
 * posting the chain when it is full, goes to another peer, or would pass
 * the peer's max_inflight (then waiting for room until *deadline). */
static rmacoll_status_t verbs_chain_put(rmacoll_transport_t *tp, const rmacoll_put_t *put,
                                        int pi, uint32_t rkey, uint64_t *deadline)
{
    uint64_t off = 0;
    rmacoll_status_t st;

    do {
        uint64_t len = put->bytes - off;
        int last;
        struct ibv_send_wr *wr;
        struct ibv_sge *sge;

        if (len > tp->max_msg) {
            len = tp->max_msg;
        }
        last = (off + len == put->bytes);
        if (tp->chain_len > 0 && tp->chain_peer != pi) {
            st = verbs_flush(tp);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        if (tp->peers[pi].posted + (uint64_t)tp->chain_len - tp->peers[pi].retired >=
            tp->max_inflight) {
            st = verbs_flush(tp);
            if (st == RMACOLL_SUCCESS) {
                st = verbs_wait_room(tp, pi, deadline);
            }
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        tp->chain_peer = pi;
        wr = &tp->chain[tp->chain_len];
        sge = &tp->chain_sge[tp->chain_len];
        memset(wr, 0, sizeof(*wr));
        if (len > 0) {
            sge->addr = (uint64_t)(uintptr_t)put->src + off;
            sge->length = (uint32_t)len;
            sge->lkey = put->src_mem->mr->lkey;
            wr->sg_list = sge;
            wr->num_sge = 1;
            wr->wr.rdma.remote_addr = put->dst_addr + off;
            wr->wr.rdma.rkey = rkey;
        }
        if (last && put->sig_index != RMACOLL_NO_SIGNAL) {
            wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr->imm_data = htonl(put->sig_index);
        } else {
            wr->opcode = IBV_WR_RDMA_WRITE;
        }
        tp->chain_len++;
        off += len;
        if (tp->chain_len == VERBS_CHAIN_MAX) {
            st = verbs_flush(tp);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
    } while (off < put->bytes);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__verbs_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                          size_t n)
{
    uint64_t deadline = 0;
    rmacoll_status_t st;

    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *put = &puts[i];
        uint32_t rkey = 0;
        int pi;

        st = verbs_check_put(tp, put, &pi);
        if (st != RMACOLL_SUCCESS) {
            (void)verbs_flush(tp);
            return st;
        }
        if (put->bytes > 0) {
            memcpy(&rkey, put->dst_rkey->key, sizeof(rkey));
        }
        /* A signal-only put is one zero-length WRITE_WITH_IMM; a put with
         * no signal and no bytes posts nothing. */
        if (put->bytes == 0 && put->sig_index == RMACOLL_NO_SIGNAL) {
            continue;
        }
        st = verbs_chain_put(tp, put, pi, rkey, &deadline);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return verbs_flush(tp);
}
