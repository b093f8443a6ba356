/*
 * test_refexec.c - runs the planner's plans of every rank through the
 * reference executor (tools/common/refexec.h): every shared case x every
 * scheduler x relay on/off, random topologies and matrices, tiny relay
 * slots and tasks, 1-byte and 8-byte types, 1000 back-to-back calls with
 * changing zero patterns, mismatch handling, virtual mode past 2^32, and
 * proofs that the executor catches corrupted plans.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include "core/plan/topo.h"
#include "refexec.h"

static const char *const scheds[] = {"shift", "node_shift", "xor", "random"};
#define NSCHED 4

/* Fails the test with the executor's message. */
static void expect_ok(rmacoll_status_t st, const refexec_result_t *res,
                      const char *what)
{
    if (st != RMACOLL_SUCCESS || !res->ok) {
        fail_msg("%s: %s (status %s, plan: %s)", what, res->msg,
                 rmacoll_status_name(res->status), res->plan_errmsg);
    }
}

static rmacoll_case_t *load(const char *name)
{
    char path[1024], err[256];
    rmacoll_case_t *c;

    snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, name);
    if (rmacoll_case_load(path, &c, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fail_msg("%s", err);
    }
    return c;
}

/* Every shared case x scheduler x relay on/off x slots {1, 2, 4}. */
static void test_shared_cases(void **state)
{
    DIR *d = opendir(RMACOLL_CASES_DIR);
    struct dirent *e;
    int ncases = 0;

    (void)state;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        rmacoll_case_t *c;

        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0) {
            continue;
        }
        c = load(e->d_name);
        ncases++;
        for (int s = 0; s < NSCHED; s++) {
            for (int relay = 0; relay < 2; relay++) {
                for (uint32_t slots = 1; slots <= 4; slots *= 2) {
                    refexec_opts_t o;
                    refexec_result_t res;
                    char what[256];
                    rmacoll_status_t st;

                    if (!relay && slots > 1) {
                        continue;
                    }
                    refexec_opts_init(&o);
                    o.scheduler = scheds[s];
                    o.relay_enabled = relay;
                    o.relay_slots = slots;
                    o.relay_buffer_bytes = 64 << 10;
                    o.gapped = (s + slots) % 2;
                    o.ncalls = 2;
                    o.seed = (uint64_t)s * 7 + slots;
                    st = refexec_run(&o, c, &res);
                    snprintf(what, sizeof(what), "%s sched %s relay %d slots %u",
                             e->d_name, scheds[s], relay, slots);
                    expect_ok(st, &res, what);
                    if (c->has_mismatch) {
                        /* every rank fails, nothing runs */
                        assert_int_equal(res.status, RMACOLL_ERR_MISMATCH);
                        assert_true(res.nfail_ranks >= 1);
                        assert_int_equal(res.stats.puts, 0);
                        assert_int_equal(res.stats.calls, 0);
                        assert_non_null(strstr(res.plan_errmsg, "rank 0 sends 41 elements to rank 1"));
                    } else {
                        assert_int_equal(res.status, RMACOLL_SUCCESS);
                        assert_int_equal(res.stats.calls, 2);
                    }
                }
            }
        }
        rmacoll_case_free(c);
    }
    closedir(d);
    assert_true(ncases >= 10);
}

/* A random topology of 1-8 nodes of 1-8 ranks (uneven) from seed. */
static rmacoll_case_t *random_case(uint64_t seed, int maxnodes, int maxls,
                                   int64_t base, rmacoll_datatype_t dt)
{
    uint64_t rs = seed;
    int nnodes = 1 + (int)(rmacoll_case_rand(&rs) % (uint64_t)maxnodes);
    int sizes[8];
    rmacoll_case_dist_t dist;
    rmacoll_case_t *c;
    static const char *dists[] = {"uniform", "random", "zipf:1.2",
                                  "sparse:0.1", "sparse:0.5", "zipf:2.5"};

    for (int k = 0; k < nnodes; k++) {
        sizes[k] = 1 + (int)(rmacoll_case_rand(&rs) % (uint64_t)maxls);
    }
    assert_int_equal(rmacoll_case_dist_parse(
                         dists[rmacoll_case_rand(&rs) % 6], &dist), 0);
    assert_int_equal(rmacoll_case_random(nnodes, sizes, &dist, base, seed, dt,
                                         &c), 0);
    return c;
}

