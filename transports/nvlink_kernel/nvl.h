/*
 * nvl.h - private to the nvlink_kernel transport: the launch descriptor
 * shared by the host side (nvl.c, C) and the kernel (nvl.cu, CUDA C++).
 *
 * One launch copies up to RMACOLL__NVL_MAX_ENTRIES puts. The descriptor is
 * passed BY VALUE as the kernel's parameter (no device staging buffer, no
 * host synchronisation); it must stay under the classic 4 KiB parameter
 * limit. Entries are grouped by target peer: group g is led by its first
 * entry (group[e] = index of that leader); the group's blocks count on
 * counters[g], and the last block of the group raises the signals of all
 * the group's entries in queue order, so a signal never precedes the bytes
 * of an earlier put to the same peer in the same launch.
 */
#ifndef RMACOLL_TRANSPORT_NVL_H
#define RMACOLL_TRANSPORT_NVL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "rmacoll_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RMACOLL__NVL_MAX_ENTRIES 64u  /* puts per launch */
#define RMACOLL__NVL_THREADS 512u     /* threads per block */
#define RMACOLL__NVL_BYTES_PER_BLOCK (16u << 10) /* a put's bytes per block */
#define RMACOLL__NVL_RING 256u        /* launches whose counters may overlap in time */

typedef struct rmacoll__nvl_entry {
    uint64_t src;       /* source (device address) */
    uint64_t dst;       /* destination (device address, IPC-mapped for peers) */
    uint64_t bytes;
    uint64_t sig;       /* device address of the target's signal word, 0: none */
    uint64_t value;     /* value stored there */
} rmacoll__nvl_entry_t;

/*
 * Scope of a launch's fences and signal stores (nvl.cu says why):
 * RMACOLL__NVL_SCOPE_GPU when every signal word it stores to or polls is
 * device memory of this GPU and every peer it writes or waits for runs on
 * this GPU; RMACOLL__NVL_SCOPE_SYS otherwise (host-mapped control windows,
 * peers on other GPUs across NVLink).
 */
#define RMACOLL__NVL_SCOPE_SYS 0u
#define RMACOLL__NVL_SCOPE_GPU 1u

typedef struct rmacoll__nvl_batch {
    uint32_t *counters;   /* [RMACOLL__NVL_MAX_ENTRIES] device counters, all 0 */
    uint32_t scope;       /* RMACOLL__NVL_SCOPE_* */
    uint32_t n;           /* entries */
    uint32_t nblocks;     /* grid size = first_block[n] */
    /* blocks [first_block[e], first_block[e + 1]) copy entry e */
    uint32_t first_block[RMACOLL__NVL_MAX_ENTRIES + 1];
    uint32_t gblocks[RMACOLL__NVL_MAX_ENTRIES]; /* at a leader: its group's blocks */
    uint8_t group[RMACOLL__NVL_MAX_ENTRIES];    /* leader of entry e's group */
    rmacoll__nvl_entry_t e[RMACOLL__NVL_MAX_ENTRIES];
} rmacoll__nvl_batch_t;

/* Launches the copy kernel for *b on stream s (b is copied into the
 * launch: it may be reused at once). Returns the launch's error. */
cudaError_t rmacoll__nvl_launch(const rmacoll__nvl_batch_t *b, cudaStream_t s);

/*
 * The one-launch path (call_stream): one kernel does a whole call. Block 0
 * raises the READY signals; every block of entry e waits (thread 0,
 * bounded spin) for e's READY word, copies its share, and the group's last
 * block raises the group's signals (as above); block 0 then waits for the
 * data words. A spin that passes timeout_ns sets *err (host-mapped, so
 * the host reads it without a copy) to RMACOLL__NVL_ERR_WORD(code, peer)
 * and lets the kernel end: an error at the next call naming the silent
 * peer, never a hang. Fits the 4 KiB parameter limit with
 * RMACOLL__NVL_FUSED_MAX = 32.
 */
#define RMACOLL__NVL_FUSED_MAX 32u
#define RMACOLL__NVL_ERR_READY_TIMEOUT 1u
#define RMACOLL__NVL_ERR_DATA_TIMEOUT 2u
/* the error word: code in the low byte, the peer waited for + 1 above it */
#define RMACOLL__NVL_ERR_WORD(code, peer) ((uint32_t)(code) | ((uint32_t)((peer) + 1) << 8))
#define RMACOLL__NVL_ERR_CODE(w) ((w) & 0xffu)
#define RMACOLL__NVL_ERR_PEER(w) ((int)((w) >> 8) - 1)

typedef struct rmacoll__nvl_fentry {
    uint64_t src, dst, bytes;
    uint64_t sig, value;      /* as rmacoll__nvl_entry_t */
    uint64_t rdy, rdy_value;  /* own READY word to wait for first (0: none) */
} rmacoll__nvl_fentry_t;

typedef struct rmacoll__nvl_word {
    uint64_t addr, value;
} rmacoll__nvl_word_t;

