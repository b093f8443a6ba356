/*
 * bootstrap_rank.c - a rank's client of the rendezvous: create (TCP or an
 * embedder's out-of-band callbacks), allgather, barrier, the failures the
 * root reports between calls, destroy.
 */
#define _GNU_SOURCE /* accept4 */
#include "core/oob/bootstrap_priv.h"

#include "core/base/clock.h"
#include "core/base/text.h"
#include "core/config/env.h"

/* ------------------------------------------------------------------ rank */

static rmacoll_status_t bs_status_from_wire(uint32_t v)
{
    if (v == 0 || v >= (uint32_t)RMACOLL_STATUS_LAST) {
        return RMACOLL_ERR_BOOTSTRAP;
    }
    return (rmacoll_status_t)v;
}

/* Marks bs failed with st and closes its socket. */
static rmacoll_status_t bs_fail(rmacoll__bootstrap_t *bs, rmacoll_status_t st)
{
    if (bs->fd >= 0) {
        close(bs->fd);
        bs->fd = -1;
    }
    bs->failed = st;
    return st;
}

/* Reads the text of an ERROR whose header is h, logs it, returns its status. */
static rmacoll_status_t bs_read_error(rmacoll__bootstrap_t *bs, const bs_hdr_t *h,
                                      const char *what)
{
    char text[BS_ERRTEXT_MAX + 1];
    size_t n = h->a < BS_ERRTEXT_MAX ? (size_t)h->a : BS_ERRTEXT_MAX;
    rmacoll_status_t st = bs_status_from_wire(h->arg);

    if (rmacoll__bs_recv_all(bs->fd, text, n, rmacoll__bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
        n = 0;
    }
    text[n] = '\0';
    rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap rank %d: %s failed: %s (root %s)", bs->rank, what,
                 n ? text : "no reason given", bs->root_addr);
    return st;
}

/* Translates a socket error met by a rank; logs once. */
static rmacoll_status_t bs_io_error(rmacoll__bootstrap_t *bs, int err,
                                    const char *what, uint64_t waited_ms)
{
    if (err == ETIMEDOUT) {
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: %s: no answer from the root %s within "
                     "%" PRIu64 " ms", bs->rank, what, bs->root_addr, waited_ms);
        return RMACOLL_ERR_TIMEOUT;
    }
    rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap rank %d: %s: lost the root %s: %s", bs->rank, what,
                 bs->root_addr, err == EPIPE ? "connection closed" : strerror(err));
    return RMACOLL_ERR_BOOTSTRAP;
}

/* Connects to d before deadline, retrying while the root is not up yet.
 * Returns the fd or -1 on timeout (errno of the last attempt in *last). */
