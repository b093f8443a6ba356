/*
 * verbs_priv.h - private to the ibverbs transport ("verbs"): the instance,
 * its peers and registrations, the address blob of init's exchange, and the
 * functions its files share. (verbs_internal.h is the part the unit test
 * reaches; this header includes it.) The design is written in verbs.c.
 *
 *   verbs.c         the ops table and the small ops
 *   verbs_device.c  CUDA entry points, device choice (config, GPU, rail), port
 *   verbs_init.c    QPs, init's address exchange and connection, teardown
 *   verbs_mr.c      registration cache (host, CUDA: dma-buf or peermem)
 *   verbs_put.c     post_puts (WR chains), completions, progress
 */
#ifndef RMACOLL_TRANSPORTS_VERBS_PRIV_H
#define RMACOLL_TRANSPORTS_VERBS_PRIV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "rmacoll_transport.h"
#include "transports/common/tclock.h"
#include "transports/common/tlog.h"
#include "transports/verbs/verbs_internal.h"

#define VERBS_DEFAULT_MAX_INFLIGHT 128u
#define VERBS_DEFAULT_TIMEOUT_MS 30000u
#define VERBS_MAX_MSG_CAP (1ull << 31)   /* 2 GiB: the IB limit on one message */
#define VERBS_POLL_BATCH 32
#define VERBS_POLL_ROUNDS 8              /* progress() polls at most this many batches */
#define VERBS_CHAIN_MAX 16               /* send WRs linked into one ibv_post_send */
#define VERBS_MIN_RECV_DEPTH 64u
#define VERBS_IDLE_CUDA_MAX 64u          /* idle CUDA registrations kept in the cache */
#define VERBS_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* wr_id: bit 63 = receive; bits 0..23 = peer index; bits 24..62 = the
 * peer's cumulative send WR count at this WR (sends). */
#define VERBS_WRID_RECV (1ull << 63)
#define VERBS_WRID_PEER_MASK 0xffffffull
#define VERBS_WRID_SEQ_SHIFT 24
#define VERBS_WRID_SEQ_MASK ((1ull << 39) - 1)

/* Address of one QP, as exchanged through env->allgather. Fixed layout. */
typedef struct verbs_addr {
    uint32_t valid;      /* 1: the sender made a QP for this receiver */
    uint32_t qpn;
    uint32_t psn;
    uint32_t mtu;        /* enum ibv_mtu the sender's port allows */
    uint16_t lid;
    uint8_t link_layer;  /* IBV_LINK_LAYER_* */
    uint8_t is_global;   /* gid is set: use a GRH */
    uint8_t gid[16];
} verbs_addr_t;

/* Header entry (index 0) of every rank's blob. */
typedef struct verbs_blob_hdr {
    uint32_t magic;
    uint32_t status;     /* rmacoll_status_t of this rank's local setup */
    uint8_t pad[sizeof(verbs_addr_t) - 8];
} verbs_blob_hdr_t;

#define VERBS_BLOB_MAGIC 0x76726273u /* "vrbs" */

typedef struct verbs_peer {
    int rank;
    struct ibv_qp *qp;
    uint64_t posted;      /* send WRs posted to the QP, cumulative */
    uint64_t retired;     /* send WRs known complete (through a signalled CQE) */
    uint32_t unsignalled; /* WRs posted since the last signalled one */
    uint32_t psn;
    int failed;           /* the QP is in error: posts fail at once */
} verbs_peer_t;

struct rmacoll_mem {
    rmacoll_mem_t *next;
    uintptr_t addr;
    size_t bytes;
    rmacoll_memtype_t type;
    struct ibv_mr *mr;
    uint32_t refs;
    uint64_t gen;          /* registration generation (distinct per ibv MR) */
    uint64_t buffer_id;    /* CUDA CU_POINTER_ATTRIBUTE_BUFFER_ID, 0 = unknown */
    int dmabuf;            /* registered through ibv_reg_dmabuf_mr */
    int idle;              /* refs == 0 and kept cached (CUDA only) */
    int revoked;           /* mr deregistered by mem_revoke; freed at refs 0 */
};

