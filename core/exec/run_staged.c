/*
 * run_staged.c - the device-memory runners across nodes: host staging,
 * and registration (hmem) where the network transport takes device memory.
 *
 * Staged: the host runs the metadata round and agreement in the call, as
 * always; the stream then copies the send blocks to a pinned host buffer
 * and raises STAGE_GO; a worker thread runs the host plan on the staging
 * buffers (CE by cross-memory attach, network by the proxy) and raises
 * STAGE_DONE; the stream waits for it, copies the receive blocks back and
 * raises STAGE_COPIED. The call returns without host synchronisation; the
 * next call on the communicator waits for STAGE_COPIED of this one (one
 * staged call in flight, so staging buffers are never overwritten early).
 *
 * Hmem (comm->hmem, chosen at create: bind.h): the same stream triggering
 * and worker with no copies. The device send and receive buffers are
 * registered with the network transport (RMACOLL_TCAP_HMEM) and the
 * receive buffer exported to node peers; the worker runs the host plan on
 * the device buffers themselves: network PutSignals from device memory
 * into the peer's device receive buffer or its device relay buffer (the
 * proxy), node-peer copies and the relay forward by the copy engine on the
 * CE transport's own stream (its host data path, RMACOLL_TCAP_HOST_CUDA),
 * completed before a slot's credit goes back. STAGE_GO then only says
 * that the stream reached the call (the send data is written, and so is
 * whatever the stream did before with the receive buffer), STAGE_DONE that
 * every receive byte has arrived. Peers write into the device receive
 * buffer directly, so after its GO the worker raises READY(me) at every
 * node and network peer (ctrl.h; value: the count of hmem calls), and it
 * writes into a peer's receive buffer only once that peer's READY arrived:
 * no byte lands while the peer's stream may still read the buffer.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/exec/call.h"
#include "core/exec/state.h"
#include "core/plan/topo.h"

static volatile uint64_t *stage_word(rmacoll_comm_t *comm, int w)
{
    return &comm->signals[rmacoll__ctrl_sig_stage(&comm->lay, w)];
}

/* hmem, after GO: READY(me) to every node and network peer, then waits
 * for the READY of every peer whose receive buffer this rank's plan writes
 * (copies to node peers, network puts into receive buffers). */
static rmacoll_status_t hmem_ready(rmacoll_comm_t *comm, uint64_t seq)
{
    const rmacoll_topo_t *topo = comm->topo;
    const rmacoll__plan_t *plan = &comm->plan;
    rmacoll_put_t *rp = comm->stage.ready_puts;
    int me = comm->rank, A = topo->node_of[me];
    rmacoll__tinst_t *ce = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_HOST);
    size_t k = 0, knet;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        if (j != me) {
            memset(&rp[k], 0, sizeof(rp[k]));
            rp[k].peer = j;
            rp[k].sig_index = rmacoll__ctrl_sig_ready(&comm->peer_lay[j], me);
            rp[k++].sig_value = seq;
        }
    }
    if (k > 0) {
        st = ce->ops->host.post_puts(ce->tp, rp, k); /* stores into their windows */
    }
    knet = k;
    for (int i = 0; st == RMACOLL_SUCCESS && i < comm->nnet; i++) {
        int p = comm->net_list[i];
        memset(&rp[k], 0, sizeof(rp[k]));
        rp[k].peer = p;
        rp[k].dst_rkey = &comm->peer_ctrl_rkey[p];
        rp[k].dst_addr = comm->peer_ctrl_rkey[p].addr;
        rp[k].sig_index = rmacoll__ctrl_sig_ready(&comm->peer_lay[p], me);
        rp[k++].sig_value = seq;
    }
    if (st == RMACOLL_SUCCESS && k > knet) {
        st = rmacoll__proxy_submit(&comm->proxy, rp + knet, k - knet); /* flushed by the plan */
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: cannot signal its peers that its "
                             "device receive buffer is ready: %s", me,
                             rmacoll_status_string(st));
    }
    for (size_t t = 0; st == RMACOLL_SUCCESS && t < plan->ntasks; t++) {
        const rmacoll__task_t *tk = &plan->tasks[t];
        uint32_t w;
        if (tk->op != RMACOLL__OP_PUT || tk->bytes == 0 || tk->peer == me ||
            (tk->path == RMACOLL__PATH_PROXY && tk->dst_win != RMACOLL__WIN_RECV)) {
            continue;
        }
        w = rmacoll__ctrl_sig_ready(&comm->lay, tk->peer);
        st = rmacoll__wait_word(comm, &comm->signals[w], seq, tk->peer,
                                "its device receive buffer ready (stream reached the call)");
    }
    return st;
}

