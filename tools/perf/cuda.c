/*
 * cuda.c - rmacoll-perf --buffers cuda: the device hooks of the
 * benchmark loop (cudaMalloc'd buffers, copies, CUDA-event timing, -G's
 * graphs), the "# Using devices" line, and the GPU, stream and events of
 * one rank. Compiled to nothing without RMACOLL_PERF_HAVE_CUDA.
 */
#include "perf_tool.h"

#ifdef RMACOLL_PERF_HAVE_CUDA
rmacoll_status_t perf_cuda(cudaError_t ce, const char *what,
                           size_t bytes, const perf_rmacoll_t *p,
                           char *err, size_t errlen)
{
    if (ce == cudaSuccess)
        return RMACOLL_SUCCESS;
    snprintf(err, errlen, "rank %d: %s of %zu bytes on device %d: %s",
             p->rank, what, bytes, p->device, cudaGetErrorString(ce));
    return RMACOLL_ERR_CUDA;
}

static rmacoll_status_t perf_dev_alloc(void *ctx, size_t bytes, void **buf,
                                       char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    *buf = NULL;
    return perf_cuda(cudaMalloc(buf, bytes), "cudaMalloc", bytes, p, err,
                     errlen);
}

static void perf_dev_release(void *ctx, void *buf)
{
    (void)ctx;
    cudaFree(buf);
}

/* Copies after the stream's earlier work, and waits for the copy. */
static rmacoll_status_t perf_dev_copy(perf_rmacoll_t *p, void *dst,
                                      const void *src, size_t bytes,
                                      enum cudaMemcpyKind kind,
                                      const char *what, char *err,
                                      size_t errlen)
{
    cudaStream_t s = (cudaStream_t)p->stream;
    rmacoll_status_t st;

    st = perf_cuda(cudaMemcpyAsync(dst, src, bytes, kind, s), what, bytes, p,
                   err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaStreamSynchronize(s), what, bytes, p, err, errlen);
    return st;
}

static rmacoll_status_t perf_dev_upload(void *ctx, void *dev, const void *host,
                                        size_t bytes, char *err, size_t errlen)
{
    return perf_dev_copy(ctx, dev, host, bytes, cudaMemcpyHostToDevice,
                         "host to device copy", err, errlen);
}

static rmacoll_status_t perf_dev_download(void *ctx, void *host,
                                          const void *dev, size_t bytes,
                                          char *err, size_t errlen)
{
    return perf_dev_copy(ctx, host, dev, bytes, cudaMemcpyDeviceToHost,
                         "device to host copy", err, errlen);
}

static rmacoll_status_t perf_dev_sync(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return perf_cuda(cudaStreamSynchronize((cudaStream_t)p->stream),
                     "stream synchronize", 0, p, err, errlen);
}

static rmacoll_status_t perf_dev_timer_start(void *ctx, char *err,
                                             size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return perf_cuda(cudaEventRecord(p->ev_start, (cudaStream_t)p->stream),
                     "event record", 0, p, err, errlen);
}

static rmacoll_status_t perf_dev_timer_stop(void *ctx, double *us, char *err,
                                            size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    rmacoll_status_t st;
    float ms = 0;

    st = perf_cuda(cudaEventRecord(p->ev_stop, (cudaStream_t)p->stream),
                   "event record", 0, p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventSynchronize(p->ev_stop), "event synchronize",
                       0, p, err, errlen);
    if (st == RMACOLL_SUCCESS)
        st = perf_cuda(cudaEventElapsedTime(&ms, p->ev_start, p->ev_stop),
                       "event elapsed time", 0, p, err, errlen);
    *us = (double)ms * 1e3;
    return st;
}

/* -G: the calls between begin and end captured into one graph
 * (tools/common/cuda_graph.h, shared with rmacoll-latency). */
static rmacoll_status_t perf_dev_graph_begin(void *ctx, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return rmacoll_tool_graph_begin((cudaStream_t)p->stream, err, errlen) == 0
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_CUDA;
}

static rmacoll_status_t perf_dev_graph_end(void *ctx, int ok, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return rmacoll_tool_graph_end(&p->graph, (cudaStream_t)p->stream, ok, err, errlen) == 0
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_CUDA;
}

static rmacoll_status_t perf_dev_graph_launch(void *ctx, int n, char *err, size_t errlen)
{
    perf_rmacoll_t *p = ctx;

    return rmacoll_tool_graph_launch(&p->graph, (cudaStream_t)p->stream, n, err, errlen) == 0
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_CUDA;
}

const rmacoll_perf_devops_t perf_cuda_devops = {
    perf_dev_alloc,       perf_dev_release,     perf_dev_upload,
    perf_dev_download,    perf_dev_sync,        perf_dev_timer_start,
    perf_dev_timer_stop,  perf_dev_graph_begin, perf_dev_graph_end,
    perf_dev_graph_launch,
};

/* The "# Using devices" line of this rank: its GPU, PCI bus id, name. */
void perf_cuda_describe(void *ctx, int *device, char *busid,
                        size_t busid_len, char *name, size_t name_len)
{
    perf_rmacoll_t *p = ctx;
    struct cudaDeviceProp prop;
    char bus[32];

    if (p->stream == NULL)
        return;     /* host memory: the defaults */
    *device = p->device;
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), p->device) == cudaSuccess)
        snprintf(busid, busid_len, "%s", bus);
    if (cudaGetDeviceProperties(&prop, p->device) == cudaSuccess)
        snprintf(name, name_len, "%s", prop.name);
}

/* Picks the GPU and makes the stream and events; before the communicator
 * (so that the library sees the right current device). */
int perf_cuda_setup(perf_rmacoll_t *p, const rmacoll_launch_env_t *env)
{
    cudaError_t ce;
    cudaStream_t s = NULL;

    rmacoll_launch_local(env, &p->local_rank, &p->local_size);
    ce = cudaGetDeviceCount(&p->ndevices);
    if (ce != cudaSuccess || p->ndevices < 1) {
        fprintf(stderr, PERF_NAME ": rank %d: --buffers cuda: no CUDA device "
                "(%s)\n", env->rank,
                ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return 1;
    }
    p->device = p->local_rank % p->ndevices;
    ce = cudaSetDevice(p->device);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&p->ev_start);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&p->ev_stop);
    if (ce != cudaSuccess) {
        fprintf(stderr, PERF_NAME ": rank %d: device %d setup failed: %s\n",
                env->rank, p->device, cudaGetErrorString(ce));
        if (s != NULL)
            cudaStreamDestroy(s);
        return 1;
    }
    p->stream = s;
    return 0;
}

void perf_cuda_teardown(perf_rmacoll_t *p)
{
    if (p->stream == NULL)
        return;
    cudaStreamSynchronize((cudaStream_t)p->stream);
    rmacoll_tool_graph_free(&p->graph);
    cudaEventDestroy(p->ev_start);
    cudaEventDestroy(p->ev_stop);
    cudaStreamDestroy((cudaStream_t)p->stream);
    p->stream = NULL;
}
#endif /* RMACOLL_PERF_HAVE_CUDA */
