/*
 * bootstrap_launch.c - wire-up from the launcher's environment
 * (RMACOLL_BOOTSTRAP_ADDR, torchrun / Slurm variables) and, when built
 * with it, PMIx (libpmix opened at run time).
 */
#define _GNU_SOURCE /* accept4 */
#include "core/oob/bootstrap_priv.h"

#ifdef RMACOLL_HAVE_PMIX
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pmix.h>   /* types and constants only: libpmix is dlopen'ed */
#endif

#include "core/base/clock.h"
#include "core/base/text.h"
#include "core/config/env.h"

/* --------------------------------------------------------- launcher env */

#ifdef RMACOLL_HAVE_PMIX
/* ---- PMIx wire-up (mpirun, srun --mpi=pmix, prterun) ----
 * Rank 0 starts a root as rmacoll_get_unique_id does and publishes its id
 * with PMIx_Put/Commit; a collecting PMIx_Fence; every rank reads it with
 * PMIx_Get from rank 0. The TCP rendezvous itself is unchanged: PMIx only
 * carries the id, so no RMACOLL_BOOTSTRAP_ADDR is needed.
 * libpmix is opened with dlopen when a PMIx launcher is seen (as NCCL
 * opens its plugins): RMACOLL_PMIX_LIBRARY, else libpmix.so.2 on the
 * search path, else the build's PMIx libdir; librmacoll does not NEED it. */

typedef struct bs_pmix_fns {
    pmix_status_t (*init)(pmix_proc_t *, pmix_info_t *, size_t);
    pmix_status_t (*finalize)(const pmix_info_t *, size_t);
    pmix_status_t (*put)(pmix_scope_t, const char *, pmix_value_t *);
    pmix_status_t (*commit)(void);
    pmix_status_t (*fence)(const pmix_proc_t *, size_t, const pmix_info_t *, size_t);
    pmix_status_t (*get)(const pmix_proc_t *, const char *, const pmix_info_t *, size_t,
                         pmix_value_t **);
    const char *(*error_string)(pmix_status_t);
    void (*value_destruct)(pmix_value_t *);
} bs_pmix_fns_t;

static bs_pmix_fns_t bs_pmix;
static pthread_once_t bs_pmix_once = PTHREAD_ONCE_INIT;
static char bs_pmix_err[320];

static void bs_pmix_sym(void *h, const char *name, void *fnp, size_t size)
{
    void *f = dlsym(h, name);

    if (f == NULL && bs_pmix_err[0] == '\0') {
        snprintf(bs_pmix_err, sizeof(bs_pmix_err), "%s not found in libpmix", name);
    }
    memcpy(fnp, &f, size);   /* POSIX: a dlsym result converts to a function */
}

static void bs_pmix_load(void)
{
    const char *env = getenv("RMACOLL_PMIX_LIBRARY");
    void *h = NULL;

    if (env != NULL && env[0] != '\0') {
        h = dlopen(env, RTLD_NOW | RTLD_GLOBAL);
    } else {
        h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
#ifdef RMACOLL_PMIX_LIBDIR
        if (h == NULL) {
            h = dlopen(RMACOLL_PMIX_LIBDIR "/libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
        }
#endif
    }
    if (h == NULL) {
        snprintf(bs_pmix_err, sizeof(bs_pmix_err), "cannot load libpmix: %s", dlerror());
        return;
    }
#define BS_PMIX_SYM(field, name) bs_pmix_sym(h, name, &bs_pmix.field, sizeof(bs_pmix.field))
    BS_PMIX_SYM(init, "PMIx_Init");
    BS_PMIX_SYM(finalize, "PMIx_Finalize");
    BS_PMIX_SYM(put, "PMIx_Put");
    BS_PMIX_SYM(commit, "PMIx_Commit");
    BS_PMIX_SYM(fence, "PMIx_Fence");
    BS_PMIX_SYM(get, "PMIx_Get");
    BS_PMIX_SYM(error_string, "PMIx_Error_string");
    BS_PMIX_SYM(value_destruct, "PMIx_Value_destruct");
#undef BS_PMIX_SYM
    if (bs_pmix_err[0] != '\0') {
        memset(&bs_pmix, 0, sizeof(bs_pmix));
    }
}

static void bs_pmix_proc(pmix_proc_t *p, const char *nspace, pmix_rank_t rank)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->nspace, sizeof(p->nspace), "%s", nspace);
    p->rank = rank;
}

static void bs_pmix_release(pmix_value_t *v)
{
    if (v != NULL) {
        bs_pmix.value_destruct(v);
        free(v);   /* PMIX_VALUE_RELEASE */
    }
}

static int bs_pmix_present(void)
{
    return getenv("PMIX_RANK") != NULL || getenv("PMIX_NAMESPACE") != NULL;
}

/* An address of this host other nodes can dial: the first IPv4 address of
 * an up, non-loopback interface; "127.0.0.1" when there is none. */
