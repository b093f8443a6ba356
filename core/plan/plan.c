/*
 * plan.c - the relay planner's entry point: rmacoll__plan_build (one rank's
 * batches of tasks for one AlltoAllV call, from the topology, its own
 * counts and the metadata of its peers), the count checks and final waits
 * it runs, and the plan's lifetime (init, fini). Pure and deterministic;
 * the protocol is described in plan.h and docs/protocol.md. The pieces it
 * calls: plan_layout.c (signal words, relay slots, signal state),
 * plan_relay.c (relay channels and streams), plan_direct.c (direct, eager
 * and node eager paths), plan_tasks.c (task list, sort, batches).
 */
#include "core/plan/plan_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan/topo.h"

void rmacoll__plan_init(rmacoll__plan_t *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->err_peer = -1;
}

void rmacoll__plan_fini(rmacoll__plan_t *plan)
{
    free(plan->tasks);
    free(plan->scratch);
    free(plan->batches);
    free(plan->bucket);
    free(plan->direct_to);
    rmacoll__plan_topo_free(plan->pt);
    rmacoll__plan_init(plan);
}

static rmacoll_status_t mismatch(rmacoll__plan_t *plan, int sender,
                                 int receiver, int64_t sent, int64_t expected,
                                 int other)
{
    snprintf(plan->errmsg, sizeof(plan->errmsg),
             "count mismatch: rank %d sends %lld elements to rank %d, which "
             "expects %lld (found by rank %d)",
             sender, (long long)sent, receiver, (long long)expected, plan->rank);
    plan->err_peer = other;
    return RMACOLL_ERR_MISMATCH;
}

/* Checks every count this rank can see, and the relay slot size. */
static rmacoll_status_t plan_check(const rmacoll__plan_ctx_t *ctx)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll__plan_topo_t *pt = ctx->pt;
    rmacoll__plan_t *plan = ctx->plan;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int node = topo->node_of[me];
    int ls = topo->node_size[node];
    int nin = pt->nin;

    if (in->sendcounts[me] != in->recvcounts[me]) {
        return mismatch(plan, me, me, in->sendcounts[me], in->recvcounts[me], me);
    }
    for (int j = 0; j < topo->nranks; j++) {
        if (j != me && rmacoll__plan_is_direct(ctx, j) && in->sendcounts[j] != in->peer_rcount[j]) {
            return mismatch(plan, me, j, in->sendcounts[j], in->peer_rcount[j], j);
        }
    }
    for (int c = 0; c < nin; c++) {
        int i = pt->chan_src[c];
        for (int l = 0; l < ls; l++) {
            int j = rmacoll__topo_rank(topo, node, l);
            size_t k = (size_t)c * ls + l;
            if (j != me && in->chan_sendcount[k] != in->chan_rcount[k]) {
                return mismatch(plan, i, j, in->chan_sendcount[k],
                                in->chan_rcount[k], i);
            }
        }
    }
    return RMACOLL_SUCCESS;
}

/* Final waits for every complete receive block. */
static void plan_final_waits(rmacoll__plan_ctx_t *ctx, const rmacoll__sigstate_t *st)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int A = topo->node_of[me];
    int round = ctx->plan->ntasks ? ctx->max_round + 1 : 0;

    for (int p = 0; p < topo->nranks; p++) {
        rmacoll__task_t t;
        if (p == me || in->recvcounts[p] == 0 || rmacoll__plan_eager_in(in, p) ||
            rmacoll__plan_node_eager_in(in, p)) {
            continue;
        }
        memset(&t, 0, sizeof(t));
        t.op = RMACOLL__OP_WAIT;
        t.flags = RMACOLL__TASK_DATA;
        t.origin = p;
        t.round = round;
        t.sig = rmacoll__sig_data(p);
        t.sig_value = st->data_in[p] + 1;
        if (rmacoll__plan_xdata_in(in, p)) {
            t.sig = rmacoll__sig_xdata(topo, in->cfg, p);
            t.sig_value = st->xdata_in[p] + 1;
        }
        if (topo->node_of[p] == A) {
            t.path = RMACOLL__PATH_CE;
            t.peer = p;
        } else if (in->cfg->relay_enabled && rmacoll__topo_relay(topo, p, A) != me &&
                   !rmacoll__plan_xdata_in(in, p)) {
            t.path = RMACOLL__PATH_CE;
            t.peer = rmacoll__topo_relay(topo, p, A);
        } else {
            t.path = RMACOLL__PATH_PROXY;
            t.peer = p;
        }
        rmacoll__plan_add_task(ctx, &t);
    }
}

/* This rank's blocks for its node peers travel in its node payload (the
 * node eager path, sender side). */
static int node_eager_send(const rmacoll__plan_input_t *in)
{
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int A = topo->node_of[me];
    uint64_t send_max = in->node_eager_send_max != 0 &&
                                in->node_eager_send_max < in->node_eager_max_bytes
                            ? in->node_eager_send_max : in->node_eager_max_bytes;

    return in->node_eager_max_bytes != 0 &&
           rmacoll__plan_node_eager_bytes(in->sendcounts,
                                          topo->node_members + topo->node_first[A],
                                          topo->node_size[A], topo->local_rank[me],
                                          in->esize, send_max, NULL) != 0;
}