static void test_random_topologies(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 160; seed++) {
        rmacoll_case_t *c = random_case(seed, 8, 8, 1 + (int64_t)(seed % 23),
                                        seed % 3 == 0 ? RMACOLL_INT8
                                        : seed % 3 == 1 ? RMACOLL_FLOAT64
                                                        : RMACOLL_FLOAT32);
        refexec_opts_t o;
        refexec_result_t res;
        char what[128];

        refexec_opts_init(&o);
        o.scheduler = scheds[seed % NSCHED];
        o.sched_seed = seed;
        o.relay_enabled = seed % 5 != 0;
        o.relay_slots = 1 + (uint32_t)(seed % 4);
        /* slots of 8..128 bytes: nin <= nranks channels of S slots */
        o.relay_buffer_bytes = (uint64_t)c->nranks * o.relay_slots * 8 *
                               (1 + seed % 16);
        o.max_task_bytes = seed % 4 == 0 ? 24 : 1u << 20;
        o.gapped = (int)(seed & 1);
        o.seed = seed;
        o.ncalls = 2;
        snprintf(what, sizeof(what), "seed %llu (%d ranks, %d nodes) %s",
                 (unsigned long long)seed, c->nranks, c->nnodes, o.scheduler);
        expect_ok(refexec_run(&o, c, &res), &res, what);
        rmacoll_case_free(c);
    }
}

/* Slots of one float64 / eight int8 elements, tasks of 8 or 24 bytes. */
static void test_tiny_slots_and_tasks(void **state)
{
    static const uint64_t tasks[] = {8, 24, 1u << 20};
    static const rmacoll_datatype_t dts[] = {RMACOLL_INT8, RMACOLL_FLOAT64,
                                             RMACOLL_FLOAT16};
    int sizes[3] = {3, 1, 2};

    (void)state;
    for (int d = 0; d < 3; d++) {
        for (int t = 0; t < 3; t++) {
            for (uint32_t S = 1; S <= 3; S++) {
                rmacoll_case_dist_t dist;
                rmacoll_case_t *c;
                refexec_opts_t o;
                refexec_result_t res;
                char what[128];

                assert_int_equal(rmacoll_case_dist_parse("random", &dist), 0);
                assert_int_equal(rmacoll_case_random(3, sizes, &dist, 9,
                                                     (uint64_t)(d * 9 + t * 3 + S),
                                                     dts[d], &c), 0);
                refexec_opts_init(&o);
                o.scheduler = scheds[(d + t + S) % NSCHED];
                o.relay_slots = S;
                /* nin <= 3 at every relay here: one 8-byte slot each */
                o.relay_buffer_bytes = 3 * S * 8;
                o.max_task_bytes = tasks[t];
                o.gapped = 1;
                o.ncalls = 3;
                o.seed = S + 10 * (uint64_t)t;
                snprintf(what, sizeof(what), "%s task %llu slots %u",
                         rmacoll_datatype_name(dts[d]),
                         (unsigned long long)tasks[t], S);
                expect_ok(refexec_run(&o, c, &res), &res, what);
                assert_true(res.stats.bytes_forward > 0);
                rmacoll_case_free(c);
            }
        }
    }
}

/* A slot smaller than one element: every rank reports a config error. */
static void test_slot_smaller_than_element(void **state)
{
    rmacoll_case_t *c = load("symmetric_small_2x2.txt");
    refexec_opts_t o;
    refexec_result_t res;
    refexec_t *ex;

    (void)state;
    refexec_opts_init(&o);
    o.relay_buffer_bytes = 7;  /* slot rounds down to 0 bytes */
    o.relay_slots = 1;
    assert_int_equal(refexec_create(&o, c->nranks, c->node_of, &ex, NULL, 0), 0);
    assert_int_equal(refexec_prepare(ex, c, &res), RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(res.plan_errmsg, "less than one element"));
    refexec_destroy(ex);
    rmacoll_case_free(c);
}

/* 1000 calls back to back on 3 ranks (1+2 nodes) with the same signal
 * state, relay buffers and slots; the zero pattern, the counts and the
 * type change every call; every 97th call has a count mismatch: it fails
 * everywhere and must leave the signal state as it was for the next. */
