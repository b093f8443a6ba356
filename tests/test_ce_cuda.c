/*
 * test_ce_cuda.c - the CUDA stream ops of the ce transport (copy engine)
 * and of the nvlink_kernel transport (copy kernel), with 2 ranks as forked
 * processes, each on device rank % ndev (both on one GPU if there is one).
 *
 * Needs a GPU: exits 77 (CTest: skipped) when a probe child finds none.
 * The parent never touches CUDA (a CUDA runtime initialised before fork is
 * unusable in the children). A MAP_SHARED region made before fork holds
 * the "control windows" (every rank's signal words, so
 * env->peer_signals[p] is rank p's array there), the export blobs and the
 * scratch of a small allgather. Children check with CHECK() (records rank,
 * line, condition, last log line; exits 1); every child runs under alarm(),
 * every host spin has a deadline, the parent's waitpid loop is bounded.
 *
 * Exchange (per size, per iteration it, v = it + 1), all on one stream:
 *   sender: wait_stream(ack word of the receiver >= it), fill the source
 *           (H2D copy of a pattern, or cudaMemsetAsync in the stream-order
 *           phase), post_puts_stream(put + signal v) to self and peer;
 *   receiver: wait_stream(data word of each sender >= v), D2H copy of the
 *           whole receive buffer, cudaStreamSynchronize, exact byte check
 *           (pattern in the slot, FILL in the guards and the rest of the
 *           slot), cudaMemsetAsync back to FILL, signal_stream(ack v).
 * A signal that overtook its data, or a wait_stream that did not hold the
 * later stream work back, shows up as stale or FILL bytes. Then the
 * device-resident words (RMACOLL_SIG_DEVICE, stream.set_device_signals):
 * a signal and a wait on an own device word, and the refusals.
 */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "rmacoll_transport.h"

extern const rmacoll_transport_ops_t rmacoll_transport_ce_ops;
extern const rmacoll_transport_ops_t rmacoll_transport_nvlink_kernel_ops;
#define CE (&rmacoll_transport_ce_ops)
#define NVL (&rmacoll_transport_nvlink_kernel_ops)

#define NR 2
#define NSIGW 16
#define DATA(s) (s)            /* word raised by sender s */
#define ACK(r) (4 + (r))       /* word raised by receiver r */
#define AG_MAX 64
#define GUARD 4096
#define FILL 0xA5
#define SPIN_S 60
#define CHILD_ALARM_S 300
#define PARENT_WAIT_S 400
#define SKIP_RC 77

typedef struct shared {
    volatile uint64_t signals[NR][NSIGW];
    uint8_t blob[NR][RMACOLL_EXPORT_BYTES];
    uint8_t ag[NR][AG_MAX];
    unsigned bar_count;
    unsigned bar_gen;
    char err[NR][1400];
} shared_t;

typedef struct child {
    shared_t *sh;
    int rank;
    uint8_t peers[NR];
    volatile uint64_t *peer_sig[NR];
    rmacoll_transport_env_t env;
    char lastlog[1024];
} child_t;

/* What one run exercises. */
typedef struct scenario {
    const rmacoll_transport_ops_t *data_ops; /* export/import/puts/waits */
    int init_ce_too;        /* also init ce first (as the core does) */
    int memset_fill;        /* source written by cudaMemsetAsync */
    const uint64_t *sizes;
    int nsizes;
    int reps;
} scenario_t;

static void child_fail(child_t *c, int line, const char *what)
{
    if (c->sh->err[c->rank][0] == '\0') {
        snprintf(c->sh->err[c->rank], sizeof(c->sh->err[0]),
                 "rank %d, line %d: %.200s (last log: %.1000s)", c->rank, line,
                 what, c->lastlog);
    }
    _exit(1);
}

