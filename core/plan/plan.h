/*
 * plan.h - the microkernel's data model: task, batch (four queues), plan,
 * and the pure planner that builds one rank's plan for one AlltoAllV call.
 *
 * Protocol (docs/protocol.md has the long form):
 *  - intra-node: i CE-puts its block into j's receive buffer and signals
 *    DATA(i) at j;
 *  - cross-node, relay on: i sends everything for node B as one byte stream
 *    (its blocks for B's ranks in local-rank order, the relay's own block
 *    excluded) through channel (i -> relay(i, B)); the stream is cut into
 *    chunks of at most one relay slot; chunk g (g counts chunks of the
 *    channel over the communicator's life) goes to slot g mod S and raises
 *    ARRIVE(c, slot) at the relay; the relay CE-forwards each piece to its
 *    receiver, signals DATA(i) there after the piece's last byte, and returns
 *    a credit (CREDIT(node of relay) at i) once the slot is free. The block
 *    for the relay itself goes straight into the relay's receive buffer.
 *  - cross-node, relay off: i proxy-puts straight into j's receive buffer;
 *    likewise, relay on, for a stream of at least direct_min_bytes on two
 *    nodes (direct streams, plan input).
 *  - every rank finally waits DATA(p) for each p it receives from.
 *
 * Rounds are global: rank i's direct put to peer j is in round
 * sched.round(i, j); chunk q of i's stream to node B is in round
 * sched.round(i, relay(i, B)) + stride * q, with stride = 1 when S >= 3,
 * 2 when S == 2 and 3 when S == 1 (stride * S >= 3); the relay waits its
 * arrival in the same round, forwards it in the next and returns the credit
 * in the one after. The sender waits for the credit that frees a slot one
 * round before the put into it (a batch issues its puts before its waits). Every wait in round r is
 * satisfied by puts of rounds <= r (or of earlier calls), which is why no
 * schedule can deadlock. A rank's final data waits come after its last put.
 *
 * Signal words of rank r (index into its control window's signal array):
 *   DATA(p)      = p                                  p < nranks
 *   CREDIT(B)    = nranks + B                         B < nnodes
 *   XDATA(p)     = nranks + nnodes + p                p < nranks, only with
 *                  direct streams (rmacoll__plan_has_xdata; X = nranks, else 0)
 *   ARRIVE(c, s) = nranks + nnodes + X + c * S + s    c < nin(r), s < S
 *   META(k)      = nranks + nnodes + X + nin(r) * S + k (runtime's metadata)
 * A direct stream's put from p to a rank j other than p's relay on j's node
 * raises XDATA(p) at j: DATA(p) there stays the relay's alone, so that each
 * word keeps one writer as streams switch between relay and direct.
 * Every word rises by exactly one per signal, from a single writer.
 *
 * core/plan - planning (README): owns tasks, batches, queues and the pure
 * planner (plan.c), topology (topo.c), the scheduler registry
 * (sched_registry.c) and argument validation (validate.c); calls base and
 * config. Schedulers themselves live in sched/ and see only
 * include/rmacoll_sched.h.
 */
#ifndef RMACOLL_CORE_PLAN_H
#define RMACOLL_CORE_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "rmacoll.h"
#include "rmacoll_sched.h"

typedef enum rmacoll__op { RMACOLL__OP_PUT = 0, RMACOLL__OP_WAIT = 1 } rmacoll__op_t;

typedef enum rmacoll__path {
    RMACOLL__PATH_PROXY = 0, /* network, proxy thread */
    RMACOLL__PATH_CE = 1     /* node peers / self, copy engine */
} rmacoll__path_t;

/* Windows a task addresses. SEND/RECV are the call's user buffers. */
typedef enum rmacoll__win {
    RMACOLL__WIN_NONE = 0,
    RMACOLL__WIN_SEND = 1,  /* the owner's send buffer */
    RMACOLL__WIN_RECV = 2,  /* the owner's receive buffer */
    RMACOLL__WIN_RELAY = 3, /* the owner's relay buffer */
    RMACOLL__WIN_EAGER = 4, /* the eager payload of the metadata record from the
                             * task's origin, in the owner's control window */
    RMACOLL__WIN_NODE_EAGER = 5 /* the node payload of the task's origin (a node
                                 * peer): its blocks for its node peers, in its
                                 * control window (node eager path) */
} rmacoll__win_t;