typedef struct rmacoll__nvl_fused {
    uint32_t *counters;       /* [RMACOLL__NVL_FUSED_MAX] device, all 0 */
    uint32_t *err;            /* host-mapped error word */
    uint64_t timeout_ns;
    uint32_t n, nready, nwait, nblocks; /* entries, READY signals, data waits, grid */
    uint32_t reset;           /* waited words back to 0 (graph mode) */
    uint32_t scope;           /* RMACOLL__NVL_SCOPE_* */
    int16_t peer[RMACOLL__NVL_FUSED_MAX];      /* target of entry e (its READY writer) */
    int16_t wait_peer[RMACOLL__NVL_FUSED_MAX]; /* writer of data word k, -1: unknown */
    uint32_t first_block[RMACOLL__NVL_FUSED_MAX + 1];
    uint32_t gblocks[RMACOLL__NVL_FUSED_MAX];
    uint8_t group[RMACOLL__NVL_FUSED_MAX];
    rmacoll__nvl_fentry_t e[RMACOLL__NVL_FUSED_MAX];
    rmacoll__nvl_word_t ready[RMACOLL__NVL_FUSED_MAX]; /* READY signals to raise */
    rmacoll__nvl_word_t wait[RMACOLL__NVL_FUSED_MAX];  /* data words to wait for */
} rmacoll__nvl_fused_t;

/* Launches the one-launch kernel for *f on s (f copied into the launch). */
cudaError_t rmacoll__nvl_launch_fused(const rmacoll__nvl_fused_t *f, cudaStream_t s);

/*
 * Device-count calls (stream.dcounts_stream, rmacoll_alltoallv_device_counts):
 * one kernel reads the counts on the device. Region of rank p (the core's,
 * RMACOLL_DCOUNTS_REGION_WORDS 64-bit words, zeroed at create): word 0 the
 * sequence number of the last call its kernel completed, word 1 its
 * blocks' completion counter, arrive[i] at 8 + i, done[i] at 8 + n + i
 * (the sequence number rank i's kernel reached: monotonic, never reset,
 * so graph replays need no reset), row i at 8 + 2n + i * (2n + 4): rank
 * i's sendcounts[n], its given recvcounts[n] (combine) or 0, its
 * recv_capacity, its send_capacity, its given flag, 0.
 *
 * Kernel: seq = word 0 + 1. Block 0 pushes this rank's row into every
 * rank's region and then raises arrive[me] = seq there (release after the
 * row). Only the first nact blocks go on (one per
 * RMACOLL__NVL_BYTES_PER_BLOCK of this rank's send bytes, 1 to the grid;
 * each block sums the counts itself, the others leave at once). In each of
 * them thread p waits for arrive[p] >= seq in this rank's region and
 * copies row p into shared memory; each computes the verdict (the same on
 * every rank: the same rows); block 0 writes recvcounts (dispatch); when
 * the verdict is clean each copies its share of each of this rank's blocks
 * into the receivers' buffers. The last of them to finish (counter; block
 * 0 when nact is 1) raises done[me] = seq in every region, waits for every
 * done[p] >= seq (every peer has read its rows out of this region and
 * written into this rank's buffer: the region and the buffers may be
 * reused), then writes *status, the host-mapped report of a failure, and
 * word 0 = seq. Waits time out after timeout_ns.
 */
#define RMACOLL__NVL_DC_MAX_BLOCKS 32u
/* host-mapped report (uint64 words): [0] seq of the failing call (written
 * last; 0: free), [1] code, [2] rank, [3] reason, [4] peer, [5] need,
 * [6] have; then the timeout word (uint32, RMACOLL__NVL_ERR_WORD, sticky) */
#define RMACOLL__NVL_DC_REP_WORDS 8u
#define RMACOLL__NVL_DC_REP_BYTES (RMACOLL__NVL_DC_REP_WORDS * 8u + 8u)

typedef struct rmacoll__nvl_dc {
    uint64_t sendbuf, sendcounts, recvcounts, status; /* device addresses */
    uint64_t rep;               /* host-mapped report (device address) */
    uint64_t terr;              /* host-mapped timeout word (device address) */
    uint64_t timeout_ns;
    int64_t send_cap, recv_cap; /* elements */
    uint32_t n, me, esize, given, scope, pad;
    uint64_t region[RMACOLL_DCOUNTS_MAX_RANKS];
    uint64_t recv_addr[RMACOLL_DCOUNTS_MAX_RANKS];
} rmacoll__nvl_dc_t;

/* Allows the device-count kernel the shared memory of the most ranks
 * (RMACOLL_DCOUNTS_MAX_RANKS rows: 66 KiB, past the 48 KiB default) on the
 * current device; once per process and device, before its launches. */
cudaError_t rmacoll__nvl_dc_prepare(void);
/* Launches the device-count kernel for *d with nblocks blocks on s. */
cudaError_t rmacoll__nvl_launch_dc(const rmacoll__nvl_dc_t *d, unsigned nblocks,
                                   cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif /* RMACOLL_TRANSPORT_NVL_H */
