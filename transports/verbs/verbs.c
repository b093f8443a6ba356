/*
 * verbs.c - the rdma-core ibverbs transport (PROXY path).
 *
 * One RC queue pair per peer in env->peers, all on one completion queue.
 * A put is an IBV_WR_RDMA_WRITE; a put with a signal ends with an
 * IBV_WR_RDMA_WRITE_WITH_IMM whose immediate is the target's signal index
 * (a signal-only put is a zero-length WRITE_WITH_IMM). The target's
 * progress() sees the receive completion and raises that word by one,
 * which the signal contract of rmacoll_transport.h allows (one writer per
 * word, raised by exactly one per signal). RC places the writes of one QP
 * in order, and the receive completion of a WRITE_WITH_IMM is generated
 * only after its data and every earlier write on the QP are placed, so
 * the signal never overtakes data. docs/transport-verbs.md explains the
 * choice, back-pressure, registration cache and GPUDirect paths, and lists
 * what has never run on a real NIC.
 *
 * Threads: post_puts, progress, pending and error_peer are called by one
 * thread at a time (the proxy thread); mem_register/mem_deregister are
 * serialised by a lock and may be called from another thread.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rmacoll_transport.h"
#include "transports/common/tops.h"
#ifdef RMACOLL_VERBS_CUDA
#include "transports/common/cuda_common.h"
#endif
#include "transports/verbs/verbs_internal.h"
#include "transports/verbs/verbs_keys.h"

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

/* ---------------------------------------------------------------- utils */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void verbs_log(const rmacoll_transport_t *tp, rmacoll_log_level_t level,
                      const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    if (tp->env == NULL || tp->env->log == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tp->env->log(tp->env->log_ctx, level, RMACOLL_LOG_SUBSYS_TRANSPORT, "%s", msg);
}

static uint64_t verbs_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static rmacoll_status_t verbs_mtu_from_bytes(uint32_t bytes, enum ibv_mtu *mtu)
{
    switch (bytes) {
    case 256: *mtu = IBV_MTU_256; return RMACOLL_SUCCESS;
    case 512: *mtu = IBV_MTU_512; return RMACOLL_SUCCESS;
    case 1024: *mtu = IBV_MTU_1024; return RMACOLL_SUCCESS;
    case 2048: *mtu = IBV_MTU_2048; return RMACOLL_SUCCESS;
    case 4096: *mtu = IBV_MTU_4096; return RMACOLL_SUCCESS;
    default: return RMACOLL_ERR_CONFIG;
    }
}

static uint32_t verbs_mtu_bytes(enum ibv_mtu mtu)
{
    return 128u << (unsigned)mtu;
}

/* ------------------------------------------------------------ CUDA glue */

#ifdef RMACOLL_VERBS_CUDA
/* The runtime calls, in the CUDA-free types of verbs_cuda_ops_t. */
static int verbs_cuda_device_count(int *count)
{
    return (int)cudaGetDeviceCount(count);
}

static int verbs_cuda_device(int *device)
{
    return (int)cudaGetDevice(device);
}

static int verbs_cuda_bus_id(char *bus_id, int len, int device)
{
    return (int)cudaDeviceGetPCIBusId(bus_id, len, device);
}
#endif

/* Fills the CUDA entry points once: the runtime (linked in a CUDA build)
 * and the driver's entry points through it (rmacoll__cu_entry of
 * transports/common/cuda_common.h; libcuda is never linked, so the module
 * loads on machines without a GPU driver). A driver entry point that does
 * not resolve stays NULL, which is normal on CPU-only machines and silent.
 * Built without CUDA, every entry point stays NULL: device memory is
 * registered with ibv_reg_mr and the device is chosen without a GPU. */
static void verbs_cuda_load(rmacoll_transport_t *tp)
{
    if (tp->cuda_tried) {
        return;
    }
    tp->cuda_tried = 1;
#ifdef RMACOLL_VERBS_CUDA
    {
        void *fn = NULL;

        tp->cuda.get_device_count = verbs_cuda_device_count;
        tp->cuda.get_device = verbs_cuda_device;
        tp->cuda.device_get_pci_bus_id = verbs_cuda_bus_id;
        /* void * to a function pointer: POSIX allows it, memcpy says it
         * without a function-pointer cast; the CUDA-free types of
         * verbs_cuda_ops_t have the driver functions' ABI */
        if (rmacoll__cu_entry(&fn, "cuMemGetHandleForAddressRange", 12000) == 0) {
            memcpy(&tp->cuda.mem_get_handle_for_address_range, &fn, sizeof(fn));
        }
        if (rmacoll__cu_entry(&fn, "cuPointerGetAttribute", 12000) == 0) {
            memcpy(&tp->cuda.pointer_get_attribute, &fn, sizeof(fn));
        }
    }
    verbs_log(tp, RMACOLL_LOG_DEBUG, "cuda: dma-buf export %s, buffer ids %s",
              tp->cuda.mem_get_handle_for_address_range ? "available" : "unavailable",
              tp->cuda.pointer_get_attribute ? "available" : "unavailable");
#else
    verbs_log(tp, RMACOLL_LOG_DEBUG, "built without CUDA: device memory will use "
              "ibv_reg_mr");
#endif
}

void rmacoll__verbs_set_cuda_ops(rmacoll_transport_t *tp,
                                 const verbs_cuda_ops_t *ops)
{
    tp->cuda_tried = 1;
    if (ops != NULL) {
        tp->cuda = *ops;
    } else {
        memset(&tp->cuda, 0, sizeof(tp->cuda));
    }
}

/* GPU of this rank, as a PCI bus id, when CUDA is loadable and has one. */
static int verbs_gpu_bus_id(rmacoll_transport_t *tp, char *bus, int len)
{
    int count = 0;
    int dev = 0;

    verbs_cuda_load(tp);
    if (tp->cuda.get_device_count == NULL || tp->cuda.get_device == NULL ||
        tp->cuda.device_get_pci_bus_id == NULL) {
        return -1;
    }
    if (tp->cuda.get_device_count(&count) != 0 || count <= 0 ||
        tp->cuda.get_device(&dev) != 0 ||
        tp->cuda.device_get_pci_bus_id(bus, len, dev) != 0) {
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------ device selection */

static int verbs_common_components(const char *a, const char *b)
{
    int n = 0;

    while (*a != '\0' && *a == *b) {
        if (*a == '/' ) {
            n++;
        }
        a++;
        b++;
    }
    if ((*a == '\0' || *a == '/') && (*b == '\0' || *b == '/')) {
        n++;   /* the last component matched whole */
    }
    return n;
}

int rmacoll__verbs_closest_device(const char *sysfs_root,
                                  const char *gpu_bus_id,
                                  const char *const *names, int n,
                                  int local_rank)
{
    char path[PATH_MAX];
    char gpu_real[PATH_MAX];
    char nic_real[PATH_MAX];
    char bus[64];
    int best = -1;
    int nties = 0;
    int ties[64];

    if (sysfs_root == NULL || gpu_bus_id == NULL || names == NULL || n <= 0) {
        return -1;
    }
    snprintf(bus, sizeof(bus), "%s", gpu_bus_id);
    for (char *c = bus; *c != '\0'; c++) {
        *c = (char)tolower((unsigned char)*c);
    }
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root, bus);
    if (realpath(path, gpu_real) == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int score;

        snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", sysfs_root,
                 names[i]);
        if (realpath(path, nic_real) == NULL) {
            continue;
        }
        score = verbs_common_components(gpu_real, nic_real);
        if (score > best) {
            best = score;
            nties = 0;
        }
        if (score == best && nties < (int)(sizeof(ties) / sizeof(ties[0]))) {
            ties[nties++] = i;
        }
    }
    if (nties == 0) {
        return -1;
    }
    return ties[(local_rank < 0 ? 0 : local_rank) % nties];
}

/* Opens the device: config name, else closest to the GPU, else by rail. */
static rmacoll_status_t verbs_open_device(rmacoll_transport_t *tp)
{
    const rmacoll_config_t *cfg = tp->env->config;
    const char *want = (cfg != NULL) ? cfg->verbs_device : "";
    struct ibv_device **list;
    const char *names[64];
    int local_rank = 0;
    int ndev = 0;
    int pick = -1;
    char bus[64];

    if (tp->env->topo != NULL && tp->env->topo->local_rank != NULL) {
        local_rank = tp->env->topo->local_rank[tp->env->rank];
    }
    list = ibv_get_device_list(&ndev);
    if (list == NULL || ndev <= 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR,
                  "no RDMA device found (ibv_get_device_list returned 0 devices)%s%s",
                  list == NULL ? "; libibverbs says: " : "", list == NULL ? strerror(errno) : "");
        if (list != NULL) {
            ibv_free_device_list(list);
        }
        return RMACOLL_ERR_NO_DEVICE;
    }
    if (ndev > (int)(sizeof(names) / sizeof(names[0]))) {
        ndev = (int)(sizeof(names) / sizeof(names[0]));
    }
    for (int i = 0; i < ndev; i++) {
        names[i] = ibv_get_device_name(list[i]);
        if (names[i] == NULL) {
            names[i] = "?";
        }
    }
    if (want[0] != '\0') {
        for (int i = 0; i < ndev && pick < 0; i++) {
            if (strcmp(names[i], want) == 0) {
                pick = i;
            }
        }
        if (pick < 0) {
            char found[512];
            size_t off = 0;

            found[0] = '\0';
            for (int i = 0; i < ndev && off < sizeof(found); i++) {
                int w = snprintf(found + off, sizeof(found) - off, "%s%s",
                                 i ? ", " : "", names[i]);
                off += (w > 0) ? (size_t)w : 0;
            }
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "verbs device '%s' (config verbs_device) not found; "
                      "ibv_get_device_list found %d: %s", want, ndev, found);
            ibv_free_device_list(list);
            return RMACOLL_ERR_NO_DEVICE;
        }
    } else if (verbs_gpu_bus_id(tp, bus, (int)sizeof(bus)) == 0) {
        /* Hook: the NIC closest to this rank's GPU by PCI path. */
        pick = rmacoll__verbs_closest_device("/sys", bus, names, ndev, local_rank);
        if (pick >= 0) {
            verbs_log(tp, RMACOLL_LOG_INFO, "rank %d: picked %s as closest to gpu %s",
                      tp->env->rank, names[pick], bus);
        }
    }
    if (pick < 0) {
        pick = local_rank % ndev;   /* rail: local rank i uses device i mod n */
    }
    snprintf(tp->dev_name, sizeof(tp->dev_name), "%s", names[pick]);
    tp->ctx = ibv_open_device(list[pick]);
    ibv_free_device_list(list);
    if (tp->ctx == NULL) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_open_device(%s) failed: %s",
                  tp->dev_name, strerror(errno));
        return RMACOLL_ERR_NO_DEVICE;
    }
    return RMACOLL_SUCCESS;
}

