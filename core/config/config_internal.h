/*
 * config_internal.h - internal view of the configuration (core/config/config.c):
 * the table of every key (for rmacoll-info and the docs), a YAML-ish dump,
 * the hash every rank compares at create, a whole-struct check for configs
 * the embedder fills itself, and the size parser ("64MiB").
 *
 * core/config - the configuration (README): owns the config table, the
 * YAML loader and the environment keys (config.c, env.c); calls base.
 */
#ifndef RMACOLL_CORE_CONFIG_INTERNAL_H
#define RMACOLL_CORE_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll.h"
#include "rmacoll_transport.h"

/* The largest eager_max_bytes (the key's range): it sizes every record
 * slot of the control windows. */
#define RMACOLL__EAGER_MAX_CAP (1ull << 20)

/* One configuration key. */
typedef struct rmacoll__config_key {
    const char *key;         /* dotted YAML path, e.g. "relay.slots" */
    const char *type;        /* "size", "u32", "bool", "enum(a|b|c)", ... */
    const char *default_str; /* default value as written in YAML, e.g. "64MiB" */
    const char *meaning;     /* one line */
} rmacoll__config_key_t;

/**
 * Every configuration key, in a fixed order (the order of the dump);
 * *n receives the count. The environment variable of a key is
 * "RMACOLL_" + key upper-cased with dots as underscores. Thread-safe.
 */
const rmacoll__config_key_t *rmacoll__config_keys(size_t *n);

/**
 * The full name of transport `transport`'s key `name` (rmacoll_transport_key_t):
 * "<transport>.<name>", or name itself when it already starts with
 * "<transport>_" or "<transport>.". 0, or -1 when it does not fit in len.
 */
int rmacoll__config_key_name(const char *transport, const char *name, char *buf, size_t len);

/**
 * Makes the keys a transport plugin declares known to the configuration
 * (YAML, environment, rmacoll_config_set/get), under the names
 * rmacoll__config_key_name gives; the strings are copied. Keys already
 * known are skipped, and so are malformed ones (bad type, a default that
 * does not parse). Called by the plugin loader (core/xport/transport.c).
 * Thread-safe.
 */
void rmacoll__config_add_keys(const char *transport, const rmacoll_transport_key_t *keys,
                              size_t nkeys);

/**
 * A component's hooks into rmacoll_config_load, the way libfabric's
 * fi_param_define and UCX's component config tables let each module own
 * its keys and rules: the loader calls every registered set without
 * naming the component (core/config sits below the planner and the
 * transports and calls neither directly). Static storage; optional
 * members may be NULL.
 */
typedef struct rmacoll__config_hooks {
    const char *component;   /* "plan", "transport": for the reader */
    /** After a first reading of the file and environment (unknown keys
     *  ignored): declares the keys this configuration brings with it
     *  (rmacoll__config_add_keys), e.g. those of a transport plugin it
     *  names; the second reading then knows them. */
    void (*declare_keys)(const rmacoll_config_t *cfg);
    /** A rule over several keys of the loaded configuration: 1 if cfg
     *  passes, else 0 with why in problem[plen]. */
    int (*check)(const rmacoll_config_t *cfg, char *problem, size_t plen);
    /** The keys a failed check is about (dotted names, NULL-terminated):
     *  the message names the source that set the first of them. */
    const char *const *check_keys;
} rmacoll__config_hooks_t;

/**
 * Registers a component's hooks with the loader; registering the same
 * pointer again does nothing. At most RMACOLL__CONFIG_MAX_HOOKS sets.
 * RMACOLL_SUCCESS, or RMACOLL_ERR_NO_MEMORY when the table is full.
 * Thread-safe. The public rmacoll_config_load (core/comm/config_load.c)
 * registers the library's components before it loads.
 */
#define RMACOLL__CONFIG_MAX_HOOKS 8
rmacoll_status_t rmacoll__config_register(const rmacoll__config_hooks_t *hooks);

/**
 * rmacoll_config_init / _load / _set / _get (rmacoll.h) with the hooks
 * registered so far (rmacoll__config_register): the same arguments,
 * results and messages. The public functions (core/comm/config_api.c)
 * register the library's components first, then call these.
 */
void rmacoll__config_init(rmacoll_config_t *cfg);
rmacoll_status_t rmacoll__config_load(const char *path, rmacoll_config_t *cfg, char *errbuf,
                                      size_t errbuf_len);
rmacoll_status_t rmacoll__config_set(rmacoll_config_t *cfg, const char *key, const char *value);
rmacoll_status_t rmacoll__config_get(const rmacoll_config_t *cfg, const char *key, char *buf,
                                     size_t len);

/**
 * Writes the value of key number `index` (of rmacoll__config_keys) in cfg
 * into buf as it would be written in YAML ("64MiB", "true", "[core, plan]",
 * strings unquoted). Returns the length it needed (snprintf-style), or -1
 * for a bad index.
 */
int rmacoll__config_value_string(const rmacoll_config_t *cfg, size_t index,
                                 char *buf, size_t len);

/**
 * Reads the size key `key` (dotted name, e.g. "relay.buffer_bytes") of cfg
 * into *bytes. RMACOLL_ERR_CONFIG when there is no such key or it is not
 * a size. Thread-safe.
 */
rmacoll_status_t rmacoll__config_get_size(const rmacoll_config_t *cfg, const char *key,
                                          uint64_t *bytes);

/**
 * Reads the u32 or u64 key `key` of cfg into *value. RMACOLL_ERR_CONFIG
 * when there is no such key or it is of another type. Thread-safe.
 */
rmacoll_status_t rmacoll__config_get_count(const rmacoll_config_t *cfg, const char *key,
                                           uint64_t *value);

/**
 * Writes cfg as YAML (nested mappings, one key a line) into buf (always
 * NUL-terminated when len > 0). The text loads back to the same config.
 * Returns the length it needed, snprintf-style.
 */
int rmacoll__config_to_string(const rmacoll_config_t *cfg, char *buf, size_t len);

/**
 * FNV-1a (64-bit) over every field except log.level and log.subsystems
 * (which may differ between ranks); strings hash up to their NUL, numbers
 * as 8 little-endian bytes, so padding and bytes after a string's NUL do
 * not matter. Equal configs give equal hashes.
 */
uint64_t rmacoll__config_hash(const rmacoll_config_t *cfg);

/**
 * Checks a whole struct (e.g. the one an embedder passes to
 * rmacoll_comm_create): enums, non-empty scheduler, NUL-terminated strings,
 * the ranges of rmacoll_config_load. RMACOLL_ERR_CONFIG with a message
 * naming the key, or RMACOLL_ERR_INVALID_ARG for a NULL cfg or a
 * struct_size smaller than this library's struct.
 */
rmacoll_status_t rmacoll__config_check(const rmacoll_config_t *cfg, char *errbuf,
                                       size_t errlen);

/**
 * Parses a byte size: a decimal integer, optionally followed by a binary
 * suffix (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB; case-
 * insensitive; 1K = 1024), spaces allowed between. RMACOLL_ERR_CONFIG if
 * malformed, RMACOLL_ERR_OVERFLOW if it exceeds UINT64_MAX.
 */
rmacoll_status_t rmacoll__config_parse_size(const char *text, uint64_t *bytes);

#endif /* RMACOLL_CORE_CONFIG_INTERNAL_H */
