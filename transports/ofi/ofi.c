/*
 * ofi.c - the libfabric transport (PROXY path), one file, UCX-style.
 *
 * PutSignal is one fi_writemsg per piece (pieces are at most the
 * provider's max_msg_size, or RMACOLL_OFI_MAX_MSG_SIZE when set), issued
 * with FI_DELIVERY_COMPLETE. The last piece of a signalled put carries
 * FI_REMOTE_CQ_DATA = the target's signal index (32 bits); the target's
 * progress() reads that completion from its CQ and increments its word
 * env->signals[index] by one with release semantics (the contract lets a
 * transport raise a word by one per signal).
 *
 * Ordering. The signal may be applied only once the bytes of this put and
 * of every earlier put to the same peer are visible. Two ways:
 *  - Ordered providers: when fi_getinfo's answer (the endpoint is opened
 *    with it) has FI_ORDER_WAW in tx_attr->msg_order and a
 *    max_order_waw_size of at least one piece (tcp;ofi_rxm, net and
 *    sockets here: one byte stream per peer), the provider places the
 *    writes to a peer in the order they were issued, so a write's remote
 *    CQ data implies every earlier write to that peer landed. Pieces are
 *    then issued at once, signalled or not, with FI_INJECT_COMPLETE: the
 *    local completion only says the source may be reused, and no
 *    delivery acknowledgement crosses the network (on tcp;ofi_rxm one
 *    16-byte ack message per write, and a signal waiting a round trip for
 *    the acks of the pieces before it). Not for device memory (FI_HMEM),
 *    where the landing copy may still run when the write completes.
 *  - Otherwise (shm reports FI_ORDER_SAS only, EFA no RMA ordering,
 *    ofi.delivery_complete set): a signalled piece is issued only when no
 *    earlier piece to that peer is still in flight; every piece uses
 *    FI_DELIVERY_COMPLETE, so "completed locally" means "visible at the
 *    target".
 * Puts behind a held signal wait in a per-peer FIFO that progress()
 * drains. A put's own bytes and its remote CQ data travel in one
 * operation, so they need no extra fence. The core never needs more than
 * "source reusable" from a completion: what a target may read, it learns
 * from signals.
 * Signal-only puts (0 bytes) go out as fi_inject_writedata of 0 bytes
 * (no source, no local completion; shm never completes a zero-length
 * write issued with FI_DELIVERY_COMPLETE), once earlier pieces are done.
 *
 * Addresses: with FI_MR_VIRT_ADDR, rkey.addr is the virtual address the
 * target registered; without it (tcp), rkey.addr is the offset of that
 * address inside the provider registration (0 unless the cache reused a
 * wider one). Either way dst_addr = rkey.addr + offset is what goes into
 * fi_writemsg. rkey.key[0..7] holds the 64-bit fi_mr_key.
 *
 * Device memory (FI_HMEM). In a build with CUDA, init first asks
 * fi_getinfo for the provider with FI_HMEM in caps and FI_MR_HMEM in the
 * domain's mr_mode; when the provider offers it (a libfabric built with
 * CUDA: shm, efa, verbs;ofi_rxm), the instance reports RMACOLL_TCAP_HMEM |
 * RMACOLL_TCAP_MEM_CUDA through base.instance_caps and mem_register takes
 * RMACOLL_MEM_CUDA: fi_mr_regattr with iface FI_HMEM_CUDA and the
 * pointer's device ordinal. Otherwise (Debian's libfabric, tcp) the
 * ordinary hints are used and device memory is refused: the core then
 * stages device buffers through host memory. Decided at run time from
 * fi_getinfo, never at build time. Device registrations stay cached while
 * unused when the allocation's CUDA buffer id is known: a range freed and
 * allocated again gets a new id, and its stale registration is closed.
 *
 * Thread-safety: one instance is used by one thread at a time (the core
 * serialises calls); the domain is opened with FI_THREAD_DOMAIN.
 * No allocation on the data path: op contexts and queued puts come from
 * pools sized at init.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "rmacoll_transport.h"
#include "transports/ofi/ofi_keys.h"
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
    int cut_off;                /* mem_revoke stopped all progress */
    int hmem;                   /* cuda memory registered (FI_HMEM, probed at init) */
    uint64_t hmem_flags;        /* fi_mr_regattr flags of device memory (ofi.hmem_device_only) */
    void *cu_ctx;               /* CUDA context of init's thread (hmem), bound where we drive */
    int dev_fence;              /* device memory registered without FI_HMEM_DEVICE_ONLY: the
                                 * provider may land it by cudaMemcpy (see ofi_progress) */
    char hmem_desc[RMACOLL_CONFIG_STR_MAX + 96]; /* why (not), for instance_caps */
};

#define OFI_LOG(tp, lvl, ...)                                                 \
    do {                                                                      \
        if ((tp)->env.log != NULL) {                                          \
            (tp)->env.log((tp)->env.log_ctx, (lvl),                           \
                          RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);         \
        }                                                                     \
    } while (0)

static uint64_t ofi_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Records a failure once: the first error wins and stays. */
static rmacoll_status_t ofi_fail(rmacoll_transport_t *tp, rmacoll_status_t st,
                                 int peer)
{
    if (tp->failed == RMACOLL_SUCCESS) {
        tp->failed = st;
        tp->err_peer = peer;
    }
    return tp->failed;
}

/* ---- provider selection ---- */

static struct fi_info *ofi_hints(const char *prov, int hmem)
{
    struct fi_info *h = fi_allocinfo();

    if (h == NULL) {
        return NULL;
    }
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    if (hmem) {
        h->caps |= FI_HMEM;
        h->domain_attr->mr_mode |= FI_MR_HMEM;
    }
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->fabric_attr->prov_name = strdup(prov);
    if (h->fabric_attr->prov_name == NULL) {
        fi_freeinfo(h);
        return NULL;
    }
    return h;
}

/* Lists the providers present with endpoints of type ep (any caps) into
 * buf (may be NULL), for error messages; returns whether `prov` is among
 * them. */
static int ofi_list_providers(const char *prov, enum fi_ep_type ep, char *buf, size_t len)
{
    struct fi_info *h = fi_allocinfo(), *list = NULL;
    int found = 0;
    size_t off = 0;

    if (buf != NULL) {
        buf[0] = '\0';
    }
    if (h == NULL) {
        return 0;
    }
    h->ep_attr->type = ep;
    if (fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, h, &list) == 0) {
        for (struct fi_info *i = list; i != NULL; i = i->next) {
            const char *n = i->fabric_attr->prov_name;
            if (strcmp(n, prov) == 0) {
                found = 1;
            }
            if (buf != NULL && strstr(buf, n) == NULL && off + strlen(n) + 3 < len) {
                off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                        off ? ", " : "", n);
            }
        }
        fi_freeinfo(list);
    }
    fi_freeinfo(h);
    return found;
}


/* Regions of the shm provider that this transport named
 * "rmacoll-PID-RANDOM-RANK" (below) and whose process is gone: a killed
 * rank never unlinks its region, and each would keep 16 MiB of /dev/shm
 * until reboot. Run at init and at finalize, so survivors of a killed
 * peer remove its region. A region whose process is alive is left alone
 * (PIDs are those of this PID namespace: ranks of a job share one). */
