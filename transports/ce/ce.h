/*
 * ce.h - private to the copy-engine transport ("ce"): the instance shared by
 * its backends, and the hooks a backend provides.
 *
 * The ops table rmacoll_transport_ce_ops lives in ce_host.c, init and
 * finalize (the probe of every node peer) in ce_init.c. Its ops take
 * the memory type of the buffers involved (mem_register's `type`, the
 * queue's memory type for post_puts) and dispatch: RMACOLL_MEM_HOST to the
 * host backend in ce_host.c (cross-memory attach), RMACOLL_MEM_CUDA to the
 * CUDA backend (ce_cuda.c, built with RMACOLL_HAVE_CE_CUDA) through the
 * rmacoll__ce_cuda_* functions declared below. Without the CUDA backend,
 * CUDA memory is refused with RMACOLL_ERR_UNSUPPORTED.
 *
 * Nothing here is thread-safe but mem_alloc / mem_free of host memory
 * (rmacoll_mem_alloc's, under dir_lock): one instance belongs to one
 * communicator, which one thread uses at a time.
 */
#ifndef RMACOLL_TRANSPORT_CE_H
#define RMACOLL_TRANSPORT_CE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "rmacoll_transport.h"
#include "transports/common/tlog.h"

/* Default largest single process_vm_writev length (bytes). The kernel caps
 * one call at MAX_RW_COUNT (2 GiB - 4 KiB); larger puts are split. */
#define RMACOLL__CE_IOV_MAX_DEFAULT (1ull << 30)

/* CUDA backend state (ce_cuda.c); declared in every build so that the
 * instance has one layout whatever includes this header. */
typedef struct rmacoll__ce_cuda rmacoll__ce_cuda_t;

/* Shared host allocations (ce_shared.c): slots of a rank's directory, and
 * peers' allocations a rank keeps mapped. */
#define CE_DIR_SLOTS 256
#define CE_MAP_MAX 64
struct rmacoll__ce_dir;
typedef struct rmacoll__ce_map {
    int peer;
    uint64_t serial;   /* the owner's allocation serial */
    uint64_t raddr;    /* its address in the owner */
    uint64_t bytes;
    void *local;       /* its mapping here */
} rmacoll__ce_map_t;

/* One ce instance (what init returns as rmacoll_transport_t). */
struct rmacoll_transport {
    const rmacoll_transport_env_t *env; /* borrowed; valid until finalize */
    int rank;
    int nranks;
    pid_t *pids;             /* [nranks]: pid of every rank (0 = unknown) */
    uint64_t iov_max;        /* largest length of one process_vm_writev */
    int error_peer;          /* peer of the last failure, or -1 */
    /* Target of the peers' CMA probe at init: holds probe_nonce, which
     * peers read back (identity check) and rewrite (permission check). */
    volatile uint64_t probe_word;
    uint64_t probe_nonce;
    rmacoll__ce_cuda_t *cuda;  /* NULL: no CUDA backend or no usable GPU */
    /* Why cuda is NULL (CUDA builds): RMACOLL_ERR_NO_DEVICE or
     * RMACOLL_ERR_CUDA, and a message naming the cause. */
    rmacoll_status_t cuda_status;
    char cuda_why[256];
    /* shared host allocations (ce_shared.c) */
    struct rmacoll__ce_dir *dir;     /* own directory (what peers read), NULL: none */
    int dir_fd;
    uint64_t dir_serial;
    struct {                         /* own allocations (private: not what peers see) */
        void *addr;                  /* NULL: free slot */
        size_t bytes;
        int fd;                      /* -1 once unshared */
        int unshared;                /* a private copy replaced the shared pages */
    } own[CE_DIR_SLOTS];
    int slot_cap;                    /* slots in use at most: min(256, RLIMIT_NOFILE / 4) */
    int unshared;                    /* mem_unshare ran: no new shared allocations */
    pid_t owner_pid;                 /* a forked child never changes the directory */
    pthread_mutex_t dir_lock;        /* alloc and free (user threads) */
    const struct rmacoll__ce_dir **peer_dir; /* [nranks]: mapped on first use */
    uint8_t *peer_dir_state;         /* [nranks] */
    int64_t *peer_dir_fd;            /* [nranks]: fd of its directory there */
    int *pidfd;                      /* [nranks]: -1 until opened */
    rmacoll__ce_map_t maps[CE_MAP_MAX];
    int nmaps;
};

