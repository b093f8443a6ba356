/*
 * rmacoll_transport.h - the transport interface, for transport authors
 * (built in, or loaded from a shared object: docs/plugins.md).
 *
 * A transport moves bytes into a peer's memory and raises a 64-bit signal
 * word there (PutSignal). It serves one or both paths of the plan:
 *  - CE path (capability RMACOLL_TCAP_CE): node peers; the copy engine
 *    (cudaMemcpyAsync over IPC mappings) or, host-only, cross-memory attach
 *    into the peer process plus stores into its shared control window.
 *  - PROXY path (RMACOLL_TCAP_PROXY): network peers (libfabric, ibverbs),
 *    driven by the communicator's proxy thread.
 * At communicator creation the core binds each (path, memory) pair to one
 * transport instance, from the capabilities below and the config.
 *
 * Signal contract. Every rank owns an array of 64-bit signal words
 * (env->signals) in its control window. A put may carry a signal
 * (sig_index != RMACOLL_NO_SIGNAL): after the put's bytes, and the bytes of
 * every earlier put this rank posted to the same peer through the same
 * transport, are visible at the target, the target's word sig_index holds
 * at least sig_value. Every word has one writer, and that writer raises it
 * by exactly one per signal, so a transport may deliver a signal either as
 * a store of sig_value or as an increment by one (e.g. remote CQ data
 * carrying the index, applied by the target's progress()). Words are never
 * reset. The target reads words with acquire semantics.
 *
 * The ops table (as libfabric's fi_ops_* and NCCL's ncclNet_vN_t):
 * rmacoll_transport_ops_t names the transport, its capabilities and its
 * configuration keys, and points to four groups of ops, each starting with
 * its size so that it can grow by appending: base (life cycle, progress),
 * mem (registration, device-memory export/import), host (the host-driven
 * data path) and stream (the data path enqueued on a CUDA stream). The core
 * checks abi_version and every size (a mismatch is reported as such),
 * checks that each capability claimed has its ops (see RMACOLL_TCAP_*), and
 * fills every op left NULL, or beyond a group's size, with a typed stub
 * (RMACOLL_ERR_UNSUPPORTED; for progress success, pending 0, error_peer
 * -1), so that it never tests an op for NULL. One indirect call per queue:
 * post_puts takes a whole queue.
 *
 * Threading: the core calls one instance from one thread at a time (the
 * network transport under the proxy's lock).
 */
#ifndef RMACOLL_TRANSPORT_H
#define RMACOLL_TRANSPORT_H

#include "rmacoll.h"
#include "rmacoll_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of rmacoll_transport_ops_t. 2: grouped ops with sizes, config
 * keys. Version 1 (one flat table) is still accepted and adapted. */
#define RMACOLL_TRANSPORT_ABI_VERSION 2

/* Capability bits; each has one meaning and names the ops it requires. */
/* node peers: the CE path of the plan */
#define RMACOLL_TCAP_CE (1ull << 0)
/* network peers: the PROXY path, driven by the proxy thread; requires
 * mem.mem_register / mem_deregister (puts carry registrations and rkeys) */
#define RMACOLL_TCAP_PROXY (1ull << 1)
/* host memory through the host data path; requires host.post_puts */
#define RMACOLL_TCAP_MEM_HOST (1ull << 2)
/* CUDA device memory as put source and target. How depends on the path,
 * and so do the ops it requires: on the CE path through the stream data
 * path (node peers' buffers mapped by mem_export / mem_import; puts, waits
 * and signals enqueued on the user's stream): requires mem.mem_export,
 * mem.mem_import and every stream op; on the PROXY path by registering
 * device memory for the network: requires RMACOLL_TCAP_HMEM */
#define RMACOLL_TCAP_MEM_CUDA (1ull << 3)
/* mem_register accepts RMACOLL_MEM_CUDA (device memory registered for the
 * network directly, GPUDirect RDMA); requires mem.mem_register */
#define RMACOLL_TCAP_HMEM (1ull << 4)
/* CUDA device memory through the host data path: host.post_puts takes a
 * queue of device buffers (own device memory, node peers' mapped by
 * mem_import; dst_addr LOCAL as for post_puts_stream), copies it on a
 * stream of the transport's own and writes each signal after the put's
 * bytes; base.pending counts those puts until they are complete and
 * base.progress retires them. Serves the device path across nodes without
 * staging (node-peer copies and the relay forward, driven by a host
 * thread); requires host.post_puts */
