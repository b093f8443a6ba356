/*
 * shift.c - the shift scheduler: rank i talks to peer (i + k) mod n in
 * round k.
 *
 * round(i, j) = (j - i + n) mod n, nrounds = n (round 0 is left empty:
 * it would be the rank itself). In round k every rank sends to the rank k
 * ahead of it and receives from the rank k behind it, so each round is a
 * permutation (one target and one source per rank). This is the
 * "pairwise exchange by shift" used for long-message alltoall(v):
 * R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective
 * Communication Operations in MPICH", IJHPCA 19(1):49-66, 2005
 * (alltoall for long messages).
 */
#include "rmacoll_sched.h"

static int sched_shift_nrounds(const rmacoll_sched_state_t *state,
                               const rmacoll_topo_t *topo)
{
    return topo->nranks;
}

static int sched_shift_round(const rmacoll_sched_state_t *state,
                             const rmacoll_topo_t *topo, int rank, int peer)
{
    return (peer - rank + topo->nranks) % topo->nranks;
}

const rmacoll_sched_ops_t rmacoll_sched_shift_ops = {
    .abi_version = RMACOLL_SCHED_ABI_VERSION,
    .struct_size = sizeof(rmacoll_sched_ops_t),
    .name = "shift",
    .desc = "round = (peer - rank) mod nranks (Thakur et al., IJHPCA 2005)",
    .create = NULL,   /* stateless */
    .destroy = NULL,
    .nrounds = sched_shift_nrounds,
    .round = sched_shift_round,
};