static void test_back_to_back(void **state)
{
    static const int node_of[3] = {0, 1, 1};
    static const rmacoll_datatype_t dts[] = {RMACOLL_INT8, RMACOLL_INT32,
                                             RMACOLL_FLOAT64, RMACOLL_BFLOAT16};
    int sizes[2] = {1, 2};
    refexec_opts_t o;
    refexec_t *ex;
    refexec_result_t res;
    uint64_t ok_calls = 0;

    (void)state;
    refexec_opts_init(&o);
    o.relay_slots = 2;
    o.relay_buffer_bytes = 2 * 2 * 16;  /* 16-byte slots */
    o.max_task_bytes = 16;
    o.gapped = 1;
    o.seed = 99;
    assert_int_equal(refexec_create(&o, 3, node_of, &ex, NULL, 0), 0);
    for (uint64_t k = 0; k < 1000; k++) {
        rmacoll_case_dist_t dist = {RMACOLL_CASE_SPARSE, 0.5};
        rmacoll_case_t *c;
        char what[64];

        assert_int_equal(rmacoll_case_random(2, sizes, &dist, 3 + (int64_t)(k % 5),
                                             k, dts[k % 4], &c), 0);
        if (k % 97 == 50) {
            c->recv[1 * 3 + 2] += 1;  /* rank 2 expects one more from 1 */
            rmacoll_case_update_mismatch(c);
        }
        snprintf(what, sizeof(what), "call %llu", (unsigned long long)k);
        expect_ok(refexec_call(ex, c, &res), &res, what);
        if (c->has_mismatch) {
            assert_int_equal(res.status, RMACOLL_ERR_MISMATCH);
            assert_int_equal(res.stats.calls, ok_calls);
        } else {
            ok_calls++;
            assert_int_equal(res.stats.calls, ok_calls);
        }
        rmacoll_case_free(c);
    }
    assert_true(res.stats.bytes_forward > 0);
    refexec_destroy(ex);
}

/* The shared mismatch case: every rank fails with RMACOLL_ERR_MISMATCH,
 * no buffer is written, and the next (good) call still checks out. */
static void test_mismatch(void **state)
{
    rmacoll_case_t *bad = load("mismatch_2x2.txt");
    rmacoll_case_t *good = load("symmetric_small_2x2.txt");

    (void)state;
    for (int relay = 0; relay < 2; relay++) {
        refexec_opts_t o;
        refexec_t *ex;
        refexec_result_t res;

        refexec_opts_init(&o);
        o.relay_enabled = relay;
        assert_int_equal(refexec_create(&o, 4, bad->node_of, &ex, NULL, 0), 0);
        expect_ok(refexec_call(ex, good, &res), &res, "good before");
        expect_ok(refexec_call(ex, bad, &res), &res, "mismatch");
        assert_int_equal(res.status, RMACOLL_ERR_MISMATCH);
        assert_true(res.nfail_ranks >= 1);
        assert_int_equal(res.stats.calls, 1);
        assert_non_null(strstr(res.plan_errmsg,
                               "rank 0 sends 41 elements to rank 1, which "
                               "expects 40"));
        expect_ok(refexec_call(ex, good, &res), &res, "good after");
        assert_int_equal(res.stats.calls, 2);
        refexec_destroy(ex);
    }
    rmacoll_case_free(bad);
    rmacoll_case_free(good);
}

/* Virtual mode: 3 ranks, int64 counts of about 2^30 elements: blocks of
 * 8 GiB, byte offsets past 2^33, never allocated. */
static void test_virtual_past_4g(void **state)
{
    static const int node_of[3] = {0, 1, 1};
    rmacoll_case_t *c;

    (void)state;
    assert_int_equal(rmacoll_case_create(3, node_of, RMACOLL_INT64, &c), 0);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            c->send[i * 3 + j] = (1ll << 30) + 3 * i + j;
        }
    }
    memcpy(c->recv, c->send, 9 * sizeof(int64_t));
    for (int relay = 0; relay < 2; relay++) {
        refexec_opts_t o;
        refexec_result_t res;

        refexec_opts_init(&o);
        o.virtual_mode = 1;
        o.relay_enabled = relay;
        o.relay_buffer_bytes = 1ull << 30;   /* never allocated */
        o.relay_slots = 2;
        o.max_task_bytes = 1ull << 30;
        o.gapped = 1;
        o.ncalls = 2;
        expect_ok(refexec_run(&o, c, &res), &res, "virtual");
        assert_int_equal(res.stats.calls, 2);
        /* 2 calls x 9 blocks of ~8 GiB, every byte accounted for */
        assert_true(res.stats.bytes_self + res.stats.bytes_direct +
                        res.stats.bytes_forward >
                    2ull * 9 * (8ull << 30));
    }
    rmacoll_case_free(c);
}

/* A corrupted plan must fail with the right cause. */
typedef struct corruption {
    const char *what;
    int rank;
    int op;
    uint32_t flags;
    size_t k;
    refexec_field_t field;
    int64_t delta;
    const char *want;   /* substring of the failure */
} corruption_t;