#define RMACOLL_TCAP_HOST_CUDA (1ull << 5)

#define RMACOLL_NO_SIGNAL UINT32_MAX

/*
 * Device-resident signal words (stream ops only). Each rank may own, besides
 * the words of its control window, an array of 64-bit words in its device
 * memory with the same indexes, which the core hands to the stream ops of
 * its CE x CUDA transports with stream.set_device_signals. A signal index
 * (rmacoll_put_t.sig_index of a stream put, signal_stream's idx,
 * wait_stream's idx, the indexes of rmacoll_stream_call_t) with this bit
 * set names the word (index & ~RMACOLL_SIG_DEVICE) of that device array
 * instead of the control window's: no store or poll crosses PCIe. The core
 * sets it only when every node peer's array is mapped (writer and reader
 * agree), never for host-driven puts (host.post_puts), whose words stay in
 * the control window.
 */
#define RMACOLL_SIG_DEVICE (1u << 31)

/* Remote descriptor of a registered region, sent to peers as bytes. The
 * core addresses byte k of the region as addr + k (a put's dst_addr), and
 * describes a range inside a registered region (a call's receive buffer
 * inside a user registration, rmacoll_mem_register) by the region's rkey
 * with addr advanced by the range's offset and bytes its length, without
 * asking the transport again. */
#define RMACOLL_RKEY_BYTES 48
typedef struct rmacoll_rkey {
    uint64_t addr;                      /* remote virtual address of the region */
    uint64_t bytes;                     /* region length */
    uint32_t len;                       /* used bytes of key[] */
    uint8_t key[RMACOLL_RKEY_BYTES];    /* transport-specific (fi_mr key, rkey, ...) */
} rmacoll_rkey_t;

typedef enum rmacoll_memtype {
    RMACOLL_MEM_HOST = 0,
    RMACOLL_MEM_CUDA = 1
} rmacoll_memtype_t;

typedef struct rmacoll_transport rmacoll_transport_t; /* a transport's instance */
typedef struct rmacoll_mem rmacoll_mem_t;             /* a local registration */

/**
 * One put. src lies in a region registered with this transport (src_mem)
 * for PROXY transports; CE transports ignore src_mem and dst_rkey, and
 * write to dst_addr in the peer's address space.
 */
typedef struct rmacoll_put {
    int peer;                     /* target rank */
    const void *src;              /* local source */
    rmacoll_mem_t *src_mem;       /* registration of src (PROXY), or NULL */
    uint64_t dst_addr;            /* target virtual address */
    const rmacoll_rkey_t *dst_rkey; /* region holding dst_addr (PROXY) */
    uint64_t bytes;               /* may be 0 for a signal-only put */
    uint32_t sig_index;           /* target signal word, or RMACOLL_NO_SIGNAL */
    uint64_t sig_value;           /* value of that word after this put */
} rmacoll_put_t;

/** What the core gives a transport at init. Valid until finalize. */
typedef struct rmacoll_transport_env {
    size_t struct_size;
    int rank;
    int nranks;
    const rmacoll_topo_t *topo;
    const rmacoll_config_t *config;
    const uint8_t *peers;          /* [nranks]: non-zero = must reach that peer */
    volatile uint64_t *signals;    /* this rank's signal words */
    uint32_t nsignals;
    /* [nranks]: node peers' signal words mapped here (CE), NULL elsewhere */
    volatile uint64_t *const *peer_signals;
    /* collective over all ranks: rank r's `bytes` land at recv + r * bytes */
    rmacoll_status_t (*allgather)(void *ctx, const void *send, void *recv,
                                  size_t bytes);
    void *oob_ctx;
    /* logging: printf-style, lower-case message naming peer, size, cause */
    void (*log)(void *ctx, rmacoll_log_level_t level, uint32_t subsys,
                const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 4, 5)))
#endif
        ;
    void *log_ctx;
    /* [nranks]: number of signal words of each node peer (they differ
     * between ranks); NULL = every rank has nsignals */
    const uint32_t *peer_nsignals;
    /* Reads a configuration key of `config` (this transport's own keys
     * too: "<name>.<key>") as text, as rmacoll_config_get does; present
     * when struct_size covers it. */
    rmacoll_status_t (*config_get)(const rmacoll_config_t *cfg, const char *key, char *buf,
                                   size_t len);
} rmacoll_transport_env_t;

