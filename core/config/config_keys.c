/*
 * config_keys.c - the configuration's keys: the core's table
 * (RMACOLL_CONFIG_CORE_TABLE) and the registry that lists them with every
 * transport's declared keys (built in, or added by a plugin through
 * rmacoll__config_add_keys), in the order rmacoll-info and the dump show.
 * Owns the registry; the other config_*.c files read it through CFG_KEY /
 * CFG_FIELD (config_priv.h).
 */
#include "core/config/config_priv.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pthread.h>

#include "rmacoll_transport.h"

#include "core/base/log.h"
#include "core/base/text.h"

/* ---- the key table ----
 * The core's own keys are RMACOLL_CONFIG_CORE_TABLE, one row each: the row
 * generates the key's id, its dotted name (whose environment variable is
 * RMACOLL_ + the name upper-cased, dots as underscores), its type as
 * rmacoll-info shows it, its default, its help line, and its storage and
 * validation (a config_field_t). Transport keys are not here: each
 * transport declares its own (rmacoll_transport_key_t, in its ops and in
 * its folder's keyset); config_registry() puts both in one list, in the
 * order rmacoll-info and the dump show. Nothing below names a transport. */

static const char *const intra_names[] = {"ce", "nvlink_kernel", "auto", NULL};
static const char *const inter_names[] = {"ofi", "verbs", NULL};
static const char *const devnet_names[] = {"auto", "staged", "hmem", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug", "trace", NULL};

#define CFG_OFF(member) offsetof(rmacoll_config_t, member)

/* X(id, key, type, default, help, field initialiser...) */
#define RMACOLL_CONFIG_CORE_TABLE(X)                                                          \
    X(INTRA_NODE, "transports.intra_node", "enum(ce|nvlink_kernel|auto)", "ce",              \
      "transport between ranks of one node: copy engine, NVLink kernel, auto (kernel up to " \
      "nvlink_kernel_threshold bytes), or plugin:PATH (docs/plugins.md)",                    \
      .kind = CFG_KIND_ENUM, .offset = CFG_OFF(intra_node), .names = intra_names,            \
      .plugin_ok = 1)                                                                         \
    X(INTER_NODE, "transports.inter_node", "enum(ofi|verbs)", "ofi",                         \
      "network transport between nodes: libfabric, ibverbs, or plugin:PATH (a shared "       \
      "object, docs/plugins.md)",                                                             \
      .kind = CFG_KIND_ENUM, .offset = CFG_OFF(inter_node), .names = inter_names,            \
      .plugin_ok = 1)                                                                         \
    X(DEVICE_INTER_NODE, "transports.device_inter_node", "enum(auto|staged|hmem)", "staged", \
      "device buffers across nodes: staged (through pinned host memory; the default while "  \
      "the registered path is experimental), auto (registered with the inter_node transport " \
      "when it takes device memory, FI_HMEM / GPUDirect, else staged), hmem (required: "      \
      "create fails without it)",                                                             \
      .kind = CFG_KIND_ENUM, .offset = CFG_EXT, .names = devnet_names)                       \
    X(SCHEDULER, "scheduler", "string", "node_shift",                                        \
      "round scheduler by name (shift, node_shift, xor, random, ...); checked against the "  \
      "compiled-in schedulers at create",                                                     \
      .kind = CFG_KIND_STRING, .offset = CFG_OFF(scheduler), .nonempty = 1)                  \
    X(SCHEDULER_PLUGIN, "scheduler_plugin", "string", "",                                    \
      "path of a scheduler plugin .so exporting rmacoll_sched_plugin_v1 (\"\" = none); "     \
      "used instead of scheduler when set",                                                   \
      .kind = CFG_KIND_STRING, .offset = CFG_OFF(scheduler_plugin))                          \
    X(SCHEDULER_SEED, "scheduler_seed", "u64", "1",                                          \
      "seed of the random scheduler (same on every rank)",                                   \
      .kind = CFG_KIND_U64, .offset = CFG_OFF(scheduler_seed), .min = 0, .max = UINT64_MAX)  \
    X(RELAY_ENABLED, "relay.enabled", "bool", "true",                                        \
      "send cross-node traffic through the rail-aligned two-hop relay",                      \
      .kind = CFG_KIND_BOOL, .offset = CFG_OFF(relay_enabled))                               \
    X(RELAY_BUFFER_BYTES, "relay.buffer_bytes", "size", "64MiB",                             \
      "relay buffer per rank, split into slots; each relay needs >= 8 * slots * its "       \
      "incoming channels (rmacoll-info --topology prints the minimum)",                       \
      .kind = CFG_KIND_SIZE, .offset = CFG_OFF(relay_buffer_bytes), .min = 0,                \
      .max = UINT64_MAX)                                                                      \
    X(RELAY_SLOTS, "relay.slots", "u32", "4", "slots per incoming relay channel (>= 1)",     \
      .kind = CFG_KIND_U32, .offset = CFG_OFF(relay_slots), .min = 1, .max = UINT32_MAX)     \
    X(RELAY_DIRECT_MIN_BYTES, "relay.direct_min_bytes", "size", "1MiB",                      \
      "host calls across nodes whose ranks of each node share one network interface (the "  \
      "relay buys no rail alignment there): a sender's stream to another node (its "        \
      "blocks for that node in all) of at least this many bytes, and not eager, goes "       \
      "straight to its receivers, not through the relay (0 = never)",                        \
      .kind = CFG_KIND_SIZE, .offset = CFG_EXT, .min = 0, .max = UINT64_MAX)                 \
    X(MAX_TASK_BYTES, "max_task_bytes", "size", "1GiB",                                      \
      "transfers above this are split in chunks; only the last chunk signals (>= 1)",        \
      .kind = CFG_KIND_SIZE, .offset = CFG_OFF(max_task_bytes), .min = 1, .max = UINT64_MAX) \
    X(EAGER_MAX_BYTES, "eager_max_bytes", "size", "128KiB",                                   \
      "host calls across nodes (within the one-round limits): a sender's blocks for each "   \
      "other node, if at most this many bytes in all, travel inside its metadata record to " \
      "the relay (relay off: each receiver's block in its own record; no data round for "   \
      "them; 0 = off; <= 1MiB; sizes each rank's control window)",                          \
      .kind = CFG_KIND_SIZE, .offset = CFG_EXT, .min = 0, .max = RMACOLL__EAGER_MAX_CAP)   \
    X(NODE_EAGER_MAX_BYTES, "node_eager_max_bytes", "size", "1MiB",                          \
      "host calls within the one-round limits: a sender's blocks for its node peers, if at " \
      "most this many bytes in all, go into its control window and each peer copies its "   \
      "own out (no copy into peers' buffers, no signal, no wait; 0 = off; <= 1MiB; sizes "  \
      "each rank's control window)",                                                          \
      .kind = CFG_KIND_SIZE, .offset = CFG_EXT, .min = 0, .max = RMACOLL__EAGER_MAX_CAP)   \
    X(MERGE_MAX_PUTS, "merge_max_puts", "u32", "256",                                       \
      "copy-engine put steps that are ready together (relay forwards of several channels, " \
      "rounds of local copies) go to the transport as one submission of at most this many " \
      "puts (one post_puts, one batched copy and one completion wait on device memory; 1 = " \
      "one step at a time; docs/protocol.md \"Dataflow execution\")",                       \
      .kind = CFG_KIND_U32, .offset = CFG_EXT, .min = 1, .max = 65536)                      \
    X(TIMEOUT_MS, "timeout_ms", "u64", "30000",                                              \
      "a wait fails after this many milliseconds without progress (silence, not total "     \
      "time), naming the silent peer (>= 1)",                                                 \
      .kind = CFG_KIND_U64, .offset = CFG_OFF(timeout_ms), .min = 1, .max = UINT64_MAX)      \
    X(HEARTBEAT_MS, "heartbeat_ms", "u32", "1000",                                           \
      "period of the proxy thread's heartbeat to node and network peers; a wait fails "     \
      "naming a peer whose heartbeat it has not seen rise for two periods (a stopped or "   \
      "dead process; docs/protocol.md \"Heartbeat\"); 0 = off",                             \
      .kind = CFG_KIND_U32, .offset = CFG_EXT, .min = 0, .max = 3600000)                    \
    X(LOG_LEVEL, "log.level", "enum(error|warn|info|debug|trace)", "warn",                   \
      "most verbose level logged",                                                            \
      .kind = CFG_KIND_LEVEL, .offset = CFG_OFF(log_level), .names = level_names,            \
      .after_transports = 1)                                                                  \
    X(LOG_SUBSYSTEMS, "log.subsystems",                                                      \
      "list(core|plan|sched|bootstrap|transport|proxy|config|all|none)", "[all]",            \
      "subsystems logged; in the environment a comma-separated list, ^ first to exclude",    \
      .kind = CFG_KIND_SUBSYS, .offset = CFG_OFF(log_subsystems),                            \
      .names = rmacoll__log_subsys_names,                                                     \
      .after_transports = 1)

typedef enum config_core_id {
#define CFG_CORE_ID(id, ...) CFG_##id,
    RMACOLL_CONFIG_CORE_TABLE(CFG_CORE_ID)
#undef CFG_CORE_ID
    CFG_NCORE
} config_core_id_t;

static const rmacoll__config_key_t core_keys[CFG_NCORE] = {
#define CFG_CORE_KEY(id, key, type, def, help, ...) [CFG_##id] = {key, type, def, help},
    RMACOLL_CONFIG_CORE_TABLE(CFG_CORE_KEY)
#undef CFG_CORE_KEY
};

static const config_field_t core_fields[CFG_NCORE] = {
#define CFG_CORE_FIELD(id, key, type, def, help, ...) [CFG_##id] = {__VA_ARGS__},
    RMACOLL_CONFIG_CORE_TABLE(CFG_CORE_FIELD)
#undef CFG_CORE_FIELD
};

/*
 * Storage of the in-tree transports' keys that have a public field in
 * rmacoll_config_t (kept for source compatibility). Frozen: a key added
 * from now on is stored in cfg->ext, and this table never grows. Only the
 * place is here; name, type, default, help and range come from the
 * transport's declaration, and a field is used only when its width fits
 * the declared type.
 */
static const struct {
    const char *key;
    size_t offset;
    rmacoll_config_type_t type;
} config_frozen[] = {
    {"nvlink_kernel_threshold", CFG_OFF(nvlink_kernel_threshold), RMACOLL_CONFIG_SIZE},
    {"ofi.provider", CFG_OFF(ofi_provider), RMACOLL_CONFIG_STRING},
    {"ofi.iface", CFG_OFF(ofi_iface), RMACOLL_CONFIG_STRING},
    {"verbs.device", CFG_OFF(verbs_device), RMACOLL_CONFIG_STRING},
    {"verbs.port", CFG_OFF(verbs_port), RMACOLL_CONFIG_U32},
    {"verbs.gid_index", CFG_OFF(verbs_gid_index), RMACOLL_CONFIG_I32},
    {"verbs.mtu", CFG_OFF(verbs_mtu), RMACOLL_CONFIG_U32},
    {"verbs.traffic_class", CFG_OFF(verbs_traffic_class), RMACOLL_CONFIG_U32},
    {"verbs.service_level", CFG_OFF(verbs_service_level), RMACOLL_CONFIG_U32},
    {"verbs.max_inflight", CFG_OFF(verbs_max_inflight), RMACOLL_CONFIG_U32},
};

/* ---- the registry: the core's keys and every transport's, in one list ---- */

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;                              /* rmacoll__config_add_keys */
    _Atomic size_t n;                                  /* entries [0, n) are complete */
    int core_index[CFG_NCORE];                         /* registry index of each core key */
    rmacoll__config_key_t keys[CONFIG_MAX_KEYS];
    config_field_t fields[CONFIG_MAX_KEYS];
    const rmacoll_transport_keyset_t *owner[CONFIG_MAX_KEYS]; /* NULL: the core */
    char names[CONFIG_MAX_KEYS][CONFIG_KEY_MAX];
    /* copies of a plugin's strings: the plugin may be unloaded */
    char defaults[CONFIG_MAX_KEYS][RMACOLL_CONFIG_STR_MAX];
    char helps[CONFIG_MAX_KEYS][192];
} config_reg = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

