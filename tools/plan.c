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
 *
 * Options: tools/common/plan_cli.c; output: tools/common/plan_out.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "cases.h"
#include "core/plan/plan.h"
#include "core/plan/plan_config.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "plan_cli.h"
#include "plan_out.h"
#include "planin.h"
#include "rmacoll.h"
#include "refexec.h"
#include "sim.h"

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

/* One rank's plan and what it was built from (plan_one_rank). */
typedef struct plan_rank {
    rmacoll_topo_t *topo;
    rmacoll__sched_t sched;
    rmacoll__plan_cfg_t cfg;
    rmacoll__sigstate_t *st0, *st1;
    rmacoll__plan_t plan;
    planin_ctx_t ctx;
    planin_t pi;
} plan_rank_t;

static void plan_rank_close(plan_rank_t *pr)
{
    rmacoll__plan_fini(&pr->plan);
    rmacoll__sigstate_destroy(pr->st0);
    rmacoll__sigstate_destroy(pr->st1);
    planin_fini(&pr->pi);
    planin_ctx_destroy(&pr->ctx);
    rmacoll__sched_close(&pr->sched);
    rmacoll__topo_destroy(pr->topo);
}

/* Builds rank r's plan (planin.h assembles its input from the matrix):
 * 0, or the exit status with the message printed (2, or 1 when the plan
 * fails). pr is to be closed in any case. */
static int plan_rank_open(plan_rank_t *pr, const rmacoll_case_t *c,
                          const refexec_opts_t *op, int r)
{
    rmacoll__plan_paths_t lim;
    char err[512];
    rmacoll_status_t st;

    memset(pr, 0, sizeof(*pr));
    plan_pcfg(op, &pr->cfg);
    rmacoll__plan_init(&pr->plan);
    planin_init(&pr->pi);
    if (rmacoll__topo_create(c->nranks, c->node_of, &pr->topo) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": cannot make the topology\n");
        return 2;
    }
    st = rmacoll__sched_open(op->scheduler, op->scheduler_plugin, pr->topo,
                             op->sched_seed, &pr->sched, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        return 2;
    }
    if (planin_ctx_create(&pr->ctx, c, pr->topo, &pr->cfg, &pr->sched, 1) != RMACOLL_SUCCESS ||
        planin_fill(&pr->pi, &pr->ctx, r) != RMACOLL_SUCCESS ||
        rmacoll__sigstate_create(pr->topo, &pr->cfg, r, &pr->st0) != RMACOLL_SUCCESS ||
        rmacoll__sigstate_create(pr->topo, &pr->cfg, r, &pr->st1) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": out of memory\n");
        return 2;
    }
    plan_paths(pr->topo, op, &lim);
    if (planin_paths(&pr->pi, &pr->ctx, r, &lim) != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": out of memory\n");
        return 2;
    }
    st = rmacoll__plan_build(&pr->pi.in, pr->st0, pr->st1, &pr->plan);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s: rank %d's plan fails with %s: %s\n",
                c->name, r, rmacoll_status_name(st), pr->plan.errmsg);
        return 1;
    }
    return 0;
}

/* Times `bench` builds of the plan, 5 times, and prints the minimum and
 * median per build. The plan object and signal state are reused across
 * builds, as a communicator reuses them across calls. */
static void plan_rank_bench(plan_rank_t *pr, const rmacoll_case_t *c,
                            const refexec_opts_t *op, int r, int bench,
                            int json)
{
    double t[5];

    for (int k = 0; k < 5; k++) {
        double t0 = plan_now_us();
        for (int i = 0; i < bench; i++) {
            rmacoll__plan_build(&pr->pi.in, pr->st0, pr->st1, &pr->plan);
        }
        t[k] = (plan_now_us() - t0) / bench;
    }
    qsort(t, 5, sizeof(t[0]), cmp_double);
    plan_print_bench(c, pr->topo, op, r, &pr->plan, bench, t[0], t[2], json);
}

/*
 * Plans only rank r, then prints it like the all-ranks path, or with
 * bench > 0 times `bench` builds of it (plan_rank_bench).
 */
