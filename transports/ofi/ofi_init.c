/*
 * ofi_init.c - init and finalize of the libfabric transport: the instance
 * and its config keys, the endpoint (fabric, domain, CQ, AV, pools), the
 * FI_HMEM probe, and the collective part: every rank's outcome and
 * provider (one allgather), then the endpoint names into the AV (another).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ofi/ofi_internal.h"

/* Whether closing this provider's endpoint reads nothing from the network,
 * so that a cut-off instance (mem_revoke) may close it: no incoming write
 * lands during the close, and a write received halfway cannot crash it.
 *  - net (libfabric 1.16, 1.17) and tcp answering for FI_EP_RDM itself
 *    (1.18 on, the same code): xnet_rdm_close closes the listener, then
 *    every connection's msg endpoint; xnet_ep_close takes the socket out
 *    of the poll set, flushes the endpoint's queues (a write received
 *    halfway becomes an FI_ECANCELED entry in the CQ, never read here)
 *    and closes the socket. Nothing there receives or drives progress.
 *  - not tcp;ofi_rxm (1.17): rxm_freeall_conns closes each connection's
 *    msg endpoint and then drains rxm's msg CQ (rxm_close_conn ->
 *    rxm_flush_msg_cq -> fi_cq_read), and reading tcp's msg CQ receives
 *    on every connection still open: a write received halfway on one of
 *    them keeps landing, during the close. And the msg endpoint's close
 *    turns a write with remote CQ data received halfway into an
 *    FI_ECANCELED entry whose op_context is NULL, which
 *    rxm_handle_comp_error dereferences (SIGSEGV: test_safety
 *    test_late_write_net; docs/transport-ofi.md has the backtrace).
 *  - others (shm, sockets, verbs;ofi_rxm, efa, cxi): not read; left as
 *    before. */
static int ofi_close_is_quiet(const rmacoll_transport_t *tp)
{
    const char *prov = tp->info ? tp->info->fabric_attr->prov_name : NULL;

    return prov != NULL && (strcmp(prov, "net") == 0 || strcmp(prov, "tcp") == 0);
}

static void ofi_close_fid(rmacoll_transport_t *tp, struct fid *fid, const char *what)
{
    int ret = fi_close(fid);

    if (ret != 0) {
        OFI_LOG(tp, RMACOLL_LOG_WARN, "ofi: rank %d: closing the %s failed: %s",
                tp->env.rank, what, fi_strerror(ret < 0 ? -ret : ret));
    }
}

static void ofi_close_all(rmacoll_transport_t *tp)
{
    for (int i = 0; i < OFI_MR_CACHE_MAX; i++) {
        if (tp->mrs[i].used && !tp->mrs[i].revoked) {
            fi_close(&tp->mrs[i].mr->fid);
            tp->mrs[i].used = 0;
        }
    }
    if (tp->cut_off && tp->ep && !ofi_close_is_quiet(tp)) {
        /* mem_revoke stopped progress with a write possibly half received,
         * and this provider's close would receive (see ofi_close_is_quiet).
         * The endpoint and what it hangs on are left open, never progressed
         * again, until the process exits: a broken communicator's price for
         * no late write. */
        OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: rank %d: the endpoint of a revoked instance "
                "stays open (not progressed) until exit (provider %s)", tp->env.rank,
                tp->info->fabric_attr->prov_name);
        tp->ep = NULL;
        tp->av = NULL;
        tp->cq = NULL;
        tp->domain = NULL;
        tp->fabric = NULL;
    }
    /* The endpoint first: its close drops its connections (net: no
     * receive, see above); the CQ's entries, the cancelled ones of a
     * revoked instance included, go unread with it. */
    if (tp->ep) {
        ofi_close_fid(tp, &tp->ep->fid, "endpoint");
    }
    if (tp->av) {
        ofi_close_fid(tp, &tp->av->fid, "address vector");
    }
    if (tp->cq) {
        ofi_close_fid(tp, &tp->cq->fid, "completion queue");
    }
    if (tp->domain) {
        ofi_close_fid(tp, &tp->domain->fid, "domain");
    }
    if (tp->fabric) {
        ofi_close_fid(tp, &tp->fabric->fid, "fabric");
    }
    if (tp->info) {
        fi_freeinfo(tp->info);
    }
    /* The shm provider unlinks its region when the endpoint closes, but
     * a revoked shm instance keeps its endpoint (above), and the process ends
     * without libfabric's cleanup when it leaves by _exit or a signal: the
     * region would stay in /dev/shm. Unlink the name here in every case
     * (the mappings stay valid; a closed endpoint already removed it). */
    rmacoll__ofi_unlink_own_shm(tp);
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

/* Opens fabric, domain, CQ, AV and endpoint; local, not collective. */
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
        ret = rmacoll__ofi_mr_open(tp, p, 4096, RMACOLL_MEM_CUDA, device, &mr);
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

/* A new instance with env copied and the config keys read; NULL without
 * memory. *force_delivery: ofi.delivery_complete is true. */
static rmacoll_transport_t *ofi_new(const rmacoll_transport_env_t *env, int *force_delivery)
{
    rmacoll_transport_t *tp = calloc(1, sizeof(*tp));

    *force_delivery = 0;
    if (tp == NULL) {
        return NULL;
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
            *force_delivery = 1;
        }
    }
    return tp;
}

/* The local part of init: provider, endpoint, FI_HMEM probe, and whether
 * writes go out ordered (see ofi.c). */
