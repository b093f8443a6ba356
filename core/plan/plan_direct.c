/*
 * plan_direct.c - the paths that bypass the relay slots: the rules of the
 * eager path (a stream in the metadata record), of direct streams and of
 * the node eager path (blocks in the node payload), the predicates the
 * planner asks per peer (direct, XDATA, eager, node eager), and the tasks
 * of those paths: direct puts (self copy, node peers, direct network puts)
 * and the receivers' own copies out of eager and node eager payloads.
 */
#include "core/plan/plan_priv.h"

#include <stdlib.h>
#include <string.h>

#include "core/plan/topo.h"

/* ------------------------------------------------------------------ rules */

uint64_t rmacoll__plan_eager_bytes(const int64_t *counts, const int *members, int ls,
                                   size_t esize, uint64_t eager_max)
{
    uint64_t sum = 0;

    if (eager_max == 0 || esize == 0) {
        return 0;
    }
    for (int l = 0; l < ls; l++) {
        int64_t n = counts[members != NULL ? members[l] : l];
        if (n < 0 || (uint64_t)n > eager_max / esize) {
            return 0;
        }
        sum += (uint64_t)n * esize;
        if (sum > eager_max) {
            return 0;
        }
    }
    return sum;
}

uint64_t rmacoll__plan_eager_off(const int64_t *counts, const int *members, int ls, int l,
                                 size_t esize, uint64_t eager_max)
{
    uint64_t off = 0;

    if (counts[members[l]] == 0 ||
        rmacoll__plan_eager_bytes(counts, members, ls, esize, eager_max) == 0) {
        return RMACOLL__NO_EAGER;
    }
    for (int k = 0; k < l; k++) {
        off += (uint64_t)counts[members[k]] * esize;
    }
    return off;
}

int rmacoll__plan_direct_stream(const int64_t *counts, const int *members, int ls,
                                size_t esize, uint64_t eager_max, uint64_t direct_min)
{
    uint64_t sum = 0;

    if (direct_min == 0 || esize == 0 ||
        rmacoll__plan_eager_bytes(counts, members, ls, esize, eager_max) != 0) {
        return 0;
    }
    for (int l = 0; l < ls && sum < direct_min; l++) {
        int64_t n = counts[members != NULL ? members[l] : l];
        if (n > 0) {
            sum += (uint64_t)n > (direct_min - sum) / esize ? direct_min - sum
                                                            : (uint64_t)n * esize;
        }
    }
    return sum >= direct_min;
}

int rmacoll__plan_direct_in(const rmacoll_topo_t *topo, int r, int a, const int64_t *row,
                            size_t esize, uint64_t eager_max, uint64_t direct_min)
{
    int A = topo->node_of[r];

    return topo->node_of[a] != A &&
           rmacoll__plan_direct_stream(row, topo->node_members + topo->node_first[A],
                                       topo->node_size[A], esize, eager_max, direct_min);
}

uint64_t rmacoll__plan_node_eager_bytes(const int64_t *counts, const int *members, int ls,
                                        int self_l, size_t esize, uint64_t eager_max,
                                        uint64_t *off)
{
    uint64_t sum = 0;
    int ok = eager_max != 0 && esize != 0;

    for (int l = 0; l < ls && ok; l++) {
        int64_t n = counts[members[l]];
        if (off != NULL) {
            off[l] = l == self_l || n == 0 ? RMACOLL__NO_EAGER : sum;
        }
        if (l == self_l) {
            continue;
        }
        if (n < 0 || (uint64_t)n > eager_max / esize) {
            ok = 0;
            break;
        }
        sum += (uint64_t)n * esize;
        ok = sum <= eager_max;
    }
    if (!ok || sum == 0) {
        for (int l = 0; l < ls && off != NULL; l++) {
            off[l] = RMACOLL__NO_EAGER;
        }
        return 0;
    }
    return sum;
}

/* ------------------------------------------------------------- predicates */

/* Which of this rank's streams go straight to their receivers (direct
 * streams, relay on, two nodes or more): plan->direct_to[B] for every node
 * B (0 for its own), the array grown to nnodes. */
