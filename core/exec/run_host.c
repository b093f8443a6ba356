/*
 * run_host.c - the host-memory runner (also the staged and registered
 * device paths across nodes): the call blocks and walks the plan in its
 * dataflow order (core/plan/flow.h); CE puts run on the calling thread,
 * proxy puts through the proxy, waits spin on the control window.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fault.h"
#include "core/base/delay.h"
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

/* The copies puts[0, n) (of tasks[0, n)) on this thread, as one
 * submission: through the receive gates of their targets, the proxy
 * thread driving the network meanwhile when they are long. */
static rmacoll_status_t ce_copies(rmacoll_comm_t *comm, rmacoll_memtype_t mem,
                                  const rmacoll_put_t *puts, const rmacoll__task_t *tasks,
                                  uint32_t n)
{
    rmacoll__tinst_t *ti = mem == RMACOLL_MEM_CUDA
                               ? rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, mem)
                               : rmacoll__inst_bound(comm, RMACOLL__PATH_CE, mem, tasks, n);
    long closed = gate_enter(comm, puts, n);
    uint64_t cbytes = 0;
    rmacoll_status_t st;

    if (closed >= 0) {
        /* the target's call already ended (with an error): its buffer is
         * not written after it returned */
        char sec[160];
        const rmacoll_put_t *cp = &puts[(uint32_t)closed];
        gate_leave(comm, puts, n);
        if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
            return rmacoll__fail_secondary(&comm->fail, rmacoll__abort_status(comm),
                                 "rank %d: %s; rank %d closed its receive buffer, %llu bytes "
                                 "not copied", comm->rank, sec, cp->peer,
                                 (unsigned long long)cp->bytes);
        }
        comm->fail_culprit = cp->peer;
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_PEER, "rank %d: rank %d closed "
                             "its receive buffer (its call ended): %llu bytes "
                             "not copied", comm->rank, cp->peer,
                             (unsigned long long)cp->bytes);
    }
    /* during a long copy the proxy thread keeps the network moving (it
     * stays off while this thread waits or makes short copies) */
    for (uint32_t k = 0; k < n; k++) {
        cbytes += puts[k].bytes;
    }
    if (cbytes >= HOST_HANDOVER_BYTES) {
        rmacoll__proxy_drive(&comm->proxy, 0);
    }
    rmacoll__test_delay();
    st = rmacoll__test_fault(RMACOLL__FAULT_COPY) ? RMACOLL_ERR_TRANSPORT
                                                   : ti->ops->host.post_puts(ti->tp, puts, n);
    if (cbytes >= HOST_HANDOVER_BYTES) {
        rmacoll__proxy_drive(&comm->proxy, 1);
    }
    if (st == RMACOLL_SUCCESS && mem == RMACOLL_MEM_CUDA) {
        st = rmacoll__device_copies_wait(comm, ti); /* sources reusable */
    }
    gate_leave(comm, puts, n);
    rmacoll__progress_bump(comm); /* copies made: progress for waiters */
    if (st != RMACOLL_SUCCESS) {
        char sec[160];
        int ep = ti->ops->base.error_peer(ti->tp);
        comm->fail_culprit = ep;
        if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
            /* the peer likely freed its buffer after its own error */
            st = rmacoll__fail_secondary(&comm->fail, rmacoll__abort_status(comm),
                               "rank %d: %s; then the copy to rank %d failed: %s", comm->rank,
                               sec, ep, rmacoll_status_string(st));
        } else {
            st = rmacoll__fail(&comm->fail, st, "rank %d: copy to rank %d failed: "
                               "%s", comm->rank, ep, rmacoll_status_string(st));
        }
    }
    return st;
}

/* The head step of lane l, or NULL once the lane is done. */
static const rmacoll__flow_step_t *lane_head(const rmacoll_comm_t *comm, size_t l)
{
    uint32_t s = comm->lane_cur[l];

    return s < comm->flow.lane_step[l + 1] ? &comm->flow.steps[s] : NULL;
}

/* Takes lane l's head step while it is a put on `path` (a lane's
 * consecutive CE steps, rounds of one lane, merge too) and its puts fit
 * after *n of at most max; CE puts are gathered into comm->mputs/mtasks,
 * proxy puts handed to the proxy at once. Returns 0, or the failure of a
 * hand-over. */
