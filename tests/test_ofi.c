/*
 * test_ofi.c - the libfabric transport on loopback providers (tcp;ofi_rxm,
 * shm, sockets): ranks are forked processes; their allgather is a shared
 * anonymous mapping plus a bounded spin barrier made before fork. Checks
 * exact bytes, exact signal values, signal-after-data ordering under mixed
 * sizes, back-pressure, the registration cache, provider errors, and that
 * a dead peer gives an error or a timeout, not a hang.
 * Children never return into CMocka: they _exit(0 ok | 1 fail | 77 skip).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rmacoll_transport.h"

#ifdef RMACOLL_HAVE_OFI

#include <rdma/fabric.h>      /* provider_here: what this libfabric offers */

extern const rmacoll_transport_ops_t rmacoll_transport_ofi_ops;
#define OPS (&rmacoll_transport_ofi_ops)

#define MAXR 4
#define SLOT 4096
#define TEST_NSIG 16
#define ACK_BASE 8          /* signal word ACK_BASE + r: acks from rank r */
#define SKIP_CODE 77
#define CHILD_ALARM_S 100
#define PARENT_WAIT_S 120
#define MiB (1024u * 1024u)

typedef struct shared {
    uint32_t arrived;
    uint32_t gen;
    uint8_t slot[MAXR][SLOT];
} shared_t;

typedef struct rank_ctx {
    int rank, n;
    shared_t *sh;
    rmacoll_config_t cfg;
    rmacoll_transport_env_t env;
    uint8_t peers[MAXR];
    rmacoll_transport_t *tp;
} rank_ctx_t;

static shared_t *g_sh;
static int g_rank = -1;
static volatile uint64_t g_signals[TEST_NSIG];
static char g_last_error[1024];
static unsigned g_backpressure_logs;
static int g_write_mode;        /* from init's INFO line: 1 ordered, 2 delivery acks */
static int g_delivery_complete; /* rank_init sets ofi.delivery_complete */
static char g_auto_pick[1024];   /* "net on lo" from "ofi: provider auto: net on lo" */

#define CK(c)                                                                  \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "rank %d: check failed at %s:%d: %s\n", g_rank,    \
                    __FILE__, __LINE__, #c);                                   \
            _exit(1);                                                          \
        }                                                                      \
    } while (0)

#define CKST(call)                                                             \
    do {                                                                       \
        rmacoll_status_t st_ = (call);                                         \
        if (st_ != RMACOLL_SUCCESS) {                                          \
            fprintf(stderr, "rank %d: %s failed at %s:%d: %s\n", g_rank, #call, \
                    __FILE__, __LINE__, rmacoll_status_name(st_));             \
            _exit(1);                                                          \
        }                                                                      \
    } while (0)

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys,
                     const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (level == RMACOLL_LOG_ERROR) {
        snprintf(g_last_error, sizeof(g_last_error), "%s", msg);
    }
    if (strstr(msg, "ordered writes: FI_INJECT_COMPLETE") != NULL) {
        g_write_mode = 1;
    } else if (strstr(msg, "FI_DELIVERY_COMPLETE, signals wait") != NULL) {
        g_write_mode = 2;
    }
    if (strncmp(msg, "ofi: provider auto: ", 20) == 0) {
        snprintf(g_auto_pick, sizeof(g_auto_pick), "%s", msg + 20);
    }
    if (strstr(msg, "back-pressure") != NULL) {
        g_backpressure_logs++;
        return;
    }
    if (level <= RMACOLL_LOG_WARN) {
        fprintf(stderr, "rank %d log: %s\n", g_rank, msg);
    }
}

/* Central sense barrier over the shared mapping; bounded. While waiting it
 * drives tp (manual-progress providers need the peer to progress). */
