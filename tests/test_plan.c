/*
 * test_plan.c - unit tests of the planner's output on small hand-computed
 * cases: the exact task list of one rank (2 nodes x 2 ranks, relay on,
 * shift scheduler), layout helpers on an uneven 1+4 topology, chunking by
 * max_task_bytes, pipelining through slots smaller than the data, the
 * relay rule towards a smaller node, signal values across two calls, and
 * across three calls of half_idle.txt on one node (the idle ranks).
 * Plans are built through the reference executor's input assembly
 * (contiguous displacements) so both are exercised.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include "core/plan/topo.h"
#include "core/plan/sched_registry.h"
#include "planin.h"
#include "refexec.h"

#define P RMACOLL__OP_PUT
#define W RMACOLL__OP_WAIT
#define PROXY RMACOLL__PATH_PROXY
#define CE RMACOLL__PATH_CE
#define NOSIG RMACOLL__NO_SIG

/* The expected form of one task, with the queue it must sit in. */
typedef struct want {
    int round, queue, op, path, peer, origin;
    uint32_t flags;
    int src_win, dst_win;
    uint64_t src_off, dst_off, bytes;
    uint32_t sig;
    uint64_t sig_value;
} want_t;

static void check_plan(const rmacoll__plan_t *p, const want_t *w, size_t n)
{
    size_t i = 0;

    for (size_t b = 0; b < p->nbatches; b++) {
        for (int q = 0; q < RMACOLL__NQUEUES; q++) {
            for (uint32_t k = 0; k < p->batches[b].count[q]; k++, i++) {
                const rmacoll__task_t *t = &p->tasks[p->batches[b].first[q] + k];

                if (i >= n) {
                    fail_msg("rank %d: extra task %zu (round %d)", p->rank, i,
                             t->round);
                }
                if (p->batches[b].round != w[i].round || t->round != w[i].round ||
                    q != w[i].queue || t->op != w[i].op ||
                    t->path != w[i].path || t->peer != w[i].peer ||
                    t->origin != w[i].origin || t->flags != w[i].flags ||
                    t->sig != w[i].sig || t->sig_value != w[i].sig_value) {
                    fail_msg("rank %d task %zu: round %d queue %d op %d path %d "
                             "peer %d origin %d flags 0x%x sig %u=%llu; want "
                             "round %d queue %d op %d path %d peer %d origin %d "
                             "flags 0x%x sig %u=%llu",
                             p->rank, i, t->round, q, t->op, t->path, t->peer,
                             t->origin, t->flags, t->sig,
                             (unsigned long long)t->sig_value, w[i].round,
                             w[i].queue, w[i].op, w[i].path, w[i].peer,
                             w[i].origin, w[i].flags, w[i].sig,
                             (unsigned long long)w[i].sig_value);
                }
                if (t->op == P &&
                    (t->src_win != w[i].src_win || t->dst_win != w[i].dst_win ||
                     t->src_off != w[i].src_off || t->dst_off != w[i].dst_off ||
                     t->bytes != w[i].bytes)) {
                    fail_msg("rank %d task %zu: %d+%llu -> %d+%llu %llu B; want "
                             "%d+%llu -> %d+%llu %llu B", p->rank, i,
                             t->src_win, (unsigned long long)t->src_off,
                             t->dst_win, (unsigned long long)t->dst_off,
                             (unsigned long long)t->bytes, w[i].src_win,
                             (unsigned long long)w[i].src_off, w[i].dst_win,
                             (unsigned long long)w[i].dst_off,
                             (unsigned long long)w[i].bytes);
                }
            }
        }
    }
    assert_int_equal(i, n);
    assert_int_equal(p->ntasks, n);
}

static refexec_t *prepare(const refexec_opts_t *o, rmacoll_case_t *c)
{
    refexec_t *ex;
    refexec_result_t res;
    char err[256];

    assert_int_equal(refexec_create(o, c->nranks, c->node_of, &ex, err,
                                    sizeof(err)), 0);
    if (refexec_prepare(ex, c, &res) != RMACOLL_SUCCESS) {
        fail_msg("prepare: %s %s", res.msg, res.plan_errmsg);
    }
    return ex;
}

/*
 * symmetric_small_2x2: counts 1 + ((i + j) mod 3) float32, nodes {0,1},
 * {2,3}; relay on, shift, 4 slots of 256 KiB. Rank 0 (relay of node 1 is
 * rank 2; rank 0 relays rank 2's stream to node 0):
 *   sdispls(0) = 0 1 3 6;  rdispls of ranks 0..3 for sender 0 = 0 0 0 0;
 *   rank 1's rdispls = 0 2 5 6 (so rank 2's forwarded element lands at 20).
 * Signal words: DATA(p) = p, CREDIT(B) = 4 + B, ARRIVE(c, s) = 6 + 4c + s.
 */
static const want_t w_2x2[] = {
        /* round 0: self copy */
        {0, RMACOLL__Q_CE_PUT, P, CE, 0, 0, RMACOLL__TASK_SELF,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 0, 0, 4, NOSIG, 0},
        /* round 1 = shift(0, 1): node peer */
        {1, RMACOLL__Q_CE_PUT, P, CE, 1, 0, RMACOLL__TASK_SIGNAL,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 4, 0, 8, 0, 1},
        /* round 2 = shift(0, 2): the relay's own block, then the stream */
        {2, RMACOLL__Q_PROXY_PUT, P, PROXY, 2, 0, RMACOLL__TASK_SIGNAL,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 12, 0, 12, 0, 1},
        {2, RMACOLL__Q_PROXY_PUT, P, PROXY, 2, 0,
         RMACOLL__TASK_TO_RELAY | RMACOLL__TASK_SIGNAL, RMACOLL__WIN_SEND,
         RMACOLL__WIN_RELAY, 24, 0, 4, 6, 1},
        /* rank 2's chunk arrives (round shift(2, 0) = 2) */
        {2, RMACOLL__Q_PROXY_WAIT, W, PROXY, 2, 2, RMACOLL__TASK_ARRIVAL, 0,
         0, 0, 0, 0, 6, 1},
        /* round 3: forward it to rank 1 at rdispls_1[2] = 5 elements */
        {3, RMACOLL__Q_CE_PUT, P, CE, 1, 2,
         RMACOLL__TASK_FORWARD | RMACOLL__TASK_SIGNAL, RMACOLL__WIN_RELAY,
         RMACOLL__WIN_RECV, 0, 20, 4, 2, 1},
        /* round 4: credit back to rank 2 on CREDIT(node 0) */
        {4, RMACOLL__Q_PROXY_PUT, P, PROXY, 2, 0,
         RMACOLL__TASK_CREDIT | RMACOLL__TASK_SIGNAL, RMACOLL__WIN_NONE,
         RMACOLL__WIN_NONE, 0, 0, 0, 4, 1},
        /* round 5: complete blocks: 2 direct, 1 from its node, 3 via rank 1 */
        {5, RMACOLL__Q_PROXY_WAIT, W, PROXY, 2, 2, RMACOLL__TASK_DATA, 0, 0,
         0, 0, 0, 2, 1},
        {5, RMACOLL__Q_CE_WAIT, W, CE, 1, 1, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0,
         1, 1},
        {5, RMACOLL__Q_CE_WAIT, W, CE, 1, 3, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0,
         3, 1},
};