#define CHECK(c_, cond)                                                    \
    do {                                                                   \
        if (!(cond)) {                                                     \
            child_fail((c_), __LINE__, #cond);                             \
        }                                                                  \
    } while (0)

#define CUCHECK(c_, call)                                                  \
    do {                                                                   \
        cudaError_t e_ = (call);                                           \
        if (e_ != cudaSuccess) {                                           \
            snprintf((c_)->lastlog, sizeof((c_)->lastlog), "%s",           \
                     cudaGetErrorString(e_));                              \
            child_fail((c_), __LINE__, #call);                             \
        }                                                                  \
    } while (0)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int sh_barrier(child_t *c)
{
    shared_t *sh = c->sh;
    unsigned gen = __atomic_load_n(&sh->bar_gen, __ATOMIC_ACQUIRE);
    double deadline = now_s() + SPIN_S;

    if (__atomic_add_fetch(&sh->bar_count, 1, __ATOMIC_ACQ_REL) == NR) {
        __atomic_store_n(&sh->bar_count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&sh->bar_gen, gen + 1, __ATOMIC_RELEASE);
        return 0;
    }
    while (__atomic_load_n(&sh->bar_gen, __ATOMIC_ACQUIRE) == gen) {
        if (now_s() > deadline) {
            return -1;
        }
        sched_yield();
    }
    return 0;
}

static rmacoll_status_t sh_allgather(void *ctx, const void *send, void *recv,
                                     size_t bytes)
{
    child_t *c = ctx;

    if (bytes > AG_MAX) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memcpy(c->sh->ag[c->rank], send, bytes);
    if (sh_barrier(c) != 0) {
        return RMACOLL_ERR_TIMEOUT;
    }
    for (int r = 0; r < NR; r++) {
        memcpy((uint8_t *)recv + (size_t)r * bytes, c->sh->ag[r], bytes);
    }
    return sh_barrier(c) == 0 ? RMACOLL_SUCCESS : RMACOLL_ERR_TIMEOUT;
}

static void child_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys,
                      const char *fmt, ...)
{
    child_t *c = ctx;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->lastlog, sizeof(c->lastlog), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] %s\n", c->rank, c->lastlog);
}

static void child_setup(child_t *c, shared_t *sh, int rank)
{
    memset(c, 0, sizeof(*c));
    c->sh = sh;
    c->rank = rank;
    for (int p = 0; p < NR; p++) {
        c->peers[p] = p != rank;
        c->peer_sig[p] = sh->signals[p];
    }
    c->env.struct_size = sizeof(c->env);
    c->env.rank = rank;
    c->env.nranks = NR;
    c->env.peers = c->peers;
    c->env.signals = sh->signals[rank];
    c->env.nsignals = NSIGW;
    c->env.peer_signals = (volatile uint64_t *const *)c->peer_sig;
    c->env.allgather = sh_allgather;
    c->env.oob_ctx = c;
    c->env.log = child_log;
    c->env.log_ctx = c;
}

static inline uint8_t pat(int s, int r, uint64_t it, uint64_t i)
{
    return (uint8_t)(i * 131u + (i >> 12) + (uint64_t)s * 17u +
                     (uint64_t)r * 29u + it * 7u + 1u);
}

/* Byte of the memset phase: never FILL, differs between iterations. */
static inline uint8_t mset(int s, uint64_t it)
{
    uint8_t v = (uint8_t)(it * 37u + (uint64_t)s * 101u + 11u);

    return v == FILL ? (uint8_t)(v + 1) : v;
}

