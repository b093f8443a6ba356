/*
 * proxy.h - the proxy of a communicator: the one owner of every call into
 * the network (PROXY-path) transport. Its thread posts the proxyPut queues
 * a calling thread hands it (in order, through a single-producer ring) and
 * drives progress() continuously, so that manual-progress providers
 * deliver incoming data and signals even while the calling thread copies
 * or waits. A waiting thread may drive it too (rmacoll__proxy_poll).
 *
 * Threading: one producer (the thread making the call, or the staging
 * worker while it runs a call) submits; lock serialises every transport
 * call; status and err_peer are read by any thread.
 */
#ifndef RMACOLL_CORE_PROXY_H
#define RMACOLL_CORE_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/fail.h"
#include "core/base/log.h"
#include "core/xport/transport.h"

#define RMACOLL__PROXY_RING 1024

/* Polls of the network a waiting thread makes before each sched_yield.
 * A poll of tcp;ofi_rxm is a poll(2) over its sockets (about 3 us); on a
 * host with more busy ranks than cores, a waiter that polls 256 times
 * before yielding keeps its core about 1 ms while the peer it waits for
 * sits in the same run queue (4 ranks on 2 cores, 1 KiB per rank over
 * tcp;ofi_rxm: 930 us per call at 256 polls, about 210 us at 8). With a
 * core to itself, sched_yield returns at once (a syscall, ~0.3 us). */
#define RMACOLL__POLLS_BEFORE_YIELD 8

/* While a calling thread drives, the proxy thread parks on a futex
 * instead of waking to check (no wake-up of it competes with the ranks
 * for their cores). The last driver's stop wakes it at once (a hand-over
 * to a long copy in run_host.c, the end of a device call's wait), as does
 * a call no thread drives (set_active); a blocking call's end does not
 * (drive_end: a context switch per call saved), and it resumes its
 * between-calls polling within this bound. Measured: docs/protocol.md,
 * who drives. */
#define RMACOLL__PROXY_PARK_NS 5000000L

/* A waiter checks the bootstrap connection for a dead rank's report every
 * RMACOLL__BS_POLL_MS (one recv with MSG_PEEK), and fails
 * RMACOLL__BS_GRACE_MS after the report if its word has not come. */
#define RMACOLL__BS_POLL_MS 10
#define RMACOLL__BS_GRACE_MS 100
/* How long rmacoll_comm_destroy of a broken communicator flushes its last
 * network puts (the abort word it passes on): puts to live peers complete
 * in milliseconds (their proxies progress between calls too); those to a
 * dead or stopped peer never do. */
#define RMACOLL__DESTROY_FLUSH_MS 500

/* How long a revocation after a failure waits for the transport's lock
 * (held by a call into the transport) before it leaves the revocation to
 * the lock's next holder. */
#define RMACOLL__PROXY_REVOKE_WAIT_MS 200
#define RMACOLL__PROXY_LATER 8 /* deregistrations left to the lock's next holder */

typedef struct rmacoll__proxy_job {
    const rmacoll_put_t *puts;
    size_t n;
    int always; /* posted after this rank's own failure too (the abort word) */
} rmacoll__proxy_job_t;