static void test_exact_tasks_2x2(void **state)
{
    const want_t *w = w_2x2;
    char err[256];
    rmacoll_case_t *c;
    refexec_opts_t o;
    refexec_t *ex;

    (void)state;
    assert_int_equal(rmacoll_case_load(RMACOLL_CASES_DIR
                                       "/symmetric_small_2x2.txt", &c, err,
                                       sizeof(err)), 0);
    refexec_opts_init(&o);
    o.relay_slots = 4;
    o.relay_buffer_bytes = 1u << 20;
    ex = prepare(&o, c);
    check_plan(refexec_plan(ex, 0), w, sizeof(w_2x2) / sizeof(w_2x2[0]));
    refexec_destroy(ex);
    rmacoll_case_free(c);
}

/* One rank's planner over a case: topology (node sizes), the shift
 * scheduler, the case's inputs and a plan; the signal states of one build. */
typedef struct plan_fix {
    const rmacoll__plan_cfg_t *cfg;
    rmacoll_topo_t *topo;
    rmacoll__sched_t sched;
    planin_ctx_t ctx;
    planin_t pi;
    rmacoll__plan_t plan;
    rmacoll__sigstate_t *s0, *s1;
} plan_fix_t;

static void fix_open(plan_fix_t *f, const rmacoll_case_t *c, int nnodes, const int *sizes,
                     const rmacoll__plan_cfg_t *cfg)
{
    char err[256];

    memset(f, 0, sizeof(*f));
    f->cfg = cfg;
    assert_int_equal(rmacoll__topo_create_sizes(nnodes, sizes, &f->topo), 0);
    assert_int_equal(rmacoll__sched_open("shift", NULL, f->topo, 0, &f->sched, err,
                                         sizeof(err)), 0);
    assert_int_equal(planin_ctx_create(&f->ctx, c, f->topo, cfg, &f->sched, 1), 0);
    planin_init(&f->pi);
    rmacoll__plan_init(&f->plan);
}

/* Builds rank r's plan with the eager limits and the smallest direct
 * stream given (planin_eager, planin_direct; 0: off). */
static void fix_build_direct(plan_fix_t *f, int r, uint64_t eager_max, uint64_t node_eager_max,
                             uint64_t direct_min)
{
    assert_int_equal(planin_fill(&f->pi, &f->ctx, r), 0);
    assert_int_equal(planin_eager(&f->pi, &f->ctx, r, eager_max, node_eager_max), 0);
    assert_int_equal(planin_direct(&f->pi, &f->ctx, r, direct_min), 0);
    assert_int_equal(rmacoll__sigstate_create(f->topo, f->cfg, r, &f->s0), 0);
    assert_int_equal(rmacoll__sigstate_create(f->topo, f->cfg, r, &f->s1), 0);
    assert_int_equal(rmacoll__plan_build(&f->pi.in, f->s0, f->s1, &f->plan), 0);
}

static void fix_build(plan_fix_t *f, int r, uint64_t eager_max, uint64_t node_eager_max)
{
    fix_build_direct(f, r, eager_max, node_eager_max, 0);
}

static void fix_unbuild(plan_fix_t *f)
{
    rmacoll__sigstate_destroy(f->s0);
    rmacoll__sigstate_destroy(f->s1);
    f->s0 = f->s1 = NULL;
}

static void fix_close(plan_fix_t *f)
{
    rmacoll__plan_fini(&f->plan);
    planin_fini(&f->pi);
    planin_ctx_destroy(&f->ctx);
    rmacoll__sched_close(&f->sched);
    rmacoll__topo_destroy(f->topo);
}

/*
 * The eager path on symmetric_small_2x2 (see above). Rank 0's blocks for
 * node 1 are 3 + 1 elements (16 bytes), rank 2's for node 0 are 3 + 1 too,
 * ranks 1's and 3's 1 + 2 (12 bytes). With eager_max_bytes = 16 every
 * stream travels in the metadata records: rank 0 plans no network put and
 * copies its own blocks out of the payloads of rank 2 (offset 0, 3
 * elements, into rdispls_0[2] = 3 elements) and rank 3 (offset 0, 1
 * element, rdispls_0[3] = 6), which sit in its own inbox and in rank 1's
 * (rank 3's relay); it forwards nothing and waits only for its node peer.
 * Rank 2 likewise copies from ranks 0 and 1's payloads. With 8 no stream is
 * eager and the plan is the relay plan of test_exact_tasks_2x2. The signal
 * state after the call counts no direct put, wait or forward for the eager
 * blocks.
 */
