/*
 * bootstrap_shrink.c - after a rank's death the root does not give up: it
 * tells every rank (ERROR naming the dead rank, as before) and stays
 * BROKEN, serving no more allgathers, so that the survivors can agree on
 * who is alive (rmacoll_comm_shrink). The root's side of that agreement
 * and the rank's (rmacoll__bootstrap_shrink).
 *
 * The agreement: every rank that calls shrink sends SHRINK with the ranks
 * it saw go silent (suspects). The root knows which connections closed.
 * It answers once every rank still connected has either announced itself
 * or is a suspect, or when the bound of the first announcement passed:
 * the survivors are the announced ranks still connected, in rank order;
 * each gets SHRUNK (its new rank, their number, the flags, and the unique
 * id of a new root the old root starts in its own process); every other
 * rank still connected gets a final ERROR (c = 1) and the root stops
 * writing to it. Then the root waits (DONE) for the ranks to leave.
 */
#include "core/oob/bootstrap_priv.h"

#include <stdarg.h>

#include "core/base/clock.h"

/* The silence after which a broken root gives up: the ranks' timeout_ms. */
static uint64_t bs_silence_ms(const bs_root_t *rt)
{
    return rt->op_timeout_ms ? rt->op_timeout_ms : RMACOLL__BOOTSTRAP_DEFAULT_TIMEOUT_MS;
}

/* An ERROR that ends a shrink on the rank (c = 1), best effort. */
static void bs_send_final(int fd, rmacoll_status_t st, const char *text)
{
    size_t n = strlen(text);
    bs_hdr_t h = {.type = BS_MSG_ERROR, .arg = (uint32_t)st, .a = n, .c = 1};
    uint64_t deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), 1000);

    if (rmacoll__bs_send_hdr(fd, &h, deadline) == 0) {
        (void)rmacoll__bs_send_all(fd, text, n, deadline);
    }
}

/* Ends a pending allgather: the ranks in it read an ERROR (sent by the
 * caller); a header already read is consumed, a payload not yet read is
 * discarded (skip), a partial header is kept. */
static void bs_root_abandon_op(bs_root_t *rt)
{
    for (int q = 0; q < rt->nranks; q++) {
        bs_rconn_t *c = &rt->ranks[q];
        if (c->hdr_got == BS_HDR_BYTES) {
            if (!c->contributed && rt->op_bytes > c->pay_got) {
                c->skip = rt->op_bytes - c->pay_got;
            }
            c->hdr_got = 0;
        }
        c->pay_got = 0;
        c->contributed = 0;
        c->out_off = 0;
    }
    free(rt->buf);
    rt->buf = NULL;
    rt->op_started = 0;
    rt->op_bytes = 0;
    rt->ncontrib = 0;
    rt->ndrained = 0;
}

static int bs_root_shrink_finish(bs_root_t *rt);

/* 0, or the root finished the shrink when every rank still connected has
 * announced or is a suspect (force: the bound passed). */
static int bs_root_shrink_check(bs_root_t *rt, int force)
{
    for (int r = 0; r < rt->nranks && !force; r++) {
        if (rt->ranks[r].fd >= 0 && !(rt->shr[r] & (BS_SHR_ANNOUNCED | BS_SHR_SUSPECT))) {
            return 0;
        }
    }
    return bs_root_shrink_finish(rt);
}

