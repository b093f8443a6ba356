/*
 * plan_out.c - rmacoll-plan's output (plan_out.h). Moved out of
 * tools/plan.c as it was (issue 29): the same text and JSON, byte for byte.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_cli.h"
#include "plan_out.h"
#include "planjson.h"

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
void plan_json_str(const char *s)
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

/* The thresholds in effect (0: no such path on this topology), and what
 * the header prints for each: those, else the configured key. */
typedef struct plan_limits {
    uint64_t eager, node_eager, direct, eager_shown, node_shown;
} plan_limits_t;

static void plan_limits(const rmacoll_topo_t *topo, const refexec_opts_t *op,
                        plan_limits_t *l)
{
    rmacoll__plan_paths_t lim;

    plan_paths(topo, op, &lim);
    l->eager = lim.eager_max;
    l->node_eager = lim.node_eager_max;
    l->direct = lim.direct_min;
    l->eager_shown = l->eager ? l->eager : op->eager_max_bytes;
    l->node_shown = l->node_eager ? l->node_eager : op->node_eager_max_bytes;
}

static void print_plans_json(const rmacoll__plan_t *const *plans,
                             const rmacoll_topo_t *topo, const rmacoll_case_t *c,
                             const refexec_opts_t *op, int only,
                             const plan_limits_t *l)
{
    printf("{\"case\":");
    plan_json_str(c->name);
    printf(",\"nranks\":%d,\"nnodes\":%d,\"dtype\":\"%s\","
           "\"config\":{\"scheduler\":",
           c->nranks, topo->nnodes, rmacoll_datatype_name(c->dtype));
    plan_json_str(op->scheduler_plugin ? op->scheduler_plugin : op->scheduler);
    printf(",\"relay\":%s,\"relay_buffer_bytes\":%" PRIu64
           ",\"relay_slots\":%u,\"max_task_bytes\":%" PRIu64
           ",\"min_relay_buffer_bytes\":%" PRIu64 ",\"eager_max_bytes\":%" PRIu64
           ",\"eager\":%s,\"node_eager_max_bytes\":%" PRIu64 ",\"node_eager\":%s,"
           "\"direct_min_bytes\":%" PRIu64 ",\"direct\":%s},"
           "\"status\":\"%s\",\"plans\":[",
           op->relay_enabled ? "true" : "false", op->relay_buffer_bytes,
           op->relay_slots, op->max_task_bytes, plan_min_relay(topo, op),
           l->eager_shown, l->eager ? "true" : "false", l->node_shown,
           l->node_eager ? "true" : "false", op->direct_min_bytes,
           l->direct ? "true" : "false", rmacoll_status_name(RMACOLL_SUCCESS));
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
}

static void print_plans_text(const rmacoll__plan_t *const *plans,
                             const rmacoll_topo_t *topo, const rmacoll_case_t *c,
                             const refexec_opts_t *op, int only,
                             const plan_limits_t *l)
{
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
           l->eager_shown,
           op->eager_max_bytes == 0  ? "eager path off"
           : l->eager                 ? "eager path planned for host calls"
                                      : "no eager path on this topology",
           l->node_shown,
           op->node_eager_max_bytes == 0  ? "node eager path off"
           : l->node_eager                 ? "node eager path planned for host calls"
                                           : "no node eager path on this topology",
           op->direct_min_bytes,
           op->direct_min_bytes == 0 ? "direct streams off"
           : l->direct ? "direct streams planned for host calls, where every rank of a "
                         "node shares one network interface"
                       : "no direct streams on this topology");
    for (int r = 0; r < c->nranks; r++) {
        if (only < 0 || r == only) {
            rmacoll__plan_print_text(stdout, plans[r], topo);
        }
    }
}

int plan_print_plans(const rmacoll__plan_t *const *plans,
                     const rmacoll_topo_t *topo, const rmacoll_case_t *c,
                     const refexec_opts_t *op, int only, int json)
{
    plan_totals_t tot;
    plan_limits_t l;

    plan_limits(topo, op, &l);
    if (plan_totals(plans, c->nranks, only, &tot) != 0) {
        plan_totals_free(&tot);
        return -1;
    }
    if (json) {
        print_plans_json(plans, topo, c, op, only, &l);
        print_totals_json(&tot, c->nranks);
    } else {
        print_plans_text(plans, topo, c, op, only, &l);
        print_totals_text(&tot, c->nranks);
    }
    plan_totals_free(&tot);
    return 0;
}

void plan_print_bench(const rmacoll_case_t *c, const rmacoll_topo_t *topo,
                      const refexec_opts_t *op, int r,
                      const rmacoll__plan_t *plan, int bench, double best,
                      double med, int json)
{
    if (json) {
        printf("{\"bench\":{\"nranks\":%d,\"nnodes\":%d,\"rank\":%d,"
               "\"scheduler\":\"%s\",\"tasks\":%zu,\"batches\":%zu,"
               "\"builds\":%d,\"us_per_build_min\":%.3f,"
               "\"us_per_build_median\":%.3f,\"us_per_task\":%.4f}}\n",
               c->nranks, topo->nnodes, r, op->scheduler, plan->ntasks,
               plan->nbatches, bench, best, med,
               plan->ntasks ? med / (double)plan->ntasks : 0.0);
    } else {
        printf("bench: rank %d of %d ranks on %d nodes, scheduler %s: "
               "%zu tasks, %zu batches; %.1f us per build (median of 5 x "
               "%d; min %.1f), %.3f us per task\n",
               r, c->nranks, topo->nnodes, op->scheduler, plan->ntasks,
               plan->nbatches, med, bench, best,
               plan->ntasks ? med / (double)plan->ntasks : 0.0);
    }
}

