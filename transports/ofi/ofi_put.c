/*
 * ofi_put.c - the data path of the libfabric transport: post_puts queues
 * each put on its peer's FIFO (pools sized at init, no allocation), the
 * queues are issued piece by piece (fi_writemsg, or fi_inject_writedata
 * for signal-only puts) under the ordering rules written in ofi.c, and
 * progress reads the CQ: local completions free their op, remote CQ data
 * raises a signal word, errors are logged once and stick. Stalled queues
 * and peers that stop completing fail with RMACOLL_ERR_TIMEOUT.
 */
#include <inttypes.h>
#include <string.h>
#include <sys/uio.h>

#include "transports/ofi/ofi_internal.h"

/* What issuing one piece did. */
enum {
    OFI_ISSUED,     /* gone: take the next */
    OFI_BLOCKED,    /* back-pressure: the queue waits for progress */
    OFI_RETRY,      /* the provider cannot inject: issue it again as a write */
    OFI_FAILED      /* logged; the instance failed (ofi_fail) */
};

/* Takes q, fully issued, off the head of peer's queue into the pool. */
static void ofi_qput_retire(rmacoll_transport_t *tp, ofi_peer_t *peer, ofi_qput_t *q)
{
    peer->head = q->next;
    if (peer->head == NULL) {
        peer->tail = NULL;
    }
    q->next = tp->free_qputs;
    tp->free_qputs = q;
    tp->nqueued--;
}

/* Signal-only put q to peer p. shm never completes a zero-length write
 * with FI_DELIVERY_COMPLETE, so it is injected: no source, no completion. */
static int ofi_issue_inject(rmacoll_transport_t *tp, int p, ofi_qput_t *q)
{
    ofi_peer_t *peer = &tp->peers[p];
    ssize_t ret = fi_inject_writedata(tp->ep, &tp->zero_src, 0, q->sig_index, peer->addr,
                                      q->dst_addr, q->key);

    if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) {
        OFI_LOG(tp, RMACOLL_LOG_INFO,
                "ofi: provider '%s' cannot inject; signal-only puts use writes",
                tp->info->fabric_attr->prov_name);
        tp->zero_inject = 0;
        return OFI_RETRY;
    }
    if (ret == -FI_EAGAIN) {
        OFI_LOG(tp, RMACOLL_LOG_TRACE, "ofi: back-pressure to peer %d (%zu in flight)",
                p, tp->ops_busy);
        return OFI_BLOCKED;
    }
    if (ret != 0) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: signal-only put to peer %d failed: %s",
                p, fi_strerror((int)-ret));
        ofi_fail(tp, RMACOLL_ERR_TRANSPORT, p);
        return OFI_FAILED;
    }
    ofi_qput_retire(tp, peer, q);
    return OFI_ISSUED;
}

/* The next piece of q (len bytes, the last one of q when `last`, carrying
 * the signal when `sig`) to peer p, with one op of the pool. */
static int ofi_issue_piece(rmacoll_transport_t *tp, int p, ofi_qput_t *q, uint64_t len,
                           int last, int sig)
{
    ofi_peer_t *peer = &tp->peers[p];
    ofi_op_t *op = tp->free_ops;
    void *desc = q->desc;
    struct iovec iov;
    struct fi_rma_iov rma;
    struct fi_msg_rma msg;
    ssize_t ret;

    iov.iov_base = (void *)(uintptr_t)(q->src ? q->src + q->done : NULL);
    iov.iov_len = len;
    rma.addr = q->dst_addr + q->done;
    rma.len = len;
    rma.key = q->key;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = peer->addr;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = &op->fctx;
    msg.data = sig ? q->sig_index : 0;
    ret = fi_writemsg(tp->ep, &msg,
                      FI_COMPLETION |
                          (tp->ordered ? FI_INJECT_COMPLETE : FI_DELIVERY_COMPLETE) |
                          (sig ? FI_REMOTE_CQ_DATA : 0));
    if (ret == -FI_EAGAIN) {
        OFI_LOG(tp, RMACOLL_LOG_TRACE, "ofi: back-pressure to peer %d (%zu in flight)",
                p, tp->ops_busy);
        return OFI_BLOCKED;
    }
    if (ret != 0) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR,
                "ofi: write of %" PRIu64 " bytes to peer %d failed: %s", len, p,
                fi_strerror((int)-ret));
        ofi_fail(tp, RMACOLL_ERR_TRANSPORT, p);
        return OFI_FAILED;
    }
    tp->free_ops = op->next;
    op->peer = p;
    op->bytes = len;
    tp->ops_busy++;
    if (peer->inflight++ == 0) {
        peer->inflight_since_ns = rmacoll__tclock_ns();
    }
    q->done += len;
    if (last) {
        ofi_qput_retire(tp, peer, q);
    }
    return OFI_ISSUED;
}

