/*
 * state.h - the communicator's state: what rmacoll_comm_create (comm/)
 * builds once and every call reads and updates. The control plane's layout
 * and records are ctrl.h, the proxy's state proxy.h, the bindings bind.h,
 * one call's steps call.h.
 *
 * core/exec - the executors (README):
 *   owns   one AlltoAllV call from its arguments to its data on the wire:
 *          the pipeline (exec.c), the control exchange and agreement
 *          (meta.c, verdict.c), the waits on signal words (wait.c), the
 *          runners that move the data (run_host.c, run_stream.c,
 *          run_staged.c: one rmacoll__runner_t each, picked through the
 *          communicator's runner table), non-blocking calls (request.c),
 *          rmacoll_mem_alloc (mem.c), device-count calls that the host
 *          runs (dcx.c, dcx_stream.c); and this state.
 *   calls  base, config, oob, plan, xport, ctrl (never comm/: failures go
 *          through base/fail.h, instances through xport/bind.h).
 *   files, lowest first (each calls only those before it; the layering
 *   check, tests/layers, holds them to it):
 *          state.h, call.h, records.h (types, inline lookups)
 *          -> wait.c -> mem.c -> put.c -> verdict.c -> meta.c
 *          -> run_host.c -> run_stream.c -> run_staged.c -> runners.c
 *          -> exec.c -> dcx.c -> dcx_stream.c -> request.c
 */
#ifndef RMACOLL_CORE_STATE_H
#define RMACOLL_CORE_STATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/xport/bind.h"
#include "core/oob/bootstrap.h"
#include "core/exec/call.h"
#include "core/ctrl/ctrl.h"
#include "core/base/fail.h"
#include "core/base/log.h"
#include "core/plan/flow.h"
#include "core/plan/plan.h"
#include "core/ctrl/proxy.h"
#include "core/base/shm.h"
#include "core/xport/transport.h"
#include "rmacoll_transport.h"

/* Device memory across nodes: pinned host staging and its worker thread. */
typedef struct rmacoll__stage {
    void *send, *recv;
    uint64_t send_bytes, recv_bytes;
    rmacoll_mem_t *send_pin, *recv_pin; /* pinned by the CE transport */
    rmacoll_mem_t *send_mem, *recv_mem; /* network registrations of the call */
    uint8_t send_user, recv_user;     /* ... borrowed from rmacoll_mem_register */
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t job;                     /* epoch handed to the worker, 0 = none */
    uint64_t last;                    /* epoch of the last staged call */
    int stop;
    _Atomic uint64_t finished;        /* last epoch the worker completed */
    _Atomic int status;               /* first error of the worker */
    /* what the worker runs the plan on: the staging buffers (host), or the
     * user's device buffers (the hmem runner) */
    rmacoll_memtype_t run_mem;
    const void *run_send;
    void *run_recv;
    uint64_t hmem_seq;                /* hmem calls made: the READY value */
    uint64_t run_seq;                 /* of the call handed to the worker */
    rmacoll_put_t *ready_puts;        /* [nranks]: hmem READY signals */
    uint64_t handoff_ns;              /* TRACE: when the call handed its job over */
    uint64_t prev_done_ns;            /* TRACE: when the worker ended the last job */
} rmacoll__stage_t;

/* Device-count calls across nodes, stream-triggered (dcx.c): one slot
 * per distinct call (its arguments, fixed for graph replays) with pinned
 * host memory the stream copies the counts and buffers into and out of,
 * and the worker thread that runs the host form on them. */
#define RMACOLL__DCX_SLOTS 16
typedef struct rmacoll__dcx_slot {
    int used;
    int captured;                     /* enqueued while the stream was captured:
                                       * kept for good (graph replays use it) */
    _Atomic int pending;              /* ordinary enqueues whose DCX_GO the worker has
                                       * not seen yet */
    _Atomic uint64_t last_go;         /* the worker's GO count when it last saw this
                                       * slot's GO: once it has seen a later GO, the
                                       * stream is past this slot's copies back */
    rmacoll__dcx_args_t args;         /* the call's, as given (device pointers) */
    /* pinned host memory: sc[n], given[n], out[n], status (8 bytes), then
     * the send staging (send_capacity elements), the receive staging
     * (recv_capacity elements) */
    char *mem;
    uint64_t bytes;
    rmacoll_mem_t *pin;
} rmacoll__dcx_slot_t;

