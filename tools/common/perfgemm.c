/*
 * perfgemm.c - rmacoll-perf --gemm: the slowdown of GEMMs on a second
 * stream while the collective loops on its own (see perfrun.h).
 */
#include "perfrun.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf_internal.h"

/* ---- --gemm: SM interference ---- */

/* Per-rank record of one collective in --gemm mode. */
enum {
    PERF_L_ALONE,   /* us: the GEMM batch alone */
    PERF_L_ONE,     /* us: one call alone (mean over -n back-to-back calls) */
    PERF_L_GEMM,    /* us: the GEMM batch with the collective looping */
    PERF_L_COMM,    /* us: the whole loop of calls */
    PERF_L_CALLS,   /* calls in the loop */
    PERF_L_SENT,
    PERF_L_RECV,
    PERF_L_N
};

#define PERF_GEMM_COVER 1.5       /* loop planned for 1.5 x the GEMM batch */
#define PERF_GEMM_MAX_CALLS 100000

/* One collective against the load: warm-ups and the one-call time, the
 * GEMM batch alone (right before, so that both see the same clocks), the
 * loop length agreed by every rank, then the GEMM batch and the loop
 * started together after a barrier; fills g[PERF_L_N]. */
static rmacoll_status_t perf_gemm_coll(perf_state_t *s, perf_bufs_t *b,
                                       rmacoll_perf_a2av_fn_t fn,
                                       const char *label,
                                       rmacoll_datatype_t dtype, double *g)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_loadops_t *ld = be->load;
    double one[PERF_G_N] = {0}, mine[2], *all = NULL;
    double batch = 0, call = -1, comm_us = 0, gemm_us = 0, alone_us = 0;
    rmacoll_status_t st;
    long calls;

    /* Warm-ups, then -n calls back to back: one call's time. */
    st = perf_measure(s, b, fn, label, dtype, 0, one);
    if (st == RMACOLL_SUCCESS)
        st = be->barrier(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->start(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->finish(be->ctx, &alone_us, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        return st;
    /* Same loop length on every rank: the longest batch over the shortest
     * call, so that the loop outlasts the GEMMs everywhere. */
    all = calloc((size_t)s->n * 2, sizeof(double));
    if (all == NULL) {
        snprintf(s->err, sizeof(s->err), "rank %d: out of memory", s->rank);
        return RMACOLL_ERR_NO_MEMORY;
    }
    mine[0] = alone_us;
    mine[1] = one[PERF_G_TIME];
    st = be->allgather_f64(be->ctx, mine, 2, all, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS) {
        free(all);
        return st;
    }
    for (int i = 0; i < s->n; i++) {
        if (all[2 * i] > batch)
            batch = all[2 * i];
        if (call < 0 || all[2 * i + 1] < call)
            call = all[2 * i + 1];
    }
    free(all);
    calls = call > 0 ? (long)ceil(PERF_GEMM_COVER * batch / call) + 1 : 1;
    if (calls > PERF_GEMM_MAX_CALLS)
        calls = PERF_GEMM_MAX_CALLS;

    /* Both streams after one barrier: the GEMMs first (cheap to enqueue),
     * then the calls; each stream timed by its own events. */
    st = be->barrier(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->start(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = s->dev->timer_start(be->ctx, s->err, sizeof(s->err));
    for (long it = 0; it < calls && st == RMACOLL_SUCCESS; it++)
        st = fn(be->ctx, b->ds, s->sendcounts, s->sdispls, b->dr,
                s->recvcounts, s->rdispls, dtype, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = s->dev->timer_stop(be->ctx, &comm_us, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS)
        st = ld->finish(be->ctx, &gemm_us, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        return st;
    g[PERF_L_ALONE] = alone_us;
    g[PERF_L_ONE] = one[PERF_G_TIME];
    g[PERF_L_GEMM] = gemm_us;
    g[PERF_L_COMM] = comm_us;
    g[PERF_L_CALLS] = (double)calls;
    g[PERF_L_SENT] = (double)b->sbytes;
    g[PERF_L_RECV] = (double)b->rbytes;
    return RMACOLL_SUCCESS;
}


static void perf_gemm_reduce(const perf_state_t *s, const double *gathered,
                             int k, perf_gemm_res_t *r)
{
    int n = s->n;

    memset(r, 0, sizeof(*r));
    r->coverage = -1;
    r->worst_rank_pct = -1e300;
    for (int i = 0; i < n; i++) {
        const double *g = gathered +
                          ((size_t)i * (size_t)s->ncoll + (size_t)k) * PERF_L_N;
        double bytes = g[PERF_L_SENT] > g[PERF_L_RECV] ? g[PERF_L_SENT]
                                                       : g[PERF_L_RECV];
        double per_call = g[PERF_L_CALLS] > 0 ? g[PERF_L_COMM] / g[PERF_L_CALLS]
                                              : 0;
        double cover = g[PERF_L_GEMM] > 0 ? g[PERF_L_COMM] / g[PERF_L_GEMM] : 0;
        double pct = g[PERF_L_ALONE] > 0
                         ? (g[PERF_L_GEMM] / g[PERF_L_ALONE] - 1) * 100 : 0;

        if (g[PERF_L_ALONE] > r->alone_us)
            r->alone_us = g[PERF_L_ALONE];
        if (g[PERF_L_GEMM] > r->gemm_us)
            r->gemm_us = g[PERF_L_GEMM];
        if (per_call > r->call_us)
            r->call_us = per_call;
        if (g[PERF_L_ONE] > r->one_us)
            r->one_us = g[PERF_L_ONE];
        if (bytes > r->max_bytes)
            r->max_bytes = bytes;
        if (r->coverage < 0 || cover < r->coverage)
            r->coverage = cover;
        if (pct > r->worst_rank_pct)
            r->worst_rank_pct = pct;
        r->calls = g[PERF_L_CALLS];
    }
    r->slowdown_pct = r->alone_us > 0 ? (r->gemm_us / r->alone_us - 1) * 100
                                      : 0;
    r->busbw = r->call_us > 0 ? r->max_bytes / r->call_us / 1e3 *
                                    (double)(n - 1) / (double)n : 0;
    r->busbw_alone = r->one_us > 0 ? r->max_bytes / r->one_us / 1e3 *
                                         (double)(n - 1) / (double)n : 0;
}

/* --gemm: the GEMM batch alone, then against each collective on the -b
 * size of case c; prints on rank 0 and writes json (rank 0, may be NULL).
 * Returns 0 or 1 (error). */
int perf_gemm_run(perf_state_t *s, const rmacoll_case_t *c,
                         rmacoll_datatype_t dtype, uint64_t size,
                         FILE *json)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_opts_t *o = s->o;
    double mine[2 * PERF_L_N] = {0};
    double *gathered = NULL;
    double gemm_flops = 2.0 * (double)o->gemm_n * (double)o->gemm_n *
                        (double)o->gemm_n;
    perf_gemm_res_t res[2];
    perf_bufs_t b;
    rmacoll_status_t st;
    const char *names[2];

    names[0] = be->coll_name ? be->coll_name : be->name;
    names[1] = s->ncoll > 1 ? be->baseline_name : "";
    gathered = calloc((size_t)s->n * (size_t)s->ncoll * PERF_L_N,
                      sizeof(double));
    if (gathered == NULL) {
        fprintf(stderr, "%s: rank %d: out of memory\n", be->name, s->rank);
        return 1;
    }
    st = perf_bufs_open(s, c, dtype, &b);
    if (st == RMACOLL_SUCCESS) {
        /* Payload once (contents do not matter: nothing is checked). */
        st = perf_put_send(s, &b, 0);
        if (st == RMACOLL_SUCCESS)
            st = perf_reset_recv(s, &b);
        if (st == RMACOLL_SUCCESS)
            st = perf_gemm_coll(s, &b, be->alltoallv, names[0], dtype, mine);
        if (st == RMACOLL_SUCCESS && s->ncoll > 1)
            st = perf_gemm_coll(s, &b, be->baseline_alltoallv, names[1],
                                dtype, mine + PERF_L_N);
        st = perf_bufs_close(s, &b, st);
    }
    if (st == RMACOLL_SUCCESS)
        st = be->gather_f64(be->ctx, mine, s->ncoll * PERF_L_N, gathered,
                            s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "%s: rank %d: --gemm %d at %llu bytes failed: %s "
                "(%s)\n", be->name, s->rank, o->gemm_n,
                (unsigned long long)size, s->err, rmacoll_status_name(st));
        free(gathered);
        return 1;
    }
    if (s->rank != 0) {
        free(gathered);
        return 0;
    }
    for (int k = 0; k < s->ncoll; k++)
        perf_gemm_reduce(s, gathered, k, &res[k]);
    free(gathered);

    {
        double per_ms = res[0].alone_us / o->gemm_iters / 1e3;
        double tflops = per_ms > 0 ? gemm_flops / (per_ms * 1e-3) / 1e12 : 0;

        fprintf(s->out, "gemm alone: %.3f ms (%.1f TFLOP/s)", per_ms, tflops);
        for (int k = 0; k < s->ncoll; k++)
            fprintf(s->out, "; with %s: %.3f ms (%+.2f%%), %s busbw %.1f GB/s",
                   names[k], res[k].gemm_us / o->gemm_iters / 1e3,
                   res[k].slowdown_pct, names[k], res[k].busbw);
        fprintf(s->out, "\n");
        if (!o->quiet) {
            fprintf(s->out, "#\n# %8s %12s %10s %10s %10s %10s %8s %10s %10s %8s\n",
                   "coll", "size", "gemm", "gemm", "slowdown", "worst",
                   "calls", "busbw", "busbw", "cover");
            fprintf(s->out, "# %8s %12s %10s %10s %10s %10s %8s %10s %10s %8s\n", "",
                   "(B)", "alone(ms)", "with(ms)", "(%)", "rank (%)", "",
                   "(overlap)", "(alone)", "");
            for (int k = 0; k < s->ncoll; k++)
                fprintf(s->out, "  %8s %12.0f %10.3f %10.3f %+10.2f %+10.2f %8.0f "
                       "%10.2f %10.2f %8.2f\n",
                       names[k], res[k].max_bytes,
                       res[k].alone_us / o->gemm_iters / 1e3,
                       res[k].gemm_us / o->gemm_iters / 1e3,
                       res[k].slowdown_pct, res[k].worst_rank_pct,
                       res[k].calls, res[k].busbw, res[k].busbw_alone,
                       res[k].coverage);
            fprintf(s->out, "#\n");
        }
        for (int k = 0; k < s->ncoll; k++)
            if (res[k].coverage < 1.0)
                fprintf(stderr, "%s: warning: the %s loop ended before the "
                        "GEMMs on some rank (it covered %.0f%% of the "
                        "batch): the slowdown is understated\n", be->name,
                        names[k], res[k].coverage * 100);
        fflush(s->out);

        if (json != NULL)
            perf_json_gemm(s, dtype, size, per_ms, tflops, res, names, json);
    }
    return 0;
}
