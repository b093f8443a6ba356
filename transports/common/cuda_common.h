/*
 * cuda_common.h - CUDA helpers shared by the transports that move device
 * memory between node peers (ce's CUDA backend, nvlink_kernel): driver
 * entry points (cudaGetDriverEntryPointByVersion; libcuda is never
 * linked), registration of the node's signal windows for the GPU, IPC
 * export/import of device buffers (cached by handle), stream waits and
 * signals as stream memory operations, and the transport's own stream for
 * host-driven puts. A transport includes only its own folder and
 * transports/common/.
 *
 * Not thread-safe: one rmacoll__cu_t belongs to one transport instance,
 * used by one thread at a time.
 */
#ifndef RMACOLL_TRANSPORTS_COMMON_CUDA_COMMON_H
#define RMACOLL_TRANSPORTS_COMMON_CUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "rmacoll_transport.h"

#define RMACOLL__CU_MAX_OPS 256u /* memory operations per batch call */

/* What mem_export writes (RMACOLL_EXPORT_BYTES); magic tells transports
 * apart (their blobs are not interchangeable). */
typedef struct rmacoll__cu_blob {
    uint32_t magic;
    uint32_t rank;         /* exporting rank */
    uint64_t base;         /* allocation base in the exporter */
    uint64_t offset;       /* of the exported address in the allocation */
    uint32_t pid;          /* exporting process (getpid()) */
    int32_t device;        /* exporter's device ordinal */
    uint8_t handle[64];    /* cudaIpcMemHandle_t of the allocation */
} rmacoll__cu_blob_t;

/* One host range registered for the GPU (page-aligned). */
typedef struct rmacoll__cu_reg {
    void *base;
    size_t bytes;
    int owned;             /* 0: registered by someone else already */
} rmacoll__cu_reg_t;

/* One opened IPC handle. */
typedef struct rmacoll__cu_import {
    uint8_t handle[64];
    void *mapped;          /* allocation base mapped here */
    uint64_t base;         /* the allocation's base in the exporter */
    int peer;
    int same_process;      /* the exporter is this process: nothing to close */
    int keep;              /* holds device-resident signal words: never closed as stale */
} rmacoll__cu_import_t;

typedef struct rmacoll__cu {
    const rmacoll_transport_env_t *env;
    const char *name;      /* the transport's name, first word of its logs */
    uint32_t blob_magic;
    int device;
    PFN_cuStreamWriteValue64_v11070 write64;
    PFN_cuStreamWaitValue64_v11070 wait64;
    PFN_cuStreamBatchMemOp_v11070 batch;
    PFN_cuMemGetAddressRange_v3020 get_range;
    PFN_cuGetErrorString_v6000 error_string;
    CUdeviceptr *sig_dev;  /* [nranks]: device address of each rank's words, 0 = none */
    uint32_t *sig_n;       /* [nranks]: their counts */
    /* [nranks]: each rank's device-resident words (RMACOLL_SIG_DEVICE), 0 =
     * none (rmacoll__cu_set_device_signals), and their counts */
    CUdeviceptr *dsig_dev;
    uint32_t *dsig_n;
    rmacoll__cu_reg_t *regs;
    int nregs;
    rmacoll__cu_import_t *imports;
    size_t nimports, cap_imports;
    cudaStream_t stream;   /* own stream of host-driven puts (first use), or NULL */
    cudaEvent_t event;     /* recorded after each such queue */
    size_t pending;        /* puts before `event` */
    CUstreamBatchMemOpParams ops[RMACOLL__CU_MAX_OPS];
} rmacoll__cu_t;

/**
 * Resolves the driver entry point `sym` of ABI `version` (e.g. 12000)
 * through the CUDA runtime (cudaGetDriverEntryPointByVersion), so that
 * nothing links libcuda and a binary starts on machines without a GPU
 * driver. Returns 0 with *fn set, or -1 with *fn NULL (no driver, no such
 * symbol; the runtime's error is cleared). Thread-safe. Inline: the
 * transports built as their own module (verbs) use it with this header
 * and libcudart alone.
 */
static inline int rmacoll__cu_entry(void **fn, const char *sym, unsigned version)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(sym, fn, version, cudaEnableDefault,
                                                     &q);

    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *fn == NULL) {
        (void)cudaGetLastError();
        *fn = NULL;
        return -1;
    }
    return 0;
}

/**
 * RMACOLL_TRACE_STREAM=1 in the environment (read once per process): one
 * line on stderr per stream operation the transports enqueue (signal
 * writes, waits, copies, kernel entries), per IPC import and per
 * device-word hand-out, each with the rank, the stream and the resolved
 * device address, for scripts/stream_trace_check.py to pair every wait
 * with the writes that could satisfy it ("ring": into memory instead,
 * rmacoll__cu_ring_dump). Off: one load per call.
 * Thread-safe (each line one write(2)).
 */
