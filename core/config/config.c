/*
 * config.c - configuration: built-in defaults, a YAML file parsed with
 * libcyaml, then RMACOLL_<KEY> environment overrides.
 *
 * One registry (the core's RMACOLL_CONFIG_CORE_TABLE and every transport's
 * declared keys, indexed by config_id_t) drives everything: the libcyaml schema loads every leaf as a string into one
 * flat struct, and each string is then parsed by the key's kind, so YAML
 * and environment values share one parser (sizes like "64MiB", booleans,
 * enums). libcyaml reports structural errors (unknown keys, bad nesting,
 * syntax) through its log callback; we capture them and add the dotted
 * key and its line, which we find by scanning the text ourselves because
 * libcyaml's own line numbers point at the enclosing mapping.
 */
#include "core/config/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pthread.h>

#include <cyaml/cyaml.h>

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

typedef enum config_kind {
    CFG_KIND_STRING,  /* char[RMACOLL_CONFIG_STR_MAX] */
    CFG_KIND_ENUM,    /* char[RMACOLL_CONFIG_STR_MAX], one of names */
    CFG_KIND_BOOL,    /* int, 0 or 1 */
    CFG_KIND_U32,     /* uint32_t in [min, max] */
    CFG_KIND_I32,     /* int32_t in [min, max] */
    CFG_KIND_U64,     /* uint64_t in [min, max] */
    CFG_KIND_SIZE,    /* uint64_t bytes in [min, max], "64MiB" accepted */
    CFG_KIND_LEVEL,   /* int, index in names */
    CFG_KIND_SUBSYS   /* uint32_t mask, list of names */
} config_kind_t;

/* offset of a key stored in rmacoll_config_t's ext block */
#define CFG_EXT SIZE_MAX

typedef struct config_field {
    config_kind_t kind;
    size_t offset;               /* in rmacoll_config_t, or CFG_EXT */
    const char *const *names;    /* ENUM, LEVEL, SUBSYS: NULL-terminated */
    int64_t min;                 /* integers */
    uint64_t max;
    int nonempty;                /* STRING: "" is an error */
    int plugin_ok;               /* ENUM: "plugin:PATH" allowed too */
    int after_transports;        /* listed after the transports' keys */
} config_field_t;

typedef size_t config_id_t; /* index in the registry */

/* A value of any kind, for keys stored in the ext block. */
typedef union config_value {
    char s[RMACOLL_CONFIG_STR_MAX];
    uint64_t u64;
    uint32_t u32;
    int32_t i32;
    int i;
} config_value_t;

static rmacoll_status_t config_parse_into(const config_field_t *f, const char *text, void *p,
                                          char *problem, size_t plen, char *bad, size_t badlen);


static const char *const intra_names[] = {"ce", "nvlink_kernel", "auto", NULL};
static const char *const inter_names[] = {"ofi", "verbs", NULL};
static const char *const devnet_names[] = {"auto", "staged", "hmem", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug", "trace", NULL};

#define CFG_OFF(member) offsetof(rmacoll_config_t, member)
#define CONFIG_PLUGIN_PREFIX "plugin:" /* a transport loaded from a shared object */

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
      "host calls on two nodes whose ranks of each node share one network interface (the "  \
      "relay buys no rail alignment there): a sender's stream to the other node (its "      \
      "blocks for that node in all) of at least this many bytes, and not eager, goes "       \
      "straight to its receivers, not through the relay (0 = never)",                        \
      .kind = CFG_KIND_SIZE, .offset = CFG_EXT, .min = 0, .max = UINT64_MAX)                 \
    X(MAX_TASK_BYTES, "max_task_bytes", "size", "1GiB",                                      \
      "transfers above this are split in chunks; only the last chunk signals (>= 1)",        \
      .kind = CFG_KIND_SIZE, .offset = CFG_OFF(max_task_bytes), .min = 1, .max = UINT64_MAX) \
    X(EAGER_MAX_BYTES, "eager_max_bytes", "size", "1MiB",                                     \
      "host calls on two nodes: a sender's blocks for the other node, if at most this many " \
      "bytes in all, travel inside its metadata record to the relay (relay off: each "     \
      "receiver's block in its own record; no data round for them; 0 = off; <= 1MiB; "     \
      "sizes each rank's control window)",                                                  \
      .kind = CFG_KIND_SIZE, .offset = CFG_EXT, .min = 0, .max = RMACOLL__EAGER_MAX_CAP)   \
    X(NODE_EAGER_MAX_BYTES, "node_eager_max_bytes", "size", "1MiB",                          \
      "host calls on one or two nodes: a sender's blocks for its node peers, if at most "    \
      "this many bytes in all, go into its control window and each peer copies its own "   \
      "out (no copy into peers' buffers, no signal, no wait; 0 = off; <= 1MiB; sizes each " \
      "rank's control window)",                                                               \
      .kind = CFG_KIND_SIZE, .offset = CFG_EXT, .min = 0, .max = RMACOLL__EAGER_MAX_CAP)   \
    X(TIMEOUT_MS, "timeout_ms", "u64", "30000",                                              \
      "a wait fails after this many milliseconds without progress (silence, not total "     \
      "time), naming the silent peer (>= 1)",                                                 \
      .kind = CFG_KIND_U64, .offset = CFG_OFF(timeout_ms), .min = 1, .max = UINT64_MAX)      \
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

#define CONFIG_MAX_KEYS 160
#define CONFIG_KEY_MAX 64

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
            if (config_parse_into(f, config_reg.keys[i].default_str, &sc, NULL, 0, NULL, 0) !=
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

static size_t config_nkeys(void)
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
    (void)config_nkeys();
    pthread_mutex_lock(&config_reg.lock);
    config_reg_keys(transport, keys, nkeys, NULL, 1);
    pthread_mutex_unlock(&config_reg.lock);
}

#define CFG_KEY(i) (config_reg.keys[(i)])
#define CFG_FIELD(i) (config_reg.fields[(i)])
#define CFG_CORE(id) ((size_t)config_reg.core_index[(id)])

const rmacoll__config_key_t *rmacoll__config_keys(size_t *n)
{
    size_t nk = config_nkeys();

    if (n != NULL) {
        *n = nk;
    }
    return config_reg.keys;
}

/* ---- small helpers ---- */

/* ---- the ext block: "key\0value\0" pairs sorted by key, ended by "\0";
 * a key at its default has no pair, so equal configs are equal bytes ---- */

/* Length of the well-formed part (up to and with the final "\0"), or 0. */
static size_t config_ext_len(const char *ext)
{
    size_t off = 0;

    while (off < RMACOLL_CONFIG_EXT_BYTES && ext[off] != '\0') {
        for (int part = 0; part < 2; part++) {
            const char *nul = memchr(ext + off, '\0', RMACOLL_CONFIG_EXT_BYTES - off);
            if (nul == NULL) {
                return 0;
            }
            off = (size_t)(nul - ext) + 1;
            if (off >= RMACOLL_CONFIG_EXT_BYTES) {
                return 0;
            }
        }
    }
    return off < RMACOLL_CONFIG_EXT_BYTES ? off + 1 : 0;
}

/* The stored text of key, or NULL (absent: the default applies). */
static const char *config_ext_find(const rmacoll_config_t *cfg, const char *key)
{
    const char *e = cfg->ext;

    if (config_ext_len(e) == 0) {
        return NULL;
    }
    while (*e != '\0') {
        const char *v = e + strlen(e) + 1;
        if (strcmp(e, key) == 0) {
            return v;
        }
        e = v + strlen(v) + 1;
    }
    return NULL;
}

/* Stores key = value (value NULL: removes it). RMACOLL_ERR_CONFIG when the
 * block is full or malformed. */
static int config_ext_emit(char *out, size_t *off, const char *k, const char *v)
{
    size_t kl = strlen(k) + 1, vl = strlen(v) + 1;

    if (*off + kl + vl + 1 > RMACOLL_CONFIG_EXT_BYTES) {
        return -1;
    }
    memcpy(out + *off, k, kl);
    memcpy(out + *off + kl, v, vl);
    *off += kl + vl;
    return 0;
}

