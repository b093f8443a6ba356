/*
 * meta.c - the control exchange and the agreement of one call (the
 * one-round verdict is verdict.c, the waits on signal words wait.c).
 *
 * Metadata round (DESIGN.md, step 2): every rank publishes its receive
 * address and recvcounts/rdispls in its control window for node peers,
 * and sends each network peer a record with its counts for the peer's
 * node, its recvcount/rdispl for the peer and the key of its receive
 * buffer. Agreement: the status after planning travels node -> rail ->
 * node, so that every rank learns the lowest-ranked error; on any error
 * every rank returns it and no data is written. Calls never overlap in
 * their data phases (a rank's agreement needs all ranks in the same call),
 * which is why two parities of records suffice.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/exec/call.h"
#include "core/exec/records.h"
#include "core/exec/state.h"
#include "core/plan/plan_in.h"
#include "core/plan/topo.h"



/* Sends record `kind` to every network peer, raising META(slot) or
 * AGREE(slot) there. */
static rmacoll_status_t send_records(rmacoll_comm_t *comm, int par,
                                     rmacoll__rec_kind_t kind)
{
    rmacoll_put_t *puts = &comm->meta_puts[(size_t)kind * comm->nranks];
    rmacoll_status_t st;

    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        const rmacoll__ctrl_layout_t *pl = &comm->peer_lay[p];
        int slot = comm->net_slot_at[k];
        /* the two kinds use separate put arrays: the proxy may not have
         * posted the first job when the second is built */
        rmacoll_put_t *put = &puts[k];

        memset(put, 0, sizeof(*put));
        put->peer = p;
        put->src_mem = comm->ctrl_mem;
        put->src = rmacoll__rec_own(comm, kind, 1, k, par);
        put->bytes = kind == RMACOLL__REC_META
                         ? rmacoll__ctrl_meta_bytes(pl) +
                               ((const rmacoll__net_rec_t *)put->src)->eager_bytes
                         : rmacoll__ctrl_rec_bytes(&comm->lay, kind);
        put->dst_rkey = &comm->peer_ctrl_rkey[p];
        put->dst_addr = put->dst_rkey->addr + rmacoll__ctrl_rec_off(pl, kind, 0, slot, par);
        put->sig_index = rmacoll__ctrl_sig_rec(pl, kind, slot);
        /* a word is raised once per record (a transport may add one per
         * signal or store the value): METADATA travels on every call, so
         * its words follow the epoch (which already counts this call);
         * AGREE only on calls that run the agreement (agree_rounds) */
        put->sig_value = kind == RMACOLL__REC_AGREE ? comm->agree_rounds : comm->epoch;
    }
    st = rmacoll__proxy_submit(&comm->proxy, puts, (size_t)comm->nnet);
    rmacoll__proxy_poll(&comm->proxy);
    return st;
}

static rmacoll_status_t wait_records(rmacoll_comm_t *comm, rmacoll__rec_kind_t kind)
{
    /* one round (two nodes): a record leaves only after its sender's node
     * stage A, so the sender may spend a whole timeout waiting for a node
     * peer first; waiting twice as long lets its failure (the abort word,
     * naming the silent rank) arrive before this wait gives up */
    uint64_t limit = comm->cfg.timeout_ms;

    if (kind == RMACOLL__REC_META && comm->lay.matrix) {
        limit = 2 * limit;
    }
    for (int k = 0; k < comm->nnet; k++) {
        uint32_t idx = rmacoll__ctrl_sig_rec(&comm->lay, kind, k);
        rmacoll_status_t st = rmacoll__wait_word_for(
            comm, &comm->signals[idx],
            kind == RMACOLL__REC_AGREE ? comm->agree_rounds : comm->epoch, comm->net_list[k],
            kind == RMACOLL__REC_AGREE ? "agreement record" : "metadata record", limit);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Waits for every node peer's local record to reach `stage`. */
static rmacoll_status_t wait_node(rmacoll_comm_t *comm, int par, int stage)
{
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, j, par);
        rmacoll_status_t st;
        if (j == comm->rank) {
            continue;
        }
        st = rmacoll__wait_word(comm, (const volatile uint64_t *)&lr->epoch[stage],
                                comm->epoch, j, "node metadata");
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

static void node_merge(rmacoll_comm_t *comm, int par, int stage,
                       rmacoll__status_rec_t *acc)
{
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, rmacoll__topo_rank(topo, A, l), par);
        rmacoll__status_merge(acc, &lr->st[stage]);
    }
}