typedef struct rmacoll__dcx {
    /* [RMACOLL__DCX_SLOTS]: the error slot, whose job only carries this
     * rank's error (no slot free, no memory) to the peers' records */
    rmacoll__dcx_slot_t slot[RMACOLL__DCX_SLOTS + 1];
    void *stream;                     /* the one stream of these calls */
    _Atomic uint64_t gos;             /* DCX_GO values the worker has seen (graph
                                       * replays included) */
    _Atomic uint64_t done_jobs;       /* jobs the worker completed, in stream order */
    pthread_t thread;
    int started;
    _Atomic int stop;
    _Atomic int reserved;             /* a triggered call was made: other calls refused */
    int in_worker;                    /* the worker holds the communicator */
    char wmsg[512];                   /* the worker's last_error (comm->fail points
                                       * here while it holds the communicator) */
    /* the first failure no rmacoll_device_counts_check returned yet */
    pthread_mutex_t rep_lock;
    int lock_init;
    rmacoll_status_t rep_code;
    uint64_t rep_seq;
    char rep_msg[512];
} rmacoll__dcx_t;

/* Counters of rmacoll_comm_get_stats (atomic: read by any thread). */
typedef struct rmacoll__stats {
    _Atomic uint64_t staged_bytes;
    _Atomic uint64_t device_registered_bytes;
    _Atomic uint64_t device_calls_staged;
    _Atomic uint64_t device_calls_hmem;
    _Atomic uint64_t device_calls_dsig;
    _Atomic uint64_t device_counts_calls;
    _Atomic uint64_t eager_bytes_sent;
    _Atomic uint64_t eager_bytes_copied;
    _Atomic uint64_t node_eager_bytes_sent;
    _Atomic uint64_t node_eager_bytes_copied;
    _Atomic uint64_t direct_bytes_sent;
    _Atomic uint64_t memreg_handles;
    _Atomic uint64_t memreg_bytes;
    _Atomic uint64_t memreg_buffers;
    _Atomic uint64_t call_registrations;
} rmacoll__stats_t;

/* The transports a communicator may choose from: the built-ins and the
 * plugins its config names (intra_node, inter_node). */
#define RMACOLL__MAX_AVAIL 16

/* Non-blocking calls: the communicator's own thread runs a started call
 * (request.c). */
typedef struct rmacoll__async {
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t cond;              /* a job queued, or a job done */
    int stop;
    int queued;                       /* req waits for the thread */
    int busy;                         /* started, not completed by test/wait */
    struct rmacoll_request req;       /* the one request of the communicator */
} rmacoll__async_t;

struct rmacoll_comm {
    int rank, nranks;
    rmacoll_config_t cfg;
    rmacoll__logger_t log;
    rmacoll__bootstrap_t *bs;
    rmacoll_topo_t *topo;
    rmacoll__plan_cfg_t pcfg;
    rmacoll__sched_t sched;
    int sched_open;
    uint64_t comm_id;
    uint64_t epoch;                 /* calls made (successful or not) */
    uint64_t bs_poll_at_ms;         /* next call start that reads the root's reports */
    uint64_t agree_rounds;          /* calls that ran the network agreement: the value
                                     * of the AGREE words (meta.c), which lag the epoch
                                     * once a one-round call skipped it */
    int broken;                     /* a data phase failed: comm unusable */
    /* rmacoll_comm_destroy of a broken communicator flushes its last puts
     * (the abort word it passes on) until this time (monotonic ms; 0: not
     * destroying): rmacoll__flush_watch */
    uint64_t destroy_flush_until_ms;
    int shrunk;                     /* rmacoll_comm_shrink made its successor:
                                     * destroy is local (comm/comm_shrink.c) */
    char node_key[128];             /* this rank's node key (comm_setup.c) */
    _Atomic int entered;            /* a thread is inside a call (rmacoll__enter) */
    _Atomic int aborted;            /* rmacoll_comm_abort was called (any thread) */
    int fail_culprit;               /* the peer a failure of this rank names, or -1 */
    int dead_rank;                  /* a rank whose process is known to have exited
                                     * (the root's report or the watch), or -1: the
                                     * abort word is not put to it (wait.c) */
    rmacoll_put_t *abort_puts;      /* [nranks]: the abort word to network peers */
    rmacoll_put_t *beat_puts;       /* [nranks]: the heartbeat count to network peers */
    /* heartbeat watch (wait.c): the count last seen of each rank and when
     * (this rank's monotonic ms) it last rose; scans every beat_ms / 16 */
    uint64_t beat_ms;               /* config heartbeat_ms; 0 = off */
    uint64_t *beat_seen, *beat_when; /* [nranks] */
    uint64_t beat_last_scan, beat_next_scan;
    rmacoll__proxy_look_t beat_look; /* the watch on this rank's own transport calls */
    char last_error[512];
    rmacoll__fail_t fail;           /* records into last_error (base/fail.h) */