void rmacoll__bs_root_lose(bs_root_t *rt, int r, const char *fmt, ...)
{
    char text[BS_ERRTEXT_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    rmacoll__bs_conn_close(&rt->ranks[r]);
    if (rt->phase == BS_PH_DONE || rt->phase == BS_PH_BROKEN) {
        /* every rank was told of the first death; a rank whose allgather
         * failed on that report closes its connection too */
        rmacoll__log(&rt->lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap root %s: after a failure: %s", rt->addr, text);
        return;
    }
    rmacoll__log(&rt->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap root %s: %s", rt->addr, text);
    if (rt->phase != BS_PH_SHRINK) {
        snprintf(rt->broken_text, sizeof(rt->broken_text), "%s", text);
        bs_root_abandon_op(rt);
        rt->phase = BS_PH_BROKEN;
        rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), bs_silence_ms(rt));
    }
    for (int q = 0; q < rt->nranks; q++) {
        if (rt->ranks[q].fd >= 0) {
            rmacoll__bs_send_error(rt->ranks[q].fd, RMACOLL_ERR_BOOTSTRAP, text, r);
        }
    }
    if (rt->phase == BS_PH_SHRINK) {
        (void)bs_root_shrink_check(rt, 0);
    }
}

/* Reads a SHRINK's suspects from rank r into sus. 0, or -1 (r is gone). */
static int bs_root_read_suspects(bs_root_t *rt, int r, const bs_hdr_t *h, uint8_t *sus)
{
    bs_rconn_t *c = &rt->ranks[r];

    if (h->a != (uint64_t)rt->nranks) {
        rmacoll__log(&rt->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap root %s: rank %d asked to shrink %" PRIu64
                     " ranks, the root has %d", rt->addr, r, h->a, rt->nranks);
        bs_send_final(c->fd, RMACOLL_ERR_BOOTSTRAP, "shrink of a different number of ranks");
        rmacoll__bs_conn_close(c);
        return -1;
    }
    if (rmacoll__bs_recv_all(c->fd, sus, (size_t)rt->nranks,
                             rmacoll__bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
        rmacoll__bs_root_lose(rt, r, "rank %d disconnected while asking to shrink", r);
        return -1;
    }
    return 0;
}

int rmacoll__bs_root_shrink_msg(bs_root_t *rt, int r, const bs_hdr_t *h)
{
    uint8_t *sus;

    if (rt->shr == NULL) {
        rt->shr = calloc((size_t)rt->nranks, 1);
    }
    sus = malloc((size_t)rt->nranks);
    if (rt->shr == NULL || sus == NULL) {
        free(sus);
        rmacoll__bs_root_fail(rt, RMACOLL_ERR_NO_MEMORY, "root out of memory for a shrink");
        return -1;
    }
    if (bs_root_read_suspects(rt, r, h, sus) != 0) {
        free(sus);
        return 0;
    }
    if (rt->phase == BS_PH_DONE) {
        free(sus);
        bs_send_final(rt->ranks[r].fd, RMACOLL_ERR_BOOTSTRAP,
                      "this rank asked to shrink after the shrink of its communicator "
                      "completed without it");
        shutdown(rt->ranks[r].fd, SHUT_WR);
        return 0;
    }
    if (rt->phase == BS_PH_GATHER && rt->op_started) {
        for (int q = 0; q < rt->nranks; q++) {
            if (rt->ranks[q].fd >= 0 && rt->ranks[q].contributed) {
                rmacoll__bs_send_error(rt->ranks[q].fd, RMACOLL_ERR_BOOTSTRAP,
                                       "another rank started a shrink during this allgather", -1);
            }
        }
        bs_root_abandon_op(rt);
    }
    if (rt->phase != BS_PH_SHRINK) {
        rt->phase = BS_PH_SHRINK;
        rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), h->b ? h->b : bs_silence_ms(rt));
        rmacoll__log(&rt->lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap root %s: rank %d starts a shrink (bound %" PRIu64 " ms)",
                     rt->addr, r, h->b);
    }
    rt->shr[r] |= BS_SHR_ANNOUNCED;
    for (int q = 0; q < rt->nranks; q++) {
        if (sus[q] && q != r) {
            rt->shr[q] |= BS_SHR_SUSPECT;
        }
    }
    free(sus);
    return bs_root_shrink_check(rt, 0);
}

/* The new rendezvous and what each survivor receives: the new root's id,
 * then one flag per old rank. */
static rmacoll_status_t bs_root_new_rendezvous(bs_root_t *rt, uint8_t *pay)
{
    char host[256];
    unsigned port;
    rmacoll_unique_id_t id;
    rmacoll_status_t st;

    if (rmacoll__bs_split_hostport(rt->addr, host, sizeof(host), &port) != 0) {
        return RMACOLL_ERR_BOOTSTRAP;
    }
    st = rmacoll__bs_new_root(host, 0, &rt->lg, &id);
    if (st == RMACOLL_SUCCESS) {
        memcpy(pay, &id, RMACOLL_UNIQUE_ID_BYTES);
        for (int r = 0; r < rt->nranks; r++) {
            pay[RMACOLL_UNIQUE_ID_BYTES + r] = rt->ranks[r].fd >= 0 &&
                                               (rt->shr[r] & BS_SHR_ANNOUNCED);
        }
    }
    return st;
}

