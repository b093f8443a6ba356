/*
 * largest_first.c - a count-aware scheduler: node pairs ordered by the
 * bytes they exchange, largest first, greedily packed into node rounds
 * that are matchings (every node sends to at most one node and receives
 * from at most one node per node round); ranks inside a node pair follow
 * the local shift of node_shift.
 *
 * With W[A][B] = bytes node A sends to node B (set_load; uniform until
 * then), pairs A != B are taken by (W descending, node distance
 * (B - A) mod nn ascending, A ascending); each gets the smallest node
 * round k >= 1 in which A sends to nobody and B receives from nobody yet
 * (greedy edge colouring of the bipartite send/receive graph: k <= 2nn-3).
 * Then, with L = the largest node size and s = (local(j) - local(i) + L)
 * mod L:
 *
 *     round(i, j) = k(node(i), node(j)) * L + s     (k = 0 inside a node)
 *     nrounds     = (K + 1) * L,  K = the largest k used.
 *
 * Each node round is a partial permutation of nodes, so the schedule is
 * Latin. Big transfers land in the first node rounds, each node's heavy
 * partners in distinct ones, and pairs of similar size share a round
 * (what a Birkhoff-von Neumann decomposition into matchings does exactly;
 * greedy largest-first is its cheap, O(nn^2 log nn + nn^3 / 64),
 * approximation, as in G. Birkhoff, "Tres observaciones sobre el algebra
 * lineal", 1946, and the greedy matching heuristics of circuit-switch
 * scheduling, e.g. Bojja Venkatakrishnan et al., "Costly Circuits,
 * Submodular Schedules and Approximate Caratheodory Theorems",
 * SIGMETRICS 2016). With equal weights the order is by node distance and
 * the rounds are exactly node_shift's.
 *
 * The runtime does not know the global matrix, so it never calls
 * set_load: there the scheduler is node_shift, unless the environment
 * variable RMACOLL_LARGEST_FIRST_LOAD names a load file (written by
 * rmacoll-plan --write-load: "nnodes N" then N rows of N byte counts),
 * read in create; every rank must see the same file (a profile of the
 * traffic, e.g. the previous step's routing). The simulator
 * (rmacoll-plan --sim) passes the case's matrix through set_load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmacoll_sched.h"

struct rmacoll_sched_state {
    int nn, L, K;
    int *k;          /* [nn * nn] node round of pair (A, B), 0 on the diagonal */
};

typedef struct lf_pair {
    uint64_t w;
    int d, a, b;
} lf_pair_t;

static int lf_cmp(const void *x, const void *y)
{
    const lf_pair_t *p = x, *q = y;

    if (p->w != q->w) {
        return p->w > q->w ? -1 : 1;
    }
    if (p->d != q->d) {
        return p->d < q->d ? -1 : 1;
    }
    return p->a < q->a ? -1 : p->a > q->a;
}

/* Greedy colouring of the pairs by weight (NULL = all equal). */
static rmacoll_status_t lf_build(rmacoll_sched_state_t *st,
                                 const uint64_t *w)
{
    int nn = st->nn;
    size_t np = (size_t)nn * (size_t)(nn - 1), q = 0;
    int words = (2 * nn + 63) / 64 + 1;
    lf_pair_t *p = malloc((np + 1) * sizeof(*p));
    uint64_t *out = calloc((size_t)nn * words, sizeof(uint64_t));
    uint64_t *in = calloc((size_t)nn * words, sizeof(uint64_t));

    if (p == NULL || out == NULL || in == NULL) {
        free(p);
        free(out);
        free(in);
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int a = 0; a < nn; a++) {
        for (int b = 0; b < nn; b++) {
            if (a != b) {
                p[q].w = w ? w[(size_t)a * nn + b] : 1;
                p[q].d = (b - a + nn) % nn;
                p[q].a = a;
                p[q].b = b;
                q++;
            }
        }
    }
    qsort(p, np, sizeof(*p), lf_cmp);
    st->K = 0;
    for (size_t i = 0; i < np; i++) {
        uint64_t *oa = out + (size_t)p[i].a * words, *ib = in + (size_t)p[i].b * words;
        int k = 1;
        for (int x = 0; x < words; x++) {
            /* bit 0 is round 0 (the node itself), never free */
            uint64_t busy = oa[x] | ib[x] | (x == 0 ? 1u : 0u);
            if (~busy != 0) {
                k = x * 64 + __builtin_ctzll(~busy);
                break;
            }
        }
        oa[k / 64] |= 1ull << (k % 64);
        ib[k / 64] |= 1ull << (k % 64);
        st->k[(size_t)p[i].a * nn + p[i].b] = k;
        st->K = k > st->K ? k : st->K;
    }
    for (int a = 0; a < nn; a++) {
        st->k[(size_t)a * nn + a] = 0;
    }
    free(p);
    free(out);
    free(in);
    return RMACOLL_SUCCESS;
}

