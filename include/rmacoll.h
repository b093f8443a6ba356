/*
 * rmacoll.h - public API of rmacoll: AlltoAllV over one-sided RMA
 * (PutSignal / WaitSignal) with a rail-aligned two-hop relay for
 * cross-node traffic.
 *
 * Semantics follow MPI_Alltoallv (MPI-4.0, section 6.8): rank i sends
 * sendcounts[j] elements starting at element sdispls[j] of sendbuf to rank
 * j, which receives them at element rdispls[i] of recvbuf and must expect
 * exactly recvcounts[i] elements. Counts and displacements are 64-bit and
 * in elements of the datatype, not bytes.
 *
 * Ownership (as in libuv's design notes):
 *  1. Buffers and count arrays passed to a call are borrowed for the call
 *     only; rmacoll keeps no pointer to them after it returns.
 *  2. Whoever creates an object destroys it through the paired function.
 *  3. After a failed create the caller owes nothing.
 *
 * Thread-safety: distinct communicators may be used from distinct threads
 * at once. One communicator must not be used by two threads at the same
 * time (as with NCCL communicators). Functions without a communicator are
 * thread-safe.
 *
 * Several ranks in one process (one thread per rank, as with
 * ncclCommInitRank from threads): device calls of one rank may wait, on
 * its stream, for work that another rank's thread has still to enqueue.
 * A CUDA function that synchronises the device (cudaFree, cudaFreeHost,
 * cudaDeviceSynchronize, ...) called by one rank's thread while another
 * rank's call is in flight can therefore deadlock the process (NCCL has
 * the same rule): synchronise every rank's stream, and have the ranks'
 * threads meet, before freeing buffers or destroying communicators.
 */
#ifndef RMACOLL_H
#define RMACOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RMACOLL_VERSION_MAJOR 0
#define RMACOLL_VERSION_MINOR 1
#define RMACOLL_VERSION_PATCH 0
/* One number, as NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch. */
#define RMACOLL_VERSION_CODE                                                  \
    (RMACOLL_VERSION_MAJOR * 10000 + RMACOLL_VERSION_MINOR * 100 +            \
     RMACOLL_VERSION_PATCH)

/*
 * Status codes. One table generates the enum and its strings
 * (rmacoll_status_string). Codes are stable; new ones are appended.
 */
#define RMACOLL_STATUS_TABLE(X)                                                \
    X(RMACOLL_SUCCESS, 0, "success")                                           \
    X(RMACOLL_ERR_INVALID_ARG, 1, "invalid argument")                          \
    X(RMACOLL_ERR_NULL_BUFFER, 2, "NULL buffer with a non-zero count")        \
    X(RMACOLL_ERR_OVERFLOW, 3,                                                 \
      "count or displacement negative or overflowing a 64-bit byte offset")   \
    X(RMACOLL_ERR_OVERLAP, 4, "buffers overlap")                               \
    X(RMACOLL_ERR_DATATYPE, 5, "bad datatype")                                 \
    X(RMACOLL_ERR_MISMATCH, 6, "send count differs from the receiver's count") \
    X(RMACOLL_ERR_TIMEOUT, 7, "timed out waiting for a peer")                  \
    X(RMACOLL_ERR_NO_MEMORY, 8, "out of memory")                               \
    X(RMACOLL_ERR_UNSUPPORTED, 9, "operation not supported")                   \
    X(RMACOLL_ERR_CONFIG, 10, "invalid configuration")                         \
    X(RMACOLL_ERR_TRANSPORT, 11, "transport error")                            \
    X(RMACOLL_ERR_BOOTSTRAP, 12, "bootstrap error")                            \
    X(RMACOLL_ERR_NO_DEVICE, 13, "required device not found")                  \
    X(RMACOLL_ERR_CUDA, 14, "CUDA error")                                      \
    X(RMACOLL_ERR_PLUGIN, 15, "plugin could not be loaded")                    \
    X(RMACOLL_ERR_INTERNAL, 16, "internal error")                              \
    X(RMACOLL_ERR_IN_PROGRESS, 17, "operation still in progress")              \
    X(RMACOLL_ERR_PEER, 18, "a peer failed")                                   \
    X(RMACOLL_ERR_ABORTED, 19, "communicator aborted (rmacoll_comm_abort)")

typedef enum rmacoll_status {
#define RMACOLL_STATUS_ENUM_(name, value, str) name = value,
    RMACOLL_STATUS_TABLE(RMACOLL_STATUS_ENUM_)
#undef RMACOLL_STATUS_ENUM_
    RMACOLL_STATUS_LAST
} rmacoll_status_t;

/** Human-readable string of a status code; never NULL. Thread-safe. */
const char *rmacoll_status_string(rmacoll_status_t status);

/** Short name of a status code ("RMACOLL_ERR_TIMEOUT"); never NULL. */
const char *rmacoll_status_name(rmacoll_status_t status);

/* Element types. Values are stable. AlltoAllV only moves elements, never
 * computes on them, so a type matters only through its size (the element
 * size must agree on every rank: RMACOLL_ERR_DATATYPE otherwise); the
 * names exist so callers can say what they move. */
typedef enum rmacoll_datatype {
    RMACOLL_INT8 = 0,
    RMACOLL_UINT8 = 1,
    RMACOLL_INT32 = 2,
    RMACOLL_UINT32 = 3,
    RMACOLL_INT64 = 4,
    RMACOLL_UINT64 = 5,
    RMACOLL_FLOAT16 = 6,
    RMACOLL_BFLOAT16 = 7,
    RMACOLL_FLOAT32 = 8,
    RMACOLL_FLOAT64 = 9,
    RMACOLL_BOOL = 10,        /* one byte, as C's bool and torch.bool */
    RMACOLL_INT16 = 11,
    RMACOLL_UINT16 = 12,
    RMACOLL_COMPLEX64 = 13,   /* two float32 (real, imaginary): 8 bytes */
    RMACOLL_COMPLEX128 = 14,  /* two float64: 16 bytes */
    RMACOLL_FLOAT8_E4M3 = 15, /* OCP FP8 E4M3 (torch.float8_e4m3fn): 1 byte */
    RMACOLL_FLOAT8_E5M2 = 16, /* OCP FP8 E5M2 (torch.float8_e5m2): 1 byte */
    RMACOLL_DATATYPE_COUNT
} rmacoll_datatype_t;

/** Size in bytes of one element of dtype, or 0 for an unknown type. */
size_t rmacoll_datatype_size(rmacoll_datatype_t dtype);

/** Name of dtype ("float32"), or NULL for an unknown type. */
const char *rmacoll_datatype_name(rmacoll_datatype_t dtype);

/** Parses a datatype name ("bfloat16"; "float8_e4m3fn" is taken as
 *  "float8_e4m3"); RMACOLL_ERR_DATATYPE if unknown. */
rmacoll_status_t rmacoll_datatype_from_name(const char *name,
                                            rmacoll_datatype_t *dtype);

/* Log levels, from least to most verbose. */
typedef enum rmacoll_log_level {
    RMACOLL_LOG_ERROR = 0,
    RMACOLL_LOG_WARN = 1,
    RMACOLL_LOG_INFO = 2,
    RMACOLL_LOG_DEBUG = 3,
    RMACOLL_LOG_TRACE = 4
} rmacoll_log_level_t;

/* Log subsystems, a bit mask. */
#define RMACOLL_LOG_SUBSYS_CORE (1u << 0)
#define RMACOLL_LOG_SUBSYS_PLAN (1u << 1)
#define RMACOLL_LOG_SUBSYS_SCHED (1u << 2)
#define RMACOLL_LOG_SUBSYS_BOOTSTRAP (1u << 3)
#define RMACOLL_LOG_SUBSYS_TRANSPORT (1u << 4)
#define RMACOLL_LOG_SUBSYS_PROXY (1u << 5)
#define RMACOLL_LOG_SUBSYS_CONFIG (1u << 6)
#define RMACOLL_LOG_SUBSYS_ALL 0xffffffffu

