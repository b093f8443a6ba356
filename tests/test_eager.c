/*
 * test_eager.c - the eager path (eager_max_bytes, docs/protocol.md): on two
 * nodes a host call's blocks from a sender to the other node, when at most
 * eager_max_bytes in all, travel inside its metadata record to its relay,
 * and each receiver on that node copies its own block out of the record.
 *
 * Ranks are processes on virtual nodes, ofi (tcp;ofi_rxm on loopback, shm)
 * between nodes, receive buffers gapped and sentinel-filled (tests/support
 * e2e_body checks every byte). The counters rmacoll_comm_get_stats keeps
 * (eager_bytes_sent, eager_bytes_copied) prove which path each rank took:
 * the expected values are computed here from the counts, the threshold and
 * the relay rule (docs/protocol.md), independently of the library.
 *
 * Any number of nodes within the one-round limits (docs/protocol.md: nodes
 * of at most 64 ranks, and at most 128 ranks in all on three nodes or more):
 * a sender's blocks for each other node travel to its relay there.
 *
 * The node eager path too (within the same limits): a rank's blocks for its node
 * peers, at most eager_max_bytes in all, go into its node payload, and each
 * peer copies its block out (node_eager_bytes_sent / _copied).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "case_file.h"

#include "e2e_body.h"
#include "mprun.h"

static const char *const case_files[] = {
    "all_zero.txt",        "half_idle.txt",          "incast_16_to_0.txt",
    "mismatch_2x2.txt",    "moe_zipf_2x4.txt",       "one_column_zero.txt",
    "single_rank_node_1_4.txt", "sparse_two_cross.txt", "symmetric_small_2x2.txt",
    "uneven_nodes_3_2.txt",
};

#define THRESHOLD 1024u /* eager_max_bytes of most tests here */

static rmacoll_config_t config(const char *provider, const char *eager_max)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", provider);
    assert_int_equal(rmacoll_config_set(&cfg, "eager_max_bytes", eager_max), RMACOLL_SUCCESS);
    /* the node eager path under the same limit here */
    assert_int_equal(rmacoll_config_set(&cfg, "node_eager_max_bytes", eager_max),
                     RMACOLL_SUCCESS);
    return cfg;
}

/* ---- what the eager path must do, computed from the counts ---- */

static int local_of(const rmacoll_case_t *c, int r)
{
    int l = 0;

    for (int k = 0; k < r; k++) {
        l += c->node_of[k] == c->node_of[r];
    }
    return l;
}

/* relay(i, B) = the rank of node B whose local rank is local(i) mod size(B) */
static int relay_of(const rmacoll_case_t *c, int i, int B)
{
    int want = local_of(c, i) % rmacoll_case_node_size(c, B);

    for (int r = 0; r < c->nranks; r++) {
        if (c->node_of[r] == B && local_of(c, r) == want) {
            return r;
        }
    }
    return -1;
}

/* Bytes of sender i's blocks for node B (its stream there). */
static uint64_t stream_bytes(const rmacoll_case_t *c, int i, int B)
{
    uint64_t sum = 0;

    for (int j = 0; j < c->nranks; j++) {
        if (c->node_of[j] == B) {
            sum += (uint64_t)c->send[(size_t)i * c->nranks + j] * rmacoll_datatype_size(c->dtype);
        }
    }
    return sum;
}

/* Bytes of sender i's blocks for node B when they travel eagerly, else 0. */
static uint64_t eager_stream(const rmacoll_case_t *c, int i, int B, uint64_t eager_max)
{
    uint64_t sum = stream_bytes(c, i, B);

    return sum > 0 && sum <= eager_max ? sum : 0;
}

/* Whether calls of case c's topology take the one-round verdict (the
 * limits of docs/protocol.md, written out here). */
static int one_round(const rmacoll_case_t *c)
{
    int most = 0;

    for (int N = 0; N < c->nnodes; N++) {
        int ls = 0;
        for (int r = 0; r < c->nranks; r++) {
            ls += c->node_of[r] == N;
        }
        most = ls > most ? ls : most;
    }
    return c->nnodes == 1 ? most <= 256
                          : most <= 64 && (c->nnodes == 2 || c->nranks <= 128);
}

/* Expected counters of rank r after one successful call of case c. */
static void expect_counts(const rmacoll_case_t *c, int r, uint64_t eager_max, uint64_t *sent,
                          uint64_t *copied)
{
    if (c->nnodes < 2 || !one_round(c) || eager_max == 0) {
        return;
    }
    for (int B = 0; B < c->nnodes; B++) {
        if (B != c->node_of[r]) {
            *sent += eager_stream(c, r, B, eager_max);
        }
    }
    /* every receiver copies its own blocks out of the records (in its
     * senders' relays' inboxes on its node) */
    for (int i = 0; i < c->nranks; i++) {
        if (c->node_of[i] != c->node_of[r] && eager_stream(c, i, c->node_of[r], eager_max)) {
            *copied += (uint64_t)c->send[(size_t)i * c->nranks + r] *
                       rmacoll_datatype_size(c->dtype);
        }
    }
}

/* Relay off: the record from i to each rank j of the other node carries
 * j's block alone when it is in (0, eager_max] bytes. */
static uint64_t eager_block(const rmacoll_case_t *c, int i, int j, uint64_t eager_max)
{
    uint64_t b = (uint64_t)c->send[(size_t)i * c->nranks + j] * rmacoll_datatype_size(c->dtype);

    return c->node_of[i] != c->node_of[j] && b > 0 && b <= eager_max ? b : 0;
}

