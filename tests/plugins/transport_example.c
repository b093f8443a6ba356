/*
 * transport_example.c - an out-of-tree rmacoll transport, loaded from a
 * shared object named in the config (transports.inter_node:
 * plugin:/path/librmacoll_transport_example.so). It is the template of
 * docs/plugins.md and is built with the public headers only, linking
 * nothing of rmacoll.
 *
 * "example_cma": a PROXY transport in host memory for ranks on one host
 * (virtual nodes in tests). Data goes by cross-memory attach
 * (process_vm_writev) straight into the target's registered memory; a
 * signal is a release store into the target's "shadow" word, in a small
 * POSIX shared-memory segment each rank maps from its peers, which the
 * target's progress() raises into env->signals. The signal contract
 * holds: the write system call has completed before the store, and every
 * word has one writer, which raises it by one per signal.
 *
 * EXAMPLE_ABI selects the table it exports: 2 (default) the grouped ops of
 * rmacoll_transport.h; 1 the flat table of ABI version 1, which the core
 * adapts; 0 a table under rmacoll_transport_plugin_v0, which the core
 * refuses (tests of the loader).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rmacoll_transport.h"

#ifndef EXAMPLE_ABI
#define EXAMPLE_ABI 2
#endif

#define EX_NAME_BYTES 64

#define EX_LOG(tp_, lvl, ...)                                                  \
    do {                                                                       \
        if ((tp_)->env->log != NULL) {                                         \
            (tp_)->env->log((tp_)->env->log_ctx, (lvl),                        \
                            RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);        \
        }                                                                      \
    } while (0)

/* What every rank tells the others at init. */
typedef struct ex_addr {
    int64_t pid;
    uint64_t nsignals;
    char shm_name[EX_NAME_BYTES];
} ex_addr_t;

struct rmacoll_transport {
    const rmacoll_transport_env_t *env;
    int rank, nranks;
    ex_addr_t *addr;                 /* [nranks] */
    volatile uint64_t *shadow;       /* own words, written by peers */
    size_t shadow_bytes;
    volatile uint64_t **peer_shadow; /* [nranks]: peers' words mapped here */
    size_t *peer_bytes;
    int error_peer;
};

/* A registration: CMA needs none, the core needs a handle. */
struct rmacoll_mem {
    void *addr;
    size_t bytes;
};

static void ex_free(rmacoll_transport_t *tp)
{
    for (int p = 0; tp->peer_shadow != NULL && p < tp->nranks; p++) {
        if (tp->peer_shadow[p] != NULL) {
            munmap((void *)tp->peer_shadow[p], tp->peer_bytes[p]);
        }
    }
    if (tp->shadow != NULL) {
        munmap((void *)tp->shadow, tp->shadow_bytes);
    }
    free(tp->peer_shadow);
    free(tp->peer_bytes);
    free(tp->addr);
    free(tp);
}

static rmacoll_status_t ex_map(const char *name, size_t bytes, int create, void **out)
{
    int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    void *p;

    if (fd < 0) {
        return RMACOLL_ERR_TRANSPORT;
    }
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        shm_unlink(name);
        return RMACOLL_ERR_TRANSPORT;
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        if (create) {
            shm_unlink(name);
        }
        return RMACOLL_ERR_TRANSPORT;
    }
    *out = p;
    return RMACOLL_SUCCESS;
}

/* Collective: segments made, names exchanged, peers mapped, names
 * unlinked once everyone mapped (nothing is left in /dev/shm). */