static void test_eager_2x2(void **state)
{
    static const want_t w0[] = {
        {0, RMACOLL__Q_CE_PUT, P, CE, 0, 0, RMACOLL__TASK_SELF,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 0, 0, 4, NOSIG, 0},
        {0, RMACOLL__Q_CE_PUT, P, CE, 0, 2, RMACOLL__TASK_EAGER,
         RMACOLL__WIN_EAGER, RMACOLL__WIN_RECV, 0, 12, 12, NOSIG, 0},
        {0, RMACOLL__Q_CE_PUT, P, CE, 0, 3, RMACOLL__TASK_EAGER,
         RMACOLL__WIN_EAGER, RMACOLL__WIN_RECV, 0, 24, 4, NOSIG, 0},
        {1, RMACOLL__Q_CE_PUT, P, CE, 1, 0, RMACOLL__TASK_SIGNAL,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 4, 0, 8, 0, 1},
        {2, RMACOLL__Q_CE_WAIT, W, CE, 1, 1, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0, 1, 1},
    };
    static const want_t w2[] = {
        {0, RMACOLL__Q_CE_PUT, P, CE, 2, 2, RMACOLL__TASK_SELF,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 16, 16, 8, NOSIG, 0},
        {0, RMACOLL__Q_CE_PUT, P, CE, 2, 0, RMACOLL__TASK_EAGER,
         RMACOLL__WIN_EAGER, RMACOLL__WIN_RECV, 0, 0, 12, NOSIG, 0},
        {0, RMACOLL__Q_CE_PUT, P, CE, 2, 1, RMACOLL__TASK_EAGER,
         RMACOLL__WIN_EAGER, RMACOLL__WIN_RECV, 0, 12, 4, NOSIG, 0},
        /* round shift(2, 3) = 1: node peer */
        {1, RMACOLL__Q_CE_PUT, P, CE, 3, 2, RMACOLL__TASK_SIGNAL,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 24, 12, 12, 2, 1},
        {2, RMACOLL__Q_CE_WAIT, W, CE, 3, 3, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0, 3, 1},
    };
    rmacoll__plan_cfg_t cfg = {1, 1u << 20, 4, 1u << 30, 16, 0, 0, 1};
    char err[256];
    rmacoll_case_t *c;
    plan_fix_t f;
    static const int sizes[2] = {2, 2};
    int64_t pay[2] = {3, 1};

    (void)state;
    assert_int_equal(rmacoll_case_load(RMACOLL_CASES_DIR "/symmetric_small_2x2.txt", &c, err,
                                       sizeof(err)), 0);
    fix_open(&f, c, 2, sizes, &cfg);
    /* the rule: (0, 16] bytes in all, contiguous in local-rank order */
    assert_int_equal(rmacoll__plan_eager_bytes(pay, NULL, 2, 4, 16), 16);
    assert_int_equal(rmacoll__plan_eager_bytes(pay, NULL, 2, 4, 15), 0);
    assert_int_equal(rmacoll__plan_eager_bytes(pay, NULL, 2, 4, 0), 0);
    pay[0] = pay[1] = 0;
    assert_int_equal(rmacoll__plan_eager_bytes(pay, NULL, 2, 4, 16), 0);
    pay[0] = INT64_MAX / 2;
    assert_int_equal(rmacoll__plan_eager_bytes(pay, NULL, 2, 4, 1u << 20), 0);
    for (int r = 0; r <= 2; r += 2) {
        for (uint64_t max = 16; max >= 8; max -= 8) {
            int me_node = r / 2, other = 2 - r; /* the other node's relay */
            const rmacoll__sigstate_t *s1;
            fix_build(&f, r, max, 0);
            s1 = f.s1;
            if (max == 16) {
                check_plan(&f.plan, r == 0 ? w0 : w2, 5);
                /* no direct put to or wait from the other node's ranks, no
                 * forward, no chunk, no credit */
                assert_int_equal(s1->data_out[other], 0);
                assert_int_equal(s1->data_in[other], 0);
                assert_int_equal(s1->data_in[other + 1], 0);
                assert_int_equal(s1->data_in[r + 1], 1); /* node peer */
                assert_int_equal(s1->fwd_out[1], 0);
                assert_int_equal(s1->chan_out[1 - me_node], 0);
                assert_int_equal(s1->chan_in[0], 0);
            } else if (r == 0) {
                check_plan(&f.plan, w_2x2, sizeof(w_2x2) / sizeof(w_2x2[0]));
                assert_int_equal(s1->data_out[other], 1);
                assert_int_equal(s1->data_in[other], 1);
                assert_int_equal(s1->chan_out[1], 1);
                assert_int_equal(s1->chan_in[0], 1);
            }
            fix_unbuild(&f);
        }
    }
    fix_close(&f);
    rmacoll_case_free(c);
}

/*
 * Direct streams on symmetric_small_2x2 (above), relay.direct_min_bytes =
 * 16, no eager path. Streams to the other node: rank 0's 3 + 1 elements
 * (16 bytes: direct), rank 2's 3 + 1 (direct), rank 3's 1 + 2 (12 bytes:
 * through its relay, rank 1). Rank 0 puts straight to rank 2 (its relay:
 * DATA(0)) and rank 3 (XDATA(0) = 4 + 2 + 0), forwards nothing of rank 2's
 * stream (it is rank 2's relay), waits for rank 2 itself (DATA(2), rank 0
 * being rank 2's relay) and for rank 3's block through rank 1 (DATA(3)).
 * Rank 1 waits for XDATA(2) from rank 2 and forwards rank 3's stream. The
 * signal map has the XDATA words: ARRIVE(c, s) = 10 + 4c + s.
 */
