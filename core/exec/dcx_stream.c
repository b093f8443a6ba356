/*
 * dcx_stream.c - rmacoll_alltoallv_device_counts across nodes,
 * stream-triggered (issue 31, item 3): the call enqueues copies into a
 * pinned slot of its arguments and a wake-up of the communicator's worker
 * thread, which runs the host form (dcx.c) on the slot in stream order;
 * and the public entry points of device-count calls.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/exec/call.h"
#include "core/base/clock.h"
#include "core/base/trace.h"
#include "core/exec/state.h"

/* ---- the device form across nodes: stream-triggered (issue 31 item 3) ----
 *
 * The call (user thread) finds or makes the slot of its arguments and
 * enqueues on the stream, with the CE transport's stream ops (the staged
 * runner's, run_staged.c): copies of the counts (and of the given or the
 * current receive counts, and the status word) into the slot's pinned
 * memory, of the whole send buffer (send_capacity elements) into the send
 * staging and of the whole receive buffer (recv_capacity) into the receive
 * staging; DCX_GO = slot + 1; a wait for DCX_DONE >= 1; the copies back of
 * the receive staging, the receive counts (PRODUCE) and the status; then
 * DCX_DONE = 0. The worker sees DCX_GO, clears it, runs the host form on
 * the slot's memory (which writes the receive staging only where blocks
 * arrive, and nothing on an error, so the copy back leaves every other
 * byte of recvbuf with the value it had when the stream reached the call),
 * stores the status and raises DCX_DONE. Every value the stream writes or
 * waits for is a constant, so a captured graph replays the call with the
 * counts current at each replay. One stream per communicator: the words
 * are one pair, and the jobs must run in one order on every rank.
 *
 * The call is not collective: the protocol runs in the worker, in stream
 * order. Argument errors travel in the records (every rank's *status gets
 * the same error; the rank that made it also returns it), and so do the
 * failures of the call itself (no slot, no memory), through the error
 * slot: a job with no copies whose record carries the error. */

static int dcx_env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, "1") == 0;
}

/* Takes the communicator, waiting while another thread (the worker, or
 * the user's enqueue) holds it; gives up when comm is aborted or its
 * worker is told to stop (destroy). */
static rmacoll_status_t dcx_enter_wait(rmacoll_comm_t *comm)
{
    struct timespec ts = {0, 10000};

    while (atomic_exchange_explicit(&comm->entered, 1, memory_order_acquire)) {
        if (atomic_load_explicit(&comm->aborted, memory_order_acquire) ||
            atomic_load(&comm->dcx.stop)) {
            return RMACOLL_ERR_ABORTED;
        }
        nanosleep(&ts, NULL);
    }
    return RMACOLL_SUCCESS;
}

static volatile uint64_t *dcx_word(rmacoll_comm_t *comm, int w)
{
    return &comm->signals[rmacoll__ctrl_sig_stage(&comm->lay, w)];
}

/* Offsets in a slot's memory. */
static size_t dcx_off_sc(void) { return 0; }
static size_t dcx_off_given(int n) { return (size_t)n * 8; }
static size_t dcx_off_out(int n) { return 2 * (size_t)n * 8; }
static size_t dcx_off_status(int n) { return 3 * (size_t)n * 8; }
static size_t dcx_off_send(int n) { return 3 * (size_t)n * 8 + 64; }

/* Bytes of a capacity, rounded up to 64 (0 for an argument error: nothing
 * is copied for it); *ok 0 when the sum of both would pass 2^62. */
static uint64_t dcx_cap_bytes(int64_t cap, size_t esize)
{
    if (cap <= 0 || esize == 0 || (uint64_t)cap > ((uint64_t)1 << 61) / esize) {
        return 0;
    }
    return ((uint64_t)cap * esize + 63) & ~(uint64_t)63;
}

static int dcx_same(const rmacoll__dcx_args_t *x, const rmacoll__dcx_args_t *y)
{
    return x->sendbuf == y->sendbuf && x->sendcounts == y->sendcounts &&
           x->send_capacity == y->send_capacity && x->recvbuf == y->recvbuf &&
           x->recvcounts == y->recvcounts && x->recv_capacity == y->recv_capacity &&
           x->mode == y->mode && x->dtype == y->dtype && x->status == y->status;
}

