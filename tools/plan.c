/*
 * plan.c - rmacoll-plan: prints the plan (batches of tasks in four
 * queues) that every rank, or one, would run for one AlltoAllV call, from
 * a count-matrix case file or a generated matrix, without any transport;
 * then byte totals per round and per link (src rank, dst rank, path).
 * With --check it also runs the plans through the reference executor
 * (tools/common/refexec.c) and prints ok or the first failure.
 * Output formats: docs/plan-format.md.
 *
 * The reference executor lives with the tests; it is compiled into this
 * tool by including its source, so the tool builds without the tests.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "cases.h"
#include "core/config/config_internal.h"
#include "core/ctrl/ctrl.h"
#include "core/ctrl/paths.h"
#include "core/plan/plan.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "planin.h"
#include "planjson.h"
#include "rmacoll.h"
#include "refexec.h"
#include "sim.h"

#define PLAN_NAME "rmacoll-plan"
#define PLAN_MAX_RANKS 65536

static void plan_usage(FILE *out)
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
            "sizes accept K, M, G, T suffixes (powers of 1024).\n");
}

/* Totals over the printed plans. */
typedef struct plan_totals {
    int nrounds;
    int only;                                          /* row of links, or -1 */
    uint64_t *round_puts, *round_bytes, *round_path;  /* [nrounds], [2*nr] */
    uint64_t *links;                                   /* [n * n * 2] */
} plan_totals_t;

static int plan_totals(const rmacoll__plan_t *const *plans, int n, int only,
                       plan_totals_t *tot)
{
    memset(tot, 0, sizeof(*tot));
    for (int r = 0; r < n; r++) {
        const rmacoll__plan_t *p = plans[r];

        for (size_t k = 0; p != NULL && k < p->ntasks; k++) {
            if (p->tasks[k].round + 1 > tot->nrounds) {
                tot->nrounds = p->tasks[k].round + 1;
            }
        }
    }
    tot->round_puts = calloc((size_t)tot->nrounds + 1, sizeof(uint64_t));
    tot->round_bytes = calloc((size_t)tot->nrounds + 1, sizeof(uint64_t));
    tot->round_path = calloc(2 * (size_t)tot->nrounds + 2, sizeof(uint64_t));
    tot->only = only;
    tot->links = calloc((size_t)(only >= 0 ? 1 : n) * n * 2, sizeof(uint64_t));
    if (!tot->round_puts || !tot->round_bytes || !tot->round_path ||
        !tot->links) {
        return -1;
    }
    for (int r = 0; r < n; r++) {
        const rmacoll__plan_t *p = plans[r];

        if (only >= 0 && r != only) {
            continue;
        }
        for (size_t k = 0; p != NULL && k < p->ntasks; k++) {
            const rmacoll__task_t *t = &p->tasks[k];

            if (t->op != RMACOLL__OP_PUT) {
                continue;
            }
            tot->round_puts[t->round]++;
            tot->round_bytes[t->round] += t->bytes;
            tot->round_path[2 * (size_t)t->round + t->path] += t->bytes;
            tot->links[((size_t)(only >= 0 ? 0 : r) * n + t->peer) * 2 +
                       t->path] += t->bytes;
        }
    }
    return 0;
}

static void plan_totals_free(plan_totals_t *tot)
{
    free(tot->round_puts);
    free(tot->round_bytes);
    free(tot->round_path);
    free(tot->links);
}

static void print_totals_text(const plan_totals_t *tot, int n)
{
    printf("totals per round (puts, bytes: proxy + ce):\n");
    for (int r = 0; r < tot->nrounds; r++) {
        if (tot->round_puts[r] == 0) {
            continue;
        }
        printf("  round %d: %" PRIu64 " puts, %" PRIu64 " B (proxy %" PRIu64
               " B, ce %" PRIu64 " B)\n", r, tot->round_puts[r],
               tot->round_bytes[r], tot->round_path[2 * r],
               tot->round_path[2 * r + 1]);
    }
    printf("totals per link (src -> dst path: bytes):\n");
    for (int s = 0; s < n; s++) {
        for (int d = 0; d < n && (tot->only < 0 || s == tot->only); d++) {
            for (int path = 0; path < 2; path++) {
                uint64_t b = tot->links[((size_t)(tot->only >= 0 ? 0 : s) * n + d) * 2 + path];

                if (b != 0) {
                    printf("  %d -> %d %s: %" PRIu64 " B\n", s, d,
                           path ? "ce" : "proxy", b);
                }
            }
        }
    }
}

static void print_totals_json(const plan_totals_t *tot, int n)
{
    int first = 1;

    printf("\"totals\":{\"rounds\":[");
    for (int r = 0; r < tot->nrounds; r++) {
        if (tot->round_puts[r] == 0) {
            continue;
        }
        printf("%s{\"round\":%d,\"puts\":%" PRIu64 ",\"bytes\":%" PRIu64
               ",\"proxy_bytes\":%" PRIu64 ",\"ce_bytes\":%" PRIu64 "}",
               first ? "" : ",", r, tot->round_puts[r], tot->round_bytes[r],
               tot->round_path[2 * r], tot->round_path[2 * r + 1]);
        first = 0;
    }
    printf("],\"links\":[");
    first = 1;
    for (int s = 0; s < n; s++) {
        for (int d = 0; d < n && (tot->only < 0 || s == tot->only); d++) {
            for (int path = 0; path < 2; path++) {
                uint64_t b = tot->links[((size_t)(tot->only >= 0 ? 0 : s) * n + d) * 2 + path];

                if (b != 0) {
                    printf("%s{\"src\":%d,\"dst\":%d,\"path\":\"%s\","
                           "\"bytes\":%" PRIu64 "}", first ? "" : ",", s, d,
                           path ? "ce" : "proxy", b);
                    first = 0;
                }
            }
        }
    }
    printf("]}");
}

