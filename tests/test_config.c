/*
 * test_config.c - configuration: defaults, YAML file, RMACOLL_<KEY>
 * environment overrides, error messages (key and line), sizes, hash,
 * dump round trip, whole-struct check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/config/config_internal.h"
#include "rmacoll.h"

/* Every environment variable the loader reads, spelled out (not derived),
 * so the naming rule itself is under test. */
static const char *const env_names[] = {
    "RMACOLL_TRANSPORTS_INTRA_NODE", "RMACOLL_TRANSPORTS_INTER_NODE",
    "RMACOLL_TRANSPORTS_DEVICE_INTER_NODE", "RMACOLL_SCHEDULER",
    "RMACOLL_SCHEDULER_PLUGIN",      "RMACOLL_SCHEDULER_SEED",        "RMACOLL_RELAY_ENABLED",
    "RMACOLL_RELAY_BUFFER_BYTES",    "RMACOLL_RELAY_SLOTS",           "RMACOLL_RELAY_DIRECT_MIN_BYTES",
    "RMACOLL_MAX_TASK_BYTES",
    "RMACOLL_EAGER_MAX_BYTES",       "RMACOLL_NODE_EAGER_MAX_BYTES",  "RMACOLL_MERGE_MAX_PUTS",        "RMACOLL_TIMEOUT_MS",            "RMACOLL_HEARTBEAT_MS",            "RMACOLL_NVLINK_KERNEL_THRESHOLD", "RMACOLL_OFI_PROVIDER",
    "RMACOLL_OFI_IFACE",             "RMACOLL_OFI_HMEM_DEVICE_ONLY",  "RMACOLL_OFI_DELIVERY_COMPLETE",
    "RMACOLL_VERBS_DEVICE",          "RMACOLL_VERBS_PORT",
    "RMACOLL_VERBS_GID_INDEX",       "RMACOLL_VERBS_MTU",             "RMACOLL_VERBS_TRAFFIC_CLASS",
    "RMACOLL_VERBS_SERVICE_LEVEL",   "RMACOLL_VERBS_MAX_INFLIGHT",    "RMACOLL_LOG_LEVEL",
    "RMACOLL_LOG_SUBSYSTEMS",
};
#define NENV (sizeof(env_names) / sizeof(env_names[0]))

static char tmp_path[64];

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < NENV; i++) {
        unsetenv(env_names[i]);
    }
    unsetenv("RMACOLL_CONFIG");
    return 0;
}

static int cleanup(void **state)
{
    if (tmp_path[0] != '\0') {
        unlink(tmp_path);
        tmp_path[0] = '\0';
    }
    return clean_env(state);
}

