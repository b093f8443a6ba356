/*
 * bootstrap.c - built-in TCP rendezvous (root thread + rank client), the
 * wrapper of an embedder's out-of-band callbacks, launcher variables and
 * the unique id's encoding. See bootstrap.h for the contract.
 *
 * Wire protocol: every message is a 32-byte big-endian header
 * {u32 type, u32 arg, u64 a, u64 b, u64 c} and an optional payload.
 *   HELLO   rank->root  arg=version a=magic b=rank<<32|nranks c=ms left
 *   WELCOME root->rank  a=nranks
 *   OP      rank->root  arg=seq a=bytes b=ms left; payload `bytes`
 *   RESULT  root->rank  arg=seq a=nranks*bytes; payload
 *   ERROR   root->rank  arg=status a=text length; payload text
 *   BYE     rank->root  (leaving; a later EOF is not a failure)
 *   PROGRESS root->rank arg=seq: another rank joined the rendezvous or
 *                       entered allgather #seq (sent to the ranks waiting)
 * The timeout counts silence: the root gives up when no rank has joined
 * (entered) for timeout_ms (the smallest of the ranks' "ms left" / timeout),
 * so it reports a missing rank before any waiting rank gives up; a rank
 * waits timeout_ms plus a grace (BS_GRACE_MS) for the root's answer,
 * counted again from each PROGRESS.
 */
#define _GNU_SOURCE /* accept4 */
#include "core/oob/bootstrap.h"
#include "core/base/clock.h"
#include "core/base/text.h"
#include "core/config/env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef RMACOLL_HAVE_PMIX
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pmix.h>   /* types and constants only: libpmix is dlopen'ed */
#endif

#define BS_ID_TAG 0x524d4349u /* "RMCI" */
#define BS_ID_VERSION 1u
#define BS_PROTO_VERSION 2u /* 2: PROGRESS */
#define BS_HDR_BYTES 32
/* Extra wait of a rank for the root's verdict beyond timeout_ms (the root
 * may be slow to be scheduled; seconds of delay were seen on loaded
 * machines): 5 s + timeout/8, at most 30 s. */
#define BS_GRACE_MS(t) ((t) / 8 < 25000u ? 5000u + (t) / 8 : 30000u)
#define BS_HELLO_TIMEOUT_MS 10000u /* accepted socket must say hello */
#define BS_DRAIN_MS 5000u          /* root lingers after a failure */
#define BS_ERRTEXT_MAX 1024
#define BS_RANKLIST_MAX 512

enum {
    BS_MSG_HELLO = 1,
    BS_MSG_WELCOME = 2,
    BS_MSG_OP = 3,
    BS_MSG_RESULT = 4,
    BS_MSG_ERROR = 5,
    BS_MSG_BYE = 6,
    BS_MSG_PROGRESS = 7
};

typedef struct bs_hdr {
    uint32_t type;
    uint32_t arg;
    uint64_t a;
    uint64_t b;
    uint64_t c;
} bs_hdr_t;

/* Decoded unique id. Layout in rmacoll_unique_id_t.internal (big-endian):
 * 0 u32 tag, 4 u16 version, 6 u16 family (4|6), 8 u64 magic, 16 u16 port,
 * 18 u16 unused, 20 u32 scope id, 24 16 bytes address. */
typedef struct bs_id {
    uint64_t magic;
    struct sockaddr_storage ss;
    socklen_t sslen;
} bs_id_t;

struct rmacoll__bootstrap {
    int rank;
    int nranks;
    uint64_t timeout_ms;
    uint64_t grace_ms;       /* BS_GRACE_MS(timeout_ms) */
    rmacoll__logger_t lg;
    /* TCP path */
    int fd;                  /* -1 when closed */
    uint32_t seq;            /* next allgather number */
    rmacoll_status_t failed; /* sticky error, RMACOLL_SUCCESS if none */
    char root_addr[64];
    /* oob path */
    int is_oob;
    rmacoll_oob_t oob;
    /* a failure the root reported between allgathers (poll_error) */
    rmacoll_status_t reported;
    int reported_rank;
    char reported_text[BS_ERRTEXT_MAX + 1];
};

/* ---------------------------------------------------------------- helpers */

static uint64_t bs_add_ms(uint64_t t, uint64_t ms)
{
    return (ms > UINT64_MAX - t) ? UINT64_MAX : t + ms;
}

static int bs_poll_ms(uint64_t deadline)
{
    uint64_t now = rmacoll__now_ms();

    if (deadline == UINT64_MAX) {
        return -1;
    }
    if (deadline <= now) {
        return 0;
    }
    return (deadline - now > 60000u) ? 60000 : (int)(deadline - now);
}

static void bs_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t bs_get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void bs_put64(uint8_t *p, uint64_t v)
{
    bs_put32(p, (uint32_t)(v >> 32));
    bs_put32(p + 4, (uint32_t)v);
}

static uint64_t bs_get64(const uint8_t *p)
{
    return ((uint64_t)bs_get32(p) << 32) | bs_get32(p + 4);
}

static void bs_hdr_encode(const bs_hdr_t *h, uint8_t *p)
{
    bs_put32(p, h->type);
    bs_put32(p + 4, h->arg);
    bs_put64(p + 8, h->a);
    bs_put64(p + 16, h->b);
    bs_put64(p + 24, h->c);
}

static void bs_hdr_decode(const uint8_t *p, bs_hdr_t *h)
{
    h->type = bs_get32(p);
    h->arg = bs_get32(p + 4);
    h->a = bs_get64(p + 8);
    h->b = bs_get64(p + 16);
    h->c = bs_get64(p + 24);
}

static void bs_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        snprintf(buf, len, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
        snprintf(buf, len, "[%s]:%u", host, port);
    } else {
        snprintf(buf, len, "?");
    }
}

static void bs_fd_tune(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Sends len bytes from a non-blocking fd. 0, ETIMEDOUT or an errno. */
static int bs_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            return errno;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int to = bs_poll_ms(deadline);
        if (to == 0) {
            return ETIMEDOUT;
        }
        if (poll(&pfd, 1, to) < 0 && errno != EINTR) {
            return errno;
        }
    }
    return 0;
}

/* Receives len bytes into a non-blocking fd. 0, ETIMEDOUT, EPIPE for an
 * orderly EOF, or an errno. */