static rmacoll_status_t config_ext_put(rmacoll_config_t *cfg, const char *key, const char *value)
{
    char out[RMACOLL_CONFIG_EXT_BYTES];
    const char *e = cfg->ext;
    size_t off = 0;
    int done = value == NULL;

    if (config_ext_len(e) == 0) {
        return RMACOLL_ERR_CONFIG;
    }
    memset(out, 0, sizeof(out));
    while (*e != '\0') {
        const char *v = e + strlen(e) + 1;
        int cmp = strcmp(e, key);

        if (!done && cmp >= 0) {
            if (config_ext_emit(out, &off, key, value) != 0) {
                return RMACOLL_ERR_CONFIG;
            }
            done = 1;
        }
        if (cmp != 0 && config_ext_emit(out, &off, e, v) != 0) {
            return RMACOLL_ERR_CONFIG;
        }
        e = v + strlen(v) + 1;
    }
    if (!done && config_ext_emit(out, &off, key, value) != 0) {
        return RMACOLL_ERR_CONFIG;
    }
    memcpy(cfg->ext, out, sizeof(out));
    return RMACOLL_SUCCESS;
}

/* Where the value of key id lies: its field, or (ext) scratch filled from
 * the stored text or the default. */
static const void *config_value_ptr(const rmacoll_config_t *cfg, config_id_t id,
                                    config_value_t *scratch)
{
    const char *text;

    if (CFG_FIELD(id).offset != CFG_EXT) {
        return (const char *)cfg + CFG_FIELD(id).offset;
    }
    memset(scratch, 0, sizeof(*scratch));
    text = config_ext_find(cfg, CFG_KEY(id).key);
    (void)config_parse_into(&CFG_FIELD(id), text != NULL ? text : CFG_KEY(id).default_str,
                            scratch, NULL, 0, NULL, 0);
    return scratch;
}

/* Integer value of a numeric, boolean, level or mask field, widened. */
static uint64_t config_get_u64(const rmacoll_config_t *cfg, config_id_t id)
{
    config_value_t sc;
    const void *p = config_value_ptr(cfg, id, &sc);

    switch (CFG_FIELD(id).kind) {
    case CFG_KIND_BOOL:
    case CFG_KIND_LEVEL:
        return (uint64_t)(int64_t)*(const int *)p;
    case CFG_KIND_U32:
    case CFG_KIND_SUBSYS:
        return *(const uint32_t *)p;
    case CFG_KIND_I32:
        return (uint64_t)(int64_t)*(const int32_t *)p;
    case CFG_KIND_U64:
    case CFG_KIND_SIZE:
        return *(const uint64_t *)p;
    default:
        return 0;
    }
}

/* Copies src into dst (len > 0), truncating. */
static void config_copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);

    if (len == 0) {
        return;
    }
    if (n >= len) {
        n = len - 1;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Unsigned integer, decimal or 0x-hex, no sign. */
static rmacoll_status_t config_parse_u64(const char *text, uint64_t *v)
{
    char buf[64];
    const char *s = buf;
    unsigned base = 10;
    uint64_t acc = 0;

    if (rmacoll__trim(text, buf, sizeof(buf)) != 0 || buf[0] == '\0') {
        return RMACOLL_ERR_CONFIG;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && s[2] != '\0') {
        base = 16;
        s += 2;
    }
    for (; *s != '\0'; s++) {
        unsigned d;

        if (*s >= '0' && *s <= '9') {
            d = (unsigned)(*s - '0');
        } else if (base == 16 && isxdigit((unsigned char)*s)) {
            d = (unsigned)(tolower((unsigned char)*s) - 'a' + 10);
        } else {
            return RMACOLL_ERR_CONFIG;
        }
        if (acc > (UINT64_MAX - d) / base) {
            return RMACOLL_ERR_OVERFLOW;
        }
        acc = acc * base + d;
    }
    *v = acc;
    return RMACOLL_SUCCESS;
}

/* Signed decimal integer. */
static rmacoll_status_t config_parse_i64(const char *text, int64_t *v)
{
    char buf[64];
    uint64_t mag;
    rmacoll_status_t st;
    int neg = 0;

    if (rmacoll__trim(text, buf, sizeof(buf)) != 0) {
        return RMACOLL_ERR_CONFIG;
    }
    if (buf[0] == '-' || buf[0] == '+') {
        neg = buf[0] == '-';
        if (!isdigit((unsigned char)buf[1])) {
            return RMACOLL_ERR_CONFIG;
        }
        st = config_parse_u64(buf + 1, &mag);
    } else {
        st = config_parse_u64(buf, &mag);
    }
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) {
        return RMACOLL_ERR_OVERFLOW;
    }
    *v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_parse_size(const char *text, uint64_t *bytes)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {
        {"", 0},     {"b", 0},    {"k", 10},   {"kb", 10},  {"kib", 10}, {"m", 20},
        {"mb", 20},  {"mib", 20}, {"g", 30},   {"gb", 30},  {"gib", 30}, {"t", 40},
        {"tb", 40},  {"tib", 40}, {"p", 50},   {"pb", 50},  {"pib", 50}, {"e", 60},
        {"eb", 60},  {"eib", 60},
    };
    char buf[64];
    char *s = buf;
    uint64_t acc = 0;

    if (text == NULL || bytes == NULL || rmacoll__trim(text, buf, sizeof(buf)) != 0 ||
        !isdigit((unsigned char)buf[0])) {
        return RMACOLL_ERR_CONFIG;
    }
    for (; isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');

        if (acc > (UINT64_MAX - d) / 10) {
            return RMACOLL_ERR_OVERFLOW;
        }
        acc = acc * 10 + d;
    }
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(s, units[i].suffix) == 0) {
            if (units[i].shift > 0 && acc > (UINT64_MAX >> units[i].shift)) {
                return RMACOLL_ERR_OVERFLOW;
            }
            *bytes = acc << units[i].shift;
            return RMACOLL_SUCCESS;
        }
    }
    return RMACOLL_ERR_CONFIG;
}

static int config_name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i] != NULL; i++) {
        if (strcmp(names[i], s) == 0) {
            return i;
        }
    }
    return -1;
}

/* Log levels and subsystems are matched in any case ("INFO", as NCCL_DEBUG). */
static int config_name_index_ci(const char *const *names, const char *s)
{
    for (int i = 0; names[i] != NULL; i++) {
        if (strcasecmp(names[i], s) == 0) {
            return i;
        }
    }
    return -1;
}

static void config_join_names(const char *const *names, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; names[i] != NULL && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? "|" : "", names[i]);
        if (n < 0) {
            return;
        }
        off += (size_t)n;
    }
}

/*
 * Parses text as the value of key id and stores it in cfg. On failure cfg
 * is unchanged, problem receives why ("'x' is not a size ...") and, for a
 * list, bad receives the offending entry.
 */
