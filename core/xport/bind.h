/*
 * bind.h - bindings: which transport instance serves each (path, memory)
 * pair of a communicator, resolved once at creation from the transports'
 * capabilities and the config (transports.intra_node / inter_node,
 * the size keys transports name). The data path asks a binding for the
 * instance of a queue (rmacoll__bind_pick); it never compares names.
 *
 * Rules (docs/plugins.md has them for plugin authors):
 *  - CE x host: the intra_node transport if it has CE | MEM_HOST, else the
 *    first built-in with CE | MEM_HOST (it also makes the self copies).
 *  - CE x cuda: a named intra_node transport with MEM_CUDA for every queue,
 *    else the CE x host transport if it has MEM_CUDA; with auto, the
 *    transports naming a small_max_key first, for queues whose largest put
 *    is at most that key's value in bytes. Mappings, stream waits and
 *    signals go to the binding's control instance: the CE x host transport
 *    when it has MEM_CUDA, else the last candidate.
 *  - PROXY x host: the inter_node transport (PROXY | MEM_HOST), only when
 *    the communicator spans nodes.
 *  - PROXY x cuda: decided after init (rmacoll__bind_device_net), from the
 *    inter_node instance's capabilities (rmacoll__tops_instance_caps: a
 *    libfabric transport finds FI_HMEM at run time), the CE x cuda control
 *    transport's and transports.device_inter_node: device buffers are
 *    registered with the
 *    network transport (the hmem runner) or staged through pinned host
 *    memory (the staged runner).
 *
 * core/xport - transports seen from the core (README):
 *   owns   the transport registry (transport.c: built-ins, plugins, ABI and
 *          size checks, typed stubs) and the bindings of (path, memory) to
 *          transport instances (bind.c), with the lookups the executors
 *          use (rmacoll__bind_bound, rmacoll__bind_ctl).
 *   calls  base, config, plan. Transports themselves live in transports/
 *          and see only include/rmacoll_transport.h.
 */
#ifndef RMACOLL_CORE_BIND_H
#define RMACOLL_CORE_BIND_H

#include <stddef.h>
#include <stdint.h>

#include "core/plan/plan.h"
#include "core/xport/transport.h"

#define RMACOLL__BIND_CAND 4  /* candidates of one binding */
#define RMACOLL__MAX_INST 4   /* transport instances of one communicator */

/* One binding: candidate k serves queues whose largest put is at most
 * max_bytes[k]; the first that fits wins. Entries index the instances. */
typedef struct rmacoll__binding {
    int n;
    int inst[RMACOLL__BIND_CAND];
    uint64_t max_bytes[RMACOLL__BIND_CAND];
    int ctl;                      /* instance for mappings/waits/signals, -1 */
} rmacoll__binding_t;

/* The outcome of resolution: the transports to instantiate (in this
 * order: init is collective, and every rank resolves alike) and the
 * bindings over them. */
typedef struct rmacoll__bind_plan {
    int ninst;
    const rmacoll__tops_t *ops[RMACOLL__MAX_INST];
    int path[RMACOLL__MAX_INST];  /* rmacoll__path_t: whose peers it reaches */
    rmacoll__binding_t bind[2][2]; /* [rmacoll__path_t][rmacoll_memtype_t] */
} rmacoll__bind_plan_t;

/**
 * Resolves the bindings from `avail` (the transports to choose from:
 * built-ins, then plugins named in the config; their spec is how the
 * config names them) and cfg; `multinode` says whether a network
 * transport is needed. Pure. RMACOLL_ERR_CONFIG with a message (naming
 * the rank and the key) when a configured transport is missing or cannot
 * serve its role.
 */
rmacoll_status_t rmacoll__bind_resolve(const rmacoll__tops_t *avail, int navail,
                                       const rmacoll_config_t *cfg, int multinode,
                                       int rank, rmacoll__bind_plan_t *out, char *err,
                                       size_t len);

/* transports.device_inter_node */
typedef enum rmacoll__devnet_mode {
    RMACOLL__DEVNET_AUTO = 0,
    RMACOLL__DEVNET_STAGED = 1,
    RMACOLL__DEVNET_HMEM = 2
} rmacoll__devnet_mode_t;

/**
 * How device buffers cross nodes. net_caps: the inter_node instance's
 * capabilities after init, net_desc its account of them (may be ""); ce:
 * the CE x cuda control transport (NULL: none) and ce_caps its
 * capabilities. HMEM needs PROXY | HMEM | MEM_CUDA on the network side
 * and CE | MEM_CUDA | HOST_CUDA on the node side (the relay forward and
 * node-peer copies run from a host thread). *hmem receives 1 (registered,
 * no staging) or 0 (staged); reason (len bytes) the line create logs at
 * INFO, "device path across nodes: FI_HMEM registration (provider shm)"
 * or "device path across nodes: host staging (provider tcp lacks
 * FI_HMEM)". RMACOLL_ERR_CONFIG when mode is HMEM and the transports
 * cannot (reason says why). Pure.
 */
rmacoll_status_t rmacoll__bind_device_net(const char *net_name, uint64_t net_caps,
                                          const char *net_desc, const char *ce_name,
                                          uint64_t ce_caps, rmacoll__devnet_mode_t mode,
                                          int *hmem, char *reason, size_t len);

/** The instance for a queue whose largest put is `largest` bytes, or -1
 * when the binding is empty. */
int rmacoll__bind_pick(const rmacoll__binding_t *b, uint64_t largest);

/* One transport instance of a communicator: inst[i] is the instance of
 * bp->ops[i] (the communicator initialises them in that order). */
typedef struct rmacoll__tinst {
    const rmacoll__tops_t *ops;       /* complete (no NULL op) */
    rmacoll_transport_t *tp;
    rmacoll_transport_env_t env;
} rmacoll__tinst_t;

/** The instance of inst[0, bp->ninst) bound to (path, mem) for a queue of
 * the n tasks t (its largest put selects among size-bounded candidates),
 * or NULL if none. O(n) when the binding has several candidates, else
 * O(1). */
rmacoll__tinst_t *rmacoll__bind_bound(const rmacoll__bind_plan_t *bp, rmacoll__tinst_t *inst,
                                      int path, rmacoll_memtype_t mem,
                                      const rmacoll__task_t *t, size_t n);
/** The control instance of (path, mem): mappings, stream waits and
 * signals, staging pins; NULL if none. */
rmacoll__tinst_t *rmacoll__bind_ctl(const rmacoll__bind_plan_t *bp, rmacoll__tinst_t *inst,
                                    int path, rmacoll_memtype_t mem);

#endif /* RMACOLL_CORE_BIND_H */