/* TRACE timestamps of the worker (0 when the level is below TRACE). */
static uint64_t stage_ns(const rmacoll_comm_t *comm)
{
    if (comm->log.level < RMACOLL_LOG_TRACE) {
        return 0;
    }
    return rmacoll__now_ns();
}

/* TRACE: where a device call's data phase spent its time, from the
 * handoff (t[0]) to the worker taking the job, the stream reaching the
 * call (GO), the peers' READY (hmem), the plan and STAGE_DONE. */
static void stage_trace(rmacoll_comm_t *comm, uint64_t e, const uint64_t *t)
{
    rmacoll__stage_t *sg = &comm->stage;

    if (t[0] == 0) {
        return;
    }
    rmacoll__log(&comm->log, RMACOLL_LOG_TRACE, RMACOLL_LOG_SUBSYS_CORE,
                 "call %llu worker: woke %.1f us after the handoff, stream at the call "
                 "(GO) +%.1f us, peers READY +%.1f us, plan (data) +%.1f us, total %.1f us; "
                 "%.1f us since the last job ended", (unsigned long long)e,
                 (t[1] - t[0]) / 1e3, (t[2] - t[1]) / 1e3, (t[3] - t[2]) / 1e3,
                 (t[4] - t[3]) / 1e3, (t[4] - t[0]) / 1e3,
                 sg->prev_done_ns ? (t[0] - sg->prev_done_ns) / 1e3 : 0.0);
    sg->prev_done_ns = t[4];
}

static void *stage_main(void *arg)
{
    rmacoll_comm_t *comm = arg;
    rmacoll__stage_t *sg = &comm->stage;

    pthread_mutex_lock(&sg->lock);
    for (;;) {
        uint64_t e, t[5];
        rmacoll_status_t st;
        while (!sg->stop && sg->job == 0) {
            pthread_cond_wait(&sg->cond, &sg->lock);
        }
        if (sg->stop) {
            break;
        }
        e = sg->job;
        sg->job = 0;
        t[0] = sg->handoff_ns;
        pthread_mutex_unlock(&sg->lock);

        t[1] = stage_ns(comm);
        rmacoll__proxy_set_active(&comm->proxy, 1);
        st = rmacoll__wait_word(comm, stage_word(comm, RMACOLL__STAGE_GO), e, comm->rank,
                                sg->run_mem == RMACOLL_MEM_CUDA
                                    ? "own stream: reached the call"
                                    : "own stream: send blocks staged to host");
        t[2] = stage_ns(comm);
        if (st == RMACOLL_SUCCESS && sg->run_mem == RMACOLL_MEM_CUDA) {
            st = hmem_ready(comm, sg->run_seq);
        }
        t[3] = stage_ns(comm);
        if (st == RMACOLL_SUCCESS) {
            st = rmacoll__run_host_plan(comm, sg->run_mem, sg->run_send, sg->run_recv,
                                        sg->send_mem);
        }
        t[4] = stage_ns(comm);
        if (st == RMACOLL_SUCCESS) {
            stage_trace(comm, e, t);
        }
        if (st != RMACOLL_SUCCESS) {
            int expected = RMACOLL_SUCCESS;
            atomic_compare_exchange_strong(&sg->status, &expected, (int)st);
            /* peers still waiting stop at once; and no put of this rank may
             * still read the buffers once the stream moves on (the user's
             * device buffers on the hmem path): drain them (bounded) */
            rmacoll__abort_broadcast(comm, st);
            (void)rmacoll__proxy_flush(&comm->proxy);
            /* no network write into the receive buffer after the failure */
            (void)rmacoll__proxy_revoke(&comm->proxy, sg->recv_mem,
                                        sg->run_mem == RMACOLL_MEM_CUDA
                                            ? "device receive buffer"
                                            : "staging receive buffer");
        }
        rmacoll__proxy_set_active(&comm->proxy, 0);
        /* release the stream even on failure; the next call reports it */
        __atomic_store_n(stage_word(comm, RMACOLL__STAGE_DONE), e, __ATOMIC_RELEASE);
        atomic_store(&sg->finished, e);
        pthread_mutex_lock(&sg->lock);
    }
    pthread_mutex_unlock(&sg->lock);
    return NULL;
}

