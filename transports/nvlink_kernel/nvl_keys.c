/*
 * nvl_keys.c - the nvlink_kernel transport's configuration key. Compiled
 * into the core library in every build, with or without CUDA, so a config
 * file naming it loads everywhere (rmacoll_transport.h,
 * rmacoll_transport_keyset_t). The key keeps its historical top-level
 * name; it is the transport's small_max_key (the binding selector of
 * transports.intra_node auto), stored in rmacoll_config_t's
 * nvlink_kernel_threshold.
 */
#include "rmacoll_transport.h"
#include "transports/nvlink_kernel/nvl_keys.h"

const rmacoll_transport_key_t rmacoll_transport_nvlink_kernel_keys[NVL_NKEYS] = {
    {"nvlink_kernel_threshold", RMACOLL_CONFIG_SIZE, "256KiB",
     "with intra_node auto: node transfers of at most this many bytes use nvlink_kernel, "
     "larger ones ce", 0, 0},
};

const rmacoll_transport_keyset_t rmacoll_transport_nvlink_kernel_keyset = {
    "nvlink_kernel", rmacoll_transport_nvlink_kernel_keys, NVL_NKEYS, NULL};