/* Type of a transport configuration key. */
typedef enum rmacoll_config_type {
    RMACOLL_CONFIG_STRING = 0, /* text, at most RMACOLL_CONFIG_STR_MAX - 1 bytes */
    RMACOLL_CONFIG_U32 = 1,    /* unsigned 32-bit integer */
    RMACOLL_CONFIG_I32 = 2,    /* signed 32-bit integer */
    RMACOLL_CONFIG_SIZE = 3,   /* bytes: integer with an optional K/M/G suffix */
    RMACOLL_CONFIG_BOOL = 4    /* true/false, yes/no, on/off, 1/0 */
} rmacoll_config_type_t;

/**
 * A configuration key a transport owns, named "<transport>.<name>" (YAML
 * `<transport>: {<name>: value}`, environment RMACOLL_<TRANSPORT>_<NAME>,
 * rmacoll_config_set(cfg, "<transport>.<name>", text)); a name that
 * already starts with "<transport>_" or "<transport>." is taken as the
 * full name (nvlink_kernel's historical top-level nvlink_kernel_threshold).
 * Declared in the ops table (keys, nkeys); the core parses, range-checks,
 * stores, hashes and lists the key from this declaration alone, and the
 * transport reads the value with env->config_get (text, as YAML writes it)
 * or rmacoll_config_get. Integers must lie in [min, max] (both 0: the
 * type's whole range). docs/plugins.md says how a plugin's keys are found.
 */
typedef struct rmacoll_transport_key {
    const char *name;          /* without the transport's prefix: "provider" */
    rmacoll_config_type_t type;
    const char *default_str;   /* default as written in YAML: "tcp;ofi_rxm", "1" */
    const char *help;          /* one line for rmacoll-info */
    int64_t min, max;          /* integer range (inclusive) */
} rmacoll_transport_key_t;

/* Life cycle and progress. */
typedef struct rmacoll_transport_base_ops {
    size_t size;    /* sizeof(rmacoll_transport_base_ops_t) */
    /* Collective over all ranks (uses env->allgather): open resources,
     * exchange addresses, connect the peers in env->peers. Required. */
    rmacoll_status_t (*init)(const rmacoll_transport_env_t *env,
                             rmacoll_transport_t **tp);
    /* Releases everything init made. Posted puts must have completed.
     * Required. */
    void (*finalize)(rmacoll_transport_t *tp);
    /* Drives progress: retires local completions and applies incoming
     * signals to env->signals. Non-blocking. Called by the proxy thread
     * (PROXY) or the waiting thread (CE). */
    rmacoll_status_t (*progress)(rmacoll_transport_t *tp);
    /* Number of posted puts whose source may not yet be reused. */
    size_t (*pending)(rmacoll_transport_t *tp);
    /* Rank of the peer whose failure caused the last error, or -1. */
    int (*error_peer)(rmacoll_transport_t *tp);
    /* Optional (appended; NULL: none): capabilities this instance found at
     * init beyond the table's caps, e.g. ofi's RMACOLL_TCAP_HMEM |
     * RMACOLL_TCAP_MEM_CUDA when its provider registers CUDA memory
     * (FI_HMEM). Only those two bits are taken from it (with the ops they
     * require, as for the table); the core reads it once, after init, and
     * logs desc: what decided (len bytes, NUL-terminated; may stay empty),
     * e.g. "FI_HMEM registration (provider shm)" or "provider tcp lacks
     * FI_HMEM". */
    uint64_t (*instance_caps)(rmacoll_transport_t *tp, char *desc, size_t len);
    /* Optional (appended; NULL: unknown): the network interface or device
     * this instance's endpoint uses, written to name (len bytes,
     * NUL-terminated; "" = unknown), e.g. "tcp 127.0.0.0/8 lo" or
     * "verbs mlx5_0:1". Read once, after init. Where every rank of each
     * node names the same one, there are no rails for the relay to align
     * to, and streams of at least relay.direct_min_bytes go straight to
     * their receivers (docs/protocol.md, direct streams). */
    void (*local_nic)(rmacoll_transport_t *tp, char *name, size_t len);
} rmacoll_transport_base_ops_t;

