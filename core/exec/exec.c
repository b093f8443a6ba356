/*
 * exec.c - one AlltoAllV call as a pipeline (call.h):
 *   validate -> prepare (runner) -> control exchange -> plan -> agree
 *   -> run (runner) -> commit signal state.
 * A local error (bad arguments, a buffer that cannot be registered, a plan
 * that finds a count mismatch) does not stop the pipeline: it travels with
 * the control exchange and the agreement, so every rank returns the same
 * error and no data is written. An error of the exchange itself or of the
 * data phase breaks the communicator.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/base/trace.h"
#include "core/exec/call.h"
#include "core/exec/state.h"
#include "core/plan/validate.h"

/* Per-call stage timing, logged at TRACE (cheap when off). */
static uint64_t prof_ns(const rmacoll_comm_t *comm)
{
    struct timespec ts;

    if (comm->log.level < RMACOLL_LOG_TRACE) {
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* sendbuf RMACOLL_IN_PLACE (MPI_IN_PLACE's semantics, rmacoll.h): the send
 * blocks are the receive blocks, recvcounts[j] elements at rdispls[j] for
 * rank j. They are copied, packed, into the communicator's in-place buffer
 * before anything is published, and that copy is the send buffer of an
 * ordinary call; peers write into recvbuf only after this rank's record
 * (and so the copy) is out. Receive arguments the copy cannot trust (NULL
 * arrays, negative or overflowing counts and displacements, an unknown
 * type) are left to validation, which names them: the call then sends
 * nothing (sendbuf NULL, zero counts), and fails on every rank. A
 * device-memory call is refused (c->early), on every rank through the
 * usual agreement. */
static void inplace_stage(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const int64_t *cnt = c->recvcounts, *dsp = c->rdispls;
    size_t es = c->esize, total = 0;
    char *buf;

    memset(comm->inplace_displs, 0, (size_t)comm->nranks * sizeof(int64_t));
    c->sendbuf = c->hsend = NULL;
    c->sendcounts = c->sdispls = comm->inplace_displs;
    if (c->stream != NULL) {
        c->early = RMACOLL_ERR_UNSUPPORTED;
        snprintf(c->msg, sizeof(c->msg), "rank %d: sendbuf RMACOLL_IN_PLACE: in-place "
                 "calls are supported on host memory only, not on a stream",
                 comm->rank);
        return;
    }
    if (cnt == NULL || dsp == NULL || es == 0) {
        return;
    }
    for (int j = 0; j < comm->nranks; j++) {
        if (cnt[j] < 0 || dsp[j] < 0 || (uint64_t)cnt[j] > (INT64_MAX / es) - (uint64_t)dsp[j]) {
            return;
        }
        if ((size_t)cnt[j] * es > SIZE_MAX - total) {
            total = SIZE_MAX;
            break;
        }
        total += (size_t)cnt[j] * es;
    }
    if (total > comm->inplace_cap) {
        void *nb = total == SIZE_MAX ? NULL : malloc(total);

        if (nb == NULL) {
            c->early = RMACOLL_ERR_NO_MEMORY;
            snprintf(c->msg, sizeof(c->msg), "rank %d: sendbuf RMACOLL_IN_PLACE: no "
                     "memory for the copy of the send blocks (%zu bytes)", comm->rank,
                     total);
            return;
        }
        free(comm->inplace_buf);
        comm->inplace_buf = nb;
        comm->inplace_cap = total;
    }
    if (total != 0 && c->recvbuf == NULL) {
        return; /* validation: recvbuf is NULL but recvcounts[j] = ... */
    }
    buf = comm->inplace_buf;
    total = 0;
    for (int j = 0; j < comm->nranks; j++) {
        size_t b = (size_t)cnt[j] * es;

        if (b != 0) {
            memcpy(buf + total, (const char *)c->recvbuf + (size_t)dsp[j] * es, b);
        }
        comm->inplace_displs[j] = (int64_t)(total / es);
        total += b;
    }
    c->sendbuf = c->hsend = buf;
    c->sendcounts = cnt;
    c->sdispls = comm->inplace_displs;
}

/* Opens a call on comm: the previous staged call is drained, a broken
 * communicator refused; the epoch advances. */
rmacoll_status_t rmacoll__call_begin(rmacoll__call_t *c, rmacoll_comm_t *comm,
                                   const void *sendbuf, const int64_t *sendcounts,
                                   const int64_t *sdispls, void *recvbuf,
                                   const int64_t *recvcounts, const int64_t *rdispls,
                                   rmacoll_datatype_t dtype, void *stream)
{
    rmacoll_status_t st;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (comm->async.busy) {
        /* logged, not recorded: the call in flight owns last_error */
        rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: a call started with rmacoll_alltoallv_start is in flight "
                     "on this communicator: complete it with rmacoll_test or "
                     "rmacoll_wait first", comm->rank);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (atomic_load(&comm->dcx.reserved) && !comm->dcx.in_worker) {
        /* its calls run in the worker, in stream order: another call here
         * would pair with them differently on each rank */
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_UNSUPPORTED, "rank %d: this "
                             "communicator carries device-count calls across nodes "
                             "(rmacoll_alltoallv_device_counts with a stream), which run "
                             "in its worker thread in stream order: other calls on it are "
                             "refused; make them on a communicator of their own",
                             comm->rank);
    }
    st = rmacoll__staged_drain(comm);
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: the previous call on device "
                             "buffers failed: %s", comm->rank,
                             rmacoll_status_string(st));
    }
    if (comm->broken) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_PEER,
                             "rank %d: the communicator failed in an earlier call "
                             "and must be destroyed", comm->rank);
    }
    if (comm->ctrl.addr != NULL) {
        /* A peer's abort word that came between calls (a rank that aborted
         * or failed after this rank's last call returned): the call fails
         * before it sends or copies anything, and the word goes on to this
         * rank's peers at once. Without this, a node peer of a relay could
         * forward the aborted rank's eager payloads in a call that needed
         * nothing else, and succeed where its peers fail. */
        char sec[160];

        if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
            st = rmacoll__abort_status(comm);
            rmacoll__abort_broadcast(comm, st);
            comm->broken = 1;
            return rmacoll__fail_secondary(&comm->fail, st, "rank %d: %s; the call did not "
                                           "start", comm->rank, sec);
        }
    }
    {
        /* A rank the bootstrap root reported dead (its connection to the
         * root closed), or a node peer whose process exited (its watch),
         * breaks the communicator even where the network carried on (a
         * provider that reconnects): read at most every
         * RMACOLL__BS_POLL_MS, since a wait that ends fast never reads it. */
        uint64_t now = rmacoll__now_ms();
        char sec[256];
        int dead = -1;

        if (now >= comm->bs_poll_at_ms) {
            comm->bs_poll_at_ms = now + RMACOLL__BS_POLL_MS;
            if (rmacoll__death_poll(comm, &dead, sec, sizeof(sec))) {
                /* the peers may not know (a node peer's watch sees what
                 * ranks elsewhere do not): the word names the dead rank */
                st = rmacoll__fail_reported(comm, dead, -1, sec, "the call did not start");
                rmacoll__abort_broadcast(comm, st);
                comm->broken = 1;
                return st;
            }
        }
    }
    memset(c, 0, sizeof(*c));
    c->comm = comm;
    c->runner = comm->runner[stream == NULL ? RMACOLL_MEM_HOST : RMACOLL_MEM_CUDA];
    c->sendbuf = sendbuf;
    c->sendcounts = sendcounts;
    c->sdispls = sdispls;
    c->recvbuf = recvbuf;
    c->recvcounts = recvcounts;
    c->rdispls = rdispls;
    c->dtype = dtype;
    c->esize = rmacoll_datatype_size(dtype);
    c->stream = stream;
    c->hsend = sendbuf;
    c->hrecv = recvbuf;
    if (sendbuf == RMACOLL_IN_PLACE) {
        inplace_stage(c);
    }
    comm->last_error[0] = '\0';
    c->epoch = ++comm->epoch;
    c->par = (int)(c->epoch & 1);
    c->local.rank = comm->rank;
    /* a blocking call drives the network itself; the proxy thread stays
     * off the lock (run_host.c lets it in while this thread copies).
     * Driving first: marking the call active then leaves a proxy thread
     * parked since the last call asleep; a stream call, which does not
     * drive, wakes it (rmacoll__proxy_set_active). */
    c->drives = stream == NULL;
    if (c->drives) {
        rmacoll__proxy_drive(&comm->proxy, 1);
    }
    rmacoll__proxy_set_active(&comm->proxy, 1);
    c->prof[0] = prof_ns(comm);
    return RMACOLL_SUCCESS;
}