static void ofi_sweep_stale_shm(rmacoll_transport_t *tp)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name + 8;
        char *end;
        long pid;

        if (strncmp(e->d_name, "rmacoll-", 8) != 0 || p[0] < '0' || p[0] > '9') {
            continue;
        }
        pid = strtol(p, &end, 10);
        /* "rmacoll-PID-": at most 7 digits (PID_MAX_LIMIT is 2^22); the
         * core's control windows ("rmacoll-<16 hex digits>-RANK") never
         * match, and are unlinked by the core once mapped anyway */
        if (*end != '-' || end - p > 7 || pid <= 0 || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
            continue;
        }
        char name[300];
        snprintf(name, sizeof(name), "/%s", e->d_name);
        if (shm_unlink(name) == 0) {
            OFI_LOG(tp, RMACOLL_LOG_INFO,
                    "ofi: removed /dev/shm%s, left by process %ld that has exited",
                    name, pid);
        }
    }
    closedir(d);
}

/* The entry of list for provider prov (on domain iface if one matches),
 * with FI_HMEM in its caps when hmem; NULL if none. */
static struct fi_info *ofi_pick(struct fi_info *list, const char *prov, const char *iface,
                                int hmem)
{
    struct fi_info *pick = NULL;

    for (struct fi_info *i = list; i != NULL; i = i->next) {
        if (strcmp(i->fabric_attr->prov_name, prov) != 0 || (hmem && !(i->caps & FI_HMEM))) {
            continue;   /* utility providers may answer for a core name */
        }
        if (iface == NULL || (i->domain_attr->name &&
                              strcmp(i->domain_attr->name, iface) == 0)) {
            return i;
        }
        if (pick == NULL) {
            pick = i;   /* first of the provider, if iface matches none */
        }
    }
    return pick;
}

/* fi_getinfo for prov with the hints of ofi_hints(prov, hmem); *list is
 * NULL when the provider offers nothing for them. */
static rmacoll_status_t ofi_getinfo(rmacoll_transport_t *tp, const char *prov, int hmem,
                                    struct fi_info **list)
{
    struct fi_info *hints = ofi_hints(prov, hmem);
    int ret;

    *list = NULL;
    if (hints == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    ret = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, list);
    fi_freeinfo(hints);
    if (ret == -FI_ENODATA || (ret != 0 && hmem)) {
        *list = NULL;   /* with FI_HMEM: any refusal means "not offered" */
        return RMACOLL_SUCCESS;
    }
    if (ret != 0) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: fi_getinfo for provider '%s' failed: %s",
                prov, fi_strerror(-ret));
        *list = NULL;
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

/* ofi.provider "auto": libfabric's native RDM provider over TCP where this
 * libfabric has one (net in 1.16 and 1.17, tcp itself from 1.18: the same
 * code, xnet), else tcp;ofi_rxm. The native one makes one system call per
 * message on each side; rxm over the msg provider adds a wait-fd write and
 * read per completion (on a 1 + 1 1 KiB call here: 13-15 us against 20-28,
 * docs/transport-ofi.md). net reads FI_NET_IFACE, not FI_TCP_IFACE: with
 * no ofi.iface and no FI_NET_IFACE, FI_TCP_IFACE names its interface, so a
 * user's (or the tests') loopback choice holds for either. A candidate is
 * taken only if it offers what init needs on that interface. */
static const char *const ofi_auto_candidates[] = {"net", "tcp", "tcp;ofi_rxm"};

/* The interface the environment names for prov when ofi.iface does not:
 * FI_TCP_IFACE, which users set for TCP, for net (which reads only
 * FI_NET_IFACE) when FI_NET_IFACE is unset; and for tcp and tcp;ofi_rxm,
 * which read it themselves but fall back to every interface when it names
 * none (a typo would leave loopback unnoticed): the domain must match. */
static const char *ofi_env_iface_var(const char *prov)
{
    const char *n = getenv("FI_NET_IFACE"), *t = getenv("FI_TCP_IFACE");

    if (strcmp(prov, "net") == 0 && n != NULL && n[0] != '\0') {
        return "FI_NET_IFACE"; /* net's own; a typo used to leave net on its default */
    }
    if (t == NULL || t[0] == '\0') {
        return NULL;
    }
    if (strcmp(prov, "net") == 0) {
        return "FI_TCP_IFACE";
    }
    return strcmp(prov, "tcp") == 0 || strcmp(prov, "tcp;ofi_rxm") == 0 ? "FI_TCP_IFACE"
                                                                        : NULL;
}

/* The interface that variable names (the domain must match it), or NULL. */
static const char *ofi_env_iface(const char *prov)
{
    const char *var = ofi_env_iface_var(prov);

    return var != NULL ? getenv(var) : NULL;
}

static rmacoll_status_t ofi_resolve_auto(rmacoll_transport_t *tp, const char **prov,
                                         const char **iface)
{
    const size_t n = sizeof(ofi_auto_candidates) / sizeof(ofi_auto_candidates[0]);

    for (size_t c = 0; c < n; c++) {
        const char *cand = ofi_auto_candidates[c];
        const char *ifc = *iface ? *iface : ofi_env_iface(cand);
        struct fi_info *list = NULL, *pick;
        rmacoll_status_t st;
        int ok;

        st = ofi_getinfo(tp, cand, 0, &list);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        pick = ofi_pick(list, cand, ifc, 0);
        ok = pick != NULL && pick->domain_attr->cq_data_size >= 4 &&
             (pick->caps & (FI_RMA | FI_WRITE | FI_REMOTE_WRITE)) ==
                 (FI_RMA | FI_WRITE | FI_REMOTE_WRITE) &&
             (ifc == NULL || strcmp(pick->domain_attr->name, ifc) == 0);
        if (list != NULL) {
            fi_freeinfo(list);
        }
        if (!ok && pick != NULL && *iface == NULL && ifc != NULL &&
            ofi_env_iface_var(cand) != NULL &&
            strcmp(ofi_env_iface_var(cand), "FI_NET_IFACE") == 0) {
            /* the user named net's interface: no falling back to another
             * provider on another interface */
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: provider auto: net has no domain on interface '%s' (named by "
                    "FI_NET_IFACE)", ifc);
            return RMACOLL_ERR_NO_DEVICE;
        }
        if (ok) {
            OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: provider auto: %s%s%s", cand,
                    ifc ? " on " : "", ifc ? ifc : "");
            *prov = cand;
            *iface = ifc;
            return RMACOLL_SUCCESS;
        }
    }
    const char *ifc = *iface ? *iface : ofi_env_iface(ofi_auto_candidates[n - 1]);
    OFI_LOG(tp, RMACOLL_LOG_ERROR,
            "ofi: provider auto: none of net, tcp, tcp;ofi_rxm offers rdm rma write with "
            "remote cq data%s%s%s; the last one's own error follows (set ofi.provider)",
            ifc ? " on interface '" : "", ifc ? ifc : "", ifc ? "'" : "");
    *prov = ofi_auto_candidates[n - 1];     /* its own errors say what is missing */
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t ofi_select(rmacoll_transport_t *tp, struct fi_info **out)
{
    const rmacoll_config_t *cfg = tp->env.config;
    const char *prov = (cfg && cfg->ofi_provider[0]) ? cfg->ofi_provider
                                                      : OFI_DEFAULT_PROVIDER;
    const char *iface = (cfg && cfg->ofi_iface[0]) ? cfg->ofi_iface : NULL;
    struct fi_info *list = NULL, *pick = NULL;
    char avail[512];
    rmacoll_status_t st;

    if (strcmp(prov, "auto") == 0) {
        st = ofi_resolve_auto(tp, &prov, &iface);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    if (iface == NULL) {
        iface = ofi_env_iface(prov);
    }

#ifdef RMACOLL_OFI_CUDA
    /* device memory registered directly when the provider offers FI_HMEM;
     * asked only by a thread that uses a GPU (a host-only process keeps
     * the plain hints) */
    char dpath[32] = "";

    /* staged device calls never hand device memory to the provider; and
     * FI_HMEM costs host memory too: shm opened with it turns off CMA and
     * moves every host buffer through its SAR bounce buffers */
    if (tp->env.config_get == NULL || tp->env.config == NULL ||
        tp->env.config_get(tp->env.config, "transports.device_inter_node", dpath,
                           sizeof(dpath)) != RMACOLL_SUCCESS) {
        dpath[0] = '\0';
    }
    if (strcmp(dpath, "staged") == 0) {
        snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "not asked of provider %s: "
                 "transports.device_inter_node = staged", prov);
    } else if (!rmacoll__cu_context_current()) {
        snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "no CUDA context on the thread "
                 "that opened provider %s", prov);
    } else {
        st = ofi_getinfo(tp, prov, 1, &list);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        pick = ofi_pick(list, prov, iface, 1);
        if (pick != NULL && pick->domain_attr->cq_data_size >= 4) {
            tp->hmem = 1; /* confirmed by ofi_hmem_probe once the domain is open */
        } else {
            snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "provider %s lacks FI_HMEM",
                     prov);
            pick = NULL;
            if (list != NULL) {
                fi_freeinfo(list);
                list = NULL;
            }
        }
    }
