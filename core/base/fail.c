/*
 * fail.c - the recorded-and-logged error path (fail.h).
 */
#include "core/base/fail.h"

#include <stdio.h>

void rmacoll__fail_init(rmacoll__fail_t *f, char *buf, size_t len,
                        const rmacoll__logger_t *log, int rank, uint32_t subsys)
{
    f->buf = buf;
    f->len = len;
    f->log = log;
    f->rank = rank;
    f->subsys = subsys;
}

static rmacoll_status_t fail_at(const rmacoll__fail_t *f, rmacoll_log_level_t level,
                                rmacoll_status_t st, const char *fmt, va_list ap)
{
    vsnprintf(f->buf, f->len, fmt, ap);
    rmacoll__log(f->log, level, f->subsys, "%s", f->buf);
    return st;
}

rmacoll_status_t rmacoll__vfail(const rmacoll__fail_t *f, rmacoll_status_t st,
                                const char *fmt, va_list ap)
{
    return fail_at(f, RMACOLL_LOG_ERROR, st, fmt, ap);
}

rmacoll_status_t rmacoll__fail_secondary(const rmacoll__fail_t *f, rmacoll_status_t st,
                                         const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    st = fail_at(f, RMACOLL_LOG_INFO, st, fmt, ap);
    va_end(ap);
    return st;
}

rmacoll_status_t rmacoll__fail(const rmacoll__fail_t *f, rmacoll_status_t st,
                               const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    st = rmacoll__vfail(f, st, fmt, ap);
    va_end(ap);
    return st;
}
