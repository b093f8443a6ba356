/*
 * test_ctrl.c - the control plane (core/ctrl/ctrl.c) on its own: window layout,
 * the one signal map and the record accessors, over uneven topologies with
 * the relay on and off; status merging.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/ctrl/ctrl.h"
#include "core/plan/topo.h"

typedef struct topo_case {
    int nnodes;
    int sizes[4];
} topo_case_t;

static const topo_case_t topos[] = {
    {1, {4}}, {2, {2, 2}}, {2, {3, 2}}, {2, {1, 4}}, {4, {1, 1, 1, 1}}, {3, {2, 3, 1}},
};

static void check_layout(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *pcfg, int r)
{
    rmacoll__ctrl_layout_t lay;
    int nnet = rmacoll__net_peers(topo, pcfg, r, NULL);
    uint8_t *seen;
    size_t areas[6][2];

    rmacoll__ctrl_layout(topo, pcfg, r, &lay);
    assert_int_equal(lay.nnet, nnet);
    assert_int_equal(lay.nranks, topo->nranks);
    assert_int_equal(lay.nsig_plan, rmacoll__sig_count(topo, pcfg, r));
    /* every word of the map has one index, all below nsig, none shared */
    assert_int_equal(lay.nsig, lay.nsig_plan + 2 * (uint32_t)nnet + (uint32_t)topo->nranks +
                                   RMACOLL__NSTAGE_WORDS);
    seen = calloc(lay.nsig, 1);
    assert_non_null(seen);
    for (uint32_t i = 0; i < lay.nsig_plan; i++) {
        seen[i]++;
    }
    for (int k = 0; k < nnet; k++) {
        seen[rmacoll__ctrl_sig_rec(&lay, RMACOLL__REC_META, k)]++;
        seen[rmacoll__ctrl_sig_rec(&lay, RMACOLL__REC_AGREE, k)]++;
    }
    for (int p = 0; p < topo->nranks; p++) {
        seen[rmacoll__ctrl_sig_ready(&lay, p)]++;
    }
    for (int w = 0; w < RMACOLL__NSTAGE_WORDS; w++) {
        assert_true(rmacoll__ctrl_sig_stage(&lay, w) < lay.nsig);
        seen[rmacoll__ctrl_sig_stage(&lay, w)]++;
    }
    for (uint32_t i = 0; i < lay.nsig; i++) {
        assert_int_equal(seen[i], 1);
    }
    free(seen);
    /* the header's words fit the header (the last one is the pid) */
    assert_true(RMACOLL__CTRL_HEARTBEAT_OFF + 8 <= RMACOLL__CTRL_PID_OFF);
    assert_true(RMACOLL__CTRL_PID_OFF + 8 <= RMACOLL__CTRL_HEADER_BYTES);
    /* areas in order, 64-byte aligned, disjoint, inside the window */
    assert_int_equal(lay.off_sig, RMACOLL__CTRL_HEADER_BYTES);
    areas[0][0] = lay.off_sig;
    areas[0][1] = (size_t)lay.nsig * 8;
    areas[1][0] = lay.off_local;
    areas[1][1] = 2 * lay.local_rec_bytes;
    areas[2][0] = lay.off_inbox;
    areas[2][1] = 2 * (size_t)nnet * lay.net_rec_bytes;
    areas[3][0] = lay.off_inbox2;
    areas[3][1] = 2 * (size_t)nnet * lay.status_rec_bytes;
    areas[4][0] = lay.off_outbox;
    areas[4][1] = 2 * (size_t)nnet * lay.net_rec_bytes;
    areas[5][0] = lay.off_outbox2;
    areas[5][1] = 2 * (size_t)nnet * lay.status_rec_bytes;
    for (int a = 0; a < 6; a++) {
        assert_int_equal(areas[a][0] % 64, 0);
        if (a > 0) {
            assert_true(areas[a - 1][0] + areas[a - 1][1] <= areas[a][0]);
        }
    }
    assert_true(areas[5][0] + areas[5][1] <= lay.bytes);
    assert_int_equal(lay.bytes % 64, 0);
    assert_true(lay.local_rec_bytes >=
                sizeof(rmacoll__local_rec_t) + 2 * (size_t)topo->nranks * sizeof(int64_t));
    assert_true(lay.net_rec_bytes >= sizeof(rmacoll__net_rec_t));
    assert_true(lay.status_rec_bytes >= sizeof(rmacoll__status_rec_t));
    /* records: inside their areas, one after the other by (parity, peer) */
    for (int par = 0; par < 2; par++) {
        char *base = malloc(lay.bytes);
        rmacoll__local_rec_t *lr = rmacoll__ctrl_local(base, &lay, par);
        assert_ptr_equal((char *)lr, base + lay.off_local + (size_t)par * lay.local_rec_bytes);
        assert_ptr_equal((char *)rmacoll__ctrl_local_counts(lr), (char *)(lr + 1));
        for (int k = 0; k < nnet; k++) {
            size_t m_in = rmacoll__ctrl_rec_off(&lay, RMACOLL__REC_META, 0, k, par);
            size_t m_out = rmacoll__ctrl_rec_off(&lay, RMACOLL__REC_META, 1, k, par);
            size_t a_in = rmacoll__ctrl_rec_off(&lay, RMACOLL__REC_AGREE, 0, k, par);
            size_t a_out = rmacoll__ctrl_rec_off(&lay, RMACOLL__REC_AGREE, 1, k, par);
            size_t slot = (size_t)par * nnet + k;
            assert_int_equal(m_in, lay.off_inbox + slot * lay.net_rec_bytes);
            assert_int_equal(m_out, lay.off_outbox + slot * lay.net_rec_bytes);
            assert_int_equal(a_in, lay.off_inbox2 + slot * lay.status_rec_bytes);
            assert_int_equal(a_out, lay.off_outbox2 + slot * lay.status_rec_bytes);
            assert_int_equal(rmacoll__ctrl_rec_bytes(&lay, RMACOLL__REC_META), lay.net_rec_bytes);
            assert_int_equal(rmacoll__ctrl_rec_bytes(&lay, RMACOLL__REC_AGREE),
                             lay.status_rec_bytes);
        }
        free(base);
    }
}