/* Validates the arguments, then lets the runner ready the buffers; the
 * outcome goes to call->local. */
static void call_validate(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st;

    st = c->early != RMACOLL_SUCCESS
             ? c->early
             : rmacoll__validate_args(comm->nranks, comm->rank, c->sendbuf, c->sendcounts,
                                      c->sdispls, c->recvbuf, c->recvcounts, c->rdispls,
                                      c->dtype, comm->scratch, &c->send_extent,
                                      &c->recv_extent, c->msg, sizeof(c->msg));
    if (st == RMACOLL_SUCCESS) {
        st = c->runner->prepare(c);
    }
    if (st != RMACOLL_SUCCESS) {
        rmacoll__status_set(&c->local, st, comm->rank, c->msg);
    }
    c->prof[1] = prof_ns(comm);
}

/* Builds the plan if every rank's arguments were valid; the outcome goes
 * to call->acc. */
static void call_plan(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__plan_input_t in;
    rmacoll_status_t st;

    c->prof[2] = prof_ns(comm);
    if (c->acc.code != RMACOLL_SUCCESS) {
        return;
    }
    rmacoll__meta_inputs(c);
    in.topo = comm->topo;
    in.rank = comm->rank;
    in.esize = c->esize;
    in.cfg = &comm->pcfg;
    in.sched = &comm->sched;
    in.sendcounts = c->sendcounts;
    in.sdispls = c->sdispls;
    in.recvcounts = c->recvcounts;
    in.rdispls = c->rdispls;
    in.peer_rcount = comm->peer_rcount;
    in.peer_rdispl = comm->peer_rdispl;
    in.chan_sendcount = comm->chan_sendcount;
    in.chan_rcount = comm->chan_rcount;
    in.chan_rdispl = comm->chan_rdispl;
    in.eager_max_bytes = c->eager_max;
    in.eager_in_off = comm->eager_in_off;
    in.node_eager_max_bytes = c->node_eager_max;
    in.node_eager_off = comm->node_eager_off;
    in.node_eager_send_max = c->node_eager_send_max;
    in.direct_min_bytes = c->direct_min;
    in.direct_in = comm->direct_in;
    st = rmacoll__plan_build(&in, comm->sig, comm->sig_next, &comm->plan);
    if (st == RMACOLL_ERR_NO_MEMORY) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: out of memory building the plan (%zu "
                 "tasks so far; max_task_bytes = %llu)", comm->rank, comm->plan.ntasks,
                 (unsigned long long)comm->cfg.max_task_bytes);
    } else if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: %s", comm->rank, comm->plan.errmsg);
    } else {
        rmacoll__log(&comm->log, RMACOLL_LOG_TRACE, RMACOLL_LOG_SUBSYS_PLAN,
                     "rank %d: call %llu planned: %zu tasks in %zu batches", comm->rank,
                     (unsigned long long)c->epoch, comm->plan.ntasks, comm->plan.nbatches);
        st = c->runner->planned(c);
    }
    if (st != RMACOLL_SUCCESS) {
        rmacoll__status_set(&c->acc, st, comm->rank, c->msg);
        c->plan_failed = 1;
    }
    c->prof[3] = prof_ns(comm);
}