rmacoll_status_t rmacoll__staged_drain(rmacoll_comm_t *comm)
{
    rmacoll__stage_t *sg = &comm->stage;
    uint64_t e = sg->last;
    rmacoll_status_t st;
    int err;

    if (e == 0) {
        return RMACOLL_SUCCESS;
    }
    uint64_t t0 = stage_ns(comm);
    st = rmacoll__wait_word(comm, stage_word(comm, RMACOLL__STAGE_COPIED), e, comm->rank,
                            "own stream: previous call's receive blocks "
                            "copied back to the device");
    while (st == RMACOLL_SUCCESS && atomic_load(&sg->finished) < e) {
        sched_yield();
    }
    if (t0 != 0) {
        uint64_t t1 = stage_ns(comm);
        rmacoll__log(&comm->log, RMACOLL_LOG_TRACE, RMACOLL_LOG_SUBSYS_CORE,
                     "call %llu drained: %.1f us waiting for the stream's COPIED, "
                     "%.1f us after the worker ended it", (unsigned long long)e,
                     (t1 - t0) / 1e3,
                     sg->prev_done_ns && t1 > sg->prev_done_ns ? (t1 - sg->prev_done_ns) / 1e3
                                                               : 0.0);
    }
    rmacoll__call_deregister(comm, sg->send_mem, sg->send_user);
    sg->send_mem = NULL;
    rmacoll__call_deregister(comm, sg->recv_mem, sg->recv_user);
    sg->recv_mem = NULL;
    sg->send_user = sg->recv_user = 0;
    sg->last = 0;
    err = atomic_load(&sg->status);
    if (st == RMACOLL_SUCCESS && err != RMACOLL_SUCCESS) {
        comm->broken = 1;
        return (rmacoll_status_t)err; /* the worker logged the cause */
    }
    if (st != RMACOLL_SUCCESS) {
        comm->broken = 1;
    }
    return st;
}

void rmacoll__staged_fini(rmacoll_comm_t *comm)
{
    rmacoll__stage_t *sg = &comm->stage;

    if (sg->started) {
        pthread_mutex_lock(&sg->lock);
        sg->stop = 1;
        pthread_cond_signal(&sg->cond);
        pthread_mutex_unlock(&sg->lock);
        pthread_join(sg->thread, NULL);
        sg->started = 0;
    }
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);

    /* a broken communicator may still hold a call's registrations */
    rmacoll__call_deregister(comm, sg->send_mem, sg->send_user);
    rmacoll__call_deregister(comm, sg->recv_mem, sg->recv_user);
    sg->send_mem = NULL;
    sg->recv_mem = NULL;
    sg->send_user = sg->recv_user = 0;
    if (ctl != NULL) { /* pins exist only with a control instance */
        if (sg->send_pin != NULL) {
            ctl->ops->mem.mem_deregister(ctl->tp, sg->send_pin);
        }
        if (sg->recv_pin != NULL) {
            ctl->ops->mem.mem_deregister(ctl->tp, sg->recv_pin);
        }
    }
    sg->send_pin = NULL;
    sg->recv_pin = NULL;
    free(sg->send);
    free(sg->recv);
    sg->send = NULL;
    sg->recv = NULL;
}

/* Grows a pinned host staging buffer to at least `bytes`. */
static rmacoll_status_t stage_grow(rmacoll_comm_t *comm, void **buf, uint64_t *cap,
                                   rmacoll_mem_t **pin, uint64_t bytes)
{
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st;
    void *p = NULL;

    if (bytes <= *cap) {
        return RMACOLL_SUCCESS;
    }
    if (*pin != NULL) {
        ctl->ops->mem.mem_deregister(ctl->tp, *pin);
        *pin = NULL;
    }
    free(*buf);
    *buf = NULL;
    *cap = 0;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = ctl->ops->mem.mem_register(ctl->tp, p, bytes, RMACOLL_MEM_HOST, pin, NULL);
    if (st != RMACOLL_SUCCESS) {
        free(p);
        return st;
    }
    *buf = p;
    *cap = bytes;
    return RMACOLL_SUCCESS;
}

