/*
 * perfjson.c - rank 0's --json documents of rmacoll-perf and the MPI
 * baseline, built with cJSON (tjson.h): the sweep (one row per size) and
 * the --gemm result. Members and number formats as docs/perf.md shows
 * them; printed formatted.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_internal.h"
#include "tjson.h"

extern char **environ;   /* -J's "env", as nccl-tests' envp */

/* The backend's configuration (a JSON object's members, "" = none) under
 * "config". */
static void perf_json_config(cJSON *doc, const rmacoll_perf_backend_t *be)
{
    const char *members = be->json_config ? be->json_config : "";
    size_t len = strlen(members) + 3;
    char *text = malloc(len);
    cJSON *cfg = NULL;

    if (text != NULL) {
        snprintf(text, len, "{%s}", members);
        cfg = cJSON_Parse(text);
        free(text);
    }
    cJSON_AddItemToObject(doc, "config", cfg != NULL ? cfg : cJSON_CreateObject());
}

/* One collective's figures of one size (the primary's at the top of a
 * row, the baseline's under "baseline"). */
static void perf_json_figures(cJSON *o, const perf_row_t *w)
{
    tjson_num(o, "time_us", "%.3f", w->time_us);
    tjson_num(o, "time_min_us", "%.3f", w->time_min_us);
    tjson_num(o, "max_rank_bytes", "%.0f", w->max_bytes);
    tjson_num(o, "algbw_gbs", "%.6f", w->algbw);
    tjson_num(o, "busbw_gbs", "%.6f", w->busbw);
    tjson_num(o, "wrong", "%.0f", w->wrong);
}

/* One object per size: the primary's fields at the top level (as without a
 * baseline), the baseline's under "baseline"; "in_place" is null (not
 * supported). */
static cJSON *perf_json_rows(const perf_run_t *r)
{
    cJSON *rows = cJSON_CreateArray();

    for (int k = 0; k < r->nrows && rows != NULL; k++) {
        const perf_row_t *w = &r->rows[2 * k];
        const perf_row_t *bl = &r->rows[2 * k + 1];
        cJSON *o = cJSON_CreateObject();

        if (o == NULL)
            break;
        tjson_u64(o, "size", w->size);
        tjson_u64(o, "count", w->count);
        tjson_str(o, "type", perf_dtype_name(w->dtype));
        perf_json_figures(o, w);
        cJSON_AddNullToObject(o, "in_place");
        if (r->s.ncoll > 1) {
            cJSON *b = cJSON_AddObjectToObject(o, "baseline");

            if (b != NULL) {
                tjson_str(b, "coll", r->s.be->baseline_name);
                perf_json_figures(b, bl);
            }
            tjson_num(o, "ratio_busbw", "%.6f", bl->busbw > 0 ? w->busbw / bl->busbw : 0.0);
        }
        cJSON_AddItemToArray(rows, o);
    }
    return rows;
}

/* The --json document (rows under "rows" when with_rows); NULL when out
 * of memory. */
