/*
 * gpu_devcounts.h - what test_gpu_devcounts.c (host, C) and its kernels
 * (gpu_devcounts_kernels.cu) agree on: the count matrix of a step as a
 * pure function of (seed, pattern, source, destination), so that a kernel
 * writes the counts on the stream and the host knows them without reading
 * them back, and the byte at each offset of a send buffer.
 */
#ifndef RMACOLL_TESTS_GPU_DEVCOUNTS_H
#define RMACOLL_TESTS_GPU_DEVCOUNTS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

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

#ifdef __cplusplus
}
#endif

#endif /* RMACOLL_TESTS_GPU_DEVCOUNTS_H */
