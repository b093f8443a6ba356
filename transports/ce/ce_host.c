/*
 * ce_host.c - the copy-engine transport ("ce") and its host backend.
 *
 * Node peers only. A put writes its bytes straight into the peer's process
 * at dst_addr (a virtual address in the PEER's address space: its receive
 * or relay buffer, published through its control window) with
 * cross-memory attach, process_vm_writev(2): one copy, no staging. Then the
 * signal: a release store of sig_value into the peer's signal word, which
 * the core has mapped here from the peer's shared control window
 * (env->peer_signals[peer]). A put to this rank itself is a memcpy and a
 * store into env->signals.
 *
 * Ordering: process_vm_writev copies on this thread, inside the system
 * call, and returns only when every byte is in the target's pages (there is
 * no asynchronous part). The release store is program-ordered after the
 * system call, so a target that reads the word with acquire semantics and
 * sees sig_value also sees the bytes (docs/transport-ce.md).
 *
 * Puts complete before post_puts returns: pending() is 0, progress() has
 * nothing to do. init checks, for every node peer, that cross-memory
 * attach is permitted and that the peer's pid names the peer's process
 * (not another process in another pid namespace), and fails on all ranks
 * together if any rank cannot reach one of its peers.
 *
 * The ops dispatch on memory type so that the CUDA backend (ce_cuda.c, see
 * ce.h; built with RMACOLL_HAVE_CE_CUDA) takes RMACOLL_MEM_CUDA buffers;
 * the stream ops of RMACOLL_TCAP_MEM_CUDA are the backend's functions.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"
#include "transports/common/tops.h"

#define CE_BLOB_VERSION 2u
#define CE_MAX_STALLS 16 /* retries of a call that moved no byte */

#define CE_LOG(tp_env, lvl, ...)                                           \
    do {                                                                   \
        if ((tp_env)->log != NULL) {                                       \
            (tp_env)->log((tp_env)->log_ctx, (lvl),                        \
                          RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);      \
        }                                                                  \
    } while (0)

/* What every rank contributes to init's first allgather. */
typedef struct ce_blob {
    uint64_t version;     /* CE_BLOB_VERSION */
    uint64_t pid;
    uint64_t probe_addr;  /* &tp->probe_word in that process */
    uint64_t nonce;       /* value of that word */
    int64_t dir_fd;       /* its shared-allocation directory's fd, or -1 */
} ce_blob_t;

/* What every rank contributes to init's second allgather. */
typedef struct ce_verdict {
    int32_t ok;        /* 1: reached every node peer */
    int32_t bad_peer;  /* first peer it could not reach, or -1 */
} ce_verdict_t;

static const char *ce_strerror(int err, char *buf, size_t len)
{
    return strerror_r(err, buf, len); /* GNU variant: returns the string */
}

/* Contents of /proc/sys/kernel/yama/ptrace_scope, or "absent". */
static void ce_ptrace_scope(char *out, size_t len)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v;

    if (f != NULL && fscanf(f, "%d", &v) == 1) {
        snprintf(out, len, "%d", v);
    } else {
        snprintf(out, len, "absent");
    }
    if (f != NULL) {
        fclose(f);
    }
}

static uint64_t ce_make_nonce(const void *salt)
{
    uint64_t n = 0;
    struct timespec ts;

    if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != (ssize_t)sizeof(n)) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        n = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
            ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)salt;
        n *= 0x9e3779b97f4a7c15ull;
    }
    return n != 0 ? n : 0x5a5a5a5a5a5a5a5aull;
}

/* Logs why cross-memory attach towards `peer` failed at init. */
static void ce_log_probe_failure(const rmacoll_transport_t *tp, int peer,
                                 pid_t pid, uint64_t addr, const char *what,
                                 int err)
{
    char ebuf[128];
    char scope[16];
    const char *e = ce_strerror(err, ebuf, sizeof(ebuf));

    switch (err) {
    case EPERM:
    case EACCES:
        ce_ptrace_scope(scope, sizeof(scope));
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: cross-memory attach to peer %d (pid %d) not permitted "
               "(%s probe: %s): it needs ptrace permission; set "
               "/proc/sys/kernel/yama/ptrace_scope to 0 (now %s) or grant "
               "CAP_SYS_PTRACE, and run all ranks of a node as one user",
               peer, (int)pid, what, e, scope);
        break;
    case ESRCH:
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: peer %d (pid %d) not found (%s probe: %s): it exited, "
               "or it runs in another pid namespace",
               peer, (int)pid, what, e);
        break;
    case ENOSYS:
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: cross-memory attach to peer %d (pid %d) unavailable "
               "(%s probe: %s): kernel without CONFIG_CROSS_MEMORY_ATTACH "
               "or blocked by seccomp",
               peer, (int)pid, what, e);
        break;
    default:
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: cross-memory attach to peer %d (pid %d) failed "
               "(%s probe of 8 bytes at 0x%llx: %s)",
               peer, (int)pid, what, (unsigned long long)addr, e);
        break;
    }
}