/* The four queues of a batch. */
typedef enum rmacoll__queue {
    RMACOLL__Q_PROXY_PUT = 0,
    RMACOLL__Q_CE_PUT = 1,
    RMACOLL__Q_PROXY_WAIT = 2,
    RMACOLL__Q_CE_WAIT = 3,
    RMACOLL__NQUEUES = 4
} rmacoll__queue_t;

/* Task flags. */
#define RMACOLL__TASK_SIGNAL (1u << 0)   /* PUT raises sig at the target */
#define RMACOLL__TASK_SELF (1u << 1)     /* local copy, own SEND -> own RECV */
#define RMACOLL__TASK_TO_RELAY (1u << 2) /* PUT of a stream chunk into a relay slot */
#define RMACOLL__TASK_FORWARD (1u << 3)  /* relay forward, own RELAY -> peer RECV */
#define RMACOLL__TASK_CREDIT (1u << 4)   /* signal-only PUT returning a slot */
#define RMACOLL__TASK_ARRIVAL (1u << 5)  /* WAIT for a chunk in a relay slot */
#define RMACOLL__TASK_DATA (1u << 6)     /* WAIT for a complete receive block */
#define RMACOLL__TASK_EAGER (1u << 7)    /* copy from an eager payload (WIN_EAGER: relay
                                          * copy; WIN_NODE_EAGER: a receiver's own copy
                                          * out of a node peer's payload) */
#define RMACOLL__TASK_DIRECT (1u << 8)   /* PUT of a direct stream (relay.direct_min_bytes):
                                          * straight into a receiver on another node */

#define RMACOLL__NO_SIG UINT32_MAX

/**
 * One RMA operation. PUT: copy `bytes` from (own src_win, src_off) to
 * (peer's dst_win, dst_off) and, with TASK_SIGNAL, then set the peer's
 * signal word `sig` to `sig_value`. WAIT: wait until own word `sig` >=
 * sig_value; `peer` is the rank that raises it. Offsets and sizes in bytes.
 */
typedef struct rmacoll__task {
    uint8_t op;        /* rmacoll__op_t */
    uint8_t path;      /* rmacoll__path_t */
    uint8_t src_win;   /* rmacoll__win_t (PUT) */
    uint8_t dst_win;   /* rmacoll__win_t (PUT) */
    uint32_t flags;    /* RMACOLL__TASK_* */
    int32_t peer;      /* PUT: target; WAIT: the writer of the signal */
    int32_t origin;    /* rank whose send buffer the bytes came from */
    int32_t round;
    uint32_t sig;      /* signal word index, or RMACOLL__NO_SIG */
    uint64_t src_off;
    uint64_t dst_off;
    uint64_t bytes;
    uint64_t sig_value;
    uint64_t seq;      /* chunk sequence number on its channel (relay tasks) */
} rmacoll__task_t;

/** The tasks of one round; queue q is tasks[first[q] .. first[q]+count[q]). */
typedef struct rmacoll__batch {
    int32_t round;
    uint32_t first[RMACOLL__NQUEUES];
    uint32_t count[RMACOLL__NQUEUES];
} rmacoll__batch_t;

/**
 * What the planner needs that depends only on (topology, relay settings,
 * rank): incoming channels, this rank's channel at each of its relays and
 * the relays' slot sizes. A plan object computes it on its first build
 * and keeps it (a communicator's plan serves one topology and config for
 * its life), so a build is O(peers + tasks). Built in
 * O(nranks * distinct node sizes + nnodes).
 */
typedef struct rmacoll__plan_topo {
    const rmacoll_topo_t *topo;
    int rank;
    int relay_enabled;
    uint64_t relay_buffer_bytes;
    uint32_t relay_slots;
    int nin;               /* incoming channels of rank */
    int *chan_src;         /* [nin] sender of incoming channel c */
    int *chan_of_src;      /* [nranks] channel of sender i at rank, or -1 */
    int *out_chan;         /* [nnodes] rank's channel at relay(rank, B), -1 */
    uint64_t *out_slot;    /* [nnodes] slot bytes of relay(rank, B) */
    uint64_t in_slot;      /* slot bytes of rank's own relay buffer */
} rmacoll__plan_topo_t;