static rmacoll_status_t barrier(rank_ctx_t *c)
{
    uint32_t gen = __atomic_load_n(&c->sh->gen, __ATOMIC_ACQUIRE);
    uint64_t deadline = now_ms() + 30000;

    if (__atomic_add_fetch(&c->sh->arrived, 1, __ATOMIC_ACQ_REL) == (uint32_t)c->n) {
        __atomic_store_n(&c->sh->arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->sh->gen, gen + 1, __ATOMIC_RELEASE);
        return RMACOLL_SUCCESS;
    }
    while (__atomic_load_n(&c->sh->gen, __ATOMIC_ACQUIRE) == gen) {
        if (c->tp != NULL) {
            OPS->base->progress(c->tp);
        } else {
            usleep(100);
        }
        if (now_ms() > deadline) {
            return RMACOLL_ERR_TIMEOUT;
        }
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t shm_allgather(void *ctx, const void *send, void *recv,
                                      size_t bytes)
{
    rank_ctx_t *c = ctx;
    rmacoll_status_t st;

    if (bytes > SLOT) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memcpy(c->sh->slot[c->rank], send, bytes);
    if ((st = barrier(c)) != RMACOLL_SUCCESS) {
        return st;
    }
    for (int r = 0; r < c->n; r++) {
        memcpy((char *)recv + (size_t)r * bytes, c->sh->slot[r], bytes);
    }
    return barrier(c);
}

static rmacoll_status_t rank_init(rank_ctx_t *c, const char *prov, const char *iface,
                                  uint64_t timeout_ms)
{
    memset(&c->cfg, 0, sizeof(c->cfg));
    c->cfg.struct_size = sizeof(c->cfg);
    snprintf(c->cfg.ofi_provider, sizeof(c->cfg.ofi_provider), "%s", prov);
    snprintf(c->cfg.ofi_iface, sizeof(c->cfg.ofi_iface), "%s", iface);
    c->cfg.timeout_ms = timeout_ms;
    if (g_delivery_complete &&
        rmacoll_config_set(&c->cfg, "ofi.delivery_complete", "true") != RMACOLL_SUCCESS) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memset(&c->env, 0, sizeof(c->env));
    c->env.struct_size = sizeof(c->env);
    c->env.rank = c->rank;
    c->env.nranks = c->n;
    c->env.config = &c->cfg;
    c->env.config_get = rmacoll_config_get;
    for (int r = 0; r < c->n; r++) {
        c->peers[r] = r != c->rank;
    }
    c->env.peers = c->peers;
    c->env.signals = g_signals;
    c->env.nsignals = TEST_NSIG;
    c->env.allgather = shm_allgather;
    c->env.oob_ctx = c;
    c->env.log = test_log;
    c->tp = NULL;
    return OPS->base->init(&c->env, &c->tp);
}

/* Init, or exit 77 on every rank when the provider is absent here. */
static void rank_init_or_skip(rank_ctx_t *c, const char *prov, uint64_t timeout_ms)
{
    rmacoll_status_t st = rank_init(c, prov, "lo", timeout_ms);

    if (st == RMACOLL_ERR_NO_DEVICE || st == RMACOLL_ERR_UNSUPPORTED ||
        st == RMACOLL_ERR_PEER) {
        fprintf(stderr, "rank %d: provider '%s' unavailable: %s (%s)\n", c->rank,
                prov, rmacoll_status_name(st), g_last_error);
        _exit(SKIP_CODE);
    }
    CKST(st);
}

static uint64_t sig_load(uint32_t idx)
{
    return __atomic_load_n(&g_signals[idx], __ATOMIC_ACQUIRE);
}

/* Drives progress until signal word idx reaches value; bounded. */
static rmacoll_status_t wait_sig(rank_ctx_t *c, uint32_t idx, uint64_t value,
                                 uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;

    for (;;) {
        rmacoll_status_t st = OPS->base->progress(c->tp);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (sig_load(idx) >= value) {
            return RMACOLL_SUCCESS;
        }
        if (now_ms() > deadline) {
            return RMACOLL_ERR_TIMEOUT;
        }
    }
}

static rmacoll_status_t wait_pending(rank_ctx_t *c, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;

    while (OPS->base->pending(c->tp) != 0) {
        rmacoll_status_t st = OPS->base->progress(c->tp);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
        if (now_ms() > deadline) {
            return RMACOLL_ERR_TIMEOUT;
        }
    }
    return RMACOLL_SUCCESS;
}

static void rank_finish(rank_ctx_t *c)
{
    CKST(wait_pending(c, 20000));
    CKST(barrier(c));
    OPS->base->finalize(c->tp);
    c->tp = NULL;
}

static uint8_t pat(int src, uint64_t it, uint64_t off)
{
    return (uint8_t)(off * 7 + it * 13 + (uint64_t)src * 31 + 1 + (off >> 12));
}

/* ---- process runner ---- */

typedef int (*scenario_fn_t)(rank_ctx_t *c, const void *arg);

/* Runs fn on n forked ranks; returns 0 (all passed), SKIP_CODE, or 1. */
static int run_ranks(int n, scenario_fn_t fn, const void *arg)
{
    pid_t pids[MAXR];
    int status[MAXR], done = 0, result = 0;
    uint64_t deadline = now_ms() + PARENT_WAIT_S * 1000ull;

    memset(g_sh, 0, sizeof(*g_sh));
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            rank_ctx_t c;
            memset(&c, 0, sizeof(c));
            c.rank = r;
            c.n = n;
            c.sh = g_sh;
            g_rank = r;
            memset((void *)g_signals, 0, sizeof(g_signals));
            alarm(CHILD_ALARM_S);
            _exit(fn(&c, arg));
        }
        if (pids[r] < 0) {
            for (int k = 0; k < r; k++) {
                kill(pids[k], SIGKILL);
                waitpid(pids[k], NULL, 0);
            }
            return 1;
        }
        status[r] = -1;
    }
    while (done < n) {
        for (int r = 0; r < n; r++) {
            if (status[r] == -1 && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
                done++;
            }
        }
        if (done < n && now_ms() > deadline) {
            for (int r = 0; r < n; r++) {
                if (status[r] == -1) {
                    fprintf(stderr, "rank %d hung: killing pid %d\n", r, (int)pids[r]);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], &status[r], 0);
                    status[r] = 0xdead;
                    done++;
                }
            }
        }
        usleep(2000);
    }
    for (int r = 0; r < n; r++) {
        if (status[r] == 0xdead || !WIFEXITED(status[r])) {
            fprintf(stderr, "rank %d died (status 0x%x)\n", r, status[r]);
            result = 1;
        } else if (WEXITSTATUS(status[r]) == SKIP_CODE) {
            result = result ? result : SKIP_CODE;
        } else if (WEXITSTATUS(status[r]) != 0) {
            result = 1;
        }
    }
    return result;
}

static void expect_ranks(int n, scenario_fn_t fn, const void *arg)
{
    int r = run_ranks(n, fn, arg);

    if (r == SKIP_CODE) {
        skip();
    }
    assert_int_equal(r, 0);
}

/* ---- scenario: sizes, signalled and not ---- */

