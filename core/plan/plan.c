/*
 * plan.c - the relay planner: one rank's batches of tasks for one
 * AlltoAllV call, from the topology, its own counts and the metadata of
 * its peers. Pure and deterministic; the protocol is described in plan.h
 * and docs/protocol.md.
 */
#include "core/plan/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan/topo.h"

/* ---------------------------------------------------------------- layout */

uint64_t rmacoll__plan_eager_bytes(const int64_t *counts, const int *members, int ls,
                                   size_t esize, uint64_t eager_max)
{
    uint64_t sum = 0;

    if (eager_max == 0 || esize == 0) {
        return 0;
    }
    for (int l = 0; l < ls; l++) {
        int64_t n = counts[members != NULL ? members[l] : l];
        if (n < 0 || (uint64_t)n > eager_max / esize) {
            return 0;
        }
        sum += (uint64_t)n * esize;
        if (sum > eager_max) {
            return 0;
        }
    }
    return sum;
}

uint64_t rmacoll__plan_eager_off(const int64_t *counts, const int *members, int ls, int l,
                                 size_t esize, uint64_t eager_max)
{
    uint64_t off = 0;

    if (counts[members[l]] == 0 ||
        rmacoll__plan_eager_bytes(counts, members, ls, esize, eager_max) == 0) {
        return RMACOLL__NO_EAGER;
    }
    for (int k = 0; k < l; k++) {
        off += (uint64_t)counts[members[k]] * esize;
    }
    return off;
}

int rmacoll__plan_direct_stream(const int64_t *counts, const int *members, int ls,
                                size_t esize, uint64_t eager_max, uint64_t direct_min)
{
    uint64_t sum = 0;

    if (direct_min == 0 || esize == 0 ||
        rmacoll__plan_eager_bytes(counts, members, ls, esize, eager_max) != 0) {
        return 0;
    }
    for (int l = 0; l < ls && sum < direct_min; l++) {
        int64_t n = counts[members != NULL ? members[l] : l];
        if (n > 0) {
            sum += (uint64_t)n > (direct_min - sum) / esize ? direct_min - sum
                                                            : (uint64_t)n * esize;
        }
    }
    return sum >= direct_min;
}

int rmacoll__plan_direct_in(const rmacoll_topo_t *topo, int r, int a, const int64_t *row,
                            size_t esize, uint64_t eager_max, uint64_t direct_min)
{
    int A = topo->node_of[r];

    return topo->node_of[a] != A &&
           rmacoll__plan_direct_stream(row, topo->node_members + topo->node_first[A],
                                       topo->node_size[A], esize, eager_max, direct_min);
}

uint64_t rmacoll__plan_node_eager_bytes(const int64_t *counts, const int *members, int ls,
                                        int self_l, size_t esize, uint64_t eager_max,
                                        uint64_t *off)
{
    uint64_t sum = 0;
    int ok = eager_max != 0 && esize != 0;

    for (int l = 0; l < ls && ok; l++) {
        int64_t n = counts[members[l]];
        if (off != NULL) {
            off[l] = l == self_l || n == 0 ? RMACOLL__NO_EAGER : sum;
        }
        if (l == self_l) {
            continue;
        }
        if (n < 0 || (uint64_t)n > eager_max / esize) {
            ok = 0;
            break;
        }
        sum += (uint64_t)n * esize;
        ok = sum <= eager_max;
    }
    if (!ok || sum == 0) {
        for (int l = 0; l < ls && off != NULL; l++) {
            off[l] = RMACOLL__NO_EAGER;
        }
        return 0;
    }
    return sum;
}

int rmacoll__plan_nin(const rmacoll_topo_t *topo,
                      const rmacoll__plan_cfg_t *cfg, int r)
{
    int node = topo->node_of[r];
    int n = 0;

    if (!cfg->relay_enabled) {
        return 0;
    }
    for (int i = 0; i < topo->nranks; i++) {
        if (topo->node_of[i] != node && rmacoll__topo_relay(topo, i, node) == r) {
            n++;
        }
    }
    return n;
}

int rmacoll__plan_chan_src(const rmacoll_topo_t *topo, int r, int c)
{
    int node = topo->node_of[r];

    for (int i = 0; i < topo->nranks; i++) {
        if (topo->node_of[i] != node && rmacoll__topo_relay(topo, i, node) == r) {
            if (c-- == 0) {
                return i;
            }
        }
    }
    return -1;
}

int rmacoll__plan_chan_index(const rmacoll_topo_t *topo, int r, int i)
{
    int node = topo->node_of[r];
    int c = 0;

    if (topo->node_of[i] == node || rmacoll__topo_relay(topo, i, node) != r) {
        return -1;
    }
    for (int k = 0; k < i; k++) {
        if (topo->node_of[k] != node && rmacoll__topo_relay(topo, k, node) == r) {
            c++;
        }
    }
    return c;
}

uint64_t rmacoll__plan_slot_bytes(const rmacoll_topo_t *topo,
                                  const rmacoll__plan_cfg_t *cfg, int r)
{
    int nin = rmacoll__plan_nin(topo, cfg, r);

    if (nin == 0 || cfg->relay_slots == 0) {
        return 0;
    }
    return (cfg->relay_buffer_bytes / ((uint64_t)nin * cfg->relay_slots)) &
           ~(uint64_t)7;
}

