/*
 * test_ce_host.c - the ce transport's host backend (cross-memory attach),
 * with ranks as forked processes.
 *
 * A MAP_SHARED region made before fork stands in for the core's control
 * windows: it holds every rank's signal words (so env->peer_signals[p] is
 * rank p's array there), a table where each rank publishes its malloc'd
 * receive buffer, and the scratch of a small allgather with a bounded spin
 * barrier. Children never call CMocka: they check with CHECK(), which
 * records "rank, line, condition" in the shared region and exits non-zero;
 * the parent (a CMocka test) waits for them with a bound and asserts that
 * every child exited 0. Every child runs under alarm(), every spin has a
 * deadline.
 */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
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

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"

extern const rmacoll_transport_ops_t rmacoll_transport_ce_ops;
#define OPS (&rmacoll_transport_ce_ops)

#define MAXR 4
#define NSIGW (2 * MAXR + 4)     /* [0,MAXR): data from sender s;      */
#define ACK(r) (MAXR + (r))     /* [MAXR,2*MAXR): acks from receiver r */
#define SIG_SPARE (2 * MAXR)    /* free words for single tests */
#define AG_MAX 64               /* largest allgather contribution */
#define GUARD 4096              /* guard bytes around every block */
#define FILL 0xA5               /* value of bytes nobody may write */
#define SPIN_S 60               /* deadline of every spin, seconds */
#define CHILD_ALARM_S 240       /* alarm() of every child */
#define PARENT_WAIT_S 300       /* bound of the parent's waitpid loop */
#define CHILD_SKIP 77           /* child's exit code: cannot run here */

typedef struct shared {
    volatile uint64_t signals[MAXR][NSIGW];  /* the "control windows" */
    volatile uint64_t buf_addr[MAXR];       /* published receive buffers */
    uint8_t ag[MAXR][AG_MAX];               /* allgather scratch */
    unsigned bar_count;
    unsigned bar_gen;
    volatile int skip;                      /* a child cannot run here */
    char err[MAXR][1400];                    /* first failure of a child */
} shared_t;

typedef struct child {
    shared_t *sh;
    int rank;
    int nranks;
    uint8_t peers[MAXR];
    volatile uint64_t *peer_sig[MAXR];
    rmacoll_transport_env_t env;
    char lastlog[1024];  /* the last message the transport logged */
    int direct_maps;     /* messages "... for direct copies" (shared allocations) */
} child_t;

typedef void (*child_fn_t)(child_t *c, void *arg);

/* ---- child side ---------------------------------------------------- */

static void child_fail(child_t *c, int line, const char *what)
{
    if (c->sh->err[c->rank][0] == '\0') {
        snprintf(c->sh->err[c->rank], sizeof(c->sh->err[0]),
                 "rank %d, line %d: %.200s (last log: %.1024s)", c->rank, line, what,
                 c->lastlog);
    }
    _exit(1);
}