/**
 * Log callback an embedder may inject. msg is one line without a trailing
 * newline. Called from the calling thread or the proxy thread; must be
 * thread-safe.
 */
typedef void (*rmacoll_log_fn_t)(void *ctx, rmacoll_log_level_t level,
                                 uint32_t subsys, const char *msg);

/* Maximum length (with the terminating NUL) of string config values. */
#define RMACOLL_CONFIG_STR_MAX 128

/* Bytes of rmacoll_config_t's opaque store of transport keys (ext). */
#define RMACOLL_CONFIG_EXT_BYTES 2048

/**
 * Configuration. Defaults < YAML file (RMACOLL_CONFIG) < environment
 * (RMACOLL_<KEY>, e.g. RMACOLL_RELAY_SLOTS) < this struct when given to
 * rmacoll_comm_create. Fill it with rmacoll_config_init() first; every
 * rank must use the same configuration (checked at create).
 * See `rmacoll-info` for every key, its default and its meaning.
 *
 * Transports own their keys (rmacoll_transport.h, docs/config.md): the
 * fields from nvlink_kernel_threshold to verbs_max_inflight are the
 * storage of the in-tree transports' keys that existed when transports
 * took over their configuration; they stay for source compatibility
 * (frozen: no transport field is added again). Every other transport
 * key, a plugin's too, is stored in ext, set and read with
 * rmacoll_config_set / rmacoll_config_get only.
 */
typedef struct rmacoll_config {
    size_t struct_size;            /* sizeof(rmacoll_config_t) */
    char intra_node[RMACOLL_CONFIG_STR_MAX];  /* transports.intra_node: ce | nvlink_kernel | auto | plugin:PATH */
    char inter_node[RMACOLL_CONFIG_STR_MAX];  /* transports.inter_node: ofi | verbs | plugin:PATH */
    char scheduler[RMACOLL_CONFIG_STR_MAX];   /* shift | node_shift | xor | random */
    char scheduler_plugin[RMACOLL_CONFIG_STR_MAX]; /* path of a .so, or "" */
    uint64_t scheduler_seed;       /* seed of the random scheduler */
    int relay_enabled;             /* relay.enabled: 1 = two-hop relay across nodes */
    uint64_t relay_buffer_bytes;   /* relay.buffer_bytes: per-rank relay buffer, split
                                    * among the relay's nin incoming channels x slots;
                                    * slot bytes = floor(buffer_bytes / (nin * slots))
                                    * rounded down to 8 must be >= 8, so the minimum is
                                    * 8 * slots * (most channels of any relay) and
                                    * depends on the topology (rmacoll-info --topology;
                                    * checked at create) */
    uint32_t relay_slots;          /* relay.slots: slots per incoming channel */
    uint64_t max_task_bytes;       /* split tasks above this; only the last chunk signals */
    uint64_t timeout_ms;           /* a wait fails after this long without progress
                                    * (silence, not total time), naming the peer */
    /* --- storage of in-tree transport keys (frozen; see above) --- */
    uint64_t nvlink_kernel_threshold; /* intra_node auto: bytes at or below use nvlink_kernel */
    char ofi_provider[RMACOLL_CONFIG_STR_MAX];  /* ofi.provider, e.g. "tcp;ofi_rxm", "shm" */
    char ofi_iface[RMACOLL_CONFIG_STR_MAX];     /* ofi.iface, e.g. "lo" ("" = provider default) */
    char verbs_device[RMACOLL_CONFIG_STR_MAX];  /* verbs.device ("" = closest / by rail) */
    uint32_t verbs_port;           /* verbs.port (1-based) */
    int32_t verbs_gid_index;       /* verbs.gid_index (-1 = auto) */
    uint32_t verbs_mtu;            /* verbs.mtu in bytes (256..4096; 0 = port's active) */
    uint32_t verbs_traffic_class;  /* verbs.traffic_class */
    uint32_t verbs_service_level;  /* verbs.service_level */
    uint32_t verbs_max_inflight;   /* verbs.max_inflight work requests per QP */
    int log_level;                 /* log.level (rmacoll_log_level_t) */
    uint32_t log_subsystems;       /* log.subsystems (RMACOLL_LOG_SUBSYS_* mask) */
    /* Opaque: transport keys without a field above (rmacoll_config_set);
     * zeroed by rmacoll_config_init, copied with the struct. */
    char ext[RMACOLL_CONFIG_EXT_BYTES];
} rmacoll_config_t;

/** Fills cfg with the built-in defaults (no file, no environment). */
void rmacoll_config_init(rmacoll_config_t *cfg);

/**
 * Loads cfg: defaults, then the YAML file at path (NULL: the file named by
 * RMACOLL_CONFIG, if set), then RMACOLL_<KEY> environment overrides.
 * Unknown keys, bad enum values and impossible sizes fail with
 * RMACOLL_ERR_CONFIG; errbuf (may be NULL) receives a message naming the
 * key and the line. Thread-safe (reads the environment).
 */
rmacoll_status_t rmacoll_config_load(const char *path, rmacoll_config_t *cfg,
                                     char *errbuf, size_t errbuf_len);

/**
 * Sets one key of cfg from text, as the YAML file would: key is the dotted
 * name rmacoll-info lists ("ofi.provider", "relay.slots",
 * "transports.inter_node"), value its text ("shm", "4", "64MiB", "true",
 * "plugin:/path/libx.so"). Lets an embedder configure any key, including
 * keys added later, without naming a struct field. cfg is unchanged on
 * error. Errors: RMACOLL_ERR_INVALID_ARG (NULL argument, cfg not
 * initialised by rmacoll_config_init), RMACOLL_ERR_CONFIG (unknown key,
 * value not of the key's type or out of its range). Not thread-safe on
 * one cfg.
 */
rmacoll_status_t rmacoll_config_set(rmacoll_config_t *cfg, const char *key,
                                    const char *value);

/**
 * Reads one key of cfg as text into buf (len bytes, always NUL-terminated;
 * longer values are truncated), written as rmacoll_config_set reads it.
 * Errors: RMACOLL_ERR_INVALID_ARG (NULL argument, len 0),
 * RMACOLL_ERR_CONFIG (unknown key). Thread-safe for concurrent readers.
 */
rmacoll_status_t rmacoll_config_get(const rmacoll_config_t *cfg, const char *key,
                                    char *buf, size_t len);

/**
 * The message of the calling thread's last failed rmacoll_config_set or
 * rmacoll_config_get, naming the key, the value and why ("rmacoll_config_set:
 * relay.slots = 'x': ..."); "" when none failed on this thread. Valid until
 * the thread's next failing call. Thread-safe (one message per thread).
 */
const char *rmacoll_config_last_error(void);

/* Opaque communicator. */
typedef struct rmacoll_comm rmacoll_comm_t;

/* Unique id for the built-in TCP bootstrap, as ncclUniqueId: rank 0 makes
 * it, the application broadcasts it to every rank by its own means. */
#define RMACOLL_UNIQUE_ID_BYTES 128
typedef struct rmacoll_unique_id {
    char internal[RMACOLL_UNIQUE_ID_BYTES];
} rmacoll_unique_id_t;

