/*
 * meta.c - the control exchange and the agreement of one call, and the
 * one wait on a signal word every step uses.
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
#include "core/base/clock.h"
#include "core/comm/comm.h"
#include "core/plan/topo.h"

static uint64_t load_acquire(const volatile uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

/* The progress count in the header of a control window. */
static volatile uint64_t *progress_word(void *ctrl_base)
{
    return (volatile uint64_t *)((char *)ctrl_base + RMACOLL__CTRL_PROGRESS_OFF);
}

/*
 * What a waiter can see of progress, summed: the awaited word itself (a
 * transfer in chunks raises it once per chunk), every signal word of this
 * rank (any peer still delivering to it), and, when the awaited peer is a
 * node peer, that peer's progress count (a relay busy forwarding for other
 * ranks raises it with each wait it completes). A network peer's own
 * progress is visible only through the words it raises here.
 */
static uint64_t progress_seen(const rmacoll_comm_t *comm, const volatile uint64_t *word,
                              int peer)
{
    uint64_t sum = load_acquire(word);

    for (uint32_t k = 0; k < comm->lay.nsig; k++) {
        sum += __atomic_load_n(&comm->signals[k], __ATOMIC_RELAXED);
    }
    if (peer >= 0 && peer < comm->nranks && peer != comm->rank &&
        comm->peer_ctrl[peer].addr != NULL) {
        sum += __atomic_load_n(progress_word(comm->peer_ctrl[peer].addr), __ATOMIC_RELAXED);
    }
    return sum;
}

static volatile uint64_t *hdr_word(void *ctrl_base, size_t off)
{
    return (volatile uint64_t *)((char *)ctrl_base + off);
}

int rmacoll__abort_seen(const rmacoll_comm_t *comm, char *buf, size_t len)
{
    uint64_t w = __atomic_load_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_ABORT_OFF),
                                 __ATOMIC_ACQUIRE);
    int culprit;

    if (w == 0) {
        return 0;
    }
    culprit = rmacoll__abort_culprit(w);
    if (culprit >= 0) {
        snprintf(buf, len, "secondary error: rank %d failed first (%s, silent rank %d)",
                 rmacoll__abort_origin(w),
                 rmacoll_status_name((rmacoll_status_t)rmacoll__abort_code(w)), culprit);
    } else {
        snprintf(buf, len, "secondary error: rank %d failed first (%s)",
                 rmacoll__abort_origin(w),
                 rmacoll_status_name((rmacoll_status_t)rmacoll__abort_code(w)));
    }
    return 1;
}

void rmacoll__abort_broadcast(rmacoll_comm_t *comm, rmacoll_status_t st)
{
    volatile uint64_t *own = hdr_word(comm->ctrl.addr, RMACOLL__CTRL_ABORT_OFF);
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    uint64_t w = rmacoll__abort_word((int)st, comm->rank, comm->fail_culprit);
    uint64_t zero = 0;

    /* the first failure known here wins: a secondary one passes it on */
    __atomic_compare_exchange_n(own, &zero, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    w = __atomic_load_n(own, __ATOMIC_ACQUIRE);
    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        if (j != comm->rank && comm->peer_ctrl[j].addr != NULL) {
            zero = 0;
            __atomic_compare_exchange_n(hdr_word(comm->peer_ctrl[j].addr,
                                                 RMACOLL__CTRL_ABORT_OFF),
                                        &zero, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        }
    }
    if (comm->nnet > 0 && comm->proxy.started && comm->ctrl_mem != NULL) {
        for (int k = 0; k < comm->nnet; k++) {
            int p = comm->net_list[k];
            rmacoll_put_t *put = &comm->abort_puts[k];
            memset(put, 0, sizeof(*put));
            put->peer = p;
            put->src = (const char *)comm->ctrl.addr + RMACOLL__CTRL_ABORT_OFF;
            put->src_mem = comm->ctrl_mem;
            put->bytes = 8;
            put->dst_rkey = &comm->peer_ctrl_rkey[p];
            put->dst_addr = put->dst_rkey->addr + RMACOLL__CTRL_ABORT_OFF;
            put->sig_index = RMACOLL_NO_SIGNAL;
        }
        /* best effort: a failed network is the likely cause */
        if (rmacoll__proxy_submit(&comm->proxy, comm->abort_puts, (size_t)comm->nnet) ==
            RMACOLL_SUCCESS) {
            rmacoll__proxy_poll(&comm->proxy);
        }
    }
}

void rmacoll__gate_open(rmacoll_comm_t *comm, uint64_t epoch)
{
    __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_OPEN_OFF), epoch,
                     __ATOMIC_SEQ_CST);
}