/* The load file of RMACOLL_LARGEST_FIRST_LOAD into w[nn * nn]; -1 when it
 * cannot be read or is for another number of nodes. */
static int lf_read_load(const char *path, int nn, uint64_t *w)
{
    FILE *f = fopen(path, "r");
    int n = -1, ok;

    if (f == NULL) {
        return -1;
    }
    ok = fscanf(f, " nnodes %d", &n) == 1 && n == nn;
    for (size_t k = 0; ok && k < (size_t)nn * nn; k++) {
        unsigned long long v;
        ok = fscanf(f, " %llu", &v) == 1;
        w[k] = v;
    }
    fclose(f);
    return ok ? 0 : -1;
}

static rmacoll_status_t lf_create(const rmacoll_topo_t *topo, uint64_t seed,
                                  rmacoll_sched_state_t **state)
{
    rmacoll_sched_state_t *st = calloc(1, sizeof(*st));
    rmacoll_status_t rc;

    (void)seed;
    if (st == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st->nn = topo->nnodes;
    st->L = 1;
    for (int n = 0; n < topo->nnodes; n++) {
        st->L = topo->node_size[n] > st->L ? topo->node_size[n] : st->L;
    }
    st->k = calloc((size_t)st->nn * st->nn, sizeof(int));
    if (st->k == NULL) {
        free(st);
        return RMACOLL_ERR_NO_MEMORY;
    }
    {
        const char *path = getenv("RMACOLL_LARGEST_FIRST_LOAD");
        uint64_t *w = NULL;
        if (path != NULL && path[0] != '\0') {
            w = malloc((size_t)st->nn * st->nn * sizeof(uint64_t) + 1);
            if (w == NULL || lf_read_load(path, st->nn, w) != 0) {
                free(w);
                free(st->k);
                free(st);
                return w == NULL ? RMACOLL_ERR_NO_MEMORY : RMACOLL_ERR_CONFIG;
            }
        }
        rc = lf_build(st, w);
        free(w);
    }
    if (rc != RMACOLL_SUCCESS) {
        free(st->k);
        free(st);
        return rc;
    }
    *state = st;
    return RMACOLL_SUCCESS;
}

static void lf_destroy(rmacoll_sched_state_t *state)
{
    if (state != NULL) {
        free(state->k);
        free(state);
    }
}

static rmacoll_status_t lf_set_load(rmacoll_sched_state_t *state,
                                    const rmacoll_topo_t *topo,
                                    const uint64_t *node_bytes)
{
    (void)topo;
    return lf_build(state, node_bytes);
}

static int lf_nrounds(const rmacoll_sched_state_t *state,
                      const rmacoll_topo_t *topo)
{
    (void)topo;
    return (state->K + 1) * state->L;
}

static int lf_round(const rmacoll_sched_state_t *state,
                    const rmacoll_topo_t *topo, int rank, int peer)
{
    int L = state->L;
    int k = state->k[(size_t)topo->node_of[rank] * state->nn + topo->node_of[peer]];
    int s = (topo->local_rank[peer] - topo->local_rank[rank] + L) % L;

    return k * L + s;
}

const rmacoll_sched_ops_t rmacoll_sched_largest_first_ops = {
    .abi_version = RMACOLL_SCHED_ABI_VERSION,
    .struct_size = sizeof(rmacoll_sched_ops_t),
    .name = "largest_first",
    .desc = "node pairs by bytes, largest first, packed into matchings "
            "(count-aware via set_load; node_shift without it)",
    .create = lf_create,
    .destroy = lf_destroy,
    .nrounds = lf_nrounds,
    .round = lf_round,
    .set_load = lf_set_load,
};
