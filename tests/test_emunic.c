/*
 * test_emunic.c - the emulated NIC (plugins/emunic, a plugin built with
 * the public headers only) as the network transport of the end-to-end
 * cases, host memory, ranks as processes on virtual nodes: every receive
 * byte checked against sentinel-filled gaps, relay on and off, the rate
 * capped (so that puts wait in the plugin's token buckets and signals are
 * raised by its progress, after the emulated wire and latency) and
 * uncapped; its configuration keys reach it (a malformed rate fails
 * create on every rank). Device memory: test_gpu_e2e's
 * test_cross_node_emunic (label gpu).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static rmacoll_config_t emunic_config(const char *rate, const char *latency_us)
{
    rmacoll_config_t cfg;
    char spec[RMACOLL_CONFIG_STR_MAX];

    rmacoll_config_init(&cfg);
    cfg.timeout_ms = 20000;
    snprintf(spec, sizeof(spec), "plugin:%s", RMACOLL_TEST_EMUNIC_PLUGIN);
    assert_int_equal(rmacoll_config_set(&cfg, "transports.inter_node", spec), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_config_set(&cfg, "emunic.rate", rate), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_config_set(&cfg, "emunic.latency_us", latency_us),
                     RMACOLL_SUCCESS);
    return cfg;
}

static void run_cases(const rmacoll_config_t *cfg, int ncalls)
{
    for (size_t k = 0; k < sizeof(case_files) / sizeof(case_files[0]); k++) {
        rmacoll_case_t *c = load(case_files[k]);
        int codes[64] = {0};
        e2e_arg_t arg = {c, 1, ncalls,
                         c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS, 1};
        mprun_opts_t o = {c->nranks, c->node_of, cfg, 240, -1};
        int failed;

        print_message("case %s (relay %s)\n", case_files[k], cfg->relay_enabled ? "on" : "off");
        failed = mprun(&o, e2e_body, &arg, codes);
        for (int r = 0; failed && r < c->nranks; r++) {
            print_message("rank %d exit %d\n", r, codes[r]);
        }
        rmacoll_case_free(c);
        assert_int_equal(failed, 0);
    }
}

/* Every case, back-to-back calls, relay on and off, at a capped rate per
 * rail (a list: rails 0 and 1 differ) with a latency: the rate is low
 * enough that puts queue in the buckets (1 GB/s, 20 us). */
static void test_emunic_capped(void **state)
{
    rmacoll_config_t cfg = emunic_config("1e9,0.5e9", "20");

    (void)state;
    for (int relay = 1; relay >= 0; relay--) {
        cfg.relay_enabled = relay;
        run_cases(&cfg, 3);
    }
}

/* No cap (rate 0), no latency: signals as soon as the bytes are copied. */
static void test_emunic_uncapped(void **state)
{
    rmacoll_config_t cfg = emunic_config("0", "0");

    (void)state;
    run_cases(&cfg, 2);
}

/* Its keys: known once the plugin is named, defaults read back, a
 * malformed rate fails create on every rank with the plugin's refusal. */
static void test_emunic_keys(void **state)
{
    static const int node_of[] = {0, 1};
    rmacoll_config_t cfg = emunic_config("48.5e9", "3");
    char buf[RMACOLL_CONFIG_STR_MAX];
    rmacoll_case_t *c = load("symmetric_small_2x2.txt");
    e2e_arg_t arg = {c, 1, 1, RMACOLL_SUCCESS, 1};
    mprun_opts_t o = {2, node_of, &cfg, 120, -1};
    int codes[2] = {-1, -1};

    (void)state;
    assert_int_equal(rmacoll_config_get(&cfg, "emunic.burst", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_config_get(&cfg, "emunic.rate", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "48.5e9");
    assert_int_equal(rmacoll_config_set(&cfg, "emunic.no_such", "1"), RMACOLL_ERR_CONFIG);
    assert_int_equal(mprun(&o, e2e_body, &arg, codes), 0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], 0);

    assert_int_equal(rmacoll_config_set(&cfg, "emunic.rate", "fast"), RMACOLL_SUCCESS);
    codes[0] = codes[1] = 0;
    mprun(&o, e2e_body, &arg, codes);
    assert_int_equal(codes[0], MPRUN_CREATE_FAILED);
    assert_int_equal(codes[1], MPRUN_CREATE_FAILED);
    rmacoll_case_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emunic_keys),
        cmocka_unit_test(test_emunic_uncapped),
        cmocka_unit_test(test_emunic_capped),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
