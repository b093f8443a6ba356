/*
 * perfrun.h - the AlltoAllV benchmark loop shared by rmacoll-perf and the
 * MPI baseline (tools/mpi/mpi_alltoallv_perf.c), so that both measure the
 * same counts (same generator, same seed), fill and check the same
 * pattern, time the same way and print the same columns and JSON.
 *
 * A tool supplies a backend (its alltoallv, barrier and gather); this
 * module parses the common options, builds the count matrix of every size
 * row, runs warm-ups and timed iterations, checks, gathers the per-rank
 * results to rank 0 and prints them.
 *
 * Columns follow nccl-tests (doc/PERFORMANCE.md), for alltoallv:
 *   time  = max over ranks of the mean per-call time (us); -a 0/1/2 take
 *           rank 0's, the mean, the min instead (nccl-tests' -a)
 *   algbw = max over ranks of max(bytes sent, bytes received) / time
 *   busbw = algbw * (n - 1) / n
 * with 1 GB/s = 1e9 bytes/s. The text layout is nccl-tests' (out-of-place
 * and in-place columns, in-place N/A: no in-place AlltoAllV yet).
 *
 * Memory: host buffers by default (posix_memalign); with -R 1|2 they come
 * from the backend's host_alloc (registered memory: rmacoll_mem_alloc,
 * MPI_Alloc_mem), as nccl-tests' -R takes them from ncclMemAlloc. A
 * backend that supplies `dev` (device
 * hooks) runs with --buffers cuda: the fill and the check stay on the host
 * and buffers are copied to/from the device outside the timed region;
 * time is taken by the backend's timer (CUDA events on its stream around
 * the timed calls, as nccl-tests does).
 *
 * Baseline: a backend may supply a second collective (NCCL in rmacoll-perf)
 * run on the same counts and buffers in the same row; both rows are
 * printed with the ratio of bus bandwidths (primary / baseline).
 *
 * SM interference (--gemm N, rmacoll-perf with --buffers cuda): instead of
 * the size rows, one size (-b) is run against a load on another stream of
 * the same GPU (K bf16 N x N GEMMs, rmacoll_perf_loadops_t): the load alone,
 * then the load while the collective runs back to back on its own stream
 * (primary, then baseline); the load's slowdown and the collective's busbw
 * during the overlap are printed (see docs/perf.md).
 *
 * Not thread-safe: one run per process.
 */
#ifndef RMACOLL_TOOLS_PERFRUN_H
#define RMACOLL_TOOLS_PERFRUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cases.h"
#include "rmacoll.h"

#define RMACOLL_PERF_MAX_NODES 256
#define RMACOLL_PERF_STR 512

/* Where the benchmark buffers live. */
#define RMACOLL_PERF_MEM_HOST 0
#define RMACOLL_PERF_MEM_CUDA 1