rmacoll_status_t rmacoll__plan_direct_nodes(const rmacoll__plan_input_t *in,
                                            rmacoll__plan_t *plan)
{
    const rmacoll_topo_t *topo = in->topo;
    int A = topo->node_of[in->rank];
    int on = in->direct_min_bytes != 0 && in->cfg->relay_enabled && topo->nnodes >= 2;

    if (plan->direct_to_cap < topo->nnodes) {
        uint8_t *d = realloc(plan->direct_to, (size_t)topo->nnodes);
        if (d == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        plan->direct_to = d;
        plan->direct_to_cap = topo->nnodes;
    }
    for (int B = 0; B < topo->nnodes; B++) {
        plan->direct_to[B] =
            on && B != A &&
            rmacoll__plan_direct_stream(in->sendcounts, topo->node_members + topo->node_first[B],
                                        topo->node_size[B], in->esize, in->eager_max_bytes,
                                        in->direct_min_bytes);
    }
    return RMACOLL_SUCCESS;
}

/* p is on the other node and its stream to this node comes straight, not
 * through the relay (its own rule over its row, evaluated by the runtime). */
static int direct_in(const rmacoll__plan_input_t *in, int p)
{
    return in->direct_min_bytes != 0 && in->cfg->relay_enabled &&
           in->topo->node_of[p] != in->topo->node_of[in->rank] && in->direct_in[p];
}

/* Incoming channel c's stream comes straight to its receivers: the relay
 * forwards nothing of it. */
int rmacoll__plan_direct_from(const rmacoll__plan_input_t *in, int c)
{
    int ls = in->topo->node_size[in->topo->node_of[in->rank]];

    return in->direct_min_bytes != 0 && in->cfg->relay_enabled && c >= 0 &&
           rmacoll__plan_direct_stream(in->chan_sendcount + (size_t)c * ls, NULL, ls,
                                       in->esize, in->eager_max_bytes, in->direct_min_bytes);
}

int rmacoll__plan_is_direct(const rmacoll__plan_ctx_t *ctx, int j)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;

    if (topo->node_of[j] == topo->node_of[me] || !in->cfg->relay_enabled ||
        ctx->direct_to[topo->node_of[j]]) {
        return 1;
    }
    return rmacoll__topo_relay(topo, me, topo->node_of[j]) == j;
}

/* This rank's direct put to j signals XDATA(me) at j, not DATA(me): j is a
 * rank of a direct stream's node other than this rank's relay there (the
 * relay writes DATA(me) at j when the stream goes through it). */
int rmacoll__plan_xdata_out(const rmacoll__plan_ctx_t *ctx, int j)
{
    const rmacoll_topo_t *topo = ctx->in->topo;

    return topo->node_of[j] != topo->node_of[ctx->in->rank] &&
           ctx->direct_to[topo->node_of[j]] &&
           rmacoll__topo_relay(topo, ctx->in->rank, topo->node_of[j]) != j;
}

/* p's block comes straight and raises XDATA(p) here. */
int rmacoll__plan_xdata_in(const rmacoll__plan_input_t *in, int p)
{
    const rmacoll_topo_t *topo = in->topo;

    return direct_in(in, p) && rmacoll__topo_relay(topo, p, topo->node_of[in->rank]) != in->rank;
}

/* Eager payload bytes of this rank's stream to node B (0: no eager path). */
uint64_t rmacoll__plan_eager_to(const rmacoll__plan_input_t *in, int B)
{
    const rmacoll_topo_t *topo = in->topo;

    if (!in->cfg->relay_enabled || in->eager_max_bytes == 0 ||
        B == topo->node_of[in->rank]) {
        return 0;
    }
    return rmacoll__plan_eager_bytes(in->sendcounts, topo->node_members + topo->node_first[B],
                                     topo->node_size[B], in->esize, in->eager_max_bytes);
}

/* Eager payload bytes of incoming channel c (0: no eager path). */
uint64_t rmacoll__plan_eager_from(const rmacoll__plan_input_t *in, int c)
{
    int ls = in->topo->node_size[in->topo->node_of[in->rank]];

    if (!in->cfg->relay_enabled || in->eager_max_bytes == 0 || c < 0) {
        return 0;
    }
    return rmacoll__plan_eager_bytes(in->chan_sendcount + (size_t)c * ls, NULL, ls,
                                     in->esize, in->eager_max_bytes);
}

/* j is on another node and this rank's bytes for it travel in its metadata
 * record: with the relay on, j is this rank's relay there and the stream
 * to j's node is eager; with it off, the record to j carries j's block
 * alone when that is in (0, eager_max_bytes]. No direct put to j. */
int rmacoll__plan_eager_direct_out(const rmacoll__plan_input_t *in, int j)
{
    const rmacoll_topo_t *topo = in->topo;
    int B = topo->node_of[j];

    if (B == topo->node_of[in->rank] || in->eager_max_bytes == 0) {
        return 0;
    }
    if (!in->cfg->relay_enabled) {
        return rmacoll__plan_eager_bytes(in->sendcounts, &j, 1, in->esize,
                                         in->eager_max_bytes) != 0;
    }
    return rmacoll__topo_relay(topo, in->rank, B) == j && rmacoll__plan_eager_to(in, B) != 0;
}

/* p is a rank of another node whose stream to this node travels in its
 * metadata record and holds a block for this rank: this rank copies it out
 * of the record (in its relay's inbox here) itself; no signal, no wait. */
int rmacoll__plan_eager_in(const rmacoll__plan_input_t *in, int p)
{
    const rmacoll_topo_t *topo = in->topo;

    return in->eager_max_bytes != 0 &&
           topo->node_of[p] != topo->node_of[in->rank] &&
           in->eager_in_off[p] != RMACOLL__NO_EAGER;
}

/* j is a node peer and this rank's block for it travels in its node
 * payload: no put. */
int rmacoll__plan_node_eager_out(const rmacoll__plan_ctx_t *ctx, int j)
{
    const rmacoll_topo_t *topo = ctx->in->topo;

    return ctx->node_eager_out && j != ctx->in->rank &&
           topo->node_of[j] == topo->node_of[ctx->in->rank];
}