static void test_direct_2x2(void **state)
{
    static const want_t w0[] = {
        {0, RMACOLL__Q_CE_PUT, P, CE, 0, 0, RMACOLL__TASK_SELF,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 0, 0, 4, NOSIG, 0},
        {1, RMACOLL__Q_CE_PUT, P, CE, 1, 0, RMACOLL__TASK_SIGNAL,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 4, 0, 8, 0, 1},
        {2, RMACOLL__Q_PROXY_PUT, P, PROXY, 2, 0, RMACOLL__TASK_SIGNAL | RMACOLL__TASK_DIRECT,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 12, 0, 12, 0, 1},
        {3, RMACOLL__Q_PROXY_PUT, P, PROXY, 3, 0, RMACOLL__TASK_SIGNAL | RMACOLL__TASK_DIRECT,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 24, 0, 4, 6, 1},
        {4, RMACOLL__Q_PROXY_WAIT, W, PROXY, 2, 2, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0, 2, 1},
        {4, RMACOLL__Q_CE_WAIT, W, CE, 1, 1, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0, 1, 1},
        {4, RMACOLL__Q_CE_WAIT, W, CE, 1, 3, RMACOLL__TASK_DATA, 0, 0, 0, 0, 0, 3, 1},
    };
    rmacoll__plan_cfg_t cfg = {1, 1u << 20, 4, 1u << 30, 0, 0, 16, 1};
    char err[256];
    rmacoll_case_t *c;
    plan_fix_t f;
    static const int sizes[2] = {2, 2};
    int64_t row[2] = {3, 1};
    int fwd = 0, xwait = 0, chunks = 0;

    (void)state;
    /* the rule: at least direct_min bytes, and not eager */
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 4, 0, 16), 1);
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 4, 0, 17), 0);
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 4, 16, 16), 0); /* eager */
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 4, 15, 16), 1);
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 4, 0, 0), 0);   /* off */
    row[0] = INT64_MAX / 2; /* 2^65 bytes: no overflow, the sum saturates */
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 8, 0, UINT64_MAX), 1);
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 8, 0, 1u << 20), 1);
    row[0] = 1000;
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 8, 0, UINT64_MAX), 0);
    row[0] = row[1] = 0;
    assert_int_equal(rmacoll__plan_direct_stream(row, NULL, 2, 4, 0, 1), 0);

    assert_int_equal(rmacoll_case_load(RMACOLL_CASES_DIR "/symmetric_small_2x2.txt", &c, err,
                                       sizeof(err)), 0);
    fix_open(&f, c, 2, sizes, &cfg);
    assert_int_equal(rmacoll__sig_xdata(f.topo, &cfg, 3), 9);
    assert_int_equal(rmacoll__sig_arrive(f.topo, &cfg, 0, 1), 11);
    fix_build_direct(&f, 0, 0, 0, 16);
    check_plan(&f.plan, w0, sizeof(w0) / sizeof(w0[0]));
    assert_int_equal(f.s1->data_out[2], 1);
    assert_int_equal(f.s1->data_out[3], 0);
    assert_int_equal(f.s1->xdata_out[3], 1);
    assert_int_equal(f.s1->chan_out[1], 0);
    assert_int_equal(f.s1->chan_in[0], 0);
    fix_unbuild(&f);
    fix_build_direct(&f, 1, 0, 0, 16);
    for (size_t i = 0; i < f.plan.ntasks; i++) {
        const rmacoll__task_t *t = &f.plan.tasks[i];
        fwd += (t->flags & RMACOLL__TASK_FORWARD) && t->origin == 3;
        xwait += t->op == W && t->sig == 8 && t->peer == 2 && t->path == PROXY;
        assert_false(t->op == P && t->path == PROXY && t->peer == 2 &&
                     (t->flags & RMACOLL__TASK_TO_RELAY)); /* rank 1's stream is direct */
    }
    assert_int_equal(fwd, 1); /* rank 3's block for rank 0 (rank 1's own comes straight) */
    assert_int_equal(xwait, 1);
    assert_int_equal(f.s1->xdata_in[2], 1);
    assert_int_equal(f.s1->data_in[2], 0);
    fix_unbuild(&f);
    fix_build_direct(&f, 3, 0, 0, 16);
    for (size_t i = 0; i < f.plan.ntasks; i++) {
        chunks += (f.plan.tasks[i].flags & RMACOLL__TASK_TO_RELAY) != 0;
    }
    assert_true(chunks > 0); /* rank 3's 12 bytes go through rank 1 */
    fix_unbuild(&f);
    fix_close(&f);
    rmacoll_case_free(c);
}

/*
 * The node eager path on one node of 3 ranks, float32. Send counts (row =
 * sender): 0: {1, 4, 0}, 1: {2, 1, 3}, 2: {5, 1, 2}. Node payloads: rank 0
 * 16 bytes (its block for rank 1 at 0), rank 1 20 bytes (rank 0's at 0,
 * rank 2's at 8), rank 2 24 bytes (rank 0's at 0, rank 1's at 20). With
 * node_eager_max_bytes = 24 rank 1 copies its self block and pulls its
 * blocks out of ranks 0 and 2's payloads (receive displacements 0, 4, 5
 * elements): no put to a peer, no wait, no signal state advanced. With 19
 * only rank 0's payload is eager: rank 1 puts to both peers (signalled),
 * pulls rank 0's block and waits for rank 2's.
 */
static void test_node_eager_plan(void **state)
{
    static const want_t w24[] = {
        {0, RMACOLL__Q_CE_PUT, P, CE, 1, 1, RMACOLL__TASK_SELF,
         RMACOLL__WIN_SEND, RMACOLL__WIN_RECV, 8, 16, 4, NOSIG, 0},
        {0, RMACOLL__Q_CE_PUT, P, CE, 1, 0, RMACOLL__TASK_EAGER,
         RMACOLL__WIN_NODE_EAGER, RMACOLL__WIN_RECV, 0, 0, 16, NOSIG, 0},
        {0, RMACOLL__Q_CE_PUT, P, CE, 1, 2, RMACOLL__TASK_EAGER,
         RMACOLL__WIN_NODE_EAGER, RMACOLL__WIN_RECV, 20, 20, 4, NOSIG, 0},
    };
    static const int64_t send[9] = {1, 4, 0, 2, 1, 3, 5, 1, 2};
    static const int node_of[3] = {0, 0, 0};
    rmacoll__plan_cfg_t cfg = {1, 1u << 20, 4, 1u << 30, 0, 24, 0, 1};
    rmacoll_case_t *c;
    plan_fix_t f;
    static const int sizes[1] = {3};
    uint64_t off[3];

    (void)state;
    assert_int_equal(rmacoll_case_create(3, node_of, RMACOLL_FLOAT32, &c), 0);
    memcpy(c->send, send, sizeof(send));
    memcpy(c->recv, send, sizeof(send));
    /* the rule: blocks for the node peers in local-rank order, own skipped */
    assert_int_equal(rmacoll__plan_node_eager_bytes(send + 3, (const int[]){0, 1, 2}, 3, 1, 4,
                                                    20, off), 20);
    assert_true(off[0] == 0 && off[1] == RMACOLL__NO_EAGER && off[2] == 8);
    assert_int_equal(rmacoll__plan_node_eager_bytes(send + 3, (const int[]){0, 1, 2}, 3, 1, 4,
                                                    19, off), 0);
    assert_true(off[0] == RMACOLL__NO_EAGER && off[2] == RMACOLL__NO_EAGER);
    assert_int_equal(rmacoll__plan_node_eager_bytes(send, (const int[]){0, 1, 2}, 3, 0, 4,
                                                    16, off), 16);
    assert_true(off[1] == 0 && off[2] == RMACOLL__NO_EAGER); /* empty block */
    fix_open(&f, c, 1, sizes, &cfg);
    for (uint64_t max = 24; max >= 19; max -= 5) {
        const rmacoll__sigstate_t *s1;
        fix_build(&f, 1, 0, max);
        s1 = f.s1;
        if (max == 24) {
            check_plan(&f.plan, w24, 3);
            for (int j = 0; j < 3; j++) {
                assert_int_equal(s1->data_out[j], 0);
                assert_int_equal(s1->data_in[j], 0);
            }
        } else {
            int pulls = 0, puts = 0, waits = 0;
            for (size_t k = 0; k < f.plan.ntasks; k++) {
                const rmacoll__task_t *t = &f.plan.tasks[k];
                pulls += t->src_win == RMACOLL__WIN_NODE_EAGER && t->origin == 0 &&
                         t->bytes == 16 && t->dst_off == 0;
                puts += t->op == P && (t->flags & RMACOLL__TASK_SIGNAL) && t->peer != 1;
                waits += t->op == W && t->origin == 2;
            }
            assert_int_equal(f.plan.ntasks, 5);
            assert_int_equal(pulls, 1);
            assert_int_equal(puts, 2);
            assert_int_equal(waits, 1);
            assert_int_equal(s1->data_out[0], 1);
            assert_int_equal(s1->data_out[2], 1);
            assert_int_equal(s1->data_in[0], 0);
            assert_int_equal(s1->data_in[2], 1);
        }
        fix_unbuild(&f);
    }
    fix_close(&f);
    rmacoll_case_free(c);
}