/** One rank's plan for one call: non-empty batches in ascending round. */
typedef struct rmacoll__plan {
    int rank;
    rmacoll__task_t *tasks;
    size_t ntasks;
    size_t tasks_cap;
    rmacoll__batch_t *batches;
    size_t nbatches;
    size_t batches_cap;
    rmacoll__task_t *scratch;  /* sort buffer, tasks_cap entries */
    char errmsg[256];   /* why the build failed, naming ranks */
    int err_peer;       /* the other rank of a mismatch, or -1 */
    uint8_t *direct_to; /* [nnodes]: this rank's stream to node B goes straight
                         * to its receivers (direct streams), built per call */
    int direct_to_cap;
    rmacoll__plan_topo_t *pt;  /* topology tables (first build), or NULL */
    uint32_t *bucket;   /* counting-sort buckets, bucket_cap entries */
    size_t bucket_cap;
} rmacoll__plan_t;

/** Planner settings (from the config; equal on every rank). */
typedef struct rmacoll__plan_cfg {
    int relay_enabled;
    uint64_t relay_buffer_bytes;
    uint32_t relay_slots;      /* S >= 1 */
    uint64_t max_task_bytes;   /* >= 1 */
    uint64_t eager_max_bytes;  /* eager_max_bytes: capacity of the eager payload of a
                                * metadata record (0: no eager path) */
    uint64_t node_eager_max_bytes; /* node_eager_max_bytes: capacity of the node
                                    * payload of a local record (0: none) */
    uint64_t direct_min_bytes; /* relay.direct_min_bytes: smallest direct stream
                                * (0: none); the communicator clears it where a
                                * node's ranks do not share one interface */
    uint32_t merge_max_puts;   /* merge_max_puts: most puts of one merged CE
                                * submission of a flow walker (flow.h); >= 1 */
} rmacoll__plan_cfg_t;

/* The planner's settings of a configuration: rmacoll__plan_cfg_from
 * (core/plan/plan_config.h); the planner itself does not read the config. */

/** A scheduler bound to a topology. */
typedef struct rmacoll__sched {
    const rmacoll_sched_ops_t *ops;
    rmacoll_sched_state_t *state;
} rmacoll__sched_t;

/**
 * Counters that make signal values monotonic across calls; one per rank,
 * advanced by each successful call, never reset. Sizes from
 * rmacoll__sigstate_create.
 */
typedef struct rmacoll__sigstate {
    uint64_t *data_in;   /* [nranks] expected value of own DATA(p) */
    uint64_t *data_out;  /* [nranks] last value written to DATA(me) at j */
    uint64_t *fwd_out;   /* [nin * size(my node)] last value written to
                            DATA(src(c)) at the member with local rank l */
    uint64_t *chan_out;  /* [nnodes] chunks sent on my channel to node B */
    uint64_t *chan_in;   /* [nin] chunks received on incoming channel c */
    uint64_t *xdata_in;  /* [nranks] expected value of own XDATA(p) */
    uint64_t *xdata_out; /* [nranks] last value written to XDATA(me) at j */
    int nranks, nnodes, nin, local_size;
} rmacoll__sigstate_t;

/**
 * Input of the planner for rank `rank`. Counts and displacements in
 * elements. The metadata a rank learns from its peers:
 *  - peer_rcount[j], peer_rdispl[j]: recvcounts_j[rank] and rdispls_j[rank]
 *    of every rank j this rank writes directly (node peers; cross-node
 *    ranks when the relay is off, or when j is this rank's relay for j's
 *    node). Other entries are ignored.
 *  - for each incoming channel c (sender rmacoll__plan_chan_src(c)) and
 *    each member l of this rank's node, at [c * size(my node) + l]:
 *    chan_sendcount = the sender's sendcounts for that member,
 *    chan_rcount / chan_rdispl = that member's recvcounts / rdispls for
 *    the sender. For l == own local rank only chan_sendcount is read (the
 *    eager path sizes and places the sender's payload with it).
 */