/* Port attributes, GID, MTU. */
static rmacoll_status_t verbs_query_port(rmacoll_transport_t *tp)
{
    const rmacoll_config_t *cfg = tp->env->config;
    int32_t gid_cfg = cfg != NULL ? cfg->verbs_gid_index : -1;
    int rc;

    rc = ibv_query_port(tp->ctx, tp->port, &tp->port_attr);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_query_port(%s, port %u) failed: %s",
                  tp->dev_name, (unsigned)tp->port, strerror(rc));
        return RMACOLL_ERR_NO_DEVICE;
    }
    if (tp->port_attr.state != IBV_PORT_ACTIVE) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "port %u of %s is not active (state %d)",
                  (unsigned)tp->port, tp->dev_name, (int)tp->port_attr.state);
        return RMACOLL_ERR_NO_DEVICE;
    }
    tp->max_msg = tp->port_attr.max_msg_sz;
    if (tp->max_msg == 0 || tp->max_msg > VERBS_MAX_MSG_CAP) {
        tp->max_msg = VERBS_MAX_MSG_CAP;
    }
    tp->mtu = tp->port_attr.active_mtu;
    if (cfg != NULL && cfg->verbs_mtu != 0) {
        enum ibv_mtu want;

        if (verbs_mtu_from_bytes(cfg->verbs_mtu, &want) != RMACOLL_SUCCESS) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "verbs_mtu %u is not one of 256, 512, 1024, 2048, 4096",
                      cfg->verbs_mtu);
            return RMACOLL_ERR_CONFIG;
        }
        if (want < tp->mtu) {
            tp->mtu = want;
        }
    }

    tp->use_grh = 0;
    tp->gid_index = gid_cfg;
    if (tp->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET && gid_cfg < 0) {
        /* RoCE, auto: the first RoCE v2 GID with an IPv4-mapped address,
         * else the first RoCE v2 GID, else index 0. */
        int first_v2 = -1;
        int v4 = -1;

        for (int i = 0; i < tp->port_attr.gid_tbl_len && v4 < 0; i++) {
            struct ibv_gid_entry e;
            static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

            if (ibv_query_gid_ex(tp->ctx, tp->port, (uint32_t)i, &e, 0) != 0 ||
                e.gid_type != IBV_GID_TYPE_ROCE_V2) {
                continue;
            }
            if (first_v2 < 0) {
                first_v2 = i;
            }
            if (memcmp(e.gid.raw, v4_prefix, sizeof(v4_prefix)) == 0) {
                v4 = i;
            }
        }
        tp->gid_index = v4 >= 0 ? v4 : (first_v2 >= 0 ? first_v2 : 0);
    }
    if (tp->gid_index >= 0) {
        tp->use_grh = 1;
        rc = ibv_query_gid(tp->ctx, tp->port, tp->gid_index, &tp->gid);
        if (rc != 0) {
            verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_query_gid(%s, port %u, index %d) failed: %s",
                      tp->dev_name, (unsigned)tp->port, tp->gid_index, strerror(errno));
            return RMACOLL_ERR_TRANSPORT;
        }
    }
    return RMACOLL_SUCCESS;
}

