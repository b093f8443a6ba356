/*
 * log.h - levelled, subsystem-masked logging. A logger belongs to a
 * communicator (no global state); the embedder may inject its function.
 * Messages are lower-case and name the peer, the size and the cause.
 */
#ifndef RMACOLL_CORE_LOG_H
#define RMACOLL_CORE_LOG_H

#include <stdarg.h>

#include "rmacoll.h"

typedef struct rmacoll__logger {
    rmacoll_log_fn_t fn;   /* NULL: stderr */
    void *ctx;
    int level;             /* messages above this level are dropped */
    uint32_t subsys;       /* RMACOLL_LOG_SUBSYS_* mask */
    int rank;              /* prefixed to stderr lines; -1 = none */
} rmacoll__logger_t;

/** A logger from RMACOLL_LOG_LEVEL (error|warn|info|debug|trace) alone. */
void rmacoll__logger_default(rmacoll__logger_t *lg);

void rmacoll__log(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                  uint32_t subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rmacoll__vlog(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                   uint32_t subsys, const char *fmt, va_list ap);

/** Parses a level name; -1 if unknown. */
int rmacoll__log_level_from_name(const char *name);
const char *rmacoll__log_level_name(int level);

#endif /* RMACOLL_CORE_LOG_H */
