/*
 * run_staged.c - the device-memory runner across nodes: host staging.
 * The host runs the metadata round and agreement in the call, as always;
 * the stream then copies the send blocks to a pinned host buffer and
 * raises STAGE_GO; a worker thread runs the host plan on the staging
 * buffers (CE by cross-memory attach, network by the proxy) and raises
 * STAGE_DONE; the stream waits for it, copies the receive blocks back and
 * raises STAGE_COPIED. The call returns without host synchronisation; the
 * next call on the communicator waits for STAGE_COPIED of this one (one
 * staged call in flight, so staging buffers are never overwritten early).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/call.h"
#include "core/comm.h"

static volatile uint64_t *stage_word(rmacoll_comm_t *comm, int w)
{
    return &comm->signals[rmacoll__ctrl_sig_stage(&comm->lay, w)];
}

static void *stage_main(void *arg)
{
    rmacoll_comm_t *comm = arg;
    rmacoll__stage_t *sg = &comm->stage;

    pthread_mutex_lock(&sg->lock);
    for (;;) {
        uint64_t e;
        rmacoll_status_t st;
        while (!sg->stop && sg->job == 0) {
            pthread_cond_wait(&sg->cond, &sg->lock);
        }
        if (sg->stop) {
            break;
        }
        e = sg->job;
        sg->job = 0;
        pthread_mutex_unlock(&sg->lock);

        rmacoll__proxy_set_active(&comm->proxy, 1);
        st = rmacoll__wait_word(comm, stage_word(comm, RMACOLL__STAGE_GO), e, comm->rank,
                                "own stream: send blocks staged to host");
        if (st == RMACOLL_SUCCESS) {
            st = rmacoll__run_host_plan(comm, sg->send, sg->recv, sg->send_mem);
        }
        rmacoll__proxy_set_active(&comm->proxy, 0);
        if (st != RMACOLL_SUCCESS) {
            int expected = RMACOLL_SUCCESS;
            atomic_compare_exchange_strong(&sg->status, &expected, (int)st);
            /* no network write into the staging buffer after the failure */
            (void)rmacoll__proxy_revoke(&comm->proxy, sg->recv_mem,
                                        "staging receive buffer");
        }
        /* release the stream even on failure; the next call reports it */
        __atomic_store_n(stage_word(comm, RMACOLL__STAGE_DONE), e, __ATOMIC_RELEASE);
        atomic_store(&sg->finished, e);
        pthread_mutex_lock(&sg->lock);
    }
    pthread_mutex_unlock(&sg->lock);
    return NULL;
}

rmacoll_status_t rmacoll__staged_drain(rmacoll_comm_t *comm)
{
    rmacoll__stage_t *sg = &comm->stage;
    uint64_t e = sg->last;
    rmacoll_status_t st;
    int err;

    if (e == 0) {
        return RMACOLL_SUCCESS;
    }
    st = rmacoll__wait_word(comm, stage_word(comm, RMACOLL__STAGE_COPIED), e, comm->rank,
                            "own stream: previous call's receive blocks "
                            "copied back to the device");
    while (st == RMACOLL_SUCCESS && atomic_load(&sg->finished) < e) {
        sched_yield();
    }
    rmacoll__proxy_deregister(&comm->proxy, sg->send_mem);
    sg->send_mem = NULL;
    rmacoll__proxy_deregister(&comm->proxy, sg->recv_mem);
    sg->recv_mem = NULL;
    sg->last = 0;
    err = atomic_load(&sg->status);
    if (st == RMACOLL_SUCCESS && err != RMACOLL_SUCCESS) {
        comm->broken = 1;
        return (rmacoll_status_t)err; /* the worker logged the cause */
    }
    if (st != RMACOLL_SUCCESS) {
        comm->broken = 1;
    }
    return st;
}

void rmacoll__staged_fini(rmacoll_comm_t *comm)
{
    rmacoll__stage_t *sg = &comm->stage;

    if (sg->started) {
        pthread_mutex_lock(&sg->lock);
        sg->stop = 1;
        pthread_cond_signal(&sg->cond);
        pthread_mutex_unlock(&sg->lock);
        pthread_join(sg->thread, NULL);
        sg->started = 0;
    }
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);

    /* a broken communicator may still hold a call's registrations */
    rmacoll__proxy_deregister(&comm->proxy, sg->send_mem);
    rmacoll__proxy_deregister(&comm->proxy, sg->recv_mem);
    sg->send_mem = NULL;
    sg->recv_mem = NULL;
    if (ctl != NULL) { /* pins exist only with a control instance */
        if (sg->send_pin != NULL) {
            ctl->ops->mem.mem_deregister(ctl->tp, sg->send_pin);
        }
        if (sg->recv_pin != NULL) {
            ctl->ops->mem.mem_deregister(ctl->tp, sg->recv_pin);
        }
    }
    sg->send_pin = NULL;
    sg->recv_pin = NULL;
    free(sg->send);
    free(sg->recv);
    sg->send = NULL;
    sg->recv = NULL;
}

