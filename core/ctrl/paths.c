/*
 * paths.c - the host call's eager, node eager and direct limits (paths.h).
 */
#include "core/ctrl/paths.h"

#include "core/ctrl/ctrl.h"

void rmacoll__ctrl_host_paths(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *pcfg,
                              rmacoll__plan_paths_t *out)
{
    int net = topo->nnodes >= 2 && rmacoll__ctrl_one_round(topo);

    out->eager_max = net ? rmacoll__ctrl_eager_threshold(topo, pcfg) : 0;
    out->node_eager_max = rmacoll__ctrl_node_eager_cap(topo, pcfg);
    out->direct_min = rmacoll__ctrl_direct_min(topo, pcfg);
}