rmacoll__config_key_t *const rmacoll__cfg_keys = config_reg.keys;
config_field_t *const rmacoll__cfg_fields = config_reg.fields;

static const char *config_type_name(rmacoll_config_type_t t)
{
    switch (t) {
    case RMACOLL_CONFIG_STRING: return "string";
    case RMACOLL_CONFIG_U32: return "u32";
    case RMACOLL_CONFIG_I32: return "i32";
    case RMACOLL_CONFIG_SIZE: return "size";
    case RMACOLL_CONFIG_BOOL: return "bool";
    }
    return NULL;
}

static void config_reg_core(int id)
{
    size_t i = config_reg.n++;

    config_reg.keys[i] = core_keys[id];
    config_reg.fields[i] = core_fields[id];
    config_reg.core_index[id] = (int)i;
}

/* The full name of a transport's key: "<t>.<name>", or name itself when it
 * already starts with "<t>_" or "<t>.". */
int rmacoll__config_key_name(const char *transport, const char *name, char *buf, size_t len)
{
    size_t tl = strlen(transport);
    int n;

    if (strncmp(name, transport, tl) == 0 && (name[tl] == '_' || name[tl] == '.')) {
        n = snprintf(buf, len, "%s", name);
    } else {
        n = snprintf(buf, len, "%s.%s", transport, name);
    }
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Appends the keys of transport `name` not yet known; copy: copy the
 * strings (a plugin's). Callers serialise (once, or the lock). */
static void config_reg_keys(const char *name, const rmacoll_transport_key_t *keys, size_t nkeys,
                            const rmacoll_transport_keyset_t *ks, int copy)
{
    for (size_t k = 0; keys != NULL && k < nkeys && config_reg.n < CONFIG_MAX_KEYS; k++) {
        const rmacoll_transport_key_t *tk = &keys[k];
        size_t i = config_reg.n;
        config_field_t *f = &config_reg.fields[i];
        const char *type = tk->name != NULL ? config_type_name(tk->type) : NULL;

        if (type == NULL || tk->default_str == NULL || tk->help == NULL ||
            rmacoll__config_key_name(name, tk->name, config_reg.names[i], CONFIG_KEY_MAX) != 0 ||
            strlen(tk->default_str) >= RMACOLL_CONFIG_STR_MAX) {
            continue; /* a malformed declaration is not a key */
        }
        {
            int dup = 0;
            for (size_t j = 0; j < i && !dup; j++) {
                dup = strcmp(config_reg.keys[j].key, config_reg.names[i]) == 0;
            }
            if (dup) {
                continue; /* known already (a plugin loaded twice) */
            }
        }
        memset(f, 0, sizeof(*f));
        f->offset = CFG_EXT;
        switch (tk->type) {
        case RMACOLL_CONFIG_STRING: f->kind = CFG_KIND_STRING; break;
        case RMACOLL_CONFIG_BOOL: f->kind = CFG_KIND_BOOL; break;
        case RMACOLL_CONFIG_U32:
            f->kind = CFG_KIND_U32;
            f->min = tk->min == 0 && tk->max == 0 ? 0 : (tk->min < 0 ? 0 : tk->min);
            f->max = tk->min == 0 && tk->max == 0 ? UINT32_MAX
                     : (tk->max > (int64_t)UINT32_MAX ? UINT32_MAX : (uint64_t)tk->max);
            break;
        case RMACOLL_CONFIG_I32:
            f->kind = CFG_KIND_I32;
            f->min = tk->min == 0 && tk->max == 0 ? INT32_MIN
                     : (tk->min < INT32_MIN ? INT32_MIN : tk->min);
            f->max = tk->min == 0 && tk->max == 0 ? INT32_MAX
                     : (tk->max > INT32_MAX ? INT32_MAX : (uint64_t)tk->max);
            break;
        case RMACOLL_CONFIG_SIZE:
            f->kind = CFG_KIND_SIZE;
            f->min = tk->min < 0 ? 0 : tk->min;
            f->max = tk->min == 0 && tk->max == 0 ? UINT64_MAX : (uint64_t)tk->max;
            break;
        }
        for (size_t z = 0; z < sizeof(config_frozen) / sizeof(config_frozen[0]); z++) {
            if (strcmp(config_frozen[z].key, config_reg.names[i]) == 0 &&
                config_frozen[z].type == tk->type) {
                f->offset = config_frozen[z].offset;
            }
        }
        config_reg.keys[i].key = config_reg.names[i];
        config_reg.keys[i].type = type;
        config_reg.keys[i].default_str = tk->default_str;
        config_reg.keys[i].meaning = tk->help;
        if (copy) {
            snprintf(config_reg.defaults[i], sizeof(config_reg.defaults[i]), "%s",
                     tk->default_str);
            snprintf(config_reg.helps[i], sizeof(config_reg.helps[i]), "%s", tk->help);
            config_reg.keys[i].default_str = config_reg.defaults[i];
            config_reg.keys[i].meaning = config_reg.helps[i];
            f->offset = CFG_EXT; /* a plugin's key is never a frozen field */
        }
        {
            /* The default must parse as the key's type, or it is no key. */
            config_value_t sc;
            if (rmacoll__cfg_parse_into(f, config_reg.keys[i].default_str, &sc, NULL, 0, NULL, 0) !=
                RMACOLL_SUCCESS) {
                continue;
            }
        }
        config_reg.owner[i] = ks;
        config_reg.n = i + 1; /* publishes entry i (sequentially consistent) */
    }
}

static void config_reg_transport(const rmacoll_transport_keyset_t *ks)
{
    config_reg_keys(ks->transport, ks->keys, ks->nkeys, ks, 0);
}

static void config_reg_build(void)
{
    for (int id = 0; id < CFG_NCORE; id++) {
        if (!core_fields[id].after_transports) {
            config_reg_core(id);
        }
    }
    for (size_t t = 0; rmacoll__transport_keysets[t] != NULL; t++) {
        config_reg_transport(rmacoll__transport_keysets[t]);
    }
    for (int id = 0; id < CFG_NCORE; id++) {
        if (core_fields[id].after_transports) {
            config_reg_core(id);
        }
    }
}

size_t rmacoll__cfg_nkeys(void)
{
    pthread_once(&config_reg.once, config_reg_build);
    return config_reg.n;
}

void rmacoll__config_add_keys(const char *transport, const rmacoll_transport_key_t *keys,
                              size_t nkeys)
{
    if (transport == NULL || keys == NULL || nkeys == 0) {
        return;
    }
    (void)rmacoll__cfg_nkeys();
    pthread_mutex_lock(&config_reg.lock);
    config_reg_keys(transport, keys, nkeys, NULL, 1);
    pthread_mutex_unlock(&config_reg.lock);
}

#define CFG_CORE(id) ((size_t)config_reg.core_index[(id)])

const rmacoll__config_key_t *rmacoll__config_keys(size_t *n)
{
    size_t nk = rmacoll__cfg_nkeys();

    if (n != NULL) {
        *n = nk;
    }
    return config_reg.keys;
}