/* Layout helpers on nodes {0}, {1,2,3,4}. */
static void test_layout_1_4(void **state)
{
    static const int sizes[2] = {1, 4};
    rmacoll_topo_t *t;
    rmacoll__plan_cfg_t on = {1, 1000, 2, 1u << 30, 0, 0, 0, 1};
    rmacoll__plan_cfg_t off = {0, 1000, 2, 1u << 30, 0, 0, 0, 1};

    (void)state;
    assert_int_equal(rmacoll__topo_create_sizes(2, sizes, &t), 0);
    /* relay rule: node 1 is reached on rail 0 -> rank 1; node 0 (size 1)
     * through rank 0 by everyone */
    assert_int_equal(rmacoll__topo_relay(t, 0, 1), 1);
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(rmacoll__topo_relay(t, i, 0), 0);
    }
    assert_int_equal(rmacoll__plan_nin(t, &on, 0), 4);
    assert_int_equal(rmacoll__plan_nin(t, &on, 1), 1);
    assert_int_equal(rmacoll__plan_nin(t, &on, 2), 0);
    assert_int_equal(rmacoll__plan_nin(t, &off, 0), 0);
    for (int c = 0; c < 4; c++) {
        assert_int_equal(rmacoll__plan_chan_src(t, 0, c), c + 1);
        assert_int_equal(rmacoll__plan_chan_index(t, 0, c + 1), c);
    }
    assert_int_equal(rmacoll__plan_chan_src(t, 1, 0), 0);
    assert_int_equal(rmacoll__plan_chan_index(t, 1, 0), 0);
    assert_int_equal(rmacoll__plan_chan_index(t, 2, 0), -1);
    assert_int_equal(rmacoll__plan_chan_index(t, 1, 2), -1); /* same node */
    /* 1000 / (4 channels * 2 slots) = 125 -> 120 (multiple of 8) */
    assert_int_equal(rmacoll__plan_slot_bytes(t, &on, 0), 120);
    assert_int_equal(rmacoll__plan_slot_bytes(t, &on, 1), 1000 / 2 / 8 * 8);
    assert_int_equal(rmacoll__plan_slot_bytes(t, &on, 2), 0);
    assert_int_equal(rmacoll__plan_slot_off(t, &on, 0, 2, 1), 5 * 120);
    assert_int_equal(rmacoll__plan_slot_off(t, &on, 0, 0, 0), 0);
    assert_int_equal(rmacoll__sig_data(3), 3);
    assert_int_equal(rmacoll__sig_credit(t, 1), 6);
    assert_int_equal(rmacoll__sig_arrive(t, &on, 3, 1), 5 + 2 + 3 * 2 + 1);
    assert_int_equal(rmacoll__sig_count(t, &on, 0), 7 + 8);
    assert_int_equal(rmacoll__sig_count(t, &on, 1), 7 + 2);
    assert_int_equal(rmacoll__sig_count(t, &on, 2), 7);
    assert_int_equal(rmacoll__sig_count(t, &off, 0), 7);
    rmacoll__topo_destroy(t);
}

/* max_task_bytes: 40 bytes in pieces of 16, 16, 8; only the last signals.
 * A limit that is not a multiple of the element size rounds down. */
static void test_chunking(void **state)
{
    static const int node_of[2] = {0, 0};
    rmacoll_case_t *c;

    (void)state;
    assert_int_equal(rmacoll_case_create(2, node_of, RMACOLL_FLOAT32, &c), 0);
    c->send[1] = c->recv[1] = 10;
    for (int lim = 0; lim < 2; lim++) {
        refexec_opts_t o;
        refexec_t *ex;
        const rmacoll__plan_t *p;
        uint64_t want_piece = lim == 0 ? 16 : 4;
        uint64_t off = 0;
        size_t npieces = 0;

        refexec_opts_init(&o);
        o.relay_enabled = 0;
        o.max_task_bytes = lim == 0 ? 16 : 6;
        ex = prepare(&o, c);
        p = refexec_plan(ex, 0);
        for (size_t k = 0; k < p->ntasks; k++) {
            const rmacoll__task_t *t = &p->tasks[k];

            if (t->op != P) {
                continue;
            }
            assert_int_equal(t->round, 1);
            assert_int_equal(t->src_off, off);
            assert_int_equal(t->dst_off, off);
            off += t->bytes;
            npieces++;
            if (off < 40) {
                assert_int_equal(t->bytes, want_piece);
                assert_int_equal(t->flags & RMACOLL__TASK_SIGNAL, 0);
                assert_int_equal(t->sig, NOSIG);
            } else {
                assert_int_equal(t->bytes, 40 - want_piece * (npieces - 1));
                assert_int_equal(t->flags, RMACOLL__TASK_SIGNAL);
                assert_int_equal(t->sig, 0);
                assert_int_equal(t->sig_value, 1);
            }
        }
        assert_int_equal(off, 40);
        assert_int_equal(npieces, lim == 0 ? 3 : 10);
        refexec_destroy(ex);
    }
    rmacoll_case_free(c);
}

