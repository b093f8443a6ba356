/*
 * request.c - non-blocking calls (rmacoll_alltoallv_start, rmacoll_test,
 * rmacoll_wait), as MPI_Ialltoallv or UCC's init/start/progress: start
 * opens the call on the caller's thread (so errors of the communicator's
 * state are returned at once and the epoch advances in call order), then
 * the communicator's own thread runs the same pipeline as the blocking
 * call while the caller does other work. One request per communicator is
 * in flight at a time; it lives in the communicator (the data path does
 * not malloc).
 */
#include <stdio.h>
#include <string.h>

#include "core/base/trace.h"
#include "core/exec/call.h"
#include "core/exec/state.h"

static void *async_main(void *arg)
{
    rmacoll_comm_t *comm = arg;
    rmacoll__async_t *as = &comm->async;

    pthread_mutex_lock(&as->lock);
    for (;;) {
        rmacoll_status_t st;
        while (!as->stop && !as->queued) {
            pthread_cond_wait(&as->cond, &as->lock);
        }
        if (as->stop) {
            break;
        }
        as->queued = 0;
        pthread_mutex_unlock(&as->lock);
        if (rmacoll__trace_on()) {
            const rmacoll__call_t *c = &as->req.call;

            /* on this thread, which carries the call out */
            rmacoll__trace_push("rmacoll:alltoallv_start",
                                rmacoll__send_bytes(c->sendbuf, c->sendcounts, c->recvcounts,
                                                    c->dtype, comm->nranks));
            st = rmacoll__call_pipeline(&as->req.call);
            rmacoll__trace_pop();
        } else {
            st = rmacoll__call_pipeline(&as->req.call);
        }
        pthread_mutex_lock(&as->lock);
        as->req.status = st;
        atomic_store_explicit(&as->req.done, 1, memory_order_release);
        pthread_cond_broadcast(&as->cond);
    }
    pthread_mutex_unlock(&as->lock);
    return NULL;
}

rmacoll_status_t rmacoll_alltoallv_start(const void *sendbuf, const int64_t *sendcounts,
                                         const int64_t *sdispls, void *recvbuf,
                                         const int64_t *recvcounts, const int64_t *rdispls,
                                         rmacoll_datatype_t dtype, rmacoll_comm_t *comm,
                                         rmacoll_request_t **req)
{
    rmacoll__async_t *as;
    rmacoll_status_t st;

    if (req != NULL) {
        *req = NULL;
    }
    if (comm == NULL || req == NULL) {
        return comm != NULL ? rmacoll__fail(&comm->fail, RMACOLL_ERR_INVALID_ARG,
                                            "rank %d: req: NULL", comm->rank)
                            : RMACOLL_ERR_INVALID_ARG;
    }
    as = &comm->async;
    st = rmacoll__enter(comm, "rmacoll_alltoallv_start");
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = rmacoll__call_begin(&as->req.call, comm, sendbuf, sendcounts, sdispls, recvbuf,
                             recvcounts, rdispls, dtype, NULL);
    if (st != RMACOLL_SUCCESS) {
        rmacoll__leave(comm);
        return st;
    }
    if (!as->started) {
        if (pthread_create(&as->thread, NULL, async_main, comm) != 0) {
            comm->broken = 1; /* the epoch advanced without the call: peers wait */
            st = rmacoll__fail(&comm->fail, RMACOLL_ERR_NO_MEMORY, "rank %d: cannot start "
                               "the thread of non-blocking calls", comm->rank);
            rmacoll__leave(comm);
            return st;
        }
        as->started = 1;
    }
    pthread_mutex_lock(&as->lock);
    atomic_store(&as->req.done, 0);
    as->busy = 1;
    as->queued = 1;
    pthread_cond_broadcast(&as->cond);
    pthread_mutex_unlock(&as->lock);
    *req = &as->req;
    rmacoll__leave(comm); /* from here as->busy refuses other calls */
    return RMACOLL_SUCCESS;
}

/* The communicator a request belongs to. */
static rmacoll_comm_t *req_comm(rmacoll_request_t *req)
{
    return req->call.comm;
}

rmacoll_status_t rmacoll_test(rmacoll_request_t *req, int *done)
{
    rmacoll_comm_t *comm;

    if (req == NULL || done == NULL || (comm = req_comm(req)) == NULL ||
        !comm->async.busy || &comm->async.req != req) {
        if (done != NULL) {
            *done = 0;
        }
        return RMACOLL_ERR_INVALID_ARG;
    }
    *done = atomic_load_explicit(&req->done, memory_order_acquire);
    if (!*done) {
        return RMACOLL_SUCCESS;
    }
    comm->async.busy = 0; /* completed: the request is released */
    return req->status;
}

rmacoll_status_t rmacoll_wait(rmacoll_request_t *req)
{
    rmacoll_comm_t *comm;
    rmacoll__async_t *as;

    if (req == NULL || (comm = req_comm(req)) == NULL || !comm->async.busy ||
        &comm->async.req != req) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    as = &comm->async;
    pthread_mutex_lock(&as->lock);
    while (!atomic_load_explicit(&req->done, memory_order_acquire)) {
        pthread_cond_wait(&as->cond, &as->lock);
    }
    pthread_mutex_unlock(&as->lock);
    as->busy = 0;
    return req->status;
}

void rmacoll__async_fini(rmacoll_comm_t *comm)
{
    rmacoll__async_t *as = &comm->async;

    if (as->busy) {
        (void)rmacoll_wait(&as->req); /* a request still in flight completes first */
    }
    if (as->started) {
        pthread_mutex_lock(&as->lock);
        as->stop = 1;
        pthread_cond_broadcast(&as->cond);
        pthread_mutex_unlock(&as->lock);
        pthread_join(as->thread, NULL);
        as->started = 0;
    }
}