static rmacoll_status_t ofi_init_local(rmacoll_transport_t *tp, int force_delivery,
                                       char *name, size_t *namelen)
{
    rmacoll_status_t st = rmacoll__ofi_select(tp, &tp->info);

    if (st == RMACOLL_SUCCESS) {
        st = ofi_open(tp, name, namelen);
    }
    if (st == RMACOLL_SUCCESS) {
        ofi_hmem_probe(tp);
        tp->ordered = !force_delivery && !tp->hmem &&
                      (tp->info->tx_attr->msg_order & FI_ORDER_WAW) &&
                      tp->info->ep_attr->max_order_waw_size >= tp->max_piece;
    }
    return st;
}

/* First allgather: every rank's local outcome `st` and provider. Returns
 * the first failure (this rank's, the exchange's, a peer's, or providers
 * that differ); *maxlen receives the longest endpoint name. */
static rmacoll_status_t ofi_exchange_hello(rmacoll_transport_t *tp, rmacoll_status_t st,
                                           size_t namelen, uint32_t *maxlen)
{
    const rmacoll_transport_env_t *env = &tp->env;
    int n = env->nranks;
    ofi_hello_t hello, *hellos;
    rmacoll_status_t gst;

    memset(&hello, 0, sizeof(hello));
    hello.status = (int32_t)st;
    hello.namelen = st == RMACOLL_SUCCESS ? (uint32_t)namelen : 0;
    if (st == RMACOLL_SUCCESS) {
        snprintf(hello.prov, sizeof(hello.prov), "%s", tp->info->fabric_attr->prov_name);
    }
    hellos = calloc((size_t)n, sizeof(*hellos));
    if (hellos == NULL) {
        return RMACOLL_ERR_NO_MEMORY;   /* peers then fail in their allgather */
    }
    gst = env->allgather(env->oob_ctx, &hello, hellos, sizeof(hello));
    if (gst != RMACOLL_SUCCESS) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: address allgather failed: %s",
                rmacoll_status_string(gst));
        free(hellos);
        return st != RMACOLL_SUCCESS ? st : gst;
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
        if (hellos[r].namelen > *maxlen) {
            *maxlen = hellos[r].namelen;
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
    free(hellos);
    return st;
}

/* Second allgather: every rank's endpoint name (name[OFI_NAME_MAX], padded
 * to maxlen), each inserted into the AV. */
static rmacoll_status_t ofi_exchange_names(rmacoll_transport_t *tp, char *name,
                                           size_t namelen, uint32_t maxlen)
{
    const rmacoll_transport_env_t *env = &tp->env;
    int n = env->nranks;
    char *names = calloc((size_t)n, maxlen);
    rmacoll_status_t gst;

    if (names == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    memset(name + namelen, 0, OFI_NAME_MAX - namelen);
    gst = env->allgather(env->oob_ctx, name, names, maxlen);
    if (gst != RMACOLL_SUCCESS) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: name allgather failed: %s",
                rmacoll_status_string(gst));
        free(names);
        return gst;
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
            tp->err_peer = r;
            free(names);
            return RMACOLL_ERR_TRANSPORT;
        }
    }
    free(names);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ofi_init(const rmacoll_transport_env_t *env,
                                   rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    rmacoll_status_t st;
    char name[OFI_NAME_MAX];
    size_t namelen = sizeof(name);
    uint32_t maxlen = 0;
    int force_delivery;

    if (env->allgather == NULL || env->nranks < 1 || env->rank < 0 ||
        env->rank >= env->nranks) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp = ofi_new(env, &force_delivery);
    if (tp == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st = ofi_init_local(tp, force_delivery, name, &namelen);
    /* Collective from here on even after a local failure: every rank
     * learns whether any rank failed, and nobody is left in an allgather. */
    st = ofi_exchange_hello(tp, st, namelen, &maxlen);
    if (st == RMACOLL_SUCCESS) {
        st = ofi_exchange_names(tp, name, namelen, maxlen);
    }
    if (st != RMACOLL_SUCCESS) {
        ofi_close_all(tp);
        return st;
    }
#ifdef RMACOLL_OFI_CUDA
    st = rmacoll__ofi_ipc_warm(tp);
    if (st != RMACOLL_SUCCESS) {
        ofi_close_all(tp);
        return st;
    }
#endif
    OFI_LOG(tp, RMACOLL_LOG_INFO,
            "ofi: rank %d on provider '%s' domain '%s' (mr_mode 0x%" PRIx64
            ", max piece %" PRIu64 " bytes, %zu ops, %s, %s)",
            env->rank, tp->info->fabric_attr->prov_name, tp->info->domain_attr->name,
            tp->mr_mode, tp->max_piece, tp->nops,
            tp->ordered ? "ordered writes: FI_INJECT_COMPLETE"
                        : "unordered or forced: FI_DELIVERY_COMPLETE, signals wait",
            tp->hmem ? "FI_HMEM: cuda memory registered" : "no FI_HMEM");
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

void rmacoll__ofi_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        OFI_CU_BIND(tp);
        if (tp->ops_busy != 0) {
            OFI_LOG(tp, RMACOLL_LOG_WARN, "ofi: finalize with %zu puts in flight",
                    tp->ops_busy);
        }
        if (tp->shm_named) {
            rmacoll__ofi_sweep_stale_shm(tp); /* a dead peer's region (ours is open) */
        }
        ofi_close_all(tp);
    }
}
