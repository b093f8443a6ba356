/*
 * wait.c - the one wait on a signal word every step uses (its silence
 * timeout, the chain of waits that names a silent rank, the abort word and
 * the bootstrap's report of a dead rank), the abort word itself, the
 * receive gate and the progress count (the header words of the control
 * window, ctrl.h).
 */
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/base/proc.h"
#include "core/exec/call.h"
#include "core/exec/state.h"
#include "core/plan/topo.h"

static uint64_t load_acquire(const volatile uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

/* The progress count in the header of a control window. */
static volatile uint64_t *progress_word(void *ctrl_base)
{
    return (volatile uint64_t *)((char *)ctrl_base + RMACOLL__CTRL_PROGRESS_OFF);
}

/*
 * What a waiter can see of progress, summed: the awaited word itself (a
 * transfer in chunks raises it once per chunk), every signal word of this
 * rank (any peer still delivering to it), and, when the awaited peer is a
 * node peer, that peer's progress count (a relay busy forwarding for other
 * ranks raises it with each wait it completes). A network peer's own
 * progress is visible only through the words it raises here.
 */
static uint64_t progress_seen(const rmacoll_comm_t *comm, const volatile uint64_t *word,
                              int peer)
{
    uint64_t sum = load_acquire(word);

    for (uint32_t k = 0; k < comm->lay.nsig; k++) {
        sum += __atomic_load_n(&comm->signals[k], __ATOMIC_RELAXED);
    }
    if (peer >= 0 && peer < comm->nranks && peer != comm->rank &&
        comm->peer_ctrl[peer].addr != NULL) {
        sum += __atomic_load_n(progress_word(comm->peer_ctrl[peer].addr), __ATOMIC_RELAXED);
    }
    return sum;
}

static volatile uint64_t *hdr_word(void *ctrl_base, size_t off)
{
    return (volatile uint64_t *)((char *)ctrl_base + off);
}

int rmacoll__abort_seen(const rmacoll_comm_t *comm, char *buf, size_t len)
{
    uint64_t w = __atomic_load_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_ABORT_OFF),
                                 __ATOMIC_ACQUIRE);
    int culprit;

    if (w == 0) {
        return 0;
    }
    culprit = rmacoll__abort_culprit(w);
    if (rmacoll__abort_origin(w) == comm->rank &&
        rmacoll__abort_code(w) == RMACOLL_ERR_ABORTED) {
        snprintf(buf, len, "the communicator was aborted on this rank (rmacoll_comm_abort)");
    } else if (culprit >= 0) {
        snprintf(buf, len, "secondary error: rank %d failed first (%s, silent rank %d)",
                 rmacoll__abort_origin(w),
                 rmacoll_status_name((rmacoll_status_t)rmacoll__abort_code(w)), culprit);
    } else {
        snprintf(buf, len, "secondary error: rank %d failed first (%s)",
                 rmacoll__abort_origin(w),
                 rmacoll_status_name((rmacoll_status_t)rmacoll__abort_code(w)));
    }
    return 1;
}

rmacoll_status_t rmacoll__abort_status(const rmacoll_comm_t *comm)
{
    uint64_t w = __atomic_load_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_ABORT_OFF),
                                 __ATOMIC_ACQUIRE);

    return w != 0 && rmacoll__abort_origin(w) == comm->rank &&
                   rmacoll__abort_code(w) == RMACOLL_ERR_ABORTED
               ? RMACOLL_ERR_ABORTED
               : RMACOLL_ERR_PEER;
}