/* Both ends of every relay channel of this rank: its streams to the other
 * nodes, then the incoming channels it relays. */
static rmacoll_status_t plan_relay_streams(rmacoll__plan_ctx_t *ctx,
                                           const rmacoll__sigstate_t *st_in)
{
    const rmacoll_topo_t *topo = ctx->in->topo;
    int A = topo->node_of[ctx->in->rank];
    rmacoll_status_t st;

    for (int B = 0; B < topo->nnodes && ctx->status == RMACOLL_SUCCESS; B++) {
        uint64_t q;
        if (B == A) {
            continue;
        }
        st = rmacoll__plan_stream_out(ctx, st_in, B, &q);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    for (int c = 0; c < ctx->pt->nin && ctx->status == RMACOLL_SUCCESS; c++) {
        uint64_t q;
        st = rmacoll__plan_stream_in(ctx, st_in, c, &q);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Success: advance the state (reads of st_in are over; st_out may alias):
 * one more DATA / XDATA per peer this plan signals or waits on directly,
 * one more chunk, credit or forward per channel signal of the plan. */
static void plan_advance_state(const rmacoll__plan_ctx_t *ctx,
                               const rmacoll__sigstate_t *st_in,
                               rmacoll__sigstate_t *st_out)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll__plan_topo_t *pt = ctx->pt;
    const rmacoll__plan_t *plan = ctx->plan;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int ls = topo->node_size[topo->node_of[me]];

    rmacoll__sigstate_copy(st_out, st_in);
    for (int j = 0; j < topo->nranks; j++) {
        if (j != me && in->sendcounts[j] != 0 && rmacoll__plan_is_direct(ctx, j) &&
            !rmacoll__plan_eager_direct_out(in, j) && !rmacoll__plan_node_eager_out(ctx, j)) {
            if (rmacoll__plan_xdata_out(ctx, j)) {
                st_out->xdata_out[j]++;
            } else {
                st_out->data_out[j]++;
            }
        }
        if (j != me && in->recvcounts[j] != 0 && !rmacoll__plan_eager_in(in, j) &&
            !rmacoll__plan_node_eager_in(in, j)) {
            if (rmacoll__plan_xdata_in(in, j)) {
                st_out->xdata_in[j]++;
            } else {
                st_out->data_in[j]++;
            }
        }
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        const rmacoll__task_t *t = &plan->tasks[k];
        if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_TO_RELAY) &&
            (t->flags & RMACOLL__TASK_SIGNAL)) {
            st_out->chan_out[topo->node_of[t->peer]]++;
        } else if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_CREDIT)) {
            st_out->chan_in[pt->chan_of_src[t->peer]]++;
        } else if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_FORWARD) &&
                   (t->flags & RMACOLL__TASK_SIGNAL)) {
            int c = pt->chan_of_src[t->origin];
            st_out->fwd_out[(size_t)c * ls + topo->local_rank[t->peer]]++;
        }
    }
}

rmacoll_status_t rmacoll__plan_build(const rmacoll__plan_input_t *in,
                                     const rmacoll__sigstate_t *st_in,
                                     rmacoll__sigstate_t *st_out,
                                     rmacoll__plan_t *plan)
{
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    rmacoll__plan_ctx_t ctx = {in, plan, NULL, 0, RMACOLL_SUCCESS, 0, NULL};
    const rmacoll__plan_topo_t *pt;
    rmacoll_status_t st;

    plan->rank = me;
    plan->ntasks = 0;
    plan->nbatches = 0;
    plan->errmsg[0] = '\0';
    plan->err_peer = -1;
    if (in->cfg->relay_slots == 0 || in->esize == 0) {
        snprintf(plan->errmsg, sizeof(plan->errmsg),
                 "relay.slots and the element size must be positive");
        return RMACOLL_ERR_CONFIG;
    }
    pt = rmacoll__plan_topo(plan, topo, in->cfg, me);
    if (pt == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    ctx.pt = pt;
    st = rmacoll__plan_direct_nodes(in, plan);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    ctx.direct_to = plan->direct_to;
    st = plan_check(&ctx);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }

    ctx.node_eager_out = node_eager_send(in);
    rmacoll__plan_direct_puts(&ctx, st_in);
    if (in->node_eager_max_bytes != 0) {
        rmacoll__plan_node_eager_pulls(&ctx);
    }
    if (in->eager_max_bytes != 0) {
        rmacoll__plan_eager_pulls(&ctx);
    }
    if (in->cfg->relay_enabled) {
        st = plan_relay_streams(&ctx, st_in);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    plan_final_waits(&ctx, st_in);
    if (ctx.status != RMACOLL_SUCCESS) {
        return ctx.status;
    }
    st = rmacoll__plan_sort_tasks(plan, ctx.max_round);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = rmacoll__plan_make_batches(plan);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    plan_advance_state(&ctx, st_in, st_out);
    return RMACOLL_SUCCESS;
}
