/*
 * perf_internal.h - what the parts of the benchmark loop share
 * (perfopts.c, perfrow.c, perfgemm.c, perfrun.c, perfjson.c); not an
 * interface of the tools (that is perfrun.h).
 */
#ifndef RMACOLL_TOOLS_PERF_INTERNAL_H
#define RMACOLL_TOOLS_PERF_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "cases.h"
#include "perfrun.h"

/* nccl-tests' types, in its -d all order (perfopts.c): type i of
 * PERF_NTYPES. */
#define PERF_NTYPES 10
rmacoll_datatype_t perf_type_at(int i);

/* One row's result on rank 0. */
typedef struct perf_row {
    uint64_t size;       /* nominal bytes per rank */
    uint64_t count;      /* nominal elements per rank */
    rmacoll_datatype_t dtype;
    double time_us;      /* max over ranks of the mean */
    double time_min_us;  /* min over ranks of the mean */
    double max_bytes;    /* max over ranks of max(sent, received) */
    double buf_bytes;    /* max over ranks of send + receive buffer bytes */
    double algbw, busbw; /* GB/s */
    double wrong;        /* sum over ranks */
} perf_row_t;
/* Per-rank record gathered to rank 0. */
enum { PERF_G_TIME, PERF_G_SENT, PERF_G_RECV, PERF_G_WRONG, PERF_G_N };
typedef struct perf_state {
    const rmacoll_perf_opts_t *o;
    const rmacoll_perf_backend_t *be;
    int n, rank;
    int64_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    const rmacoll_perf_devops_t *dev; /* device hooks (--buffers cuda) or NULL */
    int ncoll;           /* 1, or 2 with a baseline */
    double *gathered;    /* rank 0: n * ncoll * PERF_G_N, rank-major */
    FILE *out;           /* rank 0's table: stdout, or stderr with --json - */
    char err[512];
} perf_state_t;
/* Buffers of one row: host (fill, check) and, with device memory, their
 * device twins that the collectives see. */
typedef struct perf_bufs {
    void *hs, *hr;        /* host send / receive */
    void *ds, *dr;        /* what the collective gets: device or hs/hr */
    size_t sbytes, rbytes, esize;
} perf_bufs_t;

/* Rank 0's summary of one collective. */
typedef struct perf_gemm_res {
    double alone_us, gemm_us;   /* max over ranks */
    double slowdown_pct;        /* gemm_us / alone_us - 1, in % */
    double worst_rank_pct;      /* max over ranks of the rank's own slowdown */
    double call_us, one_us;     /* max over ranks: per call in the loop, alone */
    double max_bytes;
    double busbw, busbw_alone;  /* GB/s */
    double coverage;            /* min over ranks: loop time / GEMM time */
    double calls;
} perf_gemm_res_t;

/* One run of rmacoll_perf_run (perfrun.c): its state, the counts' source,
 * where the ranks are, and rank 0's rows and sums. */
typedef struct perf_run {
    perf_state_t s;
    rmacoll_case_t *matrix;      /* --dist matrix:FILE, else NULL */
    rmacoll_case_dist_t dist;    /* the generator's distribution */
    rmacoll_datatype_t dtype;    /* the type of the current sweep */
    int is_matrix;
    perf_row_t *rows;            /* rank 0: two per size (the baseline's, or
                                  * the primary's again) */
    int nrows, cap;
    int node_sizes[RMACOLL_PERF_MAX_NODES], nnodes, contig;
    double *keys;                /* [n] node keys */
    double bw_sum, bw_base_sum, ratio_sum, wrong_total, max_buf;
    int nratio, nbw;
    uint64_t row_id;
    char *devlines;              /* "# Using devices" lines */
    FILE *json;                  /* rank 0's --json document, or NULL */
    int json_failed;             /* rank 0 could not open or write it */
    FILE *njson;                 /* rank 0's -J document (nccl-tests' layout), or NULL */
    char njson_path[RMACOLL_PERF_STR + 16]; /* the file -J writes (FILE or FILE.k) */
    char start_time[32];         /* -J's start_time, "%Y-%m-%d %H:%M:%S" */
} perf_run_t;

/* perfrow.c */
rmacoll_status_t perf_put_send(perf_state_t *s, perf_bufs_t *b, uint64_t iter);
rmacoll_status_t perf_reset_recv(perf_state_t *s, perf_bufs_t *b);
rmacoll_status_t perf_measure(perf_state_t *s, perf_bufs_t *b, rmacoll_perf_a2av_fn_t fn,
                              const char *label, rmacoll_datatype_t dtype, uint64_t row_id,
                              double *g);
rmacoll_status_t perf_bufs_open(perf_state_t *s, const rmacoll_case_t *c,
                                rmacoll_datatype_t dtype, perf_bufs_t *b);
rmacoll_status_t perf_bufs_close(perf_state_t *s, perf_bufs_t *b, rmacoll_status_t st);
rmacoll_status_t perf_row(perf_state_t *s, const rmacoll_case_t *c, rmacoll_datatype_t dtype,
                          uint64_t row_id, double *mine);
void perf_reduce(const perf_state_t *s, int k, perf_row_t *row);
int perf_nodes(const double *keys, int n, int *sizes, int max, int *contig);
const char *perf_dtype_name(rmacoll_datatype_t d);
void perf_num(double v, int width, char *buf, size_t len);
const char *perf_average_name(int average);
const char *perf_host_alloc_name(const rmacoll_perf_opts_t *o, const rmacoll_perf_backend_t *be);
rmacoll_status_t perf_gather_info(perf_state_t *s, double *keys, char **devlines);

/* perfgemm.c: --gemm, the GEMM batch alone, then against each collective
 * on the -b size of case c; prints on rank 0 and writes json (rank 0, may
 * be NULL). Returns 0 or 1 (error). */
int perf_gemm_run(perf_state_t *s, const rmacoll_case_t *c, rmacoll_datatype_t dtype,
                  uint64_t size, FILE *json);

/* perfjson.c: rank 0's --json documents (cJSON, printed formatted). */
void perf_json_sweep(const perf_run_t *r, int rc, FILE *json);
/* -J: nccl-tests' document (its keys and units; rmacoll's own figures under
 * "rmacoll"). */
void perf_json_nccl(const perf_run_t *r, int rc, FILE *json);
void perf_format_now(char *buf, size_t len);
void perf_json_gemm(const perf_state_t *s, rmacoll_datatype_t dtype, uint64_t size,
                    double per_ms, double tflops, const perf_gemm_res_t *res,
                    const char *const *names, FILE *json);

#endif /* RMACOLL_TOOLS_PERF_INTERNAL_H */
