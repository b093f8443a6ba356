/*
 * refexec.c - the reference executor (see refexec.h): builds every rank's
 * plan from global count matrices and runs them against simulated
 * windows, signal words and relay slots, checking the protocol. Creation
 * and preparation (every rank's plan from the case) are here; the run of
 * a call, rank by rank in a random interleaving, is rx_exec.c; the
 * provenance intervals and windows are rx_mem.c, one task's execution
 * rx_task.c, the checks after a call rx_check.c (refexec_int.h is what
 * they share).
 */
#include "refexec.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctrl/ctrl.h"
#include "core/ctrl/paths.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "refexec_int.h"

/* ------------------------------------------------------------ helpers */

void rx_fail(refexec_t *ex, const char *fmt, ...)
{
    va_list ap;

    if (ex->failed) {
        return;
    }
    ex->failed = 1;
    if (ex->res != NULL) {
        int n = snprintf(ex->res->msg, sizeof(ex->res->msg),
                         "call %" PRIu64 ": ", ex->iter);
        va_start(ap, fmt);
        vsnprintf(ex->res->msg + n, sizeof(ex->res->msg) - (size_t)n, fmt, ap);
        va_end(ap);
        ex->res->ok = 0;
    }
}

void refexec_opts_init(refexec_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->scheduler = "shift";
    o->relay_enabled = 1;
    o->relay_buffer_bytes = 1u << 20;
    o->relay_slots = 4;
    o->max_task_bytes = 1ull << 30;
    o->seed = 1;
    o->ncalls = 1;
    o->guard_bytes = 64;
}

/* ------------------------------------------------------ create/destroy */

static int64_t *rx_ialloc(size_t n)
{
    return calloc(n ? n : 1, sizeof(int64_t));
}

static rmacoll_status_t rx_check_slot_layout(refexec_t *ex, int r,
                                             char *errbuf, size_t errlen)
{
    rx_rank_t *k = &ex->rk[r];
    uint32_t S = ex->cfg.relay_slots;
    size_t m = (size_t)k->nin * S;

    if (m == 0 || m > 4096) {
        return RMACOLL_SUCCESS;
    }
    for (size_t a = 0; a < m; a++) {
        uint64_t oa = rmacoll__plan_slot_off(ex->topo, &ex->cfg, r,
                                             (int)(a / S), (uint32_t)(a % S));

        if (oa + k->slot_bytes > ex->cfg.relay_buffer_bytes) {
            snprintf(errbuf, errlen, "rank %d: relay slot %zu at %" PRIu64
                     " (+%" PRIu64 ") ends past the relay buffer (%" PRIu64 ")",
                     r, a, oa, k->slot_bytes, ex->cfg.relay_buffer_bytes);
            return RMACOLL_ERR_INTERNAL;
        }
        for (size_t b = a + 1; b < m; b++) {
            uint64_t ob = rmacoll__plan_slot_off(ex->topo, &ex->cfg, r,
                                                 (int)(b / S),
                                                 (uint32_t)(b % S));

            if (oa < ob + k->slot_bytes && ob < oa + k->slot_bytes) {
                snprintf(errbuf, errlen, "rank %d: relay slots %zu and %zu "
                         "overlap (%" PRIu64 ", %" PRIu64 ")", r, a, b, oa, ob);
                return RMACOLL_ERR_INTERNAL;
            }
        }
    }
    return RMACOLL_SUCCESS;
}

void refexec_destroy(refexec_t *ex)
{
    if (ex == NULL) {
        return;
    }
    for (int r = 0; ex->rk != NULL && r < ex->n; r++) {
        rx_rank_t *k = &ex->rk[r];

        rmacoll__plan_fini(&k->plan);
        rmacoll__flow_fini(&k->flow);
        free(k->lstep);
        free(k->lput);
        rmacoll__sigstate_destroy(k->st);
        rmacoll__sigstate_destroy(k->stn);
        free(k->sig);
        free(k->writer);
        for (int w = 0; w < RX_NWIN; w++) {
            win_free(&k->win[w]);
        }
        free(k->slots);
        free(k->arrived);
        free(k->credited);
        free(k->sendcounts);
        free(k->sdispls);
        free(k->recvcounts);
        free(k->rdispls);
        free(k->peer_rcount);
        free(k->node_eager_off);
        free(k->eager_in_off);
        free(k->direct_in);
        free(k->peer_rdispl);
        free(k->chan_sendcount);
        free(k->chan_rcount);
        free(k->chan_rdispl);
    }
    free(ex->rk);
    rmacoll__sched_close(&ex->sched);
    rmacoll__topo_destroy(ex->topo);
    free(ex);
}


/* Rank r's plan, signal state, arrays and relay window, and the check of
 * its slot layout. On a failure the caller destroys ex. */