    /* control windows */
    rmacoll__ctrl_layout_t lay;     /* own */
    rmacoll__shm_t ctrl;            /* own segment */
    rmacoll__shm_t *peer_ctrl;      /* [nranks]: node peers' segments */
    /* watches on the processes of node peers in other processes
     * (base/proc.h; comm_setup.c opens them): watch_fd[k] watches rank
     * watch_rank[k], k < nwatch */
    int *watch_fd, *watch_rank;     /* [nranks] */
    int nwatch;
    volatile uint64_t **peer_signals; /* [nranks] */
    volatile uint64_t *signals;     /* own */
    rmacoll__ctrl_layout_t *peer_lay; /* [nranks]: node and network peers */
    uint32_t *peer_nsig;              /* [nranks]: their signal-word counts */

    /* relay buffer (own) */
    void *relay_buf;
    uint64_t relay_bytes;
    int nin;

    /* network peers (symmetric set), sorted */
    int nnet;
    int *net_list;
    int *net_slot_at;               /* [nnet]: my index in that peer's list */
    int *net_index;                 /* [nranks]: index in net_list or -1 */
    /* two nodes (one-round verdict): for a rank of the other node, the rank
     * of this node whose inbox receives its metadata record (its relay
     * here, or this rank with the relay off) and the record's slot there;
     * -1 for ranks of this node */
    int *rec_holder, *rec_slot;     /* [nranks] */
    struct rmacoll__rank_view *views; /* [nranks]: the verdict's inputs (verdict.c) */

    /* rmacoll_mem_alloc's allocations (mem.c), under mem_lock */
    pthread_mutex_t mem_lock;
    struct rmacoll__alloc *allocs;
    /* rmacoll_mem_register's registrations (mem.c), under mem_lock */
    struct rmacoll_memreg *memregs;

    /* transports: what could serve (built-ins, plugins the config names),
     * the instances made, and the bindings over them (bind.h) */
    rmacoll__tops_t avail[RMACOLL__MAX_AVAIL];
    int navail;
    rmacoll__bind_plan_t bp;
    rmacoll__tinst_t inst[RMACOLL__MAX_INST]; /* bp.ninst */
    uint8_t *path_peers[2];           /* [rmacoll__path_t][nranks]: peers to reach */
    rmacoll_mem_t *ctrl_mem, *relay_mem; /* network registrations */
    rmacoll_rkey_t *peer_ctrl_rkey;   /* [nranks] */
    rmacoll_rkey_t *peer_relay_rkey;  /* [nranks] */
    /* device buffers across nodes (bind.h: rmacoll__bind_device_net): 1 =
     * registered with the network (the hmem runner), 0 = staged; with it
     * a relay buffer in device memory (from the CE x cuda transport's
     * mem_alloc, registered with the network) */
    int hmem;
    void *drelay_buf;
    rmacoll_mem_t *drelay_mem;
    rmacoll_rkey_t *peer_drelay_rkey; /* [nranks] */
    rmacoll__stats_t stats;
    /* the runner of each memory type of the user's buffers, filled at bind
     * time (rmacoll__runners_bind, runners.c): host -> the host runner;
     * device -> the stream runner on one node, else hmem or staged (hmem
     * above) */
    const rmacoll__runner_t *runner[2]; /* [rmacoll_memtype_t] */
    /* device-resident signal words of device calls on one node
     * (RMACOLL_SIG_DEVICE, comm/comm_xport.c: set up at create): own array (from
     * the CE x cuda control transport's mem_alloc, lay.nsig words), every
     * rank's device address here (node peers' mapped) and word count; dsig
     * = 1 when every rank of the node has its array mapped by every other:
     * run_stream.c then sets RMACOLL_SIG_DEVICE on every index it passes */
    int dsig;
    void *dsig_buf;
    uint64_t *dsig_addr;              /* [nranks] */
    uint32_t *dsig_n;                 /* [nranks] */