/* Collects rank r's tasks with all of `flags` and op, in plan order. */
static size_t collect(const rmacoll__plan_t *p, int op, uint32_t flags,
                      const rmacoll__task_t **out, size_t max)
{
    size_t n = 0;

    for (size_t k = 0; k < p->ntasks && n < max; k++) {
        if (p->tasks[k].op == op && (p->tasks[k].flags & flags) == flags) {
            out[n++] = &p->tasks[k];
        }
    }
    return n;
}

/*
 * Pipelining and signal state over two calls: nodes {0,1}, {2,3}; rank 0
 * sends 10 float32 to rank 3 only, through relay 2, whose 4 slots are 16
 * bytes: chunks of 16, 16, 8 bytes in rounds 2, 3, 4 (shift(0, 2) = 2).
 * The second call continues the channel's chunk count (g = 3, 4, 5, slots
 * 3, 0, 1) and the signal values.
 */
static void test_pipelining_two_calls(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_case_t *c;
    refexec_opts_t o;
    refexec_t *ex;
    refexec_result_t res;

    (void)state;
    assert_int_equal(rmacoll_case_create(4, node_of, RMACOLL_FLOAT32, &c), 0);
    c->send[0 * 4 + 3] = c->recv[0 * 4 + 3] = 10;
    refexec_opts_init(&o);
    o.relay_slots = 4;
    o.relay_buffer_bytes = 64;   /* nin(2) = 1: 4 slots of 16 bytes */
    assert_int_equal(refexec_create(&o, 4, node_of, &ex, NULL, 0), 0);
    for (int call = 0; call < 2; call++) {
        const rmacoll__task_t *t[16];
        const rmacoll__plan_t *p0, *p2, *p3;
        size_t n;

        assert_int_equal(refexec_prepare(ex, c, &res), 0);
        p0 = refexec_plan(ex, 0);
        p2 = refexec_plan(ex, 2);
        p3 = refexec_plan(ex, 3);
        /* sender: three chunks, the last piece of each signals ARRIVE */
        n = collect(p0, P, RMACOLL__TASK_TO_RELAY, t, 16);
        assert_int_equal(n, 3);
        for (size_t q = 0; q < 3; q++) {
            uint64_t g = 3 * (uint64_t)call + q;
            uint32_t slot = (uint32_t)(g % 4);

            assert_int_equal(t[q]->round, 2 + (int)q);
            assert_int_equal(t[q]->peer, 2);
            assert_int_equal(t[q]->src_off, 16 * q);
            assert_int_equal(t[q]->dst_off, 16 * slot);
            assert_int_equal(t[q]->bytes, q < 2 ? 16 : 8);
            assert_int_equal(t[q]->seq, g);
            assert_int_equal(t[q]->sig, 6 + slot);
            assert_int_equal(t[q]->sig_value, g / 4 + 1);
        }
        /* credit waits only once the slots wrap: chunk g = 4 waits for
         * the credit of chunk 0, g = 5 for chunk 1 */
        n = collect(p0, W, RMACOLL__TASK_CREDIT, t, 16);
        assert_int_equal(n, call == 0 ? 0 : 2);
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(t[k]->peer, 2);
            assert_int_equal(t[k]->sig, 4 + 1);  /* CREDIT(node 1) */
            assert_int_equal(t[k]->sig_value, k + 1);
        }
        /* relay: arrival waits, forwards, credits */
        n = collect(p2, W, RMACOLL__TASK_ARRIVAL, t, 16);
        assert_int_equal(n, 3);
        for (size_t q = 0; q < 3; q++) {
            uint64_t g = 3 * (uint64_t)call + q;

            assert_int_equal(t[q]->round, 2 + (int)q);
            assert_int_equal(t[q]->sig, 6 + g % 4);
            assert_int_equal(t[q]->sig_value, g / 4 + 1);
        }
        n = collect(p2, P, RMACOLL__TASK_FORWARD, t, 16);
        assert_int_equal(n, 3);
        for (size_t q = 0; q < 3; q++) {
            uint64_t g = 3 * (uint64_t)call + q;

            assert_int_equal(t[q]->round, 3 + (int)q);
            assert_int_equal(t[q]->peer, 3);
            assert_int_equal(t[q]->origin, 0);
            assert_int_equal(t[q]->src_off, 16 * (g % 4));
            assert_int_equal(t[q]->dst_off, 16 * q);
            assert_int_equal(t[q]->bytes, q < 2 ? 16 : 8);
            /* only the piece's last byte signals DATA(0) at rank 3 */
            assert_int_equal(t[q]->sig, q < 2 ? NOSIG : 0);
            if (q == 2) {
                assert_int_equal(t[q]->sig_value, (uint64_t)call + 1);
            }
        }
        n = collect(p2, P, RMACOLL__TASK_CREDIT, t, 16);
        assert_int_equal(n, 3);
        for (size_t q = 0; q < 3; q++) {
            assert_int_equal(t[q]->round, 4 + (int)q);
            assert_int_equal(t[q]->peer, 0);
            assert_int_equal(t[q]->sig, 4 + 1);
            assert_int_equal(t[q]->sig_value, 3 * (uint64_t)call + q + 1);
        }
        /* receiver: one data wait, on its node peer 2, value = call + 1 */
        n = collect(p3, W, RMACOLL__TASK_DATA, t, 16);
        assert_int_equal(n, 1);
        assert_int_equal(t[0]->peer, 2);
        assert_int_equal(t[0]->origin, 0);
        assert_int_equal(t[0]->path, CE);
        assert_int_equal(t[0]->sig_value, (uint64_t)call + 1);
        assert_int_equal(refexec_plan(ex, 1)->ntasks, 0);  /* idle rank */
        if (refexec_execute(ex, &res) != RMACOLL_SUCCESS) {
            fail_msg("call %d: %s", call, res.msg);
        }
    }
    refexec_destroy(ex);
    rmacoll_case_free(c);
}

/*
 * half_idle.txt as test_gpu_threads runs it: all 8 ranks on one node (one
 * node key), odd ranks neither sending nor receiving, three calls. In
 * every call each DATA word a rank waits for is signalled by its writer
 * with exactly the value awaited (the counters of both sides, advanced on
 * calls where the pair has a block and only then), idle ranks plan
 * nothing, and the reference executor delivers every byte.
 */
