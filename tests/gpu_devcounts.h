/*
 * gpu_devcounts.h - what the device-count tests (test_gpu_devcounts.c:
 * ranks as threads; test_gpu_devcounts_proc.c: ranks as processes), their
 * kernels (gpu_devcounts_kernels.cu) and their shared steps and checks
 * (gpu_devcounts_check.c) agree on: the count matrix of a step as a pure
 * function of (seed, pattern, source, destination), so that a kernel
 * writes the counts on the stream and the host knows them without reading
 * them back, and the byte at each offset of a send buffer; then one rank's
 * arrays and buffers and the life of one communicator (steps, capture,
 * replays), every byte checked, the harness (threads or processes) given
 * as hooks.
 */
#ifndef RMACOLL_TESTS_GPU_DEVCOUNTS_H
#define RMACOLL_TESTS_GPU_DEVCOUNTS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifndef __CUDACC__
#include "rmacoll.h"
#endif

#ifdef __CUDACC__
#define DCT_HD __host__ __device__
#else
#define DCT_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Count patterns. */
enum {
    DCT_RANDOM = 0,     /* 0..DCT_MAXC, about a quarter of them 0 */
    DCT_TO_ONE = 1,     /* every rank sends DCT_MAXC to one rank (seed % n), 0 elsewhere */
    DCT_ZERO = 2,       /* all 0 */
    DCT_SKEW = 3,       /* rank i sends (i + 1) * (j + 1) * 3 to j: a skewed matrix */
    DCT_NEG = 4,        /* DCT_RANDOM, but rank seed % n sends -1 to rank 0 */
    DCT_OVER_RECV = 5,  /* rank seed % n receives 1 element more than its capacity */
    DCT_OVER_SEND = 6,  /* DCT_RANDOM, but rank seed % n sends 1 more than its capacity */
    DCT_PLUS1 = 7       /* DCT_RANDOM + 1 everywhere (a combine's wrong given counts) */
};

/* Elements a rank may send to one peer at most in the regular patterns;
 * capacities (elements): send DCT_SEND_CAP, receive DCT_RECV_CAP (>=
 * nranks * DCT_MAXC for up to DCT_MAX_N ranks). */
#define DCT_MAX_N 8
#define DCT_MAXC 300
#define DCT_SEND_CAP (DCT_MAX_N * DCT_MAXC)
#define DCT_RECV_CAP (DCT_MAX_N * DCT_MAXC)

DCT_HD static inline uint32_t dct_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* What rank src sends to rank dst (elements) in a step. */
DCT_HD static inline int64_t dct_count(uint64_t seed, int pattern, int src, int dst, int n)
{
    uint32_t h = dct_hash(seed * 1000003ull + (uint64_t)src * 1009ull + (uint64_t)dst);
    int64_t c = (h & 3u) == 0 ? 0 : (int64_t)((h >> 2) % (DCT_MAXC + 1));
    int who = (int)(seed % (uint64_t)n);

    switch (pattern) {
    case DCT_TO_ONE:
        return dst == who ? DCT_MAXC : 0;
    case DCT_ZERO:
        return 0;
    case DCT_SKEW:
        return (int64_t)(src + 1) * (dst + 1) * 3;
    case DCT_NEG:
        return src == who && dst == 0 ? -1 : c;
    case DCT_OVER_RECV:
        /* every rank sends to `who` its share of the capacity, rank 0 one more */
        return dst != who ? 0 : DCT_RECV_CAP / n + (src == 0 ? DCT_RECV_CAP % n + 1 : 0);
    case DCT_PLUS1:
        return c + 1;
    case DCT_OVER_SEND:
        /* `who` sends DCT_SEND_CAP + 1 in all, to itself */
        return src != who ? c : dst == who ? DCT_SEND_CAP + 1 : 0;
    default:
        return c;
    }
}

/* Byte x of rank src's send buffer in step seed (never the sentinel). */
DCT_HD static inline uint8_t dct_byte(uint64_t seed, int src, uint64_t x)
{
    uint8_t b = (uint8_t)dct_hash((seed << 40) ^ ((uint64_t)src << 32) ^ x);

    return b == 0xa5u ? 0x5au : b;
}

/* Kernels on s: counts[0, n) of rank for (seed, pattern); the whole send
 * buffer (bytes) of rank for seed. */
cudaError_t dct_write_counts(int64_t *counts, int n, int rank, uint64_t seed, int pattern,
                             cudaStream_t s);
cudaError_t dct_fill_send(uint8_t *buf, uint64_t bytes, int rank, uint64_t seed,
                          cudaStream_t s);

#ifndef __CUDACC__
/* ---- host side: gpu_devcounts_check.c ---------------------------------- */

/* Results of the functions below; the values of gpu_threads.h's GT_* and
 * test_gpu_e2e.c's GPU_* codes. */