static rmacoll_status_t config_parse_into(const config_field_t *f, const char *text, void *p,
                                          char *problem, size_t plen, char *bad, size_t badlen)
{
    char names[160];
    uint64_t u = 0;
    int64_t i = 0;
    rmacoll_status_t st;
    /* a long value is quoted in part, so the reason fits the message */
    char shown[64];

    snprintf(shown, sizeof(shown), "%.48s%s", text, strlen(text) > 48 ? "..." : "");
    if (bad != NULL && badlen > 0) {
        bad[0] = '\0';
    }
    switch (f->kind) {
    case CFG_KIND_STRING:
    case CFG_KIND_ENUM:
        if (strlen(text) >= RMACOLL_CONFIG_STR_MAX) {
            rmacoll__errbuf_printf(problem, plen, "'%.32s...' is longer than %d bytes", text,
                                   RMACOLL_CONFIG_STR_MAX - 1);
            return RMACOLL_ERR_CONFIG;
        }
        if (f->kind == CFG_KIND_ENUM && config_name_index(f->names, text) < 0 &&
            !(f->plugin_ok && strncmp(text, CONFIG_PLUGIN_PREFIX, strlen(CONFIG_PLUGIN_PREFIX)) == 0 &&
              text[strlen(CONFIG_PLUGIN_PREFIX)] != '\0')) {
            config_join_names(f->names, names, sizeof(names));
            rmacoll__errbuf_printf(problem, plen, "'%s' is not one of %s", shown, names);
            return RMACOLL_ERR_CONFIG;
        }
        if (f->nonempty && text[0] == '\0') {
            rmacoll__errbuf_printf(problem, plen, "must not be empty");
            return RMACOLL_ERR_CONFIG;
        }
        /* Zero the tail so equal configs are equal bytes. */
        memset(p, 0, RMACOLL_CONFIG_STR_MAX);
        memcpy(p, text, strlen(text));
        return RMACOLL_SUCCESS;
    case CFG_KIND_BOOL: {
        int b = rmacoll__parse_bool(text);
        if (b < 0) {
            rmacoll__errbuf_printf(problem, plen,
                                   "'%s' is not a boolean (true|false|1|0|yes|no|on|off)",
                                   shown);
            return RMACOLL_ERR_CONFIG;
        }
        *(int *)p = b;
        return RMACOLL_SUCCESS;
    }
    case CFG_KIND_LEVEL: {
        int l = config_name_index_ci(f->names, text);
        if (l < 0) {
            config_join_names(f->names, names, sizeof(names));
            rmacoll__errbuf_printf(problem, plen, "'%s' is not one of %s", shown, names);
            return RMACOLL_ERR_CONFIG;
        }
        *(int *)p = l;
        return RMACOLL_SUCCESS;
    }
    case CFG_KIND_SUBSYS: {
        uint32_t m = 0;
        char tok[64];
        if (rmacoll__log_subsys_parse(text, &m, tok, sizeof(tok)) != 0) {
            config_join_names(f->names, names, sizeof(names));
            rmacoll__errbuf_printf(problem, plen,
                                   "'%s' is not a subsystem (%s|all|none)", tok, names);
            if (bad != NULL && badlen > 0) {
                snprintf(bad, badlen, "%s", tok);
            }
            return RMACOLL_ERR_CONFIG;
        }
        *(uint32_t *)p = m;
        return RMACOLL_SUCCESS;
    }
    case CFG_KIND_SIZE:
        st = rmacoll__config_parse_size(text, &u);
        if (st == RMACOLL_ERR_OVERFLOW) {
            rmacoll__errbuf_printf(problem, plen, "'%s' overflows 64 bits", shown);
            return RMACOLL_ERR_CONFIG;
        }
        if (st != RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(problem, plen,
                                   "'%s' is not a size (an integer with an optional suffix B, KiB, "
                                   "MiB, GiB, TiB, K, M, G)", shown);
            return RMACOLL_ERR_CONFIG;
        }
        break;
    case CFG_KIND_U32:
    case CFG_KIND_U64:
        st = config_parse_u64(text, &u);
        if (st == RMACOLL_ERR_OVERFLOW) {
            rmacoll__errbuf_printf(problem, plen, "'%s' overflows 64 bits", shown);
            return RMACOLL_ERR_CONFIG;
        }
        if (st != RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(problem, plen, "'%s' is not an unsigned integer", shown);
            return RMACOLL_ERR_CONFIG;
        }
        break;
    case CFG_KIND_I32:
        st = config_parse_i64(text, &i);
        if (st != RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(problem, plen, "'%s' is not an integer", shown);
            return RMACOLL_ERR_CONFIG;
        }
        if (i < f->min || i > (int64_t)f->max) {
            rmacoll__errbuf_printf(problem, plen,
                                   "%" PRId64 " is outside [%" PRId64 ", %" PRIu64 "]", i,
                                   f->min, f->max);
            return RMACOLL_ERR_CONFIG;
        }
        *(int32_t *)p = (int32_t)i;
        return RMACOLL_SUCCESS;
    }

    /* Unsigned kinds: the range. */
    if (u < (uint64_t)f->min) {
        rmacoll__errbuf_printf(problem, plen,
                               "%" PRIu64 " is below the minimum %" PRId64, u, f->min);
        return RMACOLL_ERR_CONFIG;
    }
    if (u > f->max) {
        rmacoll__errbuf_printf(problem, plen,
                               "%" PRIu64 " is above the maximum %" PRIu64, u, f->max);
        return RMACOLL_ERR_CONFIG;
    }
    if (f->kind == CFG_KIND_U32) {
        *(uint32_t *)p = (uint32_t)u;
    } else {
        *(uint64_t *)p = u;
    }
    return RMACOLL_SUCCESS;
}

static int config_value_string(const rmacoll_config_t *cfg, config_id_t id, char *buf,
                               size_t len, int quote);
static rmacoll_status_t config_check_transports(const rmacoll_config_t *cfg, const char **key,
                                                char *problem, size_t plen);
static int config_id_of(const char *key);
static int config_format(const config_field_t *f, const void *p, char *buf, size_t len,
                         int quote);

/*
 * Parses text as the value of key id and stores it in cfg: in its field,
 * or as canonical text in the ext block (no pair at the default). On
 * failure cfg is unchanged, problem receives why and, for a list, bad the
 * offending entry.
 */
