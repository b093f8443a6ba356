/*
 * plan_config.h - where the planner meets the configuration: its settings
 * built from a config (rmacoll__plan_cfg_from), and its hooks into the
 * loader (the relay slot rule, checked by rmacoll_config_load). The
 * planner (plan.c) itself reads no config. Lives in core/plan because that
 * is the lowest layer that sees both the plan types and core/config.
 */
#ifndef RMACOLL_CORE_PLAN_CONFIG_H
#define RMACOLL_CORE_PLAN_CONFIG_H

#include "core/config/config_internal.h"
#include "core/plan/plan.h"

/** The planner's settings of a configuration (relay.*, max_task_bytes,
 *  the eager capacities, relay.direct_min_bytes). Thread-safe. */
void rmacoll__plan_cfg_from(const rmacoll_config_t *cfg, rmacoll__plan_cfg_t *out);

/** The planner's hooks into rmacoll_config_load: the part of the relay
 *  slot rule (rmacoll__plan_relay_rule) that needs no topology, blamed on
 *  relay.buffer_bytes and relay.slots. */
extern const rmacoll__config_hooks_t rmacoll__plan_config_hooks;

#endif /* RMACOLL_CORE_PLAN_CONFIG_H */
