/*
 * flow.h - the dataflow order of a plan: which task waits for which. The
 * one statement of the dependency rules that every walker of a plan
 * follows (the host runner core/exec/run_host.c, the reference executor
 * tools/common/refexec.c and the simulator tools/common/sim.c); the long
 * form, with why it cannot deadlock, is docs/protocol.md "Dataflow
 * execution".
 *
 * A plan's rounds are an order of issue, not barriers. Every task belongs
 * to one lane:
 *  - FREE_PROXY, FREE_CE: puts that wait for nothing: self copies, puts
 *    to node peers, direct puts (relay off, direct streams), copies out of
 *    eager payloads; one lane per path;
 *  - OUT(B): this rank's relayed stream to node B: its chunks' puts into
 *    the relay's slots and the credit waits that free those slots;
 *  - IN(i): the channel from sender i at this relay: each chunk's arrival
 *    wait, its forwards, then its credit (ordered by chunk: a credit is
 *    returned as soon as its chunk is forwarded, before the next chunk
 *    arrives);
 *  - FINAL: the data waits (and any other wait), which gate nothing but
 *    the end of the call; walked once every other lane is done.
 * A lane runs in its order: a wait blocks its own lane only; a put issues
 * once everything before it in its lane is done. A walker may issue the
 * ready steps of different lanes in any order; the runtime and the
 * simulator take the one whose first task comes first in the plan (the
 * scheduler's order of issue), the reference executor a random one.
 *
 * Steps: a lane is cut into steps, each one WAIT, or consecutive PUTs of
 * one path and one round (one submission to the proxy or one post_puts).
 *
 * Merging: the runtime and the simulator issue with the chosen put step
 * the head put steps of every other lane on its path that are ready too;
 * on the CE path also each such lane's further CE steps, as one
 * submission of at most merge_max_puts puts (rmacoll__plan_cfg_t; the
 * first step always whole). Each merged step could have been issued next
 * on its own, so merging is an order the rules above allow.
 *
 * Not thread-safe: one flow per plan, built after it.
 */
#ifndef RMACOLL_CORE_PLAN_FLOW_H
#define RMACOLL_CORE_PLAN_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "core/plan/plan.h"

typedef enum rmacoll__lane_kind {
    RMACOLL__LANE_FREE_PROXY = 0,
    RMACOLL__LANE_FREE_CE = 1,
    RMACOLL__LANE_OUT = 2,    /* to node `key` through its relay */
    RMACOLL__LANE_IN = 3,     /* from sender `key`, at this relay */
    RMACOLL__LANE_FINAL = 4
} rmacoll__lane_kind_t;

typedef struct rmacoll__flow_step {
    uint32_t first;  /* index into flow->tasks (and flow->order) */
    uint32_t count;  /* 1 for a WAIT */
    uint32_t lane;
    uint8_t wait;    /* 1: one WAIT; 0: `count` PUTs on one path */
    uint8_t path;    /* rmacoll__path_t */
} rmacoll__flow_step_t;

typedef struct rmacoll__flow {
    rmacoll__task_t *tasks;     /* [ntasks]: the plan's tasks, lane by lane */
    uint32_t *order;            /* [ntasks]: index in plan->tasks of tasks[k] */
    size_t ntasks, tasks_cap;
    rmacoll__flow_step_t *steps;
    size_t nsteps, steps_cap;
    uint32_t *lane_step;        /* [nlanes + 1]: lane l is steps [lane_step[l],
                                 * lane_step[l + 1]); the last lane is FINAL */
    uint8_t *lane_kind;         /* [nlanes] rmacoll__lane_kind_t */
    size_t nlanes, lanes_cap;
    uint64_t *scratch;          /* build scratch */
    size_t scratch_cap;
    void *keys;                 /* sort keys of the IN lanes (flow.c) */
    size_t keys_cap;
} rmacoll__flow_t;

void rmacoll__flow_init(rmacoll__flow_t *f);
void rmacoll__flow_fini(rmacoll__flow_t *f);

/* The lane kind of task t, and in *key the node (OUT) or sender (IN). */
rmacoll__lane_kind_t rmacoll__flow_lane_of(const rmacoll__task_t *t,
                                           const rmacoll_topo_t *topo, int *key);

/* Builds f from plan (tasks in batch order); O(ntasks log ntasks).
 * RMACOLL_ERR_NO_MEMORY leaves f empty but valid. */
rmacoll_status_t rmacoll__flow_build(rmacoll__flow_t *f, const rmacoll__plan_t *plan,
                                     const rmacoll_topo_t *topo);

/* 1 when lane l is the FINAL lane (data waits). */
static inline int rmacoll__flow_is_final(const rmacoll__flow_t *f, size_t l)
{
    return l + 1 == f->nlanes;
}

#endif /* RMACOLL_CORE_PLAN_FLOW_H */
