/*
 * ce_init.c - init and finalize of the copy-engine transport ("ce"): every
 * rank publishes its pid and a probe word (one allgather), probes each node
 * peer by cross-memory attach (the word read back proves the pid names the
 * peer's process, written back proves permission), and all ranks agree
 * (another allgather): init fails on every rank if one rank cannot reach a
 * peer. Then the shared host allocations and, with CUDA, the CUDA backend.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"
#include "transports/common/tclock.h"
#include "transports/common/tops.h"

#define CE_BLOB_VERSION 2u

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

const char *rmacoll__ce_strerror(int err, char *buf, size_t len)
{
    return strerror_r(err, buf, len); /* GNU variant: returns the string */
}

/* Contents of /proc/sys/kernel/yama/ptrace_scope, or "absent". */
void rmacoll__ce_ptrace_scope(char *out, size_t len)
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

    if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != (ssize_t)sizeof(n)) {
        n = rmacoll__tclock_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)salt;
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
    const char *e = rmacoll__ce_strerror(err, ebuf, sizeof(ebuf));

    switch (err) {
    case EPERM:
    case EACCES:
        rmacoll__ce_ptrace_scope(scope, sizeof(scope));
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: cross-memory attach to peer %d (pid %d) not permitted "
               "(%s probe: %s): it needs ptrace permission; set "
               "/proc/sys/kernel/yama/ptrace_scope to 0 (now %s) or grant "
               "CAP_SYS_PTRACE, and run all ranks of a node as one user",
               peer, (int)pid, what, e, scope);
        break;
    case ESRCH:
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: peer %d (pid %d) not found (%s probe: %s): it exited, "
               "or it runs in another pid namespace",
               peer, (int)pid, what, e);
        break;
    case ENOSYS:
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: cross-memory attach to peer %d (pid %d) unavailable "
               "(%s probe: %s): kernel without CONFIG_CROSS_MEMORY_ATTACH "
               "or blocked by seccomp",
               peer, (int)pid, what, e);
        break;
    default:
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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
        CE_LOG(tp, RMACOLL_LOG_ERROR,
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

/* 1. Every rank's pid, probe word and directory fd (collective). */
static rmacoll_status_t ce_exchange_blobs(rmacoll_transport_t *tp, ce_blob_t *all)
{
    const rmacoll_transport_env_t *env = tp->env;
    ce_blob_t mine;
    rmacoll_status_t st;

    memset(&mine, 0, sizeof(mine));
    mine.version = CE_BLOB_VERSION;
    mine.pid = (uint64_t)getpid();
    mine.probe_addr = (uint64_t)(uintptr_t)&tp->probe_word;
    mine.nonce = tp->probe_nonce;
    mine.dir_fd = tp->dir_fd;
    st = env->allgather(env->oob_ctx, &mine, all, sizeof(mine));
    if (st != RMACOLL_SUCCESS) {
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: allgather of %zu-byte addresses failed: %s", sizeof(mine),
               rmacoll_status_string(st));
    }
    return st;
}

/* 2. Probes every node peer (local: no communication) until one fails;
 * *verdict receives the outcome. */
static void ce_probe_all(rmacoll_transport_t *tp, const ce_blob_t *all,
                         ce_verdict_t *verdict)
{
    const rmacoll_transport_env_t *env = tp->env;

    for (int p = 0; p < env->nranks; p++) {
        tp->pids[p] = (pid_t)all[p].pid;
        if (p == env->rank || !env->peers[p] || verdict->ok == 0) {
            continue;
        }
        if (all[p].version != CE_BLOB_VERSION || all[p].pid == 0) {
            CE_LOG(tp, RMACOLL_LOG_ERROR,
                   "ce: peer %d sent address version %llu, this rank "
                   "expects %u (mixed library builds?)",
                   p, (unsigned long long)all[p].version, CE_BLOB_VERSION);
            verdict->ok = 0;
            verdict->bad_peer = p;
            continue;
        }
        if (ce_probe_peer(tp, p, &all[p]) != RMACOLL_SUCCESS) {
            verdict->ok = 0;
            verdict->bad_peer = p;
        }
        rmacoll__ce_shared_peer(tp, p, all[p].dir_fd);
    }
}

/* 3. Agrees (collective): all ranks fail if one cannot reach a peer. This
 * also keeps every probe word alive until all probes are done. */
static rmacoll_status_t ce_agree(rmacoll_transport_t *tp, const ce_verdict_t *verdict,
                                 ce_verdict_t *verdicts)
{
    const rmacoll_transport_env_t *env = tp->env;
    rmacoll_status_t st;
    int bad_rank = -1;

    st = env->allgather(env->oob_ctx, verdict, verdicts, sizeof(*verdict));
    if (st != RMACOLL_SUCCESS) {
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: allgather of %zu-byte init verdicts failed: %s",
               sizeof(*verdict), rmacoll_status_string(st));
        return st;
    }
    for (int p = 0; p < env->nranks; p++) {
        if (!verdicts[p].ok) {
            bad_rank = p;
            break;
        }
    }
    if (bad_rank >= 0) {
        if (bad_rank != env->rank || verdict->ok) {
            CE_LOG(tp, RMACOLL_LOG_ERROR,
                   "ce: init fails on all ranks: rank %d cannot reach peer "
                   "%d by cross-memory attach (cause in rank %d's log)",
                   bad_rank, verdicts[bad_rank].bad_peer, bad_rank);
        }
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ce_init(const rmacoll_transport_env_t *env,
                                  rmacoll_transport_t **tpp)
{
    rmacoll_transport_t *tp;
    ce_blob_t *all = NULL;
    ce_verdict_t verdict = {1, -1};
    ce_verdict_t *verdicts = NULL;
    rmacoll_status_t st;

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
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: out of memory for %d ranks' addresses", env->nranks);
        st = RMACOLL_ERR_NO_MEMORY;
        goto out;
    }
    st = ce_exchange_blobs(tp, all);
    if (st != RMACOLL_SUCCESS) {
        goto out;
    }
    ce_probe_all(tp, all, &verdict);
    st = ce_agree(tp, &verdict, verdicts);
    if (st != RMACOLL_SUCCESS) {
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

void rmacoll__ce_finalize(rmacoll_transport_t *tp)
{
    if (tp == NULL) {
        return;
    }
#ifdef RMACOLL_HAVE_CE_CUDA
    rmacoll__ce_cuda_finalize(tp);
#endif
    ce_free(tp);
}