int rmacoll__gate_close(rmacoll_comm_t *comm)
{
    volatile uint64_t *busy = hdr_word(comm->ctrl.addr, RMACOLL__CTRL_BUSY_OFF);
    uint64_t start = rmacoll__now_ms(), n;

    __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_OPEN_OFF), 0,
                     __ATOMIC_SEQ_CST);
    while ((n = __atomic_load_n(busy, __ATOMIC_SEQ_CST)) != 0) {
        if (rmacoll__now_ms() - start > comm->cfg.timeout_ms) {
            rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: %llu node peer(s) still inside a copy into this "
                         "rank's receive buffer after %llu ms (stopped between their "
                         "check and their copy): it may still be written",
                         comm->rank, (unsigned long long)n,
                         (unsigned long long)comm->cfg.timeout_ms);
            return (int)n;
        }
        sched_yield();
    }
    return 0;
}

/* The rank at the end of a chain of waits that starts at node peer
 * `peer` (each waiting rank publishes whom it waits for): the silent rank
 * itself, or the first rank of the chain that is not a node peer. */
static int wait_chain_end(const rmacoll_comm_t *comm, int peer)
{
    int x = peer;

    /* a live waiter samples every timeout_ms / 16: a heartbeat older than
     * a quarter of the timeout is a stopped (or dead) one */
    uint64_t stale = comm->cfg.timeout_ms / 4 + 20;

    for (int step = 0; step < comm->nranks; step++) {
        uint64_t w, hb;
        int y;
        if (x < 0 || x >= comm->nranks || x == comm->rank ||
            comm->peer_ctrl[x].addr == NULL) {
            break;
        }
        w = __atomic_load_n(hdr_word(comm->peer_ctrl[x].addr, RMACOLL__CTRL_WAITING_OFF),
                            __ATOMIC_RELAXED);
        hb = __atomic_load_n(hdr_word(comm->peer_ctrl[x].addr,
                                      RMACOLL__CTRL_HEARTBEAT_OFF), __ATOMIC_RELAXED);
        y = (int)w - 1;
        if (w == 0 || y == comm->rank || y == x || y < 0 || y >= comm->nranks ||
            rmacoll__now_ms() - hb > stale) {
            break;
        }
        x = y;
    }
    return x;
}

/*
 * The timeout counts silence, not total time: the wait fails when nothing
 * it can see (progress_seen) has moved for timeout_ms. A slow transfer
 * that keeps delivering chunks never times out; a stopped or dead peer is
 * reported timeout_ms (+ one sampling period, timeout_ms / 16) after its
 * last sign of life. A timeout names the awaited peer and, when that node
 * peer is itself waiting, the rank at the end of the chain ("silent rank
 * S"); the abort word of a rank that failed first ends the wait at once
 * (a secondary error, RMACOLL_ERR_PEER, naming that rank and its cause).
 */
static rmacoll_status_t wait_word_for(rmacoll_comm_t *comm, const volatile uint64_t *word,
                                      uint64_t value, int peer, const char *what,
                                      uint64_t timeout_ms);

rmacoll_status_t rmacoll__wait_word(rmacoll_comm_t *comm,
                                    const volatile uint64_t *word,
                                    uint64_t value, int peer, const char *what)
{
    return wait_word_for(comm, word, value, peer, what, comm->cfg.timeout_ms);
}

