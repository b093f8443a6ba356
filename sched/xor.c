/*
 * xor.c - the xor scheduler: pairwise exchange, rank i and peer i XOR k
 * swap their blocks in round k.
 *
 * round(i, j) = i XOR j, nrounds = R = the smallest power of two >= n.
 * The relation is symmetric (round(i, j) == round(j, i)), so in every
 * round ranks pair up and exchange with one partner. For n a power of two
 * this is the classic pairwise-exchange alltoall: rounds 1..n-1 each pair
 * every rank exactly once (R. Thakur, R. Rabenseifner, W. Gropp,
 * "Optimization of Collective Communication Operations in MPICH",
 * IJHPCA 19(1):49-66, 2005, alltoall for long messages). For other n it
 * still works: i XOR j is in [1, R) for i != j, and rounds whose partner
 * would be >= n are simply empty for that rank (gaps in the schedule).
 */
#include "rmacoll_sched.h"

/* Smallest power of two >= n (n >= 1). */
static int sched_xor_pow2(int n)
{
    int r = 1;
    while (r < n)
        r <<= 1;
    return r;
}

static int sched_xor_nrounds(const rmacoll_sched_state_t *state,
                             const rmacoll_topo_t *topo)
{
    return sched_xor_pow2(topo->nranks);
}

static int sched_xor_round(const rmacoll_sched_state_t *state,
                           const rmacoll_topo_t *topo, int rank, int peer)
{
    return rank ^ peer;
}

const rmacoll_sched_ops_t rmacoll_sched_xor_ops = {
    .abi_version = RMACOLL_SCHED_ABI_VERSION,
    .struct_size = sizeof(rmacoll_sched_ops_t),
    .name = "xor",
    .desc = "pairwise exchange, round = rank XOR peer (Thakur et al., IJHPCA 2005)",
    .create = NULL,   /* stateless */
    .destroy = NULL,
    .nrounds = sched_xor_nrounds,
    .round = sched_xor_round,
};