static int bs_connect(const bs_id_t *d, uint64_t deadline, int *last)
{
    unsigned backoff = 5;

    *last = ETIMEDOUT;
    for (;;) {
        int fd = socket(d->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            *last = errno;
            return -1;
        }
        int rc = connect(fd, (const struct sockaddr *)&d->ss, d->sslen);
        int err = (rc == 0) ? 0 : errno;
        if (err == EINPROGRESS || err == EINTR) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            uint64_t dl = deadline;
            int to = rmacoll__bs_poll_ms(dl);
            int prc = (to == 0) ? 0 : poll(&pfd, 1, to);
            socklen_t sl = sizeof(err);
            if (prc > 0) {
                err = 0;
                (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl);
            } else {
                err = (prc == 0) ? ETIMEDOUT : errno;
            }
        }
        if (err == 0) {
            rmacoll__bs_fd_tune(fd);
            return fd;
        }
        close(fd);
        *last = err;
        uint64_t now = rmacoll__now_ms();
        if (now >= deadline) {
            return -1;
        }
        uint64_t nap = backoff;
        if (nap > deadline - now) {
            nap = deadline - now;
        }
        struct timespec ts = {.tv_sec = (time_t)(nap / 1000),
                              .tv_nsec = (long)(nap % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        backoff = backoff < 100 ? backoff * 2 : 100;
    }
}

rmacoll_status_t rmacoll__bootstrap_create_ex(const rmacoll_unique_id_t *id,
                                              int rank, int nranks,
                                              uint64_t timeout_ms,
                                              const rmacoll__logger_t *lg,
                                              rmacoll__bootstrap_t **out)
{
    /* Long because: connect with back-off, HELLO, wait for WELCOME, as one
     * sequence whose every failure releases the half-built object in one place. */
    rmacoll__bootstrap_t *bs;
    bs_id_t d;
    uint64_t start = rmacoll__now_ms(), deadline;
    int last;
    int err;
    bs_hdr_t h;
    uint8_t hb[BS_HDR_BYTES];

    if (out == NULL || id == NULL || nranks < 1 || rank < 0 || rank >= nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    bs = calloc(1, sizeof(*bs));
    if (bs == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    bs->rank = rank;
    bs->nranks = nranks;
    bs->fd = -1;
    bs->timeout_ms = timeout_ms ? timeout_ms : RMACOLL__BOOTSTRAP_DEFAULT_TIMEOUT_MS;
    bs->grace_ms = BS_GRACE_MS(bs->timeout_ms);
    if (lg != NULL) {
        bs->lg = *lg;
    } else {
        rmacoll__logger_default(&bs->lg);
        bs->lg.rank = rank;
    }
    rmacoll__env_warn_unknown(&bs->lg);   /* once per process */
    if (rmacoll__bs_id_decode(id, &d) != 0) {
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: the unique id is not an rmacoll id "
                     "(not made by rmacoll_get_unique_id?)", rank);
        free(bs);
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll__bs_sockaddr_str((struct sockaddr *)&d.ss, bs->root_addr, sizeof(bs->root_addr));
    if (rmacoll__bs_id_ended(d.magic)) {
        /* its communicator ended here, with its root: this rank fails now,
         * and a root that turns the other ranks away with the reason
         * listens at the id's address for as long as they would wait */
        rmacoll__bs_tombstone(&d, bs->timeout_ms, &bs->lg);
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: the unique id (root %s) served a communicator that "
                     "has been destroyed: each unique id serves one communicator; make a "
                     "new one with rmacoll_get_unique_id", rank, bs->root_addr);
        free(bs);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    deadline = rmacoll__bs_add_ms(start, bs->timeout_ms);
    bs->fd = bs_connect(&d, deadline, &last);
    if (bs->fd < 0) {
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: could not reach the root %s within %" PRIu64
                     " ms: %s", rank, bs->root_addr, bs->timeout_ms, strerror(last));
        free(bs);
        return last == ETIMEDOUT || last == ECONNREFUSED ? RMACOLL_ERR_TIMEOUT
                                                          : RMACOLL_ERR_BOOTSTRAP;
    }
    uint64_t now = rmacoll__now_ms();
    h = (bs_hdr_t){.type = BS_MSG_HELLO, .arg = BS_PROTO_VERSION, .a = d.magic,
                   .b = ((uint64_t)(uint32_t)rank << 32) | (uint32_t)nranks,
                   .c = deadline > now ? deadline - now : 1};
    err = rmacoll__bs_send_hdr(bs->fd, &h, rmacoll__bs_add_ms(deadline, bs->grace_ms));
    while (err == 0) {
        err = rmacoll__bs_recv_all(bs->fd, hb, sizeof(hb), rmacoll__bs_add_ms(deadline, bs->grace_ms));
        rmacoll__bs_hdr_decode(hb, &h);
        if (err != 0 || h.type != BS_MSG_PROGRESS) {
            break;
        }
        deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), bs->timeout_ms); /* another rank joined */
    }
    rmacoll_status_t st = RMACOLL_SUCCESS;
    if (err != 0) {
        st = bs_io_error(bs, err, "rendezvous", bs->timeout_ms + bs->grace_ms);
    } else {
        rmacoll__bs_hdr_decode(hb, &h);
        if (h.type == BS_MSG_ERROR) {
            st = bs_read_error(bs, &h, "rendezvous");
        } else if (h.type != BS_MSG_WELCOME || h.a != (uint64_t)nranks) {
            rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap rank %d: unexpected answer (type %u) from the root %s",
                         rank, h.type, bs->root_addr);
            st = RMACOLL_ERR_BOOTSTRAP;
        }
    }
    if (st != RMACOLL_SUCCESS) {
        close(bs->fd);
        free(bs);
        return st;
    }
    rmacoll__log(&bs->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap rank %d of %d: joined the root %s in %" PRIu64 " ms",
                 rank, nranks, bs->root_addr, rmacoll__now_ms() - start);
    *out = bs;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__bootstrap_create(const rmacoll_unique_id_t *id,
                                           int rank, int nranks,
                                           uint64_t timeout_ms,
                                           rmacoll__bootstrap_t **bs)
{
    return rmacoll__bootstrap_create_ex(id, rank, nranks, timeout_ms, NULL, bs);
}