static rmacoll_status_t rx_rank_create(refexec_t *ex, int r, char *errbuf,
                                       size_t errlen)
{
    const refexec_opts_t *opts = &ex->opts;
    int nranks = ex->n;
    rx_rank_t *k = &ex->rk[r];
    int ls = ex->topo->node_size[ex->topo->node_of[r]];
    size_t nc;

    rmacoll__plan_init(&k->plan);
    rmacoll__flow_init(&k->flow);
    k->nin = rmacoll__plan_nin(ex->topo, &ex->cfg, r);
    k->slot_bytes = rmacoll__plan_slot_bytes(ex->topo, &ex->cfg, r);
    k->nsig = rmacoll__sig_count(ex->topo, &ex->cfg, r);
    nc = (size_t)k->nin * (size_t)ls;
    if (rmacoll__sigstate_create(ex->topo, &ex->cfg, r, &k->st) != 0 ||
        rmacoll__sigstate_create(ex->topo, &ex->cfg, r, &k->stn) != 0) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    k->sig = calloc(k->nsig + 1, sizeof(uint64_t));
    k->writer = malloc((k->nsig + 1) * sizeof(int));
    k->slots = calloc((size_t)k->nin * opts->relay_slots + 1,
                      sizeof(rx_slot_t));
    k->arrived = calloc((size_t)k->nin + 1, sizeof(uint64_t));
    k->credited = calloc((size_t)k->nin + 1, sizeof(uint64_t));
    k->sendcounts = rx_ialloc((size_t)nranks);
    k->sdispls = rx_ialloc((size_t)nranks);
    k->recvcounts = rx_ialloc((size_t)nranks);
    k->rdispls = rx_ialloc((size_t)nranks);
    k->peer_rcount = rx_ialloc((size_t)nranks);
    k->node_eager_off = calloc((size_t)ls + 1,
                               sizeof(uint64_t));
    k->eager_in_off = calloc((size_t)nranks + 1, sizeof(uint64_t));
    k->direct_in = calloc((size_t)nranks + 1, 1);
    k->peer_rdispl = rx_ialloc((size_t)nranks);
    k->chan_sendcount = rx_ialloc(nc);
    k->chan_rcount = rx_ialloc(nc);
    k->chan_rdispl = rx_ialloc(nc);
    if (!k->sig || !k->writer || !k->slots || !k->arrived ||
        !k->credited || !k->sendcounts || !k->sdispls ||
        !k->recvcounts || !k->rdispls || !k->peer_rcount || !k->node_eager_off || !k->eager_in_off ||
        !k->direct_in ||
        !k->peer_rdispl || !k->chan_sendcount || !k->chan_rcount ||
        !k->chan_rdispl) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (uint32_t s = 0; s <= k->nsig; s++) {
        k->writer[s] = -1;
    }
    if (win_alloc(ex, &k->win[RMACOLL__WIN_RELAY],
                  opts->relay_enabled && k->nin > 0
                      ? opts->relay_buffer_bytes
                      : 0) != 0) {
        snprintf(errbuf, errlen, "refexec: no memory for a relay buffer "
                 "of %" PRIu64 " bytes", opts->relay_buffer_bytes);
        return RMACOLL_ERR_NO_MEMORY;
    }
    return rx_check_slot_layout(ex, r, errbuf, errlen);
}

