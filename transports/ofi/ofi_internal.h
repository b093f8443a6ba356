/*
 * ofi_internal.h - private to the libfabric transport ("ofi"): the
 * instance, its pools and registration cache, and the functions its files
 * share. The design (ordering, addresses, FI_HMEM) is written in ofi.c.
 *
 *   ofi.c         the ops table and the small ops (pending, error_peer, ...)
 *   ofi_select.c  provider selection: hints, ofi.provider auto, interfaces
 *   ofi_init.c    init / finalize: endpoint, pools, address exchange
 *   ofi_mr.c      memory registration cache, mem_revoke
 *   ofi_put.c     post_puts, the per-peer queues, progress and CQ errors
 */
#ifndef RMACOLL_TRANSPORTS_OFI_INTERNAL_H
#define RMACOLL_TRANSPORTS_OFI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "rmacoll_transport.h"
#include "transports/common/tclock.h"
#include "transports/common/tlog.h"
#ifdef RMACOLL_OFI_CUDA
#include "transports/common/cuda_common.h"
#endif

/* libfabric calls the CUDA driver API (shm's IPC import, its async
 * copies' cuStreamCreate / cuEventCreate, cudaMemcpy for SAR) on whichever
 * thread drives it: the proxy thread and the staging worker have no
 * context of their own, and there those calls fail (CUDA_ERROR_INVALID_
 * CONTEXT), which shm turns into failed or never-completed transfers. Every
 * entry point that reaches libfabric binds init's context first. */
#ifdef RMACOLL_OFI_CUDA
#define OFI_CU_BIND(tp) rmacoll__cu_context_bind((tp)->cu_ctx)
#else
#define OFI_CU_BIND(tp) ((void)(tp))
#endif

#define OFI_API_VERSION FI_VERSION(1, 9)
#define OFI_DEFAULT_PROVIDER "auto"
#define OFI_CQ_BATCH 64         /* entries per fi_cq_read */
#define OFI_CQ_ROUNDS 16        /* fi_cq_read calls per progress() at most */
#define OFI_MR_CACHE_MAX 256    /* registrations held at once */
#define OFI_QUEUE_MAX 1024      /* puts queued (not yet issued) at once */
#define OFI_OPS_MAX 4096        /* pieces in flight at once, capped by tx size */
#define OFI_NAME_MAX 1024       /* endpoint name bytes */

typedef struct ofi_op {
    struct fi_context2 fctx;    /* first: libfabric hands it back as op_context */
    struct ofi_op *next;        /* free list */
    int peer;
    uint64_t bytes;
} ofi_op_t;

/* A put accepted by post_puts and not yet fully issued. */
typedef struct ofi_qput {
    struct ofi_qput *next;
    const char *src;
    void *desc;                 /* fi_mr_desc of the source, or NULL */
    uint64_t dst_addr;          /* as fi_writemsg expects it (see header) */
    uint64_t key;
    uint64_t bytes;
    uint64_t done;              /* bytes issued so far */
    uint32_t sig_index;
} ofi_qput_t;

typedef struct ofi_peer {
    fi_addr_t addr;
    uint32_t inflight;          /* pieces issued, not completed */
    ofi_qput_t *head, *tail;    /* FIFO of queued puts */
    int active;                 /* on tp->active */
    uint64_t stall_since_ns;    /* head blocked since, 0 = not blocked */
    uint64_t inflight_since_ns; /* last issue into an empty pipe or completion */
} ofi_peer_t;

/* A registration; the rmacoll_mem_t handed to the core. */
struct rmacoll_mem {
    char *addr;
    size_t bytes;
    struct fid_mr *mr;
    void *desc;
    uint64_t key;
    uint32_t refs;
    int used;                   /* slot holds a live registration */
    int revoked;                /* mr closed by mem_revoke; the slot waits for refs 0 */
    uint64_t last_use;
    rmacoll_memtype_t type;
    uint64_t buffer_id;         /* CUDA: CU_POINTER_ATTRIBUTE_BUFFER_ID, 0 = unknown */
};

