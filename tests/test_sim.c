/*
 * test_sim.c - the fabric simulator (tools/common/sim.c) on cases whose
 * makespan is computed by hand, link sharing included, plus the model
 * file, rail sampling and every shared case with every scheduler.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
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
 * Two nodes of one rank, 1000 floats each way and to itself. Rank 0's
 * flow (core/plan/flow.h): lane FREE_CE the self copy (round 0), lane
 * FREE_PROXY the put to its relay = rank 1 (round 1, straight into its
 * receive buffer), FINAL the data wait for rank 1's put. Both puts are
 * ready at 0; the thread takes the self copy first (first in the plan) and
 * is busy with it (4000 B at 4 GB/s = 1 us), then issues the put at 1 us
 * (4000 B at 1 GB/s = 4 us), and the FINAL wait holds when rank 1's put
 * (same timing) is visible 2 us after its last byte: 1 + 4 + 2 = 7 us, as
 * in lock-step batches (the copy was the whole first batch). Bound: 4000
 * B / 1 GB/s.
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
 * Host costs: the same two-node case with put_s = 0.5 us and batch_s (the
 * cost of one step) = 1 us. Rank 0: the self copy step 0..1 us; the thread
 * picks again at 2 us and issues the put step, the put is posted at 2.5
 * us, done at 6.5 us, visible at 8.5 us; the thread is free at 3 us,
 * every lane but FINAL is done, and its wait holds at 8.5 us: 8.5 us.
 * Critical path (rank 0's wait jumps to rank 1, whose timing is the
 * same): rank 1's copy 1 (CE), the step cost 1 and the post 0.5 (host),
 * its put 4 (NIC) and 2 (latency).
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
    assert_true(fabs(res.cp_ce - 1e-6) < 1e-12);
    assert_true(fabs(res.cp_host - 1.5e-6) < 1e-12);
    assert_true(fabs(res.cp_nic - 4e-6) < 1e-12);
    assert_true(fabs(res.cp_lat - 2e-6) < 1e-12);
    assert_int_equal(res.cp_steps, 2);
    assert_int_equal(res.cp_hops, 1);
    assert_true(fabs(res.cp_nic + res.cp_ce + res.cp_lat + res.cp_host +
                     res.cp_queue - res.makespan) < 1e-12);
    rmacoll_case_free(c);
}

/*
 * Merging (core/plan/flow.h): ranks 0 (node 0) and 4 (node 2) each send
 * 1000 floats to rank 3 (node 1), both through relay 2 (local index 0 of
 * node 1). Copies cost ce_lat = 1 us before a submission and
 * ce_copy_s = 0.25 us per further copy (NVLink fast enough that the bytes
 * take picoseconds). The two chunks share relay 2's NIC receive side (1
 * GB/s): both done at 8 us, visible at 10 us, so both forwards are ready
 * at 10 us. Merged (the default), they are one submission: copies at 11
 * and 11.25 us, so rank 3's last data signal lands at 11.25 us. One step
 * at a time (merge_max_puts 1): the first forward at 11 us, the second
 * submission after it (the credit step between costs nothing here) starts
 * its copy 1 us later, at 12 us.
 *
 * As an nvlink_kernel launch (kernel_max_bytes at least the 4000 bytes of
 * each forward, ce_kernel_s = 2 us): both copies start together when the
 * launch does, at 12 us; one byte under the threshold, the copy engine
 * again (11.25 us); one step at a time, the second launch 2 us after the
 * first: 14 us.
 */
static void test_merged_forwards_by_hand(void **state)
{
    static const int node_of[6] = {0, 0, 1, 1, 2, 2};
    int64_t send[36] = {0};
    rmacoll_case_t *c;
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    send[0 * 6 + 3] = 1000;
    send[4 * 6 + 3] = 1000;
    c = make_case(6, node_of, send);
    plain_model(&m);
    m.ce_bw = 1e15;
    m.ce_lat = 1e-6;
    m.ce_copy_s = 0.25e-6;
    sim_opts_init(&o);
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 11.25e-6) < 1e-10);
    o.cfg.merge_max_puts = 1;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 12e-6) < 1e-10);
    m.ce_kernel_s = 2e-6;
    sim_opts_init(&o);
    o.kernel_max_bytes = 4000;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 12e-6) < 1e-10);
    o.kernel_max_bytes = 3999;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 11.25e-6) < 1e-10);
    o.kernel_max_bytes = 4000;
    o.cfg.merge_max_puts = 1;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 14e-6) < 1e-10);
    rmacoll_case_free(c);
}