/* Prints a JSON string (names and messages carry no control bytes but
 * may carry quotes). */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\') {
            putchar('\\');
        }
        putchar((unsigned char)*s < 0x20 ? ' ' : *s);
    }
    putchar('"');
}

/* The planner's settings of the options. */
static void plan_pcfg(const refexec_opts_t *op, rmacoll__plan_cfg_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->relay_enabled = op->relay_enabled;
    cfg->relay_buffer_bytes = op->relay_buffer_bytes;
    cfg->relay_slots = op->relay_slots;
    cfg->max_task_bytes = op->max_task_bytes;
    cfg->eager_max_bytes = op->eager_max_bytes;
    cfg->node_eager_max_bytes = op->node_eager_max_bytes;
    cfg->direct_min_bytes = op->direct_min_bytes;
}

/* The eager path, node eager path and direct streams the runtime gives a
 * host call's planner on this topology (rmacoll__ctrl_host_paths; 0: off).
 * The library also needs every rank of each node on one network interface
 * for direct streams, which a plan from a case file cannot know: the plan
 * assumes it. */
static void plan_paths(const rmacoll_topo_t *topo, const refexec_opts_t *op,
                       rmacoll__plan_paths_t *lim)
{
    rmacoll__plan_cfg_t cfg;

    plan_pcfg(op, &cfg);
    rmacoll__ctrl_host_paths(topo, &cfg, lim);
}

/* The smallest relay.buffer_bytes of the case's topology under the options
 * (the planner's rule, as rmacoll-info --topology prints it). */
static uint64_t plan_min_relay(const rmacoll_topo_t *topo, const refexec_opts_t *op)
{
    rmacoll__plan_cfg_t cfg;
    rmacoll__relay_rule_t rule;

    plan_pcfg(op, &cfg);
    (void)rmacoll__plan_relay_rule(topo, &cfg, &rule, NULL, 0);
    return rule.min_buffer_bytes;
}

/* The relay slot rule as the library applies it (its configuration load,
 * then rmacoll_comm_create on the topology), on the final options: 0, or
 * 2 with the library's message (the keys and the minimum). */
static int plan_relay_check(const rmacoll_case_t *c, const refexec_opts_t *op)
{
    rmacoll__plan_cfg_t cfg;
    rmacoll_topo_t *topo = NULL;
    char why[384];
    int ok;

    plan_pcfg(op, &cfg);
    if (!rmacoll__plan_relay_rule(NULL, &cfg, NULL, why, sizeof(why))) {
        fprintf(stderr, PLAN_NAME ": %s (--relay-buffer, --slots or the "
                        "configuration)\n", why);
        return 2;
    }
    if (rmacoll__topo_create(c->nranks, c->node_of, &topo) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": cannot make the topology\n");
        return 2;
    }
    ok = rmacoll__plan_relay_rule(topo, &cfg, NULL, why, sizeof(why));
    rmacoll__topo_destroy(topo);
    if (!ok) {
        fprintf(stderr, PLAN_NAME ": %s: %s (--relay-buffer, --slots or the "
                        "configuration)\n", c->name, why);
        return 2;
    }
    return 0;
}

/* Prints the plans (all, or rank `only`) and their totals; with json the
 * object is left open for what follows. */
