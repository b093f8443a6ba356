/*
 * ctrl.c - the control plane's layout, signal map and records (ctrl.h).
 */
#include "core/ctrl/ctrl.h"

#include <string.h>

#include "core/ctrl/paths.h"
#include "core/plan/topo.h"

static size_t align64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static int max_node_size(const rmacoll_topo_t *topo)
{
    int m = 0;

    for (int n = 0; n < topo->nnodes; n++) {
        if (topo->node_size[n] > m) {
            m = topo->node_size[n];
        }
    }
    return m;
}

int rmacoll__ctrl_one_round(const rmacoll_topo_t *topo)
{
    int m = max_node_size(topo);

    return (topo->nnodes == 1 && m <= RMACOLL__ONE_ROUND_NODE_MAX) ||
           (topo->nnodes == 2 && m <= RMACOLL__ONE_ROUND_PAIR_MAX) ||
           (topo->nnodes > 2 && m <= RMACOLL__ONE_ROUND_PAIR_MAX &&
            topo->nranks <= RMACOLL__ONE_ROUND_MULTI_MAX);
}

int rmacoll__net_peers(const rmacoll_topo_t *topo,
                       const rmacoll__plan_cfg_t *pcfg, int rank, int *list)
{
    int A = topo->node_of[rank];
    int n = 0;

    for (int p = 0; p < topo->nranks; p++) {
        int B = topo->node_of[p];
        int in;
        if (B == A) {
            continue;
        }
        in = !pcfg->relay_enabled || rmacoll__topo_relay(topo, rank, B) == p ||
             rmacoll__topo_relay(topo, p, A) == rank;
        if (in) {
            if (list != NULL) {
                list[n] = p;
            }
            n++;
        }
    }
    return n;
}

uint64_t rmacoll__ctrl_node_eager_cap(const rmacoll_topo_t *topo,
                                      const rmacoll__plan_cfg_t *pcfg)
{
    uint64_t ls = (uint64_t)max_node_size(topo);
    uint64_t cap = pcfg->node_eager_max_bytes;

    if (!rmacoll__ctrl_one_round(topo) || ls < 2) {
        return 0;
    }
    if (cap > RMACOLL__NODE_EAGER_BUDGET / (2 * ls)) {
        cap = (RMACOLL__NODE_EAGER_BUDGET / (2 * ls)) & ~(uint64_t)63;
    }
    return cap;
}

uint64_t rmacoll__ctrl_eager_threshold(const rmacoll_topo_t *topo,
                                       const rmacoll__plan_cfg_t *pcfg)
{
    uint64_t cap = pcfg->eager_max_bytes;
    int most = 0;

    if (cap == 0 || topo->nnodes < 2 || !rmacoll__ctrl_one_round(topo)) {
        return cap;
    }
    for (int r = 0; r < topo->nranks; r++) {
        int n = rmacoll__net_peers(topo, pcfg, r, NULL);
        most = n > most ? n : most;
    }
    if (most > 0 && cap > RMACOLL__EAGER_WINDOW_BUDGET / (4 * (uint64_t)most)) {
        cap = (RMACOLL__EAGER_WINDOW_BUDGET / (4 * (uint64_t)most)) & ~(uint64_t)63;
    }
    return cap;
}

uint64_t rmacoll__ctrl_direct_min(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *pcfg)
{
    return pcfg->relay_enabled && topo->nnodes >= 2 && rmacoll__ctrl_one_round(topo)
               ? pcfg->direct_min_bytes
               : 0;
}

int rmacoll__ctrl_nic_differs(const rmacoll_topo_t *topo, const char *names, size_t stride)
{
    for (int r = 0; r < topo->nranks; r++) {
        const char *mine = names + (size_t)r * stride;
        const char *first = names + (size_t)rmacoll__topo_rank(topo, topo->node_of[r], 0) * stride;
        if (mine[0] == '\0' || strcmp(mine, first) != 0) {
            return r;
        }
    }
    return -1;
}

void rmacoll__ctrl_layout(const rmacoll_topo_t *topo,
                          const rmacoll__plan_cfg_t *pcfg, int rank,
                          rmacoll__ctrl_layout_t *lay)
{
    size_t off;
    rmacoll__plan_paths_t lim;

    rmacoll__ctrl_host_paths(topo, pcfg, &lim);
    lay->nranks = topo->nranks;
    lay->nnet = rmacoll__net_peers(topo, pcfg, rank, NULL);
    lay->nsig_plan = rmacoll__sig_count(topo, pcfg, rank);
    lay->nsig = rmacoll__ctrl_sig_stage(lay, RMACOLL__NSTAGE_WORDS);
    lay->max_ls = max_node_size(topo);
    lay->matrix = topo->nnodes >= 2 && rmacoll__ctrl_one_round(topo);
    lay->eager_cap = lim.eager_max;
    lay->node_eager_cap = lim.node_eager_max;
    lay->local_rec_bytes = align64(sizeof(rmacoll__local_rec_t) +
                                   3 * (size_t)topo->nranks * sizeof(int64_t) +
                                   (lay->node_eager_cap != 0
                                        ? (size_t)lay->max_ls * sizeof(uint64_t) +
                                              lay->node_eager_cap
                                        : 0));
    lay->net_rec_bytes = align64(rmacoll__ctrl_meta_bytes(lay) +
                                 lay->eager_cap);
    lay->status_rec_bytes = align64(sizeof(rmacoll__status_rec_t) + 8);
    lay->off_sig = RMACOLL__CTRL_HEADER_BYTES;
    off = align64(lay->off_sig + (size_t)lay->nsig * sizeof(uint64_t));
    lay->off_local = off;
    off += 2 * lay->local_rec_bytes;
    lay->off_inbox = off;
    off += 2 * (size_t)lay->nnet * lay->net_rec_bytes;
    lay->off_inbox2 = off;
    off += 2 * (size_t)lay->nnet * lay->status_rec_bytes;
    lay->off_outbox = off;
    off += 2 * (size_t)lay->nnet * lay->net_rec_bytes;
    lay->off_outbox2 = off;
    off += 2 * (size_t)lay->nnet * lay->status_rec_bytes;
    lay->off_beat = off;
    off += (size_t)lay->nnet * sizeof(uint64_t);
    lay->bytes = align64(off);
}

