/*
 * ctrl.h - the control plane of one rank: the layout of its control
 * window, the one map of its signal words, and the per-call records
 * (metadata, agreement) that travel through it. Pure: computed from the
 * topology and the planner settings, so every rank computes every other
 * rank's layout alike. The exchange of the records is core/exec/meta.c.
 *
 * Control window (host shared memory, mapped by node peers, registered
 * with the network transport; a metadata record slot of the inbox and the
 * outbox has room for the eager payload, eager_cap bytes, on two nodes
 * with the relay on):
 *   header (magic, the heartbeat count, the progress count, the
 *   abort word, the rank waited for, the receive gate, the waiter's heartbeat;
 *   then the creator's pid, start time and PID namespace, spare: 128 bytes
 *   in all)
 *   | signal words [nsig]
 *   | local record [2 parities]          (node peers read it)
 *   | inbox [2][nnet] | inbox2 [2][nnet]  (network peers write them)
 *   | outbox [2][nnet] | outbox2 [2][nnet] (sources of those puts)
 *   | beat [nnet]                       (network peers' heartbeat counts)
 *
 * Signal words of rank r (index into its signal array), one map:
 *   DATA(p)        = p                                  p < nranks      (planner)
 *   CREDIT(B)      = nranks + B                         B < nnodes      (planner)
 *   XDATA(p)       = nranks + nnodes + p                p < nranks      (planner; only
 *                                                       with direct streams, X = nranks)
 *   ARRIVE(c, s)   = nranks + nnodes + X + c * S + s    c < nin(r)      (planner)
 *   META(k)        = nsig_plan + k                      k < nnet: metadata record
 *                                                       from network peer k arrived
 *   AGREE(k)       = nsig_plan + nnet + k               agreement record arrived
 *   READY(p)       = nsig_plan + 2 nnet + p             p < nranks: p's stream reached
 *                                                       the call (device memory)
 *   STAGE(w)       = nsig_plan + 2 nnet + nranks + w    w < 3: GO, DONE, COPIED
 *                                                       (device memory across nodes)
 * nsig_plan = rmacoll__sig_count(); the planner's words are computed by
 * the planner's own functions (plan.h), the others only here. Every word
 * rises by exactly one per signal, from a single writer, and is never reset.
 * Device calls on one node may use a second array of nsig words with the
 * same map in the rank's device memory instead (comm/comm_xport.c,
 * rmacoll__comm_setup_device_signals; RMACOLL_SIG_DEVICE in rmacoll_transport.h).
 *
 * core/ctrl - the control plane (README):
 *   owns   the control window's layout, signal-word map and records
 *          (ctrl.c), and the proxy thread that owns the network
 *          transport's progress (proxy.c, proxy.h).
 *   calls  base, config, oob, plan, xport. Never exec/ or comm/: the proxy
 *          records its failures through base/fail.h into the buffer its
 *          owner hands it.
 */
#ifndef RMACOLL_CORE_CTRL_H
#define RMACOLL_CORE_CTRL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/plan/plan.h"
#include "rmacoll_transport.h"

#define RMACOLL__CTRL_MAGIC 0x726d61636f6c6c31ull /* "rmacoll1" */
/* Byte offset in the header of the heartbeat count: raised by the owner's
 * proxy thread four times per heartbeat_ms, also between calls (node peers
 * read it here; network peers get it by an 8-byte put into their window's
 * beat slots, off_beat). 0: no proxy thread, no heartbeat. */
#define RMACOLL__CTRL_BEAT_OFF 8
/* Byte offset in the header of the owner's progress count: raised by the
 * owner each time one of its waits is satisfied; node peers waiting on the
 * owner read it (a relay busy forwarding for others is making progress). */
#define RMACOLL__CTRL_PROGRESS_OFF 16
/* Byte offset in the header of the abort word (rmacoll__abort_word): set
 * once, by the first failing rank of a call (and by every rank that learns
 * of it, passing it on), in its own window and in its peers' (node peers
 * through shared memory, network peers by an 8-byte put); every wait
 * checks it. */