/**
 * Makes a unique id; call on one rank, then share the bytes. One id serves
 * one communicator: make a new id for every rmacoll_comm_create. An id used
 * again fails rmacoll_comm_create with RMACOLL_ERR_BOOTSTRAP and a message
 * saying so: at once while its communicator lives (its root turns the rank
 * away), and, after it was destroyed, at once in the process that made the
 * id, which then turns the other ranks away for timeout_ms (a rank that
 * reaches no root times out, as at any unreachable root). Starts the
 * rendezvous listener of that process, on the address in RMACOLL_BOOTSTRAP_ADDR
 * ("host:port", default 127.0.0.1 on an ephemeral port).
 * Errors: RMACOLL_ERR_BOOTSTRAP when no socket can be opened.
 */
rmacoll_status_t rmacoll_get_unique_id(rmacoll_unique_id_t *id);

/**
 * Out-of-band collectives an embedder (an MPI or NCCL-based framework) may
 * supply instead of the built-in bootstrap. allgather: every rank gives
 * `bytes` bytes in sendbuf; recvbuf receives nranks * bytes, rank r's part
 * at r * bytes. Both must be collective over all ranks and blocking.
 */
typedef struct rmacoll_oob {
    rmacoll_status_t (*allgather)(void *ctx, const void *sendbuf,
                                  void *recvbuf, size_t bytes);
    rmacoll_status_t (*barrier)(void *ctx);
    void *ctx;
} rmacoll_oob_t;

/** Parameters of rmacoll_comm_create. Zero-initialise, then set. */
typedef struct rmacoll_comm_params {
    size_t struct_size;              /* sizeof(rmacoll_comm_params_t) */
    int rank;                        /* 0..nranks-1 */
    int nranks;                      /* >= 1 */
    const rmacoll_unique_id_t *unique_id; /* built-in bootstrap, or */
    const rmacoll_oob_t *oob;             /* embedder's collectives */
    const rmacoll_config_t *config;  /* NULL: rmacoll_config_load(NULL) */
    const char *node_key;            /* NULL: RMACOLL_NODE_ID, else hostname */
    rmacoll_log_fn_t log_fn;         /* NULL: stderr */
    void *log_ctx;
} rmacoll_comm_params_t;

/**
 * Creates a communicator; collective over all nparams->nranks ranks.
 * Exactly one of unique_id and oob must be set. Nodes are found from the
 * node keys of all ranks; ranks of one node need not be contiguous.
 * Errors: RMACOLL_ERR_INVALID_ARG (bad rank, nranks, or both/neither of
 * unique_id and oob; params->struct_size not sizeof(rmacoll_comm_params_t):
 * returned at once on that rank only; config->struct_size not
 * sizeof(rmacoll_config_t): on every rank), RMACOLL_ERR_CONFIG (a value of
 * params->config that the YAML and environment paths reject, e.g.
 * timeout_ms = 0, relay.slots = 0, max_task_bytes = 0, log.level = 99, on
 * any rank: every rank fails, the message naming that rank and the key;
 * or configs differing between ranks), RMACOLL_ERR_BOOTSTRAP, RMACOLL_ERR_TRANSPORT,
 * RMACOLL_ERR_NO_DEVICE, RMACOLL_ERR_TIMEOUT, RMACOLL_ERR_NO_MEMORY.
 */
rmacoll_status_t rmacoll_comm_create(const rmacoll_comm_params_t *params,
                                     rmacoll_comm_t **comm);

/**
 * Creates a communicator from launcher variables: OMPI_COMM_WORLD_RANK/SIZE
 * (mpirun), SLURM_PROCID/NTASKS (srun), RANK/WORLD_SIZE (torchrun), with the
 * rendezvous at MASTER_ADDR:MASTER_PORT or RMACOLL_BOOTSTRAP_ADDR.
 * config may be NULL. Errors as rmacoll_comm_create, plus
 * RMACOLL_ERR_INVALID_ARG when no launcher variables are found.
 */
rmacoll_status_t rmacoll_comm_create_from_env(const rmacoll_config_t *config,
                                              rmacoll_comm_t **comm);

/** Destroys comm; collective. NULL is accepted. */
rmacoll_status_t rmacoll_comm_destroy(rmacoll_comm_t *comm);

/**
 * Aborts comm on this rank (after NCCL's ncclCommAbort); not collective.
 * Thread-safe: callable from any thread, also while another thread is
 * inside a call on comm (a watchdog), and more than once.
 *  - A call in flight on this rank stops at its next check of the abort
 *    word (every host-side wait checks it between polls of its transports)
 *    and returns RMACOLL_ERR_ABORTED, having written nothing more; its
 *    failure reaches every peer (the abort word), whose calls with this
 *    rank fail with RMACOLL_ERR_PEER naming this rank.
 *  - With no call in flight, this function itself writes the abort word
 *    into every peer's control window (node peers by a store, network
 *    peers by an 8-byte put), so peers waiting for this rank fail at once.
 *  - Every later call on comm returns RMACOLL_ERR_ABORTED; comm must still
 *    be destroyed (rmacoll_comm_destroy, which then skips its barrier).
 * Not covered: device work already enqueued on a stream (a kernel or a
 * stream wait) ends at its own timeout (timeout_ms).
 * Errors: RMACOLL_ERR_INVALID_ARG (comm NULL).
 */
rmacoll_status_t rmacoll_comm_abort(rmacoll_comm_t *comm);

/**
 * The failure comm has seen outside any call (after NCCL's
 * ncclCommGetAsyncError), in *async_error: RMACOLL_SUCCESS when none;
 * RMACOLL_ERR_ABORTED when this rank called rmacoll_comm_abort;
 * RMACOLL_ERR_PEER when another rank failed or aborted (its abort word
 * reached this rank's control window; last_error is not changed, and
 * the next call on comm fails at its start with RMACOLL_ERR_PEER, sending
 * nothing, and passes the word on to this rank's peers); the
 * proxy thread's error (RMACOLL_ERR_TRANSPORT, RMACOLL_ERR_TIMEOUT) when
 * the network failed. Thread-safe, never blocks; polls nothing (what
 * arrives while no call runs on this rank is seen when the transports
 * deliver it: at once for node peers and for shared-memory or TCP
 * providers whose progress runs in their own thread or the proxy's).
 * Errors: RMACOLL_ERR_INVALID_ARG (comm or async_error NULL).
 */
rmacoll_status_t rmacoll_comm_get_async_error(const rmacoll_comm_t *comm,
                                              rmacoll_status_t *async_error);

/**
 * The survivors of comm agree on who is alive and get a new communicator
 * without the failed ranks (after MPI ULFM's MPI_Comm_shrink), in
 * *newcomm. Collective over the survivors: every live rank must call it.
 * Callable on a broken or aborted communicator, and on a healthy one
 * (then every rank is alive and *newcomm has comm's size).
 *  - Agreement, through the built-in bootstrap's root (which keeps every
 *    rank's connection): a rank that calls shrink announces itself, with
 *    the rank its failure named as silent, if any (a heartbeat or silence
 *    timeout: RMACOLL_ERR_TIMEOUT "silent rank R"). The root answers when
 *    every rank still connected has announced itself or was named silent,
 *    or timeout_ms after the first announcement. The survivors are the
 *    ranks that announced and are still connected; every survivor gets the
 *    same list. Excluded: a dead rank (its connection closed), a stopped
 *    one named silent or silent for timeout_ms, a rank that destroyed comm
 *    without shrinking, one that asks after the answer (it gets
 *    RMACOLL_ERR_BOOTSTRAP: "excluded from the shrink").
 *  - A rank that called rmacoll_comm_abort is alive: it is included when
 *    it calls shrink (as ULFM's revoke does not exclude the revoker).
 *  - *newcomm: the survivors renumbered 0..n-1 in their old rank order,
 *    comm's configuration, node keys (topology) and log function, over a
 *    new rendezvous that the root starts in its own process. Its creation
 *    is collective over the survivors, as rmacoll_comm_create.
 *  - comm stays valid only for rmacoll_comm_destroy, which is then local
 *    (no barrier, nothing of a dead rank waited for); calls on it fail.
 *    Destroy both.
 * Not possible: with an embedder's rmacoll_oob_t (comm created with oob:
 * no connection says who is alive): RMACOLL_ERR_UNSUPPORTED; when the
 * process hosting the root died (rmacoll_get_unique_id's process, or rank
 * 0's with launcher variables): RMACOLL_ERR_BOOTSTRAP, last_error says so;
 * on a rank whose bootstrap allgather had failed (its connection closed).
 * Thread-safety: not while another thread is inside a call on comm, nor
 * with a started call in flight (RMACOLL_ERR_IN_PROGRESS); other
 * communicators are independent.
 * Errors: RMACOLL_ERR_INVALID_ARG (NULL; comm already shrunk),
 * RMACOLL_ERR_IN_PROGRESS, RMACOLL_ERR_UNSUPPORTED, RMACOLL_ERR_BOOTSTRAP
 * (root gone, this rank excluded), RMACOLL_ERR_TIMEOUT, RMACOLL_ERR_NO_MEMORY,
 * or the errors of rmacoll_comm_create for the new communicator. On error
 * *newcomm is NULL.
 */