static rmacoll_status_t take_lane(rmacoll_comm_t *comm, size_t l, int path, uint32_t max,
                                  uint32_t *n)
{
    const rmacoll__flow_t *fl = &comm->flow;
    const rmacoll__flow_step_t *s;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    while (st == RMACOLL_SUCCESS && (s = lane_head(comm, l)) != NULL && !s->wait &&
           s->path == path && (*n == 0 || (uint64_t)*n + s->count <= max)) {
        if (path == RMACOLL__PATH_PROXY) {
            st = rmacoll__proxy_submit(&comm->proxy, &comm->puts[s->first], s->count);
        } else {
            memcpy(&comm->mputs[*n], &comm->puts[s->first], s->count * sizeof(*comm->mputs));
            memcpy(&comm->mtasks[*n], &fl->tasks[s->first], s->count * sizeof(*comm->mtasks));
        }
        *n += s->count;
        comm->lane_cur[l]++;
        if (path == RMACOLL__PATH_PROXY) {
            break; /* a lane's later proxy steps wait for their turn in plan order */
        }
    }
    return st;
}

/*
 * Issues lane `first`'s head put step and, merged with it (flow.h
 * "Merging"), the head put steps of every other lane on the same path:
 * CE puts as one submission of at most pcfg.merge_max_puts puts (a lane's
 * consecutive CE steps included), proxy puts handed over together and
 * polled once. merge_max_puts 1: the one step alone.
 */
static rmacoll_status_t issue_merged(rmacoll_comm_t *comm, rmacoll_memtype_t mem, size_t first)
{
    const rmacoll__flow_t *fl = &comm->flow;
    int path = lane_head(comm, first)->path;
    uint32_t max = comm->pcfg.merge_max_puts, n = 0;
    rmacoll_status_t st = take_lane(comm, first, path, max, &n);

    /* merge_max_puts 1: one step at a time, on either path */
    for (size_t l = 0; st == RMACOLL_SUCCESS && max > 1 && l + 1 < fl->nlanes; l++) {
        if (l != first && (n < max || path == RMACOLL__PATH_PROXY)) {
            st = take_lane(comm, l, path, path == RMACOLL__PATH_PROXY ? UINT32_MAX : max, &n);
        }
    }
    rmacoll__proxy_poll(&comm->proxy);
    if (st == RMACOLL_SUCCESS && path != RMACOLL__PATH_PROXY) {
        st = ce_copies(comm, mem, comm->mputs, comm->mtasks, n);
    }
    return st;
}

static int holds(const rmacoll_comm_t *comm, const rmacoll__task_t *t)
{
    return __atomic_load_n(&comm->signals[t->sig], __ATOMIC_ACQUIRE) >= t->sig_value;
}

/* While blocked: 1 when the head wait of some lane (FINAL excluded) holds. */
static int some_head_holds(void *arg)
{
    const rmacoll_comm_t *comm = arg;

    for (size_t l = 0; l + 1 < comm->flow.nlanes; l++) {
        const rmacoll__flow_step_t *s = lane_head(comm, l);
        if (s != NULL && s->wait && holds(comm, &comm->flow.tasks[s->first])) {
            return 1;
        }
    }
    return 0;
}

/* One pass over the lanes (FINAL excluded): passes the head waits that
 * hold; *put gets the lane whose head put step comes first in the plan,
 * *wait the lane whose blocked head wait does (SIZE_MAX: none). Returns 0
 * once every lane is done. */
static int scan_lanes(rmacoll_comm_t *comm, size_t *put, size_t *wait)
{
    const rmacoll__flow_t *fl = &comm->flow;
    uint32_t pkey = UINT32_MAX, wkey = UINT32_MAX;
    int open = 0, passed = 0;

    *put = *wait = SIZE_MAX;
    for (size_t l = 0; l + 1 < fl->nlanes; l++) {
        const rmacoll__flow_step_t *s = lane_head(comm, l);
        uint32_t key;

        while (s != NULL && s->wait && holds(comm, &fl->tasks[s->first])) {
            comm->lane_cur[l]++;
            passed = 1;
            s = lane_head(comm, l);
        }
        if (s == NULL) {
            continue;
        }
        open = 1;
        key = fl->order[s->first];
        if (!s->wait && key < pkey) {
            pkey = key;
            *put = l;
        } else if (s->wait && key < wkey) {
            wkey = key;
            *wait = l;
        }
    }
    if (passed) {
        rmacoll__progress_bump(comm); /* waits passed: progress for waiters */
    }
    return open;
}

/*
 * Dataflow execution of the plan (core/plan/flow.h, docs/protocol.md): of
 * the lanes whose head can move, the put step that comes first in the plan
 * is issued; a wait blocks its lane only; with nothing to issue, this
 * thread waits for the first blocked wait in plan order, or for any other
 * head wait to hold. The data waits come last.
 */
