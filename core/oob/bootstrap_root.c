/*
 * bootstrap_root.c - the root's side of each connection: a rank's hello,
 * the gather of an allgather's inputs and the scatter of its result,
 * progress, rejections, failures and timeouts. The loop that drives them
 * is bootstrap_root_main.c.
 */
#define _GNU_SOURCE /* accept4 */
#include "core/oob/bootstrap_priv.h"

#include "core/base/clock.h"
#include "core/base/text.h"
#include "core/config/env.h"

/* ------------------------------------------------------------------ root */

void rmacoll__bs_conn_close(bs_rconn_t *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

void rmacoll__bs_root_free(bs_root_t *rt)
{
    if (rt->lfd >= 0) {
        close(rt->lfd);
    }
    for (int i = 0; i < rt->npending; i++) {
        rmacoll__bs_conn_close(&rt->pending[i]);
    }
    for (int r = 0; rt->ranks != NULL && r < rt->nranks; r++) {
        rmacoll__bs_conn_close(&rt->ranks[r]);
    }
    free(rt->ranks);
    free(rt->pending);
    free(rt->buf);
    free(rt->pfds);
    free(rt->shr);
    free(rt);
}

/* A failure: tell every connected rank, drain them until they close or
 * BS_DRAIN_MS passed (closing with unread data would reset the connection
 * and could destroy the message), then the caller frees the root. */
void rmacoll__bs_root_fail(bs_root_t *rt, rmacoll_status_t st, const char *fmt, ...)
{
    char text[BS_ERRTEXT_MAX];
    va_list ap;
    uint64_t deadline;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    rmacoll__log(&rt->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap root %s: %s", rt->addr, text);
    if (rt->lfd >= 0) {
        close(rt->lfd);
        rt->lfd = -1;
    }
    for (int r = 0; rt->ranks != NULL && r < rt->nranks; r++) {
        bs_rconn_t *c = &rt->ranks[r];
        if (c->fd < 0) {
            continue;
        }
        /* A half-sent RESULT cannot be followed by a header: just close. */
        if (!(rt->phase == BS_PH_SCATTER && c->out_off > 0)) {
            rmacoll__bs_send_error(c->fd, st, text, rt->culprit);
        }
        shutdown(c->fd, SHUT_WR);
    }
    deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), BS_DRAIN_MS);
    for (;;) {
        int n = 0;
        for (int r = 0; rt->ranks != NULL && r < rt->nranks; r++) {
            if (rt->ranks[r].fd >= 0) {
                rt->pfds[n].fd = rt->ranks[r].fd;
                rt->pfds[n].events = POLLIN;
                rt->pfds[n].revents = 0;
                n++;
            }
        }
        int to = rmacoll__bs_poll_ms(deadline);
        if (n == 0 || to == 0) {
            break;
        }
        if (poll(rt->pfds, (nfds_t)n, to) < 0 && errno != EINTR) {
            break;
        }
        for (int r = 0; r < rt->nranks; r++) {
            bs_rconn_t *c = &rt->ranks[r];
            uint8_t sink[4096];
            if (c->fd < 0) {
                continue;
            }
            ssize_t got = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
            if (got == 0 || (got < 0 && errno != EAGAIN &&
                             errno != EWOULDBLOCK && errno != EINTR)) {
                rmacoll__bs_conn_close(c);
            }
        }
    }
}

/* Reads what is available into c->hdr. 1: complete, 0: not yet, -1: EOF
 * or error (errno set; 0 for EOF). */
int rmacoll__bs_conn_read_hdr(bs_rconn_t *c)
{
    while (c->hdr_got < BS_HDR_BYTES) {
        ssize_t n = recv(c->fd, c->hdr + c->hdr_got, BS_HDR_BYTES - c->hdr_got,
                         MSG_DONTWAIT);
        if (n > 0) {
            c->hdr_got += (size_t)n;
        } else if (n == 0) {
            errno = 0;
            return -1;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return 0;
        } else {
            return -1;
        }
    }
    return 1;
}

