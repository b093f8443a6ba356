/*
 * test_sched.c - the built-in round schedulers (shift, node_shift, xor,
 * random) and the scheduler registry (lookup, plugins, checker).
 *
 * Every built-in is run over 1..8 nodes x 1..8 ranks, uneven nodes and a
 * non-contiguous topology: rounds in range, deterministic, Latin (a rank's
 * peers get distinct rounds, a peer's senders too), plus exact values per
 * scheduler. The random scheduler's values for two seeds were computed by
 * an independent Python model of splitmix64 + Fisher-Yates. Plugins are
 * MODULE libraries built by tests/cmake/test_sched.cmake.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"

#define NTOPO_MAX 128

static const char *const builtin_names[] = {"shift", "node_shift", "xor",
                                            "random", "largest_first"};
#define NBUILTIN (sizeof(builtin_names) / sizeof(builtin_names[0]))

/* ---- topologies ---- */

typedef struct topo_set {
    rmacoll_topo_t *t[NTOPO_MAX];
    int n;
} topo_set_t;

static rmacoll_topo_t *make_sizes(int nnodes, const int *sizes)
{
    rmacoll_topo_t *t = NULL;
    assert_int_equal(rmacoll__topo_create_sizes(nnodes, sizes, &t),
                     RMACOLL_SUCCESS);
    assert_non_null(t);
    return t;
}

/* Node keys {7,3,7,3,9,3,7}: node 0 = {0,2,6}, node 1 = {1,3,5}, node 2 = {4}. */
static const int noncontig_keys[] = {7, 3, 7, 3, 9, 3, 7};

static rmacoll_topo_t *make_noncontig(void)
{
    rmacoll_topo_t *t = NULL;
    assert_int_equal(rmacoll__topo_create(7, noncontig_keys, &t),
                     RMACOLL_SUCCESS);
    /* What the exact node_shift values below rely on. */
    static const int node_of[] = {0, 1, 0, 1, 2, 1, 0};
    static const int local[] = {0, 0, 1, 1, 0, 2, 2};
    assert_int_equal(t->nnodes, 3);
    assert_memory_equal(t->node_of, node_of, sizeof(node_of));
    assert_memory_equal(t->local_rank, local, sizeof(local));
    return t;
}

static int setup_topos(void **state)
{
    topo_set_t *ts = calloc(1, sizeof(*ts));
    int sizes[8];
    for (int nn = 1; nn <= 8; nn++) {
        for (int l = 1; l <= 8; l++) {
            for (int k = 0; k < nn; k++)
                sizes[k] = l;
            ts->t[ts->n++] = make_sizes(nn, sizes);
        }
    }
    static const int uneven[][5] = {
        {3, 2}, {1, 4}, {4, 1, 3}, {2, 5, 1, 7}, {1, 1, 2}, {8, 1, 1, 8, 3},
    };
    static const int uneven_n[] = {2, 2, 3, 4, 3, 5};
    for (size_t u = 0; u < sizeof(uneven_n) / sizeof(uneven_n[0]); u++)
        ts->t[ts->n++] = make_sizes(uneven_n[u], uneven[u]);
    ts->t[ts->n++] = make_noncontig();
    assert_true(ts->n <= NTOPO_MAX);
    *state = ts;
    return 0;
}

static int teardown_topos(void **state)
{
    topo_set_t *ts = *state;
    for (int i = 0; i < ts->n; i++)
        rmacoll__topo_destroy(ts->t[i]);
    free(ts);
    return 0;
}

static rmacoll__sched_t open_ok(const char *name, const char *plugin,
                                const rmacoll_topo_t *t, uint64_t seed)
{
    rmacoll__sched_t s;
    char err[256] = "";
    rmacoll_status_t st = rmacoll__sched_open(name, plugin, t, seed, &s, err,
                                              sizeof(err));
    if (st != RMACOLL_SUCCESS)
        fail_msg("open %s failed: %s: %s", name ? name : plugin ? plugin : "(none)",
                 rmacoll_status_name(st), err);
    assert_non_null(s.ops);
    return s;
}

/* A table that must never be called; pre-fills outputs. */
static const rmacoll_sched_ops_t junk_ops = {.name = "junk"};

/* ---- registry: lookup ---- */

