/*
 * call.h - one AlltoAllV call as a pipeline over a per-call object:
 *
 *   validate -> prepare (runner) -> control exchange -> plan
 *   -> agree -> run (runner) -> commit signal state
 *
 * exec.c drives the steps; meta.c is the control exchange and the
 * agreement (over the control plane, ctrl.h); a runner is the memory mode
 * of the call (host, stream, staged, hmem), taken from the communicator's
 * runner table, behind the small interface below (run_host.c,
 * run_stream.c, run_staged.c).
 *
 * Dependencies go one way: the files of core/exec include state.h (the
 * communicator), which includes this header; this header includes no
 * other exec header. The declarations below come in the order of the
 * files (state.h says it), lowest first.
 */
#ifndef RMACOLL_CORE_CALL_H
#define RMACOLL_CORE_CALL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ctrl/ctrl.h"
#include "core/plan/plan.h"
#include "rmacoll.h"
#include "rmacoll_transport.h"

typedef struct rmacoll__runner rmacoll__runner_t;

/* The arguments of a device-count call (rmacoll_alltoallv_device_counts),
 * which the pipeline runs with zero host counts: the data moves by the
 * runner rmacoll__run_dcounts (run_stream.c), whose kernel reads the
 * counts on the device. */
typedef struct rmacoll__dcounts {
    const int64_t *sendcounts;        /* device, [nranks] */
    int64_t send_capacity;            /* elements */
    int64_t *recvcounts;              /* device, [nranks] */
    int64_t recv_capacity;            /* elements */
    int mode;                         /* rmacoll_recv_mode_t */
    int32_t *status;                  /* device, one word */
} rmacoll__dcounts_t;

/* The state of one call, on the caller's stack (blocking) or in a request
 * (rmacoll_alltoallv_start). User buffers and arrays are borrowed. */
typedef struct rmacoll__call {
    rmacoll_comm_t *comm;
    const rmacoll__runner_t *runner;
    /* arguments */
    const void *sendbuf;
    const int64_t *sendcounts, *sdispls;
    void *recvbuf;
    const int64_t *recvcounts, *rdispls;
    rmacoll_datatype_t dtype;
    size_t esize;                     /* element size, bytes (0 if unknown) */
    void *stream;                     /* cudaStream_t or NULL (host memory) */
    /* derived */
    uint64_t epoch;                   /* this call's epoch (>= 1) */
    int par;                          /* parity of the control records */
    uint64_t send_extent, recv_extent; /* bytes the blocks span */
    const void *hsend;                /* buffers the host machinery works on: */
    void *hrecv;                      /* the user's, or staging buffers */
    rmacoll_mem_t *send_mem, *recv_mem; /* network registrations (or NULL) */
    uint8_t send_user, recv_user;     /* ... borrowed from a user registration
                                       * (rmacoll__call_register): not released */
    rmacoll_rkey_t recv_rkey;         /* sent to network peers */
    rmacoll__status_rec_t local;      /* this rank's outcome so far */
    rmacoll__status_rec_t acc;        /* lowest-ranked outcome known */
    int one_round;                    /* the exchange gave every rank the verdict: no
                                       * agreement round (meta.c) */
    uint64_t eager_max;               /* the plan's eager_max_bytes: non-zero when the
                                       * records carried eager payloads (meta.c) */
    uint64_t node_eager_max;          /* the plan's node_eager_max_bytes: non-zero when
                                       * the local records carried node payloads */
    uint64_t direct_min;              /* the plan's direct_min_bytes: non-zero on calls
                                       * with the one-round verdict whose
                                       * communicator takes direct streams */
    uint64_t node_eager_send_max;     /* limit of this rank's own node payload: the
                                       * layout's, or RMACOLL__NODE_EAGER_SHARED_MAX when
                                       * its send buffer is shared memory (plan.h) */
    int drives;                       /* this thread drives the network (host call) */
    int plan_failed;                  /* planning (or runner planned) failed here */
    const rmacoll__dcounts_t *dc;     /* a device-count call's arguments, or NULL */
    rmacoll_status_t early;           /* a local error found before validation (an
                                       * in-place call that cannot be staged), msg set */
    char msg[512];                    /* a step's error message */
    uint64_t prof[5];                 /* stage timestamps (TRACE), ns */
} rmacoll__call_t;