/* Publishes own local record's stage with `st`. */
static void publish(rmacoll_comm_t *comm, int par, int stage,
                    const rmacoll__status_rec_t *st)
{
    rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, comm->rank, par);

    lr->st[stage] = *st;
    atomic_store_explicit(&lr->epoch[stage], comm->epoch, memory_order_release);
}

/* Element size of `peer` differs from this rank's: the datatype error of
 * this rank (the agreement keeps the lowest-ranked one, so every rank
 * returns the same error). */
static void esize_error(rmacoll__call_t *c, int peer, uint64_t peer_esize)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__status_rec_t rec;
    char msg[256];
    int a = comm->rank < peer ? comm->rank : peer;
    int b = comm->rank < peer ? peer : comm->rank;
    uint64_t ea = comm->rank < peer ? c->esize : peer_esize;
    uint64_t eb = comm->rank < peer ? peer_esize : c->esize;

    snprintf(msg, sizeof(msg), "rank %d: the datatype differs between ranks: rank %d "
             "has %llu-byte elements, rank %d has %llu-byte elements", comm->rank, a,
             (unsigned long long)ea, b, (unsigned long long)eb);
    rmacoll__status_set(&rec, RMACOLL_ERR_DATATYPE, comm->rank, msg);
    rmacoll__status_merge(&c->acc, &rec);
}

/* Compares this rank's element size with every peer's it has a record of
 * (node peers and network peers: together they connect every pair of
 * ranks that exchange bytes, directly or through a relay). */
static void check_esize(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];

    if (c->local.code != RMACOLL_SUCCESS || c->esize == 0) {
        return;
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        const rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, j, c->par);
        if (j != comm->rank && lr->esize != 0 && lr->esize != c->esize) {
            esize_error(c, j, lr->esize);
            return;
        }
    }
    for (int k = 0; k < comm->nnet; k++) {
        const rmacoll__net_rec_t *rec = rmacoll__rec_own(comm, RMACOLL__REC_META, 0, k, c->par);
        if (rec->esize != 0 && rec->esize != c->esize) {
            esize_error(c, comm->net_list[k], rec->esize);
            return;
        }
    }
}


/* The eager payload of a record to another node (rec in the outbox): the
 * call's blocks for members[0, lsB) in that order when the plan's rule says
 * they travel here; with the relay on the receiver is this rank's relay
 * there and members are its node's ranks in local-rank order, with the
 * relay off the receiver alone. The caller checked the call is a valid
 * host call. */
static void fill_eager(rmacoll__call_t *c, rmacoll__net_rec_t *rec, const int *members,
                       int lsB)
{
    rmacoll_comm_t *comm = c->comm;
    char *dst;

    rec->eager_bytes = rmacoll__plan_eager_bytes(c->sendcounts, members, lsB, c->esize,
                                                 comm->pcfg.eager_max_bytes);
    if (rec->eager_bytes == 0) {
        return;
    }
    dst = rmacoll__ctrl_rec_payload(rec, &comm->lay);
    for (int l = 0; l < lsB; l++) {
        int j = members[l];
        uint64_t n = (uint64_t)c->sendcounts[j] * c->esize;
        if (n != 0) {
            memcpy(dst, (const char *)c->sendbuf + (uint64_t)c->sdispls[j] * c->esize, n);
            dst += n;
        }
    }
}

/* The node payload of this rank's local record (node eager path): its
 * blocks for its node peers in local-rank order, its own skipped, when the
 * plan's rule (rmacoll__plan_node_eager_bytes) says they travel here; the
 * offsets tell each peer where its block is. The caller checked the call
 * is a valid host call. */
