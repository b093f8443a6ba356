/*
 * topo.h - topology of a communicator: node of every rank, local rank
 * (= rail), node sizes, and the relay rule.
 *
 * Relay rule: rank i on node A reaches node B (B != A) through
 * relay(i, B) = the rank of node B whose local rank is
 * local(i) mod size(B). When B is at least as large as A this is the rank
 * on i's own rail; when B is smaller, several ranks of A share one relay
 * of B, each through its own channel.
 */
#ifndef RMACOLL_CORE_TOPO_H
#define RMACOLL_CORE_TOPO_H

#include "rmacoll_sched.h"

/**
 * Builds a topology from one node key per rank (node_keys[nranks]; equal
 * keys = same node; any ints). Nodes are numbered by their lowest rank.
 * Errors: RMACOLL_ERR_INVALID_ARG (nranks < 1), RMACOLL_ERR_NO_MEMORY.
 */
rmacoll_status_t rmacoll__topo_create(int nranks, const int *node_keys,
                                      rmacoll_topo_t **topo);

/** Contiguous nodes: sizes[nnodes] ranks each, node 0 first. */
rmacoll_status_t rmacoll__topo_create_sizes(int nnodes, const int *sizes,
                                            rmacoll_topo_t **topo);

void rmacoll__topo_destroy(rmacoll_topo_t *topo);

/** Rank with local rank `local` on `node`. */
static inline int rmacoll__topo_rank(const rmacoll_topo_t *t, int node,
                                     int local)
{
    return t->node_members[t->node_first[node] + local];
}

/** relay(i, B) of the rule above; i itself's node must differ from B. */
static inline int rmacoll__topo_relay(const rmacoll_topo_t *t, int src,
                                      int dst_node)
{
    return rmacoll__topo_rank(t, dst_node,
                              t->local_rank[src] % t->node_size[dst_node]);
}

#endif /* RMACOLL_CORE_TOPO_H */