/* Expected counters of rank r after one successful call of case c, relay
 * off: what it sent in its records, what it copied out of its own inbox. */
static void expect_counts_direct(const rmacoll_case_t *c, int r, uint64_t eager_max,
                                 uint64_t *sent, uint64_t *copied)
{
    if (c->nnodes < 2 || !one_round(c) || eager_max == 0) {
        return;
    }
    for (int j = 0; j < c->nranks; j++) {
        *sent += eager_block(c, r, j, eager_max);
        *copied += eager_block(c, j, r, eager_max);
    }
}

/* Bytes of rank i's node payload (its blocks for its node peers, its own
 * excluded) when they travel in it, else 0. */
static uint64_t node_payload(const rmacoll_case_t *c, int i, uint64_t eager_max)
{
    uint64_t sum = 0;

    for (int j = 0; j < c->nranks; j++) {
        if (j != i && c->node_of[j] == c->node_of[i]) {
            sum += (uint64_t)c->send[(size_t)i * c->nranks + j] * rmacoll_datatype_size(c->dtype);
        }
    }
    return sum > 0 && sum <= eager_max ? sum : 0;
}

/* Expected node eager counters of rank r after one successful call of case
 * c (within the one-round limits). */
static void expect_node_counts(const rmacoll_case_t *c, int r, uint64_t eager_max,
                               uint64_t *sent, uint64_t *copied)
{
    if (!one_round(c) || eager_max == 0) {
        return;
    }
    *sent += node_payload(c, r, eager_max);
    for (int i = 0; i < c->nranks; i++) {
        if (i != r && c->node_of[i] == c->node_of[r] && node_payload(c, i, eager_max) != 0) {
            *copied += (uint64_t)c->send[(size_t)i * c->nranks + r] *
                       rmacoll_datatype_size(c->dtype);
        }
    }
}

/* ---- the body: e2e_body's calls, then the counters ---- */

typedef struct eager_arg {
    e2e_arg_t e2e;          /* the calls (data checked by e2e_body) */
    uint64_t eager_max;     /* the threshold they ran under */
    int relay;              /* relay.enabled */
    uint64_t direct_min;    /* relay.direct_min_bytes in effect (0: none) */
} eager_arg_t;

/* Direct streams: bytes of rank r's streams to the other nodes in one call
 * of c that go straight (docs/protocol.md): each at least direct_min bytes
 * and not eager. */
static uint64_t expect_direct(const rmacoll_case_t *c, int r, uint64_t eager_max,
                              uint64_t direct_min)
{
    uint64_t all = 0;

    if (c->nnodes < 2 || !one_round(c) || direct_min == 0) {
        return 0;
    }
    for (int B = 0; B < c->nnodes; B++) {
        uint64_t sum = B == c->node_of[r] ? 0 : stream_bytes(c, r, B);
        all += sum >= direct_min && eager_stream(c, r, B, eager_max) == 0 ? sum : 0;
    }
    return all;
}

static int read_stats(rmacoll_comm_t *comm, rmacoll_comm_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    s->struct_size = sizeof(*s);
    return rmacoll_comm_get_stats(comm, s) == RMACOLL_SUCCESS ? 0 : -1;
}

static int eager_body(rmacoll_comm_t *comm, int rank, int nranks, void *argp)
{
    const eager_arg_t *a = argp;
    rmacoll_comm_stats_t s0, s1;
    uint64_t sent = 0, copied = 0, nsent = 0, ncopied = 0;
    int rc;

    if (read_stats(comm, &s0) != 0) {
        return 4;
    }
    rc = e2e_body(comm, rank, nranks, (void *)&a->e2e);
    if (rc != 0) {
        return rc;
    }
    if (read_stats(comm, &s1) != 0) {
        return 4;
    }
    if (a->e2e.expect == RMACOLL_SUCCESS) {
        for (int k = 0; k < a->e2e.ncalls; k++) {
            (a->relay ? expect_counts : expect_counts_direct)(
                &a->e2e.cases[k % a->e2e.ncases], rank, a->eager_max, &sent, &copied);
        }
    }
    if (a->e2e.expect == RMACOLL_SUCCESS) {
        for (int k = 0; k < a->e2e.ncalls; k++) {
            expect_node_counts(&a->e2e.cases[k % a->e2e.ncases], rank, a->eager_max, &nsent,
                               &ncopied);
        }
    }
    if (s1.node_eager_bytes_sent - s0.node_eager_bytes_sent != nsent ||
        s1.node_eager_bytes_copied - s0.node_eager_bytes_copied != ncopied) {
        fprintf(stderr, "rank %d: node eager bytes sent %llu, copied %llu; expected %llu, "
                "%llu\n", rank,
                (unsigned long long)(s1.node_eager_bytes_sent - s0.node_eager_bytes_sent),
                (unsigned long long)(s1.node_eager_bytes_copied - s0.node_eager_bytes_copied),
                (unsigned long long)nsent, (unsigned long long)ncopied);
        return 6;
    }
    if (a->e2e.expect == RMACOLL_SUCCESS) {
        uint64_t dsent = 0;
        for (int k = 0; k < a->e2e.ncalls; k++) {
            dsent += expect_direct(&a->e2e.cases[k % a->e2e.ncases], rank, a->eager_max,
                                   a->direct_min);
        }
        if (s1.direct_min_bytes != a->direct_min ||
            s1.direct_bytes_sent - s0.direct_bytes_sent != dsent) {
            fprintf(stderr, "rank %d: direct streams: threshold %llu, %llu bytes sent; "
                    "expected %llu, %llu\n", rank, (unsigned long long)s1.direct_min_bytes,
                    (unsigned long long)(s1.direct_bytes_sent - s0.direct_bytes_sent),
                    (unsigned long long)a->direct_min, (unsigned long long)dsent);
            return 7;
        }
    }
    if (s1.eager_bytes_sent - s0.eager_bytes_sent != sent ||
        s1.eager_bytes_copied - s0.eager_bytes_copied != copied) {
        fprintf(stderr, "rank %d: eager bytes sent %llu, copied %llu; expected %llu, %llu\n",
                rank, (unsigned long long)(s1.eager_bytes_sent - s0.eager_bytes_sent),
                (unsigned long long)(s1.eager_bytes_copied - s0.eager_bytes_copied),
                (unsigned long long)sent, (unsigned long long)copied);
        return 5;
    }
    return 0;
}