/* rmacoll__wait_word with its own silence limit. */
static rmacoll_status_t wait_word_for(rmacoll_comm_t *comm, const volatile uint64_t *word,
                                      uint64_t value, int peer, const char *what,
                                      uint64_t timeout_ms)
{
    volatile uint64_t *waiting = hdr_word(comm->ctrl.addr, RMACOLL__CTRL_WAITING_OFF);
    uint64_t last_change = 0, next_sample = 0, seen = 0;
    uint64_t period = timeout_ms / 16 ? timeout_ms / 16 : 1;
    uint64_t next_bs = 0, dead_at = 0;
    unsigned spins = 0;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    int dead = -1;
    char sec[160];

    rmacoll__proxy_drive(&comm->proxy, 1);
    while (load_acquire(word) < value) {
        int ep;
        rmacoll_status_t pst = rmacoll__proxy_error(&comm->proxy, &ep);
        uint64_t now;
        if (pst != RMACOLL_SUCCESS) {
            comm->fail_culprit = ep;
            if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
                st = rmacoll__comm_fail(comm, RMACOLL_ERR_PEER,
                                        "rank %d: %s; then the network transport failed "
                                        "(peer %d) while waiting for rank %d (%s)",
                                        comm->rank, sec, ep, peer, what);
            } else {
                char silent[32] = "";
                if (pst == RMACOLL_ERR_TIMEOUT && ep >= 0) {
                    snprintf(silent, sizeof(silent), ", silent rank %d", ep);
                }
                st = rmacoll__comm_fail(comm, pst,
                                        "rank %d: network transport failed (peer %d%s) "
                                        "while waiting for rank %d (%s): %s",
                                        comm->rank, ep, silent, peer, what,
                                        rmacoll_status_string(pst));
            }
            break;
        }
        rmacoll__proxy_poll(&comm->proxy);
        if (++spins < RMACOLL__POLLS_BEFORE_YIELD) {
            continue;
        }
        if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
            st = rmacoll__comm_fail(comm, RMACOLL_ERR_PEER,
                                    "rank %d: %s; stopped waiting for rank %d (%s)",
                                    comm->rank, sec, peer, what);
            break;
        }
        now = rmacoll__now_ms();
        /* A rank whose process died: the bootstrap root saw its connection
         * close and says so to every rank (rmacoll__bootstrap_poll_error),
         * long before timeout_ms of silence. Writes complete locally on
         * ordered providers (FI_INJECT_COMPLETE), so the network says
         * nothing once they are out. Checked every RMACOLL__BS_POLL_MS; the
         * wait goes on RMACOLL__BS_GRACE_MS more for what the rank sent
         * before it died. */
        if (now >= next_bs) {
            next_bs = now + RMACOLL__BS_POLL_MS;
            if (dead_at == 0) {
                if (rmacoll__bootstrap_poll_error(comm->bs, &dead, sec, sizeof(sec)) !=
                    RMACOLL_SUCCESS) {
                    dead_at = now;
                }
            } else if (now - dead_at >= RMACOLL__BS_GRACE_MS) {
                comm->fail_culprit = dead >= 0 ? dead : peer;
                st = rmacoll__comm_fail(comm, RMACOLL_ERR_PEER,
                                        "rank %d: the bootstrap root reports: %s; stopped "
                                        "waiting for rank %d (%s)", comm->rank, sec, peer,
                                        what);
                break;
            }
        }
        if (last_change == 0) {
            last_change = now;
            next_sample = now + period;
            seen = progress_seen(comm, word, peer);
            __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_HEARTBEAT_OFF), now,
                             __ATOMIC_RELAXED);
            __atomic_store_n(waiting, (uint64_t)(peer + 1), __ATOMIC_RELAXED);
        } else if (now >= next_sample) {
            uint64_t p = progress_seen(comm, word, peer);
            next_sample = now + period;
            __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_HEARTBEAT_OFF), now,
                             __ATOMIC_RELAXED);
            if (p != seen) {
                seen = p;
                last_change = now;
            } else if (now - last_change > timeout_ms) {
                int end = wait_chain_end(comm, peer);
                char via[64] = "";
                if (end != peer) {
                    snprintf(via, sizeof(via), ", which waits for rank %d", end);
                }
                comm->fail_culprit = end;
                st = rmacoll__comm_fail(comm, RMACOLL_ERR_TIMEOUT,
                                        "rank %d: timed out waiting for rank %d%s "
                                        "(silent rank %d): no progress for %llu ms (%s: "
                                        "signal at %llu, expected %llu)",
                                        comm->rank, peer, via, end,
                                        (unsigned long long)(now - last_change), what,
                                        (unsigned long long)load_acquire(word),
                                        (unsigned long long)value);
                break;
            }
        }
        if (spins > 4096) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
    rmacoll__proxy_drive(&comm->proxy, 0);
    if (last_change != 0) {
        __atomic_store_n(waiting, 0, __ATOMIC_RELAXED);
    }
    if (st == RMACOLL_SUCCESS) {
        /* a satisfied wait is this rank's progress, for node peers waiting on it */
        rmacoll__progress_bump(comm);
    }
    return st;
}

