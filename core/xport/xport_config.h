/*
 * xport_config.h - the transport loader's hooks into rmacoll_config_load
 * (xport_config.c): plugin transports named in a config declare their keys.
 */
#ifndef RMACOLL_CORE_XPORT_CONFIG_H
#define RMACOLL_CORE_XPORT_CONFIG_H

#include "core/config/config_internal.h"

extern const rmacoll__config_hooks_t rmacoll__xport_config_hooks;

#endif /* RMACOLL_CORE_XPORT_CONFIG_H */