typedef struct rmacoll__plan_input {
    const rmacoll_topo_t *topo;
    int rank;
    size_t esize;                  /* element size, bytes */
    const rmacoll__plan_cfg_t *cfg;
    const rmacoll__sched_t *sched;
    const int64_t *sendcounts, *sdispls, *recvcounts, *rdispls; /* [nranks] */
    const int64_t *peer_rcount, *peer_rdispl;                   /* [nranks] */
    const int64_t *chan_sendcount, *chan_rcount, *chan_rdispl;  /* [nin*ls] */
    /* Eager path (relay on): a sender's stream to another node whose bytes,
     * the relay's own block included, are in (0, eager_max_bytes] travel in
     * its metadata record to its relay there (rmacoll__plan_eager_bytes);
     * the sender plans no put for that node, the relay nothing for that
     * channel, and each receiver copies its own block out of the record in
     * the relay's inbox (WIN_EAGER; node peers map it): nothing waits or
     * credits for them. eager_in_off[p] (p of another node) is the offset
     * of this rank's block in p's payload (rmacoll__plan_eager_off), or
     * RMACOLL__NO_EAGER. 0: off. Equal on every rank of a call: the
     * runtime sets it only when every rank's record carried the payload
     * (host memory, one-round verdict on two nodes). */
    uint64_t eager_max_bytes;
    const uint64_t *eager_in_off; /* [nranks] */
    /* Node eager path (one-round verdict, host memory): a sender whose
     * blocks for its node peers (its own block excluded) come to (0,
     * node_eager_max_bytes] bytes copies them into its control window
     * before the metadata round (rmacoll__plan_node_eager_bytes); it plans
     * no put to its node peers, and each of them copies its block out of
     * that payload itself after the verdict: no signal and no wait on
     * either side. node_eager_off[l] is the offset of this rank's block in
     * the payload of its node's local rank l, or RMACOLL__NO_EAGER (no
     * payload, or no block for this rank); read only when
     * node_eager_max_bytes != 0. Equal on every rank of a call, like
     * eager_max_bytes. */
    uint64_t node_eager_max_bytes;
    const uint64_t *node_eager_off; /* [size of this rank's node] */
    /* The limit this rank applies to its own node payload (its blocks for
     * its node peers; 0: node_eager_max_bytes). The runtime lowers it to
     * RMACOLL__NODE_EAGER_SHARED_MAX when the send buffer is shared memory
     * from rmacoll_mem_alloc (rmacoll__mem_shared): such calls' buffers are
     * taken to be shared on every rank, where a direct put is one memcpy
     * and a large payload would add a second, while small payloads still
     * save the signals and waits. What this rank's local record says
     * (node_eager_bytes, offsets) must agree; its peers read it there. */
    uint64_t node_eager_send_max;
    /* Direct streams (relay on, two nodes): a sender's stream to the other
     * node of at least direct_min_bytes that is not eager
     * (rmacoll__plan_direct_stream) goes straight into its receivers'
     * buffers, one signalled put each, not through the relay; the relay
     * plans nothing for that channel and the receivers wait for the sender.
     * The sender then needs peer_rcount / peer_rdispl of every rank of that
     * node. direct_in[p] (p of the other node): p's stream to this rank's
     * node is direct, by p's row. 0: off. Equal on every rank of a call,
     * like eager_max_bytes (the runtime sets it only for host calls with
     * the one-round verdict, where every rank sees every row). */
    uint64_t direct_min_bytes;
    const uint8_t *direct_in; /* [nranks] */
} rmacoll__plan_input_t;

/* The node payload limit of a sender whose send buffer is shared memory
 * (node_eager_send_max): below it the payload's saved signals and waits
 * outweigh its second copy (one node x 4, 1 KiB per rank). */
#define RMACOLL__NODE_EAGER_SHARED_MAX (32u * 1024u)

/* node_eager_off of a member that sends this rank nothing through a node
 * payload. */
#define RMACOLL__NO_EAGER UINT64_MAX

/* ---- channel and layout helpers (pure; every rank computes the same) ---- */

/** Number of incoming relay channels of rank r (0 with the relay off). */
int rmacoll__plan_nin(const rmacoll_topo_t *topo,
                      const rmacoll__plan_cfg_t *cfg, int r);
/** Sender of incoming channel c of relay r (channels ordered by sender rank). */
int rmacoll__plan_chan_src(const rmacoll_topo_t *topo, int r, int c);
/** Channel index of sender i at its relay r, or -1. */
int rmacoll__plan_chan_index(const rmacoll_topo_t *topo, int r, int i);
/** The smallest relay slot that works, bytes (one element of the widest
 * datatype). */
