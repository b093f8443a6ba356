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

/* Rank a's row of the case's send matrix (rmacoll__plan_rows_t). */
static const int64_t *case_row(const void *ctx, int a)
{
    const rmacoll_case_t *c = ((const planin_ctx_t *)ctx)->c;

    return c->send + (size_t)a * (size_t)c->nranks;
}

/* The arrays of the eager and direct paths for rank r's node, grown. */
static rmacoll_status_t grow_paths(planin_t *pi, const planin_ctx_t *ctx, int r)
{
    size_t n = (size_t)ctx->c->nranks;
    size_t ls = (size_t)ctx->topo->node_size[ctx->topo->node_of[r]];
    uint64_t *off;
    uint8_t *d;

    if ((off = realloc(pi->node_eager_off, ls * sizeof(uint64_t))) == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->node_eager_off = off;
    if ((off = realloc(pi->eager_scratch, ls * sizeof(uint64_t))) == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->eager_scratch = off;
    if ((off = realloc(pi->eager_in_off, (n ? n : 1) * sizeof(uint64_t))) == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->eager_in_off = off;
    if ((d = realloc(pi->direct_in, n ? n : 1)) == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    pi->direct_in = d;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t planin_paths(planin_t *pi, const planin_ctx_t *ctx, int r,
                              const rmacoll__plan_paths_t *lim)
{
    const rmacoll__plan_rows_t rows = {case_row, ctx};
    rmacoll_status_t st = grow_paths(pi, ctx, r);

    if (st == RMACOLL_SUCCESS) {
        rmacoll__plan_in_paths(&pi->in, &rows, lim, pi->eager_in_off, pi->direct_in,
                               pi->node_eager_off, pi->eager_scratch);
    }
    return st;
}

rmacoll_status_t planin_eager(planin_t *pi, const planin_ctx_t *ctx, int r,
                              uint64_t eager_max, uint64_t cap)
{
    rmacoll__plan_paths_t lim = {eager_max, cap, pi->in.direct_min_bytes};

    return planin_paths(pi, ctx, r, &lim);
}

rmacoll_status_t planin_direct(planin_t *pi, const planin_ctx_t *ctx, int r,
                               uint64_t direct_min)
{
    rmacoll__plan_paths_t lim = {pi->in.eager_max_bytes, pi->in.node_eager_max_bytes,
                                 direct_min};

    return planin_paths(pi, ctx, r, &lim);
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
