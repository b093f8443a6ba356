/*
 * config_priv.h - what the files of core/config share and nothing outside
 * reads: the kinds and storage of a key (config_field_t), the registry's
 * entries (CFG_KEY / CFG_FIELD, owned by config_keys.c), and the functions
 * one file of the folder calls in another. Callers outside core/config use
 * config_internal.h.
 */
#ifndef RMACOLL_CORE_CONFIG_PRIV_H
#define RMACOLL_CORE_CONFIG_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "core/config/config_internal.h"

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

#define CONFIG_PLUGIN_PREFIX "plugin:" /* a transport loaded from a shared object */
#define CONFIG_MAX_KEYS 160
#define CONFIG_KEY_MAX 64

/* The registry (config_keys.c): entries [0, rmacoll__cfg_nkeys()). */
extern rmacoll__config_key_t *const rmacoll__cfg_keys;
extern config_field_t *const rmacoll__cfg_fields;
#define CFG_KEY(i) (rmacoll__cfg_keys[(i)])
#define CFG_FIELD(i) (rmacoll__cfg_fields[(i)])

/* config_keys.c */
size_t rmacoll__cfg_nkeys(void);
/* config_value.c */
size_t rmacoll__cfg_ext_len(const char *ext);
const void *rmacoll__cfg_value_ptr(const rmacoll_config_t *cfg, config_id_t id,
                                   config_value_t *scratch);
uint64_t rmacoll__cfg_get_u64(const rmacoll_config_t *cfg, config_id_t id);
void rmacoll__cfg_copy(char *dst, size_t len, const char *src);
rmacoll_status_t rmacoll__cfg_parse_into(const config_field_t *f, const char *text, void *p,
                                         char *problem, size_t plen, char *bad, size_t badlen);
rmacoll_status_t rmacoll__cfg_set(rmacoll_config_t *cfg, config_id_t id, const char *text,
                                  char *problem, size_t plen, char *bad, size_t badlen);
/* config_yaml.c */
rmacoll_status_t rmacoll__cfg_load_file(const char *file, rmacoll_config_t *cfg, int *lines,
                                        int lenient, char *errbuf, size_t errlen);
/* config_load.c */
const char *const *rmacoll__cfg_rules_fail(const rmacoll_config_t *cfg, char *problem,
                                           size_t plen);
/* config_dump.c */
int rmacoll__cfg_format(const config_field_t *f, const void *p, char *buf, size_t len,
                        int quote);
int rmacoll__cfg_value_string(const rmacoll_config_t *cfg, config_id_t id, char *buf,
                              size_t len, int quote);
rmacoll_status_t rmacoll__cfg_check_transports(const rmacoll_config_t *cfg, const char **key,
                                               char *problem, size_t plen);

#endif /* RMACOLL_CORE_CONFIG_PRIV_H */