rmacoll_status_t rmacoll_comm_shrink(rmacoll_comm_t *comm, rmacoll_comm_t **newcomm);

rmacoll_status_t rmacoll_comm_rank(const rmacoll_comm_t *comm, int *rank);
rmacoll_status_t rmacoll_comm_size(const rmacoll_comm_t *comm, int *nranks);

/**
 * The message of the last failed call on comm ("rank 3: sendcounts[2] ...
 * NULL sendbuf"), or "" when none. Valid until the next call on comm.
 */
const char *rmacoll_comm_last_error(const rmacoll_comm_t *comm);

/* How device buffers cross nodes on a communicator (chosen at create,
 * logged at INFO; config key transports.device_inter_node). */
typedef enum rmacoll_device_path {
    RMACOLL_DEVICE_PATH_NONE = 0,   /* one node: no network */
    RMACOLL_DEVICE_PATH_STAGED = 1, /* through pinned host staging buffers */
    RMACOLL_DEVICE_PATH_HMEM = 2    /* registered with the network transport
                                     * (FI_HMEM / GPUDirect RDMA): no staging */
} rmacoll_device_path_t;

/**
 * Counters of one communicator since its creation. Versioned by
 * struct_size: set it to sizeof(rmacoll_comm_stats_t) before the call;
 * fields beyond a smaller struct_size, or cut by it, are not written; on
 * return it holds the bytes written (whole fields; at most the library's
 * own size: a caller built against a newer header learns which fields
 * this library filled).
 */
typedef struct rmacoll_comm_stats {
    size_t struct_size;
    rmacoll_device_path_t device_path; /* for device calls across nodes */
    /* bytes copied between device buffers and pinned host staging buffers,
     * both directions (a staged call of S send and R receive bytes adds
     * S + R), counted when the call is enqueued */
    uint64_t staged_bytes;
    /* bytes of device memory registered with the network transport: every
     * registration counts its length (a call's device send and receive
     * ranges each call, cache hits included, except ranges inside a user
     * registration; a user registration of device memory once, at
     * rmacoll_mem_register; the device relay buffer once at create) */
    uint64_t device_registered_bytes;
    uint64_t device_calls_staged;  /* device calls across nodes, staged */
    uint64_t device_calls_hmem;    /* device calls across nodes, registered */
    /* device calls on one node: 1 when their signal words (READY and data
     * words) live in device memory (each rank's array, mapped by its node
     * peers: no signal store or poll crosses PCIe), 0 when in the host
     * control window (no GPU, RMACOLL_DEVICE_SIGNALS=0, or a rank of the
     * node could not map them: logged at INFO at create) */
    int32_t device_signals;
    uint64_t device_calls_device_signals; /* such calls enqueued with them */
    /* eager path (eager_max_bytes; host calls across nodes within the
     * one-round limits, docs/protocol.md): bytes of send
     * blocks this rank sent inside its metadata records, and bytes it
     * copied out of such records (in its relays' inboxes) into its own
     * receive buffer; counted when a call succeeds */
    uint64_t eager_bytes_sent;
    uint64_t eager_bytes_copied;
    /* node eager path (node_eager_max_bytes; host calls within the
     * one-round limits): bytes of send blocks this rank put into
     * its node payload for its node peers, and bytes it copied out of its
     * node peers' payloads into its own receive buffer; counted when a
     * call succeeds */
    uint64_t node_eager_bytes_sent;
    uint64_t node_eager_bytes_copied;
    /* direct streams (relay.direct_min_bytes; host calls across nodes): the
     * threshold in effect on this communicator (0: none: the key is 0, the
     * topology is one node or beyond the one-round limits, the relay is
     * off, or a node's ranks are on different network interfaces), and the
     * bytes of this rank's streams that went straight to other nodes
     * (every block of such a stream, the relay's own included); counted
     * when a call succeeds */
    uint64_t direct_min_bytes;
    uint64_t direct_bytes_sent;
    /* device-count calls (rmacoll_alltoallv_device_counts) enqueued by the
     * host: each one kernel launch and no device-to-host copy or host
     * synchronisation (the counts are read on the device only); graph
     * replays are not counted (the host never sees them) */
    uint64_t device_counts_calls;
    /* user registrations (rmacoll_mem_register): the handles live now and
     * the bytes they cover (overlapping handles count each) */
    uint64_t memreg_handles;
    uint64_t memreg_bytes;
    /* buffers of calls across nodes (each call's send and receive buffer,
     * host calls and registered device calls; empty ones not counted):
     * found inside a live user registration, so no registration was made
     * for them (memreg_buffers), or registered with the network transport
     * for that call and released after it (call_registrations; a transport
     * may answer such a registration from its own cache) */
    uint64_t memreg_buffers;
    uint64_t call_registrations;
} rmacoll_comm_stats_t;

/**
 * Reads comm's counters into *stats (stats->struct_size set by the caller,
 * at least through device_path). Errors: RMACOLL_ERR_INVALID_ARG (NULL
 * argument, struct_size too small). Thread-safe: may be called while
 * another thread makes calls on comm (each counter is read atomically;
 * together they are a snapshot only between calls).
 */
rmacoll_status_t rmacoll_comm_get_stats(const rmacoll_comm_t *comm,
                                        rmacoll_comm_stats_t *stats);

/**
 * Allocates bytes (> 0) of host memory for buffers of comm's calls,
 * page-aligned, into *ptr (the analogue of ncclMemAlloc and
 * MPI_Alloc_mem). When the intra-node transport can share it (the ce
 * transport: a memfd that node peers map on first use through
 * pidfd_getfd(2), Linux >= 5.6, under the same ptrace permission as
 * cross-memory attach), node peers write the receive blocks that land in
 * it with a plain copy into their mapping instead of process_vm_writev(2):
 * one copy still, without the system call's page pinning (on 4 ranks over
 * 2 cores that pinning costs 2.7x at 256 KiB per copy; docs/transport-ce.md).
 * Otherwise (no such transport, an older kernel, all slots taken: there
 * are min(256, RLIMIT_NOFILE / 4), as each shared allocation holds one
 * file descriptor; logged at INFO) it is an ordinary page-aligned
 * allocation and calls treat it as any other buffer. Either way it is this
 * process's memory, zero-filled, to read and write as any, send or receive
 * buffer of any call; the bytes a peer writes follow the call's rules
 * (nothing outside the receive blocks, nothing after a call returned: when
 * a call ends while a node peer is stopped inside a copy into this rank,
 * private pages with the same contents replace the shared ones of the
 * allocations its receive buffer lies in before it returns, so that copy
 * lands elsewhere; new allocations are then ordinary). A shared allocation is MAP_SHARED: a child forked afterwards
 * shares its pages (its rmacoll_mem_free unmaps only its own view).
 * Free it with rmacoll_mem_free before rmacoll_comm_destroy (one left at
 * destroy is logged and stays mapped). A node peer keeps its mapping of
 * a freed allocation (and so its pages) until it maps another at the same
 * address, holds 64 others, or destroys its communicator.
 * Errors: RMACOLL_ERR_INVALID_ARG (NULL comm or ptr, bytes 0),
 * RMACOLL_ERR_NO_MEMORY; logged (naming the rank), not kept in
 * rmacoll_comm_last_error, which belongs to the calls. Thread-safe, also
 * while calls run on comm.
 */
