/*
 * rx_exec.c - the reference executor's run of one call (refexec_execute,
 * refexec_call, refexec_run): fresh user buffers, every rank's plan in its
 * dataflow order (core/plan/flow.h), ranks and lanes interleaved at random
 * (one rank lagging), a deadlock named by what each rank waits for, and
 * the signal state committed at the end. Creation and preparation are
 * refexec.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctrl/ctrl.h"
#include "refexec_int.h"

static uint64_t rx_rand(refexec_t *ex)
{
    return rmacoll_case_rand(&ex->rng);
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


/* Fresh user buffers, the dataflow order and the counters of every rank
 * for this call; ranks with nothing to do return at once. */
static void rx_exec_start(refexec_t *ex)
{
    int n = ex->n;

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
}

/* One round: every rank but the slow one steps once, in a random order
 * (order: n ints of scratch); the slow rank moves only when nobody else
 * can. 1 if any rank progressed. */
static int rx_exec_round(refexec_t *ex, int *order, int slow)
{
    int n = ex->n;
    int progressed = 0;

    for (int r = 0; r < n; r++) {
        order[r] = r;
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
    return progressed;
}

/* No rank can move: the failure says what every rank not done waits for. */
static void rx_exec_deadlock(refexec_t *ex)
{
    char msg[900], why[256];
    size_t len = 0;

    msg[0] = '\0';
    for (int r = 0; r < ex->n && len + 1 < sizeof(msg); r++) {
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

rmacoll_status_t refexec_execute(refexec_t *ex, refexec_result_t *res)
{
    int n = ex->n;
    int *order;
    int slow;

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
    rx_exec_start(ex);
    /* one rank per call (or none) lags as far as the others let it */
    slow = (int)(rx_rand(ex) % (uint64_t)(n + 1)) - 1;
    while (!ex->failed) {
        int ndone = 0;

        for (int r = 0; r < n; r++) {
            ndone += ex->rk[r].done;
        }
        if (ndone == n) {
            break;
        }
        if (!rx_exec_round(ex, order, slow) && !ex->failed) {
            rx_exec_deadlock(ex);
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