static void bs_root_reject(bs_root_t *rt, bs_rconn_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void bs_root_reject(bs_root_t *rt, bs_rconn_t *c, const char *fmt, ...)
{
    char text[BS_ERRTEXT_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    rmacoll__log(&rt->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap root %s: rejected connection from %s: %s",
                 rt->addr, c->peer, text);
    rmacoll__bs_send_error(c->fd, RMACOLL_ERR_BOOTSTRAP, text, -1);
    shutdown(c->fd, SHUT_WR);
    rmacoll__bs_conn_close(c);
}

/* Rank `from` joined the rendezvous (seq 0) or entered allgather #seq:
 * the other ranks already waiting count their timeout again (best effort;
 * a rank that is gone is found by the poll loop). */
static void bs_root_progress(bs_root_t *rt, int from, uint32_t seq, int in_gather)
{
    bs_hdr_t h = {.type = BS_MSG_PROGRESS, .arg = seq};
    uint64_t dl = rmacoll__bs_add_ms(rmacoll__now_ms(), 1000);

    for (int q = 0; q < rt->nranks; q++) {
        bs_rconn_t *c = &rt->ranks[q];
        if (q == from || c->fd < 0 || (in_gather && c->hdr_got < BS_HDR_BYTES)) {
            continue;
        }
        (void)rmacoll__bs_send_hdr(c->fd, &h, dl);
    }
}

/* A complete HELLO from pending socket c. 0 ok, -1 fatal (root failed). */
int rmacoll__bs_root_hello(bs_root_t *rt, bs_rconn_t *c)
{
    /* Long because: a hello is checked field by field (version, magic,
     * rank, size, duplicate), each check with its own rejection message, in an
     * order where each relies on the previous one. */
    bs_hdr_t h;
    int rank, nranks;

    rmacoll__bs_hdr_decode(c->hdr, &h);
    rank = (int)(int32_t)(uint32_t)(h.b >> 32);
    nranks = (int)(int32_t)(uint32_t)h.b;
    if (h.type != BS_MSG_HELLO || h.arg != BS_PROTO_VERSION) {
        bs_root_reject(rt, c, "not an rmacoll bootstrap hello (type %u version %u)",
                       h.type, h.arg);
        return 0;
    }
    if (h.a != rt->magic) {
        bs_root_reject(rt, c, "rank %d presented the wrong magic %016" PRIx64
                       " (stale or foreign unique id)", rank, h.a);
        return 0;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        bs_root_reject(rt, c, "invalid rank %d of %d ranks", rank, nranks);
        return 0;
    }
    if (rt->nranks != 0 && nranks != rt->nranks) {
        bs_root_reject(rt, c, "rank %d says %d ranks, others said %d", rank,
                       nranks, rt->nranks);
        return 0;
    }
    if (rt->phase == BS_PH_REJECT) {
        bs_root_reject(rt, c, "rank %d presented a unique id whose communicator has been "
                       "destroyed (root %s): each unique id serves one communicator; make "
                       "a new one with rmacoll_get_unique_id", rank, rt->addr);
        return 0;
    }
    if (rt->phase != BS_PH_CONNECT) {
        bs_root_reject(rt, c, "rank %d connected after all %d ranks had joined%s: the unique "
                       "id is in use by a live communicator (each unique id serves one "
                       "communicator; make a new one with rmacoll_get_unique_id)",
                       rank, rt->nranks,
                       rt->ranks[rank].fd >= 0 ? " (duplicate rank)" : "");
        return 0;
    }
    if (rt->nranks == 0) {
        rt->ranks = calloc((size_t)nranks, sizeof(*rt->ranks));
        struct pollfd *np = realloc(rt->pfds, ((size_t)nranks + 1 +
                                               (size_t)rt->cap_pending) *
                                                  sizeof(*np));
        if (rt->ranks == NULL || np == NULL) {
            free(rt->ranks);
            rt->ranks = NULL;
            if (np != NULL) {
                rt->pfds = np;
            }
            bs_root_reject(rt, c, "root out of memory for %d ranks", nranks);
            return 0;
        }
        rt->pfds = np;
        rt->cap_pfds = nranks + 1 + rt->cap_pending;
        for (int r = 0; r < nranks; r++) {
            rt->ranks[r].fd = -1;
        }
        rt->nranks = nranks;
    }
    if (rt->ranks[rank].fd >= 0) {
        bs_root_reject(rt, c, "duplicate rank %d (already connected from %s)",
                       rank, rt->ranks[rank].peer);
        return 0;
    }
    rt->ranks[rank] = *c;
    rt->ranks[rank].hdr_got = 0;
    c->fd = -1;
    rt->nconnected++;
    /* silence: the rendezvous fails when no rank joined for timeout_ms */
    rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), h.c);
    rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap root %s: rank %d of %d connected from %s", rt->addr,
                 rank, nranks, rt->ranks[rank].peer);
    if (rt->nconnected == rt->nranks) {
        bs_hdr_t w = {.type = BS_MSG_WELCOME, .a = (uint64_t)rt->nranks};
        uint64_t wdl = rmacoll__bs_add_ms(rmacoll__now_ms(), 1000);
        for (int r = 0; r < rt->nranks; r++) {
            if (rmacoll__bs_send_hdr(rt->ranks[r].fd, &w, wdl) != 0) {
                rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                      "rank %d disconnected before the rendezvous completed", r);
                return -1;
            }
        }
        rt->phase = BS_PH_GATHER;
        rt->deadline = UINT64_MAX;
    } else {
        bs_root_progress(rt, rank, 0, 0);
    }
    return 0;
}