int rmacoll__plan_relay_rule(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg,
                             rmacoll__relay_rule_t *out, char *msg, size_t len)
{
    rmacoll__relay_rule_t r = {0, -1, 1, 0};
    int ok;

    if (topo == NULL) {
        r.slot_bytes = cfg->relay_slots ? cfg->relay_buffer_bytes / cfg->relay_slots : 0;
        r.min_buffer_bytes = (uint64_t)RMACOLL__MIN_SLOT_BYTES * cfg->relay_slots;
        ok = cfg->relay_slots > 0 && r.slot_bytes >= RMACOLL__MIN_SLOT_BYTES;
        if (!ok && msg != NULL) {
            snprintf(msg, len, "relay.buffer_bytes = %" PRIu64 " over relay.slots = %" PRIu32
                     " gives slots of %" PRIu64 " bytes, below %u (one element of the "
                     "widest type)", cfg->relay_buffer_bytes, cfg->relay_slots,
                     r.slot_bytes, RMACOLL__MIN_SLOT_BYTES);
        }
    } else {
        r.nin = 0;
        for (int k = 0; cfg->relay_enabled && k < topo->nranks; k++) {
            int nin = rmacoll__plan_nin(topo, cfg, k);
            if (nin > r.nin) {
                r.nin = nin;
                r.relay = k;
            }
        }
        r.min_buffer_bytes = (uint64_t)RMACOLL__MIN_SLOT_BYTES * cfg->relay_slots *
                             (uint64_t)r.nin;
        r.slot_bytes = r.relay >= 0 ? rmacoll__plan_slot_bytes(topo, cfg, r.relay) : 0;
        ok = r.relay < 0 || (cfg->relay_slots > 0 &&
                             cfg->relay_buffer_bytes >= r.min_buffer_bytes);
        if (!ok && msg != NULL) {
            snprintf(msg, len, "relay.buffer_bytes = %" PRIu64 " is too small for this "
                     "topology: rank %d relays for %d senders with %" PRIu32 " slots "
                     "each, leaving %" PRIu64 "-byte slots (at least %u needed: "
                     "relay.buffer_bytes >= %" PRIu64 ")", cfg->relay_buffer_bytes,
                     r.relay, r.nin, cfg->relay_slots, r.slot_bytes,
                     RMACOLL__MIN_SLOT_BYTES, r.min_buffer_bytes);
        }
    }
    if (out != NULL) {
        *out = r;
    }
    return ok;
}

uint64_t rmacoll__plan_slot_off(const rmacoll_topo_t *topo,
                                const rmacoll__plan_cfg_t *cfg, int r, int c,
                                uint32_t s)
{
    return ((uint64_t)c * cfg->relay_slots + s) *
           rmacoll__plan_slot_bytes(topo, cfg, r);
}

uint32_t rmacoll__sig_data(int p)
{
    return (uint32_t)p;
}

uint32_t rmacoll__sig_credit(const rmacoll_topo_t *topo, int node)
{
    return (uint32_t)(topo->nranks + node);
}

int rmacoll__plan_has_xdata(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg)
{
    return cfg->relay_enabled && cfg->direct_min_bytes != 0 && topo->nnodes >= 2;
}

uint32_t rmacoll__sig_xdata(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg, int p)
{
    (void)cfg;
    return (uint32_t)(topo->nranks + topo->nnodes + p);
}

uint32_t rmacoll__sig_arrive(const rmacoll_topo_t *topo,
                             const rmacoll__plan_cfg_t *cfg, int c, uint32_t s)
{
    return (uint32_t)(topo->nranks + topo->nnodes) +
           (rmacoll__plan_has_xdata(topo, cfg) ? (uint32_t)topo->nranks : 0) +
           (uint32_t)c * cfg->relay_slots + s;
}

uint32_t rmacoll__sig_count(const rmacoll_topo_t *topo,
                            const rmacoll__plan_cfg_t *cfg, int r)
{
    return rmacoll__sig_arrive(topo, cfg, rmacoll__plan_nin(topo, cfg, r), 0);
}

/* ----------------------------------------------------------- signal state */