static cJSON *perf_json_sweep_doc(const perf_run_t *r, int rc, int with_rows)
{
    const perf_state_t *s = &r->s;
    const rmacoll_perf_opts_t *o = s->o;
    const rmacoll_perf_backend_t *be = s->be;
    cJSON *doc = cJSON_CreateObject();
    cJSON *nodes;

    if (doc == NULL)
        return NULL;
    tjson_str(doc, "tool", be->name);
    tjson_str(doc, "collective", "alltoallv");
    tjson_str(doc, "launch", be->launch ? be->launch : "");
    cJSON_AddNumberToObject(doc, "nranks", s->n);
    nodes = cJSON_AddArrayToObject(doc, "nodes");
    for (int k = 0; k < r->nnodes && nodes != NULL; k++)
        tjson_push_i64(nodes, r->node_sizes[k]);
    cJSON_AddBoolToObject(doc, "nodes_contiguous", r->contig);
    tjson_str(doc, "dist", o->dist);
    tjson_u64(doc, "seed", o->seed);
    tjson_str(doc, "dtype", o->dtype_all ? "all" : perf_dtype_name(r->dtype));
    cJSON_AddNumberToObject(doc, "iters", o->iters);
    cJSON_AddNumberToObject(doc, "warmup", o->warmup);
    cJSON_AddNumberToObject(doc, "agg_iters", o->agg_iters);
    cJSON_AddNumberToObject(doc, "graph_launches", o->graph_launches);
    tjson_str(doc, "average", perf_average_name(o->average));
    cJSON_AddBoolToObject(doc, "check", o->check != 0);
    cJSON_AddNumberToObject(doc, "check_iters", o->check_every ? o->iters : o->check);
    cJSON_AddBoolToObject(doc, "check_every", o->check_every != 0);
    tjson_str(doc, "memory", s->dev ? "cuda" : "host");
    cJSON_AddNumberToObject(doc, "local_register", o->local_register);
    tjson_str(doc, "host_alloc", perf_host_alloc_name(o, be));
    tjson_str(doc, "timing", s->dev && !o->cputime ? "cuda_events" : "host_clock");
    tjson_str(doc, "baseline", s->ncoll > 1 ? be->baseline_name : "none");
    tjson_str(doc, "status", rc == 0 ? "ok" : rc == 2 ? "wrong" : "error");
    perf_json_config(doc, be);
    if (with_rows)
        cJSON_AddItemToObject(doc, "rows", perf_json_rows(r));
    tjson_num(doc, "avg_busbw_gbs", "%.6f", r->nbw ? r->bw_sum / r->nbw : 0.0);
    if (s->ncoll > 1) {
        tjson_num(doc, "baseline_avg_busbw_gbs", "%.6f",
                  r->nrows ? r->bw_base_sum / r->nrows : 0.0);
        tjson_num(doc, "avg_ratio_busbw", "%.6f", r->nratio ? r->ratio_sum / r->nratio : 0.0);
    }
    return doc;
}

void perf_json_sweep(const perf_run_t *r, int rc, FILE *json)
{
    cJSON *doc = perf_json_sweep_doc(r, rc, 1);

    if (doc != NULL)
        tjson_print(json, doc, 1, 1);
}

/* ---- -J: nccl-tests' layout (src/util.cu of nccl-tests: version 2) ---- */

