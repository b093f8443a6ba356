/*
 * plan_relay.c - the relay streams of the planner: the per-rank cache of
 * relay channels (rmacoll__plan_topo), a stream cut into slot-sized chunks,
 * and the tasks of both ends of a channel: the sender's chunk puts and
 * credit waits (rmacoll__plan_stream_out), the relay's arrival waits,
 * forwards and credits (rmacoll__plan_stream_in).
 */
#include "core/plan/plan_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan/topo.h"

void rmacoll__plan_topo_free(rmacoll__plan_topo_t *pt)
{
    if (pt == NULL) {
        return;
    }
    free(pt->chan_src);
    free(pt->chan_of_src);
    free(pt->out_chan);
    free(pt->out_slot);
    free(pt);
}

static uint64_t slot_bytes_for(const rmacoll__plan_cfg_t *cfg, int nin)
{
    if (nin == 0 || cfg->relay_slots == 0) {
        return 0;
    }
    return (cfg->relay_buffer_bytes / ((uint64_t)nin * cfg->relay_slots)) &
           ~(uint64_t)7;
}

/*
 * The channels of `rank` as a relay and as a sender (pt->nin, chan_src,
 * chan_of_src, out_chan, out_slot, in_slot). The senders of relay r (local
 * l on a node of size s) are the ranks of other nodes whose local rank is
 * l mod s, so per distinct node size s two histograms of local ranks mod s
 * answer everything: tot[l] (all ranks) and before[l] (ranks below
 * `rank`). The only rank of r's own node in the class is r itself.
 * Returns 0 when out of memory.
 */
static int plan_topo_channels(rmacoll__plan_topo_t *pt, const rmacoll_topo_t *topo,
                              const rmacoll__plan_cfg_t *cfg, int rank)
{
    int n = topo->nranks, nn = topo->nnodes, A = topo->node_of[rank];
    int *tot = NULL, *before = NULL;
    int maxs = 0;
    int ok;

    for (int B = 0; B < nn; B++) {
        maxs = topo->node_size[B] > maxs ? topo->node_size[B] : maxs;
    }
    tot = malloc((size_t)maxs * sizeof(int));
    before = malloc((size_t)maxs * sizeof(int));
    ok = tot && before;
    /* one pass over the ranks per distinct node size (nodes in order;
     * a size seen before is skipped) */
    for (int B = 0; ok && B < nn; B++) {
        int sz = topo->node_size[B], seen = 0;
        for (int B2 = 0; B2 < B && !seen; B2++) {
            seen = topo->node_size[B2] == sz;
        }
        if (seen) {
            continue;
        }
        memset(tot, 0, (size_t)sz * sizeof(int));
        memset(before, 0, (size_t)sz * sizeof(int));
        for (int i = 0; i < n; i++) {
            int l = topo->local_rank[i] % sz;
            tot[l]++;
            before[l] += i < rank;
        }
        for (int D = B; D < nn; D++) {
            int l, r;
            if (topo->node_size[D] != sz || D == A) {
                continue;
            }
            l = topo->local_rank[rank] % sz;
            r = rmacoll__topo_rank(topo, D, l);
            pt->out_chan[D] = before[l] - (r < rank);
            pt->out_slot[D] = slot_bytes_for(cfg, tot[l] - 1);
        }
        if (sz == topo->node_size[A]) {
            pt->nin = tot[topo->local_rank[rank]] - 1;
        }
    }
    pt->chan_src = malloc(((size_t)pt->nin + 1) * sizeof(int));
    ok = ok && pt->chan_src;
    for (int i = 0, c = 0; ok && i < n; i++) {
        if (topo->node_of[i] != A &&
            rmacoll__topo_relay(topo, i, A) == rank) {
            pt->chan_src[c] = i;
            pt->chan_of_src[i] = c++;
        }
    }
    pt->in_slot = slot_bytes_for(cfg, pt->nin);
    free(tot);
    free(before);
    return ok;
}

/* The relay channel cache of `rank` (plan.h: rmacoll__plan_topo_t), or
 * NULL when out of memory. */