/* relay.direct_min_bytes of cfg as the communicator applies it on the
 * topologies here, all within the one-round limits (loopback: one
 * interface for all). */
static uint64_t direct_of(const rmacoll_config_t *cfg, int nnodes)
{
    char v[64];
    uint64_t d = 0;

    assert_int_equal(rmacoll_config_get(cfg, "relay.direct_min_bytes", v, sizeof(v)),
                     RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_parse_size(v, &d), RMACOLL_SUCCESS);
    return cfg->relay_enabled && nnodes >= 2 ? d : 0;
}

static void run(const rmacoll_config_t *cfg, const rmacoll_case_t *cases, int ncases,
                int ncalls, rmacoll_status_t expect, uint64_t eager_max)
{
    int codes[64] = {0};
    eager_arg_t arg = {{cases, ncases, ncalls, expect, 1}, eager_max, cfg->relay_enabled,
                       direct_of(cfg, cases[0].nnodes)};
    mprun_opts_t o = {cases[0].nranks, cases[0].node_of, cfg, 240, -1};
    int failed = mprun(&o, eager_body, &arg, codes);

    if (failed) {
        for (int r = 0; r < cases[0].nranks; r++) {
            print_message("rank %d exit %d\n", r, codes[r]);
        }
    }
    assert_int_equal(failed, 0);
}

/* ---- cases at and around the threshold ---- */

/*
 * Three calls on nodes {0, 1, 2} + {3, 4}, float32 (4-byte elements):
 *  - AT: every sender's blocks for the other node sum to exactly THRESHOLD
 *    bytes, some of them zero (rank 3 sends nothing to rank 0);
 *  - ABOVE: the same plus one element for one receiver of the other node;
 *  - MIXED: rank 0 at, rank 1 above, rank 2 nothing across, rank 3 one
 *    element (to the relay's own block), rank 4 at.
 * Blocks inside a node vary too (a zero among them).
 */
enum { K_AT = 0, K_ABOVE = 1, K_MIXED = 2, K_N = 3 };

static void set_pair(rmacoll_case_t *c, int i, int j, int64_t n)
{
    c->send[(size_t)i * c->nranks + j] = n;
    c->recv[(size_t)i * c->nranks + j] = n;
}

/* c, whose sends and receives agree everywhere (asserted). */
static rmacoll_case_t *consistent(rmacoll_case_t *c)
{
    rmacoll_case_update_mismatch(c);
    assert_false(c->has_mismatch);
    return c;
}

static int nnodes_of(const int *node_of, int n)
{
    int nn = 0;

    for (int i = 0; i < n; i++) {
        nn = node_of[i] + 1 > nn ? node_of[i] + 1 : nn;
    }
    return nn;
}

/* Sender i's blocks for node B (B not i's node), by mode (below). */
static void set_stream(rmacoll_case_t *c, const int *node_of, int n, int i, int B, int mode,
                       int64_t per)
{
    int first = -1, last = -1, nb = 0;
    int64_t left = per;

    for (int j = 0; j < n; j++) {
        if (node_of[j] == B) {
            first = first < 0 ? j : first;
            last = j;
            nb++;
        }
    }
    /* split `per` elements over B's ranks, the first one getting none when
     * the node has more than one rank */
    for (int j = 0; j < n; j++) {
        int64_t m;
        if (node_of[j] != B) {
            continue;
        }
        if (mode == 2) {
            m = 0;
        } else if (mode == 3) {
            m = j == relay_of(c, i, B) ? 1 : 0;
        } else if (j == first && nb > 1) {
            m = 0;
        } else if (j == last) {
            m = left;
        } else {
            m = per / (nb + 1);
        }
        left -= m;
        set_pair(c, i, j, m);
    }
    if (mode == 1) {
        set_pair(c, i, last, c->send[(size_t)i * n + last] + 1);
    }
}

/* The cases above on any number of nodes: each sender's stream to each
 * other node is set alike. */
