/*
 * planin.c - one rank's planner input from a global count matrix (see
 * planin.h).
 */
#include "planin.h"

#include <stdlib.h>
#include <string.h>

#include "core/plan/topo.h"

rmacoll_status_t planin_ctx_create(planin_ctx_t *ctx, const rmacoll_case_t *c,
                                   const rmacoll_topo_t *topo,
                                   const rmacoll__plan_cfg_t *cfg,
                                   const rmacoll__sched_t *sched,
                                   int exact_displs)
{
    size_t n = (size_t)c->nranks;

    memset(ctx, 0, sizeof(*ctx));
    ctx->c = c;
    ctx->topo = topo;
    ctx->cfg = cfg;
    ctx->sched = sched;
    ctx->esize = rmacoll_datatype_size(c->dtype);
    ctx->exact = exact_displs != 0;
    if (exact_displs == 2) {
        /* rdispls_j[i] = sum over p < i of recv[p][j], row by row */
        ctx->rdispl = malloc(n * n * sizeof(int64_t));
        if (ctx->rdispl == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        for (size_t j = 0; j < n; j++) {
            ctx->rdispl[j] = 0;
        }
        for (size_t i = 1; i < n; i++) {
            for (size_t j = 0; j < n; j++) {
                ctx->rdispl[i * n + j] =
                    ctx->rdispl[(i - 1) * n + j] + c->recv[(i - 1) * n + j];
            }
        }
    }
    return RMACOLL_SUCCESS;
}

void planin_ctx_destroy(planin_ctx_t *ctx)
{
    free(ctx->rdispl);
    memset(ctx, 0, sizeof(*ctx));
}

void planin_init(planin_t *pi)
{
    memset(pi, 0, sizeof(*pi));
}

void planin_fini(planin_t *pi)
{
    free(pi->sendcounts);
    free(pi->sdispls);
    free(pi->recvcounts);
    free(pi->rdispls);
    free(pi->peer_rcount);
    free(pi->peer_rdispl);
    free(pi->chan_sendcount);
    free(pi->chan_rcount);
    free(pi->chan_rdispl);
    free(pi->node_eager_off);
    free(pi->eager_scratch);
    free(pi->eager_in_off);
    free(pi->direct_in);
    planin_init(pi);
}

rmacoll_status_t planin_eager(planin_t *pi, const planin_ctx_t *ctx, int r,
                              uint64_t eager_max, uint64_t cap)
{
    int relay = pi->in.cfg == NULL || pi->in.cfg->relay_enabled;
    const rmacoll_topo_t *topo = ctx->topo;
    int A = topo->node_of[r];
    int ls = topo->node_size[A];
    const int *members = topo->node_members + topo->node_first[A];
    size_t n = (size_t)ctx->c->nranks;
    uint64_t *off = realloc(pi->node_eager_off, (size_t)ls * sizeof(uint64_t));

    if (off == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->node_eager_off = off;
    off = realloc(pi->eager_scratch, (size_t)ls * sizeof(uint64_t));
    if (off == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->eager_scratch = off;
    for (int l = 0; l < ls && cap != 0; l++) {
        (void)rmacoll__plan_node_eager_bytes(ctx->c->send + (size_t)members[l] * n, members,
                                             ls, l, ctx->esize, cap, pi->eager_scratch);
        pi->node_eager_off[l] = pi->eager_scratch[topo->local_rank[r]];
    }
    pi->in.node_eager_max_bytes = cap;
    pi->in.node_eager_off = cap != 0 ? pi->node_eager_off : NULL;
    off = realloc(pi->eager_in_off, (n ? n : 1) * sizeof(uint64_t));
    if (off == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->eager_in_off = off;
    for (size_t a = 0; a < n && eager_max != 0; a++) {
        off[a] = topo->node_of[a] == A ? RMACOLL__NO_EAGER
                 : relay ? rmacoll__plan_eager_off(ctx->c->send + a * n, members, ls,
                                                   topo->local_rank[r], ctx->esize, eager_max)
                         /* relay off: a's record to r carries r's block alone */
                         : rmacoll__plan_eager_off(ctx->c->send + a * n, &r, 1, 0, ctx->esize,
                                                   eager_max);
    }
    pi->in.eager_max_bytes = eager_max;
    pi->in.eager_in_off = eager_max != 0 ? pi->eager_in_off : NULL;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t planin_direct(planin_t *pi, const planin_ctx_t *ctx, int r,
                               uint64_t direct_min)
{
    size_t n = (size_t)ctx->c->nranks;
    uint8_t *d = realloc(pi->direct_in, n ? n : 1);

    if (d == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->direct_in = d;
    for (size_t a = 0; a < n; a++) {
        d[a] = (uint8_t)rmacoll__plan_direct_in(ctx->topo, r, (int)a, ctx->c->send + a * n,
                                                ctx->esize, pi->in.eager_max_bytes,
                                                direct_min);
    }
    pi->in.direct_min_bytes = direct_min;
    pi->in.direct_in = direct_min != 0 ? pi->direct_in : NULL;
    return RMACOLL_SUCCESS;
}

static int grow(int64_t **a, size_t n)
{
    int64_t *p = realloc(*a, (n ? n : 1) * sizeof(int64_t));

    if (p == NULL) {
        return -1;
    }
    *a = p;
    return 0;
}

rmacoll_status_t planin_fill(planin_t *pi, const planin_ctx_t *ctx, int r)
{
    const rmacoll_case_t *c = ctx->c;
    const rmacoll_topo_t *topo = ctx->topo;
    size_t n = (size_t)c->nranks;
    int node = topo->node_of[r];
    int ls = topo->node_size[node];
    size_t nc = 0, ch = 0;

    if (pi->sendcounts == NULL &&
        (grow(&pi->sendcounts, n) || grow(&pi->sdispls, n) ||
         grow(&pi->recvcounts, n) || grow(&pi->rdispls, n) ||
         grow(&pi->peer_rcount, n) || grow(&pi->peer_rdispl, n))) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    if (ctx->cfg->relay_enabled) {
        for (size_t i = 0; i < n; i++) {
            if (topo->node_of[i] != node &&
                rmacoll__topo_relay(topo, (int)i, node) == r) {
                nc++;
            }
        }
    }
    if (nc * (size_t)ls > pi->chan_cap) {
        size_t cap = nc * (size_t)ls;
        if (grow(&pi->chan_sendcount, cap) || grow(&pi->chan_rcount, cap) ||
            grow(&pi->chan_rdispl, cap)) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        pi->chan_cap = cap;
    }
    for (size_t j = 0; j < n; j++) {
        pi->sendcounts[j] = c->send[(size_t)r * n + j];
        pi->recvcounts[j] = c->recv[j * n + (size_t)r];
        pi->peer_rcount[j] = c->recv[(size_t)r * n + j];
        pi->peer_rdispl[j] = ctx->rdispl ? ctx->rdispl[(size_t)r * n + j] : 0;
    }
    if (ctx->exact && ctx->rdispl == NULL) {
        /* one rank: rdispls_j[r] = sum over p < r of recv[p][j] */
        for (size_t j = 0; j < n; j++) {
            pi->peer_rdispl[j] = 0;
        }
        for (size_t p = 0; p < (size_t)r; p++) {
            for (size_t j = 0; j < n; j++) {
                pi->peer_rdispl[j] += c->recv[p * n + j];
            }
        }
    }
    rmacoll_displs_contiguous((int)n, pi->sendcounts, pi->sdispls);
    rmacoll_displs_contiguous((int)n, pi->recvcounts, pi->rdispls);
    for (size_t i = 0; i < n && nc > 0; i++) {
        if (topo->node_of[i] == node ||
            rmacoll__topo_relay(topo, (int)i, node) != r) {
            continue;
        }
        for (int l = 0; l < ls; l++) {
            size_t m = (size_t)rmacoll__topo_rank(topo, node, l);
            size_t k = ch * (size_t)ls + (size_t)l;
            pi->chan_sendcount[k] = c->send[i * n + m];
            pi->chan_rcount[k] = c->recv[i * n + m];
            pi->chan_rdispl[k] = ctx->rdispl ? ctx->rdispl[i * n + m] : 0;
        }
        ch++;
    }
    if (ctx->exact && ctx->rdispl == NULL && nc > 0) {
        /* column prefix sums of the node's members at the senders' rows */
        for (int l = 0; l < ls; l++) {
            size_t m = (size_t)rmacoll__topo_rank(topo, node, l);
            int64_t sum = 0;
            ch = 0;
            for (size_t i = 0; i < n; i++) {
                if (topo->node_of[i] != node &&
                    rmacoll__topo_relay(topo, (int)i, node) == r) {
                    pi->chan_rdispl[ch * (size_t)ls + (size_t)l] = sum;
                    ch++;
                }
                sum += c->recv[i * n + m];
            }
        }
    }
    memset(&pi->in, 0, sizeof(pi->in));
    pi->in.topo = topo;
    pi->in.rank = r;
    pi->in.esize = ctx->esize;
    pi->in.cfg = ctx->cfg;
    pi->in.sched = ctx->sched;
    pi->in.sendcounts = pi->sendcounts;
    pi->in.sdispls = pi->sdispls;
    pi->in.recvcounts = pi->recvcounts;
    pi->in.rdispls = pi->rdispls;
    pi->in.peer_rcount = pi->peer_rcount;
    pi->in.peer_rdispl = pi->peer_rdispl;
    pi->in.chan_sendcount = pi->chan_sendcount;
    pi->in.chan_rcount = pi->chan_rcount;
    pi->in.chan_rdispl = pi->chan_rdispl;
    return RMACOLL_SUCCESS;
}