void perf_format_now(char *buf, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;

    if (localtime_r(&now, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, len, "1970-01-01 00:00:00");
}

/* nccl-tests writes its booleans as the strings "true" and "false". */
static void perf_nccl_bool(cJSON *o, const char *key, int v)
{
    tjson_str(o, key, v ? "true" : "false");
}

/* config.devices: the "#  Rank" lines read back as nccl-tests'
 * parseRankInfo reads them. */
static void perf_nccl_devices(cJSON *cfg, const char *lines)
{
    cJSON *devs = cJSON_AddArrayToObject(cfg, "devices");

    for (const char *p = lines; p != NULL && *p != '\0' && devs != NULL;) {
        int rank = 0, group = 0, pid = 0, device = 0;
        char host[256] = "", hex[128] = "", info[512] = "";
        const char *nl = strchr(p, '\n');
        cJSON *d;

        if (sscanf(p, "#  Rank %d Group %d Pid %d on %255s device %d [%127[^]]] %511[^\n]",
                   &rank, &group, &pid, host, &device, hex, info) == 7 &&
            (d = cJSON_CreateObject()) != NULL) {
            cJSON_AddNumberToObject(d, "rank", rank);
            cJSON_AddNumberToObject(d, "group", group);
            cJSON_AddNumberToObject(d, "pid", pid);
            tjson_str(d, "hostname", host);
            cJSON_AddNumberToObject(d, "device", device);
            tjson_str(d, "device_hex", hex);
            tjson_str(d, "device_info", info);
            cJSON_AddItemToArray(devs, d);
        }
        p = nl != NULL ? nl + 1 : NULL;
    }
}

static void perf_nccl_config(cJSON *doc, const perf_run_t *r)
{
    const rmacoll_perf_opts_t *o = r->s.o;
    cJSON *cfg = cJSON_AddObjectToObject(doc, "config");

    if (cfg == NULL)
        return;
    cJSON_AddNumberToObject(cfg, "nthreads", 1);
    cJSON_AddNumberToObject(cfg, "ngpus", 1);
    tjson_u64(cfg, "minimum_bytes", o->minbytes);
    tjson_u64(cfg, "maximum_bytes", o->maxbytes);
    if (o->stepbytes > 0)
        tjson_u64(cfg, "step_bytes", o->stepbytes);
    else if (o->stepfactor == floor(o->stepfactor))
        tjson_num(cfg, "step_factor", "%.0f", o->stepfactor);
    else
        tjson_num(cfg, "step_factor", "%g", o->stepfactor);
    cJSON_AddNumberToObject(cfg, "warmup_iters", o->warmup);
    cJSON_AddNumberToObject(cfg, "iterations", o->iters);
    cJSON_AddNumberToObject(cfg, "aggregated_iterations", o->agg_iters);
    cJSON_AddNumberToObject(cfg, "validation", o->check);
    cJSON_AddNumberToObject(cfg, "graph", o->graph_launches);
    perf_nccl_bool(cfg, "blocking_collectives", o->blocking);
    perf_nccl_bool(cfg, "per_iter_timing", 0);
    perf_nccl_bool(cfg, "parallel_init", 0);
    perf_nccl_devices(cfg, r->devlines);
}

/* One variant's figures ("out_of_place"); nwrong null when not checked. */
static void perf_nccl_variant(cJSON *row, const perf_run_t *r, const perf_row_t *w)
{
    const rmacoll_perf_opts_t *o = r->s.o;
    cJSON *v = cJSON_AddObjectToObject(row, "out_of_place");

    if (v == NULL)
        return;
    tjson_num(v, o->cputime ? "cpu_time" : "time", "%.6f", w->time_us);
    tjson_num(v, "alg_bw", "%.6f", w->algbw);
    tjson_num(v, "bus_bw", "%.6f", w->busbw);
    if (o->check)
        tjson_num(v, "nwrong", "%.6f", w->wrong);
    else
        cJSON_AddNullToObject(v, "nwrong");
}

static cJSON *perf_nccl_results(const perf_run_t *r)
{
    const perf_state_t *s = &r->s;
    cJSON *rows = cJSON_CreateArray();

    for (int k = 0; k < r->nrows && rows != NULL; k++) {
        const perf_row_t *w = &r->rows[2 * k];
        const perf_row_t *bl = &r->rows[2 * k + 1];
        cJSON *o = cJSON_CreateObject(), *x;
        char root[16];

        if (o == NULL)
            break;
        snprintf(root, sizeof(root), "%6i", -1);   /* nccl-tests: the printed root */
        tjson_u64(o, "size", w->size);
        tjson_u64(o, "count", w->count);
        tjson_str(o, "type", rmacoll_perf_type_name(w->dtype));
        tjson_str(o, "redop", "none");
        tjson_str(o, "root", root);
        perf_nccl_variant(o, r, w);
        cJSON_AddNullToObject(o, "in_place");   /* not measured */
        cJSON_AddNumberToObject(o, "actual_iterations", s->o->iters);
        tjson_str(o, "experiment_name", "");
        x = cJSON_AddObjectToObject(o, "rmacoll");
        if (x != NULL) {
            perf_json_figures(x, w);
            if (s->ncoll > 1) {
                cJSON *b = cJSON_AddObjectToObject(x, "baseline");

                if (b != NULL) {
                    tjson_str(b, "coll", s->be->baseline_name);
                    perf_json_figures(b, bl);
                }
                tjson_num(x, "ratio_busbw", "%.6f",
                          bl->busbw > 0 ? w->busbw / bl->busbw : 0.0);
            }
        }
        cJSON_AddItemToArray(rows, o);
    }
    return rows;
}

void perf_json_nccl(const perf_run_t *r, int rc, FILE *json)
{
    const rmacoll_perf_opts_t *o = r->s.o;
    cJSON *doc = cJSON_CreateObject(), *list, *x;
    char now[32];

    if (doc == NULL)
        return;
    cJSON_AddNumberToObject(doc, "version", 2);
    tjson_str(doc, "start_time", r->start_time);
    list = cJSON_AddArrayToObject(doc, "args");
    for (int i = 0; i < o->argc && list != NULL; i++)
        cJSON_AddItemToArray(list, cJSON_CreateString(o->argv[i]));
    list = cJSON_AddArrayToObject(doc, "env");
    for (char **e = environ; e != NULL && *e != NULL && list != NULL; e++)
        cJSON_AddItemToArray(list, cJSON_CreateString(*e));
    cJSON_AddNumberToObject(doc, "nccl_version", 0);   /* no NCCL in this collective */
    perf_nccl_config(doc, r);
    cJSON_AddItemToObject(doc, "results", perf_nccl_results(r));
    x = cJSON_AddObjectToObject(doc, "out_of_bounds");
    if (x != NULL) {
        tjson_num(x, "count", "%.0f", r->wrong_total);
        perf_nccl_bool(x, "okay", r->wrong_total == 0);
    }
    x = cJSON_AddObjectToObject(doc, "average_bus_bandwidth");
    if (x != NULL) {
        tjson_num(x, "bandwidth", "%.6f", r->nbw ? r->bw_sum / r->nbw : 0.0);
        tjson_str(x, "okay", "unchecked");
    }
    list = cJSON_AddArrayToObject(doc, "errors");
    if (list != NULL && rc != 0 && rc != 2)
        cJSON_AddItemToArray(list, cJSON_CreateString(
            "a rank failed: see the ranks' messages on stderr"));
    perf_format_now(now, sizeof(now));
    tjson_str(doc, "end_time", now);
    /* rmacoll's own run description (--json's members but "rows") */
    x = perf_json_sweep_doc(r, rc, 0);
    if (x != NULL)
        cJSON_AddItemToObject(doc, "rmacoll", x);
    tjson_print(json, doc, 1, 1);
}

void perf_json_gemm(const perf_state_t *s, rmacoll_datatype_t dtype, uint64_t size,
                    double per_ms, double tflops, const perf_gemm_res_t *res,
                    const char *const *names, FILE *json)
{
    const rmacoll_perf_opts_t *o = s->o;
    const rmacoll_perf_backend_t *be = s->be;
    cJSON *doc = cJSON_CreateObject();
    cJSON *gemm, *results;

    if (doc == NULL)
        return;
    tjson_str(doc, "tool", be->name);
    tjson_str(doc, "mode", "gemm");
    tjson_str(doc, "launch", be->launch ? be->launch : "");
    cJSON_AddNumberToObject(doc, "nranks", s->n);
    tjson_str(doc, "dist", o->dist);
    tjson_u64(doc, "seed", o->seed);
    tjson_str(doc, "dtype", perf_dtype_name(dtype));
    tjson_u64(doc, "size", size);
    cJSON_AddNumberToObject(doc, "iters", o->iters);
    cJSON_AddNumberToObject(doc, "warmup", o->warmup);
    tjson_str(doc, "memory", "cuda");
    cJSON_AddNumberToObject(doc, "local_register", 0);
    tjson_str(doc, "baseline", s->ncoll > 1 ? be->baseline_name : "none");
    tjson_str(doc, "status", "ok");
    perf_json_config(doc, be);
    gemm = cJSON_AddObjectToObject(doc, "gemm");
    if (gemm != NULL) {
        cJSON_AddNumberToObject(gemm, "n", o->gemm_n);
        tjson_str(gemm, "dtype", "bfloat16");
        tjson_str(gemm, "compute", "float32");
        cJSON_AddNumberToObject(gemm, "iters", o->gemm_iters);
        tjson_num(gemm, "alone_ms", "%.6f", per_ms);
        tjson_num(gemm, "alone_tflops", "%.3f", tflops);
    }
    results = cJSON_AddArrayToObject(doc, "results");
    for (int k = 0; k < s->ncoll && results != NULL; k++) {
        const perf_gemm_res_t *x = &res[k];
        cJSON *e = cJSON_CreateObject();

        if (e == NULL)
            break;
        tjson_str(e, "coll", names[k]);
        tjson_num(e, "gemm_alone_ms", "%.6f", x->alone_us / o->gemm_iters / 1e3);
        tjson_num(e, "gemm_ms", "%.6f", x->gemm_us / o->gemm_iters / 1e3);
        tjson_num(e, "slowdown_pct", "%.4f", x->slowdown_pct);
        tjson_num(e, "worst_rank_slowdown_pct", "%.4f", x->worst_rank_pct);
        tjson_num(e, "calls", "%.0f", x->calls);
        tjson_num(e, "max_rank_bytes", "%.0f", x->max_bytes);
        tjson_num(e, "call_us", "%.3f", x->call_us);
        tjson_num(e, "busbw_gbs", "%.6f", x->busbw);
        tjson_num(e, "alone_call_us", "%.3f", x->one_us);
        tjson_num(e, "alone_busbw_gbs", "%.6f", x->busbw_alone);
        tjson_num(e, "coverage", "%.4f", x->coverage);
        cJSON_AddItemToArray(results, e);
    }
    tjson_print(json, doc, 1, 1);
}
