/*
 * rx_check.c - the reference executor's checks of a plan's shape and of
 * every receive buffer, signal word and slot after a call
 * (refexec_int.h).
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

/* Checks batches are ordered and queues hold the right ops. */
void rx_check_plan_shape(refexec_t *ex, int r)
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
void rx_check_recv_done(refexec_t *ex, int r)
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

void rx_check_end(refexec_t *ex)
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