#else
    snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "rmacoll built without CUDA");
#endif
    if (pick == NULL) {
        st = ofi_getinfo(tp, prov, 0, &list);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        pick = ofi_pick(list, prov, iface, 0);
    }
    if (pick == NULL) {
        int present = ofi_list_providers(prov, FI_EP_RDM, avail, sizeof(avail));
        if (list) {
            fi_freeinfo(list);
        }
        if (present) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: provider '%s' lacks rdm rma write with remote cq data "
                    "(caps FI_RMA|FI_WRITE|FI_REMOTE_WRITE, no FI_RX_CQ_DATA, "
                    "no FI_MR_RAW)", prov);
            return RMACOLL_ERR_UNSUPPORTED;
        }
        /* connected (msg) endpoints only here: tcp before libfabric 1.18 */
        if (ofi_list_providers(prov, FI_EP_MSG, NULL, 0)) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: provider '%s' offers only connected (msg) endpoints in this "
                    "libfabric (%u.%u), not the rdm ones the transport needs: name "
                    "'%s;ofi_rxm' (rdm over it)%s (rdm providers here: %s)", prov,
                    FI_MAJOR(fi_version()), FI_MINOR(fi_version()), prov,
                    strcmp(prov, "tcp") == 0 ? ", or 'net' / 'auto'" : "",
                    avail[0] ? avail : "none");
            return RMACOLL_ERR_NO_DEVICE;
        }
        OFI_LOG(tp, RMACOLL_LOG_ERROR,
                "ofi: provider '%s' not found (rdm providers here: %s)", prov,
                avail[0] ? avail : "none");
        return RMACOLL_ERR_NO_DEVICE;
    }
    if (iface != NULL && strcmp(pick->domain_attr->name, iface) != 0) {
        if (strstr(prov, "tcp") || strstr(prov, "sockets") || strcmp(prov, "net") == 0) {
            const char *var = cfg && cfg->ofi_iface[0] ? NULL : ofi_env_iface_var(prov);
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: provider '%s' has no domain on interface '%s'%s%s%s", prov, iface,
                    var ? " (named by " : "", var ? var : "", var ? ")" : "");
            fi_freeinfo(list);
            return RMACOLL_ERR_NO_DEVICE;
        }
        OFI_LOG(tp, RMACOLL_LOG_INFO,
                "ofi: interface '%s' ignored by provider '%s' (domain '%s')", iface,
                prov, pick->domain_attr->name);
    }
    if (pick->domain_attr->cq_data_size < 4) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR,
                "ofi: provider '%s' carries %zu bytes of remote cq data, signals need 4",
                prov, pick->domain_attr->cq_data_size);
        fi_freeinfo(list);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if ((pick->caps & (FI_RMA | FI_WRITE | FI_REMOTE_WRITE)) !=
        (FI_RMA | FI_WRITE | FI_REMOTE_WRITE)) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: provider '%s' lacks rma write caps", prov);
        fi_freeinfo(list);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    *out = fi_dupinfo(pick);
    fi_freeinfo(list);
    if (*out == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    /* shm names its region after the pid ("fi_shm://PID"); a killed
     * process leaves that region behind, and a later process that gets the
     * same pid fails fi_enable with EBUSY. A name with a random part avoids
     * the clash. */
    if (strcmp((*out)->fabric_attr->prov_name, "shm") == 0 &&
        (*out)->addr_format == FI_ADDR_STR) {
        tp->shm_named = 1;
        ofi_sweep_stale_shm(tp);
        char name[64];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(name, sizeof(name), "fi_shm://rmacoll-%d-%lx-%d", (int)getpid(),
                 (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)), tp->env.rank);
        free((*out)->src_addr);
        (*out)->src_addr = strdup(name);
        (*out)->src_addrlen = (*out)->src_addr ? strlen(name) + 1 : 0;
    }
    return RMACOLL_SUCCESS;
}

/* ---- init / finalize ---- */

static void ofi_close_all(rmacoll_transport_t *tp)
{
    for (int i = 0; i < OFI_MR_CACHE_MAX; i++) {
        if (tp->mrs[i].used && !tp->mrs[i].revoked) {
            fi_close(&tp->mrs[i].mr->fid);
            tp->mrs[i].used = 0;
        }
    }
    if (tp->cut_off && tp->ep) {
        /* mem_revoke stopped progress with a write possibly half received:
         * closing the endpoint then crashed inside libfabric 1.17's rxm
         * (test_safety test_late_write_net), and driving progress to
         * settle it would land the write. The endpoint and what it hangs
         * on are left open, never progressed again, until the process
         * exits: a broken communicator's price for no late write. */
        OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: rank %d: the endpoint of a revoked instance "
                "stays open (not progressed) until exit", tp->env.rank);
        tp->ep = NULL;
        tp->av = NULL;
        tp->cq = NULL;
        tp->domain = NULL;
        tp->fabric = NULL;
    }
    if (tp->ep) {
        fi_close(&tp->ep->fid);
    }
    if (tp->av) {
        fi_close(&tp->av->fid);
    }
    if (tp->cq) {
        fi_close(&tp->cq->fid);
    }
    if (tp->domain) {
        fi_close(&tp->domain->fid);
    }
    if (tp->fabric) {
        fi_close(&tp->fabric->fid);
    }
    if (tp->info) {
        fi_freeinfo(tp->info);
    }
    free(tp->peers);
    free(tp->active);
    free(tp->ops);
    free(tp->qputs);
    free(tp);
}

#define OFI_CHECK(tp, call, what)                                             \
    do {                                                                      \
        int ret_ = (call);                                                    \
        if (ret_ != 0) {                                                      \
            OFI_LOG((tp), RMACOLL_LOG_ERROR, "ofi: %s failed on provider '%s': %s", \
                    (what), (tp)->info->fabric_attr->prov_name,               \
                    fi_strerror(ret_ < 0 ? -ret_ : ret_));                    \
            return RMACOLL_ERR_TRANSPORT;                                     \
        }                                                                     \
    } while (0)