static void make_threshold_cases(const int *node_of, int n, rmacoll_datatype_t dt,
                                 rmacoll_case_t *out[K_N])
{
    int64_t per = (int64_t)(THRESHOLD / rmacoll_datatype_size(dt)); /* elements */
    int nn = nnodes_of(node_of, n);

    for (int k = 0; k < K_N; k++) {
        rmacoll_case_t *c;
        assert_int_equal(rmacoll_case_create(n, node_of, dt, &c), RMACOLL_SUCCESS);
        snprintf(c->name, sizeof(c->name), "%s", k == K_AT ? "at" : k == K_ABOVE ? "above"
                                                                               : "mixed");
        for (int i = 0; i < n; i++) {
            static const int mixed[5] = {0, 1, 2, 3, 0}; /* modes of MIXED by rank */
            /* 0: at, 1: above, 2: nothing across, 3: one element to the relay */
            int mode = k == K_AT ? 0 : k == K_ABOVE ? 1 : mixed[i % 5];
            for (int j = 0; j < n; j++) {
                if (node_of[j] == node_of[i]) {
                    set_pair(c, i, j, (i + j + k) % 3 == 0 ? 0 : 3 + i + 2 * j);
                }
            }
            for (int B = 0; B < nn; B++) {
                if (B != node_of[i]) {
                    set_stream(c, node_of, n, i, B, mode, per);
                }
            }
        }
        out[k] = consistent(c);
    }
    /* the cases are what their names say */
    for (int i = 0; i < n; i++) {
        for (int B = 0; B < nn; B++) {
            if (B == node_of[i]) {
                continue;
            }
            assert_int_equal(eager_stream(out[K_AT], i, B, THRESHOLD), THRESHOLD);
            assert_int_equal(eager_stream(out[K_ABOVE], i, B, THRESHOLD), 0);
            assert_int_equal(eager_stream(out[K_ABOVE], i, B, THRESHOLD +
                                          rmacoll_datatype_size(dt)),
                             THRESHOLD + rmacoll_datatype_size(dt));
        }
    }
}

static void free_cases(rmacoll_case_t **cs, int n)
{
    for (int k = 0; k < n; k++) {
        rmacoll_case_free(cs[k]);
    }
}

typedef void (*make_cases_fn)(const int *node_of, int n, rmacoll_datatype_t dt,
                              rmacoll_case_t *out[K_N]);

/* AT, ABOVE, MIXED of `make` back to back, twice, on one communicator: the
 * eager (or node eager) path and the other paths alternate; every call's
 * data and the counters are checked. */
static void sequence_relay(const char *provider, const int *node_of, int n,
                           rmacoll_datatype_t dt, make_cases_fn make, int relay)
{
    rmacoll_config_t cfg = config(provider, "1KiB");
    rmacoll_case_t *cs[K_N], calls[K_N];

    cfg.relay_enabled = relay;

    make(node_of, n, dt, cs);
    for (int k = 0; k < K_N; k++) {
        calls[k] = *cs[k];
    }
    run(&cfg, calls, K_N, 2 * K_N, RMACOLL_SUCCESS, THRESHOLD);
    free_cases(cs, K_N);
}

static void sequence_of(const char *provider, const int *node_of, int n, rmacoll_datatype_t dt,
                        make_cases_fn make)
{
    sequence_relay(provider, node_of, n, dt, make, 1);
}

static void threshold_sequence(const char *provider, const int *node_of, int n,
                               rmacoll_datatype_t dt)
{
    sequence_of(provider, node_of, n, dt, make_threshold_cases);
}

static void test_threshold_tcp_3_2(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};

    threshold_sequence("tcp;ofi_rxm", node_of, 5, RMACOLL_FLOAT32);
}

static void test_threshold_shm_3_2(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};

    threshold_sequence("shm", node_of, 5, RMACOLL_FLOAT32);
}

/* Three nodes (2 + 2 + 1, the one-round verdict and the eager path on
 * more than two nodes): every sender's stream to each other node at, above
 * and around the threshold. */
static void test_threshold_tcp_3_nodes(void **state)
{
    static const int node_of[] = {0, 0, 1, 1, 2};

    threshold_sequence("tcp;ofi_rxm", node_of, 5, RMACOLL_FLOAT32);
}

/* Four nodes, non-contiguous, shm between them. */
static void test_threshold_shm_4_nodes(void **state)
{
    static const int node_of[] = {3, 0, 1, 2, 0, 3};

    threshold_sequence("shm", node_of, 6, RMACOLL_FLOAT64);
}

/* Non-contiguous nodes 1+4 (rank 2 alone), int8 and double elements. */
static void test_threshold_shm_1_4(void **state)
{
    static const int node_of[] = {1, 1, 0, 1, 1};

    threshold_sequence("shm", node_of, 5, RMACOLL_INT8);
    threshold_sequence("shm", node_of, 5, RMACOLL_FLOAT64);
}

/* Relay off: the same calls; each record to a rank of the other node
 * carries that rank's block when it is at most THRESHOLD bytes (the AT
 * and ABOVE cases split a sender's THRESHOLD bytes over the other node's
 * ranks, so most blocks are eager, the one-element-more blocks of ABOVE to
 * a node of two are not). */
static void test_threshold_relay_off_3_2(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};

    sequence_relay("tcp;ofi_rxm", node_of, 5, RMACOLL_FLOAT32, make_threshold_cases, 0);
    sequence_relay("shm", node_of, 5, RMACOLL_INT8, make_threshold_cases, 0);
}

/* Relay off, non-contiguous 1 + 4: the lone rank's records carry one
 * block each. */
static void test_threshold_relay_off_1_4(void **state)
{
    static const int node_of[] = {1, 1, 0, 1, 1};

    sequence_relay("shm", node_of, 5, RMACOLL_FLOAT64, make_threshold_cases, 0);
}

