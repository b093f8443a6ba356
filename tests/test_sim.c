/*
 * test_sim.c - the fabric simulator (tools/common/sim.c) on cases whose
 * makespan is computed by hand, link sharing included, plus the model
 * file, rail sampling and every shared case with every scheduler.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cases.h"
#include "sim.h"

/* A model where only the named costs exist: NIC 1 GB/s, latency 2 us,
 * local copy 4 GB/s, NVLink 10 GB/s, no PCIe / bidir cap / host costs. */
static void plain_model(sim_model_t *m)
{
    sim_model_defaults(m);
    m->nic_bw = 1e9;
    m->nic_lat = 2e-6;
    m->pcie_bw = 0;
    m->ce_bw = 10e9;
    m->ce_bidir_bw = 0;
    m->ce_lat = 0;
    m->self_bw = 4e9;
    m->put_s = 0;
    m->batch_s = 0;
}

static rmacoll_case_t *make_case(int nranks, const int *node_of,
                                 const int64_t *send)
{
    rmacoll_case_t *c;

    assert_int_equal(rmacoll_case_create(nranks, node_of, RMACOLL_FLOAT32, &c), 0);
    memcpy(c->send, send, (size_t)nranks * nranks * sizeof(int64_t));
    memcpy(c->recv, send, (size_t)nranks * nranks * sizeof(int64_t));
    rmacoll_case_update_mismatch(c);
    return c;
}

/*
 * Two nodes of one rank, 1000 floats each way and to itself. Rank 0:
 * round 0 self copy (4000 B at 4 GB/s = 1 us), round 1 direct put to its
 * relay = rank 1 (4000 B at 1 GB/s = 4 us, starting at 1 us: the batch
 * before ended then), final wait for rank 1's put (same timing), visible
 * 2 us after its last byte: 1 + 4 + 2 = 7 us. Bound: 4000 B / 1 GB/s.
 */
static void test_two_nodes_by_hand(void **state)
{
    static const int node_of[2] = {0, 1};
    static const int64_t send[4] = {1000, 1000, 1000, 1000};
    rmacoll_case_t *c = make_case(2, node_of, send);
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    plain_model(&m);
    sim_opts_init(&o);
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 7e-6) < 1e-12);
    assert_true(fabs(res.bound_nic - 4e-6) < 1e-12);
    assert_true(fabs(res.bound - 4e-6) < 1e-12);
    assert_true(fabs(res.ratio - 1.75) < 1e-9);
    assert_int_equal(res.nranks_sim, 2);
    assert_int_equal(res.nrounds, 3);  /* 0 self, 1 put, 2 final waits */
    /* critical path: the self copy (1 us, CE), the peer's put (4 us NIC)
     * and its latency (2 us) */
    assert_true(fabs(res.cp_nic - 4e-6) < 1e-12);
    assert_true(fabs(res.cp_lat - 2e-6) < 1e-12);
    assert_true(fabs(res.cp_ce - 1e-6) < 1e-12);
    assert_true(fabs(res.cp_nic + res.cp_ce + res.cp_lat + res.cp_host +
                     res.cp_queue - res.makespan) < 1e-12);
    /* with 1 us of latency the answer moves by exactly 1 us */
    m.nic_lat = 1e-6;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 6e-6) < 1e-12);
    rmacoll_case_free(c);
}

/*
 * Relay off, ranks 0 and 1 (node 0) both put into rank 2 (node 1), no
 * other traffic: the two flows share NIC_RX(2). Equal sizes (1000 floats
 * each): 4000 B each at 0.5 GB/s, both done at 8 us, +2 us latency = 10 us.
 * Unequal (1000 and 3000 floats): both at 0.5 GB/s until the small one is
 * done at 8 us, the large one then has 8000 B left at 1 GB/s: 16 us, +2.
 */
