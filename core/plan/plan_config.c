/*
 * plan_config.c - the planner's settings from a configuration, and the
 * planner's rule the configuration loader checks (through
 * rmacoll__plan_config_hooks, so core/config never names the planner).
 */
#include "core/plan/plan_config.h"

#include <string.h>

void rmacoll__plan_cfg_from(const rmacoll_config_t *cfg, rmacoll__plan_cfg_t *out)
{
    uint64_t v;

    memset(out, 0, sizeof(*out));
    out->relay_enabled = cfg->relay_enabled;
    out->relay_buffer_bytes = cfg->relay_buffer_bytes;
    out->relay_slots = cfg->relay_slots;
    out->max_task_bytes = cfg->max_task_bytes;
    if (rmacoll__config_get_size(cfg, "eager_max_bytes", &out->eager_max_bytes) !=
        RMACOLL_SUCCESS) {
        out->eager_max_bytes = 0;
    }
    if (rmacoll__config_get_size(cfg, "node_eager_max_bytes", &out->node_eager_max_bytes) !=
        RMACOLL_SUCCESS) {
        out->node_eager_max_bytes = 0;
    }
    if (rmacoll__config_get_size(cfg, "relay.direct_min_bytes", &out->direct_min_bytes) !=
        RMACOLL_SUCCESS) {
        out->direct_min_bytes = 0;
    }
    out->merge_max_puts = 1;
    if (rmacoll__config_get_count(cfg, "merge_max_puts", &v) == RMACOLL_SUCCESS && v >= 1 &&
        v <= UINT32_MAX) {
        out->merge_max_puts = (uint32_t)v;
    }
}

/* The planner's relay slot rule (rmacoll__plan_relay_rule), in its part
 * that needs no topology: relay.buffer_bytes / relay.slots must hold one
 * element of the widest type. rmacoll_comm_create applies the whole rule. */
static int plan_config_relay_ok(const rmacoll_config_t *cfg, char *problem, size_t plen)
{
    rmacoll__plan_cfg_t pcfg;

    rmacoll__plan_cfg_from(cfg, &pcfg);
    return rmacoll__plan_relay_rule(NULL, &pcfg, NULL, problem, plen);
}

static const char *const plan_config_relay_keys[] = {"relay.buffer_bytes", "relay.slots", NULL};

const rmacoll__config_hooks_t rmacoll__plan_config_hooks = {
    .component = "plan",
    .declare_keys = NULL,
    .check = plan_config_relay_ok,
    .check_keys = plan_config_relay_keys,
};