rmacoll_status_t rmacoll_mem_alloc(rmacoll_comm_t *comm, size_t bytes, void **ptr);

/**
 * Frees ptr from rmacoll_mem_alloc on comm; NULL is a no-op. No call
 * whose buffers lie in it may be in flight. Errors:
 * RMACOLL_ERR_INVALID_ARG (NULL comm, or ptr not the start of a live
 * allocation of comm). Thread-safe.
 */
rmacoll_status_t rmacoll_mem_free(rmacoll_comm_t *comm, void *ptr);

/** A user registration (rmacoll_mem_register); opaque. */
typedef struct rmacoll_memreg rmacoll_memreg_t;

/**
 * Registers memory the caller allocated, [ptr, ptr + bytes), for buffers
 * of comm's calls (the analogue of ncclCommRegister): for memory that
 * rmacoll_mem_alloc cannot provide, e.g. tensors of torch's caching
 * allocator. Local: not collective; each rank registers what it likes.
 *
 * Memory type: host memory or CUDA device memory (cudaMalloc, a caching
 * allocator's segment). The core asks its transport instances which it is
 * (their mem_type op, include/rmacoll_transport.h: the CUDA-aware ones
 * answer from cudaPointerGetAttributes); when none can tell (a build
 * without CUDA) it is host memory. Managed memory counts as host memory.
 *
 * What it does: with a network transport (a communicator over more than
 * one node), host memory, and device memory where device calls cross
 * nodes registered (stats device_path RMACOLL_DEVICE_PATH_HMEM), are
 * registered with it once, here. A call across nodes whose send or
 * receive buffer (its whole extent) lies inside a live registration of
 * the same type uses it: no registration is made for that buffer and
 * none released after the call (stats memreg_buffers counts them,
 * call_registrations the buffers registered per call, as every buffer is
 * without this), and the transport keeps the registered region for the
 * handle's whole life (a reference: never evicted from its registration
 * cache). Registered device calls stay without staging (staged_bytes
 * unchanged). Device memory on a communicator whose device calls are
 * staged, and any memory on one node (no network transport), is accepted
 * and only tracked: those calls register nothing with the network
 * (copies between node peers map or attach to the buffers as before).
 * Overlapping registrations are allowed, each its own handle.
 *
 * Units: bytes. *handle receives the registration (NULL on error); the
 * same memory must stay allocated and mapped until rmacoll_mem_deregister:
 * freeing it while registered is undefined (as with ncclCommRegister;
 * the transport may keep its pages pinned, and a later allocation at the
 * same addresses may be written through the old registration). Free it
 * only after deregistering (torch: before the caching allocator returns a
 * segment, i.e. before torch.cuda.empty_cache()).
 *
 * Errors: RMACOLL_ERR_INVALID_ARG (NULL comm, ptr or handle, bytes 0,
 * ptr + bytes wraps), RMACOLL_ERR_NO_MEMORY, or the network transport's
 * error (e.g. RMACOLL_ERR_NO_MEMORY when its registration cache is full
 * of registrations in use: ofi holds 256); logged at ERROR naming the rank
 * and the argument or the cause, not kept in rmacoll_comm_last_error,
 * which belongs to the calls. Thread-safe, also while calls run on comm.
 */
rmacoll_status_t rmacoll_mem_register(rmacoll_comm_t *comm, void *ptr, size_t bytes,
                                      rmacoll_memreg_t **handle);

/**
 * Releases a registration of rmacoll_mem_register (the analogue of
 * ncclCommDeregister); the memory itself stays the caller's. No call whose
 * buffers lie in it may be in flight (a non-blocking call until its wait
 * returned, a device call until its stream passed it); later calls with
 * buffers there register them per call again. Registrations left at
 * rmacoll_comm_destroy are released there (logged at WARN with their
 * number and bytes). Errors: RMACOLL_ERR_INVALID_ARG (NULL comm or
 * handle; a handle that is not live on comm: deregistered already, or
 * made on another communicator), logged naming the rank and the handle.
 * Thread-safe, also while calls run on comm.
 */
rmacoll_status_t rmacoll_mem_deregister(rmacoll_comm_t *comm, rmacoll_memreg_t *handle);

/**
 * sendbuf of an in-place call (MPI_IN_PLACE's semantics): the data to send
 * is taken from recvbuf, rank j's block being recvcounts[j] elements at
 * rdispls[j], and is replaced there by what rank j sends; sendcounts and
 * sdispls are ignored (they may be NULL). The library first copies the
 * send blocks, packed, into a buffer of the communicator (kept and reused,
 * grown to the largest in-place call, freed at destroy): an in-place call
 * costs that copy and its memory. Host memory only: with a stream every
 * rank returns RMACOLL_ERR_UNSUPPORTED. Any rank may call in place while
 * others do not.
 */
#define RMACOLL_IN_PLACE ((const void *)1)

