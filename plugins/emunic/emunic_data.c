/*
 * emunic_data.c - emunic's data path: post_puts checks each put, writes
 * host memory at once (memcpy in this process, process_vm_writev across
 * processes) or starts the device copy, and paces it on the emulated wire
 * (emunic_pace.h); progress raises the signals of completed puts, per peer
 * in post order, and this rank's words from its shadow; pending and
 * error_peer.
 */
#include "emunic_int.h"

static uint64_t emu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static rmacoll_status_t emu_host_write(rmacoll_transport_t *tp, const rmacoll_put_t *pt)
{
    uint64_t done = 0;

    if (tp->addr[pt->peer].pid == tp->addr[tp->rank].pid) {
        memcpy((void *)(uintptr_t)pt->dst_addr, pt->src, (size_t)pt->bytes);
        return RMACOLL_SUCCESS;
    }
    while (done < pt->bytes) {
        struct iovec l = {(char *)pt->src + done, (size_t)(pt->bytes - done)};
        struct iovec r = {(void *)(uintptr_t)(pt->dst_addr + done), (size_t)(pt->bytes - done)};
        ssize_t n = process_vm_writev((pid_t)tp->addr[pt->peer].pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: writing %" PRIu64 " bytes to peer %d "
                    "failed: %s", pt->bytes - done, pt->peer,
                    n < 0 ? strerror(errno) : "no progress");
            tp->error_peer = pt->peer;
            return RMACOLL_ERR_TRANSPORT;
        }
        done += (uint64_t)n;
    }
    return RMACOLL_SUCCESS;
}

/* Room for one more put in flight: the ring doubles (rarely: 4096 first). */
static rmacoll_status_t emu_fly_room(rmacoll_transport_t *tp)
{
    size_t cap = tp->fly_cap * 2;
    emu_fly_t *f;

    if (tp->fly_n < tp->fly_cap) {
        return RMACOLL_SUCCESS;
    }
    f = calloc(cap, sizeof(*f));
    if (f == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda) {
        cudaEvent_t *ev = calloc(cap, sizeof(*ev));
        if (ev == NULL) {
            free(f);
            return RMACOLL_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i < tp->fly_n; i++) {
            size_t at = (tp->fly_head + i) % tp->fly_cap;
            ev[i] = tp->events[at];
            tp->events[at] = NULL;
        }
        for (size_t i = 0; i < tp->fly_cap; i++) {
            if (tp->events[i] != NULL) {
                ev[tp->fly_n + i] = tp->events[i]; /* idle ones move along */
            }
        }
        free(tp->events);
        tp->events = ev;
    }
#endif
    for (size_t i = 0; i < tp->fly_n; i++) {
        size_t at = (tp->fly_head + i) % tp->fly_cap;
        f[i] = tp->fly[at];
        if (f[i].event >= 0) {
            f[i].event = (int)i;
        }
    }
    free(tp->fly);
    tp->fly = f;
    tp->fly_head = 0;
    tp->fly_cap = cap;
    return RMACOLL_SUCCESS;
}

/* Put i's peer, signal word and rkey (copied into k): RMACOLL_SUCCESS, or
 * the error, logged. */
static rmacoll_status_t emu_check_put(rmacoll_transport_t *tp, const rmacoll_put_t *pt,
                                      size_t i, emu_key_t *k)
{
    if (pt->peer < 0 || pt->peer >= tp->nranks || tp->peer[pt->peer] == NULL) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put %zu names peer %d, which is not a "
                "peer of this instance", i, pt->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (pt->sig_index != RMACOLL_NO_SIGNAL && pt->sig_index >= tp->addr[pt->peer].nsignals) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put %zu to peer %d signals word %u of "
                "%" PRIu64, i, pt->peer, pt->sig_index, tp->addr[pt->peer].nsignals);
        return RMACOLL_ERR_INVALID_ARG;
    }
    memset(k, 0, sizeof(*k));
    if (pt->bytes > 0) {
        if (pt->dst_rkey == NULL || pt->dst_rkey->len != sizeof(*k)) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes to peer %d "
                    "without an emunic rkey", pt->bytes, pt->peer);
            return RMACOLL_ERR_INVALID_ARG;
        }
        memcpy(k, pt->dst_rkey->key, sizeof(*k));
        if (k->magic != EMU_KEY_MAGIC || pt->dst_addr < pt->dst_rkey->addr ||
            pt->dst_addr + pt->bytes > pt->dst_rkey->addr + pt->dst_rkey->bytes) {
            EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes to peer %d "
                    "at 0x%" PRIx64 " lies outside its registration", pt->bytes, pt->peer,
                    pt->dst_addr);
            tp->error_peer = pt->peer;
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    return RMACOLL_SUCCESS;
}