void rmacoll__abort_broadcast(rmacoll_comm_t *comm, rmacoll_status_t st)
{
    volatile uint64_t *own = hdr_word(comm->ctrl.addr, RMACOLL__CTRL_ABORT_OFF);
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    uint64_t w = rmacoll__abort_word((int)st, comm->rank, comm->fail_culprit);
    uint64_t zero = 0;
    int dead_word;

    if (comm->fail_culprit >= 0 && comm->fail_culprit == comm->dead_rank) {
        w |= RMACOLL__ABORT_DEAD;
    }
    /* the first failure known here wins: a secondary one passes it on */
    __atomic_compare_exchange_n(own, &zero, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    w = __atomic_load_n(own, __ATOMIC_ACQUIRE);
    /* the word says whose process has exited: no write goes there, nor
     * any further heartbeat */
    dead_word = (w & RMACOLL__ABORT_DEAD) ? rmacoll__abort_culprit(w) : -1;
    if (dead_word >= 0 && comm->dead_rank < 0) {
        comm->dead_rank = dead_word;
        rmacoll__proxy_beat_skip(&comm->proxy, dead_word);
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        if (j != comm->rank && comm->peer_ctrl[j].addr != NULL) {
            zero = 0;
            __atomic_compare_exchange_n(hdr_word(comm->peer_ctrl[j].addr,
                                                 RMACOLL__CTRL_ABORT_OFF),
                                        &zero, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        }
    }
    if (comm->nnet > 0 && comm->proxy.started && comm->ctrl_mem != NULL) {
        size_t n = 0;
        for (int k = 0; k < comm->nnet; k++) {
            int p = comm->net_list[k];
            rmacoll_put_t *put = &comm->abort_puts[n];
            if (p == comm->dead_rank || p == dead_word) {
                /* its process has exited: nobody reads the word there, and
                 * a write into a dead process's region can spin forever in
                 * libfabric 1.17's shm provider (on a region lock the
                 * process held when it died; test_safety, CI) */
                continue;
            }
            n++;
            memset(put, 0, sizeof(*put));
            put->peer = p;
            put->src = (const char *)comm->ctrl.addr + RMACOLL__CTRL_ABORT_OFF;
            put->src_mem = comm->ctrl_mem;
            put->bytes = 8;
            put->dst_rkey = &comm->peer_ctrl_rkey[p];
            put->dst_addr = put->dst_rkey->addr + RMACOLL__CTRL_ABORT_OFF;
            put->sig_index = RMACOLL_NO_SIGNAL;
        }
        /* best effort: a failed network is the likely cause; posted even
         * after this rank's own transport error (the peers' one fast sign) */
        if (n > 0 && rmacoll__proxy_submit_always(&comm->proxy, comm->abort_puts, n) ==
            RMACOLL_SUCCESS) {
            rmacoll__proxy_poll(&comm->proxy);
        }
    }
}

void rmacoll__gate_open(rmacoll_comm_t *comm, uint64_t epoch)
{
    __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_OPEN_OFF), epoch,
                     __ATOMIC_SEQ_CST);
}

int rmacoll__gate_close(rmacoll_comm_t *comm)
{
    volatile uint64_t *busy = hdr_word(comm->ctrl.addr, RMACOLL__CTRL_BUSY_OFF);
    uint64_t start = rmacoll__now_ms(), n;

    __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_OPEN_OFF), 0,
                     __ATOMIC_SEQ_CST);
    while ((n = __atomic_load_n(busy, __ATOMIC_SEQ_CST)) != 0) {
        if (rmacoll__now_ms() - start > comm->cfg.timeout_ms) {
            rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: %llu node peer(s) still inside a copy into this "
                         "rank's receive buffer after %llu ms (stopped between their "
                         "check and their copy): it may still be written",
                         comm->rank, (unsigned long long)n,
                         (unsigned long long)comm->cfg.timeout_ms);
            return (int)n;
        }
        sched_yield();
    }
    return 0;
}

/* The rank at the end of a chain of waits that starts at node peer
 * `peer` (each waiting rank publishes whom it waits for): the silent rank
 * itself, or the first rank of the chain that is not a node peer. */