void plan_print_sim_head(const rmacoll_case_t *c, const refexec_opts_t *op,
                         const sim_model_t *model, uint64_t min_relay, int json)
{
    if (json) {
        printf("{\"case\":");
        plan_json_str(c->name);
        printf(",\"nranks\":%d,\"model\":{\"name\":", c->nranks);
        plan_json_str(model->name);
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
}

void plan_print_sim_error(const char *name, int k, rmacoll_status_t st,
                          const char *msg, int json)
{
    if (json) {
        printf("%s{\"scheduler\":", k ? "," : "");
        plan_json_str(name);
        printf(",\"status\":\"%s\",\"message\":", rmacoll_status_name(st));
        plan_json_str(msg);
        printf("}");
    }
}

static void plan_print_sim_json(const char *name, int k, const sim_result_t *r)
{
    printf("%s{\"scheduler\":", k ? "," : "");
    plan_json_str(name);
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
           r->makespan * 1e6, r->bound * 1e6, r->bound_nic * 1e6,
           r->bound_nvl * 1e6, r->ratio, r->nrounds, r->nranks_sim,
           r->rails_sim, r->rails, r->ntasks, r->nflows, r->nevents,
           r->max_nic_bytes, r->peak_round_link_bytes, r->peak_round,
           r->peak_round_rank, sim_class_name(r->peak_round_class),
           r->busiest_rank, sim_class_name(r->busiest_class),
           r->busiest_busy * 1e6, r->busiest_bytes, r->cp_nic * 1e6,
           r->cp_ce * 1e6, r->cp_lat * 1e6, r->cp_host * 1e6,
           r->cp_queue * 1e6, r->cp_steps, r->cp_hops, r->cp_last_rank,
           r->plan_s, r->sim_s);
}

void plan_print_sim_row(const char *name, int k, int last,
                        const sim_result_t *res, const sim_model_t *model,
                        int json)
{
    char link[64];

    if (json) {
        plan_print_sim_json(name, k, res);
        return;
    }
    snprintf(link, sizeof(link), "%d/%s", res->busiest_rank,
             sim_class_name(res->busiest_class));
    printf("%-12s %12.1f %11.1f %7.3f %7d %14" PRIu64 " %18s %9.1f  "
           "%.1f/%.1f/%.1f/%.1f/%.1f (%d, %d)\n", name,
           res->makespan * 1e6, res->bound * 1e6, res->ratio, res->nrounds,
           res->peak_round_link_bytes, link, res->busiest_busy * 1e6,
           res->cp_nic * 1e6, res->cp_ce * 1e6, res->cp_lat * 1e6,
           res->cp_host * 1e6, res->cp_queue * 1e6, res->cp_steps, res->cp_hops);
    if (last) {
        printf("# bound = max(most loaded NIC direction %.0f B / %.1f GB/s, "
               "NVLink); %d of %d rails simulated (%d ranks); planning "
               "%.2f s, simulation %.2f s (last scheduler)\n",
               res->max_nic_bytes, model->nic_bw / 1e9, res->rails_sim,
               res->rails, res->nranks_sim, res->plan_s, res->sim_s);
    }
}

void plan_print_failure(const rmacoll_case_t *c, const refexec_t *ex,
                        rmacoll_status_t st, int json)
{
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
        plan_json_str(c->name);
        printf(",\"status\":\"%s\",\"errors\":[", rmacoll_status_name(st));
        for (int r = 0, first = 1; r < c->nranks; r++) {
            const char *m = refexec_plan_errmsg(ex, r);

            if (m[0] != '\0') {
                printf("%s{\"rank\":%d,\"message\":", first ? "" : ",", r);
                plan_json_str(m);
                printf("}");
                first = 0;
            }
        }
        printf("]}\n");
    }
}

void plan_print_check(int rc, const refexec_result_t *res, int virtual_mode,
                      int json)
{
    if (json) {
        printf(",\"check\":{\"ok\":%s,\"calls\":%" PRIu64 ",\"message\":",
               rc == 0 ? "true" : "false", res->stats.calls);
        plan_json_str(res->msg);
        printf(",\"puts\":%" PRIu64 ",\"signals\":%" PRIu64
               ",\"proxy_bytes\":%" PRIu64 ",\"ce_bytes\":%" PRIu64 "}",
               res->stats.puts, res->stats.signals, res->stats.bytes_proxy,
               res->stats.bytes_ce);
    } else if (rc == 0) {
        printf("check: ok (%s, %" PRIu64 " calls, %" PRIu64 " puts, %"
               PRIu64 " signals, proxy %" PRIu64 " B, ce %" PRIu64 " B)\n",
               virtual_mode ? "virtual" : "data", res->stats.calls, res->stats.puts,
               res->stats.signals, res->stats.bytes_proxy, res->stats.bytes_ce);
    } else {
        printf("check: FAILED: %s\n", res->msg);
    }
}

int plan_write_load(const rmacoll_case_t *c, const char *path)
{
    size_t es = rmacoll_datatype_size(c->dtype), n = (size_t)c->nranks;
    size_t nn = (size_t)c->nnodes;
    uint64_t *w = calloc(nn * nn, sizeof(uint64_t));
    FILE *f = w ? fopen(path, "w") : NULL;

    if (f == NULL) {
        fprintf(stderr, PLAN_NAME ": --write-load %s: cannot write\n", path);
        free(w);
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
    return 0;
}