rmacoll_status_t rmacoll__bootstrap_create_oob(const rmacoll_oob_t *oob,
                                               int rank, int nranks,
                                               rmacoll__bootstrap_t **out)
{
    rmacoll__bootstrap_t *bs;

    if (out == NULL || oob == NULL || oob->allgather == NULL || nranks < 1 ||
        rank < 0 || rank >= nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    bs = calloc(1, sizeof(*bs));
    if (bs == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    bs->rank = rank;
    bs->nranks = nranks;
    bs->fd = -1;
    bs->is_oob = 1;
    bs->oob = *oob;
    rmacoll__logger_default(&bs->lg);
    bs->lg.rank = rank;
    snprintf(bs->root_addr, sizeof(bs->root_addr), "oob");
    *out = bs;
    return RMACOLL_SUCCESS;
}

void rmacoll__bootstrap_set_logger(rmacoll__bootstrap_t *bs,
                                   const rmacoll__logger_t *lg)
{
    if (bs == NULL) {
        return;
    }
    if (lg != NULL) {
        bs->lg = *lg;
    } else {
        rmacoll__logger_default(&bs->lg);
        bs->lg.rank = bs->rank;
    }
    if (bs->is_oob) {
        rmacoll__env_warn_unknown(&bs->lg);   /* once per process */
    }
}

int rmacoll__bootstrap_rank(const rmacoll__bootstrap_t *bs)
{
    return bs->rank;
}

int rmacoll__bootstrap_nranks(const rmacoll__bootstrap_t *bs)
{
    return bs->nranks;
}

/* Sends the OP header and payload while watching for an early ERROR. */
static rmacoll_status_t bs_op_send(rmacoll__bootstrap_t *bs, const uint8_t *hdr,
                                   const uint8_t *payload, size_t bytes,
                                   uint64_t deadline, const char *what)
{
    size_t total = BS_HDR_BYTES + bytes, off = 0;

    while (off < total) {
        const uint8_t *src = off < BS_HDR_BYTES ? hdr + off : payload + (off - BS_HDR_BYTES);
        size_t len = off < BS_HDR_BYTES ? BS_HDR_BYTES - off : total - off;
        ssize_t n = send(bs->fd, src, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            int err = errno;
            /* The root may have said why before closing. */
            uint8_t hb[BS_HDR_BYTES];
            bs_hdr_t h;
            if (rmacoll__bs_recv_all(bs->fd, hb, sizeof(hb), rmacoll__bs_add_ms(rmacoll__now_ms(), 200)) == 0) {
                rmacoll__bs_hdr_decode(hb, &h);
                if (h.type == BS_MSG_ERROR) {
                    return bs_read_error(bs, &h, what);
                }
            }
            return bs_io_error(bs, err, what, 0);
        }
        struct pollfd pfd = {.fd = bs->fd, .events = POLLOUT | POLLIN};
        int to = rmacoll__bs_poll_ms(deadline);
        if (to == 0) {
            return bs_io_error(bs, ETIMEDOUT, what, bs->timeout_ms + bs->grace_ms);
        }
        if (poll(&pfd, 1, to) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return bs_io_error(bs, errno, what, 0);
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            uint8_t hb[BS_HDR_BYTES];
            bs_hdr_t h;
            int err = rmacoll__bs_recv_all(bs->fd, hb, sizeof(hb), deadline);
            if (err != 0) {
                return bs_io_error(bs, err, what, bs->timeout_ms + bs->grace_ms);
            }
            rmacoll__bs_hdr_decode(hb, &h);
            if (h.type == BS_MSG_ERROR) {
                return bs_read_error(bs, &h, what);
            }
            if (h.type == BS_MSG_PROGRESS) {
                deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), bs->timeout_ms + bs->grace_ms);
                continue; /* another rank entered */
            }
            rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap rank %d: %s: unexpected message type %u from "
                         "the root %s", bs->rank, what, h.type, bs->root_addr);
            return RMACOLL_ERR_BOOTSTRAP;
        }
    }
    return RMACOLL_SUCCESS;
}

/* The allgather whose silence limit is tmo ms (the root takes the least
 * any rank gave). */
