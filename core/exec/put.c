/*
 * put.c - what the runners share: the put array, the translation of a
 * plan's task into a transport put (host path and stream path), the
 * sources of eager tasks (payloads of the metadata records) and the wait
 * for device copies posted on a host data path.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/exec/call.h"
#include "core/exec/records.h"
#include "core/exec/state.h"

rmacoll_status_t rmacoll__grow_puts(rmacoll_comm_t *comm, size_t n)
{
    if (n > comm->puts_cap) {
        rmacoll_put_t *p = realloc(comm->puts, n * sizeof(*p));
        if (p == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        comm->puts = p;
        comm->puts_cap = n;
    }
    return RMACOLL_SUCCESS;
}

void rmacoll__translate(rmacoll_comm_t *comm, rmacoll_memtype_t mem, const rmacoll__task_t *t,
                        const void *sendbuf, void *recvbuf, rmacoll_mem_t *send_mem,
                        rmacoll_put_t *put)
{
    /* device buffers across nodes without staging relay through device
     * memory: the communicator's path (every rank alike), not whether this
     * rank has a device relay buffer of its own (only ranks that relay
     * for someone allocate one; a sender without one, e.g. local rank 2
     * of a 3 + 2 topology, put its chunks into the relay's host buffer
     * while the relay forwarded from its device buffer) */
    int dev = mem == RMACOLL_MEM_CUDA && comm->hmem;
    const char *src_base = t->src_win == RMACOLL__WIN_EAGER ? rmacoll__meta_payload(comm,
                                                                                   t->origin)
                           : t->src_win == RMACOLL__WIN_NODE_EAGER
                               ? rmacoll__meta_node_payload(comm, t->origin)
                           : t->src_win != RMACOLL__WIN_RELAY ? sendbuf
                           : dev ? comm->drelay_buf : comm->relay_buf;

    memset(put, 0, sizeof(*put));
    put->peer = t->peer;
    put->src = t->bytes ? src_base + t->src_off : NULL;
    put->bytes = t->bytes;
    put->sig_index = (t->flags & RMACOLL__TASK_SIGNAL) ? t->sig : RMACOLL_NO_SIGNAL;
    put->sig_value = t->sig_value;
    if (t->path == RMACOLL__PATH_CE) {
        uint64_t base = t->peer == comm->rank ? (uint64_t)(uintptr_t)recvbuf
                                              : comm->peer_recv_addr[t->peer];
        put->dst_addr = base + t->dst_off;
        return;
    }
    put->src_mem = t->src_win != RMACOLL__WIN_RELAY ? send_mem
                   : dev ? comm->drelay_mem : comm->relay_mem;
    if (t->dst_win == RMACOLL__WIN_RECV) {
        put->dst_rkey = &comm->peer_recv_rkey[t->peer];
    } else if (t->dst_win == RMACOLL__WIN_RELAY) {
        put->dst_rkey = dev ? &comm->peer_drelay_rkey[t->peer] : &comm->peer_relay_rkey[t->peer];
    } else {
        /* signal-only credit: a zero-length PutSignal (the transport
         * contract's signal-only put), aimed at the peer's control window */
        put->dst_rkey = &comm->peer_ctrl_rkey[t->peer];
        put->src = NULL;
        put->src_mem = NULL;
        put->dst_addr = put->dst_rkey->addr;
        return;
    }
    put->dst_addr = put->dst_rkey->addr + t->dst_off;
}

const void *rmacoll__meta_node_payload(rmacoll_comm_t *comm, int sender)
{
    return rmacoll__ctrl_local_payload(rmacoll__rec_local(comm, sender, (int)(comm->epoch & 1)),
                                       &comm->peer_lay[sender]);
}

const void *rmacoll__meta_payload(rmacoll_comm_t *comm, int sender)
{
    return rmacoll__ctrl_rec_payload(rmacoll__rec_held(comm, sender, (int)(comm->epoch & 1)),
                                     &comm->peer_lay[comm->rec_holder[sender]]);
}


rmacoll_status_t rmacoll__device_copies_wait(rmacoll_comm_t *comm, rmacoll__tinst_t *ti)
{
    uint64_t start = 0;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (unsigned spins = 0; ti->ops->base.pending(ti->tp) > 0; spins++) {
        st = ti->ops->base.progress(ti->tp);
        if (st != RMACOLL_SUCCESS) {
            return rmacoll__fail(&comm->fail, st, "rank %d: device copies to node peers "
                                 "failed: %s", comm->rank, rmacoll_status_string(st));
        }
        rmacoll__proxy_poll(&comm->proxy); /* the network keeps moving meanwhile */
        if (spins % 256 == 255) {
            uint64_t now = rmacoll__now_ms();
            if (start == 0) {
                start = now;
            } else if (now - start > comm->cfg.timeout_ms) {
                return rmacoll__fail(&comm->fail, RMACOLL_ERR_TIMEOUT, "rank %d: device "
                                     "copies to node peers not complete after %llu ms "
                                     "(%zu pending)", comm->rank,
                                     (unsigned long long)(now - start),
                                     ti->ops->base.pending(ti->tp));
            }
            sched_yield();
        }
    }
    return st;
}