#define RMACOLL__CTRL_ABORT_OFF 24
/* Byte offset in the header of the rank the owner is waiting for, plus 1
 * (0: not waiting); node peers read it to name the rank at the end of a
 * chain of waits. */
#define RMACOLL__CTRL_WAITING_OFF 32
/* Byte offsets in the header of the receive gate: OPEN holds the epoch of
 * the call whose receive buffer node peers may write (0: closed); BUSY
 * counts node peers between their check of OPEN and the end of their copy.
 * A writer adds to BUSY, then reads OPEN; the owner clears OPEN, then
 * waits for BUSY to reach 0 (both seq_cst: a Dekker handshake), so once
 * its call has returned no node peer copies into its buffer. */
/* Byte offset in the header of the waiter's heartbeat: CLOCK_MONOTONIC
 * milliseconds of its last sample while waiting (a stopped waiter's goes
 * stale, so a chain of waits ends at it). */
#define RMACOLL__CTRL_HEARTBEAT_OFF 56
#define RMACOLL__CTRL_OPEN_OFF 40
#define RMACOLL__CTRL_BUSY_OFF 48
/* Byte offset in the header of the creator's pid (stale windows of killed
 * processes are removed by the next communicator's creation). */
#define RMACOLL__CTRL_PID_OFF 64
/* Byte offsets in the header of the creator's start time (clock ticks
 * after boot, /proc/PID/stat field 22) and of its PID namespace's id
 * (rmacoll__proc_pidns): a node peer opens a watch on the pid only when it
 * runs in that namespace and the process there started then (base/proc.h),
 * so a pid of another PID namespace, or a reused one, is not watched. 0:
 * unknown (no watch). */
#define RMACOLL__CTRL_START_OFF 72
#define RMACOLL__CTRL_PIDNS_OFF 80
#define RMACOLL__CTRL_HEADER_BYTES 128

/* The abort word: bit 63 set, the status code, the rank that failed first
 * and the peer it found silent or failing (-1: none). */
static inline uint64_t rmacoll__abort_word(int code, int origin, int culprit)
{
    return (1ull << 63) | ((uint64_t)(code & 0xff) << 48) |
           ((uint64_t)(origin & 0xffffff) << 24) | (uint64_t)((culprit + 1) & 0xffffff);
}
static inline int rmacoll__abort_code(uint64_t w) { return (int)((w >> 48) & 0xff); }
static inline int rmacoll__abort_origin(uint64_t w) { return (int)((w >> 24) & 0xffffff); }
static inline int rmacoll__abort_culprit(uint64_t w) { return (int)(w & 0xffffff) - 1; }
/* Bit 62 of an abort word: the culprit's process is known to have exited
 * (the bootstrap root's report or a node peer's watch); no rank writes
 * into it then (exec/wait.c). */
#define RMACOLL__ABORT_DEAD (1ull << 62)

/* A status travelling between ranks: the error of the lowest rank wins. */
typedef struct rmacoll__status_rec {
    int32_t code;    /* rmacoll_status_t; 0 = success */
    int32_t rank;    /* the rank that found it */
    char msg[248];
} rmacoll__status_rec_t;

/* The three stages of the local record (node agreement goes node -> rail
 * -> node). */
typedef enum rmacoll__ctrl_stage {
    RMACOLL__CTRL_A = 0, /* recv_addr, counts, st_a valid (metadata) */
    RMACOLL__CTRL_B = 1, /* st_b valid (after planning) */
    RMACOLL__CTRL_C = 2  /* st_c valid (after the rail round) */
} rmacoll__ctrl_stage_t;

/* Flags of a local record (and, OR-ed over a node, of a network record). */
#define RMACOLL__REC_F_DEVICE 1u  /* the call runs on device memory (stream or staged) */

/* Per-call metadata a rank publishes to its node peers (one per parity),
 * followed by int64 recvcounts[nranks], rdispls[nranks] and
 * sendcounts[nranks]; then, when the layout has a node payload
 * (node_eager_cap), uint64 offsets[max node size] (offset of each node
 * member's block, by local rank, RMACOLL__NO_EAGER: none) and the payload,
 * node_eager_cap bytes (node eager path, rmacoll__plan_node_eager_bytes). */
