/*
 * config_value.c - one key's value: the parsers (sizes like "64MiB",
 * integers, booleans, enums, levels, subsystem lists), the range checks
 * with their messages, and where a value lives (its field of
 * rmacoll_config_t, or the ext block of "key\0value\0" pairs for keys
 * without a field). YAML and environment values share these parsers.
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

#include "core/base/log.h"
#include "core/base/text.h"

/* ---- small helpers ---- */

/* ---- the ext block: "key\0value\0" pairs sorted by key, ended by "\0";
 * a key at its default has no pair, so equal configs are equal bytes ---- */

/* Length of the well-formed part (up to and with the final "\0"), or 0. */
size_t rmacoll__cfg_ext_len(const char *ext)
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

    if (rmacoll__cfg_ext_len(e) == 0) {
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

    if (rmacoll__cfg_ext_len(e) == 0) {
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
const void *rmacoll__cfg_value_ptr(const rmacoll_config_t *cfg, config_id_t id,
                                   config_value_t *scratch)
{
    const char *text;

    if (CFG_FIELD(id).offset != CFG_EXT) {
        return (const char *)cfg + CFG_FIELD(id).offset;
    }
    memset(scratch, 0, sizeof(*scratch));
    text = config_ext_find(cfg, CFG_KEY(id).key);
    (void)rmacoll__cfg_parse_into(&CFG_FIELD(id), text != NULL ? text : CFG_KEY(id).default_str,
                                  scratch, NULL, 0, NULL, 0);
    return scratch;
}

/* Integer value of a numeric, boolean, level or mask field, widened. */
uint64_t rmacoll__cfg_get_u64(const rmacoll_config_t *cfg, config_id_t id)
{
    config_value_t sc;
    const void *p = rmacoll__cfg_value_ptr(cfg, id, &sc);

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
void rmacoll__cfg_copy(char *dst, size_t len, const char *src)
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

/* A string or enum value (shown: text as quoted in messages). */
static rmacoll_status_t parse_text(const config_field_t *f, const char *text, void *p,
                                   const char *shown, char *problem, size_t plen)
{
    char names[160];

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
}

static rmacoll_status_t store_unsigned(const config_field_t *f, uint64_t u, void *p,
                                       char *problem, size_t plen);

/* A size, u32 or u64 value: parsed, checked against the field's range and
 * stored (shown: text as quoted in messages). */
static rmacoll_status_t parse_unsigned(const config_field_t *f, const char *text, void *p,
                                       const char *shown, char *problem, size_t plen)
{
    uint64_t u = 0;
    rmacoll_status_t st;

    if (f->kind == CFG_KIND_SIZE) {
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
    } else {
        st = config_parse_u64(text, &u);
        if (st == RMACOLL_ERR_OVERFLOW) {
            rmacoll__errbuf_printf(problem, plen, "'%s' overflows 64 bits", shown);
            return RMACOLL_ERR_CONFIG;
        }
        if (st != RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(problem, plen, "'%s' is not an unsigned integer", shown);
            return RMACOLL_ERR_CONFIG;
        }
    }
    return store_unsigned(f, u, p, problem, plen);
}

/* u checked against the field's range, then stored as u32 or u64. */
static rmacoll_status_t store_unsigned(const config_field_t *f, uint64_t u, void *p,
                                       char *problem, size_t plen)
{
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

/*
 * Parses text as the value of key id and stores it in cfg. On failure cfg
 * is unchanged, problem receives why ("'x' is not a size ...") and, for a
 * list, bad receives the offending entry. One case per kind of value;
 * strings and unsigned numbers have their own helpers.
 */
rmacoll_status_t rmacoll__cfg_parse_into(const config_field_t *f, const char *text, void *p,
                                         char *problem, size_t plen, char *bad, size_t badlen)
{
    char names[160];
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
        return parse_text(f, text, p, shown, problem, plen);
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
    case CFG_KIND_U32:
    case CFG_KIND_U64:
        return parse_unsigned(f, text, p, shown, problem, plen);
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
    /* every kind returned above; as before, any other value of f->kind
     * takes the unsigned range check of 0 */
    return store_unsigned(f, 0, p, problem, plen);
}

/*
 * Parses text as the value of key id and stores it in cfg: in its field,
 * or as canonical text in the ext block (no pair at the default). On
 * failure cfg is unchanged, problem receives why and, for a list, bad the
 * offending entry.
 */
rmacoll_status_t rmacoll__cfg_set(rmacoll_config_t *cfg, config_id_t id, const char *text,
                                  char *problem, size_t plen, char *bad, size_t badlen)
{
    const config_field_t *f = &CFG_FIELD(id);
    config_value_t sc, dsc;
    char canon[RMACOLL_CONFIG_STR_MAX + 16];
    char dcanon[RMACOLL_CONFIG_STR_MAX + 16];
    rmacoll_status_t st;

    if (f->offset != CFG_EXT) {
        return rmacoll__cfg_parse_into(f, text, (char *)cfg + f->offset, problem, plen, bad, badlen);
    }
    memset(&sc, 0, sizeof(sc));
    memset(&dsc, 0, sizeof(dsc));
    st = rmacoll__cfg_parse_into(f, text, &sc, problem, plen, bad, badlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    (void)rmacoll__cfg_parse_into(f, CFG_KEY(id).default_str, &dsc, NULL, 0, NULL, 0);
    rmacoll__cfg_format(f, &sc, canon, sizeof(canon), 0);
    rmacoll__cfg_format(f, &dsc, dcanon, sizeof(dcanon), 0);
    st = config_ext_put(cfg, CFG_KEY(id).key, strcmp(canon, dcanon) == 0 ? NULL : canon);
    if (st != RMACOLL_SUCCESS) {
        rmacoll__errbuf_printf(problem, plen, "no room left for transport keys (%d bytes in all)",
                               RMACOLL_CONFIG_EXT_BYTES);
    }
    return st;
}