static rmacoll_status_t config_set(rmacoll_config_t *cfg, config_id_t id, const char *text,
                                   char *problem, size_t plen, char *bad, size_t badlen)
{
    const config_field_t *f = &CFG_FIELD(id);
    config_value_t sc, dsc;
    char canon[RMACOLL_CONFIG_STR_MAX + 16];
    char dcanon[RMACOLL_CONFIG_STR_MAX + 16];
    rmacoll_status_t st;

    if (f->offset != CFG_EXT) {
        return config_parse_into(f, text, (char *)cfg + f->offset, problem, plen, bad, badlen);
    }
    memset(&sc, 0, sizeof(sc));
    memset(&dsc, 0, sizeof(dsc));
    st = config_parse_into(f, text, &sc, problem, plen, bad, badlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    (void)config_parse_into(f, CFG_KEY(id).default_str, &dsc, NULL, 0, NULL, 0);
    config_format(f, &sc, canon, sizeof(canon), 0);
    config_format(f, &dsc, dcanon, sizeof(dcanon), 0);
    st = config_ext_put(cfg, CFG_KEY(id).key, strcmp(canon, dcanon) == 0 ? NULL : canon);
    if (st != RMACOLL_SUCCESS) {
        rmacoll__errbuf_printf(problem, plen, "no room left for transport keys (%d bytes in all)",
                               RMACOLL_CONFIG_EXT_BYTES);
    }
    return st;
}

/* ---- the components' hooks (rmacoll__config_register) ---- */

static struct {
    pthread_mutex_t lock;
    _Atomic size_t n;   /* entries [0, n) are set */
    const rmacoll__config_hooks_t *set[RMACOLL__CONFIG_MAX_HOOKS];
} config_hooks = {.lock = PTHREAD_MUTEX_INITIALIZER};

rmacoll_status_t rmacoll__config_register(const rmacoll__config_hooks_t *hooks)
{
    rmacoll_status_t st = RMACOLL_SUCCESS;
    size_t n;

    if (hooks == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&config_hooks.lock);
    n = config_hooks.n;
    for (size_t i = 0; i < n; i++) {
        if (config_hooks.set[i] == hooks) {
            pthread_mutex_unlock(&config_hooks.lock);
            return RMACOLL_SUCCESS;
        }
    }
    if (n == RMACOLL__CONFIG_MAX_HOOKS) {
        st = RMACOLL_ERR_NO_MEMORY;
    } else {
        config_hooks.set[n] = hooks;
        config_hooks.n = n + 1;
    }
    pthread_mutex_unlock(&config_hooks.lock);
    return st;
}

/* Lets every component declare the keys cfg brings with it (a transport
 * plugin it names); one that cannot adds no keys (create reports why). */
static void config_declare_keys(const rmacoll_config_t *cfg)
{
    size_t n = config_hooks.n;

    for (size_t i = 0; i < n; i++) {
        if (config_hooks.set[i]->declare_keys != NULL) {
            config_hooks.set[i]->declare_keys(cfg);
        }
    }
}

/* The components' rules over several keys (the planner's relay slot
 * rule): NULL when cfg passes them all, else the keys of the first that
 * fails (NULL-terminated), with why in problem. */
static const char *const *config_rules_fail(const rmacoll_config_t *cfg, char *problem,
                                            size_t plen)
{
    static const char *const none[] = {"", NULL};
    size_t n = config_hooks.n;

    for (size_t i = 0; i < n; i++) {
        const rmacoll__config_hooks_t *h = config_hooks.set[i];
        if (h->check != NULL && !h->check(cfg, problem, plen)) {
            return h->check_keys != NULL && h->check_keys[0] != NULL ? h->check_keys : none;
        }
    }
    return NULL;
}

/* ---- finding the line of a key in the YAML text ----
 * A small scanner, not a YAML parser: good for block and flow mappings,
 * comments and quoted keys, which is what configuration files use. */

static int config_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int scan_boundary(const char *t, size_t i, size_t from)
{
    return i == from || i == 0 || strchr(" \t\n{[,", t[i - 1]) != NULL;
}

/* Is there `key:` (optionally quoted) at t[pos]? *after: just past the colon. */
static int scan_key_at(const char *t, size_t len, size_t pos, const char *key, size_t *after)
{
    size_t klen = strlen(key);
    size_t p = pos;
    char q = 0;

    if (t[p] == '"' || t[p] == '\'') {
        q = t[p++];
    }
    if (p + klen > len || memcmp(t + p, key, klen) != 0) {
        return 0;
    }
    p += klen;
    if (q != 0) {
        if (p >= len || t[p] != q) {
            return 0;
        }
        p++;
    }
    while (p < len && (t[p] == ' ' || t[p] == '\t')) {
        p++;
    }
    if (p >= len || t[p] != ':') {
        return 0;
    }
    p++;
    if (q == 0 && p < len && !config_is_space(t[p])) {
        return 0;
    }
    *after = p;
    return 1;
}

/*
 * Position of the first `key:` in t[from, to) outside comments and quoted
 * scalars, at column 0 if top_level; -1 if none. Also matches a bare word
 * (a sequence entry) when word_only is set.
 */
static long scan_find(const char *t, size_t from, size_t to, const char *key, int top_level,
                      int word_only, size_t *after)
{
    int in_comment = 0;
    char quote = 0;

    for (size_t i = from; i < to; i++) {
        char c = t[i];
        int at_start = i == 0 || t[i - 1] == '\n';

        if (c == '\n') {
            in_comment = 0;
            quote = 0;
            continue;
        }
        if (in_comment) {
            continue;
        }
        if (quote != 0) {
            if (c == '\\' && quote == '"') {
                i++;
            } else if (c == quote) {
                quote = 0;
            }
            continue;
        }
        if (c == '#' && (i == 0 || config_is_space(t[i - 1]))) {
            in_comment = 1;
            continue;
        }
        if (!scan_boundary(t, i, from)) {
            continue;
        }
        if (word_only) {
            size_t n = strlen(key);
            if (i + n <= to && memcmp(t + i, key, n) == 0 &&
                (i + n == to || strchr(" \t\r\n,]#", t[i + n]) != NULL)) {
                *after = i + n;
                return (long)i;
            }
        } else if ((!top_level || at_start) && scan_key_at(t, to, i, key, after)) {
            return (long)i;
        }
        if (c == '"' || c == '\'') {
            quote = c;
        }
    }
    return -1;
}

/* End of the block that starts at pos: the next line beginning at column 0. */
static size_t scan_block_end(const char *t, size_t len, size_t pos)
{
    for (size_t i = pos; i + 1 < len; i++) {
        if (t[i] == '\n' && strchr(" \t\r\n#", t[i + 1]) == NULL) {
            return i + 1;
        }
    }
    return len;
}

static int scan_line_of(const char *t, size_t pos)
{
    int line = 1;

    for (size_t i = 0; i < pos; i++) {
        line += t[i] == '\n';
    }
    return line;
}

/*
 * Where the last key of dotted path ("timeout_ms", "relay.slots": at most
 * two levels) may stand in t: [*from, *end), *key its name, *top whether
 * at column 0 (a top-level key). 0 when the section is not in t.
 */
static int config_key_scope(const char *t, size_t len, const char *path, size_t *from,
                            size_t *end, const char **key, int *top)
{
    const char *dot = strchr(path, '.');
    char parent[64];
    size_t plen, after = 0;

    *from = 0;
    *end = len;
    *key = path;
    *top = 1;
    if (dot == NULL) {
        return 1;
    }
    plen = (size_t)(dot - path);
    if (plen >= sizeof(parent)) {
        return 0;
    }
    memcpy(parent, path, plen);
    parent[plen] = '\0';
    if (scan_find(t, 0, len, parent, 1, 0, &after) < 0) {
        return 0;
    }
    *from = after;
    *end = scan_block_end(t, len, after);
    *key = dot + 1;
    *top = 0;
    return 1;
}

/*
 * Line (1-based) of the nth (1, or 2 for libcyaml's "mapping field already
 * seen") `key:` of dotted key path ("relay.slots", at most two levels) in
 * t, or of the sequence entry `item` under it when item is not NULL and
 * found; 0 when the key is not found.
 */
static int config_find_line(const char *t, size_t len, const char *path, const char *item,
                            int nth)
{
    size_t from, end, after = 0;
    const char *key;
    int top;
    long pos = -1;

    if (t == NULL || !config_key_scope(t, len, path, &from, &end, &key, &top)) {
        return 0;
    }
    for (int k = 0; k < nth; k++) {
        size_t start = k == 0 ? from : after;

        pos = scan_find(t, start, end, key, top, 0, &after);
        if (pos < 0 && top) { /* a top-level flow mapping: keys not at column 0 */
            pos = scan_find(t, start, end, key, 0, 0, &after);
        }
        if (pos < 0) {
            return 0;
        }
    }
    if (item != NULL && item[0] != '\0') {
        size_t a2;
        long ipos = scan_find(t, after, scan_block_end(t, len, after), item, 0, 1, &a2);
        if (ipos >= 0) {
            pos = ipos;
        }
    }
    return scan_line_of(t, (size_t)pos);
}

/* ---- libcyaml schema: every leaf a string, all in one flat struct ----
 * Built from the registry at each load (the keys are the core's and the
 * transports'): a top-level key without a dot is a leaf, "a.b" a leaf b in
 * the mapping a. log.subsystems (a SUBSYS key) is a sequence of strings. */

typedef struct config_raw {
    char *v[CONFIG_MAX_KEYS];  /* NULL: key absent */
    char **seq;                /* the SUBSYS key's entries */
    unsigned seq_count;
} config_raw_t;

#define CONFIG_MAX_SECTIONS 32

typedef struct config_schema {
    cyaml_schema_field_t top[CONFIG_MAX_KEYS + 1];
    cyaml_schema_field_t child[CONFIG_MAX_KEYS + CONFIG_MAX_SECTIONS];
    char section[CONFIG_MAX_SECTIONS][CONFIG_KEY_MAX];
    cyaml_schema_value_t value;
} config_schema_t;

static const cyaml_schema_value_t raw_entry_schema = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static cyaml_schema_field_t config_schema_leaf(const char *name, config_id_t id)
{
    if (CFG_FIELD(id).kind == CFG_KIND_SUBSYS) {
        cyaml_schema_field_t f = CYAML_FIELD_SEQUENCE(
            "x", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, config_raw_t, seq, &raw_entry_schema,
            1, CYAML_UNLIMITED);
        f.key = name;
        return f;
    } else {
        cyaml_schema_field_t f = CYAML_FIELD_STRING_PTR(
            "x", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, config_raw_t, v[0], 0,
            CYAML_UNLIMITED);
        f.key = name;
        f.data_offset = (uint32_t)(offsetof(config_raw_t, v) + id * sizeof(char *));
        return f;
    }
}

/* Fills sc from the registry; the names point into the registry and sc. */
static void config_schema_build(config_schema_t *sc)
{
    size_t n = config_nkeys();
    size_t nt = 0, nc = 0, ns = 0;
    const cyaml_schema_field_t end = CYAML_FIELD_END;

    memset(sc, 0, sizeof(*sc));
    for (size_t id = 0; id < n; id++) {
        const char *key = CFG_KEY(id).key;
        const char *dot = strchr(key, '.');
        size_t plen;
        int seen = 0;

        if (dot == NULL) {
            sc->top[nt++] = config_schema_leaf(key, id);
            continue;
        }
        plen = (size_t)(dot - key);
        for (size_t k = 0; k < ns; k++) {
            seen |= strlen(sc->section[k]) == plen && strncmp(sc->section[k], key, plen) == 0;
        }
        if (seen || ns == CONFIG_MAX_SECTIONS || plen >= CONFIG_KEY_MAX) {
            continue;
        }
        /* A new section: every key with this prefix, in registry order. */
        memcpy(sc->section[ns], key, plen);
        sc->section[ns][plen] = '\0';
        {
            cyaml_schema_field_t m = {
                .key = sc->section[ns],
                .data_offset = 0,
                .value = {.type = CYAML_MAPPING, .flags = CYAML_FLAG_OPTIONAL,
                          .data_size = sizeof(config_raw_t),
                          .mapping = {.fields = &sc->child[nc]}},
            };
            sc->top[nt++] = m;
        }
        for (size_t j = id; j < n; j++) {
            const char *kj = CFG_KEY(j).key;
            if (strncmp(kj, key, plen) == 0 && kj[plen] == '.') {
                sc->child[nc++] = config_schema_leaf(kj + plen + 1, j);
            }
        }
        sc->child[nc++] = end;
        ns++;
    }
    sc->top[nt] = end;
    {
        cyaml_schema_value_t v = {
            CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, config_raw_t, sc->top),
        };
        sc->value = v;
    }
}