struct rmacoll_transport {
    const rmacoll_transport_env_t *env;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    char dev_name[IBV_SYSFS_NAME_MAX];
    uint8_t port;
    struct ibv_port_attr port_attr;
    int use_grh;
    int gid_index;
    union ibv_gid gid;
    enum ibv_mtu mtu;              /* what this side allows */
    uint32_t traffic_class;
    uint32_t service_level;
    uint32_t max_inflight;         /* send WRs outstanding per QP */
    uint32_t recv_depth;           /* receive WRs pre-posted per QP */
    uint32_t signal_every;         /* signal at least every this many WRs */
    uint64_t max_msg;              /* largest single WR, bytes */
    uint64_t timeout_ms;

    int npeers;
    verbs_peer_t *peers;           /* [npeers] */
    int *peer_index;               /* [nranks]: index into peers, or -1 */
    size_t pending;                /* send WRs not yet retired, all peers */
    int err_peer;
    rmacoll_status_t sticky;       /* first completion error, returned by progress */

    /* send chain being built for one peer (no malloc on the data path) */
    int chain_peer;
    int chain_len;
    struct ibv_send_wr chain[VERBS_CHAIN_MAX];
    struct ibv_sge chain_sge[VERBS_CHAIN_MAX];

    pthread_mutex_t reg_lock;
    rmacoll_mem_t *regs;
    uint64_t reg_gen;
    uint32_t idle_cuda;

    int cuda_tried;
    verbs_cuda_ops_t cuda;
};

/* Logs through the core's logger (tlog.h). */
#define VERBS_LOG(tp, lvl, ...) RMACOLL__TLOG((tp)->env, lvl, __VA_ARGS__)

static inline uint32_t verbs_mtu_bytes(enum ibv_mtu mtu)
{
    return 128u << (unsigned)mtu;
}

/* verbs_device.c: fills tp->cuda once (runtime, driver entry points). */
void rmacoll__verbs_cuda_load(rmacoll_transport_t *tp);
/* verbs_device.c: opens the device (config name, else closest to the GPU,
 * else by rail) into tp->ctx / dev_name. */
rmacoll_status_t rmacoll__verbs_open_device(rmacoll_transport_t *tp);
/* verbs_device.c: port attributes, GID, MTU of tp->port. */
rmacoll_status_t rmacoll__verbs_query_port(rmacoll_transport_t *tp);

/* verbs_init.c: base.init; teardown of an instance (finalize). */
rmacoll_status_t rmacoll__verbs_init(const rmacoll_transport_env_t *env,
                                     rmacoll_transport_t **tpp);
void rmacoll__verbs_destroy(rmacoll_transport_t *tp);
/* verbs_init.c: posts one receive (for a WRITE_WITH_IMM) on peer pi's QP. */
rmacoll_status_t rmacoll__verbs_post_recv_one(rmacoll_transport_t *tp, int pi);

/* verbs_mr.c: mem.mem_register, mem_deregister, mem_revoke. */
rmacoll_status_t rmacoll__verbs_mem_register(rmacoll_transport_t *tp, void *addr,
                                             size_t bytes, rmacoll_memtype_t type,
                                             rmacoll_mem_t **memp, rmacoll_rkey_t *rkey);
rmacoll_status_t rmacoll__verbs_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem);
rmacoll_status_t rmacoll__verbs_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem);

/* verbs_put.c: base.progress and host.post_puts. */
rmacoll_status_t rmacoll__verbs_progress(rmacoll_transport_t *tp);
rmacoll_status_t rmacoll__verbs_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                          size_t n);

#endif /* RMACOLL_TRANSPORTS_VERBS_PRIV_H */