static void bs_pmix_host(char *host, size_t len)
{
    struct ifaddrs *ifa = NULL;

    snprintf(host, len, "127.0.0.1");
    if (getifaddrs(&ifa) != 0) {
        return;
    }
    for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) {
            continue;
        }
        if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                      host, (socklen_t)len) != NULL) {
            break;
        }
    }
    freeifaddrs(ifa);
}

static uint32_t bs_pmix_u32(const pmix_proc_t *p, const char *key, uint32_t dflt)
{
    pmix_value_t *v = NULL;
    uint32_t out = dflt;

    if (bs_pmix.get(p, key, NULL, 0, &v) == PMIX_SUCCESS && v != NULL) {
        if (v->type == PMIX_UINT32) {
            out = v->data.uint32;
        }
        bs_pmix_release(v);
    }
    return out;
}

/* *rank, *nranks from PMIx (checked against the launcher's variables when
 * want_rank >= 0) and the id from rank 0. */
static rmacoll_status_t bs_pmix_exchange(int want_rank, int want_n, int *rank,
                                         int *nranks, rmacoll_unique_id_t *id,
                                         const rmacoll__logger_t *lg)
{
    /* Long because: the PMIx sequence (Init, Put/Commit on rank 0, Fence,
     * Get, Finalize) with a message for each call that fails; split, the
     * steps would pass the process handle and the value around. */
    static unsigned seq;   /* one key per call: every rank counts alike */
    pmix_proc_t me, job, root;
    pmix_value_t val, *got = NULL;
    pmix_info_t info;
    pmix_status_t rc;
    bool collect = true;
    char key[64];
    uint32_t n, nodes;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    pthread_once(&bs_pmix_once, bs_pmix_load);
    if (bs_pmix.init == NULL) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx launcher found but %s (set RMACOLL_PMIX_LIBRARY, or "
                     "RMACOLL_BOOTSTRAP_ADDR to use the TCP rendezvous instead)", bs_pmix_err);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    rc = bs_pmix.init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx_Init failed: %s (set RMACOLL_BOOTSTRAP_ADDR "
                     "to use the TCP rendezvous instead)", bs_pmix.error_string(rc));
        return RMACOLL_ERR_BOOTSTRAP;
    }
    bs_pmix_proc(&job, me.nspace, PMIX_RANK_WILDCARD);
    n = bs_pmix_u32(&job, PMIX_JOB_SIZE, 0);
    nodes = bs_pmix_u32(&job, PMIX_NUM_NODES, 0);
    if (n == 0 || me.rank >= n || n > (1u << 30) ||
        (want_rank >= 0 && ((int)me.rank != want_rank || (int)n != want_n))) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx rank %u of %u does not match the launcher's "
                     "rank %d of %d", me.rank, n, want_rank, want_n);
        bs_pmix.finalize(NULL, 0);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    snprintf(key, sizeof(key), "rmacoll.uid.%u", __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    if (me.rank == 0) {
        char host[64];

        /* One node: loopback; else an address the other nodes can reach. */
        if (nodes > 1) {
            bs_pmix_host(host, sizeof(host));
        } else {
            snprintf(host, sizeof(host), "127.0.0.1");
        }
        st = rmacoll__bs_new_root(host, 0, lg, id);
        /* Published even on failure (zeros): the others must not wait for
         * a key that never comes; they then fail on a bad id. */
        if (st != RMACOLL_SUCCESS) {
            memset(id, 0, sizeof(*id));
        }
        val.type = PMIX_BYTE_OBJECT;
        val.data.bo.bytes = (char *)id->internal;
        val.data.bo.size = sizeof(id->internal);
        rc = bs_pmix.put(PMIX_GLOBAL, key, &val);
        if (rc == PMIX_SUCCESS) {
            rc = bs_pmix.commit();
        }
        if (rc != PMIX_SUCCESS) {
            rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: PMIx_Put/Commit of %s failed: %s", key,
                         bs_pmix.error_string(rc));
        }
    }
    /* PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL) */
    memset(&info, 0, sizeof(info));
    snprintf(info.key, sizeof(info.key), "%s", PMIX_COLLECT_DATA);
    info.value.type = PMIX_BOOL;
    info.value.data.flag = collect;
    rc = bs_pmix.fence(NULL, 0, &info, 1);
    if (rc != PMIX_SUCCESS) {
        rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: PMIx_Fence failed on rank %u: %s", me.rank,
                     bs_pmix.error_string(rc));
        bs_pmix.finalize(NULL, 0);
        return RMACOLL_ERR_BOOTSTRAP;
    }
    if (me.rank != 0) {
        bs_pmix_proc(&root, me.nspace, 0);
        rc = bs_pmix.get(&root, key, NULL, 0, &got);
        if (rc != PMIX_SUCCESS || got == NULL || got->type != PMIX_BYTE_OBJECT ||
            got->data.bo.size != sizeof(id->internal)) {
            rmacoll__log(lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: rank %u: PMIx_Get of %s from rank 0 failed: %s",
                         me.rank, key, bs_pmix.error_string(rc));
            st = RMACOLL_ERR_BOOTSTRAP;
        } else {
            memcpy(id->internal, got->data.bo.bytes, sizeof(id->internal));
        }
        bs_pmix_release(got);
    }
    bs_pmix.finalize(NULL, 0);
    if (st == RMACOLL_SUCCESS) {
        rmacoll__log(lg, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: rank %u of %u: rendezvous id from PMIx (%u node(s))",
                     me.rank, n, nodes);
        *rank = (int)me.rank;
        *nranks = (int)n;
    }
    return st;
}
#endif /* RMACOLL_HAVE_PMIX */