static int print_plans(const rmacoll__plan_t *const *plans,
                       const rmacoll_topo_t *topo, const rmacoll_case_t *c,
                       const refexec_opts_t *op, int only, int json)
{
    plan_totals_t tot;
    /* the thresholds in effect (0: no such path on this topology), and
     * what the header prints for each: those, else the configured key */
    rmacoll__plan_paths_t lim;
    uint64_t eager, node_eager, direct, eager_shown, node_shown;

    plan_paths(topo, op, &lim);
    eager = lim.eager_max;
    node_eager = lim.node_eager_max;
    direct = lim.direct_min;
    eager_shown = eager ? eager : op->eager_max_bytes;
    node_shown = node_eager ? node_eager : op->node_eager_max_bytes;

    if (plan_totals(plans, c->nranks, only, &tot) != 0) {
        plan_totals_free(&tot);
        return -1;
    }
    if (json) {
        printf("{\"case\":");
        json_str(c->name);
        printf(",\"nranks\":%d,\"nnodes\":%d,\"dtype\":\"%s\","
               "\"config\":{\"scheduler\":",
               c->nranks, topo->nnodes, rmacoll_datatype_name(c->dtype));
        json_str(op->scheduler_plugin ? op->scheduler_plugin : op->scheduler);
        printf(",\"relay\":%s,\"relay_buffer_bytes\":%" PRIu64
               ",\"relay_slots\":%u,\"max_task_bytes\":%" PRIu64
               ",\"min_relay_buffer_bytes\":%" PRIu64 ",\"eager_max_bytes\":%" PRIu64
               ",\"eager\":%s,\"node_eager_max_bytes\":%" PRIu64 ",\"node_eager\":%s,"
               "\"direct_min_bytes\":%" PRIu64 ",\"direct\":%s},"
               "\"status\":\"%s\",\"plans\":[",
               op->relay_enabled ? "true" : "false", op->relay_buffer_bytes,
               op->relay_slots, op->max_task_bytes, plan_min_relay(topo, op),
               eager_shown, eager ? "true" : "false", node_shown,
               node_eager ? "true" : "false", op->direct_min_bytes,
               direct ? "true" : "false", rmacoll_status_name(RMACOLL_SUCCESS));
        for (int r = 0, first = 1; r < c->nranks; r++) {
            if (only >= 0 && r != only) {
                continue;
            }
            printf("%s", first ? "" : ",");
            fflush(stdout);
            planjson_print(stdout, plans[r], topo);
            first = 0;
        }
        printf("],");
        print_totals_json(&tot, c->nranks);
    } else {
        printf("# %s: %d ranks on %d nodes, %s; scheduler %s, relay %s "
               "(%" PRIu64 " B, %u slots; minimum relay.buffer_bytes %" PRIu64
               "), max_task_bytes %" PRIu64 ", eager_max_bytes %" PRIu64 " (%s), "
               "node_eager_max_bytes %" PRIu64 " (%s), relay.direct_min_bytes %" PRIu64
               " (%s)\n",
               c->name, c->nranks, topo->nnodes,
               rmacoll_datatype_name(c->dtype),
               op->scheduler_plugin ? op->scheduler_plugin : op->scheduler,
               op->relay_enabled ? "on" : "off", op->relay_buffer_bytes,
               op->relay_slots, plan_min_relay(topo, op), op->max_task_bytes,
               eager_shown,
               op->eager_max_bytes == 0  ? "eager path off"
               : eager                    ? "eager path planned for host calls"
                                          : "no eager path on this topology",
               node_shown,
               op->node_eager_max_bytes == 0  ? "node eager path off"
               : node_eager                    ? "node eager path planned for host calls"
                                               : "no node eager path on this topology",
               op->direct_min_bytes,
               op->direct_min_bytes == 0 ? "direct streams off"
               : direct ? "direct streams planned for host calls, where every rank of a "
                          "node shares one network interface"
                        : "no direct streams on this topology");
        for (int r = 0; r < c->nranks; r++) {
            if (only < 0 || r == only) {
                rmacoll__plan_print_text(stdout, plans[r], topo);
            }
        }
        print_totals_text(&tot, c->nranks);
    }
    plan_totals_free(&tot);
    return 0;
}

static double plan_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/*
 * Plans only rank r (planin.h assembles its input from the matrix), then
 * prints it like the all-ranks path, or with bench > 0 times `bench`
 * builds of it, 5 times, and prints the minimum and median per build.
 * The plan object and signal state are reused across builds, as a
 * communicator reuses them across calls.
 */
static int plan_one_rank(const rmacoll_case_t *c, const refexec_opts_t *op,
                         int r, int json, int bench)
{
    rmacoll_topo_t *topo = NULL;
    rmacoll__sched_t sched = {NULL, NULL};
    rmacoll__plan_cfg_t cfg;
    rmacoll__sigstate_t *st0 = NULL, *st1 = NULL;
    rmacoll__plan_t plan;
    rmacoll__plan_paths_t lim;
    planin_ctx_t ctx;
    planin_t pi;
    char err[512];
    int rc = 2;
    rmacoll_status_t st;

    plan_pcfg(op, &cfg);
    rmacoll__plan_init(&plan);
    planin_init(&pi);
    memset(&ctx, 0, sizeof(ctx));
    if (rmacoll__topo_create(c->nranks, c->node_of, &topo) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": cannot make the topology\n");
        goto out;
    }
    st = rmacoll__sched_open(op->scheduler, op->scheduler_plugin, topo,
                             op->sched_seed, &sched, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        goto out;
    }
    if (planin_ctx_create(&ctx, c, topo, &cfg, &sched, 1) != RMACOLL_SUCCESS ||
        planin_fill(&pi, &ctx, r) != RMACOLL_SUCCESS ||
        rmacoll__sigstate_create(topo, &cfg, r, &st0) != RMACOLL_SUCCESS ||
        rmacoll__sigstate_create(topo, &cfg, r, &st1) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": out of memory\n");
        goto out;
    }
    plan_paths(topo, op, &lim);
    if (planin_paths(&pi, &ctx, r, &lim) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": out of memory\n");
        goto out;
    }
    st = rmacoll__plan_build(&pi.in, st0, st1, &plan);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s: rank %d's plan fails with %s: %s\n",
                c->name, r, rmacoll_status_name(st), plan.errmsg);
        rc = 1;
        goto out;
    }
    if (bench > 0) {
        double t[5], best, med;

        for (int k = 0; k < 5; k++) {
            double t0 = plan_now_us();
            for (int i = 0; i < bench; i++) {
                rmacoll__plan_build(&pi.in, st0, st1, &plan);
            }
            t[k] = (plan_now_us() - t0) / bench;
        }
        qsort(t, 5, sizeof(t[0]), cmp_double);
        best = t[0];
        med = t[2];
        if (json) {
            printf("{\"bench\":{\"nranks\":%d,\"nnodes\":%d,\"rank\":%d,"
                   "\"scheduler\":\"%s\",\"tasks\":%zu,\"batches\":%zu,"
                   "\"builds\":%d,\"us_per_build_min\":%.3f,"
                   "\"us_per_build_median\":%.3f,\"us_per_task\":%.4f}}\n",
                   c->nranks, topo->nnodes, r, op->scheduler, plan.ntasks,
                   plan.nbatches, bench, best, med,
                   plan.ntasks ? med / (double)plan.ntasks : 0.0);
        } else {
            printf("bench: rank %d of %d ranks on %d nodes, scheduler %s: "
                   "%zu tasks, %zu batches; %.1f us per build (median of 5 x "
                   "%d; min %.1f), %.3f us per task\n",
                   r, c->nranks, topo->nnodes, op->scheduler, plan.ntasks,
                   plan.nbatches, med, bench, best,
                   plan.ntasks ? med / (double)plan.ntasks : 0.0);
        }
        rc = 0;
        goto out;
    }
    {
        const rmacoll__plan_t **plans = calloc((size_t)c->nranks, sizeof(*plans));

        if (plans == NULL) {
            fprintf(stderr, PLAN_NAME ": out of memory\n");
            goto out;
        }
        plans[r] = &plan;
        rc = print_plans(plans, topo, c, op, r, json) != 0 ? 2 : 0;
        free(plans);
        if (json) {
            printf("}\n");
        }
    }
