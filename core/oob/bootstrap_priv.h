/*
 * bootstrap_priv.h - what the files of core/oob share: the wire format,
 * the unique id's layout, the rank's and the root's state, and the
 * functions one file calls in another. The files, by responsibility:
 *   bootstrap_wire.c       sockets, the 32-byte header, the unique id
 *   bootstrap_root.c       the root's connections: hello, gather, scatter,
 *                          failures and timeouts
 *   bootstrap_root_main.c  the root's thread, its listening socket,
 *                          rmacoll_get_unique_id
 *   bootstrap_rank.c       a rank's client: create, allgather, barrier,
 *                          errors the root reports, the oob wrapper
 *   bootstrap_launch.c     launcher variables and the PMIx wire-up
 *   bootstrap_shrink.c     after a rank's death: the root's broken state
 *                          and the shrink agreement, both sides
 * See bootstrap.h for the contract.
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
 *   SHRINK  rank->root  a=nranks b=bound ms; payload nranks bytes, 1 for
 *                       each rank this rank saw go silent (suspects)
 *   SHRUNK  root->rank  arg=new rank a=new nranks b=payload bytes; payload
 *                       the new unique id, then nranks bytes (1 = survivor)
 *   ERROR with c=1 ends a shrink (the rank is excluded, or it failed);
 *   c=0 is a report (a rank died) that a shrink reads past.
 * The timeout counts silence: the root gives up when no rank has joined
 * (entered) for timeout_ms (the smallest of the ranks' "ms left" / timeout),
 * so it reports a missing rank before any waiting rank gives up; a rank
 * waits timeout_ms plus a grace (BS_GRACE_MS) for the root's answer,
 * counted again from each PROGRESS.
 */
#ifndef RMACOLL_CORE_BOOTSTRAP_PRIV_H
#define RMACOLL_CORE_BOOTSTRAP_PRIV_H

#include "core/oob/bootstrap.h"
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

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
    BS_MSG_PROGRESS = 7,
    BS_MSG_SHRINK = 8,
    BS_MSG_SHRUNK = 9
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
    /* a failure the root reported between allgathers (poll_error): the
     * rank and text are written before reported (release); polling is
     * held by the one thread reading the socket for it (a device call's
     * staging worker and the caller's thread both poll) */
    _Atomic int polling;
    rmacoll_status_t reported;
    int reported_rank;
    char reported_text[BS_ERRTEXT_MAX + 1];
};

/* The root's phase in an allgather; REJECT: a root that only turns ranks
 * away (a unique id used again after its communicator ended:
 * rmacoll__bs_tombstone) until its deadline; after a rank died (BROKEN: no
 * more allgathers, the survivors may shrink), while it collects a shrink
 * (SHRINK), after it answered one (DONE: waits for the ranks to leave).
 * Order matters: phases from BROKEN on are a broken communicator's. */
enum { BS_PH_CONNECT, BS_PH_GATHER, BS_PH_SCATTER, BS_PH_REJECT, BS_PH_BROKEN, BS_PH_SHRINK,
       BS_PH_DONE };

/* bs_root_t.shr[r]: a rank's part in a shrink */
#define BS_SHR_ANNOUNCED 1u /* sent SHRINK */
#define BS_SHR_SUSPECT 2u   /* a survivor saw it go silent */

typedef struct bs_rconn {
    int fd;          /* -1: not connected or gone */
    int left;        /* said BYE */
    uint8_t hdr[BS_HDR_BYTES];
    size_t hdr_got;
    size_t pay_got;  /* payload bytes of the current OP received */
    int contributed; /* whole OP received */
    size_t out_off;  /* RESULT bytes sent (header + payload) */
    uint64_t deadline; /* pending sockets: hello deadline */
    uint64_t skip;     /* BROKEN: payload bytes of an OP still to discard */
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
    uint8_t *shr;      /* [nranks] BS_SHR_* (bootstrap_shrink.c), NULL until needed */
    char broken_text[BS_ERRTEXT_MAX]; /* the death that broke the root */
} bs_root_t;

