/* verbs_keys.h - the verbs transport's key table (verbs_keys.c), for its ops. */
#ifndef RMACOLL_TRANSPORTS_VERBS_KEYS_H
#define RMACOLL_TRANSPORTS_VERBS_KEYS_H

#include "rmacoll_transport.h"

#define VERBS_NKEYS 7
extern const rmacoll_transport_key_t rmacoll_transport_verbs_keys[VERBS_NKEYS];

#endif
