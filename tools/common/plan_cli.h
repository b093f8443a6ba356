/*
 * plan_cli.h - rmacoll-plan's command line (tools/plan.c): the options as
 * one struct, their parsing (getopt_long, the fabric model, the library's
 * configuration loading under the options), the case they name (loaded
 * or generated), and the planner's settings of the final options.
 * Errors are printed to stderr as "rmacoll-plan: ..." (exit status 2).
 */
#ifndef RMACOLL_TOOLS_PLAN_CLI_H
#define RMACOLL_TOOLS_PLAN_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cases.h"
#include "core/ctrl/paths.h"
#include "core/plan/plan.h"
#include "refexec.h"
#include "rmacoll.h"
#include "sim.h"

#define PLAN_NAME "rmacoll-plan"
#define PLAN_MAX_RANKS 65536

/** Every option of rmacoll-plan; o holds the final planner options. */
typedef struct plan_cli {
    /* the case */
    const char *case_path, *topology, *dist_spec;
    uint64_t count, seed, perf_size;
    rmacoll_datatype_t dtype;
    /* what to do */
    int only, json, check, calls, virt, bench;
    int sim, rails, trace, print_model;
    const char *model_path, *gantt, *heat, *write_load;
    /* the configuration and the options over it (NULL: not given) */
    const char *config_path, *sched, *plugin, *sched_seed;
    const char *relay, *relay_buf, *slots, *max_task;
    sim_model_t model;
    rmacoll_config_t cfg;   /* loaded; o's scheduler names point into it */
    refexec_opts_t o;
} plan_cli_t;

/** Prints the usage text to out. */
void plan_cli_usage(FILE *out);

/**
 * Parses argv into cli, loads the fabric model and the configuration (as
 * the library loads it: defaults, --config or RMACOLL_CONFIG, RMACOLL_*
 * variables) and sets cli->o from it and the options. Returns -1 to go
 * on, or the exit status to end with (0 after --help or --print-model,
 * 2 on a usage error, already printed).
 */
int plan_cli_parse(int argc, char **argv, plan_cli_t *cli);

/** The case of the options: --case loaded, or --topology generated.
 *  Returns 0, or 2 with the error printed (*c is then NULL). */
int plan_cli_case(const plan_cli_t *cli, rmacoll_case_t **c);

/** The planner's settings of the options. */
void plan_pcfg(const refexec_opts_t *op, rmacoll__plan_cfg_t *cfg);

/** The eager path, node eager path and direct streams the runtime gives a
 *  host call's planner on this topology (rmacoll__ctrl_host_paths; 0: off). */
void plan_paths(const rmacoll_topo_t *topo, const refexec_opts_t *op,
                rmacoll__plan_paths_t *lim);

/** The smallest relay.buffer_bytes of the topology under the options. */
uint64_t plan_min_relay(const rmacoll_topo_t *topo, const refexec_opts_t *op);

#endif /* RMACOLL_TOOLS_PLAN_CLI_H */
