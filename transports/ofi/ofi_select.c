/*
 * ofi_select.c - provider selection of the libfabric transport: the hints
 * init asks fi_getinfo with, ofi.provider "auto" (net, tcp, tcp;ofi_rxm),
 * the interface the config or the environment names, FI_HMEM when device
 * memory may be registered, the errors that say what a provider lacks, and
 * the name of shm's region (with the sweep of regions dead processes left).
 * Local: nothing here is collective.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "transports/ofi/ofi_internal.h"
#include "transports/common/tproc.h"

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
 * (a zombie or an exiting process counts as gone: tproc.h)
 * (PIDs are those of this PID namespace: ranks of a job share one). */
void rmacoll__ofi_sweep_stale_shm(rmacoll_transport_t *tp)
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
            !rmacoll__proc_gone(pid)) {
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

void rmacoll__ofi_unlink_own_shm(rmacoll_transport_t *tp)
{
    size_t n = strlen(tp->shm_region);
    DIR *d;
    struct dirent *e;

    if (!tp->shm_named || n == 0 || (d = opendir("/dev/shm")) == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char name[300];

        if (strncmp(e->d_name, tp->shm_region, n) != 0 ||
            (e->d_name[n] != '\0' && e->d_name[n] != ':')) {
            continue;
        }
        snprintf(name, sizeof(name), "/%s", e->d_name);
        if (shm_unlink(name) == 0) {
            OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: rank %d: removed its region /dev/shm%s",
                    tp->env.rank, name);
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

#ifdef RMACOLL_OFI_CUDA
/* FI_HMEM, when device memory may go to the provider: asked only by a
 * thread that uses a GPU (a host-only process keeps the plain hints), and
 * not when device calls are staged (they never hand device memory to the
 * provider; and FI_HMEM costs host memory too: shm opened with it turns
 * off CMA and moves every host buffer through its SAR bounce buffers).
 * *pick is the provider's entry with FI_HMEM (tp->hmem set, *list holds
 * it), or NULL with the reason in tp->hmem_desc. */
static rmacoll_status_t ofi_select_hmem(rmacoll_transport_t *tp, const char *prov,
                                        const char *iface, struct fi_info **list,
                                        struct fi_info **pick)
{
    char dpath[32] = "";
    rmacoll_status_t st;

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
        st = ofi_getinfo(tp, prov, 1, list);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        *pick = ofi_pick(*list, prov, iface, 1);
        if (*pick != NULL && (*pick)->domain_attr->cq_data_size >= 4) {
            tp->hmem = 1; /* confirmed by ofi_hmem_probe once the domain is open */
        } else {
            snprintf(tp->hmem_desc, sizeof(tp->hmem_desc), "provider %s lacks FI_HMEM",
                     prov);
            *pick = NULL;
            if (*list != NULL) {
                fi_freeinfo(*list);
                *list = NULL;
            }
        }
    }
    return RMACOLL_SUCCESS;
}
#endif

/* No entry of prov answered the hints: says why (the provider lacks what
 * the transport needs, offers only msg endpoints, or is not there). */
static rmacoll_status_t ofi_select_missing(rmacoll_transport_t *tp, const char *prov)
{
    char avail[512];
    int present = ofi_list_providers(prov, FI_EP_RDM, avail, sizeof(avail));

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

/* Checks the picked entry: on the named interface (a TCP provider must
 * be), with 4 bytes of remote CQ data and RMA write caps. */
static rmacoll_status_t ofi_select_check(rmacoll_transport_t *tp, const char *prov,
                                         const char *iface, const struct fi_info *pick)
{
    const rmacoll_config_t *cfg = tp->env.config;

    if (iface != NULL && strcmp(pick->domain_attr->name, iface) != 0) {
        if (strstr(prov, "tcp") || strstr(prov, "sockets") || strcmp(prov, "net") == 0) {
            const char *var = cfg && cfg->ofi_iface[0] ? NULL : ofi_env_iface_var(prov);
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: provider '%s' has no domain on interface '%s'%s%s%s", prov, iface,
                    var ? " (named by " : "", var ? var : "", var ? ")" : "");
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
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if ((pick->caps & (FI_RMA | FI_WRITE | FI_REMOTE_WRITE)) !=
        (FI_RMA | FI_WRITE | FI_REMOTE_WRITE)) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: provider '%s' lacks rma write caps", prov);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    return RMACOLL_SUCCESS;
}

/* shm names its region after the pid ("fi_shm://PID"); a killed process
 * leaves that region behind, and a later process that gets the same pid
 * fails fi_enable with EBUSY. A name with a random part avoids the clash. */
static void ofi_name_shm(rmacoll_transport_t *tp, struct fi_info *info)
{
    char name[128];
    const char *tag = getenv("RMACOLL_SHM_TAG"); /* as rmacoll__shm_tag */
    struct timespec ts;

    if (strcmp(info->fabric_attr->prov_name, "shm") != 0 ||
        info->addr_format != FI_ADDR_STR) {
        return;
    }
    tp->shm_named = 1;
    rmacoll__ofi_sweep_stale_shm(tp);
    clock_gettime(CLOCK_REALTIME, &ts);
    if (tag == NULL || strlen(tag) > 24 ||
        tag[strspn(tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")]) {
        tag = ""; /* the core fails the communicator naming a bad one */
    }
    snprintf(name, sizeof(name), "fi_shm://rmacoll-%d-%lx-%d%s%s", (int)getpid(),
             (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)), tp->env.rank,
             tag[0] ? "." : "", tag);
    snprintf(tp->shm_region, sizeof(tp->shm_region), "%s", name + strlen("fi_shm://"));
    free(info->src_addr);
    info->src_addr = strdup(name);
    info->src_addrlen = info->src_addr ? strlen(name) + 1 : 0;
}

rmacoll_status_t rmacoll__ofi_select(rmacoll_transport_t *tp, struct fi_info **out)
{
    const rmacoll_config_t *cfg = tp->env.config;
    const char *prov = (cfg && cfg->ofi_provider[0]) ? cfg->ofi_provider
                                                      : OFI_DEFAULT_PROVIDER;
    const char *iface = (cfg && cfg->ofi_iface[0]) ? cfg->ofi_iface : NULL;
    struct fi_info *list = NULL, *pick = NULL;
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
    st = ofi_select_hmem(tp, prov, iface, &list, &pick);
    if (st != RMACOLL_SUCCESS) {
        return st;
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
        if (list) {
            fi_freeinfo(list);
        }
        return ofi_select_missing(tp, prov);
    }
    st = ofi_select_check(tp, prov, iface, pick);
    if (st != RMACOLL_SUCCESS) {
        fi_freeinfo(list);
        return st;
    }
    *out = fi_dupinfo(pick);
    fi_freeinfo(list);
    if (*out == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    ofi_name_shm(tp, *out);
    return RMACOLL_SUCCESS;
}