static void fill_node_eager(rmacoll__call_t *c, rmacoll__local_rec_t *lr)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    int ls = topo->node_size[A];
    const int *members = topo->node_members + topo->node_first[A];
    uint64_t *off = rmacoll__ctrl_local_eager_off(lr, &comm->lay);
    char *dst = rmacoll__ctrl_local_payload(lr, &comm->lay);

    lr->node_eager_bytes = rmacoll__plan_node_eager_bytes(
        c->sendcounts, members, ls, topo->local_rank[comm->rank], c->esize,
        c->node_eager_send_max, off);
    for (int l = 0; l < ls && lr->node_eager_bytes != 0; l++) {
        int j = members[l];
        if (off[l] != RMACOLL__NO_EAGER) {
            memcpy(dst + off[l], (const char *)c->sendbuf + (uint64_t)c->sdispls[j] * c->esize,
                   (uint64_t)c->sendcounts[j] * c->esize);
        }
    }
}

void rmacoll__meta_eager_count(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    uint64_t sent = 0, copied = 0, nsent = 0, ncopied = 0, direct = 0;

    for (int k = 0; k < comm->nnet && c->eager_max != 0; k++) {
        sent += ((const rmacoll__net_rec_t *)rmacoll__rec_own(comm, RMACOLL__REC_META, 1, k,
                                                               c->par))
                    ->eager_bytes;
    }
    if (c->node_eager_max != 0) {
        nsent = rmacoll__rec_local(comm, comm->rank, c->par)->node_eager_bytes;
    }
    for (size_t k = 0; k < comm->plan.ntasks; k++) {
        const rmacoll__task_t *t = &comm->plan.tasks[k];
        if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_EAGER)) {
            if (t->src_win == RMACOLL__WIN_NODE_EAGER) {
                ncopied += t->bytes;
            } else {
                copied += t->bytes;
            }
        } else if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_DIRECT)) {
            direct += t->bytes; /* a direct stream's put, the relay's own block included */
        }
    }
    atomic_fetch_add(&comm->stats.direct_bytes_sent, direct);
    atomic_fetch_add(&comm->stats.eager_bytes_sent, sent);
    atomic_fetch_add(&comm->stats.eager_bytes_copied, copied);
    atomic_fetch_add(&comm->stats.node_eager_bytes_sent, nsent);
    atomic_fetch_add(&comm->stats.node_eager_bytes_copied, ncopied);
}

/* Waits for the record of every rank of the other node that lands in a
 * node peer's inbox (its relay here): the one-round verdict reads them all. */