/* After a drain of peer p: a queue that issued nothing is stalled since
 * now, and fails once stalled longer than the timeout. */
static rmacoll_status_t ofi_check_stall(rmacoll_transport_t *tp, int p, int issued)
{
    ofi_peer_t *peer = &tp->peers[p];
    uint64_t now;

    if (peer->head == NULL || issued) {
        peer->stall_since_ns = 0;
        return RMACOLL_SUCCESS;
    }
    now = rmacoll__tclock_ns();
    if (peer->stall_since_ns == 0) {
        peer->stall_since_ns = now;
    } else if (now - peer->stall_since_ns > tp->timeout_ns) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR,
                "ofi: puts to peer %d stalled for %" PRIu64 " ms (%u in flight, "
                "%" PRIu64 " bytes waiting)", p,
                (now - peer->stall_since_ns) / 1000000, peer->inflight,
                peer->head->bytes - peer->head->done);
        return ofi_fail(tp, RMACOLL_ERR_TIMEOUT, p);
    }
    return RMACOLL_SUCCESS;
}

/* Issues what it can of peer p's queue, in order. */
static rmacoll_status_t ofi_drain_peer(rmacoll_transport_t *tp, int p)
{
    ofi_peer_t *peer = &tp->peers[p];
    ofi_qput_t *q;
    int issued = 0;

    while ((q = peer->head) != NULL) {
        uint64_t left = q->bytes - q->done;
        uint64_t len = left < tp->max_piece ? left : tp->max_piece;
        int last = len == left;
        int sig = last && q->sig_index != RMACOLL_NO_SIGNAL;
        int r;

        if ((sig && !tp->ordered && peer->inflight > 0) ||
            (tp->free_ops == NULL && len > 0)) {
            break;  /* signal waits for earlier pieces to be delivered */
        }
        if (len == 0 && tp->zero_inject) {
            r = ofi_issue_inject(tp, p, q);
        } else if (tp->free_ops == NULL) {
            break;
        } else {
            r = ofi_issue_piece(tp, p, q, len, last, sig);
        }
        if (r == OFI_RETRY) {
            continue;
        }
        if (r == OFI_BLOCKED) {
            break;
        }
        if (r == OFI_FAILED) {
            return tp->failed;
        }
        issued = 1;
    }
    return ofi_check_stall(tp, p, issued);
}

static rmacoll_status_t ofi_cq_error(rmacoll_transport_t *tp)
{
    struct fi_cq_err_entry err;
    char buf[256];
    const char *pstr;
    int peer = -1;
    ssize_t ret;

    memset(&err, 0, sizeof(err));
    ret = fi_cq_readerr(tp->cq, &err, 0);
    if (ret < 0) {
        if (ret == -FI_EAGAIN) {
            return RMACOLL_SUCCESS;
        }
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: fi_cq_readerr failed: %s",
                fi_strerror((int)-ret));
        return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
    }
    if (err.op_context != NULL && !(err.flags & FI_REMOTE_WRITE)) {
        ofi_op_t *op = err.op_context;
        peer = op->peer;
        tp->peers[peer].inflight--;
        tp->ops_busy--;
        op->next = tp->free_ops;
        tp->free_ops = op;
    }
    pstr = fi_cq_strerror(tp->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    OFI_LOG(tp, RMACOLL_LOG_ERROR,
            "ofi: put to peer %d failed on provider '%s': %s (provider: %s)", peer,
            tp->info->fabric_attr->prov_name, fi_strerror(err.err),
            pstr ? pstr : "?");
    return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, peer);
}


