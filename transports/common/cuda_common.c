/*
 * cuda_common.c - CUDA helpers shared by transports (cuda_common.h): the
 * stream trace (RMACOLL_TRACE_STREAM), error logging, and the process-wide
 * pointer identity and context helpers of the network transports. The
 * rest of cuda_common.h: cuda_open.c, cuda_ipc.c, cuda_stream.c
 * (cuda_internal.h lists them).
 */
#define _GNU_SOURCE

#include "transports/common/cuda_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cu_trace_on;  /* 1: stderr, 2: the in-memory ring */
static pthread_once_t cu_trace_once = PTHREAD_ONCE_INIT;

static void cu_trace_read(void)
{
    const char *v = getenv("RMACOLL_TRACE_STREAM");

    cu_trace_on = v == NULL || v[0] == '\0' || strcmp(v, "0") == 0 ? 0
                  : strcmp(v, "ring") == 0                       ? 2
                                                                 : 1;
}

int rmacoll__cu_tracing(void)
{
    pthread_once(&cu_trace_once, cu_trace_read);
    return cu_trace_on;
}

/* The last operations traced (or, without RMACOLL_TRACE_STREAM, that would
 * have been): a ring shared by the process's ranks, for
 * rmacoll__cu_ring_dump. A slot is claimed by one fetch-add; a slot being
 * rewritten while it is dumped may print torn, which a post-mortem dump
 * accepts. */
#define CU_RING_SLOTS 2048u
#define CU_RING_LINE 176
static char cu_ring[CU_RING_SLOTS][CU_RING_LINE];
static _Atomic unsigned long cu_ring_next;

void rmacoll__cu_ring_dump(FILE *out)
{
    unsigned long end = atomic_load(&cu_ring_next);
    unsigned long begin = end > CU_RING_SLOTS ? end - CU_RING_SLOTS : 0;

    fprintf(out, "rmacoll-ring: the last %lu of %lu stream operations of this process, "
            "oldest first\n", end - begin, end);
    for (unsigned long k = begin; k < end; k++) {
        fprintf(out, "%.*s\n", CU_RING_LINE, cu_ring[k % CU_RING_SLOTS]);
    }
    fflush(out);
}

void rmacoll__cu_trace(const rmacoll__cu_t *cu, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    if (!rmacoll__cu_tracing()) {
        return;
    }
    if (cu_trace_on == 2) {
        /* kept in memory only: formatting is cheap next to a write(2),
         * which hid the hang it is meant to show (docs/gpu.md) */
        char *slot = cu_ring[atomic_fetch_add(&cu_ring_next, 1) % CU_RING_SLOTS];
        n = snprintf(slot, CU_RING_LINE, "rmacoll-trace: %s r=%d ", cu->name, cu->env->rank);
        if (n > 0 && n < CU_RING_LINE) {
            va_start(ap, fmt);
            (void)vsnprintf(slot + n, (size_t)(CU_RING_LINE - n), fmt, ap);
            va_end(ap);
        }
        return;
    }
    n = snprintf(line, sizeof(line), "rmacoll-trace: %s r=%d ", cu->name, cu->env->rank);
    if (n < 0 || (size_t)n >= sizeof(line)) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    if (write(2, line, (size_t)n) < 0) {
        /* a trace line lost: nothing to do */
    }
}

_Static_assert(sizeof(rmacoll__cu_blob_t) == RMACOLL_EXPORT_BYTES,
               "cuda export blob must fill RMACOLL_EXPORT_BYTES");
_Static_assert(sizeof(cudaIpcMemHandle_t) == 64, "IPC handle size");

rmacoll_status_t rmacoll__cu_rt_error(rmacoll__cu_t *cu, cudaError_t e, int peer,
                                      const char *what)
{
    (void)cudaGetLastError(); /* clear a non-sticky error */
    if (peer >= 0) {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: cuda: %s (peer %d) failed: %s (%s)", cu->name,
               what, peer, cudaGetErrorString(e), cudaGetErrorName(e));
    } else {
        CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: cuda: %s failed: %s (%s)", cu->name, what,
               cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return RMACOLL_ERR_CUDA;
}

