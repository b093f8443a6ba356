/*
 * config_load.c - rmacoll__config_load (defaults, then the YAML file, then
 * RMACOLL_<KEY> environment overrides, read twice so that the keys of a
 * plugin transport named there are known), the components' hooks
 * (rmacoll__config_register: keys a config brings, rules over several
 * keys) and the by-name access rmacoll__config_set / _get / _get_size.
 * Names neither the planner nor the transports: they come in as hooks.
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

static int config_id_of(const char *key);

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
const char *const *rmacoll__cfg_rules_fail(const rmacoll_config_t *cfg, char *problem,
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
    for (size_t id = 0; id < rmacoll__cfg_nkeys(); id++) {
        char name[96];
        char problem[320];
        const char *val;

        config_env_name(id, name, sizeof(name));
        val = getenv(name);
        if (val == NULL) {
            continue;
        }
        from_env[id] = 1;
        if (rmacoll__cfg_set(cfg, id, val, problem, sizeof(problem), NULL, 0) !=
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
    for (size_t id = 0; id < rmacoll__cfg_nkeys(); id++) {
        /* The defaults are parsed from the table, so the table is the truth;
         * test_config checks that every one parses. */
        (void)rmacoll__cfg_set(cfg, id, CFG_KEY(id).default_str, NULL, 0, NULL, 0);
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

/* One reading: the file (when there is one), then the environment over
 * it; lenient: unknown keys of the file ignored (pass 1). */
static rmacoll_status_t config_read(const char *file, rmacoll_config_t *tmp, int *lines,
                                    int *from_env, int lenient, char *errbuf,
                                    size_t errbuf_len)
{
    rmacoll_status_t st;

    if (file != NULL) {
        st = rmacoll__cfg_load_file(file, tmp, lines, lenient, errbuf, errbuf_len);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return config_load_env(tmp, from_env, errbuf, errbuf_len);
}

/* The components' rules, then the transport check, over the values read;
 * an error blames the keys' sources (file line or environment). */
static rmacoll_status_t config_check_rules(const rmacoll_config_t *tmp, const char *file,
                                           const int *lines, const int *from_env,
                                           char *errbuf, size_t errbuf_len)
{
    char problem[320];
    const char *const *rule_keys;
    const char *tkey = NULL;

    rule_keys = rmacoll__cfg_rules_fail(tmp, problem, sizeof(problem));
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
    if (rmacoll__cfg_check_transports(tmp, &tkey, problem, sizeof(problem)) != RMACOLL_SUCCESS) {
        int id = config_id_of(tkey);
        config_id_t ids[1] = {id >= 0 ? (config_id_t)id : 0};
        if (id >= 0) {
            config_blame(ids, 1, file, lines, from_env, problem, errbuf, errbuf_len);
        } else {
            rmacoll__errbuf_printf(errbuf, errbuf_len, "%s: %s", tkey, problem);
        }
        return RMACOLL_ERR_CONFIG;
    }
    return RMACOLL_SUCCESS;
}

/* The loader's steps in their order: first reading, components declare
 * keys, second reading, components' rules and transport check. */
rmacoll_status_t rmacoll__config_load(const char *path, rmacoll_config_t *cfg, char *errbuf,
                                      size_t errbuf_len)
{
    rmacoll_config_t tmp;
    int lines[CONFIG_MAX_KEYS] = {0};
    int from_env[CONFIG_MAX_KEYS] = {0};
    rmacoll_status_t st;
    const char *file = path;

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
    st = config_read(file, &tmp, lines, from_env, 1, errbuf, errbuf_len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    config_declare_keys(&tmp);
    rmacoll__config_init(&tmp);
    memset(lines, 0, sizeof(lines));
    memset(from_env, 0, sizeof(from_env));
    st = config_read(file, &tmp, lines, from_env, 0, errbuf, errbuf_len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = config_check_rules(&tmp, file, lines, from_env, errbuf, errbuf_len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    *cfg = tmp;
    return RMACOLL_SUCCESS;
}

static int config_id_of(const char *key)
{
    size_t n = rmacoll__cfg_nkeys();

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

/* cfg's struct_size is wrong: the message names the call, the key it was
 * given and both sizes. */
static void config_size_error(const char *fn, const char *key, const rmacoll_config_t *cfg)
{
    rmacoll__errbuf_printf(config_err, sizeof(config_err),
                           "%s: %s: cfg->struct_size is %zu, not sizeof(rmacoll_config_t) = "
                           "%zu (cfg was not initialised by rmacoll_config_init or "
                           "rmacoll_config_load)", fn, key, cfg->struct_size, sizeof(*cfg));
}

rmacoll_status_t rmacoll__config_set(rmacoll_config_t *cfg, const char *key, const char *value)
{
    rmacoll_config_t tmp;
    int id;
    rmacoll_status_t st;
    char problem[256] = "";

    if (cfg == NULL || key == NULL || value == NULL) {
        rmacoll__errbuf_printf(config_err, sizeof(config_err), "rmacoll_config_set: %s",
                               cfg == NULL ? "cfg is NULL" : key == NULL ? "key is NULL"
                               : "value is NULL");
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (cfg->struct_size < sizeof(*cfg)) {
        config_size_error("rmacoll_config_set", key, cfg);
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
    st = rmacoll__cfg_set(&tmp, (config_id_t)id, value, problem, sizeof(problem), NULL, 0);
    if (st == RMACOLL_SUCCESS) {
        const char *tkey = NULL;
        st = rmacoll__cfg_check_transports(&tmp, &tkey, problem, sizeof(problem));
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

    if (cfg == NULL || key == NULL || buf == NULL || len == 0) {
        rmacoll__errbuf_printf(config_err, sizeof(config_err), "rmacoll_config_get: %s",
                               cfg == NULL ? "cfg is NULL" : key == NULL ? "key is NULL"
                               : buf == NULL ? "buf is NULL" : "len is 0");
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (cfg->struct_size < sizeof(*cfg)) {
        config_size_error("rmacoll_config_get", key, cfg);
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
    rmacoll__cfg_value_string(cfg, (config_id_t)id, buf, len, 0);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_get_size(const rmacoll_config_t *cfg, const char *key,
                                          uint64_t *bytes)
{
    int id = cfg != NULL ? config_id_of(key) : -1;

    if (id < 0 || CFG_FIELD(id).kind != CFG_KIND_SIZE) {
        return RMACOLL_ERR_CONFIG;
    }
    *bytes = rmacoll__cfg_get_u64(cfg, (config_id_t)id);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__config_get_count(const rmacoll_config_t *cfg, const char *key,
                                           uint64_t *value)
{
    int id = cfg != NULL ? config_id_of(key) : -1;

    if (id < 0 || (CFG_FIELD(id).kind != CFG_KIND_U32 && CFG_FIELD(id).kind != CFG_KIND_U64)) {
        return RMACOLL_ERR_CONFIG;
    }
    *value = rmacoll__cfg_get_u64(cfg, (config_id_t)id);
    return RMACOLL_SUCCESS;
}