typedef struct rmacoll__local_rec {
    _Atomic uint64_t epoch[3];  /* [stage]: e + 1 when that stage is valid */
    uint64_t recv_addr;         /* receive buffer in the owner's address space */
    uint64_t esize;             /* element size of the call, bytes (0: unknown) */
    uint64_t flags;             /* RMACOLL__REC_F_* */
    uint64_t node_eager_bytes;  /* bytes of the node payload (0: none), see
                                 * rmacoll__ctrl_local_payload */
    rmacoll__status_rec_t st[3];
    uint8_t recv_blob[RMACOLL_EXPORT_BYTES]; /* device receive buffer export */
} rmacoll__local_rec_t;

/* Per-call record a rank sends to each network peer, followed by int64
 * sendcounts[max node size]: the sender's counts for the receiver's node
 * members by local rank; on a communicator of two nodes (one-round
 * verdict, docs/protocol.md) then by the sender's own rows, sendcounts
 * [nranks] and recvcounts[nranks] (rmacoll__ctrl_rec_rows), so that the
 * records a node receives tell every rank of it everything about the
 * other node's ranks; then the eager payload. */
typedef struct rmacoll__net_rec {
    uint64_t epoch;
    rmacoll__status_rec_t st;   /* the sender's validation outcome */
    int64_t rcount;             /* sender's recvcounts[receiver] */
    int64_t rdispl;             /* sender's rdispls[receiver] */
    uint64_t esize;             /* sender's element size, bytes (0: unknown) */
    rmacoll_rkey_t recv_rkey;   /* sender's receive buffer */
    uint64_t flags;             /* the sender's RMACOLL__REC_F_* */
    /* eager path: bytes of the sender's blocks for the receiver's node that
     * follow the rows (rmacoll__ctrl_rec_payload; 0: none). Sent only
     * to the sender's relay on that node, only by a valid host call, only
     * when the plan's rule (rmacoll__plan_eager_bytes under
     * eager_max_bytes) says so. */
    uint64_t eager_bytes;
} rmacoll__net_rec_t;

/* What the one-round verdict reads of one rank (verdict.c): its local record
 * (a rank of this node) or its metadata record (a rank of the other node,
 * in the inbox of its relay here). */
typedef struct rmacoll__rank_view {
    const rmacoll__status_rec_t *st;  /* validation outcome */
    uint64_t esize, flags;            /* element size (0: unknown), RMACOLL__REC_F_* */
    const int64_t *send, *recv;       /* its sendcounts and recvcounts [nranks] */
    const int64_t *rdispl;            /* its rdispls [nranks] */
} rmacoll__rank_view_t;

/* The two kinds of network records. */
typedef enum rmacoll__rec_kind {
    RMACOLL__REC_META = 0,  /* rmacoll__net_rec_t + counts (metadata round) */
    RMACOLL__REC_AGREE = 1  /* rmacoll__status_rec_t (agreement) */
} rmacoll__rec_kind_t;

/* Words past the planner's, in the order of the map above. */
enum { RMACOLL__STAGE_GO = 0, RMACOLL__STAGE_DONE = 1, RMACOLL__STAGE_COPIED = 2,
       /* device-count calls across nodes (exec/dcx.c): the stream writes
        * DCX_GO = slot + 1 and waits for DCX_DONE >= 1, which the worker
        * raises after it cleared DCX_GO; the stream then writes DCX_DONE = 0
        * (constant values: a captured graph replays them unchanged) */
       RMACOLL__STAGE_DCX_GO = 3, RMACOLL__STAGE_DCX_DONE = 4,
       RMACOLL__NSTAGE_WORDS = 5 };