#define CHECK(c_, cond)                                                    \
    do {                                                                   \
        if (!(cond)) {                                                     \
            child_fail((c_), __LINE__, #cond);                             \
        }                                                                  \
    } while (0)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sense-reversing barrier over the shared region; 0, or -1 on timeout. */
static int sh_barrier(child_t *c)
{
    shared_t *sh = c->sh;
    unsigned gen = __atomic_load_n(&sh->bar_gen, __ATOMIC_ACQUIRE);
    double deadline = now_s() + SPIN_S;

    if (__atomic_add_fetch(&sh->bar_count, 1, __ATOMIC_ACQ_REL) ==
        (unsigned)c->nranks) {
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

static void barrier(child_t *c)
{
    CHECK(c, sh_barrier(c) == 0);
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
    for (int r = 0; r < c->nranks; r++) {
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
    if (strstr(c->lastlog, "for direct copies") != NULL) {
        c->direct_maps++;
    }
    fprintf(stderr, "[rank %d] %s\n", c->rank, c->lastlog);
}

static void child_setup(child_t *c, shared_t *sh, int rank, int nranks)
{
    memset(c, 0, sizeof(*c));
    c->sh = sh;
    c->rank = rank;
    c->nranks = nranks;
    for (int p = 0; p < nranks; p++) {
        c->peers[p] = p != rank;
        c->peer_sig[p] = sh->signals[p];
    }
    c->env.struct_size = sizeof(c->env);
    c->env.rank = rank;
    c->env.nranks = nranks;
    c->env.peers = c->peers;
    c->env.signals = sh->signals[rank];
    c->env.nsignals = NSIGW;
    c->env.peer_signals = (volatile uint64_t *const *)c->peer_sig;
    c->env.allgather = sh_allgather;
    c->env.oob_ctx = c;
    c->env.log = child_log;
    c->env.log_ctx = c;
}

static rmacoll_transport_t *child_init(child_t *c)
{
    rmacoll_transport_t *tp = NULL;

    CHECK(c, OPS->base->init(&c->env, &tp) == RMACOLL_SUCCESS);
    CHECK(c, tp != NULL);
    return tp;
}

/* Waits until *w >= v (acquire); fails the child after SPIN_S. */
static uint64_t wait_word(child_t *c, volatile uint64_t *w, uint64_t v)
{
    double deadline = now_s() + SPIN_S;
    uint64_t got;

    while ((got = __atomic_load_n(w, __ATOMIC_ACQUIRE)) < v) {
        CHECK(c, now_s() < deadline);
        sched_yield();
    }
    return got;
}

/* Byte i of the block that sender s puts to receiver r in iteration it. */
static inline uint8_t pat(int s, int r, uint64_t it, uint64_t i)
{
    return (uint8_t)(i * 131u + (i >> 12) + (uint64_t)s * 17u +
                     (uint64_t)r * 29u + it * 7u + 1u);
}

static void fill_pat(uint8_t *p, int s, int r, uint64_t it, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        p[i] = pat(s, r, it, i);
    }
}

/* Index of the first byte of p[0,n) differing from the pattern, or n. */
static uint64_t find_bad_pat(const uint8_t *p, int s, int r, uint64_t it,
                             uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (p[i] != pat(s, r, it, i)) {
            return i;
        }
    }
    return n;
}

static uint64_t find_not_fill(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (p[i] != FILL) {
            return i;
        }
    }
    return n;
}

/*
 * All-to-all exchange, self included. Rank r's receive buffer holds a
 * GUARD, then one slot of `stride` bytes per sender. Iteration it, value
 * v = it + 1: every rank puts `bytes` of pattern(it) into its slot at each
 * receiver and raises the receiver's word [sender] to v; every receiver
 * spins on that word, checks each byte of the slot (pattern, then FILL up
 * to the next slot), refills it with FILL and acks with a signal-only put
 * (word ACK(receiver) at the sender). A sender writes iteration it + 1 only
 * after that ack, so any byte seen stale means the signal overtook data.
 */
typedef struct exchange {
    const uint64_t *sizes;  /* bytes of each phase */
    int nsizes;
    int reps;               /* iterations per size */
    uint64_t iov_max;       /* 0: transport default */
    int shared;             /* receive buffers from mem_alloc(RMACOLL_MEM_HOST) */
} exchange_t;

static void child_exchange(child_t *c, void *arg)
{
    const exchange_t *x = arg;
    int n = c->nranks;
    int r = c->rank;
    uint64_t maxsz = 0;
    uint64_t stride;
    uint64_t total;
    uint8_t *buf;
    uint8_t *src;
    uint64_t it = 0;
    rmacoll_transport_t *tp = child_init(c);

    for (int k = 0; k < x->nsizes; k++) {
        maxsz = x->sizes[k] > maxsz ? x->sizes[k] : maxsz;
    }
    if (x->iov_max != 0) {
        CHECK(c, rmacoll__ce_set_iov_max(tp, x->iov_max) == RMACOLL_SUCCESS);
    }
    stride = maxsz + GUARD;
    total = GUARD + (uint64_t)n * stride;
    if (x->shared) {
        void *m = NULL;

        CHECK(c, OPS->mem->mem_alloc(tp, total, RMACOLL_MEM_HOST, &m) == RMACOLL_SUCCESS);
        buf = m;
        for (uint64_t i = 0; i < total; i++) {
            CHECK(c, buf[i] == 0); /* zero-filled */
        }
    } else {
        buf = malloc(total);
    }
    src = malloc(maxsz > 0 ? maxsz : 1);
    CHECK(c, buf != NULL && src != NULL);
    memset(buf, FILL, total);
    c->sh->buf_addr[r] = (uint64_t)(uintptr_t)buf;
    barrier(c);

    for (int k = 0; k < x->nsizes; k++) {
        uint64_t sz = x->sizes[k];

        for (int rep = 0; rep < x->reps; rep++, it++) {
            uint64_t v = it + 1;

            for (int d = 0; d < n; d++) {
                int dst = (r + d) % n;
                rmacoll_put_t put = {
                    .peer = dst,
                    .src = src,
                    .dst_addr = c->sh->buf_addr[dst] + GUARD +
                                (uint64_t)r * stride,
                    .bytes = sz,
                    .sig_index = (uint32_t)r,
                    .sig_value = v,
                };

                wait_word(c, &c->sh->signals[r][ACK(dst)], it);
                fill_pat(src, r, dst, it, sz);
                CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_SUCCESS);
                CHECK(c, OPS->base->pending(tp) == 0);
            }
            for (int d = 0; d < n; d++) {
                int s = (r - d + n) % n;
                uint8_t *slot = buf + GUARD + (uint64_t)s * stride;
                rmacoll_put_t ack = {
                    .peer = s,
                    .bytes = 0,
                    .sig_index = (uint32_t)ACK(r),
                    .sig_value = v,
                };

                CHECK(c, wait_word(c, &c->sh->signals[r][s], v) == v);
                CHECK(c, find_bad_pat(slot, s, r, it, sz) == sz);
                CHECK(c, find_not_fill(slot + sz, stride - sz) ==
                             stride - sz);
                memset(slot, FILL, sz);
                CHECK(c, OPS->host->post_puts(tp, &ack, 1) == RMACOLL_SUCCESS);
            }
        }
    }
    /* The last acks are in; every slot was refilled: the whole buffer,
     * guards included, must be FILL again. */
    for (int d = 0; d < n; d++) {
        wait_word(c, &c->sh->signals[r][ACK(d)], it);
    }
    barrier(c);
    CHECK(c, find_not_fill(buf, total) == total);
    CHECK(c, OPS->base->progress(tp) == RMACOLL_SUCCESS);
    CHECK(c, OPS->base->error_peer(tp) == -1);
    /* puts of more than 0 bytes to the n - 1 peers each mapped that
     * peer's allocation once, and only then */
    if (x->shared) {
        int any = 0;

        for (int k = 0; k < x->nsizes; k++) {
            any |= x->sizes[k] > 0;
        }
        CHECK(c, c->direct_maps == (any ? n - 1 : 0));
    } else {
        CHECK(c, c->direct_maps == 0);
    }
    barrier(c); /* no peer writes into buf after this */
    if (x->shared) {
        OPS->mem->mem_free(tp, buf, RMACOLL_MEM_HOST);
    } else {
        free(buf);
    }
    OPS->base->finalize(tp);
    free(src);
}

