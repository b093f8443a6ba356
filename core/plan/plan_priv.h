/*
 * plan_priv.h - what the pieces of the planner share, private to core/plan/
 * (plan.h is the interface): the builder state of one rmacoll__plan_build
 * call and the functions one piece calls in another. Files:
 *   plan.c         entry point (rmacoll__plan_build), count checks, final
 *                  waits, the plan's lifetime;
 *   plan_layout.c  relay slots and channels, signal words, signal state;
 *   plan_relay.c   relay channel cache, streams, both ends of a channel;
 *   plan_direct.c  direct, eager and node eager rules, predicates, tasks;
 *   plan_tasks.c   task list, put pieces, sort by (round, queue), batches.
 */
#ifndef RMACOLL_CORE_PLAN_PRIV_H
#define RMACOLL_CORE_PLAN_PRIV_H

#include <stdint.h>

#include "core/plan/plan.h"

/* Builder state of one rmacoll__plan_build call, shared by its pieces. */
typedef struct rmacoll__plan_ctx {
    const rmacoll__plan_input_t *in;
    rmacoll__plan_t *plan;
    const rmacoll__plan_topo_t *pt;
    int max_round;
    rmacoll_status_t status;
    int node_eager_out;  /* this rank's blocks for its node peers travel in its
                          * node payload */
    const uint8_t *direct_to; /* [nnodes]: this rank's stream to node B goes
                               * straight, not through the relay
                               * (rmacoll__plan_direct_stream) */
} rmacoll__plan_ctx_t;

/* ------------------------------------------------------- plan_tasks.c */

/* Appends t (ctx->status records a failure; later calls do nothing). */
void rmacoll__plan_add_task(rmacoll__plan_ctx_t *ctx, const rmacoll__task_t *t);
/* Adds a PUT, split into pieces of at most max_task_bytes; only the last
 * piece carries the signal (if the template has one). */
void rmacoll__plan_add_put(rmacoll__plan_ctx_t *ctx, const rmacoll__task_t *tmpl);
/* The scheduler's round of a put from rank to peer. */
int rmacoll__plan_sched_round(const rmacoll__plan_input_t *in, int rank, int peer);
/* Stable sort of the tasks by (round, queue). */
rmacoll_status_t rmacoll__plan_sort_tasks(rmacoll__plan_t *plan, int max_round);
/* One batch per round over the sorted tasks. */
rmacoll_status_t rmacoll__plan_make_batches(rmacoll__plan_t *plan);

/* ------------------------------------------------------ plan_direct.c */

/* Which of this rank's streams go straight (plan->direct_to, grown to
 * nnodes). */
rmacoll_status_t rmacoll__plan_direct_nodes(const rmacoll__plan_input_t *in,
                                            rmacoll__plan_t *plan);
/* Incoming channel c's stream comes straight to its receivers. */
int rmacoll__plan_direct_from(const rmacoll__plan_input_t *in, int c);
/* This rank puts its block for j straight (no relay). */
int rmacoll__plan_is_direct(const rmacoll__plan_ctx_t *ctx, int j);
/* This rank's direct put to j signals XDATA(me) at j. */
int rmacoll__plan_xdata_out(const rmacoll__plan_ctx_t *ctx, int j);
/* p's block comes straight and raises XDATA(p) here. */
int rmacoll__plan_xdata_in(const rmacoll__plan_input_t *in, int p);
/* Eager payload bytes of this rank's stream to node B (0: no eager path). */
uint64_t rmacoll__plan_eager_to(const rmacoll__plan_input_t *in, int B);
/* Eager payload bytes of incoming channel c (0: no eager path). */
uint64_t rmacoll__plan_eager_from(const rmacoll__plan_input_t *in, int c);
/* This rank's bytes for j (another node) travel in its metadata record. */
int rmacoll__plan_eager_direct_out(const rmacoll__plan_input_t *in, int j);
/* p's block for this rank travels in p's metadata record. */
int rmacoll__plan_eager_in(const rmacoll__plan_input_t *in, int p);
/* This rank's block for node peer j travels in its node payload. */
int rmacoll__plan_node_eager_out(const rmacoll__plan_ctx_t *ctx, int j);
/* Node peer p's block for this rank is in p's node payload. */
int rmacoll__plan_node_eager_in(const rmacoll__plan_input_t *in, int p);
/* Direct puts: self copy, node peers (CE) and direct network puts. */
void rmacoll__plan_direct_puts(rmacoll__plan_ctx_t *ctx, const rmacoll__sigstate_t *st);
/* Receiver's copies out of the metadata records of other nodes' ranks. */
void rmacoll__plan_eager_pulls(rmacoll__plan_ctx_t *ctx);
/* Receiver's copies out of its node peers' node payloads. */
void rmacoll__plan_node_eager_pulls(rmacoll__plan_ctx_t *ctx);

/* ------------------------------------------------------- plan_relay.c */

/* Frees a relay channel cache (NULL is fine). */
void rmacoll__plan_topo_free(rmacoll__plan_topo_t *pt);
/* Sender side of the stream from this rank to node B through its relay. */
rmacoll_status_t rmacoll__plan_stream_out(rmacoll__plan_ctx_t *ctx,
                                          const rmacoll__sigstate_t *st, int B,
                                          uint64_t *nchunks);
/* Relay side of incoming channel c: arrival waits, forwards, credits. */
rmacoll_status_t rmacoll__plan_stream_in(rmacoll__plan_ctx_t *ctx,
                                         const rmacoll__sigstate_t *st, int c,
                                         uint64_t *nchunks);

#endif /* RMACOLL_CORE_PLAN_PRIV_H */