/**
 * AlltoAllV. Collective over all ranks of comm.
 *
 * Shapes: sendcounts, sdispls, recvcounts, rdispls each hold nranks int64
 * values, in elements of dtype. Rank i's block for rank j is
 * sendcounts[j] elements at element sdispls[j] of sendbuf; it lands at
 * element rdispls[i] of rank j's recvbuf, where recvcounts[i] must equal it.
 * Bytes outside the receive blocks are never written.
 *
 * Memory: host memory with stream == NULL (the call blocks until the
 * receive buffer is complete and the send buffer may be reused), or CUDA
 * device memory with a cudaStream_t (the call enqueues on the stream and
 * returns without host synchronisation). Successive device calls on one
 * communicator must use the same stream, or streams the caller orders; a
 * host-memory call on a communicator must come after the stream of its
 * previous device call has completed (e.g. cudaStreamSynchronize), as
 * both raise the same signal words. Device memory across nodes is staged through
 * pinned host memory; one such call is in flight at a time (the next call
 * on the communicator waits for its receive blocks to reach the device).
 *
 * CUDA graphs: a call while its stream is being captured returns
 * RMACOLL_ERR_UNSUPPORTED, unless the process runs with
 * RMACOLL_CUDA_GRAPH=1 (opt-in, read once per process; docs/gpu.md) and
 * every rank is on one node. Then the call is recorded into the graph
 * (the metadata exchange, agreement and planning happen at capture, on
 * every rank, which must all capture the call) and each launch of the
 * graph redoes the call. Between replays the CONTENTS of the send buffers
 * may change (written on the stream before the launch); everything else
 * must not: the same buffers (addresses), counts, displacements and
 * dtype, the same stream on every rank, every rank launching its graph
 * once per replay, in the same order relative to its other calls on the
 * communicator. Ordinary device calls on the same stream may come before,
 * between and after replays. Host-memory calls between replays on the
 * same communicator are allowed only when rmacoll_comm_get_stats reports
 * device_signals = 1 (device calls then keep signal words of their own in
 * device memory, which host calls never touch); with the host words they
 * are not. Ranks that are threads of one process
 * should capture with cudaStreamCaptureModeThreadLocal (or Relaxed), and
 * each rank should make one ordinary call with the same buffers before
 * capturing (node peers' buffers are then already mapped). Graph mode
 * adds two batches of stream writes to every device call.
 *
 * Errors (the same code on every rank; rmacoll_comm_last_error names the
 * rank and the argument; on error no receive buffer is written):
 *  RMACOLL_ERR_NULL_BUFFER  NULL sendbuf/recvbuf with a non-zero count
 *  RMACOLL_ERR_OVERFLOW     negative count/displacement, or
 *                           (displacement + count) * element size > 2^63
 *  RMACOLL_ERR_OVERLAP      two receive blocks overlap, or a send block
 *                           overlaps a receive block (sendbuf == recvbuf
 *                           with overlapping ranges included: for an
 *                           in-place call pass RMACOLL_IN_PLACE)
 *  RMACOLL_ERR_DATATYPE     unknown dtype, or an element size that differs
 *                           between ranks (the element size travels in the
 *                           metadata; the message names both ranks and sizes)
 *  RMACOLL_ERR_MISMATCH     sendcounts of i for j != recvcounts of j for i
 *  RMACOLL_ERR_TIMEOUT      a wait saw no progress for timeout_ms (the
 *                           message names the awaited peer). Progress is
 *                           any rise of the awaited word, of any signal word
 *                           of this rank, or of a node peer's progress count
 *                           (raised by each wait it completes), so a slow
 *                           transfer that keeps moving does not time out; a
 *                           stopped peer is reported about timeout_ms after
 *                           its last sign of life
 *  RMACOLL_ERR_TRANSPORT    the network reported a failure (a dead peer is
 *                           often seen this way, before any timeout)
 *  RMACOLL_ERR_PEER         a node peer vanished during a copy; a rank died
 *                           (the bootstrap root's report, or, at its node
 *                           peers, the exit of its process: "... has exited
 *                           ... (dead rank R)", docs/reliability.md); or the
 *                           communicator already failed in an earlier call
 *  RMACOLL_ERR_CUDA, RMACOLL_ERR_NO_MEMORY
 * After TIMEOUT, TRANSPORT, PEER or CUDA the communicator is unusable and
 * must be destroyed. The first rank to meet such a failure writes an abort
 * word (its rank, the code, the peer it found silent) into its peers'
 * control windows (node peers through shared memory, network peers by a
 * put, best effort); every rank still waiting in the call returns at once
 * with RMACOLL_ERR_PEER, its message starting "secondary error: rank R
 * failed first (CODE, silent rank S)". A rank may already have completed
 * the call when a peer dies, and a network peer the put does not reach
 * learns of the failure by its own timeout.
 *
 * Error guarantees (what may have been written when a call fails):
 *  - Argument, datatype, mismatch, config and registration errors (the
 *    same code on every rank): no receive buffer is written, on any rank.
 *  - After any other error this rank's receive blocks may hold part of the
 *    data (never bytes outside the blocks); treat them as undefined.
 *  - No late write by node peers, host memory: once the call has returned
 *    (success or error), no node peer copies into this rank's receive
 *    buffer. A gate in the control window is closed before the call
 *    returns, and a node peer checks it before each batch of copies (a
 *    Dekker handshake: the call waits, up to timeout_ms, for a peer already
 *    between its check and the end of its copies). Limit: a peer frozen
 *    longer than timeout_ms inside that window (a few instructions plus one
 *    batch of copies) may still complete its batch; the call logs it. A
 *    receive buffer from rmacoll_mem_alloc, which peers copy into with a
 *    plain memcpy that a stop can interrupt, is unshared before the call
 *    returns in that case (its late copy lands in pages this rank no longer
 *    maps).
 *  - No late write by network peers, host memory: when a call breaks the
 *    communicator (TIMEOUT, TRANSPORT, PEER), the receive buffer's network
 *    registration is revoked before the call returns (transport op
 *    mem_revoke), so a peer that was paused and resumes cannot write into
 *    it: its put fails at the writer, which reports it. ofi: the MR is
 *    closed and the instance stops driving progress (tcp;ofi_rxm keeps
 *    landing a write already under way into a closed MR), so the
 *    communicator's network endpoint is left open, unprogressed, until the
 *    process exits; verbs: ibv_dereg_mr. A transport without mem_revoke (a
 *    plugin) gives no such guarantee; the call then logs a warning. The
 *    relay buffer is not revoked: what lands there is forwarded only by
 *    this rank (which has returned); a node peer's relay forwards into this
 *    buffer through the gate above. Argument errors agreed by every rank
 *    need no revocation: nobody writes.
 *  - Device memory (CUDA) is not gated and not revoked. One node: node
 *    peers copy into this rank's device receive buffer from their own
 *    streams (CUDA IPC mappings, kept until their communicator is
 *    destroyed), after this rank's stream reached the call (its READY
 *    signal); the call returns before any data moves and nothing on the
 *    device times out, so a copy enqueued by a peer may land at any time
 *    after that, error or not. Across nodes (staged through pinned host
 *    memory): network peers and node peers write only the communicator's
 *    staging buffers (a failing staging worker revokes the staging
 *    receive buffer's network registration); the device receive buffer is
 *    written only by this rank's own stream, in stream order, and may
 *    hold part of the data after an error. Node peers' copies into the
 *    staging buffers are not gated: a node peer stopped across destroy may
 *    still write into the freed staging memory. So with device memory:
 *    after an error, synchronise the streams and destroy the communicator
 *    on every rank before freeing or reusing device receive buffers.
 *  - The timeout measures silence (RMACOLL_ERR_TIMEOUT above), in a call
 *    and in the built-in bootstrap's collectives (the rendezvous and the
 *    allgathers of rmacoll_comm_create and of transport init,
 *    rmacoll_comm_destroy's barrier): there progress is a rank's arrival,
 *    so a collective fails when no rank has joined or entered it for
 *    timeout_ms (the root tells the ranks already waiting of each arrival;
 *    a waiting rank allows the root a further grace of 5 s + timeout_ms /
 *    8, at most 30 s, to report which ranks are missing). One rank later
 *    than all others by more than timeout_ms (its own work before create
 *    or destroy) still fails it. An embedder's out-of-band callbacks time
 *    out as they choose.
 *
 * Thread-safety: one call per communicator at a time. A thread entering
 * comm (rmacoll_alltoallv, rmacoll_alltoall, rmacoll_alltoallv_start)
 * while another thread is inside a call on it gets RMACOLL_ERR_INVALID_ARG
 * at once (logged, naming the communicator and the rank; last_error stays
 * the inner call's), and nothing is started or written. Calls on different
 * communicators may run concurrently.
 */
rmacoll_status_t rmacoll_alltoallv(const void *sendbuf,
                                   const int64_t *sendcounts,
                                   const int64_t *sdispls, void *recvbuf,
                                   const int64_t *recvcounts,
                                   const int64_t *rdispls,
                                   rmacoll_datatype_t dtype,
                                   rmacoll_comm_t *comm, void *stream);

/**
 * Uniform AlltoAll: count elements to every rank; rank i's block for j is
 * at element j * count of sendbuf, and lands at element i * count of j's
 * recvbuf. sendbuf RMACOLL_IN_PLACE: in place, as rmacoll_alltoallv.
 * Errors as rmacoll_alltoallv.
 */