out:
    rmacoll__plan_fini(&plan);
    rmacoll__sigstate_destroy(st0);
    rmacoll__sigstate_destroy(st1);
    planin_fini(&pi);
    planin_ctx_destroy(&ctx);
    rmacoll__sched_close(&sched);
    rmacoll__topo_destroy(topo);
    return rc;
}

/* "a%sb" with the scheduler's name, or the path itself. */
static const char *sim_path(char *buf, size_t len, const char *path,
                            const char *name)
{
    const char *p;

    if (path == NULL) {
        return NULL;
    }
    p = strstr(path, "%s");
    if (p == NULL) {
        return path;
    }
    snprintf(buf, len, "%.*s%s%s", (int)(p - path), path, name, p + 2);
    return buf;
}

/*
 * --sim: replays the plans of one scheduler, or of every built-in one
 * (--scheduler all), over the fabric model and prints one row each.
 */
static int plan_simulate(const rmacoll_case_t *c, const refexec_opts_t *op,
                         const sim_model_t *model, int rails, int json,
                         const char *gantt, const char *heat, int trace)
{
    const char *names[64];
    int nn = 0, rc = 0;
    uint64_t min_relay = 0;
    rmacoll_topo_t *topo = NULL;

    if (rmacoll__topo_create(c->nranks, c->node_of, &topo) == RMACOLL_SUCCESS) {
        min_relay = plan_min_relay(topo, op);
        rmacoll__topo_destroy(topo);
    }
    if (op->scheduler_plugin == NULL && strcmp(op->scheduler, "all") == 0) {
        for (int k = 0; rmacoll__builtin_schedulers[k] != NULL && nn < 64; k++) {
            names[nn++] = rmacoll__builtin_schedulers[k]->name;
        }
    } else {
        names[nn++] = op->scheduler;
    }
    if (nn > 1 && ((gantt && !strstr(gantt, "%s")) || (heat && !strstr(heat, "%s")))) {
        fprintf(stderr, PLAN_NAME ": --sim with --scheduler all writes one picture per "
                "scheduler: put %%s (the scheduler's name) in the --gantt/--heat file name\n");
        return 2;
    }
    if (json) {
        printf("{\"case\":");
        json_str(c->name);
        printf(",\"nranks\":%d,\"model\":{\"name\":", c->nranks);
        json_str(model->name);
        printf(",\"nic_GBps\":%g,\"nic_latency_us\":%g,\"pcie_GBps\":%g,"
               "\"nvlink_GBps\":%g,\"nvlink_bidir_GBps\":%g,"
               "\"nvlink_latency_us\":%g,\"self_GBps\":%g,\"put_us\":%g,"
               "\"batch_us\":%g,\"call_us\":%g},\"relay\":%s,\"relay_buffer_bytes\":%" PRIu64
               ",\"relay_slots\":%u,\"min_relay_buffer_bytes\":%" PRIu64 ",\"results\":[",
               model->nic_bw / 1e9, model->nic_lat * 1e6, model->pcie_bw / 1e9,
               model->ce_bw / 1e9, model->ce_bidir_bw / 1e9, model->ce_lat * 1e6,
               model->self_bw / 1e9, model->put_s * 1e6, model->batch_s * 1e6,
               model->call_s * 1e6, op->relay_enabled ? "true" : "false", op->relay_buffer_bytes,
               op->relay_slots, min_relay);
    } else {
        printf("# %s: %d ranks; model \"%s\"; relay %s (%" PRIu64 " B, %u slots; minimum "
               "relay.buffer_bytes %" PRIu64 ")\n",
               c->name, c->nranks, model->name, op->relay_enabled ? "on" : "off",
               op->relay_buffer_bytes, op->relay_slots, min_relay);
        printf("%-12s %12s %11s %7s %7s %14s %18s %9s  %s\n", "scheduler",
               "makespan_us", "bound_us", "ratio", "rounds", "peak_round_B",
               "busiest_link", "busy_us", "critical path us: nic/ce/lat/host/queue (steps, hops)");
    }
    for (int k = 0; k < nn; k++) {
        sim_opts_t so;
        sim_result_t res;
        char gb[1024], hb[1024];
        rmacoll_status_t st;

        sim_opts_init(&so);
        so.scheduler = names[k];
        so.scheduler_plugin = op->scheduler_plugin;
        so.sched_seed = op->sched_seed;
        so.cfg.relay_enabled = op->relay_enabled;
        so.cfg.relay_buffer_bytes = op->relay_buffer_bytes;
        so.cfg.relay_slots = op->relay_slots;
        so.cfg.max_task_bytes = op->max_task_bytes;
        so.rails = rails;
        so.trace_ranks = trace;
        so.gantt_svg = (nn == 1 || (gantt && strstr(gantt, "%s")))
                           ? sim_path(gb, sizeof(gb), gantt, names[k]) : NULL;
        so.heat_svg = (nn == 1 || (heat && strstr(heat, "%s")))
                          ? sim_path(hb, sizeof(hb), heat, names[k]) : NULL;
        st = sim_run(c, model, &so, &res);
        if (st != RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": --sim, scheduler %s: %s\n", names[k], res.msg);
            rc = 1;
            if (json) {
                printf("%s{\"scheduler\":", k ? "," : "");
                json_str(names[k]);
                printf(",\"status\":\"%s\",\"message\":", rmacoll_status_name(st));
                json_str(res.msg);
                printf("}");
            }
            continue;
        }
        if (json) {
            printf("%s{\"scheduler\":", k ? "," : "");
            json_str(names[k]);
            printf(",\"status\":\"RMACOLL_SUCCESS\",\"makespan_us\":%.4f,"
                   "\"bound_us\":%.4f,\"bound_nic_us\":%.4f,\"bound_nvlink_us\":%.4f,"
                   "\"ratio\":%.5f,\"rounds\":%d,\"ranks_simulated\":%d,"
                   "\"rails_simulated\":%d,\"rails\":%d,\"tasks\":%" PRIu64
                   ",\"flows\":%" PRIu64 ",\"events\":%" PRIu64
                   ",\"max_nic_bytes\":%.0f,\"peak_round_link\":{\"bytes\":%" PRIu64
                   ",\"round\":%d,\"rank\":%d,\"link\":\"%s\"},"
                   "\"busiest_link\":{\"rank\":%d,\"link\":\"%s\",\"busy_us\":%.4f,"
                   "\"bytes\":%" PRIu64 "},\"critical_path\":{\"nic_us\":%.4f,"
                   "\"ce_us\":%.4f,\"latency_us\":%.4f,\"host_us\":%.4f,"
                   "\"queue_us\":%.4f,\"steps\":%d,\"hops\":%d,\"last_rank\":%d},"
                   "\"plan_s\":%.3f,\"sim_s\":%.3f}",
                   res.makespan * 1e6, res.bound * 1e6, res.bound_nic * 1e6,
                   res.bound_nvl * 1e6, res.ratio, res.nrounds, res.nranks_sim,
                   res.rails_sim, res.rails, res.ntasks, res.nflows, res.nevents,
                   res.max_nic_bytes, res.peak_round_link_bytes, res.peak_round,
                   res.peak_round_rank, sim_class_name(res.peak_round_class),
                   res.busiest_rank, sim_class_name(res.busiest_class),
                   res.busiest_busy * 1e6, res.busiest_bytes, res.cp_nic * 1e6,
                   res.cp_ce * 1e6, res.cp_lat * 1e6, res.cp_host * 1e6,
                   res.cp_queue * 1e6, res.cp_steps, res.cp_hops, res.cp_last_rank,
                   res.plan_s, res.sim_s);
        } else {
            char link[64];
            snprintf(link, sizeof(link), "%d/%s", res.busiest_rank,
                     sim_class_name(res.busiest_class));
            printf("%-12s %12.1f %11.1f %7.3f %7d %14" PRIu64 " %18s %9.1f  "
                   "%.1f/%.1f/%.1f/%.1f/%.1f (%d, %d)\n", names[k],
                   res.makespan * 1e6, res.bound * 1e6, res.ratio, res.nrounds,
                   res.peak_round_link_bytes, link, res.busiest_busy * 1e6,
                   res.cp_nic * 1e6, res.cp_ce * 1e6, res.cp_lat * 1e6,
                   res.cp_host * 1e6, res.cp_queue * 1e6, res.cp_steps, res.cp_hops);
            if (k == nn - 1) {
                printf("# bound = max(most loaded NIC direction %.0f B / %.1f GB/s, "
                       "NVLink); %d of %d rails simulated (%d ranks); planning "
                       "%.2f s, simulation %.2f s (last scheduler)\n",
                       res.max_nic_bytes, model->nic_bw / 1e9, res.rails_sim,
                       res.rails, res.nranks_sim, res.plan_s, res.sim_s);
            }
        }
        fflush(stdout);
    }
    if (json) {
        printf("]}\n");
    }
    return rc;
}