static const uint64_t sizes[] = {0, 1, 7, 4096, 1 * MiB, 3 * MiB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define GUARD 64

static uint64_t sizes_total(void)
{
    uint64_t t = 0;
    for (size_t i = 0; i < NSIZES; i++) {
        t += sizes[i];
    }
    return t;
}

static int sc_sizes(rank_ctx_t *c, const void *arg)
{
    const char *prov = arg;
    uint64_t total = sizes_total();
    uint64_t region = 2 * total + GUARD;    /* area A signalled, B unsignalled, guard */
    uint8_t *sbuf = malloc(2 * total), *rbuf = malloc(region * (uint64_t)c->n);
    rmacoll_mem_t *smem, *rmem;
    rmacoll_rkey_t rk, rks[MAXR];
    rmacoll_put_t puts[2 * NSIZES + 1];

    CK(sbuf && rbuf);
    for (uint64_t o = 0; o < 2 * total; o++) {
        sbuf[o] = pat(c->rank, 0, o);
    }
    memset(rbuf, 0xee, region * (uint64_t)c->n);
    rank_init_or_skip(c, prov, 20000);
    CKST(OPS->mem->mem_register(c->tp, sbuf, 2 * total, RMACOLL_MEM_HOST, &smem, NULL));
    CKST(OPS->mem->mem_register(c->tp, rbuf, region * (uint64_t)c->n, RMACOLL_MEM_HOST, &rmem,
                           &rk));
    CKST(shm_allgather(c, &rk, rks, sizeof(rk)));

    for (int k = 1; k < c->n; k++) {
        int d = (c->rank + k) % c->n;
        uint64_t base = rks[d].addr + region * (uint64_t)c->rank, off = 0;
        size_t np = 0;
        for (size_t i = 0; i < NSIZES; i++) {
            puts[np++] = (rmacoll_put_t){.peer = d, .src = sbuf + off, .src_mem = smem,
                                         .dst_addr = base + off, .dst_rkey = &rks[d],
                                         .bytes = sizes[i], .sig_index = (uint32_t)c->rank,
                                         .sig_value = i + 1};
            off += sizes[i];
        }
        for (size_t i = 0, o = total; i < NSIZES; o += sizes[i], i++) {
            puts[np++] = (rmacoll_put_t){.peer = d, .src = sbuf + o, .src_mem = smem,
                                         .dst_addr = base + o, .dst_rkey = &rks[d],
                                         .bytes = sizes[i], .sig_index = RMACOLL_NO_SIGNAL};
        }
        /* signal-only: covers all of area B */
        puts[np++] = (rmacoll_put_t){.peer = d, .src = NULL, .src_mem = NULL,
                                     .dst_addr = base + 2 * total, .dst_rkey = &rks[d],
                                     .bytes = 0, .sig_index = (uint32_t)c->rank,
                                     .sig_value = NSIZES + 1};
        CKST(OPS->host->post_puts(c->tp, puts, np));
    }
    /* Receive: check at each signal that the bytes it covers are right. */
    for (int s = 0; s < c->n; s++) {
        uint8_t *r = rbuf + region * (uint64_t)s;
        uint64_t seen = 0;
        if (s == c->rank) {
            continue;
        }
        while (seen < NSIZES + 1) {
            uint64_t v, lim;
            CKST(wait_sig(c, (uint32_t)s, seen + 1, 20000));
            v = sig_load((uint32_t)s);
            CK(v <= NSIZES + 1);
            lim = 0;
            for (uint64_t i = 0; i < v && i < NSIZES; i++) {
                lim += sizes[i];
            }
            if (v == NSIZES + 1) {
                lim = 2 * total;
            }
            for (uint64_t o = 0; o < lim; o++) {
                if (r[o] != pat(s, 0, o)) {
                    fprintf(stderr, "rank %d: from %d at signal %llu byte %llu is 0x%02x\n",
                            c->rank, s, (unsigned long long)v, (unsigned long long)o, r[o]);
                    _exit(1);
                }
            }
            seen = v;
        }
        for (uint64_t o = 2 * total; o < region; o++) {
            CK(r[o] == 0xee);
        }
    }
    CK(sig_load((uint32_t)c->rank) == 0);
    /* Exact final values: one increment per signal, nothing more. */
    CKST(barrier(c));
    for (int s = 0; s < c->n; s++) {
        CK(sig_load((uint32_t)s) == (s == c->rank ? 0 : NSIZES + 1));
    }
    CKST(OPS->mem->mem_deregister(c->tp, smem));
    CKST(OPS->mem->mem_deregister(c->tp, rmem));
    rank_finish(c);
    free(sbuf);
    free(rbuf);
    return 0;
}

/* ---- scenario: many unsignalled pieces, then one signalled, repeated ---- */

typedef struct order_arg {
    const char *prov;
    int iters;
    const char *max_piece;      /* RMACOLL_OFI_MAX_MSG_SIZE, or NULL */
} order_arg_t;

#define ORDER_PIECES 14
#define ORDER_REGION (6 * MiB)

static int sc_order(rank_ctx_t *c, const void *argp)
{
    const order_arg_t *arg = argp;
    static const uint64_t menu[] = {1, 7, 100, 4096, 65536 + 5, 300000, 1 * MiB};
    int right = (c->rank + 1) % c->n, left = (c->rank + c->n - 1) % c->n;
    uint8_t *sbuf = malloc(ORDER_REGION), *rbuf = calloc(1, ORDER_REGION);
    rmacoll_mem_t *smem, *rmem;
    rmacoll_rkey_t rk, rks[MAXR];
    rmacoll_put_t puts[ORDER_PIECES], ack;
    uint64_t lens[ORDER_PIECES];
    uint32_t lcg = 12345;

    CK(sbuf && rbuf);
    if (arg->max_piece) {
        setenv("RMACOLL_OFI_MAX_MSG_SIZE", arg->max_piece, 1);
    }
    rank_init_or_skip(c, arg->prov, 20000);
    CKST(OPS->mem->mem_register(c->tp, sbuf, ORDER_REGION, RMACOLL_MEM_HOST, &smem, NULL));
    CKST(OPS->mem->mem_register(c->tp, rbuf, ORDER_REGION, RMACOLL_MEM_HOST, &rmem, &rk));
    CKST(shm_allgather(c, &rk, rks, sizeof(rk)));

    for (int it = 0; it < arg->iters; it++) {
        uint64_t off = 0, total;
        /* every rank uses the same sizes in iteration it (same lcg sequence) */
        for (int i = 0; i < ORDER_PIECES; i++) {
            lcg = lcg * 1103515245u + 12345u;
            lens[i] = menu[(lcg >> 16) % (sizeof(menu) / sizeof(menu[0]))];
        }
        if (it % 2 == 1) {
            lens[ORDER_PIECES - 1] = 0;     /* signal-only tail */
        }
        for (int i = 0; i < ORDER_PIECES; i++) {
            off += lens[i];
        }
        total = off;
        CK(total <= ORDER_REGION);
        for (uint64_t o = 0; o < total; o++) {
            sbuf[o] = pat(c->rank, (uint64_t)it, o);
        }
        off = 0;
        for (int i = 0; i < ORDER_PIECES; i++) {
            int last = i == ORDER_PIECES - 1;
            puts[i] = (rmacoll_put_t){.peer = right, .src = sbuf + off, .src_mem = smem,
                                      .dst_addr = rks[right].addr + off,
                                      .dst_rkey = &rks[right], .bytes = lens[i],
                                      .sig_index = last ? (uint32_t)c->rank : RMACOLL_NO_SIGNAL,
                                      .sig_value = (uint64_t)it + 1};
            off += lens[i];
        }
        CKST(OPS->host->post_puts(c->tp, puts, ORDER_PIECES));
        /* receive from left: at the moment the signal shows, all is there */
        CKST(wait_sig(c, (uint32_t)left, (uint64_t)it + 1, 20000));
        CK(sig_load((uint32_t)left) == (uint64_t)it + 1);
        for (uint64_t o = 0; o < total; o++) {
            if (rbuf[o] != pat(left, (uint64_t)it, o)) {
                fprintf(stderr, "rank %d: iter %d byte %llu of %llu from %d is 0x%02x, "
                        "want 0x%02x\n", c->rank, it, (unsigned long long)o,
                        (unsigned long long)total, left, rbuf[o],
                        pat(left, (uint64_t)it, o));
                _exit(1);
            }
        }
        ack = (rmacoll_put_t){.peer = left, .dst_addr = rks[left].addr,
                              .dst_rkey = &rks[left], .bytes = 0,
                              .sig_index = ACK_BASE + (uint32_t)c->rank,
                              .sig_value = (uint64_t)it + 1};
        CKST(OPS->host->post_puts(c->tp, &ack, 1));
        CKST(wait_sig(c, ACK_BASE + (uint32_t)right, (uint64_t)it + 1, 20000));
        CKST(wait_pending(c, 20000));
        CK(sig_load(ACK_BASE + (uint32_t)right) == (uint64_t)it + 1);
    }
    CKST(OPS->mem->mem_deregister(c->tp, smem));
    CKST(OPS->mem->mem_deregister(c->tp, rmem));
    rank_finish(c);
    free(sbuf);
    free(rbuf);
    return 0;
}

/* ---- scenario: every piece signals the same word, many in flight ----
 *
 * The contract: when the target sees its word reach base + k, the bytes of
 * the first k puts are in place. On ordered providers (FI_ORDER_WAW) the
 * transport issues all 14 at once and relies on the provider's order; with
 * delivery acks (shm, or ofi.delivery_complete) each waits for the one
 * before. While the word rises the receiver checks the first and the last
 * byte of every put it covers (stale bytes differ: the pattern depends on
 * the iteration), then every byte. */

typedef struct order_each_arg {
    const char *prov;
    int iters;
    int delivery_complete;      /* set ofi.delivery_complete */
    int want_mode;              /* 1 ordered, 2 delivery acks */
} order_each_arg_t;

static int sc_order_each(rank_ctx_t *c, const void *argp)
{
    const order_each_arg_t *arg = argp;
    static const uint64_t menu[] = {1, 7, 100, 4096, 65536 + 5, 300000};
    int right = (c->rank + 1) % c->n, left = (c->rank + c->n - 1) % c->n;
    uint8_t *sbuf = malloc(ORDER_REGION), *rbuf = calloc(1, ORDER_REGION);
    rmacoll_mem_t *smem, *rmem;
    rmacoll_rkey_t rk, rks[MAXR];
    rmacoll_put_t puts[ORDER_PIECES], ack;
    uint64_t lens[ORDER_PIECES], offs[ORDER_PIECES];
    uint32_t lcg = 777;
    unsigned partial = 0;       /* checks made with some puts still missing */

    CK(sbuf && rbuf);
    g_delivery_complete = arg->delivery_complete;
    rank_init_or_skip(c, arg->prov, 20000);
    CK(g_write_mode == arg->want_mode);
    CKST(OPS->mem->mem_register(c->tp, sbuf, ORDER_REGION, RMACOLL_MEM_HOST, &smem, NULL));
    CKST(OPS->mem->mem_register(c->tp, rbuf, ORDER_REGION, RMACOLL_MEM_HOST, &rmem, &rk));
    CKST(shm_allgather(c, &rk, rks, sizeof(rk)));

    for (int it = 0; it < arg->iters; it++) {
        uint64_t off = 0, base = (uint64_t)it * ORDER_PIECES, seen = 0;
        uint64_t deadline = now_ms() + 20000;
        for (int i = 0; i < ORDER_PIECES; i++) {
            lcg = lcg * 1103515245u + 12345u;
            lens[i] = menu[(lcg >> 16) % (sizeof(menu) / sizeof(menu[0]))];
        }
        lens[3] = 1 * MiB;                  /* one large put overtaken, if it can be */
        if (it % 2 == 1) {
            lens[ORDER_PIECES - 1] = 0;     /* signal-only tail */
        }
        for (int i = 0; i < ORDER_PIECES; i++) {
            offs[i] = off;
            off += lens[i];
        }
        CK(off <= ORDER_REGION);
        for (uint64_t o = 0; o < off; o++) {
            sbuf[o] = pat(c->rank, (uint64_t)it, o);
        }
        for (int i = 0; i < ORDER_PIECES; i++) {
            puts[i] = (rmacoll_put_t){.peer = right, .src = sbuf + offs[i], .src_mem = smem,
                                      .dst_addr = rks[right].addr + offs[i],
                                      .dst_rkey = &rks[right], .bytes = lens[i],
                                      .sig_index = (uint32_t)c->rank,
                                      .sig_value = base + (uint64_t)i + 1};
        }
        CKST(OPS->host->post_puts(c->tp, puts, ORDER_PIECES));
        while (seen < ORDER_PIECES) {
            uint64_t v;
            CKST(OPS->base->progress(c->tp));
            v = sig_load((uint32_t)left) - base;
            CK(v <= ORDER_PIECES);
            if (v > seen) {
                seen = v;
                partial += seen < ORDER_PIECES;
                for (uint64_t j = 0; j < seen; j++) {
                    uint64_t first = offs[j], last = offs[j] + lens[j] - 1;
                    if (lens[j] == 0) {
                        continue;
                    }
                    if (rbuf[first] != pat(left, (uint64_t)it, first) ||
                        rbuf[last] != pat(left, (uint64_t)it, last)) {
                        fprintf(stderr, "rank %d: iter %d: word at %llu, but put %llu "
                                "(%llu bytes at %llu) has not landed\n", c->rank, it,
                                (unsigned long long)seen, (unsigned long long)j,
                                (unsigned long long)lens[j], (unsigned long long)first);
                        _exit(1);
                    }
                }
            }
            CK(now_ms() < deadline);
        }
        for (uint64_t o = 0; o < off; o++) {
            if (rbuf[o] != pat(left, (uint64_t)it, o)) {
                fprintf(stderr, "rank %d: iter %d byte %llu from %d is 0x%02x, want 0x%02x\n",
                        c->rank, it, (unsigned long long)o, left, rbuf[o],
                        pat(left, (uint64_t)it, o));
                _exit(1);
            }
        }
        ack = (rmacoll_put_t){.peer = left, .dst_addr = rks[left].addr,
                              .dst_rkey = &rks[left], .bytes = 0,
                              .sig_index = ACK_BASE + (uint32_t)c->rank,
                              .sig_value = (uint64_t)it + 1};
        CKST(OPS->host->post_puts(c->tp, &ack, 1));
        CKST(wait_sig(c, ACK_BASE + (uint32_t)right, (uint64_t)it + 1, 20000));
        CKST(wait_pending(c, 20000));
    }
    fprintf(stderr, "rank %d: %s%s: %u checks with puts outstanding\n", c->rank, arg->prov,
            arg->delivery_complete ? " (delivery_complete)" : "", partial);
    CKST(OPS->mem->mem_deregister(c->tp, smem));
    CKST(OPS->mem->mem_deregister(c->tp, rmem));
    rank_finish(c);
    free(sbuf);
    free(rbuf);
    return 0;
}

/* ---- scenario: thousands of puts in one queue (back-pressure) ---- */

#define BP_PUTS 3000

static int sc_backpressure(rank_ctx_t *c, const void *arg)
{
    int right = (c->rank + 1) % c->n, left = (c->rank + c->n - 1) % c->n;
    rmacoll_put_t *puts = calloc(BP_PUTS, sizeof(*puts));
    uint64_t total = 0;
    uint8_t *sbuf, *rbuf;
    rmacoll_mem_t *smem, *rmem;
    rmacoll_rkey_t rk, rks[MAXR];

    for (int i = 0; i < BP_PUTS; i++) {
        total += (uint64_t)(i * 37) % 2048 + 1;
    }
    sbuf = malloc(total);
    rbuf = calloc(1, total);
    CK(puts && sbuf && rbuf);
    for (uint64_t o = 0; o < total; o++) {
        sbuf[o] = pat(c->rank, 5, o);
    }
    rank_init_or_skip(c, arg, 20000);
    CKST(OPS->mem->mem_register(c->tp, sbuf, total, RMACOLL_MEM_HOST, &smem, NULL));
    CKST(OPS->mem->mem_register(c->tp, rbuf, total, RMACOLL_MEM_HOST, &rmem, &rk));
    CKST(shm_allgather(c, &rk, rks, sizeof(rk)));
    for (uint64_t i = 0, off = 0; i < BP_PUTS; i++) {
        uint64_t len = (i * 37) % 2048 + 1;
        puts[i] = (rmacoll_put_t){.peer = right, .src = sbuf + off, .src_mem = smem,
                                  .dst_addr = rks[right].addr + off,
                                  .dst_rkey = &rks[right], .bytes = len,
                                  .sig_index = i == BP_PUTS - 1 ? (uint32_t)c->rank
                                                                : RMACOLL_NO_SIGNAL,
                                  .sig_value = 1};
        off += len;
    }
    CKST(OPS->host->post_puts(c->tp, puts, BP_PUTS));
    CKST(wait_sig(c, (uint32_t)left, 1, 30000));
    for (uint64_t o = 0; o < total; o++) {
        CK(rbuf[o] == pat(left, 5, o));
    }
    CK(sig_load((uint32_t)left) == 1);
    fprintf(stderr, "rank %d: %d puts, %llu bytes, %u back-pressure retries\n", c->rank,
            BP_PUTS, (unsigned long long)total, g_backpressure_logs);
    CKST(OPS->mem->mem_deregister(c->tp, smem));
    CKST(OPS->mem->mem_deregister(c->tp, rmem));
    rank_finish(c);
    free(puts);
    free(sbuf);
    free(rbuf);
    return 0;
}

/* ---- scenario: registration cache and self puts (one rank) ---- */

static int sc_regcache(rank_ctx_t *c, const void *arg)
{
    size_t len = 1 * MiB;
    uint8_t *a = malloc(len), *b = calloc(1, len);
    rmacoll_mem_t *m1, *m2, *m3, *m4, *bad = NULL;
    rmacoll_rkey_t k1, k2, k3, k4;
    rmacoll_put_t put;

    CK(a && b);
    for (size_t o = 0; o < len; o++) {
        a[o] = pat(0, 9, o);
    }
    rank_init_or_skip(c, arg, 5000);
    CKST(OPS->mem->mem_register(c->tp, a, len, RMACOLL_MEM_HOST, &m1, &k1));
    CKST(OPS->mem->mem_register(c->tp, a, len, RMACOLL_MEM_HOST, &m2, &k2));
    CK(m1 == m2);
    CK(k1.len == 8 && k2.len == 8 && memcmp(k1.key, k2.key, 8) == 0);
    CK(k1.addr == k2.addr && k1.bytes == len);
    CKST(OPS->mem->mem_register(c->tp, b + 4096, 8192, RMACOLL_MEM_HOST, &m3, &k3));
    CKST(OPS->mem->mem_register(c->tp, b, len, RMACOLL_MEM_HOST, &m4, &k4));
    CK(m4 != m1 && m3 != m1 && m3 != m4);   /* b + 4096 did not cover b */
    CK(memcmp(k4.key, k1.key, 8) != 0 && memcmp(k4.key, k3.key, 8) != 0);
    /* a sub-range reuses the first registration covering it (m3, base
     * b + 4096); its rkey still maps offset 0 to b + 8192 */
    CKST(OPS->mem->mem_register(c->tp, b + 8192, 100, RMACOLL_MEM_HOST, &m2, &k2));
    CK(m2 == m3);
    CK(k2.bytes == 100 && memcmp(k2.key, k3.key, 8) == 0);
    CK(OPS->mem->mem_register(c->tp, NULL, 10, RMACOLL_MEM_HOST, &bad, &k4) ==
       RMACOLL_ERR_INVALID_ARG);
    CK(OPS->mem->mem_register(c->tp, a, len, RMACOLL_MEM_CUDA, &bad, &k4) ==
       RMACOLL_ERR_UNSUPPORTED);
    /* self puts through both rkeys: a[0..4000) -> b + 4096 + 16 (k3),
     * a[0..100) -> b + 8192 + 0 (k2, signalled last) */
    put = (rmacoll_put_t){.peer = 0, .src = a, .src_mem = m1, .dst_addr = k3.addr + 16,
                          .dst_rkey = &k3, .bytes = 4000, .sig_index = RMACOLL_NO_SIGNAL};
    CKST(OPS->host->post_puts(c->tp, &put, 1));
    put.dst_addr = k2.addr;
    put.dst_rkey = &k2;
    put.src = a + 5000;
    put.bytes = 100;
    put.sig_index = 3;
    put.sig_value = 1;
    CKST(OPS->host->post_puts(c->tp, &put, 1));
    CKST(wait_sig(c, 3, 1, 5000));
    CKST(wait_pending(c, 5000));
    for (size_t o = 0; o < len; o++) {
        uint8_t want = 0;
        if (o >= 4096 + 16 && o < 4096 + 16 + 4000) {
            want = a[o - 4096 - 16];
        }
        if (o >= 8192 && o < 8192 + 100) {
            want = a[5000 + o - 8192];
        }
        CK(b[o] == want);
    }
    CK(sig_load(3) == 1);
    /* out of the rkey's range: rejected, nothing written */
    put.dst_addr = k2.addr + 50;
    put.bytes = 51;
    CK(OPS->host->post_puts(c->tp, &put, 1) == RMACOLL_ERR_INVALID_ARG);
    CKST(OPS->mem->mem_deregister(c->tp, m2));
    CKST(OPS->mem->mem_deregister(c->tp, m1));
    CKST(OPS->mem->mem_deregister(c->tp, m1));
    CK(OPS->mem->mem_deregister(c->tp, m1) == RMACOLL_ERR_INVALID_ARG);
    CKST(OPS->mem->mem_deregister(c->tp, m3));
    CKST(OPS->mem->mem_deregister(c->tp, m4));
    CK(OPS->base->pending(c->tp) == 0);
    CK(OPS->base->error_peer(c->tp) == -1);
    OPS->base->finalize(c->tp);
    free(a);
    free(b);
    return 0;
}

/* ---- scenario: bad provider / interface names ---- */

static int provider_here(const char *prov, const char *iface);

/* rank_init(prov, iface) must fail with want and log a message holding
 * needle; prints it under label. */
static int init_fails(rank_ctx_t *c, const char *prov, const char *iface,
                      rmacoll_status_t want, const char *needle, const char *label)
{
    rmacoll_status_t st;

    g_last_error[0] = '\0';
    st = rank_init(c, prov, iface, 1000);
    CK(st == want);
    CK(strstr(g_last_error, needle) != NULL);
    fprintf(stderr, "%s: %s\n", label, g_last_error);
    return 0;
}

static int sc_bad_names(rank_ctx_t *c, const void *arg)
{
    rmacoll_status_t st;

    g_last_error[0] = '\0';
    st = rank_init(c, "nosuchprov", "", 1000);
    CK(st == RMACOLL_ERR_NO_DEVICE);
    CK(c->tp == NULL);
    CK(strstr(g_last_error, "nosuchprov") != NULL);
    fprintf(stderr, "unknown provider: %s\n", g_last_error);
    CK(init_fails(c, "tcp;ofi_rxm", "nosuchif0", RMACOLL_ERR_NO_DEVICE, "nosuchif0",
                  "unknown interface") == 0);
    /* tcp named where it is a msg provider only (libfabric before 1.18):
     * the error says so and what to name instead */
    if (!provider_here("tcp", "lo") && provider_here("net", "lo")) {
        CK(init_fails(c, "tcp", "", RMACOLL_ERR_NO_DEVICE,
                      "provider 'tcp' offers only connected (msg) endpoints",
                      "tcp as msg only") == 0);
        CK(strstr(g_last_error, "'tcp;ofi_rxm'") != NULL);
    }
    /* FI_TCP_IFACE with a typo: tcp would take every interface; refused */
    setenv("FI_TCP_IFACE", "nosuchif0", 1);
    CK(init_fails(c, "tcp;ofi_rxm", "", RMACOLL_ERR_NO_DEVICE,
                  "'nosuchif0' (named by FI_TCP_IFACE)", "FI_TCP_IFACE typo") == 0);
    g_last_error[0] = '\0';
    g_auto_pick[0] = '\0';
    st = rank_init(c, "auto", "", 1000);
    CK(st == RMACOLL_ERR_NO_DEVICE);
    CK(strncmp(g_auto_pick, "none of net, tcp, tcp;ofi_rxm", 29) == 0); /* none taken */
    fprintf(stderr, "FI_TCP_IFACE typo, auto: %s\n", g_last_error);
    setenv("FI_TCP_IFACE", "lo", 1);
    /* FI_NET_IFACE with a typo: net would run on its default interface, and
     * auto would have gone on to tcp on lo; both refuse it where net exists */
    setenv("FI_NET_IFACE", "nosuchif0", 1);
    if (provider_here("net", "lo")) {
        CK(init_fails(c, "net", "", RMACOLL_ERR_NO_DEVICE,
                      "'nosuchif0' (named by FI_NET_IFACE)", "FI_NET_IFACE typo") == 0);
        CK(init_fails(c, "auto", "", RMACOLL_ERR_NO_DEVICE,
                      "net has no domain on interface 'nosuchif0' (named by FI_NET_IFACE)",
                      "FI_NET_IFACE typo, auto") == 0);
    }
    unsetenv("FI_NET_IFACE");
    /* a piece size that is not one */
    setenv("RMACOLL_OFI_MAX_MSG_SIZE", "4Kb", 1);
    CK(init_fails(c, "tcp;ofi_rxm", "lo", RMACOLL_ERR_INVALID_ARG,
                  "RMACOLL_OFI_MAX_MSG_SIZE=4Kb", "bad piece size") == 0);
    unsetenv("RMACOLL_OFI_MAX_MSG_SIZE");
    return 0;
}

/* ---- scenario: ofi.provider auto ---- */

/* Whether this libfabric's provider prov answers for what init asks, on
 * domain iface. */
static int provider_here(const char *prov, const char *iface)
{
    struct fi_info *h = fi_allocinfo(), *list = NULL;
    int found = 0;

    CK(h != NULL);
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    h->fabric_attr->prov_name = strdup(prov);
    if (fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, h, &list) == 0) {
        for (struct fi_info *i = list; i != NULL; i = i->next) {
            found |= strcmp(i->fabric_attr->prov_name, prov) == 0 &&
                     strcmp(i->domain_attr->name, iface) == 0;
        }
        fi_freeinfo(list);
    }
    fi_freeinfo(h);
    return found;
}

