/*
 * bind.c - resolution of a communicator's bindings (bind.h).
 */
#include "core/xport/bind.h"

#include "core/config/config_internal.h"

#include <stdio.h>
#include <string.h>

#define AUTO "auto"

static int has(const rmacoll__tops_t *t, uint64_t caps)
{
    return t != NULL && (t->caps & caps) == caps;
}

static const rmacoll__tops_t *by_spec(const rmacoll__tops_t *avail, int n, const char *spec)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(avail[i].spec, spec) == 0) {
            return &avail[i];
        }
    }
    return NULL;
}

/* Index of t among the instances, adding it if new. */
static int inst_of(rmacoll__bind_plan_t *out, const rmacoll__tops_t *t, int path)
{
    for (int i = 0; i < out->ninst; i++) {
        if (out->ops[i] == t) {
            return i;
        }
    }
    if (out->ninst == RMACOLL__MAX_INST) {
        return -1;
    }
    out->ops[out->ninst] = t;
    out->path[out->ninst] = path;
    return out->ninst++;
}

static void add(rmacoll__bind_plan_t *out, rmacoll__binding_t *b, const rmacoll__tops_t *t,
                int path, uint64_t max_bytes)
{
    int i = inst_of(out, t, path);

    if (i >= 0 && b->n < RMACOLL__BIND_CAND) {
        b->inst[b->n] = i;
        b->max_bytes[b->n++] = max_bytes;
    }
}

/* The transport named by transports.intra_node (NULL for auto; it must be
 * built in and serve node peers), and the one for node peers in host
 * memory: the named one when it takes host memory, else the first that
 * does. */
static rmacoll_status_t bind_pick_base(const rmacoll__tops_t *avail, int navail,
                                       const char *intra, int rank,
                                       const rmacoll__tops_t **named_out,
                                       const rmacoll__tops_t **base_out, char *err, size_t len)
{
    const rmacoll__tops_t *named = NULL, *base = NULL;

    if (strcmp(intra, AUTO) != 0) {
        named = by_spec(avail, navail, intra);
        if (named == NULL) {
            snprintf(err, len, "rank %d: transports.intra_node '%s' is not built in "
                     "(built: %s)", rank, intra, rmacoll__tops_builtin_names());
            return RMACOLL_ERR_CONFIG;
        }
        if (!has(named, RMACOLL_TCAP_CE)) {
            snprintf(err, len, "rank %d: transports.intra_node '%s' does not serve node "
                     "peers (no RMACOLL_TCAP_CE)", rank, intra);
            return RMACOLL_ERR_CONFIG;
        }
    }
    for (int i = 0; i < navail && base == NULL; i++) {
        if (has(&avail[i], RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_HOST)) {
            base = &avail[i];
        }
    }
    if (has(named, RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_HOST)) {
        base = named;
    }
    if (base == NULL) {
        snprintf(err, len, "rank %d: no transport for node peers in host memory is "
                 "available (needs RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_HOST; built: %s)",
                 rank, rmacoll__tops_builtin_names());
        return RMACOLL_ERR_CONFIG;
    }
    *named_out = named;
    *base_out = base;
    return RMACOLL_SUCCESS;
}

/* CE x cuda: the named transport when it takes device memory; with auto,
 * every other transport for node peers in device memory up to its size key,
 * then base when it takes device memory. The control instance is base's,
 * or the last candidate's. */
