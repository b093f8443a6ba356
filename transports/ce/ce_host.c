/*
 * ce_host.c - the copy-engine transport ("ce"): its ops table, the
 * dispatch on memory type, and the host backend's puts (init: ce_init.c).
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
#include <sys/uio.h>
#include <unistd.h>

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"
#include "transports/common/tops.h"

#define CE_MAX_STALLS 16 /* retries of a call that moved no byte */

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
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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
    const char *e = rmacoll__ce_strerror(err, ebuf, sizeof(ebuf));
    pid_t pid = tp->pids[peer];

    tp->error_peer = -1;
    switch (err) {
    case ESRCH:
        tp->error_peer = peer;
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d (pid %d) at 0x%llx faulted after "
               "%llu bytes: %s (the destination is not mapped in the peer: it freed "
               "or unmapped its receive buffer, or this rank's source is unreadable)",
               (unsigned long long)bytes, peer, (int)pid, (unsigned long long)dst,
               (unsigned long long)done, e);
        return RMACOLL_ERR_PEER;
    case ENOMEM:
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d at 0x%llx: out of kernel "
               "memory after %llu bytes", (unsigned long long)bytes, peer,
               (unsigned long long)dst, (unsigned long long)done);
        return RMACOLL_ERR_NO_MEMORY;
    case EPERM:
    case EACCES:
        rmacoll__ce_ptrace_scope(scope, sizeof(scope));
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: put of %llu bytes to peer %d (pid %d) not permitted: %s "
               "(ptrace permission; /proc/sys/kernel/yama/ptrace_scope is "
               "%s, or CAP_SYS_PTRACE)",
               (unsigned long long)bytes, peer, (int)pid, e, scope);
        return RMACOLL_ERR_TRANSPORT;
    default:
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: put %zu names peer %d, outside [0, %d)", i, p->peer,
               tp->nranks);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->bytes > 0 &&
        (p->src == NULL || p->dst_addr == 0 ||
         p->dst_addr + p->bytes < p->dst_addr)) {
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: put %zu of %llu bytes to peer %d has src %p, dst 0x%llx",
               i, (unsigned long long)p->bytes, p->peer, p->src,
               (unsigned long long)p->dst_addr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (p->peer != tp->rank && (!env->peers[p->peer] ||
                                tp->pids[p->peer] <= 0)) {
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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
    .base = RMACOLL__TOPS_BASE(.init = rmacoll__ce_init, .finalize = rmacoll__ce_finalize,
                               .progress = ce_progress, .pending = ce_pending,
                               .error_peer = ce_error_peer),
#ifdef RMACOLL_HAVE_CE_CUDA
    .mem = RMACOLL__TOPS_MEM(.mem_register = ce_mem_register,
                             .mem_deregister = ce_mem_deregister,
                             .mem_export = rmacoll__ce_cuda_mem_export,
                             .mem_import = rmacoll__ce_cuda_mem_import,
                             .mem_alloc = ce_mem_alloc,
                             .mem_free = ce_mem_free,
                             .mem_unshare = ce_mem_unshare,
                             .mem_type = rmacoll__ce_cuda_mem_type),
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