static int bs_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            return EPIPE;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return errno;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int to = bs_poll_ms(deadline);
        if (to == 0) {
            return ETIMEDOUT;
        }
        if (poll(&pfd, 1, to) < 0 && errno != EINTR) {
            return errno;
        }
    }
    return 0;
}

static int bs_send_hdr(int fd, const bs_hdr_t *h, uint64_t deadline)
{
    uint8_t b[BS_HDR_BYTES];

    bs_hdr_encode(h, b);
    return bs_send_all(fd, b, sizeof(b), deadline);
}

/* Best effort: an ERROR message with text, bounded by one second. */
static void bs_send_error(int fd, rmacoll_status_t st, const char *text, int culprit)
{
    size_t n = strlen(text);
    bs_hdr_t h = {.type = BS_MSG_ERROR, .arg = (uint32_t)st, .a = n,
                  .b = culprit >= 0 ? (uint64_t)culprit + 1 : 0};
    uint64_t deadline = bs_add_ms(rmacoll__now_ms(), 1000);

    if (bs_send_hdr(fd, &h, deadline) == 0) {
        (void)bs_send_all(fd, text, n, deadline);
    }
}

/* Appends "a,b,c" of the ranks with missing[r] != 0 to buf. */
static void bs_rank_list(const uint8_t *missing, int nranks, char *buf,
                         size_t len)
{
    size_t used = 0;
    int first = 1;

    buf[0] = '\0';
    for (int r = 0; r < nranks && used + 16 < len; r++) {
        if (missing[r]) {
            int w = snprintf(buf + used, len - used, "%s%d", first ? "" : ",", r);
            used += (w > 0) ? (size_t)w : 0;
            first = 0;
        }
    }
    if (used + 16 >= len) {
        snprintf(buf + used, len - used, ",...");
    }
}

/* ------------------------------------------------------------ unique id */

static void bs_id_encode(const bs_id_t *d, rmacoll_unique_id_t *id)
{
    uint8_t *p = (uint8_t *)id->internal;

    memset(id, 0, sizeof(*id));
    bs_put32(p, BS_ID_TAG);
    p[4] = 0;
    p[5] = BS_ID_VERSION;
    bs_put64(p + 8, d->magic);
    if (d->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&d->ss;
        p[7] = 4;
        memcpy(p + 16, &in->sin_port, 2);
        memcpy(p + 24, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&d->ss;
        p[7] = 6;
        memcpy(p + 16, &in6->sin6_port, 2);
        bs_put32(p + 20, in6->sin6_scope_id);
        memcpy(p + 24, &in6->sin6_addr, 16);
    }
}

static int bs_id_decode(const rmacoll_unique_id_t *id, bs_id_t *d)
{
    const uint8_t *p = (const uint8_t *)id->internal;

    memset(d, 0, sizeof(*d));
    if (bs_get32(p) != BS_ID_TAG || p[5] != BS_ID_VERSION) {
        return -1;
    }
    d->magic = bs_get64(p + 8);
    if (p[7] == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)&d->ss;
        in->sin_family = AF_INET;
        memcpy(&in->sin_port, p + 16, 2);
        memcpy(&in->sin_addr, p + 24, 4);
        d->sslen = sizeof(*in);
    } else if (p[7] == 6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&d->ss;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_port, p + 16, 2);
        in6->sin6_scope_id = bs_get32(p + 20);
        memcpy(&in6->sin6_addr, p + 24, 16);
        d->sslen = sizeof(*in6);
    } else {
        return -1;
    }
    return 0;
}

void rmacoll__unique_id_to_hex(const rmacoll_unique_id_t *id, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *b = (const uint8_t *)id->internal;

    for (size_t i = 0; i < RMACOLL_UNIQUE_ID_BYTES; i++) {
        hex[2 * i] = digits[b[i] >> 4];
        hex[2 * i + 1] = digits[b[i] & 0xf];
    }
    hex[RMACOLL__UNIQUE_ID_HEX_LEN] = '\0';
}

static int bs_hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

rmacoll_status_t rmacoll__unique_id_from_hex(const char *hex,
                                             rmacoll_unique_id_t *id)
{
    rmacoll_unique_id_t tmp;

    if (hex == NULL || id == NULL || strlen(hex) != RMACOLL__UNIQUE_ID_HEX_LEN) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < RMACOLL_UNIQUE_ID_BYTES; i++) {
        int hi = bs_hexval(hex[2 * i]);
        int lo = bs_hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        tmp.internal[i] = (char)((hi << 4) | lo);
    }
    *id = tmp;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__unique_id_addr(const rmacoll_unique_id_t *id,
                                         char *buf, size_t len)
{
    bs_id_t d;

    if (id == NULL || buf == NULL || len == 0 || bs_id_decode(id, &d) != 0) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    bs_sockaddr_str((const struct sockaddr *)&d.ss, buf, len);
    return RMACOLL_SUCCESS;
}

/* Splits "host:port" / "[v6]:port" / "host" (port 0). 0 or -1. */
static int bs_split_hostport(const char *s, char *host, size_t hlen,
                             unsigned *port)
{
    const char *colon;
    size_t n;

    *port = 0;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL) {
            return -1;
        }
        n = (size_t)(end - s - 1);
        colon = (end[1] == ':') ? end + 1 : NULL;
        if (end[1] != '\0' && colon == NULL) {
            return -1;
        }
        s++;
    } else {
        colon = strrchr(s, ':');
        if (colon != NULL && strchr(s, ':') != colon) {
            colon = NULL; /* bare IPv6 literal without a port */
        }
        n = colon ? (size_t)(colon - s) : strlen(s);
    }
    if (n == 0 || n >= hlen) {
        return -1;
    }
    memcpy(host, s, n);
    host[n] = '\0';
    if (colon != NULL) {
        char *end;
        unsigned long v = strtoul(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || v > 65535) {
            return -1;
        }
        *port = (unsigned)v;
    }
    return 0;
}

static int bs_resolve(const char *host, unsigned port, bs_id_t *d)
{
    struct addrinfo hints, *res = NULL;
    char pstr[16];

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(pstr, sizeof(pstr), "%u", port);
    if (getaddrinfo(host, pstr, &hints, &res) != 0 || res == NULL) {
        return -1;
    }
    memset(&d->ss, 0, sizeof(d->ss));
    memcpy(&d->ss, res->ai_addr, res->ai_addrlen);
    d->sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static uint64_t bs_random64(void)
{
    uint64_t v = 0;

    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
            ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)&v;
    }
    return v ? v : 1;
}

