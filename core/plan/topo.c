/* topo.c - topology from node keys: node ids by lowest rank, local ranks by rank order. */
#include "core/plan/topo.h"

#include <stdlib.h>

static void topo_free(rmacoll_topo_t *t)
{
    free(t->node_of);
    free(t->local_rank);
    free(t->node_size);
    free(t->node_first);
    free(t->node_members);
    free(t);
}

rmacoll_status_t rmacoll__topo_create(int nranks, const int *node_keys,
                                      rmacoll_topo_t **topo)
{
    rmacoll_topo_t *t;

    if (nranks < 1 || node_keys == NULL || topo == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    t->nranks = nranks;
    t->node_of = calloc((size_t)nranks, sizeof(int));
    t->local_rank = calloc((size_t)nranks, sizeof(int));
    t->node_size = calloc((size_t)nranks, sizeof(int));
    t->node_first = calloc((size_t)nranks + 1, sizeof(int));
    t->node_members = calloc((size_t)nranks, sizeof(int));
    if (!t->node_of || !t->local_rank || !t->node_size || !t->node_first ||
        !t->node_members) {
        topo_free(t);
        return RMACOLL_ERR_NO_MEMORY;
    }
    /* Node ids in order of first appearance (= by lowest rank). O(n^2) in
     * the worst case, done once per communicator. */
    for (int r = 0; r < nranks; r++) {
        int node = -1;
        for (int q = 0; q < r; q++) {
            if (node_keys[q] == node_keys[r]) {
                node = t->node_of[q];
                break;
            }
        }
        if (node < 0) {
            node = t->nnodes++;
        }
        t->node_of[r] = node;
        t->local_rank[r] = t->node_size[node]++;
    }
    for (int n = 0; n < t->nnodes; n++) {
        t->node_first[n + 1] = t->node_first[n] + t->node_size[n];
    }
    for (int r = 0; r < nranks; r++) {
        t->node_members[t->node_first[t->node_of[r]] + t->local_rank[r]] = r;
    }
    *topo = t;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__topo_create_sizes(int nnodes, const int *sizes,
                                            rmacoll_topo_t **topo)
{
    int nranks = 0;
    int *keys;
    rmacoll_status_t st;

    if (nnodes < 1 || sizes == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (int n = 0; n < nnodes; n++) {
        if (sizes[n] < 1) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        nranks += sizes[n];
    }
    keys = malloc((size_t)nranks * sizeof(int));
    if (keys == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int n = 0, r = 0; n < nnodes; n++) {
        for (int l = 0; l < sizes[n]; l++) {
            keys[r++] = n;
        }
    }
    st = rmacoll__topo_create(nranks, keys, topo);
    free(keys);
    return st;
}

void rmacoll__topo_destroy(rmacoll_topo_t *topo)
{
    if (topo != NULL) {
        topo_free(topo);
    }
}