static rmacoll_status_t bind_ce_cuda(const rmacoll__tops_t *avail, int navail,
                                     const rmacoll_config_t *cfg, int is_auto,
                                     const rmacoll__tops_t *named, const rmacoll__tops_t *base,
                                     int rank, rmacoll__bind_plan_t *out, char *err, size_t len)
{
    rmacoll__binding_t *cec = &out->bind[RMACOLL__PATH_CE][RMACOLL_MEM_CUDA];

    if (named != NULL && has(named, RMACOLL_TCAP_MEM_CUDA)) {
        add(out, cec, named, RMACOLL__PATH_CE, UINT64_MAX);
    } else {
        for (int i = 0; is_auto && i < navail; i++) {
            uint64_t max = 0;
            if (&avail[i] == base || avail[i].small_max_key == NULL ||
                !has(&avail[i], RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA)) {
                continue;
            }
            if (rmacoll__config_get_size(cfg, avail[i].small_max_key, &max) !=
                RMACOLL_SUCCESS) {
                snprintf(err, len, "rank %d: transport '%s' names size key '%s', which is "
                         "not a size key of the configuration", rank, avail[i].name,
                         avail[i].small_max_key);
                return RMACOLL_ERR_CONFIG;
            }
            add(out, cec, &avail[i], RMACOLL__PATH_CE, max);
        }
        if (has(base, RMACOLL_TCAP_MEM_CUDA)) {
            add(out, cec, base, RMACOLL__PATH_CE, UINT64_MAX);
        }
    }
    if (cec->n > 0) {
        cec->ctl = has(base, RMACOLL_TCAP_MEM_CUDA) ? inst_of(out, base, RMACOLL__PATH_CE)
                                                    : cec->inst[cec->n - 1];
    }
    return RMACOLL_SUCCESS;
}

/* PROXY x host: transports.inter_node, which must be built in and serve
 * network peers in host memory. */
static rmacoll_status_t bind_proxy_host(const rmacoll__tops_t *avail, int navail,
                                        const rmacoll_config_t *cfg, int rank,
                                        rmacoll__bind_plan_t *out, char *err, size_t len)
{
    rmacoll__binding_t *pxh = &out->bind[RMACOLL__PATH_PROXY][RMACOLL_MEM_HOST];
    const rmacoll__tops_t *net = by_spec(avail, navail, cfg->inter_node);

    if (net == NULL) {
        snprintf(err, len, "rank %d: transports.inter_node '%s' is not built in "
                 "(built: %s)", rank, cfg->inter_node, rmacoll__tops_builtin_names());
        return RMACOLL_ERR_CONFIG;
    }
    if (!has(net, RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST)) {
        snprintf(err, len, "rank %d: transports.inter_node '%s' does not serve network "
                 "peers in host memory (needs RMACOLL_TCAP_PROXY | "
                 "RMACOLL_TCAP_MEM_HOST)", rank, cfg->inter_node);
        return RMACOLL_ERR_CONFIG;
    }
    add(out, pxh, net, RMACOLL__PATH_PROXY, UINT64_MAX);
    pxh->ctl = pxh->inst[0];
    return RMACOLL_SUCCESS;
}

/* The binding rules of bind.h in their order: CE x host, CE x cuda, then
 * PROXY x host on more than one node. */