/* The index of the slot that holds these arguments already, or -1. */
static int dcx_find(const rmacoll__dcx_t *d, const rmacoll__dcx_args_t *a)
{
    for (int i = 0; i < RMACOLL__DCX_SLOTS; i++) {
        if (d->slot[i].used && dcx_same(&d->slot[i].args, a)) {
            return i;
        }
    }
    return -1;
}

/* Slot k's memory grown to `bytes` (kept when large enough). */
static rmacoll_status_t dcx_slot_mem(rmacoll__dcx_slot_t *s, uint64_t bytes,
                                     rmacoll__tinst_t *ctl, int emulate)
{
    void *p = NULL;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (s->mem != NULL && s->bytes >= bytes) {
        return RMACOLL_SUCCESS;
    }
    if (s->pin != NULL) {
        ctl->ops->mem.mem_deregister(ctl->tp, s->pin);
        s->pin = NULL;
    }
    free(s->mem);
    s->mem = NULL;
    s->bytes = 0;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    memset(p, 0, bytes);
    if (!emulate) {
        st = ctl->ops->mem.mem_register(ctl->tp, p, bytes, RMACOLL_MEM_HOST, &s->pin, NULL);
        if (st != RMACOLL_SUCCESS) {
            free(p);
            return st;
        }
    }
    s->mem = p;
    s->bytes = bytes;
    return RMACOLL_SUCCESS;
}

/* The slot of these arguments: the one that has them, else a free one, or
 * one whose last job is done and that no graph captured. Returns its index,
 * or -1 with *forced the error's number (rmacoll__dc_arg_text). */
static int dcx_slot(rmacoll_comm_t *comm, const rmacoll__dcx_args_t *a, int captured,
                    rmacoll__tinst_t *ctl, int emulate, int *forced)
{
    rmacoll__dcx_t *d = &comm->dcx;
    int n = comm->nranks, k = dcx_find(d, a);
    size_t esize = rmacoll_datatype_size(a->dtype);
    uint64_t gos = atomic_load(&d->gos);
    rmacoll__dcx_slot_t *s;

    for (int i = 0; i < RMACOLL__DCX_SLOTS && k < 0; i++) {
        if (!d->slot[i].used) {
            k = i;
        }
    }
    for (int i = 0; i < RMACOLL__DCX_SLOTS && k < 0; i++) {
        const rmacoll__dcx_slot_t *o = &d->slot[i];

        /* no graph holds it, the worker has seen every GO of it, and a
         * later GO since (so the stream is past its copies back): eager
         * calls with new buffers each time reuse it */
        if (!o->captured && atomic_load(&o->pending) == 0 && atomic_load(&o->last_go) < gos) {
            k = i;
        }
    }
    if (k < 0) {
        *forced = 12;
        return -1;
    }
    s = &d->slot[k];
    if (!s->used || !dcx_same(&s->args, a)) {
        if (dcx_slot_mem(s, dcx_off_send(n) + dcx_cap_bytes(a->send_capacity, esize) +
                                dcx_cap_bytes(a->recv_capacity, esize),
                         ctl, emulate) != RMACOLL_SUCCESS) {
            s->used = 0;
            *forced = 13;
            return -1;
        }
        s->used = 1;
        s->captured = 0;
        s->args = *a;
        s->args.forced = 0;
    }
    s->captured |= captured;
    return k;
}

/* The host form's arguments on slot s's memory. */
static void dcx_slot_args(const rmacoll_comm_t *comm, const rmacoll__dcx_slot_t *s,
                          rmacoll__dcx_args_t *a)
{
    const rmacoll__dcx_args_t *u = &s->args;
    int n = comm->nranks;
    size_t esize = rmacoll_datatype_size(u->dtype);

    memset(a, 0, sizeof(*a));
    a->forced = u->forced;
    if (s->mem == NULL) {
        return; /* the error slot before its first use */
    }
    a->sendbuf = u->sendbuf != NULL ? s->mem + dcx_off_send(n) : NULL;
    a->sendcounts = u->sendcounts != NULL ? (const int64_t *)(s->mem + dcx_off_sc()) : NULL;
    a->send_capacity = u->send_capacity;
    a->recvbuf = u->recvbuf != NULL
                     ? s->mem + dcx_off_send(n) + dcx_cap_bytes(u->send_capacity, esize)
                     : NULL;
    a->recvcounts = u->recvcounts == NULL ? NULL
                    : u->mode == RMACOLL_RECV_GIVEN
                        ? (int64_t *)(s->mem + dcx_off_given(n))
                        : (int64_t *)(s->mem + dcx_off_out(n));
    a->recv_capacity = u->recv_capacity;
    a->mode = u->mode;
    a->dtype = u->dtype;
    a->status = u->status != NULL ? (int32_t *)(s->mem + dcx_off_status(n)) : NULL;
}