/* p is a node peer whose block for this rank is in p's node payload: this
 * rank copies it out itself; no signal, no wait. */
int rmacoll__plan_node_eager_in(const rmacoll__plan_input_t *in, int p)
{
    const rmacoll_topo_t *topo = in->topo;

    return in->node_eager_max_bytes != 0 && p != in->rank &&
           topo->node_of[p] == topo->node_of[in->rank] &&
           in->node_eager_off[topo->local_rank[p]] != RMACOLL__NO_EAGER;
}

/* ------------------------------------------------------------------ tasks */

/* Direct puts: self copy, node peers (CE) and direct network puts. */
void rmacoll__plan_direct_puts(rmacoll__plan_ctx_t *ctx, const rmacoll__sigstate_t *st)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;

    for (int j = 0; j < topo->nranks; j++) {
        rmacoll__task_t t;
        if (in->sendcounts[j] == 0 || !rmacoll__plan_is_direct(ctx, j) ||
            rmacoll__plan_eager_direct_out(in, j) || rmacoll__plan_node_eager_out(ctx, j)) {
            continue;
        }
        memset(&t, 0, sizeof(t));
        t.op = RMACOLL__OP_PUT;
        t.src_win = RMACOLL__WIN_SEND;
        t.dst_win = RMACOLL__WIN_RECV;
        t.peer = j;
        t.origin = me;
        t.src_off = (uint64_t)in->sdispls[j] * in->esize;
        t.bytes = (uint64_t)in->sendcounts[j] * in->esize;
        if (j == me) {
            t.path = RMACOLL__PATH_CE;
            t.flags = RMACOLL__TASK_SELF;
            t.round = 0;
            t.sig = RMACOLL__NO_SIG;
            t.dst_off = (uint64_t)in->rdispls[me] * in->esize;
        } else {
            t.path = topo->node_of[j] == topo->node_of[me] ? RMACOLL__PATH_CE
                                                           : RMACOLL__PATH_PROXY;
            t.flags = RMACOLL__TASK_SIGNAL;
            if (topo->node_of[j] != topo->node_of[me] && ctx->direct_to[topo->node_of[j]]) {
                t.flags |= RMACOLL__TASK_DIRECT; /* a direct stream's, the relay's own too */
            }
            t.round = rmacoll__plan_sched_round(in, me, j);
            if (rmacoll__plan_xdata_out(ctx, j)) {
                t.sig = rmacoll__sig_xdata(topo, in->cfg, me);
                t.sig_value = st->xdata_out[j] + 1;
            } else {
                t.sig = rmacoll__sig_data(me);
                t.sig_value = st->data_out[j] + 1;
            }
            t.dst_off = (uint64_t)in->peer_rdispl[j] * in->esize;
        }
        rmacoll__plan_add_put(ctx, &t);
    }
}

/* A receiver's own copy of origin p's block out of p's payload (win:
 * WIN_EAGER or WIN_NODE_EAGER, at src_off) into its receive buffer, round
 * 0, no signal. */
static void add_pull(rmacoll__plan_ctx_t *ctx, int win, int p, uint64_t src_off)
{
    const rmacoll__plan_input_t *in = ctx->in;
    rmacoll__task_t t;

    memset(&t, 0, sizeof(t));
    t.op = RMACOLL__OP_PUT;
    t.path = RMACOLL__PATH_CE;
    t.src_win = (uint8_t)win;
    t.dst_win = RMACOLL__WIN_RECV;
    t.flags = RMACOLL__TASK_EAGER;
    t.peer = in->rank;
    t.origin = p;
    t.round = 0;
    t.sig = RMACOLL__NO_SIG;
    t.src_off = src_off;
    t.dst_off = (uint64_t)in->rdispls[p] * in->esize;
    t.bytes = (uint64_t)in->recvcounts[p] * in->esize;
    rmacoll__plan_add_put(ctx, &t);
}

/* Receiver side of the eager path: each block of a sender on another node
 * whose stream travels in its metadata record is copied out of that record
 * (WIN_EAGER: in the inbox of the sender's relay on this node, which may be
 * this rank) into this rank's receive buffer, round 0. The relay forwards
 * nothing of such a stream. */
void rmacoll__plan_eager_pulls(rmacoll__plan_ctx_t *ctx)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;

    for (int p = 0; p < topo->nranks; p++) {
        if (in->recvcounts[p] != 0 && rmacoll__plan_eager_in(in, p)) {
            add_pull(ctx, RMACOLL__WIN_EAGER, p, in->eager_in_off[p]);
        }
    }
}

/* Receiver side of the node eager path: each node peer's block that is in
 * its node payload is copied out by this rank into its own receive buffer
 * (round 0, like the self copy). */
void rmacoll__plan_node_eager_pulls(rmacoll__plan_ctx_t *ctx)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int A = topo->node_of[in->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (in->recvcounts[p] != 0 && rmacoll__plan_node_eager_in(in, p)) {
            add_pull(ctx, RMACOLL__WIN_NODE_EAGER, p, in->node_eager_off[l]);
        }
    }
}