rmacoll_status_t rmacoll_alltoall(const void *sendbuf, void *recvbuf,
                                  int64_t count, rmacoll_datatype_t dtype,
                                  rmacoll_comm_t *comm, void *stream);

/* A non-blocking call in flight (opaque; owned by its communicator). */
typedef struct rmacoll_request rmacoll_request_t;

/**
 * Non-blocking AlltoAllV of host memory (as MPI_Ialltoallv): starts the
 * call and returns at once; the communicator's own thread carries it out
 * (metadata round, agreement, data rounds) while the caller does other
 * work, including calls on other communicators. Complete it with
 * rmacoll_test or rmacoll_wait; rmacoll_alltoallv is the same pipeline run
 * on the calling thread.
 *
 * Shapes and units as rmacoll_alltoallv (host memory only). The buffers
 * and the four arrays are borrowed until the call completes: the caller
 * must neither modify them nor read recvbuf before then.
 *
 * One call per communicator at a time: another call on comm (blocking or
 * not) before the request completes fails with RMACOLL_ERR_INVALID_ARG and
 * starts nothing. Collective: every rank starts (or makes) the same calls
 * in the same order.
 *
 * Errors returned here: RMACOLL_ERR_INVALID_ARG (NULL comm or req, a
 * request in flight), RMACOLL_ERR_PEER (communicator failed earlier),
 * RMACOLL_ERR_NO_MEMORY (no thread); *req is then NULL. Every other error
 * of rmacoll_alltoallv (the same code on every rank for argument errors)
 * is returned by rmacoll_test / rmacoll_wait.
 *
 * Thread-safety: until completion only rmacoll_test / rmacoll_wait may be
 * called on the request, from one thread at a time.
 */
rmacoll_status_t rmacoll_alltoallv_start(const void *sendbuf,
                                         const int64_t *sendcounts,
                                         const int64_t *sdispls, void *recvbuf,
                                         const int64_t *recvcounts,
                                         const int64_t *rdispls,
                                         rmacoll_datatype_t dtype,
                                         rmacoll_comm_t *comm,
                                         rmacoll_request_t **req);

/**
 * Checks a started call without blocking: *done = 0 while it runs
 * (returns RMACOLL_SUCCESS); once complete *done = 1, the call's status is
 * returned and the request is released (req must not be used again).
 * Errors: RMACOLL_ERR_INVALID_ARG (NULL, or not a request in flight).
 */
rmacoll_status_t rmacoll_test(rmacoll_request_t *req, int *done);

/**
 * Blocks until a started call completes; returns its status and releases
 * the request. Errors: RMACOLL_ERR_INVALID_ARG (NULL, or not a request in
 * flight), else those of rmacoll_alltoallv.
 */
rmacoll_status_t rmacoll_wait(rmacoll_request_t *req);

/* rmacoll_alltoallv_device_counts: what the call does with recvcounts. */
typedef enum rmacoll_recv_mode {
    /* dispatch: the receive side is PRODUCED: the call writes recvcounts
     * (each rank learns what it receives) */
    RMACOLL_RECV_PRODUCE = 0,
    /* combine: the receive side is GIVEN (known from an earlier dispatch):
     * recvcounts is read and checked against the senders' counts */
    RMACOLL_RECV_GIVEN = 1
} rmacoll_recv_mode_t;