#define RMACOLL__MIN_SLOT_BYTES 8u
/**
 * The relay slot rule, owned here and applied everywhere (the config's
 * load-time check, rmacoll_comm_create, rmacoll-info, rmacoll-plan):
 * slot bytes = floor(buffer_bytes / (nin(r) * slots)) rounded down to a
 * multiple of 8 must be >= RMACOLL__MIN_SLOT_BYTES at every relay r, so
 * the smallest relay.buffer_bytes that works is 8 * slots * max_r nin(r).
 *
 * topo NULL: the part that needs no topology, a relay with one incoming
 * channel (buffer_bytes / slots >= 8), checked whether or not the relay
 * is on (what a configuration file alone can be refused for).
 * With a topology: 0 bytes needed with the relay off or no relay channel.
 *
 * Returns 1 when cfg->relay_buffer_bytes is enough, 0 otherwise (slots 0
 * included); *out (may be NULL) receives the minimum, the relay with the
 * most channels (-1: none, or topo NULL), its channels and its slot bytes
 * (topo NULL: buffer_bytes / slots, unrounded). When it returns 0 and msg
 * is not NULL, msg (len bytes) says why, naming the keys and the minimum.
 * Pure; thread-safe.
 */
typedef struct rmacoll__relay_rule {
    uint64_t min_buffer_bytes; /* smallest relay.buffer_bytes that works */
    int relay;                 /* a relay with the most incoming channels, or -1 */
    int nin;                   /* its incoming channels (topo NULL: 1) */
    uint64_t slot_bytes;       /* bytes of one of its slots under cfg */
} rmacoll__relay_rule_t;
int rmacoll__plan_relay_rule(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg,
                             rmacoll__relay_rule_t *out, char *msg, size_t len);
/** Bytes of one relay slot at relay r: floor(buffer_bytes / (nin(r) *
 * slots)) rounded down to a multiple of 8; 0 if nin(r) == 0. */
uint64_t rmacoll__plan_slot_bytes(const rmacoll_topo_t *topo,
                                  const rmacoll__plan_cfg_t *cfg, int r);
/** Byte offset of slot s of channel c in relay r's relay buffer. */
uint64_t rmacoll__plan_slot_off(const rmacoll_topo_t *topo,
                                const rmacoll__plan_cfg_t *cfg, int r, int c,
                                uint32_t s);
/**
 * Bytes of the eager payload of a sender's stream to a node of ls ranks:
 * counts[members[l]] (counts[l] when members is NULL) elements of esize
 * bytes for the node's local rank l, in local-rank order, contiguous (block
 * l starts after blocks 0..l-1). Returns their sum when it is in (0,
 * eager_max], else 0 (no eager path: nothing to send, or too much). Counts
 * must be >= 0. Pure; thread-safe.
 */
uint64_t rmacoll__plan_eager_bytes(const int64_t *counts, const int *members, int ls,
                                   size_t esize, uint64_t eager_max);
/**
 * Offset of the block for a node's local rank l in a sender's eager payload
 * to that node (rmacoll__plan_eager_bytes of the same arguments), or
 * RMACOLL__NO_EAGER when the stream is not eager or the block is empty.
 * Pure; thread-safe; O(ls).
 */
uint64_t rmacoll__plan_eager_off(const int64_t *counts, const int *members, int ls, int l,
                                 size_t esize, uint64_t eager_max);
/**
 * Whether a sender's stream to a node of ls ranks (counts[members[l]], or
 * counts[l] when members is NULL, esize-byte elements for local rank l, the
 * relay's own block included) goes straight to its receivers instead of
 * through the relay: its bytes are at least direct_min and it is not eager
 * (rmacoll__plan_eager_bytes under eager_max is 0). 0 when direct_min is
 * 0. Counts must be >= 0. Pure; thread-safe; O(ls).
 */
int rmacoll__plan_direct_stream(const int64_t *counts, const int *members, int ls,
                                size_t esize, uint64_t eager_max, uint64_t direct_min);
/**
 * direct_in[a] of rank r's planner input: a is on the other node and its
 * stream to r's node, by a's sendcounts row `row` [nranks], goes direct
 * (rmacoll__plan_direct_stream). Pure; thread-safe; O(size of r's node).
 */
int rmacoll__plan_direct_in(const rmacoll_topo_t *topo, int r, int a, const int64_t *row,
                            size_t esize, uint64_t eager_max, uint64_t direct_min);
