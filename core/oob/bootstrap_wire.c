/*
 * bootstrap_wire.c - the pieces every side of the TCP rendezvous uses: sockets
 * (resolve, tune, receive with a deadline), the 32-byte header, the error
 * message, the unique id's encoding and decoding.
 */
#define _GNU_SOURCE /* accept4 */
#include "core/oob/bootstrap_priv.h"

#include "core/base/clock.h"
#include "core/base/text.h"
#include "core/config/env.h"

/* ---------------------------------------------------------------- helpers */

uint64_t rmacoll__bs_add_ms(uint64_t t, uint64_t ms)
{
    return (ms > UINT64_MAX - t) ? UINT64_MAX : t + ms;
}

int rmacoll__bs_poll_ms(uint64_t deadline)
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

void rmacoll__bs_hdr_encode(const bs_hdr_t *h, uint8_t *p)
{
    bs_put32(p, h->type);
    bs_put32(p + 4, h->arg);
    bs_put64(p + 8, h->a);
    bs_put64(p + 16, h->b);
    bs_put64(p + 24, h->c);
}

void rmacoll__bs_hdr_decode(const uint8_t *p, bs_hdr_t *h)
{
    h->type = bs_get32(p);
    h->arg = bs_get32(p + 4);
    h->a = bs_get64(p + 8);
    h->b = bs_get64(p + 16);
    h->c = bs_get64(p + 24);
}

void rmacoll__bs_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
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

void rmacoll__bs_fd_tune(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Sends len bytes from a non-blocking fd. 0, ETIMEDOUT or an errno. */
int rmacoll__bs_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
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
        int to = rmacoll__bs_poll_ms(deadline);
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
int rmacoll__bs_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
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
        int to = rmacoll__bs_poll_ms(deadline);
        if (to == 0) {
            return ETIMEDOUT;
        }
        if (poll(&pfd, 1, to) < 0 && errno != EINTR) {
            return errno;
        }
    }
    return 0;
}

int rmacoll__bs_send_hdr(int fd, const bs_hdr_t *h, uint64_t deadline)
{
    uint8_t b[BS_HDR_BYTES];

    rmacoll__bs_hdr_encode(h, b);
    return rmacoll__bs_send_all(fd, b, sizeof(b), deadline);
}

/* Best effort: an ERROR message with text, bounded by one second. */
void rmacoll__bs_send_error(int fd, rmacoll_status_t st, const char *text, int culprit)
{
    size_t n = strlen(text);
    bs_hdr_t h = {.type = BS_MSG_ERROR, .arg = (uint32_t)st, .a = n,
                  .b = culprit >= 0 ? (uint64_t)culprit + 1 : 0};
    uint64_t deadline = rmacoll__bs_add_ms(rmacoll__now_ms(), 1000);

    if (rmacoll__bs_send_hdr(fd, &h, deadline) == 0) {
        (void)rmacoll__bs_send_all(fd, text, n, deadline);
    }
}

/* Appends "a,b,c" of the ranks with missing[r] != 0 to buf. */
void rmacoll__bs_rank_list(const uint8_t *missing, int nranks, char *buf,
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

void rmacoll__bs_id_encode(const bs_id_t *d, rmacoll_unique_id_t *id)
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

int rmacoll__bs_id_decode(const rmacoll_unique_id_t *id, bs_id_t *d)
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

    if (id == NULL || buf == NULL || len == 0 || rmacoll__bs_id_decode(id, &d) != 0) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll__bs_sockaddr_str((const struct sockaddr *)&d.ss, buf, len);
    return RMACOLL_SUCCESS;
}

/* Splits "host:port" / "[v6]:port" / "host" (port 0). 0 or -1. */
int rmacoll__bs_split_hostport(const char *s, char *host, size_t hlen,
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

int rmacoll__bs_resolve(const char *host, unsigned port, bs_id_t *d)
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

uint64_t rmacoll__bs_random64(void)
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
uint64_t rmacoll__bs_fnv1a(uint64_t h, const char *s)
{
    for (; *s != '\0'; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}