static void test_shared_link_by_hand(void **state)
{
    static const int node_of[3] = {0, 0, 1};
    int64_t send[9] = {0, 0, 1000, 0, 0, 1000, 0, 0, 0};
    rmacoll_case_t *c = make_case(3, node_of, send);
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    plain_model(&m);
    sim_opts_init(&o);
    o.cfg.relay_enabled = 0;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 10e-6) < 1e-12);
    assert_true(fabs(res.bound_nic - 8e-6) < 1e-12);
    assert_int_equal(res.busiest_rank, 2);
    assert_int_equal(res.busiest_class, SIM_NIC_RX);
    assert_true(fabs(res.busiest_busy - 8e-6) < 1e-12);
    assert_int_equal(res.busiest_bytes, 8000);
    rmacoll_case_free(c);

    send[5] = 3000;
    c = make_case(3, node_of, send);
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 18e-6) < 1e-12);
    assert_true(fabs(res.bound_nic - 16e-6) < 1e-12);
    rmacoll_case_free(c);
}

/*
 * Host costs: the same two-node case with put_s = 0.5 us and batch_s =
 * 1 us. Rank 0: batch 0 (self copy) 0..1 us; batch 1 starts at 2 us, its
 * put is posted at 2.5 us, done at 6.5 us, visible at 8.5 us; the final
 * batch starts at 3 us and ends on that signal: 8.5 us.
 */
static void test_host_costs_by_hand(void **state)
{
    static const int node_of[2] = {0, 1};
    static const int64_t send[4] = {1000, 1000, 1000, 1000};
    rmacoll_case_t *c = make_case(2, node_of, send);
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    plain_model(&m);
    m.put_s = 0.5e-6;
    m.batch_s = 1e-6;
    sim_opts_init(&o);
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 8.5e-6) < 1e-12);
    assert_true(fabs(res.cp_nic + res.cp_ce + res.cp_lat + res.cp_host +
                     res.cp_queue - res.makespan) < 1e-12);
    rmacoll_case_free(c);
}

/* Every shared case (without a mismatch), every built-in scheduler: the
 * simulation completes (no deadlock), makespan >= bound, the critical
 * path adds up; the mismatch case is refused with a message. */
static void test_all_cases_all_schedulers(void **state)
{
    static const char *const files[] = {
        "all_zero.txt", "half_idle.txt", "incast_16_to_0.txt",
        "moe_zipf_2x4.txt", "one_column_zero.txt", "single_rank_node_1_4.txt",
        "sparse_two_cross.txt", "symmetric_small_2x2.txt", "uneven_nodes_3_2.txt",
    };
    static const char *const scheds[] = {"shift", "node_shift", "xor", "random",
                                         "largest_first"};
    char path[512], err[256];
    rmacoll_case_t *c;
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    sim_model_defaults(&m);
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, files[f]);
        assert_int_equal(rmacoll_case_load(path, &c, err, sizeof(err)), 0);
        for (size_t k = 0; k < sizeof(scheds) / sizeof(scheds[0]); k++) {
            for (int slots = 1; slots <= 4; slots += 3) {
                sim_opts_init(&o);
                o.scheduler = scheds[k];
                o.cfg.relay_slots = (uint32_t)slots;
                o.cfg.relay_buffer_bytes = 4096;
                if (sim_run(c, &m, &o, &res) != RMACOLL_SUCCESS) {
                    fail_msg("%s %s slots %d: %s", files[f], scheds[k], slots, res.msg);
                }
                assert_true(res.makespan + 1e-15 >= res.bound);
                assert_true(fabs(res.cp_nic + res.cp_ce + res.cp_lat + res.cp_host +
                                 res.cp_queue - res.makespan) < 1e-9 * (1 + res.makespan * 1e6));
            }
        }
        rmacoll_case_free(c);
    }
    snprintf(path, sizeof(path), "%s/mismatch_2x2.txt", RMACOLL_CASES_DIR);
    assert_int_equal(rmacoll_case_load(path, &c, err, sizeof(err)), 0);
    sim_opts_init(&o);
    assert_int_equal(sim_run(c, &m, &o, &res), RMACOLL_ERR_INVALID_ARG);
    assert_non_null(strstr(res.msg, "mismatch"));
    rmacoll_case_free(c);
}

