/*
 * perfrun.c - the AlltoAllV benchmark loop shared by rmacoll-perf and the
 * MPI baseline: checks, header, the sweeps over types and sizes, the table
 * and the summary (see perfrun.h). Options: perfopts.c; one size row:
 * perfrow.c; --gemm: perfgemm.c; the JSON document: perfjson.c.
 */
#include "perfrun.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_internal.h"

/* What the backend can do (the same on every rank): 0 to go on, else the
 * exit status (rank 0 says why). */
static int perf_run_capable(perf_state_t *s)
{
    const rmacoll_perf_opts_t *o = s->o;
    const rmacoll_perf_backend_t *be = s->be;

    if (o->memory == RMACOLL_PERF_MEM_CUDA) {
        if (be->dev == NULL) {
            if (s->rank == 0)
                fprintf(stderr, "%s: --buffers cuda is not supported by this "
                        "tool or build\n", be->name);
            return 1;
        }
        s->dev = be->dev;
    }
    if (o->local_register && (s->dev != NULL || be->host_alloc == NULL ||
                              be->host_free == NULL)) {
        if (s->rank == 0)
            fprintf(stderr, "%s: -R %d: %s\n", be->name, o->local_register,
                    s->dev != NULL ? "registered buffers are host memory; "
                                     "--buffers cuda allocates its own device "
                                     "buffers: use -R 0 with it"
                                   : "this tool has no allocator of "
                                     "registered host memory");
        return RMACOLL_PERF_EXIT_USAGE;
    }
    if (o->baseline[0] != '\0' && strcmp(o->baseline, "none") != 0) {
        if (be->baseline_alltoallv == NULL || be->baseline_name == NULL ||
            strcmp(be->baseline_name, o->baseline) != 0) {
            if (s->rank == 0)
                fprintf(stderr, "%s: --baseline %s is not available here\n",
                        be->name, o->baseline);
            return 1;
        }
        s->ncoll = 2;
    }
    if (o->graph_launches > 0 && (s->dev == NULL || s->dev->graph_begin == NULL ||
                                  s->dev->graph_end == NULL || s->dev->graph_launch == NULL)) {
        if (s->rank == 0)
            fprintf(stderr, "%s: -G is not supported by this tool or build (needs "
                    "--buffers cuda and the CUDA runtime)\n", be->name);
        return 1;
    }
    if (o->gemm_n > 0 && (s->dev == NULL || be->load == NULL ||
                          be->allgather_f64 == NULL)) {
        if (s->rank == 0)
            fprintf(stderr, "%s: --gemm is not supported by this tool or "
                    "build (needs --buffers cuda and cuBLAS)\n", be->name);
        return 1;
    }
    return 0;
}

/* The counts' source: the --dist matrix file or generator. 0 or 1. */
static int perf_run_source(perf_run_t *r)
{
    perf_state_t *s = &r->s;
    const rmacoll_perf_opts_t *o = s->o;
    rmacoll_status_t st;

    if (r->is_matrix) {
        st = rmacoll_case_load(o->dist + 7, &r->matrix, s->err, sizeof(s->err));
        if (st == RMACOLL_SUCCESS && r->matrix->nranks != s->n) {
            snprintf(s->err, sizeof(s->err),
                     "%s has %d ranks, but %d are running", o->dist + 7,
                     r->matrix->nranks, s->n);
            st = RMACOLL_ERR_INVALID_ARG;
        }
        if (st == RMACOLL_SUCCESS && !o->dtype_given)
            r->dtype = r->matrix->dtype;
    } else {
        st = rmacoll_case_dist_parse(o->dist, &r->dist);
        if (st != RMACOLL_SUCCESS)
            snprintf(s->err, sizeof(s->err), "bad --dist %.400s", o->dist);
    }
    if (st != RMACOLL_SUCCESS) {
        /* Same inputs on every rank, so every rank stops here. */
        if (s->rank == 0)
            fprintf(stderr, "%s: %s\n", s->be->name, s->err);
        return 1;
    }
    return 0;
}

/* -J FILE: created new, never overwritten; when FILE exists, FILE.0,
 * FILE.1, ... (nccl-tests' jsonOutputInit). A failure is printed and fails
 * the run at the end (every rank is in it). */