/* The exchange described in the header, for one scenario. */
static void child_run(child_t *c, const scenario_t *x)
{
    int r = c->rank;
    int ndev = 0;
    uint64_t maxsz = 0;
    uint64_t stride, total, it = 0;
    rmacoll_transport_t *ce = NULL;
    rmacoll_transport_t *tp = NULL;
    const rmacoll_transport_ops_t *ops = x->data_ops;
    uint8_t *recv_d = NULL;
    uint8_t *src_d = NULL;
    uint8_t *host_src = NULL;
    uint8_t *host_recv = NULL;
    uint64_t dst_base[NR];
    cudaStream_t s;

    CUCHECK(c, cudaGetDeviceCount(&ndev));
    CHECK(c, ndev > 0);
    CUCHECK(c, cudaSetDevice(r % ndev));
    for (int k = 0; k < x->nsizes; k++) {
        maxsz = x->sizes[k] > maxsz ? x->sizes[k] : maxsz;
    }
    stride = maxsz + GUARD;
    total = GUARD + (uint64_t)NR * stride;
    if (x->init_ce_too || ops == CE) {
        CHECK(c, CE->base->init(&c->env, &ce) == RMACOLL_SUCCESS);
        CHECK(c, ce != NULL);
    }
    if (ops == CE) {
        tp = ce;
    } else {
        CHECK(c, ops->base->init(&c->env, &tp) == RMACOLL_SUCCESS);
        CHECK(c, tp != NULL);
    }
    CUCHECK(c, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* the stream can take work (n == 0 probes it, as the core does) */
    CHECK(c, ops->stream->post_puts_stream(tp, NULL, 0, s) == RMACOLL_SUCCESS);
    CUCHECK(c, cudaMalloc((void **)&recv_d, total));
    CUCHECK(c, cudaMalloc((void **)&src_d, maxsz));
    CUCHECK(c, cudaMallocHost((void **)&host_src, maxsz));
    CUCHECK(c, cudaMallocHost((void **)&host_recv, total));
    CUCHECK(c, cudaMemset(recv_d, FILL, total));
    CUCHECK(c, cudaMemset(src_d, 0, maxsz));
    CUCHECK(c, cudaDeviceSynchronize());
    if (ops == CE) {
        /* mem_type (rmacoll_mem_register asks it): device memory, also
         * inside an allocation; pinned and pageable host memory */
        rmacoll_memtype_t mt = RMACOLL_MEM_HOST;

        CHECK(c, CE->mem->mem_type(tp, recv_d + GUARD, &mt) == RMACOLL_SUCCESS &&
                     mt == RMACOLL_MEM_CUDA);
        CHECK(c, CE->mem->mem_type(tp, host_recv, &mt) == RMACOLL_SUCCESS &&
                     mt == RMACOLL_MEM_HOST);
        mt = RMACOLL_MEM_CUDA;
        CHECK(c, CE->mem->mem_type(tp, &maxsz, &mt) == RMACOLL_SUCCESS &&
                     mt == RMACOLL_MEM_HOST);
    }

    /* export the receive buffer at an offset (base + offset path) */
    CHECK(c, ops->mem->mem_export(tp, recv_d + GUARD, total - GUARD,
                             c->sh->blob[r]) == RMACOLL_SUCCESS);
    CHECK(c, sh_barrier(c) == 0);
    for (int p = 0; p < NR; p++) {
        uint64_t a = 0, again = 0;

        CHECK(c, ops->mem->mem_import(tp, p, c->sh->blob[p], &a) == RMACOLL_SUCCESS);
        /* cached: the same export imported again maps nothing new */
        CHECK(c, ops->mem->mem_import(tp, p, c->sh->blob[p], &again) ==
                     RMACOLL_SUCCESS);
        CHECK(c, a != 0 && a == again);
        if (p == r) {
            CHECK(c, a == (uint64_t)(uintptr_t)(recv_d + GUARD));
        }
        dst_base[p] = a; /* = peer's recv_d + GUARD, here */
    }
    /* a blob of the other rank presented as this peer's is refused */
    {
        uint64_t a = 0;

        CHECK(c, ops->mem->mem_import(tp, 1 - r, c->sh->blob[r], &a) ==
                     RMACOLL_ERR_INVALID_ARG);
    }
    CHECK(c, sh_barrier(c) == 0);

    for (int k = 0; k < x->nsizes; k++) {
        uint64_t sz = x->sizes[k];

        for (int rep = 0; rep < x->reps; rep++, it++) {
            uint64_t v = it + 1;
            rmacoll_put_t puts[NR];
            uint32_t widx[NR];
            uint64_t wval[NR];
            uint32_t aidx[NR];
            uint64_t aval[NR];

            /* sender: the receivers refilled their slots of iteration it-1 */
            for (int d = 0; d < NR; d++) {
                aidx[d] = (uint32_t)ACK(d);
                aval[d] = it;
            }
            CHECK(c, ops->stream->wait_stream(tp, aidx, aval, NR, s) == RMACOLL_SUCCESS);
            if (x->memset_fill) {
                /* the puts must read what this stream-ordered memset
                 * writes, never the previous iteration's bytes */
                CUCHECK(c, cudaMemsetAsync(src_d, mset(r, it), sz, s));
            } else {
                CUCHECK(c, cudaStreamSynchronize(s)); /* host_src reuse */
                for (uint64_t i = 0; i < sz; i++) {
                    host_src[i] = pat(r, 0, it, i);
                }
                CUCHECK(c, cudaMemcpyAsync(src_d, host_src, sz,
                                           cudaMemcpyHostToDevice, s));
            }
            for (int d = 0; d < NR; d++) {
                int dst = (r + d) % NR;

                puts[d] = (rmacoll_put_t){
                    .peer = dst,
                    .src = src_d,
                    .dst_addr = dst_base[dst] + (uint64_t)r * stride,
                    .bytes = sz,
                    .sig_index = (uint32_t)DATA(r),
                    .sig_value = v,
                };
            }
            /* one queue: self and peer */
            CHECK(c, ops->stream->post_puts_stream(tp, puts, NR, s) == RMACOLL_SUCCESS);

            /* receiver */
            for (int p = 0; p < NR; p++) {
                widx[p] = (uint32_t)DATA(p);
                wval[p] = v;
            }
            CHECK(c, ops->stream->wait_stream(tp, widx, wval, NR, s) == RMACOLL_SUCCESS);
            CUCHECK(c, cudaMemcpyAsync(host_recv, recv_d, total,
                                       cudaMemcpyDeviceToHost, s));
            CUCHECK(c, cudaStreamSynchronize(s));
            for (int p = 0; p < NR; p++) {
                CHECK(c, __atomic_load_n(&c->sh->signals[r][DATA(p)],
                                         __ATOMIC_ACQUIRE) == v);
            }
            for (uint64_t i = 0; i < GUARD; i++) {
                CHECK(c, host_recv[i] == FILL);
            }
            for (int p = 0; p < NR; p++) {
                const uint8_t *slot = host_recv + GUARD + (uint64_t)p * stride;
                uint64_t bad = sz;

                for (uint64_t i = 0; i < sz; i++) {
                    uint8_t want = x->memset_fill ? mset(p, it)
                                                  : pat(p, 0, it, i);
                    if (slot[i] != want) {
                        bad = i;
                        break;
                    }
                }
                if (bad != sz) {
                    snprintf(c->lastlog, sizeof(c->lastlog),
                             "size %llu it %llu from %d: byte %llu is 0x%02x",
                             (unsigned long long)sz, (unsigned long long)it, p,
                             (unsigned long long)bad, slot[bad]);
                }
                CHECK(c, bad == sz);
                for (uint64_t i = sz; i < stride; i++) {
                    CHECK(c, slot[i] == FILL);
                }
            }
            CUCHECK(c, cudaMemsetAsync(recv_d, FILL, total, s));
            for (int d = 0; d < NR; d++) {
                CHECK(c, ops->stream->signal_stream(tp, d, (uint32_t)ACK(r), v, s) ==
                             RMACOLL_SUCCESS);
            }
        }
    }
    CUCHECK(c, cudaStreamSynchronize(s));
    /* errors: bad peer, bad signal word; nothing enqueued */
    {
        rmacoll_put_t bad = {.peer = 7, .src = src_d, .dst_addr = dst_base[r],
                             .bytes = 1, .sig_index = RMACOLL_NO_SIGNAL};
        uint32_t wi = NSIGW;
        uint64_t wv = 1;

        CHECK(c, ops->stream->post_puts_stream(tp, &bad, 1, s) == RMACOLL_ERR_INVALID_ARG);
        bad.peer = r;
        bad.sig_index = NSIGW;
        CHECK(c, ops->stream->post_puts_stream(tp, &bad, 1, s) == RMACOLL_ERR_INVALID_ARG);
        CHECK(c, ops->stream->wait_stream(tp, &wi, &wv, 1, s) == RMACOLL_ERR_INVALID_ARG);
    }
    /* device-resident words (RMACOLL_SIG_DEVICE): refused before they are
     * handed over; then a signal-only put to self raises own device word 3
     * (unused by the exchange), a stream wait on it passes, the control
     * window's word 3 stays 0; an index past the array and a peer whose
     * array was not handed over are refused */
    {
        uint64_t *dw = NULL, addr[NR] = {0}, got = 0, dv = 42;
        uint32_t nw[NR] = {0}, di = 3u | RMACOLL_SIG_DEVICE;
        rmacoll_put_t sp = {.peer = r, .bytes = 0, .sig_index = di, .sig_value = dv};

        CHECK(c, ops->stream->post_puts_stream(tp, &sp, 1, s) == RMACOLL_ERR_INVALID_ARG);
        CHECK(c, ops->stream->wait_stream(tp, &di, &dv, 1, s) == RMACOLL_ERR_INVALID_ARG);
        CUCHECK(c, cudaMalloc((void **)&dw, NSIGW * sizeof(uint64_t)));
        CUCHECK(c, cudaMemset(dw, 0, NSIGW * sizeof(uint64_t)));
        CUCHECK(c, cudaDeviceSynchronize());
        addr[r] = (uint64_t)(uintptr_t)dw;
        nw[r] = NSIGW;
        CHECK(c, ops->stream->set_device_signals(tp, NULL, NULL) == RMACOLL_SUCCESS);
        CHECK(c, ops->stream->set_device_signals(tp, addr, nw) == RMACOLL_SUCCESS);
        CHECK(c, ops->stream->post_puts_stream(tp, &sp, 1, s) == RMACOLL_SUCCESS);
        CHECK(c, ops->stream->wait_stream(tp, &di, &dv, 1, s) == RMACOLL_SUCCESS);
        CUCHECK(c, cudaStreamSynchronize(s));
        CUCHECK(c, cudaMemcpy(&got, dw + 3, sizeof(got), cudaMemcpyDeviceToHost));
        CHECK(c, got == dv);
        CHECK(c, c->sh->signals[r][3] == 0);
        sp.sig_index = NSIGW | RMACOLL_SIG_DEVICE;
        CHECK(c, ops->stream->post_puts_stream(tp, &sp, 1, s) == RMACOLL_ERR_INVALID_ARG);
        sp.peer = 1 - r;
        sp.sig_index = di;
        CHECK(c, ops->stream->post_puts_stream(tp, &sp, 1, s) == RMACOLL_ERR_INVALID_ARG);
        addr[r] = 0; /* nothing points at dw once it is freed */
        nw[r] = 0;
        CHECK(c, ops->stream->set_device_signals(tp, addr, nw) == RMACOLL_SUCCESS);
        CUCHECK(c, cudaFree(dw));
    }
    /* the last acks are in before anyone unmaps */
    for (int d = 0; d < NR; d++) {
        double deadline = now_s() + SPIN_S;

        while (__atomic_load_n(&c->sh->signals[r][ACK(d)], __ATOMIC_ACQUIRE) <
               it) {
            CHECK(c, now_s() < deadline);
            sched_yield();
        }
    }
    CHECK(c, sh_barrier(c) == 0);
    CHECK(c, ops->base->progress(tp) == RMACOLL_SUCCESS);
    CHECK(c, ops->base->pending(tp) == 0);
    if (tp != ce) {
        ops->base->finalize(tp);
    }
    if (ce != NULL) {
        CE->base->finalize(ce);
    }
    CHECK(c, sh_barrier(c) == 0);
    cudaFreeHost(host_src);
    cudaFreeHost(host_recv);
    cudaFree(src_d);
    cudaFree(recv_d);
    cudaStreamDestroy(s);
}

/* ---- parent side --------------------------------------------------- */

/* 0: at least one GPU seen by a probe child; SKIP_RC otherwise. */
static int probe_gpu(void)
{
    pid_t pid;
    int st = 0;
    double deadline = now_s() + 60;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int n = 0;

        alarm(60);
        _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : SKIP_RC);
    }
    if (pid < 0) {
        return SKIP_RC;
    }
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return SKIP_RC;
        }
        usleep(10000);
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : SKIP_RC;
}