/* Opens fabric, domain, CQ, AV and endpoint; local, not collective. */
/* "65536", "64K", "64KiB", "1M", "1MiB", "1G": bytes; 0 for anything else
 * (or an overflow). */
static uint64_t ofi_parse_bytes(const char *text)
{
    char *end = NULL;
    unsigned long long v;
    uint64_t mul = 1;

    if (text[0] < '0' || text[0] > '9') {
        return 0;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text) {
        return 0;
    }
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (mul > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)) {
        end += strlen(end);
    } else if (mul == 1 && strcmp(end, "B") == 0) {
        end++;
    }
    if (*end != '\0' || v > UINT64_MAX / mul) {
        return 0;
    }
    return (uint64_t)v * mul;
}

static rmacoll_status_t ofi_open(rmacoll_transport_t *tp, char *name, size_t *namelen)
{
    struct fi_info *info = tp->info;
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = (size_t)tp->env.nranks};
    const char *env_piece = getenv("RMACOLL_OFI_MAX_MSG_SIZE");

    tp->mr_mode = info->domain_attr->mr_mode;
    tp->zero_inject = 1;
    /* Pinning providers must not keep registrations the core dropped: the
     * user may free the memory; their own caches handle reuse safely. */
    tp->keep_unused_mr = !(tp->mr_mode & (FI_MR_LOCAL | FI_MR_ALLOCATED));
    tp->max_piece = info->ep_attr->max_msg_size;
    if (tp->max_piece == 0 || tp->max_piece > (1ull << 30)) {
        tp->max_piece = 1ull << 30;
    }
    if (env_piece != NULL) {
        uint64_t v = ofi_parse_bytes(env_piece);
        if (v == 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: RMACOLL_OFI_MAX_MSG_SIZE=%s: not a size in bytes above 0 (e.g. "
                    "65536, 64K, 1MiB)", env_piece);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (v < tp->max_piece) {
            tp->max_piece = v;
        }
    }
    tp->nops = info->tx_attr->size ? info->tx_attr->size : 256;
    if (tp->nops > OFI_OPS_MAX) {
        tp->nops = OFI_OPS_MAX;
    }

    OFI_CHECK(tp, fi_fabric(info->fabric_attr, &tp->fabric, NULL), "fi_fabric");
    OFI_CHECK(tp, fi_domain(tp->fabric, info, &tp->domain, NULL), "fi_domain");
    OFI_CHECK(tp, fi_cq_open(tp->domain, &cq_attr, &tp->cq, NULL), "fi_cq_open");
    if (info->domain_attr->av_type != FI_AV_UNSPEC) {
        av_attr.type = info->domain_attr->av_type;
    }
    OFI_CHECK(tp, fi_av_open(tp->domain, &av_attr, &tp->av, NULL), "fi_av_open");
    OFI_CHECK(tp, fi_endpoint(tp->domain, info, &tp->ep, NULL), "fi_endpoint");
    OFI_CHECK(tp, fi_ep_bind(tp->ep, &tp->av->fid, 0), "fi_ep_bind(av)");
    OFI_CHECK(tp, fi_ep_bind(tp->ep, &tp->cq->fid, FI_TRANSMIT | FI_RECV),
              "fi_ep_bind(cq)");
    OFI_CHECK(tp, fi_enable(tp->ep), "fi_enable");
    OFI_CHECK(tp, fi_getname(&tp->ep->fid, name, namelen), "fi_getname");

    tp->peers = calloc((size_t)tp->env.nranks, sizeof(*tp->peers));
    tp->active = calloc((size_t)tp->env.nranks, sizeof(*tp->active));
    tp->ops = calloc(tp->nops, sizeof(*tp->ops));
    tp->qputs = calloc(OFI_QUEUE_MAX, sizeof(*tp->qputs));
    if (!tp->peers || !tp->active || !tp->ops || !tp->qputs) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < tp->nops; i++) {
        tp->ops[i].next = tp->free_ops;
        tp->free_ops = &tp->ops[i];
    }
    for (size_t i = 0; i < OFI_QUEUE_MAX; i++) {
        tp->qputs[i].next = tp->free_qputs;
        tp->free_qputs = &tp->qputs[i];
    }
    return RMACOLL_SUCCESS;
}

static int ofi_mr_open(rmacoll_transport_t *tp, void *addr, size_t bytes,
                       rmacoll_memtype_t type, int device, struct fid_mr **mr);

/* FI_HMEM in the provider's caps does not say which device interfaces its
 * libfabric was built with (Debian's shm reports FI_HMEM without CUDA):
 * one small device buffer registered with FI_HMEM_CUDA tells. */
static void ofi_hmem_probe(rmacoll_transport_t *tp)
{
#ifdef RMACOLL_OFI_CUDA
    const char *prov = tp->info->fabric_attr->prov_name;

    if (tp->hmem) {
        int device = -1, ret;
        struct fid_mr *mr = NULL;
        void *p = rmacoll__cu_probe_alloc(4096, &device);

        if (p == NULL) {
            tp->hmem = 0;
            snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "provider %s: no device buffer "
                     "to probe FI_HMEM with", prov);
            return;
        }
        ret = ofi_mr_open(tp, p, 4096, RMACOLL_MEM_CUDA, device, &mr);
        if (ret == 0) {
            fi_close(&mr->fid);
            tp->cu_ctx = rmacoll__cu_context_get();
            snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "FI_HMEM registration "
                     "(provider %s)", prov);
        } else {
            tp->hmem = 0;
            snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "provider %s lacks FI_HMEM for "
                     "cuda memory (fi_mr_regattr: %s)", prov, fi_strerror(-ret));
        }
        rmacoll__cu_probe_free(p);
    }
#endif
}

typedef struct ofi_hello {
    int32_t status;
    uint32_t namelen;
    char prov[32];              /* the provider chosen (ofi.provider auto may differ) */
} ofi_hello_t;