static int wait_chain_end(const rmacoll_comm_t *comm, int peer)
{
    int x = peer;

    /* a live waiter samples every timeout_ms / 16: a heartbeat older than
     * a quarter of the timeout is a stopped (or dead) one */
    uint64_t stale = comm->cfg.timeout_ms / 4 + 20;

    for (int step = 0; step < comm->nranks; step++) {
        uint64_t w, hb;
        int y;
        if (x < 0 || x >= comm->nranks || x == comm->rank ||
            comm->peer_ctrl[x].addr == NULL) {
            break;
        }
        w = __atomic_load_n(hdr_word(comm->peer_ctrl[x].addr, RMACOLL__CTRL_WAITING_OFF),
                            __ATOMIC_RELAXED);
        hb = __atomic_load_n(hdr_word(comm->peer_ctrl[x].addr,
                                      RMACOLL__CTRL_HEARTBEAT_OFF), __ATOMIC_RELAXED);
        y = (int)w - 1;
        if (w == 0 || y == comm->rank || y == x || y < 0 || y >= comm->nranks ||
            rmacoll__now_ms() - hb > stale) {
            break;
        }
        x = y;
    }
    return x;
}

/* Heartbeat count of rank j as this rank sees it: a node peer's from its
 * window header, a network peer's from this rank's beat slot; 0 when there
 * is none (no proxy thread there, or j is neither). */
static uint64_t beat_of(const rmacoll_comm_t *comm, int j)
{
    int k;

    if (comm->peer_ctrl[j].addr != NULL) {
        return __atomic_load_n(hdr_word(comm->peer_ctrl[j].addr, RMACOLL__CTRL_BEAT_OFF),
                               __ATOMIC_ACQUIRE);
    }
    k = comm->net_index[j];
    if (k < 0) {
        return 0;
    }
    return __atomic_load_n((const volatile uint64_t *)((const char *)comm->ctrl.addr +
                                                       comm->lay.off_beat +
                                                       (size_t)k * sizeof(uint64_t)),
                           __ATOMIC_ACQUIRE);
}

/* The first rank (node peer or network peer) whose heartbeat has not risen
 * for 1.75 heartbeat periods (seven beats) while this rank watched, or -1;
 * *age: how long. A rank that never beat (no proxy thread) is not watched.
 * Scans every period / 16, so that a stop is reported within two periods
 * of it. When this rank itself did not scan for half a period (it was
 * descheduled, stopped, busy outside a wait), what it saw before proves
 * nothing: every rank's watch restarts from now. A network peer's beat
 * arrives only through this rank's own calls into the transport: while one
 * of them has run for half a period (a provider call that spins or blocks),
 * the network peers' silence proves nothing either, and when it has run
 * past rmacoll__proxy_self_limit_ms, BEAT_SELF (*age: how long, *what: the call), unless
 * it is a registration (mem_*). */
#define BEAT_SELF (-2)

static int beat_stale(rmacoll_comm_t *comm, uint64_t now, uint64_t *age, const char **what)
{
    uint64_t period = comm->beat_ms, stuck;
    int restart;

    if (period == 0 || now < comm->beat_next_scan) {
        return -1;
    }
    restart = comm->beat_last_scan == 0 || now - comm->beat_last_scan > period / 2;
    comm->beat_last_scan = now;
    comm->beat_next_scan = now + (period / 16 ? period / 16 : 1);
    stuck = rmacoll__proxy_stuck(&comm->proxy, &comm->beat_look, now, what);
    for (int j = 0; j < comm->nranks; j++) {
        uint64_t v;

        if (j == comm->rank || (v = beat_of(comm, j)) == 0) {
            continue;
        }
        if (restart || v != comm->beat_seen[j] ||
            (stuck > period / 2 && comm->peer_ctrl[j].addr == NULL)) {
            comm->beat_seen[j] = v;
            comm->beat_when[j] = now;
        } else if (now - comm->beat_when[j] > 2 * period - period / 4) {
            *age = now - comm->beat_when[j];
            return j;
        }
    }
    /* a registration may take seconds (pinning a large buffer): no
     * evidence about the peers while it runs, but no failure either (the
     * wait's own timeout_ms bounds it) */
    if (stuck > rmacoll__proxy_self_limit_ms(&comm->proxy) &&
        !(*what != NULL && strncmp(*what, "mem_", 4) == 0)) {
        *age = stuck;
        return BEAT_SELF;
    }
    return -1;
}

