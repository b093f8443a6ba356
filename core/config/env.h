/*
 * env.h - every environment variable rmacoll reads, in one table: the
 * configuration keys (RMACOLL_<KEY>, from core/config/config_keys.c's key table) and
 * the variables outside it (logging, bootstrap, launcher wire-up, tools).
 * rmacoll-info prints it; docs/env.md is written from it; communicator
 * creation warns once per process about any RMACOLL_* variable it does not
 * know (a misspelt RMACOLL_RELAY_SLOT=8 would otherwise be ignored).
 */
#ifndef RMACOLL_CORE_ENV_H
#define RMACOLL_CORE_ENV_H

#include <stddef.h>

#include "core/base/log.h"

/* One variable outside the configuration keys. */
typedef struct rmacoll__env_var {
    const char *name;     /* "RMACOLL_LOG_FILE", or a prefix ending in '*' */
    const char *reader;   /* "library", "rmacoll-perf", "tests", ... */
    const char *meaning;  /* one line */
} rmacoll__env_var_t;

/** The variables outside the configuration keys; *n receives the count.
 *  Thread-safe (static data). */
const rmacoll__env_var_t *rmacoll__env_vars(size_t *n);

/** 1 when name (e.g. "RMACOLL_RELAY_SLOTS") is a variable rmacoll reads:
 *  a configuration key's or one of rmacoll__env_vars. */
int rmacoll__env_known(const char *name);

/**
 * Warns through lg, once per process, about every RMACOLL_* variable of
 * the environment that rmacoll__env_known does not know, naming it and the
 * closest known name. Returns how many were unknown. Thread-safe.
 */
int rmacoll__env_warn_unknown(const rmacoll__logger_t *lg);

#endif /* RMACOLL_CORE_ENV_H */