/* eager_max_bytes = 0: the same calls, no byte travels eagerly. */
static void test_threshold_zero(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};
    rmacoll_config_t cfg = config("tcp;ofi_rxm", "0");
    rmacoll_case_t *cs[K_N], calls[K_N];

    make_threshold_cases(node_of, 5, RMACOLL_FLOAT32, cs);
    for (int k = 0; k < K_N; k++) {
        calls[k] = *cs[k];
    }
    run(&cfg, calls, K_N, K_N, RMACOLL_SUCCESS, 0);
    free_cases(cs, K_N);
}

/* The threshold covers 1 MiB (the key's maximum) and 2 x 2 ranks: 1 MiB
 * per sender and node eagerly, then one element more through the relay. */
static void test_threshold_max(void **state)
{
    static const int node_of[] = {0, 0, 1, 1};
    rmacoll_config_t cfg = config("shm", "1MiB");
    rmacoll_case_t *cs[2], calls[2];
    char err[256];

    /* the one element more goes through the relay, not straight */
    assert_int_equal(rmacoll_config_set(&cfg, "relay.direct_min_bytes", "0"), RMACOLL_SUCCESS);

    for (int k = 0; k < 2; k++) {
        assert_int_equal(rmacoll_case_create(4, node_of, RMACOLL_UINT8, &cs[k]),
                         RMACOLL_SUCCESS);
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < 4; j++) {
                set_pair(cs[k], i, j, node_of[i] == node_of[j] ? 100 + i + j
                                      : (j % 2 == 0 ? 1000 : (1 << 20) - 1000 + k));
            }
        }
        calls[k] = *cs[k];
    }
    run(&cfg, calls, 2, 4, RMACOLL_SUCCESS, 1u << 20);
    /* one byte over the key's range is refused */
    assert_int_equal(rmacoll_config_set(&cfg, "eager_max_bytes", "1048577"), RMACOLL_ERR_CONFIG);
    setenv("RMACOLL_EAGER_MAX_BYTES", "4KiB", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    unsetenv("RMACOLL_EAGER_MAX_BYTES");
    assert_int_equal(rmacoll_config_get(&cfg, "eager_max_bytes", err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_string_equal(err, "4KiB");
    free_cases(cs, 2);
}

/* ---- errors during eager calls: every rank fails, nothing written ---- */

/* A failing call, then good calls on the same communicator. */
typedef struct fail_arg {
    eager_arg_t bad, good;
} fail_arg_t;

static int fail_then_good_body(rmacoll_comm_t *comm, int rank, int nranks, void *argp)
{
    fail_arg_t *a = argp;
    int rc = eager_body(comm, rank, nranks, &a->bad);

    return rc != 0 ? rc : eager_body(comm, rank, nranks, &a->good);
}

/* ---- the node eager path: cases at and around the threshold ---- */

/*
 * Three calls on node_of, dt elements, like make_threshold_cases but for
 * the node payload: AT: every rank's blocks for its node peers sum to
 * exactly THRESHOLD bytes, one of them zero when it has two peers or more;
 * ABOVE: one element more for one node peer; MIXED: ranks alternate at,
 * above, nothing for node peers, one element. Self blocks and blocks to
 * another node (few elements) vary too.
 */
static void make_node_threshold_cases(const int *node_of, int n, rmacoll_datatype_t dt,
                                      rmacoll_case_t *out[K_N])
{
    int64_t per = (int64_t)(THRESHOLD / rmacoll_datatype_size(dt));

    for (int k = 0; k < K_N; k++) {
        rmacoll_case_t *c;
        assert_int_equal(rmacoll_case_create(n, node_of, dt, &c), RMACOLL_SUCCESS);
        snprintf(c->name, sizeof(c->name), "node_%s", k == K_AT ? "at"
                                                      : k == K_ABOVE ? "above" : "mixed");
        for (int i = 0; i < n; i++) {
            int first = -1, last = -1, nb = 0;
            int64_t left = per;
            int mode = k == K_AT ? 0 : k == K_ABOVE ? 1 : i % 4;
            for (int j = 0; j < n; j++) {
                if (j == i) {
                    set_pair(c, i, j, 5 + i + k);
                } else if (node_of[j] != node_of[i]) {
                    set_pair(c, i, j, (i + j + k) % 3 == 0 ? 0 : 1 + i + j);
                } else {
                    first = first < 0 ? j : first;
                    last = j;
                    nb++;
                }
            }
            for (int j = 0; j < n; j++) {
                int64_t m;
                if (j == i || node_of[j] != node_of[i]) {
                    continue;
                }
                m = mode == 2                 ? 0
                    : mode == 3               ? (j == first ? 1 : 0)
                    : j == first && nb > 1    ? 0
                    : j == last               ? left
                                              : per / (nb + 1);
                left -= m;
                set_pair(c, i, j, m);
            }
            if (mode == 1 && last >= 0) {
                set_pair(c, i, last, c->send[(size_t)i * n + last] + 1);
            }
        }
        out[k] = consistent(c);
    }
    for (int i = 0; i < n; i++) {
        assert_int_equal(node_payload(out[K_AT], i, THRESHOLD), THRESHOLD);
        assert_int_equal(node_payload(out[K_ABOVE], i, THRESHOLD), 0);
        assert_int_equal(node_payload(out[K_ABOVE], i, THRESHOLD + rmacoll_datatype_size(dt)),
                         THRESHOLD + rmacoll_datatype_size(dt));
    }
}

/* One node of 4 (float32) and of 3 (int8); 3 + 2 nodes over tcp. */
static void test_node_threshold(void **state)
{
    static const int one4[] = {0, 0, 0, 0}, one3[] = {0, 0, 0}, two[] = {0, 1, 0, 1, 0};

    sequence_of("tcp;ofi_rxm", one4, 4, RMACOLL_FLOAT32, make_node_threshold_cases);
    sequence_of("tcp;ofi_rxm", one3, 3, RMACOLL_INT8, make_node_threshold_cases);
    sequence_of("tcp;ofi_rxm", two, 5, RMACOLL_FLOAT64, make_node_threshold_cases);
}

/* For each pair (sender, receiver): the AT case of `make` on node_of with
 * the receiver expecting one element more: every rank fails with the
 * mismatch naming it, nothing written, and the next two calls work. */
static void mismatches_relay(const int *node_of, int n, const int (*pairs)[2], size_t npairs,
                             make_cases_fn make, int relay)
{
    rmacoll_config_t cfg = config("tcp;ofi_rxm", "1KiB");
    rmacoll_case_t *cs[K_N];

    cfg.relay_enabled = relay;

    make(node_of, n, RMACOLL_FLOAT32, cs);
    for (size_t p = 0; p < npairs; p++) {
        rmacoll_case_t bad = *cs[K_AT];
        int64_t *recv = malloc((size_t)n * n * sizeof(int64_t));
        int codes[8] = {0};
        fail_arg_t a = {{{&bad, 1, 1, RMACOLL_ERR_MISMATCH, 1}, THRESHOLD, relay,
                         direct_of(&cfg, bad.nnodes)},
                        {{cs[K_AT], 1, 2, RMACOLL_SUCCESS, 1}, THRESHOLD, relay,
                         direct_of(&cfg, bad.nnodes)}};
        mprun_opts_t o = {n, node_of, &cfg, 240, -1};
        assert_non_null(recv);
        memcpy(recv, bad.recv, (size_t)n * n * sizeof(int64_t));
        recv[pairs[p][0] * n + pairs[p][1]] += 1;
        bad.recv = recv;
        print_message("rank %d sends %lld to rank %d, which expects one more\n", pairs[p][0],
                      (long long)bad.send[pairs[p][0] * n + pairs[p][1]], pairs[p][1]);
        assert_int_equal(mprun(&o, fail_then_good_body, &a, codes), 0);
        free(recv);
    }
    free_cases(cs, K_N);
}

static void mismatches(const int *node_of, int n, const int (*pairs)[2], size_t npairs,
                       make_cases_fn make)
{
    mismatches_relay(node_of, n, pairs, npairs, make, 1);
}

/* A count mismatch inside one node in a call whose blocks are all in node
 * payloads. */
static void test_node_mismatch(void **state)
{
    static const int node_of[] = {0, 0, 0, 0};
    static const int pairs[][2] = {{0, 3}, {2, 1}};

    mismatches(node_of, 4, pairs, 2, make_node_threshold_cases);
}

/* Count mismatches in an eager call, over each kind of pair: to a relay's
 * node peer, to the relay itself, inside a node, and from the small node. */
static void test_mismatch(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};
    static const int pairs[][2] = {{0, 4}, {2, 3}, {1, 2}, {4, 1}};

    mismatches(node_of, 5, pairs, 4, make_threshold_cases);
}

/* Three nodes: mismatches between two nodes seen by the third only
 * through its relays' inboxes (node 1 to node 2, node 2 to node 0), inside
 * a node, and into the single-rank node; relay on and off. */
static void test_mismatch_3_nodes(void **state)
{
    static const int node_of[] = {0, 0, 1, 1, 2};
    static const int pairs[][2] = {{3, 4}, {4, 1}, {0, 1}, {0, 4}};

    mismatches_relay(node_of, 5, pairs, 4, make_threshold_cases, 1);
    mismatches_relay(node_of, 5, pairs, 2, make_threshold_cases, 0);
}

/* The same mismatches with the relay off: the sender's record carries the
 * receiver's block; every rank fails, nothing is copied out. */
static void test_mismatch_relay_off(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};
    static const int pairs[][2] = {{0, 4}, {2, 3}, {1, 2}, {4, 1}};

    mismatches_relay(node_of, 5, pairs, 4, make_threshold_cases, 0);
}