/* The failure of a stale heartbeat (beat_stale's s and age), while this
 * rank was doing `doing`. */
static rmacoll_status_t beat_fail(rmacoll_comm_t *comm, int s, uint64_t age,
                                  const char *call, const char *doing)
{
    if (s == BEAT_SELF) {
        /* no culprit: the abort word says "unknown" */
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_TIMEOUT,
                             "rank %d: this rank's own call into the network transport "
                             "(%s %s) has not returned for %llu ms (heartbeat_ms %llu): the "
                             "network peers' heartbeats and data cannot arrive meanwhile, so "
                             "no peer can be blamed, while %s",
                             comm->rank, comm->proxy.ops != NULL ? comm->proxy.ops->name : "",
                             call != NULL ? call : "?", (unsigned long long)age,
                             (unsigned long long)comm->beat_ms, doing);
    }
    comm->fail_culprit = s;
    return rmacoll__fail(&comm->fail, RMACOLL_ERR_TIMEOUT,
                         "rank %d: rank %d sent no heartbeat for %llu ms (heartbeat_ms %llu: "
                         "stopped or dead; silent rank %d) while %s",
                         comm->rank, s, (unsigned long long)age,
                         (unsigned long long)comm->beat_ms, s, doing);
}

/* The proxy's flush watch (rmacoll__proxy_watch_set; comm.c sets it): the
 * end of a host call waits for its network puts to complete, which a dead
 * or stopped target (shm completes writes by the target's progress) never
 * does; the same signs of a failure elsewhere as a wait ends it: the abort
 * word, a stopped heartbeat, the bootstrap root's report of a dead rank. */
rmacoll_status_t rmacoll__flush_watch(void *ctx)
{
    rmacoll_comm_t *comm = ctx;
    char sec[256];
    uint64_t age = 0;
    const char *call = NULL;
    int s, dead = -1;

    if (comm->destroy_flush_until_ms != 0) {
        /* destroy of a broken communicator: its last puts are the abort
         * word it passes on, which a peer still waiting needs (else it
         * sees only this rank's heartbeat stop, and blames it); puts to a
         * dead or stopped peer never complete, so the flush ends at the
         * bound, quietly (destroy returns no error for it) */
        return rmacoll__now_ms() < comm->destroy_flush_until_ms ? RMACOLL_SUCCESS
                                                               : RMACOLL_ERR_TIMEOUT;
    }
    /* another rank's failure ends it; this rank's own abort word does not:
     * the puts being flushed may be the ones that carry it to the peers */
    if (rmacoll__abort_origin(__atomic_load_n(hdr_word(comm->ctrl.addr,
                                                       RMACOLL__CTRL_ABORT_OFF),
                                              __ATOMIC_ACQUIRE)) != comm->rank &&
        rmacoll__abort_seen(comm, sec, sizeof(sec))) {
        return rmacoll__fail_secondary(&comm->fail, rmacoll__abort_status(comm),
                                       "rank %d: %s; stopped waiting for this rank's network "
                                       "puts to complete", comm->rank, sec);
    }
    s = beat_stale(comm, rmacoll__now_ms(), &age, &call);
    if (s != -1) {
        return beat_fail(comm, s, age, call, "this rank's network puts were completing");
    }
    if (rmacoll__death_poll(comm, &dead, sec, sizeof(sec))) {
        return rmacoll__fail_reported(comm, dead, -1, sec, "stopped waiting for this rank's "
                                      "network puts to complete");
    }
    return RMACOLL_SUCCESS;
}