/**
 * The node eager payload of a node's local rank self_l: its blocks
 * counts[members[l]] (esize-byte elements) for the node's other ranks, in
 * local-rank order, contiguous, its own block skipped. Returns their sum
 * when it is in (0, eager_max], else 0 (no node payload). off (may be
 * NULL; ls entries) receives each member's block offset in the payload,
 * RMACOLL__NO_EAGER for self_l, for an empty block and when the result is
 * 0. Counts must be >= 0. Pure; thread-safe; O(ls).
 */
uint64_t rmacoll__plan_node_eager_bytes(const int64_t *counts, const int *members, int ls,
                                        int self_l, size_t esize, uint64_t eager_max,
                                        uint64_t *off);
/** Signal word indices of rank r (see the file comment). */
uint32_t rmacoll__sig_data(int p);
uint32_t rmacoll__sig_credit(const rmacoll_topo_t *topo, int node);
uint32_t rmacoll__sig_arrive(const rmacoll_topo_t *topo,
                             const rmacoll__plan_cfg_t *cfg, int c, uint32_t s);
/** Whether the signal map has XDATA words (direct streams possible: relay
 * on, direct_min_bytes != 0, two nodes). */
int rmacoll__plan_has_xdata(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg);
/** XDATA(p): p's block came straight (direct stream), when the map has it. */
uint32_t rmacoll__sig_xdata(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg, int p);
/** Number of signal words the planner uses at rank r (META excluded). */
uint32_t rmacoll__sig_count(const rmacoll_topo_t *topo,
                            const rmacoll__plan_cfg_t *cfg, int r);

/* ---- signal state ---- */

rmacoll_status_t rmacoll__sigstate_create(const rmacoll_topo_t *topo,
                                          const rmacoll__plan_cfg_t *cfg,
                                          int rank, rmacoll__sigstate_t **st);
void rmacoll__sigstate_destroy(rmacoll__sigstate_t *st);
void rmacoll__sigstate_copy(rmacoll__sigstate_t *dst,
                            const rmacoll__sigstate_t *src);

/* ---- plan ---- */

void rmacoll__plan_init(rmacoll__plan_t *plan);
void rmacoll__plan_fini(rmacoll__plan_t *plan);

/**
 * The topology tables of `plan` for (topo, cfg, rank), computed on first
 * use and kept until the topology pointer, rank or relay settings change
 * (then recomputed) or rmacoll__plan_fini. NULL when out of memory. The
 * runtime may use it to read chan_src without an O(nranks) search.
 */
const rmacoll__plan_topo_t *rmacoll__plan_topo(rmacoll__plan_t *plan,
                                               const rmacoll_topo_t *topo,
                                               const rmacoll__plan_cfg_t *cfg,
                                               int rank);

/**
 * Builds in->rank's plan for one call. Pure and deterministic: the same
 * input and state give the same plan. Cost O(nranks + tasks) once the
 * plan's topology tables exist (first build: see rmacoll__plan_topo). `st_in` is the state before the
 * call, `st_out` receives the state after it (st_out may equal st_in).
 * The plan's arrays are reused across calls (grown, never shrunk).
 * Errors: RMACOLL_ERR_MISMATCH (a count this rank can check differs; the
 * plan's errmsg names both ranks), RMACOLL_ERR_CONFIG (relay slot smaller
 * than one element), RMACOLL_ERR_NO_MEMORY. On error st_out is unchanged.
 */
rmacoll_status_t rmacoll__plan_build(const rmacoll__plan_input_t *in,
                                     const rmacoll__sigstate_t *st_in,
                                     rmacoll__sigstate_t *st_out,
                                     rmacoll__plan_t *plan);

/** Printable names: queue q, window w, a task's kind ("self", "to_relay",
 * "eager", "forward", "credit", "arrival", "data", "direct"). */
const char *rmacoll__queue_name(int q);
const char *rmacoll__win_name(int w);
const char *rmacoll__task_kind(const rmacoll__task_t *t);

/**
 * Prints a plan as readable text. Totals per round and per link (bytes put
 * to each peer, split by path) are included. (Its JSON rendering is
 * rmacoll-plan's, tools/common/planjson.c.)
 */
void rmacoll__plan_print_text(FILE *out, const rmacoll__plan_t *plan,
                              const rmacoll_topo_t *topo);

#endif /* RMACOLL_CORE_PLAN_H */