/* Memory: registration, and device memory shared with node peers. */
typedef struct rmacoll_transport_mem_ops {
    size_t size;    /* sizeof(rmacoll_transport_mem_ops_t) */
    /* Registers [addr, addr + bytes) for use as put source or target;
     * rkey (may be NULL) receives the descriptor peers need, of the range
     * asked for (rkey->addr addresses addr, rkey->bytes is bytes; also
     * when a larger cached region holds the range). Cached: registering
     * the same range, or a range inside a registered one, again is cheap;
     * a region stays registered while any registration of it is live (the
     * core holds one for each rmacoll_mem_register). */
    rmacoll_status_t (*mem_register)(rmacoll_transport_t *tp, void *addr,
                                     size_t bytes, rmacoll_memtype_t type,
                                     rmacoll_mem_t **mem,
                                     rmacoll_rkey_t *rkey);
    rmacoll_status_t (*mem_deregister)(rmacoll_transport_t *tp,
                                       rmacoll_mem_t *mem);
    /* Exports [addr, addr + bytes) of device memory for node peers:
     * blob (RMACOLL_EXPORT_BYTES) receives what mem_import needs
     * (an IPC handle of the allocation and the offset in it). */
    rmacoll_status_t (*mem_export)(rmacoll_transport_t *tp, void *addr,
                                   size_t bytes, void *blob);
    /* Maps a node peer's exported range into this process; *addr receives
     * the local address of the exported addr. Cached by handle; mappings
     * live until finalize. */
    rmacoll_status_t (*mem_import)(rmacoll_transport_t *tp, int peer,
                                   const void *blob, uint64_t *addr);
    /* Optional (appended; NULL or beyond size: a stub returning
     * RMACOLL_ERR_UNSUPPORTED, and the core logs that late network writes
     * are not excluded). Revokes remote write access to mem at once: once
     * it returns, no remote write lands in mem's range any more, a write
     * already in progress included (it fails at the writer, which reports
     * it). The registration leaves the cache (a later mem_register of the
     * range makes a new one, with a new key); mem stays valid for its
     * mem_deregister. The core calls it when a call breaks the
     * communicator (a paused network peer may resume and write), after
     * its abort puts were posted; afterwards it calls only progress,
     * pending, mem_deregister and finalize. A transport that can cut off a
     * write in progress only by closing all remote access (a provider that
     * copies on the target, e.g. libfabric tcp) may do so: puts may then
     * fail, and pending() must report 0 once nothing can complete. */
    rmacoll_status_t (*mem_revoke)(rmacoll_transport_t *tp, rmacoll_mem_t *mem);
    /* Optional (appended; NULL: RMACOLL_ERR_UNSUPPORTED): allocates `bytes`
     * of memory of `type`, zero-filled.
     * RMACOLL_MEM_CUDA: for the core's own use (the relay buffer in device
     * memory: cudaMalloc on the instance's device), freed by mem_free before
     * finalize. RMACOLL_MEM_HOST: for rmacoll_mem_alloc, host memory this
     * transport's node peers may write without a system call (ce: a shared
     * memfd); RMACOLL_ERR_UNSUPPORTED makes the core fall back to an
     * ordinary allocation. The user frees it (mem_free) or not: one still
     * live at finalize must stay mapped and usable, leaving nothing behind
     * in the file system. Thread-safe for RMACOLL_MEM_HOST (the user's
     * threads call it, also during puts). */
    rmacoll_status_t (*mem_alloc)(rmacoll_transport_t *tp, size_t bytes,
                                  rmacoll_memtype_t type, void **addr);
    void (*mem_free)(rmacoll_transport_t *tp, void *addr, rmacoll_memtype_t type);
    /* Optional (appended; NULL: a stub returning RMACOLL_ERR_UNSUPPORTED):
     * stops sharing with node peers this rank's RMACOLL_MEM_HOST
     * allocations (mem_alloc) that overlap [addr, addr + bytes). Their
     * contents stay at the same addresses, but a node peer's write, one
     * already under way included, no longer lands in them; new puts into
     * them take the ordinary path, and later allocations are not shared.
     * The core calls it with the receive buffer of a call that ends while a
     * node peer is still inside a copy into this rank after timeout_ms (a
     * peer stopped mid-copy), before the call returns. Writes by this
     * process into those allocations while it runs may be lost (the
     * receive buffer of a call that is returning: nobody else writes it). */
    rmacoll_status_t (*mem_unshare)(rmacoll_transport_t *tp, void *addr, size_t bytes);
    /* Optional (appended; NULL or beyond size: a stub returning
     * RMACOLL_ERR_UNSUPPORTED): the memory type of addr, into *type:
     * RMACOLL_MEM_CUDA for device memory (cudaMalloc'd, of any device),
     * RMACOLL_MEM_HOST for anything else (pageable, pinned, managed).
     * RMACOLL_ERR_UNSUPPORTED: this instance cannot tell (no CUDA). The
     * core asks its instances in turn for rmacoll_mem_register (the first
     * answer wins; none: host memory). Thread-safe (the user's threads
     * call it, also during puts); no registration, no logging. */
    rmacoll_status_t (*mem_type)(rmacoll_transport_t *tp, const void *addr,
                                 rmacoll_memtype_t *type);
} rmacoll_transport_mem_ops_t;