rmacoll_status_t rmacoll__bootstrap_from_env(int *rank, int *nranks,
                                             rmacoll_unique_id_t *id)
{
    /* Long because: the launchers in their order of precedence (rank and
     * size variables, then RMACOLL_BOOTSTRAP_ADDR, PMIx, MASTER_ADDR), each
     * with the message that says what is missing; read top to bottom it is
     * the documentation of the wire-up. */
    static const char *const pairs[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"RANK", "WORLD_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS"},
    };
    rmacoll__logger_t lg;
    int r = -1, n = -1, found = -1;
    char text[320], host[256];
    unsigned port = 0;
    bs_id_t d;
    const char *addr = getenv("RMACOLL_BOOTSTRAP_ADDR");

    if (rank == NULL || nranks == NULL || id == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    rmacoll__logger_default(&lg);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        int bad = 0;
        int hr = rmacoll__env_int(pairs[i][0], 0, 1 << 30, &r, &bad);
        int hn = rmacoll__env_int(pairs[i][1], 1, 1 << 30, &n, &bad);
        if (bad || (hr != hn)) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: launcher variables %s='%s' %s='%s' are not a "
                         "rank and a size", pairs[i][0],
                         getenv(pairs[i][0]) ? getenv(pairs[i][0]) : "",
                         pairs[i][1], getenv(pairs[i][1]) ? getenv(pairs[i][1]) : "");
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (hr && hn) {
            found = (int)i;
            break;
        }
    }
#ifdef RMACOLL_HAVE_PMIX
    /* PMIx carries the id unless an address is given by hand
     * (RMACOLL_BOOTSTRAP_ADDR) or torchrun-style (MASTER_ADDR). */
    if (bs_pmix_present() && (addr == NULL || addr[0] == '\0') &&
        getenv("MASTER_ADDR") == NULL) {
        return bs_pmix_exchange(found >= 0 ? r : -1, found >= 0 ? n : -1, rank,
                                nranks, id, &lg);
    }
#endif
    if (found < 0) {
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: no launcher variables (OMPI_COMM_WORLD_RANK/SIZE, "
                     "PMI_RANK/SIZE, RANK/WORLD_SIZE, SLURM_PROCID/NTASKS, PMIX_RANK)");
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (r >= n) {
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: %s=%d is not below %s=%d", pairs[found][0], r,
                     pairs[found][1], n);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (addr != NULL && addr[0] != '\0') {
        if (rmacoll__bs_split_hostport(addr, host, sizeof(host), &port) != 0 || port == 0) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: RMACOLL_BOOTSTRAP_ADDR='%s' is not host:port", addr);
            return RMACOLL_ERR_INVALID_ARG;
        }
    } else {
        const char *ma = getenv("MASTER_ADDR");
        int mp = 0, bad = 0;
        if (ma == NULL || ma[0] == '\0' || !rmacoll__env_int("MASTER_PORT", 1, 65534, &mp, &bad)) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: set RMACOLL_BOOTSTRAP_ADDR=host:port, or "
                         "MASTER_ADDR and MASTER_PORT (the bootstrap uses MASTER_PORT+1)");
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (rmacoll__bs_split_hostport(ma, host, sizeof(host), &port) != 0) {
            rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                         "bootstrap: MASTER_ADDR='%s' is not a host name", ma);
            return RMACOLL_ERR_INVALID_ARG;
        }
        port = (unsigned)mp + 1;
    }
    memset(&d, 0, sizeof(d));
    if (rmacoll__bs_resolve(host, port, &d) != 0) {
        rmacoll__log(&lg, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_BOOTSTRAP,
                     "bootstrap: cannot resolve the bootstrap host '%s'", host);
        return RMACOLL_ERR_INVALID_ARG;
    }
    {
        const char *job = getenv("SLURM_JOB_ID");
        const char *run = getenv("TORCHELASTIC_RUN_ID");
        snprintf(text, sizeof(text), "rmacoll-env|%s|%u|%d|%s|%s", host, port, n,
                 job ? job : "", run ? run : "");
        d.magic = rmacoll__bs_fnv1a(0xcbf29ce484222325ull, text);
    }
    if (r == 0) {
        int lfd;
        rmacoll_status_t st = rmacoll__bs_listen(&d, 1, &lg, &lfd);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        st = rmacoll__bs_root_start(lfd, &d, &lg);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    rmacoll__bs_id_encode(&d, id);
    *rank = r;
    *nranks = n;
    return RMACOLL_SUCCESS;
}
