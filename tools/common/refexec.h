/*
 * refexec.h - the reference executor: an in-process simulation of one
 * communicator that builds the plans of all ranks (rmacoll__plan_build,
 * with each rank's planner input assembled from the global count matrices
 * exactly as core/plan/plan.h describes) and runs them against in-memory
 * windows, checking the protocol as it goes:
 *  - every PUT stays inside its source and target windows (guards around
 *    each window are sentinel-filled and checked), a PUT into a receive
 *    buffer stays inside the receive block of its origin, nothing writes a
 *    send buffer;
 *  - every signal word rises by exactly one per signal, from one writer;
 *  - relay slots go FREE -> FILLING (chunk writes) -> FULL (its ARRIVE
 *    signal) -> FREE (the relay's CREDIT for that channel, slots freed in
 *    FIFO order); a write into a FULL slot ("slot overwritten before
 *    credit"), a forward out of a slot that is not FULL ("forward before
 *    arrival"), or a credit before every byte of the slot was forwarded are
 *    failures;
 *  - no rank ever blocks for good (else "deadlock" with every blocked
 *    rank's wait);
 *  - at the end every receive buffer holds exactly the AlltoAllV result
 *    (fill pattern of cases.h), gaps and guards untouched, every signal
 *    word equals what the final signal state expects, every slot is FREE.
 *
 * Execution model (adversarial within the transport contract): ranks are
 * stepped in a seeded random order; a rank issues the PUTs of its current
 * batch a few at a time (the two put queues interleaved at random, order
 * kept inside a queue), then blocks until every WAIT of the batch holds;
 * a PUT's data lands before its signal. Signal state, relay buffers and
 * slot states persist across calls, so back-to-back calls check
 * monotonic signals.
 *
 * Virtual mode allocates no data: each window keeps provenance intervals
 * {offset, length, origin rank, origin send offset}; PUTs copy
 * provenance; at the end each receive block must be tiled exactly by
 * intervals from the right sender and offset. This runs byte offsets past
 * 2^32 without memory.
 *
 * Not thread-safe (one executor per thread).
 */
#ifndef RMACOLL_TESTS_REFEXEC_H
#define RMACOLL_TESTS_REFEXEC_H

#include <stddef.h>
#include <stdint.h>

#include "cases.h"
#include "core/plan/plan.h"

typedef struct refexec_opts {
    const char *scheduler;        /* built-in name; default "shift" */
    const char *scheduler_plugin; /* path of a plugin .so, or NULL */
    uint64_t sched_seed;          /* seed of the random scheduler */
    int relay_enabled;            /* default 1 */
    uint64_t relay_buffer_bytes;  /* default 1 MiB */
    uint32_t relay_slots;         /* default 4 */
    uint64_t max_task_bytes;      /* default 1 GiB */
    uint64_t eager_max_bytes;     /* eager path of two-node cases (the plan input
                                   * the runtime gives a host call there); the
                                   * relay's copies read the sender's payload,
                                   * its blocks for the node in local-rank
                                   * order; default 0 (off) */
    uint64_t node_eager_max_bytes; /* node eager path of one- and two-node cases
                                    * (node_eager_max_bytes; 0: off, the default) */
    uint64_t direct_min_bytes;    /* direct streams of two-node cases with the relay
                                   * on (relay.direct_min_bytes; 0: off, the
                                   * default) */
    uint64_t seed;                /* execution order; default 1 */
    int virtual_mode;             /* provenance intervals instead of data */
    int gapped;                   /* gapped, reverse-order displacements */
    int ncalls;                   /* refexec_run: calls of the same case */
    size_t guard_bytes;           /* guard before/after each window; 64 */
} refexec_opts_t;

typedef struct refexec_stats {
    uint64_t calls;               /* successful calls executed */
    uint64_t tasks, puts, waits, signals, batches;
    uint64_t bytes_proxy, bytes_ce;  /* bytes put, by path */
    uint64_t bytes_self, bytes_direct, bytes_to_relay, bytes_forward;
    uint64_t steps;               /* simulation steps */
    int max_round;
} refexec_stats_t;