static rmacoll_status_t ofi_init(const rmacoll_transport_env_t *env,
                                 rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    rmacoll_status_t st, gst;
    char name[OFI_NAME_MAX];
    size_t namelen = sizeof(name);
    ofi_hello_t hello, *hellos = NULL;
    char *names = NULL;
    uint32_t maxlen = 0;
    int n = env->nranks;
    int force_delivery = 0;

    if (env->allgather == NULL || n < 1 || env->rank < 0 || env->rank >= n) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    memcpy(&tp->env, env, env->struct_size && env->struct_size < sizeof(tp->env)
                              ? env->struct_size : sizeof(tp->env));
    tp->err_peer = -1;
    tp->next_key = 1;
    tp->timeout_ns = (env->config && env->config->timeout_ms ? env->config->timeout_ms
                                                              : 30000) * 1000000ull;

    if (env->struct_size >= offsetof(rmacoll_transport_env_t, config_get) +
                                sizeof(env->config_get) &&
        env->config_get != NULL && env->config != NULL) {
        char v[16];
        if (env->config_get(env->config, "ofi.hmem_device_only", v, sizeof(v)) ==
                RMACOLL_SUCCESS &&
            strcmp(v, "true") == 0) {
            tp->hmem_flags = FI_HMEM_DEVICE_ONLY;
        }
        if (env->config_get(env->config, "ofi.delivery_complete", v, sizeof(v)) ==
                RMACOLL_SUCCESS &&
            strcmp(v, "true") == 0) {
            force_delivery = 1;
        }
    }
    st = ofi_select(tp, &tp->info);
    if (st == RMACOLL_SUCCESS) {
        st = ofi_open(tp, name, &namelen);
    }
    if (st == RMACOLL_SUCCESS) {
        ofi_hmem_probe(tp);
        tp->ordered = !force_delivery && !tp->hmem &&
                      (tp->info->tx_attr->msg_order & FI_ORDER_WAW) &&
                      tp->info->ep_attr->max_order_waw_size >= tp->max_piece;
    }
    /* Collective from here on even after a local failure: every rank
     * learns whether any rank failed, and nobody is left in an allgather. */
    memset(&hello, 0, sizeof(hello));
    hello.status = (int32_t)st;
    hello.namelen = st == RMACOLL_SUCCESS ? (uint32_t)namelen : 0;
    if (st == RMACOLL_SUCCESS) {
        snprintf(hello.prov, sizeof(hello.prov), "%s", tp->info->fabric_attr->prov_name);
    }
    hellos = calloc((size_t)n, sizeof(*hellos));
    if (hellos == NULL) {
        ofi_close_all(tp);
        return RMACOLL_ERR_NO_MEMORY;   /* peers then fail in their allgather */
    }
    gst = env->allgather(env->oob_ctx, &hello, hellos, sizeof(hello));
    if (gst != RMACOLL_SUCCESS) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: address allgather failed: %s",
                rmacoll_status_string(gst));
        st = st != RMACOLL_SUCCESS ? st : gst;
        goto fail;
    }
    for (int r = 0; r < n; r++) {
        if (hellos[r].status != RMACOLL_SUCCESS) {
            if (st == RMACOLL_SUCCESS) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: init failed on rank %d: %s", r,
                        rmacoll_status_string((rmacoll_status_t)hellos[r].status));
                st = RMACOLL_ERR_PEER;
                tp->err_peer = r;
            }
        }
        if (hellos[r].namelen > maxlen) {
            maxlen = hellos[r].namelen;
        }
    }
    for (int r = 0; r < n && st == RMACOLL_SUCCESS; r++) {
        hellos[r].prov[sizeof(hellos[r].prov) - 1] = '\0';
        if (strcmp(hellos[r].prov, hello.prov) != 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: rank %d opened provider '%s', this rank (%d) '%s': every rank "
                    "must use the same one (set ofi.provider)", r, hellos[r].prov,
                    env->rank, hello.prov);
            st = RMACOLL_ERR_UNSUPPORTED;
            tp->err_peer = r;
        }
    }
    if (st != RMACOLL_SUCCESS) {
        goto fail;
    }
    names = calloc((size_t)n, maxlen);
    if (names == NULL) {
        st = RMACOLL_ERR_NO_MEMORY;
        goto fail;
    }
    memset(name + namelen, 0, sizeof(name) - namelen);
    gst = env->allgather(env->oob_ctx, name, names, maxlen);
    if (gst != RMACOLL_SUCCESS) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: name allgather failed: %s",
                rmacoll_status_string(gst));
        st = gst;
        goto fail;
    }
    /* Every rank is inserted (cheap, and keeps fi_addr = rank for AV_TABLE);
     * only the peers the core names are ever written to. */
    for (int r = 0; r < n; r++) {
        int ret = fi_av_insert(tp->av, names + (size_t)r * maxlen, 1,
                               &tp->peers[r].addr, 0, NULL);
        if (ret != 1) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: fi_av_insert of rank %d failed on provider '%s': %s", r,
                    tp->info->fabric_attr->prov_name,
                    fi_strerror(ret < 0 ? -ret : FI_EINVAL));
            st = RMACOLL_ERR_TRANSPORT;
            tp->err_peer = r;
            goto fail;
        }
    }
    OFI_LOG(tp, RMACOLL_LOG_INFO,
            "ofi: rank %d on provider '%s' domain '%s' (mr_mode 0x%" PRIx64
            ", max piece %" PRIu64 " bytes, %zu ops, %s, %s)",
            env->rank, tp->info->fabric_attr->prov_name, tp->info->domain_attr->name,
            tp->mr_mode, tp->max_piece, tp->nops,
            tp->ordered ? "ordered writes: FI_INJECT_COMPLETE"
                        : "unordered or forced: FI_DELIVERY_COMPLETE, signals wait",
            tp->hmem ? "FI_HMEM: cuda memory registered" : "no FI_HMEM");
    free(hellos);
    free(names);
    *tpp = tp;
    return RMACOLL_SUCCESS;

fail:
    free(hellos);
    free(names);
    ofi_close_all(tp);
    return st;
}

static void ofi_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        OFI_CU_BIND(tp);
        if (tp->ops_busy != 0) {
            OFI_LOG(tp, RMACOLL_LOG_WARN, "ofi: finalize with %zu puts in flight",
                    tp->ops_busy);
        }
        if (tp->shm_named) {
            ofi_sweep_stale_shm(tp); /* a dead peer's region (ours is open) */
        }
        ofi_close_all(tp);
    }
}

/* ---- memory registration (cache keyed by address range) ---- */

/* Device ordinal and CUDA buffer id of a device range to register. */
static rmacoll_status_t ofi_device_of(rmacoll_transport_t *tp, const void *addr,
                                      size_t bytes, int *device, uint64_t *buffer_id)
{
    if (!tp->hmem) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: cannot register %zu bytes of cuda memory at "
                "%p: provider '%s' was opened without FI_HMEM", bytes, addr,
                tp->info->fabric_attr->prov_name);
        return RMACOLL_ERR_UNSUPPORTED;
    }
#ifdef RMACOLL_OFI_CUDA
    if (rmacoll__cu_pointer_info(addr, device, buffer_id) == 0) {
        return RMACOLL_SUCCESS;
    }
#endif
    OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: %zu bytes at %p registered as cuda memory are "
            "not device memory", bytes, addr);
    return RMACOLL_ERR_INVALID_ARG;
}

/* Opens a registration: fi_mr_reg for host memory, fi_mr_regattr with
 * iface FI_HMEM_CUDA on `device` for device memory. */
static int ofi_mr_open(rmacoll_transport_t *tp, void *addr, size_t bytes,
                       rmacoll_memtype_t type, int device, struct fid_mr **mr)
{
    uint64_t key = (tp->mr_mode & FI_MR_PROV_KEY) ? 0 : tp->next_key++;
    struct iovec iov = {.iov_base = addr, .iov_len = bytes};
    struct fi_mr_attr attr;

    if (type == RMACOLL_MEM_HOST) {
        return fi_mr_reg(tp->domain, addr, bytes, FI_REMOTE_WRITE | FI_WRITE, 0, key, 0,
                         mr, NULL);
    }
    memset(&attr, 0, sizeof(attr));
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_REMOTE_WRITE | FI_WRITE;
    attr.requested_key = key;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    /* ofi.hmem_device_only: FI_HMEM_DEVICE_ONLY (device memory proper,
     * cudaMalloc, never managed: ofi_device_of) lets shm move it GPU to
     * GPU over CUDA IPC instead of bouncing it through host memory (its
     * SAR protocol); off by default: with it, shm puts stalled on the GPU
     * machine (docs/transport-ofi.md) */
    return fi_mr_regattr(tp->domain, &attr, tp->hmem_flags, mr);
}

