/*
 * run_host.c - the host-memory runner: the call blocks; CE queues run on
 * the calling thread, proxy queues through the proxy, waits spin on the
 * control window.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec/call.h"
#include "core/exec/state.h"

/* Copies of a batch from this many bytes on let the proxy thread drive
 * the network meanwhile (a copy this long outlasts its wake-up). */
#define HOST_HANDOVER_BYTES (256u * 1024u)

static rmacoll_status_t wait_task(rmacoll_comm_t *comm, const rmacoll__task_t *t)
{
    char what[96];
    const char *kind = (t->flags & RMACOLL__TASK_CREDIT)    ? "relay credit"
                       : (t->flags & RMACOLL__TASK_ARRIVAL) ? "relay chunk"
                                                            : "data";

    if (__atomic_load_n(&comm->signals[t->sig], __ATOMIC_ACQUIRE) >= t->sig_value) {
        return RMACOLL_SUCCESS;
    }
    snprintf(what, sizeof(what), "%s from rank %d, signal %u", kind, t->origin, t->sig);
    return rmacoll__wait_word(comm, &comm->signals[t->sig], t->sig_value, t->peer, what);
}

static volatile uint64_t *gate_word(rmacoll_comm_t *comm, int peer, size_t off)
{
    return (volatile uint64_t *)((char *)comm->peer_ctrl[peer].addr + off);
}

/* Enters the receive gates (ctrl.h) of the node peers that puts[0, n)
 * write into; returns the index of a put whose target is closed for this
 * call, or -1 (then the copies may run). Always pair with gate_leave. */
static long gate_enter(rmacoll_comm_t *comm, const rmacoll_put_t *puts, uint32_t n)
{
    long closed = -1;

    for (uint32_t k = 0; k < n; k++) {
        if (puts[k].peer != comm->rank && puts[k].bytes > 0) {
            __atomic_fetch_add(gate_word(comm, puts[k].peer, RMACOLL__CTRL_BUSY_OFF), 1,
                               __ATOMIC_SEQ_CST);
        }
    }
    for (uint32_t k = 0; k < n && closed < 0; k++) {
        if (puts[k].peer != comm->rank && puts[k].bytes > 0) {
            uint64_t open = __atomic_load_n(
                gate_word(comm, puts[k].peer, RMACOLL__CTRL_OPEN_OFF), __ATOMIC_SEQ_CST);
            if (open != comm->epoch && open != UINT64_MAX) {
                closed = (long)k;
            }
        }
    }
    return closed;
}

static void gate_leave(rmacoll_comm_t *comm, const rmacoll_put_t *puts, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        if (puts[k].peer != comm->rank && puts[k].bytes > 0) {
            __atomic_fetch_sub(gate_word(comm, puts[k].peer, RMACOLL__CTRL_BUSY_OFF), 1,
                               __ATOMIC_SEQ_CST);
        }
    }
}

/* Long because: one loop over the batches, its four queues in the order the
 * plan fixes (proxy puts, CE puts with the gate, then the waits); split,
 * each part would need the loop's state (st, the batch, the put window). */