/*
 * A submission of more puts than one nvlink_kernel launch takes
 * (SIM_KERNEL_PUTS): one node, every rank sends 1 float to every rank
 * itself included, all puts ready at 0 and merged into one submission.
 * Launches cost ce_kernel_s = 5 us each and the bytes nothing (ce_bw and
 * self_bw huge), so a rank ends when its last launch starts its copies:
 * 64 ranks = 64 puts, one launch, 5 us; 65 ranks, two launches, 10 us.
 */
static void test_kernel_launches_by_hand(void **state)
{
    static int node_of[65];
    static int64_t send[65 * 65];
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    plain_model(&m);
    m.ce_bw = 1e18;
    m.self_bw = 1e18;
    m.ce_kernel_s = 5e-6;
    m.ce_lat = 1e-3; /* would show if the copy engine took any */
    for (int n = 64; n <= 65; n++) {
        rmacoll_case_t *c;

        for (int i = 0; i < n * n; i++) {
            send[i] = 1;
        }
        c = make_case(n, node_of, send);
        sim_opts_init(&o);
        o.kernel_max_bytes = 4;
        assert_int_equal(sim_run(c, &m, &o, &res), 0);
        assert_true(fabs(res.makespan - (n == 64 ? 5e-6 : 10e-6)) < 1e-9);
        rmacoll_case_free(c);
    }
}

/*
 * Where dataflow differs from lock-step batches: three nodes of two ranks,
 * only 0 -> 3 and 2 -> 1 send (1000 floats each), scheduler shift (round
 * of i -> j = (j - i) mod 6), relay on. Rank 0's stream to node 1 goes
 * through relay 2 in round 2; rank 2's stream to node 0 through relay 0 in
 * round 4. Rank 2's plan: round 2 arrival wait (from 0), round 3 CE
 * forward to 3, round 4 its own chunk to relay 0 and the credit back to 0
 * (rank 0's the same, two rounds later).
 *
 * Lock-step (the simulator before, 12.8 us): rank 2 stays in batch 2
 * until 0's chunk is visible (4 us + 2 us latency), forwards it 6..6.4 us,
 * and only then sends its own chunk (6.4..10.4, visible at 12.4), which
 * rank 0 forwards 12.4..12.8.
 *
 * Dataflow: rank 2's own chunk is lane OUT(node 0), its relay work lane
 * IN(0); the chunk's put is ready at 0 while the arrival is not, so both
 * relays send at 0 (done 4 us, visible 6 us), forward 6..6.4 us (CE, 4000
 * B at 10 GB/s) and return the credit at 6.4 (0 B): makespan 6.4 us. The
 * last rank (0, the first of the four that end at 6.4): the forward (0.4
 * CE) started when rank 2's chunk arrived (4 nic, 2 latency, one hop);
 * steps on the path: rank 2's put, rank 0's forward and credit.
 *
 * With put_s = 0.5 us and batch_s = 1 us: chunks posted at 0.5, visible at
 * 6.5, forwards 6.5..6.9, the thread picks again at 7.9 and posts the
 * credit at 8.4, it is free at 8.9 and the FINAL lane (empty) ends there:
 * 8.9 us (lock-step: 18.3), host 0.5 + 1 + 1 on the path.
 */