static rmacoll_status_t walk_lanes(rmacoll_comm_t *comm, rmacoll_memtype_t mem)
{
    const rmacoll__flow_t *fl = &comm->flow;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    size_t put, wait;

    while (st == RMACOLL_SUCCESS && scan_lanes(comm, &put, &wait)) {
        if (put != SIZE_MAX) {
            st = issue_merged(comm, mem, put);
        } else {
            const rmacoll__task_t *t = &fl->tasks[lane_head(comm, wait)->first];
            char what[96];

            snprintf(what, sizeof(what), "%s from rank %d, signal %u",
                     (t->flags & RMACOLL__TASK_CREDIT) ? "relay credit" : "relay chunk",
                     t->origin, t->sig);
            st = rmacoll__wait_word_or(comm, &comm->signals[t->sig], t->sig_value, t->peer,
                                       what, comm->cfg.timeout_ms, some_head_holds, comm);
        }
    }
    for (uint32_t k = fl->lane_step[fl->nlanes - 1];
         st == RMACOLL_SUCCESS && k < fl->lane_step[fl->nlanes]; k++) {
        st = wait_task(comm, &fl->tasks[fl->steps[k].first]);
    }
    return st;
}

/* The plan's dataflow order and this call's puts in that order. */
static rmacoll_status_t flow_prepare(rmacoll_comm_t *comm, rmacoll_memtype_t mem,
                                     const void *sendbuf, void *recvbuf,
                                     rmacoll_mem_t *send_mem)
{
    rmacoll__flow_t *fl = &comm->flow;
    rmacoll_status_t st = rmacoll__flow_build(fl, &comm->plan, comm->topo);

    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__grow_puts(comm, fl->ntasks);
    }
    if (st == RMACOLL_SUCCESS && fl->ntasks > comm->mcap) {
        rmacoll_put_t *mp = realloc(comm->mputs, fl->ntasks * sizeof(*mp));
        rmacoll__task_t *mt = mp != NULL ? realloc(comm->mtasks, fl->ntasks * sizeof(*mt)) : NULL;
        if (mp != NULL) {
            comm->mputs = mp;
        }
        if (mt == NULL) {
            st = RMACOLL_ERR_NO_MEMORY;
        } else {
            comm->mtasks = mt;
            comm->mcap = fl->ntasks;
        }
    }
    if (st == RMACOLL_SUCCESS && fl->nlanes > comm->lane_cap) {
        uint32_t *c = realloc(comm->lane_cur, fl->nlanes * sizeof(*c));
        if (c == NULL) {
            st = RMACOLL_ERR_NO_MEMORY;
        } else {
            comm->lane_cur = c;
            comm->lane_cap = fl->nlanes;
        }
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: out of memory for the call's "
                             "dataflow order (%zu tasks)", comm->rank, comm->plan.ntasks);
    }
    for (size_t k = 0; k < fl->ntasks; k++) {
        if (fl->tasks[k].op == RMACOLL__OP_PUT) {
            rmacoll__translate(comm, mem, &fl->tasks[k], sendbuf, recvbuf, send_mem,
                               &comm->puts[k]);
        }
    }
    for (size_t l = 0; l < fl->nlanes; l++) {
        comm->lane_cur[l] = fl->lane_step[l];
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__run_host_plan(rmacoll_comm_t *comm, rmacoll_memtype_t mem,
                                        const void *sendbuf, void *recvbuf,
                                        rmacoll_mem_t *send_mem)
{
    rmacoll_status_t st = flow_prepare(comm, mem, sendbuf, recvbuf, send_mem);

    if (st == RMACOLL_SUCCESS) {
        st = walk_lanes(comm, mem);
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__proxy_flush(&comm->proxy);
        if (st != RMACOLL_SUCCESS) {
            /* the peer the transport found silent (TIMEOUT) goes into the
             * abort word, so that every rank's secondary error names it; a
             * failed connection (TRANSPORT) has two ends: no culprit */
            int ep = -1;

            if (rmacoll__proxy_error(&comm->proxy, &ep) != RMACOLL_SUCCESS) {
                comm->fail_culprit = st == RMACOLL_ERR_TRANSPORT ? -1 : ep;
            } /* else the flush's watch set it */
        }
    }
    return st;
}

/* Registers the host buffers with the network transport (if any), or
 * borrows the user registrations they lie in. */
static rmacoll_status_t host_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st;

    st = rmacoll__call_register(comm, c->hsend, c->send_extent, RMACOLL_MEM_HOST, &c->send_mem,
                                NULL, &c->send_user);
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll__call_register(comm, c->hrecv, c->recv_extent, RMACOLL_MEM_HOST,
                                    &c->recv_mem, &c->recv_rkey, &c->recv_user);
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
    rmacoll__call_deregister(c->comm, c->send_mem, c->send_user);
    rmacoll__call_deregister(c->comm, c->recv_mem, c->recv_user);
    c->send_mem = NULL;
    c->recv_mem = NULL;
    c->send_user = c->recv_user = 0;
}

const rmacoll__runner_t rmacoll__run_host = {
    .name = "host",
    .mem = RMACOLL_MEM_HOST,
    .prepare = host_prepare,
    .planned = host_planned,
    .run = host_run,
    .release = host_release,
};
