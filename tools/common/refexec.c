/*
 * refexec.c - the reference executor (see refexec.h): builds every rank's
 * plan from global count matrices and runs them against simulated
 * windows, signal words and relay slots, checking the protocol.
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

#define RX_NWIN 4

/* Provenance interval (virtual mode): bytes [off, off+len) of a window
 * came from origin's send buffer at [ooff, ooff+len). */
typedef struct rx_iv {
    uint64_t off, len;
    int origin;
    uint64_t ooff;
} rx_iv_t;

typedef struct rx_ivlist {
    rx_iv_t *v;
    size_t n, cap;
} rx_ivlist_t;

typedef struct rx_win {
    uint64_t size;          /* window bytes, guards excluded */
    unsigned char *mem;     /* data mode: guard | size | guard */
    rx_ivlist_t iv;         /* virtual mode */
} rx_win_t;

enum { RX_FREE = 0, RX_FILLING = 1, RX_FULL = 2 };

typedef struct rx_slot {
    int state;
    uint64_t filled, forwarded;
} rx_slot_t;

typedef struct rx_rank {
    rmacoll__plan_t plan;
    int plan_ok;
    rmacoll__sigstate_t *st, *stn;    /* before / after the call */
    uint64_t *sig;                    /* [nsig] signal words */
    int *writer;                      /* [nsig] the only writer, or -1 */
    uint32_t nsig;
    rx_win_t win[RX_NWIN];
    int nin;
    uint64_t slot_bytes;
    rx_slot_t *slots;                 /* [nin * S] */
    uint64_t *arrived, *credited;     /* [nin] chunks per channel */
    int64_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    int64_t *peer_rcount, *peer_rdispl;
    int64_t *chan_sendcount, *chan_rcount, *chan_rdispl;
    uint64_t *node_eager_off;         /* [own node size] planner input */
    uint64_t *eager_in_off;           /* [nranks] planner input */
    uint8_t *direct_in;               /* [nranks] planner input */
    uint64_t recv_written;            /* bytes put into RECV this call */
    /* execution */
    size_t bi;
    uint32_t qpos[2];
    int done;
} rx_rank_t;

struct refexec {
    refexec_opts_t opts;
    rmacoll__plan_cfg_t cfg;
    rmacoll_topo_t *topo;
    rmacoll__sched_t sched;
    int n;
    rx_rank_t *rk;
    size_t esize;
    const rmacoll_case_t *c;     /* the prepared case */
    int prepared;
    uint64_t iter;               /* calls executed: fill iteration */
    uint64_t rng;
    int failed;
    refexec_result_t *res;
    refexec_stats_t stats;
};

/* ------------------------------------------------------------ helpers */