/*
 * Bad arguments in an eager call: rank `bad` passes (kind 0) a NULL send
 * buffer with non-zero counts, or (kind 1) receive blocks that overlap.
 * Every rank must return that error naming the rank, every receive buffer
 * keep its sentinel (the payloads that arrived are not copied), and the
 * next eager call must work.
 */
typedef struct badarg {
    int bad, kind;
} badarg_t;

static int bad_arg_body(rmacoll_comm_t *comm, int rank, int nranks, void *argp)
{
    enum { BLK = 40, GUARD = 64 };
    const badarg_t *a = argp;
    int64_t sc[8], sd[8], rc[8], rd[8];
    unsigned char sbuf[8 * BLK], rbuf[8 * BLK + GUARD], want[8 * BLK + GUARD];
    rmacoll_status_t st, code = a->kind == 0 ? RMACOLL_ERR_NULL_BUFFER : RMACOLL_ERR_OVERLAP;
    char name[16];

    /* i sends 8 + i + j int8 elements to j; block j of rank i's send buffer
     * at 40 j holds (40 j + e) * 7 + i; the block from p lands at 40 p + 8 */
    for (int r = 0; r < nranks; r++) {
        sc[r] = rc[r] = 8 + r + rank;
        sd[r] = BLK * r;
        rd[r] = BLK * r + 8;
    }
    for (size_t b = 0; b < sizeof(sbuf); b++) {
        sbuf[b] = (unsigned char)(b * 7 + (size_t)rank);
    }
    memset(want, 0x5a, sizeof(want));
    for (int p = 0; p < nranks; p++) {
        for (int64_t e = 0; e < rc[p]; e++) {
            want[rd[p] + e] = (unsigned char)((size_t)(BLK * rank + e) * 7 + (size_t)p);
        }
    }
    if (rank == a->bad && a->kind == 1) {
        rd[nranks - 1] = rd[0] + 2; /* overlaps block 0 */
    }
    memset(rbuf, 0x5a, sizeof(rbuf));
    st = rmacoll_alltoallv(rank == a->bad && a->kind == 0 ? NULL : sbuf, sc, sd, rbuf, rc, rd,
                           RMACOLL_INT8, comm, NULL);
    snprintf(name, sizeof(name), "rank %d", a->bad);
    if (st != code || strstr(rmacoll_comm_last_error(comm), name) == NULL) {
        fprintf(stderr, "rank %d: got %s: %s\n", rank, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        return 2;
    }
    for (size_t b = 0; b < sizeof(rbuf); b++) {
        if (rbuf[b] != 0x5a) {
            fprintf(stderr, "rank %d: the failed call wrote byte %zu\n", rank, b);
            return 1;
        }
    }
    /* the next call, eager too, works and writes exactly the blocks */
    rd[nranks - 1] = BLK * (nranks - 1) + 8;
    st = rmacoll_alltoallv(sbuf, sc, sd, rbuf, rc, rd, RMACOLL_INT8, comm, NULL);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: next call: %s\n", rank, rmacoll_comm_last_error(comm));
        return 3;
    }
    for (size_t b = 0; b < sizeof(rbuf); b++) {
        if (rbuf[b] != want[b]) {
            fprintf(stderr, "rank %d: byte %zu is %u, expected %u\n", rank, b, rbuf[b],
                    want[b]);
            return 1;
        }
    }
    return 0;
}