static rmacoll_status_t ex_init(const rmacoll_transport_env_t *env, rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    ex_addr_t mine;
    char prefix[32] = "/rmacoll-excma";
    struct timespec ts;
    rmacoll_status_t st;
    void *p = NULL;
    int dummy = 0, *all_ok;

    *tpp = NULL;
    if (env == NULL || env->struct_size < sizeof(*env) || env->allgather == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    tp->env = env;
    tp->rank = env->rank;
    tp->nranks = env->nranks;
    tp->error_peer = -1;
    tp->addr = calloc((size_t)env->nranks, sizeof(*tp->addr));
    tp->peer_shadow = calloc((size_t)env->nranks, sizeof(*tp->peer_shadow));
    tp->peer_bytes = calloc((size_t)env->nranks, sizeof(*tp->peer_bytes));
    all_ok = calloc((size_t)env->nranks, sizeof(int));
    if (tp->addr == NULL || tp->peer_shadow == NULL || tp->peer_bytes == NULL ||
        all_ok == NULL) {
        free(all_ok);
        ex_free(tp);
        return RMACOLL_ERR_NO_MEMORY;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(&mine, 0, sizeof(mine));
    mine.pid = (int64_t)getpid();
    mine.nsignals = env->nsignals;
    /* The plugin's own key (ops keys): example_cma.shm_prefix. */
    if (env->struct_size >= offsetof(rmacoll_transport_env_t, config_get) + sizeof(void *) &&
        env->config_get != NULL &&
        env->config_get(env->config, "example_cma.shm_prefix", prefix, sizeof(prefix)) ==
            RMACOLL_SUCCESS) {
        if (prefix[0] != '/' || strchr(prefix + 1, '/') != NULL) {
            EX_LOG(tp, RMACOLL_LOG_ERROR, "example_cma: shm_prefix '%s' is not a POSIX "
                   "shared-memory name ('/' then no other '/')", prefix);
            free(all_ok);
            ex_free(tp);
            return RMACOLL_ERR_CONFIG;
        }
    }
    snprintf(mine.shm_name, sizeof(mine.shm_name), "%.24s-%lld-%d-%lx", prefix,
             (long long)mine.pid, env->rank, (unsigned long)ts.tv_nsec);
    tp->shadow_bytes = (size_t)env->nsignals * sizeof(uint64_t) + 64;
    st = ex_map(mine.shm_name, tp->shadow_bytes, 1, &p);
    if (st == RMACOLL_SUCCESS) {
        tp->shadow = p;
    } else {
        EX_LOG(tp, RMACOLL_LOG_ERROR, "example_cma: cannot create %s (%zu bytes): %s",
               mine.shm_name, tp->shadow_bytes, strerror(errno));
    }
    /* every rank takes part in every exchange, even after a local error */
    if (env->allgather(env->oob_ctx, &mine, tp->addr, sizeof(mine)) != RMACOLL_SUCCESS) {
        st = RMACOLL_ERR_BOOTSTRAP;
    }
    for (int q = 0; st == RMACOLL_SUCCESS && q < env->nranks; q++) {
        if (q == env->rank || !env->peers[q]) {
            continue;
        }
        tp->peer_bytes[q] = (size_t)tp->addr[q].nsignals * sizeof(uint64_t) + 64;
        st = ex_map(tp->addr[q].shm_name, tp->peer_bytes[q], 0, &p);
        if (st != RMACOLL_SUCCESS) {
            EX_LOG(tp, RMACOLL_LOG_ERROR, "example_cma: cannot map %s of peer %d: %s",
                   tp->addr[q].shm_name, q, strerror(errno));
            tp->error_peer = q;
            break;
        }
        tp->peer_shadow[q] = p;
    }
    dummy = st == RMACOLL_SUCCESS;
    if (env->allgather(env->oob_ctx, &dummy, all_ok, sizeof(int)) != RMACOLL_SUCCESS) {
        st = RMACOLL_ERR_BOOTSTRAP;
    }
    if (tp->shadow != NULL) {
        shm_unlink(mine.shm_name);
    }
    for (int q = 0; st == RMACOLL_SUCCESS && q < env->nranks; q++) {
        if (!all_ok[q]) {
            st = RMACOLL_ERR_TRANSPORT;
            tp->error_peer = q;
        }
    }
    free(all_ok);
    if (st != RMACOLL_SUCCESS) {
        ex_free(tp);
        return st;
    }
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

static void ex_finalize(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        ex_free(tp);
    }
}

static rmacoll_status_t ex_mem_register(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                        rmacoll_memtype_t type, rmacoll_mem_t **mem,
                                        rmacoll_rkey_t *rkey)
{
    rmacoll_mem_t *m;

    if (tp == NULL || mem == NULL || addr == NULL || type != RMACOLL_MEM_HOST) {
        return type != RMACOLL_MEM_HOST ? RMACOLL_ERR_UNSUPPORTED : RMACOLL_ERR_INVALID_ARG;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    m->addr = addr;
    m->bytes = bytes;
    if (rkey != NULL) {
        memset(rkey, 0, sizeof(*rkey));
        rkey->addr = (uint64_t)(uintptr_t)addr;
        rkey->bytes = bytes;
    }
    *mem = m;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t ex_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    free(mem);
    return RMACOLL_SUCCESS;
}

/* Writes bytes into peer's address space, resuming partial writes. */
static rmacoll_status_t ex_write(rmacoll_transport_t *tp, const rmacoll_put_t *pt)
{
    uint64_t done = 0;

    while (done < pt->bytes) {
        struct iovec l = {(char *)pt->src + done, (size_t)(pt->bytes - done)};
        struct iovec r = {(void *)(uintptr_t)(pt->dst_addr + done), (size_t)(pt->bytes - done)};
        ssize_t n = process_vm_writev((pid_t)tp->addr[pt->peer].pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            EX_LOG(tp, RMACOLL_LOG_ERROR, "example_cma: writing %llu bytes to peer %d "
                   "failed: %s", (unsigned long long)(pt->bytes - done), pt->peer,
                   n < 0 ? strerror(errno) : "no progress");
            tp->error_peer = pt->peer;
            return RMACOLL_ERR_TRANSPORT;
        }
        done += (uint64_t)n;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t ex_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                     size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *pt = &puts[i];
        rmacoll_status_t st;

        if (pt->peer < 0 || pt->peer >= tp->nranks || tp->peer_shadow[pt->peer] == NULL) {
            EX_LOG(tp, RMACOLL_LOG_ERROR, "example_cma: put %zu names peer %d, which is "
                   "not a peer of this instance", i, pt->peer);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (pt->bytes > 0 && (st = ex_write(tp, pt)) != RMACOLL_SUCCESS) {
            return st;
        }
        if (pt->sig_index != RMACOLL_NO_SIGNAL) {
            if (pt->sig_index >= tp->addr[pt->peer].nsignals) {
                EX_LOG(tp, RMACOLL_LOG_ERROR, "example_cma: put %zu to peer %d signals "
                       "word %u of %llu", i, pt->peer, pt->sig_index,
                       (unsigned long long)tp->addr[pt->peer].nsignals);
                return RMACOLL_ERR_INVALID_ARG;
            }
            __atomic_store_n(&tp->peer_shadow[pt->peer][pt->sig_index], pt->sig_value,
                             __ATOMIC_RELEASE);
        }
    }
    return RMACOLL_SUCCESS;
}

/* Raises own signal words to what peers stored in the shadow. */
static rmacoll_status_t ex_progress(rmacoll_transport_t *tp)
{
    volatile uint64_t *sig = tp->env->signals;

    for (uint32_t i = 0; i < tp->env->nsignals; i++) {
        uint64_t v = __atomic_load_n(&tp->shadow[i], __ATOMIC_ACQUIRE);
        if (v > __atomic_load_n(&sig[i], __ATOMIC_RELAXED)) {
            __atomic_store_n(&sig[i], v, __ATOMIC_RELEASE);
        }
    }
    return RMACOLL_SUCCESS;
}

static size_t ex_pending(rmacoll_transport_t *tp)
{
    return 0; /* writes complete in the system call */
}

static int ex_error_peer(rmacoll_transport_t *tp)
{
    return tp != NULL ? tp->error_peer : -1;
}

#define EX_DESC "example plugin: cross-memory attach + shared-memory signal words (one host)"

#if EXAMPLE_ABI == 2
/* Its configuration keys: "example_cma.<name>" in YAML, the environment
 * (RMACOLL_EXAMPLE_CMA_<NAME>) and rmacoll_config_set. */
static const rmacoll_transport_key_t ex_keys[] = {
    {"shm_prefix", RMACOLL_CONFIG_STRING, "/rmacoll-excma",
     "prefix of the POSIX shared-memory segment names ('/' then no other '/')", 0, 0},
};

static const rmacoll_transport_base_ops_t ex_base = {
    .size = sizeof(rmacoll_transport_base_ops_t),
    .init = ex_init,
    .finalize = ex_finalize,
    .progress = ex_progress,
    .pending = ex_pending,
    .error_peer = ex_error_peer,
};

static const rmacoll_transport_mem_ops_t ex_mem = {
    .size = sizeof(rmacoll_transport_mem_ops_t),
    .mem_register = ex_mem_register,
    .mem_deregister = ex_mem_deregister,
};

static const rmacoll_transport_host_ops_t ex_host = {
    .size = sizeof(rmacoll_transport_host_ops_t),
    .post_puts = ex_post_puts,
};

const rmacoll_transport_ops_t RMACOLL_TRANSPORT_PLUGIN_SYMBOL = {
    .abi_version = RMACOLL_TRANSPORT_ABI_VERSION,
    .struct_size = sizeof(rmacoll_transport_ops_t),
    .name = "example_cma",
    .desc = EX_DESC,
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST,
    .base = &ex_base,
    .mem = &ex_mem,
    .host = &ex_host,
    .keys = ex_keys,
    .nkeys = sizeof(ex_keys) / sizeof(ex_keys[0]),
};
#else
/* The flat table of ABI version 1, as a plugin built against that header
 * declared it (its rmacoll_transport_ops_t). */
typedef struct ex_ops_v1 {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *name;
    const char *desc;
    uint64_t caps;
    rmacoll_status_t (*init)(const rmacoll_transport_env_t *, rmacoll_transport_t **);
    void (*finalize)(rmacoll_transport_t *);
    rmacoll_status_t (*mem_register)(rmacoll_transport_t *, void *, size_t, rmacoll_memtype_t,
                                     rmacoll_mem_t **, rmacoll_rkey_t *);
    rmacoll_status_t (*mem_deregister)(rmacoll_transport_t *, rmacoll_mem_t *);
    rmacoll_status_t (*post_puts)(rmacoll_transport_t *, const rmacoll_put_t *, size_t);
    rmacoll_status_t (*progress)(rmacoll_transport_t *);
    size_t (*pending)(rmacoll_transport_t *);
    int (*error_peer)(rmacoll_transport_t *);
    void *cuda_ops[5]; /* mem_export .. signal_stream: none here */
} ex_ops_v1_t;

#if EXAMPLE_ABI == 1
const ex_ops_v1_t rmacoll_transport_plugin_v1 = {
#else
const ex_ops_v1_t rmacoll_transport_plugin_v0 = {
#endif
    .abi_version = EXAMPLE_ABI,
    .struct_size = sizeof(ex_ops_v1_t),
    .name = "example_cma",
    .desc = EX_DESC,
    .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST,
    .init = ex_init,
    .finalize = ex_finalize,
    .mem_register = ex_mem_register,
    .mem_deregister = ex_mem_deregister,
    .post_puts = ex_post_puts,
    .progress = ex_progress,
    .pending = ex_pending,
    .error_peer = ex_error_peer,
};
#endif