/* The host-driven data path. */
typedef struct rmacoll_transport_host_ops {
    size_t size;    /* sizeof(rmacoll_transport_host_ops_t) */
    /* Posts a queue of puts, in order; returns once all are posted (it
     * may drive progress to make room). The signal contract above holds. */
    rmacoll_status_t (*post_puts)(rmacoll_transport_t *tp,
                                  const rmacoll_put_t *puts, size_t n);
} rmacoll_transport_host_ops_t;

/* A whole device call on one node, for stream.call_stream: the READY
 * signals to node peers, the READY words to wait for (ready_peer[k]: the
 * peer whose READY own word ready_idx[k] is; puts to it start after that
 * wait), the puts (as for post_puts_stream), the own words to wait for
 * after them (wait_peer[k]: the rank that raises word wait_idx[k], named
 * when the wait fails; the field may be NULL); reset != 0: every word
 * waited on returns to 0 after its wait (the core's graph mode). Indexes
 * may carry RMACOLL_SIG_DEVICE. */
typedef struct rmacoll_stream_call {
    size_t struct_size;            /* sizeof(rmacoll_stream_call_t) */
    const rmacoll_put_t *ready;    /* signal-only puts (bytes 0) */
    size_t nready;
    const uint32_t *ready_idx;
    const uint64_t *ready_val;
    const int *ready_peer;
    size_t nready_wait;
    const rmacoll_put_t *puts;
    size_t nputs;
    const uint32_t *wait_idx;
    const uint64_t *wait_val;
    size_t nwait;
    int reset;
    const int *wait_peer;          /* [nwait] or NULL (appended) */
} rmacoll_stream_call_t;

/*
 * Device-count calls (rmacoll_alltoallv_device_counts, one node): the
 * counts are read by the device, so the transport gets the arrays, not
 * their values. Each rank owns a zeroed region of device memory of
 * RMACOLL_DCOUNTS_REGION_BYTES(nranks) (allocated by the core, mapped by
 * every node peer) that only the transport's kernels use: their sequence
 * number, arrival and completion flags, and the rows of counts the ranks
 * push to each other. region[p] is rank p's region as mapped in this
 * process (own at p == rank), recv_addr[p] rank p's receive buffer as
 * mapped here (0: rank p has none: its recv_capacity is 0). Capacities
 * and counts in elements of esize bytes.
 */
#define RMACOLL_DCOUNTS_MAX_RANKS 64
/* 64-bit words: 8 of header, arrive[n], done[n], rows[n][2n + 4] */
#define RMACOLL_DCOUNTS_REGION_WORDS(n) (8u + 2u * (n) + (n) * (2u * (n) + 4u))
#define RMACOLL_DCOUNTS_REGION_BYTES(n) ((size_t)RMACOLL_DCOUNTS_REGION_WORDS(n) * 8u)

typedef struct rmacoll_dcounts_call {
    size_t struct_size;            /* sizeof(rmacoll_dcounts_call_t) */
    int check_only;                /* 1: check the pointers, enqueue nothing */
    int given;                     /* 1: recvcounts is read (combine), 0: written */
    uint32_t esize;                /* element size, bytes */
    const void *sendbuf;
    const int64_t *sendcounts;     /* device, [nranks] */
    int64_t send_capacity;
    void *recvbuf;
    int64_t *recvcounts;           /* device, [nranks] */
    int64_t recv_capacity;
    int32_t *status;               /* device, one word */
    const uint64_t *region;        /* [nranks] */
    const uint64_t *recv_addr;     /* [nranks] */
    char *msg;                     /* check_only failing: why (naming the argument) */
    size_t msg_len;
} rmacoll_dcounts_call_t;