static void test_relay_sends_before_arrival(void **state)
{
    static const int node_of[6] = {0, 0, 1, 1, 2, 2};
    int64_t send[36] = {0};
    rmacoll_case_t *c;
    sim_model_t m;
    sim_opts_t o;
    sim_result_t res;

    (void)state;
    send[0 * 6 + 3] = 1000;
    send[2 * 6 + 1] = 1000;
    c = make_case(6, node_of, send);
    plain_model(&m);
    sim_opts_init(&o);
    o.scheduler = "shift";
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 6.4e-6) < 1e-12);
    assert_int_equal(res.nrounds, 7);
    assert_int_equal(res.cp_last_rank, 0);
    assert_true(fabs(res.cp_nic - 4e-6) < 1e-12);
    assert_true(fabs(res.cp_ce - 0.4e-6) < 1e-12);
    assert_true(fabs(res.cp_lat - 2e-6) < 1e-12);
    assert_true(fabs(res.cp_host) < 1e-12);
    assert_true(fabs(res.cp_queue) < 1e-12);
    assert_int_equal(res.cp_steps, 3);
    assert_int_equal(res.cp_hops, 1);
    m.put_s = 0.5e-6;
    m.batch_s = 1e-6;
    assert_int_equal(sim_run(c, &m, &o, &res), 0);
    assert_true(fabs(res.makespan - 8.9e-6) < 1e-12);
    assert_true(fabs(res.cp_host - 2.5e-6) < 1e-12);
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

/*
 * Exact results pinned: every number sim_run reports (plan_s and sim_s
 * aside), bit for bit, on cases that exercise queueing behind queue
 * pairs, shared links, relay slots and credits, the relay off, and many
 * simultaneous events (no host costs). Pinned when the simulator moved
 * from lock-step batches to dataflow execution (core/plan/flow.h): what
 * does not depend on execution (bounds, rounds, tasks, flows, per-round
 * peak, max NIC bytes) kept its value, and so did the relay-off case's
 * makespan (every put in a free lane, issued in plan order as before);
 * pinned again when ready steps of one path merged into one submission
 * (flow.h "Merging", copies ce_copy_s apart): only the execution-dependent
 * values moved; and again when ce_copy_s took its measured default (3.7 us,
 * docs/sim.md). A change of the model or of the executor's rules shows here, and a pin
 * that differs prints its new initializer. nevents counts events
 * scheduled (a flow's end is rescheduled whenever its rate changes; one
 * more per step the threads pick).
 */
typedef struct sim_pin {
    int nnodes, G;
    int64_t count;
    const char *dist, *sched;
    uint32_t slots;
    uint64_t relay_buf;
    int relay, no_host;
    double makespan, bound_nic, bound_nvl, bound, ratio;
    int nrounds, nranks_sim;
    uint64_t ntasks, nflows, nevents, peak_bytes;
    int peak_round, peak_rank, peak_class, busiest_rank, busiest_class;
    double busiest_busy;
    uint64_t busiest_bytes;
    double max_nic_bytes;
    double cp[5];   /* nic, ce, lat, host, queue */
    int cp_steps, cp_hops, cp_last_rank;
} sim_pin_t;

