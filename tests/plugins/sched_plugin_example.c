/*
 * sched_plugin_example.c - an out-of-tree round scheduler built as a
 * plugin (a MODULE library), for tests and as the template of
 * docs/schedulers.md.
 *
 * "reverse_shift": rank i talks to peer (i - k) mod n in round k, i.e.
 * round(i, j) = (i - j + n) mod n, nrounds = n - the shift schedule run
 * backwards. Its state only records n, to show create/destroy.
 *
 * Built several times by tests/cmake/test_sched.cmake; SCHED_PLUGIN_DEFECT
 * selects a deliberately broken variant for the registry's error paths:
 *   0 (default) a correct plugin,
 *   1 wrong abi_version,
 *   2 rounds out of range (round = n, one past the last),
 *   3 the table is exported under another name than
 *     RMACOLL_SCHED_PLUGIN_SYMBOL.
 */
#include <stdlib.h>

#include "rmacoll_sched.h"

#ifndef SCHED_PLUGIN_DEFECT
#define SCHED_PLUGIN_DEFECT 0
#endif

struct rmacoll_sched_state {
    int nranks;
};

static rmacoll_status_t reverse_shift_create(const rmacoll_topo_t *topo,
                                             uint64_t seed,
                                             rmacoll_sched_state_t **state)
{
    rmacoll_sched_state_t *st = malloc(sizeof(*st));
    if (st == NULL)
        return RMACOLL_ERR_NO_MEMORY;
    st->nranks = topo->nranks;
    *state = st;
    return RMACOLL_SUCCESS;
}

static void reverse_shift_destroy(rmacoll_sched_state_t *state)
{
    free(state);
}

static int reverse_shift_nrounds(const rmacoll_sched_state_t *state,
                                 const rmacoll_topo_t *topo)
{
    return state->nranks;
}

static int reverse_shift_round(const rmacoll_sched_state_t *state,
                               const rmacoll_topo_t *topo, int rank, int peer)
{
#if SCHED_PLUGIN_DEFECT == 2
    return state->nranks;
#else
    return (rank - peer + state->nranks) % state->nranks;
#endif
}

#if SCHED_PLUGIN_DEFECT == 3
#define rmacoll_sched_plugin_v1 rmacoll_sched_plugin_misspelt
#endif

/* The one symbol the core looks up (RMACOLL_SCHED_PLUGIN_SYMBOL). */
const rmacoll_sched_ops_t rmacoll_sched_plugin_v1 = {
#if SCHED_PLUGIN_DEFECT == 1
    .abi_version = RMACOLL_SCHED_ABI_VERSION + 41,
#else
    .abi_version = RMACOLL_SCHED_ABI_VERSION,
#endif
    .struct_size = sizeof(rmacoll_sched_ops_t),
    .name = "reverse_shift",
    .desc = "round = (rank - peer) mod nranks (example plugin)",
    .create = reverse_shift_create,
    .destroy = reverse_shift_destroy,
    .nrounds = reverse_shift_nrounds,
    .round = reverse_shift_round,
};