static void ofi_fill_rkey(const struct rmacoll_mem *m, const void *addr,
                          size_t bytes, int virt, rmacoll_rkey_t *rkey)
{
    memset(rkey, 0, sizeof(*rkey));
    rkey->addr = virt ? (uint64_t)(uintptr_t)addr
                      : (uint64_t)((const char *)addr - m->addr);
    rkey->bytes = bytes;
    rkey->len = sizeof(m->key);
    memcpy(rkey->key, &m->key, sizeof(m->key));
}

static rmacoll_status_t ofi_mem_register(rmacoll_transport_t *tp, void *addr,
                                         size_t bytes, rmacoll_memtype_t type,
                                         rmacoll_mem_t **mem, rmacoll_rkey_t *rkey)
{
    struct rmacoll_mem *m = NULL, *lru = NULL, *slot = NULL;
    char *a = addr;
    int virt = (tp->mr_mode & FI_MR_VIRT_ADDR) != 0;
    int device = -1;
    uint64_t buffer_id = 0;
    int ret;

    if (addr == NULL || bytes == 0 || mem == NULL ||
        (type != RMACOLL_MEM_HOST && type != RMACOLL_MEM_CUDA)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    OFI_CU_BIND(tp);
    if (type == RMACOLL_MEM_CUDA) {
        rmacoll_status_t st = ofi_device_of(tp, addr, bytes, &device, &buffer_id);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    tp->use_clock++;
    for (int i = 0; i < OFI_MR_CACHE_MAX; i++) {
        struct rmacoll_mem *e = &tp->mrs[i];
        if (!e->used) {
            if (slot == NULL) {
                slot = e;
            }
            continue;
        }
        if (e->revoked) {
            continue; /* never handed out again; freed at refs 0 */
        }
        if (e->type == type && e->addr <= a && (size_t)(a - e->addr) + bytes <= e->bytes) {
            if (type == RMACOLL_MEM_CUDA && e->buffer_id != buffer_id) {
                /* the range was freed and allocated again: a new buffer */
                if (e->refs == 0) {
                    OFI_LOG(tp, RMACOLL_LOG_DEBUG, "ofi: cached registration of %zu bytes "
                            "at %p is stale (cuda buffer id %" PRIu64 ", now %" PRIu64
                            "); registering again", e->bytes, (void *)e->addr,
                            e->buffer_id, buffer_id);
                    fi_close(&e->mr->fid);
                    e->used = 0;
                    if (slot == NULL) {
                        slot = e;
                    }
                }
                continue;
            }
            m = e;
            break;
        }
        if (e->refs == 0 && (lru == NULL || e->last_use < lru->last_use)) {
            lru = e;
        }
    }
    if (m == NULL) {
        if (slot == NULL) {
            if (lru == NULL) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR,
                        "ofi: registration cache full (%d regions in use), cannot "
                        "register %zu bytes", OFI_MR_CACHE_MAX, bytes);
                return RMACOLL_ERR_NO_MEMORY;
            }
            fi_close(&lru->mr->fid);
            lru->used = 0;
            slot = lru;
        }
        m = slot;
        memset(m, 0, sizeof(*m));
        ret = ofi_mr_open(tp, addr, bytes, type, device, &m->mr);
        if (ret == 0 && type == RMACOLL_MEM_CUDA && !(tp->hmem_flags & FI_HMEM_DEVICE_ONLY)) {
            tp->dev_fence = 1; /* sticky: cheap, and a peer may still write it */
        }
        if (ret != 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: %s of %zu bytes of %s memory at %p "
                    "failed: %s", type == RMACOLL_MEM_CUDA ? "fi_mr_regattr" : "fi_mr_reg",
                    bytes, type == RMACOLL_MEM_CUDA ? "cuda" : "host", addr,
                    fi_strerror(-ret));
            return RMACOLL_ERR_TRANSPORT;
        }
        if (tp->mr_mode & FI_MR_ENDPOINT) {
            ret = fi_mr_bind(m->mr, &tp->ep->fid, 0);
            if (ret == 0) {
                ret = fi_mr_enable(m->mr);
            }
            if (ret != 0) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR,
                        "ofi: binding the registration of %zu bytes failed: %s", bytes,
                        fi_strerror(-ret));
                fi_close(&m->mr->fid);
                return RMACOLL_ERR_TRANSPORT;
            }
        }
        m->key = fi_mr_key(m->mr);
        if (m->key == FI_KEY_NOTAVAIL) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: provider gave no 64-bit key for %zu bytes (FI_MR_RAW unsupported)",
                    bytes);
            fi_close(&m->mr->fid);
            return RMACOLL_ERR_UNSUPPORTED;
        }
        m->desc = fi_mr_desc(m->mr);
        m->addr = a;
        m->bytes = bytes;
        m->type = type;
        m->buffer_id = buffer_id;
        m->used = 1;
        if (type == RMACOLL_MEM_CUDA) {
            OFI_LOG(tp, RMACOLL_LOG_DEBUG, "ofi: registered %zu bytes of cuda memory at %p "
                    "(device %d, buffer id %" PRIu64 ")", bytes, addr, device, buffer_id);
        }
    }
    m->refs++;
    m->last_use = tp->use_clock;
    if (rkey != NULL) {
        ofi_fill_rkey(m, addr, bytes, virt, rkey);
    }
    *mem = m;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t ofi_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    if (mem == NULL || mem < &tp->mrs[0] || mem >= &tp->mrs[OFI_MR_CACHE_MAX] ||
        !mem->used || mem->refs == 0) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    OFI_CU_BIND(tp);
    /* device registrations whose buffer id is known stay cached: the id
     * catches a range freed and allocated again */
    if (--mem->refs == 0 &&
        (mem->revoked || (!tp->keep_unused_mr &&
                          !(mem->type == RMACOLL_MEM_CUDA && mem->buffer_id != 0)))) {
        if (!mem->revoked) {
            fi_close(&mem->mr->fid);
        }
        mem->used = 0;
        mem->revoked = 0;
    }
    return RMACOLL_SUCCESS;
}

/* Revokes mem (the transport interface's mem_revoke). Closing the MR stops
 * new writes to it, but a provider that copies on the target keeps writing
 * a message it already matched to the MR: libfabric 1.17 tcp;ofi_rxm
 * completed a 64 MiB write, all of it landing, after the target had closed
 * the MR halfway through (docs/transport-ofi.md). Those providers copy
 * only while this process drives progress, so the instance also stops
 * driving it (cut off): nothing is read from the network any more, and a
 * writer's puts stall or fail at the writer. Closing the endpoint instead
 * would cut the connections too, but rxm's endpoint close crashed when a
 * write was in flight both ways. The core revokes only when the
 * communicator broke, so nothing else is lost; finalize closes the rest. */
static rmacoll_status_t ofi_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    int ret;

    if (mem == NULL || mem < &tp->mrs[0] || mem >= &tp->mrs[OFI_MR_CACHE_MAX] ||
        !mem->used) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp->cut_off = 1;
    ofi_fail(tp, RMACOLL_ERR_PEER, -1);
    if (!mem->revoked) {
        ret = fi_close(&mem->mr->fid);
        if (ret != 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: closing the registration of %zu bytes "
                    "at %p failed: %s", mem->bytes, (void *)mem->addr, fi_strerror(-ret));
            return RMACOLL_ERR_TRANSPORT;
        }
        mem->revoked = 1;
        mem->mr = NULL;
        mem->desc = NULL;
    }
    OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: rank %d: registration of %zu bytes revoked, "
            "progress stopped: no remote write lands here any more", tp->env.rank,
            mem->bytes);
    return RMACOLL_SUCCESS;
}

/* ---- puts ---- */

