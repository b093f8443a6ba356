/*
 * verbs.c - the rdma-core ibverbs transport (PROXY path).
 *
 * One RC queue pair per peer in env->peers, all on one completion queue.
 * A put is an IBV_WR_RDMA_WRITE; a put with a signal ends with an
 * IBV_WR_RDMA_WRITE_WITH_IMM whose immediate is the target's signal index
 * (a signal-only put is a zero-length WRITE_WITH_IMM). The target's
 * progress() sees the receive completion and raises that word by one,
 * which the signal contract of rmacoll_transport.h allows (one writer per
 * word, raised by exactly one per signal). RC places the writes of one QP
 * in order, and the receive completion of a WRITE_WITH_IMM is generated
 * only after its data and every earlier write on the QP are placed, so
 * the signal never overtakes data. docs/transport-verbs.md explains the
 * choice, back-pressure, registration cache and GPUDirect paths, and lists
 * what has never run on a real NIC.
 *
 * Threads: post_puts, progress, pending and error_peer are called by one
 * thread at a time (the proxy thread); mem_register/mem_deregister are
 * serialised by a lock and may be called from another thread.
 *
 * Files (verbs_priv.h lists what they share): verbs_device.c picks the
 * device and port, verbs_init.c sets up and connects the QPs,
 * verbs_mr.c registers memory, verbs_put.c posts puts and drives progress;
 * this file holds the ops table and the small ops.
 */
#include <stdio.h>

#include "transports/common/tops.h"
#include "transports/verbs/verbs_priv.h"
#include "transports/verbs/verbs_keys.h"

static void verbs_finalize(rmacoll_transport_t *tp)
{
    rmacoll__verbs_destroy(tp);
}

static size_t verbs_pending(rmacoll_transport_t *tp)
{
    return tp != NULL ? tp->pending : 0;
}

RMACOLL__TOPS_ERROR_PEER_FN(verbs_error_peer, err_peer)

/* The device and port of this rank's queue pairs ("verbs mlx5_0:1"). */
static void verbs_local_nic(rmacoll_transport_t *tp, char *name, size_t len)
{
    snprintf(name, len, "verbs %s:%u", tp->dev_name, (unsigned)tp->port);
}

const rmacoll_transport_ops_t rmacoll_transport_verbs_ops = {
    RMACOLL__TOPS_ABI,
    .name = "verbs",
    .desc = "rdma-core ibverbs: RC queue pairs, RDMA WRITE and WRITE_WITH_IMM signals",
    /* device memory, registered for the network directly (GPUDirect RDMA) */
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST | RMACOLL_TCAP_MEM_CUDA |
            RMACOLL_TCAP_HMEM,
    .base = RMACOLL__TOPS_BASE(.init = rmacoll__verbs_init, .finalize = verbs_finalize,
                               .progress = rmacoll__verbs_progress, .pending = verbs_pending,
                               .error_peer = verbs_error_peer,
                               .local_nic = verbs_local_nic),
    .mem = RMACOLL__TOPS_MEM(.mem_register = rmacoll__verbs_mem_register,
                             .mem_deregister = rmacoll__verbs_mem_deregister,
                             .mem_revoke = rmacoll__verbs_mem_revoke),
    .host = RMACOLL__TOPS_HOST(.post_puts = rmacoll__verbs_post_puts),
    .keys = rmacoll_transport_verbs_keys,
    .nkeys = VERBS_NKEYS,
};

#ifdef RMACOLL_VERBS_MODULE
/* Built as librmacoll-verbs.so: the same table under the plugin entry
 * symbol, which the core's loader resolves (rmacoll_transport.h). */
extern const rmacoll_transport_ops_t RMACOLL_TRANSPORT_PLUGIN_SYMBOL
    __attribute__((alias("rmacoll_transport_verbs_ops")));
#endif