typedef struct rmacoll__proxy {
    const rmacoll__tops_t *ops;       /* the network transport, or NULL */
    rmacoll_transport_t *tp;
    int rank;
    uint64_t timeout_ms;
    rmacoll__logger_t *log;
    rmacoll__fail_t fail;             /* into the communicator's last error */

    pthread_t thread;
    int started;
    pthread_mutex_t lock;             /* every call into the transport */
    _Atomic int stop;
    _Atomic int active;               /* a call is in flight: poll hard */
    _Atomic int driving;              /* a calling thread drives: stay off
                                       * (the thread parks on this word) */
    _Atomic int parked;               /* the thread sleeps on `driving` */
    long park_ns;                     /* RMACOLL__PROXY_PARK_NS (tests raise it) */
    /* heartbeat (rmacoll__proxy_beat_set): every beat_ns the thread raises
     * *beat_word and puts it to the network peers (beat_puts) */
    uint64_t beat_ns, next_beat_ns;
    volatile uint64_t *beat_word;
    const rmacoll_put_t *beat_puts;
    size_t beat_n;
    _Atomic int beat_skip;            /* a peer no beat goes to (its process has
                                       * exited), or -1 */
    /* flush's watch (rmacoll__proxy_watch_set): a failure elsewhere (the
     * abort word, a dead or stopped rank) ends a flush whose puts a dead
     * or stopped target would never complete */
    rmacoll_status_t (*watch)(void *ctx);
    void *watch_ctx;
    /* the watch on this rank's own transport calls (rmacoll__proxy_stuck):
     * xcalls rises by one as a call into the transport under the lock
     * starts and again as it returns (odd: inside one), xcall_what names
     * it; a network peer's heartbeat reaches this rank only through those
     * calls */
    _Atomic uint64_t xcalls;
    const char *_Atomic xcall_what;
    _Atomic int stall_armed;          /* RMACOLL_TEST_FAULT=stall (fault.h) */
    /* a revocation that found the lock held past RMACOLL__PROXY_REVOKE_WAIT_MS
     * (a transport call that does not return): done by the lock's next
     * holder before it drives the network */
    rmacoll_mem_t *_Atomic revoke_later;
    rmacoll_mem_t *_Atomic dereg_later[RMACOLL__PROXY_LATER]; /* the same, deregistrations */
    _Atomic int later;                /* set after either is filled: the drive's one check */
    _Atomic uint64_t jobs_posted;     /* written by the producer */
    _Atomic uint64_t jobs_done;       /* written by whoever drives */
    _Atomic int status;               /* first error of the transport */
    _Atomic int err_peer;
    rmacoll__proxy_job_t ring[RMACOLL__PROXY_RING];
} rmacoll__proxy_t;

/** Initialises px without a transport (every op a no-op until bound). */
void rmacoll__proxy_init(rmacoll__proxy_t *px, int rank, uint64_t timeout_ms,
                         rmacoll__logger_t *log, char *errbuf, size_t errlen);
/** Binds the network transport and starts the thread. */
rmacoll_status_t rmacoll__proxy_start(rmacoll__proxy_t *px,
                                      const rmacoll__tops_t *ops,
                                      rmacoll_transport_t *tp);
/** Joins the thread (if started) and releases the lock. */
void rmacoll__proxy_fini(rmacoll__proxy_t *px);

/** watch(ctx), called by rmacoll__proxy_flush about every millisecond,
 *  returns a failure (recorded by it) that ends the flush, or SUCCESS. */
void rmacoll__proxy_watch_set(rmacoll__proxy_t *px, rmacoll_status_t (*watch)(void *ctx),
                              void *ctx);

/** Before rmacoll__proxy_start: the thread raises *word every beat_ms / 4
 *  (0: no heartbeat) and posts the n puts (8 bytes each, of *word, into
 *  the network peers' beat slots) after each rise, also between calls. */
void rmacoll__proxy_beat_set(rmacoll__proxy_t *px, uint64_t beat_ms,
                             volatile uint64_t *word, const rmacoll_put_t *puts, size_t n);

/** No more heartbeat puts to peer, whose process has exited (a write into
 * a dead process's region can spin forever in libfabric 1.17's shm
 * provider, on a region lock the process held when it died). Any thread;
 * takes no lock (the proxy thread may be inside the transport). */
void rmacoll__proxy_beat_skip(rmacoll__proxy_t *px, int peer);

/** What a watcher of the proxy's transport calls keeps between looks. */
typedef struct rmacoll__proxy_look {
    uint64_t xcalls; /* the count at the last look */
    uint64_t since;  /* when (ms) it was first seen at that odd value */
} rmacoll__proxy_look_t;

/** How long (ms) one call into the network transport has been running, as
 * seen by looks at now_ms (one watcher per look state, any thread): 0 when
 * none runs or the call changed since the last look. *what names the call
 * (post_puts, progress, mem_register ...) when it is not 0. */
uint64_t rmacoll__proxy_stuck(const rmacoll__proxy_t *px, rmacoll__proxy_look_t *look,
                              uint64_t now_ms, const char **what);

/** How long (ms) one call into the network transport may run before it
 * counts as stuck (the wait fails naming no peer; a registration stops
 * waiting for the lock): eight heartbeat periods, so that a call held up by
 * backpressure on a loaded host is not taken for a stuck one (a heartbeat
 * post ran 1.8 s with 16 ranks on 2 cores over tcp;ofi_rxm); at most three
 * quarters of timeout_ms (a wait's own timeout, which names the peer
 * waited for, must not come first); never under 1.75 periods. Without a
 * heartbeat: timeout_ms, at most a minute. */