static void perf_open_new(perf_run_t *r, const char *path)
{
    const char *name = r->s.be->name;
    int fd = -1;

    for (int k = -1; fd < 0 && k < 100000; k++) {
        if (k < 0)
            snprintf(r->njson_path, sizeof(r->njson_path), "%s", path);
        else
            snprintf(r->njson_path, sizeof(r->njson_path), "%s.%d", path, k);
        fd = open(r->njson_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd >= 0)
        r->njson = fdopen(fd, "w");
    if (r->njson == NULL) {
        fprintf(stderr, "%s: -J %s: cannot create the file: %s\n", name,
                r->njson_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        r->json_failed = 1;
    }
}

/* Count arrays, where every rank runs (node key, pid, host and device, for
 * the node summary and the "# Using devices" lines), and rank 0's --json
 * file. 0 or 1. */
static int perf_run_setup(perf_run_t *r)
{
    perf_state_t *s = &r->s;
    const rmacoll_perf_opts_t *o = s->o;
    const char *name = s->be->name;
    rmacoll_status_t st;

    s->sendcounts = calloc((size_t)s->n * 4, sizeof(int64_t));
    s->gathered = calloc((size_t)s->n * (size_t)s->ncoll * PERF_G_N, sizeof(double));
    r->keys = calloc((size_t)s->n, sizeof(double));
    if (s->sendcounts == NULL || s->gathered == NULL || r->keys == NULL) {
        fprintf(stderr, "%s: rank %d: out of memory\n", name, s->rank);
        return 1;
    }
    s->sdispls = s->sendcounts + s->n;
    s->recvcounts = s->sendcounts + 2 * s->n;
    s->rdispls = s->sendcounts + 3 * s->n;
    st = perf_gather_info(s, r->keys, &r->devlines);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "%s: rank %d: gather failed: %s (%s)\n", name,
                s->rank, s->err, rmacoll_status_name(st));
        return 1;
    }
    if (s->rank != 0)
        return 0;
    r->nnodes = perf_nodes(r->keys, s->n, r->node_sizes, RMACOLL_PERF_MAX_NODES, &r->contig);
    perf_format_now(r->start_time, sizeof(r->start_time));
    if (o->nccl_json_stdout) {
        r->njson = stdout;
        s->out = stderr;
    } else if (o->nccl_json_path[0] != '\0') {
        perf_open_new(r, o->nccl_json_path);
    }
    if (o->json_stdout) {
        r->json = stdout;
        s->out = stderr;     /* stdout is the JSON document alone */
    } else if (o->json_path[0] != '\0') {
        r->json = fopen(o->json_path, "w");
        if (r->json == NULL) {
            fprintf(stderr, "%s: --json %s: cannot write the file: %s\n",
                    name, o->json_path, strerror(errno));
            r->json_failed = 1;   /* the run goes on (every rank is in it) */
        }
    }
    return 0;
}

/* The table's column heads (none with --gemm: perf_gemm_run prints its own). */
static void perf_print_columns(const perf_run_t *r)
{
    FILE *f = r->s.out;
    /* nccl-tests heads the time columns cputime under -C 1 */
    const char *tname = r->s.o->cputime ? "cputime" : "time";
    int ts = r->s.o->report_timestamps;

    if (r->s.o->gemm_n > 0) {
        return;
    }
    if (r->s.ncoll > 1) {
        /* Two rows per size; ratio = busbw of the first / the second. */
        fprintf(f, "# %10s %12s %8s %8s %10s %8s %8s %8s %7s\n", "size",
                "count", "type", "coll", "time", "algbw", "busbw",
                "#wrong", "ratio");
        fprintf(f, "# %10s %12s %8s %8s %10s %8s %8s %8s %7s\n", "(B)",
                "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "");
        return;
    }
    /* nccl-tests' columns (its current layout); in-place is not measured:
     * the rows leave it blank (perf_print_row). */
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s           out-of-place  "
            "                     in-place          \n",
            "", "", "", "", "");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  "
            "%6s  %6s  %6s %*s\n", "size", "count", "type", "redop",
            "root", tname, "algbw", "busbw", "#wrong", tname,
            "algbw", "busbw", "#wrong", ts ? 19 : 0, ts ? "timestamp" : "");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  "
            "%6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
            "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
            "(GB/s)", "", ts ? 19 : 0, ts ? "%Y-%m-%d %H:%M:%S" : "");
}