/* ---- parent side --------------------------------------------------- */

/* Forks nranks children running fn; returns the number that exited with
 * CHILD_SKIP, fails the test if any other exit is not 0. */
static int run_ranks(int nranks, child_fn_t fn, void *arg)
{
    shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pids[MAXR];
    int status[MAXR];
    int done = 0;
    int skipped = 0;
    double deadline = now_s() + PARENT_WAIT_S;

    assert_true(sh != MAP_FAILED);
    assert_true(nranks >= 1 && nranks <= MAXR);
    memset(sh, 0, sizeof(*sh));
    fflush(NULL);
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            child_t c;

            alarm(CHILD_ALARM_S);
            child_setup(&c, sh, r, nranks);
            fn(&c, arg);
            _exit(0);
        }
        status[r] = -1;
    }
    while (done < nranks && now_s() < deadline) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);

        if (p > 0) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] == p) {
                    status[r] = st;
                    done++;
                }
            }
        } else {
            usleep(2000);
        }
    }
    for (int r = 0; r < nranks; r++) {
        if (status[r] == -1) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &status[r], 0);
            fprintf(stderr, "rank %d did not finish in %d s\n", r,
                    PARENT_WAIT_S);
            status[r] = -1;
        }
    }
    for (int r = 0; r < nranks; r++) {
        if (sh->err[r][0] != '\0') {
            fprintf(stderr, "child failure: %s\n", sh->err[r]);
        }
    }
    for (int r = 0; r < nranks; r++) {
        if (status[r] != -1 && WIFEXITED(status[r]) &&
            WEXITSTATUS(status[r]) == CHILD_SKIP) {
            skipped++;
            continue;
        }
        if (status[r] == -1 || !WIFEXITED(status[r]) ||
            WEXITSTATUS(status[r]) != 0) {
            fprintf(stderr, "rank %d: status 0x%x%s\n", r, status[r],
                    status[r] != -1 && WIFSIGNALED(status[r])
                        ? " (killed by a signal; SIGALRM = timeout)"
                        : "");
        }
        assert_true(status[r] != -1 && WIFEXITED(status[r]));
        assert_int_equal(WEXITSTATUS(status[r]), 0);
    }
    munmap(sh, sizeof(*sh));
    return skipped;
}

/* ---- tests --------------------------------------------------------- */