/*
 * The timeout counts silence, not total time: the wait fails when nothing
 * it can see (progress_seen) has moved for timeout_ms. A slow transfer
 * that keeps delivering chunks never times out; a stopped or dead peer is
 * reported timeout_ms (+ one sampling period, timeout_ms / 16) after its
 * last sign of life. A timeout names the awaited peer and, when that node
 * peer is itself waiting, the rank at the end of the chain ("silent rank
 * S"); the abort word of a rank that failed first ends the wait at once
 * (a secondary error, RMACOLL_ERR_PEER, naming that rank and its cause).
 */
rmacoll_status_t rmacoll__wait_word(rmacoll_comm_t *comm,
                                    const volatile uint64_t *word,
                                    uint64_t value, int peer, const char *what)
{
    return rmacoll__wait_word_for(comm, word, value, peer, what, comm->cfg.timeout_ms);
}

rmacoll_status_t rmacoll__wait_word_for(rmacoll_comm_t *comm, const volatile uint64_t *word,
                                        uint64_t value, int peer, const char *what,
                                        uint64_t timeout_ms)
{
    return rmacoll__wait_word_or(comm, word, value, peer, what, timeout_ms, NULL, NULL);
}

rmacoll_status_t rmacoll__fail_reported(rmacoll_comm_t *comm, int dead, int fallback,
                                        const char *report, const char *then_fmt, ...)
{
    char then[256];
    va_list ap;

    va_start(ap, then_fmt);
    vsnprintf(then, sizeof(then), then_fmt, ap);
    va_end(ap);
    comm->fail_culprit = dead >= 0 ? dead : fallback;
    if (dead >= 0) {
        comm->dead_rank = dead;
        rmacoll__proxy_beat_skip(&comm->proxy, dead);
    }
    return rmacoll__fail_secondary(&comm->fail, RMACOLL_ERR_PEER, "rank %d: %s; %s",
                                   comm->rank, report, then);
}

int rmacoll__death_poll(rmacoll_comm_t *comm, int *dead, char *report, size_t len)
{
    char sec[160];
    int k;

    if (rmacoll__bootstrap_poll_error(comm->bs, dead, sec, sizeof(sec)) != RMACOLL_SUCCESS) {
        snprintf(report, len, "the bootstrap root reports: %s", sec);
        return RMACOLL__DEATH_REPORTED;
    }
    while ((k = rmacoll__proc_watch_exited(comm->watch_fd, comm->nwatch)) >= 0) {
        int j = comm->watch_rank[k];
        void *h = comm->peer_ctrl[j].addr;
        uint64_t pid = __atomic_load_n(hdr_word(h, RMACOLL__CTRL_PID_OFF), __ATOMIC_RELAXED);

        if (!rmacoll__proc_exited((long)pid,
                                  __atomic_load_n(hdr_word(h, RMACOLL__CTRL_START_OFF),
                                                  __ATOMIC_RELAXED))) {
            /* readable, yet the process runs: not our pidfd any more (the
             * application closed it and the number was reused): drop the
             * watch, leaving the fd to whoever owns it now */
            comm->watch_fd[k] = comm->watch_fd[--comm->nwatch];
            comm->watch_rank[k] = comm->watch_rank[comm->nwatch];
            continue;
        }
        if (__atomic_load_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_ABORT_OFF),
                            __ATOMIC_ACQUIRE) != 0) {
            /* a failure known first (the dead rank may have failed, named
             * its culprit and exited): the caller's check of the abort
             * word names it */
            return 0;
        }
        *dead = j;
        snprintf(report, len, "the process of node peer rank %d (pid %llu) has exited: "
                 "killed, crashed or left without rmacoll_comm_destroy (dead rank %d)", j,
                 (unsigned long long)pid, j);
        return RMACOLL__DEATH_WATCHED;
    }
    return 0;
}