static const sim_pin_t pins[] = {
    /* 4 x 4, zipf:1.2, 1000 floats, 1 relay slot of a 4 KiB buffer */
    {4, 4, 1000, "zipf:1.2", "node_shift", 1, 4096, 1, 0,
     0x1.54cbb86b70604p-11, 0x1.0a198be3b9e59p-19, 0x1.833473e4e14d2p-21, 0x1.0a198be3b9e59p-19, 0x1.47dc64cd427ebp+8,
     82, 16, 2766, 1666, 9382, 27844, 4, 7, 0, 8, 1, 0x1.0a198be3ba06p-19, 96156, 0x1.779cp+16,
     {0x1.5c6b93p-23, 0x1.2b4abe5d7edd7p-11, 0x1.f75106p-16, 0x1.9b0ab24c182f7p-15, 0x0p+0}, 99, 10, 8},
    /* 4 x 4, uniform, random scheduler, no host costs (many simultaneous events) */
    {4, 4, 4096, "uniform", "random", 4, 67108864, 1, 1,
     0x1.73d0c45c99971p-14, 0x1.100b4b0f99264p-18, 0x1.43c85631f9cf4p-21, 0x1.100b4b0f99264p-18, 0x1.5de322d5df983p+4,
     19, 16, 736, 448, 4010, 65536, 0, 7, 0, 0, 1, 0x1.6bd29bebc760ap-17, 196608, 0x1.8p+17,
     {0x1.100b4cp-20, 0x1.5a7b031f55f72p-14, 0x1.92a738p-19, -0x1.2bc601p-42, 0x1.100b4cp-19}, 6, 2, 6},
    /* 2 x 4, zipf:1.2, 64 KiB per pair */
    {2, 4, 16384, "zipf:1.2", "node_shift", 4, 67108864, 1, 0,
     0x1.a9043f8417e16p-15, 0x1.0b4f23687afb3p-17, 0x1.d5fc7ed8da566p-19, 0x1.0b4f23687afb3p-17, 0x1.9709081553675p+2,
     8, 8, 160, 96, 588, 638472, 5, 4, 5, 3, 0, 0x1.0b4f23687afb4p-17, 386372, 0x1.7951p+18,
     {0x1.2e5762p-19, 0x1.3dffab8d25348p-15, 0x1.92a738p-19, 0x1.6a63496f2acep-19, 0x1.4273aep-18}, 4, 1, 4},
    /* 4 x 4, zipf:1.2, relay off, xor */
    {4, 4, 16384, "zipf:1.2", "xor", 4, 67108864, 0, 0,
     0x1.f5dac248098dbp-14, 0x1.8e5c96cb1871fp-14, 0x1.945e52e89947p-19, 0x1.8e5c96cb1871fp-14, 0x1.4282010632b63p+0,
     17, 16, 496, 256, 7215, 455772, 7, 12, 0, 4, 0, 0x1.8f0e59868dd95p-14, 993764, 0x1.1926ap+22,
     {0x1.7c50a8p-14, 0x1.5ae8314f9104fp-16, 0x1.92a738p-19, 0x1.63ad434254c74p-18, 0x0p+0}, 11, 1, 11},
    /* 8 x 8, uniform, 4 KiB per pair */
    {8, 8, 1024, "uniform", "node_shift", 4, 67108864, 1, 0,
     0x1.04ef149099b77p-12, 0x1.3d62823cdd574p-18, 0x1.79bf0f3a4e1c8p-21, 0x1.3d62823cdd574p-18, 0x1.a4ef30caaf4abp+5,
     60, 64, 12160, 7680, 125648, 32768, 8, 0, 0, 24, 0, 0x1.22bd3711c53acp-16, 229376, 0x1.cp+17,
     {0x1.3d6282p-21, 0x1.df1c509317d6cp-13, 0x1.92a738p-19, 0x1.025e7f00dcc0cp-16, 0x1.7704a6p-20}, 6, 1, 48},
    /* 8 x 8, zipf:1.2, 112 KiB per pair */
    {8, 8, 28672, "zipf:1.2", "node_shift", 4, 67108864, 1, 0,
     0x1.77f7352536244p-11, 0x1.9408e2bf937c8p-12, 0x1.4013c9d3b2457p-12, 0x1.9408e2bf937c8p-12, 0x1.dc6e2e2a916eep+0,
     61, 64, 12276, 7767, 172626, 15491208, 9, 59, 5, 9, 0, 0x1.a12ff1a417b16p-12, 7271180, 0x1.1d279cp+24,
     {0x1.733bd83b7294p-17, 0x1.956871e48a654p-12, 0x1.92a738p-19, 0x1.2dfd734064e98p-16, 0x1.38e6f4p-12}, 7, 1, 57},
};