static void test_half_idle_one_node_values(void **state)
{
    rmacoll_case_t *c = NULL;
    refexec_opts_t o;
    refexec_t *ex;
    refexec_result_t res;
    char err[256];

    (void)state;
    if (rmacoll_case_load(RMACOLL_CASES_DIR "/half_idle.txt", &c, err, sizeof(err)) !=
        RMACOLL_SUCCESS) {
        fail_msg("%s", err);
    }
    assert_int_equal(c->nranks, 8);
    for (int r = 0; r < c->nranks; r++) {
        c->node_of[r] = 0;
    }
    c->nnodes = 1;
    refexec_opts_init(&o);
    assert_int_equal(refexec_create(&o, c->nranks, c->node_of, &ex, err, sizeof(err)), 0);
    for (uint64_t call = 0; call < 3; call++) {
        int nwaits = 0, nputs = 0;

        if (refexec_prepare(ex, c, &res) != RMACOLL_SUCCESS) {
            fail_msg("call %llu: %s %s", (unsigned long long)call, res.msg,
                     res.plan_errmsg);
        }
        for (int r = 0; r < c->nranks; r++) {
            const rmacoll__plan_t *p = refexec_plan(ex, r);

            if (r % 2 == 1) {
                assert_int_equal(p->ntasks, 0); /* idle: nothing to enqueue */
                continue;
            }
            for (size_t k = 0; k < p->ntasks; k++) {
                const rmacoll__task_t *w = &p->tasks[k];
                const rmacoll__plan_t *q;
                int found = 0;

                if (w->op != W) {
                    continue;
                }
                /* a data wait on a node peer: DATA(origin), call + 1 */
                assert_int_equal(w->flags, RMACOLL__TASK_DATA);
                assert_int_equal(w->path, CE);
                assert_int_equal(w->peer, w->origin);
                assert_int_equal(w->origin % 2, 0);
                assert_int_equal(w->sig, (uint32_t)w->origin);
                assert_int_equal(w->sig_value, call + 1);
                q = refexec_plan(ex, w->origin);
                for (size_t m = 0; m < q->ntasks; m++) {
                    const rmacoll__task_t *t = &q->tasks[m];

                    if (t->op == P && t->peer == r && (t->flags & RMACOLL__TASK_SIGNAL)) {
                        assert_int_equal(t->sig, w->sig);
                        assert_int_equal(t->sig_value, w->sig_value);
                        found++;
                    }
                }
                assert_int_equal(found, 1);
                nwaits++;
            }
            for (size_t k = 0; k < p->ntasks; k++) {
                nputs += p->tasks[k].op == P;
            }
        }
        /* 4 active ranks: 3 node peers each, plus a self copy */
        assert_int_equal(nwaits, 12);
        assert_int_equal(nputs, 16);
        if (refexec_execute(ex, &res) != RMACOLL_SUCCESS) {
            fail_msg("call %llu: %s", (unsigned long long)call, res.msg);
        }
    }
    refexec_destroy(ex);
    rmacoll_case_free(c);
}

/* The relay rule towards a smaller node (1+4): ranks 1..4 reach rank 0
 * directly (it is their relay); rank 0's stream to node 1 goes through
 * rank 1, which forwards 8 bytes to each of 2, 3, 4. */
static void test_relay_smaller_node(void **state)
{
    static const int node_of[5] = {0, 1, 1, 1, 1};
    rmacoll_case_t *c;
    refexec_opts_t o;
    refexec_t *ex;
    const rmacoll__task_t *t[16];
    size_t n;

    (void)state;
    assert_int_equal(rmacoll_case_create(5, node_of, RMACOLL_INT32, &c), 0);
    for (int k = 0; k < 25; k++) {
        c->send[k] = c->recv[k] = 2;
    }
    refexec_opts_init(&o);
    ex = prepare(&o, c);
    for (int i = 1; i <= 4; i++) {
        const rmacoll__plan_t *p = refexec_plan(ex, i);

        assert_int_equal(collect(p, P, RMACOLL__TASK_TO_RELAY, t, 16), 0);
        n = collect(p, P, RMACOLL__TASK_SIGNAL, t, 16);
        for (size_t k = 0; k < n; k++) {
            if (t[k]->peer == 0 && !(t[k]->flags & RMACOLL__TASK_CREDIT)) {
                assert_int_equal(t[k]->path, PROXY);
                assert_int_equal(t[k]->dst_win, RMACOLL__WIN_RECV);
                assert_int_equal(t[k]->dst_off, 8 * i);
                assert_int_equal(t[k]->bytes, 8);
            }
        }
    }
    n = collect(refexec_plan(ex, 0), P, RMACOLL__TASK_TO_RELAY, t, 16);
    /* one chunk of three pieces (blocks for 2, 3, 4 at elements 4, 6, 8
     * of rank 0's send buffer); only the chunk's last piece signals */
    assert_int_equal(n, 3);
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(t[k]->peer, 1);
        assert_int_equal(t[k]->src_off, 16 + 8 * k);
        assert_int_equal(t[k]->dst_off, 8 * k);
        assert_int_equal(t[k]->bytes, 8);
        assert_int_equal(t[k]->seq, 0);
        assert_int_equal(t[k]->sig, k < 2 ? NOSIG : 5 + 2);  /* ARRIVE(0,0) */
    }
    n = collect(refexec_plan(ex, 1), P, RMACOLL__TASK_FORWARD, t, 16);
    assert_int_equal(n, 3);
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(t[k]->peer, 2 + (int)k);
        assert_int_equal(t[k]->src_off, 8 * k);
        assert_int_equal(t[k]->dst_off, 0);
        assert_int_equal(t[k]->bytes, 8);
        assert_int_equal(t[k]->sig, 0);
    }
    refexec_destroy(ex);
    rmacoll_case_free(c);
}

/*
 * planin (one rank's input from the matrix, for rmacoll-plan --rank, the
 * benchmark and the simulator) gives exactly refexec's plans: every task
 * of every rank, byte for byte, on uneven, non-contiguous and mismatch-free
 * shared cases and a random one, with exact displacements.
 */