/* ---- capturing libcyaml's error log ---- */

#define CONFIG_LOG_MAX_FIELDS 8

typedef struct config_cyaml_log {
    char msg[256];                                /* first error line */
    char fields[CONFIG_LOG_MAX_FIELDS][64];       /* backtrace, innermost first */
    int field_lines[CONFIG_LOG_MAX_FIELDS];
    int nfields;
    int line;                                     /* innermost line libcyaml gave */
} config_cyaml_log_t;

static void config_cyaml_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    config_cyaml_log_t *lg = ctx;
    char buf[512];
    char *s = buf;
    const char *ln;
    size_t n;

    if (level < CYAML_LOG_ERROR) {
        return;
    }
    vsnprintf(buf, sizeof(buf), fmt, args);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    if (strncmp(s, "Load: ", 6) == 0) {
        s += 6;
    }
    if (strcmp(s, "Backtrace:") == 0) {
        return;
    }
    ln = strstr(s, "(line: ");
    if (ln != NULL && lg->line == 0) {
        lg->line = atoi(ln + 7);
    }
    if (strncmp(s, "  in mapping field '", 20) == 0) {
        const char *name = s + 20;
        const char *q = strchr(name, '\'');
        if (q != NULL && lg->nfields < CONFIG_LOG_MAX_FIELDS) {
            snprintf(lg->fields[lg->nfields], sizeof(lg->fields[0]), "%.*s",
                     (int)(q - name), name);
            lg->field_lines[lg->nfields] = ln != NULL ? atoi(ln + 7) : 0;
            lg->nfields++;
        }
        return;
    }
    if (strncmp(s, "  in ", 5) == 0) {
        return;
    }
    if (lg->msg[0] == '\0') {
        config_copy(lg->msg, sizeof(lg->msg), s);
        lg->msg[0] = (char)tolower((unsigned char)lg->msg[0]); /* lower-case messages */
    }
}

/* The keys allowed under parent ("" = top level), for error messages. */
static void config_list_children(const char *parent, char *buf, size_t len)
{
    size_t off = 0;
    size_t plen = strlen(parent);
    char prev[64] = "";

    buf[0] = '\0';
    for (size_t k = 0; k < config_nkeys() && off < len; k++) {
        const char *key = CFG_KEY(k).key;
        char name[64];
        const char *dot;

        if (plen > 0) {
            if (strncmp(key, parent, plen) != 0 || key[plen] != '.') {
                continue;
            }
            snprintf(name, sizeof(name), "%s", key + plen + 1);
        } else {
            dot = strchr(key, '.');
            snprintf(name, sizeof(name), "%.*s", dot ? (int)(dot - key) : (int)strlen(key), key);
        }
        if (strcmp(name, prev) == 0) {
            continue;
        }
        snprintf(prev, sizeof(prev), "%s", name);
        int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", name);
        if (n < 0) {
            return;
        }
        off += (size_t)n;
    }
}

/* Turns what libcyaml logged into one message naming the key and its line. */
static void config_cyaml_error(const config_cyaml_log_t *lg, cyaml_err_t err, const char *file,
                               const char *text, size_t len, char *errbuf, size_t errlen)
{
    char path[256] = "";
    size_t off = 0;
    int line;

    /* Backtrace is innermost first; the path reads outermost first. */
    for (int k = lg->nfields - 1; k >= 0 && off < sizeof(path); k--) {
        off += (size_t)snprintf(path + off, sizeof(path) - off, "%s%s", off ? "." : "",
                                lg->fields[k]);
    }
    if (strncmp(lg->msg, "unexpected key: ", 16) == 0) {
        const char *key = lg->msg + 16;
        char full[320];
        char known[512];

        snprintf(full, sizeof(full), "%s%s%s", path, path[0] ? "." : "", key);
        line = config_find_line(text, len, full, NULL, 1);
        if (line == 0) {
            line = lg->line > 0 ? lg->line : 1;
        }
        config_list_children(path, known, sizeof(known));
        rmacoll__errbuf_printf(errbuf, errlen,
                               "config file '%s' line %d: unknown key '%s' (known: %s)",
                               file, line, full, known);
        return;
    }
    line = 0;
    if (path[0] && strncmp(lg->msg, "mapping field already seen", 26) == 0) {
        line = config_find_line(text, len, path, NULL, 2); /* the duplicate */
    }
    if (line == 0) {
        line = path[0] ? config_find_line(text, len, path, NULL, 1) : 0;
    }
    if (line == 0) {
        line = lg->line > 0 ? lg->line : 1;
    }
    rmacoll__errbuf_printf(errbuf, errlen, "config file '%s' line %d: %s%s%s", file, line, path,
                           path[0] ? ": " : "", lg->msg[0] ? lg->msg : cyaml_strerror(err));
}

/* ---- loading ---- */

#define CONFIG_FILE_MAX (1u << 20)

static rmacoll_status_t config_read_file(const char *file, char **text, size_t *len,
                                         char *errbuf, size_t errlen)
{
    FILE *fp = fopen(file, "rb");
    char *buf;
    size_t n;

    if (fp == NULL) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "cannot open config file '%s': %s", file, strerror(errno));
        return RMACOLL_ERR_CONFIG;
    }
    buf = malloc(CONFIG_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(fp);
        rmacoll__errbuf_printf(errbuf, errlen, "no memory to read config file '%s'", file);
        return RMACOLL_ERR_NO_MEMORY;
    }
    n = fread(buf, 1, CONFIG_FILE_MAX + 1, fp);
    if (ferror(fp) || n > CONFIG_FILE_MAX) {
        rmacoll__errbuf_printf(errbuf, errlen, "cannot read config file '%s': %s", file,
                               n > CONFIG_FILE_MAX ? "larger than 1 MiB" : strerror(errno));
        fclose(fp);
        free(buf);
        return RMACOLL_ERR_CONFIG;
    }
    fclose(fp);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return RMACOLL_SUCCESS;
}

/* Is the text only blanks and comments (libyaml then gives no document)? */
static int config_text_empty(const char *t, size_t len)
{
    int in_comment = 0;

    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\n') {
            in_comment = 0;
        } else if (t[i] == '#') {
            in_comment = 1;
        } else if (!in_comment && !config_is_space(t[i])) {
            return 0;
        }
    }
    return 1;
}

