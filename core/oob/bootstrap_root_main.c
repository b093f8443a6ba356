/*
 * bootstrap_root_main.c - the root's thread (bs_root_main: one poll loop
 * over the listening socket and the ranks), the listening socket and its
 * address, and rmacoll_get_unique_id, which starts a root.
 */
#define _GNU_SOURCE /* accept4 */
#include "core/oob/bootstrap_priv.h"

#include "core/base/clock.h"
#include "core/base/text.h"
#include "core/config/env.h"

/* Fills rt->pfds: the listening socket, then the pending sockets (from
 * *base_pending), then one slot per rank (from *base_ranks; fd -1 when
 * there is nothing to wait for). *next: the earliest deadline. Returns the
 * count, or -1 when out of memory (rt failed). */
static int bs_root_fill_pfds(bs_root_t *rt, int *base_pending, int *base_ranks, uint64_t *next)
{
    int n = 0;

    if (rt->pfds == NULL || rt->cap_pfds < 1 + rt->npending + rt->nranks) {
        int cap = 1 + rt->cap_pending + rt->nranks;
        struct pollfd *pp = realloc(rt->pfds, (size_t)cap * sizeof(*pp));
        if (pp == NULL) {
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_NO_MEMORY, "root out of memory");
            return -1;
        }
        rt->pfds = pp;
        rt->cap_pfds = cap;
    }
    rt->pfds[n].fd = rt->lfd;
    rt->pfds[n].events = POLLIN;
    rt->pfds[n].revents = 0;
    n++;
    *base_pending = n;
    for (int i = 0; i < rt->npending; i++) {
        rt->pfds[n].fd = rt->pending[i].fd;
        rt->pfds[n].events = POLLIN;
        rt->pfds[n].revents = 0;
        n++;
        if (rt->pending[i].deadline < *next) {
            *next = rt->pending[i].deadline;
        }
    }
    *base_ranks = n;
    for (int r = 0; r < rt->nranks; r++) {
        bs_rconn_t *c = &rt->ranks[r];
        short ev = 0;
        if (c->fd >= 0) {
            if (rt->phase == BS_PH_SCATTER) {
                ev = (c->out_off < BS_HDR_BYTES + rt->op_bytes * (uint64_t)rt->nranks)
                         ? POLLOUT : 0;
            } else {
                ev = POLLIN;
            }
        }
        rt->pfds[n].fd = ev ? c->fd : -1;
        rt->pfds[n].events = ev;
        rt->pfds[n].revents = 0;
        n++;
    }
    return n;
}

/* After a poll: accepts a new connection, completes the hellos of the
 * pending sockets that were polled (accept may add more), drops silent
 * ones and compacts the list. Non-zero when rt failed. */
static int bs_root_serve_pending(bs_root_t *rt, int base_pending)
{
    int failed = 0;
    int npend = rt->npending;
    uint64_t now;
    int w = 0;

    if (rt->pfds[0].revents & POLLIN) {
        rmacoll__bs_root_accept(rt);
    }
    now = rmacoll__now_ms();
    for (int i = 0; i < npend && !failed; i++) {
        bs_rconn_t *c = &rt->pending[i];
        if (rt->pfds[base_pending + i].revents != 0) {
            int got = rmacoll__bs_conn_read_hdr(c);
            if (got < 0) {
                rmacoll__log(&rt->lg, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                             "bootstrap root %s: connection from %s closed before its hello",
                             rt->addr, c->peer);
                rmacoll__bs_conn_close(c);
            } else if (got > 0) {
                failed = rmacoll__bs_root_hello(rt, c) != 0;
            }
        }
        if (c->fd >= 0 && c->deadline <= now) {
            rmacoll__log(&rt->lg, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap root %s: connection from %s sent no hello "
                         "within %u ms, dropped", rt->addr, c->peer,
                         BS_HELLO_TIMEOUT_MS);
            rmacoll__bs_conn_close(c);
        }
    }
    if (failed) {
        return 1;
    }
    for (int i = 0; i < rt->npending; i++) {
        if (rt->pending[i].fd >= 0) {
            rt->pending[w++] = rt->pending[i];
        }
    }
    rt->npending = w;
    return 0;
}

/* After a poll: serves the ranks by phase (the rank array may have been
 * created by a hello just now: only slots [base_ranks, n) were polled).
 * Non-zero when rt failed. */
static int bs_root_serve_ranks(bs_root_t *rt, int base_ranks, int n)
{
    int polled = n - base_ranks;
    int failed = 0;

    for (int r = 0; r < rt->nranks && r < polled && !failed; r++) {
        short rev = rt->pfds[base_ranks + r].revents;
        bs_rconn_t *c = &rt->ranks[r];
        if (rev == 0 || c->fd < 0 || c->fd != rt->pfds[base_ranks + r].fd) {
            continue;
        }
        if (rt->phase == BS_PH_CONNECT) {
            uint8_t b;
            ssize_t got = recv(c->fd, &b, 1, MSG_DONTWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
                continue;
            }
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                  got <= 0 ? "rank %d disconnected before all ranks connected"
                                           : "rank %d sent data before the rendezvous completed",
                                  r);
            failed = 1;
        } else if (rt->phase == BS_PH_GATHER) {
            failed = rmacoll__bs_root_gather_input(rt, r) != 0;
        } else if (rt->phase == BS_PH_SCATTER) {
            failed = rmacoll__bs_root_scatter_output(rt, r) != 0;
        } else {
            failed = rmacoll__bs_root_broken_input(rt, r) != 0;
        }
    }
    return failed;
}

