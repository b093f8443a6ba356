/*
 * c_loop.c - the C side of python/bench/bench_overhead.py: `iters` calls of
 * rmacoll_alltoallv back to back, each timed with CLOCK_MONOTONIC (the
 * clock of Python's time.perf_counter_ns), on the arguments the Python
 * side prepared. The function is passed in as a pointer (the
 * rmacoll_alltoallv of the librmacoll the Python package loaded), so the
 * C loop and the Python loop make the same library call, on the same
 * communicator and the same buffers, in one process. Built by
 * python/CMakeLists.txt as build/python/librmacoll_bench_loop.so; not
 * installed.
 */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int (*alltoallv_fn)(const void *sendbuf, const int64_t *sendcounts,
                            const int64_t *sdispls, void *recvbuf, const int64_t *recvcounts,
                            const int64_t *rdispls, int datatype, void *comm, void *stream);

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ns[i]: the time of call i. Returns 0, or the first failing status.
 * Exported for ctypes only (no header). */
int rmacoll_bench_c_loop(alltoallv_fn f, const void *sendbuf, const int64_t *sendcounts,
                         const int64_t *sdispls, void *recvbuf, const int64_t *recvcounts,
                         const int64_t *rdispls, int datatype, void *comm, int iters,
                         int64_t *ns)
{
    for (int i = 0; i < iters; i++) {
        int64_t t0 = now_ns();
        int st = f(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, datatype,
                   comm, NULL);
        ns[i] = now_ns() - t0;
        if (st != 0)
            return st;
    }
    return 0;
}

typedef int (*sync_fn)(void *stream);

/* The same on device buffers: each call enqueued on `stream` is timed
 * alone (the host's cost of the call), then `sync` (cudaStreamSynchronize
 * of the libcudart the caller found) drains the stream, untimed, as the
 * Python side does after each of its calls. Returns 0, the first failing
 * status, or -1 when sync fails. */
int rmacoll_bench_c_loop_stream(alltoallv_fn f, const void *sendbuf, const int64_t *sendcounts,
                                const int64_t *sdispls, void *recvbuf,
                                const int64_t *recvcounts, const int64_t *rdispls,
                                int datatype, void *comm, void *stream, sync_fn sync,
                                int iters, int64_t *ns)
{
    for (int i = 0; i < iters; i++) {
        int64_t t0 = now_ns();
        int st = f(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, datatype,
                   comm, stream);
        ns[i] = now_ns() - t0;
        if (st != 0)
            return st;
        if (sync(stream) != 0)
            return -1;
    }
    return 0;
}