static int plan_one_rank(const rmacoll_case_t *c, const refexec_opts_t *op,
                         int r, int json, int bench)
{
    plan_rank_t pr;
    const rmacoll__plan_t **plans;
    int rc = plan_rank_open(&pr, c, op, r);

    if (rc != 0) {
        plan_rank_close(&pr);
        return rc;
    }
    if (bench > 0) {
        plan_rank_bench(&pr, c, op, r, bench, json);
        plan_rank_close(&pr);
        return 0;
    }
    plans = calloc((size_t)c->nranks, sizeof(*plans));
    if (plans == NULL) {
        fprintf(stderr, PLAN_NAME ": out of memory\n");
        plan_rank_close(&pr);
        return 2;
    }
    plans[r] = &pr.plan;
    rc = plan_print_plans(plans, pr.topo, c, op, r, json) != 0 ? 2 : 0;
    free(plans);
    if (json) {
        printf("}\n");
    }
    plan_rank_close(&pr);
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

/* The schedulers of --sim: op's, or every built-in one (--scheduler all);
 * their number. */
static int sim_names(const refexec_opts_t *op, const char **names, int max)
{
    int nn = 0;

    if (op->scheduler_plugin == NULL && strcmp(op->scheduler, "all") == 0) {
        for (int k = 0; rmacoll__builtin_schedulers[k] != NULL && nn < max; k++) {
            names[nn++] = rmacoll__builtin_schedulers[k]->name;
        }
    } else {
        names[nn++] = op->scheduler;
    }
    return nn;
}

/* Simulates scheduler name (the k-th of nn) and prints its row: 0, or 1
 * when the simulation fails. */
static int sim_one(const rmacoll_case_t *c, const plan_cli_t *cli,
                   const char *name, int k, int nn)
{
    const refexec_opts_t *op = &cli->o;
    const char *gantt = cli->gantt, *heat = cli->heat;
    sim_opts_t so;
    sim_result_t res;
    char gb[1024], hb[1024];
    rmacoll_status_t st;

    sim_opts_init(&so);
    so.scheduler = name;
    so.scheduler_plugin = op->scheduler_plugin;
    so.sched_seed = op->sched_seed;
    so.cfg.relay_enabled = op->relay_enabled;
    so.cfg.relay_buffer_bytes = op->relay_buffer_bytes;
    so.cfg.relay_slots = op->relay_slots;
    so.cfg.max_task_bytes = op->max_task_bytes;
    {
        rmacoll__plan_cfg_t lib; /* merge_max_puts as the library reads it */
        rmacoll__plan_cfg_from(&cli->cfg, &lib);
        so.cfg.merge_max_puts = lib.merge_max_puts;
    }
    /* small CE submissions as nvlink_kernel launches, as the library binds */
    if (strcmp(cli->cfg.intra_node, "auto") == 0) {
        so.kernel_max_bytes = cli->cfg.nvlink_kernel_threshold;
    } else if (strcmp(cli->cfg.intra_node, "nvlink_kernel") == 0) {
        so.kernel_max_bytes = UINT64_MAX;
    }
    so.rails = cli->rails;
    so.trace_ranks = cli->trace;
    so.gantt_svg = (nn == 1 || (gantt && strstr(gantt, "%s")))
                       ? sim_path(gb, sizeof(gb), gantt, name) : NULL;
    so.heat_svg = (nn == 1 || (heat && strstr(heat, "%s")))
                      ? sim_path(hb, sizeof(hb), heat, name) : NULL;
    st = sim_run(c, &cli->model, &so, &res);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": --sim, scheduler %s: %s\n", name, res.msg);
        plan_print_sim_error(name, k, st, res.msg, cli->json);
        return 1;
    }
    plan_print_sim_row(name, k, k == nn - 1, &res, &cli->model, cli->json);
    fflush(stdout);
    return 0;
}

/*
 * --sim: replays the plans of one scheduler, or of every built-in one
 * (--scheduler all), over the fabric model and prints one row each.
 */
static int plan_simulate(const rmacoll_case_t *c, const plan_cli_t *cli)
{
    const refexec_opts_t *op = &cli->o;
    const char *names[64];
    const char *gantt = cli->gantt, *heat = cli->heat;
    int nn, rc = 0;
    uint64_t min_relay = 0;
    rmacoll_topo_t *topo = NULL;

    if (rmacoll__topo_create(c->nranks, c->node_of, &topo) == RMACOLL_SUCCESS) {
        min_relay = plan_min_relay(topo, op);
        rmacoll__topo_destroy(topo);
    }
    nn = sim_names(op, names, 64);
    if (nn > 1 && ((gantt && !strstr(gantt, "%s")) || (heat && !strstr(heat, "%s")))) {
        fprintf(stderr, PLAN_NAME ": --sim with --scheduler all writes one picture per "
                "scheduler: put %%s (the scheduler's name) in the --gantt/--heat file name\n");
        return 2;
    }
    plan_print_sim_head(c, op, &cli->model, min_relay, cli->json);
    for (int k = 0; k < nn; k++) {
        if (sim_one(c, cli, names[k], k, nn) != 0) {
            rc = 1;
        }
    }
    if (cli->json) {
        printf("]}\n");
    }
    return rc;
}