static void test_find(void **state)
{
    for (size_t k = 0; k < NBUILTIN; k++) {
        const rmacoll_sched_ops_t *ops = rmacoll__sched_find(builtin_names[k]);
        assert_non_null(ops);
        assert_string_equal(ops->name, builtin_names[k]);
        assert_int_equal(ops->abi_version, RMACOLL_SCHED_ABI_VERSION);
        assert_int_equal(ops->struct_size, sizeof(rmacoll_sched_ops_t));
        assert_non_null(ops->desc);
        assert_true(strlen(ops->desc) > 0);
        assert_non_null(ops->round);
        assert_non_null(ops->nrounds);
        /* create and destroy come in pairs */
        assert_int_equal(ops->create == NULL, ops->destroy == NULL);
    }
    int n = 0;
    while (rmacoll__builtin_schedulers[n] != NULL)
        n++;
    assert_int_equal(n, NBUILTIN);
    assert_null(rmacoll__sched_find("bogus"));
    assert_null(rmacoll__sched_find("Shift"));
    assert_null(rmacoll__sched_find(""));
    assert_null(rmacoll__sched_find(NULL));
}

static void test_unknown_name(void **state)
{
    const topo_set_t *ts = *state;
    rmacoll__sched_t s = {&junk_ops, NULL}; /* open must clear it */
    char err[256] = "";
    assert_int_equal(rmacoll__sched_open("bogus", NULL, ts->t[0], 0, &s, err,
                                         sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_null(s.ops);
    assert_null(s.state);
    assert_non_null(strstr(err, "unknown scheduler 'bogus'"));
    for (size_t k = 0; k < NBUILTIN; k++)
        assert_non_null(strstr(err, builtin_names[k]));
    /* empty plugin path means "by name" too; empty and NULL names fail */
    assert_int_equal(rmacoll__sched_open("bogus", "", ts->t[0], 0, &s, err,
                                         sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_int_equal(rmacoll__sched_open("", NULL, ts->t[0], 0, &s, NULL, 0),
                     RMACOLL_ERR_CONFIG);
    assert_int_equal(rmacoll__sched_open(NULL, NULL, ts->t[0], 0, &s, err,
                                         sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    /* a tiny errbuf is truncated, not overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof(tiny));
    assert_int_equal(rmacoll__sched_open("bogus", NULL, ts->t[0], 0, &s, tiny,
                                         4),
                     RMACOLL_ERR_CONFIG);
    assert_int_equal(tiny[3], '\0');
    assert_int_equal(tiny[4], 'x');
    /* no topology */
    assert_int_equal(rmacoll__sched_open("shift", NULL, NULL, 0, &s, err,
                                         sizeof(err)),
                     RMACOLL_ERR_INVALID_ARG);
}

/* ---- every built-in on every topology ---- */

/* All of a rank's peers get distinct rounds, and all senders to a peer. */
static void assert_latin(const rmacoll__sched_t *s, const rmacoll_topo_t *t)
{
    int n = t->nranks;
    int nr = s->ops->nrounds(s->state, t);
    char *seen = malloc((size_t)nr);
    for (int i = 0; i < n; i++) {
        memset(seen, 0, (size_t)nr);
        for (int j = 0; j < n; j++) {
            if (j == i)
                continue;
            int r = s->ops->round(s->state, t, i, j);
            if (seen[r])
                fail_msg("%s: rank %d has two peers in round %d", s->ops->name, i, r);
            seen[r] = 1;
        }
        memset(seen, 0, (size_t)nr);
        for (int j = 0; j < n; j++) {
            if (j == i)
                continue;
            int r = s->ops->round(s->state, t, j, i);
            if (seen[r])
                fail_msg("%s: peer %d has two senders in round %d", s->ops->name, i, r);
            seen[r] = 1;
        }
    }
    free(seen);
}

static void test_builtins_all_topologies(void **state)
{
    const topo_set_t *ts = *state;
    for (size_t k = 0; k < NBUILTIN; k++) {
        for (int ti = 0; ti < ts->n; ti++) {
            const rmacoll_topo_t *t = ts->t[ti];
            int n = t->nranks;
            rmacoll__sched_t a = open_ok(builtin_names[k], NULL, t, 1234);
            rmacoll__sched_t b = open_ok(builtin_names[k], NULL, t, 1234);
            assert_ptr_equal(a.ops, rmacoll__sched_find(builtin_names[k]));
            int nr = a.ops->nrounds(a.state, t);
            assert_true(nr >= 1);
            assert_true(nr >= n - 1); /* Latin rows need n-1 rounds */
            assert_int_equal(nr, b.ops->nrounds(b.state, t));
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < n; j++) {
                    if (j == i)
                        continue;
                    int r = a.ops->round(a.state, t, i, j);
                    if (r < 0 || r >= nr)
                        fail_msg("%s topo %d: round(%d,%d) = %d not in [0,%d)",
                                 builtin_names[k], ti, i, j, r, nr);
                    assert_int_equal(a.ops->round(a.state, t, i, j), r);
                    assert_int_equal(b.ops->round(b.state, t, i, j), r);
                }
            }
            assert_latin(&a, t);
            char err[256] = "";
            assert_int_equal(rmacoll__sched_check(&a, t, err, sizeof(err)),
                             RMACOLL_SUCCESS);
            rmacoll__sched_close(&a);
            rmacoll__sched_close(&b);
            assert_null(a.ops);
            assert_null(a.state);
            rmacoll__sched_close(&a); /* twice is harmless */
        }
    }
}

/* ---- exact values ---- */

static void test_shift_exact(void **state)
{
    const topo_set_t *ts = *state;
    for (int ti = 0; ti < ts->n; ti++) {
        const rmacoll_topo_t *t = ts->t[ti];
        int n = t->nranks;
        rmacoll__sched_t s = open_ok("shift", NULL, t, 0);
        assert_int_equal(s.ops->nrounds(s.state, t), n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (j != i)
                    assert_int_equal(s.ops->round(s.state, t, i, j),
                                     (j - i + n) % n);
        rmacoll__sched_close(&s);
    }
    /* literal values on 5 ranks */
    rmacoll_topo_t *t = make_sizes(1, (const int[]){5});
    rmacoll__sched_t s = open_ok("shift", NULL, t, 0);
    assert_int_equal(s.ops->nrounds(s.state, t), 5);
    assert_int_equal(s.ops->round(s.state, t, 3, 1), 3);
    assert_int_equal(s.ops->round(s.state, t, 1, 3), 2);
    assert_int_equal(s.ops->round(s.state, t, 4, 0), 1);
    assert_int_equal(s.ops->round(s.state, t, 0, 4), 4);
    rmacoll__sched_close(&s);
    rmacoll__topo_destroy(t);
}

static void test_xor_exact(void **state)
{
    const topo_set_t *ts = *state;
    for (int ti = 0; ti < ts->n; ti++) {
        const rmacoll_topo_t *t = ts->t[ti];
        int n = t->nranks;
        int pow2 = 1;
        while (pow2 < n)
            pow2 *= 2;
        rmacoll__sched_t s = open_ok("xor", NULL, t, 0);
        assert_int_equal(s.ops->nrounds(s.state, t), pow2);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (j != i) {
                    assert_int_equal(s.ops->round(s.state, t, i, j), i ^ j);
                    /* pairwise: both sides of a pair share a round */
                    assert_int_equal(s.ops->round(s.state, t, j, i), i ^ j);
                }
        rmacoll__sched_close(&s);
    }
    /* literal values */
    static const struct { int n, nrounds; } np[] = {
        {1, 1}, {2, 2}, {3, 4}, {5, 8}, {8, 8}, {9, 16}, {16, 16}, {17, 32}};
    for (size_t k = 0; k < sizeof(np) / sizeof(np[0]); k++) {
        rmacoll_topo_t *t = make_sizes(1, &np[k].n);
        rmacoll__sched_t s = open_ok("xor", NULL, t, 0);
        assert_int_equal(s.ops->nrounds(s.state, t), np[k].nrounds);
        if (np[k].n >= 8) {
            assert_int_equal(s.ops->round(s.state, t, 5, 3), 6);
            assert_int_equal(s.ops->round(s.state, t, 7, 0), 7);
            assert_int_equal(s.ops->round(s.state, t, 2, 6), 4);
        }
        /* power of two: every round 1..n-1 pairs up all ranks */
        if (np[k].n == 8) {
            for (int r = 1; r < 8; r++) {
                int hits = 0;
                for (int i = 0; i < 8; i++)
                    for (int j = 0; j < 8; j++)
                        if (j != i && s.ops->round(s.state, t, i, j) == r)
                            hits++;
                assert_int_equal(hits, 8);
            }
        }
        rmacoll__sched_close(&s);
        rmacoll__topo_destroy(t);
    }
}

/* node_shift by the documented formula, written out again here. */
static int node_shift_ref(const rmacoll_topo_t *t, int i, int j)
{
    int l = 0;
    for (int n = 0; n < t->nnodes; n++)
        if (t->node_size[n] > l)
            l = t->node_size[n];
    int d = (t->node_of[j] - t->node_of[i] + t->nnodes) % t->nnodes;
    return d * l + (t->local_rank[j] - t->local_rank[i] + l) % l;
}

static void test_node_shift_exact(void **state)
{
    const topo_set_t *ts = *state;
    for (int ti = 0; ti < ts->n; ti++) {
        const rmacoll_topo_t *t = ts->t[ti];
        int n = t->nranks;
        int l = 0;
        for (int k = 0; k < t->nnodes; k++)
            l = t->node_size[k] > l ? t->node_size[k] : l;
        rmacoll__sched_t s = open_ok("node_shift", NULL, t, 0);
        rmacoll__sched_t bare = {s.ops, NULL}; /* no state: recomputes L */
        assert_int_equal(s.ops->nrounds(s.state, t), t->nnodes * l);
        assert_int_equal(bare.ops->nrounds(NULL, t), t->nnodes * l);
        for (int i = 0; i < n; i++) {
            int last_same = -1, first_other = t->nnodes * l;
            for (int j = 0; j < n; j++) {
                if (j == i)
                    continue;
                int r = s.ops->round(s.state, t, i, j);
                assert_int_equal(r, node_shift_ref(t, i, j));
                assert_int_equal(bare.ops->round(NULL, t, i, j), r);
                if (t->node_of[j] == t->node_of[i])
                    last_same = r > last_same ? r : last_same;
                else
                    first_other = r < first_other ? r : first_other;
            }
            /* same-node peers (d = 0) all come before any other node */
            assert_true(last_same < first_other);
            assert_true(last_same < l);
        }
        rmacoll__sched_close(&s);
    }
    /* literal values: nodes of 3 and 2 ranks, L = 3 */
    rmacoll_topo_t *t = make_sizes(2, (const int[]){3, 2});
    rmacoll__sched_t s = open_ok("node_shift", NULL, t, 0);
    assert_int_equal(s.ops->nrounds(s.state, t), 6);
    assert_int_equal(s.ops->round(s.state, t, 0, 1), 1);
    assert_int_equal(s.ops->round(s.state, t, 0, 2), 2);
    assert_int_equal(s.ops->round(s.state, t, 0, 3), 3);
    assert_int_equal(s.ops->round(s.state, t, 0, 4), 4);
    assert_int_equal(s.ops->round(s.state, t, 2, 3), 4);
    assert_int_equal(s.ops->round(s.state, t, 4, 0), 5);
    assert_int_equal(s.ops->round(s.state, t, 3, 4), 1);
    assert_int_equal(s.ops->round(s.state, t, 3, 0), 3);
    rmacoll__sched_close(&s);
    rmacoll__topo_destroy(t);
    /* literal values on the non-contiguous topology, L = 3, 3 nodes */
    t = make_noncontig();
    s = open_ok("node_shift", NULL, t, 0);
    assert_int_equal(s.ops->nrounds(s.state, t), 9);
    assert_int_equal(s.ops->round(s.state, t, 6, 4), 7);
    assert_int_equal(s.ops->round(s.state, t, 4, 1), 6);
    assert_int_equal(s.ops->round(s.state, t, 3, 2), 6);
    assert_int_equal(s.ops->round(s.state, t, 0, 6), 2);
    assert_int_equal(s.ops->round(s.state, t, 0, 5), 5);
    rmacoll__sched_close(&s);
    rmacoll__topo_destroy(t);
}

/*
 * largest_first: without a load it is node_shift on every topology; with
 * a load, a 3-node example worked by hand (one rank per node, L = 1):
 * pairs by bytes 0->2 (50), 2->0 (40), 1->2 (30), 1->0 (20), 0->1 (10),
 * 2->1 (5) get the first node round where the sender sends nothing and
 * the receiver receives nothing: 1, 1, 2, 3, 2, 3.
 */
static void test_largest_first_exact(void **state)
{
    const topo_set_t *ts = *state;
    static const uint64_t w[9] = {0, 10, 50, 20, 0, 30, 40, 5, 0};
    static const int want[3][3] = {{-1, 2, 1}, {3, -1, 2}, {1, 3, -1}};

    for (int k = 0; k < ts->n; k++) {
        const rmacoll_topo_t *t = ts->t[k];
        rmacoll__sched_t a = open_ok("largest_first", NULL, t, 0);
        rmacoll__sched_t b = open_ok("node_shift", NULL, t, 0);
        assert_int_equal(a.ops->nrounds(a.state, t), b.ops->nrounds(b.state, t));
        for (int i = 0; i < t->nranks; i++) {
            for (int j = 0; j < t->nranks; j++) {
                if (i != j) {
                    assert_int_equal(a.ops->round(a.state, t, i, j),
                                     b.ops->round(b.state, t, i, j));
                }
            }
        }
        rmacoll__sched_close(&a);
        rmacoll__sched_close(&b);
    }
    {
        rmacoll_topo_t *t = make_sizes(3, (const int[]){1, 1, 1});
        rmacoll__sched_t s = open_ok("largest_first", NULL, t, 0);
        assert_true(s.ops->struct_size > RMACOLL_SCHED_OPS_V1_SIZE);
        assert_non_null(s.ops->set_load);
        assert_int_equal(s.ops->set_load(s.state, t, w), RMACOLL_SUCCESS);
        assert_int_equal(s.ops->nrounds(s.state, t), 4);
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) {
                if (i != j) {
                    assert_int_equal(s.ops->round(s.state, t, i, j), want[i][j]);
                }
            }
        }
        assert_int_equal(rmacoll__sched_check(&s, t, NULL, 0), RMACOLL_SUCCESS);
        rmacoll__sched_close(&s);
        /* the same matrix from a load file (RMACOLL_LARGEST_FIRST_LOAD) */
        {
            char path[] = "/tmp/rmacoll_test_lf_XXXXXX", err[256];
            int fd = mkstemp(path);
            FILE *f;
            assert_true(fd >= 0);
            f = fdopen(fd, "w");
            fprintf(f, "nnodes 3\n0 10 50\n20 0 30\n40 5 0\n");
            fclose(f);
            setenv("RMACOLL_LARGEST_FIRST_LOAD", path, 1);
            s = open_ok("largest_first", NULL, t, 0);
            for (int i = 0; i < 3; i++) {
                for (int j = 0; j < 3; j++) {
                    if (i != j) {
                        assert_int_equal(s.ops->round(s.state, t, i, j), want[i][j]);
                    }
                }
            }
            rmacoll__sched_close(&s);
            /* a file for another number of nodes is refused */
            f = fopen(path, "w");
            fprintf(f, "nnodes 2\n0 1\n1 0\n");
            fclose(f);
            assert_int_equal(rmacoll__sched_open("largest_first", NULL, t, 0, &s,
                                                 err, sizeof(err)),
                             RMACOLL_ERR_CONFIG);
            unsetenv("RMACOLL_LARGEST_FIRST_LOAD");
            unlink(path);
        }
        rmacoll__topo_destroy(t);
    }
}

/* Values from an independent Python model (splitmix64, Fisher-Yates of
 * idx then perm, round = perm[(idx[j] - idx[i] + n) % n]); -1 = self. */
static const int random_seed42_n6[6][6] = {
    {-1, 0, 1, 5, 3, 4}, {3, -1, 4, 0, 1, 5}, {5, 4, -1, 1, 0, 3},
    {1, 3, 5, -1, 4, 0}, {0, 5, 3, 4, -1, 1}, {4, 1, 0, 3, 5, -1}};
static const int random_seed0_n5[5][5] = {
    {-1, 0, 2, 3, 4}, {2, -1, 4, 0, 3}, {0, 3, -1, 4, 2},
    {4, 2, 3, -1, 0}, {3, 4, 0, 2, -1}};

static void test_random(void **state)
{
    const topo_set_t *ts = *state;
    /* golden values; the topology shape does not matter, only nranks */
    rmacoll_topo_t *t6 = make_sizes(2, (const int[]){4, 2});
    rmacoll__sched_t s = open_ok("random", NULL, t6, 42);
    assert_int_equal(s.ops->nrounds(s.state, t6), 6);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
            if (j != i)
                assert_int_equal(s.ops->round(s.state, t6, i, j),
                                 random_seed42_n6[i][j]);
    rmacoll__sched_close(&s);
    rmacoll__topo_destroy(t6);
    rmacoll_topo_t *t5 = make_sizes(1, (const int[]){5});
    s = open_ok("random", NULL, t5, 0);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++)
            if (j != i)
                assert_int_equal(s.ops->round(s.state, t5, i, j),
                                 random_seed0_n5[i][j]);
    /* without state it is shift */
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++)
            if (j != i)
                assert_int_equal(s.ops->round(NULL, t5, i, j), (j - i + 5) % 5);
    rmacoll__sched_close(&s);
    rmacoll__topo_destroy(t5);

    /* another seed gives another schedule (on every topology of >= 5 ranks) */
    for (int ti = 0; ti < ts->n; ti++) {
        const rmacoll_topo_t *t = ts->t[ti];
        if (t->nranks < 5)
            continue;
        rmacoll__sched_t a = open_ok("random", NULL, t, 1);
        rmacoll__sched_t b = open_ok("random", NULL, t, 2);
        int differ = 0;
        for (int i = 0; i < t->nranks; i++)
            for (int j = 0; j < t->nranks; j++)
                if (j != i && a.ops->round(a.state, t, i, j) !=
                                  b.ops->round(b.state, t, i, j))
                    differ++;
        if (differ == 0)
            fail_msg("random: seeds 1 and 2 agree on topology %d (%d ranks)",
                     ti, t->nranks);
        rmacoll__sched_close(&a);
        rmacoll__sched_close(&b);
    }
}

/* ---- the checker itself can fail ---- */

struct rmacoll_sched_state {
    int calls;   /* for a scheduler that changes its mind */
};

static int bad_nrounds(const rmacoll_sched_state_t *st, const rmacoll_topo_t *t)
{
    return t->nranks;
}

static int zero_nrounds(const rmacoll_sched_state_t *st, const rmacoll_topo_t *t)
{
    return 0;
}

/* out of range for the pair (2, 0) only */
static int bad_round_range(const rmacoll_sched_state_t *st,
                           const rmacoll_topo_t *t, int rank, int peer)
{
    if (rank == 2 && peer == 0)
        return -1;
    return (peer - rank + t->nranks) % t->nranks;
}

static int bad_round_flaky(const rmacoll_sched_state_t *st,
                           const rmacoll_topo_t *t, int rank, int peer)
{
    rmacoll_sched_state_t *mut = (rmacoll_sched_state_t *)st;
    return (peer - rank + t->nranks + (mut->calls++ & 1)) % t->nranks;
}

static void test_check_catches(void **state)
{
    rmacoll_topo_t *t = make_sizes(2, (const int[]){2, 2});
    char err[256] = "";
    rmacoll_sched_ops_t ops = {
        .abi_version = RMACOLL_SCHED_ABI_VERSION,
        .struct_size = sizeof(rmacoll_sched_ops_t),
        .name = "bad",
        .nrounds = bad_nrounds,
        .round = bad_round_range,
    };
    rmacoll__sched_t s = {&ops, NULL};
    assert_int_equal(rmacoll__sched_check(&s, t, err, sizeof(err)),
                     RMACOLL_ERR_PLUGIN);
    assert_string_equal(err, "scheduler 'bad' puts rank 2 -> peer 0 in round "
                             "-1, outside [0, 4)");
    ops.nrounds = zero_nrounds;
    assert_int_equal(rmacoll__sched_check(&s, t, err, sizeof(err)),
                     RMACOLL_ERR_PLUGIN);
    assert_non_null(strstr(err, "0 rounds"));
    struct rmacoll_sched_state flaky = {0};
    ops.nrounds = bad_nrounds;
    ops.round = bad_round_flaky;
    s.state = &flaky;
    assert_int_equal(rmacoll__sched_check(&s, t, err, sizeof(err)),
                     RMACOLL_ERR_PLUGIN);
    assert_non_null(strstr(err, "not deterministic"));
    rmacoll__topo_destroy(t);
}

/* ---- plugins ---- */

/* Whether the shared object at path is still mapped (held by someone). */
static int plugin_mapped(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        return 0;
    dlclose(h);
    return 1;
}

static void test_plugin_loads(void **state)
{
    const topo_set_t *ts = *state;
    for (int ti = 0; ti < ts->n; ti++) {
        const rmacoll_topo_t *t = ts->t[ti];
        int n = t->nranks;
        /* the name is ignored when a plugin is given */
        rmacoll__sched_t s = open_ok("shift", RMACOLL_TEST_SCHED_PLUGIN, t, 0);
        assert_string_equal(s.ops->name, "reverse_shift");
        assert_non_null(strstr(s.ops->desc, "example plugin"));
        assert_null(rmacoll__sched_find("reverse_shift"));
        assert_non_null(s.state);
        assert_int_equal(s.ops->nrounds(s.state, t), n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (j != i)
                    assert_int_equal(s.ops->round(s.state, t, i, j),
                                     (i - j + n) % n);
        rmacoll__sched_close(&s);
        assert_null(s.ops);
        rmacoll__sched_close(&s);
    }
    /* two opens hold the object twice; closing one leaves the other usable */
    rmacoll__sched_t a = open_ok(NULL, RMACOLL_TEST_SCHED_PLUGIN, ts->t[10], 0);
    rmacoll__sched_t b = open_ok(NULL, RMACOLL_TEST_SCHED_PLUGIN, ts->t[10], 0);
    assert_ptr_not_equal(a.ops, b.ops);
    rmacoll__sched_close(&a);
    assert_true(plugin_mapped(RMACOLL_TEST_SCHED_PLUGIN));
    assert_int_equal(b.ops->round(b.state, ts->t[10], 1, 0), 1);
    assert_int_equal(b.ops->nrounds(b.state, ts->t[10]), ts->t[10]->nranks);
    rmacoll__sched_close(&b);
    /* the last close unloads it */
    assert_false(plugin_mapped(RMACOLL_TEST_SCHED_PLUGIN));
}

static void expect_plugin_error(const topo_set_t *ts, const char *path,
                                const char *want)
{
    rmacoll__sched_t s = {&junk_ops, NULL};
    char err[512] = "";
    assert_int_equal(rmacoll__sched_open("shift", path, ts->t[10], 0, &s, err,
                                         sizeof(err)),
                     RMACOLL_ERR_PLUGIN);
    assert_null(s.ops);
    assert_null(s.state);
    if (strstr(err, want) == NULL)
        fail_msg("plugin %s: error '%s' lacks '%s'", path, err, want);
    assert_non_null(strstr(err, path));
    assert_false(plugin_mapped(path)); /* a failed open leaves nothing loaded */
}

static void test_plugin_errors(void **state)
{
    const topo_set_t *ts = *state;
    char want[128];
    snprintf(want, sizeof(want), "has abi_version %d, this build needs %d",
             RMACOLL_SCHED_ABI_VERSION + 41, RMACOLL_SCHED_ABI_VERSION);
    expect_plugin_error(ts, RMACOLL_TEST_SCHED_PLUGIN_BAD_ABI, want);
    expect_plugin_error(ts, RMACOLL_TEST_SCHED_PLUGIN_NO_SYMBOL,
                        "does not export " RMACOLL_SCHED_PLUGIN_SYMBOL);
    expect_plugin_error(ts, "/nonexistent/libnosuchsched.so", "cannot load");
    /* the out-of-range plugin loads, then fails the check */
    rmacoll__sched_t s;
    char err[512] = "";
    assert_int_equal(rmacoll__sched_open(NULL, RMACOLL_TEST_SCHED_PLUGIN_BAD_RANGE,
                                         ts->t[10], 0, &s, err, sizeof(err)),
                     RMACOLL_ERR_PLUGIN);
    assert_null(s.ops);
    char exp[160];
    int n = ts->t[10]->nranks;
    snprintf(exp, sizeof(exp),
             "scheduler 'reverse_shift' puts rank 0 -> peer 1 in round %d, "
             "outside [0, %d)", n, n);
    assert_string_equal(err, exp);
    assert_false(plugin_mapped(RMACOLL_TEST_SCHED_PLUGIN_BAD_RANGE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_builtins_all_topologies),
        cmocka_unit_test(test_shift_exact),
        cmocka_unit_test(test_xor_exact),
        cmocka_unit_test(test_node_shift_exact),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_largest_first_exact),
        cmocka_unit_test(test_check_catches),
        cmocka_unit_test(test_plugin_loads),
        cmocka_unit_test(test_plugin_errors),
    };
    return cmocka_run_group_tests(tests, setup_topos, teardown_topos);
}