/* Pinned staging buffers carry the data; the host runner registers them. */
static rmacoll_status_t staged_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__stage_t *sg = &comm->stage;
    rmacoll_status_t st = rmacoll__stream_usable(c);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = stage_grow(comm, &sg->send, &sg->send_bytes, &sg->send_pin, c->send_extent);
    if (st == RMACOLL_SUCCESS) {
        st = stage_grow(comm, &sg->recv, &sg->recv_bytes, &sg->recv_pin, c->recv_extent);
    }
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: cannot allocate pinned staging "
                 "buffers (%llu + %llu bytes): %s", comm->rank,
                 (unsigned long long)c->send_extent, (unsigned long long)c->recv_extent,
                 rmacoll_status_string(st));
        return st;
    }
    c->hsend = sg->send;
    c->hrecv = sg->recv;
    return rmacoll__run_host.prepare(c);
}

static rmacoll_status_t staged_planned(rmacoll__call_t *c)
{
    return RMACOLL_SUCCESS;
}

/* Hands the data phase of call c to the worker: on the stream, the
 * copies in[0, nin) (staging: send blocks to host), STAGE_GO, a wait for
 * STAGE_DONE, the copies out[0, nout) (staging: receive blocks back) and
 * STAGE_COPIED; the worker runs the plan on (send, recv) of type mem. */
static rmacoll_status_t stage_handoff(rmacoll__call_t *c, rmacoll_memtype_t mem,
                                      const void *send, void *recv, const rmacoll_put_t *in,
                                      size_t nin, const rmacoll_put_t *out, size_t nout)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__stage_t *sg = &comm->stage;
    int me = comm->rank;
    void *stream = c->stream;
    uint32_t w;
    uint64_t e = comm->epoch;
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st;

    /* the worker owns the registrations until rmacoll__staged_drain */
    sg->send_mem = c->send_mem;
    sg->recv_mem = c->recv_mem;
    sg->send_user = c->send_user;
    sg->recv_user = c->recv_user;
    c->send_mem = NULL;
    c->recv_mem = NULL;
    c->send_user = c->recv_user = 0;
    st = nin ? ctl->ops->stream.post_puts_stream(ctl->tp, in, nin, stream) : RMACOLL_SUCCESS;
    if (st == RMACOLL_SUCCESS) {
        st = ctl->ops->stream.signal_stream(ctl->tp, me,
                                         rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_GO),
                                         e, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        w = rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_DONE);
        st = ctl->ops->stream.wait_stream(ctl->tp, &w, &e, 1, stream);
    }
    if (st == RMACOLL_SUCCESS && nout) {
        st = ctl->ops->stream.post_puts_stream(ctl->tp, out, nout, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        st = ctl->ops->stream.signal_stream(
            ctl->tp, me, rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_COPIED), e,
            stream);
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: enqueueing the %s call on the "
                             "stream failed: %s", me, c->runner->name,
                             rmacoll_status_string(st));
    }
    if (!sg->started) {
        if (pthread_create(&sg->thread, NULL, stage_main, comm) != 0) {
            return rmacoll__fail(&comm->fail, RMACOLL_ERR_NO_MEMORY, "rank %d: cannot start "
                                 "the staging thread", me);
        }
        sg->started = 1;
    }
    sg->last = e;
    pthread_mutex_lock(&sg->lock);
    sg->run_mem = mem;
    sg->run_send = send;
    sg->run_recv = recv;
    sg->run_seq = mem == RMACOLL_MEM_CUDA ? ++sg->hmem_seq : 0;
    sg->handoff_ns = stage_ns(comm);
    sg->job = e;
    pthread_cond_signal(&sg->cond);
    pthread_mutex_unlock(&sg->lock);
    return RMACOLL_SUCCESS;
}

/* Copies of the non-empty blocks between a device buffer and its staging
 * buffer (to_host: dev -> host), into puts; returns the count and adds
 * their bytes to *bytes. */
static size_t stage_copies(rmacoll__call_t *c, const int64_t *counts, const int64_t *displs,
                           const char *src, char *dst, rmacoll_put_t *puts, uint64_t *bytes)
{
    size_t k = 0;

    for (int j = 0; j < c->comm->nranks; j++) {
        if (counts[j] != 0) {
            uint64_t off = (uint64_t)displs[j] * c->esize;
            memset(&puts[k], 0, sizeof(puts[k]));
            puts[k].peer = c->comm->rank;
            puts[k].src = src + off;
            puts[k].dst_addr = (uint64_t)(uintptr_t)(dst + off);
            puts[k].bytes = (uint64_t)counts[j] * c->esize;
            puts[k].sig_index = RMACOLL_NO_SIGNAL;
            *bytes += puts[k++].bytes;
        }
    }
    return k;
}

