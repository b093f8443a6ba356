/*
 * plan_cli.c - rmacoll-plan's command line (plan_cli.h): option parsing,
 * the configuration under the options, and the case they name. Moved out
 * of tools/plan.c's main as it was (issue 29); the messages and their
 * order are unchanged.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_internal.h"
#include "plan_cli.h"

void plan_cli_usage(FILE *out)
{
    fprintf(out,
            "usage: " PLAN_NAME " (--case FILE | --topology 4,4 [--dist D] "
            "[--count N] [--seed S] [--dtype T])\n"
            "       [--rank R] [--bench N] [--json] [--check [--calls N] [--virtual]]\n"
            "       [--sim [--model F] [--rails K] [--gantt F] [--heat F]] [--config F]\n"
            "       [--scheduler NAME] [--scheduler-plugin PATH] "
            "[--scheduler-seed S]\n"
            "       [--relay on|off] [--relay-buffer BYTES] [--slots S] "
            "[--max-task-bytes BYTES]\n"
            "  --case FILE          count-matrix case (tests/cases format)\n"
            "  --topology L,L,...   ranks per node, to generate a matrix; or NxG\n"
            "                       (N nodes of G ranks, e.g. 1024x8)\n"
            "  --dist D             uniform | random | zipf:ALPHA | sparse:P "
            "(default uniform)\n"
            "  --count N            mean elements per (sender, receiver) "
            "(default 1024)\n"
            "  --perf-size SIZE     instead of --count: the counts rmacoll-perf\n"
            "                       uses for -b SIZE (bytes per rank) and --seed\n"
            "  --seed S             generator seed (default 1)\n"
            "  --dtype T            element type of a generated matrix "
            "(default float32)\n"
            "  --rank R             plan and print only rank R (totals over it;\n"
            "                       no other rank is planned unless --check)\n"
            "  --bench N            time N builds of rank R's plan (default\n"
            "                       rank 0), 5 times: median and min per build\n"
            "  --json               one JSON object instead of text\n"
            "  --sim                simulate one call over the fabric model\n"
            "                       (docs/sim.md); --scheduler all compares every\n"
            "                       built-in scheduler\n"
            "  --model FILE         fabric model YAML (implies --sim; defaults:\n"
            "                       H200 + CX-7, see --print-model)\n"
            "  --rails K|all        simulate only the K most loaded rails (equal\n"
            "                       nodes, relay on; default all)\n"
            "  --gantt FILE.svg     with --sim: timeline per link of the traced\n"
            "                       ranks (%%s in FILE = the scheduler's name)\n"
            "  --heat FILE.svg      with --sim: NIC bytes per round, traced ranks\n"
            "  --trace-ranks N      ranks in the pictures (rail 0 of the first N\n"
            "                       nodes; default 8)\n"
            "  --print-model        print the model (defaults or --model) as YAML\n"
            "  --write-load FILE    write the node-to-node bytes of the case (for\n"
            "                       RMACOLL_LARGEST_FIRST_LOAD, sched/largest_first.c)\n"
            "  --check              run the reference executor on the plans\n"
            "  --calls N            with --check: N calls back to back "
            "(default 2)\n"
            "  --virtual            with --check: track provenance, not data "
            "(automatic when\n"
            "                       the buffers would exceed 1 GiB)\n"
            "  --config FILE        rmacoll YAML config (default: $RMACOLL_CONFIG);\n"
            "                       RMACOLL_* variables override it, as in the\n"
            "                       library, and the options override both\n"
            "  --scheduler NAME|all  scheduler of the plans (all: with --sim, every\n"
            "                       built-in scheduler)\n"
            "  --scheduler-plugin PATH  scheduler plugin .so instead (docs/schedulers.md)\n"
            "  --scheduler-seed S   seed of the random scheduler\n"
            "  --relay on|off       two-hop relay across nodes\n"
            "  --relay-buffer BYTES  relay.buffer_bytes (below the topology's minimum:\n"
            "                       refused, naming the relay and the minimum)\n"
            "  --slots S            relay.slots\n"
            "  --max-task-bytes BYTES  max_task_bytes\n"
            "  -h, --help           this text\n"
            "sizes accept K, M, G, T suffixes (powers of 1024).\n");
}

/* The planner's settings of the options. */
void plan_pcfg(const refexec_opts_t *op, rmacoll__plan_cfg_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->relay_enabled = op->relay_enabled;
    cfg->relay_buffer_bytes = op->relay_buffer_bytes;
    cfg->relay_slots = op->relay_slots;
    cfg->max_task_bytes = op->max_task_bytes;
    cfg->eager_max_bytes = op->eager_max_bytes;
    cfg->node_eager_max_bytes = op->node_eager_max_bytes;
    cfg->direct_min_bytes = op->direct_min_bytes;
    cfg->merge_max_puts = 1; /* walkers here take one step at a time */
}