static void test_catches_corrupted_plans(void **state)
{
    static const corruption_t cs[] = {
        {"relay chunk offset +1 element", 0, RMACOLL__OP_PUT,
         RMACOLL__TASK_TO_RELAY, 1, REFEXEC_DST_OFF, 4, "rank"},
        {"relay chunk offset -1 element", 0, RMACOLL__OP_PUT,
         RMACOLL__TASK_TO_RELAY, 2, REFEXEC_DST_OFF, -4, "rank"},
        {"forward source +1 element", 4, RMACOLL__OP_PUT,
         RMACOLL__TASK_FORWARD, 1, REFEXEC_SRC_OFF, 4, "rank"},
        {"forward destination +1 element", 4, RMACOLL__OP_PUT,
         RMACOLL__TASK_FORWARD, 0, REFEXEC_DST_OFF, 4, "rank"},
        {"direct put destination +1 byte", 0, RMACOLL__OP_PUT,
         RMACOLL__TASK_SIGNAL, 0, REFEXEC_DST_OFF, 1, "rank"},
        {"direct put one element short", 1, RMACOLL__OP_PUT, 0, 0,
         REFEXEC_BYTES, -4, "rank"},
        {"data signal skips a value", 2, RMACOLL__OP_PUT,
         RMACOLL__TASK_SIGNAL, 0, REFEXEC_SIG_VALUE, 1, "must rise by exactly 1"},
        {"credit wait too weak", 0, RMACOLL__OP_WAIT, RMACOLL__TASK_CREDIT, 6,
         REFEXEC_SIG_VALUE, -1, "slot overwritten before credit"},
        {"arrival wait too weak", 4, RMACOLL__OP_WAIT, RMACOLL__TASK_ARRIVAL, 1,
         REFEXEC_SIG_VALUE, -1, "forward before arrival"},
        {"final data wait too weak", 5, RMACOLL__OP_WAIT, RMACOLL__TASK_DATA, 1,
         REFEXEC_SIG_VALUE, -1, "rank 5"},
        {"final data wait too strong", 6, RMACOLL__OP_WAIT, RMACOLL__TASK_DATA,
         0, REFEXEC_SIG_VALUE, 1, "deadlock: rank 6"},
        {"credit put skips a value", 4, RMACOLL__OP_PUT, RMACOLL__TASK_CREDIT, 0,
         REFEXEC_SIG_VALUE, 1, "must rise by exactly 1"},
    };
    rmacoll_case_t *c;
    int sizes[2] = {4, 4};
    rmacoll_case_dist_t dist = {RMACOLL_CASE_UNIFORM, 0};

    (void)state;
    /* 2 x 4 ranks, 40 float32 per pair: 120-byte streams in 16-byte slots */
    assert_int_equal(rmacoll_case_random(2, sizes, &dist, 40, 1,
                                         RMACOLL_FLOAT32, &c), 0);
    /* node 1 sends nothing to node 0, so rank 0 is never held back by a
     * stream it relays and can run ahead of rank 4's credits */
    for (int i = 4; i < 8; i++) {
        for (int j = 0; j < 4; j++) {
            c->send[i * 8 + j] = c->recv[i * 8 + j] = 0;
        }
    }
    for (size_t k = 0; k < sizeof(cs) / sizeof(cs[0]); k++) {
        int caught = 0;

        /* several execution orders: a weak wait need not bite every time */
        for (uint64_t seed = 1; seed <= 20 && !caught; seed++) {
            refexec_opts_t o;
            refexec_t *ex;
            refexec_result_t res;

            refexec_opts_init(&o);
            o.relay_slots = 2;
            o.relay_buffer_bytes = 2 * 16;
            o.seed = seed;
            assert_int_equal(refexec_create(&o, c->nranks, c->node_of, &ex,
                                            NULL, 0), 0);
            /* a clean call first, so that signal values are not all 1 */
            expect_ok(refexec_call(ex, c, &res), &res, "clean");
            assert_int_equal(refexec_prepare(ex, c, &res), 0);
            if (!refexec_corrupt(ex, cs[k].rank, cs[k].op, cs[k].flags,
                                 cs[k].k, cs[k].field, cs[k].delta)) {
                fail_msg("%s: no such task", cs[k].what);
            }
            if (refexec_execute(ex, &res) != RMACOLL_SUCCESS) {
                assert_false(res.ok);
                if (strstr(res.msg, cs[k].want) == NULL) {
                    fail_msg("%s: caught, but as '%s'", cs[k].what, res.msg);
                }
                caught = 1;
            }
            refexec_destroy(ex);
        }
        if (!caught) {
            fail_msg("%s: not caught in 20 orders", cs[k].what);
        }
    }
    rmacoll_case_free(c);
}