/* auto with FI_TCP_IFACE=lo and no ofi.iface: the native provider where
 * libfabric has it, on lo, and bytes arrive exactly. */
static int sc_auto(rank_ctx_t *c, const void *arg)
{
    const uint64_t len = 100000;
    int right = (c->rank + 1) % c->n, left = (c->rank + c->n - 1) % c->n;
    uint8_t *sbuf = malloc(len), *rbuf = malloc(len + GUARD);
    rmacoll_mem_t *smem, *rmem;
    rmacoll_rkey_t rk, rks[MAXR];
    rmacoll_put_t put;
    const char *want;

    (void)arg;
    CK(sbuf && rbuf);
    setenv("FI_TCP_IFACE", "lo", 1);
    unsetenv("FI_NET_IFACE");
    /* FI_TCP_IFACE names the interface of net (which reads FI_NET_IFACE
     * only) and of tcp (whose domain must match it) */
    want = provider_here("net", "lo") ? "net on lo"
           : provider_here("tcp", "lo") ? "tcp on lo" : "tcp;ofi_rxm on lo";
    for (uint64_t o = 0; o < len; o++) {
        sbuf[o] = pat(c->rank, 3, o);
    }
    memset(rbuf, 0xee, len + GUARD);
    g_auto_pick[0] = '\0';
    CKST(rank_init(c, "auto", "", 20000));
    fprintf(stderr, "rank %d: auto took %s (want %s)\n", c->rank, g_auto_pick, want);
    CK(strcmp(g_auto_pick, want) == 0);
    CKST(OPS->mem->mem_register(c->tp, sbuf, len, RMACOLL_MEM_HOST, &smem, NULL));
    CKST(OPS->mem->mem_register(c->tp, rbuf, len + GUARD, RMACOLL_MEM_HOST, &rmem, &rk));
    CKST(shm_allgather(c, &rk, rks, sizeof(rk)));
    put = (rmacoll_put_t){.peer = right, .src = sbuf, .src_mem = smem,
                          .dst_addr = rks[right].addr, .dst_rkey = &rks[right],
                          .bytes = len, .sig_index = (uint32_t)c->rank, .sig_value = 1};
    CKST(OPS->host->post_puts(c->tp, &put, 1));
    CKST(wait_sig(c, (uint32_t)left, 1, 20000));
    CKST(wait_pending(c, 20000));
    for (uint64_t o = 0; o < len + GUARD; o++) {
        CK(rbuf[o] == (o < len ? pat(left, 3, o) : 0xee));
    }
    CKST(OPS->mem->mem_deregister(c->tp, smem));
    CKST(OPS->mem->mem_deregister(c->tp, rmem));
    rank_finish(c);
    free(sbuf);
    free(rbuf);
    return 0;
}