/* Enqueues the staging copies and hands the data phase to the worker. */
static rmacoll_status_t staged_run(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__stage_t *sg = &comm->stage;
    size_t n = (size_t)comm->nranks, nin, nout;
    uint64_t bytes = 0;
    rmacoll_status_t st = rmacoll__grow_puts(comm, 2 * n);

    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: no memory for the staging copies",
                             comm->rank);
    }
    /* send blocks: device -> host; receive blocks: host -> device */
    nin = stage_copies(c, c->sendcounts, c->sdispls, c->sendbuf, sg->send, comm->puts,
                       &bytes);
    nout = stage_copies(c, c->recvcounts, c->rdispls, sg->recv, c->recvbuf, comm->puts + n,
                        &bytes);
    st = stage_handoff(c, RMACOLL_MEM_HOST, sg->send, sg->recv, comm->puts, nin,
                       comm->puts + n, nout);
    if (st == RMACOLL_SUCCESS) {
        atomic_fetch_add(&comm->stats.staged_bytes, bytes);
        atomic_fetch_add(&comm->stats.device_calls_staged, 1);
    }
    return st;
}

static void staged_release(rmacoll__call_t *c)
{
    rmacoll__run_host.release(c); /* what the worker did not take over */
}

const rmacoll__runner_t rmacoll__run_staged = {
    .name = "staged",
    .mem = RMACOLL_MEM_CUDA,
    .prepare = staged_prepare,
    .planned = staged_planned,
    .run = staged_run,
    .release = staged_release,
};

/* ---- hmem: the device buffers themselves, registered with the network ---- */

/* Registers the device buffers with the network transport (or borrows the
 * user registrations they lie in: no staging either way) and exports the
 * receive buffer to node peers. */
static rmacoll_status_t hmem_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st = rmacoll__stream_usable(c);

    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__stream_export_recv(c);
    }
    if (st != RMACOLL_SUCCESS) {
        return st; /* c->msg says why */
    }
    st = rmacoll__call_register(comm, c->sendbuf, c->send_extent, RMACOLL_MEM_CUDA,
                                &c->send_mem, NULL, &c->send_user);
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__call_register(comm, c->recvbuf, c->recv_extent, RMACOLL_MEM_CUDA,
                                    &c->recv_mem, &c->recv_rkey, &c->recv_user);
    }
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: cannot register the device send/receive "
                 "buffers (%llu/%llu bytes) with %s: %s", comm->rank,
                 (unsigned long long)c->send_extent, (unsigned long long)c->recv_extent,
                 comm->proxy.ops->name, rmacoll_status_string(st));
        return st;
    }
    /* a range inside a user registration counted once, at its register */
    atomic_fetch_add(&comm->stats.device_registered_bytes,
                     (c->send_user ? 0 : c->send_extent) + (c->recv_user ? 0 : c->recv_extent));
    return RMACOLL_SUCCESS;
}

/* Maps the device receive buffers of the node peers this rank's plan
 * copies into (its own blocks and the relay forward). */
static rmacoll_status_t hmem_planned(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll__plan_t *plan = &comm->plan;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (int l = 0; l < topo->node_size[A] && st == RMACOLL_SUCCESS; l++) {
        int j = rmacoll__topo_rank(topo, A, l), writes = 0;

        for (size_t k = 0; k < plan->ntasks && !writes && j != comm->rank; k++) {
            const rmacoll__task_t *t = &plan->tasks[k];
            writes = t->op == RMACOLL__OP_PUT && t->path == RMACOLL__PATH_CE &&
                     t->peer == j && t->bytes > 0;
        }
        if (writes) {
            st = rmacoll__stream_map_peer(c, j);
        }
    }
    return st;
}

static rmacoll_status_t hmem_run(rmacoll__call_t *c)
{
    rmacoll_status_t st = stage_handoff(c, RMACOLL_MEM_CUDA, c->sendbuf, c->recvbuf, NULL, 0,
                                        NULL, 0);

    if (st == RMACOLL_SUCCESS) {
        atomic_fetch_add(&c->comm->stats.device_calls_hmem, 1);
    }
    return st;
}

const rmacoll__runner_t rmacoll__run_hmem = {
    .name = "hmem",
    .mem = RMACOLL_MEM_CUDA,
    .prepare = hmem_prepare,
    .planned = hmem_planned,
    .run = hmem_run,
    .release = staged_release,
};
