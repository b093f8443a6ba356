/*
 * log.h - levelled, subsystem-masked logging. A logger belongs to a
 * communicator (no global state); the embedder may inject its function.
 * Messages are lower-case and name the peer, the size and the cause.
 */
#ifndef RMACOLL_CORE_LOG_H
#define RMACOLL_CORE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "rmacoll.h"

typedef struct rmacoll__logger {
    rmacoll_log_fn_t fn;   /* NULL: stderr */
    void *ctx;
    int level;             /* messages above this level are dropped */
    uint32_t subsys;       /* RMACOLL_LOG_SUBSYS_* mask */
    int rank;              /* prefixed to stderr lines; -1 = none */
} rmacoll__logger_t;

/** A logger from the environment alone: RMACOLL_LOG_LEVEL
 *  (error|warn|info|debug|trace, any case) and RMACOLL_LOG_SUBSYSTEMS
 *  (comma list, "all", "^a,b" = all but a, b). Lines go to stderr or
 *  RMACOLL_LOG_FILE as "host:pid:tid [rank] rmacoll LEVEL subsys: msg". */
void rmacoll__logger_default(rmacoll__logger_t *lg);

void rmacoll__log(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                  uint32_t subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rmacoll__vlog(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                   uint32_t subsys, const char *fmt, va_list ap);

/** Parses a level name (any case; "warning" = warn); -1 if unknown. */
int rmacoll__log_level_from_name(const char *name);

/** Name of the lowest subsystem bit set in subsys ("core" if none). */
const char *rmacoll__log_subsys_name(uint32_t subsys);

/** The subsystem names, NULL-terminated: bit i of RMACOLL_LOG_SUBSYS_*
 *  is element i. */
extern const char *const rmacoll__log_subsys_names[];

/**
 * Parses a subsystem list into *mask: names separated by commas or blanks,
 * any case, optionally in brackets ("core,plan", "[core, plan]", "all",
 * "none"). A '^' before the first name excludes the names listed: every
 * subsystem but those ("^plan,sched", as NCCL_DEBUG_SUBSYS). 0, or -1 on
 * an unknown name, unbalanced brackets or an empty list, with the
 * offending entry in bad[badlen] (bad may be NULL). The one parser of
 * RMACOLL_LOG_SUBSYSTEMS and of the log.subsystems key.
 */
int rmacoll__log_subsys_parse(const char *text, uint32_t *mask, char *bad, size_t badlen);

/** Expands %h (host name), %p (pid) and %% of an RMACOLL_LOG_FILE
 *  pattern into out[len]; 0, or -1 if it does not fit. */
int rmacoll__log_expand_path(const char *pattern, char *out, size_t len);

#endif /* RMACOLL_CORE_LOG_H */
