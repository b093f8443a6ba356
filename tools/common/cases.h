/*
 * cases.h - count-matrix cases (the format of tests/cases/README.md):
 * reader, random generators, displacement helpers, and the fill pattern
 * that everything checking data (tests, reference executor, benchmark)
 * shares: every element encodes (source rank, destination rank, index,
 * iteration); gaps and guards hold a sentinel byte.
 *
 * Case format (one AlltoAllV call), plain text, '#' starts a comment:
 *   topology: 4,4         ranks per node, contiguous in rank order
 *   nodes: 0,1,0,1        (extension) node id of every rank, instead of
 *                         topology:, for non-contiguous placements
 *   dtype: float32
 *   send:                 N rows of N counts (row i = sender i)
 *   recv:                 optional, same shape (row i = what every
 *                         receiver j expects from i); absent = send
 * Everything here is thread-safe (no global state).
 */
#ifndef RMACOLL_TOOLS_CASES_H
#define RMACOLL_TOOLS_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll.h"

/** One AlltoAllV call over a topology. Counts in elements. */
typedef struct rmacoll_case {
    int nranks;
    int nnodes;
    int *node_of;          /* [nranks] node id of every rank, 0..nnodes-1 */
    rmacoll_datatype_t dtype;
    int64_t *send;         /* [nranks * nranks] send[i*N + j]: i sends to j */
    int64_t *recv;         /* [nranks * nranks] recv[i*N + j]: j expects from i */
    int has_mismatch;      /* recv differs from send somewhere */
    char name[128];        /* file name without directory, or generator */
} rmacoll_case_t;

/**
 * Reads a case file. On a parse error returns RMACOLL_ERR_INVALID_ARG
 * and err receives "FILE:LINE: cause"; on an unreadable file
 * RMACOLL_ERR_INVALID_ARG with the errno text. *c is NULL on error.
 */
rmacoll_status_t rmacoll_case_load(const char *path, rmacoll_case_t **c,
                                   char *err, size_t errlen);

/** Same as rmacoll_case_load, from a string; `name` is used in messages. */
rmacoll_status_t rmacoll_case_parse(const char *text, const char *name,
                                    rmacoll_case_t **c, char *err,
                                    size_t errlen);

/**
 * An all-zero case: node_of[nranks] (node ids must be 0..nnodes-1, each
 * used), or node_of NULL for one node. recv is a separate array equal to
 * send. Errors: RMACOLL_ERR_INVALID_ARG, RMACOLL_ERR_NO_MEMORY.
 */
rmacoll_status_t rmacoll_case_create(int nranks, const int *node_of,
                                     rmacoll_datatype_t dtype,
                                     rmacoll_case_t **c);

/** Contiguous node sizes "4,4", or "NxG" (N nodes of G ranks) → node_of;
 * *nranks_out ranks. RMACOLL_ERR_INVALID_ARG: bad spec or more than max_ranks. */
rmacoll_status_t rmacoll_case_parse_topology(const char *spec, int *node_of,
                                             int max_ranks, int *nranks_out);

void rmacoll_case_free(rmacoll_case_t *c);

/** Recomputes has_mismatch after recv was edited. */
void rmacoll_case_update_mismatch(rmacoll_case_t *c);

/** Number of ranks on node `node` (count of node_of == node). */
int rmacoll_case_node_size(const rmacoll_case_t *c, int node);

/* ---- generators ---- */

typedef enum rmacoll_case_dist_kind {
    RMACOLL_CASE_UNIFORM = 0, /* every count = base (AlltoAll) */
    RMACOLL_CASE_RANDOM = 1,  /* every count uniform in [0, 2*base] */
    RMACOLL_CASE_ZIPF = 2,    /* zipf:ALPHA MoE-like popularity of receivers */
    RMACOLL_CASE_SPARSE = 3   /* sparse:P each entry non-zero with prob. P */
} rmacoll_case_dist_kind_t;

typedef struct rmacoll_case_dist {
    rmacoll_case_dist_kind_t kind;
    double param;             /* ALPHA for zipf, P for sparse */
} rmacoll_case_dist_t;

/** Parses "uniform", "random", "zipf:1.2", "sparse:0.1". */
rmacoll_status_t rmacoll_case_dist_parse(const char *spec,
                                         rmacoll_case_dist_t *dist);