/** Options of both tools; rmacoll_perf_opts_init gives the defaults. */
typedef struct rmacoll_perf_opts {
    /* launch (rmacoll-perf only; the MPI baseline ignores them) */
    int np;                     /* -np: ranks to spawn */
    int ppn;                    /* --ppn: ranks per virtual node */
    char topology[RMACOLL_PERF_STR]; /* --topology "3,2" ("" = -np/--ppn) */
    int topology_given;         /* -np, --ppn or --topology was given */
    double timeout_s;           /* --timeout: launcher deadline */
    int force_spawn;            /* --spawn: ignore launcher variables */
    int dry_run;                /* --dry-run: launch, print ids, no comm */
    /* runtime (rmacoll-perf only) */
    char config_path[RMACOLL_PERF_STR]; /* --config FILE ("" = none) */
    int relay;                  /* --relay on|off: 1/0, -1 = config's */
    char scheduler[RMACOLL_CONFIG_STR_MAX]; /* --scheduler ("" = config's) */
    char intra_node[RMACOLL_CONFIG_STR_MAX]; /* --intra ("" = config's) */
    char inter_node[RMACOLL_CONFIG_STR_MAX]; /* --inter ("" = config's) */
    int memory;                 /* --buffers host|cuda (RMACOLL_PERF_MEM_*) */
    char baseline[32];          /* --baseline none|nccl ("" = none) */
    int np_given, ppn_given;    /* -np / --ppn given (cuda defaults) */
    /* benchmark */
    uint64_t minbytes, maxbytes; /* -b / -e: bytes per rank sent in total */
    double stepfactor;           /* -f (> 1) */
    uint64_t stepbytes;          /* -i: additive step instead of -f (0 = -f) */
    char dist[RMACOLL_PERF_STR]; /* --dist uniform|random|zipf:A|sparse:P|matrix:FILE */
    rmacoll_datatype_t dtype;    /* -d */
    int dtype_given;
    int iters;                   /* -n */
    int warmup;                  /* -w */
    int check;                   /* -c N, --check, --no-check: checked iterations after
                                  * the timed ones (nccl-tests; 0 = none) */
    int check_every;             /* --check-every: every timed iteration filled, timed
                                  * alone after a barrier and checked instead */
    uint64_t seed;               /* --seed */
    char json_path[RMACOLL_PERF_STR]; /* --json FILE ("" = none) */
    int quiet;                   /* -q: rows only */
    /* SM interference (rmacoll-perf, --buffers cuda) */
    int gemm_n;                  /* --gemm N: bf16 N x N GEMMs (0 = off); implies --no-check */
    int gemm_iters;              /* --gemm-iters K: GEMMs per timed batch (default 50) */
    /* nccl-tests options (see rmacoll_perf_usage for the no-ops) */
    char nodes[RMACOLL_PERF_STR]; /* --nodes 0,1,0,1: node of every rank ("" = none) */
    int agg_iters;               /* -m: calls per timed iteration (default 1) */
    int graph_launches;          /* -G, --cudagraph, --graph N: the agg_iters calls of an
                                  * iteration captured into one CUDA graph per row, each
                                  * timed iteration N launches of it (0 = off) */
    int run_cycles;              /* -N: sweeps over the sizes, 0 = until killed (default 1) */
    int blocking;                /* -z 1: wait for each call's completion (device memory) */
    int average;                 /* -a 0 rank 0 | 1 mean | 2 min | 3 max over ranks
                                  * (default 1, as nccl-tests) */
    int cputime;                 /* -C 1: time on the host clock, also with device memory */
    int memory_report;           /* -M 1: print the largest buffers of any rank */
    int dtype_all;               /* -d all: every datatype in turn */
    int json_stdout;             /* --json -: JSON on stdout, the table on stderr */
    int local_register;          /* -R 0|1|2: 1 and 2 alike, host send and receive
                                  * buffers from the backend's host_alloc (host
                                  * buffers only; default 0: posix_memalign) */
    char nccl_json_path[RMACOLL_PERF_STR]; /* -J, --output_file FILE: nccl-tests'
                                  * JSON layout ("" = none; "-" = stdout) */
    int nccl_json_stdout;        /* -J -: that JSON on stdout, the table on stderr */
    int report_timestamps;       /* -S 1: a timestamp column after in-place */
    int inplace_na;              /* --in-place na: N/A in the in-place columns
                                  * (before 0.x's blank filler; SuperBench) */
    int argc;                    /* the command line, for -J's "args" */
    char **argv;
} rmacoll_perf_opts_t;

/* Exit status of a usage error (sysexits' EX_USAGE), as the tools use it;
 * rmacoll_perf_run returns it when the backend lacks what an option needs. */
#define RMACOLL_PERF_EXIT_USAGE 64

/* Exit status of a rank whose call failed with rmacoll status st (1..27):
 * RMACOLL_PERF_EXIT_STATUS + st, so that the spawning launcher's summary
 * names each rank's own status (a rank that failed with
 * RMACOLL_ERR_MISMATCH is not reported as RMACOLL_ERR_PEER). */
#define RMACOLL_PERF_EXIT_STATUS 100
#define RMACOLL_PERF_EXIT_OF(st)                                                  \
    ((int)(st) > 0 && (int)(st) < 28 ? RMACOLL_PERF_EXIT_STATUS + (int)(st) : 1)

/** The no-argument defaults: 2 virtual nodes x 2 ranks, zipf:1.2, relay
 *  on, 1K..16M x4, float32, 20 timed iterations after 5 warm-ups, then
 *  one checked iteration. */
void rmacoll_perf_opts_init(rmacoll_perf_opts_t *o);