/* The eager path, node eager path and direct streams the runtime gives a
 * host call's planner on this topology (rmacoll__ctrl_host_paths; 0: off).
 * The library also needs every rank of each node on one network interface
 * for direct streams, which a plan from a case file cannot know: the plan
 * assumes it. */
void plan_paths(const rmacoll_topo_t *topo, const refexec_opts_t *op,
                rmacoll__plan_paths_t *lim)
{
    rmacoll__plan_cfg_t cfg;

    plan_pcfg(op, &cfg);
    rmacoll__ctrl_host_paths(topo, &cfg, lim);
}

/* The smallest relay.buffer_bytes of the case's topology under the options
 * (the planner's rule, as rmacoll-info --topology prints it). */
uint64_t plan_min_relay(const rmacoll_topo_t *topo, const refexec_opts_t *op)
{
    rmacoll__plan_cfg_t cfg;
    rmacoll__relay_rule_t rule;

    plan_pcfg(op, &cfg);
    (void)rmacoll__plan_relay_rule(topo, &cfg, &rule, NULL, 0);
    return rule.min_buffer_bytes;
}

static int plan_parse_size(const char *opt, const char *arg, uint64_t *v)
{
    if (rmacoll_parse_size(arg, v) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s: bad size '%s'\n", opt, arg);
        return -1;
    }
    return 0;
}

enum {
    OPT_CASE = 256, OPT_TOPOLOGY, OPT_DIST, OPT_COUNT, OPT_SEED, OPT_DTYPE,
    OPT_RANK, OPT_JSON, OPT_CHECK, OPT_CALLS, OPT_CONFIG, OPT_SCHED,
    OPT_PLUGIN, OPT_SCHED_SEED, OPT_RELAY, OPT_RELAY_BUF, OPT_SLOTS,
    OPT_MAX_TASK, OPT_VIRTUAL, OPT_BENCH, OPT_SIM, OPT_MODEL, OPT_RAILS,
    OPT_GANTT, OPT_HEAT, OPT_TRACE, OPT_PRINT_MODEL, OPT_PERF_SIZE, OPT_WRITE_LOAD, OPT_HELP
};

static const struct option plan_longopts[] = {
    {"case", required_argument, NULL, OPT_CASE},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"dist", required_argument, NULL, OPT_DIST},
    {"count", required_argument, NULL, OPT_COUNT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"rank", required_argument, NULL, OPT_RANK},
    {"json", no_argument, NULL, OPT_JSON},
    {"check", no_argument, NULL, OPT_CHECK},
    {"virtual", no_argument, NULL, OPT_VIRTUAL},
    {"calls", required_argument, NULL, OPT_CALLS},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"scheduler", required_argument, NULL, OPT_SCHED},
    {"scheduler-plugin", required_argument, NULL, OPT_PLUGIN},
    {"scheduler-seed", required_argument, NULL, OPT_SCHED_SEED},
    {"relay", required_argument, NULL, OPT_RELAY},
    {"relay-buffer", required_argument, NULL, OPT_RELAY_BUF},
    {"slots", required_argument, NULL, OPT_SLOTS},
    {"max-task-bytes", required_argument, NULL, OPT_MAX_TASK},
    {"bench", required_argument, NULL, OPT_BENCH},
    {"sim", no_argument, NULL, OPT_SIM},
    {"model", required_argument, NULL, OPT_MODEL},
    {"rails", required_argument, NULL, OPT_RAILS},
    {"gantt", required_argument, NULL, OPT_GANTT},
    {"heat", required_argument, NULL, OPT_HEAT},
    {"trace-ranks", required_argument, NULL, OPT_TRACE},
    {"print-model", no_argument, NULL, OPT_PRINT_MODEL},
    {"perf-size", required_argument, NULL, OPT_PERF_SIZE},
    {"write-load", required_argument, NULL, OPT_WRITE_LOAD},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void plan_cli_init(plan_cli_t *cli)
{
    memset(cli, 0, sizeof(*cli));
    cli->dist_spec = "uniform";
    cli->count = 1024;
    cli->seed = 1;
    cli->dtype = RMACOLL_FLOAT32;
    cli->only = -1;
    cli->calls = 2;
    cli->trace = 8;
}

