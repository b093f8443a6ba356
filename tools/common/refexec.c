/*
 * refexec.c - the reference executor (see refexec.h): builds every rank's
 * plan from global count matrices and runs them against simulated
 * windows, signal words and relay slots, checking the protocol. Creation,
 * preparation and the run are here; the provenance intervals and windows
 * are rx_mem.c, one task's execution rx_task.c, the checks after a call
 * rx_check.c (refexec_int.h is what they share).
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

static uint64_t rx_rand(refexec_t *ex)
{
    return rmacoll_case_rand(&ex->rng);
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
            refexec_destroy(ex);
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
            refexec_destroy(ex);
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
            refexec_destroy(ex);
            return RMACOLL_ERR_NO_MEMORY;
        }
        st = rx_check_slot_layout(ex, r, errbuf, errlen);
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
    /* own arrays: counts from the matrices, displacements from counts */
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
    /* metadata each rank learns from its peers */
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
    /* plans */
    rmacoll__ctrl_host_paths(topo, &ex->cfg, &lim);
    scratch = calloc((size_t)rx_max_node_size(topo) + 1, sizeof(uint64_t));
    if (scratch == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < n; r++) {
        rx_rank_t *k = &ex->rk[r];
        rmacoll__plan_input_t in;
        rmacoll_status_t st;

        memset(&in, 0, sizeof(in));
        in.topo = topo;
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
        rmacoll__plan_in_paths(&in, &rows, &lim, k->eager_in_off, k->direct_in,
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

/* 1 when wait t of rank r holds; 0 (and, with why, what it waits for). */
static int rx_wait_holds(refexec_t *ex, int r, const rmacoll__task_t *t, char *why,
                         size_t whylen)
{
    rx_rank_t *k = &ex->rk[r];

    if (t->op != RMACOLL__OP_WAIT || t->sig >= k->nsig) {
        char d[320];

        rx_describe(d, sizeof(d), r, t);
        rx_fail(ex, "%s: not a wait on an own signal word", d);
        return 0;
    }
    if (k->sig[t->sig] < t->sig_value) {
        if (why != NULL) {
            snprintf(why, whylen, "rank %d round %d waits word %u >= %" PRIu64
                     " from rank %d (now %" PRIu64 ")", r, t->round, t->sig,
                     t->sig_value, t->peer, k->sig[t->sig]);
        }
        return 0;
    }
    return 1;
}

/* The head step of lane l of rank r, or NULL when the lane is done. */
static const rmacoll__flow_step_t *rx_head(const rx_rank_t *k, size_t l)
{
    uint32_t s = k->lstep[l];

    return s < k->flow.lane_step[l + 1] ? &k->flow.steps[s] : NULL;
}

/* 1 when lane l of rank r can move: its head is a put step, or a wait that
 * holds. The FINAL lane moves only once every other lane is done. */
static int rx_lane_ready(refexec_t *ex, int r, size_t l, char *why, size_t whylen)
{
    rx_rank_t *k = &ex->rk[r];
    const rmacoll__flow_step_t *s = rx_head(k, l);

    if (s == NULL) {
        return 0;
    }
    if (rmacoll__flow_is_final(&k->flow, l)) {
        for (size_t o = 0; o + 1 < k->flow.nlanes; o++) {
            if (rx_head(k, o) != NULL) {
                return 0;
            }
        }
    }
    return !s->wait || rx_wait_holds(ex, r, &k->flow.tasks[s->first], why, whylen);
}

static void rx_finish(refexec_t *ex, int r)
{
    ex->rk[r].done = 1;
    /* the call returns here: the user may read the buffer now */
    rx_check_recv_done(ex, r);
}

/*
 * One step of rank r; 1 if it progressed. Dataflow (core/plan/flow.h): a
 * lane is picked at random among those that can move; a wait that holds
 * is passed, a put step issues a few of its puts (order kept inside the
 * lane). Any interleaving of lanes is one the runtime may take.
 */
static int rx_step(refexec_t *ex, int r)
{
    rx_rank_t *k = &ex->rk[r];
    size_t nl = k->flow.nlanes, pick = SIZE_MAX, nready = 0;
    const rmacoll__flow_step_t *s;
    int nput;

    for (size_t l = 0; l < nl && !ex->failed; l++) {
        if (rx_lane_ready(ex, r, l, NULL, 0) && rx_rand(ex) % ++nready == 0) {
            pick = l; /* reservoir: each ready lane alike */
        }
    }
    if (pick == SIZE_MAX) {
        size_t l = 0;

        while (l < nl && rx_head(k, l) == NULL) {
            l++;
        }
        if (l == nl && !ex->failed) {
            rx_finish(ex, r);
            return 1;
        }
        return 0;
    }
    s = rx_head(k, pick);
    if (s->wait) {
        k->lstep[pick]++;
        return 1;
    }
    nput = 1 + (int)(rx_rand(ex) % 4);
    while (nput-- > 0 && k->lput[pick] < s->count && !ex->failed) {
        const rmacoll__task_t *t = &k->flow.tasks[s->first + k->lput[pick]];

        if (t->op != RMACOLL__OP_PUT) {
            rx_fail(ex, "rank %d round %d: a wait in a put step", r, t->round);
            return 1;
        }
        rx_put(ex, r, t);
        k->lput[pick]++;
    }
    if (k->lput[pick] == s->count) {
        k->lput[pick] = 0;
        k->lstep[pick]++;
    }
    return 1;
}

/* Rank r's flow and lane cursors for this call. */
static int rx_flow_start(refexec_t *ex, int r)
{
    rx_rank_t *k = &ex->rk[r];

    if (rmacoll__flow_build(&k->flow, &k->plan, ex->topo) != RMACOLL_SUCCESS) {
        return -1;
    }
    if (k->flow.nlanes > k->lcap) {
        uint32_t *a = realloc(k->lstep, k->flow.nlanes * sizeof(*a));
        uint32_t *b = a ? realloc(k->lput, k->flow.nlanes * sizeof(*b)) : NULL;

        if (a != NULL) {
            k->lstep = a;
        }
        if (b == NULL) {
            return -1;
        }
        k->lput = b;
        k->lcap = k->flow.nlanes;
    }
    for (size_t l = 0; l < k->flow.nlanes; l++) {
        k->lstep[l] = k->flow.lane_step[l];
        k->lput[l] = 0;
    }
    return 0;
}

rmacoll_status_t refexec_execute(refexec_t *ex, refexec_result_t *res)
{
    int n = ex->n;
    int *order;
    int ndone, slow;
    char why[256];

    ex->res = res;
    if (!ex->prepared) {
        rx_fail(ex, "execute without a successful prepare");
        return RMACOLL_ERR_INTERNAL;
    }
    order = malloc((size_t)n * sizeof(int));
    if (order == NULL) {
        rx_fail(ex, "out of memory");
        return RMACOLL_ERR_NO_MEMORY;
    }
    /* fresh user buffers for this call */
    for (int r = 0; r < n && !ex->failed; r++) {
        rx_rank_t *k = &ex->rk[r];
        uint64_t ssz = k->win[RMACOLL__WIN_SEND].size;
        uint64_t rsz = k->win[RMACOLL__WIN_RECV].size;

        if (win_alloc(ex, &k->win[RMACOLL__WIN_SEND], ssz) != 0 ||
            win_alloc(ex, &k->win[RMACOLL__WIN_RECV], rsz) != 0) {
            rx_fail(ex, "out of memory for rank %d's buffers (%" PRIu64 " + %"
                    PRIu64 " bytes)", r, ssz, rsz);
            break;
        }
        if (!ex->opts.virtual_mode) {
            rmacoll_fill_send(win_ptr(ex, &k->win[RMACOLL__WIN_SEND], 0),
                              (size_t)ssz, ex->esize, r, n, k->sendcounts,
                              k->sdispls, ex->iter);
        }
        k->recv_written = 0;
        if (rx_flow_start(ex, r) != 0) {
            rx_fail(ex, "out of memory for rank %d's dataflow order", r);
            break;
        }
        k->done = k->plan.ntasks == 0;
        ex->stats.tasks += k->plan.ntasks;
        ex->stats.batches += k->plan.nbatches;
        if (k->plan.nbatches > 0 &&
            k->plan.batches[k->plan.nbatches - 1].round > ex->stats.max_round) {
            ex->stats.max_round = k->plan.batches[k->plan.nbatches - 1].round;
        }
        for (size_t t = 0; t < k->plan.ntasks; t++) {
            ex->stats.waits += k->plan.tasks[t].op == RMACOLL__OP_WAIT;
        }
        rx_check_plan_shape(ex, r);
    }
    for (int r = 0; r < n && !ex->failed; r++) {
        if (ex->rk[r].done) {  /* nothing to do: returns at once */
            rx_check_recv_done(ex, r);
        }
    }
    /* one rank per call (or none) lags as far as the others let it */
    slow = (int)(rx_rand(ex) % (uint64_t)(n + 1)) - 1;
    ndone = 0;
    while (!ex->failed) {
        int progressed = 0;

        ndone = 0;
        for (int r = 0; r < n; r++) {
            order[r] = r;
            ndone += ex->rk[r].done;
        }
        if (ndone == n) {
            break;
        }
        for (int r = n - 1; r > 0; r--) {
            int j = (int)(rx_rand(ex) % (uint64_t)(r + 1));
            int tmp = order[r];

            order[r] = order[j];
            order[j] = tmp;
        }
        for (int i = 0; i < n && !ex->failed; i++) {
            if (order[i] != slow && !ex->rk[order[i]].done &&
                rx_step(ex, order[i])) {
                progressed = 1;
                ex->stats.steps++;
            }
        }
        /* the slow rank moves only when nobody else can */
        if (!progressed && slow >= 0 && !ex->failed && !ex->rk[slow].done &&
            rx_step(ex, slow)) {
            progressed = 1;
            ex->stats.steps++;
        }
        if (!progressed && !ex->failed) {
            char msg[900];
            size_t len = 0;

            msg[0] = '\0';
            for (int r = 0; r < n && len + 1 < sizeof(msg); r++) {
                if (!ex->rk[r].done) {
                    why[0] = '\0';
                    for (size_t l = 0; l < ex->rk[r].flow.nlanes && why[0] == '\0'; l++) {
                        rx_lane_ready(ex, r, l, why, sizeof(why));
                    }
                    len += (size_t)snprintf(msg + len, sizeof(msg) - len,
                                            "%s%s", len ? "; " : "", why);
                }
            }
            rx_fail(ex, "deadlock: %s", msg);
        }
    }
    free(order);
    if (!ex->failed) {
        rx_check_end(ex);
    }
    /* the call is over: commit the signal state */
    for (int r = 0; r < n; r++) {
        rmacoll__sigstate_t *tmp = ex->rk[r].st;

        ex->rk[r].st = ex->rk[r].stn;
        ex->rk[r].stn = tmp;
    }
    ex->prepared = 0;
    ex->iter++;
    if (!ex->failed) {
        ex->stats.calls++;
    }
    res->stats = ex->stats;
    return ex->failed ? RMACOLL_ERR_INTERNAL : RMACOLL_SUCCESS;
}

rmacoll_status_t refexec_call(refexec_t *ex, const rmacoll_case_t *c,
                              refexec_result_t *res)
{
    rmacoll_status_t st = refexec_prepare(ex, c, res);

    if (ex->failed) {
        return RMACOLL_ERR_INTERNAL;
    }
    if (st != RMACOLL_SUCCESS) {
        res->stats = ex->stats;
        if (c->has_mismatch && st == RMACOLL_ERR_MISMATCH) {
            /* every rank fails, nothing runs: no buffer written, no signal
             * raised, no state advanced (the states were built aside) */
            return RMACOLL_SUCCESS;
        }
        rx_fail(ex, "plan build failed on rank %d (%d ranks): %s: %s",
                res->fail_rank, res->nfail_ranks, rmacoll_status_name(st),
                res->plan_errmsg);
        return RMACOLL_ERR_INTERNAL;
    }
    if (c->has_mismatch) {
        rx_fail(ex, "case %s has a count mismatch but every plan built",
                c->name);
        return RMACOLL_ERR_INTERNAL;
    }
    return refexec_execute(ex, res);
}

rmacoll_status_t refexec_run(const refexec_opts_t *opts,
                             const rmacoll_case_t *c, refexec_result_t *res)
{
    refexec_t *ex;
    char err[256];
    rmacoll_status_t st;
    int ncalls = opts->ncalls > 0 ? opts->ncalls : 1;

    memset(res, 0, sizeof(*res));
    st = refexec_create(opts, c->nranks, c->node_of, &ex, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        res->ok = 0;
        res->status = st;
        snprintf(res->msg, sizeof(res->msg), "%s", err);
        return st;
    }
    for (int k = 0; k < ncalls; k++) {
        res->call = k;
        st = refexec_call(ex, c, res);
        if (st != RMACOLL_SUCCESS) {
            break;
        }
    }
    refexec_destroy(ex);
    return st;
}