/* Rank 0's header: nccl-tests' first lines, then ours. */
static void perf_print_header(const perf_run_t *r)
{
    const perf_state_t *s = &r->s;
    const rmacoll_perf_opts_t *o = s->o;
    const rmacoll_perf_backend_t *be = s->be;
    FILE *f = s->out;
    char chk[48];

    if (r->njson != NULL)   /* nccl-tests' line, first */
        fprintf(f, "# Writing JSON output to %s\n",
                o->nccl_json_stdout ? "-" : r->njson_path);
    fprintf(f, "# nThread 1 nGpus 1 minBytes %llu maxBytes %llu step: ",
            (unsigned long long)o->minbytes, (unsigned long long)o->maxbytes);
    if (o->stepbytes > 0)
        fprintf(f, "%llu(bytes)", (unsigned long long)o->stepbytes);
    else
        fprintf(f, "%g(factor)", o->stepfactor);
    fprintf(f, " warmup iters: %d iters: %d agg iters: %d validation: %d "
            "graph: %d\n#\n# Using devices\n%s#\n", o->warmup, o->iters,
            o->agg_iters, o->check, o->graph_launches, r->devlines ? r->devlines : "");
    fprintf(f, "# %s: nranks %d, nodes %d (", be->name, s->n, r->nnodes);
    for (int k = 0; k < r->nnodes; k++)
        fprintf(f, "%s%d", k ? "," : "", r->node_sizes[k]);
    fprintf(f, ")%s, launch %s\n", r->contig ? "" : " non-contiguous",
            be->launch ? be->launch : "?");
    if (o->check_every)
        snprintf(chk, sizeof(chk), "every timed iteration");
    else if (o->check)
        snprintf(chk, sizeof(chk), "%d untimed iteration%s after", o->check,
                 o->check > 1 ? "s" : "");
    else
        snprintf(chk, sizeof(chk), "off");
    fprintf(f, "# dist %s, seed %llu, dtype %s, iters %d, warmup %d, "
            "check %s, time %s over ranks\n",
            o->dist, (unsigned long long)o->seed,
            o->dtype_all ? "all" : perf_dtype_name(r->dtype), o->iters,
            o->warmup, chk, perf_average_name(o->average));
    if (be->header != NULL)
        fputs(be->header, f);
    /* The allocator named is that of host buffers (device buffers are the
     * device hooks'). */
    fprintf(f, "# memory %s, local_register %d%s%s%s, timing %s%s%s\n",
            s->dev ? "cuda" : "host", o->local_register,
            s->dev ? "" : " (", s->dev ? "" : perf_host_alloc_name(o, be),
            s->dev ? "" : ")",
            s->dev && !o->cputime ? "cuda events on the stream" : "host clock",
            s->ncoll > 1 ? ", baseline " : "",
            s->ncoll > 1 ? be->baseline_name : "");
    if (o->gemm_n > 0)
        fprintf(f, "# gemm interference: %d x bf16 %dx%dx%d GEMM (fp32 "
                "compute) on a second stream, alltoallv of -b %llu B "
                "looped on its own stream\n", o->gemm_iters, o->gemm_n,
                o->gemm_n, o->gemm_n, (unsigned long long)o->minbytes);
    fprintf(f, "#\n");
    perf_print_columns(r);
    fflush(f);
}

/* The counts of one size: the matrix, or the generator's (one node for the
 * generator, whatever the topology, so that every tool and every topology
 * gets the same counts). Prints the failure. */
static rmacoll_status_t perf_run_counts(perf_run_t *r, uint64_t size, rmacoll_datatype_t dtype,
                                        rmacoll_case_t **c)
{
    const perf_state_t *s = &r->s;
    int one_node = s->n;
    int64_t count = (int64_t)(size / rmacoll_datatype_size(dtype));
    rmacoll_status_t st;

    if (r->is_matrix) {
        *c = r->matrix;
        return RMACOLL_SUCCESS;
    }
    st = rmacoll_case_random(1, &one_node, &r->dist, count / s->n,
                             s->o->seed * 1000003u + size, dtype, c);
    if (st != RMACOLL_SUCCESS)
        fprintf(stderr, "%s: rank %d: generator failed for %llu bytes: %s\n",
                s->be->name, s->rank, (unsigned long long)size, rmacoll_status_name(st));
    return st;
}

