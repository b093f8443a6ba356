/*
 * info.c - rmacoll-info: what this build of rmacoll contains and how it is
 * configured: version, transports (with capabilities), schedulers, and
 * every config key with its type, default, meaning, environment variable
 * and effective value (defaults < YAML file < RMACOLL_<KEY> environment).
 *
 *   rmacoll-info [--config FILE] [--json] [--topology L,L,...|NxG] [--help]
 *
 * With --topology (ranks per node) it prints instead the relay channels of
 * every relay of that topology, its slot bytes under the loaded config and
 * the smallest relay.buffer_bytes that the topology accepts.
 *
 * Exit status: 0, 1 when the configuration does not load (the message is
 * printed and the effective column shows the defaults), 2 on bad usage.
 *
 * The run-time report (--runtime, and after the build report) is
 * tools/info/runtime.c; tools/info/info_tool.h is what the two share.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "core/config/config_internal.h"
#include "core/plan/plan.h"
#include "core/plan/plan_config.h"
#include "core/plan/topo.h"
#include "core/xport/transport.h"
#include "rmacoll.h"
#include "rmacoll_sched.h"
#include "rmacoll_transport.h"
#include "tjson.h"

#include "info/info_tool.h"

static const struct {
    uint64_t bit;
    const char *word;
} info_caps[] = {
    {RMACOLL_TCAP_CE, "ce"},
    {RMACOLL_TCAP_PROXY, "proxy"},
    {RMACOLL_TCAP_MEM_HOST, "mem_host"},
    {RMACOLL_TCAP_MEM_CUDA, "mem_cuda"},
    {RMACOLL_TCAP_HMEM, "hmem"},
    {RMACOLL_TCAP_HOST_CUDA, "host_cuda"},
};
#define INFO_NCAPS (sizeof(info_caps) / sizeof(info_caps[0]))

/* The configuration keys a transport declares (rmacoll_transport_key_t,
 * full names as the config spells them); comma-separated into buf (JSON
 * strings when json). */
static void info_keys(const char *name, const rmacoll_transport_key_t *keys, size_t nkeys,
                      int json, char *buf, size_t len)
{
    size_t off = 0;
    int n = 0;

    buf[0] = '\0';
    for (size_t i = 0; name != NULL && keys != NULL && i < nkeys && off < len; i++) {
        char full[96];
        if (keys[i].name == NULL ||
            rmacoll__config_key_name(name, keys[i].name, full, sizeof(full)) != 0) {
            continue;
        }
        off += (size_t)snprintf(buf + off, len - off, json ? "%s\"%s\"" : "%s%s",
                                n++ ? ", " : "", full);
    }
}

static void info_transport_keys(const rmacoll_transport_ops_t *t, int json, char *buf,
                                size_t len)
{
    info_keys(t->name, t->keys, t->nkeys, json, buf, len);
}

