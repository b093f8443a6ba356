/*
 * plan_in.h - the eager and direct parts of one rank's planner input
 * (rmacoll__plan_input_t, plan.h) from its peers' sendcounts rows: where
 * this rank's block is in each sender's eager payload (eager_in_off), which
 * senders stream to it directly (direct_in), and where its block is in each
 * node peer's node payload (node_eager_off). One builder for the runtime
 * (core/exec/meta.c, rows from the metadata records) and the tools
 * (tools/common/planin.c and refexec.c, rows from a count matrix), so that
 * a plan printed or checked by a tool is the plan a rank builds.
 *
 * Layer: plan. Calls only plan.h and topo.h. Pure; thread-safe.
 */
#ifndef RMACOLL_CORE_PLAN_IN_H
#define RMACOLL_CORE_PLAN_IN_H

#include <stddef.h>
#include <stdint.h>

#include "core/plan/plan.h"

/** Every rank's sendcounts row: row(arg, a) is rank a's sendcounts
 * [nranks], as this rank learned it. Called only for the ranks a builder
 * needs (other-node senders; node peers for the node payloads). */
typedef struct rmacoll__plan_rows {
    const int64_t *(*row)(const void *arg, int a);
    const void *arg;
} rmacoll__plan_rows_t;

/** The limits of a host call's eager path, node eager path and direct
 * streams (the plan input's eager_max_bytes, node_eager_max_bytes and
 * direct_min_bytes; 0: off). The runtime's choice for a topology is
 * rmacoll__ctrl_host_paths (core/ctrl/paths.h). */
typedef struct rmacoll__plan_paths {
    uint64_t eager_max;
    uint64_t node_eager_max;
    uint64_t direct_min;
} rmacoll__plan_paths_t;

/** eager_in_off[a] (a < nranks) of rank r's input: RMACOLL__NO_EAGER for
 * a on r's node, else where r's block is in a's eager payload to r's node
 * (relay on: a's blocks for that node in local-rank order; relay off: r's
 * block alone) by a's own rule (rmacoll__plan_eager_off). Nothing is
 * written when eager_max is 0. O(nranks * ls). */
void rmacoll__plan_in_eager(const rmacoll_topo_t *topo, int relay, int r,
                            const rmacoll__plan_rows_t *rows, size_t esize,
                            uint64_t eager_max, uint64_t *eager_in_off);

/** direct_in[a] (a < nranks) of rank r's input: a's stream to r's node
 * goes direct (rmacoll__plan_direct_in under eager_max and direct_min).
 * Nothing is written when direct_min is 0. O(nranks * ls). */
void rmacoll__plan_in_direct(const rmacoll_topo_t *topo, int r,
                             const rmacoll__plan_rows_t *rows, size_t esize,
                             uint64_t eager_max, uint64_t direct_min, uint8_t *direct_in);

/** node_eager_off[l] (l < ls, r's node) of rank r's input: where r's
 * block is in local rank l's node payload, by l's own rule
 * (rmacoll__plan_node_eager_bytes under cap); scratch: ls entries.
 * Nothing is written when cap is 0. O(ls^2). */
void rmacoll__plan_in_node_eager(const rmacoll_topo_t *topo, int r,
                                 const rmacoll__plan_rows_t *rows, size_t esize,
                                 uint64_t cap, uint64_t *node_eager_off, uint64_t *scratch);

/** Sets in's eager_max_bytes, node_eager_max_bytes, direct_min_bytes and
 * their arrays from lim and rows (in->topo, rank, esize and cfg set; relay
 * on when in->cfg is NULL): the three builders above into the caller's
 * arrays eager_in_off and direct_in [nranks], node_eager_off and scratch
 * [r's node size]; an array whose limit is 0 is left out (NULL in in). */
void rmacoll__plan_in_paths(rmacoll__plan_input_t *in, const rmacoll__plan_rows_t *rows,
                            const rmacoll__plan_paths_t *lim, uint64_t *eager_in_off,
                            uint8_t *direct_in, uint64_t *node_eager_off, uint64_t *scratch);

#endif /* RMACOLL_CORE_PLAN_IN_H */