/* The options whose value is checked as it is read: -1 to go on, else 2
 * (the message printed). */
static int plan_cli_value(plan_cli_t *cli, int opt, const char *arg)
{
    switch (opt) {
    case OPT_COUNT:
        if (plan_parse_size("--count", arg, &cli->count) != 0) {
            return 2;
        }
        break;
    case OPT_DTYPE:
        if (rmacoll_datatype_from_name(arg, &cli->dtype) != RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": --dtype: unknown type '%s'\n",
                    arg);
            return 2;
        }
        break;
    case OPT_RANK: {
        char *end = NULL;
        long rv = strtol(arg, &end, 10);
        if (end == arg || *end != '\0' || rv < 0 || rv > INT32_MAX) {
            fprintf(stderr, PLAN_NAME ": --rank: expected a rank (0 or more), got "
                            "'%s'\n", arg);
            return 2;
        }
        cli->only = (int)rv;
        break;
    }
    case OPT_PERF_SIZE:
        if (plan_parse_size("--perf-size", arg, &cli->perf_size) != 0 ||
            cli->perf_size == 0) {
            return 2;
        }
        break;
    case OPT_RAILS:
        cli->rails = strcmp(arg, "all") == 0 ? 0 : atoi(arg);
        if (cli->rails < 0 || (cli->rails == 0 && strcmp(arg, "all") != 0)) {
            fprintf(stderr, PLAN_NAME ": --rails: expected a positive "
                            "number or all (got '%s')\n", arg);
            return 2;
        }
        break;
    case OPT_TRACE:
        cli->trace = atoi(arg);
        if (cli->trace < 1 || cli->trace > 64) {
            fprintf(stderr, PLAN_NAME ": --trace-ranks: need 1..64 (got "
                            "'%s')\n", arg);
            return 2;
        }
        break;
    case OPT_BENCH:
        cli->bench = atoi(arg);
        if (cli->bench < 1) {
            fprintf(stderr, PLAN_NAME ": --bench: need a positive number "
                            "of builds (got '%s')\n", arg);
            return 2;
        }
        break;
    }
    return -1;
}

/* One option of getopt_long: -1 to go on, else the exit status (--help:
 * 0, a bad option or value: 2). */
static int plan_cli_option(plan_cli_t *cli, int opt, const char *arg)
{
    switch (opt) {
    case OPT_CASE: cli->case_path = arg; break;
    case OPT_TOPOLOGY: cli->topology = arg; break;
    case OPT_DIST: cli->dist_spec = arg; break;
    case OPT_SEED: cli->seed = strtoull(arg, NULL, 0); break;
    case OPT_COUNT:
    case OPT_DTYPE:
    case OPT_RANK:
    case OPT_PERF_SIZE:
    case OPT_RAILS:
    case OPT_TRACE:
    case OPT_BENCH:
        return plan_cli_value(cli, opt, arg);
    case OPT_JSON: cli->json = 1; break;
    case OPT_CHECK: cli->check = 1; break;
    case OPT_VIRTUAL: cli->virt = 1; break;
    case OPT_SIM: cli->sim = 1; break;
    case OPT_MODEL: cli->model_path = arg; cli->sim = 1; break;
    case OPT_GANTT: cli->gantt = arg; break;
    case OPT_HEAT: cli->heat = arg; break;
    case OPT_PRINT_MODEL: cli->print_model = 1; break;
    case OPT_WRITE_LOAD: cli->write_load = arg; break;
    case OPT_CALLS: cli->calls = atoi(arg); break;
    case OPT_CONFIG: cli->config_path = arg; break;
    case OPT_SCHED: cli->sched = arg; break;
    case OPT_PLUGIN: cli->plugin = arg; break;
    case OPT_SCHED_SEED: cli->sched_seed = arg; break;
    case OPT_RELAY: cli->relay = arg; break;
    case OPT_RELAY_BUF: cli->relay_buf = arg; break;
    case OPT_SLOTS: cli->slots = arg; break;
    case OPT_MAX_TASK: cli->max_task = arg; break;
    case OPT_HELP:
    case 'h':
        plan_cli_usage(stdout);
        return 0;
    default:
        plan_cli_usage(stderr);
        return 2;
    }
    return -1;
}