/* Ranks that opened different providers (what auto could do over two
 * libfabric installs) all fail init, each naming the other. */
static int sc_provider_mismatch(rank_ctx_t *c, const void *arg)
{
    const char *mine = c->rank == 0 ? "net" : "tcp;ofi_rxm";
    char want[96];
    rmacoll_status_t st;

    (void)arg;
    if (!provider_here("net", "lo")) {
        _exit(SKIP_CODE);
    }
    g_last_error[0] = '\0';
    st = rank_init(c, mine, "lo", 5000);
    fprintf(stderr, "rank %d (%s): %s: %s\n", c->rank, mine, rmacoll_status_name(st),
            g_last_error);
    CK(st == RMACOLL_ERR_UNSUPPORTED);
    CK(c->tp == NULL);
    snprintf(want, sizeof(want), "rank %d opened provider '%s'", 1 - c->rank,
             c->rank == 0 ? "tcp;ofi_rxm" : "net");
    CK(strstr(g_last_error, want) != NULL);
    return 0;
}

/* ---- scenario: a peer dies ---- */

static int sc_peer_death(rank_ctx_t *c, const void *arg)
{
    size_t len = 256 * 1024;
    uint8_t *buf = calloc(1, len);
    rmacoll_mem_t *mem;
    rmacoll_rkey_t rk, rks[MAXR];
    rmacoll_put_t puts[8];
    rmacoll_status_t st = RMACOLL_SUCCESS;
    uint64_t t0, deadline;

    CK(buf);
    rank_init_or_skip(c, arg, 1500);
    CKST(OPS->mem->mem_register(c->tp, buf, len, RMACOLL_MEM_HOST, &mem, &rk));
    CKST(shm_allgather(c, &rk, rks, sizeof(rk)));
    if (c->rank == 1) {
        _exit(0);   /* dies without finalize */
    }
    usleep(300 * 1000);
    for (int i = 0; i < 8; i++) {
        puts[i] = (rmacoll_put_t){.peer = 1, .src = buf + i * 32768, .src_mem = mem,
                                  .dst_addr = rks[1].addr + (uint64_t)i * 32768,
                                  .dst_rkey = &rks[1], .bytes = 32768,
                                  .sig_index = i == 7 ? 0 : RMACOLL_NO_SIGNAL,
                                  .sig_value = 1};
    }
    t0 = now_ms();
    deadline = t0 + 10000;
    st = OPS->host->post_puts(c->tp, puts, 8);
    /* the wait loop of the core: an ack that never comes */
    while (st == RMACOLL_SUCCESS && now_ms() < deadline) {
        st = OPS->base->progress(c->tp);
        if (st == RMACOLL_SUCCESS && sig_load(ACK_BASE + 1) >= 1) {
            break;
        }
        if (st == RMACOLL_SUCCESS && now_ms() - t0 > 1500 + 500) {
            st = RMACOLL_ERR_TIMEOUT;   /* the core's own wait timeout */
        }
    }
    fprintf(stderr, "survivor: %s after %llu ms, error_peer %d, pending %zu (%s)\n",
            rmacoll_status_name(st), (unsigned long long)(now_ms() - t0),
            OPS->base->error_peer(c->tp), OPS->base->pending(c->tp), g_last_error);
    CK(st == RMACOLL_ERR_TRANSPORT || st == RMACOLL_ERR_TIMEOUT);
    CK(sig_load(ACK_BASE + 1) == 0);
    if (st == RMACOLL_ERR_TRANSPORT) {
        CK(OPS->base->error_peer(c->tp) == 1);
    }
    OPS->base->finalize(c->tp);   /* must return, with puts possibly in flight */
    free(buf);
    return 0;
}