/* Applies the file; lines[id] receives the line of every key it set. */
static rmacoll_status_t config_load_file(const char *file, rmacoll_config_t *cfg, int *lines,
                                         int lenient, char *errbuf, size_t errlen)
{
    config_cyaml_log_t lg;
    cyaml_config_t ycfg;
    config_schema_t *schema;
    config_raw_t *raw = NULL;
    char *text = NULL;
    size_t len = 0;
    rmacoll_status_t st;
    cyaml_err_t err;

    st = config_read_file(file, &text, &len, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (config_text_empty(text, len)) {
        free(text);
        return RMACOLL_SUCCESS;
    }
    schema = malloc(sizeof(*schema));
    if (schema == NULL) {
        free(text);
        rmacoll__errbuf_printf(errbuf, errlen, "no memory to read config file '%s'", file);
        return RMACOLL_ERR_NO_MEMORY;
    }
    config_schema_build(schema);
    memset(&lg, 0, sizeof(lg));
    memset(&ycfg, 0, sizeof(ycfg));
    ycfg.log_fn = config_cyaml_log;
    ycfg.log_ctx = &lg;
    ycfg.mem_fn = cyaml_mem;
    ycfg.log_level = CYAML_LOG_ERROR;
    ycfg.flags = lenient ? CYAML_CFG_IGNORE_UNKNOWN_KEYS : CYAML_CFG_DEFAULT;
    err = cyaml_load_data((const uint8_t *)text, len, &ycfg, &schema->value,
                          (cyaml_data_t **)&raw, NULL);
    if (err != CYAML_OK) {
        config_cyaml_error(&lg, err, file, text, len, errbuf, errlen);
        free(schema);
        free(text);
        return err == CYAML_ERR_OOM ? RMACOLL_ERR_NO_MEMORY : RMACOLL_ERR_CONFIG;
    }

    st = RMACOLL_SUCCESS;
    for (size_t id = 0; raw != NULL && id < config_nkeys() && st == RMACOLL_SUCCESS; id++) {
        char joined[512];
        char problem[320];
        char bad[64];
        const char *val = raw->v[id];

        if (CFG_FIELD(id).kind == CFG_KIND_SUBSYS && raw->seq != NULL) {
            size_t off = 0;
            joined[0] = '\0';
            for (unsigned k = 0; k < raw->seq_count && off < sizeof(joined); k++) {
                off += (size_t)snprintf(joined + off, sizeof(joined) - off, "%s%s",
                                        k ? "," : "", raw->seq[k]);
            }
            val = joined;
        }
        if (val == NULL) {
            continue;
        }
        lines[id] = config_find_line(text, len, CFG_KEY(id).key, NULL, 1);
        if (lines[id] == 0) {
            lines[id] = 1;
        }
        st = config_set(cfg, id, val, problem, sizeof(problem), bad, sizeof(bad));
        if (st != RMACOLL_SUCCESS) {
            int line = bad[0] ? config_find_line(text, len, CFG_KEY(id).key, bad, 1) : 0;
            rmacoll__errbuf_printf(errbuf, errlen, "config file '%s' line %d: %s: %s", file,
                                   line > 0 ? line : lines[id], CFG_KEY(id).key, problem);
        }
    }
    cyaml_free(&ycfg, &schema->value, raw, 0);
    free(schema);
    free(text);
    return st;
}

/* RMACOLL_ + key upper-cased, dots as underscores. */
static void config_env_name(config_id_t id, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "RMACOLL_");

    for (const char *k = CFG_KEY(id).key; *k != '\0' && off + 1 < len; k++) {
        buf[off++] = *k == '.' ? '_' : (char)toupper((unsigned char)*k);
    }
    buf[off < len ? off : len - 1] = '\0';
}

static rmacoll_status_t config_load_env(rmacoll_config_t *cfg, int *from_env, char *errbuf,
                                        size_t errlen)
{
    for (size_t id = 0; id < config_nkeys(); id++) {
        char name[96];
        char problem[320];
        const char *val;

        config_env_name(id, name, sizeof(name));
        val = getenv(name);
        if (val == NULL) {
            continue;
        }
        from_env[id] = 1;
        if (config_set(cfg, id, val, problem, sizeof(problem), NULL, 0) !=
            RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(errbuf, errlen, "environment %s='%.64s' (%s): %s", name, val,
                                   CFG_KEY(id).key, problem);
            return RMACOLL_ERR_CONFIG;
        }
    }
    return RMACOLL_SUCCESS;
}

void rmacoll__config_init(rmacoll_config_t *cfg)
{
    if (cfg == NULL) {
        return;
    }
    memset(cfg, 0, sizeof(*cfg));
    cfg->struct_size = sizeof(*cfg);
    for (size_t id = 0; id < config_nkeys(); id++) {
        /* The defaults are parsed from the table, so the table is the truth;
         * test_config checks that every one parses. */
        (void)config_set(cfg, id, CFG_KEY(id).default_str, NULL, 0, NULL, 0);
    }
}

/* A check over several keys failed: name whichever source set them last
 * (environment, else the file's line, else just the keys). */
static void config_blame(const config_id_t *ids, int n, const char *file, const int *lines,
                         const int *from_env, const char *problem, char *errbuf, size_t errlen)
{
    char name[96];

    for (int k = 0; k < n; k++) {
        if (from_env[ids[k]]) {
            config_env_name(ids[k], name, sizeof(name));
            rmacoll__errbuf_printf(errbuf, errlen,
                                   "environment %s (%s): %s", name, CFG_KEY(ids[k]).key,
                                   problem);
            return;
        }
    }
    for (int k = 0; k < n; k++) {
        if (lines[ids[k]] > 0) {
            rmacoll__errbuf_printf(errbuf, errlen,
                                   "config file '%s' line %d: %s: %s", file, lines[ids[k]],
                                   CFG_KEY(ids[k]).key, problem);
            return;
        }
    }
    rmacoll__errbuf_printf(errbuf, errlen, "%s: %s", CFG_KEY(ids[0]).key, problem);
}