static void bad_arguments(const int *node_of, int n)
{
    static const badarg_t cases[] = {{1, 0}, {4, 0}, {3, 1}, {0, 1}};
    rmacoll_config_t cfg = config("tcp;ofi_rxm", "8KiB");

    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int codes[8] = {0};
        mprun_opts_t o = {n, node_of, &cfg, 120, -1};
        print_message("rank %d: %s\n", cases[k].bad,
                      cases[k].kind == 0 ? "NULL send buffer" : "overlapping receive blocks");
        assert_int_equal(mprun(&o, bad_arg_body, (void *)&cases[k], codes), 0);
    }
}

/* 3 + 2 nodes (eager and node payloads), one node of 5 (node payloads). */
static void test_bad_argument(void **state)
{
    static const int two[] = {0, 0, 0, 1, 1}, one[] = {0, 0, 0, 0, 0};

    bad_arguments(two, 5);
    bad_arguments(one, 5);
}

/* ---- the shared cases with everything eager ---- */

static void cases_eager(const char *provider)
{
    rmacoll_config_t cfg = config(provider, "1MiB");

    for (size_t k = 0; k < sizeof(case_files) / sizeof(case_files[0]); k++) {
        rmacoll_case_t *c = load(case_files[k]);
        print_message("case %s over %s\n", case_files[k], provider);
        run(&cfg, c, 1, 3, c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS,
            1u << 20);
        rmacoll_case_free(c);
    }
}

static void test_cases_tcp(void **state)
{
    cases_eager("tcp;ofi_rxm");
}

static void test_cases_shm(void **state)
{
    cases_eager("shm");
}

/* ---- direct streams (relay.direct_min_bytes) ---- */

/*
 * Four calls on one communicator, float32, eager_max_bytes = 1 KiB and
 * relay.direct_min_bytes = 4 KiB: AT (every stream eager), ABOVE (through
 * the relay: 1028 bytes), BIG (ABOVE's blocks to the other node x 5: at
 * least 4 KiB, direct) and MIXED (ABOVE's, with ranks 1 and 3 x 5: each
 * call mixes eager, relay and direct streams). Run twice over, so that
 * every stream moves between the paths; e2e_body checks every byte and the
 * counters say which path each took.
 */
/* A copy of c's counts (names and matrices), to vary. */
static rmacoll_case_t *clone(const rmacoll_case_t *c)
{
    rmacoll_case_t *d;

    assert_int_equal(rmacoll_case_create(c->nranks, c->node_of, c->dtype, &d),
                     RMACOLL_SUCCESS);
    memcpy(d->send, c->send, (size_t)c->nranks * c->nranks * sizeof(int64_t));
    memcpy(d->recv, c->recv, (size_t)c->nranks * c->nranks * sizeof(int64_t));
    return d;
}