void rmacoll__bs_root_accept(bs_root_t *rt)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(rt->lfd, (struct sockaddr *)&ss, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        return; /* EAGAIN, ECONNABORTED, EMFILE: try again next round */
    }
    if (rt->npending == rt->cap_pending) {
        int ncap = rt->cap_pending ? 2 * rt->cap_pending : 8;
        bs_rconn_t *np = realloc(rt->pending, (size_t)ncap * sizeof(*np));
        struct pollfd *pp = realloc(rt->pfds, ((size_t)rt->nranks + 1 +
                                               (size_t)ncap) * sizeof(*pp));
        if (np != NULL) {
            rt->pending = np;
        }
        if (pp != NULL) {
            rt->pfds = pp;
        }
        if (np == NULL || pp == NULL) {
            close(fd);
            return;
        }
        rt->cap_pending = ncap;
        rt->cap_pfds = rt->nranks + 1 + ncap;
    }
    bs_rconn_t *c = &rt->pending[rt->npending++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), BS_HELLO_TIMEOUT_MS);
    rmacoll__bs_sockaddr_str((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    rmacoll__bs_fd_tune(fd);
}

static void bs_root_op_reset(bs_root_t *rt)
{
    free(rt->buf);
    rt->buf = NULL;
    rt->op_started = 0;
    rt->op_bytes = 0;
    rt->ncontrib = 0;
    rt->ndrained = 0;
    rt->deadline = UINT64_MAX;
    for (int r = 0; r < rt->nranks; r++) {
        rt->ranks[r].hdr_got = 0;
        rt->ranks[r].pay_got = 0;
        rt->ranks[r].contributed = 0;
        rt->ranks[r].out_off = 0;
    }
}

static void bs_root_start_scatter(bs_root_t *rt)
{
    bs_hdr_t h = {.type = BS_MSG_RESULT, .arg = rt->op_seq,
                  .a = rt->op_bytes * (uint64_t)rt->nranks};

    rmacoll__bs_hdr_encode(&h, rt->res_hdr);
    rt->phase = BS_PH_SCATTER;
    rt->ndrained = 0;
    rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), rt->op_timeout_ms);
}

/* In a started allgather: 1 (the root failed, naming them) when every
 * rank that has not entered has left, so it can never complete. */
static int bs_root_all_left(bs_root_t *rt)
{
    uint8_t *gone;
    char list[BS_RANKLIST_MAX];

    if (rt->nleft == 0 || rt->ncontrib + rt->nleft < rt->nranks) {
        return 0;
    }
    gone = calloc((size_t)rt->nranks, 1);
    if (gone != NULL) {
        for (int q = 0; q < rt->nranks; q++) {
            gone[q] = (uint8_t)rt->ranks[q].left;
        }
        rmacoll__bs_rank_list(gone, rt->nranks, list, sizeof(list));
        free(gone);
    } else {
        snprintf(list, sizeof(list), "(%d ranks)", rt->nleft);
    }
    rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                          "rank(s) %s left without entering allgather #%u", list, rt->op_seq);
    return 1;
}

