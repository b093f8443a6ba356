/*
 * bootstrap.h - the out-of-band layer a communicator uses at create time
 * and for its collective destroy: allgather and barrier over all ranks.
 *
 * Two back ends behind one handle:
 *  - the built-in TCP rendezvous. rmacoll_get_unique_id (or, for launcher
 *    variables, rank 0 inside rmacoll__bootstrap_from_env) starts a root
 *    listener thread; every rank connects to it and the root serves each
 *    allgather as a star (it receives every rank's part and sends the whole
 *    back to every rank). The root exits and frees itself once every rank
 *    has left; after a rank's death (reported to every rank) it stays,
 *    serving no allgather, for rmacoll__bootstrap_shrink, until every
 *    rank left or timeout_ms of silence (bootstrap_shrink.c).
 *  - an embedder's rmacoll_oob_t callbacks, called as they are.
 *
 * Every socket wait has a deadline (timeout_ms), counted as silence: the
 * rendezvous and each allgather/barrier fail when no rank has joined or
 * entered for timeout_ms (ranks that arrive one after another, each within
 * timeout_ms of the last, all succeed); a rank that never connects
 * fails create with RMACOLL_ERR_TIMEOUT on every other rank and the log
 * names the missing rank(s); a rank that dies makes every other rank's
 * pending or next allgather fail with RMACOLL_ERR_BOOTSTRAP (the log names
 * the rank);
 * a root that goes silent gives RMACOLL_ERR_TIMEOUT after timeout_ms plus a
 * grace of 5 s + timeout_ms / 8 (at most 30 s).
 *
 * Thread-safety: one bootstrap handle must not be used by two threads at
 * once; distinct handles (and the functions without a handle) are
 * thread-safe. Sockets are opened with SOCK_CLOEXEC and written with
 * MSG_NOSIGNAL (no SIGPIPE).
 *
 * core/oob - out of band (README): owns the bootstrap (TCP root, PMIx, the
 * embedder's out-of-band calls, the unique id); calls base and config.
 */
#ifndef RMACOLL_CORE_BOOTSTRAP_H
#define RMACOLL_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"
#include "rmacoll.h"

typedef struct rmacoll__bootstrap rmacoll__bootstrap_t;

/* Used when a create is given timeout_ms == 0. */
#define RMACOLL__BOOTSTRAP_DEFAULT_TIMEOUT_MS 300000u
/* Largest per-rank contribution of one allgather, in bytes (1 GiB). */
#define RMACOLL__BOOTSTRAP_MAX_BYTES (1ull << 30)
/* Characters of the hex text of a unique id, without the NUL. */
#define RMACOLL__UNIQUE_ID_HEX_LEN (2 * RMACOLL_UNIQUE_ID_BYTES)

/**
 * Joins the TCP rendezvous of id as rank (0..nranks-1) of nranks.
 * Collective: returns once all nranks ranks have connected.
 * timeout_ms bounds the silence (no rank joining or entering) in the
 * create and in each later allgather/barrier
 * (0 = RMACOLL__BOOTSTRAP_DEFAULT_TIMEOUT_MS).
 * Errors: RMACOLL_ERR_INVALID_ARG (bad rank/nranks or not an id),
 * RMACOLL_ERR_TIMEOUT (root unreachable, or ranks missing: logged by
 * number), RMACOLL_ERR_BOOTSTRAP (rejected: wrong magic, duplicate rank,
 * nranks differing between ranks; or the root vanished),
 * RMACOLL_ERR_NO_MEMORY. On error *bs is untouched and nothing is owed.
 */
rmacoll_status_t rmacoll__bootstrap_create(const rmacoll_unique_id_t *id,
                                           int rank, int nranks,
                                           uint64_t timeout_ms,
                                           rmacoll__bootstrap_t **bs);

/**
 * As rmacoll__bootstrap_create, logging through lg (copied; NULL = the
 * default logger from RMACOLL_LOG_LEVEL). The communicator passes its own.
 */