/* --rails: 4 nodes x 4, uniform: one rail simulated has a quarter of
 * the ranks and the same NIC bound; rails on uneven nodes or with the
 * relay off are refused. */
static void test_rails(void **state)
{
    int sizes[4] = {4, 4, 4, 4};
    rmacoll_case_dist_t d = {RMACOLL_CASE_UNIFORM, 0};
    rmacoll_case_t *c;
    sim_model_t m;
    sim_opts_t o;
    sim_result_t all, one;

    (void)state;
    sim_model_defaults(&m);
    assert_int_equal(rmacoll_case_random(4, sizes, &d, 4096, 1, RMACOLL_FLOAT32, &c), 0);
    sim_opts_init(&o);
    assert_int_equal(sim_run(c, &m, &o, &all), 0);
    o.rails = 1;
    assert_int_equal(sim_run(c, &m, &o, &one), 0);
    assert_int_equal(all.nranks_sim, 16);
    assert_int_equal(one.nranks_sim, 4);
    assert_int_equal(one.rails_sim, 1);
    assert_true(fabs(one.bound_nic - all.bound_nic) < 1e-15);
    o.cfg.relay_enabled = 0;
    assert_int_equal(sim_run(c, &m, &o, &one), RMACOLL_ERR_INVALID_ARG);
    assert_non_null(strstr(one.msg, "--rails"));
    rmacoll_case_free(c);
    sizes[3] = 3;
    assert_int_equal(rmacoll_case_random(4, sizes, &d, 64, 1, RMACOLL_FLOAT32, &c), 0);
    sim_opts_init(&o);
    o.rails = 2;
    assert_int_equal(sim_run(c, &m, &o, &one), RMACOLL_ERR_INVALID_ARG);
    rmacoll_case_free(c);
}

/* The model file: keys override defaults, missing keys keep them,
 * unknown keys and bad numbers are errors naming the key. */
static void test_model_file(void **state)
{
    char path[] = "/tmp/rmacoll_test_sim_XXXXXX";
    char err[512];
    sim_model_t m;
    FILE *f;
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fprintf(f, "name: test box\nnic: {bandwidth_GBps: 1.5, latency_us: 40}\n"
               "host: {put_us: 2}\n");
    fclose(f);
    sim_model_defaults(&m);
    assert_int_equal(sim_model_load(path, &m, err, sizeof(err)), 0);
    assert_string_equal(m.name, "test box");
    assert_true(fabs(m.nic_bw - 1.5e9) < 1);
    assert_true(fabs(m.nic_lat - 40e-6) < 1e-15);
    assert_true(fabs(m.put_s - 2e-6) < 1e-15);
    assert_true(fabs(m.ce_bw - 395e9) < 1);       /* default kept */
    assert_true(fabs(m.ce_bidir_bw - 652e9) < 1);
    f = fopen(path, "w");
    fprintf(f, "nic: {bandwidth_GBps: fast}\n");
    fclose(f);
    assert_int_equal(sim_model_load(path, &m, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "nic.bandwidth_GBps"));
    f = fopen(path, "w");
    fprintf(f, "nic: {bandwidth_GBps: 1}\nwarp_drive: {x: 1}\n");
    fclose(f);
    assert_int_equal(sim_model_load(path, &m, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_nodes_by_hand),
        cmocka_unit_test(test_shared_link_by_hand),
        cmocka_unit_test(test_host_costs_by_hand),
        cmocka_unit_test(test_all_cases_all_schedulers),
        cmocka_unit_test(test_rails),
        cmocka_unit_test(test_model_file),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