    /* per-call state (sized at create; the data path does not malloc
     * except to grow the plan and put arrays) */
    int64_t *scratch;                 /* 2 * nranks */
    int64_t *uniform;                 /* 2 * nranks: rmacoll_alltoall's arrays */
    int64_t *inplace_displs;          /* [nranks]: send displacements of an in-place
                                       * call's packed copy (exec.c) */
    void *inplace_buf;                /* that copy, inplace_cap bytes (grown, kept) */
    size_t inplace_cap;
    int64_t *peer_rcount, *peer_rdispl; /* [nranks] */
    uint64_t *peer_recv_addr;         /* [nranks] */
    uint64_t *eager_in_off;           /* [nranks]: own block's offset in the eager
                                       * payload of each rank of the other node */
    uint64_t *node_eager_off;         /* [own node size]: own block's offset in each
                                       * node member's node payload (planner input) */
    rmacoll_rkey_t *peer_recv_rkey;   /* [nranks] */
    uint8_t *direct_in;               /* [nranks]: the stream of each rank of the other
                                       * node to this node goes direct (planner input) */
    int64_t *chan_sendcount, *chan_rcount, *chan_rdispl; /* [nin * ls] */
    rmacoll__sigstate_t *sig;         /* state before the call */
    rmacoll__sigstate_t *sig_next;    /* state after it, kept on success */
    rmacoll__plan_t plan;
    rmacoll__flow_t flow;             /* the plan's dataflow order (host runner) */
    uint32_t *lane_cur;               /* [flow.nlanes]: each lane's next step */
    size_t lane_cap;
    rmacoll_put_t *puts;
    size_t puts_cap;
    rmacoll_put_t *mputs;             /* [mcap]: one merged CE submission (run_host.c) */
    rmacoll__task_t *mtasks;          /* [mcap]: its tasks */
    size_t mcap;
    uint32_t *wait_idx;               /* stream waits of one batch */
    uint64_t *wait_val;
    int *wait_peer;                   /* the writer of each (one-launch path) */
    size_t wait_cap;
    rmacoll_put_t *meta_puts;         /* [2][nranks]: metadata, agreement */

    rmacoll__stage_t stage;           /* device memory across nodes */
    rmacoll__dcx_t dcx;               /* device-count calls across nodes */
    rmacoll__proxy_t proxy;           /* owns the network transport's progress */
    rmacoll__async_t async;           /* rmacoll_alltoallv_start */
};

/* Byte offset, in a rank's device-resident signal array of nsig words
 * (comm->dsig_addr), of its region for device-count calls
 * (RMACOLL_DCOUNTS_REGION_BYTES(nranks) more bytes, allocated with the
 * words when nranks <= RMACOLL_DCOUNTS_MAX_RANKS: comm_xport.c). */
static inline size_t rmacoll__dc_region_off(uint32_t nsig)
{
    return ((size_t)nsig * sizeof(uint64_t) + 255u) & ~(size_t)255u;
}

/* put.c: after device puts posted on ti's host data path, drives
 * ti (and the proxy) until they are complete, their sources reusable;
 * fails (recorded in last_error) after timeout_ms without completion. */
rmacoll_status_t rmacoll__device_copies_wait(rmacoll_comm_t *comm, rmacoll__tinst_t *ti);

/* request.c: completes a request in flight (comm destroy) and joins the
 * thread. */
void rmacoll__async_fini(rmacoll_comm_t *comm);

/* The instance bound to (path, mem) of comm for the n tasks t, and the
 * control instance of (path, mem) (xport/bind.h); NULL if none. */
static inline rmacoll__tinst_t *rmacoll__inst_bound(rmacoll_comm_t *comm, int path,
                                                    rmacoll_memtype_t mem,
                                                    const rmacoll__task_t *t, size_t n)
{
    return rmacoll__bind_bound(&comm->bp, comm->inst, path, mem, t, n);
}
static inline rmacoll__tinst_t *rmacoll__inst_ctl(rmacoll_comm_t *comm, int path,
                                                  rmacoll_memtype_t mem)
{
    return rmacoll__bind_ctl(&comm->bp, comm->inst, path, mem);
}

/* rmacoll_mem_alloc's allocations still live at destroy: logged and left
 * mapped (mem.c); called before the transports finalize. */
void rmacoll__mem_fini(rmacoll_comm_t *comm);
/** Non-zero when [p, p + bytes) lies inside one live rmacoll_mem_alloc
 * allocation of comm that its intra-node transport shares with the node
 * peers (not an ordinary fallback). bytes 0 or p NULL: 0. Takes
 * comm->mem_lock; O(live allocations). */