/* ------------------------------------------------------------ QP setup */

static rmacoll_status_t verbs_post_recv_one(rmacoll_transport_t *tp, int pi)
{
    struct ibv_recv_wr wr;
    struct ibv_recv_wr *bad = NULL;
    int rc;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id = VERBS_WRID_RECV | (uint64_t)pi;
    wr.sg_list = NULL;   /* WRITE_WITH_IMM consumes a receive but places no bytes in it */
    wr.num_sge = 0;
    rc = ibv_post_recv(tp->peers[pi].qp, &wr, &bad);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_post_recv to rank %d (qp %u) failed: %s",
                  tp->peers[pi].rank, tp->peers[pi].qp->qp_num, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_create_qp(rmacoll_transport_t *tp, int pi)
{
    verbs_peer_t *p = &tp->peers[pi];
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr a;
    int rc;

    memset(&ia, 0, sizeof(ia));
    ia.send_cq = tp->cq;
    ia.recv_cq = tp->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = tp->max_inflight;
    ia.cap.max_recv_wr = tp->recv_depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    p->qp = ibv_create_qp(tp->pd, &ia);
    if (p->qp == NULL) {
        verbs_log(tp, RMACOLL_LOG_ERROR,
                  "ibv_create_qp for rank %d on %s failed (send %u, recv %u work requests): %s",
                  p->rank, tp->dev_name, tp->max_inflight, tp->recv_depth, strerror(errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = tp->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    rc = ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "qp %u for rank %d: modify to INIT failed: %s",
                  p->qp->qp_num, p->rank, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    for (uint32_t i = 0; i < tp->recv_depth; i++) {
        rmacoll_status_t st = verbs_post_recv_one(tp, pi);

        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_connect_qp(rmacoll_transport_t *tp, int pi,
                                         const verbs_addr_t *remote)
{
    verbs_peer_t *p = &tp->peers[pi];
    struct ibv_qp_attr a;
    int rc;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(remote->mtu < (uint32_t)tp->mtu ? remote->mtu
                                                                 : (uint32_t)tp->mtu);
    a.dest_qp_num = remote->qpn;
    a.rq_psn = remote->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;   /* 0.64 ms */
    a.ah_attr.port_num = tp->port;
    a.ah_attr.sl = (uint8_t)tp->service_level;
    a.ah_attr.dlid = remote->lid;
    if (tp->use_grh || remote->link_layer == IBV_LINK_LAYER_ETHERNET) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, remote->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)(tp->gid_index < 0 ? 0 : tp->gid_index);
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.grh.traffic_class = (uint8_t)tp->traffic_class;
    }
    rc = ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR,
                  "qp %u to rank %d (remote qp %u, lid %u): modify to RTR failed: %s",
                  p->qp->qp_num, p->rank, remote->qpn, (unsigned)remote->lid, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;         /* 4.096 us * 2^14 = 67 ms per try */
    a.retry_cnt = 7;
    a.rnr_retry = 7;        /* 7 = retry forever while the target reposts */
    a.sq_psn = p->psn;
    a.max_rd_atomic = 1;
    rc = ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                      IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "qp %u to rank %d: modify to RTS failed: %s",
                  p->qp->qp_num, p->rank, strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

/* Local resources: device, port, PD, CQ, one QP per peer in INIT. */
static rmacoll_status_t verbs_setup_local(rmacoll_transport_t *tp)
{
    const rmacoll_transport_env_t *env = tp->env;
    struct ibv_device_attr dattr;
    rmacoll_status_t st;
    unsigned seed;
    int cqe;
    int rc;

    st = verbs_open_device(tp);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    rc = ibv_query_device(tp->ctx, &dattr);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_query_device(%s) failed: %s", tp->dev_name,
                  strerror(rc));
        return RMACOLL_ERR_TRANSPORT;
    }
    if (dattr.max_qp_wr > 0 && tp->max_inflight > (uint32_t)dattr.max_qp_wr) {
        verbs_log(tp, RMACOLL_LOG_WARN, "verbs_max_inflight %u above %s's limit; using %d",
                  tp->max_inflight, tp->dev_name, dattr.max_qp_wr);
        tp->max_inflight = (uint32_t)dattr.max_qp_wr;
    }
    if (dattr.max_qp_wr > 0 && tp->recv_depth > (uint32_t)dattr.max_qp_wr) {
        tp->recv_depth = (uint32_t)dattr.max_qp_wr;
    }
    st = verbs_query_port(tp);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    tp->pd = ibv_alloc_pd(tp->ctx);
    if (tp->pd == NULL) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_alloc_pd(%s) failed: %s", tp->dev_name,
                  strerror(errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    /* Room for every send and receive completion that can be outstanding. */
    {
        uint64_t want = (uint64_t)(tp->npeers > 0 ? tp->npeers : 1) *
                        (tp->max_inflight + tp->recv_depth);

        if (dattr.max_cqe > 0 && want > (uint64_t)dattr.max_cqe) {
            verbs_log(tp, RMACOLL_LOG_WARN,
                      "completion queue of %llu entries above %s's limit %d; "
                      "lower verbs_max_inflight if completions overflow",
                      (unsigned long long)want, tp->dev_name, dattr.max_cqe);
            want = (uint64_t)dattr.max_cqe;
        }
        cqe = (int)(want > INT_MAX ? INT_MAX : want);
    }
    tp->cq = ibv_create_cq(tp->ctx, cqe, NULL, NULL, 0);
    if (tp->cq == NULL) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_create_cq(%s, %d entries) failed: %s",
                  tp->dev_name, cqe, strerror(errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8) ^ (unsigned)env->rank;
    for (int i = 0; i < tp->npeers; i++) {
        tp->peers[i].psn = (unsigned)rand_r(&seed) & 0xffffffu;
        st = verbs_create_qp(tp, i);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

static void verbs_destroy(rmacoll_transport_t *tp)
{
    rmacoll_mem_t *m;

    if (tp == NULL) {
        return;
    }
    for (int i = 0; tp->peers != NULL && i < tp->npeers; i++) {
        if (tp->peers[i].qp != NULL) {
            ibv_destroy_qp(tp->peers[i].qp);
        }
    }
    m = tp->regs;
    while (m != NULL) {
        rmacoll_mem_t *next = m->next;

        if (m->refs != 0) {
            verbs_log(tp, RMACOLL_LOG_DEBUG,
                      "finalize: region at %p (%zu bytes) still has %u registrations",
                      (void *)m->addr, m->bytes, m->refs);
        }
        if (!m->revoked) {
            ibv_dereg_mr(m->mr);
        }
        free(m);
        m = next;
    }
    if (tp->cq != NULL) {
        ibv_destroy_cq(tp->cq);
    }
    if (tp->pd != NULL) {
        ibv_dealloc_pd(tp->pd);
    }
    if (tp->ctx != NULL) {
        ibv_close_device(tp->ctx);
    }
    pthread_mutex_destroy(&tp->reg_lock);
    free(tp->peers);
    free(tp->peer_index);
    free(tp);
}

/* ----------------------------------------------------------- init/fini */

static rmacoll_status_t verbs_init(const rmacoll_transport_env_t *env,
                                   rmacoll_transport_t **tpp)
{
    const rmacoll_config_t *cfg;
    rmacoll_transport_t *tp;
    rmacoll_status_t st;
    rmacoll_status_t local;
    size_t entry_bytes;
    uint8_t *blob = NULL;
    uint8_t *all = NULL;

    tp = rmacoll__tops_new(env, tpp, 1, sizeof(*tp), &st);
    if (tp == NULL) {
        return st;
    }
    cfg = env->config;
    pthread_mutex_init(&tp->reg_lock, NULL);
    tp->env = env;
    tp->err_peer = -1;
    tp->sticky = RMACOLL_SUCCESS;
    tp->chain_peer = -1;
    tp->port = (uint8_t)((cfg != NULL && cfg->verbs_port != 0) ? cfg->verbs_port : 1);
    tp->max_inflight = (cfg != NULL && cfg->verbs_max_inflight != 0)
                           ? cfg->verbs_max_inflight : VERBS_DEFAULT_MAX_INFLIGHT;
    tp->recv_depth = 2 * tp->max_inflight;
    if (tp->recv_depth < VERBS_MIN_RECV_DEPTH) {
        tp->recv_depth = VERBS_MIN_RECV_DEPTH;
    }
    tp->signal_every = tp->max_inflight / 2 ? tp->max_inflight / 2 : 1;
    tp->timeout_ms = (cfg != NULL && cfg->timeout_ms != 0) ? cfg->timeout_ms
                                                            : VERBS_DEFAULT_TIMEOUT_MS;
    tp->traffic_class = cfg != NULL ? cfg->verbs_traffic_class : 0;
    tp->service_level = cfg != NULL ? cfg->verbs_service_level : 0;

    tp->peer_index = malloc(sizeof(int) * (size_t)env->nranks);
    tp->peers = calloc((size_t)env->nranks, sizeof(verbs_peer_t));
    entry_bytes = sizeof(verbs_addr_t) * ((size_t)env->nranks + 1);
    blob = calloc(1, entry_bytes);
    all = calloc((size_t)env->nranks, entry_bytes);
    if (tp->peer_index == NULL || tp->peers == NULL || blob == NULL || all == NULL) {
        local = RMACOLL_ERR_NO_MEMORY;
    } else {
        for (int r = 0; r < env->nranks; r++) {
            tp->peer_index[r] = -1;
            if (r != env->rank && env->peers[r]) {
                tp->peer_index[r] = tp->npeers;
                tp->peers[tp->npeers].rank = r;
                tp->npeers++;
            }
        }
        local = verbs_setup_local(tp);
    }

    /* Every rank takes part in the exchange, even after a local failure,
     * so that no peer is left waiting; the header carries the outcome. */
    if (blob != NULL) {
        verbs_blob_hdr_t hdr;
        verbs_addr_t *ent = (verbs_addr_t *)blob + 1;

        memset(&hdr, 0, sizeof(hdr));
        hdr.magic = VERBS_BLOB_MAGIC;
        hdr.status = (uint32_t)local;
        memcpy(blob, &hdr, sizeof(hdr));
        for (int i = 0; local == RMACOLL_SUCCESS && i < tp->npeers; i++) {
            verbs_addr_t *e = &ent[tp->peers[i].rank];

            e->valid = 1;
            e->qpn = tp->peers[i].qp->qp_num;
            e->psn = tp->peers[i].psn;
            e->mtu = (uint32_t)tp->mtu;
            e->lid = tp->port_attr.lid;
            e->link_layer = tp->port_attr.link_layer;
            e->is_global = (uint8_t)tp->use_grh;
            memcpy(e->gid, tp->gid.raw, 16);
        }
    }
    if (blob != NULL && all != NULL) {
        st = env->allgather(env->oob_ctx, blob, all, entry_bytes);
        if (st != RMACOLL_SUCCESS) {
            verbs_log(tp, RMACOLL_LOG_ERROR, "address exchange (%zu bytes per rank) failed: %s",
                      entry_bytes, rmacoll_status_string(st));
            if (local == RMACOLL_SUCCESS) {
                local = st;
            }
        }
    } else {
        /* Cannot even take part: the peers' exchange will time out in the
         * out-of-band layer, which names this rank. */
        local = RMACOLL_ERR_NO_MEMORY;
    }
    for (int r = 0; local == RMACOLL_SUCCESS && r < env->nranks; r++) {
        verbs_blob_hdr_t hdr;

        memcpy(&hdr, all + (size_t)r * entry_bytes, sizeof(hdr));
        if (hdr.magic != VERBS_BLOB_MAGIC) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "rank %d sent a malformed verbs address blob (%zu bytes)", r, entry_bytes);
            tp->err_peer = r;
            local = RMACOLL_ERR_PEER;
        } else if (hdr.status != RMACOLL_SUCCESS && r != env->rank) {
            verbs_log(tp, RMACOLL_LOG_ERROR, "rank %d failed to set up verbs: %s", r,
                      rmacoll_status_string((rmacoll_status_t)hdr.status));
            tp->err_peer = r;
            local = RMACOLL_ERR_PEER;
        }
    }
    for (int i = 0; local == RMACOLL_SUCCESS && i < tp->npeers; i++) {
        int r = tp->peers[i].rank;
        verbs_addr_t remote;

        memcpy(&remote, all + (size_t)r * entry_bytes + sizeof(verbs_addr_t) * (1 + (size_t)env->rank),
               sizeof(remote));
        if (!remote.valid) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "rank %d made no queue pair for rank %d (peer sets differ)", r, env->rank);
            tp->err_peer = r;
            local = RMACOLL_ERR_TRANSPORT;
            break;
        }
        local = verbs_connect_qp(tp, i, &remote);
        if (local != RMACOLL_SUCCESS) {
            tp->err_peer = r;
        }
    }
    free(blob);
    free(all);
    if (local != RMACOLL_SUCCESS) {
        verbs_destroy(tp);
        return local;
    }
    verbs_log(tp, RMACOLL_LOG_INFO,
              "rank %d: %s port %u, %d peers, mtu %u, %s, max %u work requests in flight per peer",
              env->rank, tp->dev_name, (unsigned)tp->port, tp->npeers, verbs_mtu_bytes(tp->mtu),
              tp->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "infiniband",
              tp->max_inflight);
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

static void verbs_finalize(rmacoll_transport_t *tp)
{
    verbs_destroy(tp);
}

/* --------------------------------------------------------- registration */

static uint64_t verbs_cuda_buffer_id(rmacoll_transport_t *tp, uintptr_t addr)
{
    unsigned long long id = 0;

    if (tp->cuda.pointer_get_attribute == NULL ||
        tp->cuda.pointer_get_attribute(&id, VERBS_CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                       (unsigned long long)addr) != 0) {
        return 0;
    }
    return (uint64_t)id;
}

static void verbs_mem_free_entry(rmacoll_transport_t *tp, rmacoll_mem_t *m)
{
    rmacoll_mem_t **pp = &tp->regs;

    while (*pp != NULL && *pp != m) {
        pp = &(*pp)->next;
    }
    if (*pp == m) {
        *pp = m->next;
    }
    if (m->idle) {
        tp->idle_cuda--;
    }
    if (!m->revoked) {
        ibv_dereg_mr(m->mr);
    }
    free(m);
}

/* Registers CUDA memory: dma-buf first, then ibv_reg_mr (nvidia-peermem). */
static struct ibv_mr *verbs_reg_cuda(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                     int *dmabuf)
{
    struct ibv_mr *mr = NULL;

    *dmabuf = 0;
    if (tp->cuda.mem_get_handle_for_address_range != NULL) {
        long page = sysconf(_SC_PAGESIZE);
        uintptr_t ps = (uintptr_t)(page > 0 ? page : 4096);
        uintptr_t base = (uintptr_t)addr & ~(ps - 1);
        uintptr_t end = ((uintptr_t)addr + bytes + ps - 1) & ~(ps - 1);
        int fd = -1;
        int cr;

        cr = tp->cuda.mem_get_handle_for_address_range(&fd, (unsigned long long)base,
                                                        (size_t)(end - base),
                                                        VERBS_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                                        0);
        if (cr == 0 && fd >= 0) {
            mr = ibv_reg_dmabuf_mr(tp->pd, (uint64_t)((uintptr_t)addr - base), bytes,
                                   (uint64_t)(uintptr_t)addr, fd, VERBS_ACCESS);
            if (mr == NULL) {
                verbs_log(tp, RMACOLL_LOG_DEBUG,
                          "ibv_reg_dmabuf_mr of %zu bytes at %p failed (%s); trying ibv_reg_mr",
                          bytes, addr, strerror(errno));
            } else {
                *dmabuf = 1;
            }
            close(fd);   /* the MR holds its own reference to the dma-buf */
        } else {
            verbs_log(tp, RMACOLL_LOG_DEBUG,
                      "cuMemGetHandleForAddressRange(dma-buf) of %zu bytes at %p failed "
                      "(CUresult %d); trying ibv_reg_mr", bytes, addr, cr);
        }
    }
    if (mr == NULL) {
        mr = ibv_reg_mr(tp->pd, addr, bytes, VERBS_ACCESS);
    }
    return mr;
}

static void verbs_fill_rkey(const rmacoll_mem_t *m, rmacoll_rkey_t *rkey)
{
    uint32_t key;

    if (rkey == NULL) {
        return;
    }
    memset(rkey, 0, sizeof(*rkey));
    rkey->addr = (uint64_t)m->addr;
    rkey->bytes = (uint64_t)m->bytes;
    rkey->len = (uint32_t)sizeof(key);
    key = m->mr->rkey;
    memcpy(rkey->key, &key, sizeof(key));
}

static rmacoll_status_t verbs_mem_register(rmacoll_transport_t *tp, void *addr,
                                           size_t bytes, rmacoll_memtype_t type,
                                           rmacoll_mem_t **memp, rmacoll_rkey_t *rkey)
{
    uintptr_t a = (uintptr_t)addr;
    uint64_t buffer_id = 0;
    rmacoll_mem_t *m;
    struct ibv_mr *mr;
    int dmabuf = 0;

    if (tp == NULL || addr == NULL || bytes == 0 || memp == NULL ||
        (type != RMACOLL_MEM_HOST && type != RMACOLL_MEM_CUDA) || a + bytes < a) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&tp->reg_lock);
    if (type == RMACOLL_MEM_CUDA) {
        verbs_cuda_load(tp);
        buffer_id = verbs_cuda_buffer_id(tp, a);
    }
    /* Cache lookup: a live entry of the same type covering the range.
     * Host entries exist only while registered (refs > 0). CUDA entries
     * may stay idle, and are trusted only if the allocation's buffer id is
     * unchanged (a freed and re-allocated range gets a new id). */
    for (m = tp->regs; m != NULL;) {
        rmacoll_mem_t *next = m->next;

        if (!m->revoked && m->type == type && a >= m->addr &&
            a + bytes <= m->addr + m->bytes) {
            if (type == RMACOLL_MEM_CUDA && m->buffer_id != buffer_id) {
                if (m->refs == 0) {
                    verbs_log(tp, RMACOLL_LOG_DEBUG,
                              "cached registration at %p (%zu bytes) is stale "
                              "(buffer id %llu, now %llu); re-registering",
                              (void *)m->addr, m->bytes, (unsigned long long)m->buffer_id,
                              (unsigned long long)buffer_id);
                    verbs_mem_free_entry(tp, m);
                }
                m = next;
                continue;
            }
            if (m->idle) {
                m->idle = 0;
                tp->idle_cuda--;
            }
            m->refs++;
            verbs_fill_rkey(m, rkey);
            *memp = m;
            pthread_mutex_unlock(&tp->reg_lock);
            return RMACOLL_SUCCESS;
        }
        m = next;
    }

    if (type == RMACOLL_MEM_CUDA) {
        mr = verbs_reg_cuda(tp, addr, bytes, &dmabuf);
    } else {
        mr = ibv_reg_mr(tp->pd, addr, bytes, VERBS_ACCESS);
    }
    if (mr == NULL) {
        int err = errno;

        pthread_mutex_unlock(&tp->reg_lock);
        verbs_log(tp, RMACOLL_LOG_ERROR, "registering %zu bytes of %s memory at %p on %s failed: %s",
                  bytes, type == RMACOLL_MEM_CUDA ? "cuda" : "host", addr, tp->dev_name,
                  strerror(err));
        return RMACOLL_ERR_TRANSPORT;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        ibv_dereg_mr(mr);
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_ERR_NO_MEMORY;
    }
    m->addr = a;
    m->bytes = bytes;
    m->type = type;
    m->mr = mr;
    m->refs = 1;
    m->gen = ++tp->reg_gen;
    m->buffer_id = buffer_id;
    m->dmabuf = dmabuf;
    m->next = tp->regs;
    tp->regs = m;
    verbs_fill_rkey(m, rkey);
    *memp = m;
    pthread_mutex_unlock(&tp->reg_lock);
    verbs_log(tp, RMACOLL_LOG_DEBUG,
              "registered %zu bytes of %s memory at %p%s: lkey 0x%x rkey 0x%x gen %llu",
              bytes, type == RMACOLL_MEM_CUDA ? "cuda" : "host", addr,
              dmabuf ? " (dma-buf)" : "", mr->lkey, mr->rkey, (unsigned long long)m->gen);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    if (tp == NULL || mem == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&tp->reg_lock);
    if (mem->refs == 0) {
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (--mem->refs == 0) {
        if (mem->revoked) {
            verbs_mem_free_entry(tp, mem);
            pthread_mutex_unlock(&tp->reg_lock);
            return RMACOLL_SUCCESS;
        }
        /* Host memory: deregister now, so a freed and re-used range is
         * registered afresh (new MR, new rkey, new generation) and never
         * served by an MR pinning the old pages. CUDA memory with a known
         * buffer id may stay cached idle: the id catches reuse. */
        if (mem->type == RMACOLL_MEM_CUDA && mem->buffer_id != 0 &&
            tp->idle_cuda < VERBS_IDLE_CUDA_MAX) {
            mem->idle = 1;
            tp->idle_cuda++;
        } else {
            verbs_mem_free_entry(tp, mem);
        }
    }
    pthread_mutex_unlock(&tp->reg_lock);
    return RMACOLL_SUCCESS;
}

/* Revokes mem (the transport interface's mem_revoke): ibv_dereg_mr now,
 * whatever its references; the HCA then refuses the rkey (a late RDMA
 * WRITE fails at the writer with a remote access error). The entry leaves
 * the cache and is freed at its last mem_deregister. Not verified on
 * hardware here: that a write already in progress is cut off rests on the
 * HCA checking the key of every packet against the invalidated MR. */
static rmacoll_status_t verbs_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    int rc = 0;

    if (tp == NULL || mem == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&tp->reg_lock);
    if (mem->refs == 0 && !mem->idle) {
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!mem->revoked) {
        rc = ibv_dereg_mr(mem->mr);
        if (rc == 0) {
            mem->revoked = 1;
            mem->mr = NULL;
        }
    }
    pthread_mutex_unlock(&tp->reg_lock);
    if (rc != 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "revoking the registration of %zu bytes at %p "
                  "on %s failed: %s", mem->bytes, (void *)mem->addr, tp->dev_name,
                  strerror(rc > 0 ? rc : errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    verbs_log(tp, RMACOLL_LOG_INFO, "revoked the registration of %zu bytes at %p",
              mem->bytes, (void *)mem->addr);
    return RMACOLL_SUCCESS;
}

/* ------------------------------------------------------------ data path */

static void verbs_fail_peer(rmacoll_transport_t *tp, int pi)
{
    verbs_peer_t *p = &tp->peers[pi];

    if (!p->failed) {
        p->failed = 1;
        /* Nothing posted to it will be retired usefully any more. */
        tp->pending -= (size_t)(p->posted - p->retired);
        p->retired = p->posted;
    }
    if (tp->err_peer < 0) {
        tp->err_peer = p->rank;
    }
    if (tp->sticky == RMACOLL_SUCCESS) {
        tp->sticky = RMACOLL_ERR_TRANSPORT;
    }
}

static rmacoll_status_t verbs_handle_wc(rmacoll_transport_t *tp, const struct ibv_wc *wc)
{
    int pi = (int)(wc->wr_id & VERBS_WRID_PEER_MASK);
    int recv = (wc->wr_id & VERBS_WRID_RECV) != 0;
    verbs_peer_t *p;

    if (pi >= tp->npeers) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "completion with unknown wr_id 0x%llx on qp %u (%s)",
                  (unsigned long long)wc->wr_id, wc->qp_num, ibv_wc_status_str(wc->status));
        return RMACOLL_ERR_INTERNAL;
    }
    p = &tp->peers[pi];
    if (wc->status != IBV_WC_SUCCESS) {
        if (!p->failed) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "%s rank %d failed on qp %u: %s (status %d, vendor error 0x%x)",
                      recv ? "receive from" : "rdma write to", p->rank, wc->qp_num,
                      ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
        }
        verbs_fail_peer(tp, pi);
        return RMACOLL_ERR_TRANSPORT;
    }
    if (recv) {
        uint32_t idx;

        if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "unexpected receive (opcode %d) from rank %d on qp %u", (int)wc->opcode,
                      p->rank, wc->qp_num);
            verbs_fail_peer(tp, pi);
            return RMACOLL_ERR_TRANSPORT;
        }
        idx = ntohl(wc->imm_data);
        if (idx >= tp->env->nsignals) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "rank %d signalled word %u on qp %u, but only %u words exist", p->rank,
                      idx, wc->qp_num, tp->env->nsignals);
            verbs_fail_peer(tp, pi);
            return RMACOLL_ERR_TRANSPORT;
        }
        /* Contract: one writer per word, raised by one per signal. */
        __atomic_fetch_add(&tp->env->signals[idx], 1, __ATOMIC_RELEASE);
        return verbs_post_recv_one(tp, pi);
    }
    {
        uint64_t seq = (wc->wr_id >> VERBS_WRID_SEQ_SHIFT) & VERBS_WRID_SEQ_MASK;
        uint64_t done = p->retired & ~VERBS_WRID_SEQ_MASK;

        done |= seq;
        if (done < p->retired) {
            done += VERBS_WRID_SEQ_MASK + 1;   /* the 39-bit field wrapped */
        }
        if (done > p->posted) {
            done = p->posted;
        }
        if (done > p->retired) {
            tp->pending -= (size_t)(done - p->retired);
            p->retired = done;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_progress(rmacoll_transport_t *tp)
{
    struct ibv_wc wc[VERBS_POLL_BATCH];
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (int round = 0; round < VERBS_POLL_ROUNDS; round++) {
        int n = ibv_poll_cq(tp->cq, VERBS_POLL_BATCH, wc);

        if (n < 0) {
            verbs_log(tp, RMACOLL_LOG_ERROR, "ibv_poll_cq on %s failed (%d)", tp->dev_name, n);
            if (tp->sticky == RMACOLL_SUCCESS) {
                tp->sticky = RMACOLL_ERR_TRANSPORT;
            }
            return RMACOLL_ERR_TRANSPORT;
        }
        for (int i = 0; i < n; i++) {
            rmacoll_status_t s = verbs_handle_wc(tp, &wc[i]);

            if (s != RMACOLL_SUCCESS && st == RMACOLL_SUCCESS) {
                st = s;
            }
        }
        if (n < VERBS_POLL_BATCH) {
            break;
        }
    }
    if (st == RMACOLL_SUCCESS) {
        st = tp->sticky;
    }
    return st;
}

/* Posts the chain built for one peer. The last WR is signalled, and so is
 * any WR after signal_every unsignalled ones, so that every WR is retired
 * by a later completion and the send queue never fills with WRs that no
 * completion will ever free. */
static rmacoll_status_t verbs_flush(rmacoll_transport_t *tp)
{
    int pi = tp->chain_peer;
    int n = tp->chain_len;
    verbs_peer_t *p;
    struct ibv_send_wr *bad = NULL;
    int rc;

    if (n == 0 || pi < 0) {
        tp->chain_len = 0;
        return RMACOLL_SUCCESS;
    }
    p = &tp->peers[pi];
    for (int i = 0; i < n; i++) {
        struct ibv_send_wr *wr = &tp->chain[i];
        uint64_t seq = p->posted + (uint64_t)i + 1;

        wr->next = (i + 1 < n) ? &tp->chain[i + 1] : NULL;
        p->unsignalled++;
        if (i + 1 == n || p->unsignalled >= tp->signal_every) {
            wr->send_flags |= IBV_SEND_SIGNALED;
            p->unsignalled = 0;
        }
        wr->wr_id = (uint64_t)pi | ((seq & VERBS_WRID_SEQ_MASK) << VERBS_WRID_SEQ_SHIFT);
    }
    tp->chain_len = 0;
    rc = ibv_post_send(p->qp, &tp->chain[0], &bad);
    if (rc != 0) {
        int ok = 0;

        for (int i = 0; i < n && &tp->chain[i] != bad; i++) {
            ok++;
        }
        p->posted += (uint64_t)ok;
        tp->pending += (size_t)ok;
        verbs_log(tp, RMACOLL_LOG_ERROR,
                  "ibv_post_send to rank %d (qp %u) failed after %d of %d work requests: %s",
                  p->rank, p->qp->qp_num, ok, n, strerror(rc));
        verbs_fail_peer(tp, pi);
        return RMACOLL_ERR_TRANSPORT;
    }
    p->posted += (uint64_t)n;
    tp->pending += (size_t)n;
    return RMACOLL_SUCCESS;
}

/* Waits (driving progress) until peer pi has room for one more send WR. */
static rmacoll_status_t verbs_wait_room(rmacoll_transport_t *tp, int pi, uint64_t *deadline)
{
    verbs_peer_t *p = &tp->peers[pi];

    while (p->posted - p->retired >= tp->max_inflight) {
        rmacoll_status_t st = verbs_progress(tp);

        if (p->failed) {
            return RMACOLL_ERR_TRANSPORT;
        }
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (p->posted - p->retired < tp->max_inflight) {
            break;
        }
        if (*deadline == 0) {
            *deadline = verbs_now_ms() + tp->timeout_ms;
        } else if (verbs_now_ms() >= *deadline) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "timed out after %llu ms waiting for room to post to rank %d "
                      "(qp %u, %llu work requests in flight, limit %u)",
                      (unsigned long long)tp->timeout_ms, p->rank, p->qp->qp_num,
                      (unsigned long long)(p->posted - p->retired), tp->max_inflight);
            tp->err_peer = p->rank;
            return RMACOLL_ERR_TIMEOUT;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_check_put(rmacoll_transport_t *tp, const rmacoll_put_t *put,
                                        int *pip)
{
    int pi;

    if (put->peer < 0 || put->peer >= tp->env->nranks ||
        (pi = tp->peer_index[put->peer]) < 0) {
        verbs_log(tp, RMACOLL_LOG_ERROR, "put of %llu bytes to rank %d, which is not a verbs peer",
                  (unsigned long long)put->bytes, put->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (tp->peers[pi].failed) {
        /* Logged when the QP failed; fail at once, never wait. */
        return RMACOLL_ERR_TRANSPORT;
    }
    if (put->bytes > 0) {
        const rmacoll_mem_t *m = put->src_mem;
        uintptr_t s = (uintptr_t)put->src;
        const rmacoll_rkey_t *rk = put->dst_rkey;

        if (m == NULL || s < m->addr || s + put->bytes < s ||
            s + put->bytes > m->addr + m->bytes) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "put of %llu bytes to rank %d: source %p is not inside its registration",
                      (unsigned long long)put->bytes, put->peer, put->src);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (rk == NULL || rk->len != sizeof(uint32_t) || put->dst_addr < rk->addr ||
            put->dst_addr + put->bytes < put->dst_addr ||
            put->dst_addr + put->bytes > rk->addr + rk->bytes) {
            verbs_log(tp, RMACOLL_LOG_ERROR,
                      "put of %llu bytes to rank %d at 0x%llx is outside the remote region",
                      (unsigned long long)put->bytes, put->peer,
                      (unsigned long long)put->dst_addr);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    *pip = pi;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t verbs_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                        size_t n)
{
    uint64_t deadline = 0;
    rmacoll_status_t st;

    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *put = &puts[i];
        uint64_t off = 0;
        uint32_t rkey = 0;
        int pi;

        st = verbs_check_put(tp, put, &pi);
        if (st != RMACOLL_SUCCESS) {
            (void)verbs_flush(tp);
            return st;
        }
        if (put->bytes > 0) {
            memcpy(&rkey, put->dst_rkey->key, sizeof(rkey));
        }
        /* A signal-only put is one zero-length WRITE_WITH_IMM; a put with
         * no signal and no bytes posts nothing. */
        if (put->bytes == 0 && put->sig_index == RMACOLL_NO_SIGNAL) {
            continue;
        }
        do {
            uint64_t len = put->bytes - off;
            int last;
            struct ibv_send_wr *wr;
            struct ibv_sge *sge;

            if (len > tp->max_msg) {
                len = tp->max_msg;
            }
            last = (off + len == put->bytes);
            if (tp->chain_len > 0 && tp->chain_peer != pi) {
                st = verbs_flush(tp);
                if (st != RMACOLL_SUCCESS) {
                    return st;
                }
            }
            if (tp->peers[pi].posted + (uint64_t)tp->chain_len - tp->peers[pi].retired >=
                tp->max_inflight) {
                st = verbs_flush(tp);
                if (st == RMACOLL_SUCCESS) {
                    st = verbs_wait_room(tp, pi, &deadline);
                }
                if (st != RMACOLL_SUCCESS) {
                    return st;
                }
            }
            tp->chain_peer = pi;
            wr = &tp->chain[tp->chain_len];
            sge = &tp->chain_sge[tp->chain_len];
            memset(wr, 0, sizeof(*wr));
            if (len > 0) {
                sge->addr = (uint64_t)(uintptr_t)put->src + off;
                sge->length = (uint32_t)len;
                sge->lkey = put->src_mem->mr->lkey;
                wr->sg_list = sge;
                wr->num_sge = 1;
                wr->wr.rdma.remote_addr = put->dst_addr + off;
                wr->wr.rdma.rkey = rkey;
            }
            if (last && put->sig_index != RMACOLL_NO_SIGNAL) {
                wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
                wr->imm_data = htonl(put->sig_index);
            } else {
                wr->opcode = IBV_WR_RDMA_WRITE;
            }
            tp->chain_len++;
            off += len;
            if (tp->chain_len == VERBS_CHAIN_MAX) {
                st = verbs_flush(tp);
                if (st != RMACOLL_SUCCESS) {
                    return st;
                }
            }
        } while (off < put->bytes);
    }
    return verbs_flush(tp);
}

static size_t verbs_pending(rmacoll_transport_t *tp)
{
    return tp != NULL ? tp->pending : 0;
}

RMACOLL__TOPS_ERROR_PEER_FN(verbs_error_peer, err_peer)

/* The device and port of this rank's queue pairs ("verbs mlx5_0:1"). */
static void verbs_local_nic(rmacoll_transport_t *tp, char *name, size_t len)
{
    snprintf(name, len, "verbs %s:%u", tp->dev_name, (unsigned)tp->port);
}

const rmacoll_transport_ops_t rmacoll_transport_verbs_ops = {
    RMACOLL__TOPS_ABI,
    .name = "verbs",
    .desc = "rdma-core ibverbs: RC queue pairs, RDMA WRITE and WRITE_WITH_IMM signals",
    /* device memory, registered for the network directly (GPUDirect RDMA) */
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST | RMACOLL_TCAP_MEM_CUDA |
            RMACOLL_TCAP_HMEM,
    .base = RMACOLL__TOPS_BASE(.init = verbs_init, .finalize = verbs_finalize,
                               .progress = verbs_progress, .pending = verbs_pending,
                               .error_peer = verbs_error_peer,
                               .local_nic = verbs_local_nic),
    .mem = RMACOLL__TOPS_MEM(.mem_register = verbs_mem_register,
                             .mem_deregister = verbs_mem_deregister,
                             .mem_revoke = verbs_mem_revoke),
    .host = RMACOLL__TOPS_HOST(.post_puts = verbs_post_puts),
    .keys = rmacoll_transport_verbs_keys,
    .nkeys = VERBS_NKEYS,
};

#ifdef RMACOLL_VERBS_MODULE
/* Built as librmacoll-verbs.so: the same table under the plugin entry
 * symbol, which the core's loader resolves (rmacoll_transport.h). */
extern const rmacoll_transport_ops_t RMACOLL_TRANSPORT_PLUGIN_SYMBOL
    __attribute__((alias("rmacoll_transport_verbs_ops")));
#endif