rmacoll_status_t rmacoll__cu_drv_error(rmacoll__cu_t *cu, CUresult r, int peer,
                                       const char *what)
{
    const char *s = NULL;

    if (cu->error_string != NULL) {
        cu->error_string(r, &s);
    }
    CU_LOG(cu, RMACOLL_LOG_ERROR, "%s: cuda driver: %s (peer %d) failed: %s "
           "(CUresult %d)", cu->name, what, peer, s != NULL ? s : "unknown error", (int)r);
    return RMACOLL_ERR_CUDA;
}

/* ---- pointer identity (network registration caches) ---------------------- */

static PFN_cuPointerGetAttribute_v4000 cu_ptr_attr;
static PFN_cuCtxGetCurrent_v4000 cu_ctx_current;
static PFN_cuCtxSetCurrent_v4000 cu_ctx_set_current;
static pthread_once_t cu_ptr_attr_once = PTHREAD_ONCE_INIT;

static void cu_ptr_attr_load(void)
{
    void *fn = NULL;

    if (rmacoll__cu_entry(&fn, "cuPointerGetAttribute", 4000) == 0) {
        memcpy(&cu_ptr_attr, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuCtxGetCurrent", 4000) == 0) {
        memcpy(&cu_ctx_current, &fn, sizeof(fn));
    }
    if (rmacoll__cu_entry(&fn, "cuCtxSetCurrent", 4000) == 0) {
        memcpy(&cu_ctx_set_current, &fn, sizeof(fn));
    }
}

int rmacoll__cu_legacy_fence(void)
{
    if (cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}

void *rmacoll__cu_context_get(void)
{
    CUcontext ctx = NULL;

    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    if (cu_ctx_current == NULL || cu_ctx_current(&ctx) != CUDA_SUCCESS) {
        return NULL;
    }
    return (void *)ctx;
}

void rmacoll__cu_context_bind(void *ctx)
{
    static __thread void *bound;
    CUcontext cur;

    if (ctx == NULL || ctx == bound) {
        return;
    }
    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    if (cu_ctx_current == NULL || cu_ctx_set_current == NULL) {
        return;
    }
    cur = NULL;
    if (cu_ctx_current(&cur) != CUDA_SUCCESS) {
        return;
    }
    /* a thread of the user's with its own context keeps it */
    if (cur == NULL && cu_ctx_set_current((CUcontext)ctx) == CUDA_SUCCESS) {
        bound = ctx;
    } else if (cur == (CUcontext)ctx) {
        bound = ctx;
    }
}

int rmacoll__cu_context_current(void)
{
    CUcontext ctx = NULL;

    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    return cu_ctx_current != NULL && cu_ctx_current(&ctx) == CUDA_SUCCESS && ctx != NULL;
}

void *rmacoll__cu_probe_alloc(size_t bytes, int *device)
{
    void *p = NULL;

    if (!rmacoll__cu_context_current() || cudaGetDevice(device) != cudaSuccess ||
        cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

void rmacoll__cu_probe_free(void *p)
{
    if (p != NULL) {
        (void)cudaFree(p);
    }
}

int rmacoll__cu_pointer_info(const void *addr, int *device, uint64_t *buffer_id)
{
    struct cudaPointerAttributes a;
    unsigned long long id = 0;

    *device = -1;
    *buffer_id = 0;
    if (cudaPointerGetAttributes(&a, addr) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    if (a.type != cudaMemoryTypeDevice) {
        return -1;
    }
    *device = a.device;
    pthread_once(&cu_ptr_attr_once, cu_ptr_attr_load);
    if (cu_ptr_attr != NULL &&
        cu_ptr_attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)addr) ==
            CUDA_SUCCESS) {
        *buffer_id = (uint64_t)id;
    }
    return 0;
}
