/*
 * config.c - configuration: built-in defaults, a YAML file parsed with
 * libcyaml, then RMACOLL_<KEY> environment overrides.
 *
 * One table (config_keys / config_fields, indexed by config_id_t) drives
 * everything: the libcyaml schema loads every leaf as a string into one
 * flat struct, and each string is then parsed by the key's kind, so YAML
 * and environment values share one parser (sizes like "64MiB", booleans,
 * enums). libcyaml reports structural errors (unknown keys, bad nesting,
 * syntax) through its log callback; we capture them and add the dotted
 * key and its line, which we find by scanning the text ourselves because
 * libcyaml's own line numbers point at the enclosing mapping.
 */
#include "core/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cyaml/cyaml.h>


/* ---- the key table ---- */

typedef enum config_id {
    CFG_INTRA_NODE,
    CFG_INTER_NODE,
    CFG_SCHEDULER,
    CFG_SCHEDULER_PLUGIN,
    CFG_SCHEDULER_SEED,
    CFG_RELAY_ENABLED,
    CFG_RELAY_BUFFER_BYTES,
    CFG_RELAY_SLOTS,
    CFG_MAX_TASK_BYTES,
    CFG_TIMEOUT_MS,
    CFG_NVLINK_KERNEL_THRESHOLD,
    CFG_OFI_PROVIDER,
    CFG_OFI_IFACE,
    CFG_VERBS_DEVICE,
    CFG_VERBS_PORT,
    CFG_VERBS_GID_INDEX,
    CFG_VERBS_MTU,
    CFG_VERBS_TRAFFIC_CLASS,
    CFG_VERBS_SERVICE_LEVEL,
    CFG_VERBS_MAX_INFLIGHT,
    CFG_LOG_LEVEL,
    CFG_LOG_SUBSYSTEMS,
    CFG_NKEYS
} config_id_t;

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

typedef struct config_field {
    config_kind_t kind;
    size_t offset;               /* in rmacoll_config_t */
    const char *const *names;    /* ENUM, LEVEL, SUBSYS: NULL-terminated */
    int64_t min;                 /* integers */
    uint64_t max;
    const uint64_t *allowed;     /* integers: the only values allowed, or NULL */
    size_t nallowed;
    int nonempty;                /* STRING: "" is an error */
    int plugin_ok;               /* ENUM: "plugin:PATH" allowed too */
} config_field_t;

