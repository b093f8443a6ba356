/*
 * config_api.c - the public configuration functions (rmacoll_config_init,
 * _load, _set, _get; rmacoll.h). Each first registers, once per process,
 * the hooks of the components that own keys and rules beyond core/config's
 * table: the planner's relay slot rule (core/plan/plan_config.c) and the
 * transport loader's plugin keys (core/xport/xport_config.c). Then it hands
 * over to core/config, which calls those hooks without naming them.
 *
 * Why here: core/comm is the one layer that sees core/config, core/plan
 * and core/xport together. Why not constructors in plan and xport: with
 * librmacoll_static, a program that uses only the configuration functions
 * would not link those objects and would lose the rules silently; every
 * path to a loaded or checked config goes through one of these functions
 * (rmacoll__config_check wants a struct_size that rmacoll_config_init or
 * rmacoll_config_load wrote).
 */
#include <pthread.h>

#include "core/config/config_internal.h"
#include "core/plan/plan_config.h"
#include "core/xport/xport_config.h"

static pthread_once_t config_api_once = PTHREAD_ONCE_INIT;

static void config_api_register(void)
{
    (void)rmacoll__config_register(&rmacoll__plan_config_hooks);
    (void)rmacoll__config_register(&rmacoll__xport_config_hooks);
}

void rmacoll_config_init(rmacoll_config_t *cfg)
{
    pthread_once(&config_api_once, config_api_register);
    rmacoll__config_init(cfg);
}

rmacoll_status_t rmacoll_config_load(const char *path, rmacoll_config_t *cfg, char *errbuf,
                                     size_t errbuf_len)
{
    pthread_once(&config_api_once, config_api_register);
    return rmacoll__config_load(path, cfg, errbuf, errbuf_len);
}

rmacoll_status_t rmacoll_config_set(rmacoll_config_t *cfg, const char *key, const char *value)
{
    pthread_once(&config_api_once, config_api_register);
    return rmacoll__config_set(cfg, key, value);
}

rmacoll_status_t rmacoll_config_get(const rmacoll_config_t *cfg, const char *key, char *buf,
                                    size_t len)
{
    pthread_once(&config_api_once, config_api_register);
    return rmacoll__config_get(cfg, key, buf, len);
}