typedef struct rmacoll__ctrl_layout {
    int nranks;
    int nnet;             /* network peers of the owner */
    uint32_t nsig_plan;   /* planner's words */
    uint32_t nsig;        /* all words */
    int max_ls;           /* largest node */
    int matrix;           /* metadata records carry the sender's count rows
                           * (one-round verdict on two nodes or more) */
    uint64_t eager_cap;   /* room for an eager payload in a metadata record slot:
                           * eager_max_bytes when matrix and the relay is on, else 0 */
    uint64_t node_eager_cap; /* room for the node payload of a local record:
                              * node_eager_max_bytes on one-round topologies whose
                              * nodes have more than one rank, else 0 */
    size_t local_rec_bytes, net_rec_bytes, status_rec_bytes;
    size_t off_sig, off_local, off_inbox, off_inbox2, off_outbox, off_outbox2;
    size_t off_beat;      /* [nnet] 8-byte heartbeat counts of the network peers */
    size_t bytes;         /* whole window */
} rmacoll__ctrl_layout_t;

/* The one-round verdict (verdict.c) is used on one node of at most
 * RMACOLL__ONE_ROUND_NODE_MAX ranks and on two or more nodes of at most
 * RMACOLL__ONE_ROUND_PAIR_MAX ranks each and RMACOLL__ONE_ROUND_MULTI_MAX
 * ranks in all (records carry 3 * nranks counts, every rank checks every
 * pair: O(nranks^2) per call); otherwise the agreement. */
#define RMACOLL__ONE_ROUND_NODE_MAX 256
#define RMACOLL__ONE_ROUND_PAIR_MAX 64
#define RMACOLL__ONE_ROUND_MULTI_MAX 128

/** Non-zero when calls on topo use the one-round verdict. Pure. */
int rmacoll__ctrl_one_round(const rmacoll_topo_t *topo);

/**
 * Network peers of rank: relays it sends through and senders it relays for
 * (relay on), or every rank of another node (relay off). The set is
 * symmetric. list (may be NULL) receives them sorted by rank; returns the
 * count.
 */
int rmacoll__net_peers(const rmacoll_topo_t *topo,
                       const rmacoll__plan_cfg_t *pcfg, int rank, int *list);

/* Bytes of shared memory the node payloads of one node's ranks may take in
 * all (two parities per rank). */
#define RMACOLL__NODE_EAGER_BUDGET (64ull << 20)

/** The node payload's capacity on topo (node eager path):
 * node_eager_max_bytes when calls on topo use the one-round verdict and a node has more than
 * one rank, else 0; lowered (in multiples of 64 bytes) where the largest
 * node's payloads would take more than RMACOLL__NODE_EAGER_BUDGET bytes (2 x
 * its ranks x capacity). What a valid host call's planner gets as
 * node_eager_max_bytes (plan.h). Pure. */
uint64_t rmacoll__ctrl_node_eager_cap(const rmacoll_topo_t *topo,
                                      const rmacoll__plan_cfg_t *pcfg);

/* Bytes of control window that the eager payloads of one rank's metadata
 * record slots may take in all (4 slots per network peer: inbox and outbox,
 * two parities each). */
#define RMACOLL__EAGER_WINDOW_BUDGET (16ull << 20)

/** The eager path's threshold on topo: eager_max_bytes, lowered where the
 * rank with the most network peers would give its record slots more than
 * RMACOLL__EAGER_WINDOW_BUDGET bytes of payload (4 x network peers x
 * threshold), in multiples of 64 bytes; unchanged off one-round
 * topologies of two nodes or more (no eager path there). The same on every
 * rank; the communicator stores it as its planner's eager_max_bytes before
 * any layout is computed. Pure; O(nranks^2) on topologies of at most
 * RMACOLL__ONE_ROUND_MULTI_MAX ranks. */
uint64_t rmacoll__ctrl_eager_threshold(const rmacoll_topo_t *topo,
                                       const rmacoll__plan_cfg_t *pcfg);

/** The smallest direct stream on topo (relay.direct_min_bytes):
 * pcfg->direct_min_bytes on two nodes or more within the one-round limits with the
 * relay on (every rank holds every row after the metadata round), else 0.
 * The communicator keeps it only where rmacoll__ctrl_nic_differs finds one
 * interface per node. Pure. */
uint64_t rmacoll__ctrl_direct_min(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *pcfg);