static rmacoll_status_t wait_held_records(rmacoll_comm_t *comm)
{
    const rmacoll_topo_t *topo = comm->topo;
    int X = topo->node_of[comm->rank];

    for (int a = 0; a < comm->nranks; a++) {
        char what[64];
        rmacoll_status_t st;
        if (topo->node_of[a] == X || comm->rec_holder[a] == comm->rank ||
            __atomic_load_n(rmacoll__rec_held_word(comm, a), __ATOMIC_ACQUIRE) >= comm->epoch) {
            continue;
        }
        /* the holder (a node peer) is the one waited for: when it has
         * stopped, its stale heartbeat names it; when it waits itself (for
         * rank a's record), the chain of waits leads to rank a */
        snprintf(what, sizeof(what), "metadata record of rank %d at rank %d", a,
                 comm->rec_holder[a]);
        st = rmacoll__wait_word_for(comm, rmacoll__rec_held_word(comm, a), comm->epoch,
                                    comm->rec_holder[a], what, 2 * comm->cfg.timeout_ms);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/* This rank's local record for node peers: receive address, count rows,
 * flags and (node eager path) its node payload; then published (stage A). */
static void exchange_local(rmacoll__call_t *c, rmacoll__local_rec_t *lr)
{
    rmacoll_comm_t *comm = c->comm;
    int ok = c->local.code == RMACOLL_SUCCESS;
    int n = comm->nranks;
    int64_t *cnt = rmacoll__ctrl_local_counts(lr);
    int host = c->runner->mem == RMACOLL_MEM_HOST;

    lr->recv_addr = (uint64_t)(uintptr_t)c->hrecv;
    lr->esize = ok ? c->esize : 0;
    lr->flags = host ? 0 : RMACOLL__REC_F_DEVICE;
    for (int r = 0; r < n; r++) {
        cnt[r] = ok ? c->recvcounts[r] : 0;
        cnt[n + r] = ok ? c->rdispls[r] : 0;
        cnt[2 * n + r] = ok ? c->sendcounts[r] : 0;
    }
    /* node eager path: a valid host call puts its small blocks for its node
     * peers here; they copy them out only if the verdict is good and every
     * rank is on host memory (the same condition as the eager path) */
    lr->node_eager_bytes = 0;
    c->node_eager_send_max = comm->lay.node_eager_cap;
    if (c->node_eager_send_max > RMACOLL__NODE_EAGER_SHARED_MAX && host &&
        rmacoll__mem_shared(comm, c->hsend, c->send_extent)) {
        c->node_eager_send_max = RMACOLL__NODE_EAGER_SHARED_MAX;
    }
    if (ok && comm->lay.node_eager_cap != 0 && host) {
        fill_node_eager(c, lr);
    }
    publish(comm, c->par, RMACOLL__CTRL_A, &c->local);
}

/* This rank's record for each network peer (in the outbox): status, its
 * counts for the peer's node, the receive key; on two nodes its rows, and
 * (eager path) its blocks for the peer's node. */
static void exchange_records(rmacoll__call_t *c, rmacoll__local_rec_t *lr)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int ok = c->local.code == RMACOLL_SUCCESS;
    int n = comm->nranks;
    const int64_t *cnt = rmacoll__ctrl_local_counts(lr);
    int host = c->runner->mem == RMACOLL_MEM_HOST;

    /* on two nodes the record carries this rank's own status and rows (the
     * one-round verdict needs no node stage A before it) */
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        int B = topo->node_of[p];
        rmacoll__net_rec_t *rec = rmacoll__rec_own(comm, RMACOLL__REC_META, 1, k, c->par);
        int64_t *sc = (int64_t *)(rec + 1);
        rec->epoch = comm->epoch;
        rec->st = c->local;
        rec->rcount = ok ? c->recvcounts[p] : 0;
        rec->rdispl = ok ? c->rdispls[p] : 0;
        rec->esize = ok ? c->esize : 0;
        rec->recv_rkey = c->recv_rkey;
        rec->flags = lr->flags;
        for (int l = 0; l < topo->node_size[B]; l++) {
            sc[l] = ok ? c->sendcounts[rmacoll__topo_rank(topo, B, l)] : 0;
        }
        if (comm->lay.matrix) {
            int64_t *rows = rmacoll__ctrl_rec_rows(rec, &comm->lay);
            for (int r = 0; r < n; r++) {
                rows[r] = cnt[2 * n + r];
                rows[n + r] = cnt[r];
                rows[2 * n + r] = cnt[n + r];
            }
        }
        /* eager path: a valid host call sends its blocks for B to its relay
         * there inside the record; they are used (and copied out by their
         * receivers) only if the verdict is good and every rank is on host
         * memory, which every rank learns from the same records */
        rec->eager_bytes = 0;
        if (ok && comm->lay.eager_cap != 0 && host) {
            if (!comm->pcfg.relay_enabled) {
                fill_eager(c, rec, &p, 1); /* p's own block */
            } else if (rmacoll__topo_relay(topo, comm->rank, B) == p) {
                fill_eager(c, rec, topo->node_members + topo->node_first[B],
                           topo->node_size[B]);
            }
        }
    }
}

/* Sends the records and waits for the node peers' local records and the
 * network peers' records (on two nodes, also those held by node peers). */