/**
 * Parses argv into o (filled with defaults first by the caller).
 * Returns 0 on success, 1 when --help was printed to out, -1 on an error
 * (the message is in err, naming the option).
 */
int rmacoll_perf_opts_parse(int argc, char **argv, rmacoll_perf_opts_t *o,
                            FILE *out, char *err, size_t errlen);

/** nccl-tests' name of a datatype ("float", "half", "double", "bfloat16",
 *  "int8", ...) as printed in the type column; never NULL. */
const char *rmacoll_perf_type_name(rmacoll_datatype_t d);

/**
 * Parses a node map "0,1,0,1" (the node of every rank, in rank order;
 * node ids need not be contiguous) into node_of[max_ranks]; *nranks gets
 * the count. Returns 0, or -1 when empty, non-numeric, negative or longer
 * than max_ranks.
 */
int rmacoll_perf_parse_nodes(const char *spec, int *node_of, int max_ranks,
                             int *nranks);

/** Prints the usage text of tool `prog` to out. */
void rmacoll_perf_usage(const char *prog, FILE *out);

/** One AlltoAllV implementation: buffers are host or device memory as the
 *  run's --buffers says; with device memory it enqueues on the backend's
 *  stream and may return before completion (the timer and sync hooks wait). */
typedef rmacoll_status_t (*rmacoll_perf_a2av_fn_t)(
    void *ctx, const void *sendbuf, const int64_t *sendcounts,
    const int64_t *sdispls, void *recvbuf, const int64_t *recvcounts,
    const int64_t *rdispls, rmacoll_datatype_t dtype, char *err,
    size_t errlen);

/** Device-memory hooks of a backend (--buffers cuda). Every hook returns
 *  RMACOLL_SUCCESS or an error with err filled. */
typedef struct rmacoll_perf_devops {
    /** Device allocation of bytes (> 0) into *buf. */
    rmacoll_status_t (*alloc)(void *ctx, size_t bytes, void **buf, char *err,
                              size_t errlen);
    void (*release)(void *ctx, void *buf);
    /** Blocking copies host -> device and device -> host (after the
     *  stream's earlier work). */
    rmacoll_status_t (*upload)(void *ctx, void *dev, const void *host,
                               size_t bytes, char *err, size_t errlen);
    rmacoll_status_t (*download)(void *ctx, void *host, const void *dev,
                                 size_t bytes, char *err, size_t errlen);
    /** Waits until the stream has drained. */
    rmacoll_status_t (*sync)(void *ctx, char *err, size_t errlen);
    /** Marks the start of the timed region on the stream. */
    rmacoll_status_t (*timer_start)(void *ctx, char *err, size_t errlen);
    /** Marks its end, waits for it, *us = elapsed device time. */
    rmacoll_status_t (*timer_stop)(void *ctx, double *us, char *err,
                                   size_t errlen);
    /** Optional (-G; NULL: -G refused): starts capturing the stream's
     *  work into a CUDA graph; ends the capture (ok: the calls enqueued
     *  under it succeeded) and keeps it instantiated, replacing the last
     *  one; enqueues n launches of it on the stream. */
    rmacoll_status_t (*graph_begin)(void *ctx, char *err, size_t errlen);
    rmacoll_status_t (*graph_end)(void *ctx, int ok, char *err, size_t errlen);
    rmacoll_status_t (*graph_launch)(void *ctx, int n, char *err, size_t errlen);
} rmacoll_perf_devops_t;

/** The interfering load of --gemm: a batch of work on a stream of its own
 *  (not the collective's), timed there by the backend. Every hook returns
 *  RMACOLL_SUCCESS or an error with err filled. */
typedef struct rmacoll_perf_loadops {
    /** Enqueues one batch (o->gemm_iters GEMMs between two events) and
     *  returns without waiting for it. */
    rmacoll_status_t (*start)(void *ctx, char *err, size_t errlen);
    /** Waits for the batch started last; *us = its device time (us). */
    rmacoll_status_t (*finish)(void *ctx, double *us, char *err,
                               size_t errlen);
} rmacoll_perf_loadops_t;

/** A tool's collective operations. Every op is collective over all ranks
 *  and returns RMACOLL_SUCCESS or an error with err filled. */