uint32_t rmacoll__ctrl_sig_rec(const rmacoll__ctrl_layout_t *lay,
                               rmacoll__rec_kind_t kind, int k)
{
    return lay->nsig_plan + (kind == RMACOLL__REC_AGREE ? (uint32_t)lay->nnet : 0) +
           (uint32_t)k;
}

uint32_t rmacoll__ctrl_sig_ready(const rmacoll__ctrl_layout_t *lay, int writer)
{
    return lay->nsig_plan + 2 * (uint32_t)lay->nnet + (uint32_t)writer;
}

uint32_t rmacoll__ctrl_sig_stage(const rmacoll__ctrl_layout_t *lay, int w)
{
    return rmacoll__ctrl_sig_ready(lay, lay->nranks) + (uint32_t)w;
}

rmacoll__local_rec_t *rmacoll__ctrl_local(void *base,
                                          const rmacoll__ctrl_layout_t *lay,
                                          int par)
{
    return (rmacoll__local_rec_t *)((char *)base + lay->off_local +
                                    (size_t)par * lay->local_rec_bytes);
}

int64_t *rmacoll__ctrl_local_counts(rmacoll__local_rec_t *lr)
{
    return (int64_t *)(lr + 1);
}

uint64_t *rmacoll__ctrl_local_eager_off(rmacoll__local_rec_t *lr,
                                        const rmacoll__ctrl_layout_t *lay)
{
    if (lay->node_eager_cap == 0) {
        return NULL;
    }
    return (uint64_t *)(rmacoll__ctrl_local_counts(lr) + 3 * (size_t)lay->nranks);
}

void *rmacoll__ctrl_local_payload(rmacoll__local_rec_t *lr,
                                  const rmacoll__ctrl_layout_t *lay)
{
    uint64_t *off = rmacoll__ctrl_local_eager_off(lr, lay);

    return off != NULL ? (void *)(off + lay->max_ls) : NULL;
}

size_t rmacoll__ctrl_meta_bytes(const rmacoll__ctrl_layout_t *lay)
{
    size_t n = (size_t)lay->max_ls;

    if (lay->matrix) {
        n += 3 * (size_t)lay->nranks;
    }
    return sizeof(rmacoll__net_rec_t) + n * sizeof(int64_t);
}

int64_t *rmacoll__ctrl_rec_rows(rmacoll__net_rec_t *rec, const rmacoll__ctrl_layout_t *lay)
{
    return (int64_t *)(rec + 1) + lay->max_ls;
}

void *rmacoll__ctrl_rec_payload(rmacoll__net_rec_t *rec, const rmacoll__ctrl_layout_t *lay)
{
    return (char *)rec + rmacoll__ctrl_meta_bytes(lay);
}

size_t rmacoll__ctrl_rec_bytes(const rmacoll__ctrl_layout_t *lay,
                               rmacoll__rec_kind_t kind)
{
    return kind == RMACOLL__REC_META ? lay->net_rec_bytes : lay->status_rec_bytes;
}

size_t rmacoll__ctrl_rec_off(const rmacoll__ctrl_layout_t *lay,
                             rmacoll__rec_kind_t kind, int outbox, int k, int par)
{
    size_t base;

    if (kind == RMACOLL__REC_META) {
        base = outbox ? lay->off_outbox : lay->off_inbox;
    } else {
        base = outbox ? lay->off_outbox2 : lay->off_inbox2;
    }
    return base + ((size_t)par * (size_t)lay->nnet + (size_t)k) *
                      rmacoll__ctrl_rec_bytes(lay, kind);
}

void rmacoll__status_merge(rmacoll__status_rec_t *acc, const rmacoll__status_rec_t *in)
{
    if (in->code == RMACOLL_SUCCESS) {
        return;
    }
    if (acc->code == RMACOLL_SUCCESS || in->rank < acc->rank ||
        (in->rank == acc->rank && in->code < acc->code)) {
        *acc = *in;
        acc->msg[sizeof(acc->msg) - 1] = '\0';
    }
}

void rmacoll__status_set(rmacoll__status_rec_t *rec, rmacoll_status_t code, int rank,
                         const char *msg)
{
    size_t n = strlen(msg);

    rec->code = code;
    rec->rank = rank;
    if (n >= sizeof(rec->msg)) {
        n = sizeof(rec->msg) - 1;
    }
    memcpy(rec->msg, msg, n);
    rec->msg[n] = '\0';
}