/*
 * Checks that this rank can write into peer's process: reads the peer's
 * probe word (it must hold the nonce the peer published, else the pid
 * names another process) and writes the same value back.
 * Errors: RMACOLL_ERR_TRANSPORT (logged, naming the peer and the cause).
 */
static rmacoll_status_t ce_probe_peer(rmacoll_transport_t *tp, int peer,
                                      const ce_blob_t *b)
{
    pid_t pid = (pid_t)b->pid;
    uint64_t seen = 0;
    struct iovec l = {&seen, sizeof(seen)};
    struct iovec r = {(void *)(uintptr_t)b->probe_addr, sizeof(seen)};
    ssize_t rc;

    do {
        rc = process_vm_readv(pid, &l, 1, &r, 1, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc != (ssize_t)sizeof(seen)) {
        ce_log_probe_failure(tp, peer, pid, b->probe_addr, "read",
                             rc < 0 ? errno : EIO);
        return RMACOLL_ERR_TRANSPORT;
    }
    if (seen != b->nonce) {
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: pid %d published by peer %d belongs to another process "
               "(probe word 0x%llx, expected 0x%llx): ranks of one node "
               "must share a pid namespace",
               (int)pid, peer, (unsigned long long)seen,
               (unsigned long long)b->nonce);
        return RMACOLL_ERR_TRANSPORT;
    }
    do {
        rc = process_vm_writev(pid, &l, 1, &r, 1, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc != (ssize_t)sizeof(seen)) {
        ce_log_probe_failure(tp, peer, pid, b->probe_addr, "write",
                             rc < 0 ? errno : EIO);
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

static void ce_free(rmacoll_transport_t *tp)
{
    if (tp != NULL) {
        if (tp->pidfd != NULL) {
            rmacoll__ce_shared_finalize(tp);
        }
        free(tp->pids);
        free(tp);
    }
}

static rmacoll_status_t ce_init(const rmacoll_transport_env_t *env,
                                rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    ce_blob_t mine;
    ce_blob_t *all = NULL;
    ce_verdict_t verdict = {1, -1};
    ce_verdict_t *verdicts = NULL;
    rmacoll_status_t st;
    int bad_rank = -1;

    tp = rmacoll__tops_new(env, tpp, 1, sizeof(*tp), &st);
    if (tp == NULL) {
        return st;
    }
    tp->env = env;
    tp->rank = env->rank;
    tp->nranks = env->nranks;
    tp->iov_max = RMACOLL__CE_IOV_MAX_DEFAULT;
    tp->error_peer = -1;
    tp->probe_nonce = ce_make_nonce(tp);
    tp->probe_word = tp->probe_nonce;
    tp->pids = calloc((size_t)env->nranks, sizeof(*tp->pids));
    all = calloc((size_t)env->nranks, sizeof(*all));
    verdicts = calloc((size_t)env->nranks, sizeof(*verdicts));
    if (tp->pids == NULL || all == NULL || verdicts == NULL ||
        rmacoll__ce_shared_init(tp) != RMACOLL_SUCCESS) {
        /* Every rank allocates the same sizes; failing here is collective
         * only by luck, which the core's own timeouts must cover. */
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: out of memory for %d ranks' addresses", env->nranks);
        st = RMACOLL_ERR_NO_MEMORY;
        goto out;
    }

    /* 1. Exchange pids and probe addresses (collective). */
    memset(&mine, 0, sizeof(mine));
    mine.version = CE_BLOB_VERSION;
    mine.pid = (uint64_t)getpid();
    mine.probe_addr = (uint64_t)(uintptr_t)&tp->probe_word;
    mine.nonce = tp->probe_nonce;
    mine.dir_fd = tp->dir_fd;
    st = env->allgather(env->oob_ctx, &mine, all, sizeof(mine));
    if (st != RMACOLL_SUCCESS) {
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: allgather of %zu-byte addresses failed: %s", sizeof(mine),
               rmacoll_status_string(st));
        goto out;
    }

    /* 2. Probe every node peer (local: no communication). */
    for (int p = 0; p < env->nranks; p++) {
        tp->pids[p] = (pid_t)all[p].pid;
        if (p == env->rank || !env->peers[p] || verdict.ok == 0) {
            continue;
        }
        if (all[p].version != CE_BLOB_VERSION || all[p].pid == 0) {
            CE_LOG(env, RMACOLL_LOG_ERROR,
                   "ce: peer %d sent address version %llu, this rank "
                   "expects %u (mixed library builds?)",
                   p, (unsigned long long)all[p].version, CE_BLOB_VERSION);
            verdict.ok = 0;
            verdict.bad_peer = p;
            continue;
        }
        if (ce_probe_peer(tp, p, &all[p]) != RMACOLL_SUCCESS) {
            verdict.ok = 0;
            verdict.bad_peer = p;
        }
        rmacoll__ce_shared_peer(tp, p, all[p].dir_fd);
    }

    /* 3. Agree (collective): all ranks fail if one cannot reach a peer.
     * This also keeps every probe word alive until all probes are done. */
    st = env->allgather(env->oob_ctx, &verdict, verdicts, sizeof(verdict));
    if (st != RMACOLL_SUCCESS) {
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: allgather of %zu-byte init verdicts failed: %s",
               sizeof(verdict), rmacoll_status_string(st));
        goto out;
    }
    for (int p = 0; p < env->nranks; p++) {
        if (!verdicts[p].ok) {
            bad_rank = p;
            break;
        }
    }
    if (bad_rank >= 0) {
        if (bad_rank != env->rank || verdict.ok) {
            CE_LOG(env, RMACOLL_LOG_ERROR,
                   "ce: init fails on all ranks: rank %d cannot reach peer "
                   "%d by cross-memory attach (cause in rank %d's log)",
                   bad_rank, verdicts[bad_rank].bad_peer, bad_rank);
        }
        st = RMACOLL_ERR_TRANSPORT;
        goto out;
    }

#ifdef RMACOLL_HAVE_CE_CUDA
    st = rmacoll__ce_cuda_init(tp);
    if (st != RMACOLL_SUCCESS) {
        goto out;
    }
#endif
    st = RMACOLL_SUCCESS;
out:
    free(all);
    free(verdicts);
    if (st != RMACOLL_SUCCESS) {
        ce_free(tp);
        return st;
    }
    *tpp = tp;
    return RMACOLL_SUCCESS;
}

static void ce_finalize(rmacoll_transport_t *tp)
{
    if (tp == NULL) {
        return;
    }
#ifdef RMACOLL_HAVE_CE_CUDA
    rmacoll__ce_cuda_finalize(tp);
#endif
    ce_free(tp);
}

rmacoll_status_t rmacoll__ce_set_iov_max(rmacoll_transport_t *tp,
                                         uint64_t bytes)
{
    if (tp == NULL || bytes == 0 || bytes > RMACOLL__CE_IOV_MAX_DEFAULT) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp->iov_max = bytes;
    return RMACOLL_SUCCESS;
}

/*
 * Host memory needs no registration for cross-memory attach: the handle is
 * NULL and the rkey only records the range. So a non-NULL handle is always
 * a CUDA backend's.
 */
static rmacoll_status_t ce_mem_register(rmacoll_transport_t *tp, void *addr,
                                        size_t bytes, rmacoll_memtype_t type,
                                        rmacoll_mem_t **mem,
                                        rmacoll_rkey_t *rkey)
{
    if (tp == NULL || mem == NULL || (addr == NULL && bytes > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *mem = NULL;
    switch (type) {
    case RMACOLL_MEM_HOST:
        if (rkey != NULL) {
            memset(rkey, 0, sizeof(*rkey));
            rkey->addr = (uint64_t)(uintptr_t)addr;
            rkey->bytes = (uint64_t)bytes;
        }
#ifdef RMACOLL_HAVE_CE_CUDA
        /* with a GPU, host memory is pinned so that stream copies to and
         * from it stay asynchronous (staging buffers) */
        if (tp->cuda != NULL && bytes > 0) {
            return rmacoll__ce_cuda_host_pin(tp, addr, bytes, mem);
        }
#endif
        return RMACOLL_SUCCESS;
    case RMACOLL_MEM_CUDA:
#ifdef RMACOLL_HAVE_CE_CUDA
        return rmacoll__ce_cuda_mem_register(tp, addr, bytes, mem, rkey);
#else
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: cannot register %zu bytes of CUDA memory at %p: this "
               "build has no CUDA backend", bytes, addr);
        return RMACOLL_ERR_UNSUPPORTED;
#endif
    }
    return RMACOLL_ERR_INVALID_ARG;
}

static rmacoll_status_t ce_mem_deregister(rmacoll_transport_t *tp,
                                          rmacoll_mem_t *mem)
{
    if (mem == NULL) {
        return RMACOLL_SUCCESS; /* host registrations are NULL */
    }
#ifdef RMACOLL_HAVE_CE_CUDA
    return rmacoll__ce_cuda_mem_deregister(tp, mem);
#else
    return RMACOLL_ERR_INVALID_ARG;
#endif
}

/* mem_alloc / mem_free: host memory shared with node peers (ce_shared.c),
 * CUDA memory from the CUDA backend. */
static rmacoll_status_t ce_mem_alloc(rmacoll_transport_t *tp, size_t bytes,
                                     rmacoll_memtype_t type, void **addr)
{
    if (tp == NULL || addr == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *addr = NULL;
    if (type == RMACOLL_MEM_HOST) {
        return bytes == 0 ? RMACOLL_ERR_UNSUPPORTED : rmacoll__ce_shared_alloc(tp, bytes, addr);
    }
#ifdef RMACOLL_HAVE_CE_CUDA
    return rmacoll__ce_cuda_mem_alloc(tp, bytes, type, addr);
#else
    return RMACOLL_ERR_UNSUPPORTED;
#endif
}

static void ce_mem_free(rmacoll_transport_t *tp, void *addr, rmacoll_memtype_t type)
{
    if (tp == NULL || addr == NULL) {
        return;
    }
    if (type == RMACOLL_MEM_HOST) {
        (void)rmacoll__ce_shared_free(tp, addr);
        return;
    }
#ifdef RMACOLL_HAVE_CE_CUDA
    rmacoll__ce_cuda_mem_free(tp, addr, type);
#endif
}

static rmacoll_status_t ce_mem_unshare(rmacoll_transport_t *tp, void *addr, size_t bytes)
{
    return tp == NULL ? RMACOLL_ERR_INVALID_ARG : rmacoll__ce_shared_unshare(tp, addr, bytes);
}

/* Translates and logs a failed process_vm_writev of one put. */
static rmacoll_status_t ce_cma_error(rmacoll_transport_t *tp, int peer,
                                     int err, uint64_t dst, uint64_t bytes,
                                     uint64_t done)
{
    char ebuf[128];
    char scope[16];
    const char *e = ce_strerror(err, ebuf, sizeof(ebuf));
    pid_t pid = tp->pids[peer];

    tp->error_peer = -1;
    switch (err) {
    case ESRCH:
        tp->error_peer = peer;
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: peer %d (pid %d) is gone: put of %llu bytes to 0x%llx "
               "stopped after %llu bytes: %s",
               peer, (int)pid, (unsigned long long)bytes,
               (unsigned long long)dst, (unsigned long long)done, e);
        return RMACOLL_ERR_PEER;
    case EFAULT:
        /* the source was validated and is ours: the destination is no
         * longer mapped in the peer (it freed its receive buffer, most
         * likely after an error of its own) */
        tp->error_peer = peer;
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d (pid %d) at 0x%llx faulted after "
               "%llu bytes: %s (the destination is not mapped in the peer: it freed "
               "or unmapped its receive buffer, or this rank's source is unreadable)",
               (unsigned long long)bytes, peer, (int)pid, (unsigned long long)dst,
               (unsigned long long)done, e);
        return RMACOLL_ERR_PEER;
    case ENOMEM:
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d at 0x%llx: out of kernel "
               "memory after %llu bytes", (unsigned long long)bytes, peer,
               (unsigned long long)dst, (unsigned long long)done);
        return RMACOLL_ERR_NO_MEMORY;
    case EPERM:
    case EACCES:
        ce_ptrace_scope(scope, sizeof(scope));
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d (pid %d) not permitted: %s "
               "(ptrace permission; /proc/sys/kernel/yama/ptrace_scope is "
               "%s, or CAP_SYS_PTRACE)",
               (unsigned long long)bytes, peer, (int)pid, e, scope);
        return RMACOLL_ERR_TRANSPORT;
    default:
        CE_LOG(tp->env, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d (pid %d) at 0x%llx failed "
               "after %llu bytes: %s",
               (unsigned long long)bytes, peer, (int)pid,
               (unsigned long long)dst, (unsigned long long)done, e);
        return RMACOLL_ERR_TRANSPORT;
    }
}