static void test_planin_matches_refexec(void **state)
{
    static const char *const files[] = {
        "/uneven_nodes_3_2.txt", "/moe_zipf_2x4.txt", "/sparse_two_cross.txt",
        "/single_rank_node_1_4.txt", "/half_idle.txt", "/symmetric_small_2x2.txt",
    };
    (void)state;
    for (size_t f = 0; f <= sizeof(files) / sizeof(files[0]); f++) {
        char err[256], path[512];
        rmacoll_case_t *c;
        refexec_opts_t o;
        refexec_t *ex;
        rmacoll__sched_t sched = {NULL, NULL};
        rmacoll__plan_cfg_t cfg;
        planin_ctx_t ctx;
        planin_t pi;
        rmacoll__plan_t plan;

        if (f < sizeof(files) / sizeof(files[0])) {
            snprintf(path, sizeof(path), "%s%s", RMACOLL_CASES_DIR, files[f]);
            assert_int_equal(rmacoll_case_load(path, &c, err, sizeof(err)), 0);
        } else {
            int sizes[3] = {3, 1, 2};
            rmacoll_case_dist_t d = {RMACOLL_CASE_RANDOM, 0};
            assert_int_equal(rmacoll_case_random(3, sizes, &d, 50, 9,
                                                 RMACOLL_FLOAT64, &c), 0);
        }
        refexec_opts_init(&o);
        o.scheduler = "node_shift";
        o.relay_buffer_bytes = 256;
        o.relay_slots = 2;
        o.max_task_bytes = 40;
        ex = prepare(&o, c);
        memset(&cfg, 0, sizeof(cfg)); /* the fields not set below are 0, as in o */
        cfg.relay_enabled = o.relay_enabled;
        cfg.relay_buffer_bytes = o.relay_buffer_bytes;
        cfg.relay_slots = o.relay_slots;
        cfg.max_task_bytes = o.max_task_bytes;
        assert_int_equal(rmacoll__sched_open("node_shift", NULL, refexec_topo(ex),
                                             0, &sched, err, sizeof(err)), 0);
        for (int mode = 1; mode <= 2; mode++) {
            assert_int_equal(planin_ctx_create(&ctx, c, refexec_topo(ex), &cfg,
                                               &sched, mode), 0);
            planin_init(&pi);
            rmacoll__plan_init(&plan);
            for (int r = 0; r < c->nranks; r++) {
                const rmacoll__plan_t *want = refexec_plan(ex, r);
                rmacoll__sigstate_t *s0, *s1;

                assert_non_null(want);
                assert_int_equal(planin_fill(&pi, &ctx, r), 0);
                assert_int_equal(rmacoll__sigstate_create(refexec_topo(ex), &cfg,
                                                          r, &s0), 0);
                assert_int_equal(rmacoll__sigstate_create(refexec_topo(ex), &cfg,
                                                          r, &s1), 0);
                assert_int_equal(rmacoll__plan_build(&pi.in, s0, s1, &plan), 0);
                assert_int_equal(plan.ntasks, want->ntasks);
                assert_int_equal(plan.nbatches, want->nbatches);
                assert_memory_equal(plan.tasks, want->tasks,
                                    plan.ntasks * sizeof(rmacoll__task_t));
                assert_memory_equal(plan.batches, want->batches,
                                    plan.nbatches * sizeof(rmacoll__batch_t));
                rmacoll__sigstate_destroy(s0);
                rmacoll__sigstate_destroy(s1);
            }
            rmacoll__plan_fini(&plan);
            planin_fini(&pi);
            planin_ctx_destroy(&ctx);
        }
        rmacoll__sched_close(&sched);
        refexec_destroy(ex);
        rmacoll_case_free(c);
    }
}

/*
 * The topology tables a plan keeps (rmacoll__plan_topo) equal the O(n)
 * layout helpers on uneven, non-contiguous random topologies, with the
 * relay on and off; a change of rank or config recomputes them.
 */
static void test_plan_topo_tables(void **state)
{
    uint64_t rs = 12345;

    (void)state;
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + (int)(rmacoll_case_rand(&rs) % 40);
        int nn = 1 + (int)(rmacoll_case_rand(&rs) % 7);
        int keys[64];
        rmacoll_topo_t *topo;
        rmacoll__plan_cfg_t cfg = {trial % 5 != 0, 1u << 20,
                                   1 + (uint32_t)(trial % 4), 1u << 30, 0, 0, 0, 1};
        rmacoll__plan_t plan;

        for (int r = 0; r < n; r++) {
            keys[r] = (int)(rmacoll_case_rand(&rs) % (uint64_t)nn);
        }
        assert_int_equal(rmacoll__topo_create(n, keys, &topo), 0);
        rmacoll__plan_init(&plan);
        for (int me = 0; me < n; me++) {
            const rmacoll__plan_topo_t *pt =
                rmacoll__plan_topo(&plan, topo, &cfg, me);
            int A = topo->node_of[me];

            assert_non_null(pt);
            assert_int_equal(pt->nin, rmacoll__plan_nin(topo, &cfg, me));
            assert_int_equal(pt->in_slot, rmacoll__plan_slot_bytes(topo, &cfg, me));
            for (int c = 0; c < pt->nin; c++) {
                assert_int_equal(pt->chan_src[c], rmacoll__plan_chan_src(topo, me, c));
            }
            for (int i = 0; i < n; i++) {
                int want = cfg.relay_enabled ? rmacoll__plan_chan_index(topo, me, i) : -1;
                assert_int_equal(pt->chan_of_src[i], want);
            }
            for (int B = 0; B < topo->nnodes; B++) {
                int r;
                if (B == A || !cfg.relay_enabled) {
                    assert_int_equal(pt->out_chan[B], -1);
                    continue;
                }
                r = rmacoll__topo_relay(topo, me, B);
                assert_int_equal(pt->out_chan[B], rmacoll__plan_chan_index(topo, r, me));
                assert_int_equal(pt->out_slot[B], rmacoll__plan_slot_bytes(topo, &cfg, r));
            }
            assert_ptr_equal(rmacoll__plan_topo(&plan, topo, &cfg, me), pt);
        }
        rmacoll__plan_fini(&plan);
        assert_null(plan.pt);
        rmacoll__topo_destroy(topo);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_tasks_2x2),
        cmocka_unit_test(test_eager_2x2),
        cmocka_unit_test(test_direct_2x2),
        cmocka_unit_test(test_node_eager_plan),
        cmocka_unit_test(test_layout_1_4),
        cmocka_unit_test(test_chunking),
        cmocka_unit_test(test_pipelining_two_calls),
        cmocka_unit_test(test_relay_smaller_node),
        cmocka_unit_test(test_planin_matches_refexec),
        cmocka_unit_test(test_plan_topo_tables),
        cmocka_unit_test(test_half_idle_one_node_values),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