rmacoll_status_t rmacoll__sigstate_create(const rmacoll_topo_t *topo,
                                          const rmacoll__plan_cfg_t *cfg,
                                          int rank, rmacoll__sigstate_t **out)
{
    rmacoll__sigstate_t *st = calloc(1, sizeof(*st));

    if (st == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st->nranks = topo->nranks;
    st->nnodes = topo->nnodes;
    st->nin = rmacoll__plan_nin(topo, cfg, rank);
    st->local_size = topo->node_size[topo->node_of[rank]];
    st->data_in = calloc((size_t)st->nranks, sizeof(uint64_t));
    st->data_out = calloc((size_t)st->nranks, sizeof(uint64_t));
    st->fwd_out = calloc((size_t)st->nin * st->local_size + 1, sizeof(uint64_t));
    st->chan_out = calloc((size_t)st->nnodes, sizeof(uint64_t));
    st->chan_in = calloc((size_t)st->nin + 1, sizeof(uint64_t));
    st->xdata_in = calloc((size_t)st->nranks, sizeof(uint64_t));
    st->xdata_out = calloc((size_t)st->nranks, sizeof(uint64_t));
    if (!st->data_in || !st->data_out || !st->fwd_out || !st->chan_out ||
        !st->chan_in || !st->xdata_in || !st->xdata_out) {
        rmacoll__sigstate_destroy(st);
        return RMACOLL_ERR_NO_MEMORY;
    }
    *out = st;
    return RMACOLL_SUCCESS;
}

void rmacoll__sigstate_destroy(rmacoll__sigstate_t *st)
{
    if (st == NULL) {
        return;
    }
    free(st->data_in);
    free(st->data_out);
    free(st->fwd_out);
    free(st->chan_out);
    free(st->chan_in);
    free(st->xdata_in);
    free(st->xdata_out);
    free(st);
}

void rmacoll__sigstate_copy(rmacoll__sigstate_t *dst,
                            const rmacoll__sigstate_t *src)
{
    if (dst == src) {
        return;
    }
    memcpy(dst->data_in, src->data_in, (size_t)src->nranks * sizeof(uint64_t));
    memcpy(dst->data_out, src->data_out, (size_t)src->nranks * sizeof(uint64_t));
    memcpy(dst->fwd_out, src->fwd_out,
           (size_t)src->nin * src->local_size * sizeof(uint64_t));
    memcpy(dst->chan_out, src->chan_out, (size_t)src->nnodes * sizeof(uint64_t));
    memcpy(dst->chan_in, src->chan_in, (size_t)src->nin * sizeof(uint64_t));
    memcpy(dst->xdata_in, src->xdata_in, (size_t)src->nranks * sizeof(uint64_t));
    memcpy(dst->xdata_out, src->xdata_out, (size_t)src->nranks * sizeof(uint64_t));
}

/* ------------------------------------------------------------------- plan */

void rmacoll__plan_init(rmacoll__plan_t *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->err_peer = -1;
}

static void plan_topo_free(rmacoll__plan_topo_t *pt)
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

void rmacoll__plan_fini(rmacoll__plan_t *plan)
{
    free(plan->tasks);
    free(plan->scratch);
    free(plan->batches);
    free(plan->bucket);
    free(plan->direct_to);
    plan_topo_free(plan->pt);
    rmacoll__plan_init(plan);
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
 * The senders of relay r (local l on a node of size s) are the ranks of
 * other nodes whose local rank is l mod s, so per distinct node size s
 * two histograms of local ranks mod s answer everything: tot[l] (all
 * ranks) and before[l] (ranks below `rank`). The only rank of r's own node
 * in the class is r itself.
 */
static rmacoll__plan_topo_t *plan_topo_create(const rmacoll_topo_t *topo,
                                              const rmacoll__plan_cfg_t *cfg,
                                              int rank)
{
    int n = topo->nranks, nn = topo->nnodes, A = topo->node_of[rank];
    rmacoll__plan_topo_t *pt = calloc(1, sizeof(*pt));
    int *tot = NULL, *before = NULL;
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
        int maxs = 0;
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
    }
    free(tot);
    free(before);
    if (!ok) {
        plan_topo_free(pt);
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
    plan_topo_free(pt);
    plan->pt = plan_topo_create(topo, cfg, rank);
    return plan->pt;
}

static rmacoll_status_t plan_reserve(rmacoll__plan_t *plan, size_t n)
{
    rmacoll__task_t *t, *s;
    size_t cap;

    if (plan->ntasks + n <= plan->tasks_cap) {
        return RMACOLL_SUCCESS;
    }
    cap = plan->tasks_cap ? plan->tasks_cap : 64;
    while (cap < plan->ntasks + n) {
        cap *= 2;
    }
    t = realloc(plan->tasks, cap * sizeof(*t));
    if (t == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    plan->tasks = t;
    s = realloc(plan->scratch, cap * sizeof(*s));
    if (s == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    plan->scratch = s;
    plan->tasks_cap = cap;
    return RMACOLL_SUCCESS;
}

static int task_queue(const rmacoll__task_t *t)
{
    if (t->op == RMACOLL__OP_PUT) {
        return t->path == RMACOLL__PATH_PROXY ? RMACOLL__Q_PROXY_PUT
                                              : RMACOLL__Q_CE_PUT;
    }
    return t->path == RMACOLL__PATH_PROXY ? RMACOLL__Q_PROXY_WAIT
                                          : RMACOLL__Q_CE_WAIT;
}

/* Builder state shared by the helpers below. */
typedef struct plan_ctx {
    const rmacoll__plan_input_t *in;
    rmacoll__plan_t *plan;
    const rmacoll__plan_topo_t *pt;
    int max_round;
    rmacoll_status_t status;
    int node_eager_out;  /* this rank's blocks for its node peers travel in its
                          * node payload */
    const uint8_t *direct_to; /* [nnodes]: this rank's stream to node B goes
                               * straight, not through the relay
                               * (rmacoll__plan_direct_stream) */
} plan_ctx_t;

static void add_task(plan_ctx_t *ctx, const rmacoll__task_t *t)
{
    if (ctx->status != RMACOLL_SUCCESS) {
        return;
    }
    ctx->status = plan_reserve(ctx->plan, 1);
    if (ctx->status != RMACOLL_SUCCESS) {
        return;
    }
    ctx->plan->tasks[ctx->plan->ntasks++] = *t;
    if (t->round > ctx->max_round) {
        ctx->max_round = t->round;
    }
}

/*
 * Adds a PUT, split into pieces of at most max_task_bytes; only the last
 * piece carries the signal (if the template has one).
 */
static void add_put(plan_ctx_t *ctx, const rmacoll__task_t *tmpl)
{
    uint64_t max = ctx->in->cfg->max_task_bytes;
    uint64_t done = 0;
    rmacoll__task_t t = *tmpl;

    if (max == 0) {
        max = UINT64_MAX;
    }
    /* keep pieces whole elements so a receiver never sees half of one */
    if (max >= ctx->in->esize) {
        max -= max % ctx->in->esize;
    }
    do {
        uint64_t n = tmpl->bytes - done;
        if (n > max) {
            n = max;
        }
        t.src_off = tmpl->src_off + done;
        t.dst_off = tmpl->dst_off + done;
        t.bytes = n;
        done += n;
        if (done < tmpl->bytes) {
            t.flags = tmpl->flags & ~RMACOLL__TASK_SIGNAL;
            t.sig = RMACOLL__NO_SIG;
            t.sig_value = 0;
        } else {
            t.flags = tmpl->flags;
            t.sig = tmpl->sig;
            t.sig_value = tmpl->sig_value;
        }
        add_task(ctx, &t);
    } while (done < tmpl->bytes);
}

/* Which of this rank's streams go straight to their receivers (direct
 * streams, relay on, two nodes or more): out[B] for every node B (0 for its
 * own). The array is the plan's, grown to nnodes. */
static rmacoll_status_t direct_nodes(const rmacoll__plan_input_t *in, rmacoll__plan_t *plan)
{
    const rmacoll_topo_t *topo = in->topo;
    int A = topo->node_of[in->rank];
    int on = in->direct_min_bytes != 0 && in->cfg->relay_enabled && topo->nnodes >= 2;

    if (plan->direct_to_cap < topo->nnodes) {
        uint8_t *d = realloc(plan->direct_to, (size_t)topo->nnodes);
        if (d == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        plan->direct_to = d;
        plan->direct_to_cap = topo->nnodes;
    }
    for (int B = 0; B < topo->nnodes; B++) {
        plan->direct_to[B] =
            on && B != A &&
            rmacoll__plan_direct_stream(in->sendcounts, topo->node_members + topo->node_first[B],
                                        topo->node_size[B], in->esize, in->eager_max_bytes,
                                        in->direct_min_bytes);
    }
    return RMACOLL_SUCCESS;
}

/* p is on the other node and its stream to this node comes straight, not
 * through the relay (its own rule over its row, evaluated by the runtime). */
static int direct_in(const rmacoll__plan_input_t *in, int p)
{
    return in->direct_min_bytes != 0 && in->cfg->relay_enabled &&
           in->topo->node_of[p] != in->topo->node_of[in->rank] && in->direct_in[p];
}

/* Incoming channel c's stream comes straight to its receivers: the relay
 * forwards nothing of it. */
static int direct_from(const rmacoll__plan_input_t *in, int c)
{
    int ls = in->topo->node_size[in->topo->node_of[in->rank]];

    return in->direct_min_bytes != 0 && in->cfg->relay_enabled && c >= 0 &&
           rmacoll__plan_direct_stream(in->chan_sendcount + (size_t)c * ls, NULL, ls,
                                       in->esize, in->eager_max_bytes, in->direct_min_bytes);
}

static int is_direct(const plan_ctx_t *ctx, int j)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;

    if (topo->node_of[j] == topo->node_of[me] || !in->cfg->relay_enabled ||
        ctx->direct_to[topo->node_of[j]]) {
        return 1;
    }
    return rmacoll__topo_relay(topo, me, topo->node_of[j]) == j;
}

/* This rank's direct put to j signals XDATA(me) at j, not DATA(me): j is a
 * rank of a direct stream's node other than this rank's relay there (the
 * relay writes DATA(me) at j when the stream goes through it). */
static int xdata_out(const plan_ctx_t *ctx, int j)
{
    const rmacoll_topo_t *topo = ctx->in->topo;

    return topo->node_of[j] != topo->node_of[ctx->in->rank] &&
           ctx->direct_to[topo->node_of[j]] &&
           rmacoll__topo_relay(topo, ctx->in->rank, topo->node_of[j]) != j;
}

/* p's block comes straight and raises XDATA(p) here. */
static int xdata_in(const rmacoll__plan_input_t *in, int p)
{
    const rmacoll_topo_t *topo = in->topo;

    return direct_in(in, p) && rmacoll__topo_relay(topo, p, topo->node_of[in->rank]) != in->rank;
}

static int sched_round(const rmacoll__plan_input_t *in, int rank, int peer)
{
    return in->sched->ops->round(in->sched->state, in->topo, rank, peer);
}

/* Eager payload bytes of this rank's stream to node B (0: no eager path). */
static uint64_t eager_to(const rmacoll__plan_input_t *in, int B)
{
    const rmacoll_topo_t *topo = in->topo;

    if (!in->cfg->relay_enabled || in->eager_max_bytes == 0 ||
        B == topo->node_of[in->rank]) {
        return 0;
    }
    return rmacoll__plan_eager_bytes(in->sendcounts, topo->node_members + topo->node_first[B],
                                     topo->node_size[B], in->esize, in->eager_max_bytes);
}

/* Eager payload bytes of incoming channel c (0: no eager path). */
static uint64_t eager_from(const rmacoll__plan_input_t *in, int c)
{
    int ls = in->topo->node_size[in->topo->node_of[in->rank]];

    if (!in->cfg->relay_enabled || in->eager_max_bytes == 0 || c < 0) {
        return 0;
    }
    return rmacoll__plan_eager_bytes(in->chan_sendcount + (size_t)c * ls, NULL, ls,
                                     in->esize, in->eager_max_bytes);
}

/* j is on another node and this rank's bytes for it travel in its metadata
 * record: with the relay on, j is this rank's relay there and the stream
 * to j's node is eager; with it off, the record to j carries j's block
 * alone when that is in (0, eager_max_bytes]. No direct put to j. */
static int eager_direct_out(const rmacoll__plan_input_t *in, int j)
{
    const rmacoll_topo_t *topo = in->topo;
    int B = topo->node_of[j];

    if (B == topo->node_of[in->rank] || in->eager_max_bytes == 0) {
        return 0;
    }
    if (!in->cfg->relay_enabled) {
        return rmacoll__plan_eager_bytes(in->sendcounts, &j, 1, in->esize,
                                         in->eager_max_bytes) != 0;
    }
    return rmacoll__topo_relay(topo, in->rank, B) == j && eager_to(in, B) != 0;
}

/* p is a rank of another node whose stream to this node travels in its
 * metadata record and holds a block for this rank: this rank copies it out
 * of the record (in its relay's inbox here) itself; no signal, no wait. */
static int eager_in(const rmacoll__plan_input_t *in, int p)
{
    const rmacoll_topo_t *topo = in->topo;

    return in->eager_max_bytes != 0 &&
           topo->node_of[p] != topo->node_of[in->rank] &&
           in->eager_in_off[p] != RMACOLL__NO_EAGER;
}

/* j is a node peer and this rank's block for it travels in its node
 * payload: no put. */
static int node_eager_out(const plan_ctx_t *ctx, int j)
{
    const rmacoll_topo_t *topo = ctx->in->topo;

    return ctx->node_eager_out && j != ctx->in->rank &&
           topo->node_of[j] == topo->node_of[ctx->in->rank];
}

/* p is a node peer whose block for this rank is in p's node payload: this
 * rank copies it out itself; no signal, no wait. */
static int node_eager_in(const rmacoll__plan_input_t *in, int p)
{
    const rmacoll_topo_t *topo = in->topo;

    return in->node_eager_max_bytes != 0 && p != in->rank &&
           topo->node_of[p] == topo->node_of[in->rank] &&
           in->node_eager_off[topo->local_rank[p]] != RMACOLL__NO_EAGER;
}

static rmacoll_status_t mismatch(rmacoll__plan_t *plan, int sender,
                                 int receiver, int64_t sent, int64_t expected,
                                 int other)
{
    snprintf(plan->errmsg, sizeof(plan->errmsg),
             "count mismatch: rank %d sends %lld elements to rank %d, which "
             "expects %lld (found by rank %d)",
             sender, (long long)sent, receiver, (long long)expected, plan->rank);
    plan->err_peer = other;
    return RMACOLL_ERR_MISMATCH;
}

/* Checks every count this rank can see, and the relay slot size. */
static rmacoll_status_t plan_check(const plan_ctx_t *ctx)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll__plan_topo_t *pt = ctx->pt;
    rmacoll__plan_t *plan = ctx->plan;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int node = topo->node_of[me];
    int ls = topo->node_size[node];
    int nin = pt->nin;

    if (in->sendcounts[me] != in->recvcounts[me]) {
        return mismatch(plan, me, me, in->sendcounts[me], in->recvcounts[me], me);
    }
    for (int j = 0; j < topo->nranks; j++) {
        if (j != me && is_direct(ctx, j) && in->sendcounts[j] != in->peer_rcount[j]) {
            return mismatch(plan, me, j, in->sendcounts[j], in->peer_rcount[j], j);
        }
    }
    for (int c = 0; c < nin; c++) {
        int i = pt->chan_src[c];
        for (int l = 0; l < ls; l++) {
            int j = rmacoll__topo_rank(topo, node, l);
            size_t k = (size_t)c * ls + l;
            if (j != me && in->chan_sendcount[k] != in->chan_rcount[k]) {
                return mismatch(plan, i, j, in->chan_sendcount[k],
                                in->chan_rcount[k], i);
            }
        }
    }
    return RMACOLL_SUCCESS;
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

/* Direct puts: self copy, node peers (CE) and direct network puts. */
static void plan_direct(plan_ctx_t *ctx, const rmacoll__sigstate_t *st)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;

    for (int j = 0; j < topo->nranks; j++) {
        rmacoll__task_t t;
        if (in->sendcounts[j] == 0 || !is_direct(ctx, j) || eager_direct_out(in, j) ||
            node_eager_out(ctx, j)) {
            continue;
        }
        memset(&t, 0, sizeof(t));
        t.op = RMACOLL__OP_PUT;
        t.src_win = RMACOLL__WIN_SEND;
        t.dst_win = RMACOLL__WIN_RECV;
        t.peer = j;
        t.origin = me;
        t.src_off = (uint64_t)in->sdispls[j] * in->esize;
        t.bytes = (uint64_t)in->sendcounts[j] * in->esize;
        if (j == me) {
            t.path = RMACOLL__PATH_CE;
            t.flags = RMACOLL__TASK_SELF;
            t.round = 0;
            t.sig = RMACOLL__NO_SIG;
            t.dst_off = (uint64_t)in->rdispls[me] * in->esize;
        } else {
            t.path = topo->node_of[j] == topo->node_of[me] ? RMACOLL__PATH_CE
                                                           : RMACOLL__PATH_PROXY;
            t.flags = RMACOLL__TASK_SIGNAL;
            if (topo->node_of[j] != topo->node_of[me] && ctx->direct_to[topo->node_of[j]]) {
                t.flags |= RMACOLL__TASK_DIRECT; /* a direct stream's, the relay's own too */
            }
            t.round = sched_round(in, me, j);
            if (xdata_out(ctx, j)) {
                t.sig = rmacoll__sig_xdata(topo, in->cfg, me);
                t.sig_value = st->xdata_out[j] + 1;
            } else {
                t.sig = rmacoll__sig_data(me);
                t.sig_value = st->data_out[j] + 1;
            }
            t.dst_off = (uint64_t)in->peer_rdispl[j] * in->esize;
        }
        add_put(ctx, &t);
    }
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
static rmacoll_status_t plan_stream_out(plan_ctx_t *ctx,
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
    int t0 = sched_round(in, me, r);
    uint64_t cb = ctx->pt->out_slot[B];
    stream_t s = {in->sendcounts, topo->node_members + topo->node_first[B], lsB,
                  topo->local_rank[r], in->esize};
    uint64_t L = stream_total(&s);
    uint64_t g0 = st->chan_out[B];
    uint64_t Q, off, n;
    stream_cursor_t cur = {0, 0, 0};
    int p, last;

    *nchunks = 0;
    if (L == 0 || eager_to(in, B) != 0 || ctx->direct_to[B]) {
        /* nothing to send, it travels in the record, or it goes straight
         * to its receivers (plan_direct) */
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
            add_task(ctx, &t);
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
            add_put(ctx, &t);
        }
    }
    *nchunks = Q;
    return ctx->status;
}

/* A receiver's own copy of origin p's block out of p's payload (win:
 * WIN_EAGER or WIN_NODE_EAGER, at src_off) into its receive buffer, round
 * 0, no signal. */
static void add_pull(plan_ctx_t *ctx, int win, int p, uint64_t src_off)
{
    const rmacoll__plan_input_t *in = ctx->in;
    rmacoll__task_t t;

    memset(&t, 0, sizeof(t));
    t.op = RMACOLL__OP_PUT;
    t.path = RMACOLL__PATH_CE;
    t.src_win = (uint8_t)win;
    t.dst_win = RMACOLL__WIN_RECV;
    t.flags = RMACOLL__TASK_EAGER;
    t.peer = in->rank;
    t.origin = p;
    t.round = 0;
    t.sig = RMACOLL__NO_SIG;
    t.src_off = src_off;
    t.dst_off = (uint64_t)in->rdispls[p] * in->esize;
    t.bytes = (uint64_t)in->recvcounts[p] * in->esize;
    add_put(ctx, &t);
}

/* Receiver side of the eager path: each block of a sender on another node
 * whose stream travels in its metadata record is copied out of that record
 * (WIN_EAGER: in the inbox of the sender's relay on this node, which may be
 * this rank) into this rank's receive buffer, round 0. The relay forwards
 * nothing of such a stream. */
static void plan_eager_pulls(plan_ctx_t *ctx)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;

    for (int p = 0; p < topo->nranks; p++) {
        if (in->recvcounts[p] != 0 && eager_in(in, p)) {
            add_pull(ctx, RMACOLL__WIN_EAGER, p, in->eager_in_off[p]);
        }
    }
}

/* Relay side of incoming channel c: arrival waits, forwards, credits. */
static rmacoll_status_t plan_stream_in(plan_ctx_t *ctx,
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
    int t0 = sched_round(in, i, me);
    uint64_t cb = ctx->pt->in_slot;
    stream_t s = {in->chan_sendcount + (size_t)c * ls, NULL, ls,
                  topo->local_rank[me], in->esize};
    uint64_t L = stream_total(&s);
    uint64_t g0 = st->chan_in[c];
    uint64_t Q, off, n;
    stream_cursor_t cur = {0, 0, 0};
    int p, last;

    *nchunks = 0;
    if (eager_from(in, c) != 0 || direct_from(in, c)) {
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

        memset(&t, 0, sizeof(t));
        t.op = RMACOLL__OP_WAIT;
        t.path = RMACOLL__PATH_PROXY;
        t.flags = RMACOLL__TASK_ARRIVAL;
        t.peer = i;
        t.origin = i;
        t.round = round;
        t.sig = rmacoll__sig_arrive(topo, cfg, c, slot);
        t.sig_value = g / S + 1;
        t.seq = g;
        add_task(ctx, &t);

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
            add_put(ctx, &t);
        }

        memset(&t, 0, sizeof(t));
        t.op = RMACOLL__OP_PUT;
        t.path = RMACOLL__PATH_PROXY;
        t.flags = RMACOLL__TASK_CREDIT | RMACOLL__TASK_SIGNAL;
        t.peer = i;
        t.origin = me;
        t.round = round + 2;
        t.sig = rmacoll__sig_credit(topo, A);
        t.sig_value = g + 1;
        t.seq = g;
        add_task(ctx, &t);
    }
    *nchunks = Q;
    return ctx->status;
}

/* Receiver side of the node eager path: each node peer's block that is in
 * its node payload is copied out by this rank into its own receive buffer
 * (round 0, like the self copy). */
static void plan_node_eager_in(plan_ctx_t *ctx)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int A = topo->node_of[in->rank];

    for (int l = 0; l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (in->recvcounts[p] != 0 && node_eager_in(in, p)) {
            add_pull(ctx, RMACOLL__WIN_NODE_EAGER, p, in->node_eager_off[l]);
        }
    }
}