/* The first device-side failure of a device-count call not yet reported
 * (stream.dcounts_report). */
typedef struct rmacoll_dcounts_report {
    uint64_t seq;                  /* the call's device sequence number (0: none) */
    rmacoll_status_t code;
    int rank;                      /* the rank whose counts or capacity failed */
    int reason;                    /* RMACOLL_DCOUNTS_WHY_* */
    int peer;                      /* the other rank involved, or -1 */
    int64_t need, have;            /* elements: needed, available (or the counts
                                    * that differ, for a mismatch) */
} rmacoll_dcounts_report_t;

#define RMACOLL_DCOUNTS_WHY_NEGATIVE 1  /* rank's count for peer < 0 */
#define RMACOLL_DCOUNTS_WHY_SEND_CAP 2  /* rank sends need > send_capacity have */
#define RMACOLL_DCOUNTS_WHY_RECV_CAP 3  /* rank receives need > recv_capacity have */
#define RMACOLL_DCOUNTS_WHY_SUM 4       /* a sum of rank's counts passes INT64_MAX */
#define RMACOLL_DCOUNTS_WHY_MISMATCH 5  /* rank expects have from peer, which sends need */
#define RMACOLL_DCOUNTS_WHY_TIMEOUT 6   /* rank waited in vain for peer */

/* The data path enqueued on a CUDA stream (no host synchronisation). */
typedef struct rmacoll_transport_stream_ops {
    size_t size;    /* sizeof(rmacoll_transport_stream_ops_t) */
    /* Enqueues the puts on `stream` (a cudaStream_t) in order and returns
     * without host synchronisation. dst_addr is a LOCAL address (from
     * mem_import, or own memory for peer == rank); each signal is written
     * by the stream after the put's bytes (and all earlier ones) are
     * complete, into the peer's signal word (the same words as the host
     * path: node peers' control windows; with RMACOLL_SIG_DEVICE in
     * sig_index the peer's device-resident word). With n == 0 (puts may be NULL)
     * it only checks that the stream can take work now: RMACOLL_ERR_UNSUPPORTED
     * while the stream is being captured into a CUDA graph. */
    rmacoll_status_t (*post_puts_stream)(rmacoll_transport_t *tp,
                                         const rmacoll_put_t *puts, size_t n,
                                         void *stream);
    /* Enqueues on `stream`: wait until own word idx[k] >= values[k], for
     * every k, before later work on the stream runs. */
    rmacoll_status_t (*wait_stream)(rmacoll_transport_t *tp,
                                    const uint32_t *idx,
                                    const uint64_t *values, size_t n,
                                    void *stream);
    /* Enqueues on `stream`: set node peer `peer`'s word idx to value
     * (a signal without data). */
    rmacoll_status_t (*signal_stream)(rmacoll_transport_t *tp, int peer,
                                      uint32_t idx, uint64_t value,
                                      void *stream);
    /* Optional (NULL: not offered; appended, so older transports leave it
     * NULL): enqueues the whole call *c on `stream` at once (e.g. one
     * kernel launch). RMACOLL_ERR_UNSUPPORTED: not for this call or not on
     * this machine, nothing enqueued (the core then uses the ops above);
     * another error: failed. */
    rmacoll_status_t (*call_stream)(rmacoll_transport_t *tp,
                                    const rmacoll_stream_call_t *c, void *stream);
    /* Optional (appended; NULL: RMACOLL_ERR_UNSUPPORTED, and the core keeps
     * every word in the control windows): the device-resident signal words
     * (RMACOLL_SIG_DEVICE). addr[p] is the device address, in this process,
     * of rank p's array (own at p == env->rank, node peers' mapped with
     * mem_import), nwords[p] its length (addr[p] 0: none); both [nranks],
     * copied. Called once after init, before any stream op; the stream ops
     * must then accept indexes with RMACOLL_SIG_DEVICE. An error: the
     * transport cannot use them (e.g. its device cannot run stream memory
     * operations on device memory); the core then keeps the host words on
     * every rank of the node. addr NULL: a probe, before the core allocates
     * anything: RMACOLL_SUCCESS when the instance could use them, else the
     * reason's status, without logging an error. */
    rmacoll_status_t (*set_device_signals)(rmacoll_transport_t *tp, const uint64_t *addr,
                                           const uint32_t *nwords);
    /* Optional (appended; NULL: RMACOLL_ERR_UNSUPPORTED): a device-count
     * call (rmacoll_dcounts_call_t above) enqueued whole on `stream`,
     * without reading the counts on the host. With check_only it only
     * checks the call could run (pointers are device memory of this
     * rank's GPU, the ranks sharing a GPU can run at once): an error with
     * c->msg saying why, nothing enqueued. */
    rmacoll_status_t (*dcounts_stream)(rmacoll_transport_t *tp,
                                       const rmacoll_dcounts_call_t *c, void *stream);
    /* Optional (appended, with dcounts_stream): the first device-side
     * failure of a device-count call that the device has completed and no
     * earlier report returned, then forgotten; r->seq = 0 when none. Reads
     * host-mapped memory only (no synchronisation). */
    rmacoll_status_t (*dcounts_report)(rmacoll_transport_t *tp, rmacoll_dcounts_report_t *r);
} rmacoll_transport_stream_ops_t;