/* rmacoll__runner_t.caps */
#define RMACOLL__RUNNER_GRAPH 0x1u /* its calls may be captured into a CUDA graph
                                    * (graph mode, run_stream.c) */

/**
 * A memory mode: the ops of one executor, {name, ...ops} as the transports'
 * tables. The communicator's table (state.h: comm->runner, filled at bind
 * time by rmacoll__runners_bind) picks one per call from the memory type of
 * its buffers; the pipeline reads what it needs to know of a runner from
 * mem and caps, never from which runner it is.
 *
 * prepare and planned report a local error by returning it with call->msg
 * set (it then travels to every rank); run's errors break the
 * communicator. release undoes prepare (after run or on failure).
 */
struct rmacoll__runner {
    const char *name;
    rmacoll_memtype_t mem;            /* the user's buffers: RMACOLL_MEM_HOST calls
                                       * block, are gated (ctrl.h) and may take the
                                       * eager paths; RMACOLL_MEM_CUDA calls do not */
    uint32_t caps;                    /* RMACOLL__RUNNER_* */
    rmacoll_status_t (*prepare)(rmacoll__call_t *call);
    rmacoll_status_t (*planned)(rmacoll__call_t *call);
    rmacoll_status_t (*run)(rmacoll__call_t *call);
    void (*release)(rmacoll__call_t *call);
};

extern const rmacoll__runner_t rmacoll__run_host;   /* host memory: blocking */
extern const rmacoll__runner_t rmacoll__run_stream; /* device memory, one node */
extern const rmacoll__runner_t rmacoll__run_staged; /* device memory across nodes */
extern const rmacoll__runner_t rmacoll__run_hmem;   /* the same, registered: no staging */
extern const rmacoll__runner_t rmacoll__run_dcounts; /* device counts, one node */

/* ---- waits on signal words, the receive gate (wait.c) ---- */

/** Waits until *word >= value; names `peer` and `what` on timeout or on a
 * transport failure. */
rmacoll_status_t rmacoll__wait_word(rmacoll_comm_t *comm,
                                    const volatile uint64_t *word, uint64_t value,
                                    int peer, const char *what);
/** rmacoll__wait_word with its own silence limit, timeout_ms. */
rmacoll_status_t rmacoll__wait_word_for(rmacoll_comm_t *comm, const volatile uint64_t *word,
                                        uint64_t value, int peer, const char *what,
                                        uint64_t timeout_ms);
/** rmacoll__wait_word_for that also returns (successfully) as soon as
 * ready(arg) is non-zero (checked while it spins; NULL: never). */
rmacoll_status_t rmacoll__wait_word_or(rmacoll_comm_t *comm, const volatile uint64_t *word,
                                       uint64_t value, int peer, const char *what,
                                       uint64_t timeout_ms, int (*ready)(void *),
                                       void *arg);
/** Raises this rank's progress count (ctrl.h): a completed wait or batch
 * of copies, seen by node peers waiting on this rank. */
void rmacoll__progress_bump(rmacoll_comm_t *comm);
/** Opens this rank's receive gate for call epoch `epoch` (ctrl.h). */
void rmacoll__gate_open(rmacoll_comm_t *comm, uint64_t epoch);
/** Closes the receive gate and waits (up to timeout_ms) until no node peer
 * is between its check of the gate and the end of its copy; returns 0, or
 * the number of writers still inside after the wait (logged). */
int rmacoll__gate_close(rmacoll_comm_t *comm);