/*
 * Writes [src, src + bytes) to dst in peer's process, in calls of at most
 * tp->iov_max bytes, continuing after partial writes.
 */
static rmacoll_status_t ce_cma_write(rmacoll_transport_t *tp, int peer,
                                     const void *src, uint64_t dst,
                                     uint64_t bytes)
{
    uint64_t done = 0;
    int stalls = 0;

    while (done < bytes) {
        uint64_t len = bytes - done;
        struct iovec l;
        struct iovec r;
        ssize_t rc;

        if (len > tp->iov_max) {
            len = tp->iov_max;
        }
        l.iov_base = (void *)((const char *)src + done);
        l.iov_len = (size_t)len;
        r.iov_base = (void *)(uintptr_t)(dst + done);
        r.iov_len = (size_t)len;
        rc = process_vm_writev(tp->pids[peer], &l, 1, &r, 1, 0);
        if (rc > 0) {
            done += (uint64_t)rc;
            stalls = 0;
            continue;
        }
        if (++stalls < CE_MAX_STALLS && (rc == 0 || errno == EINTR)) {
            continue;
        }
        return ce_cma_error(tp, peer, rc == 0 ? EIO : errno, dst, bytes,
                            done);
    }
    return RMACOLL_SUCCESS;
}

/* Checks one put before anything is written. */
static rmacoll_status_t ce_check_put(rmacoll_transport_t *tp,
                                     const rmacoll_put_t *p, size_t i,
                                     volatile uint64_t **words)
{
    const rmacoll_transport_env_t *env = tp->env;
    uint32_t nwords;

    *words = NULL;
    if (p->peer < 0 || p->peer >= tp->nranks) {
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: put %zu names peer %d, outside [0, %d)", i, p->peer,
               tp->nranks);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->bytes > 0 &&
        (p->src == NULL || p->dst_addr == 0 ||
         p->dst_addr + p->bytes < p->dst_addr)) {
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: put %zu of %llu bytes to peer %d has src %p, dst 0x%llx",
               i, (unsigned long long)p->bytes, p->peer, p->src,
               (unsigned long long)p->dst_addr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->peer != tp->rank && (!env->peers[p->peer] ||
                                tp->pids[p->peer] <= 0)) {
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: put %zu of %llu bytes names peer %d, which is not a "
               "node peer of this ce instance",
               i, (unsigned long long)p->bytes, p->peer);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->sig_index == RMACOLL_NO_SIGNAL) {
        return RMACOLL_SUCCESS;
    }
    if (p->peer == tp->rank) {
        *words = env->signals;
    } else if (env->peer_signals != NULL) {
        *words = (volatile uint64_t *)env->peer_signals[p->peer];
    }
    nwords = (p->peer != tp->rank && env->peer_nsignals != NULL)
                 ? env->peer_nsignals[p->peer]
                 : env->nsignals;
    if (*words == NULL || p->sig_index >= nwords) {
        CE_LOG(env, RMACOLL_LOG_ERROR,
               "ce: put %zu to peer %d signals word %u of %u%s", i, p->peer,
               p->sig_index, nwords,
               *words == NULL ? ", but the peer's signal words are not mapped"
                              : "");
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

/* Host backend: puts complete, in order, before this returns. */
static rmacoll_status_t ce_host_post_puts(rmacoll_transport_t *tp,
                                          const rmacoll_put_t *puts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const rmacoll_put_t *p = &puts[i];
        volatile uint64_t *words;
        rmacoll_status_t st = ce_check_put(tp, p, i, &words);

        if (st != RMACOLL_SUCCESS) {
            tp->error_peer = -1;
            return st;
        }
        if (p->bytes > 0) {
            void *direct;

            if (p->peer == tp->rank) {
                memcpy((void *)(uintptr_t)p->dst_addr, p->src,
                       (size_t)p->bytes);
            } else if ((direct = rmacoll__ce_shared_lookup(tp, p->peer, p->dst_addr,
                                                           p->bytes)) != NULL) {
                /* into the peer's shared allocation (ce_shared.c) */
                memcpy(direct, p->src, (size_t)p->bytes);
            } else {
                st = ce_cma_write(tp, p->peer, p->src, p->dst_addr,
                                  p->bytes);
                if (st != RMACOLL_SUCCESS) {
                    return st;
                }
            }
        }
        if (words != NULL) {
            /* The bytes are in the target's pages (the copy finished on
             * this thread); release orders them before the word. */
            __atomic_store_n(&words[p->sig_index], p->sig_value,
                             __ATOMIC_RELEASE);
        }
    }
    return RMACOLL_SUCCESS;
}

