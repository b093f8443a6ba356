/*
 * plan_in.c - the eager and direct parts of a planner input from the
 * senders' rows (plan_in.h).
 */
#include "core/plan/plan_in.h"

#include "core/plan/topo.h"

void rmacoll__plan_in_eager(const rmacoll_topo_t *topo, int relay, int r,
                            const rmacoll__plan_rows_t *rows, size_t esize,
                            uint64_t eager_max, uint64_t *eager_in_off)
{
    int A = topo->node_of[r];
    const int *members = topo->node_members + topo->node_first[A];

    for (int a = 0; a < topo->nranks && eager_max != 0; a++) {
        eager_in_off[a] =
            topo->node_of[a] == A ? RMACOLL__NO_EAGER
            : relay ? rmacoll__plan_eager_off(rows->row(rows->arg, a), members,
                                              topo->node_size[A], topo->local_rank[r], esize,
                                              eager_max)
                    /* relay off: a's record to r carries r's block alone */
                    : rmacoll__plan_eager_off(rows->row(rows->arg, a), &r, 1, 0, esize,
                                              eager_max);
    }
}

void rmacoll__plan_in_direct(const rmacoll_topo_t *topo, int r,
                             const rmacoll__plan_rows_t *rows, size_t esize,
                             uint64_t eager_max, uint64_t direct_min, uint8_t *direct_in)
{
    int A = topo->node_of[r];

    for (int a = 0; a < topo->nranks && direct_min != 0; a++) {
        direct_in[a] = topo->node_of[a] != A &&
                       (uint8_t)rmacoll__plan_direct_in(topo, r, a, rows->row(rows->arg, a),
                                                        esize, eager_max, direct_min);
    }
}

void rmacoll__plan_in_node_eager(const rmacoll_topo_t *topo, int r,
                                 const rmacoll__plan_rows_t *rows, size_t esize,
                                 uint64_t cap, uint64_t *node_eager_off, uint64_t *scratch)
{
    int A = topo->node_of[r];
    int ls = topo->node_size[A];
    const int *members = topo->node_members + topo->node_first[A];

    for (int l = 0; l < ls && cap != 0; l++) {
        (void)rmacoll__plan_node_eager_bytes(rows->row(rows->arg, members[l]), members, ls, l,
                                             esize, cap, scratch);
        node_eager_off[l] = scratch[topo->local_rank[r]];
    }
}

void rmacoll__plan_in_paths(rmacoll__plan_input_t *in, const rmacoll__plan_rows_t *rows,
                            const rmacoll__plan_paths_t *lim, uint64_t *eager_in_off,
                            uint8_t *direct_in, uint64_t *node_eager_off, uint64_t *scratch)
{
    int relay = in->cfg == NULL || in->cfg->relay_enabled;

    rmacoll__plan_in_node_eager(in->topo, in->rank, rows, in->esize, lim->node_eager_max,
                                node_eager_off, scratch);
    in->node_eager_max_bytes = lim->node_eager_max;
    in->node_eager_off = lim->node_eager_max != 0 ? node_eager_off : NULL;
    rmacoll__plan_in_eager(in->topo, relay, in->rank, rows, in->esize, lim->eager_max,
                           eager_in_off);
    in->eager_max_bytes = lim->eager_max;
    in->eager_in_off = lim->eager_max != 0 ? eager_in_off : NULL;
    rmacoll__plan_in_direct(in->topo, in->rank, rows, in->esize, lim->eager_max,
                            lim->direct_min, direct_in);
    in->direct_min_bytes = lim->direct_min;
    in->direct_in = lim->direct_min != 0 ? direct_in : NULL;
}