/** Direct streams' condition (relay.direct_min_bytes): -1 when every rank
 * of each node names the same network interface as its node's first rank
 * (names: nranks NUL-terminated strings, stride bytes apart; "" =
 * unknown, which never matches), else the first rank that does not. Pure;
 * O(nranks). */
int rmacoll__ctrl_nic_differs(const rmacoll_topo_t *topo, const char *names, size_t stride);

/** Layout of rank `rank`'s control window. */
void rmacoll__ctrl_layout(const rmacoll_topo_t *topo,
                          const rmacoll__plan_cfg_t *pcfg, int rank,
                          rmacoll__ctrl_layout_t *lay);

/* ---- the runtime's signal words (see the map above) ---- */

/** META(k) or AGREE(k) in the window of layout lay: record `kind` from its
 * network peer number k (k = the writer's slot in the owner's peer list). */
uint32_t rmacoll__ctrl_sig_rec(const rmacoll__ctrl_layout_t *lay,
                               rmacoll__rec_kind_t kind, int k);
/** READY(writer) in the window of layout lay. */
uint32_t rmacoll__ctrl_sig_ready(const rmacoll__ctrl_layout_t *lay, int writer);
/** STAGE(w), w = RMACOLL__STAGE_*. */
uint32_t rmacoll__ctrl_sig_stage(const rmacoll__ctrl_layout_t *lay, int w);

/* ---- records (base = the window's address in this process) ---- */

rmacoll__local_rec_t *rmacoll__ctrl_local(void *base,
                                          const rmacoll__ctrl_layout_t *lay,
                                          int par);
/** recvcounts[nranks], rdispls[nranks] then sendcounts[nranks] after a
 * local record. */
int64_t *rmacoll__ctrl_local_counts(rmacoll__local_rec_t *lr);
/** The node payload's block offsets (uint64[max node size]) after a local
 * record, then the payload (node_eager_cap bytes); NULL when lay has none. */
uint64_t *rmacoll__ctrl_local_eager_off(rmacoll__local_rec_t *lr,
                                        const rmacoll__ctrl_layout_t *lay);
void *rmacoll__ctrl_local_payload(rmacoll__local_rec_t *lr,
                                  const rmacoll__ctrl_layout_t *lay);
/** Byte offset of network record k of `kind` and parity par: in the inbox
 * (received) or the outbox (to send). */
size_t rmacoll__ctrl_rec_off(const rmacoll__ctrl_layout_t *lay,
                             rmacoll__rec_kind_t kind, int outbox, int k, int par);
/** The sender's rows after a network record (two nodes; see
 * rmacoll__net_rec_t): sendcounts[nranks], recvcounts[nranks], then
 * rdispls[nranks] (what a direct stream's sender needs of its receivers). */
int64_t *rmacoll__ctrl_rec_rows(rmacoll__net_rec_t *rec, const rmacoll__ctrl_layout_t *lay);
/** Bytes of a metadata record without its payload in the window of
 * layout lay (what a put sends, plus rec->eager_bytes). */
size_t rmacoll__ctrl_meta_bytes(const rmacoll__ctrl_layout_t *lay);
/** The eager payload after a metadata record (rec->eager_bytes of them, at
 * most lay->eager_cap). */
void *rmacoll__ctrl_rec_payload(rmacoll__net_rec_t *rec, const rmacoll__ctrl_layout_t *lay);
/** Bytes of one record of `kind`. */
size_t rmacoll__ctrl_rec_bytes(const rmacoll__ctrl_layout_t *lay,
                               rmacoll__rec_kind_t kind);

/* ---- statuses ---- */

/** Keeps the error of the lowest rank (then the lowest code) in acc. */
void rmacoll__status_merge(rmacoll__status_rec_t *acc,
                           const rmacoll__status_rec_t *in);
/** Sets rec to (code, rank, msg), msg truncated to fit. */
void rmacoll__status_set(rmacoll__status_rec_t *rec, rmacoll_status_t code,
                         int rank, const char *msg);

#endif /* RMACOLL_CORE_CTRL_H */