static void run_ranks(const scenario_t *x)
{
    shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pids[NR];
    int status[NR];
    int done = 0;
    double deadline = now_s() + PARENT_WAIT_S;

    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    fflush(NULL);
    for (int r = 0; r < NR; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            child_t c;

            alarm(CHILD_ALARM_S);
            child_setup(&c, sh, r);
            child_run(&c, x);
            _exit(0);
        }
        status[r] = -1;
    }
    while (done < NR && now_s() < deadline) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);

        if (p > 0) {
            for (int r = 0; r < NR; r++) {
                if (pids[r] == p) {
                    status[r] = st;
                    done++;
                }
            }
        } else {
            usleep(2000);
        }
    }
    for (int r = 0; r < NR; r++) {
        if (status[r] == -1) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &status[r], 0);
            fprintf(stderr, "rank %d did not finish in %d s\n", r,
                    PARENT_WAIT_S);
            status[r] = -1;
        }
    }
    for (int r = 0; r < NR; r++) {
        if (sh->err[r][0] != '\0') {
            fprintf(stderr, "child failure: %s\n", sh->err[r]);
        }
    }
    for (int r = 0; r < NR; r++) {
        assert_true(status[r] != -1 && WIFEXITED(status[r]) &&
                    WEXITSTATUS(status[r]) == 0);
    }
    munmap(sh, sizeof(*sh));
}

