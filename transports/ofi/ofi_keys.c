/*
 * ofi_keys.c - the ofi transport's configuration keys (ofi.*). Compiled
 * into the core library in every build, with or without libfabric, so a
 * config file naming them loads everywhere (rmacoll_transport.h,
 * rmacoll_transport_keyset_t). ofi.c reads the values from the
 * rmacoll_config_t fields that store them (ofi_provider, ofi_iface) and
 * with env->config_get (hmem_device_only).
 */
#include "rmacoll_transport.h"
#include "transports/ofi/ofi_keys.h"

const rmacoll_transport_key_t rmacoll_transport_ofi_keys[OFI_NKEYS] = {
    {"provider", RMACOLL_CONFIG_STRING, "auto",
     "libfabric provider (FI_PROVIDER syntax), e.g. tcp;ofi_rxm, net, shm, verbs;ofi_rxm; "
     "auto: the native RDM provider over TCP (net in libfabric 1.16-1.17, tcp from 1.18), "
     "else tcp;ofi_rxm", 0, 0},
    {"iface", RMACOLL_CONFIG_STRING, "",
     "network interface for the provider, e.g. lo (\"\" = provider default)", 0, 0},
    {"hmem_device_only", RMACOLL_CONFIG_BOOL, "false",
     "register device memory with FI_HMEM_DEVICE_ONLY (shm then moves it over CUDA IPC, "
     "after a warm-up copy at init; see docs/transport-ofi.md)", 0, 0},
    {"delivery_complete", RMACOLL_CONFIG_BOOL, "false",
     "every write waits for the target's acknowledgement (FI_DELIVERY_COMPLETE) and a "
     "signal for the writes before it, even on providers that order writes (FI_ORDER_WAW)",
     0, 0},
};

const rmacoll_transport_keyset_t rmacoll_transport_ofi_keyset = {
    "ofi", rmacoll_transport_ofi_keys, OFI_NKEYS, NULL};
