/*
 * proxy.c - the proxy thread of a communicator. It owns the progress of
 * the network transport: it posts the proxyPut queues the calling thread
 * hands it (in order, through a single-producer ring) and calls
 * progress() continuously, so that manual-progress providers deliver
 * incoming data and signals even while the calling thread copies or waits.
 * Every call into the network transport holds net_lock.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void proxy_set_error(rmacoll_comm_t *comm, rmacoll_status_t st)
{
    int expected = RMACOLL_SUCCESS;
    int peer = comm->net_ops->error_peer ? comm->net_ops->error_peer(comm->net) : -1;

    atomic_store(&comm->proxy_err_peer, peer);
    atomic_compare_exchange_strong(&comm->proxy_status, &expected, (int)st);
}

/*
 * Posts the jobs handed over so far, in order, then drives progress once.
 * Called with net_lock held, by the proxy thread or by a calling thread
 * that is waiting anyway (on a host with fewer cores than threads, the
 * waiter doing the work beats waking the proxy). Returns 1 if it posted.
 */
static int proxy_drive_locked(rmacoll_comm_t *comm)
{
    uint64_t posted = atomic_load_explicit(&comm->jobs_posted, memory_order_acquire);
    uint64_t next = atomic_load_explicit(&comm->jobs_done, memory_order_relaxed);
    rmacoll_status_t st = RMACOLL_SUCCESS;
    int worked = 0;

    while (next < posted) {
        const rmacoll__proxy_job_t *job = &comm->ring[next % RMACOLL__PROXY_RING];
        if (st == RMACOLL_SUCCESS && atomic_load(&comm->proxy_status) == RMACOLL_SUCCESS) {
            st = comm->net_ops->post_puts(comm->net, job->puts, job->n);
        }
        next++;
        atomic_store_explicit(&comm->jobs_done, next, memory_order_release);
        worked = 1;
    }
    if (st == RMACOLL_SUCCESS) {
        st = comm->net_ops->progress(comm->net);
    }
    if (st != RMACOLL_SUCCESS) {
        proxy_set_error(comm, st);
    }
    return worked;
}

void rmacoll__proxy_poll(rmacoll_comm_t *comm)
{
    if (comm->net != NULL && pthread_mutex_trylock(&comm->net_lock) == 0) {
        proxy_drive_locked(comm);
        pthread_mutex_unlock(&comm->net_lock);
    }
}

static void *proxy_main(void *arg)
{
    rmacoll_comm_t *comm = arg;
    unsigned idle = 0;

    while (!atomic_load_explicit(&comm->proxy_stop, memory_order_acquire)) {
        int worked;

        pthread_mutex_lock(&comm->net_lock);
        worked = proxy_drive_locked(comm);
        pthread_mutex_unlock(&comm->net_lock);
        /* poll hard while a call is in flight, gently between calls */
        if (worked) {
            idle = 0;
        } else if (++idle > 64) {
            if (atomic_load_explicit(&comm->proxy_active, memory_order_relaxed)) {
                sched_yield();
            } else {
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
            }
        }
    }
    return NULL;
}

rmacoll_status_t rmacoll__proxy_start(rmacoll_comm_t *comm)
{
    int rc;

    atomic_store(&comm->proxy_stop, 0);
    atomic_store(&comm->proxy_status, RMACOLL_SUCCESS);
    atomic_store(&comm->proxy_err_peer, -1);
    rc = pthread_create(&comm->proxy, NULL, proxy_main, comm);
    if (rc != 0) {
        return rmacoll__comm_fail(comm, RMACOLL_ERR_NO_MEMORY,
                                  "rank %d: cannot start the proxy thread: %s",
                                  comm->rank, strerror(rc));
    }
    comm->proxy_started = 1;
    return RMACOLL_SUCCESS;
}

void rmacoll__proxy_stop(rmacoll_comm_t *comm)
{
    atomic_store_explicit(&comm->proxy_stop, 1, memory_order_release);
    pthread_join(comm->proxy, NULL);
    comm->proxy_started = 0;
}

rmacoll_status_t rmacoll__proxy_submit(rmacoll_comm_t *comm,
                                       const rmacoll_put_t *puts, size_t n)
{
    uint64_t posted = atomic_load_explicit(&comm->jobs_posted, memory_order_relaxed);
    uint64_t start = now_ms();

    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    /* ring full: wait for the proxy (bounded by the timeout) */
    while (posted - atomic_load_explicit(&comm->jobs_done, memory_order_acquire) >=
           RMACOLL__PROXY_RING) {
        if (now_ms() - start > comm->cfg.timeout_ms) {
            return rmacoll__comm_fail(comm, RMACOLL_ERR_TIMEOUT,
                                      "rank %d: proxy thread stalled for %llu ms",
                                      comm->rank,
                                      (unsigned long long)comm->cfg.timeout_ms);
        }
        sched_yield();
    }
    comm->ring[posted % RMACOLL__PROXY_RING].puts = puts;
    comm->ring[posted % RMACOLL__PROXY_RING].n = n;
    atomic_store_explicit(&comm->jobs_posted, posted + 1, memory_order_release);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__proxy_flush(rmacoll_comm_t *comm)
{
    uint64_t start = now_ms();
    uint64_t posted = atomic_load(&comm->jobs_posted);
    unsigned spins = 0;

    for (;;) {
        int st = atomic_load(&comm->proxy_status);
        size_t pending = 1;
        if (st != RMACOLL_SUCCESS) {
            int peer = atomic_load(&comm->proxy_err_peer);
            return rmacoll__comm_fail(comm, (rmacoll_status_t)st,
                                      "rank %d: network transport failed%s%d: %s",
                                      comm->rank, peer >= 0 ? " towards rank " : " ",
                                      peer, rmacoll_status_string(st));
        }
        pthread_mutex_lock(&comm->net_lock);
        proxy_drive_locked(comm);
        if (atomic_load_explicit(&comm->jobs_done, memory_order_acquire) >= posted) {
            pending = comm->net_ops->pending(comm->net);
        }
        pthread_mutex_unlock(&comm->net_lock);
        if (pending == 0) {
            return RMACOLL_SUCCESS;
        }
        if (now_ms() - start > comm->cfg.timeout_ms) {
            return rmacoll__comm_fail(comm, RMACOLL_ERR_TIMEOUT,
                                      "rank %d: %zu network puts still incomplete after "
                                      "%llu ms", comm->rank, pending,
                                      (unsigned long long)comm->cfg.timeout_ms);
        }
        if (++spins > 64) {
            sched_yield();
        }
    }
}