static const uint64_t small_sizes[] = {0, 1, 4095, 1u << 20};

static void test_sizes_2(void **state)
{
    exchange_t x = {small_sizes, 4, 3, 0, 0};

    run_ranks(2, child_exchange, &x);
}

static void test_sizes_3(void **state)
{
    exchange_t x = {small_sizes, 4, 3, 0, 0};

    run_ranks(3, child_exchange, &x);
}

static void test_sizes_4(void **state)
{
    exchange_t x = {small_sizes, 4, 3, 0, 0};

    run_ranks(4, child_exchange, &x);
}

/* 100 MiB: once split into odd 1 MiB + 4097-byte writes (about 100
 * process_vm_writev calls, none page-aligned), once with the default. */
static void test_100mib(void **state)
{
    static const uint64_t big[] = {100ull << 20};
    exchange_t split = {big, 1, 1, (1u << 20) + 4097, 0};
    exchange_t whole = {big, 1, 1, 0, 0};

    run_ranks(2, child_exchange, &split);
    run_ranks(2, child_exchange, &whole);
}

/* The signal never overtakes the data: many rounds, receivers check
 * every byte as soon as they see the signal. */
static void test_signal_after_data(void **state)
{
    static const uint64_t sz[] = {(64u << 10) + 3};
    exchange_t x = {sz, 1, 400, 0, 0};

    run_ranks(4, child_exchange, &x);
}

/* Receive buffers in shared allocations: the same exchange, every byte
 * and guard checked, the signal after the data, each peer's allocation
 * mapped once (the puts are memcpy into the mapping). */
static void test_shared_exchange(void **state)
{
    static const uint64_t sz[] = {1, 4095, (64u << 10) + 3, 1u << 20};
    exchange_t x = {sz, 4, 20, 0, 1};

    run_ranks(4, child_exchange, &x);
}

/* Rank 1 frees its shared receive buffer and allocates another of the
 * same size (usually at the same address) after rank 0 has put into the
 * first: rank 0 must put into the new one, not through its mapping of the
 * freed one; 3 rounds, every byte and the guards checked. */
static void child_shared_realloc(child_t *c, void *arg)
{
    rmacoll_transport_t *tp = child_init(c);
    const uint64_t sz = (32u << 10) + 5, total = GUARD + sz + GUARD;
    uint8_t *src = malloc(sz), *buf = NULL;
    uint64_t first = 0;
    int same = 0;

    CHECK(c, src != NULL);
    for (uint64_t it = 0; it < 3; it++) {
        if (c->rank == 1) {
            void *m = NULL;

            if (buf != NULL) {
                OPS->mem->mem_free(tp, buf, RMACOLL_MEM_HOST);
            }
            CHECK(c, OPS->mem->mem_alloc(tp, total, RMACOLL_MEM_HOST, &m) == RMACOLL_SUCCESS);
            buf = m;
            if (it == 0) {
                first = (uint64_t)(uintptr_t)buf;
            } else {
                same += (uint64_t)(uintptr_t)buf == first;
            }
            memset(buf, FILL, total);
            c->sh->buf_addr[1] = (uint64_t)(uintptr_t)buf;
        }
        barrier(c);
        if (c->rank == 0) {
            rmacoll_put_t put = {.peer = 1, .src = src,
                                 .dst_addr = c->sh->buf_addr[1] + GUARD, .bytes = sz,
                                 .sig_index = SIG_SPARE, .sig_value = it + 1};

            fill_pat(src, 0, 1, it, sz);
            CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_SUCCESS);
            CHECK(c, c->direct_maps == (int)it + 1); /* a new mapping each round */
        }
        barrier(c);
        if (c->rank == 1) {
            CHECK(c, c->sh->signals[1][SIG_SPARE] == it + 1);
            CHECK(c, find_not_fill(buf, GUARD) == GUARD);
            CHECK(c, find_bad_pat(buf + GUARD, 0, 1, it, sz) == sz);
            CHECK(c, find_not_fill(buf + GUARD + sz, GUARD) == GUARD);
        }
        barrier(c);
    }
    if (c->rank == 1) {
        fprintf(stderr, "[rank 1] reallocated at the same address in %d of 2 rounds\n", same);
        OPS->mem->mem_free(tp, buf, RMACOLL_MEM_HOST);
    }
    barrier(c);
    OPS->base->finalize(tp);
    free(src);
}

static void test_shared_realloc(void **state)
{
    run_ranks(2, child_shared_realloc, NULL);
}

