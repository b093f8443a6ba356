/*
 * sched_registry.h - finds a round scheduler by name among the built-ins
 * (the table CMake generates from sched/) or loads one from a plugin
 * (dlopen of a shared object exporting RMACOLL_SCHED_PLUGIN_SYMBOL), binds
 * it to a topology, and checks what it returns.
 *
 * Layer rule: the registry reaches schedulers only through
 * rmacoll__builtin_schedulers[] (include/rmacoll_sched.h), never through
 * sched/ headers.
 */
#ifndef RMACOLL_CORE_SCHED_REGISTRY_H
#define RMACOLL_CORE_SCHED_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll_sched.h"
#include "core/plan/plan.h"

/**
 * Built-in scheduler called `name`, or NULL (also for name NULL).
 * Thread-safe.
 */
const rmacoll_sched_ops_t *rmacoll__sched_find(const char *name);

/** Names of the built-in schedulers, comma-separated (static). Thread-safe. */
const char *rmacoll__sched_builtin_names(void);

/**
 * Opens a scheduler and binds it to `topo` (which must outlive it).
 *  - plugin_path non-NULL and non-empty: dlopen(plugin_path), look up
 *    RMACOLL_SCHED_PLUGIN_SYMBOL, require abi_version ==
 *    RMACOLL_SCHED_ABI_VERSION, struct_size >= the v1 size, a name and
 *    non-NULL nrounds/round; run create(topo, seed) if present; then
 *    rmacoll__sched_check the result. `name` is ignored. The first
 *    v1-sized part of the plugin's table is copied, so a newer plugin with
 *    a longer table loads as v1. The plugin stays loaded until
 *    rmacoll__sched_close.
 *  - otherwise: the built-in called `name`, then its create(topo, seed).
 * On success *out holds ops (name/desc/round/nrounds usable directly) and
 * state; release it with rmacoll__sched_close.
 * Errors: RMACOLL_ERR_PLUGIN (cannot load, symbol missing, wrong ABI or
 * size, missing op, out-of-range rounds; errbuf says which),
 * RMACOLL_ERR_CONFIG (unknown or empty name; errbuf lists the known
 * ones), RMACOLL_ERR_INVALID_ARG (NULL topo/out), RMACOLL_ERR_NO_MEMORY,
 * or what the scheduler's create returned. On error *out is {NULL, NULL}
 * and nothing is left to release. errbuf (errlen bytes, may be NULL/0)
 * receives a lower-case message; the caller logs it.
 * Thread-safe (dlopen is), for distinct `out`.
 */
rmacoll_status_t rmacoll__sched_open(const char *name, const char *plugin_path,
                                     const rmacoll_topo_t *topo, uint64_t seed,
                                     rmacoll__sched_t *out, char *errbuf,
                                     size_t errlen);

/**
 * Destroys the state, and for a plugin frees the copied table and
 * dlcloses the object; sets *s to {NULL, NULL}. `s` must come from
 * rmacoll__sched_open (or be {NULL, NULL}). Safe to call twice.
 */
void rmacoll__sched_close(rmacoll__sched_t *s);

/**
 * Verifies a bound scheduler on `topo`: nrounds >= 1, and for every pair
 * rank != peer round() is in [0, nrounds) and gives the same value when
 * called twice. O(nranks^2) calls. Errors: RMACOLL_ERR_PLUGIN, errbuf
 * naming the rank, the peer and the value. Thread-safe if the
 * scheduler's round() is (built-ins are).
 */
rmacoll_status_t rmacoll__sched_check(const rmacoll__sched_t *s,
                                      const rmacoll_topo_t *topo,
                                      char *errbuf, size_t errlen);

#endif /* RMACOLL_CORE_SCHED_REGISTRY_H */