/* FNV-1a, for the id every launcher rank must derive alike. */
static uint64_t bs_fnv1a(uint64_t h, const char *s)
{
    for (; *s != '\0'; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ------------------------------------------------------------------ root */

enum { BS_PH_CONNECT, BS_PH_GATHER, BS_PH_SCATTER };

typedef struct bs_rconn {
    int fd;          /* -1: not connected or gone */
    int left;        /* said BYE */
    uint8_t hdr[BS_HDR_BYTES];
    size_t hdr_got;
    size_t pay_got;  /* payload bytes of the current OP received */
    int contributed; /* whole OP received */
    size_t out_off;  /* RESULT bytes sent (header + payload) */
    uint64_t deadline; /* pending sockets: hello deadline */
    char peer[64];
} bs_rconn_t;

typedef struct bs_root {
    int lfd;
    uint64_t magic;
    char addr[64];
    rmacoll__logger_t lg;
    int nranks;        /* 0 until the first hello */
    int nconnected;
    int nleft;
    bs_rconn_t *ranks; /* [nranks] */
    bs_rconn_t *pending;
    int npending;
    int cap_pending;
    int phase;
    uint64_t deadline; /* UINT64_MAX: none */
    uint64_t op_timeout_ms;
    /* current allgather */
    uint32_t op_seq;
    int op_started;
    uint64_t op_bytes;
    int ncontrib;
    uint8_t *buf;
    uint8_t res_hdr[BS_HDR_BYTES];
    int ndrained;
    struct pollfd *pfds;
    int cap_pfds;
    int culprit;       /* the rank a failure names, sent in ERROR's b (+ 1), -1 none */
} bs_root_t;

static void bs_conn_close(bs_rconn_t *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

static void bs_root_free(bs_root_t *rt)
{
    if (rt->lfd >= 0) {
        close(rt->lfd);
    }
    for (int i = 0; i < rt->npending; i++) {
        bs_conn_close(&rt->pending[i]);
    }
    for (int r = 0; rt->ranks != NULL && r < rt->nranks; r++) {
        bs_conn_close(&rt->ranks[r]);
    }
    free(rt->ranks);
    free(rt->pending);
    free(rt->buf);
    free(rt->pfds);
    free(rt);
}

/* A failure: tell every connected rank, drain them until they close or
 * BS_DRAIN_MS passed (closing with unread data would reset the connection
 * and could destroy the message), then the caller frees the root. */
static void bs_root_fail(bs_root_t *rt, rmacoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void bs_root_fail(bs_root_t *rt, rmacoll_status_t st, const char *fmt, ...)
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
            bs_send_error(c->fd, st, text, rt->culprit);
        }
        shutdown(c->fd, SHUT_WR);
    }
    deadline = bs_add_ms(rmacoll__now_ms(), BS_DRAIN_MS);
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
        int to = bs_poll_ms(deadline);
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
                bs_conn_close(c);
            }
        }
    }
}

/* Reads what is available into c->hdr. 1: complete, 0: not yet, -1: EOF
 * or error (errno set; 0 for EOF). */
static int bs_conn_read_hdr(bs_rconn_t *c)
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
    bs_send_error(c->fd, RMACOLL_ERR_BOOTSTRAP, text, -1);
    shutdown(c->fd, SHUT_WR);
    bs_conn_close(c);
}

/* Rank `from` joined the rendezvous (seq 0) or entered allgather #seq:
 * the other ranks already waiting count their timeout again (best effort;
 * a rank that is gone is found by the poll loop). */
static void bs_root_progress(bs_root_t *rt, int from, uint32_t seq, int in_gather)
{
    bs_hdr_t h = {.type = BS_MSG_PROGRESS, .arg = seq};
    uint64_t dl = bs_add_ms(rmacoll__now_ms(), 1000);

    for (int q = 0; q < rt->nranks; q++) {
        bs_rconn_t *c = &rt->ranks[q];
        if (q == from || c->fd < 0 || (in_gather && c->hdr_got < BS_HDR_BYTES)) {
            continue;
        }
        (void)bs_send_hdr(c->fd, &h, dl);
    }
}

