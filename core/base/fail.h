/*
 * fail.h - the error path every layer takes: a failure is recorded as one
 * message in its owner's last-error buffer (a communicator's last_error,
 * what rmacoll_comm_last_error returns) and logged once, at ERROR, under
 * the owner's subsystem. The owner (comm/, ctrl/proxy.c) fills the record
 * once; the layers that fail (exec/, ctrl/) call rmacoll__fail with it and
 * never include their owner's header.
 *
 * Thread-safety: one writer at a time per buffer (the owner's calls do not
 * overlap, rmacoll__enter); the logger may be shared.
 *
 * core/base - what every layer needs (README):
 *   owns   status codes and their strings (status.c), the version, logging
 *          (log.c), the error path (fail.c), shared-memory segments (shm.c).
 *   calls  libc only; every other folder may call it.
 */
#ifndef RMACOLL_CORE_FAIL_H
#define RMACOLL_CORE_FAIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"
#include "rmacoll.h"

typedef struct rmacoll__fail {
    char *buf;                     /* the owner's last-error buffer, len bytes */
    size_t len;
    const rmacoll__logger_t *log;  /* borrowed: the owner's logger */
    int rank;                      /* the owner's rank (messages name it themselves) */
    uint32_t subsys;               /* RMACOLL_LOG_SUBSYS_* the messages log under */
} rmacoll__fail_t;

/** Fills *f; buf (len bytes) and log stay the caller's. */
void rmacoll__fail_init(rmacoll__fail_t *f, char *buf, size_t len,
                        const rmacoll__logger_t *log, int rank, uint32_t subsys);

/** Formats the message into f->buf (truncated to f->len - 1 bytes), logs
 *  it at ERROR and returns st unchanged. */
rmacoll_status_t rmacoll__fail(const rmacoll__fail_t *f, rmacoll_status_t st,
                               const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** As rmacoll__fail, for an error another rank (or the bootstrap root)
 *  saw first and has logged: recorded and returned alike, logged at INFO
 *  only, so that one failure gives one ERROR line in a job's logs. */
rmacoll_status_t rmacoll__fail_secondary(const rmacoll__fail_t *f, rmacoll_status_t st,
                                         const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
rmacoll_status_t rmacoll__vfail(const rmacoll__fail_t *f, rmacoll_status_t st,
                                const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif /* RMACOLL_CORE_FAIL_H */