#ifdef RMACOLL_OFI_CUDA
/* shm's SAR protocol lands device memory with a cudaMemcpy from its
 * (pageable) bounce buffers, which may still be in DMA when the write's
 * completion arrives: a relay forward on the copy engine's stream then
 * read the old bytes (seen on the GPU machine). Before a signal of this
 * batch is raised, that copy is waited for. */
static rmacoll_status_t ofi_dev_fence(rmacoll_transport_t *tp,
                                      const struct fi_cq_data_entry *ent, ssize_t n)
{
    for (ssize_t i = 0; i < n && tp->dev_fence; i++) {
        if ((ent[i].flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) ==
            (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) {
            if (rmacoll__cu_legacy_fence() != 0) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: waiting for the provider's copies "
                        "into device memory failed");
                return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
            }
            break;
        }
    }
    return RMACOLL_SUCCESS;
}
#endif

/* One batch of completions: signals raised, ops back to the pool. */
static void ofi_complete(rmacoll_transport_t *tp, const struct fi_cq_data_entry *ent,
                         ssize_t n)
{
    for (ssize_t i = 0; i < n; i++) {
        /* remote events carry FI_REMOTE_WRITE; sockets also sets
         * FI_REMOTE_CQ_DATA on the writer's own completion */
        if ((ent[i].flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) ==
            (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) {
            uint32_t idx = (uint32_t)ent[i].data;
            if (idx >= tp->env.nsignals) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR,
                        "ofi: incoming signal index %u out of range (%u words)", idx,
                        tp->env.nsignals);
                ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
                continue;
            }
            __atomic_fetch_add(&tp->env.signals[idx], 1, __ATOMIC_RELEASE);
        } else if (ent[i].op_context != NULL) {
            ofi_op_t *op = ent[i].op_context;
            tp->peers[op->peer].stall_since_ns = 0;   /* it moves */
            tp->peers[op->peer].inflight--;
            tp->peers[op->peer].inflight_since_ns = rmacoll__tclock_ns();
            tp->ops_busy--;
            op->next = tp->free_ops;
            tp->free_ops = op;
        }
    }
}

/* Issued puts whose completion (the target's delivery ack) does not come:
 * the target has stopped progressing. Named here, so that a caller's
 * flush fails naming it (checked every timeout / 16). */
static rmacoll_status_t ofi_check_silent_peers(rmacoll_transport_t *tp)
{
    uint64_t now = rmacoll__tclock_ns();

    if (now < tp->scan_at_ns) {
        return RMACOLL_SUCCESS;
    }
    tp->scan_at_ns = now + tp->timeout_ns / 16;
    for (int p = 0; p < tp->env.nranks; p++) {
        ofi_peer_t *pe = &tp->peers[p];
        if (pe->inflight > 0 && now - pe->inflight_since_ns > tp->timeout_ns) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: %u puts to peer %d not completed for %" PRIu64 " ms "
                    "(the peer does not progress)", pe->inflight, p,
                    (now - pe->inflight_since_ns) / 1000000);
            return ofi_fail(tp, RMACOLL_ERR_TIMEOUT, p);
        }
    }
    return RMACOLL_SUCCESS;
}

/* Drains the queues of the peers with puts waiting; a peer whose queue
 * empties leaves the active list. */