rmacoll_status_t rmacoll__bind_resolve(const rmacoll__tops_t *avail, int navail,
                                       const rmacoll_config_t *cfg, int multinode,
                                       int rank, rmacoll__bind_plan_t *out, char *err,
                                       size_t len)
{
    const char *intra = cfg->intra_node;
    int is_auto = strcmp(intra, AUTO) == 0;
    const rmacoll__tops_t *named = NULL, *base = NULL;
    rmacoll__binding_t *ceh = &out->bind[RMACOLL__PATH_CE][RMACOLL_MEM_HOST];
    rmacoll_status_t st;

    memset(out, 0, sizeof(*out));
    for (int p = 0; p < 2; p++) {
        for (int m = 0; m < 2; m++) {
            out->bind[p][m].ctl = -1;
        }
    }
    st = bind_pick_base(avail, navail, intra, rank, &named, &base, err, len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    /* CE x host */
    add(out, ceh, base, RMACOLL__PATH_CE, UINT64_MAX);
    ceh->ctl = ceh->inst[0];
    /* CE x cuda */
    st = bind_ce_cuda(avail, navail, cfg, is_auto, named, base, rank, out, err, len);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    /* PROXY x host */
    if (multinode) {
        return bind_proxy_host(avail, navail, cfg, rank, out, err, len);
    }
    return RMACOLL_SUCCESS;
}

int rmacoll__bind_pick(const rmacoll__binding_t *b, uint64_t largest)
{
    for (int k = 0; k < b->n; k++) {
        if (largest <= b->max_bytes[k]) {
            return b->inst[k];
        }
    }
    return b->n > 0 ? b->inst[b->n - 1] : -1;
}

#define DEVNET_NET (RMACOLL_TCAP_PROXY | RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA)
#define DEVNET_CE (RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA | RMACOLL_TCAP_HOST_CUDA)

rmacoll_status_t rmacoll__bind_device_net(const char *net_name, uint64_t net_caps,
                                          const char *net_desc, const char *ce_name,
                                          uint64_t ce_caps, rmacoll__devnet_mode_t mode,
                                          int *hmem, char *reason, size_t len)
{
    char why[320];
    int net_ok = (net_caps & DEVNET_NET) == DEVNET_NET;
    int ce_ok = ce_name != NULL && (ce_caps & DEVNET_CE) == DEVNET_CE;

    *hmem = 0;
    if (mode == RMACOLL__DEVNET_STAGED) {
        snprintf(reason, len, "device path across nodes: host staging "
                 "(transports.device_inter_node = staged)");
        return RMACOLL_SUCCESS;
    }
    if (net_ok && ce_ok) {
        *hmem = 1;
        if (net_desc != NULL && net_desc[0] != '\0') {
            snprintf(reason, len, "device path across nodes: %s", net_desc);
        } else {
            snprintf(reason, len, "device path across nodes: device memory registered "
                     "with transport %s", net_name);
        }
        return RMACOLL_SUCCESS;
    }
    if (!net_ok && net_desc != NULL && net_desc[0] != '\0') {
        snprintf(why, sizeof(why), "%s", net_desc);
    } else if (!net_ok) {
        snprintf(why, sizeof(why), "transport %s does not register device memory: no "
                 "RMACOLL_TCAP_HMEM", net_name);
    } else if (ce_name == NULL) {
        snprintf(why, sizeof(why), "no transport for node peers in device memory");
    } else {
        snprintf(why, sizeof(why), "transport %s cannot copy device memory for a host "
                 "thread: no RMACOLL_TCAP_HOST_CUDA", ce_name);
    }
    if (mode == RMACOLL__DEVNET_HMEM) {
        snprintf(reason, len, "transports.device_inter_node = hmem, but %s", why);
        return RMACOLL_ERR_CONFIG;
    }
    snprintf(reason, len, "device path across nodes: host staging (%s)", why);
    return RMACOLL_SUCCESS;
}

rmacoll__tinst_t *rmacoll__bind_bound(const rmacoll__bind_plan_t *bp, rmacoll__tinst_t *inst,
                                      int path, rmacoll_memtype_t mem,
                                      const rmacoll__task_t *t, size_t n)
{
    const rmacoll__binding_t *b = &bp->bind[path][mem];
    uint64_t largest = 0;
    int i;

    if (b->n > 1) { /* size-bounded candidates: the queue's largest put picks */
        for (size_t k = 0; k < n; k++) {
            largest = t[k].bytes > largest ? t[k].bytes : largest;
        }
    }
    i = rmacoll__bind_pick(b, largest);
    return i >= 0 ? &inst[i] : NULL;
}

rmacoll__tinst_t *rmacoll__bind_ctl(const rmacoll__bind_plan_t *bp, rmacoll__tinst_t *inst,
                                    int path, rmacoll_memtype_t mem)
{
    int i = bp->bind[path][mem].ctl;

    return i >= 0 && i < bp->ninst ? &inst[i] : NULL;
}