/* Grows a pinned host staging buffer to at least `bytes`. */
static rmacoll_status_t stage_grow(rmacoll_comm_t *comm, void **buf, uint64_t *cap,
                                   rmacoll_mem_t **pin, uint64_t bytes)
{
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st;
    void *p = NULL;

    if (bytes <= *cap) {
        return RMACOLL_SUCCESS;
    }
    if (*pin != NULL) {
        ctl->ops->mem.mem_deregister(ctl->tp, *pin);
        *pin = NULL;
    }
    free(*buf);
    *buf = NULL;
    *cap = 0;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = ctl->ops->mem.mem_register(ctl->tp, p, bytes, RMACOLL_MEM_HOST, pin, NULL);
    if (st != RMACOLL_SUCCESS) {
        free(p);
        return st;
    }
    *buf = p;
    *cap = bytes;
    return RMACOLL_SUCCESS;
}

/* Pinned staging buffers carry the data; the host runner registers them. */
static rmacoll_status_t staged_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__stage_t *sg = &comm->stage;
    rmacoll_status_t st = rmacoll__stream_usable(c);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = stage_grow(comm, &sg->send, &sg->send_bytes, &sg->send_pin, c->send_extent);
    if (st == RMACOLL_SUCCESS) {
        st = stage_grow(comm, &sg->recv, &sg->recv_bytes, &sg->recv_pin, c->recv_extent);
    }
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: cannot allocate pinned staging "
                 "buffers (%llu + %llu bytes): %s", comm->rank,
                 (unsigned long long)c->send_extent, (unsigned long long)c->recv_extent,
                 rmacoll_status_string(st));
        return st;
    }
    c->hsend = sg->send;
    c->hrecv = sg->recv;
    return rmacoll__run_host.prepare(c);
}

static rmacoll_status_t staged_planned(rmacoll__call_t *c)
{
    return RMACOLL_SUCCESS;
}

/* Enqueues the staging copies and hands the data phase to the worker. */
static rmacoll_status_t staged_run(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__stage_t *sg = &comm->stage;
    int n = comm->nranks, me = comm->rank;
    size_t es = c->esize;
    void *stream = c->stream;
    rmacoll_put_t *puts;
    size_t k = 0;
    uint32_t w;
    uint64_t e = comm->epoch;
    rmacoll__tinst_t *ctl = rmacoll__comm_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st;

    /* the worker owns the registrations until rmacoll__staged_drain */
    sg->send_mem = c->send_mem;
    sg->recv_mem = c->recv_mem;
    c->send_mem = NULL;
    c->recv_mem = NULL;
    st = rmacoll__grow_puts(comm, (size_t)n);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    puts = comm->puts;
    for (int j = 0; j < n; j++) { /* send blocks: device -> host */
        if (c->sendcounts[j] != 0) {
            uint64_t off = (uint64_t)c->sdispls[j] * es;
            memset(&puts[k], 0, sizeof(puts[k]));
            puts[k].peer = me;
            puts[k].src = (const char *)c->sendbuf + off;
            puts[k].dst_addr = (uint64_t)(uintptr_t)sg->send + off;
            puts[k].bytes = (uint64_t)c->sendcounts[j] * es;
            puts[k++].sig_index = RMACOLL_NO_SIGNAL;
        }
    }
    st = k ? ctl->ops->stream.post_puts_stream(ctl->tp, puts, k, stream) : RMACOLL_SUCCESS;
    if (st == RMACOLL_SUCCESS) {
        st = ctl->ops->stream.signal_stream(ctl->tp, me,
                                         rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_GO),
                                         e, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        w = rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_DONE);
        st = ctl->ops->stream.wait_stream(ctl->tp, &w, &e, 1, stream);
    }
    k = 0;
    for (int i = 0; st == RMACOLL_SUCCESS && i < n; i++) { /* receive blocks back */
        if (c->recvcounts[i] != 0) {
            uint64_t off = (uint64_t)c->rdispls[i] * es;
            memset(&puts[k], 0, sizeof(puts[k]));
            puts[k].peer = me;
            puts[k].src = (const char *)sg->recv + off;
            puts[k].dst_addr = (uint64_t)(uintptr_t)c->recvbuf + off;
            puts[k].bytes = (uint64_t)c->recvcounts[i] * es;
            puts[k++].sig_index = RMACOLL_NO_SIGNAL;
        }
    }
    if (st == RMACOLL_SUCCESS && k) {
        st = ctl->ops->stream.post_puts_stream(ctl->tp, puts, k, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        st = ctl->ops->stream.signal_stream(
            ctl->tp, me, rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_COPIED), e,
            stream);
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__comm_fail(comm, st, "rank %d: enqueueing the staging copies on the "
                                  "stream failed: %s", me, rmacoll_status_string(st));
    }
    if (!sg->started) {
        if (pthread_create(&sg->thread, NULL, stage_main, comm) != 0) {
            return rmacoll__comm_fail(comm, RMACOLL_ERR_NO_MEMORY, "rank %d: cannot start "
                                      "the staging thread", me);
        }
        sg->started = 1;
    }
    sg->last = e;
    pthread_mutex_lock(&sg->lock);
    sg->job = e;
    pthread_cond_signal(&sg->cond);
    pthread_mutex_unlock(&sg->lock);
    return RMACOLL_SUCCESS;
}

static void staged_release(rmacoll__call_t *c)
{
    rmacoll__run_host.release(c); /* what the worker did not take over */
}

const rmacoll__runner_t rmacoll__run_staged = {
    .name = "staged",
    .prepare = staged_prepare,
    .planned = staged_planned,
    .run = staged_run,
    .release = staged_release,
};