/**
 * Sets the largest number of bytes one process_vm_writev may carry
 * (tuning and tests: a small value makes every put cross many splits).
 * bytes must be in [1, RMACOLL__CE_IOV_MAX_DEFAULT]; other values are
 * refused with RMACOLL_ERR_INVALID_ARG. Not thread-safe.
 */
rmacoll_status_t rmacoll__ce_set_iov_max(rmacoll_transport_t *tp,
                                         uint64_t bytes);

/* Logs through the core's logger (tlog.h), tp a ce instance. */
#define CE_LOG(tp, lvl, ...) RMACOLL__TLOG((tp)->env, lvl, __VA_ARGS__)

/* ce_init.c: base.init and base.finalize (the ops table is ce_host.c's). */
rmacoll_status_t rmacoll__ce_init(const rmacoll_transport_env_t *env,
                                  rmacoll_transport_t **tpp);
void rmacoll__ce_finalize(rmacoll_transport_t *tp);
/* ce_init.c: strerror_r's message of err (in buf or static); the contents
 * of /proc/sys/kernel/yama/ptrace_scope, or "absent" (for the messages of
 * refused cross-memory attach). */
const char *rmacoll__ce_strerror(int err, char *buf, size_t len);
void rmacoll__ce_ptrace_scope(char *out, size_t len);

/*
 * Shared host allocations (ce_shared.c; see its file comment).
 * _init makes this rank's directory (none, and success, when memfd is
 * unavailable: allocations then fall back in the core); tp->dir_fd is what
 * init's allgather carries. _peer records a node peer's directory fd (-1:
 * none). _lookup returns where [dst, dst + bytes) of peer's address space
 * is mapped here when one of peer's shared allocations holds it, else NULL
 * (then cross-memory attach). _alloc / _free serve mem_alloc / mem_free of
 * RMACOLL_MEM_HOST (_free returns 0 when addr is not a live allocation);
 * _unshare serves mem_unshare (the allocations overlapping a range stop
 * being shared);
 * _finalize unmaps everything of peers and the directory (own allocations
 * still live stay mapped).
 */
rmacoll_status_t rmacoll__ce_shared_init(rmacoll_transport_t *tp);
void rmacoll__ce_shared_peer(rmacoll_transport_t *tp, int peer, int64_t dir_fd);
void *rmacoll__ce_shared_lookup(rmacoll_transport_t *tp, int peer, uint64_t dst,
                                uint64_t bytes);
rmacoll_status_t rmacoll__ce_shared_alloc(rmacoll_transport_t *tp, size_t bytes, void **addr);
int rmacoll__ce_shared_free(rmacoll_transport_t *tp, void *addr);
rmacoll_status_t rmacoll__ce_shared_unshare(rmacoll_transport_t *tp, void *addr, size_t bytes);
void rmacoll__ce_shared_finalize(rmacoll_transport_t *tp);

#ifdef RMACOLL_HAVE_CE_CUDA
/*
 * CUDA backend hooks (ce_cuda.c). Same contracts as the transport ops of
 * the same name (include/rmacoll_transport.h), restricted to CUDA memory.
 *
 * rmacoll__ce_cuda_init runs last in ce's init, on the calling thread's
 * current device (cudaGetDevice; the application selects it). It is not
 * collective. It fails only for lack of host memory: when no GPU is usable
 * (no driver, no device, no 64-bit stream memory operations, host windows
 * that cannot be registered) it leaves tp->cuda NULL, keeps the status and
 * the reason in tp->cuda_status / tp->cuda_why, and the host backend works
 * as before; every CUDA op then returns that status (RMACOLL_ERR_NO_DEVICE
 * or RMACOLL_ERR_CUDA) and logs the reason.
 */