/* A complete HELLO from pending socket c. 0 ok, -1 fatal (root failed). */
static int bs_root_hello(bs_root_t *rt, bs_rconn_t *c)
{
    bs_hdr_t h;
    int rank, nranks;

    bs_hdr_decode(c->hdr, &h);
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
    if (rt->phase != BS_PH_CONNECT) {
        bs_root_reject(rt, c, "rank %d connected after all %d ranks had joined%s",
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
    rt->deadline = bs_add_ms(rmacoll__now_ms(), h.c);
    rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                 "bootstrap root %s: rank %d of %d connected from %s", rt->addr,
                 rank, nranks, rt->ranks[rank].peer);
    if (rt->nconnected == rt->nranks) {
        bs_hdr_t w = {.type = BS_MSG_WELCOME, .a = (uint64_t)rt->nranks};
        uint64_t wdl = bs_add_ms(rmacoll__now_ms(), 1000);
        for (int r = 0; r < rt->nranks; r++) {
            if (bs_send_hdr(rt->ranks[r].fd, &w, wdl) != 0) {
                bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
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

static void bs_root_accept(bs_root_t *rt)
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
    c->deadline = bs_add_ms(rmacoll__now_ms(), BS_HELLO_TIMEOUT_MS);
    bs_sockaddr_str((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    bs_fd_tune(fd);
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

    bs_hdr_encode(&h, rt->res_hdr);
    rt->phase = BS_PH_SCATTER;
    rt->ndrained = 0;
    rt->deadline = bs_add_ms(rmacoll__now_ms(), rt->op_timeout_ms);
}

/* Gather-phase input from rank r. 0 ok, -1 root failed. */
static int bs_root_gather_input(bs_root_t *rt, int r)
{
    bs_rconn_t *c = &rt->ranks[r];

    if (c->contributed) {
        uint8_t b;
        ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return 0;
        }
        rt->culprit = r;
        bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP, n == 0 || n < 0
                         ? "rank %d disconnected during allgather #%u (process died?)"
                         : "rank %d sent data out of turn in allgather #%u",
                     r, rt->op_seq);
        return -1;
    }
    if (c->hdr_got < BS_HDR_BYTES) {
        int got = bs_conn_read_hdr(c);
        if (got < 0) {
            rt->culprit = r;
            if (errno == 0) {
                bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                             "rank %d disconnected without leaving (process died?)", r);
            } else {
                bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                             "rank %d disconnected: %s", r, strerror(errno));
            }
            return -1;
        }
        if (got == 0) {
            return 0;
        }
        bs_hdr_t h;
        bs_hdr_decode(c->hdr, &h);
        if (h.type == BS_MSG_BYE) {
            c->left = 1;
            bs_conn_close(c);
            rt->nleft++;
            rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap root %s: rank %d left (%d of %d)", rt->addr,
                         r, rt->nleft, rt->nranks);
            if (rt->op_started && rt->nleft < rt->nranks) {
                bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                             "rank %d left while other ranks were in allgather #%u",
                             r, rt->op_seq);
                return -1;
            }
            return 0;
        }
        if (h.type != BS_MSG_OP) {
            bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                         "rank %d sent unexpected message type %u", r, h.type);
            return -1;
        }
        if (h.arg != rt->op_seq) {
            bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                         "rank %d entered allgather #%u while the root is at #%u",
                         r, h.arg, rt->op_seq);
            return -1;
        }
        if (h.a > RMACOLL__BOOTSTRAP_MAX_BYTES) {
            bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                         "rank %d gave %" PRIu64 " bytes, above the limit", r, h.a);
            return -1;
        }
        if (!rt->op_started) {
            for (int q = 0; q < rt->nranks; q++) {
                if (rt->ranks[q].left) {
                    bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                                 "rank %d entered allgather #%u but rank %d has already left",
                                 r, rt->op_seq, q);
                    return -1;
                }
            }
            rt->op_started = 1;
            rt->op_bytes = h.a;
            rt->op_timeout_ms = h.b;
            if (h.a > 0) {
                rt->buf = malloc((size_t)h.a * (size_t)rt->nranks);
                if (rt->buf == NULL) {
                    bs_root_fail(rt, RMACOLL_ERR_NO_MEMORY,
                                 "root out of memory for allgather #%u of %d x %" PRIu64
                                 " bytes", rt->op_seq, rt->nranks, h.a);
                    return -1;
                }
            }
        } else if (h.a != rt->op_bytes) {
            bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                         "rank %d gave %" PRIu64 " bytes to allgather #%u, an "
                         "earlier rank %" PRIu64, r, h.a, rt->op_seq, rt->op_bytes);
            return -1;
        }
        if (h.b < rt->op_timeout_ms) {
            rt->op_timeout_ms = h.b;
        }
        /* silence: the allgather fails when no rank entered for timeout_ms */
        rt->deadline = bs_add_ms(rmacoll__now_ms(), rt->op_timeout_ms);
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
        bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
                     "rank %d disconnected in the middle of allgather #%u "
                     "(%zu of %" PRIu64 " bytes received)",
                     r, rt->op_seq, c->pay_got, rt->op_bytes);
        return -1;
    }
    c->contributed = 1;
    rt->ncontrib++;
    if (rt->ncontrib == rt->nranks) {
        bs_root_start_scatter(rt);
    }
    return 0;
}

/* Scatter-phase output to rank r. 0 ok, -1 root failed. */
static int bs_root_scatter_output(bs_root_t *rt, int r)
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
        bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP,
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
static void bs_root_timeout(bs_root_t *rt)
{
    uint8_t *missing = calloc((size_t)rt->nranks, 1);
    char list[BS_RANKLIST_MAX];
    int nmiss = 0;

    if (missing == NULL) {
        bs_root_fail(rt, RMACOLL_ERR_TIMEOUT, "timed out (out of memory naming ranks)");
        return;
    }
    for (int r = 0; r < rt->nranks; r++) {
        bs_rconn_t *c = &rt->ranks[r];
        if (rt->phase == BS_PH_CONNECT) {
            missing[r] = (c->fd < 0);
        } else if (rt->phase == BS_PH_GATHER) {
            missing[r] = !c->contributed;
        } else {
            missing[r] = c->out_off < BS_HDR_BYTES + rt->op_bytes * (uint64_t)rt->nranks;
        }
        nmiss += missing[r];
    }
    bs_rank_list(missing, rt->nranks, list, sizeof(list));
    free(missing);
    if (rt->phase == BS_PH_CONNECT) {
        bs_root_fail(rt, RMACOLL_ERR_TIMEOUT,
                     "timed out waiting for rank(s) %s to connect (%d of %d missing; "
                     "no rank joined for the timeout)", list, nmiss, rt->nranks);
    } else if (rt->phase == BS_PH_GATHER) {
        bs_root_fail(rt, RMACOLL_ERR_TIMEOUT,
                     "timed out after %" PRIu64 " ms waiting for rank(s) %s to "
                     "enter allgather #%u of %" PRIu64 " bytes (no rank entered for "
                     "%" PRIu64 " ms)", rt->op_timeout_ms, list, rt->op_seq,
                     rt->op_bytes, rt->op_timeout_ms);
    } else {
        bs_root_fail(rt, RMACOLL_ERR_TIMEOUT,
                     "timed out after %" PRIu64 " ms waiting for rank(s) %s to "
                     "read the result of allgather #%u",
                     rt->op_timeout_ms, list, rt->op_seq);
    }
}