/* Is the transport named `name` compiled into this library? */
static int info_built(const char *name)
{
    for (int n = 0; rmacoll__builtin_transports[n] != NULL; n++) {
        if (rmacoll__builtin_transports[n]->name != NULL &&
            strcmp(rmacoll__builtin_transports[n]->name, name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void info_usage(FILE *fp)
{
    fprintf(fp,
            "usage: rmacoll-info [--config FILE] [--json] [--runtime] [--topology L,L,...|NxG] [--help]\n"
            "Prints the rmacoll version, the transports and schedulers compiled in, and\n"
            "every configuration key with its default, meaning and effective value.\n"
            "  -c, --config FILE  YAML file to load (default: $RMACOLL_CONFIG, if set)\n"
            "  -j, --json         print JSON instead of text\n"
            "  -t, --topology L,L,...|NxG  ranks per node (or N nodes of G): print the relay channels, slot\n"
            "                     bytes and the minimum relay.buffer_bytes of that topology\n"
            "  -r, --runtime      only the run-time report (libfabric providers and\n"
            "                     FI_HMEM, RDMA devices, GPUs and NVLink, library\n"
            "                     versions, environment variables); with --json as JSON\n"
            "  -h, --help         print this help\n"
            "Precedence: defaults < YAML file < RMACOLL_<KEY> environment variables.\n");
}

void info_env_name(const char *key, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "RMACOLL_");

    for (; *key != '\0' && off + 1 < len; key++) {
        buf[off++] = *key == '.' ? '_' : (*key >= 'a' && *key <= 'z') ? (char)(*key - 32) : *key;
    }
    buf[off] = '\0';
}

/* Capabilities as words: "proxy, mem_host", plus unknown bits in hex. */
static void info_caps_words(uint64_t caps, const char *sep, int quote, char *buf, size_t len)
{
    size_t off = 0;
    const char *q = quote ? "\"" : "";

    buf[0] = '\0';
    for (size_t i = 0; i < INFO_NCAPS && off < len; i++) {
        if (caps & info_caps[i].bit) {
            off += (size_t)snprintf(buf + off, len - off, "%s%s%s%s", off ? sep : "", q,
                                    info_caps[i].word, q);
            caps &= ~info_caps[i].bit;
        }
    }
    if (caps != 0 && off < len) {
        snprintf(buf + off, len - off, "%s%s0x%llx%s", off ? sep : "", q,
                 (unsigned long long)caps, q);
    }
}

/* A comma-separated list (info_caps_words, info_keys with ", ") as a JSON
 * array of strings. */
static cJSON *info_words_json(const char *list)
{
    cJSON *arr = cJSON_CreateArray();

    while (arr != NULL && *list != '\0') {
        size_t len = strcspn(list, ",");
        char word[128];

        snprintf(word, sizeof(word), "%.*s", (int)len, list);
        cJSON_AddItemToArray(arr, cJSON_CreateString(word));
        list += len;
        list += strspn(list, ", ");
    }
    return arr;
}

static const char *info_or(const char *s, const char *dflt)
{
    return s != NULL ? s : dflt;
}

static void info_text(const rmacoll_config_t *cfg, const char *file, const char *load_err)
{
    size_t nkeys = 0;
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&nkeys);
    char caps[160];
    int n = 0;

    printf("rmacoll %d.%d.%d\n\n", RMACOLL_VERSION_MAJOR, RMACOLL_VERSION_MINOR,
           RMACOLL_VERSION_PATCH);

    printf("transports compiled in:\n");
    for (n = 0; rmacoll__builtin_transports[n] != NULL; n++) {
        const rmacoll_transport_ops_t *t = rmacoll__builtin_transports[n];
        char tkeys[512];
        info_caps_words(t->caps, ", ", 0, caps, sizeof(caps));
        info_transport_keys(t, 0, tkeys, sizeof(tkeys));
        printf("  %-14s %s\n  %-14s caps: %s\n", info_or(t->name, "?"), info_or(t->desc, ""), "",
               caps[0] ? caps : "none");
        printf("  %-14s keys: %s\n", "", tkeys[0] ? tkeys : "none");
    }
    if (n == 0) {
        printf("  (none)\n");
    }
    for (size_t k = 0; rmacoll__transport_keysets[k] != NULL; k++) {
        const rmacoll_transport_keyset_t *ks = rmacoll__transport_keysets[k];
        char tkeys[512];
        if (info_built(ks->transport)) {
            continue;
        }
        char mod[1024];
        info_keys(ks->transport, ks->keys, ks->nkeys, 0, tkeys, sizeof(tkeys));
        if (rmacoll__tops_module_path(ks->transport, mod, sizeof(mod)) == 0) {
            printf("  %-14s available as module %s\n", ks->transport, mod);
        } else {
            printf("  %-14s not built (no module librmacoll-%s.so; its keys are accepted)\n",
                   ks->transport, ks->transport);
        }
        printf("  %-14s keys: %s\n", "", tkeys[0] ? tkeys : "none");
    }

    printf("\nschedulers compiled in:\n");
    for (n = 0; rmacoll__builtin_schedulers[n] != NULL; n++) {
        const rmacoll_sched_ops_t *s = rmacoll__builtin_schedulers[n];
        printf("  %-14s %s\n", info_or(s->name, "?"), info_or(s->desc, ""));
    }
    if (n == 0) {
        printf("  (none)\n");
    }

    printf("\nconfiguration (defaults < %s < RMACOLL_<KEY> environment):\n",
           file != NULL ? file : "YAML file ($RMACOLL_CONFIG)");
    if (load_err != NULL) {
        printf("  error: %s\n  (effective values below are the defaults)\n", load_err);
    }
    for (size_t i = 0; i < nkeys; i++) {
        char val[512];
        char env[96];

        rmacoll__config_value_string(cfg, i, val, sizeof(val));
        info_env_name(keys[i].key, env, sizeof(env));
        printf("  %s = %s%s%s\n", keys[i].key, val[0] ? "" : "\"", val, val[0] ? "" : "\"");
        printf("      %s\n", keys[i].meaning);
        printf("      type %s, default %s, env %s%s\n", keys[i].type,
               keys[i].default_str[0] ? keys[i].default_str : "\"\"", env,
               strcmp(val, keys[i].default_str) != 0 ? "  [changed]" : "");
    }
}

static void info_json(const rmacoll_config_t *cfg, const char *file, const char *load_err)
{
    size_t nkeys = 0;
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&nkeys);
    cJSON *doc = cJSON_CreateObject();
    cJSON *arr;
    char buf[768];

    if (doc == NULL) {
        return;
    }
    snprintf(buf, sizeof(buf), "%d.%d.%d", RMACOLL_VERSION_MAJOR, RMACOLL_VERSION_MINOR,
             RMACOLL_VERSION_PATCH);
    tjson_str(doc, "version", buf);
    arr = cJSON_AddArrayToObject(doc, "transports");
    for (int n = 0; arr != NULL && rmacoll__builtin_transports[n] != NULL; n++) {
        const rmacoll_transport_ops_t *t = rmacoll__builtin_transports[n];
        cJSON *o = cJSON_CreateObject();
        if (o == NULL) {
            break;
        }
        tjson_str(o, "name", t->name);
        tjson_str(o, "desc", t->desc);
        info_caps_words(t->caps, ", ", 0, buf, sizeof(buf));
        cJSON_AddItemToObject(o, "caps", info_words_json(buf));
        info_transport_keys(t, 0, buf, sizeof(buf));
        cJSON_AddItemToObject(o, "keys", info_words_json(buf));
        cJSON_AddItemToArray(arr, o);
    }
    arr = cJSON_AddArrayToObject(doc, "schedulers");
    for (int n = 0; arr != NULL && rmacoll__builtin_schedulers[n] != NULL; n++) {
        const rmacoll_sched_ops_t *s = rmacoll__builtin_schedulers[n];
        cJSON *o = cJSON_CreateObject();
        if (o == NULL) {
            break;
        }
        tjson_str(o, "name", s->name);
        tjson_str(o, "desc", s->desc);
        cJSON_AddItemToArray(arr, o);
    }
    tjson_str(doc, "config_file", file);
    tjson_str(doc, "config_error", load_err);
    arr = cJSON_AddArrayToObject(doc, "config");
    for (size_t i = 0; arr != NULL && i < nkeys; i++) {
        char val[512];
        char env[96];
        cJSON *o = cJSON_CreateObject();
        if (o == NULL) {
            break;
        }
        rmacoll__config_value_string(cfg, i, val, sizeof(val));
        info_env_name(keys[i].key, env, sizeof(env));
        tjson_str(o, "key", keys[i].key);
        tjson_str(o, "type", keys[i].type);
        tjson_str(o, "default", keys[i].default_str);
        tjson_str(o, "value", val);
        tjson_str(o, "env", env);
        tjson_str(o, "meaning", keys[i].meaning);
        cJSON_AddItemToArray(arr, o);
    }
    tjson_print(stdout, doc, 0, 1);
}

/* --topology: per relay, its channels and slot bytes, and the minimum
 * relay.buffer_bytes (the planner's rule, rmacoll__plan_relay_rule).
 * Returns 0, 1 when the loaded relay.buffer_bytes is below the minimum, 2
 * on a bad spec. */
static int info_topology(const rmacoll_config_t *cfg, const char *spec, int json)
{
    static int node_of[4096];
    rmacoll__plan_cfg_t pcfg;
    rmacoll__relay_rule_t rule;
    rmacoll_topo_t *topo = NULL;
    int n = 0, rc;

    if (rmacoll_case_parse_topology(spec, node_of, 4096, &n) != RMACOLL_SUCCESS ||
        rmacoll__topo_create(n, node_of, &topo) != RMACOLL_SUCCESS) {
        fprintf(stderr, "rmacoll-info: --topology: expected ranks per node such as 4,4 "
                        "or 2x4 (got '%s')\n", spec);
        return 2;
    }
    rmacoll__plan_cfg_from(cfg, &pcfg);
    rc = rmacoll__plan_relay_rule(topo, &pcfg, &rule, NULL, 0) ? 0 : 1;
    if (json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON *relays;

        if (doc == NULL) {
            rmacoll__topo_destroy(topo);
            return 2;
        }
        tjson_str(doc, "topology", spec);
        tjson_i64(doc, "nranks", n);
        tjson_i64(doc, "nnodes", topo->nnodes);
        cJSON_AddBoolToObject(doc, "relay", cfg->relay_enabled);
        tjson_u64(doc, "relay_slots", cfg->relay_slots);
        tjson_u64(doc, "relay_buffer_bytes", cfg->relay_buffer_bytes);
        relays = cJSON_AddArrayToObject(doc, "relays");
        for (int r = 0; relays != NULL && r < n; r++) {
            int nin = rmacoll__plan_nin(topo, &pcfg, r);
            cJSON *o = nin > 0 ? cJSON_CreateObject() : NULL;

            if (o != NULL) {
                tjson_i64(o, "rank", r);
                tjson_i64(o, "node", topo->node_of[r]);
                tjson_i64(o, "channels", nin);
                tjson_u64(o, "slot_bytes", rmacoll__plan_slot_bytes(topo, &pcfg, r));
                cJSON_AddItemToArray(relays, o);
            }
        }
        tjson_u64(doc, "min_relay_buffer_bytes", rule.min_buffer_bytes);
        tjson_i64(doc, "min_at_rank", rule.relay);
        cJSON_AddBoolToObject(doc, "buffer_too_small", rc != 0);
        tjson_print(stdout, doc, 0, 1);
        rmacoll__topo_destroy(topo);
        return rc;
    }
    printf("topology %s: %d ranks on %d nodes, relay %s, relay.slots = %u, "
           "relay.buffer_bytes = %llu\n", spec, n, topo->nnodes,
           cfg->relay_enabled ? "on" : "off", cfg->relay_slots,
           (unsigned long long)cfg->relay_buffer_bytes);
    for (int r = 0; r < n; r++) {
        int nin = rmacoll__plan_nin(topo, &pcfg, r);
        if (nin > 0) {
            printf("  rank %d (node %d): %d incoming channels, slots of %llu bytes\n", r,
                   topo->node_of[r], nin,
                   (unsigned long long)rmacoll__plan_slot_bytes(topo, &pcfg, r));
        }
    }
    printf("minimum relay.buffer_bytes: %llu bytes (%u-byte slots x relay.slots %u x %d "
           "channels at rank %d)%s\n", (unsigned long long)rule.min_buffer_bytes,
           RMACOLL__MIN_SLOT_BYTES, cfg->relay_slots, rule.nin, rule.relay,
           rc ? ": the loaded relay.buffer_bytes is too small" : "");
    rmacoll__topo_destroy(topo);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"topology", required_argument, NULL, 't'},
        {"runtime", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *file = NULL, *topology = NULL;
    int json = 0, runtime = 0;
    int c;
    rmacoll_config_t cfg;
    char err[512];
    rmacoll_status_t st;

    while ((c = getopt_long(argc, argv, "c:jrt:h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            runtime = 1;
            break;
        case 'c':
            file = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 't':
            topology = optarg;
            break;
        case 'h':
            info_usage(stdout);
            return 0;
        default:
            info_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rmacoll-info: unexpected argument '%s'\n", argv[optind]);
        info_usage(stderr);
        return 2;
    }
    if (file == NULL) {
        const char *env = getenv("RMACOLL_CONFIG");
        file = (env != NULL && env[0] != '\0') ? env : NULL;
    }

    st = rmacoll_config_load(file, &cfg, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        rmacoll_config_init(&cfg);
        fprintf(stderr, "rmacoll-info: %s: %s\n", rmacoll_status_name(st), err);
    }
    if (topology != NULL) {
        return st == RMACOLL_SUCCESS ? info_topology(&cfg, topology, json) : 1;
    }
    if (runtime) {
        info_runtime(json);
        return 0;
    }
    if (json) {
        info_json(&cfg, file, st == RMACOLL_SUCCESS ? NULL : err);
    } else {
        info_text(&cfg, file, st == RMACOLL_SUCCESS ? NULL : err);
        info_runtime(0);
    }
    return st == RMACOLL_SUCCESS ? 0 : 1;
}