static rmacoll__plan_topo_t *plan_topo_create(const rmacoll_topo_t *topo,
                                              const rmacoll__plan_cfg_t *cfg,
                                              int rank)
{
    int n = topo->nranks, nn = topo->nnodes;
    rmacoll__plan_topo_t *pt = calloc(1, sizeof(*pt));
    int ok;

    if (pt == NULL) {
        return NULL;
    }
    pt->topo = topo;
    pt->rank = rank;
    pt->relay_enabled = cfg->relay_enabled;
    pt->relay_buffer_bytes = cfg->relay_buffer_bytes;
    pt->relay_slots = cfg->relay_slots;
    pt->chan_of_src = malloc((size_t)n * sizeof(int));
    pt->out_chan = malloc((size_t)nn * sizeof(int));
    pt->out_slot = calloc((size_t)nn, sizeof(uint64_t));
    ok = pt->chan_of_src && pt->out_chan && pt->out_slot;
    for (int i = 0; ok && i < n; i++) {
        pt->chan_of_src[i] = -1;
    }
    for (int B = 0; ok && B < nn; B++) {
        pt->out_chan[B] = -1;
    }
    if (ok && cfg->relay_enabled) {
        ok = plan_topo_channels(pt, topo, cfg, rank);
    }
    if (!ok) {
        rmacoll__plan_topo_free(pt);
        return NULL;
    }
    return pt;
}

const rmacoll__plan_topo_t *rmacoll__plan_topo(rmacoll__plan_t *plan,
                                               const rmacoll_topo_t *topo,
                                               const rmacoll__plan_cfg_t *cfg,
                                               int rank)
{
    rmacoll__plan_topo_t *pt = plan->pt;

    if (pt != NULL && pt->topo == topo && pt->rank == rank &&
        pt->relay_enabled == cfg->relay_enabled &&
        pt->relay_buffer_bytes == cfg->relay_buffer_bytes &&
        pt->relay_slots == cfg->relay_slots) {
        return pt;
    }
    rmacoll__plan_topo_free(pt);
    plan->pt = plan_topo_create(topo, cfg, rank);
    return plan->pt;
}

static rmacoll_status_t slot_too_small(rmacoll__plan_t *plan, int relay,
                                       uint64_t slot, size_t esize)
{
    snprintf(plan->errmsg, sizeof(plan->errmsg),
             "relay.buffer_bytes: the relay slot of rank %d holds %llu bytes, "
             "less than one element of %zu bytes",
             relay, (unsigned long long)slot, esize);
    plan->err_peer = relay;
    return RMACOLL_ERR_CONFIG;
}

/* Walks a stream of pieces cut into chunks; calls emit for each segment. */
typedef struct stream {
    const int64_t *counts;  /* element counts */
    const int *members;     /* piece p's count is counts[members[p]], or
                               counts[p] when NULL */
    int npieces;
    int skip;               /* piece index excluded (the relay itself) */
    size_t esize;
} stream_t;

static uint64_t stream_bytes(const stream_t *s, int p)
{
    int64_t n = s->counts[s->members ? s->members[p] : p];

    return p == s->skip ? 0 : (uint64_t)n * s->esize;
}

/* Walk state over a stream: the next segment starts at `pos`, inside
 * piece p, which starts at stream offset `pstart`. */
typedef struct stream_cursor {
    uint64_t pos;
    uint64_t pstart;
    int p;
} stream_cursor_t;

/* One segment of the stream up to `cend`: a run of bytes inside one piece.
 * Returns 0 when the cursor reached cend. *last_of_piece tells whether the
 * segment ends its piece. */
static int stream_next(const stream_t *s, stream_cursor_t *cur, uint64_t cend,
                       int *piece, uint64_t *off_in_piece, uint64_t *n,
                       int *last_of_piece)
{
    while (cur->pos < cend) {
        uint64_t pb = stream_bytes(s, cur->p);
        uint64_t end = cur->pstart + pb;
        if (cur->pos >= end) {
            cur->pstart = end;
            cur->p++;
            continue;
        }
        *piece = cur->p;
        *off_in_piece = cur->pos - cur->pstart;
        *n = (end < cend ? end : cend) - cur->pos;
        *last_of_piece = end <= cend;
        cur->pos += *n;
        return 1;
    }
    return 0;
}

static uint64_t stream_total(const stream_t *s)
{
    uint64_t total = 0;

    for (int p = 0; p < s->npieces; p++) {
        total += stream_bytes(s, p);
    }
    return total;
}

/* Rounds between consecutive chunks of a relay stream: the credit that
 * frees a slot is put two rounds after the chunk's arrival and waited one
 * round before the next put into that slot, so stride * S >= 3. Sender and
 * relay must use the same rule. */