/* ---- CMocka cases ---- */

static void test_bad_names(void **state)
{
    expect_ranks(1, sc_bad_names, NULL);
}

static void test_regcache_tcp(void **state)
{
    expect_ranks(1, sc_regcache, "tcp;ofi_rxm");
}

static void test_regcache_shm(void **state)
{
    expect_ranks(1, sc_regcache, "shm");
}

static void test_sizes_tcp(void **state)
{
    expect_ranks(3, sc_sizes, "tcp;ofi_rxm");
}

static void test_sizes_shm(void **state)
{
    expect_ranks(3, sc_sizes, "shm");
}

static void test_sizes_sockets(void **state)
{
    expect_ranks(2, sc_sizes, "sockets");
}

static void test_order_tcp(void **state)
{
    static const order_arg_t a = {"tcp;ofi_rxm", 30, NULL};
    expect_ranks(4, sc_order, &a);
}

static void test_order_tcp_split(void **state)
{
    static const order_arg_t a = {"tcp;ofi_rxm", 20, "65536"};
    expect_ranks(2, sc_order, &a);
}

static void test_order_shm(void **state)
{
    static const order_arg_t a = {"shm", 40, NULL};
    expect_ranks(3, sc_order, &a);
}

static void test_order_sockets(void **state)
{
    static const order_arg_t a = {"sockets", 20, NULL};
    expect_ranks(2, sc_order, &a);
}