/* The options over the configuration (relay, sizes, slots): 0, or 2 with
 * the message printed. */
static int plan_cli_override(plan_cli_t *cli)
{
    refexec_opts_t *o = &cli->o;
    uint64_t v;

    if (cli->relay != NULL) {
        if (strcmp(cli->relay, "on") != 0 && strcmp(cli->relay, "off") != 0) {
            fprintf(stderr, PLAN_NAME ": --relay: expected on or off, got "
                            "'%s'\n", cli->relay);
            return 2;
        }
        o->relay_enabled = strcmp(cli->relay, "on") == 0;
    }
    if ((cli->relay_buf != NULL &&
         plan_parse_size("--relay-buffer", cli->relay_buf, &o->relay_buffer_bytes)) ||
        (cli->max_task != NULL &&
         plan_parse_size("--max-task-bytes", cli->max_task, &o->max_task_bytes))) {
        return 2;
    }
    if (cli->slots != NULL) {
        if (plan_parse_size("--slots", cli->slots, &v) != 0 || v < 1 ||
            v > UINT32_MAX) {
            fprintf(stderr, PLAN_NAME ": --slots: need 1..%u\n", UINT32_MAX);
            return 2;
        }
        o->relay_slots = (uint32_t)v;
    }
    if (o->max_task_bytes == 0 || o->relay_slots == 0) {
        fprintf(stderr, PLAN_NAME ": max_task_bytes and relay slots must be "
                        "positive\n");
        return 2;
    }
    o->ncalls = cli->calls;
    return 0;
}

/* configuration as the library loads it (defaults, the file of --config
 * or RMACOLL_CONFIG, RMACOLL_* variables), then the options: cli->o.
 * 0, or 2 with the message printed. */
static int plan_cli_config(plan_cli_t *cli)
{
    rmacoll_config_t *cfg = &cli->cfg;
    refexec_opts_t *o = &cli->o;
    char err[512];

    if (rmacoll_config_load(cli->config_path, cfg, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        return 2;
    }
    refexec_opts_init(o);
    o->scheduler = cli->sched != NULL ? cli->sched : cfg->scheduler;
    o->scheduler_plugin = cli->plugin != NULL ? cli->plugin
                          : cfg->scheduler_plugin[0] ? cfg->scheduler_plugin
                                                     : NULL;
    o->sched_seed = cli->sched_seed != NULL ? strtoull(cli->sched_seed, NULL, 0)
                                            : cfg->scheduler_seed;
    o->relay_enabled = cfg->relay_enabled;
    o->relay_buffer_bytes = cfg->relay_buffer_bytes;
    o->relay_slots = cfg->relay_slots;
    o->max_task_bytes = cfg->max_task_bytes;
    /* the eager paths and direct streams of host calls, as the library
     * reads them (its size parser, core/config) */
    if (rmacoll__config_get_size(cfg, "eager_max_bytes", &o->eager_max_bytes) !=
        RMACOLL_SUCCESS) {
        o->eager_max_bytes = 0;
    }
    if (rmacoll__config_get_size(cfg, "node_eager_max_bytes", &o->node_eager_max_bytes) !=
        RMACOLL_SUCCESS) {
        o->node_eager_max_bytes = 0;
    }
    if (rmacoll__config_get_size(cfg, "relay.direct_min_bytes", &o->direct_min_bytes) !=
        RMACOLL_SUCCESS) {
        o->direct_min_bytes = 0;
    }
    return plan_cli_override(cli);
}

int plan_cli_parse(int argc, char **argv, plan_cli_t *cli)
{
    char err[512];
    int opt, rc;

    plan_cli_init(cli);
    while ((opt = getopt_long(argc, argv, "h", plan_longopts, NULL)) != -1) {
        rc = plan_cli_option(cli, opt, optarg);
        if (rc >= 0) {
            return rc;
        }
    }
    sim_model_defaults(&cli->model);
    if (cli->model_path != NULL &&
        sim_model_load(cli->model_path, &cli->model, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": --model: %s\n", err);
        return 2;
    }
    if (cli->print_model) {
        sim_model_print(stdout, &cli->model);
        return 0;
    }
    if (optind < argc || (cli->case_path == NULL) == (cli->topology == NULL) ||
        cli->calls < 1) {
        fprintf(stderr, PLAN_NAME ": give exactly one of --case and "
                        "--topology (and no other arguments)\n");
        plan_cli_usage(stderr);
        return 2;
    }
    rc = plan_cli_config(cli);
    return rc != 0 ? rc : -1;
}

/* --topology: "NxG" (N nodes of G ranks) or ranks per node "4,4" into
 * node_of[n]: 0, or 2 with the message printed. */
static int plan_cli_topology(const char *topology, int *node_of, int *n)
{
    int xn, xg;
    char xc;

    *n = 0;
    if (sscanf(topology, "%dx%d%c", &xn, &xg, &xc) == 2) {
        /* NxG: N nodes of G ranks */
        if (xn < 1 || xg < 1 || (int64_t)xn * xg > PLAN_MAX_RANKS) {
            fprintf(stderr, PLAN_NAME ": --topology %s: need 1..%d ranks "
                            "in all\n", topology, PLAN_MAX_RANKS);
            return 2;
        }
        for (int k = 0; k < xn * xg; k++) {
            node_of[(*n)++] = k / xg;
        }
    } else if (rmacoll_case_parse_topology(topology, node_of,
                                           PLAN_MAX_RANKS, n) !=
               RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": --topology: expected ranks per node "
                        "such as 4,4 or 128x8 (got '%s')\n", topology);
        return 2;
    }
    return 0;
}