/* Final waits for every complete receive block. */
static void plan_final_waits(plan_ctx_t *ctx, const rmacoll__sigstate_t *st)
{
    const rmacoll__plan_input_t *in = ctx->in;
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int A = topo->node_of[me];
    int round = ctx->plan->ntasks ? ctx->max_round + 1 : 0;

    for (int p = 0; p < topo->nranks; p++) {
        rmacoll__task_t t;
        if (p == me || in->recvcounts[p] == 0 || eager_in(in, p) ||
            node_eager_in(in, p)) {
            continue;
        }
        memset(&t, 0, sizeof(t));
        t.op = RMACOLL__OP_WAIT;
        t.flags = RMACOLL__TASK_DATA;
        t.origin = p;
        t.round = round;
        t.sig = rmacoll__sig_data(p);
        t.sig_value = st->data_in[p] + 1;
        if (xdata_in(in, p)) {
            t.sig = rmacoll__sig_xdata(topo, in->cfg, p);
            t.sig_value = st->xdata_in[p] + 1;
        }
        if (topo->node_of[p] == A) {
            t.path = RMACOLL__PATH_CE;
            t.peer = p;
        } else if (in->cfg->relay_enabled && rmacoll__topo_relay(topo, p, A) != me &&
                   !xdata_in(in, p)) {
            t.path = RMACOLL__PATH_CE;
            t.peer = rmacoll__topo_relay(topo, p, A);
        } else {
            t.path = RMACOLL__PATH_PROXY;
            t.peer = p;
        }
        add_task(ctx, &t);
    }
}