typedef struct rmacoll_perf_backend {
    const char *name;      /* "rmacoll-perf", "mpi_alltoallv_perf" */
    int rank, nranks;
    void *ctx;
    /** Optional: called once per size row before warm-ups (MPI converts
     *  the counts to int there, off the timed path). */
    rmacoll_status_t (*prepare)(void *ctx, const int64_t *sendcounts,
                                const int64_t *sdispls,
                                const int64_t *recvcounts,
                                const int64_t *rdispls, char *err,
                                size_t errlen);
    rmacoll_status_t (*alltoallv)(void *ctx, const void *sendbuf,
                                  const int64_t *sendcounts,
                                  const int64_t *sdispls, void *recvbuf,
                                  const int64_t *recvcounts,
                                  const int64_t *rdispls,
                                  rmacoll_datatype_t dtype, char *err,
                                  size_t errlen);
    rmacoll_status_t (*barrier)(void *ctx, char *err, size_t errlen);
    /** Rank 0 receives nranks * k doubles (rank r's at r * k) in all;
     *  other ranks' `all` is unused (may be NULL). */
    rmacoll_status_t (*gather_f64)(void *ctx, const double *mine, int k,
                                   double *all, char *err, size_t errlen);
    /** Header lines ("# key: value\n"...) and a JSON object body
     *  ("\"k\": v, ...") describing the runtime; may be "". */
    const char *header;
    const char *json_config;
    const char *launch;    /* "spawned", "mpirun", ... */
    /** Optional: device-memory hooks; NULL = host memory only (then
     *  --buffers cuda is refused). */
    const rmacoll_perf_devops_t *dev;
    /** Label of the primary collective's rows when a baseline runs
     *  ("rmacoll"); NULL = name. */
    const char *coll_name;
    /** Optional baseline on the same counts and buffers ("nccl"). */
    const char *baseline_name;
    rmacoll_perf_a2av_fn_t baseline_alltoallv;
    /** Optional (needed by --gemm): every rank receives nranks * k doubles
     *  (rank r's at r * k) in all. */
    rmacoll_status_t (*allgather_f64)(void *ctx, const double *mine, int k,
                                      double *all, char *err, size_t errlen);
    /** Optional: the --gemm load, set up by the tool for o->gemm_n and
     *  o->gemm_iters; NULL = --gemm refused. */
    const rmacoll_perf_loadops_t *load;
    /** Optional: this rank's device for the "# Using devices" lines:
     *  *device (-1 = host memory), bus id ("0000:04:00") and name. NULL =
     *  host memory. */
    void (*describe)(void *ctx, int *device, char *busid, size_t busid_len,
                     char *name, size_t name_len);
    /** Optional (-R 1|2; NULL: -R refused): the backend's allocator of
     *  registered host memory for the host send and receive buffers of
     *  every row, instead of posix_memalign. host_alloc gets bytes > 0
     *  (1 for an empty buffer); host_free gets what it returned, never
     *  NULL, after the row's last call. Both return RMACOLL_SUCCESS or an
     *  error with err filled; an error fails the run. host_alloc_name
     *  ("rmacoll_mem_alloc") is printed in the header and the JSON. */
    rmacoll_status_t (*host_alloc)(void *ctx, size_t bytes, void **ptr,
                                   char *err, size_t errlen);
    rmacoll_status_t (*host_free)(void *ctx, void *ptr, char *err,
                                  size_t errlen);
    const char *host_alloc_name;
} rmacoll_perf_backend_t;

/**
 * Runs every size row and prints them on rank 0 (stdout; JSON to
 * o->json_path). Returns 0 when every call succeeded and no element was
 * wrong, 2 when some element was wrong, 1 on an error (printed on rank 0,
 * and on the rank that met it), RMACOLL_PERF_EXIT_USAGE when -R is given
 * to a backend without host_alloc (printed on rank 0, nothing run).
 */
int rmacoll_perf_run(const rmacoll_perf_opts_t *o,
                     const rmacoll_perf_backend_t *be);

/** Node key of this process: RMACOLL_NODE_ID when set, else a hash of
 *  the host name (what rmacoll_comm_create uses by default). */
int64_t rmacoll_perf_node_key(void);

#endif /* RMACOLL_TOOLS_PERFRUN_H */