/* The copies of slot s into (in) or out of (!in) its memory: self puts
 * (none for the error slot). */
static size_t dcx_copies(const rmacoll_comm_t *comm, const rmacoll__dcx_slot_t *s, int in,
                         rmacoll_put_t *p)
{
    const rmacoll__dcx_args_t *u = &s->args;
    rmacoll__dcx_args_t h;
    int n = comm->nranks;
    size_t k = 0, esize = rmacoll_datatype_size(u->dtype);
    uint64_t sb = dcx_cap_bytes(u->send_capacity, esize) != 0
                      ? (uint64_t)u->send_capacity * esize : 0;
    uint64_t rb = dcx_cap_bytes(u->recv_capacity, esize) != 0
                      ? (uint64_t)u->recv_capacity * esize : 0;
#define DCX_PUT(SRC, DST, BYTES)                                                     \
    do {                                                                             \
        memset(&p[k], 0, sizeof(p[k]));                                              \
        p[k].peer = comm->rank;                                                      \
        p[k].src = (SRC);                                                            \
        p[k].dst_addr = (uint64_t)(uintptr_t)(DST);                                  \
        p[k].bytes = (BYTES);                                                        \
        p[k].sig_index = RMACOLL_NO_SIGNAL;                                          \
        k++;                                                                         \
    } while (0)

    if (u->forced != 0 || s->mem == NULL) {
        return 0;
    }
    dcx_slot_args(comm, s, &h);
    if (in) {
        if (u->sendcounts != NULL) {
            DCX_PUT(u->sendcounts, h.sendcounts, (uint64_t)n * 8);
        }
        if (u->recvcounts != NULL) { /* given, or the current ones (kept on an error) */
            DCX_PUT(u->recvcounts, h.recvcounts, (uint64_t)n * 8);
        }
        if (u->status != NULL) {
            DCX_PUT(u->status, h.status, 4);
        }
        if (u->sendbuf != NULL && sb > 0) {
            DCX_PUT(u->sendbuf, h.sendbuf, sb);
        }
        if (u->recvbuf != NULL && rb > 0) {
            DCX_PUT(u->recvbuf, h.recvbuf, rb);
        }
    } else {
        if (u->recvbuf != NULL && rb > 0) {
            DCX_PUT(h.recvbuf, u->recvbuf, rb);
        }
        if (u->recvcounts != NULL && u->mode == RMACOLL_RECV_PRODUCE) {
            DCX_PUT(h.recvcounts, u->recvcounts, (uint64_t)n * 8);
        }
        if (u->status != NULL) {
            DCX_PUT(h.status, u->status, 4);
        }
    }
#undef DCX_PUT
    return k;
}

/* The worker's report of the first failure no check returned. */
static void dcx_report(rmacoll_comm_t *comm, uint64_t seq, rmacoll_status_t st,
                       const char *msg)
{
    rmacoll__dcx_t *d = &comm->dcx;

    pthread_mutex_lock(&d->rep_lock);
    if (d->rep_code == RMACOLL_SUCCESS) {
        d->rep_code = st;
        d->rep_seq = seq;
        snprintf(d->rep_msg, sizeof(d->rep_msg), "%s", msg);
    }
    pthread_mutex_unlock(&d->rep_lock);
}

/* One job of the worker: slot k's call, the communicator held; its
 * messages go to the worker's own buffer, not the user's last_error. */
