/*
 * nvl.cu - the nvlink_kernel transport's copy kernel.
 *
 * One launch copies a queue of up to RMACOLL__NVL_MAX_ENTRIES puts over
 * IPC-mapped peer pointers (NVLink loads/stores; 16-byte vectors when source
 * and destination share their alignment modulo 16) and raises their
 * signals in the targets' signal words: device-resident arrays (the
 * core's RMACOLL_SIG_DEVICE words) or host-mapped control windows.
 *
 * Ordering (PTX memory model): every thread of a block fences after its
 * stores, the block meets at a barrier, and one thread adds to the group's
 * counter (the "last block" pattern of the CUDA threadFenceReduction
 * sample). The block that brings the counter to the group's block count
 * fences again (acquire side of the counter's release sequence) and
 * stores each signal with st.release: a peer that reads the word with
 * ld.acquire (or a stream wait) and sees the value sees every byte of the
 * group's puts. That block resets the counter to 0 for a later launch.
 *
 * Scope (RMACOLL__NVL_SCOPE_*, chosen per launch by nvl.c). A release and
 * the acquire that observes it synchronise only when each one's scope
 * includes the other thread. With every signal word in device memory of
 * this GPU and every peer (writer of the data, reader of the signal, and
 * the other way round) on this GPU, all of them are threads of this GPU:
 * .gpu scope is enough (fence.acq_rel.gpu, st.release.gpu,
 * ld.acquire.gpu), and it does not wait for the system-wide ordering
 * point that .sys needs. A word in host memory (the control window,
 * polled by the host or written through PCIe), or a peer on another GPU
 * (its stores reach our memory over NVLink, ours reach its memory), needs
 * .sys on both sides: __threadfence_system, st.release.sys,
 * ld.acquire.sys. A launch takes one scope for all its words: .gpu only
 * when all its peers share this GPU. Two ranks on one GPU synchronise
 * whichever scope each picks (each scope includes the other thread); two
 * ranks on different GPUs both have a peer elsewhere, so both take .sys.
 * The host-mapped error word is always written at .sys.
 */
#include <stdint.h>

#include "transports/nvlink_kernel/nvl.h"

static_assert(sizeof(rmacoll__nvl_batch_t) <= 4000,
              "launch descriptor must fit the 4 KiB kernel parameter limit");
static_assert(sizeof(rmacoll__nvl_fused_t) <= 4000,
              "one-launch descriptor must fit the 4 KiB kernel parameter limit");

__device__ __forceinline__ uint64_t nvl_load_acquire(uint64_t addr, unsigned scope)
{
    uint64_t v;

    if (scope == RMACOLL__NVL_SCOPE_GPU) {
        asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
    } else {
        asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
    }
    return v;
}

