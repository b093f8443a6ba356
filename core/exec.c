/*
 * exec.c - one AlltoAllV call: validate, metadata round, agreement on the
 * outcome, then the plan's batches (CE queues on the calling thread,
 * proxy queues through the proxy thread), then completion.
 *
 * Metadata round (DESIGN.md, step 2): every rank publishes its receive
 * address and recvcounts/rdispls in its control window for node peers,
 * and sends each network peer a record with its counts for the peer's
 * node, its recvcount/rdispl for the peer and the key of its receive
 * buffer. Agreement: the status after planning travels node -> rail ->
 * node, so that every rank learns the lowest-ranked error; on any error
 * every rank returns it and no data is written. Calls never overlap in
 * their data phases (a rank's agreement needs all ranks in the same call),
 * which is why two parities of metadata suffice.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/topo.h"
#include "core/validate.h"

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Per-call stage timing, logged at TRACE (cheap when off). */
static uint64_t prof_ns(const rmacoll_comm_t *comm)
{
    struct timespec ts;

    if (comm->log.level < RMACOLL_LOG_TRACE) {
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t load_acquire(const volatile uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

rmacoll_status_t rmacoll__wait_word(rmacoll_comm_t *comm,
                                    const volatile uint64_t *word,
                                    uint64_t value, int peer, const char *what)
{
    uint64_t start = 0;
    unsigned spins = 0;

    while (load_acquire(word) < value) {
        int pst = comm->proxy_started ? atomic_load(&comm->proxy_status)
                                      : RMACOLL_SUCCESS;
        if (pst != RMACOLL_SUCCESS) {
            int ep = atomic_load(&comm->proxy_err_peer);
            return rmacoll__comm_fail(comm, (rmacoll_status_t)pst,
                                      "rank %d: network transport failed (peer %d) "
                                      "while waiting for rank %d (%s): %s",
                                      comm->rank, ep, peer, what,
                                      rmacoll_status_string(pst));
        }
        if (comm->proxy_started) {
            rmacoll__proxy_poll(comm);
        }
        if (++spins < 256) {
            continue;
        }
        if (start == 0) {
            start = now_ms();
        } else if (now_ms() - start > comm->cfg.timeout_ms) {
            return rmacoll__comm_fail(comm, RMACOLL_ERR_TIMEOUT,
                                      "rank %d: timed out after %llu ms waiting for "
                                      "rank %d (%s: signal at %llu, expected %llu)",
                                      comm->rank,
                                      (unsigned long long)comm->cfg.timeout_ms, peer,
                                      what, (unsigned long long)load_acquire(word),
                                      (unsigned long long)value);
        }
        if (spins > 4096) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll__local_rec_t *local_rec(rmacoll_comm_t *comm, int j, int par)
{
    return (rmacoll__local_rec_t *)((char *)comm->peer_ctrl[j].addr +
                                    comm->peer_lay[j].off_local +
                                    (size_t)par * comm->peer_lay[j].local_rec_bytes);
}

static int64_t *local_counts(rmacoll__local_rec_t *lr)
{
    return (int64_t *)(lr + 1);
}

static rmacoll__net_rec_t *inbox(rmacoll_comm_t *comm, int k, int par)
{
    return (rmacoll__net_rec_t *)((char *)comm->ctrl.addr + comm->lay.off_inbox +
                                  ((size_t)par * comm->lay.nnet + k) *
                                      comm->lay.net_rec_bytes);
}

static rmacoll__net_rec_t *outbox(rmacoll_comm_t *comm, int k, int par)
{
    return (rmacoll__net_rec_t *)((char *)comm->ctrl.addr + comm->lay.off_outbox +
                                  ((size_t)par * comm->lay.nnet + k) *
                                      comm->lay.net_rec_bytes);
}

static rmacoll__status_rec_t *inbox2(rmacoll_comm_t *comm, int k, int par)
{
    return (rmacoll__status_rec_t *)((char *)comm->ctrl.addr + comm->lay.off_inbox2 +
                                     ((size_t)par * comm->lay.nnet + k) *
                                         comm->lay.status_rec_bytes);
}

static rmacoll__status_rec_t *outbox2(rmacoll_comm_t *comm, int k, int par)
{
    return (rmacoll__status_rec_t *)((char *)comm->ctrl.addr + comm->lay.off_outbox2 +
                                     ((size_t)par * comm->lay.nnet + k) *
                                         comm->lay.status_rec_bytes);
}

/* Keeps the error of the lowest rank. */
static void status_merge(rmacoll__status_rec_t *acc, const rmacoll__status_rec_t *in)
{
    if (in->code == RMACOLL_SUCCESS) {
        return;
    }
    if (acc->code == RMACOLL_SUCCESS || in->rank < acc->rank ||
        (in->rank == acc->rank && in->code < acc->code)) {
        *acc = *in;
        acc->msg[sizeof(acc->msg) - 1] = '\0';
    }
}

static void status_set(rmacoll__status_rec_t *rec, rmacoll_status_t code, int rank,
                       const char *msg)
{
    size_t n = strlen(msg);

    rec->code = code;
    rec->rank = rank;
    if (n >= sizeof(rec->msg)) {
        n = sizeof(rec->msg) - 1;
    }
    memcpy(rec->msg, msg, n);
    rec->msg[n] = '\0';
}

/* Sends one record per network peer (record k from outbox area `base`),
 * raising META word `sig_base + slot` there. */
static rmacoll_status_t send_records(rmacoll_comm_t *comm, int par, int second)
{
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        const rmacoll__ctrl_layout_t *pl = &comm->peer_lay[p];
        int slot = comm->net_slot_at[k];
        /* the two record kinds use separate put arrays: the proxy may not
         * have posted the first job when the second is built */
        rmacoll_put_t *put = &comm->meta_puts[(size_t)second * comm->nranks + k];
        size_t dst_off;

        memset(put, 0, sizeof(*put));
        put->peer = p;
        put->src_mem = comm->ctrl_mem;
        if (!second) {
            put->src = outbox(comm, k, par);
            put->bytes = comm->lay.net_rec_bytes;
            dst_off = pl->off_inbox + ((size_t)par * pl->nnet + slot) * pl->net_rec_bytes;
            put->sig_index = pl->nsig_plan + (uint32_t)slot;
        } else {
            put->src = outbox2(comm, k, par);
            put->bytes = comm->lay.status_rec_bytes;
            dst_off = pl->off_inbox2 +
                      ((size_t)par * pl->nnet + slot) * pl->status_rec_bytes;
            put->sig_index = pl->nsig_plan + (uint32_t)pl->nnet + (uint32_t)slot;
        }
        put->dst_addr = comm->peer_ctrl_rkey[p].addr + dst_off;
        put->dst_rkey = &comm->peer_ctrl_rkey[p];
        put->sig_value = comm->epoch; /* epoch already counts this call */
    }
    rmacoll_status_t st = rmacoll__proxy_submit(
        comm, &comm->meta_puts[(size_t)second * comm->nranks], (size_t)comm->nnet);

    rmacoll__proxy_poll(comm);
    return st;
}

static rmacoll_status_t wait_records(rmacoll_comm_t *comm, int second)
{
    for (int k = 0; k < comm->nnet; k++) {
        uint32_t idx = comm->lay.nsig_plan + (second ? (uint32_t)comm->nnet : 0) + k;
        rmacoll_status_t st = rmacoll__wait_word(comm, &comm->signals[idx], comm->epoch,
                                                 comm->net_list[k],
                                                 second ? "agreement record"
                                                        : "metadata record");
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Waits for every node peer's local record to reach stage `which`. */
static rmacoll_status_t wait_node(rmacoll_comm_t *comm, int par, int which)
{
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__local_rec_t *lr = local_rec(comm, j, par);
        const volatile uint64_t *w = (const volatile uint64_t *)(which == 0 ? &lr->epoch_a
                                                                 : which == 1 ? &lr->epoch_b
                                                                              : &lr->epoch_c);
        rmacoll_status_t st;
        if (j == comm->rank) {
            continue;
        }
        st = rmacoll__wait_word(comm, w, comm->epoch, j, "node metadata");
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

static void node_merge(rmacoll_comm_t *comm, int par, int which,
                       rmacoll__status_rec_t *acc)
{
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        rmacoll__local_rec_t *lr = local_rec(comm, rmacoll__topo_rank(topo, A, l), par);
        status_merge(acc, which == 0 ? &lr->st_a : which == 1 ? &lr->st_b : &lr->st_c);
    }
}

static void publish(rmacoll__local_rec_t *lr, int which, uint64_t epoch)
{
    _Atomic uint64_t *w = which == 0 ? &lr->epoch_a : which == 1 ? &lr->epoch_b
                                                                 : &lr->epoch_c;
    atomic_store_explicit(w, epoch, memory_order_release);
}

/* Fills the planner's peer inputs from node records and network records. */
static void gather_inputs(rmacoll_comm_t *comm, int par)
{
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank;
    int A = topo->node_of[me];
    int ls = topo->node_size[A];

    for (int l = 0; l < ls; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__local_rec_t *lr = local_rec(comm, j, par);
        comm->peer_rcount[j] = local_counts(lr)[me];
        comm->peer_rdispl[j] = local_counts(lr)[comm->nranks + me];
        comm->peer_recv_addr[j] = lr->recv_addr;
    }

    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        rmacoll__net_rec_t *rec = inbox(comm, k, par);
        comm->peer_rcount[p] = rec->rcount;
        comm->peer_rdispl[p] = rec->rdispl;
        comm->peer_recv_rkey[p] = rec->recv_rkey;
    }
    const rmacoll__plan_topo_t *pt = rmacoll__plan_topo(&comm->plan, topo, &comm->pcfg, me);
    for (int c = 0; c < comm->nin; c++) {
        int i = pt != NULL ? pt->chan_src[c] : rmacoll__plan_chan_src(topo, me, c);
        rmacoll__net_rec_t *rec = inbox(comm, comm->net_index[i], par);
        const int64_t *sc = (const int64_t *)(rec + 1);
        for (int l = 0; l < ls; l++) {
            rmacoll__local_rec_t *lr = local_rec(comm, rmacoll__topo_rank(topo, A, l), par);
            comm->chan_sendcount[(size_t)c * ls + l] = sc[l];
            comm->chan_rcount[(size_t)c * ls + l] = local_counts(lr)[i];
            comm->chan_rdispl[(size_t)c * ls + l] = local_counts(lr)[comm->nranks + i];
        }
    }
}

static rmacoll_status_t grow_puts(rmacoll_comm_t *comm, size_t n)
{
    if (n > comm->puts_cap) {
        rmacoll_put_t *p = realloc(comm->puts, n * sizeof(*p));
        if (p == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        comm->puts = p;
        comm->puts_cap = n;
    }
    return RMACOLL_SUCCESS;
}

/* Task -> transport put. */
static void translate(rmacoll_comm_t *comm, const rmacoll__task_t *t,
                      const void *sendbuf, void *recvbuf, rmacoll_mem_t *send_mem,
                      rmacoll_put_t *put)
{
    const char *src_base = t->src_win == RMACOLL__WIN_RELAY ? comm->relay_buf : sendbuf;

    memset(put, 0, sizeof(*put));
    put->peer = t->peer;
    put->src = t->bytes ? src_base + t->src_off : NULL;
    put->bytes = t->bytes;
    put->sig_index = (t->flags & RMACOLL__TASK_SIGNAL) ? t->sig : RMACOLL_NO_SIGNAL;
    put->sig_value = t->sig_value;
    if (t->path == RMACOLL__PATH_CE) {
        uint64_t base = t->peer == comm->rank ? (uint64_t)(uintptr_t)recvbuf
                                              : comm->peer_recv_addr[t->peer];
        put->dst_addr = base + t->dst_off;
        return;
    }
    put->src_mem = t->src_win == RMACOLL__WIN_RELAY ? comm->relay_mem : send_mem;
    if (t->dst_win == RMACOLL__WIN_RECV) {
        put->dst_rkey = &comm->peer_recv_rkey[t->peer];
    } else if (t->dst_win == RMACOLL__WIN_RELAY) {
        put->dst_rkey = &comm->peer_relay_rkey[t->peer];
    } else {
        /* signal-only credit: 8 bytes into the spare word of the peer's
         * control-window header (some providers never complete zero-length
         * writes carrying remote CQ data) */
        put->dst_rkey = &comm->peer_ctrl_rkey[t->peer];
        put->src = (const char *)comm->ctrl.addr + 8;
        put->src_mem = comm->ctrl_mem;
        put->bytes = 8;
        put->dst_addr = put->dst_rkey->addr + 8;
        return;
    }
    put->dst_addr = put->dst_rkey->addr + t->dst_off;
}

static rmacoll_status_t wait_task(rmacoll_comm_t *comm, const rmacoll__task_t *t)
{
    char what[96];
    const char *kind = (t->flags & RMACOLL__TASK_CREDIT)    ? "relay credit"
                       : (t->flags & RMACOLL__TASK_ARRIVAL) ? "relay chunk"
                                                            : "data";

    if (load_acquire(&comm->signals[t->sig]) >= t->sig_value) {
        return RMACOLL_SUCCESS;
    }
    snprintf(what, sizeof(what), "%s from rank %d, signal %u", kind, t->origin, t->sig);
    return rmacoll__wait_word(comm, &comm->signals[t->sig], t->sig_value, t->peer, what);
}

static rmacoll_status_t run_plan(rmacoll_comm_t *comm, const void *sendbuf,
                                 void *recvbuf, rmacoll_mem_t *send_mem)
{
    const rmacoll__plan_t *plan = &comm->plan;
    rmacoll_status_t st = grow_puts(comm, plan->ntasks);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        if (plan->tasks[k].op == RMACOLL__OP_PUT) {
            translate(comm, &plan->tasks[k], sendbuf, recvbuf, send_mem, &comm->puts[k]);
        }
    }
    for (size_t b = 0; b < plan->nbatches && st == RMACOLL_SUCCESS; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];
        uint32_t n;

        /* proxyPut: handed to the proxy thread */
        if (bt->count[RMACOLL__Q_PROXY_PUT]) {
            st = rmacoll__proxy_submit(comm, &comm->puts[bt->first[RMACOLL__Q_PROXY_PUT]],
                                       bt->count[RMACOLL__Q_PROXY_PUT]);
            rmacoll__proxy_poll(comm);
        }
        /* cePut: on this thread */
        n = bt->count[RMACOLL__Q_CE_PUT];
        if (st == RMACOLL_SUCCESS && n) {
            const rmacoll__task_t *t = &plan->tasks[bt->first[RMACOLL__Q_CE_PUT]];
            if (comm->ce != NULL) {
                st = comm->ce_ops->post_puts(comm->ce, &comm->puts[bt->first[RMACOLL__Q_CE_PUT]],
                                             n);
                if (st != RMACOLL_SUCCESS) {
                    int peer = comm->ce_ops->error_peer ? comm->ce_ops->error_peer(comm->ce)
                                                        : -1;
                    st = rmacoll__comm_fail(comm, st, "rank %d: copy to rank %d failed: %s",
                                            comm->rank, peer, rmacoll_status_string(st));
                }
            } else {
                for (uint32_t k = 0; k < n; k++) { /* only self copies without CE */
                    memcpy((char *)recvbuf + t[k].dst_off,
                           (const char *)sendbuf + t[k].src_off, t[k].bytes);
                }
            }
        }
        /* proxyWait and ceWait: signals land in the control window */
        for (int q = RMACOLL__Q_PROXY_WAIT; q <= RMACOLL__Q_CE_WAIT; q++) {
            for (uint32_t k = 0; st == RMACOLL_SUCCESS && k < bt->count[q]; k++) {
                st = wait_task(comm, &plan->tasks[bt->first[q] + k]);
            }
        }
    }
    if (st == RMACOLL_SUCCESS && comm->proxy_started) {
        st = rmacoll__proxy_flush(comm);
    }
    return st;
}

/* Maps node peers' device receive buffers (those this rank writes). */
static rmacoll_status_t import_peers(rmacoll_comm_t *comm, int par,
                                     const int64_t *sendcounts, char *msg, size_t len)
{
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll_status_t st;
        if (j == comm->rank || sendcounts[j] == 0) {
            continue;
        }
        st = comm->ce_ops->mem_import(comm->ce, j, local_rec(comm, j, par)->recv_blob,
                                      &comm->peer_recv_addr[j]);
        if (st != RMACOLL_SUCCESS) {
            snprintf(msg, len, "rank %d: cannot map the device receive buffer of rank %d: %s",
                     comm->rank, j, rmacoll_status_string(st));
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Index of READY(writer) in rank p's signal words. */
static uint32_t ready_index(const rmacoll_comm_t *comm, int p, int writer)
{
    const rmacoll__ctrl_layout_t *pl = &comm->peer_lay[p];

    return pl->nsig_plan + 2 * (uint32_t)pl->nnet + (uint32_t)writer;
}

/* The transport for one CE queue of device puts: nvlink_kernel for small
 * queues (auto) or always (nvlink_kernel), else the copy engine. */
static int use_nvl(const rmacoll_comm_t *comm, const rmacoll__task_t *t, uint32_t n)
{
    uint64_t largest = 0;

    if (comm->nvl == NULL) {
        return 0;
    }
    if (strcmp(comm->cfg.intra_node, "nvlink_kernel") == 0) {
        return 1;
    }
    for (uint32_t k = 0; k < n; k++) {
        largest = t[k].bytes > largest ? t[k].bytes : largest;
    }
    return largest <= comm->cfg.nvlink_kernel_threshold;
}

/* Device memory: everything is enqueued on the user's stream; no host
 * synchronisation. Single node: only CE queues exist. */
static rmacoll_status_t run_plan_stream(rmacoll_comm_t *comm, const void *sendbuf,
                                        void *recvbuf, const int64_t *sendcounts,
                                        const int64_t *recvcounts, void *stream)
{
    const rmacoll__plan_t *plan = &comm->plan;
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank, A = topo->node_of[me];
    rmacoll_status_t st = grow_puts(comm, plan->ntasks);
    size_t nw = 0;

    if (st == RMACOLL_SUCCESS && plan->ntasks > comm->wait_cap) {
        uint32_t *wi = realloc(comm->wait_idx, plan->ntasks * sizeof(*wi));
        uint64_t *wv = wi ? realloc(comm->wait_val, plan->ntasks * sizeof(*wv)) : NULL;
        if (wi) {
            comm->wait_idx = wi;
        }
        if (wv == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        comm->wait_val = wv;
        comm->wait_cap = plan->ntasks;
    }
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        if (plan->tasks[k].op == RMACOLL__OP_PUT) {
            translate(comm, &plan->tasks[k], sendbuf, recvbuf, NULL, &comm->puts[k]);
        }
    }
    /* READY: my stream reached this call; writers may fill my buffer. Then
     * wait until every node peer I write reached it too. */
    for (int l = 0; st == RMACOLL_SUCCESS && l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (p != me && recvcounts[p] != 0) {
            st = comm->ce_ops->signal_stream(comm->ce, p, ready_index(comm, p, me),
                                             comm->epoch, stream);
        }
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (p != me && sendcounts[p] != 0) {
            comm->wait_idx[nw] = ready_index(comm, me, p);
            comm->wait_val[nw++] = comm->epoch;
        }
    }
    if (st == RMACOLL_SUCCESS && nw) {
        st = comm->ce_ops->wait_stream(comm->ce, comm->wait_idx, comm->wait_val, nw, stream);
    }
    for (size_t b = 0; b < plan->nbatches && st == RMACOLL_SUCCESS; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];
        uint32_t n = bt->count[RMACOLL__Q_CE_PUT];
        uint32_t f = bt->first[RMACOLL__Q_CE_PUT];

        if (bt->count[RMACOLL__Q_PROXY_PUT] || bt->count[RMACOLL__Q_PROXY_WAIT]) {
            return RMACOLL_ERR_INTERNAL; /* excluded before the call */
        }
        if (n) {
            if (use_nvl(comm, &plan->tasks[f], n)) {
                st = comm->nvl_ops->post_puts_stream(comm->nvl, &comm->puts[f], n, stream);
            } else {
                st = comm->ce_ops->post_puts_stream(comm->ce, &comm->puts[f], n, stream);
            }
        }
        nw = 0;
        for (uint32_t k = 0; k < bt->count[RMACOLL__Q_CE_WAIT]; k++) {
            const rmacoll__task_t *t = &plan->tasks[bt->first[RMACOLL__Q_CE_WAIT] + k];
            comm->wait_idx[nw] = t->sig;
            comm->wait_val[nw++] = t->sig_value;
        }
        if (st == RMACOLL_SUCCESS && nw) {
            st = comm->ce_ops->wait_stream(comm->ce, comm->wait_idx, comm->wait_val, nw,
                                           stream);
        }
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__comm_fail(comm, st, "rank %d: enqueueing the call on the stream "
                                  "failed: %s", me, rmacoll_status_string(st));
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t net_register(rmacoll_comm_t *comm, const void *buf,
                                     uint64_t bytes, rmacoll_mem_t **mem,
                                     rmacoll_rkey_t *rkey)
{
    rmacoll_status_t st;

    if (comm->net == NULL || bytes == 0 || buf == NULL) {
        return RMACOLL_SUCCESS;
    }
    pthread_mutex_lock(&comm->net_lock);
    st = comm->net_ops->mem_register(comm->net, (void *)buf, bytes, RMACOLL_MEM_HOST,
                                     mem, rkey);
    pthread_mutex_unlock(&comm->net_lock);
    return st;
}

static void net_deregister(rmacoll_comm_t *comm, rmacoll_mem_t *mem)
{
    if (mem != NULL) {
        pthread_mutex_lock(&comm->net_lock);
        comm->net_ops->mem_deregister(comm->net, mem);
        pthread_mutex_unlock(&comm->net_lock);
    }
}

/* ---- device memory across nodes: host staging ----
 * The host runs the metadata round and agreement in the call, as always;
 * the stream then copies the send blocks to a pinned host buffer and
 * raises STAGE_GO; a worker thread runs the host plan on the staging
 * buffers (CE by cross-memory attach, network by the proxy) and raises
 * STAGE_DONE; the stream waits for it, copies the receive blocks back and
 * raises STAGE_COPIED. The call returns without host synchronisation; the
 * next call on the communicator waits for STAGE_COPIED of this one (one
 * staged call in flight, so staging buffers are never overwritten early). */

static uint32_t stage_word(const rmacoll_comm_t *comm, int k)
{
    return comm->lay.nsig_plan + 2 * (uint32_t)comm->nnet + (uint32_t)comm->nranks +
           (uint32_t)k;
}

enum { STAGE_GO = 0, STAGE_DONE = 1, STAGE_COPIED = 2 };

static void *stage_main(void *arg)
{
    rmacoll_comm_t *comm = arg;

    pthread_mutex_lock(&comm->stage_lock);
    for (;;) {
        uint64_t e;
        rmacoll_status_t st;
        while (!comm->stage_stop && comm->stage_job == 0) {
            pthread_cond_wait(&comm->stage_cond, &comm->stage_lock);
        }
        if (comm->stage_stop) {
            break;
        }
        e = comm->stage_job;
        comm->stage_job = 0;
        pthread_mutex_unlock(&comm->stage_lock);

        atomic_store(&comm->proxy_active, 1);
        st = rmacoll__wait_word(comm, &comm->signals[stage_word(comm, STAGE_GO)], e,
                                comm->rank, "own stream: send blocks staged to host");
        if (st == RMACOLL_SUCCESS) {
            st = run_plan(comm, comm->stage_send, comm->stage_recv, comm->stage_send_mem);
        }
        atomic_store(&comm->proxy_active, 0);
        if (st != RMACOLL_SUCCESS) {
            int expected = RMACOLL_SUCCESS;
            atomic_compare_exchange_strong(&comm->stage_status, &expected, (int)st);
        }
        /* release the stream even on failure; the next call reports it */
        __atomic_store_n(&comm->signals[stage_word(comm, STAGE_DONE)], e, __ATOMIC_RELEASE);
        atomic_store(&comm->stage_finished, e);
        pthread_mutex_lock(&comm->stage_lock);
    }
    pthread_mutex_unlock(&comm->stage_lock);
    return NULL;
}

rmacoll_status_t rmacoll__stage_wait(rmacoll_comm_t *comm)
{
    uint64_t e = comm->stage_last;
    rmacoll_status_t st;
    int err;

    if (e == 0) {
        return RMACOLL_SUCCESS;
    }
    st = rmacoll__wait_word(comm, &comm->signals[stage_word(comm, STAGE_COPIED)], e,
                            comm->rank, "own stream: previous call's receive blocks "
                            "copied back to the device");
    while (st == RMACOLL_SUCCESS && atomic_load(&comm->stage_finished) < e) {
        sched_yield();
    }
    net_deregister(comm, comm->stage_send_mem);
    comm->stage_send_mem = NULL;
    net_deregister(comm, comm->stage_recv_mem);
    comm->stage_recv_mem = NULL;
    comm->stage_last = 0;
    err = atomic_load(&comm->stage_status);
    if (st == RMACOLL_SUCCESS && err != RMACOLL_SUCCESS) {
        comm->broken = 1;
        return (rmacoll_status_t)err; /* the worker logged the cause */
    }
    if (st != RMACOLL_SUCCESS) {
        comm->broken = 1;
    }
    return st;
}

void rmacoll__stage_stop(rmacoll_comm_t *comm)
{
    if (!comm->stage_started) {
        return;
    }
    pthread_mutex_lock(&comm->stage_lock);
    comm->stage_stop = 1;
    pthread_cond_signal(&comm->stage_cond);
    pthread_mutex_unlock(&comm->stage_lock);
    pthread_join(comm->stage_thread, NULL);
    comm->stage_started = 0;
}

/* Grows a pinned host staging buffer to at least `bytes`. */
static rmacoll_status_t stage_grow(rmacoll_comm_t *comm, void **buf, uint64_t *cap,
                                   rmacoll_mem_t **pin, uint64_t bytes)
{
    rmacoll_status_t st;
    void *p = NULL;

    if (bytes <= *cap) {
        return RMACOLL_SUCCESS;
    }
    if (*pin != NULL) {
        comm->ce_ops->mem_deregister(comm->ce, *pin);
        *pin = NULL;
    }
    free(*buf);
    *buf = NULL;
    *cap = 0;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = comm->ce_ops->mem_register(comm->ce, p, bytes, RMACOLL_MEM_HOST, pin, NULL);
    if (st != RMACOLL_SUCCESS) {
        free(p);
        return st;
    }
    *buf = p;
    *cap = bytes;
    return RMACOLL_SUCCESS;
}

/* Enqueues the staging copies and hands the data phase to the worker. */
static rmacoll_status_t stage_enqueue(rmacoll_comm_t *comm, const void *sendbuf,
                                      const int64_t *sendcounts, const int64_t *sdispls,
                                      void *recvbuf, const int64_t *recvcounts,
                                      const int64_t *rdispls, size_t es, void *stream)
{
    int n = comm->nranks, me = comm->rank;
    rmacoll_put_t *puts;
    size_t k = 0;
    uint32_t w;
    uint64_t e = comm->epoch;
    rmacoll_status_t st = grow_puts(comm, (size_t)n);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    puts = comm->puts;
    for (int j = 0; j < n; j++) { /* send blocks: device -> host */
        if (sendcounts[j] != 0) {
            uint64_t off = (uint64_t)sdispls[j] * es;
            memset(&puts[k], 0, sizeof(puts[k]));
            puts[k].peer = me;
            puts[k].src = (const char *)sendbuf + off;
            puts[k].dst_addr = (uint64_t)(uintptr_t)comm->stage_send + off;
            puts[k].bytes = (uint64_t)sendcounts[j] * es;
            puts[k++].sig_index = RMACOLL_NO_SIGNAL;
        }
    }
    st = k ? comm->ce_ops->post_puts_stream(comm->ce, puts, k, stream) : RMACOLL_SUCCESS;
    if (st == RMACOLL_SUCCESS) {
        st = comm->ce_ops->signal_stream(comm->ce, me, stage_word(comm, STAGE_GO), e, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        w = stage_word(comm, STAGE_DONE);
        st = comm->ce_ops->wait_stream(comm->ce, &w, &e, 1, stream);
    }
    k = 0;
    for (int i = 0; st == RMACOLL_SUCCESS && i < n; i++) { /* receive blocks back */
        if (recvcounts[i] != 0) {
            uint64_t off = (uint64_t)rdispls[i] * es;
            memset(&puts[k], 0, sizeof(puts[k]));
            puts[k].peer = me;
            puts[k].src = (const char *)comm->stage_recv + off;
            puts[k].dst_addr = (uint64_t)(uintptr_t)recvbuf + off;
            puts[k].bytes = (uint64_t)recvcounts[i] * es;
            puts[k++].sig_index = RMACOLL_NO_SIGNAL;
        }
    }
    if (st == RMACOLL_SUCCESS && k) {
        st = comm->ce_ops->post_puts_stream(comm->ce, puts, k, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        st = comm->ce_ops->signal_stream(comm->ce, me, stage_word(comm, STAGE_COPIED), e,
                                         stream);
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__comm_fail(comm, st, "rank %d: enqueueing the staging copies on the "
                                  "stream failed: %s", me, rmacoll_status_string(st));
    }
    if (!comm->stage_started) {
        if (pthread_create(&comm->stage_thread, NULL, stage_main, comm) != 0) {
            return rmacoll__comm_fail(comm, RMACOLL_ERR_NO_MEMORY, "rank %d: cannot start "
                                      "the staging thread", me);
        }
        comm->stage_started = 1;
    }
    comm->stage_last = e;
    pthread_mutex_lock(&comm->stage_lock);
    comm->stage_job = e;
    pthread_cond_signal(&comm->stage_cond);
    pthread_mutex_unlock(&comm->stage_lock);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_alltoallv(const void *sendbuf, const int64_t *sendcounts,
                                   const int64_t *sdispls, void *recvbuf,
                                   const int64_t *recvcounts, const int64_t *rdispls,
                                   rmacoll_datatype_t dtype, rmacoll_comm_t *comm,
                                   void *stream)
{
    const rmacoll_topo_t *topo;
    int me, par, A, ls;
    rmacoll__status_rec_t local, acc;
    rmacoll__local_rec_t *lr;
    rmacoll_mem_t *send_mem = NULL, *recv_mem = NULL;
    rmacoll_rkey_t recv_rkey;
    uint64_t send_extent = 0, recv_extent = 0;
    char msg[512];
    rmacoll_status_t st;
    int staged;
    uint64_t prof[5] = {0, 0, 0, 0, 0};
    const void *hsend;   /* the buffers the host machinery works on: the  */
    void *hrecv;         /* user's, or the staging buffers               */

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (comm->stage_last != 0) {
        st = rmacoll__stage_wait(comm);
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__comm_fail(comm, st, "rank %d: the previous call on device "
                                      "buffers failed: %s", comm->rank,
                                      rmacoll_status_string(st));
        }
    }
    if (comm->broken) {
        return rmacoll__comm_fail(comm, RMACOLL_ERR_PEER,
                                  "rank %d: the communicator failed in an earlier call "
                                  "and must be destroyed", comm->rank);
    }
    topo = comm->topo;
    staged = stream != NULL && topo->nnodes > 1;
    hsend = sendbuf;
    hrecv = recvbuf;
    me = comm->rank;
    A = topo->node_of[me];
    ls = topo->node_size[A];
    comm->last_error[0] = '\0';
    comm->epoch++;
    par = (int)(comm->epoch & 1);
    memset(&recv_rkey, 0, sizeof(recv_rkey));
    atomic_store(&comm->proxy_active, 1);

    prof[0] = prof_ns(comm);
    /* 1. local validation; a local error still joins the metadata round */
    memset(&local, 0, sizeof(local));
    local.rank = me;
    st = rmacoll__validate_args(comm->nranks, me, sendbuf, sendcounts, sdispls, recvbuf,
                                recvcounts, rdispls, dtype, comm->scratch, &send_extent,
                                &recv_extent, msg, sizeof(msg));
    if (st == RMACOLL_SUCCESS && stream != NULL) {
        /* device memory: single node, ce transport with the CUDA backend */
        if (!(comm->ce_ops->caps & RMACOLL_TCAP_MEM_CUDA) ||
            comm->ce_ops->post_puts_stream == NULL) {
            st = RMACOLL_ERR_UNSUPPORTED;
            snprintf(msg, sizeof(msg), "rank %d: stream: device buffers need the CUDA "
                     "backend of the ce transport, which this build lacks", me);
        } else {
            /* n == 0 checks the stream can take work (not being captured) */
            st = comm->ce_ops->post_puts_stream(comm->ce, NULL, 0, stream);
            if (st != RMACOLL_SUCCESS) {
                snprintf(msg, sizeof(msg), "rank %d: stream: cannot enqueue on this "
                         "stream (CUDA graph capture is not supported): %s", me,
                         rmacoll_status_string(st));
            }
        }
        if (st == RMACOLL_SUCCESS && staged) {
            /* across nodes: pinned host staging buffers carry the data */
            st = stage_grow(comm, &comm->stage_send, &comm->stage_send_bytes,
                            &comm->stage_send_pin, send_extent);
            if (st == RMACOLL_SUCCESS) {
                st = stage_grow(comm, &comm->stage_recv, &comm->stage_recv_bytes,
                                &comm->stage_recv_pin, recv_extent);
            }
            if (st != RMACOLL_SUCCESS) {
                snprintf(msg, sizeof(msg), "rank %d: cannot allocate pinned staging "
                         "buffers (%llu + %llu bytes): %s", me,
                         (unsigned long long)send_extent,
                         (unsigned long long)recv_extent, rmacoll_status_string(st));
            }
            hsend = comm->stage_send;
            hrecv = comm->stage_recv;
        } else if (st == RMACOLL_SUCCESS && recv_extent > 0) {
            st = comm->ce_ops->mem_export(comm->ce, recvbuf, recv_extent,
                                          local_rec(comm, me, par)->recv_blob);
            if (st != RMACOLL_SUCCESS) {
                snprintf(msg, sizeof(msg), "rank %d: recvbuf: cannot export the device "
                         "receive buffer (%llu bytes): %s", me,
                         (unsigned long long)recv_extent, rmacoll_status_string(st));
            }
        }
    }
    if (st == RMACOLL_SUCCESS && (stream == NULL || staged)) {
        st = net_register(comm, hsend, send_extent, &send_mem, NULL);
        if (st == RMACOLL_SUCCESS) {
            st = net_register(comm, hrecv, recv_extent, &recv_mem, &recv_rkey);
        }
        if (st != RMACOLL_SUCCESS) {
            snprintf(msg, sizeof(msg), "rank %d: cannot register the send/receive "
                     "buffers (%llu/%llu bytes) with %s", me,
                     (unsigned long long)send_extent, (unsigned long long)recv_extent,
                     comm->net_ops->name);
        }
    }
    if (st != RMACOLL_SUCCESS) {
        status_set(&local, st, me, msg);
    }

    prof[1] = prof_ns(comm);
    /* 2. metadata: node peers read it from the control window ... */
    lr = local_rec(comm, me, par);
    lr->recv_addr = (uint64_t)(uintptr_t)hrecv;
    lr->st_a = local;
    for (int r = 0; r < comm->nranks; r++) {
        int ok = local.code == RMACOLL_SUCCESS;
        local_counts(lr)[r] = ok ? recvcounts[r] : 0;
        local_counts(lr)[comm->nranks + r] = ok ? rdispls[r] : 0;
    }
    publish(lr, 0, comm->epoch);
    /* ... network peers get a record */
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        int B = topo->node_of[p];
        rmacoll__net_rec_t *rec = outbox(comm, k, par);
        int64_t *sc = (int64_t *)(rec + 1);
        int ok = local.code == RMACOLL_SUCCESS;
        rec->epoch = comm->epoch;
        rec->st = local;
        rec->rcount = ok ? recvcounts[p] : 0;
        rec->rdispl = ok ? rdispls[p] : 0;
        rec->recv_rkey = recv_rkey;
        for (int l = 0; l < topo->node_size[B]; l++) {
            sc[l] = ok ? sendcounts[rmacoll__topo_rank(topo, B, l)] : 0;
        }
    }
    st = comm->nnet ? send_records(comm, par, 0) : RMACOLL_SUCCESS;
    if (st == RMACOLL_SUCCESS) {
        st = wait_node(comm, par, 0);
    }
    if (st == RMACOLL_SUCCESS) {
        st = wait_records(comm, 0);
    }
    if (st != RMACOLL_SUCCESS) {
        goto broken;
    }

    prof[2] = prof_ns(comm);
    /* 3. plan, if everyone's arguments were valid */
    acc = local;
    node_merge(comm, par, 0, &acc);
    for (int k = 0; k < comm->nnet; k++) {
        status_merge(&acc, &inbox(comm, k, par)->st);
    }
    if (acc.code == RMACOLL_SUCCESS) {
        rmacoll__plan_input_t in;
        gather_inputs(comm, par);
        in.topo = topo;
        in.rank = me;
        in.esize = rmacoll_datatype_size(dtype);
        in.cfg = &comm->pcfg;
        in.sched = &comm->sched;
        in.sendcounts = sendcounts;
        in.sdispls = sdispls;
        in.recvcounts = recvcounts;
        in.rdispls = rdispls;
        in.peer_rcount = comm->peer_rcount;
        in.peer_rdispl = comm->peer_rdispl;
        in.chan_sendcount = comm->chan_sendcount;
        in.chan_rcount = comm->chan_rcount;
        in.chan_rdispl = comm->chan_rdispl;
        st = rmacoll__plan_build(&in, comm->sig, comm->sig_next, &comm->plan);
        if (st == RMACOLL_ERR_NO_MEMORY) {
            snprintf(msg, sizeof(msg), "rank %d: out of memory building the plan (%zu tasks "
                     "so far; max_task_bytes = %llu)", me, comm->plan.ntasks,
                     (unsigned long long)comm->cfg.max_task_bytes);
        } else if (st != RMACOLL_SUCCESS) {
            snprintf(msg, sizeof(msg), "rank %d: %s", me, comm->plan.errmsg);
            status_set(&acc, st, me, msg);
        } else if (stream != NULL && !staged) {
            st = import_peers(comm, par, sendcounts, msg, sizeof(msg));
            if (st != RMACOLL_SUCCESS) {
                status_set(&acc, st, me, msg);
            }
        }
    }

    prof[3] = prof_ns(comm);
    /* 4. agreement: node, rail, node */
    lr->st_b = acc;
    publish(lr, 1, comm->epoch);
    st = wait_node(comm, par, 1);
    if (st != RMACOLL_SUCCESS) {
        goto broken;
    }
    node_merge(comm, par, 1, &acc);
    if (comm->nnet) {
        for (int k = 0; k < comm->nnet; k++) {
            *outbox2(comm, k, par) = acc;
        }
        st = send_records(comm, par, 1);
        if (st == RMACOLL_SUCCESS) {
            st = wait_records(comm, 1);
        }
        if (st != RMACOLL_SUCCESS) {
            goto broken;
        }
        for (int k = 0; k < comm->nnet; k++) {
            status_merge(&acc, inbox2(comm, k, par));
        }
    }
    /* one node: after stage B every rank holds every status already */
    if (topo->nnodes > 1) {
        lr->st_c = acc;
        publish(lr, 2, comm->epoch);
        st = wait_node(comm, par, 2);
        if (st != RMACOLL_SUCCESS) {
            goto broken;
        }
        node_merge(comm, par, 2, &acc);
    }
    if (acc.code != RMACOLL_SUCCESS) {
        /* everyone returns the same error; nothing was written */
        if (comm->proxy_started) {
            rmacoll__proxy_flush(comm);
        }
        net_deregister(comm, send_mem);
        net_deregister(comm, recv_mem);
        atomic_store(&comm->proxy_active, 0);
        if (acc.rank == me) {
            return rmacoll__comm_fail(comm, (rmacoll_status_t)acc.code, "%s", acc.msg);
        }
        return rmacoll__comm_fail(comm, (rmacoll_status_t)acc.code,
                                  "rank %d: call failed on rank %d: %s", me, acc.rank,
                                  acc.msg);
    }

    prof[4] = prof_ns(comm);
    /* 5. data rounds */
    if (staged) {
        comm->stage_send_mem = send_mem;
        comm->stage_recv_mem = recv_mem;
        st = stage_enqueue(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                           rmacoll_datatype_size(dtype), stream);
        atomic_store(&comm->proxy_active, 0);
        if (st != RMACOLL_SUCCESS) {
            comm->broken = 1;
            return st;
        }
        {
            rmacoll__sigstate_t *t = comm->sig;
            comm->sig = comm->sig_next;
            comm->sig_next = t;
        }
        return RMACOLL_SUCCESS;
    }
    if (stream != NULL) {
        st = run_plan_stream(comm, sendbuf, recvbuf, sendcounts, recvcounts, stream);
    } else {
        st = run_plan(comm, sendbuf, recvbuf, send_mem);
    }
    if (prof[0] != 0) {
        uint64_t end = prof_ns(comm);
        rmacoll__log(&comm->log, RMACOLL_LOG_TRACE, RMACOLL_LOG_SUBSYS_CORE,
                     "call %llu: validate %.1f us, metadata %.1f us, plan %.1f us, "
                     "agreement %.1f us, data %.1f us (%s)",
                     (unsigned long long)comm->epoch, (prof[1] - prof[0]) / 1e3,
                     (prof[2] - prof[1]) / 1e3, (prof[3] - prof[2]) / 1e3,
                     (prof[4] - prof[3]) / 1e3, (end - prof[4]) / 1e3,
                     stream != NULL ? "enqueued" : "completed");
    }
    net_deregister(comm, send_mem);
    net_deregister(comm, recv_mem);
    atomic_store(&comm->proxy_active, 0);
    if (st != RMACOLL_SUCCESS) {
        comm->broken = 1;
        return st;
    }
    {
        rmacoll__sigstate_t *t = comm->sig;
        comm->sig = comm->sig_next;
        comm->sig_next = t;
    }
    (void)ls;
    return RMACOLL_SUCCESS;

broken:
    comm->broken = 1;
    net_deregister(comm, send_mem);
    net_deregister(comm, recv_mem);
    atomic_store(&comm->proxy_active, 0);
    return st;
}

rmacoll_status_t rmacoll_alltoall(const void *sendbuf, void *recvbuf, int64_t count,
                                  rmacoll_datatype_t dtype, rmacoll_comm_t *comm,
                                  void *stream)
{
    int64_t *arr;
    rmacoll_status_t st;
    int n;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    n = comm->nranks;
    arr = comm->uniform; /* counts, then displacements */
    for (int r = 0; r < n; r++) {
        arr[r] = count;
        /* an overflowing displacement becomes -1, which validation turns
         * into RMACOLL_ERR_OVERFLOW on every rank */
        arr[n + r] = (count < 0 || (r > 0 && count > INT64_MAX / r)) ? -1 : count * r;
    }
    st = rmacoll_alltoallv(sendbuf, arr, arr + n, recvbuf, arr, arr + n, dtype, comm,
                           stream);
    return st;
}