int rmacoll__cu_tracing(void);
void rmacoll__cu_trace(const rmacoll__cu_t *cu, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** With RMACOLL_TRACE_STREAM=ring the same lines go to an in-memory ring
 * of the process's last 2048 operations (all ranks that are threads of
 * it) instead of stderr: this prints them, oldest first, in the trace's
 * format (a hung stream's post-mortem: scripts/stream_trace_check.py
 * reads it). Thread-safe; a line rewritten meanwhile may print torn. */
void rmacoll__cu_ring_dump(FILE *out);

/* Logs a runtime / driver error once, naming what and the peer (-1:
 * none); returns RMACOLL_ERR_CUDA. */
rmacoll_status_t rmacoll__cu_rt_error(rmacoll__cu_t *cu, cudaError_t e, int peer,
                                      const char *what);
rmacoll_status_t rmacoll__cu_drv_error(rmacoll__cu_t *cu, CUresult r, int peer,
                                       const char *what);

/**
 * Opens the GPU part on the calling thread's current device: entry
 * points, 64-bit stream memory operations, the node's signal windows
 * registered (Mapped | Portable), the own stream and event. *out is NULL
 * when no GPU is usable: the status says why (RMACOLL_ERR_NO_DEVICE or
 * RMACOLL_ERR_CUDA, message in why) and the caller stays off; only
 * RMACOLL_ERR_NO_MEMORY is an error of the caller's init.
 */
rmacoll_status_t rmacoll__cu_open(const rmacoll_transport_env_t *env, const char *name,
                                  uint32_t blob_magic, rmacoll__cu_t **out, char *why,
                                  size_t len);
/** Synchronises the own stream, closes imports, unregisters, frees. */
void rmacoll__cu_close(rmacoll__cu_t *cu);

/** Checks [addr, addr + bytes) is device memory of one allocation;
 * base/size receive the allocation. */
rmacoll_status_t rmacoll__cu_device_range(rmacoll__cu_t *cu, void *addr, size_t bytes,
                                          CUdeviceptr *base, size_t *size);
/** Registration of device memory for node peers' copies: nothing to pin;
 * checks the range (device memory of one allocation) and fills rkey (may
 * be NULL) with {addr, bytes}. */
rmacoll_status_t rmacoll__cu_mem_register(rmacoll__cu_t *cu, void *addr, size_t bytes,
                                          rmacoll_rkey_t *rkey);
/** mem_export / mem_import of the transport interface. Imports are
 * cached by handle. A handle not seen before whose allocation starts where
 * a cached one of the same peer did is a new allocation over a freed one
 * (the peer freed its buffer after its call completed, so no copy into the
 * old mapping is in flight): the stale mapping is closed first, as CUDA
 * refuses to map a range twice (cudaErrorAlreadyMapped); if the open still
 * fails so, every cached mapping of that peer is closed and the open tried
 * once more. An export of this
 * same process (ranks as threads: the blob's pid is ours and the handle
 * of the allocation at the blob's base, taken here, is the blob's) is used
 * directly, with no IPC mapping (cudaIpcOpenMemHandle refuses a handle of
 * its own process); when the exporter's device differs from ours, peer
 * access to it is enabled (cudaDeviceEnablePeerAccess) on our device. */
rmacoll_status_t rmacoll__cu_export(rmacoll__cu_t *cu, void *addr, size_t bytes,
                                    void *blob);
rmacoll_status_t rmacoll__cu_import(rmacoll__cu_t *cu, int peer, const void *blob,
                                    uint64_t *addr);

/** stream.set_device_signals: copies addr[nranks] and nwords[nranks] and
 * marks the cached IPC mappings holding node peers' arrays (imported
 * through this cu) as kept for good: a later stale-mapping clean-up of
 * rmacoll__cu_import never closes them. addr NULL: a probe,
 * RMACOLL_SUCCESS (nothing kept). */
rmacoll_status_t rmacoll__cu_set_device_signals(rmacoll__cu_t *cu, const uint64_t *addr,
                                                const uint32_t *nwords);
/** The device address of rank p's word idx: in its control window, or with
 * RMACOLL_SIG_DEVICE in idx in its device-resident array; 0 when p's words
 * of that kind are not mapped here or idx is past them (*n, may be NULL,
 * receives their count). */
CUdeviceptr rmacoll__cu_word(const rmacoll__cu_t *cu, int p, uint32_t idx, uint32_t *n);
/** 1 when idx names a device-resident word (RMACOLL_SIG_DEVICE). */
static inline int rmacoll__cu_word_is_device(uint32_t idx)
{
    return (idx & RMACOLL_SIG_DEVICE) != 0;
}