/* Writes text to a fresh temporary file; returns its path. */
static const char *write_tmp(const char *text)
{
    int fd;
    size_t n = strlen(text);

    if (tmp_path[0] != '\0') {
        unlink(tmp_path);
    }
    snprintf(tmp_path, sizeof(tmp_path), "/tmp/rmacoll_test_config_XXXXXX");
    fd = mkstemp(tmp_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return tmp_path;
}

/* Loads text; expects failure with RMACOLL_ERR_CONFIG; returns the message. */
static const char *load_fails(const char *text, char *err, size_t len)
{
    rmacoll_config_t cfg;

    rmacoll_config_init(&cfg);
    assert_int_equal(rmacoll_config_load(write_tmp(text), &cfg, err, len), RMACOLL_ERR_CONFIG);
    return err;
}

#define assert_has(hay, needle)                                                   \
    do {                                                                          \
        if (strstr((hay), (needle)) == NULL) {                                    \
            fail_msg("'%s' does not contain '%s'", (hay), (needle));              \
        }                                                                         \
    } while (0)

static void test_defaults(void **state)
{
    rmacoll_config_t cfg;
    rmacoll_config_t loaded;
    char err[256];

    (void)state;
    memset(&cfg, 0xa5, sizeof(cfg));
    rmacoll_config_init(&cfg);
    assert_int_equal(cfg.struct_size, sizeof(rmacoll_config_t));
    assert_string_equal(cfg.intra_node, "ce");
    assert_string_equal(cfg.inter_node, "ofi");
    assert_string_equal(cfg.scheduler, "node_shift");
    assert_string_equal(cfg.scheduler_plugin, "");
    assert_int_equal(cfg.scheduler_seed, 1);
    assert_int_equal(cfg.relay_enabled, 1);
    assert_int_equal(cfg.relay_buffer_bytes, 64ull << 20);
    assert_int_equal(cfg.relay_slots, 4);
    assert_int_equal(cfg.max_task_bytes, 1ull << 30);
    {
        uint64_t eager = 0;
        assert_int_equal(rmacoll__config_get_size(&cfg, "eager_max_bytes", &eager),
                         RMACOLL_SUCCESS);
        assert_int_equal(eager, 131072);
        assert_int_equal(rmacoll__config_get_size(&cfg, "node_eager_max_bytes", &eager),
                         RMACOLL_SUCCESS);
        assert_int_equal(eager, 1048576);
    }
    assert_int_equal(cfg.timeout_ms, 30000);
    assert_int_equal(cfg.nvlink_kernel_threshold, 256u << 10);
    assert_string_equal(cfg.ofi_provider, "auto");
    assert_string_equal(cfg.ofi_iface, "");
    assert_string_equal(cfg.verbs_device, "");
    assert_int_equal(cfg.verbs_port, 1);
    assert_int_equal(cfg.verbs_gid_index, -1);
    assert_int_equal(cfg.verbs_mtu, 0);
    assert_int_equal(cfg.verbs_traffic_class, 0);
    assert_int_equal(cfg.verbs_service_level, 0);
    assert_int_equal(cfg.verbs_max_inflight, 128);
    assert_int_equal(cfg.log_level, RMACOLL_LOG_WARN);
    assert_int_equal(cfg.log_subsystems, RMACOLL_LOG_SUBSYS_ALL);

    /* No file, no environment: load gives the same bytes. */
    memset(&loaded, 0x5a, sizeof(loaded));
    assert_int_equal(rmacoll_config_load(NULL, &loaded, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_string_equal(err, "");
    assert_memory_equal(&loaded, &cfg, sizeof(cfg));
    assert_int_equal(rmacoll__config_check(&cfg, err, sizeof(err)), RMACOLL_SUCCESS);
}

static void test_key_table(void **state)
{
    rmacoll_config_t cfg;
    size_t n = 0;
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&n);
    char val[256];

    (void)state;
    assert_int_equal(n, NENV);
    rmacoll_config_init(&cfg);
    for (size_t i = 0; i < n; i++) {
        char env[96];
        size_t k = 0;

        assert_non_null(keys[i].key);
        assert_non_null(keys[i].type);
        assert_non_null(keys[i].meaning);
        assert_true(strlen(keys[i].meaning) > 10);
        /* The default column is what the defaults print as. */
        assert_true(rmacoll__config_value_string(&cfg, i, val, sizeof(val)) >= 0);
        assert_string_equal(val, keys[i].default_str);
        /* And the environment name is RMACOLL_ + KEY with dots as underscores. */
        k = (size_t)snprintf(env, sizeof(env), "RMACOLL_");
        for (const char *p = keys[i].key; *p; p++) {
            env[k++] = *p == '.' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        }
        env[k] = '\0';
        assert_string_equal(env, env_names[i]);
    }
    assert_int_equal(rmacoll__config_value_string(&cfg, n, val, sizeof(val)), -1);
}

static const char full_yaml[] =
    "# every key, none at its default\n"
    "transports: {intra_node: nvlink_kernel, inter_node: verbs}\n"
    "scheduler: xor\n"
    "scheduler_plugin: /opt/lib/libmysched.so\n"
    "scheduler_seed: 12345678901234\n"
    "relay:\n"
    "  enabled: false\n"
    "  buffer_bytes: 128MiB\n"
    "  slots: 16\n"
    "max_task_bytes: 2GiB\n"
    "timeout_ms: 1500\n"
    "nvlink_kernel_threshold: 1048576\n"
    "ofi: {provider: \"shm\", iface: lo}\n"
    "verbs:\n"
    "  device: mlx5_3\n"
    "  port: 2\n"
    "  gid_index: 3\n"
    "  mtu: 4096\n"
    "  traffic_class: 106\n"
    "  service_level: 5\n"
    "  max_inflight: 256\n"
    "log:\n"
    "  level: debug\n"
    "  subsystems: [core, plan, transport]\n";

static void check_full(const rmacoll_config_t *cfg)
{
    assert_string_equal(cfg->intra_node, "nvlink_kernel");
    assert_string_equal(cfg->inter_node, "verbs");
    assert_string_equal(cfg->scheduler, "xor");
    assert_string_equal(cfg->scheduler_plugin, "/opt/lib/libmysched.so");
    assert_int_equal(cfg->scheduler_seed, 12345678901234ull);
    assert_int_equal(cfg->relay_enabled, 0);
    assert_int_equal(cfg->relay_buffer_bytes, 128ull << 20);
    assert_int_equal(cfg->relay_slots, 16);
    assert_int_equal(cfg->max_task_bytes, 2ull << 30);
    assert_int_equal(cfg->timeout_ms, 1500);
    assert_int_equal(cfg->nvlink_kernel_threshold, 1048576);
    assert_string_equal(cfg->ofi_provider, "shm");
    assert_string_equal(cfg->ofi_iface, "lo");
    assert_string_equal(cfg->verbs_device, "mlx5_3");
    assert_int_equal(cfg->verbs_port, 2);
    assert_int_equal(cfg->verbs_gid_index, 3);
    assert_int_equal(cfg->verbs_mtu, 4096);
    assert_int_equal(cfg->verbs_traffic_class, 106);
    assert_int_equal(cfg->verbs_service_level, 5);
    assert_int_equal(cfg->verbs_max_inflight, 256);
    assert_int_equal(cfg->log_level, RMACOLL_LOG_DEBUG);
    assert_int_equal(cfg->log_subsystems, RMACOLL_LOG_SUBSYS_CORE | RMACOLL_LOG_SUBSYS_PLAN |
                                              RMACOLL_LOG_SUBSYS_TRANSPORT);
}

static void test_full_file(void **state)
{
    rmacoll_config_t cfg;
    char err[256];

    (void)state;
    assert_int_equal(rmacoll_config_load(write_tmp(full_yaml), &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_string_equal(err, "");
    check_full(&cfg);

    /* The same file named by RMACOLL_CONFIG when path is NULL. */
    setenv("RMACOLL_CONFIG", tmp_path, 1);
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    check_full(&cfg);

    /* An explicit path wins over RMACOLL_CONFIG. */
    setenv("RMACOLL_CONFIG", "/nonexistent/rmacoll.yaml", 1);
    assert_int_equal(rmacoll_config_load(tmp_path, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    check_full(&cfg);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "/nonexistent/rmacoll.yaml");
}

static void test_partial_and_empty_file(void **state)
{
    rmacoll_config_t cfg;
    rmacoll_config_t def;
    char err[256];

    (void)state;
    rmacoll_config_init(&def);
    assert_int_equal(rmacoll_config_load(write_tmp(""), &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_memory_equal(&cfg, &def, sizeof(cfg));
    assert_int_equal(rmacoll_config_load(write_tmp("# only a comment\n\n"), &cfg, err,
                                         sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_memory_equal(&cfg, &def, sizeof(cfg));

    /* One nested key: its siblings keep their defaults. */
    assert_int_equal(rmacoll_config_load(write_tmp("relay: {slots: 2}\nscheduler: shift\n"),
                                         &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.relay_slots, 2);
    assert_int_equal(cfg.relay_enabled, 1);
    assert_int_equal(cfg.relay_buffer_bytes, 64ull << 20);
    assert_string_equal(cfg.scheduler, "shift");
    def.relay_slots = 2;
    snprintf(def.scheduler, sizeof(def.scheduler), "shift");
    memset(def.scheduler + 5, 0, sizeof(def.scheduler) - 5);
    assert_memory_equal(&cfg, &def, sizeof(cfg));

    /* log.subsystems: [all]; relay.enabled spelled 1. */
    assert_int_equal(rmacoll_config_load(write_tmp("log: {subsystems: [all], level: trace}\n"
                                                   "relay: {enabled: 1}\n"),
                                         &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.log_subsystems, RMACOLL_LOG_SUBSYS_ALL);
    assert_int_equal(cfg.log_level, RMACOLL_LOG_TRACE);
    assert_int_equal(cfg.relay_enabled, 1);
}

/* One override per key: variable, value, and what it must set. */
static void test_env_every_key(void **state)
{
    rmacoll_config_t cfg;
    char err[256];

    (void)state;
    setenv("RMACOLL_TRANSPORTS_INTRA_NODE", "auto", 1);
    setenv("RMACOLL_TRANSPORTS_INTER_NODE", "verbs", 1);
    setenv("RMACOLL_TRANSPORTS_DEVICE_INTER_NODE", "auto", 1); /* default staged */
    setenv("RMACOLL_SCHEDULER", "random", 1);
    setenv("RMACOLL_SCHEDULER_PLUGIN", "/tmp/x.so", 1);
    setenv("RMACOLL_SCHEDULER_SEED", "0x10", 1);
    setenv("RMACOLL_RELAY_ENABLED", "0", 1);
    setenv("RMACOLL_RELAY_BUFFER_BYTES", "1M", 1);
    setenv("RMACOLL_RELAY_SLOTS", "8", 1);
    setenv("RMACOLL_RELAY_DIRECT_MIN_BYTES", "64K", 1);
    setenv("RMACOLL_MAX_TASK_BYTES", "4KiB", 1);
    setenv("RMACOLL_EAGER_MAX_BYTES", "0", 1);
    setenv("RMACOLL_NODE_EAGER_MAX_BYTES", "1KiB", 1);
    setenv("RMACOLL_MERGE_MAX_PUTS", "3", 1);
    setenv("RMACOLL_TIMEOUT_MS", "250", 1);
    setenv("RMACOLL_HEARTBEAT_MS", "0", 1);
    setenv("RMACOLL_NVLINK_KERNEL_THRESHOLD", "512B", 1);
    setenv("RMACOLL_OFI_PROVIDER", "sockets", 1);
    setenv("RMACOLL_OFI_IFACE", "eth0", 1);
    setenv("RMACOLL_OFI_HMEM_DEVICE_ONLY", "yes", 1);
    setenv("RMACOLL_OFI_DELIVERY_COMPLETE", "on", 1);
    setenv("RMACOLL_VERBS_DEVICE", "mlx5_1", 1);
    setenv("RMACOLL_VERBS_PORT", "2", 1);
    setenv("RMACOLL_VERBS_GID_INDEX", "7", 1);
    setenv("RMACOLL_VERBS_MTU", "1024", 1);
    setenv("RMACOLL_VERBS_TRAFFIC_CLASS", "255", 1);
    setenv("RMACOLL_VERBS_SERVICE_LEVEL", "15", 1);
    setenv("RMACOLL_VERBS_MAX_INFLIGHT", "64", 1);
    setenv("RMACOLL_LOG_LEVEL", "error", 1);
    setenv("RMACOLL_LOG_SUBSYSTEMS", "proxy,config", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_string_equal(cfg.intra_node, "auto");
    assert_string_equal(cfg.inter_node, "verbs");
    {
        char v[RMACOLL_CONFIG_STR_MAX];
        assert_int_equal(rmacoll_config_get(&cfg, "transports.device_inter_node", v,
                                            sizeof(v)), RMACOLL_SUCCESS);
        assert_string_equal(v, "auto");
    }
    assert_string_equal(cfg.scheduler, "random");
    assert_string_equal(cfg.scheduler_plugin, "/tmp/x.so");
    assert_int_equal(cfg.scheduler_seed, 16);
    assert_int_equal(cfg.relay_enabled, 0);
    assert_int_equal(cfg.relay_buffer_bytes, 1u << 20);
    assert_int_equal(cfg.relay_slots, 8);
    assert_int_equal(cfg.max_task_bytes, 4096);
    {
        uint64_t eager = 1;
        assert_int_equal(rmacoll__config_get_size(&cfg, "eager_max_bytes", &eager),
                         RMACOLL_SUCCESS);
        assert_int_equal(eager, 0); /* 0 (off) is a value */
        assert_int_equal(rmacoll__config_get_size(&cfg, "node_eager_max_bytes", &eager),
                         RMACOLL_SUCCESS);
        assert_int_equal(eager, 1024);
        assert_int_equal(rmacoll__config_get_size(&cfg, "relay.direct_min_bytes", &eager),
                         RMACOLL_SUCCESS);
        assert_int_equal(eager, 65536);
        assert_int_equal(rmacoll__config_get_count(&cfg, "merge_max_puts", &eager),
                         RMACOLL_SUCCESS);
        assert_int_equal(eager, 3);
        assert_int_equal(rmacoll__config_get_count(&cfg, "eager_max_bytes", &eager),
                         RMACOLL_ERR_CONFIG); /* a size, not a count */
    }
    assert_int_equal(cfg.timeout_ms, 250);
    assert_int_equal(cfg.nvlink_kernel_threshold, 512);
    assert_string_equal(cfg.ofi_provider, "sockets");
    assert_string_equal(cfg.ofi_iface, "eth0");
    {
        char v[RMACOLL_CONFIG_STR_MAX];
        assert_int_equal(rmacoll_config_get(&cfg, "ofi.delivery_complete", v, sizeof(v)),
                         RMACOLL_SUCCESS);
        assert_string_equal(v, "true");
    }
    assert_string_equal(cfg.verbs_device, "mlx5_1");
    assert_int_equal(cfg.verbs_port, 2);
    assert_int_equal(cfg.verbs_gid_index, 7);
    assert_int_equal(cfg.verbs_mtu, 1024);
    assert_int_equal(cfg.verbs_traffic_class, 255);
    assert_int_equal(cfg.verbs_service_level, 15);
    assert_int_equal(cfg.verbs_max_inflight, 64);
    assert_int_equal(cfg.log_level, RMACOLL_LOG_ERROR);
    assert_int_equal(cfg.log_subsystems, RMACOLL_LOG_SUBSYS_PROXY | RMACOLL_LOG_SUBSYS_CONFIG);

    /* Every variable differs from the default: each one did something. */
    rmacoll_config_t def;
    rmacoll_config_init(&def);
    for (size_t i = 0; i < NENV; i++) {
        char a[256];
        char b[256];
        rmacoll__config_value_string(&cfg, i, a, sizeof(a));
        rmacoll__config_value_string(&def, i, b, sizeof(b));
        if (strcmp(a, b) == 0) {
            fail_msg("%s left its key at the default %s", env_names[i], a);
        }
    }
}

static void test_env_over_file(void **state)
{
    rmacoll_config_t cfg;
    char err[256];

    (void)state;
    setenv("RMACOLL_RELAY_SLOTS", "3", 1);
    setenv("RMACOLL_RELAY_ENABLED", "true", 1);
    setenv("RMACOLL_OFI_IFACE", "", 1); /* empty is a value: overrides lo */
    assert_int_equal(rmacoll_config_load(write_tmp(full_yaml), &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.relay_slots, 3);
    assert_int_equal(cfg.relay_enabled, 1);
    assert_string_equal(cfg.ofi_iface, "");
    assert_string_equal(cfg.scheduler, "xor"); /* from the file */
}

static void test_env_bad_values(void **state)
{
    static const struct {
        const char *name;
        const char *value;
        const char *key;
    } bad[] = {
        {"RMACOLL_RELAY_SLOTS", "abc", "relay.slots"},
        {"RMACOLL_RELAY_SLOTS", "0", "relay.slots"},
        {"RMACOLL_RELAY_SLOTS", "4294967296", "relay.slots"},
        {"RMACOLL_RELAY_ENABLED", "maybe", "relay.enabled"},
        {"RMACOLL_RELAY_BUFFER_BYTES", "64XB", "relay.buffer_bytes"},
        {"RMACOLL_RELAY_BUFFER_BYTES", "16EiB", "relay.buffer_bytes"},
        {"RMACOLL_TRANSPORTS_INTRA_NODE", "nvlink", "transports.intra_node"},
        {"RMACOLL_SCHEDULER", "", "scheduler"},
        {"RMACOLL_TIMEOUT_MS", "0", "timeout_ms"},
        {"RMACOLL_TIMEOUT_MS", "-5", "timeout_ms"},
        {"RMACOLL_MAX_TASK_BYTES", "0", "max_task_bytes"},
        {"RMACOLL_MERGE_MAX_PUTS", "0", "merge_max_puts"},
        {"RMACOLL_EAGER_MAX_BYTES", "1048577", "eager_max_bytes"},
        {"RMACOLL_EAGER_MAX_BYTES", "8XB", "eager_max_bytes"},
        {"RMACOLL_NODE_EAGER_MAX_BYTES", "2MiB", "node_eager_max_bytes"},
        {"RMACOLL_VERBS_MTU", "1500", "verbs.mtu"},
        {"RMACOLL_VERBS_GID_INDEX", "-2", "verbs.gid_index"},
        {"RMACOLL_VERBS_PORT", "0", "verbs.port"},
        {"RMACOLL_LOG_LEVEL", "verbose", "log.level"},
        {"RMACOLL_LOG_SUBSYSTEMS", "core,gpu", "log.subsystems"},
    };
    rmacoll_config_t cfg;
    rmacoll_config_t before;
    char err[512];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&cfg, 0x33, sizeof(cfg));
        memcpy(&before, &cfg, sizeof(cfg));
        setenv(bad[i].name, bad[i].value, 1);
        assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
        assert_has(err, bad[i].name);
        assert_has(err, bad[i].key);
        /* A failed load leaves cfg alone. */
        assert_memory_equal(&cfg, &before, sizeof(cfg));
        unsetenv(bad[i].name);
    }
}

/* log.subsystems '^a,b': every subsystem but a and b (as NCCL_DEBUG_SUBSYS),
 * from the environment, a file and rmacoll_config_set; '^' alone and a bad
 * name after it are refused naming the key. */
static void test_subsys_exclude(void **state)
{
    const uint32_t all = RMACOLL_LOG_SUBSYS_ALL;
    rmacoll_config_t cfg;
    char err[512];

    (void)state;
    setenv("RMACOLL_LOG_SUBSYSTEMS", "^plan", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_int_equal(cfg.log_subsystems, all & ~RMACOLL_LOG_SUBSYS_PLAN);
    setenv("RMACOLL_LOG_SUBSYSTEMS", " ^PLAN, sched", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_int_equal(cfg.log_subsystems,
                     all & ~(RMACOLL_LOG_SUBSYS_PLAN | RMACOLL_LOG_SUBSYS_SCHED));
    {
        /* written back as given, and read back to the same mask */
        rmacoll_config_t again;
        char text[128];

        assert_int_equal(rmacoll_config_get(&cfg, "log.subsystems", text, sizeof(text)),
                         RMACOLL_SUCCESS);
        assert_string_equal(text, "[^plan, sched]");
        rmacoll_config_init(&again);
        assert_int_equal(rmacoll_config_set(&again, "log.subsystems", text), RMACOLL_SUCCESS);
        assert_int_equal(again.log_subsystems, cfg.log_subsystems);
    }
    setenv("RMACOLL_LOG_SUBSYSTEMS", "^all", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_int_equal(cfg.log_subsystems, 0);
    setenv("RMACOLL_LOG_SUBSYSTEMS", "^", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "RMACOLL_LOG_SUBSYSTEMS");
    assert_has(err, "log.subsystems");
    setenv("RMACOLL_LOG_SUBSYSTEMS", "^plan,gpu", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "'gpu' is not a subsystem");
    /* '^' only before the first name */
    setenv("RMACOLL_LOG_SUBSYSTEMS", "core,^plan", 1);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "'^plan' is not a subsystem");
    unsetenv("RMACOLL_LOG_SUBSYSTEMS");

    assert_int_equal(rmacoll_config_load(write_tmp("log: {subsystems: [\"^proxy\", transport]}\n"),
                                         &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.log_subsystems,
                     all & ~(RMACOLL_LOG_SUBSYS_PROXY | RMACOLL_LOG_SUBSYS_TRANSPORT));
    rmacoll_config_init(&cfg);
    assert_int_equal(rmacoll_config_set(&cfg, "log.subsystems", "^config"), RMACOLL_SUCCESS);
    assert_int_equal(cfg.log_subsystems, all & ~RMACOLL_LOG_SUBSYS_CONFIG);
}

static void test_unknown_key(void **state)
{
    char err[512];

    (void)state;
    load_fails("scheduler: shift\n"
               "relay:\n"
               "  enabled: true\n"
               "  # a comment\n"
               "  slots: 4\n"
               "  bogus: 1\n",
               err, sizeof(err));
    assert_has(err, "unknown key 'relay.bogus'");
    assert_has(err, "line 6");
    assert_has(err, "enabled, buffer_bytes, slots");

    load_fails("scheduler: shift\n\nschedular: xor\n", err, sizeof(err));
    assert_has(err, "'schedular'");
    assert_has(err, "line 3");

    load_fails("timeout_ms: 5\nverbs: {device: mlx5_0,\n  gid: 3}\n", err, sizeof(err));
    assert_has(err, "verbs.gid");
    assert_has(err, "line 3");

    /* A key that is a prefix of a real one is still unknown. */
    load_fails("log:\n  level: info\n  sub: [core]\n", err, sizeof(err));
    assert_has(err, "log.sub'");
    assert_has(err, "line 3");
}

/* A key given twice is reported at the second one (libcyaml names the
 * mapping's first line). */
static void test_duplicate_key(void **state)
{
    char err[512];

    (void)state;
    load_fails("timeout_ms: 1000\neager_max_bytes: 64KiB\ntimeout_ms: 2000\n", err,
               sizeof(err));
    assert_has(err, "line 3: timeout_ms: mapping field already seen");

    load_fails("relay:\n  slots: 4\n  enabled: true\n  # slots again\n  slots: 8\n", err,
               sizeof(err));
    assert_has(err, "line 5: relay.slots: mapping field already seen");

    load_fails("relay:\n  slots: 4\neager_max_bytes: 64KiB\nrelay:\n  slots: 8\n", err,
               sizeof(err));
    assert_has(err, "line 4: relay: mapping field already seen");

    /* a flow mapping over two lines (a trial leftover: it said line 1) */
    load_fails("{timeout_ms: 1000,\n timeout_ms: 5}\n", err, sizeof(err));
    assert_has(err, "line 2: timeout_ms: mapping field already seen");
}

static void test_bad_enum(void **state)
{
    char err[512];

    (void)state;
    load_fails("# header\ntransports:\n  inter_node: ofi\n  intra_node: nvlink\n", err,
               sizeof(err));
    assert_has(err, "transports.intra_node");
    assert_has(err, "line 4");
    assert_has(err, "'nvlink' is not one of ce|nvlink_kernel|auto");

    load_fails("log: {level: loud}\n", err, sizeof(err));
    assert_has(err, "log.level");
    assert_has(err, "line 1");

    load_fails("log:\n  subsystems:\n    - core\n    - gpu\n", err, sizeof(err));
    assert_has(err, "log.subsystems");
    assert_has(err, "'gpu'");
    assert_has(err, "line 4");

    load_fails("relay:\n  enabled: perhaps\n", err, sizeof(err));
    assert_has(err, "relay.enabled");
    assert_has(err, "line 2");

    load_fails("scheduler: \"\"\n", err, sizeof(err));
    assert_has(err, "scheduler: must not be empty");
    assert_has(err, "line 1");

    load_fails("verbs:\n  port: 1\n  mtu: 1500\n", err, sizeof(err));
    assert_has(err, "verbs.mtu");
    assert_has(err, "line 3");
    assert_has(err, "0|256|512|1024|2048|4096");
}

static void test_impossible_sizes(void **state)
{
    rmacoll_config_t cfg;
    char err[512];

    (void)state;
    load_fails("relay:\n  enabled: true\n  slots: 0\n", err, sizeof(err));
    assert_has(err, "relay.slots");
    assert_has(err, "line 3");

    /* 16 bytes over 4 slots: 4-byte slots, smaller than one int64. */
    load_fails("max_task_bytes: 1M\nrelay: {buffer_bytes: 16, slots: 4}\n", err, sizeof(err));
    assert_has(err, "relay.buffer_bytes");
    assert_has(err, "line 2");
    assert_has(err, "below 8");

    /* Only slots in the file: the message names slots and its line. */
    load_fails("\nrelay:\n  slots: 16777216\n", err, sizeof(err));
    assert_has(err, "relay.slots");
    assert_has(err, "line 3");

    /* Exactly 8 bytes a slot is fine. */
    assert_int_equal(rmacoll_config_load(write_tmp("relay: {buffer_bytes: 32, slots: 4}\n"), &cfg,
                                         err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.relay_buffer_bytes, 32);

    load_fails("max_task_bytes: 0\n", err, sizeof(err));
    assert_has(err, "max_task_bytes");
    load_fails("timeout_ms: 0\n", err, sizeof(err));
    assert_has(err, "timeout_ms");

    /* Overflow: 2^64 bytes. */
    load_fails("scheduler: shift\nmax_task_bytes: 16EiB\n", err, sizeof(err));
    assert_has(err, "max_task_bytes");
    assert_has(err, "line 2");
    assert_has(err, "overflows");
    load_fails("relay:\n  buffer_bytes: 18446744073709551616\n", err, sizeof(err));
    assert_has(err, "relay.buffer_bytes");
    assert_has(err, "line 2");
    assert_has(err, "overflows");

    /* Environment fixes what the file broke: the final config is judged. */
    setenv("RMACOLL_RELAY_SLOTS", "1", 1);
    assert_int_equal(rmacoll_config_load(write_tmp("relay: {buffer_bytes: 16, slots: 4}\n"), &cfg,
                                         err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.relay_slots, 1);
    setenv("RMACOLL_RELAY_SLOTS", "4", 1);
    assert_int_equal(rmacoll_config_load(write_tmp("relay: {buffer_bytes: 16}\n"), &cfg, err,
                                         sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_has(err, "RMACOLL_RELAY_SLOTS");
}

static void test_sizes(void **state)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"512", 512},
        {"512B", 512},
        {"4KiB", 4096},
        {"1K", 1024},
        {"1KB", 1024},
        {"64MiB", 64ull << 20},
        {"1M", 1ull << 20},
        {"1GiB", 1ull << 30},
        {"1G", 1ull << 30},
        {"3 gib", 3ull << 30},
        {" 2TiB ", 2ull << 40},
        {"15EiB", 15ull << 60},
        {"18446744073709551615", UINT64_MAX},
        {"16777215TiB", 16777215ull << 40},
    };
    static const struct {
        const char *text;
        rmacoll_status_t st;
    } bad[] = {
        {"", RMACOLL_ERR_CONFIG},
        {"abc", RMACOLL_ERR_CONFIG},
        {"GiB", RMACOLL_ERR_CONFIG},
        {"1.5G", RMACOLL_ERR_CONFIG},
        {"-1", RMACOLL_ERR_CONFIG},
        {"1Q", RMACOLL_ERR_CONFIG},
        {"1GiBs", RMACOLL_ERR_CONFIG},
        {"16EiB", RMACOLL_ERR_OVERFLOW},
        {"16777216TiB", RMACOLL_ERR_OVERFLOW},
        {"18446744073709551616", RMACOLL_ERR_OVERFLOW},
        {"99999999999999999999999", RMACOLL_ERR_OVERFLOW},
    };
    rmacoll_config_t cfg;
    char err[256];
    char yaml[128];

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = 12345;
        assert_int_equal(rmacoll__config_parse_size(good[i].text, &v), RMACOLL_SUCCESS);
        assert_int_equal(v, good[i].bytes);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 12345;
        assert_int_equal(rmacoll__config_parse_size(bad[i].text, &v), bad[i].st);
        assert_int_equal(v, 12345);
    }
    /* In a file, as a suffixed string and as a plain YAML integer. */
    snprintf(yaml, sizeof(yaml), "nvlink_kernel_threshold: 4KiB\nmax_task_bytes: 1073741825\n");
    assert_int_equal(rmacoll_config_load(write_tmp(yaml), &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(cfg.nvlink_kernel_threshold, 4096);
    assert_int_equal(cfg.max_task_bytes, 1073741825ull);
}

static void test_syntax_error(void **state)
{
    char err[512];

    (void)state;
    load_fails("scheduler: shift\nrelay: 5\n", err, sizeof(err));
    assert_has(err, "relay");
    assert_has(err, "line 2");

    load_fails("scheduler: shift\nrelay:\n  slots: 4\n  enabled: [true\n", err, sizeof(err));
    assert_has(err, "line ");

    /* the duplicate's line (it was the first one's, line 1) */
    load_fails("scheduler: a\nscheduler: b\n", err, sizeof(err));
    assert_has(err, "scheduler");
    assert_has(err, "line 2");
}

/* Issue 33 item 4: a second document is an error naming the file and its
 * line (it was ignored); a map or list where a value is expected, and a
 * value where a section is, say what the key expects, with line and column
 * (they gave libyaml's "expecting STRING, got event: MAPPING_START"). */
static void test_structure_errors(void **state)
{
    char err[512], want[512];
    const char *path;
    rmacoll_config_t cfg;

    (void)state;
    load_fails("timeout_ms: 100\n---\ntimeout_ms: 200\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 2: a second YAML document starts "
             "here; a config file holds one document (rmacoll would ignore this one)", tmp_path);
    assert_string_equal(err, want);
    load_fails("---\nrelay:\n  slots: 4\n...\n---\nrelay:\n  slots: 8\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 5: a second YAML document starts "
             "here; a config file holds one document (rmacoll would ignore this one)", tmp_path);
    assert_string_equal(err, want);
    /* one document with its explicit start and end marks is fine */
    rmacoll_config_init(&cfg);
    path = write_tmp("---\ntimeout_ms: 1234\n...\n");
    assert_int_equal(rmacoll_config_load(path, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_int_equal(cfg.timeout_ms, 1234);

    load_fails("timeout_ms:\n  a: 1\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 2 column 3: key 'timeout_ms' expects "
             "a u64 value, got a map", tmp_path);
    assert_string_equal(err, want);
    load_fails("relay: {slots: {a: 1}}\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 1 column 16: key 'relay.slots' "
             "expects a u32 value, got a map", tmp_path);
    assert_string_equal(err, want);
    load_fails("scheduler: shift\nrelay:\n  slots: [1, 2]\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 3 column 10: key 'relay.slots' "
             "expects a u32 value, got a list", tmp_path);
    assert_string_equal(err, want);
    load_fails("scheduler: shift\nrelay: 5\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 2 column 8: key 'relay' expects a "
             "map of its keys (enabled, buffer_bytes, slots, direct_min_bytes), got a scalar",
             tmp_path);
    assert_string_equal(err, want);
    load_fails("log:\n  subsystems:\n    core: 1\n", err, sizeof(err));
    snprintf(want, sizeof(want), "config file '%s' line 3 column 5: key 'log.subsystems' "
             "expects a list value, got a map", tmp_path);
    assert_string_equal(err, want);
}

/* A config whose struct_size is wrong: rmacoll_config_set/get name the key
 * they were given and both sizes (they named no key), and
 * rmacoll__config_check has no empty slot in its message. */
static void test_struct_size_errors(void **state)
{
    rmacoll_config_t c;
    char err[512], want[512], buf[64];

    (void)state;
    rmacoll_config_init(&c);
    c.struct_size = 8;
    assert_int_equal(rmacoll_config_set(&c, "relay.slots", "4"), RMACOLL_ERR_INVALID_ARG);
    snprintf(want, sizeof(want), "rmacoll_config_set: relay.slots: cfg->struct_size is 8, not "
             "sizeof(rmacoll_config_t) = %zu (cfg was not initialised by rmacoll_config_init "
             "or rmacoll_config_load)", sizeof(rmacoll_config_t));
    assert_string_equal(rmacoll_config_last_error(), want);
    assert_int_equal(rmacoll_config_get(&c, "relay.buffer_bytes", buf, sizeof(buf)),
                     RMACOLL_ERR_INVALID_ARG);
    snprintf(want, sizeof(want), "rmacoll_config_get: relay.buffer_bytes: cfg->struct_size is "
             "8, not sizeof(rmacoll_config_t) = %zu (cfg was not initialised by "
             "rmacoll_config_init or rmacoll_config_load)", sizeof(rmacoll_config_t));
    assert_string_equal(rmacoll_config_last_error(), want);
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_INVALID_ARG);
    snprintf(want, sizeof(want), "config struct_size is 8, not sizeof(rmacoll_config_t) = %zu "
             "(fill it with rmacoll_config_init)", sizeof(rmacoll_config_t));
    assert_string_equal(err, want);
}

static void test_missing_file(void **state)
{
    rmacoll_config_t cfg;
    char err[256];

    (void)state;
    assert_int_equal(rmacoll_config_load("/nonexistent/dir/x.yaml", &cfg, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_has(err, "/nonexistent/dir/x.yaml");
    /* errbuf may be NULL. */
    assert_int_equal(rmacoll_config_load("/nonexistent/dir/x.yaml", &cfg, NULL, 0),
                     RMACOLL_ERR_CONFIG);
    assert_int_equal(rmacoll_config_load(NULL, NULL, err, sizeof(err)),
                     RMACOLL_ERR_INVALID_ARG);
}

static void test_hash(void **state)
{
    rmacoll_config_t a;
    rmacoll_config_t b;
    uint64_t h;

    (void)state;
    rmacoll_config_init(&a);
    rmacoll_config_init(&b);
    h = rmacoll__config_hash(&a);
    assert_int_equal(h, rmacoll__config_hash(&b));

    /* Bytes after a string's NUL do not count. */
    memset(b.ofi_iface + 1, 'x', sizeof(b.ofi_iface) - 1);
    assert_int_equal(h, rmacoll__config_hash(&b));
    rmacoll_config_init(&b);

    /* Log settings do not count. */
    b.log_level = RMACOLL_LOG_TRACE;
    b.log_subsystems = RMACOLL_LOG_SUBSYS_PLAN;
    assert_int_equal(h, rmacoll__config_hash(&b));

    /* Every other field does, one at a time. */
#define DIFFERS(stmt)                                          \
    do {                                                       \
        rmacoll_config_init(&b);                               \
        stmt;                                                  \
        if (rmacoll__config_hash(&b) == h) {                   \
            fail_msg("hash ignores: %s", #stmt);               \
        }                                                      \
    } while (0)
    DIFFERS(b.intra_node[0] = 'x');
    DIFFERS(b.inter_node[1] = 'x');
    DIFFERS(b.scheduler[0] = 'x');
    DIFFERS(b.scheduler_plugin[0] = 'x');
    DIFFERS(b.scheduler_seed = 2);
    DIFFERS(b.relay_enabled = 0);
    DIFFERS(b.relay_buffer_bytes += 1);
    DIFFERS(b.relay_slots = 5);
    DIFFERS(b.max_task_bytes -= 1);
    DIFFERS(b.timeout_ms = 29999);
    DIFFERS(b.nvlink_kernel_threshold = 0);
    DIFFERS(b.ofi_provider[3] = '\0');
    DIFFERS(b.ofi_iface[0] = 'l');
    DIFFERS(b.verbs_device[0] = 'm');
    DIFFERS(b.verbs_port = 2);
    DIFFERS(b.verbs_gid_index = 0);
    DIFFERS(b.verbs_mtu = 256);
    DIFFERS(b.verbs_traffic_class = 1);
    DIFFERS(b.verbs_service_level = 1);
    DIFFERS(b.verbs_max_inflight = 127);
#undef DIFFERS
    /* Moving a value from one string field to another changes it too. */
    rmacoll_config_init(&a);
    rmacoll_config_init(&b);
    snprintf(a.ofi_iface, sizeof(a.ofi_iface), "lo");
    snprintf(b.verbs_device, sizeof(b.verbs_device), "lo");
    assert_true(rmacoll__config_hash(&a) != rmacoll__config_hash(&b));
}

static void test_dump_round_trip(void **state)
{
    rmacoll_config_t a;
    rmacoll_config_t b;
    char text[4096];
    char err[256];
    int n;

    (void)state;
    assert_int_equal(rmacoll_config_load(write_tmp(full_yaml), &a, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    snprintf(a.ofi_provider, sizeof(a.ofi_provider), "tcp;ofi_rxm \"x\" # y");
    n = rmacoll__config_to_string(&a, text, sizeof(text));
    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_int_equal(strlen(text), (size_t)n);
    assert_has(text, "relay:\n  enabled: false\n  buffer_bytes: 128MiB\n  slots: 16\n");
    assert_has(text, "scheduler: \"xor\"\n");
    assert_has(text, "  subsystems: [core, plan, transport]\n");
    assert_int_equal(rmacoll_config_load(write_tmp(text), &b, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_memory_equal(&a, &b, sizeof(a));

    /* Defaults too, and a short buffer is cut but counted. */
    rmacoll_config_init(&a);
    n = rmacoll__config_to_string(&a, text, sizeof(text));
    assert_int_equal(rmacoll_config_load(write_tmp(text), &b, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_int_equal(rmacoll__config_to_string(&a, text, 10), n);
    assert_int_equal(strlen(text), 9);
}

/* A component's hooks (rmacoll__config_register), as the planner and the
 * transport loader use them: the loader calls declare_keys once between
 * its two readings, and a failed check is blamed on the source of its
 * first key, in the loader's words. */
static int hook_declared;

static void hook_declare(const rmacoll_config_t *cfg)
{
    (void)cfg;
    hook_declared++;
}

static int hook_check(const rmacoll_config_t *cfg, char *problem, size_t plen)
{
    if (cfg->timeout_ms != 12345) {
        return 1;
    }
    snprintf(problem, plen, "twelve thousand");
    return 0;
}

static void test_hooks(void **state)
{
    static const char *const keys[] = {"timeout_ms", NULL};
    static const rmacoll__config_hooks_t h = {"test", hook_declare, hook_check, keys};
    static rmacoll__config_hooks_t fill[RMACOLL__CONFIG_MAX_HOOKS];
    rmacoll_config_t cfg;
    char err[512], want[512];
    const char *path;
    int before, k;

    (void)state;
    rmacoll_config_init(&cfg); /* registers the library's own hooks */
    assert_int_equal(rmacoll__config_register(&h), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__config_register(&h), RMACOLL_SUCCESS); /* no-op */
    assert_int_equal(rmacoll__config_register(NULL), RMACOLL_ERR_INVALID_ARG);

    before = hook_declared;
    path = write_tmp("scheduler: shift\ntimeout_ms: 12345\n");
    memset(err, '#', sizeof(err));
    assert_int_equal(rmacoll_config_load(path, &cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    snprintf(want, sizeof(want), "config file '%s' line 2: timeout_ms: twelve thousand", path);
    assert_string_equal(err, want);
    assert_int_equal(hook_declared, before + 1);

    setenv("RMACOLL_TIMEOUT_MS", "12345", 1);
    assert_int_equal(rmacoll_config_load(write_tmp("scheduler: shift\n"), &cfg, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_string_equal(err, "environment RMACOLL_TIMEOUT_MS (timeout_ms): twelve thousand");
    unsetenv("RMACOLL_TIMEOUT_MS");

    rmacoll_config_init(&cfg);
    cfg.timeout_ms = 12345;
    assert_int_equal(rmacoll__config_check(&cfg, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_string_equal(err, "config timeout_ms: twelve thousand");
    cfg.timeout_ms = 12346;
    assert_int_equal(rmacoll__config_check(&cfg, err, sizeof(err)), RMACOLL_SUCCESS);

    /* plan + transport + h are in; the table holds RMACOLL__CONFIG_MAX_HOOKS */
    for (k = 0; k < RMACOLL__CONFIG_MAX_HOOKS - 3; k++) {
        fill[k].component = "fill";
        assert_int_equal(rmacoll__config_register(&fill[k]), RMACOLL_SUCCESS);
    }
    fill[k].component = "fill";
    assert_int_equal(rmacoll__config_register(&fill[k]), RMACOLL_ERR_NO_MEMORY);
}

static void test_check(void **state)
{
    rmacoll_config_t c;
    char err[256];

    (void)state;
    rmacoll_config_init(&c);
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_SUCCESS);
    snprintf(c.intra_node, sizeof(c.intra_node), "nvlink");
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "transports.intra_node");
    rmacoll_config_init(&c);
    c.relay_slots = 0;
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "relay.slots");
    rmacoll_config_init(&c);
    c.relay_buffer_bytes = 31;
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "relay.buffer_bytes");
    rmacoll_config_init(&c);
    c.verbs_mtu = 300;
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "verbs.mtu");
    rmacoll_config_init(&c);
    c.scheduler[0] = '\0';
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "scheduler");
    rmacoll_config_init(&c);
    memset(c.verbs_device, 'a', sizeof(c.verbs_device));
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_has(err, "verbs.device");
    rmacoll_config_init(&c);
    c.log_level = 9;
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    rmacoll_config_init(&c);
    c.relay_enabled = 2;
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    rmacoll_config_init(&c);
    c.struct_size = 8;
    assert_int_equal(rmacoll__config_check(&c, err, sizeof(err)), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__config_check(NULL, err, sizeof(err)), RMACOLL_ERR_INVALID_ARG);
}

static void test_long_string(void **state)
{
    char yaml[512];
    char err[512];
    char big[200];

    (void)state;
    memset(big, 'p', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    snprintf(yaml, sizeof(yaml), "ofi:\n  provider: %s\n", big);
    load_fails(yaml, err, sizeof(err));
    assert_has(err, "ofi.provider");
    assert_has(err, "line 2");
    assert_has(err, "longer than 127");
}

/* rmacoll_config_set / rmacoll_config_get: any key by name, cfg untouched
 * on error. */
static void test_set_get(void **state)
{
    rmacoll_config_t cfg, before;
    char buf[RMACOLL_CONFIG_STR_MAX];

    (void)state;
    rmacoll_config_init(&cfg);
    assert_int_equal(rmacoll_config_set(&cfg, "ofi.provider", "shm"), RMACOLL_SUCCESS);
    assert_string_equal(cfg.ofi_provider, "shm");
    assert_int_equal(rmacoll_config_get(&cfg, "ofi.provider", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "shm");
    assert_int_equal(rmacoll_config_set(&cfg, "relay.buffer_bytes", "1MiB"), RMACOLL_SUCCESS);
    assert_int_equal(cfg.relay_buffer_bytes, 1u << 20);
    assert_int_equal(rmacoll_config_get(&cfg, "relay.buffer_bytes", buf, sizeof(buf)),
                     RMACOLL_SUCCESS);
    assert_string_equal(buf, "1MiB");
    assert_int_equal(rmacoll_config_set(&cfg, "relay.enabled", "false"), RMACOLL_SUCCESS);
    assert_int_equal(cfg.relay_enabled, 0);
    assert_int_equal(rmacoll_config_set(&cfg, "transports.inter_node",
                                        "plugin:/opt/x/libt.so"), RMACOLL_SUCCESS);
    assert_string_equal(cfg.inter_node, "plugin:/opt/x/libt.so");

    /* each failure leaves cfg alone and says, on this thread, which key and
     * value were refused and why */
    before = cfg;
    assert_string_equal(rmacoll_config_last_error(), "");
    assert_int_equal(rmacoll_config_set(&cfg, "ofi.no_such_key", "1"), RMACOLL_ERR_CONFIG);
    assert_string_equal(rmacoll_config_last_error(), "rmacoll_config_set: unknown key "
                        "'ofi.no_such_key' (rmacoll-info lists the keys)");
    assert_int_equal(rmacoll_config_set(&cfg, "relay.slots", "0"), RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(rmacoll_config_last_error(), "rmacoll_config_set: relay.slots = '0': "));
    assert_int_equal(rmacoll_config_set(&cfg, "relay.slots", "four"), RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(rmacoll_config_last_error(),
                           "rmacoll_config_set: relay.slots = 'four': "));
    assert_int_equal(rmacoll_config_set(&cfg, "transports.inter_node", "plugin:"),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(rmacoll_config_last_error(),
                           "rmacoll_config_set: transports.inter_node = 'plugin:': "));
    assert_int_equal(rmacoll_config_set(&cfg, "transports.intra_node", "nvlink"),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(rmacoll_config_last_error(), "transports.intra_node"));
    assert_non_null(strstr(rmacoll_config_last_error(), "'nvlink'"));
    assert_memory_equal(&cfg, &before, sizeof(cfg));
    assert_int_equal(rmacoll_config_get(&cfg, "no.such", buf, sizeof(buf)), RMACOLL_ERR_CONFIG);
    assert_string_equal(buf, "");
    assert_string_equal(rmacoll_config_last_error(), "rmacoll_config_get: unknown key "
                        "'no.such' (rmacoll-info lists the keys)");
    assert_int_equal(rmacoll_config_set(NULL, "relay.slots", "2"), RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(rmacoll_config_last_error(), "rmacoll_config_set: cfg is NULL");
    assert_int_equal(rmacoll_config_set(&cfg, NULL, "2"), RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(rmacoll_config_last_error(), "rmacoll_config_set: key is NULL");
    /* a get's own argument errors replace the message too */
    assert_int_equal(rmacoll_config_get(&cfg, "relay.slots", buf, 0), RMACOLL_ERR_INVALID_ARG);
    assert_string_equal(rmacoll_config_last_error(), "rmacoll_config_get: len is 0");
    /* a long value is quoted in part: the reason still ends the message */
    {
        char longv[400];
        const char *m;
        memset(longv, '9', sizeof(longv) - 1);
        longv[sizeof(longv) - 1] = '\0';
        assert_int_equal(rmacoll_config_set(&cfg, "relay.slots", longv), RMACOLL_ERR_CONFIG);
        m = rmacoll_config_last_error();
        assert_non_null(strstr(m, "rmacoll_config_set: relay.slots = '999999999999999999999999"
                                  "999999999999999999999999...': "));
        assert_non_null(strstr(m, "...' is not an unsigned integer"));
        assert_int_equal(m[strlen(m) - 1], 'r');
    }
    assert_int_equal(rmacoll_config_get(&cfg, "relay.slots", buf, 0), RMACOLL_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_key_table, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_full_file, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_partial_and_empty_file, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_env_every_key, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_env_over_file, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_env_bad_values, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_subsys_exclude, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_unknown_key, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_bad_enum, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_duplicate_key, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_impossible_sizes, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_sizes, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_syntax_error, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_structure_errors, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_missing_file, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_hash, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_dump_round_trip, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_check, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_hooks, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_long_string, clean_env, cleanup),
        cmocka_unit_test_setup_teardown(test_set_get, clean_env, cleanup),
        /* last: it leaves rmacoll_config_last_error set (test_set_get wants it empty) */
        cmocka_unit_test_setup_teardown(test_struct_size_errors, clean_env, cleanup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