rmacoll_status_t rmacoll__ce_cuda_init(rmacoll_transport_t *tp);
/* Pins host memory (cudaHostRegister, portable); *mem is freed and the
 * range unpinned by rmacoll__ce_cuda_mem_deregister. */
rmacoll_status_t rmacoll__ce_cuda_host_pin(rmacoll_transport_t *tp, void *addr,
                                           size_t bytes, rmacoll_mem_t **mem);
void rmacoll__ce_cuda_finalize(rmacoll_transport_t *tp);
/* CUDA memory needs no registration for the copy engine: *mem is NULL and
 * rkey (may be NULL) gets {addr, bytes}; the range must be device memory
 * (RMACOLL_ERR_INVALID_ARG otherwise). Peers map it with mem_export. */
rmacoll_status_t rmacoll__ce_cuda_mem_register(rmacoll_transport_t *tp,
                                               void *addr, size_t bytes,
                                               rmacoll_mem_t **mem,
                                               rmacoll_rkey_t *rkey);
rmacoll_status_t rmacoll__ce_cuda_mem_deregister(rmacoll_transport_t *tp,
                                                 rmacoll_mem_t *mem);
/* Memory type of a queue's buffers (all puts of one queue share it):
 * the type of the first non-empty put's source, by
 * cudaPointerGetAttributes; RMACOLL_MEM_HOST when tp->cuda is NULL. */
rmacoll_memtype_t rmacoll__ce_cuda_queue_memtype(rmacoll_transport_t *tp,
                                                 const rmacoll_put_t *puts,
                                                 size_t n);
/* post_puts of CUDA memory: post_puts_stream on the backend's own stream;
 * pending() counts those puts until the stream passed them. */
rmacoll_status_t rmacoll__ce_cuda_post_puts(rmacoll_transport_t *tp,
                                            const rmacoll_put_t *puts,
                                            size_t n);
rmacoll_status_t rmacoll__ce_cuda_progress(rmacoll_transport_t *tp);
/* mem_alloc / mem_free of RMACOLL_MEM_CUDA: cudaMalloc on the backend's
 * device, zero-filled (other types: RMACOLL_ERR_UNSUPPORTED). */
rmacoll_status_t rmacoll__ce_cuda_mem_alloc(rmacoll_transport_t *tp, size_t bytes,
                                            rmacoll_memtype_t type, void **addr);
void rmacoll__ce_cuda_mem_free(rmacoll_transport_t *tp, void *addr, rmacoll_memtype_t type);
size_t rmacoll__ce_cuda_pending(rmacoll_transport_t *tp);
/* The ops of RMACOLL_TCAP_MEM_CUDA, used as they are in the ops table. */
rmacoll_status_t rmacoll__ce_cuda_mem_export(rmacoll_transport_t *tp,
                                             void *addr, size_t bytes,
                                             void *blob);
rmacoll_status_t rmacoll__ce_cuda_mem_import(rmacoll_transport_t *tp,
                                             int peer, const void *blob,
                                             uint64_t *addr);
/* mem_type: device memory by cudaPointerGetAttributes (the backend on),
 * else RMACOLL_ERR_UNSUPPORTED. Thread-safe. */
rmacoll_status_t rmacoll__ce_cuda_mem_type(rmacoll_transport_t *tp, const void *addr,
                                           rmacoll_memtype_t *type);
rmacoll_status_t rmacoll__ce_cuda_post_puts_stream(rmacoll_transport_t *tp,
                                                   const rmacoll_put_t *puts,
                                                   size_t n, void *stream);
rmacoll_status_t rmacoll__ce_cuda_wait_stream(rmacoll_transport_t *tp,
                                              const uint32_t *idx,
                                              const uint64_t *values,
                                              size_t n, void *stream);
rmacoll_status_t rmacoll__ce_cuda_set_device_signals(rmacoll_transport_t *tp,
                                                     const uint64_t *addr,
                                                     const uint32_t *nwords);
rmacoll_status_t rmacoll__ce_cuda_signal_stream(rmacoll_transport_t *tp,
                                                int peer, uint32_t idx,
                                                uint64_t value, void *stream);
#endif

#endif /* RMACOLL_TRANSPORT_CE_H */