static void test_layout_and_map(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(topos) / sizeof(topos[0]); t++) {
        rmacoll_topo_t *topo = NULL;
        assert_int_equal(rmacoll__topo_create_sizes(topos[t].nnodes, topos[t].sizes, &topo),
                         RMACOLL_SUCCESS);
        for (int relay = 0; relay <= 1; relay++) {
            rmacoll__plan_cfg_t pcfg = {relay, 1u << 20, 4, 1u << 30, 0, 0, 0, 1};
            for (int r = 0; r < topo->nranks; r++) {
                check_layout(topo, &pcfg, r);
            }
        }
        rmacoll__topo_destroy(topo);
    }
}

/* The network peer sets are symmetric, sorted, and cross nodes only. */
static void test_net_peers(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(topos) / sizeof(topos[0]); t++) {
        rmacoll_topo_t *topo = NULL;
        assert_int_equal(rmacoll__topo_create_sizes(topos[t].nnodes, topos[t].sizes, &topo),
                         RMACOLL_SUCCESS);
        for (int relay = 0; relay <= 1; relay++) {
            rmacoll__plan_cfg_t pcfg = {relay, 1u << 20, 4, 1u << 30, 0, 0, 0, 1};
            int n = topo->nranks;
            int *list = calloc((size_t)n, sizeof(int)), *other = calloc((size_t)n, sizeof(int));
            for (int r = 0; r < n; r++) {
                int k = rmacoll__net_peers(topo, &pcfg, r, list);
                for (int i = 0; i < k; i++) {
                    int p = list[i], m, found = 0;
                    assert_int_not_equal(topo->node_of[p], topo->node_of[r]);
                    if (i > 0) {
                        assert_true(list[i - 1] < p);
                    }
                    m = rmacoll__net_peers(topo, &pcfg, p, other);
                    for (int j = 0; j < m; j++) {
                        found |= other[j] == r;
                    }
                    assert_true(found);
                }
                if (!relay) { /* every rank of another node */
                    assert_int_equal(k, n - topo->node_size[topo->node_of[r]]);
                }
            }
            free(list);
            free(other);
        }
        rmacoll__topo_destroy(topo);
    }
}

static void test_status_merge(void **state)
{
    rmacoll__status_rec_t acc, in;
    char longmsg[600];

    (void)state;
    memset(&acc, 0, sizeof(acc));
    memset(&in, 0, sizeof(in));
    rmacoll__status_merge(&acc, &in); /* success changes nothing */
    assert_int_equal(acc.code, RMACOLL_SUCCESS);
    rmacoll__status_set(&in, RMACOLL_ERR_MISMATCH, 5, "rank 5: mismatch");
    rmacoll__status_merge(&acc, &in);
    assert_int_equal(acc.code, RMACOLL_ERR_MISMATCH);
    assert_int_equal(acc.rank, 5);
    rmacoll__status_set(&in, RMACOLL_ERR_OVERFLOW, 7, "rank 7: overflow");
    rmacoll__status_merge(&acc, &in); /* a higher rank loses */
    assert_int_equal(acc.rank, 5);
    rmacoll__status_set(&in, RMACOLL_ERR_NULL_BUFFER, 2, "rank 2: null");
    rmacoll__status_merge(&acc, &in); /* the lowest rank wins */
    assert_int_equal(acc.rank, 2);
    assert_int_equal(acc.code, RMACOLL_ERR_NULL_BUFFER);
    assert_string_equal(acc.msg, "rank 2: null");
    memset(longmsg, 'x', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    rmacoll__status_set(&in, RMACOLL_ERR_OVERLAP, 0, longmsg);
    assert_int_equal(strlen(in.msg), sizeof(in.msg) - 1);
}

/* Direct streams need every rank of each node on its node's first rank's
 * interface; "" (unknown) never matches. Nodes {0, 2} and {1, 3}. */
static void test_nic_differs(void **state)
{
    static const int keys[4] = {7, 9, 7, 9};
    char names[4][16] = {"tcp lo", "tcp lo", "tcp lo", "tcp lo"};
    rmacoll_topo_t *topo = NULL;

    (void)state;
    assert_int_equal(rmacoll__topo_create(4, keys, &topo), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__ctrl_nic_differs(topo, names[0], sizeof(names[0])), -1);
    strcpy(names[1], "verbs mlx5_0:1"); /* node 1's first rank: its own name */
    strcpy(names[3], "verbs mlx5_0:1");
    assert_int_equal(rmacoll__ctrl_nic_differs(topo, names[0], sizeof(names[0])), -1);
    strcpy(names[3], "verbs mlx5_1:1"); /* another rail */
    assert_int_equal(rmacoll__ctrl_nic_differs(topo, names[0], sizeof(names[0])), 3);
    strcpy(names[2], "");
    assert_int_equal(rmacoll__ctrl_nic_differs(topo, names[0], sizeof(names[0])), 2);
    memset(names, 0, sizeof(names));
    assert_int_equal(rmacoll__ctrl_nic_differs(topo, names[0], sizeof(names[0])), 0);
    rmacoll__topo_destroy(topo);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_map),
        cmocka_unit_test(test_net_peers),
        cmocka_unit_test(test_status_merge),
        cmocka_unit_test(test_nic_differs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