static rmacoll_status_t exchange_wait(rmacoll__call_t *c, int one)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st;

    st = comm->nnet ? send_records(comm, c->par, RMACOLL__REC_META) : RMACOLL_SUCCESS;
    if (st == RMACOLL_SUCCESS) {
        st = wait_node(comm, c->par, RMACOLL__CTRL_A);
    }
    if (st == RMACOLL_SUCCESS) {
        st = wait_records(comm, RMACOLL__REC_META);
    }
    if (st == RMACOLL_SUCCESS && one && comm->lay.matrix) {
        st = wait_held_records(comm);
    }
    return st;
}

rmacoll_status_t rmacoll__meta_exchange(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, comm->rank, c->par);
    int one = rmacoll__ctrl_one_round(comm->topo);
    rmacoll_status_t st;
    char sec[160];

    exchange_local(c, lr);    /* node peers read it from the control window ... */
    exchange_records(c, lr);  /* ... network peers get a record, at once */
    st = exchange_wait(c, one);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (one) {
        rmacoll__verdict_views(c);
        rmacoll__verdict(c);
        /* every record carried its payload exactly when the plan's rule
         * says so: all ranks valid and on host memory (c->one_round) */
        c->eager_max = c->one_round && c->acc.code == RMACOLL_SUCCESS
                           ? comm->lay.eager_cap : 0;
        c->node_eager_max = c->one_round && c->acc.code == RMACOLL_SUCCESS
                                ? comm->lay.node_eager_cap : 0;
        /* direct streams: every rank holds every row, so every rank
         * decides each stream alike (plan.h) */
        c->direct_min = c->one_round && c->acc.code == RMACOLL_SUCCESS
                            ? comm->pcfg.direct_min_bytes : 0;
        if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
            /* a peer gave up on this call (e.g. it timed out waiting for
             * this rank): a call that needs nothing more from its peers
             * (payloads) must not succeed where they failed */
            return rmacoll__fail_secondary(&comm->fail, rmacoll__abort_status(comm),
                                 "rank %d: %s; stopped after the metadata round",
                                 comm->rank, sec);
        }
        return RMACOLL_SUCCESS;
    }
    /* everyone's validation outcome */
    c->acc = c->local;
    node_merge(comm, c->par, RMACOLL__CTRL_A, &c->acc);
    for (int k = 0; k < comm->nnet; k++) {
        rmacoll__net_rec_t *rec = rmacoll__rec_own(comm, RMACOLL__REC_META, 0, k, c->par);
        rmacoll__status_merge(&c->acc, &rec->st);
    }
    check_esize(c);
    return RMACOLL_SUCCESS;
}

/* Rank a's sendcounts row as this rank learned it (rmacoll__plan_rows_t). */
static const int64_t *view_row(const void *views, int a)
{
    return ((const rmacoll__rank_view_t *)views)[a].send;
}

