/*
 * random.c - the random scheduler: a seeded Latin square over the ranks.
 *
 * create() draws, from the seed alone, two permutations of 0..n-1 with a
 * Fisher-Yates shuffle (D. Knuth, TAOCP vol. 2, algorithm 3.4.2 P) driven
 * by splitmix64 (G. Steele, D. Lea, C. Flood, "Fast Splittable
 * Pseudorandom Number Generators", OOPSLA 2014):
 *   idx[r]  - a random position of rank r on a ring,
 *   perm[k] - the round given to ring distance k,
 * and assigns
 *
 *     round(i, j) = perm[(idx[j] - idx[i] + n) mod n],   nrounds = n.
 *
 * This is the shift schedule on a randomly relabelled ring with its
 * rounds randomly renumbered, so it keeps shift's Latin-square property:
 * for a fixed rank all peers get distinct rounds, and for a fixed peer
 * all senders do (each round is a permutation). The draw depends only on
 * (seed, n): every rank given the same `scheduler_seed` builds the same
 * table, with no communication. The PRNG is self-contained (no rand(),
 * no global state), so results are the same on every libc.
 *
 * round() needs the state from create(); with a NULL state it falls back
 * to shift so that it still returns a valid round.
 */
#include <stdlib.h>

#include "rmacoll_sched.h"

struct rmacoll_sched_state {
    int n;       /* nranks the tables were drawn for */
    int *idx;    /* [n] ring position of each rank */
    int *perm;   /* [n] round of each ring distance */
};

/* splitmix64: one 64-bit output per call, state advanced in place. */
static uint64_t sched_random_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform integer in [0, bound), bound >= 1, without modulo bias. */
static uint64_t sched_random_below(uint64_t *s, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound; /* 2^64 mod bound */
    uint64_t r;
    do {
        r = sched_random_next(s);
    } while (r < threshold);
    return r % bound;
}

/* a[0..n) = a uniformly random permutation of 0..n-1. */
static void sched_random_shuffle(uint64_t *s, int *a, int n)
{
    for (int i = 0; i < n; i++)
        a[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)sched_random_below(s, (uint64_t)i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static void sched_random_destroy(rmacoll_sched_state_t *state)
{
    if (state == NULL)
        return;
    free(state->idx);
    free(state->perm);
    free(state);
}

static rmacoll_status_t sched_random_create(const rmacoll_topo_t *topo,
                                            uint64_t seed,
                                            rmacoll_sched_state_t **state)
{
    int n = topo->nranks;
    rmacoll_sched_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return RMACOLL_ERR_NO_MEMORY;
    st->n = n;
    st->idx = malloc((size_t)n * sizeof(int));
    st->perm = malloc((size_t)n * sizeof(int));
    if (st->idx == NULL || st->perm == NULL) {
        sched_random_destroy(st);
        return RMACOLL_ERR_NO_MEMORY;
    }
    uint64_t s = seed;
    sched_random_shuffle(&s, st->idx, n);
    sched_random_shuffle(&s, st->perm, n);
    *state = st;
    return RMACOLL_SUCCESS;
}

static int sched_random_nrounds(const rmacoll_sched_state_t *state,
                                const rmacoll_topo_t *topo)
{
    return topo->nranks;
}

static int sched_random_round(const rmacoll_sched_state_t *state,
                              const rmacoll_topo_t *topo, int rank, int peer)
{
    int n = topo->nranks;
    if (state == NULL || state->n != n)
        return (peer - rank + n) % n; /* no tables: shift */
    return state->perm[(state->idx[peer] - state->idx[rank] + n) % n];
}

const rmacoll_sched_ops_t rmacoll_sched_random_ops = {
    .abi_version = RMACOLL_SCHED_ABI_VERSION,
    .struct_size = sizeof(rmacoll_sched_ops_t),
    .name = "random",
    .desc = "seeded random Latin square: shift on a shuffled ring, rounds shuffled",
    .create = sched_random_create,
    .destroy = sched_random_destroy,
    .nrounds = sched_random_nrounds,
    .round = sched_random_round,
};
