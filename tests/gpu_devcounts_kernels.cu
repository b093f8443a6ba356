/*
 * gpu_devcounts_kernels.cu - the kernels of test_gpu_devcounts.c: counts
 * and send data written on the stream (as a router would), from the pure
 * functions of gpu_devcounts.h.
 */
#include "gpu_devcounts.h"

__global__ void dct_counts_kernel(int64_t *counts, int n, int rank, uint64_t seed, int pattern)
{
    int j = (int)(blockIdx.x * blockDim.x + threadIdx.x);

    if (j < n) {
        counts[j] = dct_count(seed, pattern, rank, j, n);
    }
}

__global__ void dct_fill_kernel(uint8_t *buf, uint64_t bytes, int rank, uint64_t seed)
{
    for (uint64_t x = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; x < bytes;
         x += (uint64_t)gridDim.x * blockDim.x) {
        buf[x] = dct_byte(seed, rank, x);
    }
}

extern "C" cudaError_t dct_write_counts(int64_t *counts, int n, int rank, uint64_t seed,
                                        int pattern, cudaStream_t s)
{
    dct_counts_kernel<<<1, 64, 0, s>>>(counts, n, rank, seed, pattern);
    return cudaGetLastError();
}

extern "C" cudaError_t dct_fill_send(uint8_t *buf, uint64_t bytes, int rank, uint64_t seed,
                                     cudaStream_t s)
{
    if (bytes == 0) {
        return cudaSuccess;
    }
    dct_fill_kernel<<<32, 256, 0, s>>>(buf, bytes, rank, seed);
    return cudaGetLastError();
}
