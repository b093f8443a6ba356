/* ofi_keys.h - the ofi transport's key table (ofi_keys.c), for its ops. */
#ifndef RMACOLL_TRANSPORTS_OFI_KEYS_H
#define RMACOLL_TRANSPORTS_OFI_KEYS_H

#include "rmacoll_transport.h"

#define OFI_NKEYS 4
extern const rmacoll_transport_key_t rmacoll_transport_ofi_keys[OFI_NKEYS];

#endif