rmacoll_status_t rmacoll__config_load(const char *path, rmacoll_config_t *cfg, char *errbuf,
                                      size_t errbuf_len)
{
    rmacoll_config_t tmp;
    int lines[CONFIG_MAX_KEYS] = {0};
    int from_env[CONFIG_MAX_KEYS] = {0};
    char problem[320];
    rmacoll_status_t st;
    const char *file = path;
    const char *const *rule_keys;

    rmacoll__errbuf_printf(errbuf, errbuf_len, "%s", "");
    if (cfg == NULL) {
        rmacoll__errbuf_printf(errbuf, errbuf_len, "config is NULL");
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll__config_init(&tmp);
    if (file == NULL) {
        file = getenv("RMACOLL_CONFIG");
        if (file != NULL && file[0] == '\0') {
            file = NULL;
        }
    }
    /* Pass 1, unknown keys ignored: which transports, so that the keys of
     * a plugin named there are known (config_declare_keys) in pass 2. */
    if (file != NULL) {
        st = config_load_file(file, &tmp, lines, 1, errbuf, errbuf_len);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    st = config_load_env(&tmp, from_env, errbuf, errbuf_len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    config_declare_keys(&tmp);
    rmacoll__config_init(&tmp);
    memset(lines, 0, sizeof(lines));
    memset(from_env, 0, sizeof(from_env));
    if (file != NULL) {
        st = config_load_file(file, &tmp, lines, 0, errbuf, errbuf_len);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    st = config_load_env(&tmp, from_env, errbuf, errbuf_len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    rule_keys = config_rules_fail(&tmp, problem, sizeof(problem));
    if (rule_keys != NULL) {
        config_id_t ids[RMACOLL__CONFIG_MAX_HOOKS];
        int n = 0;
        for (int k = 0; rule_keys[k] != NULL && n < RMACOLL__CONFIG_MAX_HOOKS; k++) {
            int id = config_id_of(rule_keys[k]);
            if (id >= 0) {
                ids[n++] = (config_id_t)id;
            }
        }
        if (n > 0) {
            config_blame(ids, n, file, lines, from_env, problem, errbuf, errbuf_len);
        } else {
            rmacoll__errbuf_printf(errbuf, errbuf_len, "%s: %s", rule_keys[0], problem);
        }
        return RMACOLL_ERR_CONFIG;
    }
    {
        const char *tkey = NULL;
        if (config_check_transports(&tmp, &tkey, problem, sizeof(problem)) != RMACOLL_SUCCESS) {
            int id = config_id_of(tkey);
            config_id_t ids[1] = {id >= 0 ? (config_id_t)id : 0};
            if (id >= 0) {
                config_blame(ids, 1, file, lines, from_env, problem, errbuf, errbuf_len);
            } else {
                rmacoll__errbuf_printf(errbuf, errbuf_len, "%s: %s", tkey, problem);
            }
            return RMACOLL_ERR_CONFIG;
        }
    }
    *cfg = tmp;
    return RMACOLL_SUCCESS;
}

/* ---- dumping, hashing, checking ---- */

static int config_format_size(uint64_t v, char *buf, size_t len)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {{"EiB", 60}, {"PiB", 50}, {"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};

    if (v != 0) {
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            uint64_t unit = (uint64_t)1 << units[i].shift;
            if (v % unit == 0) {
                return snprintf(buf, len, "%" PRIu64 "%s", v / unit, units[i].suffix);
            }
        }
    }
    return snprintf(buf, len, "%" PRIu64, v);
}

/* YAML double-quoted scalar. */
static int config_quote(const char *s, char *buf, size_t len)
{
    size_t off = 0;
    int need = 2;

    for (const char *p = s; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        need += (c == '"' || c == '\\') ? 2 : (c < 0x20 || c == 0x7f) ? 4 : 1;
    }
    if (len == 0) {
        return need;
    }
#define PUT(ch)                   \
    do {                          \
        if (off + 1 < len) {      \
            buf[off++] = (ch);    \
        }                         \
    } while (0)
    PUT('"');
    for (const char *p = s; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            PUT('\\');
            PUT((char)c);
        } else if (c < 0x20 || c == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            PUT('\\');
            PUT('x');
            PUT(hex[c >> 4]);
            PUT(hex[c & 15]);
        } else {
            PUT((char)c);
        }
    }
    PUT('"');
#undef PUT
    buf[off] = '\0';
    return need;
}

/* Writes the value at p (of field f) as YAML would. */
static int config_format(const config_field_t *f, const void *p, char *buf, size_t len,
                         int quote)
{
    char tmp[RMACOLL_CONFIG_STR_MAX];

    switch (f->kind) {
    case CFG_KIND_STRING:
        snprintf(tmp, sizeof(tmp), "%s", (const char *)p); /* bounded even if unterminated */
        return quote ? config_quote(tmp, buf, len) : snprintf(buf, len, "%s", tmp);
    case CFG_KIND_ENUM:
        snprintf(tmp, sizeof(tmp), "%s", (const char *)p);
        return snprintf(buf, len, "%s", tmp);
    case CFG_KIND_BOOL:
        return snprintf(buf, len, "%s", *(const int *)p ? "true" : "false");
    case CFG_KIND_LEVEL: {
        int l = *(const int *)p;
        return snprintf(buf, len, "%s", (l >= 0 && l <= RMACOLL_LOG_TRACE) ? f->names[l] : "?");
    }
    case CFG_KIND_SUBSYS: {
        uint32_t m = *(const uint32_t *)p;
        size_t off = 0;
        int total = 0;
        if (m == RMACOLL_LOG_SUBSYS_ALL) {
            return snprintf(buf, len, "[all]");
        }
        if (m == 0) {
            return snprintf(buf, len, "[none]");
        }
        {
            uint32_t known = 0;
            int exclude;

            for (int i = 0; f->names[i] != NULL; i++) {
                known |= 1u << i;
            }
            /* every subsystem beyond the names is on: written as '^' and
             * the names that are off, as it was given (round trip) */
            exclude = (m | known) == RMACOLL_LOG_SUBSYS_ALL && (m & ~known) == ~known;
            for (int i = 0; f->names[i] != NULL; i++) {
                if (((m >> i) & 1u) != (uint32_t)exclude) {
                    int n = snprintf(buf + off, off < len ? len - off : 0, "%s%s",
                                     total ? ", " : exclude ? "[^" : "[", f->names[i]);
                    total += n;
                    off = (size_t)total;
                }
            }
        }
        total += snprintf(buf + off, off < len ? len - off : 0, "]");
        return total;
    }
    case CFG_KIND_I32:
        return snprintf(buf, len, "%" PRId32, *(const int32_t *)p);
    case CFG_KIND_SIZE:
        return config_format_size(*(const uint64_t *)p, buf, len);
    case CFG_KIND_U32:
        return snprintf(buf, len, "%" PRIu32, *(const uint32_t *)p);
    case CFG_KIND_U64:
        return snprintf(buf, len, "%" PRIu64, *(const uint64_t *)p);
    }
    return -1;
}

static int config_value_string(const rmacoll_config_t *cfg, config_id_t id, char *buf,
                               size_t len, int quote)
{
    config_value_t sc;

    return config_format(&CFG_FIELD(id), config_value_ptr(cfg, id, &sc), buf, len, quote);
}

static int config_id_of(const char *key)
{
    size_t n = config_nkeys();

    for (size_t id = 0; key != NULL && id < n; id++) {
        if (strcmp(CFG_KEY(id).key, key) == 0) {
            return (int)id;
        }
    }
    return -1;
}

/* config_id_of, after loading the plugins cfg names when key is unknown. */
static int config_id_in(const rmacoll_config_t *cfg, const char *key)
{
    int id = config_id_of(key);

    if (id < 0 && key != NULL) {
        config_declare_keys(cfg);
        id = config_id_of(key);
    }
    return id;
}

/* The message of the calling thread's last failed rmacoll_config_set or
 * rmacoll_config_get (rmacoll_config_last_error). */
static __thread char config_err[1024];

const char *rmacoll_config_last_error(void)
{
    return config_err;
}

rmacoll_status_t rmacoll__config_set(rmacoll_config_t *cfg, const char *key, const char *value)
{
    rmacoll_config_t tmp;
    int id;
    rmacoll_status_t st;
    char problem[256] = "";

    if (cfg == NULL || key == NULL || value == NULL || cfg->struct_size < sizeof(*cfg)) {
        rmacoll__errbuf_printf(config_err, sizeof(config_err), "rmacoll_config_set: %s",
                               cfg == NULL ? "cfg is NULL" : key == NULL ? "key is NULL"
                               : value == NULL ? "value is NULL"
                               : "cfg was not initialised by rmacoll_config_init or rmacoll_config_load");
        return RMACOLL_ERR_INVALID_ARG;
    }
    id = config_id_in(cfg, key);
    if (id < 0) {
        rmacoll__errbuf_printf(config_err, sizeof(config_err),
                               "rmacoll_config_set: unknown key '%s' "
                               "(rmacoll-info lists the keys)", key);
        return RMACOLL_ERR_CONFIG;
    }
    tmp = *cfg; /* cfg is unchanged on error */
    st = config_set(&tmp, (config_id_t)id, value, problem, sizeof(problem), NULL, 0);
    if (st == RMACOLL_SUCCESS) {
        const char *tkey = NULL;
        st = config_check_transports(&tmp, &tkey, problem, sizeof(problem));
        if (st != RMACOLL_SUCCESS && tkey != NULL) {
            key = tkey;
        }
    }
    if (st != RMACOLL_SUCCESS) {
        /* a long value is quoted in part, so the reason always fits */
        rmacoll__errbuf_printf(config_err, sizeof(config_err),
                               "rmacoll_config_set: %s = '%.48s%s': %s",
                               key, value, strlen(value) > 48 ? "..." : "",
                               problem[0] ? problem : rmacoll_status_string(st));
        return st;
    }
    *cfg = tmp;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_get(const rmacoll_config_t *cfg, const char *key, char *buf,
                                     size_t len)
{
    int id;

    if (cfg == NULL || key == NULL || buf == NULL || len == 0 ||
        cfg->struct_size < sizeof(*cfg)) {
        rmacoll__errbuf_printf(config_err, sizeof(config_err), "rmacoll_config_get: %s",
                               cfg == NULL ? "cfg is NULL" : key == NULL ? "key is NULL"
                               : buf == NULL ? "buf is NULL" : len == 0 ? "len is 0"
                               : "cfg was not initialised by rmacoll_config_init or rmacoll_config_load");
        return RMACOLL_ERR_INVALID_ARG;
    }
    id = config_id_in(cfg, key);
    if (id < 0) {
        buf[0] = '\0';
        rmacoll__errbuf_printf(config_err, sizeof(config_err),
                               "rmacoll_config_get: unknown key '%s' "
                               "(rmacoll-info lists the keys)", key);
        return RMACOLL_ERR_CONFIG;
    }
    config_value_string(cfg, (config_id_t)id, buf, len, 0);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_get_size(const rmacoll_config_t *cfg, const char *key,
                                          uint64_t *bytes)
{
    int id = cfg != NULL ? config_id_of(key) : -1;

    if (id < 0 || CFG_FIELD(id).kind != CFG_KIND_SIZE) {
        return RMACOLL_ERR_CONFIG;
    }
    *bytes = config_get_u64(cfg, (config_id_t)id);
    return RMACOLL_SUCCESS;
}

int rmacoll__config_value_string(const rmacoll_config_t *cfg, size_t index, char *buf,
                                 size_t len)
{
    if (cfg == NULL || index >= config_nkeys()) {
        return -1;
    }
    return config_value_string(cfg, (config_id_t)index, buf, len, 0);
}

int rmacoll__config_to_string(const rmacoll_config_t *cfg, char *buf, size_t len)
{
    size_t off = 0;
    int total = 0;
    char parent[64] = "";

    if (len > 0) {
        buf[0] = '\0';
    }
    for (size_t id = 0; id < config_nkeys(); id++) {
        const char *key = CFG_KEY(id).key;
        const char *dot = strchr(key, '.');
        char val[2 * RMACOLL_CONFIG_STR_MAX + 8];
        int n;

        config_value_string(cfg, id, val, sizeof(val), 1);
        if (dot != NULL) {
            if (strncmp(parent, key, (size_t)(dot - key)) != 0 ||
                parent[dot - key] != '\0') {
                snprintf(parent, sizeof(parent), "%.*s", (int)(dot - key), key);
                n = snprintf(buf + off, off < len ? len - off : 0, "%s:\n", parent);
                total += n;
                off = (size_t)total;
            }
            n = snprintf(buf + off, off < len ? len - off : 0, "  %s: %s\n", dot + 1, val);
        } else {
            parent[0] = '\0';
            n = snprintf(buf + off, off < len ? len - off : 0, "%s: %s\n", key, val);
        }
        total += n;
        off = (size_t)total;
    }
    return total;
}

static uint64_t config_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

uint64_t rmacoll__config_hash(const rmacoll_config_t *cfg)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a 64-bit offset basis */
    size_t elen;

    for (size_t id = 0; id < config_nkeys(); id++) {
        const config_field_t *f = &CFG_FIELD(id);

        if (f->kind == CFG_KIND_LEVEL || f->kind == CFG_KIND_SUBSYS) {
            continue; /* log settings may differ between ranks */
        }
        if (f->offset == CFG_EXT) {
            continue; /* the ext block is hashed whole below */
        }
        if (f->kind == CFG_KIND_STRING || f->kind == CFG_KIND_ENUM) {
            const char *s = (const char *)cfg + f->offset;
            const char *nul = memchr(s, '\0', RMACOLL_CONFIG_STR_MAX);
            size_t n = nul != NULL ? (size_t)(nul - s) : RMACOLL_CONFIG_STR_MAX;
            h = config_fnv1a(h, s, n);
            h = config_fnv1a(h, "", 1);
        } else {
            uint64_t v = config_get_u64(cfg, id);
            unsigned char le[8];
            for (int b = 0; b < 8; b++) {
                le[b] = (unsigned char)(v >> (8 * b));
            }
            h = config_fnv1a(h, le, sizeof(le));
        }
    }
    /* Canonical (sorted, no defaults), so equal configs hash equal even
     * when this process has not seen every key in it. */
    elen = config_ext_len(cfg->ext);
    h = config_fnv1a(h, cfg->ext, elen != 0 ? elen : RMACOLL_CONFIG_EXT_BYTES);
    return h;
}

/* Every transport keyset's whole-config check; errors as a config value. */
static rmacoll_status_t config_check_transports(const rmacoll_config_t *cfg, const char **key,
                                                char *problem, size_t plen)
{
    for (size_t t = 0; rmacoll__transport_keysets[t] != NULL; t++) {
        const rmacoll_transport_keyset_t *ks = rmacoll__transport_keysets[t];
        char why[256] = "";
        const char *bad = ks->check != NULL ? ks->check(cfg, why, sizeof(why)) : NULL;

        if (bad != NULL) {
            if (key != NULL) {
                *key = bad;
            }
            rmacoll__errbuf_printf(problem, plen, "%s", why);
            return RMACOLL_ERR_CONFIG;
        }
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_check(const rmacoll_config_t *cfg, char *errbuf, size_t errlen)
{
    rmacoll_config_t tmp;
    char problem[320];
    char val[RMACOLL_CONFIG_STR_MAX + 16];
    const char *tkey = NULL;
    const char *const *rule_keys;

    rmacoll__errbuf_printf(errbuf, errlen, "%s", "");
    if (cfg == NULL || cfg->struct_size != sizeof(rmacoll_config_t)) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "config %s struct_size is %zu, not sizeof(rmacoll_config_t) "
                               "= %zu (fill it with rmacoll_config_init)", cfg == NULL ? "is NULL;" : "",
                               cfg != NULL ? cfg->struct_size : (size_t)0, sizeof(rmacoll_config_t));
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (config_ext_len(cfg->ext) == 0) {
        rmacoll__errbuf_printf(errbuf, errlen, "config ext: not filled by rmacoll_config_init / "
                               "rmacoll_config_set (malformed)");
        return RMACOLL_ERR_CONFIG;
    }
    rmacoll__config_init(&tmp);
    for (size_t id = 0; id < config_nkeys(); id++) {
        const config_field_t *f = &CFG_FIELD(id);
        const char *key = CFG_KEY(id).key;
        const void *p = (const char *)cfg + f->offset;

        if (f->offset == CFG_EXT) {
            continue; /* stored canonical by config_set */
        }
        if (f->kind == CFG_KIND_STRING || f->kind == CFG_KIND_ENUM) {
            if (memchr(p, '\0', RMACOLL_CONFIG_STR_MAX) == NULL) {
                rmacoll__errbuf_printf(errbuf, errlen,
                                       "config %s: not NUL-terminated within %d bytes", key,
                                       RMACOLL_CONFIG_STR_MAX);
                return RMACOLL_ERR_CONFIG;
            }
        } else if (f->kind == CFG_KIND_BOOL) {
            int b = *(const int *)p;
            if (b != 0 && b != 1) {
                rmacoll__errbuf_printf(errbuf, errlen, "config %s: %d is not 0 or 1", key, b);
                return RMACOLL_ERR_CONFIG;
            }
            continue;
        } else if (f->kind == CFG_KIND_LEVEL) {
            int l = *(const int *)p;
            if (l < RMACOLL_LOG_ERROR || l > RMACOLL_LOG_TRACE) {
                rmacoll__errbuf_printf(errbuf, errlen,
                                       "config %s: %d is not a log level (0..4)", key, l);
                return RMACOLL_ERR_CONFIG;
            }
            continue;
        } else if (f->kind == CFG_KIND_SUBSYS) {
            continue; /* every mask is valid */
        }
        /* Round-trip through the parser: same rules as a file value. */
        config_value_string(cfg, id, val, sizeof(val), 0);
        if (config_set(&tmp, id, val, problem, sizeof(problem), NULL, 0) !=
            RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(errbuf, errlen, "config %s: %s", key, problem);
            return RMACOLL_ERR_CONFIG;
        }
    }
    rule_keys = config_rules_fail(cfg, problem, sizeof(problem));
    if (rule_keys != NULL) {
        rmacoll__errbuf_printf(errbuf, errlen, "config %s: %s", rule_keys[0], problem);
        return RMACOLL_ERR_CONFIG;
    }
    if (config_check_transports(cfg, &tkey, problem, sizeof(problem)) != RMACOLL_SUCCESS) {
        rmacoll__errbuf_printf(errbuf, errlen, "config %s: %s", tkey, problem);
        return RMACOLL_ERR_CONFIG;
    }
    return RMACOLL_SUCCESS;
}