static void test_order_each_tcp(void **state)
{
    static const order_each_arg_t a = {"tcp;ofi_rxm", 30, 0, 1};
    expect_ranks(3, sc_order_each, &a);
}

static void test_order_each_tcp_delivery(void **state)
{
    static const order_each_arg_t a = {"tcp;ofi_rxm", 20, 1, 2};
    expect_ranks(2, sc_order_each, &a);
}

static void test_order_each_sockets(void **state)
{
    static const order_each_arg_t a = {"sockets", 20, 0, 1};
    expect_ranks(2, sc_order_each, &a);
}

static void test_order_each_net(void **state)
{
    static const order_each_arg_t a = {"net", 30, 0, 1};
    expect_ranks(3, sc_order_each, &a);
}

static void test_sizes_net(void **state)
{
    expect_ranks(3, sc_sizes, "net");
}

static void test_order_each_shm(void **state)
{
    static const order_each_arg_t a = {"shm", 30, 0, 2};
    expect_ranks(3, sc_order_each, &a);
}

static void test_backpressure_tcp(void **state)
{
    expect_ranks(2, sc_backpressure, "tcp;ofi_rxm");
}

static void test_backpressure_shm(void **state)
{
    expect_ranks(2, sc_backpressure, "shm");
}

static void test_auto(void **state)
{
    expect_ranks(2, sc_auto, NULL);
}