static void log_profile(const rmacoll__call_t *c)
{
    const uint64_t *p = c->prof;
    uint64_t end;

    if (p[0] == 0) {
        return;
    }
    end = prof_ns(c->comm);
    rmacoll__log(&c->comm->log, RMACOLL_LOG_TRACE, RMACOLL_LOG_SUBSYS_CORE,
                 "call %llu: validate %.1f us, metadata %.1f us, plan %.1f us, "
                 "agreement %.1f us, data %.1f us (%s)", (unsigned long long)c->epoch,
                 (p[1] - p[0]) / 1e3, (p[2] - p[1]) / 1e3, (p[3] - p[2]) / 1e3,
                 (p[4] - p[3]) / 1e3, (end - p[4]) / 1e3,
                 c->stream != NULL ? "enqueued" : "completed");
}

/* Closes the call: st is the pipeline's own failure (the communicator
 * breaks), else call->acc is the agreed outcome; on success the signal
 * state after the call becomes the state before the next. */
static rmacoll_status_t call_end(rmacoll__call_t *c, rmacoll_status_t st)
{
    rmacoll_comm_t *comm = c->comm;
    int me = comm->rank;

    if (c->drives) {
        rmacoll__proxy_drive_end(&comm->proxy);
        c->drives = 0;
    }

    if (c->runner->mem == RMACOLL_MEM_HOST) {
        if (st != RMACOLL_SUCCESS) {
            /* peers still waiting stop at once, and late writers see the
             * gate closed before they copy */
            rmacoll__abort_broadcast(comm, st);
        }
        if (rmacoll__gate_close(comm) > 0) {
            /* a node peer stopped inside a copy into this rank: what it
             * still copies must not land in this rank's shared allocations
             * (rmacoll_mem_alloc) once the call has returned */
            rmacoll__tinst_t *t = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_HOST);
            rmacoll_status_t ust = t != NULL && t->tp != NULL
                                       ? t->ops->mem.mem_unshare(t->tp, c->hrecv,
                                                                 (size_t)c->recv_extent)
                                       : RMACOLL_ERR_UNSUPPORTED;

            rmacoll__log(&comm->log, ust == RMACOLL_SUCCESS ? RMACOLL_LOG_WARN
                                                            : RMACOLL_LOG_INFO,
                         RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: the receive buffer's shared allocations %s", me,
                         ust == RMACOLL_SUCCESS
                             ? "are no longer shared with node peers (late copies land "
                               "elsewhere)"
                             : "were not unshared (none, or it failed)");
        }
    }

    if (st == RMACOLL_SUCCESS && c->acc.code != RMACOLL_SUCCESS) {
        /* everyone returns the same error; nothing was written */
        rmacoll__proxy_flush(&comm->proxy);
        c->runner->release(c);
        rmacoll__proxy_set_active(&comm->proxy, 0);
        if (c->acc.rank == me) {
            return rmacoll__fail(&comm->fail, (rmacoll_status_t)c->acc.code, "%s",
                                 c->acc.msg);
        }
        return rmacoll__fail_secondary(&comm->fail, (rmacoll_status_t)c->acc.code,
                                       "rank %d: call failed on rank %d: %s", me, c->acc.rank,
                             c->acc.msg);
    }
    if (st == RMACOLL_SUCCESS) {
        log_profile(c);
        if (c->eager_max != 0 || c->node_eager_max != 0 || c->direct_min != 0) {
            rmacoll__meta_eager_count(c);
        }
    }
    if (st != RMACOLL_SUCCESS && c->runner->mem != RMACOLL_MEM_HOST) {
        /* the first failure propagates: peers still waiting stop at once */
        rmacoll__abort_broadcast(comm, st);
    }
    if (st != RMACOLL_SUCCESS) {
        /* a paused network peer that resumes must not write into the
         * receive buffer once this call returned: revoke its registration */
        (void)rmacoll__proxy_revoke(&comm->proxy, c->recv_mem, "receive buffer");
    }
    c->runner->release(c);
    rmacoll__proxy_set_active(&comm->proxy, 0);
    if (st != RMACOLL_SUCCESS) {
        comm->broken = 1;
        return st;
    }
    {
        rmacoll__sigstate_t *t = comm->sig;
        comm->sig = comm->sig_next;
        comm->sig_next = t;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__call_pipeline(rmacoll__call_t *call)
{
    rmacoll_status_t st;

    /* node peers may copy into the receive buffer during this call only
     * (host memory: the gate closes before the call returns; device
     * memory is not gated) */
    rmacoll__gate_open(call->comm, call->runner->mem == RMACOLL_MEM_HOST ? call->epoch
                                                                         : UINT64_MAX);
    call_validate(call);                   /* + runner prepare: call->local */
    st = rmacoll__meta_exchange(call);     /* control exchange: call->acc */
    if (st == RMACOLL_SUCCESS) {
        call_plan(call);                   /* + runner planned */
        st = rmacoll__meta_agree(call);    /* every rank's outcome */
    }
    call->prof[4] = prof_ns(call->comm);
    if (st == RMACOLL_SUCCESS && call->acc.code == RMACOLL_SUCCESS) {
        st = call->runner->run(call);      /* data rounds */
    }
    return call_end(call, st);             /* commit signal state */
}

/* An aborted communicator's word has gone to every peer, and it counts
 * as broken. rmacoll_comm_abort sends it itself when no call runs; a call
 * that was running when abort came, but ended without seeing the word (it
 * had nothing left to wait for), did not: the first entry after it does. */
void rmacoll__abort_settle(rmacoll_comm_t *comm)
{
    if (!atomic_exchange_explicit(&comm->entered, 1, memory_order_acquire)) {
        if (!comm->broken && !comm->async.busy) {
            rmacoll__abort_broadcast(comm, RMACOLL_ERR_ABORTED);
            comm->broken = 1;
        }
        rmacoll__leave(comm);
    }
}

rmacoll_status_t rmacoll__enter(rmacoll_comm_t *comm, const char *fn)
{
    if (atomic_load_explicit(&comm->aborted, memory_order_acquire)) {
        rmacoll__abort_settle(comm);
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_ABORTED,
                             "rank %d: %s: the communicator was aborted "
                             "(rmacoll_comm_abort)", comm->rank, fn);
    }
    if (atomic_exchange_explicit(&comm->entered, 1, memory_order_acquire)) {
        if (atomic_load_explicit(&comm->aborted, memory_order_acquire)) {
            return RMACOLL_ERR_ABORTED; /* rmacoll_comm_abort holds it a moment */
        }
        rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: %s: communicator %p (rank %d of %d) is in use by another "
                     "thread: calls on one communicator must not overlap", comm->rank,
                     fn, (void *)comm, comm->rank, comm->nranks);
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

void rmacoll__leave(rmacoll_comm_t *comm)
{
    atomic_store_explicit(&comm->entered, 0, memory_order_release);
}

rmacoll_status_t rmacoll_comm_abort(rmacoll_comm_t *comm)
{
    volatile uint64_t *own;
    uint64_t zero = 0;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (atomic_exchange_explicit(&comm->aborted, 1, memory_order_acq_rel)) {
        return RMACOLL_SUCCESS; /* aborted before */
    }
    /* the word every wait of this rank checks: a call in flight stops at
     * its next check and, failing, passes the word on to every peer
     * (call_end: rmacoll__abort_broadcast); a failure seen first stays */
    own = (volatile uint64_t *)((char *)comm->ctrl.addr + RMACOLL__CTRL_ABORT_OFF);
    __atomic_compare_exchange_n(own, &zero,
                                rmacoll__abort_word(RMACOLL_ERR_ABORTED, comm->rank, -1), 0,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    rmacoll__log(&comm->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_CORE,
                 "rank %d: rmacoll_comm_abort: communicator %p aborted", comm->rank,
                 (void *)comm);
    /* no call in flight (nor a started one): tell the peers from here,
     * holding the communicator as a call would */
    rmacoll__abort_settle(comm);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_comm_get_async_error(const rmacoll_comm_t *comm,
                                              rmacoll_status_t *async_error)
{
    uint64_t w;
    int peer;
    rmacoll_status_t pst;

    if (comm == NULL || async_error == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    w = __atomic_load_n((const volatile uint64_t *)((const char *)comm->ctrl.addr +
                                                    RMACOLL__CTRL_ABORT_OFF),
                        __ATOMIC_ACQUIRE);
    pst = rmacoll__proxy_error((rmacoll__proxy_t *)&comm->proxy, &peer);
    *async_error = atomic_load_explicit(&comm->aborted, memory_order_acquire)
                       ? RMACOLL_ERR_ABORTED
                   : w != 0 ? rmacoll__abort_status(comm)
                            : pst;
    return RMACOLL_SUCCESS;
}

/* rmacoll_alltoallv once comm is entered. */
static rmacoll_status_t alltoallv_entered(const void *sendbuf, const int64_t *sendcounts,
                                          const int64_t *sdispls, void *recvbuf,
                                          const int64_t *recvcounts,
                                          const int64_t *rdispls, rmacoll_datatype_t dtype,
                                          rmacoll_comm_t *comm, void *stream)
{
    rmacoll__call_t call;
    rmacoll_status_t st = rmacoll__call_begin(&call, comm, sendbuf, sendcounts, sdispls,
                                              recvbuf, recvcounts, rdispls, dtype, stream);

    return st == RMACOLL_SUCCESS ? rmacoll__call_pipeline(&call) : st;
}

/* The bytes a call sends, for the profiler range's payload (0 where the
 * counts are unusable: validation reports those). In place: the receive
 * counts are the send counts. */
uint64_t rmacoll__send_bytes(const void *sendbuf, const int64_t *sendcounts,
                             const int64_t *recvcounts, rmacoll_datatype_t dtype, int n)
{
    const int64_t *c = sendbuf == RMACOLL_IN_PLACE ? recvcounts : sendcounts;
    uint64_t sum = 0;

    if (c == NULL) {
        return 0;
    }
    for (int j = 0; j < n; j++) {
        sum += c[j] > 0 ? (uint64_t)c[j] : 0;
    }
    return sum * rmacoll_datatype_size(dtype);
}

rmacoll_status_t rmacoll_alltoallv(const void *sendbuf, const int64_t *sendcounts,
                                   const int64_t *sdispls, void *recvbuf,
                                   const int64_t *recvcounts, const int64_t *rdispls,
                                   rmacoll_datatype_t dtype, rmacoll_comm_t *comm,
                                   void *stream)
{
    rmacoll_status_t st;
    int trace;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    st = rmacoll__enter(comm, "rmacoll_alltoallv");
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    trace = rmacoll__trace_on();
    if (trace) {
        rmacoll__trace_push("rmacoll:alltoallv",
                            rmacoll__send_bytes(sendbuf, sendcounts, recvcounts, dtype,
                                                comm->nranks));
    }
    st = alltoallv_entered(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                           dtype, comm, stream);
    if (trace) {
        rmacoll__trace_pop();
    }
    rmacoll__leave(comm);
    return st;
}

rmacoll_status_t rmacoll_alltoall(const void *sendbuf, void *recvbuf, int64_t count,
                                  rmacoll_datatype_t dtype, rmacoll_comm_t *comm,
                                  void *stream)
{
    rmacoll_status_t st;
    int64_t *arr;
    int n;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    st = rmacoll__enter(comm, "rmacoll_alltoall"); /* before comm->uniform is written */
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    n = comm->nranks;
    arr = comm->uniform; /* counts, then displacements */
    for (int r = 0; r < n; r++) {
        arr[r] = count;
        /* an overflowing displacement becomes -1, which validation turns
         * into RMACOLL_ERR_OVERFLOW on every rank */
        arr[n + r] = (count < 0 || (r > 0 && count > INT64_MAX / r)) ? -1 : count * r;
    }
    rmacoll__trace_push("rmacoll:alltoall",
                        count > 0 ? (uint64_t)count * (uint64_t)n * rmacoll_datatype_size(dtype)
                                  : 0);
    st = alltoallv_entered(sendbuf, arr, arr + n, recvbuf, arr, arr + n, dtype, comm,
                           stream);
    rmacoll__trace_pop();
    rmacoll__leave(comm);
    return st;
}
