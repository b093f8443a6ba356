/*
 * verdict.c - the one-round verdict (rmacoll__ctrl_one_round: one node, or
 * small nodes and few ranks in all).
 *
 * On such a communicator the metadata exchange alone gives every rank
 * everything the agreement would: the local records of its node (after
 * node stage A) hold every node peer's validation status, element size and
 * count rows; across nodes every rank also sends each network peer its own
 * status and rows in its record, at once (not after stage A), and every
 * rank of every other node has sent one to its relay on this node (relay
 * on) or to this rank (relay off), whose inbox node peers read. So every
 * rank sees every rank's status and rows, computes the same checks over the
 * same data in the same order and reaches the same verdict: no status round
 * is needed, on any number of nodes. Priority: validation, then datatype,
 * then counts (lowest rank first).
 */
#include <stdio.h>

#include "core/exec/call.h"
#include "core/exec/records.h"
#include "core/exec/state.h"
#include "core/plan/topo.h"

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
void rmacoll__verdict_views(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int n = comm->nranks, X = topo->node_of[comm->rank];

    for (int j = 0; j < n; j++) {
        rmacoll__rank_view_t *v = &comm->views[j];
        if (topo->node_of[j] == X) {
            rmacoll__local_rec_t *lr = rmacoll__rec_local(comm, j, c->par);
            const int64_t *cnt = rmacoll__ctrl_local_counts(lr);
            v->st = &lr->st[RMACOLL__CTRL_A];
            v->esize = lr->esize;
            v->flags = lr->flags;
            v->recv = cnt;
            v->rdispl = cnt + (size_t)n;
            v->send = cnt + 2 * (size_t)n;
        } else {
            rmacoll__net_rec_t *rec = rmacoll__rec_held(comm, j, c->par);
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

/* The first count mismatch between nodes: senders in rank order, each
 * against the other nodes' ranks, nodes in order, ranks in local-rank
 * order. */
static void cross_check(const rmacoll_topo_t *topo, const rmacoll__rank_view_t *v,
                        rmacoll__status_rec_t *out)
{
    for (int s = 0; s < topo->nranks; s++) {
        for (int M = 0; M < topo->nnodes; M++) {
            if (M == topo->node_of[s]) {
                continue;
            }
            for (int b = 0; b < topo->node_size[M]; b++) {
                int r = rmacoll__topo_rank(topo, M, b);
                if (v[s].send[r] != v[r].recv[s]) {
                    set_count_error(out, s, r, v[s].send[r], v[r].recv[s]);
                    return;
                }
            }
        }
    }
}

/* The first node whose lowest rank's element size differs from node 0's
 * lowest rank's. */
static void cross_datatype(const rmacoll_topo_t *topo, const rmacoll__rank_view_t *v,
                           rmacoll__status_rec_t *out)
{
    int a = rmacoll__topo_rank(topo, 0, 0);

    for (int N = 1; N < topo->nnodes; N++) {
        int b = rmacoll__topo_rank(topo, N, 0);
        if (v[a].esize != v[b].esize) {
            set_datatype_error(out, a, v[a].esize, b, v[b].esize);
            return;
        }
    }
}

/* The verdict from every rank's view (rmacoll__verdict_views). */
void rmacoll__verdict(rmacoll__call_t *c)
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
        if (topo->nnodes >= 2) {
            rmacoll__status_rec_t x = {0};
            cross_datatype(topo, v, &x);
            rmacoll__status_merge(&dt, &x);
        }
        if (dt.code != RMACOLL_SUCCESS) {
            res = dt;
        } else {
            if (topo->nnodes >= 2) {
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