/* ---- shared by the runners (put.c) ---- */

/** Task -> transport put for the host path or the stream path. */
void rmacoll__translate(rmacoll_comm_t *comm, rmacoll_memtype_t mem,
                        const rmacoll__task_t *t, const void *sendbuf, void *recvbuf,
                        rmacoll_mem_t *send_mem, rmacoll_put_t *put);
/** Grows comm's put array to n entries. */
rmacoll_status_t rmacoll__grow_puts(rmacoll_comm_t *comm, size_t n);
/** The eager payload of this call's metadata record from network peer
 * `sender` (the plan's RMACOLL__WIN_EAGER of tasks whose origin it is). */
const void *rmacoll__meta_payload(rmacoll_comm_t *comm, int sender);
/** The node payload of node peer `sender` for the current call (in its
 * control window, mapped here): the source of RMACOLL__WIN_NODE_EAGER. */
const void *rmacoll__meta_node_payload(rmacoll_comm_t *comm, int sender);

/* ---- control exchange and agreement (meta.c, verdict.c) ---- */

/** Publishes the call's metadata to node and network peers and waits for
 * theirs. Errors here break the communicator. */
rmacoll_status_t rmacoll__meta_exchange(rmacoll__call_t *call);
/** Merges every rank's planning outcome into call->acc (node, rail, node). */
rmacoll_status_t rmacoll__meta_agree(rmacoll__call_t *call);
/** Fills the planner's peer inputs from the records (after the exchange). */
void rmacoll__meta_inputs(rmacoll__call_t *call);
/** Adds a successful call's eager bytes (sent in its records, copied by
 * its plan) to comm's counters. */
void rmacoll__meta_eager_count(rmacoll__call_t *call);
/** One-round verdict (verdict.c): points comm->views at every rank's
 * status and rows for this call (their records are in). */
void rmacoll__verdict_views(rmacoll__call_t *call);
/** One-round verdict: every rank's outcome into call->acc from the views;
 * sets call->one_round unless a rank is on device memory. */
void rmacoll__verdict(rmacoll__call_t *call);

/* ---- the runners' own entry points ---- */

/** Runs comm's plan from a host thread (the host runner, the staging
 * worker) on buffers of type mem: host buffers, or (RMACOLL_MEM_CUDA, the
 * hmem runner) device buffers, copied to node peers by the CE x cuda
 * control transport's host data path and relayed through the device relay
 * buffer. Blocking; completes the proxy's puts (run_host.c). */
rmacoll_status_t rmacoll__run_host_plan(rmacoll_comm_t *comm, rmacoll_memtype_t mem,
                                        const void *sendbuf, void *recvbuf,
                                        rmacoll_mem_t *send_mem);
/** Checks the communicator can take device memory on call->stream
 * (run_stream.c); on error call->msg says why. */
rmacoll_status_t rmacoll__stream_usable(rmacoll__call_t *call);
/** Exports the device receive buffer for node peers into this call's
 * control record (run_stream.c); on error call->msg says why. */
rmacoll_status_t rmacoll__stream_export_recv(rmacoll__call_t *call);
/** Maps node peer j's device receive buffer of this call (its export) into
 * comm->peer_recv_addr[j] (run_stream.c); on error call->msg says why. */
rmacoll_status_t rmacoll__stream_map_peer(rmacoll__call_t *call, int j);
/** rmacoll_device_counts_check once comm is entered (run_stream.c): the
 * first unreported device-side failure of a device-count call, recorded
 * in last_error, or RMACOLL_SUCCESS. */
rmacoll_status_t rmacoll__dcounts_check(rmacoll_comm_t *comm);
/** Waits until the previous staged call's receive blocks are back on the
 * device; returns its error, if any. No-op when none is in flight
 * (run_staged.c). */