/* The root's thread: one poll loop over the listening socket, the pending
 * sockets and the ranks, until every rank has left or the root fails. */
/* Unique ids whose communicator ended in this process (bounded: the
 * oldest is forgotten first; a forgotten id used again times out as an
 * unreachable root does). */
#define BS_ENDED_MAX 64
static uint64_t bs_ended[BS_ENDED_MAX];
static unsigned bs_ended_next;
static pthread_mutex_t bs_ended_lock = PTHREAD_MUTEX_INITIALIZER;

static void bs_id_end(uint64_t magic)
{
    pthread_mutex_lock(&bs_ended_lock);
    bs_ended[bs_ended_next++ % BS_ENDED_MAX] = magic;
    pthread_mutex_unlock(&bs_ended_lock);
}

int rmacoll__bs_id_ended(uint64_t magic)
{
    int found = 0;

    pthread_mutex_lock(&bs_ended_lock);
    for (unsigned i = 0; i < BS_ENDED_MAX && !found; i++) {
        found = magic != 0 && bs_ended[i] == magic;
    }
    pthread_mutex_unlock(&bs_ended_lock);
    return found;
}

static void *bs_root_main(void *arg)
{
    bs_root_t *rt = arg;

    for (;;) {
        int base_pending, base_ranks, n, rc;
        uint64_t next = rt->deadline;

        if (rt->nranks > 0 && rt->nleft == rt->nranks && rt->phase != BS_PH_REJECT) {
            rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap root %s: all %d ranks left, exiting",
                         rt->addr, rt->nranks);
            bs_id_end(rt->magic);
            break;
        }
        if (rmacoll__bs_root_broken_done(rt)) {
            rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap root %s: every rank left or is gone after a "
                         "failure, exiting", rt->addr);
            break;
        }
        n = bs_root_fill_pfds(rt, &base_pending, &base_ranks, &next);
        if (n < 0) {
            break;
        }
        rc = poll(rt->pfds, (nfds_t)n, rmacoll__bs_poll_ms(next));
        if (rc < 0 && errno != EINTR) {
            rmacoll__bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP, "poll failed: %s", strerror(errno));
            break;
        }
        if (rc < 0) {
            continue;
        }
        if (bs_root_serve_pending(rt, base_pending) != 0 ||
            bs_root_serve_ranks(rt, base_ranks, n) != 0) {
            break;
        }
        if (rt->deadline != UINT64_MAX && rmacoll__now_ms() >= rt->deadline) {
            if (rt->phase == BS_PH_REJECT) {
                break; /* a tombstone ends quietly */
            }
            if (rt->phase >= BS_PH_BROKEN) {
                /* a shrink ends (without the silent); else the root gives up */
                if (rmacoll__bs_root_broken_deadline(rt) != 0) {
                    break;
                }
                continue;
            }
            rmacoll__bs_root_timeout(rt);
            break;
        }
    }
    rmacoll__bs_root_free(rt);
    return NULL;
}

/* Binds a listener on d (port 0: ephemeral) and writes the bound address
 * back into d; falls back to the wildcard address when bind_fallback and
 * the address is not local. */
rmacoll_status_t rmacoll__bs_listen(bs_id_t *d, int bind_fallback,
                                    const rmacoll__logger_t *lg, int *lfd)
{
    char astr[64];
    int one = 1;
    int fd = socket(d->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    rmacoll__bs_sockaddr_str((struct sockaddr *)&d->ss, astr, sizeof(astr));
    if (fd < 0) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: cannot open a socket for %s: %s", astr, strerror(errno));
        return RMACOLL_ERR_BOOTSTRAP;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&d->ss, d->sslen) != 0) {
        int err = errno;
        struct sockaddr_storage any = d->ss;
        if (err == EADDRNOTAVAIL && bind_fallback) {
            if (any.ss_family == AF_INET) {
                ((struct sockaddr_in *)&any)->sin_addr.s_addr = htonl(INADDR_ANY);
            } else {
                ((struct sockaddr_in6 *)&any)->sin6_addr = in6addr_any;
            }
            err = bind(fd, (struct sockaddr *)&any, d->sslen) == 0 ? 0 : errno;
        }
        if (err != 0) {
            rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: cannot listen on %s: %s", astr, strerror(err));
            close(fd);
            return RMACOLL_ERR_BOOTSTRAP;
        }
    }
    if (listen(fd, 1024) != 0) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: listen on %s failed: %s", astr, strerror(errno));
        close(fd);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    /* Learn the ephemeral port; keep the address the ranks must dial. */
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &bl) == 0) {
        if (d->ss.ss_family == AF_INET) {
            ((struct sockaddr_in *)&d->ss)->sin_port =
                ((struct sockaddr_in *)&bound)->sin_port;
        } else {
            ((struct sockaddr_in6 *)&d->ss)->sin6_port =
                ((struct sockaddr_in6 *)&bound)->sin6_port;
        }
    }
    *lfd = fd;
    return RMACOLL_SUCCESS;
}