int rmacoll__mem_shared(rmacoll_comm_t *comm, const void *p, size_t bytes);
/** A call's buffer [buf, buf + bytes) of type for the network transport:
 * inside a live user registration (rmacoll_mem_register) its registration
 * is borrowed (*user = 1; *rkey the registration's, advanced to buf;
 * stats memreg_buffers), else registered for the call (*user = 0; stats
 * call_registrations). No-op success (*user 0, *mem untouched) without a
 * network transport, for bytes 0 or buf NULL, as rmacoll__proxy_register. */
rmacoll_status_t rmacoll__call_register(rmacoll_comm_t *comm, const void *buf, uint64_t bytes,
                                        rmacoll_memtype_t type, rmacoll_mem_t **mem,
                                        rmacoll_rkey_t *rkey, uint8_t *user);
/** Undoes rmacoll__call_register: a borrowed registration stays. */
void rmacoll__call_deregister(rmacoll_comm_t *comm, rmacoll_mem_t *mem, uint8_t user);
/* rmacoll_mem_register's registrations still live at destroy: released
 * and logged; called after the last call, before rmacoll__proxy_fini. */
void rmacoll__memreg_fini(rmacoll_comm_t *comm);

/* exec.c: marks comm as entered by the calling thread; a second thread
 * entering before rmacoll__leave gets RMACOLL_ERR_INVALID_ARG (logged,
 * naming fn, the communicator and the rank; last_error belongs to the call
 * inside). */
rmacoll_status_t rmacoll__enter(rmacoll_comm_t *comm, const char *fn);
void rmacoll__leave(rmacoll_comm_t *comm);

/* wait.c: after a failure of this rank (code st) that breaks comm: sets
 * the abort word in its own window (unless one is set already, which is
 * then passed on unchanged) and writes it into every node peer's window
 * and, by an 8-byte put, every network peer's (best effort). */
void rmacoll__abort_broadcast(rmacoll_comm_t *comm, rmacoll_status_t st);
/* wait.c: 1 when an abort word is set in this rank's window; buf then says
 * "secondary error: rank R failed first (CODE, ...)". */
int rmacoll__abort_seen(const rmacoll_comm_t *comm, char *buf, size_t len);
/* wait.c: a rank known dead: the bootstrap root's report of its closed
 * connection ("the bootstrap root reports: ..."), else the exit of a node
 * peer's process, seen by its watch (base/proc.h; "the process of node
 * peer rank R (pid P) has exited: ... (dead rank R)"), unless an abort
 * word is set here (a failure known first, which the caller's check of
 * the word names). Returns
 * RMACOLL__DEATH_REPORTED or RMACOLL__DEATH_WATCHED, with *dead (the rank,
 * or -1 when the root cannot tell) and that text in report; 0 when none.
 * Never blocks: one recv(MSG_PEEK) and one poll(2). */
#define RMACOLL__DEATH_REPORTED 1
#define RMACOLL__DEATH_WATCHED 2
int rmacoll__death_poll(rmacoll_comm_t *comm, int *dead, char *report, size_t len);
/* wait.c: a death rmacoll__death_poll reported (report: its text, naming
 * the dead rank `dead`, or -1 when it cannot tell): records the culprit
 * (dead, else fallback) and fails with "rank R: REPORT; " and what this
 * rank was doing (then_fmt), logged at INFO only (the root has logged
 * it); returns RMACOLL_ERR_PEER. */
rmacoll_status_t rmacoll__fail_reported(rmacoll_comm_t *comm, int dead, int fallback,
                                        const char *report, const char *then_fmt, ...)
    __attribute__((format(printf, 5, 6)));

/** After rmacoll_comm_abort: the abort word sent to every peer and comm
 *  broken, unless a call still holds comm (its end sends it); exec.c. */
void rmacoll__abort_settle(rmacoll_comm_t *comm);

/** The proxy flush's watch (core/ctrl/proxy.h) over comm (the ctx): the
 *  abort word, a stopped heartbeat, a dead rank's report end a flush with
 *  that failure recorded; SUCCESS otherwise. wait.c. */
rmacoll_status_t rmacoll__flush_watch(void *comm);
/* wait.c: the code a call stopped by the abort word returns:
 * RMACOLL_ERR_ABORTED when this rank aborted (rmacoll_comm_abort), else
 * RMACOLL_ERR_PEER. */
rmacoll_status_t rmacoll__abort_status(const rmacoll_comm_t *comm);

/* runners.c: fills comm->runner from the bindings (after the device path
 * across nodes is decided: comm->hmem). */
void rmacoll__runners_bind(rmacoll_comm_t *comm);

#endif /* RMACOLL_CORE_STATE_H */