/* Sends each rank still connected its answer; the root is DONE after. */
static int bs_root_shrink_finish(bs_root_t *rt)
{
    size_t plen = RMACOLL_UNIQUE_ID_BYTES + (size_t)rt->nranks;
    uint8_t *pay = calloc(plen, 1);
    uint8_t *excl = calloc((size_t)rt->nranks, 1);
    char list[BS_RANKLIST_MAX], text[BS_ERRTEXT_MAX];
    rmacoll_status_t st = pay && excl ? bs_root_new_rendezvous(rt, pay) : RMACOLL_ERR_NO_MEMORY;
    int n = 0, k = 0;

    for (int r = 0; r < rt->nranks; r++) {
        int alive = rt->ranks[r].fd >= 0 && (rt->shr[r] & BS_SHR_ANNOUNCED);
        n += alive;
        if (excl != NULL) {
            excl[r] = !alive;
        }
    }
    if (excl != NULL) {
        rmacoll__bs_rank_list(excl, rt->nranks, list, sizeof(list));
    } else {
        snprintf(list, sizeof(list), "?");
    }
    rmacoll__log(&rt->lg, st == RMACOLL_SUCCESS ? RMACOLL_LOG_INFO : RMACOLL_LOG_ERROR,
                 RMACOLL_LOG_SUBSYS_BOOTSTRAP, "bootstrap root %s: shrink: %d of %d ranks "
                 "survive (left out: %s)%s", rt->addr, n, rt->nranks, list[0] ? list : "none",
                 st == RMACOLL_SUCCESS ? "" : "; the new rendezvous could not be made");
    for (int r = 0; r < rt->nranks; r++) {
        bs_rconn_t *c = &rt->ranks[r];
        uint64_t dl = rmacoll__bs_add_ms(rmacoll__now_ms(), 1000);
        if (c->fd < 0) {
            continue;
        }
        if ((rt->shr[r] & BS_SHR_ANNOUNCED) && st == RMACOLL_SUCCESS) {
            bs_hdr_t h = {.type = BS_MSG_SHRUNK, .arg = (uint32_t)k++, .a = (uint64_t)n,
                          .b = plen};
            if (rmacoll__bs_send_hdr(c->fd, &h, dl) != 0 ||
                rmacoll__bs_send_all(c->fd, pay, plen, dl) != 0) {
                rmacoll__bs_conn_close(c); /* its peers' create will say so */
            }
            continue;
        }
        if (rt->shr[r] & BS_SHR_ANNOUNCED) {
            snprintf(text, sizeof(text), "the root could not make the new rendezvous");
        } else {
            snprintf(text, sizeof(text), "rank %d is excluded from the shrink: it did not "
                     "ask to shrink in time%s", r, (rt->shr[r] & BS_SHR_SUSPECT)
                     ? " (a survivor saw it go silent)" : "");
        }
        bs_send_final(c->fd, st == RMACOLL_SUCCESS ? RMACOLL_ERR_BOOTSTRAP : st, text);
        shutdown(c->fd, SHUT_WR);
    }
    free(pay);
    free(excl);
    rt->phase = BS_PH_DONE;
    rt->deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), bs_silence_ms(rt));
    return 0;
}

