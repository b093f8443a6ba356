/*
 * node_shift.c - the node_shift scheduler: shift over node distance first,
 * then over local rank, so rounds follow the two-hop relay.
 *
 * With nn nodes, L = the largest node size, d = (node(j) - node(i) + nn)
 * mod nn (node distance) and s = (local(j) - local(i) + L) mod L (local
 * shift):
 *
 *     round(i, j) = d * L + s,        nrounds = nn * L.
 *
 * Consequences:
 *  - same-node peers (d = 0) come first, in rounds 1 .. L-1; their puts go
 *    over the copy engine while nothing of the network is busy yet;
 *  - node distance d occupies the block of rounds [d*L, (d+1)*L): in that
 *    block every node sends to the node d ahead of it and receives from the
 *    node d behind it (the shift of Thakur et al. lifted to nodes), so each
 *    node's rails talk to exactly one remote node at a time;
 *  - within a block, the local shift s orders the peers of the remote node;
 *    the relay stream of i to node B starts at round(i, relay(i, B)), and
 *    on equal-size nodes relay(i, B) has s = 0, i.e. the stream starts
 *    in the first round of its block.
 * With one rank per node this is exactly shift over nodes; with one node
 * it is shift over local ranks.
 *
 * Source: the shift (pairwise exchange) schedule of R. Thakur,
 * R. Rabenseifner, W. Gropp, "Optimization of Collective Communication
 * Operations in MPICH", IJHPCA 19(1):49-66, 2005, applied hierarchically
 * (nodes, then ranks of a node).
 *
 * State (optional) caches L; with a NULL state round() recomputes it
 * (O(nnodes)), so both give the same rounds.
 */
#include <stdlib.h>

#include "rmacoll_sched.h"

struct rmacoll_sched_state {
    int max_local;   /* L: the largest node size */
};

/* L of the topology (>= 1). */
static int sched_node_shift_max_local(const rmacoll_topo_t *topo)
{
    int l = 1;
    for (int n = 0; n < topo->nnodes; n++)
        if (topo->node_size[n] > l)
            l = topo->node_size[n];
    return l;
}

static int sched_node_shift_l(const rmacoll_sched_state_t *state,
                              const rmacoll_topo_t *topo)
{
    return state ? state->max_local : sched_node_shift_max_local(topo);
}

static rmacoll_status_t sched_node_shift_create(const rmacoll_topo_t *topo,
                                                uint64_t seed,
                                                rmacoll_sched_state_t **state)
{
    rmacoll_sched_state_t *st = malloc(sizeof(*st));
    if (st == NULL)
        return RMACOLL_ERR_NO_MEMORY;
    st->max_local = sched_node_shift_max_local(topo);
    *state = st;
    return RMACOLL_SUCCESS;
}

static void sched_node_shift_destroy(rmacoll_sched_state_t *state)
{
    free(state);
}

static int sched_node_shift_nrounds(const rmacoll_sched_state_t *state,
                                    const rmacoll_topo_t *topo)
{
    return topo->nnodes * sched_node_shift_l(state, topo);
}

static int sched_node_shift_round(const rmacoll_sched_state_t *state,
                                  const rmacoll_topo_t *topo, int rank,
                                  int peer)
{
    int l = sched_node_shift_l(state, topo);
    int nn = topo->nnodes;
    int d = (topo->node_of[peer] - topo->node_of[rank] + nn) % nn;
    int s = (topo->local_rank[peer] - topo->local_rank[rank] + l) % l;
    return d * l + s;
}

const rmacoll_sched_ops_t rmacoll_sched_node_shift_ops = {
    .abi_version = RMACOLL_SCHED_ABI_VERSION,
    .struct_size = sizeof(rmacoll_sched_ops_t),
    .name = "node_shift",
    .desc = "round = node distance * max node size + local-rank shift (relay-aware shift)",
    .create = sched_node_shift_create,
    .destroy = sched_node_shift_destroy,
    .nrounds = sched_node_shift_nrounds,
    .round = sched_node_shift_round,
};