typedef struct rmacoll_transport_ops {
    uint32_t abi_version;   /* RMACOLL_TRANSPORT_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(rmacoll_transport_ops_t) */
    const char *name;       /* [a-z0-9_]+: config value and key prefix */
    const char *desc;       /* one line for rmacoll-info */
    uint64_t caps;          /* RMACOLL_TCAP_* */
    /* A transport made for small messages names the config key (a size in
     * bytes) that bounds it: with transports.intra_node auto it serves the
     * device-memory queues whose largest put is at most that many bytes,
     * the other CE transport the larger ones. NULL: no bound. */
    const char *small_max_key;
    /* Groups; base is required, the others as the capabilities say (NULL:
     * every op of the group is a stub). */
    const rmacoll_transport_base_ops_t *base;
    const rmacoll_transport_mem_ops_t *mem;
    const rmacoll_transport_host_ops_t *host;
    const rmacoll_transport_stream_ops_t *stream;
    /* Configuration keys of this transport (nkeys entries, may be NULL). */
    const rmacoll_transport_key_t *keys;
    size_t nkeys;
} rmacoll_transport_ops_t;

/**
 * Plugin entry points, resolved by name with dlsym in a shared object
 * named in the config (`transports: {inter_node: plugin:/path/libx.so}`),
 * newest first: rmacoll_transport_plugin_v2 (a rmacoll_transport_ops_t of
 * ABI 2), then rmacoll_transport_plugin_v1 (the flat table of ABI 1,
 * adapted). Define the one your headers give you:
 *   const rmacoll_transport_ops_t RMACOLL_TRANSPORT_PLUGIN_SYMBOL = {...};
 */
#define RMACOLL_TRANSPORT_PLUGIN_SYMBOL rmacoll_transport_plugin_v2

/* Bytes of a mem_export blob. */
#define RMACOLL_EXPORT_BYTES 96

/* Transports compiled into this build, NULL-terminated; the file that
 * defines it is generated by CMake from the enabled options. */
extern const rmacoll_transport_ops_t *const rmacoll__builtin_transports[];

/*
 * The configuration keys of an in-tree transport, compiled into the core
 * library whether or not the transport itself is built (a config file that
 * names verbs.mtu loads in every build; rmacoll-info lists the keys of
 * transports this build lacks). Each transport folder defines one
 * (transports/<name>/<name>_keys.c, no third-party headers) and points its
 * ops table's keys at the same array; transports/CMakeLists.txt generates
 * the NULL-terminated list rmacoll__transport_keysets from every folder.
 * Internal to the tree: plugins declare keys in their ops table only.
 */
typedef struct rmacoll_transport_keyset {
    const char *transport;               /* ops name: key prefix "<transport>." */
    const rmacoll_transport_key_t *keys; /* nkeys entries */
    size_t nkeys;
    /* Checks what a key's type and range cannot say (e.g. verbs.mtu is one
     * of a few sizes), on a whole config; returns the full name of the key
     * it refuses, with problem (plen bytes) saying why, or NULL. May be
     * NULL. Reads values with rmacoll_config_get. */
    const char *(*check)(const rmacoll_config_t *cfg, char *problem, size_t plen);
} rmacoll_transport_keyset_t;

extern const rmacoll_transport_keyset_t *const rmacoll__transport_keysets[];

#ifdef __cplusplus
}
#endif

#endif /* RMACOLL_TRANSPORT_H */