/*
 * Calls whose streams to the other node take different paths alternate on
 * one executor per topology, in data and provenance mode, so the signal
 * state has to carry across them; the executor checks the data, single
 * writers, signal steps and that an eager copy reads only its own block of
 * a payload addressed to its rank and within the threshold. Call k is
 * random int32 counts up to 2 * base[k % nbase] (eager_max_bytes = 256).
 * direct_min != 0: direct streams too, which must then be taken.
 */
static void alternating(uint64_t direct_min, const int64_t *base, int nbase, int ncalls,
                        uint64_t seed0)
{
    static const int topos[][2] = {{2, 2}, {3, 2}, {1, 4}, {4, 3}};
    rmacoll_case_dist_t dist;

    assert_int_equal(rmacoll_case_dist_parse("random", &dist), 0);
    for (size_t t = 0; t < sizeof(topos) / sizeof(topos[0]); t++) {
        for (int virt = 0; virt <= 1; virt++) {
            int node_of[8], n = 0;
            uint64_t eager_tasks = 0, relay_chunks = 0, direct_puts = 0;
            refexec_opts_t o;
            refexec_t *ex;
            for (int b = 0; b < 2; b++) {
                for (int l = 0; l < topos[t][b]; l++) {
                    node_of[n++] = b;
                }
            }
            refexec_opts_init(&o);
            o.scheduler = scheds[t % NSCHED];
            o.eager_max_bytes = 256;
            o.node_eager_max_bytes = 256;
            o.direct_min_bytes = direct_min;
            o.relay_slots = 2;
            o.relay_buffer_bytes = 8 * 2 * 64;
            o.gapped = 1;
            o.virtual_mode = virt;
            o.seed = t + seed0;
            assert_int_equal(refexec_create(&o, n, node_of, &ex, NULL, 0), 0);
            for (int k = 0; k < ncalls; k++) {
                rmacoll_case_t *c;
                refexec_result_t res;
                char what[96];
                const rmacoll_topo_t *topo;
                assert_int_equal(rmacoll_case_random(2, topos[t], &dist, base[k % nbase],
                                                     (uint64_t)(t * 100 + k), RMACOLL_INT32,
                                                     &c), 0);
                snprintf(what, sizeof(what), "topology %d+%d call %d%s", topos[t][0],
                         topos[t][1], k, virt ? " (virtual)" : "");
                expect_ok(refexec_prepare(ex, c, &res), &res, what);
                topo = refexec_topo(ex);
                for (int r = 0; r < n; r++) {
                    const rmacoll__plan_t *p = refexec_plan(ex, r);
                    for (size_t i = 0; i < p->ntasks; i++) {
                        const rmacoll__task_t *x = &p->tasks[i];
                        eager_tasks += (x->flags & RMACOLL__TASK_EAGER) != 0;
                        relay_chunks += (x->flags & RMACOLL__TASK_TO_RELAY) != 0;
                        direct_puts += x->op == RMACOLL__OP_PUT &&
                                       x->path == RMACOLL__PATH_PROXY &&
                                       x->dst_win == RMACOLL__WIN_RECV &&
                                       rmacoll__topo_relay(topo, r, topo->node_of[x->peer]) !=
                                           x->peer;
                    }
                }
                expect_ok(refexec_execute(ex, &res), &res, what);
                rmacoll_case_free(c);
            }
            /* every path was taken */
            assert_true(eager_tasks > 0);
            assert_true(relay_chunks > 0);
            assert_int_equal(direct_puts > 0, direct_min != 0);
            refexec_destroy(ex);
        }
    }
}

/* The eager path: base 4 stays far below 256 bytes per sender and node,
 * base 40 mostly above (through the relay). */
static void test_eager_alternating(void **state)
{
    static const int64_t base[3] = {4, 40, 4};

    (void)state;
    alternating(0, base, 3, 8, 1);
}

/*
 * Direct streams (relay.direct_min_bytes = 600) too: base 4 eager, 30
 * relayed (256 < bytes < 600), 120 direct (>= 600), mixed inside a call. A
 * direct stream's puts to ranks other than the relay raise XDATA words, so
 * every word keeps one writer while a stream moves between the paths.
 */
static void test_direct_alternating(void **state)
{
    static const int64_t base[3] = {4, 30, 120};

    (void)state;
    alternating(600, base, 3, 12, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_cases),
        cmocka_unit_test(test_random_topologies),
        cmocka_unit_test(test_tiny_slots_and_tasks),
        cmocka_unit_test(test_slot_smaller_than_element),
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_eager_alternating),
        cmocka_unit_test(test_direct_alternating),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_virtual_past_4g),
        cmocka_unit_test(test_catches_corrupted_plans),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