rmacoll_status_t rmacoll__bootstrap_create_ex(const rmacoll_unique_id_t *id,
                                              int rank, int nranks,
                                              uint64_t timeout_ms,
                                              const rmacoll__logger_t *lg,
                                              rmacoll__bootstrap_t **bs);

/**
 * Wraps an embedder's callbacks (oob->allgather is required; a NULL
 * oob->barrier is replaced by a 1-byte allgather). oob is copied; oob->ctx
 * is borrowed until destroy. Not collective itself.
 * Errors: RMACOLL_ERR_INVALID_ARG, RMACOLL_ERR_NO_MEMORY.
 */
rmacoll_status_t rmacoll__bootstrap_create_oob(const rmacoll_oob_t *oob,
                                               int rank, int nranks,
                                               rmacoll__bootstrap_t **bs);

/** Replaces the logger of bs (copied); NULL = the default logger. */
void rmacoll__bootstrap_set_logger(rmacoll__bootstrap_t *bs,
                                   const rmacoll__logger_t *lg);

int rmacoll__bootstrap_rank(const rmacoll__bootstrap_t *bs);
int rmacoll__bootstrap_nranks(const rmacoll__bootstrap_t *bs);

/**
 * Allgather: every rank gives `bytes` bytes at send; recv (nranks * bytes
 * bytes) receives rank r's part at recv + r * bytes. In place is allowed
 * (send == recv + rank * bytes). bytes may be 0 (then it is a barrier) and
 * must be the same on every rank, at most RMACOLL__BOOTSTRAP_MAX_BYTES.
 * Errors: RMACOLL_ERR_INVALID_ARG, RMACOLL_ERR_NULL_BUFFER,
 * RMACOLL_ERR_TIMEOUT (a rank did not enter in time: logged by number),
 * RMACOLL_ERR_BOOTSTRAP (a rank died or left: logged by number; sizes
 * differ between ranks; root lost), RMACOLL_ERR_NO_MEMORY (at the root),
 * or whatever the embedder's callback returned. After an error on the TCP
 * path every later call on bs fails at once with the same status.
 */
rmacoll_status_t rmacoll__bootstrap_allgather(rmacoll__bootstrap_t *bs,
                                              const void *send, void *recv,
                                              size_t bytes);

/** 1 when rmacoll__bootstrap_poll_error can report a death: a TCP
 * bootstrap whose connection to the root is open (not an embedder's
 * out-of-band allgather). */
int rmacoll__bootstrap_watches(const rmacoll__bootstrap_t *bs);

/** Barrier over all ranks. Errors as rmacoll__bootstrap_allgather. */
rmacoll_status_t rmacoll__bootstrap_barrier(rmacoll__bootstrap_t *bs);

/**
 * The barrier with its own silence limit: it fails when no rank entered or
 * left for timeout_ms (0: the bootstrap's timeout), or at once when every
 * rank that has not entered has left. An embedder's out-of-band barrier
 * keeps its own limits. Errors as rmacoll__bootstrap_allgather.
 */
rmacoll_status_t rmacoll__bootstrap_barrier_for(rmacoll__bootstrap_t *bs, uint64_t timeout_ms);

/**
 * Whether the root has reported a rank's death since the last allgather:
 * an ERROR message naming a rank waiting on this rank's connection ("rank
 * 3 disconnected without leaving (process died?)"); other errors (an
 * allgather timing out) are left for the next allgather to read. Non-blocking (one recv with MSG_PEEK), for a rank's waits during
 * calls, which otherwise learn of a dead peer only at timeout_ms. Returns
 * RMACOLL_SUCCESS when nothing is reported, on the embedder's OOB path, and
 * when the connection is closed (the process hosting the root may exit
 * once its own rank has left: not a report); else the root's status (sticky:
 * every later call returns it), the rank it names in *rank (-1 when none)
 * and its text in text. Not thread-safe against other calls on bs.
 */
rmacoll_status_t rmacoll__bootstrap_poll_error(rmacoll__bootstrap_t *bs, int *rank,
                                               char *text, size_t len);

