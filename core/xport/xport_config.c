/*
 * xport_config.c - the transport loader's hook into the configuration
 * loader (rmacoll__xport_config_hooks): a transport plugin named in the
 * config (plugin:PATH) is loaded once after the first reading, so that
 * the keys it declares (rmacoll__config_add_keys, called by the loader in
 * transport.c) are known when the file and environment are read again.
 * core/config calls this only through the hook.
 */
#include "core/xport/xport_config.h"

#include <string.h>

#include "core/xport/transport.h"

#define XPORT_CONFIG_PLUGIN_PREFIX "plugin:" /* as transport.c's */

/* Loads the plugins cfg names as transports (plugin:PATH), so that their
 * keys are known; one that cannot be loaded adds no keys (create reports
 * why). */
static void xport_config_declare_keys(const rmacoll_config_t *cfg)
{
    const char *specs[2] = {cfg->intra_node, cfg->inter_node};

    for (int k = 0; k < 2; k++) {
        rmacoll__tops_t t;
        char err[512];

        if (memchr(specs[k], '\0', RMACOLL_CONFIG_STR_MAX) == NULL ||
            strncmp(specs[k], XPORT_CONFIG_PLUGIN_PREFIX,
                    strlen(XPORT_CONFIG_PLUGIN_PREFIX)) != 0) {
            continue;
        }
        if (rmacoll__tops_find(specs[k], "transports", &t, err, sizeof(err)) == RMACOLL_SUCCESS) {
            rmacoll__tops_release(&t);
        }
    }
}

const rmacoll__config_hooks_t rmacoll__xport_config_hooks = {
    .component = "transport",
    .declare_keys = xport_config_declare_keys,
    .check = NULL,
    .check_keys = NULL,
};