typedef struct refexec_result {
    /* What every rank's call returns: RMACOLL_SUCCESS, or the error of a
     * plan build (RMACOLL_ERR_MISMATCH, RMACOLL_ERR_CONFIG, ...). */
    rmacoll_status_t status;
    /* 1 when the simulation found nothing wrong AND the status is what
     * the case implies (RMACOLL_ERR_MISMATCH iff has_mismatch). */
    int ok;
    char msg[1024];               /* the first failure, "" when ok */
    int fail_rank;                /* first rank whose plan build failed, -1 */
    int nfail_ranks;              /* ranks whose plan build failed */
    char plan_errmsg[256];        /* that rank's plan errmsg */
    int call;                     /* index of the call (refexec_run) */
    refexec_stats_t stats;        /* cumulative over the executor's calls */
} refexec_result_t;

typedef struct refexec refexec_t;

/** Defaults (see the field comments). */
void refexec_opts_init(refexec_opts_t *opts);

/**
 * An executor for a topology: node_of[nranks] (node ids 0..nnodes-1).
 * Opens the scheduler, makes every rank's sigstate, signal array and relay
 * window. Errors: RMACOLL_ERR_CONFIG (unknown scheduler), NO_MEMORY,
 * INVALID_ARG; errbuf (may be NULL) says why.
 */
rmacoll_status_t refexec_create(const refexec_opts_t *opts, int nranks,
                                const int *node_of, refexec_t **ex,
                                char *errbuf, size_t errlen);

void refexec_destroy(refexec_t *ex);

/**
 * Builds the plans of all ranks for case c (its topology must be the
 * executor's) without running them; res->status says whether every build
 * succeeded. The plans stay readable with refexec_plan until the next
 * prepare or call. Returns res->status (a build error is not an executor
 * failure).
 */
rmacoll_status_t refexec_prepare(refexec_t *ex, const rmacoll_case_t *c,
                                 refexec_result_t *res);

/** Rank r's plan from the last prepare (NULL if its build failed). */
const rmacoll__plan_t *refexec_plan(const refexec_t *ex, int r);
const rmacoll_topo_t *refexec_topo(const refexec_t *ex);
/** Rank r's plan build error message from the last prepare ("" if none). */
const char *refexec_plan_errmsg(const refexec_t *ex, int r);

/**
 * Runs the prepared call (after a successful prepare) and checks it.
 * Returns RMACOLL_SUCCESS when res->ok, else RMACOLL_ERR_INTERNAL.
 */
rmacoll_status_t refexec_execute(refexec_t *ex, refexec_result_t *res);

/**
 * prepare + execute (or, when a build fails, checks that it is the
 * expected mismatch: nothing is run, no buffer written, no signal state
 * advanced). Returns RMACOLL_SUCCESS when res->ok.
 */
rmacoll_status_t refexec_call(refexec_t *ex, const rmacoll_case_t *c,
                              refexec_result_t *res);

/** create, opts->ncalls (>= 1) calls of c, destroy. */
rmacoll_status_t refexec_run(const refexec_opts_t *opts,
                             const rmacoll_case_t *c, refexec_result_t *res);

/* Fields refexec_corrupt can change. */
typedef enum refexec_field {
    REFEXEC_DST_OFF = 0,
    REFEXEC_SRC_OFF = 1,
    REFEXEC_BYTES = 2,
    REFEXEC_SIG_VALUE = 3
} refexec_field_t;

/**
 * Test hook: after a successful prepare, adds `delta` to `field` of the
 * k-th task (in plan order) of rank r whose flags contain all of `flags`
 * (0 = any task) and whose op is `op`; proves that the checks catch
 * planner bugs. Returns 1 if such a task was found and changed, else 0.
 */
int refexec_corrupt(refexec_t *ex, int r, int op, uint32_t flags, size_t k,
                    refexec_field_t field, int64_t delta);

#endif /* RMACOLL_TESTS_REFEXEC_H */