/**
 * The survivors' agreement of rmacoll_comm_shrink (bootstrap_shrink.c):
 * tells the root this rank is alive and which ranks it saw go silent
 * (suspect: nranks flags), and waits (bound_ms + grace) for the answer:
 * the unique id of a new rendezvous (started by the root in its process),
 * this rank's place among the survivors (*newrank of *newn, the survivors
 * in old rank order) and alive[nranks] (1 = survivor). The root answers
 * once every rank still connected has asked or is a suspect, or bound_ms
 * after the first rank asked. After success bs serves no more allgathers
 * (destroy it). Errors: RMACOLL_ERR_UNSUPPORTED (an embedder's OOB),
 * RMACOLL_ERR_BOOTSTRAP (root gone; this rank excluded: the log says why),
 * RMACOLL_ERR_TIMEOUT; the reason goes into why (wlen bytes; not logged:
 * the caller records it). Not thread-safe against other calls on bs.
 */
rmacoll_status_t rmacoll__bootstrap_shrink(rmacoll__bootstrap_t *bs, const uint8_t *suspect,
                                           uint64_t bound_ms, rmacoll_unique_id_t *id,
                                           int *newrank, int *newn, uint8_t *alive,
                                           char *why, size_t wlen);

/**
 * Leaves the rendezvous and frees bs; NULL is accepted. Not collective by
 * itself: call a barrier first when every rank must have finished (the
 * communicator's destroy does). A rank that destroys before the others
 * finished a pending allgather makes that allgather fail, naming it.
 */
void rmacoll__bootstrap_destroy(rmacoll__bootstrap_t *bs);

/** rmacoll__bootstrap_allgather with the shape of
 *  rmacoll_transport_env_t.allgather; ctx is the rmacoll__bootstrap_t. */
rmacoll_status_t rmacoll__bootstrap_allgather_cb(void *ctx, const void *send,
                                                 void *recv, size_t bytes);

/**
 * Reads launcher variables, first pair found wins:
 *   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE   (Open MPI mpirun)
 *   PMI_RANK / PMI_SIZE                           (MPICH hydra, Intel MPI)
 *   RANK / WORLD_SIZE                             (torchrun)
 *   SLURM_PROCID / SLURM_NTASKS                   (srun; last, since an
 *                                                  sbatch script exports it
 *                                                  to every launcher below)
 * and derives the unique id from RMACOLL_BOOTSTRAP_ADDR ("host:port",
 * "[v6]:port") or else MASTER_ADDR with port MASTER_PORT + 1 (torchrun's
 * own TCP store already listens on MASTER_PORT). The magic is a hash of the
 * address text, nranks and SLURM_JOB_ID/TORCHELASTIC_RUN_ID when set, so
 * every rank computes the same id. Rank 0 starts the root listener in this
 * process, bound to that address (falling back to the wildcard address
 * when the name is not local).
 * Errors: RMACOLL_ERR_INVALID_ARG (no launcher variables, bad numbers,
 * no address), RMACOLL_ERR_BOOTSTRAP (rank 0 could not listen: port in use).
 */
rmacoll_status_t rmacoll__bootstrap_from_env(int *rank, int *nranks,
                                             rmacoll_unique_id_t *id);

/** Writes the id as RMACOLL__UNIQUE_ID_HEX_LEN lower-case hex digits and a
 *  NUL into hex (RMACOLL__UNIQUE_ID_HEX_LEN + 1 bytes). */
void rmacoll__unique_id_to_hex(const rmacoll_unique_id_t *id, char *hex);

/** Parses the text of rmacoll__unique_id_to_hex (either case).
 *  Errors: RMACOLL_ERR_INVALID_ARG (NULL, wrong length, not hex). */
rmacoll_status_t rmacoll__unique_id_from_hex(const char *hex,
                                             rmacoll_unique_id_t *id);

/** Writes "host:port" of the root named by id into buf (for messages).
 *  Errors: RMACOLL_ERR_INVALID_ARG when id is not a unique id. */
rmacoll_status_t rmacoll__unique_id_addr(const rmacoll_unique_id_t *id,
                                         char *buf, size_t len);

#endif /* RMACOLL_CORE_BOOTSTRAP_H */