static rmacoll_status_t dcx_job(rmacoll_comm_t *comm, int k, uint64_t v)
{
    rmacoll__dcx_t *d = &comm->dcx;
    char *user_buf = comm->fail.buf;
    size_t user_len = comm->fail.len;
    rmacoll__dcx_args_t a;
    rmacoll_status_t st;

    d->in_worker = 1;
    d->wmsg[0] = '\0';
    comm->fail.buf = d->wmsg;
    comm->fail.len = sizeof(d->wmsg);
    if (k >= 0 && k <= RMACOLL__DCX_SLOTS && (d->slot[k].used || k == RMACOLL__DCX_SLOTS)) {
        dcx_slot_args(comm, &d->slot[k], &a);
        st = rmacoll__dcx_host(comm, &a);
        if (a.status != NULL) {
            *a.status = (int32_t)st;
        }
    } else {
        st = rmacoll__fail(&comm->fail, RMACOLL_ERR_INTERNAL, "rank %d: device-count call: "
                           "the stream raised slot %llu, which does not exist", comm->rank,
                           (unsigned long long)v);
    }
    comm->fail.buf = user_buf;
    comm->fail.len = user_len;
    d->in_worker = 0;
    return st;
}

static void *dcx_main(void *arg)
{
    rmacoll_comm_t *comm = arg;
    rmacoll__dcx_t *d = &comm->dcx;
    volatile uint64_t *go = dcx_word(comm, RMACOLL__STAGE_DCX_GO);
    volatile uint64_t *done = dcx_word(comm, RMACOLL__STAGE_DCX_DONE);
    unsigned idle = 0;

    while (!atomic_load(&d->stop)) {
        uint64_t v = __atomic_load_n(go, __ATOMIC_ACQUIRE), seq;
        rmacoll_status_t st;
        int k;

        if (v == 0) {
            /* yield a while, then sleep 20 us, 100 us after about 20 ms idle */
            struct timespec ts = {0, idle > 1256 ? 100000 : 20000};

            if (++idle > 256) {
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
            }
            continue;
        }
        idle = 0;
        __atomic_store_n(go, 0, __ATOMIC_RELEASE);
        k = (int)(v - 1);
        {
            uint64_t g = atomic_fetch_add(&d->gos, 1) + 1;

            if (k >= 0 && k <= RMACOLL__DCX_SLOTS) {
                rmacoll__dcx_slot_t *o = &d->slot[k];
                int p = atomic_load(&o->pending);

                atomic_store(&o->last_go, g);
                /* graph replays were never counted: stay at 0 */
                while (p > 0 && !atomic_compare_exchange_weak(&o->pending, &p, p - 1)) {
                }
            }
        }
        seq = atomic_load(&d->done_jobs) + 1;
        st = dcx_enter_wait(comm);
        if (st == RMACOLL_SUCCESS) {
            st = dcx_job(comm, k, v);
            if (st != RMACOLL_SUCCESS) {
                dcx_report(comm, seq, st, d->wmsg);
            }
            rmacoll__leave(comm);
        } else {
            /* aborted or destroyed: the stream still gets an answer */
            char msg[128];

            snprintf(msg, sizeof(msg), "rank %d: the communicator was aborted or destroyed "
                     "before the worker ran the call", comm->rank);
            if (k >= 0 && k < RMACOLL__DCX_SLOTS && d->slot[k].mem != NULL) {
                *(int32_t *)(d->slot[k].mem + dcx_off_status(comm->nranks)) = (int32_t)st;
            }
            dcx_report(comm, seq, st, msg);
        }
        atomic_store(&d->done_jobs, seq);
        /* release the stream, also on a failure: its status says it */
        __atomic_store_n(done, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

rmacoll_status_t rmacoll__dcx_check(rmacoll_comm_t *comm, int *had)
{
    rmacoll__dcx_t *d = &comm->dcx;
    rmacoll_status_t st;

    *had = atomic_load(&d->reserved);
    if (!*had) {
        return RMACOLL_SUCCESS;
    }
    pthread_mutex_lock(&d->rep_lock);
    st = d->rep_code;
    if (st != RMACOLL_SUCCESS) {
        /* the user's thread owns last_error (the worker writes d->wmsg) */
        snprintf(comm->last_error, sizeof(comm->last_error),
                 "rank %d: device-count call %llu failed: %.400s", comm->rank,
                 (unsigned long long)d->rep_seq, d->rep_msg);
        d->rep_code = RMACOLL_SUCCESS;
    } else {
        comm->last_error[0] = '\0';
    }
    pthread_mutex_unlock(&d->rep_lock);
    return st;
}

void rmacoll__dcx_fini(rmacoll_comm_t *comm)
{
    rmacoll__dcx_t *d = &comm->dcx;
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);

    if (d->started) {
        /* a job in progress ends within timeout_ms; a stream still waiting
         * for the worker after this breaks the rule that streams are idle
         * at destroy (rmacoll.h) */
        atomic_store(&d->stop, 1);
        pthread_join(d->thread, NULL);
        d->started = 0;
    }
    for (int k = 0; k <= RMACOLL__DCX_SLOTS; k++) {
        rmacoll__dcx_slot_t *s = &d->slot[k];

        if (s->pin != NULL && ctl != NULL) {
            ctl->ops->mem.mem_deregister(ctl->tp, s->pin);
        }
        free(s->mem);
        memset(s, 0, sizeof(*s));
    }
    if (d->lock_init) {
        pthread_mutex_destroy(&d->rep_lock);
        d->lock_init = 0;
    }
}

/* The stream's steps for slot k, enqueued (or run here, emulated: then
 * only up to DCX_GO; dcx_emulate_finish does the rest). */
static rmacoll_status_t dcx_post(rmacoll_comm_t *comm, rmacoll__tinst_t *ctl, int k,
                                 void *stream, int emulate)
{
    rmacoll_put_t puts[8];
    int me = comm->rank;
    size_t np = dcx_copies(comm, &comm->dcx.slot[k], 1, puts);
    uint32_t w;
    uint64_t one = 1;
    rmacoll_status_t st;

    if (emulate) {
        for (size_t i = 0; i < np; i++) {
            memcpy((void *)(uintptr_t)puts[i].dst_addr, puts[i].src, puts[i].bytes);
        }
        __atomic_store_n(dcx_word(comm, RMACOLL__STAGE_DCX_GO), (uint64_t)k + 1,
                         __ATOMIC_RELEASE);
        return RMACOLL_SUCCESS;
    }
    st = np ? ctl->ops->stream.post_puts_stream(ctl->tp, puts, np, stream) : RMACOLL_SUCCESS;
    if (st == RMACOLL_SUCCESS) {
        st = ctl->ops->stream.signal_stream(
            ctl->tp, me, rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_DCX_GO),
            (uint64_t)k + 1, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        w = rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_DCX_DONE);
        st = ctl->ops->stream.wait_stream(ctl->tp, &w, &one, 1, stream);
    }
    np = dcx_copies(comm, &comm->dcx.slot[k], 0, puts);
    if (st == RMACOLL_SUCCESS && np) {
        st = ctl->ops->stream.post_puts_stream(ctl->tp, puts, np, stream);
    }
    if (st == RMACOLL_SUCCESS) {
        st = ctl->ops->stream.signal_stream(
            ctl->tp, me, rmacoll__ctrl_sig_stage(&comm->lay, RMACOLL__STAGE_DCX_DONE), 0,
            stream);
    }
    return st;
}

/* The user thread's part (comm entered): the slot, then its steps. *slot:
 * the slot enqueued (the error slot when the call itself failed, whose
 * number *forced then has). */
static rmacoll_status_t dcx_enqueue(rmacoll_comm_t *comm, const rmacoll__dcx_args_t *a,
                                    void *stream, int emulate, int *slot, int *forced)
{
    rmacoll__dcx_t *d = &comm->dcx;
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    int me = comm->rank, k, captured = 0;
    rmacoll_status_t st;

    if (!emulate && (ctl == NULL || ctl->ops->stream.post_puts_stream == NULL)) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_UNSUPPORTED, "rank %d: "
                             "rmacoll_alltoallv_device_counts across nodes: no copy-engine "
                             "transport with stream operations on this communicator (a "
                             "build and machine with CUDA are needed)", me);
    }
    if (d->stream != NULL && d->stream != stream) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_UNSUPPORTED, "rank %d: "
                             "rmacoll_alltoallv_device_counts across nodes: stream %p is not "
                             "the stream of this communicator's earlier device-count calls "
                             "(%p): one stream per communicator (its calls run in one order "
                             "on every rank); nothing enqueued, and the peers' calls that "
                             "pair with this one will time out", me, stream, d->stream);
    }
    if (!d->lock_init) {
        pthread_mutex_init(&d->rep_lock, NULL);
        d->lock_init = 1;
    }
    if (!d->started) {
        if (pthread_create(&d->thread, NULL, dcx_main, comm) != 0) {
            return rmacoll__fail(&comm->fail, RMACOLL_ERR_NO_MEMORY, "rank %d: cannot start "
                                 "the device-count worker thread; nothing enqueued", me);
        }
        d->started = 1;
    }
    if (!emulate) {
        /* n == 0: only whether the stream is being captured into a graph */
        captured = ctl->ops->stream.post_puts_stream(ctl->tp, NULL, 0, stream) ==
                   RMACOLL_ERR_UNSUPPORTED;
    }
    if (captured && dcx_find(d, a) < 0) {
        /* a slot's host memory is pinned with cudaHostRegister, which a
         * stream capture does not allow: fail here, nothing enqueued,
         * rather than leave a capture that fails at its end */
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_UNSUPPORTED, "rank %d: "
                             "rmacoll_alltoallv_device_counts across nodes under stream "
                             "capture: no earlier call outside capture had these arguments "
                             "(buffers, count arrays, capacities, mode, dtype, status), and "
                             "the host memory it needs cannot be pinned during a capture; "
                             "make the same call once outside capture first; nothing "
                             "enqueued", me);
    }
    k = dcx_slot(comm, a, captured, ctl, emulate, forced);
    if (k < 0) {
        k = RMACOLL__DCX_SLOTS; /* the error slot carries *forced to the peers */
        d->slot[k].args.forced = *forced;
    }
    d->stream = stream;
    if (!captured) {
        atomic_fetch_add(&d->slot[k].pending, 1);
    }
    *slot = k;
    atomic_store(&d->reserved, 1);
    atomic_fetch_add(&comm->stats.device_counts_calls, 1);
    st = dcx_post(comm, ctl, k, stream, emulate);
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: enqueueing the device-count call "
                             "across nodes on the stream failed: %s (the stream may now "
                             "wait for a word no worker raises: the communicator is "
                             "unusable)", me, rmacoll_status_string(st));
    }
    return RMACOLL_SUCCESS;
}