/* Runs --check's calls on the executor: 0, or 1 when one fails. */
static int plan_check(refexec_t *ex, const rmacoll_case_t *c, int calls,
                      refexec_result_t *res)
{
    int rc = 0;

    for (int k = 0; k < calls && rc == 0; k++) {
        res->call = k;
        if ((k == 0 ? refexec_execute(ex, res) : refexec_call(ex, c, res))
            != RMACOLL_SUCCESS) {
            rc = 1;
        }
    }
    return rc;
}

/* Every rank's plan through the reference executor (refexec.h): prints
 * the plans, then with --check runs the calls and prints the verdict. */
static int plan_exec(const rmacoll_case_t *c, const plan_cli_t *cli)
{
    refexec_opts_t o = cli->o;
    refexec_t *ex = NULL;
    refexec_result_t res;
    const rmacoll__plan_t **plans;
    char err[512];
    int rc = 0;
    /* data mode allocates every buffer: above 1 GiB go virtual */
    uint64_t total = o.relay_enabled ? o.relay_buffer_bytes * c->nranks : 0;
    size_t es = rmacoll_datatype_size(c->dtype);
    rmacoll_status_t st;

    for (size_t k = 0; k < (size_t)c->nranks * c->nranks; k++) {
        total += (uint64_t)(c->send[k] + c->recv[k]) * es;
    }
    o.virtual_mode = cli->virt || total > (1ull << 30);
    st = refexec_create(&o, c->nranks, c->node_of, &ex, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PLAN_NAME ": %s\n", err);
        return 2;
    }
    st = refexec_prepare(ex, c, &res);
    if (st != RMACOLL_SUCCESS) {
        plan_print_failure(c, ex, st, cli->json);
        refexec_destroy(ex);
        return 1;
    }
    plans = malloc((size_t)c->nranks * sizeof(*plans));
    for (int r = 0; plans != NULL && r < c->nranks; r++) {
        plans[r] = refexec_plan(ex, r);
    }
    if (plans == NULL ||
        plan_print_plans(plans, refexec_topo(ex), c, &o, cli->only, cli->json) != 0) {
        fprintf(stderr, PLAN_NAME ": out of memory\n");
        free(plans);
        refexec_destroy(ex);
        return 2;
    }
    free(plans);
    if (cli->check) {
        rc = plan_check(ex, c, cli->calls, &res);
        plan_print_check(rc, &res, o.virtual_mode, cli->json);
    }
    if (cli->json) {
        printf("}\n");
    }
    refexec_destroy(ex);
    return rc;
}

/* What the options ask of the case: its node loads, the simulation, one
 * rank's plan or benchmark, or every rank's plan (checked). */
static int plan_run(const rmacoll_case_t *c, const plan_cli_t *cli)
{
    int only = cli->only;

    if (only >= c->nranks || only < -1) {
        fprintf(stderr, PLAN_NAME ": --rank %d: the case has %d ranks\n", only,
                c->nranks);
        return 2;
    }
    if (plan_relay_check(c, &cli->o) != 0) {
        return 2;
    }
    if (cli->write_load != NULL) {
        return plan_write_load(c, cli->write_load);
    }
    if (cli->sim) {
        if (cli->check || cli->bench > 0 || only >= 0) {
            fprintf(stderr, PLAN_NAME ": --sim does not combine with --check, "
                            "--bench or --rank\n");
            return 2;
        }
        return plan_simulate(c, cli);
    }
    if (cli->bench > 0 || (only >= 0 && !cli->check &&
                           (!c->has_mismatch || c->nranks > 4096))) {
        /* one rank only: no executor, no other plans (a case with a
         * mismatch is planned whole, so the failing ranks are named,
         * unless it is too large for that) */
        return plan_one_rank(c, &cli->o, only < 0 ? 0 : only, cli->json, cli->bench);
    }
    return plan_exec(c, cli);
}

int main(int argc, char **argv)
{
    static plan_cli_t cli;
    rmacoll_case_t *c = NULL;
    int rc = plan_cli_parse(argc, argv, &cli);

    if (rc >= 0) {
        return rc;
    }
    rc = plan_cli_case(&cli, &c);
    if (rc != 0) {
        return rc;
    }
    rc = plan_run(c, &cli);
    rmacoll_case_free(c);
    return rc;
}
