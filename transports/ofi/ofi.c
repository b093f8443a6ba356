/*
 * ofi.c - the libfabric transport (PROXY path), one file, UCX-style.
 *
 * PutSignal is one fi_writemsg per piece (pieces are at most the
 * provider's max_msg_size, or RMACOLL_OFI_MAX_MSG_SIZE when set), issued
 * with FI_DELIVERY_COMPLETE. The last piece of a signalled put carries
 * FI_REMOTE_CQ_DATA = the target's signal index (32 bits); the target's
 * progress() reads that completion from its CQ and increments its word
 * env->signals[index] by one with release semantics (the contract lets a
 * transport raise a word by one per signal).
 *
 * Ordering. The signal may be applied only once the bytes of this put and
 * of every earlier put to the same peer are visible. Two ways:
 *  - Ordered providers: when fi_getinfo's answer (the endpoint is opened
 *    with it) has FI_ORDER_WAW in tx_attr->msg_order and a
 *    max_order_waw_size of at least one piece (tcp;ofi_rxm, net and
 *    sockets here: one byte stream per peer), the provider places the
 *    writes to a peer in the order they were issued, so a write's remote
 *    CQ data implies every earlier write to that peer landed. Pieces are
 *    then issued at once, signalled or not, with FI_INJECT_COMPLETE: the
 *    local completion only says the source may be reused, and no
 *    delivery acknowledgement crosses the network (on tcp;ofi_rxm one
 *    16-byte ack message per write, and a signal waiting a round trip for
 *    the acks of the pieces before it). Not for device memory (FI_HMEM),
 *    where the landing copy may still run when the write completes.
 *  - Otherwise (shm reports FI_ORDER_SAS only, EFA no RMA ordering,
 *    ofi.delivery_complete set): a signalled piece is issued only when no
 *    earlier piece to that peer is still in flight; every piece uses
 *    FI_DELIVERY_COMPLETE, so "completed locally" means "visible at the
 *    target".
 * Puts behind a held signal wait in a per-peer FIFO that progress()
 * drains. A put's own bytes and its remote CQ data travel in one
 * operation, so they need no extra fence. The core never needs more than
 * "source reusable" from a completion: what a target may read, it learns
 * from signals.
 * Signal-only puts (0 bytes) go out as fi_inject_writedata of 0 bytes
 * (no source, no local completion; shm never completes a zero-length
 * write issued with FI_DELIVERY_COMPLETE), once earlier pieces are done.
 *
 * Addresses: with FI_MR_VIRT_ADDR, rkey.addr is the virtual address the
 * target registered; without it (tcp), rkey.addr is the offset of that
 * address inside the provider registration (0 unless the cache reused a
 * wider one). Either way dst_addr = rkey.addr + offset is what goes into
 * fi_writemsg. rkey.key[0..7] holds the 64-bit fi_mr_key.
 *
 * Device memory (FI_HMEM). In a build with CUDA, init first asks
 * fi_getinfo for the provider with FI_HMEM in caps and FI_MR_HMEM in the
 * domain's mr_mode; when the provider offers it (a libfabric built with
 * CUDA: shm, efa, verbs;ofi_rxm), the instance reports RMACOLL_TCAP_HMEM |
 * RMACOLL_TCAP_MEM_CUDA through base.instance_caps and mem_register takes
 * RMACOLL_MEM_CUDA: fi_mr_regattr with iface FI_HMEM_CUDA and the
 * pointer's device ordinal. Otherwise (Debian's libfabric, tcp) the
 * ordinary hints are used and device memory is refused: the core then
 * stages device buffers through host memory. Decided at run time from
 * fi_getinfo, never at build time. Device registrations stay cached while
 * unused when the allocation's CUDA buffer id is known: a range freed and
 * allocated again gets a new id, and its stale registration is closed.
 *
 * Thread-safety: one instance is used by one thread at a time (the core
 * serialises calls); the domain is opened with FI_THREAD_DOMAIN.
 * No allocation on the data path: op contexts and queued puts come from
 * pools sized at init.
 *
 * Files (ofi_internal.h lists what they share): ofi_select.c picks the
 * provider, ofi_init.c opens the endpoint and exchanges addresses,
 * ofi_mr.c registers memory, ofi_put.c issues puts and drives progress;
 * this file holds the ops table and the small ops.
 */