static rmacoll_status_t ofi_drain_active(rmacoll_transport_t *tp)
{
    for (int i = 0; i < tp->nactive;) {
        int p = tp->active[i];
        rmacoll_status_t st = ofi_drain_peer(tp, p);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (tp->peers[p].head == NULL) {
            tp->peers[p].active = 0;
            tp->active[i] = tp->active[--tp->nactive];
        } else {
            i++;
        }
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ofi_progress(rmacoll_transport_t *tp)
{
    struct fi_cq_data_entry ent[OFI_CQ_BATCH];

    OFI_CU_BIND(tp);

    if (tp->cut_off) {
        return tp->failed; /* mem_revoke: nothing is read from the network */
    }
    for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
        ssize_t n = fi_cq_read(tp->cq, ent, OFI_CQ_BATCH);

        if (n == -FI_EAGAIN) {
            break;
        }
        if (n == -FI_EAVAIL) {
            ofi_cq_error(tp);
            continue;
        }
        if (n < 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: fi_cq_read failed: %s",
                    fi_strerror((int)-n));
            return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
        }
#ifdef RMACOLL_OFI_CUDA
        if (ofi_dev_fence(tp, ent, n) != RMACOLL_SUCCESS) {
            return tp->failed;
        }
#endif
        ofi_complete(tp, ent, n);
        if (n < OFI_CQ_BATCH) {
            break;
        }
    }
    if (tp->failed != RMACOLL_SUCCESS) {
        return tp->failed;
    }
    if (tp->ops_busy > 0) {
        rmacoll_status_t st = ofi_check_silent_peers(tp);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return ofi_drain_active(tp);
}

rmacoll_status_t rmacoll__ofi_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                        size_t n)
{
    uint64_t deadline = 0;

    OFI_CU_BIND(tp);

    if (tp->failed != RMACOLL_SUCCESS) {
        return tp->failed;
    }
    for (size_t k = 0; k < n; k++) {
        const rmacoll_put_t *pt = &puts[k];
        const rmacoll_rkey_t *rk = pt->dst_rkey;
        ofi_peer_t *peer;
        ofi_qput_t *q;

        if (pt->bytes == 0 && pt->sig_index == RMACOLL_NO_SIGNAL) {
            continue;
        }
        if (pt->peer < 0 || pt->peer >= tp->env.nranks || rk == NULL ||
            rk->len != sizeof(uint64_t) || (pt->bytes > 0 && pt->src == NULL) ||
            pt->dst_addr < rk->addr || pt->dst_addr - rk->addr > rk->bytes ||
            pt->bytes > rk->bytes - (pt->dst_addr - rk->addr)) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: bad put %zu to peer %d: %" PRIu64 " bytes at 0x%" PRIx64
                    " outside its rkey or without one", k, pt->peer, pt->bytes,
                    pt->dst_addr);
            return RMACOLL_ERR_INVALID_ARG;
        }
        while (tp->free_qputs == NULL) {
            rmacoll_status_t st = rmacoll__ofi_progress(tp);
            uint64_t now = rmacoll__tclock_ns();
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            if (deadline == 0) {
                deadline = now + tp->timeout_ns;
            } else if (now > deadline) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR,
                        "ofi: no room to post %" PRIu64 " bytes to peer %d for %" PRIu64
                        " ms (%zu queued, %zu in flight)", pt->bytes, pt->peer,
                        tp->timeout_ns / 1000000, tp->nqueued, tp->ops_busy);
                return ofi_fail(tp, RMACOLL_ERR_TIMEOUT, pt->peer);
            }
        }
        q = tp->free_qputs;
        tp->free_qputs = q->next;
        q->next = NULL;
        q->src = pt->src;
        q->desc = pt->src_mem != NULL ? pt->src_mem->desc : NULL;
        q->dst_addr = pt->dst_addr;
        memcpy(&q->key, rk->key, sizeof(q->key));
        q->bytes = pt->bytes;
        q->done = 0;
        q->sig_index = pt->sig_index;
        tp->nqueued++;
        peer = &tp->peers[pt->peer];
        if (peer->tail != NULL) {
            peer->tail->next = q;
        } else {
            peer->head = q;
        }
        peer->tail = q;
        if (!peer->active) {
            peer->active = 1;
            tp->active[tp->nactive++] = pt->peer;
        }
        if (peer->head == q) {
            rmacoll_status_t st = ofi_drain_peer(tp, pt->peer);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
    }
    return RMACOLL_SUCCESS;
}