static rmacoll_status_t bs_allgather_for(rmacoll__bootstrap_t *bs, const void *send,
                                         void *recv, size_t bytes, uint64_t tmo);

rmacoll_status_t rmacoll__bootstrap_allgather(rmacoll__bootstrap_t *bs,
                                              const void *send, void *recv,
                                              size_t bytes)
{
    return bs_allgather_for(bs, send, recv, bytes, bs != NULL ? bs->timeout_ms : 0);
}

static rmacoll_status_t bs_allgather_for(rmacoll__bootstrap_t *bs, const void *send,
                                         void *recv, size_t bytes, uint64_t tmo)
{
    char what[64];
    uint8_t hb[BS_HDR_BYTES];
    bs_hdr_t h;
    uint64_t total, deadline, wait_ms;
    rmacoll_status_t st;
    int err;

    if (bs == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (bytes > RMACOLL__BOOTSTRAP_MAX_BYTES) {
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: allgather of %zu bytes is above the "
                     "limit of %llu", bs->rank, bytes,
                     (unsigned long long)RMACOLL__BOOTSTRAP_MAX_BYTES);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (bytes > 0 && (send == NULL || recv == NULL)) {
        return RMACOLL_ERR_NULL_BUFFER;
    }
    if (bs->is_oob) {
        if (bytes == 0) {
            return bs->oob.barrier != NULL ? bs->oob.barrier(bs->oob.ctx)
                                           : rmacoll__bootstrap_barrier(bs);
        }
        return bs->oob.allgather(bs->oob.ctx, send, recv, bytes);
    }
    if (bs->failed != RMACOLL_SUCCESS) {
        return bs->failed;
    }
    snprintf(what, sizeof(what), "allgather #%u of %zu bytes", bs->seq, bytes);
    wait_ms = tmo > UINT64_MAX - bs->grace_ms ? UINT64_MAX : tmo + bs->grace_ms;
    total = (uint64_t)bytes * (uint64_t)bs->nranks;
    deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), wait_ms);
    h = (bs_hdr_t){.type = BS_MSG_OP, .arg = bs->seq, .a = bytes, .b = tmo};
    rmacoll__bs_hdr_encode(&h, hb);
    st = bs_op_send(bs, hb, send, bytes, deadline, what);
    if (st != RMACOLL_SUCCESS) {
        return bs_fail(bs, st);
    }
    for (;;) {
        err = rmacoll__bs_recv_all(bs->fd, hb, sizeof(hb), deadline);
        if (err != 0) {
            return bs_fail(bs, bs_io_error(bs, err, what, wait_ms));
        }
        rmacoll__bs_hdr_decode(hb, &h);
        if (h.type != BS_MSG_PROGRESS) {
            break;
        }
        /* another rank entered: the silence counts from now */
        deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), wait_ms);
    }
    if (h.type == BS_MSG_ERROR) {
        return bs_fail(bs, bs_read_error(bs, &h, what));
    }
    if (h.type != BS_MSG_RESULT || h.arg != bs->seq || h.a != total) {
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: %s: bad answer from the root %s (type %u, "
                     "#%u, %" PRIu64 " bytes, expected %" PRIu64 ")",
                     bs->rank, what, bs->root_addr, h.type, h.arg, h.a, total);
        return bs_fail(bs, RMACOLL_ERR_BOOTSTRAP);
    }
    if (total > 0) {
        err = rmacoll__bs_recv_all(bs->fd, recv, (size_t)total, deadline);
        if (err != 0) {
            return bs_fail(bs, bs_io_error(bs, err, what, wait_ms));
        }
    }
    bs->seq++;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__bootstrap_barrier(rmacoll__bootstrap_t *bs)
{
    if (bs == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (bs->is_oob) {
        if (bs->oob.barrier != NULL) {
            return bs->oob.barrier(bs->oob.ctx);
        }
        /* No barrier callback: a 1-byte allgather synchronises as well. */
        uint8_t one = 1;
        uint8_t *all = malloc((size_t)bs->nranks);
        if (all == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        rmacoll_status_t st = bs->oob.allgather(bs->oob.ctx, &one, all, 1);
        free(all);
        return st;
    }
    return rmacoll__bootstrap_allgather(bs, NULL, NULL, 0);
}

rmacoll_status_t rmacoll__bootstrap_barrier_for(rmacoll__bootstrap_t *bs, uint64_t timeout_ms)
{
    if (bs == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (bs->is_oob) {
        return rmacoll__bootstrap_barrier(bs); /* the embedder's own limits */
    }
    return bs_allgather_for(bs, NULL, NULL, 0, timeout_ms ? timeout_ms : bs->timeout_ms);
}

rmacoll_status_t rmacoll__bootstrap_poll_error(rmacoll__bootstrap_t *bs, int *rank,
                                               char *text, size_t len)
{
    uint8_t hb[BS_HDR_BYTES] = {0}; /* decoded before n is checked */
    bs_hdr_t h;
    ssize_t n;

    if (bs == NULL || bs->is_oob || bs->fd < 0) {
        return RMACOLL_SUCCESS;
    }
    if (__atomic_load_n(&bs->reported, __ATOMIC_ACQUIRE) == RMACOLL_SUCCESS) {
        rmacoll_status_t st;

        if (atomic_exchange_explicit(&bs->polling, 1, memory_order_acquire)) {
            return RMACOLL_SUCCESS; /* another thread is reading the socket */
        }
        n = recv(bs->fd, hb, sizeof(hb), MSG_PEEK | MSG_DONTWAIT);
        rmacoll__bs_hdr_decode(hb, &h);
        if (n != (ssize_t)sizeof(hb) ||
            /* left for the next allgather: only a rank's death is reported
             * here, not e.g. an allgather another rank entered early */
            h.type != BS_MSG_ERROR || h.b == 0 || h.b > (uint64_t)bs->nranks ||
            rmacoll__bs_recv_all(bs->fd, hb, sizeof(hb),
                                 rmacoll__bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
            /* nothing, part of a header, another message or the root gone */
            atomic_store_explicit(&bs->polling, 0, memory_order_release);
            return RMACOLL_SUCCESS;
        }
        size_t tn = h.a < BS_ERRTEXT_MAX ? (size_t)h.a : BS_ERRTEXT_MAX;
        if (rmacoll__bs_recv_all(bs->fd, bs->reported_text, tn, rmacoll__bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
            tn = 0;
        }
        bs->reported_text[tn] = '\0';
        st = bs_status_from_wire(h.arg);
        st = st == RMACOLL_SUCCESS ? RMACOLL_ERR_BOOTSTRAP : st;
        bs->reported_rank = (int)(h.b - 1);
        bs->failed = st;
        __atomic_store_n(&bs->reported, st, __ATOMIC_RELEASE);
        atomic_store_explicit(&bs->polling, 0, memory_order_release);
        /* the root logged it (ERROR); the error each rank's call returns
         * says it again */
        rmacoll__log(&bs->lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: the root %s reports: %s", bs->rank, bs->root_addr,
                     tn ? bs->reported_text : "no reason given");
    }
    if (rank != NULL) {
        *rank = bs->reported_rank;
    }
    if (text != NULL && len > 0) {
        snprintf(text, len, "%s", bs->reported_text[0] ? bs->reported_text
                                                         : "no reason given");
    }
    return bs->reported;
}

int rmacoll__bootstrap_watches(const rmacoll__bootstrap_t *bs)
{
    return bs != NULL && !bs->is_oob && bs->fd >= 0;
}

void rmacoll__bootstrap_destroy(rmacoll__bootstrap_t *bs)
{
    if (bs == NULL) {
        return;
    }
    if (bs->fd >= 0) {
        /* Say BYE, then wait (bounded) for the root to close: it reads a
         * BYE only after the previous result went to every rank, so the
         * process hosting the root (rank 0 from launcher variables) may
         * exit as soon as this returns. */
        bs_hdr_t h = {.type = BS_MSG_BYE};
        uint64_t wait = bs->timeout_ms < 5000 ? bs->timeout_ms : 5000;
        uint64_t deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), wait);
        if (rmacoll__bs_send_hdr(bs->fd, &h, deadline) == 0) {
            uint8_t b;
            shutdown(bs->fd, SHUT_WR);
            (void)rmacoll__bs_recv_all(bs->fd, &b, 1, deadline);
        }
        close(bs->fd);
    }
    free(bs);
}

rmacoll_status_t rmacoll__bootstrap_allgather_cb(void *ctx, const void *send,
                                                 void *recv, size_t bytes)
{
    return rmacoll__bootstrap_allgather((rmacoll__bootstrap_t *)ctx, send, recv, bytes);
}
