/*
 * tlog.h - logging from a transport through the core's logger
 * (env->log, printf-style, subsystem "transport"). Messages are lower-case
 * and name the transport, the peer, the size and the cause.
 */
#ifndef RMACOLL_TRANSPORTS_COMMON_TLOG_H
#define RMACOLL_TRANSPORTS_COMMON_TLOG_H

#include "rmacoll_transport.h"

/* Logs through env (a const rmacoll_transport_env_t *), if it has a logger. */
#define RMACOLL__TLOG(env_, lvl, ...)                                          \
    do {                                                                       \
        if ((env_)->log != NULL) {                                             \
            (env_)->log((env_)->log_ctx, (lvl), RMACOLL_LOG_SUBSYS_TRANSPORT,  \
                        __VA_ARGS__);                                          \
        }                                                                      \
    } while (0)

#endif /* RMACOLL_TRANSPORTS_COMMON_TLOG_H */