/**
 * AlltoAllV whose counts live in device memory (issue 31): the split sizes
 * of an MoE layer, written by a kernel (the router) earlier on the same
 * stream, are read on the device; the host never sees them, nothing is
 * synchronised with the host, and the call may be captured into a CUDA
 * graph whose replays take the counts current at each replay. Collective
 * over all ranks of comm, which must be one node (see UNSUPPORTED below).
 *
 * Layout: PACKED on both sides (no displacement arrays). Rank i's block
 * for rank j starts at element sum(sendcounts[0..j-1]) of sendbuf; rank
 * j receives it at element sum over k < i of (what rank k sends to j) of
 * recvbuf, i.e. blocks packed in source-rank order. Packed layouts are
 * what a router's sort by destination produces, need no displacement
 * array to compute or check on the device, cannot overlap, and make the
 * bounds check one prefix sum against a capacity; a dispatch's receive
 * layout is exactly a combine's send layout, and the other way round.
 *
 * Shapes and units (ELEMENTS of dtype everywhere; no argument is in bytes):
 *  sendbuf         device memory, send_capacity elements
 *  sendcounts      DEVICE memory, nranks int64: elements for each rank;
 *                  read on the device when the stream reaches the call
 *  send_capacity   elements of sendbuf (>= 0): the call reads no element
 *                  past it (sum(sendcounts) > send_capacity is an error)
 *  recvbuf         device memory, recv_capacity elements
 *  recvcounts      DEVICE memory, nranks int64: recvcounts[i] = elements
 *                  from rank i. RMACOLL_RECV_PRODUCE: written by the call
 *                  (also when it fails on capacity: the sizes a retry
 *                  needs); RMACOLL_RECV_GIVEN: read, and each must equal
 *                  what rank i sends here (else RMACOLL_ERR_MISMATCH)
 *  recv_capacity   elements of recvbuf (>= 0): nothing is written past it
 *  status          DEVICE memory, one int32, written by the call on the
 *                  stream: 0 (RMACOLL_SUCCESS) or the rmacoll_status_t of
 *                  a failure found on the device (below); later work on
 *                  the stream (or a graph node after the call) may read it
 * sendbuf / recvbuf may be NULL only with a capacity of 0.
 * The pointers must stay valid (and, for graph replays, at the same
 * addresses) while the stream runs the call; the arrays are read or
 * written only by the device, in stream order.
 *
 * Errors found on the HOST (returned by this call, the same code on every
 * rank; rmacoll_comm_last_error names the rank and the argument; nothing
 * is enqueued on any rank):
 *  RMACOLL_ERR_INVALID_ARG  NULL comm, sendcounts, recvcounts or status
 *                           (stream NULL is the host form, below; pass a
 *                           created stream or cudaStreamPerThread for the
 *                           device form); a capacity < 0;
 *                           unknown mode; a pointer that is not device
 *                           memory of this rank's GPU, or a capacity that
 *                           passes the end of its buffer's allocation
 *  RMACOLL_ERR_NULL_BUFFER  NULL sendbuf / recvbuf with a capacity > 0
 *  RMACOLL_ERR_OVERFLOW     capacity * element size > 2^63 - 1 bytes
 *  RMACOLL_ERR_DATATYPE     unknown dtype, or element sizes that differ
 *                           between ranks
 *  RMACOLL_ERR_UNSUPPORTED  comm spans more than one node and the
 *                           experimental form across nodes (below) is off,
 *                           more than 64 ranks, no transport that
 *                           runs device-count calls (transports.intra_node
 *                           must be nvlink_kernel or auto: the default ce
 *                           has none), no device-resident signal words on
 *                           this communicator, or ranks of one GPU in
 *                           separate processes (the kernels of the ranks
 *                           wait for each other and must run at once)
 *  RMACOLL_ERR_PEER, RMACOLL_ERR_CUDA, RMACOLL_ERR_TIMEOUT  as
 *                           rmacoll_alltoallv (the communicator is broken)
 *
 * Errors found on the DEVICE (all ranks find the same one, since every
 * rank's kernel reads every rank's counts and capacities; NO byte of any
 * rank's recvbuf is written then, and nothing is read past any sendbuf's
 * capacity):
 *  RMACOLL_ERR_OVERFLOW     a negative count, a sum of counts above
 *                           INT64_MAX, sum(sendcounts) > send_capacity on
 *                           some rank, or some rank would receive more
 *                           than its recv_capacity
 *  RMACOLL_ERR_MISMATCH     RMACOLL_RECV_GIVEN: a recvcounts entry differs
 *                           from its sender's count
 *  RMACOLL_ERR_TIMEOUT      a peer's kernel did not arrive within
 *                           timeout_ms (the communicator is then broken)
 * Such an error is reported twice: (1) in *status on every rank, in stream
 * order (the device-side report, the one to use inside a graph); (2) by
 * the next rmacoll_device_counts_check on the communicator (the
 * host-visible report) once the failing call has run on the device: see
 * there; a later failure before that check is only in its own *status).
 * The call itself has returned RMACOLL_SUCCESS long before (it only
 * enqueues). A device error other than TIMEOUT leaves the communicator
 * usable: the next call may succeed.
 *
 * Graphs: the call may be captured (no RMACOLL_CUDA_GRAPH needed: its
 * kernel keeps its own sequence number in device memory, so every replay
 * and every ordinary call pairs with the same call on the other ranks).
 * Between replays the contents of sendbuf, sendcounts and (GIVEN)
 * recvcounts may change; the pointers, capacities, mode, dtype and stream
 * must not. Every rank must launch its graph once per replay, in the same
 * order relative to its other device-count calls. Make one ordinary call
 * with the same buffers before capturing, so that node peers' buffers are
 * mapped outside the capture. Ranks that are threads of one process
 * capture with cudaStreamCaptureModeThreadLocal or Relaxed.
 *
 * Cost: one kernel launch; inside, two rounds of flags between the ranks
 * (arrival, then completion: a rank's arrays and buffers are reused only
 * after every peer is done with them) and nranks^2 counts read.
 *
 * Thread-safety: as rmacoll_alltoallv (one call per communicator at a
 * time). Device-count calls and ordinary device calls may be mixed on one
 * stream; their signal words are distinct.
 *
 * Across nodes (experimental, off unless RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1:
 * it has run on a GPU in its test only): stream-triggered. The call is NOT collective
 * and only enqueues, with the copy-engine transport's stream operations:
 * copies of sendcounts, recvcounts (given, or current), *status, the whole
 * send buffer (send_capacity elements) and the whole receive buffer
 * (recv_capacity) into pinned host memory of the call's slot; a word that
 * wakes the communicator's worker thread; a wait for the worker's answer;
 * the copies back (receive buffer, produced recvcounts, *status). The
 * worker runs the host form (below) on the slot's memory, in stream order,
 * so the arrays and buffers may change between graph replays. Errors: the
 * same verdict lands in every rank's *status and in the next
 * rmacoll_device_counts_check; an argument error, or a failure of the call
 * itself (no free slot, no pinned memory: RMACOLL_ERR_UNSUPPORTED,
 * RMACOLL_ERR_NO_MEMORY), is also returned by the rank that had it, and
 * travels to the peers' *status through a job with no copies. "Nothing
 * written" holds value for value: the copy back rewrites the whole receive
 * buffer with the bytes it held when the stream reached the call, and the
 * received blocks. Pointers are not checked to be device memory here.
 * Rules: stream NULL on every rank or on none; ONE stream per
 * communicator for these calls (another stream: RMACOLL_ERR_UNSUPPORTED on
 * that rank, nothing enqueued; the peers' matching calls then time out);
 * at most 16 argument sets kept at once (a slot that no graph captured is
 * reused once the stream is past it, i.e. once the worker has been woken
 * by a later call, so eager calls with new buffers are fine;
 * each keeps 3 * nranks * 8 + 64 bytes plus both capacities pinned); once
 * such a call was made, every other call on the communicator returns
 * RMACOLL_ERR_UNSUPPORTED (the worker owns its order: use a communicator of
 * its own); under stream capture, make the same call (same arrays, buffers,
 * capacities, mode, dtype, status) once outside capture first: a slot's
 * host memory is pinned when the slot is made, which a capture does not
 * allow (otherwise RMACOLL_ERR_UNSUPPORTED on that rank, nothing enqueued);
 * destroy the communicator only once its stream is idle. Cost:
 * the host form plus two capacity-sized copies each way over PCIe (the
 * staged path; the registered (FI_HMEM) path is not built for it).
 *
 * Host form (stream NULL on EVERY rank; NULL on some ranks only fails on
 * every rank): sendcounts, recvcounts, status, sendbuf and recvbuf are
 * host memory, the call runs on the calling thread and returns when this
 * rank's data is in place, at ANY number of nodes (the limits above on
 * nodes, ranks and transports are the device form's). It is the protocol
 * the device form runs across nodes once the counts have reached the host
 * (core/exec/dcx.c): every rank sends every rank one record (its counts,
 * given receive counts, capacities, element size, argument error), every
 * rank computes the same verdict from the whole matrix (the device
 * kernel's rules and order: the failure with the lowest (rank, reason,
 * peer) is reported), then one alltoallv with the packed layouts moves the
 * data. Its errors are returned at once, the same code on every rank, with
 * rmacoll_comm_last_error naming the rank, the reason and the counts: the
 * argument errors above (no array or buffer written), RMACOLL_ERR_DATATYPE
 * for element sizes that differ, RMACOLL_ERR_OVERFLOW / RMACOLL_ERR_MISMATCH
 * as the device errors (then *status holds the code, recvcounts with
 * RMACOLL_RECV_PRODUCE the sizes a retry needs, and no receive buffer is
 * written; the communicator stays usable), and those of rmacoll_alltoallv.
 * On success *status is 0. rmacoll_device_counts_check does not report
 * host-form calls. Cost: a host-count alltoallv plus one exchange of
 * nranks * (2 * nranks + 6) * 8 bytes per rank.
 */
rmacoll_status_t rmacoll_alltoallv_device_counts(const void *sendbuf,
                                                 const int64_t *sendcounts,
                                                 int64_t send_capacity, void *recvbuf,
                                                 int64_t *recvcounts, int64_t recv_capacity,
                                                 rmacoll_recv_mode_t mode,
                                                 rmacoll_datatype_t dtype,
                                                 rmacoll_comm_t *comm, void *stream,
                                                 int32_t *status);

/**
 * The host-visible report of device-count calls (rmacoll_alltoallv_device_counts):
 * returns the first error that such a call on comm met on the device and
 * that no earlier check returned (RMACOLL_SUCCESS: none), and forgets it.
 * rmacoll_comm_last_error then names the call (its sequence number on the
 * device, 1 = the first device-count call of comm, graph replays
 * included), the rank and the reason ("rank 2 would receive 4096 elements,
 * its recv_capacity is 4000"). Local and non-blocking: it reads a word the
 * kernel wrote into host-mapped memory, so it sees a call only once the
 * stream has run it (e.g. after cudaStreamSynchronize or an event); every
 * rank then reports the same error. Not collective. Errors besides the
 * reported one: RMACOLL_ERR_INVALID_ARG (NULL comm). Thread-safety: as a
 * call on comm (not while another thread is inside one).
 */
rmacoll_status_t rmacoll_device_counts_check(rmacoll_comm_t *comm);

/**
 * Version of the library loaded at run time (which may differ from the
 * RMACOLL_VERSION_* of the header compiled against), as ncclGetVersion:
 * *version = major * 10000 + minor * 100 + patch (0.1.0 -> 100).
 * Errors: RMACOLL_ERR_INVALID_ARG when version is NULL. Thread-safe.
 */
rmacoll_status_t rmacoll_get_version(int *version);

/** The same version as text, "MAJOR.MINOR.PATCH" (static; never NULL).
 *  Thread-safe. */
const char *rmacoll_version_string(void);

/** Build information: comma-separated transports and schedulers compiled in. */
const char *rmacoll_build_transports(void);
const char *rmacoll_build_schedulers(void);

#ifdef __cplusplus
}
#endif

#endif /* RMACOLL_H */