/* --gemm: one size, the -b one (or the matrix), against the GEMMs. */
static int perf_run_gemm(perf_run_t *r)
{
    rmacoll_case_t *c;
    uint64_t size = r->s.o->minbytes;
    int rc;

    if (perf_run_counts(r, size, r->dtype, &c) != RMACOLL_SUCCESS)
        return 1;
    rc = perf_gemm_run(&r->s, c, r->dtype, size, r->json);
    if (!r->is_matrix)
        rmacoll_case_free(c);
    return rc;
}

/* Rank 0's table line(s) of one size. */
static void perf_print_row(perf_run_t *r, const perf_row_t *row)
{
    const perf_state_t *s = &r->s;
    const rmacoll_perf_backend_t *be = s->be;
    const char *type = rmacoll_perf_type_name(row[0].dtype);

    if (s->ncoll == 1) {
        char t[16], a[16], b[16];

        perf_num(row[0].time_us, 7, t, sizeof(t));
        perf_num(row[0].algbw, 6, a, sizeof(a));
        perf_num(row[0].busbw, 6, b, sizeof(b));
        fprintf(s->out, "%12llu  %12llu  %8s  %6s  %6d", (unsigned long long)row[0].size,
                (unsigned long long)row[0].count, type, "none", -1);
        if (s->o->check)
            fprintf(s->out, "  %7s  %6s  %6s  %6g", t, a, b, row[0].wrong);
        else
            fprintf(s->out, "  %7s  %6s  %6s    N/A", t, a, b);
        /* In-place: not measured (RMACOLL_IN_PLACE needs symmetric counts),
         * printed as nccl-tests prints a variant it does not measure: 32
         * spaces (its writeBenchMarkLineNullBody); null in -J's JSON. */
        if (s->o->inplace_na)   /* --in-place na: 13 fields (SuperBench) */
            fprintf(s->out, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
        else
            fprintf(s->out, "%32s", "");
        if (s->o->report_timestamps) {
            char now[32];

            perf_format_now(now, sizeof(now));
            fprintf(s->out, "%21s", now);
        }
        fputc('\n', s->out);
        return;
    }
    for (int k = 0; k < 2; k++) {
        fprintf(s->out, "  %10llu %12llu %8s %8s %10.2f %8.3f %8.3f %8.0f",
                (unsigned long long)row[k].size, (unsigned long long)row[k].count, type,
                k == 0 ? (be->coll_name ? be->coll_name : be->name) : be->baseline_name,
                row[k].time_us, row[k].algbw, row[k].busbw, row[k].wrong);
        if (k == 0)
            fprintf(s->out, " %7.3f\n", row[1].busbw > 0 ? row[0].busbw / row[1].busbw : 0);
        else
            fprintf(s->out, " %7s\n", "-");
    }
}

/* Rank 0: one size's rows reduced over the ranks, printed, summed and kept
 * for the JSON document. */
static void perf_run_report(perf_run_t *r, uint64_t size, rmacoll_datatype_t dtype,
                            int64_t maxsent)
{
    perf_state_t *s = &r->s;
    size_t esize = rmacoll_datatype_size(dtype);
    perf_row_t row[2];

    for (int k = 0; k < s->ncoll; k++) {
        row[k].size = r->is_matrix ? (uint64_t)maxsent * esize : size;
        row[k].count = row[k].size / esize;
        row[k].dtype = dtype;
        perf_reduce(s, k, &row[k]);
        r->wrong_total += row[k].wrong;
        if (row[k].buf_bytes > r->max_buf)
            r->max_buf = row[k].buf_bytes;
    }
    perf_print_row(r, row);
    if (s->ncoll > 1) {
        if (row[1].busbw > 0) {
            r->ratio_sum += row[0].busbw / row[1].busbw;
            r->nratio++;
        }
        r->bw_base_sum += row[1].busbw;
    }
    fflush(s->out);
    if (r->nrows == r->cap) {
        int ncap = r->cap ? r->cap * 2 : 16;
        perf_row_t *nr = realloc(r->rows, (size_t)ncap * 2 * sizeof(*r->rows));

        if (nr != NULL) {
            r->rows = nr;
            r->cap = ncap;
        }
    }
    if (r->nrows < r->cap) {
        r->rows[2 * r->nrows] = row[0];
        r->rows[2 * r->nrows + 1] = row[s->ncoll > 1 ? 1 : 0];
        r->nrows++;
    }
    r->bw_sum += row[0].busbw;
    r->nbw++;
}

/* The largest row sum of the matrix (elements one rank sends). */
static int64_t perf_max_sent(const rmacoll_case_t *c)
{
    int64_t maxsent = 0;

    for (int i = 0; i < c->nranks; i++) {
        int64_t t = 0;

        for (int j = 0; j < c->nranks; j++)
            t += c->send[(size_t)i * c->nranks + j];
        if (t > maxsent)
            maxsent = t;
    }
    return maxsent;
}

/* One size of one type: counts, timed and checked calls, gathered to rank
 * 0, which reports them. 0 or 1. */
static int perf_run_size(perf_run_t *r, uint64_t size, rmacoll_datatype_t dtype)
{
    perf_state_t *s = &r->s;
    const rmacoll_perf_backend_t *be = s->be;
    rmacoll_case_t *c;
    double mine[2 * PERF_G_N] = {0};
    int64_t maxsent = 0;
    rmacoll_status_t st;

    if (perf_run_counts(r, size, dtype, &c) != RMACOLL_SUCCESS)
        return 1;
    st = perf_row(s, c, dtype, r->row_id, mine);
    if (r->is_matrix)
        maxsent = perf_max_sent(c);
    else
        rmacoll_case_free(c);
    if (st == RMACOLL_SUCCESS)
        st = be->gather_f64(be->ctx, mine, s->ncoll * PERF_G_N, s->gathered, s->err,
                            sizeof(s->err));
    if (st != RMACOLL_SUCCESS) {
        if (r->is_matrix)
            fprintf(stderr, "%s: rank %d: failed on %s: %s (%s)\n", be->name, s->rank,
                    s->o->dist, s->err, rmacoll_status_name(st));
        else
            fprintf(stderr, "%s: rank %d: failed at %llu bytes: %s (%s)\n", be->name,
                    s->rank, (unsigned long long)size, s->err, rmacoll_status_name(st));
        return RMACOLL_PERF_EXIT_OF(st);
    }
    if (s->rank == 0)
        perf_run_report(r, size, dtype, maxsent);
    return 0;
}

/* The size after *size: -i adds, -f multiplies. 0 past -e (and after the
 * one row of a matrix), else 1. */
static int perf_next_size(const perf_run_t *r, uint64_t *size)
{
    const rmacoll_perf_opts_t *o = r->s.o;
    double next;

    if (r->is_matrix)
        return 0;
    if (o->stepbytes > 0) {
        if (*size > o->maxbytes - o->stepbytes)
            return 0;
        *size += o->stepbytes;
        return 1;
    }
    next = floor((double)*size * o->stepfactor);
    if (next > (double)o->maxbytes || next <= (double)*size)
        return 0;
    *size = (uint64_t)next;
    return 1;
}

/* -d all: every type in nccl-tests' order; -N: sweeps (0 = forever); each
 * over the sizes. 0 or 1. */
static int perf_run_sweeps(perf_run_t *r)
{
    const rmacoll_perf_opts_t *o = r->s.o;
    rmacoll_datatype_t types[PERF_NTYPES];
    int ntypes = 0, rc = 0;

    if (o->dtype_all) {
        for (int i = 0; i < PERF_NTYPES; i++)
            types[ntypes++] = perf_type_at(i);
    } else {
        types[ntypes++] = r->dtype;
    }
    for (int cycle = 0; rc == 0 && (o->run_cycles == 0 || cycle < o->run_cycles); cycle++) {
        for (int ti = 0; rc == 0 && ti < ntypes; ti++) {
            r->dtype = types[ti];
            uint64_t size = o->minbytes;

            while ((rc = perf_run_size(r, size, r->dtype)) == 0) {
                r->row_id++;
                if (!perf_next_size(r, &size))
                    break;
            }
        }
    }
    return rc;
}

/* Rank 0's last lines; the exit status after the data check. */
static int perf_print_footer(const perf_run_t *r, int rc)
{
    const perf_state_t *s = &r->s;
    const rmacoll_perf_opts_t *o = s->o;

    if (!o->quiet && rc == 0) {
        fprintf(s->out, "# Out of bounds values : %.0f %s\n", r->wrong_total,
                r->wrong_total == 0 ? "OK" : "FAILED");
        fprintf(s->out, "# Avg bus bandwidth    : %g \n", r->nbw ? r->bw_sum / r->nbw : 0.0);
        if (s->ncoll > 1) {
            fprintf(s->out, "# Avg bus bandwidth %s : %g\n", s->be->baseline_name,
                    r->nrows ? r->bw_base_sum / r->nrows : 0.0);
            fprintf(s->out, "# Avg busbw ratio      : %g\n",
                    r->nratio ? r->ratio_sum / r->nratio : 0.0);
        }
        if (o->memory_report)
            fprintf(s->out, "# Memory: largest buffers of one rank %.0f "
                    "bytes (send + receive, %s)\n", r->max_buf,
                    s->dev ? "device, and as much pinned host" : "host");
        fprintf(s->out, "#\n# Collective test concluded: alltoallv\n");
        fflush(s->out);
    }
    if (rc == 0 && r->wrong_total != 0) {
        rc = 2;
        fprintf(stderr, "%s: data check failed (wrong values above)\n", s->be->name);
    }
    return rc;
}

/* Rank 0's --json document, written and closed. */
static void perf_run_json(perf_run_t *r, int rc)
{
    const rmacoll_perf_opts_t *o = r->s.o;

    perf_json_sweep(r, rc, r->json);
    if ((r->json == stdout ? fflush(r->json) : fclose(r->json)) != 0) {
        fprintf(stderr, "%s: --json %s: writing the file failed: %s\n", r->s.be->name,
                o->json_stdout ? "-" : o->json_path, strerror(errno));
        r->json_failed = 1;
    }
    r->json = NULL;
}

/* Rank 0's -J document, written and closed. */
static void perf_run_njson(perf_run_t *r, int rc)
{
    perf_json_nccl(r, rc, r->njson);
    if ((r->njson == stdout ? fflush(r->njson) : fclose(r->njson)) != 0) {
        fprintf(stderr, "%s: -J %s: writing the file failed: %s\n", r->s.be->name,
                r->s.o->nccl_json_stdout ? "-" : r->njson_path, strerror(errno));
        r->json_failed = 1;
    }
    r->njson = NULL;
}

int rmacoll_perf_run(const rmacoll_perf_opts_t *o,
                     const rmacoll_perf_backend_t *be)
{
    perf_run_t r;
    int rc;

    memset(&r, 0, sizeof(r));
    r.s.o = o;
    r.s.be = be;
    r.s.n = be->nranks;
    r.s.rank = be->rank;
    r.s.ncoll = 1;
    r.s.out = stdout;
    r.dist.kind = RMACOLL_CASE_UNIFORM;
    r.dtype = o->dtype;
    r.contig = 1;
    r.is_matrix = strncmp(o->dist, "matrix:", 7) == 0;
    if ((rc = perf_run_capable(&r.s)) != 0)
        return rc;
    if ((rc = perf_run_source(&r)) != 0) {
        rmacoll_case_free(r.matrix);
        return rc;
    }
    rc = perf_run_setup(&r);
    if (rc == 0 && r.s.rank == 0 && !o->quiet)
        perf_print_header(&r);
    if (rc == 0 && o->gemm_n > 0) {
        rc = perf_run_gemm(&r);
    } else if (rc == 0) {
        rc = perf_run_sweeps(&r);
        if (r.s.rank == 0)
            rc = perf_print_footer(&r, rc);
        if (r.s.rank == 0 && r.json != NULL)
            perf_run_json(&r, rc);
        if (r.s.rank == 0 && r.njson != NULL)
            perf_run_njson(&r, rc);
    }
    if (r.json_failed && rc == 0)
        rc = 1;
    if (r.njson != NULL && r.njson != stdout)
        fclose(r.njson);
    if (r.json != NULL && r.json != stdout)
        fclose(r.json);
    else if (r.json != NULL)
        fflush(r.json);
    free(r.devlines);
    free(r.rows);
    free(r.keys);
    free(r.s.gathered);
    free(r.s.sendcounts);
    rmacoll_case_free(r.matrix);
    return rc;
}