rmacoll_status_t rmacoll__staged_drain(rmacoll_comm_t *comm);
/** Joins the staging worker and frees the staging buffers (run_staged.c). */
void rmacoll__staged_fini(rmacoll_comm_t *comm);

/* ---- the pipeline (exec.c) ---- */

/** Opens a call on comm into *call (comm NULL, a request in flight, a
 * previous staged call that failed, a broken communicator: returned here;
 * nothing else is done then). Advances the epoch. */
rmacoll_status_t rmacoll__call_begin(rmacoll__call_t *call, rmacoll_comm_t *comm,
                                     const void *sendbuf, const int64_t *sendcounts,
                                     const int64_t *sdispls, void *recvbuf,
                                     const int64_t *recvcounts, const int64_t *rdispls,
                                     rmacoll_datatype_t dtype, void *stream);
/** Runs an opened call to its end: validate -> prepare -> control exchange
 * -> plan -> agree -> run -> commit. Returns the call's status (the same
 * on every rank for argument errors). */
rmacoll_status_t rmacoll__call_pipeline(rmacoll__call_t *call);

/* ---- device-count calls the host runs (dcx.c) ---- */

/* The host-side argument checks of a device-count call, shared by its
 * device runner (run_stream.c) and its host form (dcx.c): 0 when all pass,
 * else the number (>= 1) of the first that fails; rmacoll__dc_arg_status
 * and rmacoll__dc_arg_text give its code and its words. esize 0: an
 * unknown dtype. */
static inline int rmacoll__dc_arg_check(const void *sendbuf, const int64_t *sendcounts,
                                        int64_t send_capacity, const void *recvbuf,
                                        const int64_t *recvcounts, int64_t recv_capacity,
                                        int mode, const int32_t *status, size_t esize)
{
    const int bad[] = {
        sendcounts == NULL,
        recvcounts == NULL,
        status == NULL,
        mode != RMACOLL_RECV_PRODUCE && mode != RMACOLL_RECV_GIVEN,
        send_capacity < 0,
        recv_capacity < 0,
        sendbuf == NULL && send_capacity > 0,
        recvbuf == NULL && recv_capacity > 0,
        esize != 0 && (uint64_t)send_capacity > (uint64_t)INT64_MAX / esize,
        esize != 0 && (uint64_t)recv_capacity > (uint64_t)INT64_MAX / esize,
        esize == 0,
    };

    for (int k = 0; k < (int)(sizeof(bad) / sizeof(bad[0])); k++) {
        if (bad[k]) {
            return k + 1;
        }
    }
    return 0;
}

static inline rmacoll_status_t rmacoll__dc_arg_status(int what)
{
    return what == 0   ? RMACOLL_SUCCESS
           : what <= 6 ? RMACOLL_ERR_INVALID_ARG
           : what <= 8 ? RMACOLL_ERR_NULL_BUFFER
           : what <= 10 ? RMACOLL_ERR_OVERFLOW
           : what == 11 ? RMACOLL_ERR_DATATYPE
           : what == 12 ? RMACOLL_ERR_UNSUPPORTED
                        : RMACOLL_ERR_NO_MEMORY;
}

static inline const char *rmacoll__dc_arg_text(int what)
{
    switch (what) {
    case 1: return "sendcounts is NULL (nranks int64 expected)";
    case 2: return "recvcounts is NULL (nranks int64 expected)";
    case 3: return "status is NULL (one int32 expected)";
    case 4: return "mode is neither RMACOLL_RECV_PRODUCE nor RMACOLL_RECV_GIVEN";
    case 5: return "send_capacity is negative";
    case 6: return "recv_capacity is negative";
    case 7: return "sendbuf is NULL with send_capacity > 0";
    case 8: return "recvbuf is NULL with recv_capacity > 0";
    case 9: return "send_capacity * element size passes 2^63 - 1 bytes";
    case 10: return "recv_capacity * element size passes 2^63 - 1 bytes";
    case 11: return "dtype is not a rmacoll_datatype_t";
    case 12: return "more than 16 argument sets on this communicator whose calls are "
                    "in flight or captured in a graph (each keeps pinned host memory)";
    case 13: return "cannot allocate or pin the host memory of the call's counts and "
                    "staging";
    default: return "an invalid argument";
    }
}