/* mem_unshare: rank 1's shared receive buffer, into which rank 0 has
 * copied directly, is replaced by a private copy: its bytes stay, a write
 * through rank 0's old mapping (a copy resuming after a stop) no longer
 * reaches it, the next put takes cross-memory attach (no new mapping) and
 * lands exactly, and no new allocation is shared. */
static void child_unshare(child_t *c, void *arg)
{
    rmacoll_transport_t *tp = child_init(c);
    const uint64_t sz = (64u << 10) + 3, total = GUARD + sz + GUARD;
    uint8_t *src = malloc(sz), *buf = NULL;
    void *m = NULL;

    CHECK(c, src != NULL);
    if (c->rank == 1) {
        CHECK(c, OPS->mem->mem_alloc(tp, total, RMACOLL_MEM_HOST, &m) == RMACOLL_SUCCESS);
        buf = m;
        memset(buf, FILL, total);
        c->sh->buf_addr[1] = (uint64_t)(uintptr_t)buf;
    }
    barrier(c);
    for (uint64_t it = 0; it < 2; it++) {
        if (c->rank == 0) {
            rmacoll_put_t put = {.peer = 1, .src = src,
                                 .dst_addr = c->sh->buf_addr[1] + GUARD, .bytes = sz,
                                 .sig_index = SIG_SPARE, .sig_value = it + 1};

            fill_pat(src, 0, 1, it, sz);
            CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_SUCCESS);
            CHECK(c, c->direct_maps == 1); /* the first put mapped it, the second did not */
            CHECK(c, tp->nmaps == 1);
        }
        barrier(c);
        if (c->rank == 1) {
            CHECK(c, find_not_fill(buf, GUARD) == GUARD);
            CHECK(c, find_bad_pat(buf + GUARD, 0, 1, it, sz) == sz);
            CHECK(c, find_not_fill(buf + GUARD + sz, GUARD) == GUARD);
            if (it == 0) {
                void *other = NULL;

                /* only what overlaps the range: another allocation stays shared */
                CHECK(c, OPS->mem->mem_alloc(tp, 4096, RMACOLL_MEM_HOST, &other) ==
                         RMACOLL_SUCCESS);
                CHECK(c, OPS->mem->mem_unshare(tp, buf + GUARD + 5, 10) == RMACOLL_SUCCESS);
                CHECK(c, tp->own[0].unshared == 1 && tp->own[1].addr == other &&
                         tp->own[1].unshared == 0);
                OPS->mem->mem_free(tp, other, RMACOLL_MEM_HOST);
                CHECK(c, find_bad_pat(buf + GUARD, 0, 1, it, sz) == sz); /* kept */
            }
        }
        barrier(c);
        if (c->rank == 0 && it == 0) {
            /* a late copy through the old mapping */
            memset((uint8_t *)tp->maps[0].local + GUARD, 0x3c, sz);
        }
        barrier(c);
        if (c->rank == 1 && it == 0) {
            CHECK(c, find_bad_pat(buf + GUARD, 0, 1, it, sz) == sz); /* untouched */
        }
        barrier(c);
    }
    if (c->rank == 1) {
        CHECK(c, OPS->mem->mem_alloc(tp, 4096, RMACOLL_MEM_HOST, &m) == RMACOLL_ERR_UNSUPPORTED);
        OPS->mem->mem_free(tp, buf, RMACOLL_MEM_HOST);
        CHECK(c, tp->own[0].addr == NULL);
    }
    barrier(c);
    OPS->base->finalize(tp);
    free(src);
}

static void test_shared_unshare(void **state)
{
    run_ranks(2, child_unshare, NULL);
}

/* Count of this process's mappings of rmacoll_mem_alloc memfds. */
static int count_mem_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, "memfd:rmacoll-mem") != NULL;
    }
    fclose(f);
    return n;
}

/* A forked child that frees the parent's allocation frees only its own
 * view: the parent's allocation stays its own and the parent's free then
 * unmaps it (nothing left mapped; the trial saw a leak when the child's
 * free had emptied the shared directory's slot). */