static void direct_sequence(const char *provider, const int *node_of, int n,
                            rmacoll_datatype_t dt)
{
    rmacoll_config_t cfg = config(provider, "1KiB");
    rmacoll_case_t *cs[K_N], *big, *mixed, calls[4];

    assert_int_equal(rmacoll_config_set(&cfg, "relay.direct_min_bytes", "4KiB"),
                     RMACOLL_SUCCESS);
    make_threshold_cases(node_of, n, dt, cs);
    big = clone(cs[K_ABOVE]);
    mixed = clone(cs[K_ABOVE]);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            int64_t m = big->send[(size_t)i * n + j];
            if (node_of[i] != node_of[j]) {
                set_pair(big, i, j, 5 * m);
                set_pair(mixed, i, j, i % 2 == 1 ? 5 * m : m);
            }
        }
    }
    consistent(big);
    consistent(mixed);
    calls[0] = *cs[K_AT];
    calls[1] = *cs[K_ABOVE];
    calls[2] = *big;
    calls[3] = *mixed;
    {
        uint64_t straight = 0;
        for (int i = 0; i < n; i++) {
            straight += expect_direct(big, i, THRESHOLD, 4096);
            assert_int_equal(expect_direct(cs[K_ABOVE], i, THRESHOLD, 4096), 0);
        }
        assert_true(straight > 0); /* BIG's streams go direct */
    }
    run(&cfg, calls, 4, 8, RMACOLL_SUCCESS, THRESHOLD);
    free_cases(cs, K_N);
    rmacoll_case_free(big);
    rmacoll_case_free(mixed);
}

static void test_direct_tcp_3_2(void **state)
{
    static const int node_of[] = {0, 0, 0, 1, 1};

    direct_sequence("tcp;ofi_rxm", node_of, 5, RMACOLL_FLOAT32);
}

/* Three nodes (2 + 2 + 1) and four (non-contiguous, over shm): streams to
 * each other node move between eager, relay and direct from call to call. */
static void test_direct_tcp_3_nodes(void **state)
{
    static const int node_of[] = {0, 0, 1, 1, 2};

    direct_sequence("tcp;ofi_rxm", node_of, 5, RMACOLL_FLOAT32);
}

static void test_direct_shm_4_nodes(void **state)
{
    static const int node_of[] = {3, 0, 1, 2, 0, 3};

    direct_sequence("shm", node_of, 6, RMACOLL_INT8);
}

/* Non-contiguous 1 + 4 over shm: the lone rank is every sender's relay
 * there, so its own streams go straight to three ranks and the others'
 * streams to it need no forward at all. */
static void test_direct_shm_1_4(void **state)
{
    static const int node_of[] = {1, 1, 0, 1, 1};

    direct_sequence("shm", node_of, 5, RMACOLL_FLOAT64);
}

/* A count mismatch in a call whose streams would go direct: every rank
 * fails naming it, nothing is written, and the next good calls work. */
static void test_direct_mismatch(void **state)
{
    static const int node_of[] = {0, 0, 1, 1};
    rmacoll_config_t cfg = config("tcp;ofi_rxm", "1KiB");
    rmacoll_case_t *good, *bad;
    int codes[8] = {0};
    mprun_opts_t o = {4, node_of, &cfg, 240, -1};

    (void)state;
    assert_int_equal(rmacoll_config_set(&cfg, "relay.direct_min_bytes", "2KiB"),
                     RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_case_create(4, node_of, RMACOLL_FLOAT32, &good), RMACOLL_SUCCESS);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
            set_pair(good, i, j, node_of[i] == node_of[j] ? 3 + i + j : 700 + 10 * i + j);
        }
    }
    consistent(good);
    bad = clone(good);
    bad->recv[0 * 4 + 3] += 1; /* rank 3 expects one element more from rank 0 */
    {
        fail_arg_t a = {{{bad, 1, 1, RMACOLL_ERR_MISMATCH, 1}, THRESHOLD, 1, 2048},
                        {{good, 1, 2, RMACOLL_SUCCESS, 1}, THRESHOLD, 1, 2048}};
        assert_int_equal(expect_direct(good, 0, THRESHOLD, 2048), (702 + 703) * 4);
        assert_int_equal(mprun(&o, fail_then_good_body, &a, codes), 0);
    }
    rmacoll_case_free(bad);
    rmacoll_case_free(good);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threshold_tcp_3_2),
        cmocka_unit_test(test_threshold_shm_3_2),
        cmocka_unit_test(test_threshold_shm_1_4),
        cmocka_unit_test(test_threshold_tcp_3_nodes),
        cmocka_unit_test(test_threshold_shm_4_nodes),
        cmocka_unit_test(test_threshold_relay_off_3_2),
        cmocka_unit_test(test_threshold_relay_off_1_4),
        cmocka_unit_test(test_threshold_zero),
        cmocka_unit_test(test_threshold_max),
        cmocka_unit_test(test_direct_tcp_3_2),
        cmocka_unit_test(test_direct_shm_1_4),
        cmocka_unit_test(test_direct_tcp_3_nodes),
        cmocka_unit_test(test_direct_shm_4_nodes),
        cmocka_unit_test(test_direct_mismatch),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_mismatch_relay_off),
        cmocka_unit_test(test_mismatch_3_nodes),
        cmocka_unit_test(test_node_threshold),
        cmocka_unit_test(test_node_mismatch),
        cmocka_unit_test(test_bad_argument),
        cmocka_unit_test(test_cases_tcp),
        cmocka_unit_test(test_cases_shm),
    };

    if (argc > 1) {
        cmocka_set_test_filter(argv[1]); /* e.g. test_eager 'test_threshold_*' */
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
