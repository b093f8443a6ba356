/*
 * emunic_int.h - what the pieces of the emunic plugin share (emunic.c,
 * emunic_cuda.c, emunic_data.c; each includes it first, for
 * _GNU_SOURCE): the model's constants, the records in the shared segments
 * and the rkeys, one instance's state, and the functions one piece calls
 * in another (hidden: the plugin exports only its ops table). Not a
 * header of rmacoll or of its plugin interface.
 */
#ifndef RMACOLL_EMUNIC_INT_H
#define RMACOLL_EMUNIC_INT_H

#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rmacoll_transport.h"

#include "emunic_maps.h"
#include "emunic_pace.h"

#ifdef EMUNIC_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#endif

#define EMU_NAME_BYTES 64
#define EMU_SLOTS 512          /* device registrations published per rank */
#define EMU_IPC_BYTES 64       /* cudaIpcMemHandle_t */
#define EMU_KEY_MAGIC 0x454d4e49u /* "EMNI" */
#define EMU_MAX_RAILS 16

#define EMU_LOG(tp_, lvl, ...)                                                 \
    do {                                                                       \
        if ((tp_)->env->log != NULL) {                                         \
            (tp_)->env->log((tp_)->env->log_ctx, (lvl),                        \
                            RMACOLL_LOG_SUBSYS_TRANSPORT, __VA_ARGS__);        \
        }                                                                      \
    } while (0)

/* A published device registration: what a writer needs to map it. */
typedef struct emu_slot {
    uint64_t gen;                 /* odd while being written; even = valid */
    uint64_t base;                /* allocation base, owner's address */
    uint64_t size;                /* allocation size */
    uint64_t buffer_id;           /* CU_POINTER_ATTRIBUTE_BUFFER_ID (0 unknown) */
    uint8_t ipc[EMU_IPC_BYTES];
} emu_slot_t;

/* Each rank's shared segment (POSIX shared memory, mapped by every peer). */
typedef struct emu_shared {
    uint64_t rx_tat;              /* receive direction's bucket (ns) */
    uint64_t nsignals;
    emu_slot_t slot[EMU_SLOTS];
    uint64_t shadow[];            /* [nsignals]: signal words peers store */
} emu_shared_t;

/* What every rank tells the others at init. */
typedef struct emu_addr {
    int64_t pid;
    uint64_t nsignals;
    int32_t rail;
    int32_t has_cuda;
    char shm_name[EMU_NAME_BYTES];
} emu_addr_t;

/* rkey.key of a registration. */
typedef struct emu_key {
    uint32_t magic;
    uint32_t type;                /* rmacoll_memtype_t */
    uint32_t slot;                /* device: slot in the owner's segment */
    uint32_t pad;
    uint64_t gen;                 /* device: the slot's generation */
} emu_key_t;

/* A local registration. */
struct rmacoll_mem {
    void *addr;
    size_t bytes;
    rmacoll_memtype_t type;
    int slot;                     /* device: own slot, else -1 */
};

/* A put posted and not yet signalled. */
typedef struct emu_fly {
    int peer;
    uint32_t sig_index;
    uint64_t sig_value;
    uint64_t deliver_ns;
    uint64_t post_ns;             /* when it was posted (the finalize statistics) */
    int event;                    /* index in tp->events, or -1 (host copy) */
} emu_fly_t;

struct rmacoll_transport {
    const rmacoll_transport_env_t *env;
    int rank, nranks;
    emu_addr_t *addr;             /* [nranks] */
    emu_shared_t *own;
    size_t own_bytes;
    emu_shared_t **peer;          /* [nranks]: peers' segments */
    size_t *peer_bytes;
    int error_peer;

    /* the model */
    emunic_bucket_t tx, rx_of_rail[EMU_MAX_RAILS];
    uint64_t latency_ns;
    uint64_t tx_tat;

    /* in flight, FIFO in a ring */
    emu_fly_t *fly;
    size_t fly_cap, fly_head, fly_n;
    uint8_t *blocked;             /* [nranks]: scratch of progress */

    /* counters for the log at finalize; post -> signal times of device
     * puts (copy and wire) and of the others (wire only), and how much of
     * it a put waited for its copy after its wire time had passed */
    uint64_t puts, bytes, dev_puts;
    uint64_t dev_sig_ns, dev_sig_max_ns, dev_copy_late_ns, dev_signalled;
    uint64_t host_sig_ns, host_sig_max_ns, host_signalled;

    int cuda;                     /* device memory usable here */
    int slot_refs[EMU_SLOTS];     /* registrations using each own slot */
#ifdef EMUNIC_HAVE_CUDA
    int device;
    cudaStream_t *stream;         /* [nranks]: made at the first device put */
    cudaEvent_t *events;          /* [fly_cap]: one per ring position */
    emunic_map_t *maps;           /* [nranks * EMU_SLOTS]: mappings of peers' slots */
    CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*get_attr)(void *, CUpointer_attribute, CUdeviceptr);
    /* a peer in another process: its memory is mapped, and every device
     * operation of this instance runs, in emunic's own context of this
     * process and device (emu_xctx_*), never in the user's */
    CUcontext xctx;
#endif
};

/* Not exported from the plugin's shared object. */
#define EMU_HIDDEN __attribute__((visibility("hidden")))

#ifdef EMUNIC_HAVE_CUDA
/* emunic_cuda.c: device memory by CUDA IPC */
EMU_HIDDEN int emu_cuda_probe(rmacoll_transport_t *tp);
EMU_HIDDEN rmacoll_status_t emu_cuda_err(rmacoll_transport_t *tp, int peer, const char *what,
                                         cudaError_t e);
EMU_HIDDEN rmacoll_status_t emu_publish(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                        int *slot_out);
EMU_HIDDEN rmacoll_status_t emu_dev_target(rmacoll_transport_t *tp, int peer,
                                           const emu_key_t *k, uint64_t dst, uint64_t bytes,
                                           void **out);
EMU_HIDDEN rmacoll_status_t emu_dev_copy(rmacoll_transport_t *tp, int peer, void *dst,
                                         const void *src, uint64_t bytes, int ev);
/* emunic's own context (after init's exchange, if a peer with CUDA is
 * another process): taken once per instance, shared by the instances of
 * this process on one device (CUDA lets one context per device and
 * process open another process's IPC handles); enter/leave bracket every
 * device operation of the instance (no-ops without it; leave only after
 * an enter that succeeded) */
EMU_HIDDEN rmacoll_status_t emu_xctx_take(rmacoll_transport_t *tp);
EMU_HIDDEN void emu_xctx_drop(rmacoll_transport_t *tp);
EMU_HIDDEN rmacoll_status_t emu_ctx_enter(rmacoll_transport_t *tp);
EMU_HIDDEN void emu_ctx_leave(rmacoll_transport_t *tp);
#endif

/* emunic_data.c: the data path */
EMU_HIDDEN rmacoll_status_t emu_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                          size_t n);
EMU_HIDDEN rmacoll_status_t emu_progress(rmacoll_transport_t *tp);
EMU_HIDDEN size_t emu_pending(rmacoll_transport_t *tp);
EMU_HIDDEN int emu_error_peer(rmacoll_transport_t *tp);

#endif /* RMACOLL_EMUNIC_INT_H */
