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
 *  - PROXY x cuda: none; device memory across nodes is staged through host
 *    memory (the staged runner).
 */
#ifndef RMACOLL_CORE_BIND_H
#define RMACOLL_CORE_BIND_H

#include <stdint.h>

#include "core/plan.h"
#include "core/transport.h"

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

/** The instance for a queue whose largest put is `largest` bytes, or -1
 * when the binding is empty. */
int rmacoll__bind_pick(const rmacoll__binding_t *b, uint64_t largest);

#endif /* RMACOLL_CORE_BIND_H */