void rmacoll__progress_bump(rmacoll_comm_t *comm)
{
    volatile uint64_t *pw = progress_word(comm->ctrl.addr);

    __atomic_store_n(pw, __atomic_load_n(pw, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static rmacoll__local_rec_t *local_rec(rmacoll_comm_t *comm, int j, int par)
{
    return rmacoll__ctrl_local(comm->peer_ctrl[j].addr, &comm->peer_lay[j], par);
}

/* Own network record k of `kind`, in the inbox or the outbox. */
static void *own_rec(rmacoll_comm_t *comm, rmacoll__rec_kind_t kind, int outbox, int k,
                     int par)
{
    return (char *)comm->ctrl.addr + rmacoll__ctrl_rec_off(&comm->lay, kind, outbox, k, par);
}

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
        put->src = own_rec(comm, kind, 1, k, par);
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
        rmacoll_status_t st = wait_word_for(
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
        rmacoll__local_rec_t *lr = local_rec(comm, j, par);
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
        rmacoll__local_rec_t *lr = local_rec(comm, rmacoll__topo_rank(topo, A, l), par);
        rmacoll__status_merge(acc, &lr->st[stage]);
    }
}

/* Publishes own local record's stage with `st`. */
static void publish(rmacoll_comm_t *comm, int par, int stage,
                    const rmacoll__status_rec_t *st)
{
    rmacoll__local_rec_t *lr = local_rec(comm, comm->rank, par);

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
        const rmacoll__local_rec_t *lr = local_rec(comm, j, c->par);
        if (j != comm->rank && lr->esize != 0 && lr->esize != c->esize) {
            esize_error(c, j, lr->esize);
            return;
        }
    }
    for (int k = 0; k < comm->nnet; k++) {
        const rmacoll__net_rec_t *rec = own_rec(comm, RMACOLL__REC_META, 0, k, c->par);
        if (rec->esize != 0 && rec->esize != c->esize) {
            esize_error(c, comm->net_list[k], rec->esize);
            return;
        }
    }
}

/* ---- the one-round verdict (one or two nodes, rmacoll__ctrl_one_round) ----
 *
 * On a communicator of one or two (small) nodes the metadata exchange alone
 * gives every rank everything the agreement would: the local records of
 * its node (after node stage A) hold every node peer's validation status,
 * element size and count rows; on two nodes every rank also sends each
 * network peer its own status and rows in its record, at once (not after
 * stage A), and every rank of the other node has sent one to its relay on
 * this node, whose inbox node peers read. So every rank sees every rank's
 * status and rows, computes the same checks over the same data in the same
 * order and reaches the same verdict: no status round is needed. Priority:
 * validation, then datatype, then counts (lowest rank first).
 */

/* The metadata record of rank a of the other node in the inbox of its
 * holder on this node (comm->rec_holder), and the word its arrival raises. */
static rmacoll__net_rec_t *held_rec(rmacoll_comm_t *comm, int a, int par)
{
    int b = comm->rec_holder[a];

    return (rmacoll__net_rec_t *)((char *)comm->peer_ctrl[b].addr +
                                  rmacoll__ctrl_rec_off(&comm->peer_lay[b], RMACOLL__REC_META,
                                                        0, comm->rec_slot[a], par));
}

static const volatile uint64_t *held_word(rmacoll_comm_t *comm, int a)
{
    int b = comm->rec_holder[a];

    return &comm->peer_signals[b][rmacoll__ctrl_sig_rec(&comm->peer_lay[b], RMACOLL__REC_META,
                                                        comm->rec_slot[a])];
}

static void set_datatype_error(rmacoll__status_rec_t *out, int a, uint64_t ea, int b,
                               uint64_t eb)
{
    char msg[256];

    if (b < a) {
        int t = a;
        uint64_t te = ea;
        a = b;
        ea = eb;
        b = t;
        eb = te;
    }
    snprintf(msg, sizeof(msg), "rank %d: the datatype differs between ranks: rank %d "
             "has %llu-byte elements, rank %d has %llu-byte elements", a, a,
             (unsigned long long)ea, b, (unsigned long long)eb);
    rmacoll__status_set(out, RMACOLL_ERR_DATATYPE, a, msg);
}

static void set_count_error(rmacoll__status_rec_t *out, int s, int r, int64_t sent,
                            int64_t expected)
{
    char msg[256];

    snprintf(msg, sizeof(msg), "rank %d: count mismatch: rank %d sends %lld elements to "
             "rank %d, which expects %lld", s, s, (long long)sent, r,
             (long long)expected);
    rmacoll__status_set(out, RMACOLL_ERR_MISMATCH, s, msg);
}

/* The views of every rank for this call (the records it needs are in). */
static void build_views(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int n = comm->nranks, X = topo->node_of[comm->rank];

    for (int j = 0; j < n; j++) {
        rmacoll__rank_view_t *v = &comm->views[j];
        if (topo->node_of[j] == X) {
            rmacoll__local_rec_t *lr = local_rec(comm, j, c->par);
            const int64_t *cnt = rmacoll__ctrl_local_counts(lr);
            v->st = &lr->st[RMACOLL__CTRL_A];
            v->esize = lr->esize;
            v->flags = lr->flags;
            v->recv = cnt;
            v->rdispl = cnt + (size_t)n;
            v->send = cnt + 2 * (size_t)n;
        } else {
            rmacoll__net_rec_t *rec = held_rec(comm, j, c->par);
            const int64_t *rows =
                rmacoll__ctrl_rec_rows(rec, &comm->peer_lay[comm->rec_holder[j]]);
            v->st = &rec->st;
            v->esize = rec->esize;
            v->flags = rec->flags;
            v->send = rows;
            v->recv = rows + n;
            v->rdispl = rows + 2 * (size_t)n;
        }
    }
}

/* The first datatype or count error inside node N: element sizes against
 * its lowest rank's, then every pair, senders then receivers in local-rank
 * order. */
static void node_check(const rmacoll_topo_t *topo, const rmacoll__rank_view_t *v, int N,
                       rmacoll__status_rec_t *out)
{
    int ls = topo->node_size[N];
    int j0 = rmacoll__topo_rank(topo, N, 0);

    for (int l = 1; l < ls; l++) {
        int j = rmacoll__topo_rank(topo, N, l);
        if (v[j].esize != v[j0].esize) {
            set_datatype_error(out, j0, v[j0].esize, j, v[j].esize);
            return;
        }
    }
    for (int a = 0; a < ls; a++) {
        int s = rmacoll__topo_rank(topo, N, a);
        for (int b = 0; b < ls; b++) {
            int r = rmacoll__topo_rank(topo, N, b);
            if (v[s].send[r] != v[r].recv[s]) {
                set_count_error(out, s, r, v[s].send[r], v[r].recv[s]);
                return;
            }
        }
    }
}

/* The first count mismatch between the two nodes: senders in rank order,
 * each against the other node's ranks in local-rank order. */
static void cross_check(const rmacoll_topo_t *topo, const rmacoll__rank_view_t *v,
                        rmacoll__status_rec_t *out)
{
    for (int s = 0; s < topo->nranks; s++) {
        int M = 1 - topo->node_of[s];
        for (int b = 0; b < topo->node_size[M]; b++) {
            int r = rmacoll__topo_rank(topo, M, b);
            if (v[s].send[r] != v[r].recv[s]) {
                set_count_error(out, s, r, v[s].send[r], v[r].recv[s]);
                return;
            }
        }
    }
}

/* The verdict from every rank's view (build_views). */
static void one_round_verdict(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    const rmacoll__rank_view_t *v = comm->views;
    rmacoll__status_rec_t res = {0};
    uint64_t flags = 0;

    for (int j = 0; j < comm->nranks; j++) {
        rmacoll__status_merge(&res, v[j].st);
        flags |= v[j].flags;
    }
    if (res.code == RMACOLL_SUCCESS) {
        rmacoll__status_rec_t dt = {0}, cnt = {0};
        for (int N = 0; N < topo->nnodes; N++) {
            rmacoll__status_rec_t chk = {0};
            node_check(topo, v, N, &chk);
            if (chk.code != RMACOLL_SUCCESS) {
                rmacoll__status_merge(chk.code == RMACOLL_ERR_DATATYPE ? &dt : &cnt, &chk);
            }
        }
        if (topo->nnodes == 2) {
            int a = rmacoll__topo_rank(topo, 0, 0), b = rmacoll__topo_rank(topo, 1, 0);
            if (v[a].esize != v[b].esize) {
                rmacoll__status_rec_t x;
                set_datatype_error(&x, a, v[a].esize, b, v[b].esize);
                rmacoll__status_merge(&dt, &x);
            }
        }
        if (dt.code != RMACOLL_SUCCESS) {
            res = dt;
        } else {
            if (topo->nnodes == 2) {
                rmacoll__status_rec_t x = {0};
                cross_check(topo, v, &x);
                rmacoll__status_merge(&cnt, &x);
            }
            res = cnt;
        }
    }
    c->acc = res;
    /* device runners may still fail after planning (mapping peers' buffers):
     * those calls keep the agreement */
    c->one_round = !(flags & RMACOLL__REC_F_DEVICE);
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

const void *rmacoll__meta_node_payload(rmacoll_comm_t *comm, int sender)
{
    return rmacoll__ctrl_local_payload(local_rec(comm, sender, (int)(comm->epoch & 1)),
                                       &comm->peer_lay[sender]);
}

const void *rmacoll__meta_payload(rmacoll_comm_t *comm, int sender)
{
    return rmacoll__ctrl_rec_payload(held_rec(comm, sender, (int)(comm->epoch & 1)),
                                     &comm->peer_lay[comm->rec_holder[sender]]);
}

void rmacoll__meta_eager_count(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    uint64_t sent = 0, copied = 0, nsent = 0, ncopied = 0, direct = 0;
    int direct_node = comm->plan.direct_node; /* what the plan decided */

    for (int k = 0; k < comm->nnet && c->eager_max != 0; k++) {
        sent += ((const rmacoll__net_rec_t *)own_rec(comm, RMACOLL__REC_META, 1, k, c->par))
                    ->eager_bytes;
    }
    if (c->node_eager_max != 0) {
        nsent = local_rec(comm, comm->rank, c->par)->node_eager_bytes;
    }
    for (size_t k = 0; k < comm->plan.ntasks; k++) {
        const rmacoll__task_t *t = &comm->plan.tasks[k];
        if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_EAGER)) {
            if (t->src_win == RMACOLL__WIN_NODE_EAGER) {
                ncopied += t->bytes;
            } else {
                copied += t->bytes;
            }
        } else if (t->op == RMACOLL__OP_PUT && t->path == RMACOLL__PATH_PROXY &&
                   t->dst_win == RMACOLL__WIN_RECV && topo->node_of[t->peer] == direct_node) {
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
            __atomic_load_n(held_word(comm, a), __ATOMIC_ACQUIRE) >= comm->epoch) {
            continue;
        }
        /* the holder (a node peer) is the one waited for: when it has
         * stopped, its stale heartbeat names it; when it waits itself (for
         * rank a's record), the chain of waits leads to rank a */
        snprintf(what, sizeof(what), "metadata record of rank %d at rank %d", a,
                 comm->rec_holder[a]);
        st = wait_word_for(comm, held_word(comm, a), comm->epoch, comm->rec_holder[a], what,
                           2 * comm->cfg.timeout_ms);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__meta_exchange(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    rmacoll__local_rec_t *lr = local_rec(comm, comm->rank, c->par);
    int ok = c->local.code == RMACOLL_SUCCESS;
    rmacoll_status_t st;

    int n = comm->nranks;
    int64_t *cnt = rmacoll__ctrl_local_counts(lr);
    int one = rmacoll__ctrl_one_round(topo);
    int host = c->runner == &rmacoll__run_host;
    char sec[160];

    /* node peers read it from the control window ... */
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
    /* ... network peers get a record, at once: on two nodes it carries this
     * rank's own status and rows (the one-round verdict needs no node
     * stage A before it) */
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        int B = topo->node_of[p];
        rmacoll__net_rec_t *rec = own_rec(comm, RMACOLL__REC_META, 1, k, c->par);
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
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (one) {
        build_views(c);
        one_round_verdict(c);
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
            return rmacoll__comm_fail(comm, RMACOLL_ERR_PEER, "rank %d: %s; stopped after "
                                      "the metadata round", comm->rank, sec);
        }
        return RMACOLL_SUCCESS;
    }
    /* everyone's validation outcome */
    c->acc = c->local;
    node_merge(comm, c->par, RMACOLL__CTRL_A, &c->acc);
    for (int k = 0; k < comm->nnet; k++) {
        rmacoll__net_rec_t *rec = own_rec(comm, RMACOLL__REC_META, 0, k, c->par);
        rmacoll__status_merge(&c->acc, &rec->st);
    }
    check_esize(c);
    return RMACOLL_SUCCESS;
}

void rmacoll__meta_inputs(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank, par = c->par;
    int A = topo->node_of[me];
    int ls = topo->node_size[A];

    for (int l = 0; l < ls; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        rmacoll__local_rec_t *lr = local_rec(comm, j, par);
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
    if (c->eager_max != 0) {
        /* where this rank's block is in the eager payload of each rank of
         * the other node (its own rule, from its row in its record) */
        const int *members = topo->node_members + topo->node_first[A];
        for (int a = 0; a < comm->nranks; a++) {
            comm->eager_in_off[a] =
                topo->node_of[a] == A ? RMACOLL__NO_EAGER
                : comm->pcfg.relay_enabled
                    ? rmacoll__plan_eager_off(comm->views[a].send, members, ls,
                                              topo->local_rank[me], c->esize, c->eager_max)
                    /* relay off: a's record to this rank carries this
                     * rank's block alone */
                    : rmacoll__plan_eager_off(comm->views[a].send, &me, 1, 0, c->esize,
                                              c->eager_max);
        }
    }
    if (c->direct_min != 0) {
        /* direct streams: which of the other node's ranks send here
         * straight (each one's rule over its row), and where this rank's
         * blocks go in each of their buffers (from their records, held by
         * their relays here) */
        for (int a = 0; a < comm->nranks; a++) {
            const rmacoll__rank_view_t *v = &comm->views[a];
            comm->direct_in[a] = (uint8_t)rmacoll__plan_direct_in(topo, me, a, v->send, c->esize,
                                                                  c->eager_max, c->direct_min);
            if (topo->node_of[a] == A) {
                continue;
            }
            comm->peer_rcount[a] = v->recv[me];
            comm->peer_rdispl[a] = v->rdispl[me];
            comm->peer_recv_rkey[a] = held_rec(comm, a, par)->recv_rkey;
        }
    }
    for (int k = 0; k < comm->nnet; k++) {
        int p = comm->net_list[k];
        rmacoll__net_rec_t *rec = own_rec(comm, RMACOLL__REC_META, 0, k, par);
        comm->peer_rcount[p] = rec->rcount;
        comm->peer_rdispl[p] = rec->rdispl;
        comm->peer_recv_rkey[p] = rec->recv_rkey;
    }
    const rmacoll__plan_topo_t *pt = rmacoll__plan_topo(&comm->plan, topo, &comm->pcfg, me);
    for (int ch = 0; ch < comm->nin; ch++) {
        int i = pt != NULL ? pt->chan_src[ch] : rmacoll__plan_chan_src(topo, me, ch);
        rmacoll__net_rec_t *rec = own_rec(comm, RMACOLL__REC_META, 0, comm->net_index[i], par);
        const int64_t *sc = (const int64_t *)(rec + 1);
        for (int l = 0; l < ls; l++) {
            rmacoll__local_rec_t *lr = local_rec(comm, rmacoll__topo_rank(topo, A, l), par);
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
            return rmacoll__comm_fail(comm, (rmacoll_status_t)c->acc.code, "%s",
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
            *(rmacoll__status_rec_t *)own_rec(comm, RMACOLL__REC_AGREE, 1, k, c->par) =
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
                                  own_rec(comm, RMACOLL__REC_AGREE, 0, k, c->par));
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