static int pin_matches(const sim_pin_t *p, const sim_result_t *r)
{
    return r->makespan == p->makespan && r->bound_nic == p->bound_nic &&
           r->bound_nvl == p->bound_nvl && r->bound == p->bound && r->ratio == p->ratio &&
           r->busiest_busy == p->busiest_busy && r->max_nic_bytes == p->max_nic_bytes &&
           r->cp_nic == p->cp[0] && r->cp_ce == p->cp[1] && r->cp_lat == p->cp[2] &&
           r->cp_host == p->cp[3] && r->cp_queue == p->cp[4] && r->nrounds == p->nrounds &&
           r->nranks_sim == p->nranks_sim && r->ntasks == p->ntasks &&
           r->nflows == p->nflows && r->nevents == p->nevents &&
           r->peak_round_link_bytes == p->peak_bytes && r->peak_round == p->peak_round &&
           r->peak_round_rank == p->peak_rank && r->peak_round_class == p->peak_class &&
           r->busiest_rank == p->busiest_rank && r->busiest_class == p->busiest_class &&
           r->busiest_bytes == p->busiest_bytes && r->cp_steps == p->cp_steps &&
           r->cp_hops == p->cp_hops && r->cp_last_rank == p->cp_last_rank;
}

/* The pin's initializer with the results r (to paste after a deliberate
 * change of the model or of the executor's rules). */
static void pin_print(size_t i, const sim_pin_t *p, const sim_result_t *r)
{
    print_message("pin %zu now:\n    {%d, %d, %" PRId64 ", \"%s\", \"%s\", %u, %" PRIu64
                  ", %d, %d,\n     %a, %a, %a, %a, %a,\n     %d, %d, %" PRIu64 ", %" PRIu64
                  ", %" PRIu64 ", %" PRIu64 ", %d, %d, %d, %d, %d, %a, %" PRIu64 ", %a,\n"
                  "     {%a, %a, %a, %a, %a}, %d, %d, %d},\n",
                  i, p->nnodes, p->G, p->count, p->dist, p->sched, p->slots, p->relay_buf,
                  p->relay, p->no_host, r->makespan, r->bound_nic, r->bound_nvl, r->bound,
                  r->ratio, r->nrounds, r->nranks_sim, r->ntasks, r->nflows, r->nevents,
                  r->peak_round_link_bytes, r->peak_round, r->peak_round_rank,
                  r->peak_round_class, r->busiest_rank, r->busiest_class, r->busiest_busy,
                  r->busiest_bytes, r->max_nic_bytes, r->cp_nic, r->cp_ce, r->cp_lat,
                  r->cp_host, r->cp_queue, r->cp_steps, r->cp_hops, r->cp_last_rank);
}

static void test_pinned_results(void **state)
{
    int bad = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
        const sim_pin_t *p = &pins[i];
        int sizes[16];
        rmacoll_case_dist_t d;
        rmacoll_case_t *c;
        sim_model_t m;
        sim_opts_t o;
        sim_result_t r;

        for (int B = 0; B < p->nnodes; B++) {
            sizes[B] = p->G;
        }
        assert_int_equal(rmacoll_case_dist_parse(p->dist, &d), 0);
        assert_int_equal(rmacoll_case_random(p->nnodes, sizes, &d, p->count, 1,
                                             RMACOLL_FLOAT32, &c), 0);
        sim_model_defaults(&m);
        if (p->no_host) {
            m.put_s = 0;
            m.batch_s = 0;
        }
        sim_opts_init(&o);
        o.scheduler = p->sched;
        o.cfg.relay_slots = p->slots;
        o.cfg.relay_buffer_bytes = p->relay_buf;
        o.cfg.relay_enabled = p->relay;
        assert_int_equal(sim_run(c, &m, &o, &r), 0);
        if (!pin_matches(p, &r)) {
            pin_print(i, p, &r);
            bad++;
        }
        rmacoll_case_free(c);
    }
    if (bad > 0) {
        fail_msg("%d pins differ: their new initializers are printed above", bad);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_nodes_by_hand),
        cmocka_unit_test(test_shared_link_by_hand),
        cmocka_unit_test(test_host_costs_by_hand),
        cmocka_unit_test(test_relay_sends_before_arrival),
        cmocka_unit_test(test_merged_forwards_by_hand),
        cmocka_unit_test(test_kernel_launches_by_hand),
        cmocka_unit_test(test_all_cases_all_schedulers),
        cmocka_unit_test(test_rails),
        cmocka_unit_test(test_model_file),
        cmocka_unit_test(test_pinned_results),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