static int relay_stride(uint32_t S)
{
    return S >= 3 ? 1 : (S == 2 ? 2 : 3);
}

/* Sender side of the stream from this rank to node B through its relay. */
rmacoll_status_t rmacoll__plan_stream_out(rmacoll__plan_ctx_t *ctx,
                                          const rmacoll__sigstate_t *st, int B,
                                          uint64_t *nchunks)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    const rmacoll__plan_cfg_t *cfg = in->cfg;
    int me = in->rank;
    int r = rmacoll__topo_relay(topo, me, B);
    int lsB = topo->node_size[B];
    int c = ctx->pt->out_chan[B];
    uint32_t S = cfg->relay_slots;
    int stride = relay_stride(S);
    int t0 = rmacoll__plan_sched_round(in, me, r);
    uint64_t cb = ctx->pt->out_slot[B];
    stream_t s = {in->sendcounts, topo->node_members + topo->node_first[B], lsB,
                  topo->local_rank[r], in->esize};
    uint64_t L = stream_total(&s);
    uint64_t g0 = st->chan_out[B];
    uint64_t Q, off, n;
    stream_cursor_t cur = {0, 0, 0};
    int p, last;

    *nchunks = 0;
    if (L == 0 || rmacoll__plan_eager_to(in, B) != 0 || ctx->direct_to[B]) {
        /* nothing to send, it travels in the record, or it goes straight
         * to its receivers (rmacoll__plan_direct_puts) */
        return RMACOLL_SUCCESS;
    }
    if (cb < in->esize) {
        return slot_too_small(ctx->plan, r, cb, in->esize);
    }
    Q = (L + cb - 1) / cb;
    for (uint64_t q = 0; q < Q; q++) {
        uint64_t g = g0 + q;
        uint32_t slot = (uint32_t)(g % S);
        int round = t0 + stride * (int)q;
        uint64_t cend = (q + 1) * cb < L ? (q + 1) * cb : L;
        rmacoll__task_t t;

        if (g >= S) {
            memset(&t, 0, sizeof(t));
            t.op = RMACOLL__OP_WAIT;
            t.path = RMACOLL__PATH_PROXY;
            t.flags = RMACOLL__TASK_CREDIT;
            t.peer = r;
            t.origin = me;
            t.round = round - 1;
            t.sig = rmacoll__sig_credit(topo, B);
            t.sig_value = g - S + 1;
            t.seq = g - S;
            rmacoll__plan_add_task(ctx, &t);
        }
        while (stream_next(&s, &cur, cend, &p, &off, &n, &last)) {
            int j = rmacoll__topo_rank(topo, B, p);
            memset(&t, 0, sizeof(t));
            t.op = RMACOLL__OP_PUT;
            t.path = RMACOLL__PATH_PROXY;
            t.src_win = RMACOLL__WIN_SEND;
            t.dst_win = RMACOLL__WIN_RELAY;
            t.flags = RMACOLL__TASK_TO_RELAY;
            t.peer = r;
            t.origin = me;
            t.round = round;
            t.sig = RMACOLL__NO_SIG;
            t.src_off = (uint64_t)in->sdispls[j] * in->esize + off;
            t.dst_off = ((uint64_t)c * S + slot) * cb + (cur.pos - n - q * cb);
            t.bytes = n;
            t.seq = g;
            if (cur.pos == cend) {
                t.flags |= RMACOLL__TASK_SIGNAL;
                t.sig = rmacoll__sig_arrive(topo, cfg, c, slot);
                t.sig_value = g / S + 1;
            }
            rmacoll__plan_add_put(ctx, &t);
        }
    }
    *nchunks = Q;
    return ctx->status;
}

/* The relay's wait, in `round`, for chunk g of incoming channel c (from
 * sender i) to arrive in its slot. */
static void add_arrival_wait(rmacoll__plan_ctx_t *ctx, int c, int i, uint64_t g, int round)
{
    const rmacoll__plan_cfg_t *cfg = ctx->in->cfg;
    uint32_t S = cfg->relay_slots;
    uint32_t slot = (uint32_t)(g % S);
    rmacoll__task_t t;

    memset(&t, 0, sizeof(t));
    t.op = RMACOLL__OP_WAIT;
    t.path = RMACOLL__PATH_PROXY;
    t.flags = RMACOLL__TASK_ARRIVAL;
    t.peer = i;
    t.origin = i;
    t.round = round;
    t.sig = rmacoll__sig_arrive(ctx->in->topo, cfg, c, slot);
    t.sig_value = g / S + 1;
    t.seq = g;
    rmacoll__plan_add_task(ctx, &t);
}

