/*
 * run_stream.c - the device-memory runner on one node: everything is
 * enqueued on the user's stream, with no host synchronisation. Node peers'
 * receive buffers are exported in the metadata and mapped after planning;
 * READY words order a writer's stream after its reader's previous call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/call.h"
#include "core/comm.h"
#include "core/topo.h"

rmacoll_status_t rmacoll__stream_usable(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st;

    /* device memory: a transport bound to node peers x CUDA memory */
    if (ctl == NULL) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: stream: device buffers need a transport "
                 "for node peers in CUDA memory (RMACOLL_TCAP_MEM_CUDA), which this build "
                 "lacks (the copy-engine transport has one when built with CUDA)", comm->rank);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    /* n == 0 checks the stream can take work (not being captured) */
    st = ctl->ops->stream.post_puts_stream(ctl->tp, NULL, 0, c->stream);
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: stream: cannot enqueue on this "
                 "stream (CUDA graph capture is not supported): %s", comm->rank,
                 rmacoll_status_string(st));
    }
    return st;
}

static rmacoll_status_t stream_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__local_rec_t *lr = rmacoll__ctrl_local(comm->ctrl.addr, &comm->lay, c->par);
    rmacoll_status_t st = rmacoll__stream_usable(c);
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);

    if (st == RMACOLL_SUCCESS && c->recv_extent > 0) {
        st = ctl->ops->mem.mem_export(ctl->tp, c->recvbuf, c->recv_extent, lr->recv_blob);
        if (st != RMACOLL_SUCCESS) {
            snprintf(c->msg, sizeof(c->msg), "rank %d: recvbuf: cannot export the device "
                     "receive buffer (%llu bytes): %s", comm->rank,
                     (unsigned long long)c->recv_extent, rmacoll_status_string(st));
        }
    }
    return st;
}

/* Maps node peers' device receive buffers (those this rank writes). */
static rmacoll_status_t stream_planned(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);

    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__local_rec_t *lr;
        rmacoll_status_t st;
        if (j == comm->rank || c->sendcounts[j] == 0) {
            continue;
        }
        lr = rmacoll__ctrl_local(comm->peer_ctrl[j].addr, &comm->peer_lay[j], c->par);
        st = ctl->ops->mem.mem_import(ctl->tp, j, lr->recv_blob, &comm->peer_recv_addr[j]);
        if (st != RMACOLL_SUCCESS) {
            snprintf(c->msg, sizeof(c->msg), "rank %d: cannot map the device receive "
                     "buffer of rank %d: %s", comm->rank, j, rmacoll_status_string(st));
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t grow_waits(rmacoll_comm_t *comm, size_t n)
{
    if (n > comm->wait_cap) {
        uint32_t *wi = realloc(comm->wait_idx, n * sizeof(*wi));
        uint64_t *wv = wi ? realloc(comm->wait_val, n * sizeof(*wv)) : NULL;
        if (wi) {
            comm->wait_idx = wi;
        }
        if (wv == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        comm->wait_val = wv;
        comm->wait_cap = n;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t stream_enqueue(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll__plan_t *plan = &comm->plan;
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank, A = topo->node_of[me];
    void *stream = c->stream;
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st = rmacoll__grow_puts(comm, plan->ntasks);
    size_t nw = 0;

    if (st == RMACOLL_SUCCESS) {
        st = grow_waits(comm, plan->ntasks);
    }
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        if (plan->tasks[k].op == RMACOLL__OP_PUT) {
            rmacoll__translate(comm, &plan->tasks[k], c->sendbuf, c->recvbuf, NULL,
                               &comm->puts[k]);
        }
    }
    /* READY: my stream reached this call; writers may fill my buffer. Then
     * wait until every node peer I write reached it too. */
    for (int l = 0; st == RMACOLL_SUCCESS && l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (p != me && c->recvcounts[p] != 0) {
            st = ctl->ops->stream.signal_stream(ctl->tp, p,
                                             rmacoll__ctrl_sig_ready(&comm->peer_lay[p], me),
                                             comm->epoch, stream);
        }
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (p != me && c->sendcounts[p] != 0) {
            comm->wait_idx[nw] = rmacoll__ctrl_sig_ready(&comm->lay, p);
            comm->wait_val[nw++] = comm->epoch;
        }
    }
    if (st == RMACOLL_SUCCESS && nw) {
        st = ctl->ops->stream.wait_stream(ctl->tp, comm->wait_idx, comm->wait_val, nw, stream);
    }
    for (size_t b = 0; b < plan->nbatches && st == RMACOLL_SUCCESS; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];
        uint32_t n = bt->count[RMACOLL__Q_CE_PUT];
        uint32_t f = bt->first[RMACOLL__Q_CE_PUT];

        if (bt->count[RMACOLL__Q_PROXY_PUT] || bt->count[RMACOLL__Q_PROXY_WAIT]) {
            return RMACOLL_ERR_INTERNAL; /* excluded before the call */
        }
        if (n) { /* the binding picks by the queue's largest put */
            rmacoll__tinst_t *ti = rmacoll__comm_bound(comm, RMACOLL__PATH_CE,
                                                       RMACOLL_MEM_CUDA, &plan->tasks[f], n);
            st = ti->ops->stream.post_puts_stream(ti->tp, &comm->puts[f], n, stream);
        }
        nw = 0;
        for (uint32_t k = 0; k < bt->count[RMACOLL__Q_CE_WAIT]; k++) {
            const rmacoll__task_t *t = &plan->tasks[bt->first[RMACOLL__Q_CE_WAIT] + k];
            comm->wait_idx[nw] = t->sig;
            comm->wait_val[nw++] = t->sig_value;
        }
        if (st == RMACOLL_SUCCESS && nw) {
            st = ctl->ops->stream.wait_stream(ctl->tp, comm->wait_idx, comm->wait_val, nw,
                                           stream);
        }
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__comm_fail(comm, st, "rank %d: enqueueing the call on the stream "
                                  "failed: %s", me, rmacoll_status_string(st));
    }
    return RMACOLL_SUCCESS;
}

static void stream_release(rmacoll__call_t *c)
{
}

const rmacoll__runner_t rmacoll__run_stream = {
    .name = "stream",
    .prepare = stream_prepare,
    .planned = stream_planned,
    .run = stream_enqueue,
    .release = stream_release,
};