#include <stdio.h>

#include "transports/ofi/ofi_internal.h"
#include "transports/ofi/ofi_keys.h"

static size_t ofi_pending(rmacoll_transport_t *tp)
{
    /* After a failure queued puts are never issued: their sources are free;
     * once progress stopped nothing in flight completes either. */
    if (tp->cut_off) {
        return 0;
    }
    return tp->ops_busy + (tp->failed == RMACOLL_SUCCESS ? tp->nqueued : 0);
}

static int ofi_error_peer(rmacoll_transport_t *tp)
{
    return tp->err_peer;
}

static uint64_t ofi_instance_caps(rmacoll_transport_t *tp, char *desc, size_t len)
{
    snprintf(desc, len, "%s", tp->hmem_desc);
    return tp->hmem ? RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA : 0;
}

/* The provider, fabric and domain of the endpoint: for tcp the subnet and
 * the interface ("tcp 127.0.0.0/8 lo"), for shm the host's shared memory. */
static void ofi_local_nic(rmacoll_transport_t *tp, char *name, size_t len)
{
    const struct fi_info *i = tp->info;

    snprintf(name, len, "%s %s %s", i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "",
             i->fabric_attr->name ? i->fabric_attr->name : "",
             i->domain_attr->name ? i->domain_attr->name : "");
}

static const rmacoll_transport_base_ops_t ofi_base_ops = {
    .size = sizeof(rmacoll_transport_base_ops_t),
    .init = rmacoll__ofi_init,
    .finalize = rmacoll__ofi_finalize,
    .progress = rmacoll__ofi_progress,
    .pending = ofi_pending,
    .error_peer = ofi_error_peer,
    .instance_caps = ofi_instance_caps,
    .local_nic = ofi_local_nic,
};

#ifdef RMACOLL_OFI_CUDA
/* mem_type: device memory by cudaPointerGetAttributes (rmacoll_mem_register
 * asks; whether this instance can register it is FI_HMEM's business). */
static rmacoll_status_t ofi_mem_type(rmacoll_transport_t *tp, const void *addr,
                                     rmacoll_memtype_t *type)
{
    int device;
    uint64_t buffer_id;

    (void)tp;
    *type = rmacoll__cu_pointer_info(addr, &device, &buffer_id) == 0 ? RMACOLL_MEM_CUDA
                                                                      : RMACOLL_MEM_HOST;
    return RMACOLL_SUCCESS;
}
#endif

static const rmacoll_transport_mem_ops_t ofi_mem_ops = {
    .size = sizeof(rmacoll_transport_mem_ops_t),
    .mem_register = rmacoll__ofi_mem_register,
    .mem_deregister = rmacoll__ofi_mem_deregister,
    .mem_revoke = rmacoll__ofi_mem_revoke,
#ifdef RMACOLL_OFI_CUDA
    .mem_type = ofi_mem_type,
#endif
};

static const rmacoll_transport_host_ops_t ofi_host_ops = {
    .size = sizeof(rmacoll_transport_host_ops_t),
    .post_puts = rmacoll__ofi_post_puts,
};

const rmacoll_transport_ops_t rmacoll_transport_ofi_ops = {
    .abi_version = RMACOLL_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(rmacoll_transport_ops_t),
    .name = "ofi",
    .desc = "libfabric rdm: fi_writemsg + remote cq data signals (net, tcp;ofi_rxm, shm, "
            "sockets, efa, cxi)",
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST,
    .base = &ofi_base_ops,
    .mem = &ofi_mem_ops,
    .host = &ofi_host_ops,
    .keys = rmacoll_transport_ofi_keys,
    .nkeys = OFI_NKEYS,
};