static const uint64_t sizes[] = {1, 4096, 1u << 20, 64u << 20};
static const uint64_t big[] = {64u << 20};
static const uint64_t small[] = {1, 3, 17, 4096 + 5, 100000};

static void test_ops_tables(void **state)
{
    assert_true(CE->caps & RMACOLL_TCAP_MEM_CUDA);
    assert_non_null(CE->mem->mem_export);
    assert_non_null(CE->mem->mem_import);
    assert_non_null(CE->mem->mem_type);
    assert_non_null(CE->stream->post_puts_stream);
    assert_non_null(CE->stream->wait_stream);
    assert_non_null(CE->stream->signal_stream);
    assert_string_equal(NVL->name, "nvlink_kernel");
    assert_int_equal(NVL->caps, RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA);
    assert_non_null(NVL->stream->post_puts_stream);
}

static void test_ce_sizes(void **state)
{
    scenario_t x = {CE, 0, 0, sizes, 4, 2};

    run_ranks(&x);
}

static void test_ce_stream_order(void **state)
{
    scenario_t x = {CE, 0, 1, big, 1, 6};

    run_ranks(&x);
}

static void test_nvl_sizes(void **state)
{
    scenario_t x = {NVL, 1, 0, sizes, 4, 2};

    run_ranks(&x);
}

static void test_nvl_small_unaligned(void **state)
{
    scenario_t x = {NVL, 1, 0, small, 5, 20};

    run_ranks(&x);
}

static void test_nvl_stream_order(void **state)
{
    scenario_t x = {NVL, 1, 1, big, 1, 6};

    run_ranks(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_tables),
        cmocka_unit_test(test_ce_sizes),
        cmocka_unit_test(test_ce_stream_order),
        cmocka_unit_test(test_nvl_sizes),
        cmocka_unit_test(test_nvl_small_unaligned),
        cmocka_unit_test(test_nvl_stream_order),
    };

    if (probe_gpu() != 0) {
        fprintf(stderr, "test_ce_cuda: no usable GPU here; skipped\n");
        return SKIP_RC;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