static int plan_parse_size(const char *opt, const char *arg, uint64_t *v)
{
    if (rmacoll_parse_size(arg, v) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s: bad size '%s'\n", opt, arg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum {
        OPT_CASE = 256, OPT_TOPOLOGY, OPT_DIST, OPT_COUNT, OPT_SEED, OPT_DTYPE,
        OPT_RANK, OPT_JSON, OPT_CHECK, OPT_CALLS, OPT_CONFIG, OPT_SCHED,
        OPT_PLUGIN, OPT_SCHED_SEED, OPT_RELAY, OPT_RELAY_BUF, OPT_SLOTS,
        OPT_MAX_TASK, OPT_VIRTUAL, OPT_BENCH, OPT_SIM, OPT_MODEL, OPT_RAILS,
        OPT_GANTT, OPT_HEAT, OPT_TRACE, OPT_PRINT_MODEL, OPT_PERF_SIZE, OPT_WRITE_LOAD, OPT_HELP
    };
    static const struct option longopts[] = {
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
    const char *case_path = NULL, *topology = NULL, *dist_spec = "uniform";
    const char *config_path = NULL, *sched = NULL, *plugin = NULL;
    const char *relay = NULL, *relay_buf = NULL, *slots = NULL;
    const char *max_task = NULL, *sched_seed = NULL;
    uint64_t count = 1024, seed = 1, v;
    rmacoll_datatype_t dtype = RMACOLL_FLOAT32;
    int only = -1, json = 0, check = 0, calls = 2, opt, rc = 0, virt = 0;
    int bench = 0, sim = 0, rails = 0, trace = 8, print_model = 0;
    const char *model_path = NULL, *gantt = NULL, *heat = NULL;
    uint64_t perf_size = 0;
    const char *write_load = NULL;
    sim_model_t model;
    rmacoll_config_t cfg;
    rmacoll_case_t *c = NULL;
    refexec_opts_t o;
    refexec_t *ex = NULL;
    refexec_result_t res;
    char err[512];
    rmacoll_status_t st;

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_CASE: case_path = optarg; break;
        case OPT_TOPOLOGY: topology = optarg; break;
        case OPT_DIST: dist_spec = optarg; break;
        case OPT_COUNT:
            if (plan_parse_size("--count", optarg, &count) != 0) {
                return 2;
            }
            break;
        case OPT_SEED: seed = strtoull(optarg, NULL, 0); break;
        case OPT_DTYPE:
            if (rmacoll_datatype_from_name(optarg, &dtype) != RMACOLL_SUCCESS) {
                fprintf(stderr, PLAN_NAME ": --dtype: unknown type '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_RANK: {
            char *end = NULL;
            long rv = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || rv < 0 || rv > INT32_MAX) {
                fprintf(stderr, PLAN_NAME ": --rank: expected a rank (0 or more), got "
                                "'%s'\n", optarg);
                return 2;
            }
            only = (int)rv;
            break;
        }
        case OPT_JSON: json = 1; break;
        case OPT_CHECK: check = 1; break;
        case OPT_VIRTUAL: virt = 1; break;
        case OPT_SIM: sim = 1; break;
        case OPT_MODEL: model_path = optarg; sim = 1; break;
        case OPT_GANTT: gantt = optarg; break;
        case OPT_HEAT: heat = optarg; break;
        case OPT_PRINT_MODEL: print_model = 1; break;
        case OPT_WRITE_LOAD: write_load = optarg; break;
        case OPT_PERF_SIZE:
            if (plan_parse_size("--perf-size", optarg, &perf_size) != 0 ||
                perf_size == 0) {
                return 2;
            }
            break;
        case OPT_RAILS:
            rails = strcmp(optarg, "all") == 0 ? 0 : atoi(optarg);
            if (rails < 0 || (rails == 0 && strcmp(optarg, "all") != 0)) {
                fprintf(stderr, PLAN_NAME ": --rails: expected a positive "
                                "number or all (got '%s')\n", optarg);
                return 2;
            }
            break;
        case OPT_TRACE:
            trace = atoi(optarg);
            if (trace < 1 || trace > 64) {
                fprintf(stderr, PLAN_NAME ": --trace-ranks: need 1..64 (got "
                                "'%s')\n", optarg);
                return 2;
            }
            break;
        case OPT_BENCH:
            bench = atoi(optarg);
            if (bench < 1) {
                fprintf(stderr, PLAN_NAME ": --bench: need a positive number "
                                "of builds (got '%s')\n", optarg);
                return 2;
            }
            break;
        case OPT_CALLS: calls = atoi(optarg); break;
        case OPT_CONFIG: config_path = optarg; break;
        case OPT_SCHED: sched = optarg; break;
        case OPT_PLUGIN: plugin = optarg; break;
        case OPT_SCHED_SEED: sched_seed = optarg; break;
        case OPT_RELAY: relay = optarg; break;
        case OPT_RELAY_BUF: relay_buf = optarg; break;
        case OPT_SLOTS: slots = optarg; break;
        case OPT_MAX_TASK: max_task = optarg; break;
        case OPT_HELP:
        case 'h':
            plan_usage(stdout);
            return 0;
        default:
            plan_usage(stderr);
            return 2;
        }
    }
    sim_model_defaults(&model);
    if (model_path != NULL &&
        sim_model_load(model_path, &model, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": --model: %s\n", err);
        return 2;
    }
    if (print_model) {
        sim_model_print(stdout, &model);
        return 0;
    }
    if (optind < argc || (case_path == NULL) == (topology == NULL) ||
        calls < 1) {
        fprintf(stderr, PLAN_NAME ": give exactly one of --case and "
                        "--topology (and no other arguments)\n");
        plan_usage(stderr);
        return 2;
    }

    /* configuration as the library loads it (defaults, the file of
     * --config or RMACOLL_CONFIG, RMACOLL_* variables), then the options */
    if (rmacoll_config_load(config_path, &cfg, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        return 2;
    }
    refexec_opts_init(&o);
    o.scheduler = sched != NULL ? sched : cfg.scheduler;
    o.scheduler_plugin = plugin != NULL ? plugin
                         : cfg.scheduler_plugin[0] ? cfg.scheduler_plugin
                                                   : NULL;
    o.sched_seed = sched_seed != NULL ? strtoull(sched_seed, NULL, 0)
                                      : cfg.scheduler_seed;
    o.relay_enabled = cfg.relay_enabled;
    o.relay_buffer_bytes = cfg.relay_buffer_bytes;
    o.relay_slots = cfg.relay_slots;
    o.max_task_bytes = cfg.max_task_bytes;
    /* the eager paths and direct streams of host calls, as the library
     * reads them (its size parser, core/config) */
    if (rmacoll__config_get_size(&cfg, "eager_max_bytes", &o.eager_max_bytes) !=
        RMACOLL_SUCCESS) {
        o.eager_max_bytes = 0;
    }
    if (rmacoll__config_get_size(&cfg, "node_eager_max_bytes", &o.node_eager_max_bytes) !=
        RMACOLL_SUCCESS) {
        o.node_eager_max_bytes = 0;
    }
    if (rmacoll__config_get_size(&cfg, "relay.direct_min_bytes", &o.direct_min_bytes) !=
        RMACOLL_SUCCESS) {
        o.direct_min_bytes = 0;
    }
    if (relay != NULL) {
        if (strcmp(relay, "on") != 0 && strcmp(relay, "off") != 0) {
            fprintf(stderr, PLAN_NAME ": --relay: expected on or off, got "
                            "'%s'\n", relay);
            return 2;
        }
        o.relay_enabled = strcmp(relay, "on") == 0;
    }
    if ((relay_buf != NULL &&
         plan_parse_size("--relay-buffer", relay_buf, &o.relay_buffer_bytes)) ||
        (max_task != NULL &&
         plan_parse_size("--max-task-bytes", max_task, &o.max_task_bytes))) {
        return 2;
    }
    if (slots != NULL) {
        if (plan_parse_size("--slots", slots, &v) != 0 || v < 1 ||
            v > UINT32_MAX) {
            fprintf(stderr, PLAN_NAME ": --slots: need 1..%u\n", UINT32_MAX);
            return 2;
        }
        o.relay_slots = (uint32_t)v;
    }
    if (o.max_task_bytes == 0 || o.relay_slots == 0) {
        fprintf(stderr, PLAN_NAME ": max_task_bytes and relay slots must be "
                        "positive\n");
        return 2;
    }
    o.ncalls = calls;

    /* the call */
    if (case_path != NULL) {
        if (rmacoll_case_load(case_path, &c, err, sizeof(err)) !=
            RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": %s\n", err);
            return 2;
        }
    } else {
        static int node_of[PLAN_MAX_RANKS], sizes[PLAN_MAX_RANKS];
        int n = 0, nnodes = 0, xn, xg;
        char xc;
        rmacoll_case_dist_t dist;

        if (sscanf(topology, "%dx%d%c", &xn, &xg, &xc) == 2) {
            /* NxG: N nodes of G ranks */
            if (xn < 1 || xg < 1 || (int64_t)xn * xg > PLAN_MAX_RANKS) {
                fprintf(stderr, PLAN_NAME ": --topology %s: need 1..%d ranks "
                                "in all\n", topology, PLAN_MAX_RANKS);
                return 2;
            }
            for (int k = 0; k < xn * xg; k++) {
                node_of[n++] = k / xg;
            }
        } else if (rmacoll_case_parse_topology(topology, node_of,
                                               PLAN_MAX_RANKS, &n) !=
                   RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": --topology: expected ranks per node "
                            "such as 4,4 or 128x8 (got '%s')\n", topology);
            return 2;
        }
        if (rmacoll_case_dist_parse(dist_spec, &dist) != RMACOLL_SUCCESS) {
            fprintf(stderr, PLAN_NAME ": --dist: expected uniform, random, "
                            "zipf:ALPHA or sparse:P (got '%s')\n", dist_spec);
            return 2;
        }
        for (int r = 0; r < n; r++) {
            if (r == 0 || node_of[r] != node_of[r - 1]) {
                sizes[nnodes++] = 0;
            }
            sizes[nnodes - 1]++;
        }
        if (perf_size > 0) {
            /* rmacoll-perf's counts for -b SIZE --seed S: one node for the
             * generator, then the topology (tools/common/perfrun.c) */
            int64_t total = (int64_t)(perf_size / rmacoll_datatype_size(dtype));
            int one = n;
            if (rmacoll_case_random(1, &one, &dist, total / n,
                                    seed * 1000003u + perf_size, dtype, &c) !=
                RMACOLL_SUCCESS) {
                fprintf(stderr, PLAN_NAME ": cannot generate the matrix\n");
                return 2;
            }
            memcpy(c->node_of, node_of, (size_t)n * sizeof(int));
            c->nnodes = node_of[n - 1] + 1;
            snprintf(c->name, sizeof(c->name), "topology %s dist %s "
                     "rmacoll-perf size %" PRIu64 " seed %" PRIu64, topology,
                     dist_spec, perf_size, seed);
        } else {
            if (rmacoll_case_random(nnodes, sizes, &dist, (int64_t)count, seed,
                                    dtype, &c) != RMACOLL_SUCCESS) {
                fprintf(stderr, PLAN_NAME ": cannot generate the matrix\n");
                return 2;
            }
            snprintf(c->name, sizeof(c->name), "topology %s dist %s count %"
                     PRIu64 " seed %" PRIu64, topology, dist_spec, count, seed);
        }
    }
    if (only >= c->nranks || only < -1) {
        fprintf(stderr, PLAN_NAME ": --rank %d: the case has %d ranks\n", only,
                c->nranks);
        rmacoll_case_free(c);
        return 2;
    }
    if (plan_relay_check(c, &o) != 0) {
        rmacoll_case_free(c);
        return 2;
    }
    if (write_load != NULL) {
        /* node-to-node bytes, for RMACOLL_LARGEST_FIRST_LOAD */
        size_t es = rmacoll_datatype_size(c->dtype), n = (size_t)c->nranks;
        size_t nn = (size_t)c->nnodes;
        uint64_t *w = calloc(nn * nn, sizeof(uint64_t));
        FILE *f = w ? fopen(write_load, "w") : NULL;

        if (f == NULL) {
            fprintf(stderr, PLAN_NAME ": --write-load %s: cannot write\n", write_load);
            free(w);
            rmacoll_case_free(c);
            return 2;
        }
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < n; j++) {
                w[(size_t)c->node_of[i] * nn + (size_t)c->node_of[j]] +=
                    (uint64_t)c->send[i * n + j] * es;
            }
        }
        fprintf(f, "nnodes %zu\n", nn);
        for (size_t a = 0; a < nn; a++) {
            for (size_t b = 0; b < nn; b++) {
                fprintf(f, "%" PRIu64 "%c", w[a * nn + b], b + 1 < nn ? ' ' : '\n');
            }
        }
        fclose(f);
        free(w);
        rmacoll_case_free(c);
        return 0;
    }
    if (sim) {
        if (check || bench > 0 || only >= 0) {
            fprintf(stderr, PLAN_NAME ": --sim does not combine with --check, "
                            "--bench or --rank\n");
            rmacoll_case_free(c);
            return 2;
        }
        rc = plan_simulate(c, &o, &model, rails, json, gantt, heat, trace);
        rmacoll_case_free(c);
        return rc;
    }
    if (bench > 0 || (only >= 0 && !check &&
                      (!c->has_mismatch || c->nranks > 4096))) {
        /* one rank only: no executor, no other plans (a case with a
         * mismatch is planned whole, so the failing ranks are named,
         * unless it is too large for that) */
        rc = plan_one_rank(c, &o, only < 0 ? 0 : only, json, bench);
        rmacoll_case_free(c);
        return rc;
    }
    {
        /* data mode allocates every buffer: above 1 GiB go virtual */
        uint64_t total = o.relay_enabled ? o.relay_buffer_bytes * c->nranks : 0;
        size_t es = rmacoll_datatype_size(c->dtype);

        for (size_t k = 0; k < (size_t)c->nranks * c->nranks; k++) {
            total += (uint64_t)(c->send[k] + c->recv[k]) * es;
        }
        o.virtual_mode = virt || total > (1ull << 30);
    }
    st = refexec_create(&o, c->nranks, c->node_of, &ex, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        rmacoll_case_free(c);
        return 2;
    }
    st = refexec_prepare(ex, c, &res);
    if (st != RMACOLL_SUCCESS) {
        /* every rank fails the call; say which ranks saw why */
        fprintf(stderr, PLAN_NAME ": %s: the call fails on every rank with "
                        "%s\n", c->name, rmacoll_status_name(st));
        for (int r = 0; r < c->nranks; r++) {
            const char *m = refexec_plan_errmsg(ex, r);

            if (m[0] != '\0') {
                fprintf(stderr, "  rank %d %s: %s\n", r,
                        st == RMACOLL_ERR_MISMATCH ? "found a count mismatch"
                                                   : "failed",
                        m);
            }
        }
        if (json) {
            printf("{\"case\":");
            json_str(c->name);
            printf(",\"status\":\"%s\",\"errors\":[", rmacoll_status_name(st));
            for (int r = 0, first = 1; r < c->nranks; r++) {
                const char *m = refexec_plan_errmsg(ex, r);

                if (m[0] != '\0') {
                    printf("%s{\"rank\":%d,\"message\":", first ? "" : ",", r);
                    json_str(m);
                    printf("}");
                    first = 0;
                }
            }
            printf("]}\n");
        }
        refexec_destroy(ex);
        rmacoll_case_free(c);
        return 1;
    }

    {
        const rmacoll__plan_t **plans = malloc((size_t)c->nranks * sizeof(*plans));

        for (int r = 0; plans != NULL && r < c->nranks; r++) {
            plans[r] = refexec_plan(ex, r);
        }
        if (plans == NULL ||
            print_plans(plans, refexec_topo(ex), c, &o, only, json) != 0) {
            fprintf(stderr, PLAN_NAME ": out of memory\n");
            free(plans);
            return 2;
        }
        free(plans);
    }

    if (check) {
        for (int k = 0; k < calls && rc == 0; k++) {
            res.call = k;
            if ((k == 0 ? refexec_execute(ex, &res) : refexec_call(ex, c, &res))
                != RMACOLL_SUCCESS) {
                rc = 1;
            }
        }
        if (json) {
            printf(",\"check\":{\"ok\":%s,\"calls\":%" PRIu64 ",\"message\":",
                   rc == 0 ? "true" : "false", res.stats.calls);
            json_str(res.msg);
            printf(",\"puts\":%" PRIu64 ",\"signals\":%" PRIu64
                   ",\"proxy_bytes\":%" PRIu64 ",\"ce_bytes\":%" PRIu64 "}",
                   res.stats.puts, res.stats.signals, res.stats.bytes_proxy,
                   res.stats.bytes_ce);
        } else if (rc == 0) {
            printf("check: ok (%s, %" PRIu64 " calls, %" PRIu64 " puts, %"
                   PRIu64 " signals, proxy %" PRIu64 " B, ce %" PRIu64 " B)\n",
                   o.virtual_mode ? "virtual" : "data", res.stats.calls, res.stats.puts, res.stats.signals,
                   res.stats.bytes_proxy, res.stats.bytes_ce);
        } else {
            printf("check: FAILED: %s\n", res.msg);
        }
    }
    if (json) {
        printf("}\n");
    }
    refexec_destroy(ex);
    rmacoll_case_free(c);
    return rc;
}