struct rmacoll_transport {
    rmacoll_transport_env_t env;    /* copy; pointers in it are borrowed */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    uint64_t mr_mode;
    int keep_unused_mr;         /* lazy deregistration (provider does not pin) */
    int zero_inject;            /* signal-only puts via fi_inject_writedata */
    int ordered;                /* provider orders writes (FI_ORDER_WAW): see header */
    uint8_t zero_src;           /* source of zero-length injects */
    uint64_t max_piece;
    uint64_t next_key;          /* requested keys when no FI_MR_PROV_KEY */
    uint64_t use_clock;
    uint64_t timeout_ns;
    uint64_t scan_at_ns;        /* next check of issued puts for silent peers */
    ofi_peer_t *peers;          /* [nranks] */
    int *active;                /* [nranks] peers with queued puts */
    int nactive;
    ofi_op_t *ops;
    ofi_op_t *free_ops;
    size_t nops, ops_busy;
    ofi_qput_t *qputs;
    ofi_qput_t *free_qputs;
    size_t nqueued;
    struct rmacoll_mem mrs[OFI_MR_CACHE_MAX];
    rmacoll_status_t failed;    /* sticky after a transport error */
    int err_peer;
    int shm_named;              /* shm provider region named "rmacoll-PID-..." */
    char shm_region[128];       /* its name, "rmacoll-PID-RANDOM-RANK[.TAG]" */
    int cut_off;                /* mem_revoke stopped all progress */
    int hmem;                   /* cuda memory registered (FI_HMEM, probed at init) */
    uint64_t hmem_flags;        /* fi_mr_regattr flags of device memory (ofi.hmem_device_only) */
    void *cu_ctx;               /* CUDA context of init's thread (hmem), bound where we drive */
    int dev_fence;              /* device memory registered without FI_HMEM_DEVICE_ONLY: the
                                 * provider may land it by cudaMemcpy (see ofi_progress) */
    char hmem_desc[RMACOLL_CONFIG_STR_MAX + 96]; /* why (not), for instance_caps */
};

/* Logs through the instance's copy of the environment (tlog.h). */
#define OFI_LOG(tp, lvl, ...) RMACOLL__TLOG(&(tp)->env, lvl, __VA_ARGS__)

/* Records a failure once: the first error wins and stays. */
static inline rmacoll_status_t ofi_fail(rmacoll_transport_t *tp, rmacoll_status_t st,
                                        int peer)
{
    if (tp->failed == RMACOLL_SUCCESS) {
        tp->failed = st;
        tp->err_peer = peer;
    }
    return tp->failed;
}

/* ofi_select.c: picks the provider (fi_getinfo) into *out; names shm's
 * region. Local, not collective. */
rmacoll_status_t rmacoll__ofi_select(rmacoll_transport_t *tp, struct fi_info **out);
/* ofi_select.c: removes /dev/shm regions of shm left by dead processes. */
void rmacoll__ofi_sweep_stale_shm(rmacoll_transport_t *tp);
/* Unlinks this instance's shm provider region (the /dev/shm entries named
 * tp->shm_region, with or without the ":UID:INDEX" the provider adds);
 * the mappings stay valid. */
void rmacoll__ofi_unlink_own_shm(rmacoll_transport_t *tp);

/* ofi_init.c: base.init and base.finalize. */
#ifdef RMACOLL_OFI_CUDA
/* shm with ofi.hmem_device_only: one CUDA IPC write into every rank at init
 * (collective; RMACOLL_ERR_TRANSPORT on every rank when any rank fails). */
rmacoll_status_t rmacoll__ofi_ipc_warm(rmacoll_transport_t *tp);
#endif
rmacoll_status_t rmacoll__ofi_init(const rmacoll_transport_env_t *env,
                                   rmacoll_transport_t **tpp);
void rmacoll__ofi_finalize(rmacoll_transport_t *tp);

/* ofi_mr.c: opens a registration (fi_mr_reg, or fi_mr_regattr with
 * FI_HMEM_CUDA on `device`); returns the fi_ error (0: success). */
int rmacoll__ofi_mr_open(rmacoll_transport_t *tp, void *addr, size_t bytes,
                         rmacoll_memtype_t type, int device, struct fid_mr **mr);
/* ofi_mr.c: mem.mem_register, mem_deregister, mem_revoke. */
rmacoll_status_t rmacoll__ofi_mem_register(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                           rmacoll_memtype_t type, rmacoll_mem_t **mem,
                                           rmacoll_rkey_t *rkey);
rmacoll_status_t rmacoll__ofi_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem);
rmacoll_status_t rmacoll__ofi_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem);

/* ofi_put.c: base.progress and host.post_puts. */
rmacoll_status_t rmacoll__ofi_progress(rmacoll_transport_t *tp);
rmacoll_status_t rmacoll__ofi_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                        size_t n);

#endif /* RMACOLL_TRANSPORTS_OFI_INTERNAL_H */
