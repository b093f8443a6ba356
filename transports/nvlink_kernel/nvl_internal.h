/*
 * nvl_internal.h - private to the nvlink_kernel transport's host side: the
 * instance and what its files share. (nvl.h is what the host side and the
 * kernels of nvl.cu share: launch descriptors.) The design is written in
 * nvl.c.
 *
 *   nvl.c         the ops table, init (GPU part, one-launch path), memory
 *                 ops and the host-driven ops
 *   nvl_stream.c  the stream ops: queues of puts as copy kernels, the whole
 *                 call as one kernel (call_stream), waits and signals
 */
#ifndef RMACOLL_TRANSPORTS_NVLINK_KERNEL_NVL_INTERNAL_H
#define RMACOLL_TRANSPORTS_NVLINK_KERNEL_NVL_INTERNAL_H

#include <stdint.h>

#include "rmacoll_transport.h"
#include "transports/common/cuda_common.h"
#include "transports/common/tlog.h"
#include "transports/nvlink_kernel/nvl.h"

#define NVL_BLOB_MAGIC 0x6e766c31u /* "nvl1" */
#define NVL_BYTES_PER_BLOCK RMACOLL__NVL_BYTES_PER_BLOCK
#define NVL_MAX_BLOCKS_PER_ENTRY 32u

#define NVL_LOG(tp_, lvl, ...) RMACOLL__TLOG((tp_)->env, lvl, __VA_ARGS__)


struct rmacoll_transport {
    const rmacoll_transport_env_t *env; /* borrowed; rank and nranks there */
    int on;                        /* the GPU part is usable */
    rmacoll_status_t off_status;   /* why not: status and message */
    char off_why[256];
    rmacoll__cu_t *cu;             /* the shared CUDA part (cuda_common.h) */
    uint32_t *counters;            /* device: RING x MAX_ENTRIES, zero */
    uint32_t ring;                 /* next counter slot */
    int error_peer;
    int peer_of[RMACOLL__NVL_MAX_ENTRIES];  /* target of each entry */
    uint32_t eblocks[RMACOLL__NVL_MAX_ENTRIES];
    rmacoll__nvl_batch_t batch_desc;        /* reused; copied by the launch */
    /* the one-launch path (call_stream), RMACOLL_NVL_ONE_LAUNCH=1 */
    uint8_t *same_gpu;             /* [nranks]: rank p uses this GPU (cards at init) */
    int fused;                     /* usable: opted in, co-scheduling possible */
    uint32_t fused_max_blocks;     /* grid bound: every sharer's grid resident at once */
    uint32_t *ferr;                /* host-mapped error word of the kernel */
    uint32_t *ferr_dev;
    rmacoll__nvl_fused_t fdesc;    /* reused; copied by the launch */
    /* device-count calls (dcounts_stream): usable when every rank on this
     * GPU is a thread of this process (their kernels wait for each
     * other), whatever RMACOLL_NVL_ONE_LAUNCH says */
    int dc_ok;
    char dc_why[200];              /* why not, when !dc_ok */
    uint32_t dc_max_blocks;        /* grid bound, as fused_max_blocks */
    uint64_t *dc_rep;              /* host-mapped report (nvl.h), and */
    uint64_t *dc_rep_dev;          /* its device address */
    rmacoll__nvl_dc_t dc_desc;     /* reused; copied by the launch */
};

/* Logs why op is impossible (no usable GPU) and returns the status that
 * says so (nvl.c). */
rmacoll_status_t rmacoll__nvl_off(rmacoll_transport_t *tp, const char *op);

/* nvl_stream.c: the stream ops of the ops table. */
rmacoll_status_t rmacoll__nvl_post_puts_stream(rmacoll_transport_t *tp,
                                               const rmacoll_put_t *puts, size_t n,
                                               void *stream);
rmacoll_status_t rmacoll__nvl_call_stream(rmacoll_transport_t *tp,
                                          const rmacoll_stream_call_t *c, void *stream);
rmacoll_status_t rmacoll__nvl_dcounts_stream(rmacoll_transport_t *tp,
                                            const rmacoll_dcounts_call_t *c, void *stream);
rmacoll_status_t rmacoll__nvl_dcounts_report(rmacoll_transport_t *tp,
                                            rmacoll_dcounts_report_t *r);
rmacoll_status_t rmacoll__nvl_set_device_signals(rmacoll_transport_t *tp,
                                                 const uint64_t *addr, const uint32_t *nwords);
rmacoll_status_t rmacoll__nvl_wait_stream(rmacoll_transport_t *tp, const uint32_t *idx,
                                          const uint64_t *values, size_t n, void *stream);
rmacoll_status_t rmacoll__nvl_signal_stream(rmacoll_transport_t *tp, int peer, uint32_t idx,
                                            uint64_t value, void *stream);

#endif /* RMACOLL_TRANSPORTS_NVLINK_KERNEL_NVL_INTERNAL_H */
