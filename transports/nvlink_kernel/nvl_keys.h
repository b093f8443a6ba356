/* nvl_keys.h - the nvlink_kernel transport's key table (nvl_keys.c), for its ops. */
#ifndef RMACOLL_TRANSPORTS_NVL_KEYS_H
#define RMACOLL_TRANSPORTS_NVL_KEYS_H

#include "rmacoll_transport.h"

#define NVL_NKEYS 1
extern const rmacoll_transport_key_t rmacoll_transport_nvlink_kernel_keys[NVL_NKEYS];

#endif
