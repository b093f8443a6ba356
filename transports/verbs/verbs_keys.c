/*
 * verbs_keys.c - the verbs transport's configuration keys (verbs.*).
 * Compiled into the core library in every build, with or without
 * rdma-core, so a config file naming them loads everywhere
 * (rmacoll_transport.h, rmacoll_transport_keyset_t). verbs.c reads the
 * values from the rmacoll_config_t fields that store them (verbs_*). Also
 * compiled into librmacoll-verbs.so, so it calls nothing of librmacoll.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "rmacoll_transport.h"
#include "transports/verbs/verbs_keys.h"

const rmacoll_transport_key_t rmacoll_transport_verbs_keys[VERBS_NKEYS] = {
    {"device", RMACOLL_CONFIG_STRING, "",
     "ibverbs device, e.g. mlx5_0 (\"\" = one per rail, closest to the rank's GPU)", 0, 0},
    {"port", RMACOLL_CONFIG_U32, "1", "port of the device, 1-based (1..255)", 1, 255},
    {"gid_index", RMACOLL_CONFIG_I32, "-1", "GID index for RoCE (-1 = auto)", -1, INT32_MAX},
    {"mtu", RMACOLL_CONFIG_U32, "0",
     "path MTU in bytes: 256, 512, 1024, 2048 or 4096 (0 = the port's active MTU)", 0, 4096},
    {"traffic_class", RMACOLL_CONFIG_U32, "0", "traffic class of the GRH (0..255)", 0, 255},
    {"service_level", RMACOLL_CONFIG_U32, "0", "InfiniBand service level (0..15)", 0, 15},
    {"max_inflight", RMACOLL_CONFIG_U32, "128", "work requests in flight per queue pair (>= 1)",
     1, UINT32_MAX},
};

/* verbs.mtu is one of the InfiniBand path MTUs, or 0. */
static const char *verbs_keys_check(const rmacoll_config_t *cfg, char *problem, size_t plen)
{
    static const uint64_t allowed[] = {0, 256, 512, 1024, 2048, 4096};
    uint64_t mtu = cfg->verbs_mtu; /* its storage (rmacoll.h); nothing of librmacoll called */

    for (size_t k = 0; k < sizeof(allowed) / sizeof(allowed[0]); k++) {
        if (allowed[k] == mtu) {
            return NULL;
        }
    }
    snprintf(problem, plen, "%" PRIu64 " is not one of 0|256|512|1024|2048|4096", mtu);
    return "verbs.mtu";
}

const rmacoll_transport_keyset_t rmacoll_transport_verbs_keyset = {
    .transport = "verbs",
    .keys = rmacoll_transport_verbs_keys,
    .nkeys = VERBS_NKEYS,
    .check = verbs_keys_check,
};