/* Issues what it can of peer p's queue, in order. */
static rmacoll_status_t ofi_drain_peer(rmacoll_transport_t *tp, int p)
{
    ofi_peer_t *peer = &tp->peers[p];
    ofi_qput_t *q;
    int issued = 0;

    while ((q = peer->head) != NULL) {
        uint64_t left = q->bytes - q->done;
        uint64_t len = left < tp->max_piece ? left : tp->max_piece;
        int last = len == left;
        int sig = last && q->sig_index != RMACOLL_NO_SIGNAL;
        ofi_op_t *op = tp->free_ops;
        ssize_t ret;
        struct iovec iov;
        void *desc = q->desc;
        struct fi_rma_iov rma;
        struct fi_msg_rma msg;

        if ((sig && !tp->ordered && peer->inflight > 0) || (op == NULL && len > 0)) {
            break;  /* signal waits for earlier pieces to be delivered */
        }
        if (len == 0 && tp->zero_inject) {
            /* Signal-only: shm never completes a zero-length write with
             * FI_DELIVERY_COMPLETE, so inject it: no source, no completion. */
            ret = fi_inject_writedata(tp->ep, &tp->zero_src, 0, q->sig_index, peer->addr,
                                      q->dst_addr, q->key);
            if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) {
                OFI_LOG(tp, RMACOLL_LOG_INFO,
                        "ofi: provider '%s' cannot inject; signal-only puts use writes",
                        tp->info->fabric_attr->prov_name);
                tp->zero_inject = 0;
                continue;
            }
            if (ret == -FI_EAGAIN) {
                OFI_LOG(tp, RMACOLL_LOG_TRACE, "ofi: back-pressure to peer %d (%zu in flight)",
                        p, tp->ops_busy);
                break;
            }
            if (ret != 0) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: signal-only put to peer %d failed: %s",
                        p, fi_strerror((int)-ret));
                return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, p);
            }
            issued = 1;
            peer->head = q->next;
            if (peer->head == NULL) {
                peer->tail = NULL;
            }
            q->next = tp->free_qputs;
            tp->free_qputs = q;
            tp->nqueued--;
            continue;
        }
        if (op == NULL) {
            break;
        }
        iov.iov_base = (void *)(uintptr_t)(q->src ? q->src + q->done : NULL);
        iov.iov_len = len;
        rma.addr = q->dst_addr + q->done;
        rma.len = len;
        rma.key = q->key;
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.desc = &desc;
        msg.iov_count = 1;
        msg.addr = peer->addr;
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &op->fctx;
        msg.data = sig ? q->sig_index : 0;
        ret = fi_writemsg(tp->ep, &msg,
                          FI_COMPLETION |
                              (tp->ordered ? FI_INJECT_COMPLETE : FI_DELIVERY_COMPLETE) |
                              (sig ? FI_REMOTE_CQ_DATA : 0));
        if (ret == -FI_EAGAIN) {
            OFI_LOG(tp, RMACOLL_LOG_TRACE, "ofi: back-pressure to peer %d (%zu in flight)",
                    p, tp->ops_busy);
            break;
        }
        if (ret != 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: write of %" PRIu64 " bytes to peer %d failed: %s", len, p,
                    fi_strerror((int)-ret));
            return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, p);
        }
        tp->free_ops = op->next;
        op->peer = p;
        op->bytes = len;
        tp->ops_busy++;
        if (peer->inflight++ == 0) {
            peer->inflight_since_ns = ofi_now_ns();
        }
        issued = 1;
        q->done += len;
        if (last) {
            peer->head = q->next;
            if (peer->head == NULL) {
                peer->tail = NULL;
            }
            q->next = tp->free_qputs;
            tp->free_qputs = q;
            tp->nqueued--;
        }
    }
    if (peer->head == NULL || issued) {
        peer->stall_since_ns = 0;
    } else {
        uint64_t now = ofi_now_ns();
        if (peer->stall_since_ns == 0) {
            peer->stall_since_ns = now;
        } else if (now - peer->stall_since_ns > tp->timeout_ns) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: puts to peer %d stalled for %" PRIu64 " ms (%u in flight, "
                    "%" PRIu64 " bytes waiting)", p,
                    (now - peer->stall_since_ns) / 1000000, peer->inflight,
                    peer->head->bytes - peer->head->done);
            return ofi_fail(tp, RMACOLL_ERR_TIMEOUT, p);
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t ofi_cq_error(rmacoll_transport_t *tp)
{
    struct fi_cq_err_entry err;
    char buf[256];
    const char *pstr;
    int peer = -1;
    ssize_t ret;

    memset(&err, 0, sizeof(err));
    ret = fi_cq_readerr(tp->cq, &err, 0);
    if (ret < 0) {
        if (ret == -FI_EAGAIN) {
            return RMACOLL_SUCCESS;
        }
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: fi_cq_readerr failed: %s",
                fi_strerror((int)-ret));
        return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
    }
    if (err.op_context != NULL && !(err.flags & FI_REMOTE_WRITE)) {
        ofi_op_t *op = err.op_context;
        peer = op->peer;
        tp->peers[peer].inflight--;
        tp->ops_busy--;
        op->next = tp->free_ops;
        tp->free_ops = op;
    }
    pstr = fi_cq_strerror(tp->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    OFI_LOG(tp, RMACOLL_LOG_ERROR,
            "ofi: put to peer %d failed on provider '%s': %s (provider: %s)", peer,
            tp->info->fabric_attr->prov_name, fi_strerror(err.err),
            pstr ? pstr : "?");
    return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, peer);
}

static rmacoll_status_t ofi_progress(rmacoll_transport_t *tp)
{
    struct fi_cq_data_entry ent[OFI_CQ_BATCH];

    OFI_CU_BIND(tp);

    if (tp->cut_off) {
        return tp->failed; /* mem_revoke: nothing is read from the network */
    }
    for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
        ssize_t n = fi_cq_read(tp->cq, ent, OFI_CQ_BATCH);

        if (n == -FI_EAGAIN) {
            break;
        }
        if (n == -FI_EAVAIL) {
            ofi_cq_error(tp);
            continue;
        }
        if (n < 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: fi_cq_read failed: %s",
                    fi_strerror((int)-n));
            return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
        }
#ifdef RMACOLL_OFI_CUDA
        /* shm's SAR protocol lands device memory with a cudaMemcpy from its
         * (pageable) bounce buffers, which may still be in DMA when the
         * write's completion arrives: a relay forward on the copy engine's
         * stream then read the old bytes (seen on the GPU machine). Before
         * a signal of this batch is raised, that copy is waited for. */
        for (ssize_t i = 0; i < n && tp->dev_fence; i++) {
            if ((ent[i].flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) ==
                (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) {
                if (rmacoll__cu_legacy_fence() != 0) {
                    OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: waiting for the provider's copies "
                            "into device memory failed");
                    return ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
                }
                break;
            }
        }
