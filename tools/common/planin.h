/*
 * planin.h - one rank's planner input (rmacoll__plan_input_t, core/plan/plan.h)
 * assembled from a global count matrix, without building every rank's
 * plan: what rmacoll-plan --rank, its planner benchmark (--bench) and the
 * fabric simulator (sim.h) use at 1k-16k ranks, where the reference
 * executor (refexec.h, all ranks, all buffers) does not fit.
 *
 * Displacements are contiguous in rank order (rmacoll_displs_contiguous),
 * as refexec's default. The peers' receive displacements a rank learns
 * from the metadata (peer_rdispl, chan_rdispl) need a column prefix sum of
 * the receive matrix: with `exact_displs` = 2 planin_ctx_create computes
 * it once (nranks^2 int64, for many ranks); with 1 planin_fill computes
 * what one rank needs (O(rank * nranks), for one rank); with 0 those
 * displacements are 0 (the task structure, bytes and rounds are the same;
 * only destination offsets differ, which the simulator ignores).
 * Not thread-safe per object; distinct objects are independent.
 */
#ifndef RMACOLL_TOOLS_PLANIN_H
#define RMACOLL_TOOLS_PLANIN_H

#include <stddef.h>
#include <stdint.h>

#include "cases.h"
#include "core/plan/plan.h"
#include "core/plan/plan_in.h"

/** What is shared by every rank's input of one case. */
typedef struct planin_ctx {
    const rmacoll_case_t *c;
    const rmacoll_topo_t *topo;
    const rmacoll__plan_cfg_t *cfg;
    const rmacoll__sched_t *sched;
    size_t esize;
    int exact;          /* exact peer displacements */
    int64_t *rdispl;    /* [n*n] rdispls_j[i] at i*n+j, or NULL */
} planin_ctx_t;

/** One rank's arrays (owned) and the input pointing into them. */
typedef struct planin {
    rmacoll__plan_input_t in;
    int64_t *sendcounts, *sdispls, *recvcounts, *rdispls;  /* [n] */
    int64_t *peer_rcount, *peer_rdispl;                     /* [n] */
    int64_t *chan_sendcount, *chan_rcount, *chan_rdispl;    /* [nin*ls] */
    size_t chan_cap;
    uint64_t *node_eager_off, *eager_scratch;               /* [ls] */
    uint64_t *eager_in_off;                                 /* [n] */
    uint8_t *direct_in;                                     /* [n] */
} planin_t;

/** Errors: RMACOLL_ERR_NO_MEMORY (ctx is then empty). The topology must
 *  be the case's partition into nodes (caller's duty). */
rmacoll_status_t planin_ctx_create(planin_ctx_t *ctx, const rmacoll_case_t *c,
                                   const rmacoll_topo_t *topo,
                                   const rmacoll__plan_cfg_t *cfg,
                                   const rmacoll__sched_t *sched,
                                   int exact_displs);
void planin_ctx_destroy(planin_ctx_t *ctx);

void planin_init(planin_t *pi);
/** Fills pi for rank r (arrays grown as needed). O(nranks + nin * ls). */
rmacoll_status_t planin_fill(planin_t *pi, const planin_ctx_t *ctx, int r);
void planin_fini(planin_t *pi);
/** Sets the eager path, node eager path and direct streams of pi's input
 * (rank r, filled) to the limits lim (0: off) with their arrays, from the
 * case's rows as the runtime learns them from the records: the library's
 * builder (rmacoll__plan_in_paths, core/plan/plan_in.h). The runtime's
 * limits for a topology are rmacoll__ctrl_host_paths (core/ctrl/paths.h).
 * O(ls^2 + nranks * ls). Errors: RMACOLL_ERR_NO_MEMORY. */
rmacoll_status_t planin_paths(planin_t *pi, const planin_ctx_t *ctx, int r,
                              const rmacoll__plan_paths_t *lim);
/** Sets the eager paths of pi's input (rank r, filled): eager_max (0: off)
 * as eager_max_bytes with eager_in_off, and node_cap (0: off) as
 * node_eager_max_bytes with node_eager_off, from the case's rows as the
 * runtime learns them from the records, its direct streams unchanged
 * (planin_paths). O(ls^2 + nranks * ls). Errors: RMACOLL_ERR_NO_MEMORY. */
rmacoll_status_t planin_eager(planin_t *pi, const planin_ctx_t *ctx, int r,
                              uint64_t eager_max, uint64_t node_cap);
/** Sets the direct streams of pi's input (rank r, filled, its eager path
 * set): direct_min (0: off) as direct_min_bytes with direct_in, each
 * sender's rule (rmacoll__plan_direct_stream) over its row of the case,
 * its eager paths unchanged (planin_paths). O(ls^2 + nranks * ls).
 * Errors: RMACOLL_ERR_NO_MEMORY. */
rmacoll_status_t planin_direct(planin_t *pi, const planin_ctx_t *ctx, int r,
                               uint64_t direct_min);

#endif /* RMACOLL_TOOLS_PLANIN_H */