static void child_fork_free(child_t *c, void *arg)
{
    rmacoll_transport_t *tp = child_init(c);
    void *m = NULL;
    pid_t pid;
    int st;

    CHECK(c, OPS->mem->mem_alloc(tp, 8192, RMACOLL_MEM_HOST, &m) == RMACOLL_SUCCESS);
    CHECK(c, count_mem_maps() == 1);
    pid = fork();
    CHECK(c, pid >= 0);
    if (pid == 0) {
        void *m2 = NULL;

        OPS->mem->mem_free(tp, m, RMACOLL_MEM_HOST);
        /* a child shares nothing new */
        _exit(count_mem_maps() == 0 &&
                      OPS->mem->mem_alloc(tp, 4096, RMACOLL_MEM_HOST, &m2) ==
                          RMACOLL_ERR_UNSUPPORTED
                  ? 0
                  : 1);
    }
    CHECK(c, waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(c, tp->own[0].addr == m && count_mem_maps() == 1); /* still the parent's */
    memset(m, 7, 8192);
    OPS->mem->mem_free(tp, m, RMACOLL_MEM_HOST);
    CHECK(c, tp->own[0].addr == NULL);
    CHECK(c, count_mem_maps() == 0); /* nothing leaked */
    OPS->base->finalize(tp);
}

static void test_shared_fork(void **state)
{
    run_ranks(1, child_fork_free, NULL);
}

/* Rank 1 exits after one good put; rank 0's later put fails naming it. */
static void child_dead_peer(child_t *c, void *arg)
{
    rmacoll_transport_t *tp = child_init(c);
    uint64_t word = 0x1122334455667788ull;
    uint64_t *buf = malloc(64);
    const uint32_t idx = SIG_SPARE;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    uint64_t k;
    double deadline;

    CHECK(c, buf != NULL);
    memset(buf, 0, 64);
    c->sh->buf_addr[c->rank] = (uint64_t)(uintptr_t)buf;
    barrier(c);
    if (c->rank == 1) {
        barrier(c); /* rank 0's first put is done */
        CHECK(c, buf[0] == word);
        CHECK(c, c->sh->signals[1][idx] == 1);
        barrier(c); /* checked before rank 0 puts again */
        _exit(0); /* gone without finalize, as after a crash */
    }
    rmacoll_put_t put = {
        .peer = 1,
        .src = &word,
        .dst_addr = c->sh->buf_addr[1],
        .bytes = sizeof(word),
        .sig_index = idx,
        .sig_value = 1,
    };
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_SUCCESS);
    barrier(c);
    barrier(c);
    deadline = now_s() + SPIN_S;
    for (k = 2; now_s() < deadline; k++) {
        put.sig_value = k;
        st = OPS->host->post_puts(tp, &put, 1);
        if (st != RMACOLL_SUCCESS) {
            break;
        }
        usleep(1000);
    }
    CHECK(c, st == RMACOLL_ERR_PEER);
    CHECK(c, OPS->base->error_peer(tp) == 1);
    CHECK(c, strstr(c->lastlog, "peer 1") != NULL);
    /* the failed put raised no signal: the word holds the last good one */
    CHECK(c, c->sh->signals[1][idx] == k - 1);
    OPS->base->finalize(tp);
    free(buf);
}

static void test_dead_peer(void **state)
{
    run_ranks(2, child_dead_peer, NULL);
}

/* Bad destinations and arguments give errors (no crash, no signal), and
 * the transport still works afterwards. */
static void child_bad_dst(child_t *c, void *arg)
{
    rmacoll_transport_t *tp = child_init(c);
    long pg = sysconf(_SC_PAGESIZE);
    const uint32_t idx = SIG_SPARE;
    uint8_t src[256];
    uint8_t *page = NULL;
    char expect[64];

    if (c->rank == 1) {
        /* one readable page followed by a hole */
        page = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(c, page != MAP_FAILED);
        CHECK(c, munmap(page + pg, (size_t)pg) == 0);
        memset(page, FILL, (size_t)pg);
        c->sh->buf_addr[1] = (uint64_t)(uintptr_t)page;
        barrier(c);
        barrier(c); /* rank 0 is done */
        /* the good put after the errors landed, nothing before it moved */
        CHECK(c, find_bad_pat(page, 0, 1, 0, 16) == 16);
        CHECK(c, find_not_fill(page + 16, (uint64_t)pg - 16 - 100) ==
                     (uint64_t)pg - 16 - 100);
        CHECK(c, c->sh->signals[1][idx] == 1);
        OPS->base->finalize(tp);
        munmap(page, (size_t)pg);
        return;
    }
    barrier(c);
    fill_pat(src, 0, 1, 0, sizeof(src));
    uint64_t base = c->sh->buf_addr[1];
    rmacoll_put_t put = {
        .peer = 1,
        .src = src,
        .dst_addr = 0x1000,
        .bytes = 64,
        .sig_index = idx,
        .sig_value = 1,
    };

    /* unmapped destination in the peer (EFAULT): the peer is named */
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_ERR_PEER);
    CHECK(c, strstr(c->lastlog, "peer 1") != NULL);
    CHECK(c, strstr(c->lastlog, "0x1000") != NULL);
    CHECK(c, strstr(c->lastlog, "64 bytes") != NULL);
    CHECK(c, strstr(c->lastlog, "not mapped in the peer") != NULL);
    CHECK(c, OPS->base->error_peer(tp) == 1);
    /* a destination that runs off the end of the peer's mapping */
    put.dst_addr = base + (uint64_t)pg - 100;
    put.bytes = 200;
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_ERR_PEER);
    CHECK(c, OPS->base->error_peer(tp) == 1);
    snprintf(expect, sizeof(expect), "0x%llx",
             (unsigned long long)put.dst_addr);
    CHECK(c, strstr(c->lastlog, expect) != NULL);
    /* peer out of range, signal word out of range, NULL source */
    put.dst_addr = base;
    put.bytes = 16;
    put.peer = 7;
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_ERR_INVALID_ARG);
    put.peer = 1;
    put.sig_index = NSIGW;
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_ERR_INVALID_ARG);
    put.sig_index = idx;
    put.src = NULL;
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_ERR_INVALID_ARG);
    CHECK(c, c->sh->signals[1][idx] == 0);
    /* still usable */
    put.src = src;
    CHECK(c, OPS->host->post_puts(tp, &put, 1) == RMACOLL_SUCCESS);
    barrier(c);
    OPS->base->finalize(tp);
}