static const char *const intra_names[] = {"ce", "nvlink_kernel", "auto", NULL};
static const char *const inter_names[] = {"ofi", "verbs", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug", "trace", NULL};
/* Bit i of the mask is subsys_names[i]; "all" and "none" are handled apart. */
static const char *const subsys_names[] = {"core",  "plan",      "sched",  "bootstrap",
                                           "transport", "proxy", "config", NULL};
static const uint64_t mtu_allowed[] = {0, 256, 512, 1024, 2048, 4096};

#define CFG_OFF(member) offsetof(rmacoll_config_t, member)
#define CONFIG_PLUGIN_PREFIX "plugin:" /* a transport loaded from a shared object */

static const rmacoll__config_key_t config_keys[CFG_NKEYS] = {
    [CFG_INTRA_NODE] = {"transports.intra_node", "enum(ce|nvlink_kernel|auto)", "ce",
                        "transport between ranks of one node: copy engine, NVLink kernel, "
                        "auto (kernel up to nvlink_kernel_threshold bytes), or "
                        "plugin:PATH (docs/plugins.md)"},
    [CFG_INTER_NODE] = {"transports.inter_node", "enum(ofi|verbs)", "ofi",
                        "network transport between nodes: libfabric, ibverbs, or "
                        "plugin:PATH (a shared object, docs/plugins.md)"},
    [CFG_SCHEDULER] = {"scheduler", "string", "node_shift",
                       "round scheduler by name (shift, node_shift, xor, random, ...); "
                       "checked against the compiled-in schedulers at create"},
    [CFG_SCHEDULER_PLUGIN] = {"scheduler_plugin", "string", "",
                              "path of a scheduler plugin .so exporting rmacoll_sched_plugin_v1 "
                              "(\"\" = none); used instead of scheduler when set"},
    [CFG_SCHEDULER_SEED] = {"scheduler_seed", "u64", "1",
                            "seed of the random scheduler (same on every rank)"},
    [CFG_RELAY_ENABLED] = {"relay.enabled", "bool", "true",
                           "send cross-node traffic through the rail-aligned two-hop relay"},
    [CFG_RELAY_BUFFER_BYTES] = {"relay.buffer_bytes", "size", "64MiB",
                                "relay buffer per rank, split into slots; each relay needs "
                                ">= 8 * slots * its incoming channels (rmacoll-info "
                                "--topology prints the minimum)"},
    [CFG_RELAY_SLOTS] = {"relay.slots", "u32", "4",
                         "slots per incoming relay channel (>= 1)"},
    [CFG_MAX_TASK_BYTES] = {"max_task_bytes", "size", "1GiB",
                            "transfers above this are split in chunks; only the last chunk "
                            "signals (>= 1)"},
    [CFG_TIMEOUT_MS] = {"timeout_ms", "u64", "30000",
                        "a wait fails after this many milliseconds without progress "
                        "(silence, not total time), naming the silent peer (>= 1)"},
    [CFG_NVLINK_KERNEL_THRESHOLD] = {"nvlink_kernel_threshold", "size", "256KiB",
                                     "with intra_node auto: node transfers of at most this "
                                     "many bytes use nvlink_kernel, larger ones ce"},
    [CFG_OFI_PROVIDER] = {"ofi.provider", "string", "tcp;ofi_rxm",
                          "libfabric provider (FI_PROVIDER syntax), e.g. tcp;ofi_rxm, shm, "
                          "verbs;ofi_rxm"},
    [CFG_OFI_IFACE] = {"ofi.iface", "string", "",
                       "network interface for the provider, e.g. lo (\"\" = provider default)"},
    [CFG_VERBS_DEVICE] = {"verbs.device", "string", "",
                          "ibverbs device, e.g. mlx5_0 (\"\" = one per rail, closest to the "
                          "rank's GPU)"},
    [CFG_VERBS_PORT] = {"verbs.port", "u32", "1", "port of the device, 1-based (1..255)"},
    [CFG_VERBS_GID_INDEX] = {"verbs.gid_index", "i32", "-1",
                             "GID index for RoCE (-1 = auto)"},
    [CFG_VERBS_MTU] = {"verbs.mtu", "u32", "0",
                       "path MTU in bytes: 256, 512, 1024, 2048 or 4096 (0 = the port's "
                       "active MTU)"},
    [CFG_VERBS_TRAFFIC_CLASS] = {"verbs.traffic_class", "u32", "0",
                                 "traffic class of the GRH (0..255)"},
    [CFG_VERBS_SERVICE_LEVEL] = {"verbs.service_level", "u32", "0",
                                 "InfiniBand service level (0..15)"},
    [CFG_VERBS_MAX_INFLIGHT] = {"verbs.max_inflight", "u32", "128",
                                "work requests in flight per queue pair (>= 1)"},
    [CFG_LOG_LEVEL] = {"log.level", "enum(error|warn|info|debug|trace)", "warn",
                       "most verbose level logged"},
    [CFG_LOG_SUBSYSTEMS] = {"log.subsystems",
                            "list(core|plan|sched|bootstrap|transport|proxy|config|all|none)",
                            "[all]",
                            "subsystems logged; in the environment a comma-separated list"},
};

static const config_field_t config_fields[CFG_NKEYS] = {
    [CFG_INTRA_NODE] = {.kind = CFG_KIND_ENUM, .offset = CFG_OFF(intra_node),
                        .names = intra_names, .plugin_ok = 1},
    [CFG_INTER_NODE] = {.kind = CFG_KIND_ENUM, .offset = CFG_OFF(inter_node),
                        .names = inter_names, .plugin_ok = 1},
    [CFG_SCHEDULER] = {.kind = CFG_KIND_STRING, .offset = CFG_OFF(scheduler), .nonempty = 1},
    [CFG_SCHEDULER_PLUGIN] = {.kind = CFG_KIND_STRING, .offset = CFG_OFF(scheduler_plugin)},
    [CFG_SCHEDULER_SEED] = {.kind = CFG_KIND_U64, .offset = CFG_OFF(scheduler_seed),
                            .min = 0, .max = UINT64_MAX},
    [CFG_RELAY_ENABLED] = {.kind = CFG_KIND_BOOL, .offset = CFG_OFF(relay_enabled)},
    [CFG_RELAY_BUFFER_BYTES] = {.kind = CFG_KIND_SIZE, .offset = CFG_OFF(relay_buffer_bytes),
                                .min = 0, .max = UINT64_MAX},
    [CFG_RELAY_SLOTS] = {.kind = CFG_KIND_U32, .offset = CFG_OFF(relay_slots),
                         .min = 1, .max = UINT32_MAX},
    [CFG_MAX_TASK_BYTES] = {.kind = CFG_KIND_SIZE, .offset = CFG_OFF(max_task_bytes),
                            .min = 1, .max = UINT64_MAX},
    [CFG_TIMEOUT_MS] = {.kind = CFG_KIND_U64, .offset = CFG_OFF(timeout_ms),
                        .min = 1, .max = UINT64_MAX},
    [CFG_NVLINK_KERNEL_THRESHOLD] = {.kind = CFG_KIND_SIZE,
                                     .offset = CFG_OFF(nvlink_kernel_threshold),
                                     .min = 0, .max = UINT64_MAX},
    [CFG_OFI_PROVIDER] = {.kind = CFG_KIND_STRING, .offset = CFG_OFF(ofi_provider)},
    [CFG_OFI_IFACE] = {.kind = CFG_KIND_STRING, .offset = CFG_OFF(ofi_iface)},
    [CFG_VERBS_DEVICE] = {.kind = CFG_KIND_STRING, .offset = CFG_OFF(verbs_device)},
    [CFG_VERBS_PORT] = {.kind = CFG_KIND_U32, .offset = CFG_OFF(verbs_port),
                        .min = 1, .max = 255},
    [CFG_VERBS_GID_INDEX] = {.kind = CFG_KIND_I32, .offset = CFG_OFF(verbs_gid_index),
                             .min = -1, .max = INT32_MAX},
    [CFG_VERBS_MTU] = {.kind = CFG_KIND_U32, .offset = CFG_OFF(verbs_mtu),
                       .min = 0, .max = 4096, .allowed = mtu_allowed,
                       .nallowed = sizeof(mtu_allowed) / sizeof(mtu_allowed[0])},
    [CFG_VERBS_TRAFFIC_CLASS] = {.kind = CFG_KIND_U32, .offset = CFG_OFF(verbs_traffic_class),
                                 .min = 0, .max = 255},
    [CFG_VERBS_SERVICE_LEVEL] = {.kind = CFG_KIND_U32, .offset = CFG_OFF(verbs_service_level),
                                 .min = 0, .max = 15},
    [CFG_VERBS_MAX_INFLIGHT] = {.kind = CFG_KIND_U32, .offset = CFG_OFF(verbs_max_inflight),
                                .min = 1, .max = UINT32_MAX},
    [CFG_LOG_LEVEL] = {.kind = CFG_KIND_LEVEL, .offset = CFG_OFF(log_level),
                       .names = level_names},
    [CFG_LOG_SUBSYSTEMS] = {.kind = CFG_KIND_SUBSYS, .offset = CFG_OFF(log_subsystems),
                            .names = subsys_names},
};

/* Smallest relay slot: one element of the widest datatype. */
#define CONFIG_MIN_SLOT_BYTES 8u

const rmacoll__config_key_t *rmacoll__config_keys(size_t *n)
{
    if (n != NULL) {
        *n = CFG_NKEYS;
    }
    return config_keys;
}

/* ---- small helpers ---- */

static void config_msg(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void config_msg(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

static void *config_field_ptr(rmacoll_config_t *cfg, config_id_t id)
{
    return (char *)cfg + config_fields[id].offset;
}

static const void *config_field_cptr(const rmacoll_config_t *cfg, config_id_t id)
{
    return (const char *)cfg + config_fields[id].offset;
}

/* Integer value of a numeric, boolean, level or mask field, widened. */
static uint64_t config_get_u64(const rmacoll_config_t *cfg, config_id_t id)
{
    const void *p = config_field_cptr(cfg, id);

    switch (config_fields[id].kind) {
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

static int config_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Copies text without leading and trailing blanks into out (len > 0). */
static int config_trim(const char *text, char *out, size_t len)
{
    size_t n;

    while (config_is_space(*text)) {
        text++;
    }
    n = strlen(text);
    while (n > 0 && config_is_space(text[n - 1])) {
        n--;
    }
    if (n >= len) {
        return -1;
    }
    memcpy(out, text, n);
    out[n] = '\0';
    return 0;
}

/* Unsigned integer, decimal or 0x-hex, no sign. */
static rmacoll_status_t config_parse_u64(const char *text, uint64_t *v)
{
    char buf[64];
    const char *s = buf;
    unsigned base = 10;
    uint64_t acc = 0;

    if (config_trim(text, buf, sizeof(buf)) != 0 || buf[0] == '\0') {
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

    if (config_trim(text, buf, sizeof(buf)) != 0) {
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

static int config_parse_bool(const char *text)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    char buf[16];

    if (config_trim(text, buf, sizeof(buf)) != 0) {
        return -1;
    }
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(buf, yes[i]) == 0) {
            return 1;
        }
        if (strcasecmp(buf, no[i]) == 0) {
            return 0;
        }
    }
    return -1;
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

    if (text == NULL || bytes == NULL || config_trim(text, buf, sizeof(buf)) != 0 ||
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
 * Parses a subsystem list: names separated by commas or blanks, optionally
 * in brackets ("core,plan", "[core, plan]", "all", "none"). On a bad name,
 * bad receives it.
 */
static rmacoll_status_t config_parse_subsys(const char *text, uint32_t *mask, char *bad,
                                            size_t badlen)
{
    char buf[512];
    char *s = buf;
    char *save = NULL;
    char *tok;
    uint32_t m = 0;
    int ntok = 0;

    if (config_trim(text, buf, sizeof(buf)) != 0) {
        snprintf(bad, badlen, "%.*s", 32, text);
        return RMACOLL_ERR_CONFIG;
    }
    if (*s == '[') {
        size_t n = strlen(s);
        if (n < 2 || s[n - 1] != ']') {
            config_copy(bad, badlen, buf);
            return RMACOLL_ERR_CONFIG;
        }
        s[n - 1] = '\0';
        s++;
    }
    for (tok = strtok_r(s, ", \t\n", &save); tok != NULL; tok = strtok_r(NULL, ", \t\n", &save)) {
        int i = config_name_index(subsys_names, tok);

        ntok++;
        if (i >= 0) {
            m |= 1u << i;
        } else if (strcmp(tok, "all") == 0) {
            m = RMACOLL_LOG_SUBSYS_ALL;
        } else if (strcmp(tok, "none") == 0) {
            /* adds nothing */
        } else {
            snprintf(bad, badlen, "%s", tok);
            return RMACOLL_ERR_CONFIG;
        }
    }
    if (ntok == 0) {
        snprintf(bad, badlen, "%s", "");
        return RMACOLL_ERR_CONFIG;
    }
    *mask = m;
    return RMACOLL_SUCCESS;
}

/*
 * Parses text as the value of key id and stores it in cfg. On failure cfg
 * is unchanged, problem receives why ("'x' is not a size ...") and, for a
 * list, bad receives the offending entry.
 */
static rmacoll_status_t config_set(rmacoll_config_t *cfg, config_id_t id, const char *text,
                                   char *problem, size_t plen, char *bad, size_t badlen)
{
    const config_field_t *f = &config_fields[id];
    void *p = config_field_ptr(cfg, id);
    char names[160];
    uint64_t u = 0;
    int64_t i = 0;
    rmacoll_status_t st;

    if (bad != NULL && badlen > 0) {
        bad[0] = '\0';
    }
    switch (f->kind) {
    case CFG_KIND_STRING:
    case CFG_KIND_ENUM:
        if (strlen(text) >= RMACOLL_CONFIG_STR_MAX) {
            config_msg(problem, plen, "'%.32s...' is longer than %d bytes", text,
                       RMACOLL_CONFIG_STR_MAX - 1);
            return RMACOLL_ERR_CONFIG;
        }
        if (f->kind == CFG_KIND_ENUM && config_name_index(f->names, text) < 0 &&
            !(f->plugin_ok && strncmp(text, CONFIG_PLUGIN_PREFIX, strlen(CONFIG_PLUGIN_PREFIX)) == 0 &&
              text[strlen(CONFIG_PLUGIN_PREFIX)] != '\0')) {
            config_join_names(f->names, names, sizeof(names));
            config_msg(problem, plen, "'%s' is not one of %s", text, names);
            return RMACOLL_ERR_CONFIG;
        }
        if (f->nonempty && text[0] == '\0') {
            config_msg(problem, plen, "must not be empty");
            return RMACOLL_ERR_CONFIG;
        }
        /* Zero the tail so equal configs are equal bytes. */
        memset(p, 0, RMACOLL_CONFIG_STR_MAX);
        memcpy(p, text, strlen(text));
        return RMACOLL_SUCCESS;
    case CFG_KIND_BOOL: {
        int b = config_parse_bool(text);
        if (b < 0) {
            config_msg(problem, plen, "'%s' is not a boolean (true|false|1|0|yes|no|on|off)",
                       text);
            return RMACOLL_ERR_CONFIG;
        }
        *(int *)p = b;
        return RMACOLL_SUCCESS;
    }
    case CFG_KIND_LEVEL: {
        int l = config_name_index(f->names, text);
        if (l < 0) {
            config_join_names(f->names, names, sizeof(names));
            config_msg(problem, plen, "'%s' is not one of %s", text, names);
            return RMACOLL_ERR_CONFIG;
        }
        *(int *)p = l;
        return RMACOLL_SUCCESS;
    }
    case CFG_KIND_SUBSYS: {
        uint32_t m = 0;
        char tok[64];
        if (config_parse_subsys(text, &m, tok, sizeof(tok)) != RMACOLL_SUCCESS) {
            config_join_names(f->names, names, sizeof(names));
            config_msg(problem, plen, "'%s' is not a subsystem (%s|all|none)", tok, names);
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
            config_msg(problem, plen, "'%s' overflows 64 bits", text);
            return RMACOLL_ERR_CONFIG;
        }
        if (st != RMACOLL_SUCCESS) {
            config_msg(problem, plen,
                       "'%s' is not a size (an integer with an optional suffix B, KiB, "
                       "MiB, GiB, TiB, K, M, G)", text);
            return RMACOLL_ERR_CONFIG;
        }
        break;
    case CFG_KIND_U32:
    case CFG_KIND_U64:
        st = config_parse_u64(text, &u);
        if (st == RMACOLL_ERR_OVERFLOW) {
            config_msg(problem, plen, "'%s' overflows 64 bits", text);
            return RMACOLL_ERR_CONFIG;
        }
        if (st != RMACOLL_SUCCESS) {
            config_msg(problem, plen, "'%s' is not an unsigned integer", text);
            return RMACOLL_ERR_CONFIG;
        }
        break;
    case CFG_KIND_I32:
        st = config_parse_i64(text, &i);
        if (st != RMACOLL_SUCCESS) {
            config_msg(problem, plen, "'%s' is not an integer", text);
            return RMACOLL_ERR_CONFIG;
        }
        if (i < f->min || i > (int64_t)f->max) {
            config_msg(problem, plen, "%" PRId64 " is outside [%" PRId64 ", %" PRIu64 "]", i,
                       f->min, f->max);
            return RMACOLL_ERR_CONFIG;
        }
        *(int32_t *)p = (int32_t)i;
        return RMACOLL_SUCCESS;
    }

    /* Unsigned kinds: range, then the allowed set. */
    if (u < (uint64_t)f->min) {
        config_msg(problem, plen, "%" PRIu64 " is below the minimum %" PRId64, u, f->min);
        return RMACOLL_ERR_CONFIG;
    }
    if (u > f->max) {
        config_msg(problem, plen, "%" PRIu64 " is above the maximum %" PRIu64, u, f->max);
        return RMACOLL_ERR_CONFIG;
    }
    if (f->allowed != NULL) {
        size_t k;
        for (k = 0; k < f->nallowed && f->allowed[k] != u; k++) {
        }
        if (k == f->nallowed) {
            size_t off = 0;
            names[0] = '\0';
            for (k = 0; k < f->nallowed && off < sizeof(names); k++) {
                off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%" PRIu64,
                                        k ? "|" : "", f->allowed[k]);
            }
            config_msg(problem, plen, "%" PRIu64 " is not one of %s", u, names);
            return RMACOLL_ERR_CONFIG;
        }
    }
    if (f->kind == CFG_KIND_U32) {
        *(uint32_t *)p = (uint32_t)u;
    } else {
        *(uint64_t *)p = u;
    }
    return RMACOLL_SUCCESS;
}

/* relay.buffer_bytes / relay.slots must hold one element of the widest type. */
static int config_relay_ok(const rmacoll_config_t *cfg, char *problem, size_t plen)
{
    if (cfg->relay_slots == 0 || cfg->relay_buffer_bytes / cfg->relay_slots < CONFIG_MIN_SLOT_BYTES) {
        config_msg(problem, plen,
                   "relay.buffer_bytes = %" PRIu64 " over relay.slots = %" PRIu32
                   " gives slots of %" PRIu64 " bytes, below %u (one element of the widest type)",
                   cfg->relay_buffer_bytes, cfg->relay_slots,
                   cfg->relay_slots ? cfg->relay_buffer_bytes / cfg->relay_slots : 0,
                   CONFIG_MIN_SLOT_BYTES);
        return 0;
    }
    return 1;
}

/* ---- finding the line of a key in the YAML text ----
 * A small scanner, not a YAML parser: good for block and flow mappings,
 * comments and quoted keys, which is what configuration files use. */

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
 * Line (1-based) of dotted key path ("relay.slots", at most two levels) in
 * t, or of the sequence entry `item` under it when item is not NULL and
 * found; 0 when the key is not found.
 */
static int config_find_line(const char *t, size_t len, const char *path, const char *item)
{
    char parent[64];
    const char *dot = strchr(path, '.');
    size_t after = 0;
    size_t end = len;
    long pos;

    if (t == NULL) {
        return 0;
    }
    if (dot == NULL) {
        pos = scan_find(t, 0, len, path, 1, 0, &after);
    } else {
        size_t plen = (size_t)(dot - path);
        if (plen >= sizeof(parent)) {
            return 0;
        }
        memcpy(parent, path, plen);
        parent[plen] = '\0';
        pos = scan_find(t, 0, len, parent, 1, 0, &after);
        if (pos < 0) {
            return 0;
        }
        end = scan_block_end(t, len, after);
        pos = scan_find(t, after, end, dot + 1, 0, 0, &after);
    }
    if (pos < 0) {
        return 0;
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

/* ---- libcyaml schema: every leaf a string, all in one flat struct ---- */

typedef struct config_raw {
    char *v[CFG_NKEYS];       /* NULL: key absent */
    char **subsystems;        /* log.subsystems entries */
    unsigned subsystems_count;
} config_raw_t;

#define RAW_STR(name, id)                                                               \
    CYAML_FIELD_STRING_PTR(name, CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, config_raw_t, \
                           v[id], 0, CYAML_UNLIMITED)

/* A nested mapping stored in place: its fields' offsets are relative to
 * the start of config_raw_t, so the mapping itself sits at offset 0. */
#define RAW_MAP(name, fields_)                                                      \
    {                                                                               \
        .key = name, .data_offset = 0,                                              \
        .value = {.type = CYAML_MAPPING, .flags = CYAML_FLAG_OPTIONAL,              \
                  .data_size = sizeof(config_raw_t), .mapping = {.fields = fields_}} \
    }

static const cyaml_schema_value_t raw_entry_schema = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static const cyaml_schema_field_t raw_transports_fields[] = {
    RAW_STR("intra_node", CFG_INTRA_NODE),
    RAW_STR("inter_node", CFG_INTER_NODE),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t raw_relay_fields[] = {
    RAW_STR("enabled", CFG_RELAY_ENABLED),
    RAW_STR("buffer_bytes", CFG_RELAY_BUFFER_BYTES),
    RAW_STR("slots", CFG_RELAY_SLOTS),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t raw_ofi_fields[] = {
    RAW_STR("provider", CFG_OFI_PROVIDER),
    RAW_STR("iface", CFG_OFI_IFACE),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t raw_verbs_fields[] = {
    RAW_STR("device", CFG_VERBS_DEVICE),
    RAW_STR("port", CFG_VERBS_PORT),
    RAW_STR("gid_index", CFG_VERBS_GID_INDEX),
    RAW_STR("mtu", CFG_VERBS_MTU),
    RAW_STR("traffic_class", CFG_VERBS_TRAFFIC_CLASS),
    RAW_STR("service_level", CFG_VERBS_SERVICE_LEVEL),
    RAW_STR("max_inflight", CFG_VERBS_MAX_INFLIGHT),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t raw_log_fields[] = {
    RAW_STR("level", CFG_LOG_LEVEL),
    CYAML_FIELD_SEQUENCE("subsystems", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, config_raw_t,
                         subsystems, &raw_entry_schema, 1, CYAML_UNLIMITED),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t raw_top_fields[] = {
    RAW_MAP("transports", raw_transports_fields),
    RAW_STR("scheduler", CFG_SCHEDULER),
    RAW_STR("scheduler_plugin", CFG_SCHEDULER_PLUGIN),
    RAW_STR("scheduler_seed", CFG_SCHEDULER_SEED),
    RAW_MAP("relay", raw_relay_fields),
    RAW_STR("max_task_bytes", CFG_MAX_TASK_BYTES),
    RAW_STR("timeout_ms", CFG_TIMEOUT_MS),
    RAW_STR("nvlink_kernel_threshold", CFG_NVLINK_KERNEL_THRESHOLD),
    RAW_MAP("ofi", raw_ofi_fields),
    RAW_MAP("verbs", raw_verbs_fields),
    RAW_MAP("log", raw_log_fields),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t raw_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, config_raw_t, raw_top_fields),
};

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
    for (int k = 0; k < CFG_NKEYS && off < len; k++) {
        const char *key = config_keys[k].key;
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
        line = config_find_line(text, len, full, NULL);
        if (line == 0) {
            line = lg->line > 0 ? lg->line : 1;
        }
        config_list_children(path, known, sizeof(known));
        config_msg(errbuf, errlen, "config file '%s' line %d: unknown key '%s' (known: %s)",
                   file, line, full, known);
        return;
    }
    line = path[0] ? config_find_line(text, len, path, NULL) : 0;
    if (line == 0) {
        line = lg->line > 0 ? lg->line : 1;
    }
    config_msg(errbuf, errlen, "config file '%s' line %d: %s%s%s", file, line, path,
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
        config_msg(errbuf, errlen, "cannot open config file '%s': %s", file, strerror(errno));
        return RMACOLL_ERR_CONFIG;
    }
    buf = malloc(CONFIG_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(fp);
        config_msg(errbuf, errlen, "no memory to read config file '%s'", file);
        return RMACOLL_ERR_NO_MEMORY;
    }
    n = fread(buf, 1, CONFIG_FILE_MAX + 1, fp);
    if (ferror(fp) || n > CONFIG_FILE_MAX) {
        config_msg(errbuf, errlen, "cannot read config file '%s': %s", file,
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
                                         char *errbuf, size_t errlen)
{
    config_cyaml_log_t lg;
    cyaml_config_t ycfg;
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
    memset(&lg, 0, sizeof(lg));
    memset(&ycfg, 0, sizeof(ycfg));
    ycfg.log_fn = config_cyaml_log;
    ycfg.log_ctx = &lg;
    ycfg.mem_fn = cyaml_mem;
    ycfg.log_level = CYAML_LOG_ERROR;
    ycfg.flags = CYAML_CFG_DEFAULT;
    err = cyaml_load_data((const uint8_t *)text, len, &ycfg, &raw_schema, (cyaml_data_t **)&raw,
                          NULL);
    if (err != CYAML_OK) {
        config_cyaml_error(&lg, err, file, text, len, errbuf, errlen);
        free(text);
        return err == CYAML_ERR_OOM ? RMACOLL_ERR_NO_MEMORY : RMACOLL_ERR_CONFIG;
    }

    st = RMACOLL_SUCCESS;
    for (int id = 0; raw != NULL && id < CFG_NKEYS && st == RMACOLL_SUCCESS; id++) {
        char joined[512];
        char problem[320];
        char bad[64];
        const char *val = raw->v[id];

        if (id == CFG_LOG_SUBSYSTEMS && raw->subsystems != NULL) {
            size_t off = 0;
            joined[0] = '\0';
            for (unsigned k = 0; k < raw->subsystems_count && off < sizeof(joined); k++) {
                off += (size_t)snprintf(joined + off, sizeof(joined) - off, "%s%s",
                                        k ? "," : "", raw->subsystems[k]);
            }
            val = joined;
        }
        if (val == NULL) {
            continue;
        }
        lines[id] = config_find_line(text, len, config_keys[id].key, NULL);
        if (lines[id] == 0) {
            lines[id] = 1;
        }
        st = config_set(cfg, (config_id_t)id, val, problem, sizeof(problem), bad, sizeof(bad));
        if (st != RMACOLL_SUCCESS) {
            int line = bad[0] ? config_find_line(text, len, config_keys[id].key, bad) : 0;
            config_msg(errbuf, errlen, "config file '%s' line %d: %s: %s", file,
                       line > 0 ? line : lines[id], config_keys[id].key, problem);
        }
    }
    cyaml_free(&ycfg, &raw_schema, raw, 0);
    free(text);
    return st;
}

/* RMACOLL_ + key upper-cased, dots as underscores. */
static void config_env_name(config_id_t id, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "RMACOLL_");

    for (const char *k = config_keys[id].key; *k != '\0' && off + 1 < len; k++) {
        buf[off++] = *k == '.' ? '_' : (char)toupper((unsigned char)*k);
    }
    buf[off < len ? off : len - 1] = '\0';
}

static rmacoll_status_t config_load_env(rmacoll_config_t *cfg, int *from_env, char *errbuf,
                                        size_t errlen)
{
    for (int id = 0; id < CFG_NKEYS; id++) {
        char name[96];
        char problem[320];
        const char *val;

        config_env_name((config_id_t)id, name, sizeof(name));
        val = getenv(name);
        if (val == NULL) {
            continue;
        }
        from_env[id] = 1;
        if (config_set(cfg, (config_id_t)id, val, problem, sizeof(problem), NULL, 0) !=
            RMACOLL_SUCCESS) {
            config_msg(errbuf, errlen, "environment %s='%.64s' (%s): %s", name, val,
                       config_keys[id].key, problem);
            return RMACOLL_ERR_CONFIG;
        }
    }
    return RMACOLL_SUCCESS;
}

void rmacoll_config_init(rmacoll_config_t *cfg)
{
    if (cfg == NULL) {
        return;
    }
    memset(cfg, 0, sizeof(*cfg));
    cfg->struct_size = sizeof(*cfg);
    for (int id = 0; id < CFG_NKEYS; id++) {
        /* The defaults are parsed from the table, so the table is the truth;
         * test_config checks that every one parses. */
        (void)config_set(cfg, (config_id_t)id, config_keys[id].default_str, NULL, 0, NULL, 0);
    }
}

rmacoll_status_t rmacoll_config_load(const char *path, rmacoll_config_t *cfg, char *errbuf,
                                     size_t errbuf_len)
{
    rmacoll_config_t tmp;
    int lines[CFG_NKEYS] = {0};
    int from_env[CFG_NKEYS] = {0};
    char problem[320];
    rmacoll_status_t st;
    const char *file = path;

    config_msg(errbuf, errbuf_len, "%s", "");
    if (cfg == NULL) {
        config_msg(errbuf, errbuf_len, "config is NULL");
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll_config_init(&tmp);
    if (file == NULL) {
        file = getenv("RMACOLL_CONFIG");
        if (file != NULL && file[0] == '\0') {
            file = NULL;
        }
    }
    if (file != NULL) {
        st = config_load_file(file, &tmp, lines, errbuf, errbuf_len);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    st = config_load_env(&tmp, from_env, errbuf, errbuf_len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (!config_relay_ok(&tmp, problem, sizeof(problem))) {
        /* Name whichever source set the offending values last. */
        config_id_t ids[2] = {CFG_RELAY_BUFFER_BYTES, CFG_RELAY_SLOTS};
        char name[96];
        for (int k = 0; k < 2; k++) {
            if (from_env[ids[k]]) {
                config_env_name(ids[k], name, sizeof(name));
                config_msg(errbuf, errbuf_len, "environment %s (%s): %s", name,
                           config_keys[ids[k]].key, problem);
                return RMACOLL_ERR_CONFIG;
            }
        }
        for (int k = 0; k < 2; k++) {
            if (lines[ids[k]] > 0) {
                config_msg(errbuf, errbuf_len, "config file '%s' line %d: %s: %s", file,
                           lines[ids[k]], config_keys[ids[k]].key, problem);
                return RMACOLL_ERR_CONFIG;
            }
        }
        config_msg(errbuf, errbuf_len, "%s", problem);
        return RMACOLL_ERR_CONFIG;
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

static int config_value_string(const rmacoll_config_t *cfg, config_id_t id, char *buf,
                               size_t len, int quote)
{
    const config_field_t *f = &config_fields[id];
    const void *p = config_field_cptr(cfg, id);
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
        for (int i = 0; f->names[i] != NULL; i++) {
            if (m & (1u << i)) {
                int n = snprintf(buf + off, off < len ? len - off : 0, "%s%s",
                                 total ? ", " : "[", f->names[i]);
                total += n;
                off = (size_t)total;
            }
        }
        total += snprintf(buf + off, off < len ? len - off : 0, "]");
        return total;
    }
    case CFG_KIND_I32:
        return snprintf(buf, len, "%" PRId32, *(const int32_t *)p);
    case CFG_KIND_SIZE:
        return config_format_size(config_get_u64(cfg, id), buf, len);
    case CFG_KIND_U32:
    case CFG_KIND_U64:
        return snprintf(buf, len, "%" PRIu64, config_get_u64(cfg, id));
    }
    return -1;
}

static int config_id_of(const char *key)
{
    for (int id = 0; key != NULL && id < CFG_NKEYS; id++) {
        if (strcmp(config_keys[id].key, key) == 0) {
            return id;
        }
    }
    return -1;
}

rmacoll_status_t rmacoll_config_set(rmacoll_config_t *cfg, const char *key, const char *value)
{
    rmacoll_config_t tmp;
    int id;
    rmacoll_status_t st;

    if (cfg == NULL || key == NULL || value == NULL || cfg->struct_size < sizeof(*cfg)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    id = config_id_of(key);
    if (id < 0) {
        return RMACOLL_ERR_CONFIG;
    }
    tmp = *cfg; /* cfg is unchanged on error */
    st = config_set(&tmp, (config_id_t)id, value, NULL, 0, NULL, 0);
    if (st == RMACOLL_SUCCESS) {
        *cfg = tmp;
    }
    return st;
}

rmacoll_status_t rmacoll_config_get(const rmacoll_config_t *cfg, const char *key, char *buf,
                                    size_t len)
{
    int id;

    if (cfg == NULL || key == NULL || buf == NULL || len == 0 ||
        cfg->struct_size < sizeof(*cfg)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    id = config_id_of(key);
    if (id < 0) {
        buf[0] = '\0';
        return RMACOLL_ERR_CONFIG;
    }
    config_value_string(cfg, (config_id_t)id, buf, len, 0);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_get_size(const rmacoll_config_t *cfg, const char *key,
                                          uint64_t *bytes)
{
    int id = cfg != NULL ? config_id_of(key) : -1;

    if (id < 0 || config_fields[id].kind != CFG_KIND_SIZE) {
        return RMACOLL_ERR_CONFIG;
    }
    *bytes = config_get_u64(cfg, (config_id_t)id);
    return RMACOLL_SUCCESS;
}

int rmacoll__config_value_string(const rmacoll_config_t *cfg, size_t index, char *buf,
                                 size_t len)
{
    if (cfg == NULL || index >= CFG_NKEYS) {
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
    for (int id = 0; id < CFG_NKEYS; id++) {
        const char *key = config_keys[id].key;
        const char *dot = strchr(key, '.');
        char val[2 * RMACOLL_CONFIG_STR_MAX + 8];
        int n;

        config_value_string(cfg, (config_id_t)id, val, sizeof(val), 1);
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

    for (int id = 0; id < CFG_NKEYS; id++) {
        const config_field_t *f = &config_fields[id];

        if (f->kind == CFG_KIND_LEVEL || f->kind == CFG_KIND_SUBSYS) {
            continue; /* log settings may differ between ranks */
        }
        if (f->kind == CFG_KIND_STRING || f->kind == CFG_KIND_ENUM) {
            const char *s = config_field_cptr(cfg, (config_id_t)id);
            const char *nul = memchr(s, '\0', RMACOLL_CONFIG_STR_MAX);
            size_t n = nul != NULL ? (size_t)(nul - s) : RMACOLL_CONFIG_STR_MAX;
            h = config_fnv1a(h, s, n);
            h = config_fnv1a(h, "", 1);
        } else {
            uint64_t v = config_get_u64(cfg, (config_id_t)id);
            unsigned char le[8];
            for (int b = 0; b < 8; b++) {
                le[b] = (unsigned char)(v >> (8 * b));
            }
            h = config_fnv1a(h, le, sizeof(le));
        }
    }
    return h;
}

rmacoll_status_t rmacoll__config_check(const rmacoll_config_t *cfg, char *errbuf, size_t errlen)
{
    rmacoll_config_t tmp;
    char problem[320];
    char val[RMACOLL_CONFIG_STR_MAX + 16];

    config_msg(errbuf, errlen, "%s", "");
    if (cfg == NULL || cfg->struct_size != sizeof(rmacoll_config_t)) {
        config_msg(errbuf, errlen, "config %s struct_size is %zu, not sizeof(rmacoll_config_t) "
                   "= %zu (fill it with rmacoll_config_init)", cfg == NULL ? "is NULL;" : "",
                   cfg != NULL ? cfg->struct_size : (size_t)0, sizeof(rmacoll_config_t));
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll_config_init(&tmp);
    for (int id = 0; id < CFG_NKEYS; id++) {
        const config_field_t *f = &config_fields[id];
        const char *key = config_keys[id].key;

        if (f->kind == CFG_KIND_STRING || f->kind == CFG_KIND_ENUM) {
            if (memchr(config_field_cptr(cfg, (config_id_t)id), '\0', RMACOLL_CONFIG_STR_MAX) ==
                NULL) {
                config_msg(errbuf, errlen, "config %s: not NUL-terminated within %d bytes", key,
                           RMACOLL_CONFIG_STR_MAX);
                return RMACOLL_ERR_CONFIG;
            }
        } else if (f->kind == CFG_KIND_BOOL) {
            int b = *(const int *)config_field_cptr(cfg, (config_id_t)id);
            if (b != 0 && b != 1) {
                config_msg(errbuf, errlen, "config %s: %d is not 0 or 1", key, b);
                return RMACOLL_ERR_CONFIG;
            }
            continue;
        } else if (f->kind == CFG_KIND_LEVEL) {
            int l = *(const int *)config_field_cptr(cfg, (config_id_t)id);
            if (l < RMACOLL_LOG_ERROR || l > RMACOLL_LOG_TRACE) {
                config_msg(errbuf, errlen, "config %s: %d is not a log level (0..4)", key, l);
                return RMACOLL_ERR_CONFIG;
            }
            continue;
        } else if (f->kind == CFG_KIND_SUBSYS) {
            continue; /* every mask is valid */
        }
        /* Round-trip through the parser: same rules as a file value. */
        config_value_string(cfg, (config_id_t)id, val, sizeof(val), 0);
        if (config_set(&tmp, (config_id_t)id, val, problem, sizeof(problem), NULL, 0) !=
            RMACOLL_SUCCESS) {
            config_msg(errbuf, errlen, "config %s: %s", key, problem);
            return RMACOLL_ERR_CONFIG;
        }
    }
    if (!config_relay_ok(cfg, problem, sizeof(problem))) {
        config_msg(errbuf, errlen, "config relay.buffer_bytes: %s", problem);
        return RMACOLL_ERR_CONFIG;
    }
    return RMACOLL_SUCCESS;
}