/* A put with device memory on either side, in flight at ring position at
 * (f): the device copy, its event f->event. */
static rmacoll_status_t emu_dev_put(rmacoll_transport_t *tp, const rmacoll_put_t *pt,
                                    const emu_key_t *k, size_t at, emu_fly_t *f)
{
#ifdef EMUNIC_HAVE_CUDA
    rmacoll_status_t st = RMACOLL_SUCCESS;
    void *dst = (void *)(uintptr_t)pt->dst_addr;
    if (!tp->cuda) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if (k->type == RMACOLL_MEM_CUDA) {
        st = emu_dev_target(tp, pt->peer, k, pt->dst_addr, pt->bytes, &dst);
    } else if (tp->addr[pt->peer].pid != tp->addr[tp->rank].pid) {
        EMU_LOG(tp, RMACOLL_LOG_ERROR, "emunic: put of %" PRIu64 " bytes of device "
                "memory into host memory of peer %d, another process: not supported",
                pt->bytes, pt->peer);
        tp->error_peer = pt->peer;
        st = RMACOLL_ERR_UNSUPPORTED;
    }
    if (st == RMACOLL_SUCCESS) {
        st = emu_dev_copy(tp, pt->peer, dst, pt->src, pt->bytes, (int)at);
    }
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    f->event = (int)at;
    tp->dev_puts++;
    return RMACOLL_SUCCESS;
#else
    (void)tp;
    (void)pt;
    (void)k;
    (void)at;
    (void)f;
    return RMACOLL_ERR_UNSUPPORTED;
#endif
}

static rmacoll_status_t emu_post_puts_in(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *pt = &puts[i];
        emu_key_t k;
        emu_fly_t *f;
        size_t at;
        uint64_t now, txd, rxd;
        rmacoll_status_t st;
        int dev;

        if ((st = emu_check_put(tp, pt, i, &k)) != RMACOLL_SUCCESS) {
            return st;
        }
        if ((st = emu_fly_room(tp)) != RMACOLL_SUCCESS) {
            return st;
        }
        at = (tp->fly_head + tp->fly_n) % tp->fly_cap;
        f = &tp->fly[at];
        f->peer = pt->peer;
        f->sig_index = pt->sig_index;
        f->sig_value = pt->sig_value;
        f->event = -1;
        dev = pt->bytes > 0 && (k.type == RMACOLL_MEM_CUDA ||
                                (pt->src_mem != NULL && pt->src_mem->type == RMACOLL_MEM_CUDA));
        if (pt->bytes > 0 && !dev) {
            if ((st = emu_host_write(tp, pt)) != RMACOLL_SUCCESS) {
                return st;
            }
        } else if (dev) {
            if ((st = emu_dev_put(tp, pt, &k, at, f)) != RMACOLL_SUCCESS) {
                return st;
            }
        }
        /* the wire: both directions' buckets, then the latency */
        now = emu_now();
        txd = emunic_bucket_take(&tp->tx, &tp->tx_tat, now, pt->bytes);
        rxd = emunic_bucket_take_shared(
            &tp->rx_of_rail[tp->addr[pt->peer].rail < EMU_MAX_RAILS ? tp->addr[pt->peer].rail
                                                                     : EMU_MAX_RAILS - 1],
            &tp->peer[pt->peer]->rx_tat, now, pt->bytes);
        f->deliver_ns = emunic_deliver_at(txd, rxd, tp->latency_ns);
        f->post_ns = now;
        tp->fly_n++;
        tp->puts++;
        tp->bytes += pt->bytes;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t emu_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                               size_t n)
{
#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda) {
        rmacoll_status_t st;

        (void)cudaSetDevice(tp->device);
        if ((st = emu_ctx_enter(tp)) != RMACOLL_SUCCESS) {
            return st;
        }
        st = emu_post_puts_in(tp, puts, n);
        emu_ctx_leave(tp);
        return st;
    }