static void *bs_root_main(void *arg)
{
    bs_root_t *rt = arg;

    for (;;) {
        int n = 0;
        int base_pending, base_ranks;
        uint64_t next = rt->deadline;

        if (rt->nranks > 0 && rt->nleft == rt->nranks) {
            rmacoll__log(&rt->lg, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap root %s: all %d ranks left, exiting",
                         rt->addr, rt->nranks);
            break;
        }
        if (rt->pfds == NULL || rt->cap_pfds < 1 + rt->npending + rt->nranks) {
            int cap = 1 + rt->cap_pending + rt->nranks;
            struct pollfd *pp = realloc(rt->pfds, (size_t)cap * sizeof(*pp));
            if (pp == NULL) {
                bs_root_fail(rt, RMACOLL_ERR_NO_MEMORY, "root out of memory");
                break;
            }
            rt->pfds = pp;
            rt->cap_pfds = cap;
        }
        rt->pfds[n].fd = rt->lfd;
        rt->pfds[n].events = POLLIN;
        rt->pfds[n].revents = 0;
        n++;
        base_pending = n;
        for (int i = 0; i < rt->npending; i++) {
            rt->pfds[n].fd = rt->pending[i].fd;
            rt->pfds[n].events = POLLIN;
            rt->pfds[n].revents = 0;
            n++;
            if (rt->pending[i].deadline < next) {
                next = rt->pending[i].deadline;
            }
        }
        base_ranks = n;
        for (int r = 0; r < rt->nranks; r++) {
            bs_rconn_t *c = &rt->ranks[r];
            short ev = 0;
            if (c->fd >= 0) {
                if (rt->phase == BS_PH_SCATTER) {
                    ev = (c->out_off < BS_HDR_BYTES +
                                           rt->op_bytes * (uint64_t)rt->nranks)
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
        int rc = poll(rt->pfds, (nfds_t)n, bs_poll_ms(next));
        if (rc < 0 && errno != EINTR) {
            bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP, "poll failed: %s", strerror(errno));
            break;
        }
        if (rc < 0) {
            continue;
        }
        /* Pending sockets (those polled: accept below may add more):
         * complete hellos, drop silent ones. */
        int failed = 0;
        int npend = rt->npending;
        if (rt->pfds[0].revents & POLLIN) {
            bs_root_accept(rt);
        }
        uint64_t now = rmacoll__now_ms();
        for (int i = 0; i < npend && !failed; i++) {
            bs_rconn_t *c = &rt->pending[i];
            if (rt->pfds[base_pending + i].revents != 0) {
                int got = bs_conn_read_hdr(c);
                if (got < 0) {
                    rmacoll__log(&rt->lg, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                                 "bootstrap root %s: connection from %s closed before its hello",
                                 rt->addr, c->peer);
                    bs_conn_close(c);
                } else if (got > 0) {
                    failed = bs_root_hello(rt, c) != 0;
                }
            }
            if (c->fd >= 0 && c->deadline <= now) {
                rmacoll__log(&rt->lg, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                             "bootstrap root %s: connection from %s sent no hello "
                             "within %u ms, dropped", rt->addr, c->peer,
                             BS_HELLO_TIMEOUT_MS);
                bs_conn_close(c);
            }
        }
        if (failed) {
            break;
        }
        int w = 0;
        for (int i = 0; i < rt->npending; i++) {
            if (rt->pending[i].fd >= 0) {
                rt->pending[w++] = rt->pending[i];
            }
        }
        rt->npending = w;
        /* Ranks (the rank array may have been created above: only look at
         * slots that were polled). */
        int polled = n - base_ranks;
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
                bs_root_fail(rt, RMACOLL_ERR_BOOTSTRAP, got <= 0
                                 ? "rank %d disconnected before all ranks connected"
                                 : "rank %d sent data before the rendezvous completed", r);
                failed = 1;
            } else if (rt->phase == BS_PH_GATHER) {
                failed = bs_root_gather_input(rt, r) != 0;
            } else if (rt->phase == BS_PH_SCATTER) {
                failed = bs_root_scatter_output(rt, r) != 0;
            }
        }
        if (failed) {
            break;
        }
        if (rt->deadline != UINT64_MAX && rmacoll__now_ms() >= rt->deadline) {
            bs_root_timeout(rt);
            break;
        }
    }
    bs_root_free(rt);
    return NULL;
}

/* Binds a listener on d (port 0: ephemeral) and writes the bound address
 * back into d; falls back to the wildcard address when bind_fallback and
 * the address is not local. */
