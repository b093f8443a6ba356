/*
 * test_transport_plugin.c - transports loaded from a shared object named
 * in the config: the example plugin (tests/plugins/transport_example.c,
 * built with the public headers only) carries the network path of the
 * end-to-end cases, relay on and off, as the current ABI and as an
 * adapted ABI-1 table; an ABI-0 plugin, a missing file and a shared object
 * without the entry symbol are refused with messages that say so.
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

#include "core/config/config_internal.h"

#include "core/xport/transport.h"
#include "e2e_body.h"
#include "mprun.h"

static const char *const case_files[] = {
    "all_zero.txt",        "half_idle.txt",          "incast_16_to_0.txt",
    "mismatch_2x2.txt",    "moe_zipf_2x4.txt",       "one_column_zero.txt",
    "single_rank_node_1_4.txt", "sparse_two_cross.txt", "symmetric_small_2x2.txt",
    "uneven_nodes_3_2.txt",
};

static rmacoll_config_t plugin_config(const char *path)
{
    rmacoll_config_t cfg;
    char spec[RMACOLL_CONFIG_STR_MAX];

    rmacoll_config_init(&cfg);
    cfg.timeout_ms = 20000;
    snprintf(spec, sizeof(spec), "plugin:%s", path);
    assert_int_equal(rmacoll_config_set(&cfg, "transports.inter_node", spec),
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

/* Every case, three calls back to back, relay on and off. */
static void test_plugin_cases(void **state)
{
    rmacoll_config_t cfg = plugin_config(RMACOLL_TEST_TRANSPORT_PLUGIN);

    (void)state;
    for (int relay = 1; relay >= 0; relay--) {
        cfg.relay_enabled = relay;
        run_cases(&cfg, 3);
    }
}