static void test_bad_dst(void **state)
{
    run_ranks(2, child_bad_dst, NULL);
}

/* Rank 0 drops root before init, so it may not write into rank 1 (root):
 * init fails on both ranks; rank 0 names the peer and the ptrace cause,
 * rank 1 names the failing rank. */
static void child_eperm(child_t *c, void *arg)
{
    rmacoll_transport_t *tp = NULL;
    rmacoll_status_t st;

    if (c->rank == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
        fprintf(stderr, "[rank 0] cannot become nobody: %s; skipping\n",
                strerror(errno));
        c->sh->skip = 1;
    }
    barrier(c);
    if (c->sh->skip) {
        _exit(CHILD_SKIP);
    }
    st = OPS->base->init(&c->env, &tp);
    CHECK(c, st == RMACOLL_ERR_TRANSPORT);
    CHECK(c, tp == NULL);
    if (c->rank == 0) {
        CHECK(c, strstr(c->lastlog, "peer 1") != NULL);
        CHECK(c, strstr(c->lastlog, "ptrace_scope") != NULL);
        CHECK(c, strstr(c->lastlog, "CAP_SYS_PTRACE") != NULL);
    } else {
        CHECK(c, strstr(c->lastlog, "rank 0 cannot reach peer 1") != NULL);
    }
}

static void test_init_eperm(void **state)
{
    if (geteuid() != 0) {
        skip(); /* needs root to become another user */
    }
    if (run_ranks(2, child_eperm, NULL) > 0) {
        skip();
    }
}

/* ---- single-process tests ------------------------------------------ */

static rmacoll_status_t solo_allgather(void *ctx, const void *send,
                                       void *recv, size_t bytes)
{
    memcpy(recv, send, bytes);
    return RMACOLL_SUCCESS;
}

static void test_ops_table(void **state)
{
    assert_int_equal(OPS->abi_version, RMACOLL_TRANSPORT_ABI_VERSION);
    assert_int_equal(OPS->struct_size, sizeof(rmacoll_transport_ops_t));
    assert_string_equal(OPS->name, "ce");
    assert_true(OPS->caps & RMACOLL_TCAP_CE);
    assert_true(OPS->caps & RMACOLL_TCAP_MEM_HOST);
    assert_false(OPS->caps & RMACOLL_TCAP_PROXY);
    assert_non_null(OPS->base->init);
    assert_non_null(OPS->base->finalize);
    assert_non_null(OPS->mem->mem_register);
    assert_non_null(OPS->mem->mem_deregister);
    assert_non_null(OPS->host->post_puts);
    assert_non_null(OPS->base->progress);
    assert_non_null(OPS->base->pending);
    assert_non_null(OPS->base->error_peer);
}

/* One rank alone: self puts are memcpy plus a store into env->signals;
 * registration is trivial; bad init arguments are refused. */