/* A broken connection (the transport's RMACOLL_ERR_TRANSPORT) is often a
 * dead process at its other end, which the bootstrap root sees too (the
 * dead rank's socket to it closes) and reports to every rank, and which a
 * node peer's watch sees exit: a report is awaited RMACOLL__BS_GRACE_MS,
 * polled every RMACOLL__BS_POLL_MS / 2, so the error names the dead rank
 * rather than only "transport error". 1 if a death was reported (dead: the
 * rank, or -1), 0 otherwise. */
static int death_report(rmacoll_comm_t *comm, int *dead, char *sec, size_t len)
{
    uint64_t until = rmacoll__now_ms() + RMACOLL__BS_GRACE_MS;

    if (!rmacoll__bootstrap_watches(comm->bs) && comm->nwatch == 0) {
        return 0; /* no root connection and no watch: no report can come */
    }
    for (;;) {
        if (rmacoll__death_poll(comm, dead, sec, len)) {
            return 1;
        }
        if (rmacoll__now_ms() >= until) {
            return 0;
        }
        struct timespec ts = {0, RMACOLL__BS_POLL_MS * 500000L};
        nanosleep(&ts, NULL);
    }
}

/* Long because: the one spin loop every wait takes; each check (transport
 * error, abort word, dead rank, silence) must run inside it in this order,
 * at its own period. */