/**
 * A random case, deterministic in `seed`. Nodes are contiguous with
 * node_sizes[nnodes] ranks each. `base` is the mean count per (sender,
 * receiver) pair in elements:
 *  - uniform: every count = base;
 *  - random: uniform in [0, 2*base];
 *  - zipf:A: each sender sends about base*N elements in all, split over
 *    receivers by Zipf(A) weights over one random popularity order of the
 *    receivers (the same for every sender, as MoE experts), ±20% noise;
 *  - sparse:P: each count is 0 with probability 1-P, else uniform in
 *    [1, 2*base] (at least 1).
 * Errors: RMACOLL_ERR_INVALID_ARG, RMACOLL_ERR_NO_MEMORY.
 */
rmacoll_status_t rmacoll_case_random(int nnodes, const int *node_sizes,
                                     const rmacoll_case_dist_t *dist,
                                     int64_t base, uint64_t seed,
                                     rmacoll_datatype_t dtype,
                                     rmacoll_case_t **c);

/** splitmix64 step: the generators' random source (state advanced). */
uint64_t rmacoll_case_rand(uint64_t *state);

/* ---- displacements ---- */

/**
 * Contiguous displacements: displs[k] = sum of counts[0..k-1]. Returns the
 * extent in elements (sum of counts).
 */
int64_t rmacoll_displs_contiguous(int n, const int64_t *counts,
                                  int64_t *displs);

/**
 * Gapped displacements: blocks in REVERSE rank order, with `gap` elements
 * before every block and after the last, so that writes outside blocks
 * and order assumptions are caught. Returns the extent in elements.
 */
int64_t rmacoll_displs_gapped(int n, const int64_t *counts, int64_t gap,
                              int64_t *displs);

/* ---- fill pattern ---- */

/** Byte that fills gaps, guards and untouched receive buffers. */
#define RMACOLL_FILL_SENTINEL 0xA5u

/**
 * The value of element `index` of the block src sends to dst in call
 * `iter`, as 64 bits: base(src, dst, iter) + index * step(src, dst, iter)
 * with a hashed base and an odd hashed step, so that neighbouring
 * elements always differ in every width and different (src, dst, iter)
 * differ with high probability. An element of width w bytes holds the low
 * w bytes (little-endian) of this value.
 */
uint64_t rmacoll_fill_value(int src, int dst, int64_t index, uint64_t iter);

/** Writes `count` elements of width esize bytes, starting at element
 *  `first` of the block src -> dst, to out. */
void rmacoll_fill_block(void *out, size_t esize, int src, int dst,
                        int64_t first, int64_t count, uint64_t iter);

/** Fills rank src's send buffer: block j at sdispls[j], sendcounts[j]
 *  elements; bytes outside blocks get the sentinel. bytes = buffer size. */
void rmacoll_fill_send(void *buf, size_t bytes, size_t esize, int src,
                       int nranks, const int64_t *sendcounts,
                       const int64_t *sdispls, uint64_t iter);

/** Result of rmacoll_check_recv. */
typedef struct rmacoll_check_report {
    uint64_t nwrong;        /* wrong elements inside receive blocks */
    uint64_t ngap_wrong;    /* bytes outside blocks that are not sentinel */
    int rank;               /* the receiver checked */
    int first_src;          /* first wrong element: its source, or -1 */
    int64_t first_index;    /* element index within the block */
    uint64_t expected, got; /* low esize bytes, little-endian */
    int64_t first_gap_off;  /* byte offset of the first bad gap byte, or -1 */
    char msg[256];          /* "" when everything is right */
} rmacoll_check_report_t;

/**
 * Checks rank dst's receive buffer (bytes long) after a call: block i at
 * rdispls[i] must hold recvcounts[i] elements of fill(i, dst, ., iter),
 * every other byte must be the sentinel. Returns the number of wrong
 * elements plus wrong gap bytes (0 = correct); rep (may be NULL) gets the
 * first wrong element and the counts.
 */
uint64_t rmacoll_check_recv(const void *buf, size_t bytes, size_t esize,
                            int dst, int nranks, const int64_t *recvcounts,
                            const int64_t *rdispls, uint64_t iter,
                            rmacoll_check_report_t *rep);

/** Parses a size with an optional K/M/G/T suffix (powers of 1024, an
 *  optional trailing "B"/"iB"); RMACOLL_ERR_INVALID_ARG if malformed. */
rmacoll_status_t rmacoll_parse_size(const char *s, uint64_t *out);

#endif /* RMACOLL_TOOLS_CASES_H */