static rmacoll_status_t bs_listen(bs_id_t *d, int bind_fallback,
                                  const rmacoll__logger_t *lg, int *lfd)
{
    char astr[64];
    int one = 1;
    int fd = socket(d->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    bs_sockaddr_str((struct sockaddr *)&d->ss, astr, sizeof(astr));
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
static rmacoll_status_t bs_root_start(int lfd, const bs_id_t *d,
                                      const rmacoll__logger_t *lg)
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
    rt->phase = BS_PH_CONNECT;
    rt->deadline = UINT64_MAX;
    bs_sockaddr_str((const struct sockaddr *)&d->ss, rt->addr, sizeof(rt->addr));
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

/* Makes a root listening on host (port 0 = ephemeral) and its id. */
static rmacoll_status_t bs_new_root(const char *host, unsigned port,
                                    const rmacoll__logger_t *lg,
                                    rmacoll_unique_id_t *id)
{
    bs_id_t d;
    int lfd;
    rmacoll_status_t st;

    memset(&d, 0, sizeof(d));
    if (bs_resolve(host, port, &d) != 0) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: cannot resolve bootstrap address '%s'", host);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    st = bs_listen(&d, 0, lg, &lfd);
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
            bs_resolve(hn, ntohs(p), &h) == 0 && h.ss.ss_family == d.ss.ss_family) {
            d.ss = h.ss;
            d.sslen = h.sslen;
        }
    }
    d.magic = bs_random64();
    st = bs_root_start(lfd, &d, lg);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    bs_id_encode(&d, id);
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
        if (bs_split_hostport(env, host, sizeof(host), &port) != 0) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: RMACOLL_BOOTSTRAP_ADDR='%s' is not host:port", env);
            return RMACOLL_ERR_BOOTSTRAP;
        }
    } else {
        snprintf(host, sizeof(host), "127.0.0.1");
    }
    return bs_new_root(host, port, &lg, id);
}

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

    if (bs_recv_all(bs->fd, text, n, bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
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
            int to = bs_poll_ms(dl);
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
            bs_fd_tune(fd);
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
    if (bs_id_decode(id, &d) != 0) {
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap rank %d: the unique id is not an rmacoll id "
                     "(not made by rmacoll_get_unique_id?)", rank);
        free(bs);
        return RMACOLL_ERR_INVALID_ARG;
    }
    bs_sockaddr_str((struct sockaddr *)&d.ss, bs->root_addr, sizeof(bs->root_addr));
    deadline = bs_add_ms(start, bs->timeout_ms);
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
    err = bs_send_hdr(bs->fd, &h, bs_add_ms(deadline, bs->grace_ms));
    while (err == 0) {
        err = bs_recv_all(bs->fd, hb, sizeof(hb), bs_add_ms(deadline, bs->grace_ms));
        bs_hdr_decode(hb, &h);
        if (err != 0 || h.type != BS_MSG_PROGRESS) {
            break;
        }
        deadline = bs_add_ms(rmacoll__now_ms(), bs->timeout_ms); /* another rank joined */
    }
    rmacoll_status_t st = RMACOLL_SUCCESS;
    if (err != 0) {
        st = bs_io_error(bs, err, "rendezvous", bs->timeout_ms + bs->grace_ms);
    } else {
        bs_hdr_decode(hb, &h);
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
            if (bs_recv_all(bs->fd, hb, sizeof(hb), bs_add_ms(rmacoll__now_ms(), 200)) == 0) {
                bs_hdr_decode(hb, &h);
                if (h.type == BS_MSG_ERROR) {
                    return bs_read_error(bs, &h, what);
                }
            }
            return bs_io_error(bs, err, what, 0);
        }
        struct pollfd pfd = {.fd = bs->fd, .events = POLLOUT | POLLIN};
        int to = bs_poll_ms(deadline);
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
            int err = bs_recv_all(bs->fd, hb, sizeof(hb), deadline);
            if (err != 0) {
                return bs_io_error(bs, err, what, bs->timeout_ms + bs->grace_ms);
            }
            bs_hdr_decode(hb, &h);
            if (h.type == BS_MSG_ERROR) {
                return bs_read_error(bs, &h, what);
            }
            if (h.type == BS_MSG_PROGRESS) {
                deadline = bs_add_ms(rmacoll__now_ms(), bs->timeout_ms + bs->grace_ms);
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

rmacoll_status_t rmacoll__bootstrap_allgather(rmacoll__bootstrap_t *bs,
                                              const void *send, void *recv,
                                              size_t bytes)
{
    char what[64];
    uint8_t hb[BS_HDR_BYTES];
    bs_hdr_t h;
    uint64_t total, deadline;
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
    total = (uint64_t)bytes * (uint64_t)bs->nranks;
    deadline = bs_add_ms(rmacoll__now_ms(), bs->timeout_ms + bs->grace_ms);
    h = (bs_hdr_t){.type = BS_MSG_OP, .arg = bs->seq, .a = bytes, .b = bs->timeout_ms};
    bs_hdr_encode(&h, hb);
    st = bs_op_send(bs, hb, send, bytes, deadline, what);
    if (st != RMACOLL_SUCCESS) {
        return bs_fail(bs, st);
    }
    for (;;) {
        err = bs_recv_all(bs->fd, hb, sizeof(hb), deadline);
        if (err != 0) {
            return bs_fail(bs, bs_io_error(bs, err, what, bs->timeout_ms + bs->grace_ms));
        }
        bs_hdr_decode(hb, &h);
        if (h.type != BS_MSG_PROGRESS) {
            break;
        }
        /* another rank entered: the silence counts from now */
        deadline = bs_add_ms(rmacoll__now_ms(), bs->timeout_ms + bs->grace_ms);
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
        err = bs_recv_all(bs->fd, recv, (size_t)total, deadline);
        if (err != 0) {
            return bs_fail(bs, bs_io_error(bs, err, what, bs->timeout_ms + bs->grace_ms));
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

rmacoll_status_t rmacoll__bootstrap_poll_error(rmacoll__bootstrap_t *bs, int *rank,
                                               char *text, size_t len)
{
    uint8_t hb[BS_HDR_BYTES];
    bs_hdr_t h;
    ssize_t n;

    if (bs == NULL || bs->is_oob || bs->fd < 0) {
        return RMACOLL_SUCCESS;
    }
    if (bs->reported == RMACOLL_SUCCESS) {
        n = recv(bs->fd, hb, sizeof(hb), MSG_PEEK | MSG_DONTWAIT);
        if (n != (ssize_t)sizeof(hb)) {
            return RMACOLL_SUCCESS; /* nothing, part of a header, or the root gone */
        }
        bs_hdr_decode(hb, &h);
        if (h.type != BS_MSG_ERROR || h.b == 0 || h.b > (uint64_t)bs->nranks) {
            /* left for the next allgather: only a rank's death is reported
             * here, not e.g. an allgather another rank entered early */
            return RMACOLL_SUCCESS;
        }
        if (bs_recv_all(bs->fd, hb, sizeof(hb), bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
            return RMACOLL_SUCCESS;
        }
        size_t tn = h.a < BS_ERRTEXT_MAX ? (size_t)h.a : BS_ERRTEXT_MAX;
        if (bs_recv_all(bs->fd, bs->reported_text, tn, bs_add_ms(rmacoll__now_ms(), 1000)) != 0) {
            tn = 0;
        }
        bs->reported_text[tn] = '\0';
        bs->reported = bs_status_from_wire(h.arg);
        if (bs->reported == RMACOLL_SUCCESS) {
            bs->reported = RMACOLL_ERR_BOOTSTRAP;
        }
        bs->reported_rank = (int)(h.b - 1);
        bs->failed = bs->reported;
        rmacoll__log(&bs->lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
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
        uint64_t deadline = bs_add_ms(rmacoll__now_ms(), wait);
        if (bs_send_hdr(bs->fd, &h, deadline) == 0) {
            uint8_t b;
            shutdown(bs->fd, SHUT_WR);
            (void)bs_recv_all(bs->fd, &b, 1, deadline);
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

/* --------------------------------------------------------- launcher env */

#ifdef RMACOLL_HAVE_PMIX
/* ---- PMIx wire-up (mpirun, srun --mpi=pmix, prterun) ----
 * Rank 0 starts a root as rmacoll_get_unique_id does and publishes its id
 * with PMIx_Put/Commit; a collecting PMIx_Fence; every rank reads it with
 * PMIx_Get from rank 0. The TCP rendezvous itself is unchanged: PMIx only
 * carries the id, so no RMACOLL_BOOTSTRAP_ADDR is needed.
 * libpmix is opened with dlopen when a PMIx launcher is seen (as NCCL
 * opens its plugins): RMACOLL_PMIX_LIBRARY, else libpmix.so.2 on the
 * search path, else the build's PMIx libdir; librmacoll does not NEED it. */

typedef struct bs_pmix_fns {
    pmix_status_t (*init)(pmix_proc_t *, pmix_info_t *, size_t);
    pmix_status_t (*finalize)(const pmix_info_t *, size_t);
    pmix_status_t (*put)(pmix_scope_t, const char *, pmix_value_t *);
    pmix_status_t (*commit)(void);
    pmix_status_t (*fence)(const pmix_proc_t *, size_t, const pmix_info_t *, size_t);
    pmix_status_t (*get)(const pmix_proc_t *, const char *, const pmix_info_t *, size_t,
                         pmix_value_t **);
    const char *(*error_string)(pmix_status_t);
    void (*value_destruct)(pmix_value_t *);
} bs_pmix_fns_t;

static bs_pmix_fns_t bs_pmix;
static pthread_once_t bs_pmix_once = PTHREAD_ONCE_INIT;
static char bs_pmix_err[320];

static void bs_pmix_sym(void *h, const char *name, void *fnp, size_t size)
{
    void *f = dlsym(h, name);

    if (f == NULL && bs_pmix_err[0] == '\0') {
        snprintf(bs_pmix_err, sizeof(bs_pmix_err), "%s not found in libpmix", name);
    }
    memcpy(fnp, &f, size);   /* POSIX: a dlsym result converts to a function */
}

static void bs_pmix_load(void)
{
    const char *env = getenv("RMACOLL_PMIX_LIBRARY");
    void *h = NULL;

    if (env != NULL && env[0] != '\0') {
        h = dlopen(env, RTLD_NOW | RTLD_GLOBAL);
    } else {
        h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
#ifdef RMACOLL_PMIX_LIBDIR
        if (h == NULL) {
            h = dlopen(RMACOLL_PMIX_LIBDIR "/libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
        }
#endif
    }
    if (h == NULL) {
        snprintf(bs_pmix_err, sizeof(bs_pmix_err), "cannot load libpmix: %s", dlerror());
        return;
    }
#define BS_PMIX_SYM(field, name) bs_pmix_sym(h, name, &bs_pmix.field, sizeof(bs_pmix.field))
    BS_PMIX_SYM(init, "PMIx_Init");
    BS_PMIX_SYM(finalize, "PMIx_Finalize");
    BS_PMIX_SYM(put, "PMIx_Put");
    BS_PMIX_SYM(commit, "PMIx_Commit");
    BS_PMIX_SYM(fence, "PMIx_Fence");
    BS_PMIX_SYM(get, "PMIx_Get");
    BS_PMIX_SYM(error_string, "PMIx_Error_string");
    BS_PMIX_SYM(value_destruct, "PMIx_Value_destruct");
#undef BS_PMIX_SYM
    if (bs_pmix_err[0] != '\0') {
        memset(&bs_pmix, 0, sizeof(bs_pmix));
    }
}

static void bs_pmix_proc(pmix_proc_t *p, const char *nspace, pmix_rank_t rank)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->nspace, sizeof(p->nspace), "%s", nspace);
    p->rank = rank;
}

static void bs_pmix_release(pmix_value_t *v)
{
    if (v != NULL) {
        bs_pmix.value_destruct(v);
        free(v);   /* PMIX_VALUE_RELEASE */
    }
}

static int bs_pmix_present(void)
{
    return getenv("PMIX_RANK") != NULL || getenv("PMIX_NAMESPACE") != NULL;
}

/* An address of this host other nodes can dial: the first IPv4 address of
 * an up, non-loopback interface; "127.0.0.1" when there is none. */
static void bs_pmix_host(char *host, size_t len)
{
    struct ifaddrs *ifa = NULL;

    snprintf(host, len, "127.0.0.1");
    if (getifaddrs(&ifa) != 0) {
        return;
    }
    for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) {
            continue;
        }
        if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                      host, (socklen_t)len) != NULL) {
            break;
        }
    }
    freeifaddrs(ifa);
}

static uint32_t bs_pmix_u32(const pmix_proc_t *p, const char *key, uint32_t dflt)
{
    pmix_value_t *v = NULL;
    uint32_t out = dflt;

    if (bs_pmix.get(p, key, NULL, 0, &v) == PMIX_SUCCESS && v != NULL) {
        if (v->type == PMIX_UINT32) {
            out = v->data.uint32;
        }
        bs_pmix_release(v);
    }
    return out;
}

/* *rank, *nranks from PMIx (checked against the launcher's variables when
 * want_rank >= 0) and the id from rank 0. */
static rmacoll_status_t bs_pmix_exchange(int want_rank, int want_n, int *rank,
                                         int *nranks, rmacoll_unique_id_t *id,
                                         const rmacoll__logger_t *lg)
{
    static unsigned seq;   /* one key per call: every rank counts alike */
    pmix_proc_t me, job, root;
    pmix_value_t val, *got = NULL;
    pmix_info_t info;
    pmix_status_t rc;
    bool collect = true;
    char key[64];
    uint32_t n, nodes;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    pthread_once(&bs_pmix_once, bs_pmix_load);
    if (bs_pmix.init == NULL) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx launcher found but %s (set RMACOLL_PMIX_LIBRARY, or "
                     "RMACOLL_BOOTSTRAP_ADDR to use the TCP rendezvous instead)", bs_pmix_err);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    rc = bs_pmix.init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx_Init failed: %s (set RMACOLL_BOOTSTRAP_ADDR "
                     "to use the TCP rendezvous instead)", bs_pmix.error_string(rc));
        return RMACOLL_ERR_BOOTSTRAP;
    }
    bs_pmix_proc(&job, me.nspace, PMIX_RANK_WILDCARD);
    n = bs_pmix_u32(&job, PMIX_JOB_SIZE, 0);
    nodes = bs_pmix_u32(&job, PMIX_NUM_NODES, 0);
    if (n == 0 || me.rank >= n || n > (1u << 30) ||
        (want_rank >= 0 && ((int)me.rank != want_rank || (int)n != want_n))) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx rank %u of %u does not match the launcher's "
                     "rank %d of %d", me.rank, n, want_rank, want_n);
        bs_pmix.finalize(NULL, 0);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    snprintf(key, sizeof(key), "rmacoll.uid.%u", __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    if (me.rank == 0) {
        char host[64];

        /* One node: loopback; else an address the other nodes can reach. */
        if (nodes > 1) {
            bs_pmix_host(host, sizeof(host));
        } else {
            snprintf(host, sizeof(host), "127.0.0.1");
        }
        st = bs_new_root(host, 0, lg, id);
        /* Published even on failure (zeros): the others must not wait for
         * a key that never comes; they then fail on a bad id. */
        if (st != RMACOLL_SUCCESS) {
            memset(id, 0, sizeof(*id));
        }
        val.type = PMIX_BYTE_OBJECT;
        val.data.bo.bytes = (char *)id->internal;
        val.data.bo.size = sizeof(id->internal);
        rc = bs_pmix.put(PMIX_GLOBAL, key, &val);
        if (rc == PMIX_SUCCESS) {
            rc = bs_pmix.commit();
        }
        if (rc != PMIX_SUCCESS) {
            rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: PMIx_Put/Commit of %s failed: %s", key,
                         bs_pmix.error_string(rc));
        }
    }
    /* PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL) */
    memset(&info, 0, sizeof(info));
    snprintf(info.key, sizeof(info.key), "%s", PMIX_COLLECT_DATA);
    info.value.type = PMIX_BOOL;
    info.value.data.flag = collect;
    rc = bs_pmix.fence(NULL, 0, &info, 1);
    if (rc != PMIX_SUCCESS) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx_Fence failed on rank %u: %s", me.rank,
                     bs_pmix.error_string(rc));
        bs_pmix.finalize(NULL, 0);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    if (me.rank != 0) {
        bs_pmix_proc(&root, me.nspace, 0);
        rc = bs_pmix.get(&root, key, NULL, 0, &got);
        if (rc != PMIX_SUCCESS || got == NULL || got->type != PMIX_BYTE_OBJECT ||
            got->data.bo.size != sizeof(id->internal)) {
            rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: rank %u: PMIx_Get of %s from rank 0 failed: %s",
                         me.rank, key, bs_pmix.error_string(rc));
            st = RMACOLL_ERR_BOOTSTRAP;
        } else {
            memcpy(id->internal, got->data.bo.bytes, sizeof(id->internal));
        }
        bs_pmix_release(got);
    }
    bs_pmix.finalize(NULL, 0);
    if (st == RMACOLL_SUCCESS) {
        rmacoll__log(lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: rank %u of %u: rendezvous id from PMIx (%u node(s))",
                     me.rank, n, nodes);
        *rank = (int)me.rank;
        *nranks = (int)n;
    }
    return st;
}
#endif /* RMACOLL_HAVE_PMIX */

rmacoll_status_t rmacoll__bootstrap_from_env(int *rank, int *nranks,
                                             rmacoll_unique_id_t *id)
{
    static const char *const pairs[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"RANK", "WORLD_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS"},
    };
    rmacoll__logger_t lg;
    int r = -1, n = -1, found = -1;
    char text[320], host[256];
    unsigned port = 0;
    bs_id_t d;
    const char *addr = getenv("RMACOLL_BOOTSTRAP_ADDR");

    if (rank == NULL || nranks == NULL || id == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll__logger_default(&lg);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        int bad = 0;
        int hr = rmacoll__env_int(pairs[i][0], 0, 1 << 30, &r, &bad);
        int hn = rmacoll__env_int(pairs[i][1], 1, 1 << 30, &n, &bad);
        if (bad || (hr != hn)) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: launcher variables %s='%s' %s='%s' are not a "
                         "rank and a size", pairs[i][0],
                         getenv(pairs[i][0]) ? getenv(pairs[i][0]) : "",
                         pairs[i][1], getenv(pairs[i][1]) ? getenv(pairs[i][1]) : "");
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (hr && hn) {
            found = (int)i;
            break;
        }
    }