/* Discards what is left of an OP's payload. 1: done, 0: not yet, -1: gone. */
static int bs_conn_skip(bs_rconn_t *c)
{
    while (c->skip > 0) {
        uint8_t sink[4096];
        ssize_t n = recv(c->fd, sink, c->skip < sizeof(sink) ? (size_t)c->skip : sizeof(sink),
                         MSG_DONTWAIT);
        if (n > 0) {
            c->skip -= (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            return -1;
        }
    }
    return 1;
}

int rmacoll__bs_root_broken_input(bs_root_t *rt, int r)
{
    bs_rconn_t *c = &rt->ranks[r];
    int got = bs_conn_skip(c);
    bs_hdr_t h;

    if (got > 0) {
        got = rmacoll__bs_conn_read_hdr(c);
    }
    if (got < 0) {
        rmacoll__bs_root_lose(rt, r, "rank %d disconnected without leaving (process died?)", r);
        return 0;
    }
    if (got == 0) {
        return 0;
    }
    rmacoll__bs_hdr_decode(c->hdr, &h);
    c->hdr_got = 0;
    if (h.type == BS_MSG_BYE) {
        c->left = 1;
        rmacoll__bs_conn_close(c);
        rt->nleft++;
        if (rt->phase == BS_PH_SHRINK) {
            return bs_root_shrink_check(rt, 0);
        }
        return 0;
    }
    if (h.type == BS_MSG_SHRINK) {
        return rmacoll__bs_root_shrink_msg(rt, r, &h);
    }
    if (h.type == BS_MSG_OP && h.a <= RMACOLL__BOOTSTRAP_MAX_BYTES) {
        c->skip = h.a;
        rmacoll__bs_send_error(c->fd, RMACOLL_ERR_BOOTSTRAP, rt->phase == BS_PH_DONE
                               ? "the communicator was shrunk: no more allgathers"
                               : rt->broken_text[0] ? rt->broken_text
                                                    : "a shrink is in progress", -1);
        return 0;
    }
    rmacoll__log(&rt->lg, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap root %s: rank %d sent message type %u after a failure; "
                 "closing its connection", rt->addr, r, h.type);
    rmacoll__bs_conn_close(c);
    return rt->phase == BS_PH_SHRINK ? bs_root_shrink_check(rt, 0) : 0;
}

int rmacoll__bs_root_broken_done(const bs_root_t *rt)
{
    if (rt->phase != BS_PH_BROKEN && rt->phase != BS_PH_DONE) {
        return 0;
    }
    for (int r = 0; r < rt->nranks; r++) {
        if (rt->ranks[r].fd >= 0) {
            return 0;
        }
    }
    return 1;
}

int rmacoll__bs_root_broken_deadline(bs_root_t *rt)
{
    if (rt->phase == BS_PH_SHRINK) {
        return bs_root_shrink_check(rt, 1);
    }
    rmacoll__bs_root_fail(rt, RMACOLL_ERR_TIMEOUT, "%s: no rank %s for %" PRIu64 " ms; "
                          "the root gives up", rt->phase == BS_PH_DONE ? "after the shrink"
                          : rt->broken_text, rt->phase == BS_PH_DONE ? "left"
                          : "asked to shrink or left", bs_silence_ms(rt));
    return 1;
}

/* ------------------------------------------------------------------ rank */

/* Reads the answer to this rank's SHRINK, reading past the reports of
 * deaths, progress and results sent before it. */
static rmacoll_status_t bs_shrink_answer(rmacoll__bootstrap_t *bs, uint64_t deadline,
                                         rmacoll_unique_id_t *id, int *newrank,
                                         int *newn, uint8_t *alive, char *why, size_t wlen)
{
    /* Long because: one loop over the messages the root may have queued
     * before its answer (each kind read past in its own way) and the two
     * answers, each checked before its payload is read. */
    uint8_t hb[BS_HDR_BYTES];
    char text[BS_ERRTEXT_MAX + 1];
    bs_hdr_t h;

    for (;;) {
        int err = rmacoll__bs_recv_all(bs->fd, hb, sizeof(hb), deadline);
        if (err != 0) {
            if (err == ETIMEDOUT) {
                snprintf(why, wlen, "no answer in time from the root %s", bs->root_addr);
            } else {
                snprintf(why, wlen, "lost the connection to the root %s (it lives in the "
                         "process that made the unique id: if that process died, no "
                         "agreement is possible)", bs->root_addr);
            }
            return err == ETIMEDOUT ? RMACOLL_ERR_TIMEOUT : RMACOLL_ERR_BOOTSTRAP;
        }
        rmacoll__bs_hdr_decode(hb, &h);
        if (h.type == BS_MSG_ERROR || h.type == BS_MSG_RESULT) {
            size_t n = h.type == BS_MSG_ERROR ? (h.a < BS_ERRTEXT_MAX ? (size_t)h.a : BS_ERRTEXT_MAX)
                                              : 0;
            uint64_t rest = h.a - n;
            if (n > 0 && rmacoll__bs_recv_all(bs->fd, text, n, deadline) != 0) {
                snprintf(why, wlen, "lost the root %s in its message", bs->root_addr);
                return RMACOLL_ERR_BOOTSTRAP;
            }
            text[n] = '\0';
            while (rest > 0) { /* a late result, or the end of a long text */
                uint8_t sink[4096];
                size_t m = rest < sizeof(sink) ? (size_t)rest : sizeof(sink);
                if (rmacoll__bs_recv_all(bs->fd, sink, m, deadline) != 0) {
                    snprintf(why, wlen, "lost the root %s in its message", bs->root_addr);
                    return RMACOLL_ERR_BOOTSTRAP;
                }
                rest -= m;
            }
            if (h.type == BS_MSG_ERROR && h.c == 1) {
                snprintf(why, wlen,
                             "the root %s answers: %s",
                             bs->root_addr, text);
                return h.arg > 0 && h.arg < (uint32_t)RMACOLL_STATUS_LAST
                           ? (rmacoll_status_t)h.arg : RMACOLL_ERR_BOOTSTRAP;
            }
            continue;
        }
        if (h.type == BS_MSG_PROGRESS) {
            continue;
        }
        if (h.type != BS_MSG_SHRUNK ||
            h.b != RMACOLL_UNIQUE_ID_BYTES + (uint64_t)bs->nranks || h.a < 1 ||
            h.a > (uint64_t)bs->nranks || h.arg >= h.a) {
            snprintf(why, wlen,
                         "unexpected message type %u from "
                         "the root %s", h.type, bs->root_addr);
            return RMACOLL_ERR_BOOTSTRAP;
        }
        if (rmacoll__bs_recv_all(bs->fd, id, RMACOLL_UNIQUE_ID_BYTES, deadline) != 0 ||
            rmacoll__bs_recv_all(bs->fd, alive, (size_t)bs->nranks, deadline) != 0) {
            snprintf(why, wlen, "lost the root %s in its answer", bs->root_addr);
            return RMACOLL_ERR_BOOTSTRAP;
        }
        *newrank = (int)h.arg;
        *newn = (int)h.a;
        return RMACOLL_SUCCESS;
    }
}

rmacoll_status_t rmacoll__bootstrap_shrink(rmacoll__bootstrap_t *bs, const uint8_t *suspect,
                                           uint64_t bound_ms, rmacoll_unique_id_t *id,
                                           int *newrank, int *newn, uint8_t *alive,
                                           char *why, size_t wlen)
{
    bs_hdr_t h = {.type = BS_MSG_SHRINK, .a = (uint64_t)bs->nranks, .b = bound_ms};
    uint64_t deadline;
    rmacoll_status_t st;

    if (bs->is_oob) {
        snprintf(why, wlen,
                     "needs the built-in bootstrap: an "
                     "embedder's out-of-band allgather cannot say who is alive");
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if (bs->fd < 0) {
        snprintf(why, wlen,
                     "the connection to the root %s was "
                     "closed by an earlier bootstrap failure", bs->root_addr);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), 2000);
    if (rmacoll__bs_send_hdr(bs->fd, &h, deadline) != 0 ||
        rmacoll__bs_send_all(bs->fd, suspect, (size_t)bs->nranks, deadline) != 0) {
        snprintf(why, wlen,
                     "the bootstrap root %s is gone (it lives "
                     "in the process that made the unique id: if that process died, no "
                     "agreement is possible)", bs->root_addr);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), bound_ms + bs->grace_ms);
    st = bs_shrink_answer(bs, deadline, id, newrank, newn, alive, why, wlen);
    if (st == RMACOLL_ERR_BOOTSTRAP && bs->failed == RMACOLL_SUCCESS) {
        bs->failed = st;
    }
    if (st == RMACOLL_SUCCESS) {
        /* the old rendezvous serves no more allgathers */
        bs->failed = RMACOLL_ERR_BOOTSTRAP;
    }
    return st;
}