/** Checks one put of a queue; *sig receives the device address of its
 * signal word (0: none; sig_index may carry RMACOLL_SIG_DEVICE). */
rmacoll_status_t rmacoll__cu_check_put(rmacoll__cu_t *cu, const rmacoll_put_t *p,
                                       size_t i, CUdeviceptr *sig);
/** RMACOLL_ERR_UNSUPPORTED while s is being captured into a graph. */
rmacoll_status_t rmacoll__cu_check_stream(rmacoll__cu_t *cu, cudaStream_t s);
/** ops[n] = a 64-bit write of v to a (with a memory barrier). */
void rmacoll__cu_op_write(rmacoll__cu_t *cu, unsigned n, CUdeviceptr a, uint64_t v);
/** Enqueues ops[0, n) (all writes or all waits) on s. */
rmacoll_status_t rmacoll__cu_flush_ops(rmacoll__cu_t *cu, cudaStream_t s, unsigned n,
                                       int peer);
/** wait_stream and signal_stream of the transport interface. */
rmacoll_status_t rmacoll__cu_wait_stream(rmacoll__cu_t *cu, const uint32_t *idx,
                                         const uint64_t *values, size_t n, cudaStream_t s);
rmacoll_status_t rmacoll__cu_signal_stream(rmacoll__cu_t *cu, int peer, uint32_t idx,
                                           uint64_t value, cudaStream_t s);

/** The own stream of host-driven puts, created on first use. */
rmacoll_status_t rmacoll__cu_own_stream(rmacoll__cu_t *cu, cudaStream_t *s);
/** After a host-driven queue of n puts on cu->stream: records the event. */
rmacoll_status_t rmacoll__cu_record(rmacoll__cu_t *cu, size_t n);
/** progress / pending of host-driven puts. */
rmacoll_status_t rmacoll__cu_progress(rmacoll__cu_t *cu);
size_t rmacoll__cu_pending(rmacoll__cu_t *cu);

/**
 * Device memory identity, for a network transport's registration cache
 * (needs no rmacoll__cu_t): 0 when addr is device memory, with *device its
 * device ordinal and *buffer_id its allocation's
 * CU_POINTER_ATTRIBUTE_BUFFER_ID (unique for the process's lifetime, so a
 * freed and re-allocated range is told apart; 0 when the driver does not
 * say); -1 otherwise (host memory, no driver). Thread-safe.
 */
int rmacoll__cu_pointer_info(const void *addr, int *device, uint64_t *buffer_id);

/** 1 when a CUDA context is current on the calling thread (the driver
 * is there and this thread uses a GPU already), else 0. Thread-safe. */
int rmacoll__cu_context_current(void);

/**
 * The CUDA context current on the calling thread (a CUcontext), NULL when
 * none or no driver. Thread-safe.
 */
void *rmacoll__cu_context_get(void);

/**
 * Makes ctx (from rmacoll__cu_context_get; NULL: nothing) current on the
 * calling thread when that thread has no context (a thread with a context
 * of its own keeps it; one thread-local compare on the fast path). For a network library that calls the CUDA driver API from
 * whichever thread drives it (libfabric's shm IPC and async copies create
 * streams and events with cuStreamCreate / cuEventCreate, which fail with
 * CUDA_ERROR_INVALID_CONTEXT on a thread without a context): the proxy
 * thread and the staging worker never called cudaSetDevice. Thread-safe.
 */
void rmacoll__cu_context_bind(void *ctx);

/**
 * Waits until the work queued on the legacy default stream of the calling
 * thread's context has completed. A network library that lands device
 * memory with cudaMemcpy from pageable host memory (libfabric shm's SAR
 * bounce buffers) may report the write complete while that copy's DMA
 * is still in flight (CUDA: such a copy "returns once the pageable buffer
 * has been copied to the staging memory"); work on a non-blocking stream
 * that reads the buffer afterwards is not ordered behind it. Returns 0,
 * or -1 when the synchronisation failed. Blocks behind blocking streams'
 * earlier work too (legacy stream semantics). Thread-safe.
 */
int rmacoll__cu_legacy_fence(void);

/**
 * A device buffer of `bytes` for a capability probe (e.g. can the network
 * library register CUDA memory), on the current device, whose ordinal
 * *device receives; NULL when no CUDA context is current on this thread
 * (nothing is created then: a host-only process never gets a context from
 * a probe) or the allocation fails. Free with rmacoll__cu_probe_free.
 */
void *rmacoll__cu_probe_alloc(size_t bytes, int *device);
void rmacoll__cu_probe_free(void *p);

#endif /* RMACOLL_TRANSPORTS_COMMON_CUDA_COMMON_H */