/* Memory type of a queue: host unless the CUDA backend claims it. */
static rmacoll_memtype_t ce_queue_memtype(rmacoll_transport_t *tp,
                                          const rmacoll_put_t *puts, size_t n)
{
#ifdef RMACOLL_HAVE_CE_CUDA
    return rmacoll__ce_cuda_queue_memtype(tp, puts, n);
#else
    return RMACOLL_MEM_HOST;
#endif
}

static rmacoll_status_t ce_post_puts(rmacoll_transport_t *tp,
                                     const rmacoll_put_t *puts, size_t n)
{
    if (tp == NULL || (puts == NULL && n > 0)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return RMACOLL_SUCCESS;
    }
    switch (ce_queue_memtype(tp, puts, n)) {
    case RMACOLL_MEM_HOST:
        return ce_host_post_puts(tp, puts, n);
    case RMACOLL_MEM_CUDA:
#ifdef RMACOLL_HAVE_CE_CUDA
        return rmacoll__ce_cuda_post_puts(tp, puts, n);
#else
        break;
#endif
    }
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t ce_progress(rmacoll_transport_t *tp)
{
#ifdef RMACOLL_HAVE_CE_CUDA
    return rmacoll__ce_cuda_progress(tp);
#else
    return RMACOLL_SUCCESS; /* host puts complete in post_puts */
#endif
}

static size_t ce_pending(rmacoll_transport_t *tp)
{
#ifdef RMACOLL_HAVE_CE_CUDA
    return rmacoll__ce_cuda_pending(tp);
#else
    return 0;
#endif
}

RMACOLL__TOPS_ERROR_PEER_FN(ce_error_peer, error_peer)

const rmacoll_transport_ops_t rmacoll_transport_ce_ops = {
    RMACOLL__TOPS_ABI,
    .name = "ce",
#ifdef RMACOLL_HAVE_CE_CUDA
    .desc = "node peers: cross-memory attach (host), copy engine over IPC (CUDA)",
    .caps = RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_HOST | RMACOLL_TCAP_MEM_CUDA |
            RMACOLL_TCAP_HOST_CUDA,
#else
    .desc = "node peers: cross-memory attach into the peer process (host memory)",
    .caps = RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_HOST,
#endif
    .base = RMACOLL__TOPS_BASE(.init = ce_init, .finalize = ce_finalize,
                               .progress = ce_progress, .pending = ce_pending,
                               .error_peer = ce_error_peer),
#ifdef RMACOLL_HAVE_CE_CUDA
    .mem = RMACOLL__TOPS_MEM(.mem_register = ce_mem_register,
                             .mem_deregister = ce_mem_deregister,
                             .mem_export = rmacoll__ce_cuda_mem_export,
                             .mem_import = rmacoll__ce_cuda_mem_import,
                             .mem_alloc = ce_mem_alloc,
                             .mem_free = ce_mem_free,
                             .mem_unshare = ce_mem_unshare),
    /* CUDA memory on the user's stream */
    .stream = RMACOLL__TOPS_STREAM(.post_puts_stream = rmacoll__ce_cuda_post_puts_stream,
                                   .wait_stream = rmacoll__ce_cuda_wait_stream,
                                   .signal_stream = rmacoll__ce_cuda_signal_stream,
                                   .set_device_signals =
                                       rmacoll__ce_cuda_set_device_signals),
#else
    .mem = RMACOLL__TOPS_MEM(.mem_register = ce_mem_register,
                             .mem_deregister = ce_mem_deregister,
                             .mem_alloc = ce_mem_alloc,
                             .mem_free = ce_mem_free,
                             .mem_unshare = ce_mem_unshare),
#endif
    .host = RMACOLL__TOPS_HOST(.post_puts = ce_post_puts),
};