rmacoll_status_t rmacoll__wait_word_or(rmacoll_comm_t *comm, const volatile uint64_t *word,
                                       uint64_t value, int peer, const char *what,
                                       uint64_t timeout_ms, int (*ready)(void *), void *arg)
{
    volatile uint64_t *waiting = hdr_word(comm->ctrl.addr, RMACOLL__CTRL_WAITING_OFF);
    uint64_t last_change = 0, next_sample = 0, seen = 0;
    uint64_t period = timeout_ms / 16 ? timeout_ms / 16 : 1;
    uint64_t next_bs = 0, dead_at = 0;
    unsigned spins = 0;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    int dead = -1;
    char sec[256];

    rmacoll__proxy_drive(&comm->proxy, 1);
    while (load_acquire(word) < value && (ready == NULL || !ready(arg))) {
        int ep;
        rmacoll_status_t pst = rmacoll__proxy_error(&comm->proxy, &ep);
        uint64_t now;
        if (pst != RMACOLL_SUCCESS) {
            /* a failed connection has two ends: the peer is named in this
             * rank's message, but only a silent one (the transport's
             * TIMEOUT) goes into the abort word as the culprit */
            comm->fail_culprit = pst == RMACOLL_ERR_TRANSPORT ? -1 : ep;
            if (pst == RMACOLL_ERR_TRANSPORT && death_report(comm, &dead, sec, sizeof(sec))) {
                /* the connection broke because its other end died: the
                 * root's report names the dead rank, for the peers too */
                st = rmacoll__fail_reported(comm, dead, ep, sec, "the network transport "
                                            "failed (peer %d) while waiting for rank %d (%s)",
                                            ep, peer, what);
            } else if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
                st = rmacoll__fail_secondary(&comm->fail, RMACOLL_ERR_PEER,
                                   "rank %d: %s; then the network transport failed "
                                   "(peer %d) while waiting for rank %d (%s)",
                                   comm->rank, sec, ep, peer, what);
            } else {
                char silent[32] = "";
                if (pst == RMACOLL_ERR_TIMEOUT && ep >= 0) {
                    snprintf(silent, sizeof(silent), ", silent rank %d", ep);
                }
                st = rmacoll__fail(&comm->fail, pst,
                                   "rank %d: network transport failed (peer %d%s) "
                                   "while waiting for rank %d (%s): %s",
                                   comm->rank, ep, silent, peer, what,
                                   rmacoll_status_string(pst));
            }
            break;
        }
        rmacoll__proxy_poll(&comm->proxy);
        if (++spins < RMACOLL__POLLS_BEFORE_YIELD) {
            continue;
        }
        if (rmacoll__abort_seen(comm, sec, sizeof(sec))) {
            st = rmacoll__fail_secondary(&comm->fail, rmacoll__abort_status(comm),
                               "rank %d: %s; stopped waiting for rank %d (%s)",
                               comm->rank, sec, peer, what);
            break;
        }
        now = rmacoll__now_ms();
        {
            uint64_t age = 0;
            const char *call = NULL;
            int s = beat_stale(comm, now, &age, &call);

            if (s != -1) {
                char doing[160];

                snprintf(doing, sizeof(doing), "waiting for rank %d (%s)", peer, what);
                st = beat_fail(comm, s, age, call, doing);
                break;
            }
        }
        /* A rank whose process died: the bootstrap root saw its connection
         * close and says so to every rank, and a node peer's watch sees its
         * process exit (rmacoll__death_poll), long before timeout_ms of
         * silence. Writes complete locally on ordered providers
         * (FI_INJECT_COMPLETE), so the network says nothing once they are
         * out. Checked every RMACOLL__BS_POLL_MS; after the root's report
         * the wait goes on RMACOLL__BS_GRACE_MS more for what the rank sent
         * before it died. */
        if (now >= next_bs) {
            int how = dead_at == 0 ? rmacoll__death_poll(comm, &dead, sec, sizeof(sec)) : 0;

            next_bs = now + RMACOLL__BS_POLL_MS;
            if (how == RMACOLL__DEATH_REPORTED) {
                dead_at = now;
            }
            /* a node peer seen dead (its watch): what it wrote here before
             * it died is visible already, so no grace */
            if (how == RMACOLL__DEATH_WATCHED ||
                (dead_at != 0 && now - dead_at >= RMACOLL__BS_GRACE_MS)) {
                st = rmacoll__fail_reported(comm, dead, peer, sec,
                                            "stopped waiting for rank %d (%s)", peer, what);
                break;
            }
        }
        if (last_change == 0) {
            last_change = now;
            next_sample = now + period;
            seen = progress_seen(comm, word, peer);
            __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_HEARTBEAT_OFF), now,
                             __ATOMIC_RELAXED);
            __atomic_store_n(waiting, (uint64_t)(peer + 1), __ATOMIC_RELAXED);
        } else if (now >= next_sample) {
            uint64_t p = progress_seen(comm, word, peer);
            next_sample = now + period;
            __atomic_store_n(hdr_word(comm->ctrl.addr, RMACOLL__CTRL_HEARTBEAT_OFF), now,
                             __ATOMIC_RELAXED);
            if (p != seen) {
                seen = p;
                last_change = now;
            } else if (now - last_change > timeout_ms) {
                int end = wait_chain_end(comm, peer);
                char via[64] = "";
                if (end != peer) {
                    snprintf(via, sizeof(via), ", which waits for rank %d", end);
                }
                comm->fail_culprit = end;
                st = rmacoll__fail(&comm->fail, RMACOLL_ERR_TIMEOUT,
                                   "rank %d: timed out waiting for rank %d%s "
                                   "(silent rank %d): no progress for %llu ms (%s: "
                                   "signal at %llu, expected %llu)",
                                   comm->rank, peer, via, end,
                                   (unsigned long long)(now - last_change), what,
                                   (unsigned long long)load_acquire(word),
                                   (unsigned long long)value);
                break;
            }
        }
        if (spins > 4096) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
    rmacoll__proxy_drive(&comm->proxy, 0);
    if (last_change != 0) {
        __atomic_store_n(waiting, 0, __ATOMIC_RELAXED);
    }
    if (st == RMACOLL_SUCCESS) {
        /* a satisfied wait is this rank's progress, for node peers waiting on it */
        rmacoll__progress_bump(comm);
    }
    return st;
}

void rmacoll__progress_bump(rmacoll_comm_t *comm)
{
    volatile uint64_t *pw = progress_word(comm->ctrl.addr);

    __atomic_store_n(pw, __atomic_load_n(pw, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}
