/* log.c - levelled logging to an injected function or stderr. */
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

int rmacoll__log_level_from_name(const char *name)
{
    for (int i = 0; i < 5; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

const char *rmacoll__log_level_name(int level)
{
    return (level >= 0 && level < 5) ? level_names[level] : "?";
}

void rmacoll__logger_default(rmacoll__logger_t *lg)
{
    const char *env = getenv("RMACOLL_LOG_LEVEL");
    int lvl = env ? rmacoll__log_level_from_name(env) : -1;

    lg->fn = NULL;
    lg->ctx = NULL;
    lg->level = lvl >= 0 ? lvl : RMACOLL_LOG_WARN;
    lg->subsys = RMACOLL_LOG_SUBSYS_ALL;
    lg->rank = -1;
}

void rmacoll__vlog(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                   uint32_t subsys, const char *fmt, va_list ap)
{
    char msg[1024];

    if (lg == NULL || (int)level > lg->level || !(lg->subsys & subsys)) {
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (lg->fn != NULL) {
        lg->fn(lg->ctx, level, subsys, msg);
    } else if (lg->rank >= 0) {
        fprintf(stderr, "rmacoll[%d] %s: %s\n", lg->rank, level_names[level], msg);
    } else {
        fprintf(stderr, "rmacoll %s: %s\n", level_names[level], msg);
    }
}

void rmacoll__log(const rmacoll__logger_t *lg, rmacoll_log_level_t level,
                  uint32_t subsys, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rmacoll__vlog(lg, level, subsys, fmt, ap);
    va_end(ap);
}