#endif
    return emu_post_puts_in(tp, puts, n);
}

/* Whether put f's copy has completed (host copies completed at post). */
static int emu_copied(rmacoll_transport_t *tp, const emu_fly_t *f, rmacoll_status_t *st)
{
    if (f->event < 0) {
        return 1;
    }
#ifdef EMUNIC_HAVE_CUDA
    {
        cudaError_t e = cudaEventQuery(tp->events[f->event]);
        if (e == cudaSuccess) {
            return 1;
        }
        if (e != cudaErrorNotReady) {
            *st = emu_cuda_err(tp, f->peer, "device copy", e);
        } else {
            (void)cudaGetLastError();
        }
    }
#endif
    return 0;
}

/* Raises the signals of completed puts (per peer in post order), then
 * this rank's words from the shadow peers stored into. */
static rmacoll_status_t emu_progress_in(rmacoll_transport_t *tp)
{
    volatile uint64_t *sig = tp->env->signals;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (tp->fly_n > 0) {
        uint64_t now = emu_now();
        size_t kept = 0, n = tp->fly_n;

        memset(tp->blocked, 0, (size_t)tp->nranks);
        /* compact in place: entries kept move towards the head, in order */
        for (size_t i = 0; i < n; i++) {
            size_t at = (tp->fly_head + i) % tp->fly_cap;
            emu_fly_t f = tp->fly[at];
            int done = !tp->blocked[f.peer] && now >= f.deliver_ns && emu_copied(tp, &f, &st);

            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            if (done) {
                uint64_t took = now - f.post_ns;
                if (f.event >= 0) {
                    tp->dev_signalled++;
                    tp->dev_sig_ns += took;
                    tp->dev_sig_max_ns = took > tp->dev_sig_max_ns ? took : tp->dev_sig_max_ns;
                    tp->dev_copy_late_ns += now - f.deliver_ns;
                } else {
                    tp->host_signalled++;
                    tp->host_sig_ns += took;
                    tp->host_sig_max_ns = took > tp->host_sig_max_ns ? took
                                                                     : tp->host_sig_max_ns;
                }
                if (f.sig_index != RMACOLL_NO_SIGNAL) {
                    __atomic_store_n(&tp->peer[f.peer]->shadow[f.sig_index], f.sig_value,
                                     __ATOMIC_RELEASE);
                }
                continue;
            }
            tp->blocked[f.peer] = 1;
            {
                size_t to = (tp->fly_head + kept) % tp->fly_cap;
                if (to != at) {
#ifdef EMUNIC_HAVE_CUDA
                    if (f.event >= 0) {
                        cudaEvent_t t = tp->events[to];
                        tp->events[to] = tp->events[at];
                        tp->events[at] = t;
                        f.event = (int)to;
                    }
#endif
                    tp->fly[to] = f;
                }
            }
            kept++;
        }
        tp->fly_n = kept;
    }
    for (uint32_t i = 0; i < tp->env->nsignals; i++) {
        uint64_t v = __atomic_load_n(&tp->own->shadow[i], __ATOMIC_ACQUIRE);
        if (v > __atomic_load_n(&sig[i], __ATOMIC_RELAXED)) {
            __atomic_store_n(&sig[i], v, __ATOMIC_RELEASE);
        }
    }
    return st;
}

rmacoll_status_t emu_progress(rmacoll_transport_t *tp)
{
    rmacoll_status_t st;

#ifdef EMUNIC_HAVE_CUDA
    if (tp->cuda && tp->fly_n > 0) {
        (void)cudaSetDevice(tp->device);
        if ((st = emu_ctx_enter(tp)) != RMACOLL_SUCCESS) { /* its events, if any */
            return st;
        }
        st = emu_progress_in(tp);
        emu_ctx_leave(tp);
        return st;
    }
#endif
    st = emu_progress_in(tp);
    return st;
}

size_t emu_pending(rmacoll_transport_t *tp)
{
    return tp->fly_n;
}

int emu_error_peer(rmacoll_transport_t *tp)
{
    return tp != NULL ? tp->error_peer : -1;
}