rmacoll_status_t refexec_create(const refexec_opts_t *opts, int nranks,
                                const int *node_of, refexec_t **out,
                                char *errbuf, size_t errlen)
{
    refexec_t *ex;
    rmacoll_status_t st;
    char tmp[256];

    *out = NULL;
    if (errbuf == NULL || errlen == 0) {
        errbuf = tmp;
        errlen = sizeof(tmp);
    }
    errbuf[0] = '\0';
    if (opts == NULL || nranks < 1 || node_of == NULL) {
        snprintf(errbuf, errlen, "refexec: bad arguments");
        return RMACOLL_ERR_INVALID_ARG;
    }
    ex = calloc(1, sizeof(*ex));
    if (ex == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    ex->opts = *opts;
    if (ex->opts.scheduler == NULL) {
        ex->opts.scheduler = "shift";
    }
    ex->n = nranks;
    ex->cfg.relay_enabled = opts->relay_enabled;
    ex->cfg.relay_buffer_bytes = opts->relay_buffer_bytes;
    ex->cfg.relay_slots = opts->relay_slots;
    ex->cfg.max_task_bytes = opts->max_task_bytes;
    ex->cfg.eager_max_bytes = opts->eager_max_bytes;
    ex->cfg.node_eager_max_bytes = opts->node_eager_max_bytes;
    ex->cfg.direct_min_bytes = opts->direct_min_bytes;
    ex->rng = opts->seed * 0x9e3779b97f4a7c15ull + 7;
    st = rmacoll__topo_create(nranks, node_of, &ex->topo);
    if (st != RMACOLL_SUCCESS) {
        snprintf(errbuf, errlen, "refexec: topology: %s",
                 rmacoll_status_string(st));
        refexec_destroy(ex);
        return st;
    }
    st = rmacoll__sched_open(ex->opts.scheduler, opts->scheduler_plugin,
                             ex->topo, opts->sched_seed, &ex->sched, errbuf,
                             errlen);
    if (st != RMACOLL_SUCCESS) {
        refexec_destroy(ex);
        return st;
    }
    ex->rk = calloc((size_t)nranks, sizeof(rx_rank_t));
    if (ex->rk == NULL) {
        refexec_destroy(ex);
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nranks; r++) {
        st = rx_rank_create(ex, r, errbuf, errlen);
        if (st != RMACOLL_SUCCESS) {
            refexec_destroy(ex);
            return st;
        }
    }
    *out = ex;
    return RMACOLL_SUCCESS;
}

const rmacoll__plan_t *refexec_plan(const refexec_t *ex, int r)
{
    if (r < 0 || r >= ex->n || !ex->rk[r].plan_ok) {
        return NULL;
    }
    return &ex->rk[r].plan;
}

const rmacoll_topo_t *refexec_topo(const refexec_t *ex)
{
    return ex->topo;
}

const char *refexec_plan_errmsg(const refexec_t *ex, int r)
{
    if (r < 0 || r >= ex->n || ex->rk[r].plan_ok) {
        return "";
    }
    return ex->rk[r].plan.errmsg;
}

/* ------------------------------------------------------------ prepare */

static void res_reset(refexec_t *ex, refexec_result_t *res)
{
    int call = res->call;

    memset(res, 0, sizeof(*res));
    res->call = call;
    res->ok = 1;
    res->fail_rank = -1;
    res->status = RMACOLL_SUCCESS;
    ex->res = res;
    ex->failed = 0;
}

/* Rank a's sendcounts (rmacoll__plan_rows_t). */
static const int64_t *rx_send_row(const void *ex, int a)
{
    return ((const refexec_t *)ex)->rk[a].sendcounts;
}

static int rx_max_node_size(const rmacoll_topo_t *topo)
{
    int m = 0;

    for (int b = 0; b < topo->nnodes; b++) {
        m = topo->node_size[b] > m ? topo->node_size[b] : m;
    }
    return m;
}

/* Same partition of ranks into nodes (ids may be numbered differently). */
static int rx_same_topology(const refexec_t *ex, const rmacoll_case_t *c)
{
    if (c->nranks != ex->n) {
        return 0;
    }
    for (int a = 0; a < ex->n; a++) {
        for (int b = a + 1; b < ex->n; b++) {
            if ((c->node_of[a] == c->node_of[b]) !=
                (ex->topo->node_of[a] == ex->topo->node_of[b])) {
                return 0;
            }
        }
    }
    return 1;
}

/* Every rank's own arrays: counts from the matrices, displacements from
 * the counts (gapped: gap elements around every block). */
static void rx_prepare_counts(refexec_t *ex, const rmacoll_case_t *c, int64_t gap)
{
    int n = ex->n;

    for (int r = 0; r < n; r++) {
        rx_rank_t *k = &ex->rk[r];
        int64_t sext, rext;

        for (int j = 0; j < n; j++) {
            k->sendcounts[j] = c->send[(size_t)r * n + j];
            k->recvcounts[j] = c->recv[(size_t)j * n + r];
        }
        sext = gap ? rmacoll_displs_gapped(n, k->sendcounts, gap, k->sdispls)
                   : rmacoll_displs_contiguous(n, k->sendcounts, k->sdispls);
        rext = gap ? rmacoll_displs_gapped(n, k->recvcounts, gap, k->rdispls)
                   : rmacoll_displs_contiguous(n, k->recvcounts, k->rdispls);
        k->win[RMACOLL__WIN_SEND].size = (uint64_t)sext * ex->esize;
        k->win[RMACOLL__WIN_RECV].size = (uint64_t)rext * ex->esize;
    }
}

/* The metadata each rank learns from its peers: their receive counts and
 * displacements of it, and per incoming channel the node's counts. */
static void rx_prepare_peers(refexec_t *ex)
{
    int n = ex->n;
    const rmacoll_topo_t *topo = ex->topo;

    for (int r = 0; r < n; r++) {
        rx_rank_t *k = &ex->rk[r];
        int node = topo->node_of[r];
        int ls = topo->node_size[node];

        for (int j = 0; j < n; j++) {
            k->peer_rcount[j] = ex->rk[j].recvcounts[r];
            k->peer_rdispl[j] = ex->rk[j].rdispls[r];
        }
        for (int ch = 0; ch < k->nin; ch++) {
            int src = rmacoll__plan_chan_src(topo, r, ch);

            for (int l = 0; l < ls; l++) {
                int m = rmacoll__topo_rank(topo, node, l);
                size_t idx = (size_t)ch * ls + l;

                k->chan_sendcount[idx] = ex->rk[src].sendcounts[m];
                k->chan_rcount[idx] = ex->rk[m].recvcounts[src];
                k->chan_rdispl[idx] = ex->rk[m].rdispls[src];
            }
        }
    }
}

/* Rank r's plan; a failure is counted in res (the first one kept). */
static void rx_prepare_plan(refexec_t *ex, int r, const rmacoll__plan_rows_t *rows,
                            const rmacoll__plan_paths_t *lim, uint64_t *scratch,
                            refexec_result_t *res)
{
    rx_rank_t *k = &ex->rk[r];
    rmacoll__plan_input_t in;
    rmacoll_status_t st;

    memset(&in, 0, sizeof(in));
    in.topo = ex->topo;
    in.rank = r;
    in.esize = ex->esize;
    in.cfg = &ex->cfg;
    in.sched = &ex->sched;
    in.sendcounts = k->sendcounts;
    in.sdispls = k->sdispls;
    in.recvcounts = k->recvcounts;
    in.rdispls = k->rdispls;
    in.peer_rcount = k->peer_rcount;
    in.peer_rdispl = k->peer_rdispl;
    in.chan_sendcount = k->chan_sendcount;
    in.chan_rcount = k->chan_rcount;
    in.chan_rdispl = k->chan_rdispl;
    /* the eager path, node eager path and direct streams as the
     * runtime gives them a valid host call (core/ctrl/paths.h), from
     * the rows each rank learns (core/plan/plan_in.h) */
    rmacoll__plan_in_paths(&in, rows, lim, k->eager_in_off, k->direct_in,
                           k->node_eager_off, scratch);
    rmacoll__sigstate_copy(k->stn, k->st);
    st = rmacoll__plan_build(&in, k->st, k->stn, &k->plan);
    k->plan_ok = st == RMACOLL_SUCCESS;
    if (st != RMACOLL_SUCCESS) {
        if (res->fail_rank < 0) {
            res->fail_rank = r;
            res->status = st;
            snprintf(res->plan_errmsg, sizeof(res->plan_errmsg), "%s",
                     k->plan.errmsg);
        }
        res->nfail_ranks++;
    }
}

rmacoll_status_t refexec_prepare(refexec_t *ex, const rmacoll_case_t *c,
                                 refexec_result_t *res)
{
    int n = ex->n;
    const rmacoll_topo_t *topo = ex->topo;
    int64_t gap = ex->opts.gapped ? 3 : 0;
    const rmacoll__plan_rows_t rows = {rx_send_row, ex};
    rmacoll__plan_paths_t lim;
    uint64_t *scratch;

    res_reset(ex, res);
    ex->prepared = 0;
    ex->c = c;
    ex->esize = rmacoll_datatype_size(c->dtype);
    if (!rx_same_topology(ex, c) || ex->esize == 0) {
        rx_fail(ex, "case %s does not match the executor's topology", c->name);
        res->status = RMACOLL_ERR_INVALID_ARG;
        return res->status;
    }
    rx_prepare_counts(ex, c, gap);
    rx_prepare_peers(ex);
    /* plans */
    rmacoll__ctrl_host_paths(topo, &ex->cfg, &lim);
    scratch = calloc((size_t)rx_max_node_size(topo) + 1, sizeof(uint64_t));
    if (scratch == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < n; r++) {
        rx_prepare_plan(ex, r, &rows, &lim, scratch, res);
    }
    free(scratch);
    ex->prepared = res->status == RMACOLL_SUCCESS;
    return res->status;
}

int refexec_corrupt(refexec_t *ex, int r, int op, uint32_t flags, size_t k,
                    refexec_field_t field, int64_t delta)
{
    rmacoll__plan_t *p;

    if (!ex->prepared || r < 0 || r >= ex->n) {
        return 0;
    }
    p = &ex->rk[r].plan;
    for (size_t t = 0; t < p->ntasks; t++) {
        rmacoll__task_t *x = &p->tasks[t];

        if (x->op != op || (x->flags & flags) != flags) {
            continue;
        }
        if (k-- > 0) {
            continue;
        }
        switch (field) {
        case REFEXEC_DST_OFF: x->dst_off += (uint64_t)delta; break;
        case REFEXEC_SRC_OFF: x->src_off += (uint64_t)delta; break;
        case REFEXEC_BYTES: x->bytes += (uint64_t)delta; break;
        case REFEXEC_SIG_VALUE: x->sig_value += (uint64_t)delta; break;
        }
        return 1;
    }
    return 0;
}