#ifdef RMACOLL_HAVE_PMIX
    /* PMIx carries the id unless an address is given by hand
     * (RMACOLL_BOOTSTRAP_ADDR) or torchrun-style (MASTER_ADDR). */
    if (bs_pmix_present() && (addr == NULL || addr[0] == '\0') &&
        getenv("MASTER_ADDR") == NULL) {
        return bs_pmix_exchange(found >= 0 ? r : -1, found >= 0 ? n : -1, rank,
                                nranks, id, &lg);
    }
#endif
    if (found < 0) {
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: no launcher variables (OMPI_COMM_WORLD_RANK/SIZE, "
                     "PMI_RANK/SIZE, RANK/WORLD_SIZE, SLURM_PROCID/NTASKS, PMIX_RANK)");
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (r >= n) {
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: %s=%d is not below %s=%d", pairs[found][0], r,
                     pairs[found][1], n);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (addr != NULL && addr[0] != '\0') {
        if (bs_split_hostport(addr, host, sizeof(host), &port) != 0 || port == 0) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: RMACOLL_BOOTSTRAP_ADDR='%s' is not host:port", addr);
            return RMACOLL_ERR_INVALID_ARG;
        }
    } else {
        const char *ma = getenv("MASTER_ADDR");
        int mp = 0, bad = 0;
        if (ma == NULL || ma[0] == '\0' || !rmacoll__env_int("MASTER_PORT", 1, 65534, &mp, &bad)) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: set RMACOLL_BOOTSTRAP_ADDR=host:port, or "
                         "MASTER_ADDR and MASTER_PORT (the bootstrap uses MASTER_PORT+1)");
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (bs_split_hostport(ma, host, sizeof(host), &port) != 0) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: MASTER_ADDR='%s' is not a host name", ma);
            return RMACOLL_ERR_INVALID_ARG;
        }
        port = (unsigned)mp + 1;
    }
    memset(&d, 0, sizeof(d));
    if (bs_resolve(host, port, &d) != 0) {
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: cannot resolve the bootstrap host '%s'", host);
        return RMACOLL_ERR_INVALID_ARG;
    }
    {
        const char *job = getenv("SLURM_JOB_ID");
        const char *run = getenv("TORCHELASTIC_RUN_ID");
        snprintf(text, sizeof(text), "rmacoll-env|%s|%u|%d|%s|%s", host, port, n,
                 job ? job : "", run ? run : "");
        d.magic = bs_fnv1a(0xcbf29ce484222325ull, text);
    }
    if (r == 0) {
        int lfd;
        rmacoll_status_t st = bs_listen(&d, 1, &lg, &lfd);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        st = bs_root_start(lfd, &d, &lg);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    bs_id_encode(&d, id);
    *rank = r;
    *nranks = n;
    return RMACOLL_SUCCESS;
}
