/*
 * shm.h - named POSIX shared-memory segments that the ranks of one node
 * map (control windows: signal words, relay slot state).
 *
 * The creator (owner) makes the name with O_CREAT|O_EXCL, sizes and
 * reserves it (posix_fallocate, so a full /dev/shm fails here and not with
 * SIGBUS on first touch) and maps it zero-filled; peers attach by name,
 * retrying until it exists and is large enough. The owner unlinks the name
 * once every peer has attached (the mappings stay valid), so a crash after
 * that leaves nothing in /dev/shm.
 *
 * Names: "/rmacoll-<16 hex of a comm id>-<rank>" (rmacoll__shm_name), with
 * ".<tag>" appended when RMACOLL_SHM_TAG is set (rmacoll__shm_tag).
 * Thread-safety: distinct segments may be used from distinct threads;
 * the functions keep no state outside *seg.
 */
#ifndef RMACOLL_CORE_SHM_H
#define RMACOLL_CORE_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll.h"

typedef struct rmacoll__shm {
    void *addr;    /* mapping, NULL when not mapped */
    size_t bytes;  /* mapped length */
    char name[96]; /* POSIX name, "/..." */
    int owner;     /* 1 while this process created the name and has not
                    * unlinked it yet; 0 otherwise */
} rmacoll__shm_t;

/**
 * Removes segments named "/rmacoll-<16 hex>-<rank>" whose creator has
 * exited without unlinking them (killed between create and the peers'
 * attach). A segment is stale when its first 8 bytes hold `magic` and the
 * 8 bytes at `pid_off` hold the pid of a process that no longer exists
 * (kill(pid, 0) gives ESRCH, in this PID namespace); segments being
 * created (magic not yet written) and those of live processes are left
 * alone. Returns the number removed (each logged at INFO). Thread-safe.
 */
int rmacoll__shm_sweep_stale(uint64_t magic, size_t pid_off);

/* Longest RMACOLL_SHM_TAG. */
#define RMACOLL__SHM_TAG_MAX 24

/**
 * RMACOLL_SHM_TAG, the text appended (after a '.') to the names of the
 * /dev/shm files this process creates: control windows and the libfabric
 * shm provider's regions. The test suite sets one per build so that its
 * /dev/shm check sees only the files of its own tests. *tag gets "" when
 * unset or empty; returns 0, or -1 when the value is not 1 to
 * RMACOLL__SHM_TAG_MAX letters, digits or '_' (*tag then gets the value).
 */
int rmacoll__shm_tag(const char **tag);

/** Writes "/rmacoll-<16 hex of comm_id>-<rank>" into name (len >= 64). */
void rmacoll__shm_name(uint64_t comm_id, int rank, char *name, size_t len);

/**
 * Creates name (must start with '/', shorter than 96 bytes, no other '/')
 * with `bytes` (> 0) zero bytes and maps it read-write, shared.
 * Errors (logged, naming the segment and size): RMACOLL_ERR_INVALID_ARG
 * (bad name/size; the name already exists: a stale segment from an
 * earlier run with the same id), RMACOLL_ERR_NO_DEVICE (/dev/shm missing or
 * not writable), RMACOLL_ERR_NO_MEMORY (/dev/shm full, mmap failed).
 * On error nothing is left behind (the name is removed again) and *seg is
 * zeroed.
 */
rmacoll_status_t rmacoll__shm_create(const char *name, size_t bytes,
                                     rmacoll__shm_t *seg);

/**
 * Maps an existing segment of at least `bytes` bytes, retrying (1..20 ms
 * apart) until it exists and is that large, or timeout_ms passed.
 * Errors: RMACOLL_ERR_INVALID_ARG, RMACOLL_ERR_TIMEOUT (missing or too
 * small when the time ran out; the log says which), RMACOLL_ERR_NO_DEVICE,
 * RMACOLL_ERR_NO_MEMORY. On error *seg is zeroed.
 */
rmacoll_status_t rmacoll__shm_attach(const char *name, size_t bytes,
                                     uint64_t timeout_ms, rmacoll__shm_t *seg);

/** Owner: removes the name (peers must have attached). No-op otherwise
 *  or when already unlinked. The mapping stays valid. */
void rmacoll__shm_unlink(rmacoll__shm_t *seg);

/** Unmaps, and unlinks the name when still owned; zeroes *seg. A zeroed
 *  or NULL seg is accepted. */
void rmacoll__shm_destroy(rmacoll__shm_t *seg);

#endif /* RMACOLL_CORE_SHM_H */