enum { DCT_OK = 0, DCT_WRONG_DATA = 1, DCT_WRONG_STATUS = 2, DCT_CUDA = 3 };

#define DCT_SENT 0xa5u   /* sentinel byte */
#define DCT_GUARD 64u    /* bytes checked past each capacity */
#define DCT_NGUARD 4     /* int64 / int32 words checked past each array */
#define DCT_ST_D 0                 /* dispatch's status word */
#define DCT_ST_C (1 + DCT_NGUARD)  /* combine's */

/* What the harness provides: ranks as threads of one process
 * (gpu_threads.h) or as forked processes (mprun.h). */
typedef struct dct_hooks {
    /* waits for s to drain, bounded: DCT_OK, or DCT_CUDA (the stream failed) */
    int (*sync)(cudaStream_t s, int rank, const char *what);
    /* records that rank failed (so that its peers give up waiting sooner) */
    void (*fail)(int rank);
    /* every rank of the run meets here, bounded */
    void (*barrier)(int rank, const char *what);
} dct_hooks_t;

/* One rank's device arrays and buffers and their host copies. */
typedef struct dct {
    size_t es;
    rmacoll_datatype_t dtype;
    const dct_hooks_t *h;
    int64_t *sc, *rc;            /* device, [n + DCT_NGUARD] */
    int32_t *st;                 /* device, [2 * (1 + DCT_NGUARD)]: dispatch, combine */
    uint8_t *send, *recv, *back; /* device: capacity * es + DCT_GUARD */
    int64_t *hrc;
    int32_t *hst;
    uint8_t *hrecv, *hback;
    int ncalls;                  /* device-count calls enqueued (SUCCESS) */
} dct_t;

/* One step: counts of (seed, pattern), dispatch then combine. */
typedef struct dct_step {
    uint64_t seed;
    int pattern;
    int wd, wc;          /* statuses expected */
    int spoil;           /* the combine's given counts off by one */
    const char *text;    /* in the report, with "%d" for the rank the pattern names */
} dct_step_t;

/* The ordinary steps, in order: random, all zero, all to one, skew;
 * overflow of a receive capacity, a negative count, overflow of a send
 * capacity, a combine with wrong given counts, each followed by a good
 * step. */
extern const dct_step_t dct_steps[];
extern const int dct_nsteps;

/* Allocates d's arrays and buffers for n ranks (the legacy stream only,
 * synchronised); dct_free frees them. */
int dct_alloc(dct_t *d, int rank, int n, rmacoll_datatype_t dtype, const dct_hooks_t *h);
void dct_free(dct_t *d);
/* Enqueues the inputs of step (seed, pattern) on s, as a model's kernels
 * would: counts, send data; outputs back to the sentinel. */
int dct_prep(dct_t *d, int rank, int n, uint64_t seed, int pattern, cudaStream_t s);
/* The calls: dispatch (receive counts produced), combine (what was
 * received goes back to its sender, into the sender's layout: counts
 * given); d->ncalls counts the successful ones. */
rmacoll_status_t dct_dispatch(dct_t *d, rmacoll_comm_t *comm, cudaStream_t s);
rmacoll_status_t dct_combine(dct_t *d, rmacoll_comm_t *comm, cudaStream_t s);
/* Synchronises s and checks every byte of step (seed, pattern): wd / wc
 * the statuses expected of dispatch and combine (-1: the call was not
 * made, or refused: its status word, the receive counts and its buffer
 * stay sentinel). */
int dct_check(dct_t *d, int rank, int n, uint64_t seed, int pattern, int wd, int wc,
              cudaStream_t s, const char *what);
/* rmacoll_device_counts_check: `want` once (naming `text`), then nothing. */
int dct_report(rmacoll_comm_t *comm, int rank, rmacoll_status_t want, const char *text,
               const char *what);
/* One step (dispatch, combine), checked. */
int dct_ordinary(dct_t *d, rmacoll_comm_t *comm, int rank, int n, const dct_step_t *k,
                 cudaStream_t s);

/* One communicator's life. */
typedef struct dct_run {
    rmacoll_datatype_t dtype;
    int across;          /* across nodes: the stream-triggered form (no host-pointer check) */
    int replays;         /* graph replays (an ordinary step after every 25th) */
    const dct_hooks_t *h;
} dct_run_t;

/* On every rank: a host pointer as sendcounts on rank 0 (refused on every
 * rank; not across nodes), every step of dct_steps, dispatch + combine
 * captured into one graph (nothing moves at capture) and a->replays
 * replays with new counts and data before each (zeros, all to one, skew,
 * overflow among them), every one checked, then the communicator's
 * device_counts_calls. */
int dct_body(rmacoll_comm_t *comm, int rank, int n, cudaStream_t s, const dct_run_t *a);
#endif /* !__CUDACC__ */

#ifdef __cplusplus
}
#endif

#endif /* RMACOLL_TESTS_GPU_DEVCOUNTS_H */
