/*
 * config_dump.c - a configuration written out (one key's value as YAML
 * would write it, the whole config as YAML), its hash (compared by every
 * rank at create), and the whole-struct check of a config the embedder
 * filled itself (rmacoll__config_check).
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
int rmacoll__cfg_format(const config_field_t *f, const void *p, char *buf, size_t len,
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

int rmacoll__cfg_value_string(const rmacoll_config_t *cfg, config_id_t id, char *buf,
                              size_t len, int quote)
{
    config_value_t sc;

    return rmacoll__cfg_format(&CFG_FIELD(id), rmacoll__cfg_value_ptr(cfg, id, &sc), buf, len, quote);
}

int rmacoll__config_value_string(const rmacoll_config_t *cfg, size_t index, char *buf,
                                 size_t len)
{
    if (cfg == NULL || index >= rmacoll__cfg_nkeys()) {
        return -1;
    }
    return rmacoll__cfg_value_string(cfg, (config_id_t)index, buf, len, 0);
}

int rmacoll__config_to_string(const rmacoll_config_t *cfg, char *buf, size_t len)
{
    size_t off = 0;
    int total = 0;
    char parent[64] = "";

    if (len > 0) {
        buf[0] = '\0';
    }
    for (size_t id = 0; id < rmacoll__cfg_nkeys(); id++) {
        const char *key = CFG_KEY(id).key;
        const char *dot = strchr(key, '.');
        char val[2 * RMACOLL_CONFIG_STR_MAX + 8];
        int n;

        rmacoll__cfg_value_string(cfg, id, val, sizeof(val), 1);
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

    for (size_t id = 0; id < rmacoll__cfg_nkeys(); id++) {
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
            uint64_t v = rmacoll__cfg_get_u64(cfg, id);
            unsigned char le[8];
            for (int b = 0; b < 8; b++) {
                le[b] = (unsigned char)(v >> (8 * b));
            }
            h = config_fnv1a(h, le, sizeof(le));
        }
    }
    /* Canonical (sorted, no defaults), so equal configs hash equal even
     * when this process has not seen every key in it. */
    elen = rmacoll__cfg_ext_len(cfg->ext);
    h = config_fnv1a(h, cfg->ext, elen != 0 ? elen : RMACOLL_CONFIG_EXT_BYTES);
    return h;
}

/* Every transport keyset's whole-config check; errors as a config value. */
rmacoll_status_t rmacoll__cfg_check_transports(const rmacoll_config_t *cfg, const char **key,
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
                               "config %sstruct_size is %zu, not sizeof(rmacoll_config_t) "
                               "= %zu (fill it with rmacoll_config_init)", cfg == NULL ? "is NULL; " : "",
                               cfg != NULL ? cfg->struct_size : (size_t)0, sizeof(rmacoll_config_t));
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (rmacoll__cfg_ext_len(cfg->ext) == 0) {
        rmacoll__errbuf_printf(errbuf, errlen, "config ext: not filled by rmacoll_config_init / "
                               "rmacoll_config_set (malformed)");
        return RMACOLL_ERR_CONFIG;
    }
    rmacoll__config_init(&tmp);
    for (size_t id = 0; id < rmacoll__cfg_nkeys(); id++) {
        const config_field_t *f = &CFG_FIELD(id);
        const char *key = CFG_KEY(id).key;
        const void *p = (const char *)cfg + f->offset;

        if (f->offset == CFG_EXT) {
            continue; /* stored canonical by rmacoll__cfg_set */
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
        rmacoll__cfg_value_string(cfg, id, val, sizeof(val), 0);
        if (rmacoll__cfg_set(&tmp, id, val, problem, sizeof(problem), NULL, 0) !=
            RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(errbuf, errlen, "config %s: %s", key, problem);
            return RMACOLL_ERR_CONFIG;
        }
    }
    rule_keys = rmacoll__cfg_rules_fail(cfg, problem, sizeof(problem));
    if (rule_keys != NULL) {
        rmacoll__errbuf_printf(errbuf, errlen, "config %s: %s", rule_keys[0], problem);
        return RMACOLL_ERR_CONFIG;
    }
    if (rmacoll__cfg_check_transports(cfg, &tkey, problem, sizeof(problem)) != RMACOLL_SUCCESS) {
        rmacoll__errbuf_printf(errbuf, errlen, "config %s: %s", tkey, problem);
        return RMACOLL_ERR_CONFIG;
    }
    return RMACOLL_SUCCESS;
}