/* Emulation, after the caller left the communicator: the rest of slot
 * k's stream steps once the worker raised DCX_DONE (bounded by timeout_ms
 * and the worker's end). */
static rmacoll_status_t dcx_emulate_finish(rmacoll_comm_t *comm, int k)
{
    volatile uint64_t *done = dcx_word(comm, RMACOLL__STAGE_DCX_DONE);
    uint64_t t0 = rmacoll__now_ms();
    rmacoll_put_t puts[8];
    size_t np;

    while (__atomic_load_n(done, __ATOMIC_ACQUIRE) < 1) {
        if (atomic_load(&comm->dcx.stop) ||
            (comm->cfg.timeout_ms < UINT64_MAX / 2 &&
             rmacoll__now_ms() - t0 > comm->cfg.timeout_ms + 1000)) {
            return RMACOLL_ERR_TIMEOUT;
        }
        sched_yield();
    }
    np = dcx_copies(comm, &comm->dcx.slot[k], 0, puts);
    for (size_t i = 0; i < np; i++) {
        memcpy((void *)(uintptr_t)puts[i].dst_addr, puts[i].src, puts[i].bytes);
    }
    __atomic_store_n(done, 0, __ATOMIC_RELEASE);
    return RMACOLL_SUCCESS;
}

/* rmacoll_alltoallv_device_counts with a stream on a communicator of
 * several nodes. Returns this rank's own error, if any (the call is
 * enqueued anyway where it can be, so that the peers' *status get it). */
