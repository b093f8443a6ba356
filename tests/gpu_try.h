/*
 * gpu_try.h - the CUDA-call check of the GPU tests: on an error, prints the
 * call, the CUDA message and the place, sets `rcode` to code and jumps to
 * `out` (both must be in scope, with `rank`).
 */
#ifndef RMACOLL_TESTS_GPU_TRY_H
#define RMACOLL_TESTS_GPU_TRY_H

#include <stdio.h>

#include <cuda_runtime_api.h>

#define RMACOLL_TEST_CUDA_TRY(call, code)                                      \
    do {                                                                       \
        cudaError_t ce_ = (call);                                              \
        if (ce_ != cudaSuccess) {                                              \
            fprintf(stderr, "rank %d: %s failed: %s (%s:%d)\n", rank, #call,   \
                    cudaGetErrorString(ce_), __FILE__, __LINE__);              \
            rcode = (code);                                                    \
            goto out;                                                          \
        }                                                                      \
    } while (0)

#endif /* RMACOLL_TESTS_GPU_TRY_H */