__device__ __forceinline__ uint64_t nvl_now_ns(void)
{
    uint64_t t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void nvl_store_release(uint64_t addr, uint64_t v, unsigned scope)
{
    if (scope == RMACOLL__NVL_SCOPE_GPU) {
        asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
    } else {
        asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
    }
}

/* This thread's earlier stores ordered before its later ones for every
 * observer within the scope. */
__device__ __forceinline__ void nvl_fence(unsigned scope)
{
    if (scope == RMACOLL__NVL_SCOPE_GPU) {
        __threadfence();
    } else {
        __threadfence_system();
    }
}

/* Block j of nb copies its share of [src, src + bytes) to dst. */
__device__ __forceinline__ void nvl_copy(const rmacoll__nvl_entry_t *en,
                                         unsigned j, unsigned nb)
{
    char *dst = (char *)(uintptr_t)en->dst;
    const char *src = (const char *)(uintptr_t)en->src;
    const uint64_t bytes = en->bytes;
    const uint64_t stride = (uint64_t)nb * blockDim.x;
    const uint64_t first = (uint64_t)j * blockDim.x + threadIdx.x;

    if (bytes == 0) {
        return;
    }
    if ((((uintptr_t)src ^ (uintptr_t)dst) & 15u) == 0) {
        uint64_t head = (16u - ((uintptr_t)dst & 15u)) & 15u;
        uint64_t nvec;
        const uint4 *s4;
        uint4 *d4;

        head = head < bytes ? head : bytes;
        nvec = (bytes - head) / 16u;
        s4 = (const uint4 *)(src + head);
        d4 = (uint4 *)(dst + head);
        for (uint64_t i = first; i < nvec; i += stride) {
            d4[i] = s4[i];
        }
        /* head and tail bytes: at most 30, by the first block */
        if (j == 0) {
            uint64_t tail = head + nvec * 16u;

            for (uint64_t i = threadIdx.x; i < head; i += blockDim.x) {
                dst[i] = src[i];
            }
            for (uint64_t i = tail + threadIdx.x; i < bytes; i += blockDim.x) {
                dst[i] = src[i];
            }
        }
    } else if ((((uintptr_t)src ^ (uintptr_t)dst) & 3u) == 0) {
        uint64_t head = (4u - ((uintptr_t)dst & 3u)) & 3u;
        uint64_t nw;

        head = head < bytes ? head : bytes;
        nw = (bytes - head) / 4u;
        for (uint64_t i = first; i < nw; i += stride) {
            ((uint32_t *)(dst + head))[i] = ((const uint32_t *)(src + head))[i];
        }
        if (j == 0) {
            uint64_t tail = head + nw * 4u;

            for (uint64_t i = threadIdx.x; i < head; i += blockDim.x) {
                dst[i] = src[i];
            }
            for (uint64_t i = tail + threadIdx.x; i < bytes; i += blockDim.x) {
                dst[i] = src[i];
            }
        }
    } else {
        for (uint64_t i = first; i < bytes; i += stride) {
            dst[i] = src[i];
        }
    }
}

__global__ void __launch_bounds__(RMACOLL__NVL_THREADS)
    rmacoll__nvl_kernel(const rmacoll__nvl_batch_t b)
{
    const unsigned bid = blockIdx.x;
    unsigned lo = 0;
    unsigned hi = b.n - 1;
    unsigned e, g, nb;

    /* entry of this block: the largest e with first_block[e] <= bid */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;

        if (b.first_block[mid] <= bid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    e = lo;
    nb = b.first_block[e + 1] - b.first_block[e];
    nvl_copy(&b.e[e], bid - b.first_block[e], nb);

    g = b.group[e];
    if (b.gblocks[g] == 0) {
        return; /* the group raises no signal */
    }
    nvl_fence(b.scope); /* this thread's stores, before the count */
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned old = atomicAdd(&b.counters[g], 1u);

        if (old + 1 == b.gblocks[g]) {
            nvl_fence(b.scope); /* acquire: every block's stores */
            b.counters[g] = 0;  /* for a later launch on this slot */
            for (unsigned k = g; k < b.n; k++) {
                if (b.group[k] == g && b.e[k].sig != 0) {
                    nvl_store_release(b.e[k].sig, b.e[k].value, b.scope);
                }
            }
        }
    }
}

/* Spins until the word at addr reaches v, at most timeout_ns: 1 when it
 * did, 0 on timeout (then *err gets the code and the peer waited for) or
 * when another wait of this call already timed out (*err set: fail
 * fast). */
__device__ int nvl_wait_word(uint64_t addr, uint64_t v, unsigned scope, uint64_t timeout_ns,
                             uint32_t *err, uint32_t code, int peer)
{
    uint64_t t0 = 0;
    unsigned spins = 0;

    while (nvl_load_acquire(addr, scope) < v) {
        if ((++spins & 255u) == 0) {
            uint64_t t = nvl_now_ns();

            if (*(volatile uint32_t *)err != 0) {
                return 0;
            }
            if (t0 == 0) {
                t0 = t;
            } else if (t - t0 > timeout_ns) {
                /* the error word is host memory (the host reads it without
                 * a copy): a plain store and a system fence; atomics on
                 * host memory would need PCIe atomics */
                *(volatile uint32_t *)err = RMACOLL__NVL_ERR_WORD(code, peer);
                __threadfence_system();
                return 0;
            }
        }
    }
    return 1;
}

__global__ void __launch_bounds__(RMACOLL__NVL_THREADS)
    rmacoll__nvl_fused_kernel(const rmacoll__nvl_fused_t f)
{
    __shared__ int go;
    const unsigned bid = blockIdx.x;
    unsigned e = 0, g, nb;

    if (bid == 0 && threadIdx.x == 0) {
        for (unsigned k = 0; k < f.nready; k++) {
            nvl_store_release(f.ready[k].addr, f.ready[k].value, f.scope);
        }
    }
    if (f.n > 0) {
        unsigned lo = 0, hi = f.n - 1;

        while (lo < hi) {
            unsigned mid = (lo + hi + 1) / 2;

            if (f.first_block[mid] <= bid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        e = lo;
        if (threadIdx.x == 0) {
            go = f.e[e].rdy == 0 ||
                 nvl_wait_word(f.e[e].rdy, f.e[e].rdy_value, f.scope, f.timeout_ns, f.err,
                               RMACOLL__NVL_ERR_READY_TIMEOUT, f.peer[e]);
        }
        __syncthreads();
        nb = f.first_block[e + 1] - f.first_block[e];
        if (go) {
            rmacoll__nvl_entry_t en = {f.e[e].src, f.e[e].dst, f.e[e].bytes, 0, 0};

            nvl_copy(&en, bid - f.first_block[e], nb);
        }
        g = f.group[e];
        /* after a READY timeout the group raises nothing (its peer times
         * out too): the call failed, the counter slot is not used again
         * (the communicator reports the error at its next call) */
        if (f.gblocks[g] != 0 && go) {
            nvl_fence(f.scope);
            __syncthreads();
            if (threadIdx.x == 0) {
                unsigned old = atomicAdd(&f.counters[g], 1u);

                if (old + 1 == f.gblocks[g]) {
                    nvl_fence(f.scope);
                    f.counters[g] = 0;
                    if (f.reset && f.e[g].rdy != 0) {
                        /* every block of the group passed the READY wait;
                         * 0 before the signals (release orders it first) */
                        *(volatile uint64_t *)(uintptr_t)f.e[g].rdy = 0;
                    }
                    for (unsigned k = g; k < f.n; k++) {
                        if (f.group[k] == g && f.e[k].sig != 0) {
                            nvl_store_release(f.e[k].sig, f.e[k].value, f.scope);
                        }
                    }
                }
            }
        }
    }
    if (bid == 0 && threadIdx.x == 0) {
        for (unsigned k = 0; k < f.nwait; k++) {
            if (nvl_wait_word(f.wait[k].addr, f.wait[k].value, f.scope, f.timeout_ns, f.err,
                              RMACOLL__NVL_ERR_DATA_TIMEOUT, f.wait_peer[k]) &&
                f.reset) {
                *(volatile uint64_t *)(uintptr_t)f.wait[k].addr = 0;
            }
        }
        /* the resets (and the acquired data) before later work: the next
         * kernel on the stream starts after this one anyway; the fence
         * orders the resets before the peers' next signals of the same
         * scope */
        nvl_fence(f.scope);
    }
}

/* ---- device-count calls (nvl.h: rmacoll__nvl_dc_t) ---------------------- */

static_assert(sizeof(rmacoll__nvl_dc_t) <= 4000,
              "device-count descriptor must fit the 4 KiB kernel parameter limit");

/* Words of a region (nvl.h). */
__device__ __forceinline__ uint64_t *dc_word(uint64_t region, unsigned w)
{
    return (uint64_t *)(uintptr_t)region + w;
}
__device__ __forceinline__ unsigned dc_row(unsigned n, unsigned i)
{
    return 8u + 2u * n + i * (2u * n + 4u);
}

/* A failure candidate: the lowest key wins on every rank alike. */
__device__ __forceinline__ unsigned long long dc_key(unsigned rank, unsigned why,
                                                     unsigned peer)
{
    return ((unsigned long long)rank << 16) | ((unsigned long long)why << 8) | peer;
}

/* The host-mapped report of a failure (when it is free). */
__device__ void dc_report(const rmacoll__nvl_dc_t &d, uint64_t seq, int32_t code, int rank,
                          int why, int peer, int64_t need, int64_t have)
{
    volatile uint64_t *rep = (volatile uint64_t *)(uintptr_t)d.rep;

    if (rep[0] != 0) {
        return; /* an earlier failure is not reported yet: it is the first */
    }
    rep[1] = (uint64_t)(int64_t)code;
    rep[2] = (uint64_t)(int64_t)rank;
    rep[3] = (uint64_t)(int64_t)why;
    rep[4] = (uint64_t)(int64_t)peer;
    rep[5] = (uint64_t)need;
    rep[6] = (uint64_t)have;
    __threadfence_system();
    rep[0] = seq;
    __threadfence_system();
}

/* Row i in the block's copy of the rows (shared memory, dc_kernel). */
__device__ __forceinline__ unsigned dc_srow(unsigned n, unsigned i)
{
    return i * (2u * n + 4u);
}

/* Thread t < n checks what rank t receives (column t) and sends (row t)
 * and, for this rank, where its block for t lands: *off. The thread's
 * lowest failure key goes to *key (~0: none), its need and have to
 * detail[2t], detail[2t + 1]. A key names rank t, except a negative count
 * (rank i's count for t): the thread of a key is found again from it. */
__device__ void dc_check(const rmacoll__nvl_dc_t &d, const int64_t *rows, unsigned t,
                         unsigned long long *key, int64_t *off, int64_t *detail)
{
    const unsigned n = d.n;
    const unsigned rt = dc_srow(n, t);
    unsigned long long k = ~0ull;
    int64_t total = 0, stot = 0, need = 0, have = 0;

    for (unsigned i = 0; i < n; i++) {
        int64_t c = rows[dc_srow(n, i) + t]; /* rank i sends to t */

        if (c < 0) {
            unsigned long long kk = dc_key(i, RMACOLL_DCOUNTS_WHY_NEGATIVE, t);
            if (kk < k) {
                k = kk;
                need = c;
                have = 0;
            }
            continue;
        }
        if (i == d.me) {
            *off = total;
        }
        if (total > INT64_MAX - c) {
            unsigned long long kk = dc_key(t, RMACOLL_DCOUNTS_WHY_SUM, i);
            if (kk < k) {
                k = kk;
                need = c;
                have = total;
            }
            total = INT64_MAX;
        } else {
            total += c;
        }
        if (rows[rt + 2u * n + 2u] != 0 && rows[rt + n + i] != c) {
            unsigned long long kk = dc_key(t, RMACOLL_DCOUNTS_WHY_MISMATCH, i);
            if (kk < k) {
                k = kk;
                need = c;
                have = rows[rt + n + i];
            }
        }
    }
    if (total > rows[rt + 2u * n]) {
        unsigned long long kk = dc_key(t, RMACOLL_DCOUNTS_WHY_RECV_CAP, 255u);
        if (kk < k) {
            k = kk;
            need = total;
            have = rows[rt + 2u * n];
        }
    }
    for (unsigned j = 0; j < n; j++) {
        int64_t c = rows[rt + j];

        if (c < 0) {
            continue; /* reported by column j */
        }
        if (stot > INT64_MAX - c) {
            unsigned long long kk = dc_key(t, RMACOLL_DCOUNTS_WHY_SUM, j);
            if (kk < k) {
                k = kk;
                need = c;
                have = stot;
            }
            stot = INT64_MAX;
        } else {
            stot += c;
        }
    }
    if (stot > rows[rt + 2u * n + 1u]) {
        unsigned long long kk = dc_key(t, RMACOLL_DCOUNTS_WHY_SEND_CAP, 255u);
        if (kk < k) {
            k = kk;
            need = stot;
            have = rows[rt + 2u * n + 1u];
        }
    }
    *key = k; /* this thread's slot; its details beside it */
    detail[2 * t] = need;
    detail[2 * t + 1] = have;
}

#ifdef RMACOLL_NVL_DC_TRACE
#include <stdio.h>

/* A build with -DRMACOLL_NVL_DC_TRACE (scripts/gpu/dc_ab.sh) times the
 * kernel's phases (%globaltimer at the marks: block 0 for 0-3, the last
 * block for 4-5) and prints each rank's mean phase times every 512 calls.
 * Off (the marks compile to nothing) in every other build. */
__device__ unsigned long long rmacoll__nvl_dc_t0[RMACOLL_DCOUNTS_MAX_RANKS][8];
__device__ unsigned long long rmacoll__nvl_dc_sum[RMACOLL_DCOUNTS_MAX_RANKS][8];
#define DC_MARK(i)                                                              \
    do {                                                                        \
        if (tid == 0 && ((i) >= 4 || blockIdx.x == 0)) {                        \
            rmacoll__nvl_dc_t0[me][(i)] = nvl_now_ns();                         \
        }                                                                       \
    } while (0)
#define DC_MARK_END()                                                           \
    do {                                                                        \
        unsigned long long *t_ = rmacoll__nvl_dc_t0[me], *s_ = rmacoll__nvl_dc_sum[me]; \
        t_[6] = nvl_now_ns();                                                   \
        for (int k_ = 1; k_ <= 6; k_++) {                                       \
            s_[k_] += t_[k_] - t_[k_ - 1];                                      \
        }                                                                       \
        if (++s_[0] == 512) {                                                   \
            printf("dc-trace rank %u n %u blocks %u: ns per call: row+arrive %llu, "  \
                   "wait+rows %llu, verdict %llu, copy+counter %llu, done %llu, "  \
                   "status %llu\n", me, n, gridDim.x, s_[1] / 512, s_[2] / 512,  \
                   s_[3] / 512, s_[4] / 512, s_[5] / 512, s_[6] / 512);         \
            for (int k_ = 0; k_ < 8; k_++) {                                    \
                s_[k_] = 0;                                                     \
            }                                                                   \
        }                                                                       \
    } while (0)
#else
#define DC_MARK(i) ((void)0)
#define DC_MARK_END() ((void)0)
#endif

__global__ void __launch_bounds__(RMACOLL__NVL_THREADS)
    rmacoll__nvl_dc_kernel(const rmacoll__nvl_dc_t d)
{
    __shared__ uint64_t s_seq;
    __shared__ unsigned long long s_part[2];
    __shared__ int s_last;
    __shared__ unsigned long long s_key, s_tkey[RMACOLL_DCOUNTS_MAX_RANKS];
    __shared__ int64_t s_off[RMACOLL_DCOUNTS_MAX_RANKS], s_cnt[RMACOLL_DCOUNTS_MAX_RANKS];
    __shared__ int64_t s_soff[RMACOLL_DCOUNTS_MAX_RANKS];
    __shared__ int64_t s_det[2 * RMACOLL_DCOUNTS_MAX_RANKS];
    extern __shared__ int64_t s_rows[]; /* the n rows of this region, n * (2n + 4) */
    const unsigned n = d.n, me = d.me, tid = threadIdx.x;
    const unsigned rowlen = 2u * n + 4u;
    const uint64_t myreg = d.region[me];
    uint32_t *terr = (uint32_t *)(uintptr_t)d.terr;
    uint64_t seq;
    uint64_t w0 = 0;
    unsigned nact;
    int go = 1;

    DC_MARK(0);
    if (tid == 0) {
        w0 = *(volatile uint64_t *)dc_word(myreg, 0); /* in flight during the row */
    }
    /* the bytes this rank sends, by warps 0 and 1 (n <= 64), each count
     * capped (only "more than every block's share" matters below) */
    if (tid < 64u) {
        const int64_t *sc = (const int64_t *)(uintptr_t)d.sendcounts;
        int64_t c = tid < n ? sc[tid] : 0;
        unsigned long long b = c > 0 ? (unsigned long long)(c < (1ll << 40) ? c : (1ll << 40))
                                           * d.esize
                                     : 0ull;

        for (int o = 16; o > 0; o >>= 1) {
            b += __shfl_xor_sync(0xffffffffu, b, o);
        }
        if ((tid & 31u) == 0) {
            s_part[tid >> 5] = b;
        }
    }
    /* block 0: this rank's row into every region. The row does not depend
     * on the sequence number, so the loads of the counts and of word 0 are
     * in flight together; thread k loads word k once and stores it n times. */
    if (blockIdx.x == 0) {
        const int64_t *sc = (const int64_t *)(uintptr_t)d.sendcounts;
        const int64_t *rc = (const int64_t *)(uintptr_t)d.recvcounts;

        for (unsigned k = tid; k < rowlen; k += blockDim.x) {
            int64_t v = k < n                ? sc[k]
                        : k < 2u * n         ? (d.given ? rc[k - n] : 0)
                        : k == 2u * n        ? d.recv_cap
                        : k == 2u * n + 1u   ? d.send_cap
                        : k == 2u * n + 2u   ? (int64_t)d.given
                                             : 0;

            for (unsigned p = 0; p < n; p++) {
                *(volatile int64_t *)dc_word(d.region[p], dc_row(n, me) + k) = v;
            }
        }
        nvl_fence(d.scope); /* the row, before arrive[me] below */
    }
    if (tid == 0) {
        s_seq = w0 + 1;
        s_key = ~0ull;
    }
    if (tid < RMACOLL_DCOUNTS_MAX_RANKS) {
        s_off[tid] = 0;
        s_tkey[tid] = ~0ull;
    }
    __syncthreads();
    seq = s_seq;
    if (blockIdx.x == 0 && tid < n) { /* thread p raises arrive[me] in rank p's region */
        nvl_store_release((uint64_t)(uintptr_t)dc_word(d.region[tid], 8u + me), seq, d.scope);
    }
    /* the blocks that copy: one per RMACOLL__NVL_BYTES_PER_BLOCK of this
     * rank's bytes (as the host-count launches size theirs), at least one,
     * at most the grid; the others leave now (the same number in every
     * block: the same counts). Block 0 always stays. */
    {
        unsigned long long b = s_part[0] + s_part[1];
        unsigned long long k = (b + RMACOLL__NVL_BYTES_PER_BLOCK - 1) / RMACOLL__NVL_BYTES_PER_BLOCK;

        nact = k < 1ull ? 1u : k < gridDim.x ? (unsigned)k : gridDim.x;
    }
    if (blockIdx.x >= nact) {
        return;
    }
    DC_MARK(1);

    /* every block: thread p waits for rank p's arrival, then copies rank
     * p's row into shared memory (its loads ordered after the acquire) */
    if (tid < n) {
        go = nvl_wait_word((uint64_t)(uintptr_t)dc_word(myreg, 8u + tid), seq, d.scope,
                           d.timeout_ns, terr, RMACOLL__NVL_ERR_READY_TIMEOUT, (int)tid);
        if (go) {
            const volatile int64_t *row =
                (const volatile int64_t *)dc_word(myreg, dc_row(n, tid));

            for (unsigned k = 0; k < rowlen; k++) {
                s_rows[dc_srow(n, tid) + k] = row[k];
            }
        }
    }
    go = __syncthreads_and(go); /* also: the rows, to every thread of the block */
    DC_MARK(2);

    /* the verdict, alike on every rank */
    if (go && tid < n) {
        dc_check(d, s_rows, tid, &s_tkey[tid], &s_off[tid], s_det);
    }
    __syncthreads();
    if (tid == 0 && go) {
        const int64_t *mine = s_rows + dc_srow(n, me);
        int64_t o = 0;

        for (unsigned t = 0; t < n; t++) {
            if (s_tkey[t] < s_key) {
                s_key = s_tkey[t];
            }
            s_cnt[t] = mine[t];
            s_soff[t] = o;
            o += mine[t] > 0 ? mine[t] : 0; /* a clean verdict: no overflow */
        }
    }
    __syncthreads();
    /* dispatch: what this rank receives, from the rows (block 0; the
     * stream's later work sees it once the kernel has completed) */
    if (go && !d.given && blockIdx.x == 0) {
        int64_t *rc = (int64_t *)(uintptr_t)d.recvcounts;

        for (unsigned i = tid; i < n; i += blockDim.x) {
            rc[i] = s_rows[dc_srow(n, i) + me];
        }
    }
    DC_MARK(3);

    /* the copies: this block's share of every block of this rank */
    if (go && s_key == ~0ull) {
        for (unsigned t = 0; t < n; t++) {
            if (s_cnt[t] > 0 && d.recv_addr[t] != 0) {
                rmacoll__nvl_entry_t en;

                en.src = d.sendbuf + (uint64_t)s_soff[t] * d.esize;
                en.dst = d.recv_addr[t] + (uint64_t)s_off[t] * d.esize;
                en.bytes = (uint64_t)s_cnt[t] * d.esize;
                en.sig = 0;
                en.value = 0;
                nvl_copy(&en, blockIdx.x, nact);
            }
        }
    }
    nvl_fence(d.scope);
    if (nact > 1) { /* the last block of nact goes on (one block: it is the last) */
        __syncthreads();
        if (tid == 0) {
            unsigned old = atomicAdd((unsigned *)dc_word(myreg, 1), 1u);

            s_last = old + 1 == nact;
        }
        __syncthreads();
        if (!s_last) {
            return;
        }
        /* acquire: every block's copies, before done[me]; the counter back
         * to 0 for the next call (whose blocks start after this kernel) */
        nvl_fence(d.scope);
        if (tid == 0) {
            *(volatile unsigned *)dc_word(myreg, 1) = 0;
        }
    }
    DC_MARK(4);

    /* the last block: completion, status */
    /* thread p raises done[me] in rank p's region, then waits for rank p's
     * done[p] in this one */
    if (go && tid < n) {
        nvl_store_release((uint64_t)(uintptr_t)dc_word(d.region[tid], 8u + n + me), seq,
                          d.scope);
        go = nvl_wait_word((uint64_t)(uintptr_t)dc_word(myreg, 8u + n + tid), seq, d.scope,
                           d.timeout_ns, terr, RMACOLL__NVL_ERR_DATA_TIMEOUT, (int)tid);
    }
    go = __syncthreads_and(go);
    DC_MARK(5);
    if (tid == 0) {
        int32_t code = 0;

        if (!go) {
            uint32_t w = *(volatile uint32_t *)terr;

            code = RMACOLL_ERR_TIMEOUT;
            dc_report(d, seq, code, (int)me, RMACOLL_DCOUNTS_WHY_TIMEOUT,
                      RMACOLL__NVL_ERR_PEER(w), 0, 0);
        } else if (s_key != ~0ull) {
            unsigned rank = (unsigned)(s_key >> 16), why = (unsigned)(s_key >> 8) & 0xffu;
            unsigned peer = (unsigned)s_key & 0xffu;
            /* the details of the thread (column) whose key won */
            unsigned col = why == RMACOLL_DCOUNTS_WHY_NEGATIVE ? peer : rank;

            code = why == RMACOLL_DCOUNTS_WHY_MISMATCH ? RMACOLL_ERR_MISMATCH
                                                       : RMACOLL_ERR_OVERFLOW;
            dc_report(d, seq, code, (int)rank, (int)why, peer == 255u ? -1 : (int)peer,
                      s_det[2 * col], s_det[2 * col + 1]);
        }
        /* read by this rank's next call and the stream's later work, both
         * after this kernel has completed: no fence */
        *(volatile int32_t *)(uintptr_t)d.status = code;
        *(volatile uint64_t *)dc_word(myreg, 0) = seq;
        DC_MARK_END();
    }
}

/* Dynamic shared memory of a device-count launch for n ranks: the rows. */
static size_t dc_smem(unsigned n)
{
    return (size_t)n * (2u * n + 4u) * sizeof(int64_t);
}

extern "C" cudaError_t rmacoll__nvl_dc_prepare(void)
{
    return cudaFuncSetAttribute((const void *)rmacoll__nvl_dc_kernel,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)dc_smem(RMACOLL_DCOUNTS_MAX_RANKS));
}

extern "C" cudaError_t rmacoll__nvl_launch_dc(const rmacoll__nvl_dc_t *d, unsigned nblocks,
                                              cudaStream_t s)
{
    void *args[1] = {(void *)d};

    return cudaLaunchKernel((const void *)rmacoll__nvl_dc_kernel, dim3(nblocks),
                            dim3(RMACOLL__NVL_THREADS), args, dc_smem(d->n), s);
}

extern "C" cudaError_t rmacoll__nvl_launch_fused(const rmacoll__nvl_fused_t *f,
                                                 cudaStream_t s)
{
    void *args[1] = {(void *)f};

    return cudaLaunchKernel((const void *)rmacoll__nvl_fused_kernel,
                            dim3(f->nblocks), dim3(RMACOLL__NVL_THREADS), args, 0, s);
}

extern "C" cudaError_t rmacoll__nvl_launch(const rmacoll__nvl_batch_t *b,
                                           cudaStream_t s)
{
    void *args[1] = {(void *)b};

    return cudaLaunchKernel((const void *)rmacoll__nvl_kernel,
                            dim3(b->nblocks), dim3(RMACOLL__NVL_THREADS), args,
                            0, s);
}