static rmacoll_status_t dcx_device(rmacoll_comm_t *comm, const rmacoll__dcx_args_t *a,
                                   void *stream)
{
    int emulate = dcx_env("RMACOLL_DCX_EMULATE_STREAM");
    int what = 0, forced = 0, k = -1;
    size_t esize = rmacoll_datatype_size(a->dtype);
    rmacoll_status_t arg_st, st;

    st = dcx_enter_wait(comm);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    comm->last_error[0] = '\0';
    arg_st = rmacoll__dcx_check_args(a, esize, &what);
    if (comm->broken) {
        st = rmacoll__fail(&comm->fail, RMACOLL_ERR_PEER, "rank %d: "
                           "rmacoll_alltoallv_device_counts: the communicator is broken by "
                           "an earlier failure; nothing enqueued", comm->rank);
    } else {
        st = dcx_enqueue(comm, a, stream, emulate, &k, &forced);
    }
    rmacoll__leave(comm);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (emulate && dcx_emulate_finish(comm, k) != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_TIMEOUT, "rank %d: emulated stream: "
                             "the device-count worker did not answer", comm->rank);
    }
    if (forced != 0 || arg_st != RMACOLL_SUCCESS) {
        int w = forced != 0 ? forced : what;

        return rmacoll__fail(&comm->fail, rmacoll__dc_arg_status(w), "rank %d: "
                             "rmacoll_alltoallv_device_counts: %s (enqueued so that every "
                             "rank's *status reports it)", comm->rank, rmacoll__dc_arg_text(w));
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_alltoallv_device_counts(const void *sendbuf,
                                                 const int64_t *sendcounts,
                                                 int64_t send_capacity, void *recvbuf,
                                                 int64_t *recvcounts, int64_t recv_capacity,
                                                 rmacoll_recv_mode_t mode,
                                                 rmacoll_datatype_t dtype,
                                                 rmacoll_comm_t *comm, void *stream,
                                                 int32_t *status)
{
    rmacoll__dcounts_t dc = {sendcounts, send_capacity, recvcounts, recv_capacity,
                             (int)mode, status};
    rmacoll__call_t call;
    rmacoll_status_t st;
    int64_t *zero;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (stream != NULL && comm->topo->nnodes > 1 &&
        (dcx_env("RMACOLL_DEVICE_COUNTS_ACROSS_NODES") ||
         dcx_env("RMACOLL_DCX_EMULATE_STREAM"))) {
        /* across nodes: stream-triggered, not collective at the call */
        rmacoll__dcx_args_t a = {sendbuf, sendcounts, send_capacity, recvbuf, recvcounts,
                                 recv_capacity, (int)mode, dtype, status, 0};

        return dcx_device(comm, &a, stream);
    }
    st = rmacoll__enter(comm, "rmacoll_alltoallv_device_counts");
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (stream == NULL) {
        /* host memory: the host runs the call, at any node count */
        rmacoll__dcx_args_t a = {sendbuf, sendcounts, send_capacity, recvbuf, recvcounts,
                                 recv_capacity, (int)mode, dtype, status, 0};

        rmacoll__trace_push("rmacoll:alltoallv_device_counts",
                            send_capacity > 0 ? (uint64_t)send_capacity *
                                                    rmacoll_datatype_size(dtype)
                                              : 0);
        comm->last_error[0] = '\0';
        st = rmacoll__dcx_host(comm, &a);
        rmacoll__trace_pop();
        rmacoll__leave(comm);
        return st;
    }
    /* the pipeline sees zero host counts: it validates, exchanges and
     * agrees; the device-count runner moves the data (run_stream.c) */
    zero = comm->uniform;
    memset(zero, 0, 2 * (size_t)comm->nranks * sizeof(*zero));
    st = rmacoll__call_begin(&call, comm, sendbuf, zero, zero + comm->nranks, recvbuf, zero,
                             zero + comm->nranks, dtype, stream);
    if (st == RMACOLL_SUCCESS) {
        call.runner = &rmacoll__run_dcounts;
        call.dc = &dc;
        /* the counts are on the device: the payload is the send capacity */
        rmacoll__trace_push("rmacoll:alltoallv_device_counts",
                            send_capacity > 0 ? (uint64_t)send_capacity *
                                                    rmacoll_datatype_size(dtype)
                                              : 0);
        st = rmacoll__call_pipeline(&call);
        rmacoll__trace_pop();
    }
    rmacoll__leave(comm);
    return st;
}

rmacoll_status_t rmacoll_device_counts_check(rmacoll_comm_t *comm)
{
    rmacoll_status_t st;
    int had;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    st = rmacoll__dcx_check(comm, &had);
    if (had) {
        return st; /* across nodes: the worker's report (it may hold comm) */
    }
    st = rmacoll__enter(comm, "rmacoll_device_counts_check");
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    comm->last_error[0] = '\0';
    st = rmacoll__dcounts_check(comm);
    rmacoll__leave(comm);
    return st;
}