/* The arguments of rmacoll_alltoallv_device_counts, host-visible. */
typedef struct rmacoll__dcx_args {
    const void *sendbuf;
    const int64_t *sendcounts;        /* [nranks] */
    int64_t send_capacity;            /* elements */
    void *recvbuf;
    int64_t *recvcounts;              /* [nranks]: written (PRODUCE) or read (GIVEN) */
    int64_t recv_capacity;            /* elements */
    int mode;                         /* rmacoll_recv_mode_t */
    rmacoll_datatype_t dtype;
    int32_t *status;                  /* one word */
    int forced;                       /* a failure of this rank found before the
                                       * protocol (rmacoll__dc_arg_text 12, 13) */
} rmacoll__dcx_args_t;

/* A verdict on a whole count matrix (reasons: RMACOLL_DCOUNTS_WHY_*). */
typedef struct rmacoll__dcx_verdict {
    rmacoll_status_t code;            /* RMACOLL_SUCCESS, ERR_OVERFLOW or ERR_MISMATCH */
    int rank, why, peer;              /* the failure with the lowest key; peer -1: none */
    int64_t need, have;               /* elements */
} rmacoll__dcx_verdict_t;

/** The device kernel's verdict on the count matrix rows[n][rec_len] (row
 * i: rank i's send counts [0, n), its given receive counts [n, 2n), then
 * recv_capacity, send_capacity, given flag), computed on the host: the
 * same failure on every rank that holds the same matrix. */
rmacoll_status_t rmacoll__dcx_verdict(int n, const int64_t *rows, size_t rec_len,
                                      rmacoll__dcx_verdict_t *v);
/** "rank R: <reason> (peer: rank P): NEED against HAVE elements" into buf. */
int rmacoll__dcx_verdict_text(const rmacoll__dcx_verdict_t *v, char *buf, size_t len);
/** rmacoll_alltoallv_device_counts on host-visible arrays and buffers,
 * once comm is entered: records, verdict, data (dcx.c says how); the same
 * status on every rank. */
rmacoll_status_t rmacoll__dcx_host(rmacoll_comm_t *comm, const rmacoll__dcx_args_t *a);

/* A device-count call's own argument error (dcx.c): its status, and *what
 * its number (rmacoll__dc_arg_text); a->forced, when set, wins. */
rmacoll_status_t rmacoll__dcx_check_args(const rmacoll__dcx_args_t *a, size_t esize, int *what);
/** rmacoll_device_counts_check's part for calls across nodes (dcx_stream.c): *had = 1
 * when comm made one; returns the first failure the worker met that no
 * check returned (recorded in last_error), and forgets it. Not entered:
 * the worker may hold the communicator. */
rmacoll_status_t rmacoll__dcx_check(rmacoll_comm_t *comm, int *had);
/** Joins the device-count worker and frees its slots (comm destroy). */
void rmacoll__dcx_fini(rmacoll_comm_t *comm);

/** Bytes a call sends (sum of its send counts, or receive counts in place,
 *  times the element size; negative counts count 0): the payload of its
 *  profiler range (core/base/trace.h). */
uint64_t rmacoll__send_bytes(const void *sendbuf, const int64_t *sendcounts,
                             const int64_t *recvcounts, rmacoll_datatype_t dtype, int n);

/* A non-blocking call (request.c): one per communicator at a time. */
struct rmacoll_request {
    rmacoll__call_t call;
    rmacoll_status_t status;          /* the call's, once done */
    _Atomic int done;
};

#endif /* RMACOLL_CORE_CALL_H */