static int bs_is_wildcard(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    return memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, &in6addr_any,
                  sizeof(in6addr_any)) == 0;
}

/* Starts the detached root thread, which then owns lfd and its object. */
rmacoll_status_t rmacoll__bs_root_start(int lfd, const bs_id_t *d,
                                        const rmacoll__logger_t *lg)
{
    return rmacoll__bs_root_start_phase(lfd, d, lg, BS_PH_CONNECT, UINT64_MAX);
}

rmacoll_status_t rmacoll__bs_root_start_phase(int lfd, const bs_id_t *d,
                                              const rmacoll__logger_t *lg, int phase,
                                              uint64_t deadline)
{
    bs_root_t *rt = calloc(1, sizeof(*rt));
    pthread_attr_t attr;
    pthread_t tid;
    sigset_t all, old;
    int err;

    if (rt == NULL) {
        close(lfd);
        return RMACOLL_ERR_NO_MEMORY;
    }
    rt->lfd = lfd;
    rt->culprit = -1;
    rt->magic = d->magic;
    rt->lg = *lg;
    rt->phase = phase;
    rt->deadline = deadline;
    rmacoll__bs_sockaddr_str((const struct sockaddr *)&d->ss, rt->addr, sizeof(rt->addr));
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    /* The root takes no signals: the application's handlers run in its
     * own threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&tid, &attr, bs_root_main, rt);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: cannot start the root thread for %s: %s",
                     rt->addr, strerror(err));
        rt->lfd = -1;
        close(lfd);
        free(rt);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    return RMACOLL_SUCCESS;
}

void rmacoll__bs_tombstone(const bs_id_t *d, uint64_t ms, const rmacoll__logger_t *lg)
{
    bs_id_t a = *d;
    rmacoll__logger_t quiet = *lg;
    int lfd;

    /* the listen may fail (another process holds the port now): the ranks
     * then time out as at an unreachable root */
    quiet.level = RMACOLL_LOG_ERROR;
    if (rmacoll__bs_listen(&a, 0, &quiet, &lfd) == RMACOLL_SUCCESS) {
        (void)rmacoll__bs_root_start_phase(lfd, &a, lg, BS_PH_REJECT,
                                           rmacoll__bs_add_ms(rmacoll__now_ms(), ms));
    }
}

/* Makes a root listening on host (port 0 = ephemeral) and its id. */
rmacoll_status_t rmacoll__bs_new_root(const char *host, unsigned port,
                                      const rmacoll__logger_t *lg,
                                      rmacoll_unique_id_t *id)
{
    bs_id_t d;
    int lfd;
    rmacoll_status_t st;

    memset(&d, 0, sizeof(d));
    if (rmacoll__bs_resolve(host, port, &d) != 0) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: cannot resolve bootstrap address '%s'", host);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    st = rmacoll__bs_listen(&d, 0, lg, &lfd);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    /* Ranks cannot dial a wildcard address: name this host instead. */
    if (bs_is_wildcard(&d.ss)) {
        char hn[256];
        bs_id_t h;
        in_port_t p = (d.ss.ss_family == AF_INET)
                          ? ((struct sockaddr_in *)&d.ss)->sin_port
                          : ((struct sockaddr_in6 *)&d.ss)->sin6_port;
        if (gethostname(hn, sizeof(hn)) == 0 &&
            rmacoll__bs_resolve(hn, ntohs(p), &h) == 0 && h.ss.ss_family == d.ss.ss_family) {
            d.ss = h.ss;
            d.sslen = h.sslen;
        }
    }
    d.magic = rmacoll__bs_random64();
    st = rmacoll__bs_root_start(lfd, &d, lg);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    rmacoll__bs_id_encode(&d, id);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_get_unique_id(rmacoll_unique_id_t *id)
{
    rmacoll__logger_t lg;
    const char *env = getenv("RMACOLL_BOOTSTRAP_ADDR");
    char host[256];
    unsigned port = 0;

    if (id == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll__logger_default(&lg);
    if (env != NULL && env[0] != '\0') {
        if (rmacoll__bs_split_hostport(env, host, sizeof(host), &port) != 0) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: RMACOLL_BOOTSTRAP_ADDR='%s' is not host:port", env);
            return RMACOLL_ERR_BOOTSTRAP;
        }
    } else {
        snprintf(host, sizeof(host), "127.0.0.1");
    }
    return rmacoll__bs_new_root(host, port, &lg, id);
}
