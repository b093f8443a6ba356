/*
 * gemm.c - rmacoll-perf --gemm N: the interfering bf16 GEMMs (cuBLAS) on
 * a stream of their own, timed alone and under the alltoallv. Compiled to
 * nothing without RMACOLL_PERF_HAVE_CUBLAS.
 */
#include "perf_tool.h"

#ifdef RMACOLL_PERF_HAVE_CUBLAS
static rmacoll_status_t perf_blas(cublasStatus_t bs, const char *what,
                                  const perf_rmacoll_t *p, char *err,
                                  size_t errlen)
{
    if (bs == CUBLAS_STATUS_SUCCESS)
        return RMACOLL_SUCCESS;
    snprintf(err, errlen, "rank %d: %s (n %d) on device %d: %s", p->rank,
             what, p->gemm_n, p->device, cublasGetStatusString(bs));
    return RMACOLL_ERR_CUDA;
}

/* C = A * B, bf16 in and out, fp32 compute, on the GEMM stream. */
static rmacoll_status_t perf_gemm_one(perf_rmacoll_t *p, char *err,
                                      size_t errlen)
{
    const float alpha = 1.0f, beta = 0.0f;
    int n = p->gemm_n;

    return perf_blas(cublasGemmEx(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n,
                                  &alpha, p->gemm_a, CUDA_R_16BF, n,
                                  p->gemm_b, CUDA_R_16BF, n, &beta, p->gemm_c,
                                  CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx", p, err, errlen);
}

static rmacoll_status_t perf_gemm_start(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;

    st = perf_cuda(cudaEventRecord(p->gemm_start, p->gemm_stream),
                   "gemm event record", 0, p, err, errlen);
    for (int i = 0; i < p->gemm_iters && st == RMACOLL_SUCCESS; i++)
        st = perf_gemm_one(p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventRecord(p->gemm_stop, p->gemm_stream),
                       "gemm event record", 0, p, err, errlen);
    return st;
}

static rmacoll_status_t perf_gemm_finish(void *ctx, double *us, char *err,
                                         size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;
    float ms = 0;

    st = perf_cuda(cudaEventSynchronize(p->gemm_stop),
                   "gemm event synchronize", 0, p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventElapsedTime(&ms, p->gemm_start, p->gemm_stop),
                       "gemm event elapsed time", 0, p, err, errlen);
    *us = (double)ms * 1e3;
    return st;
}

const rmacoll_perf_loadops_t perf_gemm_loadops = {
    perf_gemm_start,
    perf_gemm_finish,
};

/* bf16 of a float: the top 16 bits (truncation is fine for test data). */
static uint16_t perf_bf16(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

/* Second stream, handle, A/B (pseudo-random values in [-1, 1), so the
 * tensor cores do not see zeros), C, events, then three warm-up GEMMs. */
int perf_gemm_setup(perf_rmacoll_t *p, int n, int iters)
{
    size_t elems = (size_t)n * (size_t)n, bytes = elems * 2;
    uint16_t *h = NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)p->rank;
    char err[512] = "";
    rmacoll_status_t st;
    void **mats[3];

    p->gemm_n = n;
    p->gemm_iters = iters;
    mats[0] = &p->gemm_a;
    mats[1] = &p->gemm_b;
    mats[2] = &p->gemm_c;
    st = perf_cuda(cudaStreamCreateWithFlags(&p->gemm_stream,
                                             cudaStreamNonBlocking),
                   "gemm stream create", 0, p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventCreate(&p->gemm_start), "gemm event create",
                       0, p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventCreate(&p->gemm_stop), "gemm event create", 0,
                       p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_blas(cublasCreate(&p->blas), "cublasCreate", p, err,
                       sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_blas(cublasSetStream(p->blas, p->gemm_stream),
                       "cublasSetStream", p, err, sizeof(err));
    for (int m = 0; m < 3 && st == RMACOLL_SUCCESS; m++)
        st = perf_cuda(cudaMalloc(mats[m], bytes), "gemm matrix cudaMalloc",
                       bytes, p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS) {
        h = malloc(bytes);
        if (h == NULL) {
            snprintf(err, sizeof(err), "rank %d: no host memory for %zu "
                     "bytes of gemm input", p->rank, bytes);
            st = RMACOLL_ERR_NO_MEMORY;
        }
    }
    for (int m = 0; m < 2 && st == RMACOLL_SUCCESS; m++) {
        for (size_t i = 0; i < elems; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h[i] = perf_bf16((float)(int32_t)(x >> 32) / 2147483648.0f);
        }
        st = perf_cuda(cudaMemcpy(*mats[m], h, bytes, cudaMemcpyHostToDevice),
                       "gemm input copy", bytes, p, err, sizeof(err));
    }
    free(h);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaMemset(p->gemm_c, 0, bytes), "gemm output memset",
                       bytes, p, err, sizeof(err));
    for (int i = 0; i < 3 && st == RMACOLL_SUCCESS; i++)
        st = perf_gemm_one(p, err, sizeof(err));
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaStreamSynchronize(p->gemm_stream),
                       "gemm warm-up", 0, p, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": --gemm %d: %s\n", n, err);
        return 1;
    }
    return 0;
}

/* Safe on a partial setup (every field NULL until made). */
void perf_gemm_teardown(perf_rmacoll_t *p)
{
    if (p->gemm_stream != NULL)
        cudaStreamSynchronize(p->gemm_stream);
    if (p->blas != NULL)
        cublasDestroy(p->blas);
    cudaFree(p->gemm_a);
    cudaFree(p->gemm_b);
    cudaFree(p->gemm_c);
    if (p->gemm_start != NULL)
        cudaEventDestroy(p->gemm_start);
    if (p->gemm_stop != NULL)
        cudaEventDestroy(p->gemm_stop);
    if (p->gemm_stream != NULL)
        cudaStreamDestroy(p->gemm_stream);
    p->blas = NULL;
    p->gemm_a = p->gemm_b = p->gemm_c = NULL;
    p->gemm_start = p->gemm_stop = NULL;
    p->gemm_stream = NULL;
}
#endif /* RMACOLL_PERF_HAVE_CUBLAS */