/* The relay's credit to sender i, in `round`, once chunk g is forwarded:
 * its slot is free again. */
static void add_credit(rmacoll__plan_ctx_t *ctx, int i, uint64_t g, int round)
{
    const rmacoll_topo_t *topo = ctx->in->topo;
    rmacoll__task_t t;

    memset(&t, 0, sizeof(t));
    t.op = RMACOLL__OP_PUT;
    t.path = RMACOLL__PATH_PROXY;
    t.flags = RMACOLL__TASK_CREDIT | RMACOLL__TASK_SIGNAL;
    t.peer = i;
    t.origin = ctx->in->rank;
    t.round = round;
    t.sig = rmacoll__sig_credit(topo, topo->node_of[ctx->in->rank]);
    t.sig_value = g + 1;
    t.seq = g;
    rmacoll__plan_add_task(ctx, &t);
}

/* Relay side of incoming channel c: arrival waits, forwards, credits. */
rmacoll_status_t rmacoll__plan_stream_in(rmacoll__plan_ctx_t *ctx,
                                         const rmacoll__sigstate_t *st, int c,
                                         uint64_t *nchunks)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    const rmacoll__plan_cfg_t *cfg = in->cfg;
    int me = in->rank;
    int A = topo->node_of[me];
    int ls = topo->node_size[A];
    int i = ctx->pt->chan_src[c];
    uint32_t S = cfg->relay_slots;
    int stride = relay_stride(S);
    int t0 = rmacoll__plan_sched_round(in, i, me);
    uint64_t cb = ctx->pt->in_slot;
    stream_t s = {in->chan_sendcount + (size_t)c * ls, NULL, ls,
                  topo->local_rank[me], in->esize};
    uint64_t L = stream_total(&s);
    uint64_t g0 = st->chan_in[c];
    uint64_t Q, off, n;
    stream_cursor_t cur = {0, 0, 0};
    int p, last;

    *nchunks = 0;
    if (rmacoll__plan_eager_from(in, c) != 0 || rmacoll__plan_direct_from(in, c)) {
        /* its receivers copy it out of the record, or its sender puts it
         * straight into their receive buffers */
        return RMACOLL_SUCCESS;
    }
    if (L == 0) {
        return RMACOLL_SUCCESS;
    }
    if (cb < in->esize) {
        return slot_too_small(ctx->plan, me, cb, in->esize);
    }
    Q = (L + cb - 1) / cb;
    for (uint64_t q = 0; q < Q; q++) {
        uint64_t g = g0 + q;
        uint32_t slot = (uint32_t)(g % S);
        int round = t0 + stride * (int)q;
        uint64_t cend = (q + 1) * cb < L ? (q + 1) * cb : L;
        uint64_t slot_off = ((uint64_t)c * S + slot) * cb;
        rmacoll__task_t t;

        add_arrival_wait(ctx, c, i, g, round);
        while (stream_next(&s, &cur, cend, &p, &off, &n, &last)) {
            int j = rmacoll__topo_rank(topo, A, p);
            size_t k = (size_t)c * ls + p;
            memset(&t, 0, sizeof(t));
            t.op = RMACOLL__OP_PUT;
            t.path = RMACOLL__PATH_CE;
            t.src_win = RMACOLL__WIN_RELAY;
            t.dst_win = RMACOLL__WIN_RECV;
            t.flags = RMACOLL__TASK_FORWARD;
            t.peer = j;
            t.origin = i;
            t.round = round + 1;
            t.sig = RMACOLL__NO_SIG;
            t.src_off = slot_off + (cur.pos - n - q * cb);
            t.dst_off = (uint64_t)in->chan_rdispl[k] * in->esize + off;
            t.bytes = n;
            t.seq = g;
            if (last) { /* the piece's last byte */
                t.flags |= RMACOLL__TASK_SIGNAL;
                t.sig = rmacoll__sig_data(i);
                t.sig_value = st->fwd_out[k] + 1;
            }
            rmacoll__plan_add_put(ctx, &t);
        }
        add_credit(ctx, i, g, round + 2);
    }
    *nchunks = Q;
    return ctx->status;
}
