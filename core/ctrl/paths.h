/*
 * paths.h - the one policy for the eager path, the node eager path and the
 * direct streams of a host call on a topology: the limits the runtime
 * gives a valid host call's planner (core/ctrl/ctrl.c sizes the control
 * window from them, core/exec/meta.c hands them to the planner), and the
 * limits the tools plan and check with (rmacoll-plan, the reference
 * executor), so that the tools and the runtime cannot disagree.
 *
 * Layer: ctrl. Calls ctrl.h (the one-round limits, the window budgets)
 * and plan_in.h. Pure; thread-safe.
 */
#ifndef RMACOLL_CORE_CTRL_PATHS_H
#define RMACOLL_CORE_CTRL_PATHS_H

#include "core/plan/plan_in.h"

/** The limits of a valid host call's paths on topo under pcfg:
 *  eager_max: rmacoll__ctrl_eager_threshold on two nodes or more within
 *    the one-round limits (relay on or off), else 0;
 *  node_eager_max: rmacoll__ctrl_node_eager_cap (within the one-round
 *    limits, a node of two ranks or more), else 0;
 *  direct_min: rmacoll__ctrl_direct_min (relay on, two nodes within the
 *    one-round limits), else 0.
 * The communicator also needs every rank of each node on one network
 * interface for direct streams (rmacoll__ctrl_nic_differs), which a tool
 * planning from a count matrix assumes. O(nranks^2) on one-round
 * topologies of two nodes or more, else O(nranks). */
void rmacoll__ctrl_host_paths(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *pcfg,
                              rmacoll__plan_paths_t *out);

#endif /* RMACOLL_CORE_CTRL_PATHS_H */