#endif
        for (ssize_t i = 0; i < n; i++) {
            /* remote events carry FI_REMOTE_WRITE; sockets also sets
             * FI_REMOTE_CQ_DATA on the writer's own completion */
            if ((ent[i].flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) ==
                (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) {
                uint32_t idx = (uint32_t)ent[i].data;
                if (idx >= tp->env.nsignals) {
                    OFI_LOG(tp, RMACOLL_LOG_ERROR,
                            "ofi: incoming signal index %u out of range (%u words)", idx,
                            tp->env.nsignals);
                    ofi_fail(tp, RMACOLL_ERR_TRANSPORT, -1);
                    continue;
                }
                __atomic_fetch_add(&tp->env.signals[idx], 1, __ATOMIC_RELEASE);
            } else if (ent[i].op_context != NULL) {
                ofi_op_t *op = ent[i].op_context;
                tp->peers[op->peer].stall_since_ns = 0;   /* it moves */
                tp->peers[op->peer].inflight--;
                tp->peers[op->peer].inflight_since_ns = ofi_now_ns();
                tp->ops_busy--;
                op->next = tp->free_ops;
                tp->free_ops = op;
            }
        }
        if (n < OFI_CQ_BATCH) {
            break;
        }
    }
    if (tp->failed != RMACOLL_SUCCESS) {
        return tp->failed;
    }
    if (tp->ops_busy > 0) {
        /* issued puts whose completion (the target's delivery ack) does not
         * come: the target has stopped progressing. Named here, so that a
         * caller's flush fails naming it (checked every timeout / 16). */
        uint64_t now = ofi_now_ns();
        if (now >= tp->scan_at_ns) {
            tp->scan_at_ns = now + tp->timeout_ns / 16;
            for (int p = 0; p < tp->env.nranks; p++) {
                ofi_peer_t *pe = &tp->peers[p];
                if (pe->inflight > 0 && now - pe->inflight_since_ns > tp->timeout_ns) {
                    OFI_LOG(tp, RMACOLL_LOG_ERROR,
                            "ofi: %u puts to peer %d not completed for %" PRIu64 " ms "
                            "(the peer does not progress)", pe->inflight, p,
                            (now - pe->inflight_since_ns) / 1000000);
                    return ofi_fail(tp, RMACOLL_ERR_TIMEOUT, p);
                }
            }
        }
    }
    for (int i = 0; i < tp->nactive;) {
        int p = tp->active[i];
        rmacoll_status_t st = ofi_drain_peer(tp, p);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (tp->peers[p].head == NULL) {
            tp->peers[p].active = 0;
            tp->active[i] = tp->active[--tp->nactive];
        } else {
            i++;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t ofi_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                      size_t n)
{
    uint64_t deadline = 0;

    OFI_CU_BIND(tp);

    if (tp->failed != RMACOLL_SUCCESS) {
        return tp->failed;
    }
    for (size_t k = 0; k < n; k++) {
        const rmacoll_put_t *pt = &puts[k];
        const rmacoll_rkey_t *rk = pt->dst_rkey;
        ofi_peer_t *peer;
        ofi_qput_t *q;

        if (pt->bytes == 0 && pt->sig_index == RMACOLL_NO_SIGNAL) {
            continue;
        }
        if (pt->peer < 0 || pt->peer >= tp->env.nranks || rk == NULL ||
            rk->len != sizeof(uint64_t) || (pt->bytes > 0 && pt->src == NULL) ||
            pt->dst_addr < rk->addr || pt->dst_addr - rk->addr > rk->bytes ||
            pt->bytes > rk->bytes - (pt->dst_addr - rk->addr)) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: bad put %zu to peer %d: %" PRIu64 " bytes at 0x%" PRIx64
                    " outside its rkey or without one", k, pt->peer, pt->bytes,
                    pt->dst_addr);
            return RMACOLL_ERR_INVALID_ARG;
        }
        while (tp->free_qputs == NULL) {
            rmacoll_status_t st = ofi_progress(tp);
            uint64_t now = ofi_now_ns();
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
            if (deadline == 0) {
                deadline = now + tp->timeout_ns;
            } else if (now > deadline) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR,
                        "ofi: no room to post %" PRIu64 " bytes to peer %d for %" PRIu64
                        " ms (%zu queued, %zu in flight)", pt->bytes, pt->peer,
                        tp->timeout_ns / 1000000, tp->nqueued, tp->ops_busy);
                return ofi_fail(tp, RMACOLL_ERR_TIMEOUT, pt->peer);
            }
        }
        q = tp->free_qputs;
        tp->free_qputs = q->next;
        q->next = NULL;
        q->src = pt->src;
        q->desc = pt->src_mem != NULL ? pt->src_mem->desc : NULL;
        q->dst_addr = pt->dst_addr;
        memcpy(&q->key, rk->key, sizeof(q->key));
        q->bytes = pt->bytes;
        q->done = 0;
        q->sig_index = pt->sig_index;
        tp->nqueued++;
        peer = &tp->peers[pt->peer];
        if (peer->tail != NULL) {
            peer->tail->next = q;
        } else {
            peer->head = q;
        }
        peer->tail = q;
        if (!peer->active) {
            peer->active = 1;
            tp->active[tp->nactive++] = pt->peer;
        }
        if (peer->head == q) {
            rmacoll_status_t st = ofi_drain_peer(tp, pt->peer);
            if (st != RMACOLL_SUCCESS) {
                return st;
            }
        }
    }
    return RMACOLL_SUCCESS;
}

static size_t ofi_pending(rmacoll_transport_t *tp)
{
    /* After a failure queued puts are never issued: their sources are free;
     * once progress stopped nothing in flight completes either. */
    if (tp->cut_off) {
        return 0;
    }
    return tp->ops_busy + (tp->failed == RMACOLL_SUCCESS ? tp->nqueued : 0);
}

static int ofi_error_peer(rmacoll_transport_t *tp)
{
    return tp->err_peer;
}

static uint64_t ofi_instance_caps(rmacoll_transport_t *tp, char *desc, size_t len)
{
    snprintf(desc, len, "%s", tp->hmem_desc);
    return tp->hmem ? RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA : 0;
}

/* The provider, fabric and domain of the endpoint: for tcp the subnet and
 * the interface ("tcp 127.0.0.0/8 lo"), for shm the host's shared memory. */
static void ofi_local_nic(rmacoll_transport_t *tp, char *name, size_t len)
{
    const struct fi_info *i = tp->info;

    snprintf(name, len, "%s %s %s", i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "",
             i->fabric_attr->name ? i->fabric_attr->name : "",
             i->domain_attr->name ? i->domain_attr->name : "");
}

static const rmacoll_transport_base_ops_t ofi_base_ops = {
    .size = sizeof(rmacoll_transport_base_ops_t),
    .init = ofi_init,
    .finalize = ofi_finalize,
    .progress = ofi_progress,
    .pending = ofi_pending,
    .error_peer = ofi_error_peer,
    .instance_caps = ofi_instance_caps,
    .local_nic = ofi_local_nic,
};

static const rmacoll_transport_mem_ops_t ofi_mem_ops = {
    .size = sizeof(rmacoll_transport_mem_ops_t),
    .mem_register = ofi_mem_register,
    .mem_deregister = ofi_mem_deregister,
    .mem_revoke = ofi_mem_revoke,
};

static const rmacoll_transport_host_ops_t ofi_host_ops = {
    .size = sizeof(rmacoll_transport_host_ops_t),
    .post_puts = ofi_post_puts,
};

const rmacoll_transport_ops_t rmacoll_transport_ofi_ops = {
    .abi_version = RMACOLL_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(rmacoll_transport_ops_t),
    .name = "ofi",
    .desc = "libfabric rdm: fi_writemsg + remote cq data signals (net, tcp;ofi_rxm, shm, "
            "sockets, efa, cxi)",
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST,
    .base = &ofi_base_ops,
    .mem = &ofi_mem_ops,
    .host = &ofi_host_ops,
    .keys = rmacoll_transport_ofi_keys,
    .nkeys = OFI_NKEYS,
};