uint64_t rmacoll__proxy_self_limit_ms(const rmacoll__proxy_t *px);

/** Hands a queue of puts to the proxy, in order; puts stay borrowed until
 * rmacoll__proxy_flush returned. */
rmacoll_status_t rmacoll__proxy_submit(rmacoll__proxy_t *px,
                                       const rmacoll_put_t *puts, size_t n);
/** As rmacoll__proxy_submit, for the abort word's puts: posted even once
 * the transport failed on this rank (its first error stops every other
 * job), best effort: a failed post changes nothing. Without it a rank
 * whose own hand-over failed told no network peer, which then learnt only
 * from its heartbeat's stop or at a timeout. */
rmacoll_status_t rmacoll__proxy_submit_always(rmacoll__proxy_t *px,
                                              const rmacoll_put_t *puts, size_t n);
/** Drives the network once from a waiting thread, unless another thread
 * is driving it right now (trylock). */
void rmacoll__proxy_poll(rmacoll__proxy_t *px);
/** A calling thread starts (1) or stops (0) driving the network itself
 * while it waits: the proxy thread stays off the lock (parked)
 * meanwhile, and is woken when the last driver stops. */
void rmacoll__proxy_drive(rmacoll__proxy_t *px, int on);
/** rmacoll__proxy_drive(px, 0) at a blocking call's end: the parked
 * proxy thread is not woken (it resumes within RMACOLL__PROXY_PARK_NS). */
void rmacoll__proxy_drive_end(rmacoll__proxy_t *px);
/** Waits until every job is posted and no put is pending (sources
 * reusable); fails with the transport's error or after timeout_ms. */
rmacoll_status_t rmacoll__proxy_flush(rmacoll__proxy_t *px);
/** The transport's first error (RMACOLL_SUCCESS if none); *peer receives
 * the rank it names, or -1. */
rmacoll_status_t rmacoll__proxy_error(rmacoll__proxy_t *px, int *peer);
/** Marks a call in flight (1) or not (0): the thread polls hard or gently.
 * Marking one in flight while no thread drives wakes a parked thread. */
void rmacoll__proxy_set_active(rmacoll__proxy_t *px, int active);

/** mem_register / mem_deregister of the network transport under the lock;
 * no-op success without a transport, a zero size or a NULL buffer. */
rmacoll_status_t rmacoll__proxy_register(rmacoll__proxy_t *px, const void *buf,
                                         uint64_t bytes, rmacoll_mem_t **mem,
                                         rmacoll_rkey_t *rkey);
/** The same for memory of `type` (RMACOLL_MEM_CUDA: device memory, for a
 * transport with RMACOLL_TCAP_HMEM). */
rmacoll_status_t rmacoll__proxy_register_type(rmacoll__proxy_t *px, const void *buf,
                                              uint64_t bytes, rmacoll_memtype_t type,
                                              rmacoll_mem_t **mem, rmacoll_rkey_t *rkey);
/** mem_deregister under the lock; when a call into the transport holds it
 * past RMACOLL__PROXY_REVOKE_WAIT_MS, the lock's next holder (at the
 * latest rmacoll__proxy_fini) deregisters mem instead. */
void rmacoll__proxy_deregister(rmacoll__proxy_t *px, rmacoll_mem_t *mem);
/** After a failure that broke the communicator: posts the jobs handed over
 * so far (the abort puts), then revokes mem (mem_revoke: no remote write
 * lands in it from now on). `what` names the memory in the log. When a
 * call into the transport holds the lock past RMACOLL__PROXY_REVOKE_WAIT_MS,
 * the lock's next holder revokes mem before it drives the network, and
 * this returns RMACOLL_ERR_TIMEOUT. Returns
 * RMACOLL_ERR_UNSUPPORTED when the transport cannot (logged at WARN);
 * no-op success for a NULL mem or without a transport. */
rmacoll_status_t rmacoll__proxy_revoke(rmacoll__proxy_t *px, rmacoll_mem_t *mem,
                                       const char *what);

#endif /* RMACOLL_CORE_PROXY_H */