static void rx_fail(refexec_t *ex, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void rx_fail(refexec_t *ex, const char *fmt, ...)
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

/* ------------------------------------------------- provenance intervals */

static int iv_reserve(rx_ivlist_t *l, size_t n)
{
    if (l->n + n > l->cap) {
        size_t cap = l->cap ? l->cap : 16;
        rx_iv_t *v;

        while (cap < l->n + n) {
            cap *= 2;
        }
        v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL) {
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    return 0;
}

/* Removes the coverage of [off, off+len). */
static int iv_remove(rx_ivlist_t *l, uint64_t off, uint64_t len)
{
    uint64_t end = off + len;
    size_t w = 0;
    rx_iv_t *out;

    if (len == 0 || l->n == 0) {
        return 0;
    }
    out = malloc((l->n + 2) * sizeof(*out));
    if (out == NULL) {
        return -1;
    }
    for (size_t k = 0; k < l->n; k++) {
        rx_iv_t a = l->v[k];
        uint64_t aend = a.off + a.len;

        if (aend <= off || a.off >= end) {
            out[w++] = a;
            continue;
        }
        if (a.off < off) {
            rx_iv_t left = a;

            left.len = off - a.off;
            out[w++] = left;
        }
        if (aend > end) {
            rx_iv_t right = a;

            right.off = end;
            right.len = aend - end;
            right.ooff = a.ooff + (end - a.off);
            out[w++] = right;
        }
    }
    if (iv_reserve(l, w > l->n ? w - l->n : 0) != 0) {
        free(out);
        return -1;
    }
    memcpy(l->v, out, w * sizeof(*out));
    l->n = w;
    free(out);
    return 0;
}

/* Inserts non-overlapping pieces (sorted by off) after removing their range;
 * merges neighbours that continue each other. */
static int iv_write(rx_ivlist_t *l, uint64_t off, uint64_t len,
                    const rx_iv_t *pieces, size_t np)
{
    size_t pos;

    if (iv_remove(l, off, len) != 0 || iv_reserve(l, np) != 0) {
        return -1;
    }
    for (size_t k = 0; k < np; k++) {
        rx_iv_t p = pieces[k];

        for (pos = 0; pos < l->n && l->v[pos].off < p.off; pos++) {
        }
        if (pos > 0) {
            rx_iv_t *q = &l->v[pos - 1];

            if (q->off + q->len == p.off && q->origin == p.origin &&
                q->ooff + q->len == p.ooff) {
                q->len += p.len;
                continue;
            }
        }
        memmove(&l->v[pos + 1], &l->v[pos], (l->n - pos) * sizeof(rx_iv_t));
        l->v[pos] = p;
        l->n++;
    }
    /* one merge pass with the right neighbours */
    for (size_t k = 0; k + 1 < l->n;) {
        rx_iv_t *q = &l->v[k], *r = &l->v[k + 1];

        if (q->off + q->len == r->off && q->origin == r->origin &&
            q->ooff + q->len == r->ooff) {
            q->len += r->len;
            memmove(r, r + 1, (l->n - k - 2) * sizeof(rx_iv_t));
            l->n--;
        } else {
            k++;
        }
    }
    return 0;
}

/* Pieces of [off, off+len) shifted by delta; returns uncovered bytes. */
static uint64_t iv_extract(const rx_ivlist_t *l, uint64_t off, uint64_t len,
                           uint64_t to, rx_iv_t **out, size_t *nout)
{
    uint64_t end = off + len, covered = 0;
    size_t n = 0;
    rx_iv_t *v = malloc((l->n + 1) * sizeof(*v));

    *out = v;
    *nout = 0;
    if (v == NULL) {
        return len;
    }
    for (size_t k = 0; k < l->n; k++) {
        const rx_iv_t *a = &l->v[k];
        uint64_t lo = a->off > off ? a->off : off;
        uint64_t hi = a->off + a->len < end ? a->off + a->len : end;

        if (lo >= hi) {
            continue;
        }
        v[n].off = to + (lo - off);
        v[n].len = hi - lo;
        v[n].origin = a->origin;
        v[n].ooff = a->ooff + (lo - a->off);
        covered += hi - lo;
        n++;
    }
    *nout = n;
    return len - covered;
}

/* ----------------------------------------------------------- windows */

static void win_free(rx_win_t *w)
{
    free(w->mem);
    free(w->iv.v);
    memset(w, 0, sizeof(*w));
}

static int win_alloc(refexec_t *ex, rx_win_t *w, uint64_t size)
{
    size_t g = ex->opts.guard_bytes;

    win_free(w);
    w->size = size;
    if (ex->opts.virtual_mode) {
        return 0;
    }
    w->mem = malloc((size_t)size + 2 * g);
    if (w->mem == NULL) {
        return -1;
    }
    memset(w->mem, RMACOLL_FILL_SENTINEL, (size_t)size + 2 * g);
    return 0;
}

static unsigned char *win_ptr(refexec_t *ex, rx_win_t *w, uint64_t off)
{
    return w->mem + ex->opts.guard_bytes + off;
}

/* First guard byte that is not the sentinel, or -1. */
static int64_t win_guard_bad(refexec_t *ex, const rx_win_t *w)
{
    size_t g = ex->opts.guard_bytes;

    if (w->mem == NULL) {
        return -1;
    }
    for (size_t k = 0; k < g; k++) {
        if (w->mem[k] != RMACOLL_FILL_SENTINEL) {
            return (int64_t)k;
        }
        if (w->mem[g + w->size + k] != RMACOLL_FILL_SENTINEL) {
            return (int64_t)(g + w->size + k);
        }
    }
    return -1;
}

static const char *win_name(int w)
{
    return rmacoll__win_name(w);
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

/* ------------------------------------------------------------ execute */

/* Slot (c, s) of relay r holding [off, off+len), or -1. */
static int rx_find_slot(refexec_t *ex, int r, uint64_t off, uint64_t len,
                        int *c, uint32_t *s)
{
    rx_rank_t *k = &ex->rk[r];
    uint32_t S = ex->cfg.relay_slots;

    for (int ch = 0; ch < k->nin; ch++) {
        for (uint32_t sl = 0; sl < S; sl++) {
            uint64_t o = rmacoll__plan_slot_off(ex->topo, &ex->cfg, r, ch, sl);

            if (off >= o && off < o + k->slot_bytes) {
                *c = ch;
                *s = sl;
                return off + len <= o + k->slot_bytes ? 0 : -1;
            }
        }
    }
    return -1;
}

static void rx_describe(char *buf, size_t len, int me,
                        const rmacoll__task_t *t)
{
    snprintf(buf, len, "rank %d round %d %s %s peer %d origin %d %s+%" PRIu64
             " -> %s+%" PRIu64 " %" PRIu64 " B sig %d=%" PRIu64 " seq %" PRIu64,
             me, t->round, t->op == RMACOLL__OP_PUT ? "put" : "wait",
             (t->flags & RMACOLL__TASK_SELF)       ? "self"
             : (t->flags & RMACOLL__TASK_TO_RELAY) ? "to_relay"
             : (t->flags & RMACOLL__TASK_FORWARD)  ? "forward"
             : (t->flags & RMACOLL__TASK_CREDIT)   ? "credit"
                                                   : "direct",
             t->peer, t->origin, win_name(t->src_win), t->src_off,
             win_name(t->dst_win), t->dst_off, t->bytes,
             t->sig == RMACOLL__NO_SIG ? -1 : (int)t->sig, t->sig_value,
             t->seq);
}

/*
 * Where the bytes of an eager copy come from: the origin's metadata record
 * carries its blocks for this rank's node in local-rank order, contiguous,
 * taken from its send buffer; each receiver copies its own block out.
 * Sets *off to the offset in the origin's send window; fails when the copy
 * is not into this rank, the origin is on this node, its stream is not
 * eager (over eager_max_bytes, or empty) or the range is not inside this
 * rank's block.
 */
static int rx_eager_src(refexec_t *ex, int me, const rmacoll__task_t *t, const char *desc,
                        uint64_t *off)
{
    const rmacoll_topo_t *topo = ex->topo;
    int A = topo->node_of[me], o = t->origin;
    uint64_t pos = 0, total = 0;
    int found = 0;
    rmacoll__plan_paths_t lim;

    if (!(t->flags & RMACOLL__TASK_EAGER) || o < 0 || o >= ex->n ||
        topo->node_of[o] == A || t->peer != me) {
        rx_fail(ex, "%s: reads an eager payload that is not addressed to this rank", desc);
        return -1;
    }
    /* relay on: the origin's blocks for this node in local-rank order (the
     * record to its relay here); relay off: this rank's block alone */
    for (int l = 0; l < topo->node_size[A]; l++) {
        int m = ex->cfg.relay_enabled ? rmacoll__topo_rank(topo, A, l) : me;
        uint64_t b = (uint64_t)ex->rk[o].sendcounts[m] * ex->esize;
        if (!ex->cfg.relay_enabled && l > 0) {
            break;
        }
        if (m == me && t->src_off >= pos && t->src_off + t->bytes <= pos + b) {
            *off = (uint64_t)ex->rk[o].sdispls[m] * ex->esize + (t->src_off - pos);
            found = 1;
        }
        pos += b;
        total += b;
    }
    rmacoll__ctrl_host_paths(topo, &ex->cfg, &lim);
    if (total > lim.eager_max) {
        rx_fail(ex, "%s: eager payload of %" PRIu64 " bytes over eager_max_bytes", desc, total);
        return -1;
    }
    if (!found) {
        rx_fail(ex, "%s: not inside rank %d's block of rank %d's eager payload", desc, me, o);
        return -1;
    }
    return 0;
}

/*
 * Where the bytes of a node eager copy come from: the origin (a node peer
 * of this rank) put its blocks for its node peers into its node payload
 * (rmacoll__plan_node_eager_bytes); this rank copies its own block out.
 * Sets *off to the offset in the origin's send window; fails when the
 * origin sends no node payload, the copy is not this rank's own or the
 * range is not inside this rank's block.
 */
static int rx_node_eager_src(refexec_t *ex, int me, const rmacoll__task_t *t,
                             const char *desc, uint64_t *off)
{
    const rmacoll_topo_t *topo = ex->topo;
    int A = topo->node_of[me], o = t->origin;
    int ls = topo->node_size[A];
    const int *members = topo->node_members + topo->node_first[A];
    uint64_t *offs, b, total;

    if (!(t->flags & RMACOLL__TASK_EAGER) || o < 0 || o >= ex->n || o == me ||
        topo->node_of[o] != A || t->peer != me) {
        rx_fail(ex, "%s: node eager copy that is not from a node peer into this rank", desc);
        return -1;
    }
    offs = calloc((size_t)ls, sizeof(uint64_t));
    if (offs == NULL) {
        rx_fail(ex, "out of memory");
        return -1;
    }
    total = rmacoll__plan_node_eager_bytes(ex->rk[o].sendcounts, members, ls,
                                           topo->local_rank[o], ex->esize,
                                           rmacoll__ctrl_node_eager_cap(topo, &ex->cfg), offs);
    b = offs[topo->local_rank[me]];
    free(offs);
    if (total == 0 || b == RMACOLL__NO_EAGER) {
        rx_fail(ex, "%s: rank %d sends no node payload with a block for this rank", desc, o);
        return -1;
    }
    if (t->src_off < b || t->src_off + t->bytes > b + (uint64_t)ex->rk[o].sendcounts[me] *
                                                          ex->esize) {
        rx_fail(ex, "%s: not inside this rank's block of rank %d's node payload", desc, o);
        return -1;
    }
    *off = (uint64_t)ex->rk[o].sdispls[me] * ex->esize + (t->src_off - b);
    return 0;
}

/* Copies the bytes of a put (data or provenance). */
static void rx_copy(refexec_t *ex, int me, const rmacoll__task_t *t,
                    const char *desc)
{
    int eager = t->src_win == RMACOLL__WIN_EAGER || t->src_win == RMACOLL__WIN_NODE_EAGER;
    rx_win_t *src = &ex->rk[me].win[eager ? RMACOLL__WIN_SEND : t->src_win];
    rx_win_t *dst = &ex->rk[t->peer].win[t->dst_win];
    uint64_t src_off = t->src_off;
    int src_rank = me;

    if (t->bytes == 0) {
        return;
    }
    if (eager) {
        if ((t->src_win == RMACOLL__WIN_EAGER ? rx_eager_src(ex, me, t, desc, &src_off)
                                              : rx_node_eager_src(ex, me, t, desc,
                                                                  &src_off)) != 0) {
            return;
        }
        src_rank = t->origin;
        src = &ex->rk[src_rank].win[RMACOLL__WIN_SEND];
    }
    if (!ex->opts.virtual_mode) {
        memmove(win_ptr(ex, dst, t->dst_off), win_ptr(ex, src, src_off),
                (size_t)t->bytes);
        return;
    }
    if (t->src_win == RMACOLL__WIN_SEND || eager) {
        rx_iv_t p = {t->dst_off, t->bytes, src_rank, src_off};

        if (iv_write(&dst->iv, t->dst_off, t->bytes, &p, 1) != 0) {
            rx_fail(ex, "out of memory for provenance");
        }
    } else {
        rx_iv_t *pieces;
        size_t np;
        uint64_t missing = iv_extract(&src->iv, t->src_off, t->bytes,
                                      t->dst_off, &pieces, &np);

        if (missing != 0) {
            rx_fail(ex, "%s: reads %" PRIu64 " bytes that were never written",
                    desc, missing);
        } else if (iv_write(&dst->iv, t->dst_off, t->bytes, pieces, np) != 0) {
            rx_fail(ex, "out of memory for provenance");
        }
        free(pieces);
    }
}

static void rx_signal(refexec_t *ex, int me, const rmacoll__task_t *t,
                      const char *desc)
{
    rx_rank_t *tk = &ex->rk[t->peer];
    uint64_t cur;

    if (t->sig >= tk->nsig) {
        rx_fail(ex, "%s: signal word %u outside rank %d's %u words", desc,
                t->sig, t->peer, tk->nsig);
        return;
    }
    if (tk->writer[t->sig] >= 0 && tk->writer[t->sig] != me) {
        rx_fail(ex, "%s: signal word %u of rank %d has two writers (%d and %d)",
                desc, t->sig, t->peer, tk->writer[t->sig], me);
        return;
    }
    tk->writer[t->sig] = me;
    cur = tk->sig[t->sig];
    if (t->sig_value != cur + 1) {
        rx_fail(ex, "%s: signal word %u of rank %d goes from %" PRIu64
                " to %" PRIu64 " (must rise by exactly 1)", desc, t->sig,
                t->peer, cur, t->sig_value);
        return;
    }
    tk->sig[t->sig] = t->sig_value;
    ex->stats.signals++;
}

static void rx_put(refexec_t *ex, int me, const rmacoll__task_t *t)
{
    const rmacoll_topo_t *topo = ex->topo;
    rx_rank_t *k = &ex->rk[me];
    rx_rank_t *tk;
    uint32_t S = ex->cfg.relay_slots;
    char desc[320];
    int c;
    uint32_t s;

    rx_describe(desc, sizeof(desc), me, t);
    if (t->peer < 0 || t->peer >= ex->n) {
        rx_fail(ex, "%s: target rank out of range", desc);
        return;
    }
    tk = &ex->rk[t->peer];
    if ((t->path == RMACOLL__PATH_CE) !=
        (topo->node_of[t->peer] == topo->node_of[me])) {
        rx_fail(ex, "%s: path %s to a rank on %s node", desc,
                t->path == RMACOLL__PATH_CE ? "ce" : "proxy",
                topo->node_of[t->peer] == topo->node_of[me] ? "the same"
                                                            : "another");
        return;
    }
    if (t->bytes > 0) {
        if (t->src_win != RMACOLL__WIN_SEND && t->src_win != RMACOLL__WIN_RELAY &&
            t->src_win != RMACOLL__WIN_EAGER && t->src_win != RMACOLL__WIN_NODE_EAGER) {
            rx_fail(ex, "%s: bad source window", desc);
            return;
        }
        if (t->dst_win != RMACOLL__WIN_RECV && t->dst_win != RMACOLL__WIN_RELAY) {
            rx_fail(ex, "%s: writes a %s window", desc, win_name(t->dst_win));
            return;
        }
        if (t->src_win != RMACOLL__WIN_EAGER && t->src_win != RMACOLL__WIN_NODE_EAGER &&
            (t->src_off > k->win[t->src_win].size ||
             t->bytes > k->win[t->src_win].size - t->src_off)) {
            rx_fail(ex, "%s: reads outside its %s window (%" PRIu64 " bytes)",
                    desc, win_name(t->src_win), k->win[t->src_win].size);
            return;
        }
        if (t->dst_off > tk->win[t->dst_win].size ||
            t->bytes > tk->win[t->dst_win].size - t->dst_off) {
            rx_fail(ex, "%s: writes outside rank %d's %s window (%" PRIu64
                    " bytes): guard hit", desc, t->peer, win_name(t->dst_win),
                    tk->win[t->dst_win].size);
            return;
        }
        if (t->origin < 0 || t->origin >= ex->n) {
            rx_fail(ex, "%s: origin out of range", desc);
            return;
        }
    }
    if (t->bytes > 0 && t->dst_win == RMACOLL__WIN_RECV) {
        int o = t->origin;

        if (tk->done) {
            rx_fail(ex, "%s: writes rank %d's receive buffer after its call "
                    "returned", desc, t->peer);
            return;
        }
        uint64_t b0 = (uint64_t)tk->rdispls[o] * ex->esize;
        uint64_t bl = (uint64_t)tk->recvcounts[o] * ex->esize;

        if (t->dst_off < b0 || t->dst_off + t->bytes > b0 + bl) {
            rx_fail(ex, "%s: writes outside rank %d's receive block for rank "
                    "%d ([%" PRIu64 ", %" PRIu64 "))", desc, t->peer, o, b0,
                    b0 + bl);
            return;
        }
        if ((t->flags & (RMACOLL__TASK_FORWARD | RMACOLL__TASK_EAGER)) == 0 && o != me) {
            rx_fail(ex, "%s: a direct put carries another rank's data", desc);
            return;
        }
        tk->recv_written += t->bytes;
    }
    if (t->bytes > 0 && t->dst_win == RMACOLL__WIN_RELAY) {
        rx_slot_t *sl;

        if (!(t->flags & RMACOLL__TASK_TO_RELAY) ||
            t->src_win != RMACOLL__WIN_SEND) {
            rx_fail(ex, "%s: writes a relay buffer but is not a stream chunk",
                    desc);
            return;
        }
        c = rmacoll__plan_chan_index(topo, t->peer, me);
        if (c < 0) {
            rx_fail(ex, "%s: rank %d is not this rank's relay", desc, t->peer);
            return;
        }
        if (rx_find_slot(ex, t->peer, t->dst_off, t->bytes, &c, &s) != 0 ||
            c != rmacoll__plan_chan_index(topo, t->peer, me)) {
            rx_fail(ex, "%s: does not fit in one slot of its channel", desc);
            return;
        }
        sl = &tk->slots[(size_t)c * S + s];
        if (sl->state == RX_FULL) {
            rx_fail(ex, "%s: slot overwritten before credit (channel %d slot "
                    "%u of relay %d)", desc, c, s, t->peer);
            return;
        }
        if (sl->state == RX_FREE) {
            if (tk->arrived[c] % S != s) {
                rx_fail(ex, "%s: chunk written to slot %u, but the next chunk "
                        "of channel %d (%" PRIu64 ") belongs in slot %" PRIu64,
                        desc, s, c, tk->arrived[c], tk->arrived[c] % S);
                return;
            }
            sl->state = RX_FILLING;
            sl->filled = 0;
            sl->forwarded = 0;
        }
        sl->filled += t->bytes;
    }
    if (t->bytes > 0 && t->src_win == RMACOLL__WIN_RELAY) {
        rx_slot_t *sl;

        if (!(t->flags & RMACOLL__TASK_FORWARD)) {
            rx_fail(ex, "%s: reads the relay buffer but is not a forward", desc);
            return;
        }
        if (rx_find_slot(ex, me, t->src_off, t->bytes, &c, &s) != 0) {
            rx_fail(ex, "%s: forward source is not inside one slot", desc);
            return;
        }
        sl = &k->slots[(size_t)c * S + s];
        if (sl->state != RX_FULL) {
            rx_fail(ex, "%s: forward before arrival (channel %d slot %u is %s)",
                    desc, c, s, sl->state == RX_FREE ? "free" : "filling");
            return;
        }
        if (rmacoll__plan_chan_src(topo, me, c) != t->origin) {
            rx_fail(ex, "%s: forwards channel %d (from rank %d) as rank %d's "
                    "data", desc, c, rmacoll__plan_chan_src(topo, me, c),
                    t->origin);
            return;
        }
        sl->forwarded += t->bytes;
    }
    rx_copy(ex, me, t, desc);
    if (ex->failed) {
        return;
    }
    ex->stats.puts++;
    if (t->path == RMACOLL__PATH_PROXY) {
        ex->stats.bytes_proxy += t->bytes;
    } else {
        ex->stats.bytes_ce += t->bytes;
    }
    if (t->flags & RMACOLL__TASK_SELF) {
        ex->stats.bytes_self += t->bytes;
    } else if (t->flags & RMACOLL__TASK_TO_RELAY) {
        ex->stats.bytes_to_relay += t->bytes;
    } else if (t->flags & RMACOLL__TASK_FORWARD) {
        ex->stats.bytes_forward += t->bytes;
    } else {
        ex->stats.bytes_direct += t->bytes;
    }
    if (!(t->flags & RMACOLL__TASK_SIGNAL)) {
        if (t->flags & RMACOLL__TASK_CREDIT) {
            rx_fail(ex, "%s: credit without a signal", desc);
        }
        return;
    }
    /* which word, by kind */
    if (t->flags & RMACOLL__TASK_TO_RELAY) {
        rx_slot_t *sl;

        if (rx_find_slot(ex, t->peer, t->dst_off, t->bytes ? t->bytes : 1, &c,
                         &s) != 0 ||
            t->sig != rmacoll__sig_arrive(topo, &ex->cfg, c, s)) {
            rx_fail(ex, "%s: chunk signals word %u, not the ARRIVE word of "
                    "its slot", desc, t->sig);
            return;
        }
        sl = &tk->slots[(size_t)c * S + s];
        if (sl->state != RX_FILLING) {
            rx_fail(ex, "%s: ARRIVE on a %s slot", desc,
                    sl->state == RX_FULL ? "full" : "empty");
            return;
        }
        sl->state = RX_FULL;
        tk->arrived[c]++;
    } else if (t->flags & RMACOLL__TASK_CREDIT) {
        rx_slot_t *sl;

        c = rmacoll__plan_chan_index(topo, me, t->peer);
        if (c < 0 || t->sig != rmacoll__sig_credit(topo, topo->node_of[me])) {
            rx_fail(ex, "%s: credit to a rank that has no channel here, or on "
                    "the wrong word", desc);
            return;
        }
        s = (uint32_t)(k->credited[c] % S);
        sl = &k->slots[(size_t)c * S + s];
        if (sl->state != RX_FULL) {
            rx_fail(ex, "%s: credit for channel %d slot %u, which is %s", desc,
                    c, s, sl->state == RX_FREE ? "free" : "still filling");
            return;
        }
        if (sl->forwarded != sl->filled) {
            rx_fail(ex, "%s: credit for channel %d slot %u after forwarding %"
                    PRIu64 " of its %" PRIu64 " bytes", desc, c, s,
                    sl->forwarded, sl->filled);
            return;
        }
        sl->state = RX_FREE;
        k->credited[c]++;
    } else if (t->sig != rmacoll__sig_data(t->origin) &&
               !(rmacoll__plan_has_xdata(ex->topo, &ex->cfg) && t->origin == me &&
                 t->sig == rmacoll__sig_xdata(ex->topo, &ex->cfg, me) &&
                 ex->topo->node_of[t->peer] != ex->topo->node_of[me] &&
                 rmacoll__topo_relay(ex->topo, me, ex->topo->node_of[t->peer]) != t->peer)) {
        /* XDATA(me): a direct stream's own put to a rank other than the
         * relay (plan.h) */
        rx_fail(ex, "%s: data of rank %d signals word %u, not DATA(%d)", desc,
                t->origin, t->sig, t->origin);
        return;
    }
    rx_signal(ex, me, t, desc);
}

static void rx_check_recv_done(refexec_t *ex, int r);

/* 1 when every wait of rank r's current batch holds. */
static int rx_waits_hold(refexec_t *ex, int r, char *why, size_t whylen)
{
    rx_rank_t *k = &ex->rk[r];
    const rmacoll__batch_t *b = &k->plan.batches[k->bi];

    for (int q = RMACOLL__Q_PROXY_WAIT; q <= RMACOLL__Q_CE_WAIT; q++) {
        for (uint32_t i = 0; i < b->count[q]; i++) {
            const rmacoll__task_t *t = &k->plan.tasks[b->first[q] + i];

            if (t->op != RMACOLL__OP_WAIT || t->sig >= k->nsig) {
                char d[320];

                rx_describe(d, sizeof(d), r, t);
                rx_fail(ex, "%s: not a wait on an own signal word", d);
                return 0;
            }
            if (k->sig[t->sig] < t->sig_value) {
                if (why != NULL) {
                    snprintf(why, whylen, "rank %d round %d waits word %u >= %"
                             PRIu64 " from rank %d (now %" PRIu64 ")",
                             r, t->round, t->sig, t->sig_value, t->peer,
                             k->sig[t->sig]);
                }
                return 0;
            }
        }
    }
    return 1;
}

/* One step of rank r; 1 if it progressed. */
static int rx_step(refexec_t *ex, int r)
{
    rx_rank_t *k = &ex->rk[r];
    const rmacoll__batch_t *b;
    uint32_t left[2];
    int nput;

    if (k->bi >= k->plan.nbatches) {
        k->done = 1;
        rx_check_recv_done(ex, r);
        return 1;
    }
    b = &k->plan.batches[k->bi];
    left[0] = b->count[RMACOLL__Q_PROXY_PUT] - k->qpos[0];
    left[1] = b->count[RMACOLL__Q_CE_PUT] - k->qpos[1];
    if (left[0] + left[1] > 0) {
        nput = 1 + (int)(rx_rand(ex) % 4);
        while (nput-- > 0 && left[0] + left[1] > 0 && !ex->failed) {
            int q = left[0] == 0   ? 1
                    : left[1] == 0 ? 0
                                   : (int)(rx_rand(ex) & 1);
            const rmacoll__task_t *t =
                &k->plan.tasks[b->first[q] + k->qpos[q]];

            if (t->op != RMACOLL__OP_PUT) {
                rx_fail(ex, "rank %d round %d: a wait in a put queue", r,
                        b->round);
                return 1;
            }
            rx_put(ex, r, t);
            k->qpos[q]++;
            left[q]--;
        }
        return 1;
    }
    if (!rx_waits_hold(ex, r, NULL, 0)) {
        return 0;
    }
    ex->stats.batches++;
    if (b->round > ex->stats.max_round) {
        ex->stats.max_round = b->round;
    }
    k->bi++;
    k->qpos[0] = k->qpos[1] = 0;
    if (k->bi >= k->plan.nbatches) {
        /* the call returns here: the user may read the buffer now */
        k->done = 1;
        rx_check_recv_done(ex, r);
    }
    return 1;
}

/* Checks batches are ordered and queues hold the right ops. */
static void rx_check_plan_shape(refexec_t *ex, int r)
{
    const rmacoll__plan_t *p = &ex->rk[r].plan;

    for (size_t bi = 0; bi < p->nbatches && !ex->failed; bi++) {
        const rmacoll__batch_t *b = &p->batches[bi];

        if (bi > 0 && b->round <= p->batches[bi - 1].round) {
            rx_fail(ex, "rank %d: batch %zu round %d not after round %d", r,
                    bi, b->round, p->batches[bi - 1].round);
        }
        for (int q = 0; q < RMACOLL__NQUEUES; q++) {
            for (uint32_t i = 0; i < b->count[q]; i++) {
                const rmacoll__task_t *t;

                if ((size_t)b->first[q] + i >= p->ntasks) {
                    rx_fail(ex, "rank %d: batch %zu queue %d past the tasks",
                            r, bi, q);
                    return;
                }
                t = &p->tasks[b->first[q] + i];
                if (t->round != b->round ||
                    (t->op == RMACOLL__OP_PUT) != (q < RMACOLL__Q_PROXY_WAIT) ||
                    (t->path == RMACOLL__PATH_CE) != (q % 2 == 1)) {
                    rx_fail(ex, "rank %d: task of round %d op %d path %d in "
                            "batch of round %d queue %s", r, t->round, t->op,
                            t->path, b->round, rmacoll__queue_name(q));
                    return;
                }
            }
        }
    }
}

static void rx_check_virtual(refexec_t *ex, int p)
{
    rx_rank_t *k = &ex->rk[p];
    const rx_ivlist_t *l = &k->win[RMACOLL__WIN_RECV].iv;
    uint64_t *cov = calloc((size_t)ex->n, sizeof(uint64_t));

    if (cov == NULL) {
        rx_fail(ex, "out of memory");
        return;
    }
    for (size_t i = 0; i < l->n && !ex->failed; i++) {
        const rx_iv_t *iv = &l->v[i];
        int o = -1;

        for (int s = 0; s < ex->n; s++) {
            uint64_t b0 = (uint64_t)k->rdispls[s] * ex->esize;
            uint64_t bl = (uint64_t)k->recvcounts[s] * ex->esize;

            if (bl > 0 && iv->off >= b0 && iv->off < b0 + bl) {
                o = s;
                break;
            }
        }
        if (o < 0) {
            rx_fail(ex, "rank %d: bytes [%" PRIu64 ", +%" PRIu64 ") outside "
                    "every receive block were written", p, iv->off, iv->len);
            break;
        } else {
            uint64_t b0 = (uint64_t)k->rdispls[o] * ex->esize;
            uint64_t bl = (uint64_t)k->recvcounts[o] * ex->esize;
            uint64_t want = (uint64_t)ex->rk[o].sdispls[p] * ex->esize +
                            (iv->off - b0);

            if (iv->off + iv->len > b0 + bl || iv->origin != o ||
                iv->ooff != want) {
                rx_fail(ex, "rank %d: receive block from rank %d holds bytes "
                        "[%" PRIu64 ", +%" PRIu64 ") of rank %d's send offset %"
                        PRIu64 ", expected rank %d's offset %" PRIu64,
                        p, o, iv->off - b0, iv->len, iv->origin, iv->ooff, o,
                        want);
                break;
            }
            cov[o] += iv->len;
        }
    }
    for (int s = 0; s < ex->n && !ex->failed; s++) {
        uint64_t bl = (uint64_t)k->recvcounts[s] * ex->esize;

        if (cov[s] != bl) {
            rx_fail(ex, "rank %d: receive block from rank %d has %" PRIu64
                    " of %" PRIu64 " bytes", p, s, cov[s], bl);
        }
    }
    free(cov);
}

/* Rank r's receive buffer, when its call returns: complete and exact. */
static void rx_check_recv_done(refexec_t *ex, int r)
{
    rx_rank_t *k = &ex->rk[r];
    uint64_t want_bytes = 0;

    for (int s = 0; s < ex->n; s++) {
        want_bytes += (uint64_t)k->recvcounts[s] * ex->esize;
    }
    if (!ex->failed && k->recv_written != want_bytes) {
        rx_fail(ex, "rank %d: %" PRIu64 " bytes were put into its receive "
                "buffer, expected %" PRIu64, r, k->recv_written, want_bytes);
    }
    if (!ex->failed && ex->opts.virtual_mode) {
        rx_check_virtual(ex, r);
    } else if (!ex->failed) {
        rmacoll_check_report_t rep;
        rx_win_t *w = &k->win[RMACOLL__WIN_RECV];

        if (rmacoll_check_recv(win_ptr(ex, w, 0), (size_t)w->size,
                               ex->esize, r, ex->n, k->recvcounts,
                               k->rdispls, ex->iter, &rep) != 0) {
            rx_fail(ex, "%s", rep.msg);
        }
    }
}

static void rx_check_end(refexec_t *ex)
{
    const rmacoll_topo_t *topo = ex->topo;
    uint32_t S = ex->cfg.relay_slots;

    for (int r = 0; r < ex->n && !ex->failed; r++) {
        rx_rank_t *k = &ex->rk[r];
        const rmacoll__sigstate_t *st = k->stn;

        for (int w = 1; w < RX_NWIN && !ex->failed; w++) {
            int64_t g = win_guard_bad(ex, &k->win[w]);

            if (g >= 0) {
                rx_fail(ex, "rank %d: guard byte %" PRId64 " of its %s window "
                        "was written", r, g, win_name(w));
            }
        }
        /* signal words against the final state */
        for (int p = 0; p < ex->n && !ex->failed; p++) {
            if (p != r && k->sig[rmacoll__sig_data(p)] != st->data_in[p]) {
                rx_fail(ex, "rank %d: DATA(%d) is %" PRIu64 ", state expects %"
                        PRIu64, r, p, k->sig[rmacoll__sig_data(p)],
                        st->data_in[p]);
            }
        }
        for (int B = 0; B < topo->nnodes && !ex->failed; B++) {
            uint32_t w = rmacoll__sig_credit(topo, B);

            if (k->sig[w] != st->chan_out[B]) {
                rx_fail(ex, "rank %d: CREDIT(%d) is %" PRIu64 ", state expects "
                        "%" PRIu64 " chunks", r, B, k->sig[w], st->chan_out[B]);
            }
        }
        for (int c = 0; c < k->nin && !ex->failed; c++) {
            int src = rmacoll__plan_chan_src(topo, r, c);

            if (ex->rk[src].stn->chan_out[topo->node_of[r]] != st->chan_in[c]) {
                rx_fail(ex, "rank %d: channel %d from rank %d: sender counts %"
                        PRIu64 " chunks, relay %" PRIu64, r, c, src,
                        ex->rk[src].stn->chan_out[topo->node_of[r]],
                        st->chan_in[c]);
            }
            if (k->arrived[c] != st->chan_in[c] ||
                k->credited[c] != st->chan_in[c]) {
                rx_fail(ex, "rank %d: channel %d: %" PRIu64 " chunks arrived, %"
                        PRIu64 " credited, state expects %" PRIu64, r, c,
                        k->arrived[c], k->credited[c], st->chan_in[c]);
            }
            for (uint32_t s = 0; s < S && !ex->failed; s++) {
                uint64_t n = st->chan_in[c];
                uint64_t want = n > s ? (n - s - 1) / S + 1 : 0;
                uint32_t w = rmacoll__sig_arrive(topo, &ex->cfg, c, s);

                if (k->sig[w] != want) {
                    rx_fail(ex, "rank %d: ARRIVE(%d, %u) is %" PRIu64 ", "
                            "expected %" PRIu64, r, c, s, k->sig[w], want);
                }
                if (k->slots[(size_t)c * S + s].state != RX_FREE) {
                    rx_fail(ex, "rank %d: channel %d slot %u not free at the "
                            "end of the call", r, c, s);
                }
            }
        }
    }
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
        k->bi = 0;
        k->qpos[0] = k->qpos[1] = 0;
        k->done = k->plan.nbatches == 0;
        ex->stats.tasks += k->plan.ntasks;
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
                    rx_waits_hold(ex, r, why, sizeof(why));
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