/* The matrix of --topology, --dist, --count or --perf-size, --seed and
 * --dtype: 0, or 2 with the message printed. */
static int plan_cli_generate(const plan_cli_t *cli, rmacoll_case_t **cp)
{
    static int node_of[PLAN_MAX_RANKS], sizes[PLAN_MAX_RANKS];
    int n = 0, nnodes = 0;
    rmacoll_case_dist_t dist;
    rmacoll_case_t *c = NULL;

    if (plan_cli_topology(cli->topology, node_of, &n) != 0) {
        return 2;
    }
    if (rmacoll_case_dist_parse(cli->dist_spec, &dist) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": --dist: expected uniform, random, "
                        "zipf:ALPHA or sparse:P (got '%s')\n", cli->dist_spec);
        return 2;
    }
    for (int r = 0; r < n; r++) {
        if (r == 0 || node_of[r] != node_of[r - 1]) {
            sizes[nnodes++] = 0;
        }
        sizes[nnodes - 1]++;
    }
    if (cli->perf_size > 0) {
        /* rmacoll-perf's counts for -b SIZE --seed S: one node for the
         * generator, then the topology (tools/common/perfrun.c) */
        int64_t total = (int64_t)(cli->perf_size / rmacoll_datatype_size(cli->dtype));
        int one = n;
        if (rmacoll_case_random(1, &one, &dist, total / n,
                                cli->seed * 1000003u + cli->perf_size, cli->dtype,
                                &c) != RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": cannot generate the matrix\n");
            return 2;
        }
        memcpy(c->node_of, node_of, (size_t)n * sizeof(int));
        c->nnodes = node_of[n - 1] + 1;
        snprintf(c->name, sizeof(c->name), "topology %s dist %s "
                 "rmacoll-perf size %" PRIu64 " seed %" PRIu64, cli->topology,
                 cli->dist_spec, cli->perf_size, cli->seed);
    } else {
        if (rmacoll_case_random(nnodes, sizes, &dist, (int64_t)cli->count, cli->seed,
                                cli->dtype, &c) != RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": cannot generate the matrix\n");
            return 2;
        }
        snprintf(c->name, sizeof(c->name), "topology %s dist %s count %"
                 PRIu64 " seed %" PRIu64, cli->topology, cli->dist_spec,
                 cli->count, cli->seed);
    }
    *cp = c;
    return 0;
}

int plan_cli_case(const plan_cli_t *cli, rmacoll_case_t **c)
{
    char err[512];

    *c = NULL;
    if (cli->case_path == NULL) {
        return plan_cli_generate(cli, c);
    }
    if (rmacoll_case_load(cli->case_path, c, err, sizeof(err)) !=
        RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        return 2;
    }
    return 0;
}