/* Gather-phase input from rank r. 0 ok, -1 root failed. */
int rmacoll__bs_root_gather_input(bs_root_t *rt, int r)
{
    /* Long because: one state machine over a rank's OP message (header,
     * BYE, sequence and size checks, payload, completion of the gather); the
     * states share the header just read, and every protocol violation has its
     * own message naming the rank. */
    bs_rconn_t *c = &rt->ranks[r];

    if (c->contributed) {
        uint8_t b;
        ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return 0;
        }
        if (n <= 0) {
            /* the survivors may shrink: the root stays (bootstrap_shrink.c) */
            rmacoll__bs_root_lose(rt, r, "rank %d disconnected during allgather #%u "
                                  "(process died?)", r, rt->op_seq);
            return 0;
        }
        rt->culprit = r;
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                              "rank %d sent data out of turn in allgather #%u",
                              r, rt->op_seq);
        return -1;
    }
    if (c->hdr_got < BS_HDR_BYTES) {
        int got = rmacoll__bs_conn_read_hdr(c);
        if (got < 0) {
            if (errno == 0) {
                rmacoll__bs_root_lose(rt, r, "rank %d disconnected without leaving "
                                      "(process died?)", r);
            } else {
                rmacoll__bs_root_lose(rt, r, "rank %d disconnected: %s", r,
                                      strerror(errno));
            }
            return 0;
        }
        if (got == 0) {
            return 0;
        }
        bs_hdr_t h;
        rmacoll__bs_hdr_decode(c->hdr, &h);
        if (h.type == BS_MSG_BYE) {
            c->left = 1;
            rmacoll__bs_conn_close(c);
            rt->nleft++;
            rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap root %s: rank %d left (%d of %d)", rt->addr,
                         r, rt->nleft, rt->nranks);
            if (rt->op_started) {
                /* a rank in the allgather keeps its transports up while a
                 * peer may still be in a call that writes into it: the op
                 * fails once every rank that has not entered has left, and
                 * a departure counts as progress until then */
                if (bs_root_all_left(rt)) {
                    return -1;
                }
                rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), rt->op_timeout_ms);
                bs_root_progress(rt, r, rt->op_seq, 1);
            }
            return 0;
        }
        if (h.type == BS_MSG_SHRINK) {
            return rmacoll__bs_root_shrink_msg(rt, r, &h);
        }
        if (h.type != BS_MSG_OP) {
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                  "rank %d sent unexpected message type %u", r, h.type);
            return -1;
        }
        if (h.arg != rt->op_seq) {
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                  "rank %d entered allgather #%u while the root is at #%u",
                                  r, h.arg, rt->op_seq);
            return -1;
        }
        if (h.a > RMACOLL__BOOTSTRAP_MAX_BYTES) {
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                  "rank %d gave %" PRIu64 " bytes, above the limit", r, h.a);
            return -1;
        }
        if (!rt->op_started) {
            rt->op_started = 1;
            rt->op_bytes = h.a;
            rt->op_timeout_ms = h.b;
            if (h.a > 0) {
                rt->buf = malloc((size_t)h.a * (size_t)rt->nranks);
                if (rt->buf == NULL) {
                    rmacoll__bs_root_fail(rt, RMACOLL_ERR_NO_MEMORY,
                                          "root out of memory for allgather #%u of %d x %" PRIu64
                                          " bytes", rt->op_seq, rt->nranks, h.a);
                    return -1;
                }
            }
        } else if (h.a != rt->op_bytes) {
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                  "rank %d gave %" PRIu64 " bytes to allgather #%u, an "
                                  "earlier rank %" PRIu64, r, h.a, rt->op_seq, rt->op_bytes);
            return -1;
        }
        if (h.b < rt->op_timeout_ms) {
            rt->op_timeout_ms = h.b;
        }
        /* silence: the allgather fails when no rank entered for timeout_ms */
        rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), rt->op_timeout_ms);
        bs_root_progress(rt, r, rt->op_seq, 1);
    }
    while (c->pay_got < rt->op_bytes) {
        uint8_t *dst = rt->buf + (size_t)r * rt->op_bytes + c->pay_got;
        ssize_t n = recv(c->fd, dst, rt->op_bytes - c->pay_got, MSG_DONTWAIT);
        if (n > 0) {
            c->pay_got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        }
        rmacoll__bs_root_lose(rt, r, "rank %d disconnected in the middle of allgather #%u "
                              "(%zu of %" PRIu64 " bytes received)",
                              r, rt->op_seq, c->pay_got, rt->op_bytes);
        return 0;
    }
    c->contributed = 1;
    rt->ncontrib++;
    if (rt->ncontrib == rt->nranks) {
        bs_root_start_scatter(rt);
    } else if (bs_root_all_left(rt)) {
        return -1;
    }
    return 0;
}