/* Stable counting sort by (round, queue): order inside a queue is the
 * order the planner emitted, which the signal contract relies on.
 * O(tasks + rounds). */
static rmacoll_status_t sort_tasks(rmacoll__plan_t *plan, int max_round)
{
    rmacoll__task_t *a = plan->tasks, *b = plan->scratch;
    int lo = 0;  /* a credit wait may sit one round before round 0 */
    size_t nb;
    uint32_t *cnt;
    uint32_t sum = 0;

    for (size_t k = 0; k < plan->ntasks; k++) {
        lo = a[k].round < lo ? a[k].round : lo;
    }
    nb = ((size_t)(max_round - lo) + 1) * RMACOLL__NQUEUES + 1;

    if (nb > plan->bucket_cap) {
        cnt = realloc(plan->bucket, nb * sizeof(*cnt));
        if (cnt == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        plan->bucket = cnt;
        plan->bucket_cap = nb;
    }
    cnt = plan->bucket;
    memset(cnt, 0, nb * sizeof(*cnt));
    for (size_t k = 0; k < plan->ntasks; k++) {
        cnt[(size_t)(a[k].round - lo) * RMACOLL__NQUEUES + task_queue(&a[k])]++;
    }
    for (size_t k = 0; k < nb; k++) {
        uint32_t c = cnt[k];
        cnt[k] = sum;
        sum += c;
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        b[cnt[(size_t)(a[k].round - lo) * RMACOLL__NQUEUES + task_queue(&a[k])]++] = a[k];
    }
    plan->tasks = b;
    plan->scratch = a;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t make_batches(rmacoll__plan_t *plan)
{
    size_t nb = 0;

    for (size_t k = 0; k < plan->ntasks; k++) {
        if (k == 0 || plan->tasks[k].round != plan->tasks[k - 1].round) {
            nb++;
        }
    }
    if (nb > plan->batches_cap) {
        rmacoll__batch_t *b = realloc(plan->batches, nb * sizeof(*b));
        if (b == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        plan->batches = b;
        plan->batches_cap = nb;
    }
    plan->nbatches = 0;
    for (size_t k = 0; k < plan->ntasks; k++) {
        rmacoll__batch_t *b;
        int q = task_queue(&plan->tasks[k]);
        if (k == 0 || plan->tasks[k].round != plan->tasks[k - 1].round) {
            b = &plan->batches[plan->nbatches++];
            memset(b, 0, sizeof(*b));
            b->round = plan->tasks[k].round;
            for (int i = 0; i < RMACOLL__NQUEUES; i++) {
                b->first[i] = (uint32_t)k;
            }
        }
        b = &plan->batches[plan->nbatches - 1];
        if (b->count[q] == 0) {
            b->first[q] = (uint32_t)k;
        }
        b->count[q]++;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__plan_build(const rmacoll__plan_input_t *in,
                                     const rmacoll__sigstate_t *st_in,
                                     rmacoll__sigstate_t *st_out,
                                     rmacoll__plan_t *plan)
{
    const rmacoll_topo_t *topo = in->topo;
    int me = in->rank;
    int A = topo->node_of[me];
    int ls = topo->node_size[A];
    int nin;
    plan_ctx_t ctx = {in, plan, NULL, 0, RMACOLL_SUCCESS, 0, NULL};
    const rmacoll__plan_topo_t *pt;
    rmacoll_status_t st;

    plan->rank = me;
    plan->ntasks = 0;
    plan->nbatches = 0;
    plan->errmsg[0] = '\0';
    plan->err_peer = -1;
    if (in->cfg->relay_slots == 0 || in->esize == 0) {
        snprintf(plan->errmsg, sizeof(plan->errmsg),
                 "relay.slots and the element size must be positive");
        return RMACOLL_ERR_CONFIG;
    }
    pt = rmacoll__plan_topo(plan, topo, in->cfg, me);
    if (pt == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    ctx.pt = pt;
    st = direct_nodes(in, plan);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    ctx.direct_to = plan->direct_to;
    nin = pt->nin;
    st = plan_check(&ctx);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }

    {
        uint64_t send_max = in->node_eager_send_max != 0 &&
                                    in->node_eager_send_max < in->node_eager_max_bytes
                                ? in->node_eager_send_max : in->node_eager_max_bytes;
        ctx.node_eager_out =
            in->node_eager_max_bytes != 0 &&
            rmacoll__plan_node_eager_bytes(in->sendcounts,
                                           topo->node_members + topo->node_first[A], ls,
                                           topo->local_rank[me], in->esize, send_max,
                                           NULL) != 0;
    }
    plan_direct(&ctx, st_in);
    if (in->node_eager_max_bytes != 0) {
        plan_node_eager_in(&ctx);
    }
    if (in->eager_max_bytes != 0) {
        plan_eager_pulls(&ctx);
    }
    if (in->cfg->relay_enabled) {
        for (int B = 0; B < topo->nnodes && ctx.status == RMACOLL_SUCCESS; B++) {
            uint64_t q;
            if (B == A) {
                continue;
            }
            st = plan_stream_out(&ctx, st_in, B, &q);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
        for (int c = 0; c < nin && ctx.status == RMACOLL_SUCCESS; c++) {
            uint64_t q;
            st = plan_stream_in(&ctx, st_in, c, &q);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
    }
    plan_final_waits(&ctx, st_in);
    if (ctx.status != RMACOLL_SUCCESS) {
        return ctx.status;
    }
    st = sort_tasks(plan, ctx.max_round);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = make_batches(plan);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }

    /* Success: advance the state (reads of st_in are over; st_out may alias). */
    rmacoll__sigstate_copy(st_out, st_in);
    for (int j = 0; j < topo->nranks; j++) {
        if (j != me && in->sendcounts[j] != 0 && is_direct(&ctx, j) &&
            !eager_direct_out(in, j) && !node_eager_out(&ctx, j)) {
            if (xdata_out(&ctx, j)) {
                st_out->xdata_out[j]++;
            } else {
                st_out->data_out[j]++;
            }
        }
        if (j != me && in->recvcounts[j] != 0 && !eager_in(in, j) &&
            !node_eager_in(in, j)) {
            if (xdata_in(in, j)) {
                st_out->xdata_in[j]++;
            } else {
                st_out->data_in[j]++;
            }
        }
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        const rmacoll__task_t *t = &plan->tasks[k];
        if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_TO_RELAY) &&
            (t->flags & RMACOLL__TASK_SIGNAL)) {
            st_out->chan_out[topo->node_of[t->peer]]++;
        } else if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_CREDIT)) {
            st_out->chan_in[pt->chan_of_src[t->peer]]++;
        } else if (t->op == RMACOLL__OP_PUT && (t->flags & RMACOLL__TASK_FORWARD) &&
                   (t->flags & RMACOLL__TASK_SIGNAL)) {
            int c = pt->chan_of_src[t->origin];
            st_out->fwd_out[(size_t)c * ls + topo->local_rank[t->peer]]++;
        }
    }
    return RMACOLL_SUCCESS;
}
