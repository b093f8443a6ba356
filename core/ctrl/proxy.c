/*
 * proxy.c - the proxy of a communicator (proxy.h): its thread, the job
 * ring, and every call into the network transport.
 */
#include "core/base/clock.h"
#include "core/base/delay.h"
#include "core/base/fault.h"
#include "core/ctrl/proxy.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* futex(2) on a word of this process (FUTEX_PRIVATE_FLAG): sleep while
 * *w == val (at most timeout_ns), wake one sleeper. */
static void futex_wait(_Atomic int *w, int val, long timeout_ns)
{
    struct timespec ts = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};

    (void)syscall(SYS_futex, (int *)w, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic int *w)
{
    (void)syscall(SYS_futex, (int *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void proxy_set_error(rmacoll__proxy_t *px, rmacoll_status_t st)
{
    int expected = RMACOLL_SUCCESS;
    int peer = px->ops->base.error_peer(px->tp);

    atomic_store(&px->err_peer, peer);
    atomic_compare_exchange_strong(&px->status, &expected, (int)st);
}

/* A call into the transport starts (xcall_in) and returns (xcall_out), under
 * the lock: the count is odd while inside (rmacoll__proxy_stuck). */
static void xcall_in(rmacoll__proxy_t *px, const char *what)
{
    /* only the lock's holder writes: a store, not a read-modify-write
     * (this runs around every progress call) */
    atomic_store_explicit(&px->xcall_what, what, memory_order_relaxed);
    atomic_store_explicit(&px->xcalls,
                          atomic_load_explicit(&px->xcalls, memory_order_relaxed) + 1,
                          memory_order_release);
}

static void xcall_out(rmacoll__proxy_t *px)
{
    atomic_store_explicit(&px->xcalls,
                          atomic_load_explicit(&px->xcalls, memory_order_relaxed) + 1,
                          memory_order_release);
}

uint64_t rmacoll__proxy_stuck(const rmacoll__proxy_t *px, rmacoll__proxy_look_t *look,
                              uint64_t now_ms, const char **what)
{
    uint64_t x = atomic_load_explicit(&px->xcalls, memory_order_acquire);

    if ((x & 1u) == 0 || x != look->xcalls) {
        look->xcalls = x;
        look->since = now_ms;
        return 0;
    }
    if (what != NULL) {
        *what = atomic_load_explicit(&px->xcall_what, memory_order_relaxed);
    }
    return now_ms - look->since;
}

/* RMACOLL_TEST_FAULT=stall:N (fault.h): the N-th hand-over of puts arms it;
 * the proxy thread's next heartbeat post then stays inside the transport
 * call until the communicator stops the thread (at most 10 minutes). */
static void proxy_test_stall(rmacoll__proxy_t *px)
{
    uint64_t until = rmacoll__now_ms() + 600000u;

    rmacoll__log(px->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_PROXY,
                 "rank %d: injected stall of the proxy inside the network transport "
                 "(RMACOLL_TEST_FAULT)", px->rank);
    while (!atomic_load_explicit(&px->stop, memory_order_acquire) &&
           rmacoll__now_ms() < until) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Takes the lock within ms milliseconds: 0, or non-zero when its holder
 * kept it longer. */
static int proxy_lock_within(rmacoll__proxy_t *px, int ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_mutex_timedlock(&px->lock, &ts);
}

uint64_t rmacoll__proxy_self_limit_ms(const rmacoll__proxy_t *px)
{
    uint64_t period = px->beat_ns * 4u / 1000000u; /* beat_ns is a quarter period */
    uint64_t lo = 2 * period - period / 4, lim = 8 * period, cap = px->timeout_ms / 4 * 3;

    if (period == 0) {
        return px->timeout_ms == 0 || px->timeout_ms > 60000u ? 60000u : px->timeout_ms;
    }
    lim = lim < cap ? lim : cap;
    return lim > lo ? lim : lo;
}

/* What found the lock held by a transport call that did not return
 * (rmacoll__proxy_revoke, rmacoll__proxy_deregister), done by the lock's
 * next holder, in that order. */
static void proxy_later_locked(rmacoll__proxy_t *px)
{
    rmacoll_mem_t *m;

    /* one relaxed load on the usual path (this runs before every drive) */
    if (atomic_load_explicit(&px->later, memory_order_relaxed) == 0) {
        return;
    }
    /* reading a deferrer's 1 (it stored it after its slot) makes its slot
     * visible; one set after this exchange is the next drive's */
    (void)atomic_exchange(&px->later, 0);
    m = atomic_exchange(&px->revoke_later, NULL);
    if (m != NULL) {
        xcall_in(px, "mem_revoke");
        (void)px->ops->mem.mem_revoke(px->tp, m);
        xcall_out(px);
    }
    for (int k = 0; k < RMACOLL__PROXY_LATER; k++) {
        if ((m = atomic_exchange(&px->dereg_later[k], NULL)) != NULL) {
            xcall_in(px, "mem_deregister");
            px->ops->mem.mem_deregister(px->tp, m);
            xcall_out(px);
        }
    }
}

/*
 * Posts the jobs handed over so far, in order, then drives progress once.
 * Called with the lock held, by the proxy thread or by a calling thread
 * that is waiting anyway (on a host with fewer cores than threads, the
 * waiter doing the work beats waking the proxy). Returns 1 if it posted.
 */
static int proxy_drive_locked(rmacoll__proxy_t *px)
{
    uint64_t posted = atomic_load_explicit(&px->jobs_posted, memory_order_acquire);
    uint64_t next = atomic_load_explicit(&px->jobs_done, memory_order_relaxed);
    rmacoll_status_t st = RMACOLL_SUCCESS;
    int worked = 0;

    proxy_later_locked(px);

    while (next < posted) {
        const rmacoll__proxy_job_t *job = &px->ring[next % RMACOLL__PROXY_RING];
        if (st == RMACOLL_SUCCESS && atomic_load(&px->status) == RMACOLL_SUCCESS) {
            rmacoll__test_delay();
            if (rmacoll__test_fault(RMACOLL__FAULT_NET)) {
                /* this rank's network failed: no peer is to blame */
                int expected = RMACOLL_SUCCESS;

                rmacoll__log(px->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_PROXY,
                             "rank %d: injected network failure (RMACOLL_TEST_FAULT)",
                             px->rank);
                atomic_store(&px->err_peer, -1);
                atomic_compare_exchange_strong(&px->status, &expected,
                                               (int)RMACOLL_ERR_TRANSPORT);
                st = RMACOLL_ERR_TRANSPORT;
                next++;
                atomic_store_explicit(&px->jobs_done, next, memory_order_release);
                worked = 1;
                continue;
            }
            if (rmacoll__test_fault(RMACOLL__FAULT_STALL)) {
                atomic_store(&px->stall_armed, 1); /* the thread's next heartbeat */
            }
            xcall_in(px, "post_puts");
            st = px->ops->host.post_puts(px->tp, job->puts, job->n);
            xcall_out(px);
        } else if (job->always) {
            /* this rank failed: the abort word still goes out where the
             * transport can carry it (an injected or one-connection failure;
             * a transport failed as a whole refuses it at once) */
            xcall_in(px, "post_puts (abort word)");
            (void)px->ops->host.post_puts(px->tp, job->puts, job->n);
            xcall_out(px);
        }
        next++;
        atomic_store_explicit(&px->jobs_done, next, memory_order_release);
        worked = 1;
    }
    if (st == RMACOLL_SUCCESS) {
        xcall_in(px, "progress");
        st = px->ops->base.progress(px->tp);
        xcall_out(px);
    }
    if (st != RMACOLL_SUCCESS && atomic_load(&px->status) == RMACOLL_SUCCESS) {
        proxy_set_error(px, st);
    }
    return worked;
}

void rmacoll__proxy_init(rmacoll__proxy_t *px, int rank, uint64_t timeout_ms,
                         rmacoll__logger_t *log, char *errbuf, size_t errlen)
{
    memset(px, 0, sizeof(*px));
    px->rank = rank;
    atomic_store(&px->beat_skip, -1);
    px->timeout_ms = timeout_ms;
    px->log = log;
    rmacoll__fail_init(&px->fail, errbuf, errlen, log, rank, RMACOLL_LOG_SUBSYS_PROXY);
    px->park_ns = RMACOLL__PROXY_PARK_NS;
    atomic_store(&px->err_peer, -1);
    pthread_mutex_init(&px->lock, NULL);
}

void rmacoll__proxy_poll(rmacoll__proxy_t *px)
{
    /* trylock: a holder is the proxy thread finishing its last turn before
     * it saw `driving` (progress all the same); blocking on it would stall
     * this thread whenever that thread is preempted with the lock */
    if (px->started && pthread_mutex_trylock(&px->lock) == 0) {
        proxy_drive_locked(px);
        pthread_mutex_unlock(&px->lock);
    }
}

/* Wakes the thread if it is parked, once no thread drives. seq_cst pairs
 * with proxy_main's store of parked and the futex's own check of driving:
 * either the wake finds the thread parked, or its wait sees driving
 * already changed and returns at once. */
static void proxy_wake_parked(rmacoll__proxy_t *px)
{
    if (atomic_load(&px->driving) == 0 && atomic_load(&px->parked)) {
        futex_wake(&px->driving);
    }
}

void rmacoll__proxy_drive(rmacoll__proxy_t *px, int on)
{
    if (on) {
        atomic_fetch_add(&px->driving, 1);
    } else {
        atomic_fetch_sub(&px->driving, 1);
        proxy_wake_parked(px);
    }
}

void rmacoll__proxy_drive_end(rmacoll__proxy_t *px)
{
    atomic_fetch_sub(&px->driving, 1);
}

void rmacoll__proxy_watch_set(rmacoll__proxy_t *px, rmacoll_status_t (*watch)(void *ctx),
                              void *ctx)
{
    px->watch = watch;
    px->watch_ctx = ctx;
}

void rmacoll__proxy_beat_set(rmacoll__proxy_t *px, uint64_t beat_ms,
                             volatile uint64_t *word, const rmacoll_put_t *puts, size_t n)
{
    px->beat_ns = beat_ms * 1000000ull / 4;
    px->beat_word = word;
    px->beat_puts = puts;
    px->beat_n = n;
    px->next_beat_ns = 0;
    atomic_store(&px->beat_skip, -1);
}

void rmacoll__proxy_beat_skip(rmacoll__proxy_t *px, int peer)
{
    atomic_store(&px->beat_skip, peer);
}

/* One heartbeat when it is due: the count rises (node peers read it), and
 * the network peers get it by a put. The thread beats whether or not a
 * call runs, so a rank that computes between calls is not a stopped one;
 * a stopped or dead process beats no more. */
static void proxy_beat(rmacoll__proxy_t *px)
{
    uint64_t now = rmacoll__now_ns();

    if (now < px->next_beat_ns) {
        return;
    }
    px->next_beat_ns = now + px->beat_ns;
    __atomic_store_n(px->beat_word, __atomic_load_n(px->beat_word, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELEASE);
    if (px->beat_n != 0) {
        pthread_mutex_lock(&px->lock);
        if (atomic_load(&px->status) == RMACOLL_SUCCESS) {
            int skip = atomic_load(&px->beat_skip);
            rmacoll_status_t st = RMACOLL_SUCCESS;
            size_t k0 = 0;

            /* the runs of puts between skipped peers, one post each */
            for (size_t k = 0; k <= px->beat_n && st == RMACOLL_SUCCESS; k++) {
                if (k == px->beat_n || px->beat_puts[k].peer == skip) {
                    if (k > k0) {
                        xcall_in(px, "post_puts (heartbeat)");
                        if (atomic_load(&px->stall_armed)) {
                            proxy_test_stall(px);
                        }
                        st = px->ops->host.post_puts(px->tp, px->beat_puts + k0, k - k0);
                        xcall_out(px);
                    }
                    k0 = k + 1;
                }
            }
            if (st != RMACOLL_SUCCESS) {
                proxy_set_error(px, st);
            }
        }
        pthread_mutex_unlock(&px->lock);
    }
}

static void *proxy_main(void *arg)
{
    rmacoll__proxy_t *px = arg;
    unsigned idle = 0;

    while (!atomic_load_explicit(&px->stop, memory_order_acquire)) {
        int worked;
        int d;

        if (px->beat_ns != 0) {
            proxy_beat(px);
        }
        d = atomic_load(&px->driving);

        if (d > 0) {
            /* off the calling thread's path: parked on the driving word
             * until a wake-up (proxy_wake_parked) or the park's bound */
            atomic_store(&px->parked, 1);
            if (atomic_load(&px->driving) == d &&
                !atomic_load_explicit(&px->stop, memory_order_acquire)) {
                futex_wait(&px->driving, d, px->park_ns);
            }
            atomic_store(&px->parked, 0);
            continue;
        }
        pthread_mutex_lock(&px->lock);
        worked = proxy_drive_locked(px);
        pthread_mutex_unlock(&px->lock);
        /* poll hard while a call is in flight, gently between calls */
        if (worked) {
            idle = 0;
        } else if (++idle >= RMACOLL__POLLS_BEFORE_YIELD) {
            if (atomic_load_explicit(&px->active, memory_order_relaxed)) {
                sched_yield();
            } else {
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
            }
        }
    }
    return NULL;
}

rmacoll_status_t rmacoll__proxy_start(rmacoll__proxy_t *px,
                                      const rmacoll__tops_t *ops,
                                      rmacoll_transport_t *tp)
{
    int rc;

    px->ops = ops;
    px->tp = tp;
    atomic_store(&px->stop, 0);
    atomic_store(&px->status, RMACOLL_SUCCESS);
    atomic_store(&px->err_peer, -1);
    rc = pthread_create(&px->thread, NULL, proxy_main, px);
    if (rc != 0) {
        return rmacoll__fail(&px->fail, RMACOLL_ERR_NO_MEMORY,
                             "rank %d: cannot start the proxy thread: %s", px->rank,
                             strerror(rc));
    }
    px->started = 1;
    return RMACOLL_SUCCESS;
}

void rmacoll__proxy_fini(rmacoll__proxy_t *px)
{
    if (px->started) {
        atomic_store_explicit(&px->stop, 1, memory_order_release);
        futex_wake(&px->driving);
        pthread_join(px->thread, NULL);
        px->started = 0;
    }
    if (px->tp != NULL) {
        pthread_mutex_lock(&px->lock);
        proxy_later_locked(px); /* left by a call that returned at the stop */
        pthread_mutex_unlock(&px->lock);
    }
    pthread_mutex_destroy(&px->lock);
}

void rmacoll__proxy_set_active(rmacoll__proxy_t *px, int active)
{
    atomic_store(&px->active, active);
    /* a call that no thread drives needs the thread now, not after the
     * park left by the last blocking call (RMACOLL__PROXY_PARK_NS) */
    if (active) {
        proxy_wake_parked(px);
    }
}

rmacoll_status_t rmacoll__proxy_error(rmacoll__proxy_t *px, int *peer)
{
    int st = px->started ? atomic_load(&px->status) : RMACOLL_SUCCESS;

    *peer = st != RMACOLL_SUCCESS ? atomic_load(&px->err_peer) : -1;
    return (rmacoll_status_t)st;
}

static rmacoll_status_t proxy_submit_job(rmacoll__proxy_t *px, const rmacoll_put_t *puts,
                                         size_t n, int always)
{
    uint64_t posted = atomic_load_explicit(&px->jobs_posted, memory_order_relaxed);
    uint64_t start = rmacoll__now_ms();
    uint64_t done_seen = atomic_load_explicit(&px->jobs_done, memory_order_acquire);

    if (n == 0) {
        return RMACOLL_SUCCESS;
    }

    /* ring full: drive it from here (bounded by the timeout, counted from
     * the last job completed) */
    while (posted - atomic_load_explicit(&px->jobs_done, memory_order_acquire) >=
           RMACOLL__PROXY_RING) {
        uint64_t d = atomic_load_explicit(&px->jobs_done, memory_order_acquire);
        if (d != done_seen) {
            done_seen = d;
            start = rmacoll__now_ms();
        }
        if (rmacoll__now_ms() - start > px->timeout_ms) {
            return rmacoll__fail(&px->fail, RMACOLL_ERR_TIMEOUT,
                                 "rank %d: proxy thread stalled for %llu ms", px->rank,
                                 (unsigned long long)px->timeout_ms);
        }
        rmacoll__proxy_poll(px);
        sched_yield();
    }
    px->ring[posted % RMACOLL__PROXY_RING].puts = puts;
    px->ring[posted % RMACOLL__PROXY_RING].n = n;
    px->ring[posted % RMACOLL__PROXY_RING].always = always;
    atomic_store_explicit(&px->jobs_posted, posted + 1, memory_order_release);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__proxy_submit(rmacoll__proxy_t *px, const rmacoll_put_t *puts,
                                       size_t n)
{
    return proxy_submit_job(px, puts, n, 0);
}

rmacoll_status_t rmacoll__proxy_submit_always(rmacoll__proxy_t *px,
                                              const rmacoll_put_t *puts, size_t n)
{
    return proxy_submit_job(px, puts, n, 1);
}

rmacoll_status_t rmacoll__proxy_flush(rmacoll__proxy_t *px)
{
    uint64_t start = rmacoll__now_ms();
    uint64_t posted = atomic_load(&px->jobs_posted);
    size_t last_pending = SIZE_MAX;
    unsigned spins = 0;
    uint64_t last_watch = 0;

    if (!px->started) {
        return RMACOLL_SUCCESS;
    }
    rmacoll__proxy_drive(px, 1);
    for (;;) {
        int st = atomic_load(&px->status);
        size_t pending = 1;
        if (st != RMACOLL_SUCCESS) {
            int peer = atomic_load(&px->err_peer);
            rmacoll__proxy_drive(px, 0);
            if (peer >= 0 && st == RMACOLL_ERR_TIMEOUT) {
                return rmacoll__fail(&px->fail, (rmacoll_status_t)st,
                                     "rank %d: network transport failed towards rank %d "
                                     "(silent rank %d): %s", px->rank, peer, peer,
                                     rmacoll_status_string(st));
            }
            if (peer >= 0) {
                return rmacoll__fail(&px->fail, (rmacoll_status_t)st,
                                     "rank %d: network transport failed towards rank %d: %s",
                                     px->rank, peer, rmacoll_status_string(st));
            }
            return rmacoll__fail(&px->fail, (rmacoll_status_t)st,
                                 "rank %d: network transport failed: %s",
                                 px->rank, rmacoll_status_string(st));
        }
        /* trylock: a holder is the proxy thread's last turn, or a call into
         * the transport that does not return (then the watch or the
         * timeout below ends the flush) */
        if (pthread_mutex_trylock(&px->lock) == 0) {
            proxy_drive_locked(px);
            if (atomic_load_explicit(&px->jobs_done, memory_order_acquire) >= posted) {
                pending = px->ops->base.pending(px->tp);
            }
            pthread_mutex_unlock(&px->lock);
            if (pending == 0) {
                rmacoll__proxy_drive(px, 0);
                return RMACOLL_SUCCESS;
            }
            if (pending < last_pending) {
                last_pending = pending; /* progress: the timeout counts silence */
                start = rmacoll__now_ms();
            }
        }
        /* a quarter more than a transport's own limit on incomplete puts
         * (timeout_ms), whose error names the silent peer */
        if (rmacoll__now_ms() - start > px->timeout_ms + px->timeout_ms / 4) {
            rmacoll__proxy_drive(px, 0);
            return rmacoll__fail(&px->fail, RMACOLL_ERR_TIMEOUT,
                                 "rank %d: %zu network puts still incomplete after "
                                 "%llu ms", px->rank, pending,
                                 (unsigned long long)(rmacoll__now_ms() - start));
        }
        if (++spins >= RMACOLL__POLLS_BEFORE_YIELD) {
            uint64_t now = rmacoll__now_ms();

            if (px->watch != NULL && now != last_watch) {
                rmacoll_status_t wst;

                last_watch = now;
                wst = px->watch(px->watch_ctx);
                if (wst != RMACOLL_SUCCESS) {
                    rmacoll__proxy_drive(px, 0);
                    return wst;
                }
            }
            sched_yield();
        }
    }
}

rmacoll_status_t rmacoll__proxy_register(rmacoll__proxy_t *px, const void *buf,
                                         uint64_t bytes, rmacoll_mem_t **mem,
                                         rmacoll_rkey_t *rkey)
{
    return rmacoll__proxy_register_type(px, buf, bytes, RMACOLL_MEM_HOST, mem, rkey);
}

rmacoll_status_t rmacoll__proxy_register_type(rmacoll__proxy_t *px, const void *buf,
                                              uint64_t bytes, rmacoll_memtype_t type,
                                              rmacoll_mem_t **mem, rmacoll_rkey_t *rkey)
{
    rmacoll_status_t st;
    uint64_t bound;

    if (px->tp == NULL || bytes == 0 || buf == NULL) {
        return RMACOLL_SUCCESS;
    }
    bound = rmacoll__proxy_self_limit_ms(px);
    if (proxy_lock_within(px, (int)bound) != 0) {
        const char *call = atomic_load(&px->xcall_what);

        return rmacoll__fail(&px->fail, RMACOLL_ERR_TIMEOUT,
                             "rank %d: cannot register %llu bytes with %s: this rank's own "
                             "call into it (%s) has not returned for %llu ms; no peer can "
                             "be blamed", px->rank, (unsigned long long)bytes, px->ops->name,
                             call != NULL ? call : "?", (unsigned long long)bound);
    }
    xcall_in(px, "mem_register");
    st = px->ops->mem.mem_register(px->tp, (void *)buf, bytes, type, mem, rkey);
    xcall_out(px);
    pthread_mutex_unlock(&px->lock);
    return st;
}

void rmacoll__proxy_deregister(rmacoll__proxy_t *px, rmacoll_mem_t *mem)
{
    if (mem != NULL && px->tp != NULL) {
        if (proxy_lock_within(px, RMACOLL__PROXY_REVOKE_WAIT_MS) != 0) {
            /* a transport call holds the lock and has not returned: the
             * lock's next holder deregisters it (no call of this
             * communicator waits for that) */
            for (int k = 0; k < RMACOLL__PROXY_LATER; k++) {
                rmacoll_mem_t *none = NULL;

                if (atomic_compare_exchange_strong(&px->dereg_later[k], &none, mem)) {
                    atomic_store(&px->later, 1);
                    rmacoll__log(px->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_PROXY,
                                 "rank %d: a registration is released later: a call into "
                                 "%s has not returned for %d ms", px->rank, px->ops->name,
                                 RMACOLL__PROXY_REVOKE_WAIT_MS);
                    return;
                }
            }
            pthread_mutex_lock(&px->lock); /* every slot taken: wait */
        }
        {
            rmacoll_mem_t *m = mem;

            /* a deferred revocation of it has nothing left to revoke */
            (void)atomic_compare_exchange_strong(&px->revoke_later, &m, NULL);
        }
        xcall_in(px, "mem_deregister");
        px->ops->mem.mem_deregister(px->tp, mem);
        xcall_out(px);
        pthread_mutex_unlock(&px->lock);
    }
}

rmacoll_status_t rmacoll__proxy_revoke(rmacoll__proxy_t *px, rmacoll_mem_t *mem,
                                       const char *what)
{
    rmacoll_status_t st;

    if (mem == NULL || px->tp == NULL) {
        return RMACOLL_SUCCESS;
    }
    if (proxy_lock_within(px, RMACOLL__PROXY_REVOKE_WAIT_MS) != 0) {
        /* a call into the transport has not returned (a provider call that
         * spins or blocks): the next holder of the lock revokes it before
         * it drives the network (proxy_drive_locked) */
        rmacoll_mem_t *none = NULL;
        const char *call = atomic_load(&px->xcall_what);

        int taken = atomic_compare_exchange_strong(&px->revoke_later, &none, mem);

        atomic_store(&px->later, 1);
        if (!taken && none != mem) {
            rmacoll__log(px->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_PROXY,
                         "rank %d: the %s's registration cannot be revoked: %s's %s has "
                         "not returned for %d ms, and another revocation waits for it",
                         px->rank, what, px->ops->name, call != NULL ? call : "call",
                         RMACOLL__PROXY_REVOKE_WAIT_MS);
        } else {
            rmacoll__log(px->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_PROXY,
                         "rank %d: the %s's registration is revoked later: %s's %s has not "
                         "returned for %d ms; it is revoked when that call returns, before "
                         "this rank drives the network again (a provider that lands writes "
                         "without this rank's progress may land one meanwhile)", px->rank, what,
                         px->ops->name, call != NULL ? call : "call",
                         RMACOLL__PROXY_REVOKE_WAIT_MS);
        }
        return RMACOLL_ERR_TIMEOUT;
    }
    if (px->started) {
        proxy_drive_locked(px); /* the abort puts go out first */
    }
    xcall_in(px, "mem_revoke");
    st = px->ops->mem.mem_revoke(px->tp, mem);
    xcall_out(px);
    pthread_mutex_unlock(&px->lock);
    if (st == RMACOLL_ERR_UNSUPPORTED) {
        rmacoll__log(px->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_PROXY,
                     "rank %d: transport %s cannot revoke the registration of the %s: "
                     "a network peer that resumes may still write into it", px->rank,
                     px->ops->name, what);
    } else if (st != RMACOLL_SUCCESS) {
        rmacoll__log(px->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_PROXY,
                     "rank %d: revoking the registration of the %s with %s failed: %s: "
                     "a network peer may still write into it", px->rank, what,
                     px->ops->name, rmacoll_status_string(st));
    }
    return st;
}