static void test_provider_mismatch(void **state)
{
    expect_ranks(2, sc_provider_mismatch, NULL);
}

static void test_peer_death_tcp(void **state)
{
    expect_ranks(2, sc_peer_death, "tcp;ofi_rxm");
}

static void test_peer_death_net(void **state)
{
    expect_ranks(2, sc_peer_death, "net");
}

static void test_backpressure_net(void **state)
{
    expect_ranks(2, sc_backpressure, "net");
}

static void test_peer_death_shm(void **state)
{
    expect_ranks(2, sc_peer_death, "shm");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_regcache_tcp),
        cmocka_unit_test(test_regcache_shm),
        cmocka_unit_test(test_sizes_tcp),
        cmocka_unit_test(test_sizes_shm),
        cmocka_unit_test(test_sizes_sockets),
        cmocka_unit_test(test_order_tcp),
        cmocka_unit_test(test_order_tcp_split),
        cmocka_unit_test(test_order_shm),
        cmocka_unit_test(test_order_sockets),
        cmocka_unit_test(test_order_each_tcp),
        cmocka_unit_test(test_order_each_tcp_delivery),
        cmocka_unit_test(test_order_each_sockets),
        cmocka_unit_test(test_order_each_net),
        cmocka_unit_test(test_sizes_net),
        cmocka_unit_test(test_order_each_shm),
        cmocka_unit_test(test_backpressure_tcp),
        cmocka_unit_test(test_backpressure_shm),
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_provider_mismatch),
        cmocka_unit_test(test_peer_death_tcp),
        cmocka_unit_test(test_peer_death_shm),
        cmocka_unit_test(test_peer_death_net),
        cmocka_unit_test(test_backpressure_net),
    };

    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                -1, 0);
    if (g_sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !RMACOLL_HAVE_OFI */

int main(void)
{
    fprintf(stderr, "ofi transport not built (no libfabric): skipped\n");
    return 77;
}

#endif