/* The same plugin exporting the flat ABI-1 table: adapted by the core. */
static void test_plugin_v1_adapted(void **state)
{
    rmacoll_config_t cfg = plugin_config(RMACOLL_TEST_TRANSPORT_PLUGIN_V1);
    rmacoll__tops_t t;
    char err[512];

    (void)state;
    assert_int_equal(rmacoll__tops_find(cfg.inter_node, "transports.inter_node", &t, err,
                                        sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_string_equal(t.name, "example_cma");
    assert_int_equal(t.abi_version, 1);
    assert_int_equal(t.caps, RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST);
    /* ops it lacks are typed stubs, never NULL */
    assert_non_null(t.stream.post_puts_stream);
    assert_int_equal(t.stream.post_puts_stream(NULL, NULL, 0, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_int_equal(t.mem.mem_export(NULL, NULL, 0, NULL), RMACOLL_ERR_UNSUPPORTED);
    rmacoll__tops_release(&t);
    run_cases(&cfg, 2);
}

/* Refusals name the plugin, the key and the reason. */
static void test_plugin_refused(void **state)
{
    rmacoll__tops_t t;
    char err[512], spec[RMACOLL_CONFIG_STR_MAX];

    (void)state;
    snprintf(spec, sizeof(spec), "plugin:%s", RMACOLL_TEST_TRANSPORT_PLUGIN_V0);
    assert_int_equal(rmacoll__tops_find(spec, "transports.inter_node", &t, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "transports.inter_node"));
    assert_non_null(strstr(err, RMACOLL_TEST_TRANSPORT_PLUGIN_V0));
    assert_non_null(strstr(err, "built against transport ABI version 0"));
    assert_non_null(strstr(err, "loads versions 2 and 1"));

    assert_int_equal(rmacoll__tops_find("plugin:/nonexistent/libx.so", "transports.inter_node",
                                        &t, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "cannot load transport plugin '/nonexistent/libx.so'"));

    snprintf(spec, sizeof(spec), "plugin:%s", RMACOLL_TEST_NOT_A_PLUGIN);
    assert_int_equal(rmacoll__tops_find(spec, "transports.intra_node", &t, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "is not a transport plugin"));

    assert_int_equal(rmacoll__tops_find("nosuch", "transports.inter_node", &t, err,
                                        sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "transports.inter_node 'nosuch' is not built in"));
}

/* A communicator whose config names a refused plugin fails on every rank
 * with RMACOLL_ERR_CONFIG. */
static void test_plugin_refused_comm(void **state)
{
    static const int node_of[] = {0, 1};
    rmacoll_config_t cfg = plugin_config(RMACOLL_TEST_TRANSPORT_PLUGIN_V0);
    rmacoll_case_t *c = load("symmetric_small_2x2.txt");
    e2e_arg_t arg = {c, 1, 1, RMACOLL_SUCCESS, 1};
    mprun_opts_t o = {2, node_of, &cfg, 120, -1};
    int codes[2] = {0, 0};

    (void)state;
    mprun(&o, e2e_body, &arg, codes);
    rmacoll_case_free(c);
    assert_int_equal(codes[0], MPRUN_CREATE_FAILED);
    assert_int_equal(codes[1], MPRUN_CREATE_FAILED);
}

/* Writes text to a fresh temporary file; returns its path in buf. */
static const char *write_yaml(const char *text, char *buf, size_t len)
{
    int fd;

    snprintf(buf, len, "/tmp/rmacoll-tp-cfg-XXXXXX");
    fd = mkstemp(buf);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return buf;
}

/* The plugin's own key (example_cma.shm_prefix, declared in its ops):
 * YAML, environment and rmacoll_config_set reach it, unknown plugin keys
 * are errors naming the key and the line, and the value reaches the
 * plugin's init (a bad prefix fails create on every rank, a good one
 * carries a case). */
static void test_plugin_keys(void **state)
{
    static const int node_of[] = {0, 1};
    rmacoll_config_t cfg, plain;
    char yaml[1024], path[64], err[512], buf[RMACOLL_CONFIG_STR_MAX];
    uint64_t h;

    (void)state;
    /* Before the plugin is named anywhere its keys are unknown. */
    rmacoll_config_init(&plain);
    assert_int_equal(rmacoll_config_set(&plain, "example_cma.shm_prefix", "/x"),
                     RMACOLL_ERR_CONFIG);

    /* YAML: the plugin named in the same file. */
    snprintf(yaml, sizeof(yaml),
             "transports:\n  inter_node: plugin:%s\nexample_cma:\n  shm_prefix: /rmx-yaml\n",
             RMACOLL_TEST_TRANSPORT_PLUGIN);
    unsetenv("RMACOLL_EXAMPLE_CMA_SHM_PREFIX");
    assert_int_equal(rmacoll_config_load(write_yaml(yaml, path, sizeof(path)), &cfg, err,
                                         sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_config_get(&cfg, "example_cma.shm_prefix", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "/rmx-yaml");
    assert_int_equal(rmacoll__config_check(&cfg, err, sizeof(err)), RMACOLL_SUCCESS);

    /* The environment over the file. */
    setenv("RMACOLL_EXAMPLE_CMA_SHM_PREFIX", "/rmx-env", 1);
    assert_int_equal(rmacoll_config_load(path, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    unsetenv("RMACOLL_EXAMPLE_CMA_SHM_PREFIX");
    assert_int_equal(rmacoll_config_get(&cfg, "example_cma.shm_prefix", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "/rmx-env");
    unlink(path);

    /* An unknown key of the plugin: named, with its line. */
    snprintf(yaml, sizeof(yaml),
             "transports:\n  inter_node: plugin:%s\nexample_cma:\n  shm_prefix: /a\n"
             "  no_such: 1\n", RMACOLL_TEST_TRANSPORT_PLUGIN);
    assert_int_equal(rmacoll_config_load(write_yaml(yaml, path, sizeof(path)), &cfg, err,
                                         sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    unlink(path);
    assert_non_null(strstr(err, "example_cma.no_such"));
    assert_non_null(strstr(err, "line 5"));

    /* rmacoll_config_set / get; the default reads back; the hash sees it. */
    cfg = plugin_config(RMACOLL_TEST_TRANSPORT_PLUGIN);
    assert_int_equal(rmacoll_config_get(&cfg, "example_cma.shm_prefix", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "/rmacoll-excma");
    h = rmacoll__config_hash(&cfg);
    assert_int_equal(rmacoll_config_set(&cfg, "example_cma.shm_prefix", "/rmx-set"),
                     RMACOLL_SUCCESS);
    assert_true(rmacoll__config_hash(&cfg) != h);
    assert_int_equal(rmacoll_config_get(&cfg, "example_cma.shm_prefix", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "/rmx-set");
    assert_int_equal(rmacoll_config_set(&cfg, "example_cma.no_such", "1"), RMACOLL_ERR_CONFIG);
    /* back to the default: the same bytes as never set */
    plain = cfg;
    assert_int_equal(rmacoll_config_set(&plain, "example_cma.shm_prefix", "/rmacoll-excma"),
                     RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__config_hash(&plain), h);

    /* The value reaches the plugin: a good prefix carries a case ... */
    {
        rmacoll_case_t *c = load("symmetric_small_2x2.txt");
        e2e_arg_t arg = {c, 1, 1, RMACOLL_SUCCESS, 1};
        mprun_opts_t o = {2, node_of, &cfg, 120, -1};
        int codes[2] = {-1, -1};

        assert_int_equal(mprun(&o, e2e_body, &arg, codes), 0);
        assert_int_equal(codes[0], 0);
        assert_int_equal(codes[1], 0);

        /* ... a bad one fails create on every rank. */
        assert_int_equal(rmacoll_config_set(&cfg, "example_cma.shm_prefix", "bad/prefix"),
                         RMACOLL_SUCCESS);
        codes[0] = codes[1] = 0;
        mprun(&o, e2e_body, &arg, codes);
        rmacoll_case_free(c);
        assert_int_equal(codes[0], MPRUN_CREATE_FAILED);
        assert_int_equal(codes[1], MPRUN_CREATE_FAILED);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugin_refused),
        cmocka_unit_test(test_plugin_keys),
        cmocka_unit_test(test_plugin_refused_comm),
        cmocka_unit_test(test_plugin_v1_adapted),
        cmocka_unit_test(test_plugin_cases),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