/* bootstrap_root_main.c: unique ids whose communicator ended in this
 * process (their root exited once every rank left) */
int rmacoll__bs_id_ended(uint64_t magic);
/* Turns every rank that presents d away, for ms milliseconds, from d's
 * address (best effort: nothing when it cannot listen there). */
void rmacoll__bs_tombstone(const bs_id_t *d, uint64_t ms, const rmacoll__logger_t *lg);

/* bootstrap_wire.c */
uint64_t rmacoll__bs_add_ms(uint64_t t, uint64_t ms);
int rmacoll__bs_poll_ms(uint64_t deadline);
void rmacoll__bs_hdr_encode(const bs_hdr_t *h, uint8_t *p);
void rmacoll__bs_hdr_decode(const uint8_t *p, bs_hdr_t *h);
void rmacoll__bs_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);
void rmacoll__bs_fd_tune(int fd);
int rmacoll__bs_recv_all(int fd, void *buf, size_t len, uint64_t deadline);
int rmacoll__bs_send_hdr(int fd, const bs_hdr_t *h, uint64_t deadline);
int rmacoll__bs_send_all(int fd, const void *buf, size_t len, uint64_t deadline);
void rmacoll__bs_send_error(int fd, rmacoll_status_t st, const char *text, int culprit);
void rmacoll__bs_rank_list(const uint8_t *missing, int nranks, char *buf,
                           size_t len);
void rmacoll__bs_id_encode(const bs_id_t *d, rmacoll_unique_id_t *id);
int rmacoll__bs_id_decode(const rmacoll_unique_id_t *id, bs_id_t *d);
int rmacoll__bs_split_hostport(const char *s, char *host, size_t hlen,
                               unsigned *port);
int rmacoll__bs_resolve(const char *host, unsigned port, bs_id_t *d);
uint64_t rmacoll__bs_random64(void);
uint64_t rmacoll__bs_fnv1a(uint64_t h, const char *s);

/* bootstrap_root.c */
void rmacoll__bs_conn_close(bs_rconn_t *c);
void rmacoll__bs_root_free(bs_root_t *rt);
void rmacoll__bs_root_fail(bs_root_t *rt, rmacoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int rmacoll__bs_conn_read_hdr(bs_rconn_t *c);
int rmacoll__bs_root_hello(bs_root_t *rt, bs_rconn_t *c);
void rmacoll__bs_root_accept(bs_root_t *rt);
int rmacoll__bs_root_gather_input(bs_root_t *rt, int r);
int rmacoll__bs_root_scatter_output(bs_root_t *rt, int r);
void rmacoll__bs_root_timeout(bs_root_t *rt);

/* bootstrap_shrink.c */
void rmacoll__bs_root_lose(bs_root_t *rt, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int rmacoll__bs_root_shrink_msg(bs_root_t *rt, int r, const bs_hdr_t *h);
int rmacoll__bs_root_broken_input(bs_root_t *rt, int r);
int rmacoll__bs_root_broken_done(const bs_root_t *rt);
int rmacoll__bs_root_broken_deadline(bs_root_t *rt);

/* bootstrap_root_main.c */
rmacoll_status_t rmacoll__bs_listen(bs_id_t *d, int bind_fallback,
                                    const rmacoll__logger_t *lg, int *lfd);
rmacoll_status_t rmacoll__bs_root_start(int lfd, const bs_id_t *d,
                                        const rmacoll__logger_t *lg);
/* The same for a root that starts in `phase` with `deadline` (the
 * tombstone: BS_PH_REJECT, ending quietly at its deadline). */
rmacoll_status_t rmacoll__bs_root_start_phase(int lfd, const bs_id_t *d,
                                              const rmacoll__logger_t *lg, int phase,
                                              uint64_t deadline);
rmacoll_status_t rmacoll__bs_new_root(const char *host, unsigned port,
                                      const rmacoll__logger_t *lg,
                                      rmacoll_unique_id_t *id);

#endif /* RMACOLL_CORE_BOOTSTRAP_PRIV_H */
