/*
 * gpu_try.h - the CUDA-call check of the GPU tests: on an error, prints the
 * call, the CUDA message and the place, sets `rcode` to code and jumps to
 * `out` (both must be in scope, with `rank`); and the device count of the
 * multi-process tests' probe.
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

/* CUDA devices (at most 100), 0 when CUDA fails: the probe of the tests
 * whose ranks are forked processes, run in a forked child
 * (mprun_forked(rmacoll_test_gpu_count, 60)) so that CUDA never starts in
 * the parent, which forks the ranks. */
static inline int rmacoll_test_gpu_count(void)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess)
        n = 0;
    return n > 100 ? 100 : n;
}

#endif /* RMACOLL_TESTS_GPU_TRY_H */