/* Scatter-phase output to rank r. 0 ok, -1 root failed. */
int rmacoll__bs_root_scatter_output(bs_root_t *rt, int r)
{
    bs_rconn_t *c = &rt->ranks[r];
    size_t total = BS_HDR_BYTES + (size_t)(rt->op_bytes * (uint64_t)rt->nranks);

    while (c->out_off < total) {
        const uint8_t *src;
        size_t len;
        if (c->out_off < BS_HDR_BYTES) {
            src = rt->res_hdr + c->out_off;
            len = BS_HDR_BYTES - c->out_off;
        } else {
            src = rt->buf + (c->out_off - BS_HDR_BYTES);
            len = total - c->out_off;
        }
        ssize_t n = send(c->fd, src, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        }
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                              "rank %d disconnected while receiving allgather #%u: %s",
                              r, rt->op_seq, strerror(errno));
        return -1;
    }
    rt->ndrained++;
    if (rt->ndrained == rt->nranks) {
        bs_root_op_reset(rt);
        rt->op_seq++;
        rt->phase = BS_PH_GATHER;
    }
    return 0;
}

/* Deadline of the phase passed. Always fails the root. */
void rmacoll__bs_root_timeout(bs_root_t *rt)
{
    uint8_t *missing = calloc((size_t)rt->nranks, 1);
    char list[BS_RANKLIST_MAX];
    int nmiss = 0;

    if (missing == NULL) {
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_TIMEOUT, "timed out (out of memory naming ranks)");
        return;
    }
    for (int r = 0; r < rt->nranks; r++) {
        bs_rconn_t *c = &rt->ranks[r];
        if (rt->phase == BS_PH_CONNECT) {
            missing[r] = (c->fd < 0);
        } else if (rt->phase == BS_PH_GATHER) {
            missing[r] = !c->contributed && !c->left; /* a departed rank is named apart */
        } else {
            missing[r] = c->out_off < BS_HDR_BYTES + rt->op_bytes * (uint64_t)rt->nranks;
        }
        nmiss += missing[r];
    }
    rmacoll__bs_rank_list(missing, rt->nranks, list, sizeof(list));
    free(missing);
    if (rt->phase == BS_PH_CONNECT) {
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_TIMEOUT,
                              "timed out waiting for rank(s) %s to connect (%d of %d missing; "
                              "no rank joined for the timeout)", list, nmiss, rt->nranks);
    } else if (rt->phase == BS_PH_GATHER) {
        char gone[BS_RANKLIST_MAX + 40] = "";
        if (rt->nleft > 0) {
            uint8_t *l = calloc((size_t)rt->nranks, 1);
            char ll[BS_RANKLIST_MAX];
            if (l != NULL) {
                for (int r = 0; r < rt->nranks; r++) {
                    l[r] = (uint8_t)rt->ranks[r].left;
                }
                rmacoll__bs_rank_list(l, rt->nranks, ll, sizeof(ll));
                free(l);
                snprintf(gone, sizeof(gone), "; rank(s) %s left", ll);
            }
        }
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_TIMEOUT,
                              "timed out after %" PRIu64 " ms waiting for rank(s) %s to "
                              "enter allgather #%u of %" PRIu64 " bytes (no rank entered or "
                              "left for %" PRIu64 " ms%s)", rt->op_timeout_ms, list, rt->op_seq,
                              rt->op_bytes, rt->op_timeout_ms, gone);
    } else {
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_TIMEOUT,
                              "timed out after %" PRIu64 " ms waiting for rank(s) %s to "
                              "read the result of allgather #%u",
                              rt->op_timeout_ms, list, rt->op_seq);
    }
}