static void test_solo(void **state)
{
    static volatile uint64_t sig[4];
    uint8_t peers[1] = {0};
    volatile uint64_t *psig[1] = {sig};
    rmacoll_transport_env_t env = {
        .struct_size = sizeof(env),
        .rank = 0,
        .nranks = 1,
        .peers = peers,
        .signals = sig,
        .nsignals = 4,
        .peer_signals = (volatile uint64_t *const *)psig,
        .allgather = solo_allgather,
    };
    rmacoll_transport_env_t bad = env;
    rmacoll_transport_t *tp = NULL;
    rmacoll_mem_t *mem = (rmacoll_mem_t *)&env; /* must be overwritten */
    rmacoll_rkey_t rkey;
    uint8_t src[300];
    uint8_t dst[300 + 2 * 64];

    bad.struct_size = sizeof(env) - 8;
    assert_int_equal(OPS->base->init(&bad, &tp), RMACOLL_ERR_INVALID_ARG);
    bad = env;
    bad.allgather = NULL;
    assert_int_equal(OPS->base->init(&bad, &tp), RMACOLL_ERR_INVALID_ARG);
    assert_null(tp);
    assert_int_equal(OPS->base->init(NULL, &tp), RMACOLL_ERR_INVALID_ARG);

    assert_int_equal(OPS->base->init(&env, &tp), RMACOLL_SUCCESS);
    assert_non_null(tp);

    memset(&rkey, 0xee, sizeof(rkey));
    assert_int_equal(OPS->mem->mem_register(tp, dst, sizeof(dst), RMACOLL_MEM_HOST,
                                       &mem, &rkey),
                     RMACOLL_SUCCESS);
    /* host memory needs no registration for cross-memory attach; with a
     * usable GPU the CUDA backend pins it (a handle) for stream copies */
    if (tp->cuda == NULL) {
        assert_null(mem);
    } else {
        assert_non_null(mem);
    }
    assert_int_equal(rkey.addr, (uint64_t)(uintptr_t)dst);
    assert_int_equal(rkey.bytes, sizeof(dst));
    assert_int_equal(rkey.len, 0);
    assert_int_equal(OPS->mem->mem_deregister(tp, mem), RMACOLL_SUCCESS);
    if (!(OPS->caps & RMACOLL_TCAP_MEM_CUDA)) {
        assert_int_equal(OPS->mem->mem_register(tp, dst, sizeof(dst),
                                           RMACOLL_MEM_CUDA, &mem, &rkey),
                         RMACOLL_ERR_UNSUPPORTED);
    }

    assert_int_equal(rmacoll__ce_set_iov_max(tp, 0), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__ce_set_iov_max(tp, RMACOLL__CE_IOV_MAX_DEFAULT + 1),
                     RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__ce_set_iov_max(tp, 1), RMACOLL_SUCCESS);

    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (uint8_t)(i * 7 + 3);
    }
    memset(dst, FILL, sizeof(dst));
    rmacoll_put_t puts[3] = {
        {.peer = 0, .src = src, .dst_addr = (uint64_t)(uintptr_t)(dst + 64),
         .bytes = 100, .sig_index = RMACOLL_NO_SIGNAL},
        {.peer = 0, .src = src + 100,
         .dst_addr = (uint64_t)(uintptr_t)(dst + 164), .bytes = 200,
         .sig_index = 2, .sig_value = 5},
        {.peer = 0, .bytes = 0, .sig_index = 3, .sig_value = 9},
    };
    assert_int_equal(OPS->host->post_puts(tp, puts, 3), RMACOLL_SUCCESS);
    assert_int_equal(OPS->base->pending(tp), 0);
    assert_memory_equal(dst + 64, src, 300);
    for (size_t i = 0; i < 64; i++) {
        assert_int_equal(dst[i], FILL);
        assert_int_equal(dst[364 + i], FILL);
    }
    assert_int_equal(sig[0], 0);
    assert_int_equal(sig[1], 0);
    assert_int_equal(sig[2], 5);
    assert_int_equal(sig[3], 9);
    assert_int_equal(OPS->host->post_puts(tp, NULL, 0), RMACOLL_SUCCESS);
    assert_int_equal(OPS->base->progress(tp), RMACOLL_SUCCESS);
    assert_int_equal(OPS->base->error_peer(tp), -1);
    OPS->base->finalize(tp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_table),
        cmocka_unit_test(test_solo),
        cmocka_unit_test(test_sizes_2),
        cmocka_unit_test(test_sizes_3),
        cmocka_unit_test(test_sizes_4),
        cmocka_unit_test(test_100mib),
        cmocka_unit_test(test_signal_after_data),
        cmocka_unit_test(test_shared_exchange),
        cmocka_unit_test(test_shared_realloc),
        cmocka_unit_test(test_shared_unshare),
        cmocka_unit_test(test_shared_fork),
        cmocka_unit_test(test_dead_peer),
        cmocka_unit_test(test_bad_dst),
        cmocka_unit_test(test_init_eperm),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