void rmacoll__meta_inputs(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll__plan_rows_t rows = {view_row, comm->views};
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank, par = c->par;
    int A = topo->node_of[me];
    int ls = topo->node_size[A];

    for (int l = 0; l < ls; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, j, par);
        comm->peer_rcount[j] = rmacoll__ctrl_local_counts(lr)[me];
        comm->peer_rdispl[j] = rmacoll__ctrl_local_counts(lr)[comm->nranks + me];
        comm->peer_recv_addr[j] = lr->recv_addr;
        if (c->node_eager_max != 0) {
            /* where this rank's block is in j's node payload (j's own rule) */
            comm->node_eager_off[l] = j == me ? RMACOLL__NO_EAGER
                                      : lr->node_eager_bytes == 0
                                          ? RMACOLL__NO_EAGER
                                          : rmacoll__ctrl_local_eager_off(
                                                lr, &comm->peer_lay[j])[topo->local_rank[me]];
        }
    }
    /* where this rank's block is in the eager payload of each rank of the
     * other node (its own rule, from its row in its record; plan_in.h) */
    rmacoll__plan_in_eager(topo, comm->pcfg.relay_enabled, me, &rows, c->esize, c->eager_max,
                           comm->eager_in_off);
    if (c->direct_min != 0) {
        /* direct streams: which of the other node's ranks send here
         * straight (each one's rule over its row), and where this rank's
         * blocks go in each of their buffers (from their records, held by
         * their relays here) */
        rmacoll__plan_in_direct(topo, me, &rows, c->esize, c->eager_max, c->direct_min,
                                comm->direct_in);
        for (int a = 0; a < comm->nranks; a++) {
            const rmacoll__rank_view_t *v = &comm->views[a];
            if (topo->node_of[a] == A) {
                continue;
            }
            comm->peer_rcount[a] = v->recv[me];
            comm->peer_rdispl[a] = v->rdispl[me];
            comm->peer_recv_rkey[a] = rmacoll__rec_held(comm, a, par)->recv_rkey;
        }
    }
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        rmacoll__net_rec_t *rec = rmacoll__rec_own(comm, RMACOLL__REC_META, 0, k, par);
        comm->peer_rcount[p] = rec->rcount;
        comm->peer_rdispl[p] = rec->rdispl;
        comm->peer_recv_rkey[p] = rec->recv_rkey;
    }
    const rmacoll__plan_topo_t *pt = rmacoll__plan_topo(&comm->plan, topo, &comm->pcfg, me);
    for (int ch = 0; ch < comm->nin; ch++) {
        int i = pt != NULL ? pt->chan_src[ch] : rmacoll__plan_chan_src(topo, me, ch);
        rmacoll__net_rec_t *rec = rmacoll__rec_own(comm, RMACOLL__REC_META, 0,
                                                   comm->net_index[i], par);
        const int64_t *sc = (const int64_t *)(rec + 1);
        for (int l = 0; l < ls; l++) {
            rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, rmacoll__topo_rank(topo, A, l),
                                                          par);
            const int64_t *cnt = rmacoll__ctrl_local_counts(lr);
            comm->chan_sendcount[(size_t)ch * ls + l] = sc[l];
            comm->chan_rcount[(size_t)ch * ls + l] = cnt[i];
            comm->chan_rdispl[(size_t)ch * ls + l] = cnt[comm->nranks + i];
        }
    }
}

rmacoll_status_t rmacoll__meta_agree(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st;

    if (c->one_round) {
        /* every rank holds the verdict already; what planning can still
         * find after it (out of memory) is this rank's alone, so it breaks
         * the communicator instead of failing the call on every rank */
        if (c->plan_failed) {
            return rmacoll__fail(&comm->fail, (rmacoll_status_t)c->acc.code, "%s",
                                 c->acc.msg);
        }
        return RMACOLL_SUCCESS;
    }

    publish(comm, c->par, RMACOLL__CTRL_B, &c->acc);
    st = wait_node(comm, c->par, RMACOLL__CTRL_B);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    node_merge(comm, c->par, RMACOLL__CTRL_B, &c->acc);
    if (comm->nnet) {
        /* every rank runs the agreement on the same calls (one_round is
         * part of the verdict): the count agrees too */
        comm->agree_rounds++;
        for (int k = 0; k < comm->nnet; k++) {
            *(rmacoll__status_rec_t *)rmacoll__rec_own(comm, RMACOLL__REC_AGREE, 1, k, c->par) =
                c->acc;
        }
        st = send_records(comm, c->par, RMACOLL__REC_AGREE);
        if (st == RMACOLL_SUCCESS) {
            st = wait_records(comm, RMACOLL__REC_AGREE);
        }
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        for (int k = 0; k < comm->nnet; k++) {
            rmacoll__status_merge(&c->acc,
                                  rmacoll__rec_own(comm, RMACOLL__REC_AGREE, 0, k, c->par));
        }
    }
    /* one node: after stage B every rank holds every status already */
    if (comm->topo->nnodes > 1) {
        publish(comm, c->par, RMACOLL__CTRL_C, &c->acc);
        st = wait_node(comm, c->par, RMACOLL__CTRL_C);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        node_merge(comm, c->par, RMACOLL__CTRL_C, &c->acc);
    }
    return RMACOLL_SUCCESS;
}