rmacoll_status_t rmacoll__run_host_plan(rmacoll_comm_t *comm, rmacoll_memtype_t mem,
                                        const void *sendbuf, void *recvbuf,
                                        rmacoll_mem_t *send_mem)
{
    const rmacoll__plan_t *plan = &comm->plan;
    rmacoll_status_t st = rmacoll__grow_puts(comm, plan->ntasks);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        if (plan->tasks[k].op == RMACOLL__OP_PUT) {
            rmacoll__translate(comm, mem, &plan->tasks[k], sendbuf, recvbuf, send_mem,
                               &comm->puts[k]);
        }
    }
    for (size_t b = 0; b < plan->nbatches && st == RMACOLL_SUCCESS; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];
        uint32_t n;

        /* proxyPut: handed to the proxy */
        if (bt->count[RMACOLL__Q_PROXY_PUT]) {
            st = rmacoll__proxy_submit(&comm->proxy,
                                       &comm->puts[bt->first[RMACOLL__Q_PROXY_PUT]],
                                       bt->count[RMACOLL__Q_PROXY_PUT]);
            rmacoll__proxy_poll(&comm->proxy);
        }
        /* cePut: on this thread */
        n = bt->count[RMACOLL__Q_CE_PUT];
        if (st == RMACOLL_SUCCESS && n) {
            uint32_t f = bt->first[RMACOLL__Q_CE_PUT];
            rmacoll__tinst_t *ti = mem == RMACOLL_MEM_CUDA
                                       ? rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, mem)
                                       : rmacoll__inst_bound(comm, RMACOLL__PATH_CE, mem,
                                                             &plan->tasks[f], n);
            long closed = gate_enter(comm, &comm->puts[f], n);
            if (closed >= 0) {
                /* the target's call already ended (with an error): its
                 * buffer is not written after it returned */
                char sec[160];
                const rmacoll_put_t *cp = &comm->puts[f + (uint32_t)closed];
                gate_leave(comm, &comm->puts[f], n);
                if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
                    return rmacoll__fail(&comm->fail, RMACOLL_ERR_PEER, "rank %d: %s; rank "
                                         "%d closed its receive buffer, %llu bytes "
                                         "not copied", comm->rank, sec, cp->peer,
                                         (unsigned long long)cp->bytes);
                }
                comm->fail_culprit = cp->peer;
                return rmacoll__fail(&comm->fail, RMACOLL_ERR_PEER, "rank %d: rank %d closed "
                                     "its receive buffer (its call ended): %llu bytes "
                                     "not copied", comm->rank, cp->peer,
                                     (unsigned long long)cp->bytes);
            }
            /* during a long copy the proxy thread keeps the network moving
             * (it stays off while this thread waits or makes short copies) */
            uint64_t cbytes = 0;
            for (uint32_t k = 0; k < n; k++) {
                cbytes += comm->puts[f + k].bytes;
            }
            if (cbytes >= HOST_HANDOVER_BYTES) {
                rmacoll__proxy_drive(&comm->proxy, 0);
            }
            st = ti->ops->host.post_puts(ti->tp, &comm->puts[f], n);
            if (cbytes >= HOST_HANDOVER_BYTES) {
                rmacoll__proxy_drive(&comm->proxy, 1);
            }
            if (st == RMACOLL_SUCCESS && mem == RMACOLL_MEM_CUDA) {
                st = rmacoll__device_copies_wait(comm, ti); /* sources reusable */
            }
            gate_leave(comm, &comm->puts[f], n);
            rmacoll__progress_bump(comm); /* copies made: progress for waiters */
            if (st != RMACOLL_SUCCESS) {
                char sec[160];
                int ep = ti->ops->base.error_peer(ti->tp);
                comm->fail_culprit = ep;
                if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
                    /* the peer likely freed its buffer after its own error */
                    st = rmacoll__fail(&comm->fail, RMACOLL_ERR_PEER, "rank %d: %s; then "
                                       "the copy to rank %d failed: %s", comm->rank,
                                       sec, ep, rmacoll_status_string(st));
                } else {
                    st = rmacoll__fail(&comm->fail, st, "rank %d: copy to rank %d failed: "
                                       "%s", comm->rank, ep,
                                       rmacoll_status_string(st));
                }
            }
        }
        /* proxyWait and ceWait: signals land in the control window */
        for (int q = RMACOLL__Q_PROXY_WAIT; q <= RMACOLL__Q_CE_WAIT; q++) {
            for (uint32_t k = 0; st == RMACOLL_SUCCESS && k < bt->count[q]; k++) {
                st = wait_task(comm, &plan->tasks[bt->first[q] + k]);
            }
        }
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__proxy_flush(&comm->proxy);
        if (st != RMACOLL_SUCCESS) {
            /* the peer the transport named (-1: none) goes into the abort
             * word, so that every rank's secondary error names it */
            int ep = -1;
            (void)rmacoll__proxy_error(&comm->proxy, &ep);
            comm->fail_culprit = ep;
        }
    }
    return st;
}

/* Registers the host buffers with the network transport (if any). */
static rmacoll_status_t host_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st;

    st = rmacoll__proxy_register(&comm->proxy, c->hsend, c->send_extent, &c->send_mem,
                                 NULL);
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__proxy_register(&comm->proxy, c->hrecv, c->recv_extent, &c->recv_mem,
                                     &c->recv_rkey);
    }
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: cannot register the send/receive "
                 "buffers (%llu/%llu bytes) with %s", comm->rank,
                 (unsigned long long)c->send_extent, (unsigned long long)c->recv_extent,
                 comm->proxy.ops->name);
    }
    return st;
}

static rmacoll_status_t host_planned(rmacoll__call_t *c)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t host_run(rmacoll__call_t *c)
{
    return rmacoll__run_host_plan(c->comm, RMACOLL_MEM_HOST, c->sendbuf, c->recvbuf,
                                  c->send_mem);
}

static void host_release(rmacoll__call_t *c)
{
    rmacoll__proxy_deregister(&c->comm->proxy, c->send_mem);
    rmacoll__proxy_deregister(&c->comm->proxy, c->recv_mem);
    c->send_mem = NULL;
    c->recv_mem = NULL;
}

const rmacoll__runner_t rmacoll__run_host = {
    .name = "host",
    .mem = RMACOLL_MEM_HOST,
    .prepare = host_prepare,
    .planned = host_planned,
    .run = host_run,
    .release = host_release,
};
