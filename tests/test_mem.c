/*
 * test_mem.c - rmacoll_mem_alloc / rmacoll_mem_free (include/rmacoll.h):
 * argument errors, the properties of the memory (page-aligned, zero-filled,
 * writable, distinct, more allocations than the ce transport's 256 slots),
 * and AlltoAllV calls whose send and / or receive buffers lie in such
 * allocations, on virtual nodes (ce host backend inside a node, libfabric
 * tcp;ofi_rxm on loopback between nodes, relay on).
 *
 * Every receive region sits inside its allocation between guard bytes;
 * blocks are gapped (reverse rank order, tools/common/cases.h) and gaps and
 * guards hold the sentinel; every byte is checked after every call, send
 * buffers included (a call must not change them). The tests assert bytes
 * and API behaviour only, so they hold whether the memory is shared with
 * node peers (the ce transport's direct-copy path) or an ordinary
 * allocation. What only the direct path does (its DEBUG line "... maps ...
 * for direct copies", and that the first allocation is not an ordinary
 * one) is asserted by test_direct_path, which runs only with
 * RMACOLL_TEST_EXPECT_DIRECT=1 (CMake option RMACOLL_TEST_EXPECT_DIRECT,
 * tests/cmake/test_mem.cmake) and is skipped otherwise.
 *
 * Ranks are forked processes (the unique id's root in a child of its own,
 * tests/support/mprun.h), each with a log function that counts the lines
 * these tests look for; the body of test_destroy_live also runs after
 * rmacoll_comm_destroy, which mprun does not offer.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "case_file.h"

#include "mprun.h"
#include "rmacoll.h"

#define SENT RMACOLL_FILL_SENTINEL
#define GUARD_LO 40 /* sentinel bytes before a region (keeps 8-byte alignment) */
#define GUARD_HI 64 /* and after it */
#define NALLOCS 300 /* more than the ce transport's 256 shared slots */
#define NFILL 300   /* allocations V_REALLOC_KINDS holds during its calls */
#define RANK_TIMEOUT_S 90

/* ---- what every rank's log function records ---- */

typedef struct cap {
    pthread_mutex_t lock;
    int nerror, nwarn_unfreed, ndirect, nfallback;
    char errors[4096];      /* ERROR lines, one per line */
    char unfreed[512];      /* the first WARN line of allocations left at destroy */
    char direct[512];       /* the first "maps ... for direct copies" line */
} cap_t;

static cap_t cap = {.lock = PTHREAD_MUTEX_INITIALIZER};
static int cap_rank = -1;

static void cap_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys, const char *msg)
{
    cap_t *c = ctx;

    pthread_mutex_lock(&c->lock);
    if (level == RMACOLL_LOG_ERROR) {
        size_t n = strlen(c->errors);
        c->nerror++;
        if (n + strlen(msg) + 2 < sizeof(c->errors)) {
            snprintf(c->errors + n, sizeof(c->errors) - n, "%s\n", msg);
        }
    }
    if (level == RMACOLL_LOG_WARN && strstr(msg, "not freed") != NULL &&
        c->nwarn_unfreed++ == 0) {
        snprintf(c->unfreed, sizeof(c->unfreed), "%s", msg);
    }
    if (level == RMACOLL_LOG_DEBUG && (subsys & RMACOLL_LOG_SUBSYS_TRANSPORT) &&
        strstr(msg, "maps") != NULL && strstr(msg, "for direct copies") != NULL &&
        c->ndirect++ == 0) {
        snprintf(c->direct, sizeof(c->direct), "%s", msg);
    }
    if (level == RMACOLL_LOG_INFO && strstr(msg, "rmacoll_mem_alloc(") != NULL &&
        strstr(msg, "an ordinary allocation") != NULL) {
        c->nfallback++;
    }
    pthread_mutex_unlock(&c->lock);
    if (level == RMACOLL_LOG_WARN) { /* errors: the failing check prints its own */
        fprintf(stderr, "[rank %d log] WARN %s\n", cap_rank, msg);
    }
}

static void cap_read(cap_t *out)
{
    pthread_mutex_lock(&cap.lock);
    memcpy(out, &cap, sizeof(*out));
    pthread_mutex_unlock(&cap.lock);
}

static void cap_reset(void)
{
    pthread_mutex_lock(&cap.lock);
    cap.nerror = cap.nwarn_unfreed = cap.ndirect = cap.nfallback = 0;
    cap.errors[0] = cap.unfreed[0] = cap.direct[0] = '\0';
    pthread_mutex_unlock(&cap.lock);
}

static int expect_direct(void)
{
    const char *e = getenv("RMACOLL_TEST_EXPECT_DIRECT");

    return e != NULL && strcmp(e, "1") == 0;
}

/* ---- the harness: one forked process per rank ---- */

typedef int (*body_fn_t)(rmacoll_comm_t *comm, int rank, int nranks, const void *arg);

typedef struct run_opts {
    int nranks;
    const int *node_of;               /* [nranks] virtual node of every rank */
    const rmacoll_config_t *cfg;
    body_fn_t body;                   /* with the communicator */
    body_fn_t after_destroy;          /* NULL, or run after rmacoll_comm_destroy */
    const void *arg;
} run_opts_t;

static rmacoll_config_t base_config(int eager)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    cfg.relay_enabled = 1;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "tcp;ofi_rxm");
    /* DEBUG reaches the log function: the direct path's line is DEBUG */
    cfg.log_level = RMACOLL_LOG_DEBUG;
    cfg.log_subsystems = RMACOLL_LOG_SUBSYS_ALL;
    if (eager) {
        /* the "big" cases lie above the 32 KiB node payload limit of a
         * shared send buffer and below the 1 MiB of an ordinary one, the
         * small ones below both */
        assert_int_equal(rmacoll_config_set(&cfg, "eager_max_bytes", "128KiB"),
                         RMACOLL_SUCCESS);
        assert_int_equal(rmacoll_config_set(&cfg, "node_eager_max_bytes", "1MiB"),
                         RMACOLL_SUCCESS);
    } else {
        /* every block is copied into the receiver's buffer by the writer
         * (no node payload the receiver copies out of itself) */
        assert_int_equal(rmacoll_config_set(&cfg, "eager_max_bytes", "0"), RMACOLL_SUCCESS);
        assert_int_equal(rmacoll_config_set(&cfg, "node_eager_max_bytes", "0"),
                         RMACOLL_SUCCESS);
    }
    return cfg;
}

static void run_ranks(const run_opts_t *o)
{
    rmacoll_unique_id_t id;
    pid_t pid[16], root;
    int codes[16], failed = 0;
    time_t deadline;

    assert_true(o->nranks <= 16);
    root = mprun_root(&id, RANK_TIMEOUT_S + 30);
    assert_true(root > 0);
    for (int r = 0; r < o->nranks; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0) {
            rmacoll_comm_params_t p;
            rmacoll_comm_t *comm = NULL;
            rmacoll_status_t st;
            char key[32];
            int rc;
            alarm(RANK_TIMEOUT_S);
            cap_rank = r;
            cap_reset();
            memset(&p, 0, sizeof(p));
            p.struct_size = sizeof(p);
            p.rank = r;
            p.nranks = o->nranks;
            p.unique_id = &id;
            p.config = o->cfg;
            snprintf(key, sizeof(key), "memnode-%d", o->node_of[r]);
            p.node_key = key;
            p.log_fn = cap_log;
            p.log_ctx = &cap;
            st = rmacoll_comm_create(&p, &comm);
            if (st != RMACOLL_SUCCESS) {
                fprintf(stderr, "rank %d: create: %s\n", r, rmacoll_status_name(st));
                _exit(MPRUN_CREATE_FAILED);
            }
            rc = o->body(comm, r, o->nranks, o->arg);
            st = rmacoll_comm_destroy(comm);
            if (st != RMACOLL_SUCCESS && rc == 0) {
                fprintf(stderr, "rank %d: destroy: %s\n", r, rmacoll_status_name(st));
                rc = 201;
            }
            if (rc == 0 && o->after_destroy != NULL) {
                rc = o->after_destroy(NULL, r, o->nranks, o->arg);
            }
            fflush(stderr);
            _exit(rc);
        }
        codes[r] = -1;
    }
    deadline = time(NULL) + RANK_TIMEOUT_S + 5;
    mprun_reap(pid, o->nranks, deadline, codes);
    kill(root, SIGKILL);
    waitpid(root, NULL, 0);
    for (int r = 0; r < o->nranks; r++) {
        if (codes[r] != 0) {
            print_message("rank %d exit %d\n", r, codes[r]);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* ---- small checks ---- */

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);

    return p > 0 ? (size_t)p : 4096;
}

/* Offset of the first byte of buf[0, n) that is not v, or -1. */
static long first_not(const void *buf, size_t n, unsigned char v)
{
    const unsigned char *b = buf;

    for (size_t k = 0; k < n; k++) {
        if (b[k] != v) {
            return (long)k;
        }
    }
    return -1;
}

/* Byte k of the pattern of allocation `id` (never 0, so a zeroed byte shows). */
static unsigned char pat(unsigned id, size_t k)
{
    unsigned char v = (unsigned char)(id * 131u + k * 7u + (k >> 8) * 13u + 1u);

    return v == 0 ? 0x5b : v;
}

static void pat_fill(unsigned char *b, size_t n, unsigned id)
{
    for (size_t k = 0; k < n; k++) {
        b[k] = pat(id, k);
    }
}

static long pat_check(const unsigned char *b, size_t n, unsigned id)
{
    for (size_t k = 0; k < n; k++) {
        if (b[k] != pat(id, k)) {
            return (long)k;
        }
    }
    return -1;
}

#define FAIL(code, ...)                                                                \
    do {                                                                               \
        fprintf(stderr, "rank %d: ", rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fprintf(stderr, "\n");                                                         \
        return (code);                                                                 \
    } while (0)

/* ---- 1. argument errors ---- */

static int args_body(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    char want[64];
    void *p = (void *)&want, *q;
    unsigned char *m;
    cap_t c;
    rmacoll_status_t st;

    (void)nranks;
    (void)arg;
    /* NULL comm: INVALID_ARG, *ptr cleared */
    st = rmacoll_mem_alloc(NULL, 64, &p);
    if (st != RMACOLL_ERR_INVALID_ARG || p != NULL) {
        FAIL(10, "mem_alloc(NULL comm): %s, ptr %p", rmacoll_status_name(st), p);
    }
    if (rmacoll_mem_alloc(NULL, 64, NULL) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_mem_alloc(NULL, 0, NULL) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(11, "mem_alloc(NULL comm, NULL ptr) did not fail with INVALID_ARG");
    }
    /* NULL ptr: INVALID_ARG, logged naming the rank and the argument */
    cap_reset();
    st = rmacoll_mem_alloc(comm, 64, NULL);
    cap_read(&c);
    snprintf(want, sizeof(want), "rank %d", rank);
    if (st != RMACOLL_ERR_INVALID_ARG) {
        FAIL(12, "mem_alloc(ptr NULL): %s", rmacoll_status_name(st));
    }
    if (c.nerror != 1 || strstr(c.errors, want) == NULL || strstr(c.errors, "ptr") == NULL) {
        FAIL(13, "mem_alloc(ptr NULL) logged %d errors: \"%s\"", c.nerror, c.errors);
    }
    /* bytes 0: INVALID_ARG, *ptr cleared */
    cap_reset();
    p = (void *)&want;
    st = rmacoll_mem_alloc(comm, 0, &p);
    cap_read(&c);
    if (st != RMACOLL_ERR_INVALID_ARG || p != NULL) {
        FAIL(14, "mem_alloc(bytes 0): %s, ptr %p", rmacoll_status_name(st), p);
    }
    if (c.nerror != 1 || strstr(c.errors, want) == NULL || strstr(c.errors, "bytes") == NULL) {
        FAIL(15, "mem_alloc(bytes 0) logged %d errors: \"%s\"", c.nerror, c.errors);
    }
#ifndef __SANITIZE_ADDRESS__ /* ASan aborts on an impossible size instead of failing */
    p = (void *)&want;
    st = rmacoll_mem_alloc(comm, SIZE_MAX, &p);
    if (st != RMACOLL_ERR_NO_MEMORY || p != NULL) {
        FAIL(16, "mem_alloc(SIZE_MAX): %s, ptr %p", rmacoll_status_name(st), p);
    }
#endif
    /* free: NULL comm fails, NULL ptr is a no-op */
    if (rmacoll_mem_free(NULL, (void *)&want) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_mem_free(NULL, NULL) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(17, "mem_free(NULL comm) did not fail with INVALID_ARG");
    }
    if (rmacoll_mem_free(comm, NULL) != RMACOLL_SUCCESS) {
        FAIL(18, "mem_free(comm, NULL) did not succeed");
    }
    /* pointers that are not the start of a live allocation: refused, the
     * allocation left alone (ASan would catch a use after a wrong free) */
    st = rmacoll_mem_alloc(comm, 8192, &p);
    if (st != RMACOLL_SUCCESS || p == NULL) {
        FAIL(19, "mem_alloc(8192): %s", rmacoll_status_name(st));
    }
    m = p;
    pat_fill(m, 8192, 1);
    q = malloc(64);
    if (q == NULL) {
        return 3;
    }
    cap_reset();
    if (rmacoll_mem_free(comm, m + 1) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_mem_free(comm, m + 4096) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_mem_free(comm, m + 8192) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_mem_free(comm, q) != RMACOLL_ERR_INVALID_ARG ||
        rmacoll_mem_free(comm, (void *)&want) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(20, "mem_free of a pointer inside an allocation / malloc'd / on the stack "
                 "did not fail with INVALID_ARG");
    }
    cap_read(&c);
    if (c.nerror != 5 || strstr(c.errors, want) == NULL ||
        strstr(c.errors, "rmacoll_mem_free") == NULL) {
        FAIL(21, "5 refused frees logged %d errors: \"%s\"", c.nerror, c.errors);
    }
    free(q); /* still ours: rmacoll did not free it */
    if (pat_check(m, 8192, 1) != -1) {
        FAIL(22, "a refused free changed the allocation");
    }
    pat_fill(m, 8192, 2);
    if (pat_check(m, 8192, 2) != -1) {
        FAIL(23, "the allocation is not writable after refused frees");
    }
    /* double free: refused, the other live allocation left alone */
    st = rmacoll_mem_alloc(comm, 100, &q);
    if (st != RMACOLL_SUCCESS) {
        FAIL(24, "mem_alloc(100): %s", rmacoll_status_name(st));
    }
    pat_fill(q, 100, 3);
    if (rmacoll_mem_free(comm, p) != RMACOLL_SUCCESS) {
        FAIL(25, "mem_free of the allocation after refused frees failed");
    }
    if (rmacoll_mem_free(comm, p) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(26, "double free did not fail with INVALID_ARG");
    }
    if (pat_check(q, 100, 3) != -1 || rmacoll_mem_free(comm, q) != RMACOLL_SUCCESS ||
        rmacoll_mem_free(comm, q) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(27, "the other allocation did not survive a double free, or its own double "
                 "free was not refused");
    }
    return 0;
}

static void test_args(void **state)
{
    static const int node_of[2] = {0, 0};
    rmacoll_config_t cfg = base_config(1);
    run_opts_t o = {2, node_of, &cfg, args_body, NULL, NULL};

    (void)state;
    run_ranks(&o);
}

/* ---- 2. allocation properties ---- */

/* Allocates `bytes`, checks alignment, zero fill and writability of every
 * byte, returns the pointer (NULL after printing why). */
static unsigned char *alloc_checked(rmacoll_comm_t *comm, int rank, size_t bytes, unsigned id)
{
    void *p = NULL;
    rmacoll_status_t st = rmacoll_mem_alloc(comm, bytes, &p);
    long off;

    if (st != RMACOLL_SUCCESS || p == NULL) {
        fprintf(stderr, "rank %d: mem_alloc(%zu): %s\n", rank, bytes, rmacoll_status_name(st));
        return NULL;
    }
    if ((uintptr_t)p % page_size() != 0) {
        fprintf(stderr, "rank %d: mem_alloc(%zu) = %p is not page-aligned\n", rank, bytes, p);
        return NULL;
    }
    if ((off = first_not(p, bytes, 0)) >= 0) {
        fprintf(stderr, "rank %d: mem_alloc(%zu): byte %ld is not zero\n", rank, bytes, off);
        return NULL;
    }
    pat_fill(p, bytes, id);
    if ((off = pat_check(p, bytes, id)) >= 0) {
        fprintf(stderr, "rank %d: mem_alloc(%zu): byte %ld does not keep what was written\n",
                rank, bytes, off);
        return NULL;
    }
    return p;
}

static size_t many_size(unsigned k)
{
    return 1 + (size_t)(k * 2654435761u) % 20000; /* 1 .. 20000 bytes */
}

typedef struct thr_arg {
    rmacoll_comm_t *comm;
    int rank, id, bad;
} thr_arg_t;

/* One of several threads allocating, filling, checking and freeing at once. */
static void *thr_main(void *p)
{
    thr_arg_t *t = p;
    unsigned char *held[4] = {0};
    size_t sz[4] = {0};

    for (unsigned it = 0; it < 64 && !t->bad; it++) {
        unsigned slot = it % 4, id = (unsigned)t->id * 1000u + it;
        if (held[slot] != NULL) {
            if (pat_check(held[slot], sz[slot], id - 4) != -1 ||
                rmacoll_mem_free(t->comm, held[slot]) != RMACOLL_SUCCESS) {
                t->bad = 1;
            }
        }
        sz[slot] = many_size(id);
        held[slot] = alloc_checked(t->comm, t->rank, sz[slot], id);
        if (held[slot] == NULL) {
            t->bad = 2;
        }
    }
    for (unsigned slot = 0; slot < 4; slot++) {
        if (held[slot] != NULL && rmacoll_mem_free(t->comm, held[slot]) != RMACOLL_SUCCESS) {
            t->bad = 3;
        }
    }
    return NULL;
}

typedef struct span {
    unsigned char *p;
    size_t n;
    unsigned id;
} span_t;

static int span_cmp(const void *a, const void *b)
{
    const span_t *x = a, *y = b;

    return x->p < y->p ? -1 : x->p > y->p;
}

static int props_body(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    static const size_t sizes[] = {1, 4095, 4096, 4097, (1u << 20) + 3};
    span_t *s = calloc(NALLOCS, sizeof(*s)), *sorted = calloc(NALLOCS, sizeof(*s));
    unsigned order[NALLOCS];
    uint64_t rs = 12345 + (uint64_t)rank;
    pthread_t th[4];
    thr_arg_t ta[4];
    cap_t c;
    int nfirst = -1;

    (void)nranks;
    (void)arg;
    if (s == NULL || sorted == NULL) {
        return 3;
    }
    /* the sizes at and around page boundaries; the first allocation of
     * the communicator comes first (test_direct_path: not an ordinary one) */
    cap_reset();
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        unsigned char *p = alloc_checked(comm, rank, sizes[k], (unsigned)k);
        if (p == NULL) {
            return 30;
        }
        if (k == 0) {
            cap_read(&c);
            nfirst = c.nfallback;
        }
        if (rmacoll_mem_free(comm, p) != RMACOLL_SUCCESS) {
            FAIL(31, "mem_free of %zu bytes failed", sizes[k]);
        }
    }
    /* memory given back and taken again is zero-filled again */
    for (int k = 0; k < 4; k++) {
        unsigned char *p = alloc_checked(comm, rank, 3 * 4096 + 5, 7);
        if (p == NULL) {
            FAIL(32, "re-allocation %d of a freed size is not fresh memory", k);
        }
        memset(p, 0xff, 3 * 4096 + 5);
        if (rmacoll_mem_free(comm, p) != RMACOLL_SUCCESS) {
            return 33;
        }
    }
    /* many at once: distinct, non-overlapping, each keeping its own bytes
     * while the others are written (two mappings of one memory would not) */
    cap_reset();
    for (unsigned k = 0; k < NALLOCS; k++) {
        s[k].n = many_size(k);
        s[k].id = k + 100;
        s[k].p = alloc_checked(comm, rank, s[k].n, s[k].id);
        if (s[k].p == NULL) {
            FAIL(34, "allocation %u of %d failed", k, NALLOCS);
        }
    }
    cap_read(&c);
    memcpy(sorted, s, NALLOCS * sizeof(*s));
    qsort(sorted, NALLOCS, sizeof(*s), span_cmp);
    for (unsigned k = 0; k + 1 < NALLOCS; k++) {
        if (sorted[k].p + sorted[k].n > sorted[k + 1].p) {
            FAIL(35, "allocations %p (%zu bytes) and %p overlap", (void *)sorted[k].p,
                 sorted[k].n, (void *)sorted[k + 1].p);
        }
    }
    for (unsigned k = 0; k < NALLOCS; k++) {
        long off = pat_check(s[k].p, s[k].n, s[k].id);
        if (off >= 0) {
            FAIL(36, "allocation %u lost byte %ld after the others were written", k, off);
        }
        order[k] = k;
    }
    for (unsigned k = NALLOCS - 1; k > 0; k--) { /* scrambled order of frees */
        unsigned j = (unsigned)(rmacoll_case_rand(&rs) % (k + 1)), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    for (unsigned k = 0; k < NALLOCS; k++) {
        span_t *a = &s[order[k]];
        if (rmacoll_mem_free(comm, a->p) != RMACOLL_SUCCESS) {
            FAIL(37, "mem_free of allocation %u failed", order[k]);
        }
        a->p = NULL;
        if (k % 60 == 59) { /* the ones left are untouched by the frees */
            for (unsigned j = 0; j < NALLOCS; j++) {
                if (s[j].p != NULL && pat_check(s[j].p, s[j].n, s[j].id) >= 0) {
                    FAIL(38, "allocation %u changed when others were freed", j);
                }
            }
        }
    }
    if (expect_direct()) {
        /* the direct path: the first allocation is shared memory; of 300
         * at once, those beyond the transport's 256 slots fall back */
        if (nfirst != 0) {
            FAIL(39, "direct path expected: the first allocation was an ordinary one");
        }
        if (c.nfallback < NALLOCS - 256 || c.nfallback >= NALLOCS) {
            FAIL(40, "direct path expected: %d of %d allocations were ordinary ones "
                     "(expected %d..%d)", c.nfallback, NALLOCS, NALLOCS - 256, NALLOCS - 1);
        }
    }
    /* four threads at once */
    for (int k = 0; k < 4; k++) {
        ta[k] = (thr_arg_t){comm, rank, k + 1, 0};
        if (pthread_create(&th[k], NULL, thr_main, &ta[k]) != 0) {
            return 3;
        }
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        if (ta[k].bad) {
            FAIL(41, "thread %d: allocations from concurrent threads failed (%d)", k,
                 ta[k].bad);
        }
    }
    free(s);
    free(sorted);
    return 0;
}

static void test_properties(void **state)
{
    static const int node_of[2] = {0, 0};
    rmacoll_config_t cfg = base_config(1);
    run_opts_t o = {2, node_of, &cfg, props_body, NULL, NULL};

    (void)state;
    run_ranks(&o);
}

/* ---- 3. / 4. calls on buffers of rmacoll_mem_alloc ---- */

typedef enum variant {
    V_NONE,          /* malloc'd send and receive buffers (the reference) */
    V_RECV,          /* receive buffer allocated, send malloc'd */
    V_SEND,          /* send allocated, receive malloc'd */
    V_BOTH,          /* both allocated */
    V_RECV_AT_START, /* receive region at the allocation's first byte */
    V_MIXED,         /* even ranks allocate both, odd ranks malloc both */
    V_REALLOC,       /* receive buffer freed and allocated again before every call */
    V_REALLOC_KINDS, /* the same with NFILL allocations held: it alternates
                      * between a freed slot's shared memory (direct path) and
                      * an ordinary allocation, perhaps at the same address */
    V_NVARIANTS
} variant_t;

static const char *const variant_names[] = {"malloc", "recv", "send", "both",
                                            "recv-at-start", "mixed", "realloc",
                                            "realloc-kinds"};

static int recv_allocated(variant_t v, int rank)
{
    return v == V_RECV || v == V_BOTH || v == V_RECV_AT_START || v == V_REALLOC ||
           v == V_REALLOC_KINDS ||
           (v == V_MIXED && rank % 2 == 0);
}

static int send_allocated(variant_t v, int rank)
{
    return v == V_SEND || v == V_BOTH || (v == V_MIXED && rank % 2 == 0);
}

/* Calls cycle over cases[0..ncases) on the same buffers (sized for the
 * largest), each expecting MISMATCH when its case has one. */
typedef struct group {
    const rmacoll_case_t *cases[4];
    int ncases;
} group_t;

typedef struct scen {
    const group_t *groups;
    int ngroups;
    const variant_t *variants;
    int nvariants;
    int ncalls;        /* per group and variant, back to back */
    int eager;         /* 0: the config turns both eager paths off */
    const int *node_of;
} scen_t;

/* One buffer: region of `bytes` at `lo` bytes into an allocation of
 * lo + bytes + GUARD_HI from rmacoll_mem_alloc or malloc. */
typedef struct buf {
    unsigned char *base, *region;
    size_t lo, bytes, total;
    int allocated;
} buf_t;

static int buf_get(rmacoll_comm_t *comm, buf_t *b, size_t lo, size_t bytes, int allocated)
{
    void *p = NULL;

    b->lo = lo;
    b->bytes = bytes;
    b->total = lo + bytes + GUARD_HI;
    b->allocated = allocated;
    if (allocated) {
        if (rmacoll_mem_alloc(comm, b->total, &p) != RMACOLL_SUCCESS) {
            return -1;
        }
        if (first_not(p, b->total, 0) >= 0) {
            return -2; /* not zero-filled */
        }
    } else if ((p = malloc(b->total)) == NULL) {
        return -1;
    }
    b->base = p;
    b->region = b->base + lo;
    memset(b->base, SENT, b->total);
    return 0;
}

static int buf_put(rmacoll_comm_t *comm, buf_t *b)
{
    int rc = 0;

    if (b->allocated) {
        rc = rmacoll_mem_free(comm, b->base) == RMACOLL_SUCCESS ? 0 : -1;
    } else {
        free(b->base);
    }
    b->base = b->region = NULL;
    return rc;
}

typedef struct shape {
    int64_t sc[16], sd[16], rc[16], rd[16];
    size_t es, sbytes, rbytes;
} shape_t;

static void shape_of(const rmacoll_case_t *c, int rank, shape_t *s)
{
    int n = c->nranks;

    s->es = rmacoll_datatype_size(c->dtype);
    for (int j = 0; j < n; j++) {
        s->sc[j] = c->send[(size_t)rank * n + j];
        s->rc[j] = c->recv[(size_t)j * n + rank];
    }
    s->sbytes = (size_t)rmacoll_displs_gapped(n, s->sc, 2, s->sd) * s->es;
    s->rbytes = (size_t)rmacoll_displs_gapped(n, s->rc, 3, s->rd) * s->es;
}

#define MEM_NODE_EAGER (1u << 20) /* node_eager_max_bytes of base_config(1) */
#define MEM_NODE_EAGER_SHARED 32768u /* the limit for a shared send buffer */

/* Bytes of this rank's node payload for a valid call of shape s on eager
 * runs: its blocks for its node peers when they come to (0, limit] (docs/
 * protocol.md, node eager path), else 0. */
static uint64_t node_payload_bytes(const scen_t *a, const shape_t *s, int rank, int nranks,
                                   uint64_t limit)
{
    uint64_t sum = 0;

    for (int p = 0; p < nranks; p++) {
        if (p != rank && a->node_of[p] == a->node_of[rank]) {
            sum += (uint64_t)s->sc[p] * s->es;
        }
    }
    return sum <= limit ? sum : 0;
}

static int calls_body(rmacoll_comm_t *comm, int rank, int nranks, const void *argp)
{
    const scen_t *a = argp;
    uint64_t iter = 0;
    int need_direct = 0, any_recv_allocated = 0, nrealloc = 0, nsame = 0;
    unsigned char *want = NULL, *fill[NFILL + 16];
    size_t want_cap = 0;
    int fhead = 0, ftail = 0; /* fill[fhead, ftail) are live, oldest first */

    for (int g = 0; g < a->ngroups; g++) {
        const group_t *grp = &a->groups[g];
        for (int vi = 0; vi < a->nvariants; vi++) {
            variant_t v = a->variants[vi];
            size_t smax = 0, rmax = 0;
            buf_t sb, rb;
            for (int k = 0; k < grp->ncases; k++) {
                shape_t s;
                shape_of(grp->cases[k], rank, &s);
                smax = s.sbytes > smax ? s.sbytes : smax;
                rmax = s.rbytes > rmax ? s.rbytes : rmax;
            }
            if (smax + GUARD_LO + GUARD_HI > want_cap) {
                free(want);
                want_cap = smax + GUARD_LO + GUARD_HI;
                if ((want = malloc(want_cap)) == NULL) {
                    return 3;
                }
            }
            if (v == V_REALLOC_KINDS) {
                /* every slot taken (the oldest allocations hold them); the
                 * oldest freed: the receive buffer may take its slot */
                for (fhead = ftail = 0; ftail < NFILL; ftail++) {
                    if (rmacoll_mem_alloc(comm, page_size(), (void **)&fill[ftail]) !=
                        RMACOLL_SUCCESS) {
                        FAIL(3, "filler allocation %d failed", ftail);
                    }
                    memset(fill[ftail], 0x3c, page_size());
                }
                if (rmacoll_mem_free(comm, fill[fhead++]) != RMACOLL_SUCCESS) {
                    return 8;
                }
            }
            if (buf_get(comm, &sb, GUARD_LO, smax, send_allocated(v, rank)) != 0 ||
                buf_get(comm, &rb, v == V_RECV_AT_START ? 0 : GUARD_LO, rmax,
                        recv_allocated(v, rank)) != 0) {
                FAIL(3, "no buffers of %zu / %zu bytes (%s)", smax, rmax, variant_names[v]);
            }
            for (int call = 0; call < a->ncalls; call++, iter++) {
                const rmacoll_case_t *c = grp->cases[call % grp->ncases];
                rmacoll_status_t expect =
                    c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS;
                rmacoll_check_report_t rep;
                rmacoll_comm_stats_t s0, s1;
                rmacoll_status_t st;
                shape_t s;
                long off;

                shape_of(c, rank, &s);
                if (v == V_REALLOC && call > 0) {
                    /* the same size on odd calls (it may land at the same
                     * address: a node peer's mapping of the old one is
                     * stale), three pages more on even ones */
                    unsigned char *old = rb.base;
                    size_t grow = call % 2 == 0 ? 3 * page_size() : 0;
                    if (buf_put(comm, &rb) != 0 ||
                        buf_get(comm, &rb, GUARD_LO, rmax + grow, 1) != 0) {
                        FAIL(4, "re-allocation before call %d failed (or not zeroed)", call);
                    }
                    nrealloc++;
                    nsame += rb.base == old;
                }
                if (v == V_REALLOC_KINDS && call > 0) {
                    /* odd calls: a new filler takes the freed receive
                     * buffer's slot first, the new receive buffer has none;
                     * even calls: the oldest filler gives its slot back */
                    unsigned char *old = rb.base;
                    int rc = buf_put(comm, &rb);
                    if (call % 2 == 1 && ftail < NFILL + 16) {
                        rc |= rmacoll_mem_alloc(comm, page_size(), (void **)&fill[ftail]);
                        memset(fill[ftail++], 0x3c, page_size());
                    } else if (call % 2 == 0 && fhead < ftail) {
                        rc |= rmacoll_mem_free(comm, fill[fhead++]);
                    }
                    if (rc != 0 || buf_get(comm, &rb, GUARD_LO, rmax, 1) != 0) {
                        FAIL(4, "re-allocation before call %d failed (or not zeroed)", call);
                    }
                    nrealloc++;
                    nsame += rb.base == old;
                }
                memset(sb.base, SENT, sb.total);
                rmacoll_fill_send(sb.region, s.sbytes, s.es, rank, nranks, s.sc, s.sd, iter);
                memcpy(want, sb.base, sb.total);
                memset(rb.base, SENT, rb.total);
                s0.struct_size = sizeof(s0);
                s1.struct_size = sizeof(s1);
                if (rmacoll_comm_get_stats(comm, &s0) != RMACOLL_SUCCESS) {
                    FAIL(44, "rmacoll_comm_get_stats failed");
                }
                st = rmacoll_alltoallv(sb.region, s.sc, s.sd, rb.region, s.rc, s.rd, c->dtype,
                                       comm, NULL);
                if (st == RMACOLL_SUCCESS && a->eager) {
                    /* a shared send buffer keeps its node peers' blocks off
                     * the payload above 32 KiB (a direct copy is one
                     * memcpy), an ordinary one up to 1 MiB: exactly the
                     * rule's bytes go there */
                    uint64_t want_sent = node_payload_bytes(
                        a, &s, rank, nranks,
                        send_allocated(v, rank) && expect_direct() ? MEM_NODE_EAGER_SHARED
                                                                   : MEM_NODE_EAGER);
                    if (rmacoll_comm_get_stats(comm, &s1) != RMACOLL_SUCCESS) {
                        FAIL(44, "rmacoll_comm_get_stats failed");
                    }
                    if (s1.node_eager_bytes_sent - s0.node_eager_bytes_sent != want_sent) {
                        FAIL(45, "%s, %s, call %d: %llu bytes into the node payload, "
                                 "expected %llu", c->name, variant_names[v], call,
                             (unsigned long long)(s1.node_eager_bytes_sent -
                                                  s0.node_eager_bytes_sent),
                             (unsigned long long)want_sent);
                    }
                }
                if (st != expect) {
                    FAIL(2, "%s, %s, call %d: %s, expected %s: %s", c->name, variant_names[v],
                         call, rmacoll_status_name(st), rmacoll_status_name(expect),
                         rmacoll_comm_last_error(comm));
                }
                if (memcmp(want, sb.base, sb.total) != 0) {
                    FAIL(5, "%s, %s, call %d: the call changed the send buffer", c->name,
                         variant_names[v], call);
                }
                if ((off = first_not(rb.base, rb.lo, SENT)) >= 0 ||
                    (off = first_not(rb.region + s.rbytes, rb.total - rb.lo - s.rbytes,
                                     SENT)) >= 0) {
                    FAIL(6, "%s, %s, call %d: guard byte %ld (%s the region) written",
                         c->name, variant_names[v], call, off,
                         first_not(rb.base, rb.lo, SENT) >= 0 ? "before" : "after");
                }
                if (st != RMACOLL_SUCCESS) {
                    if ((off = first_not(rb.region, s.rbytes, SENT)) >= 0) {
                        FAIL(7, "%s, %s, call %d: the failed call wrote byte %ld", c->name,
                             variant_names[v], call, off);
                    }
                    continue;
                }
                if (rmacoll_check_recv(rb.region, s.rbytes, s.es, rank, nranks, s.rc, s.rd,
                                       iter, &rep) != 0) {
                    FAIL(1, "%s, %s, call %d: %s", c->name, variant_names[v], call, rep.msg);
                }
                for (int p = 0; p < nranks; p++) {
                    any_recv_allocated |= recv_allocated(v, p);
                    if (!a->eager && p != rank && a->node_of[p] == a->node_of[rank] &&
                        s.sc[p] > 0 && recv_allocated(v, p)) {
                        need_direct = 1; /* this rank copied into p's allocation */
                    }
                }
            }
            if (buf_put(comm, &sb) != 0 || buf_put(comm, &rb) != 0) {
                FAIL(8, "mem_free of the call's buffers failed (%s)", variant_names[v]);
            }
            for (; fhead < ftail; fhead++) { /* the fillers kept their bytes */
                if (first_not(fill[fhead], page_size(), 0x3c) >= 0 ||
                    rmacoll_mem_free(comm, fill[fhead]) != RMACOLL_SUCCESS) {
                    FAIL(9, "filler %d changed during the calls, or its free failed", fhead);
                }
            }
            fhead = ftail = 0;
        }
    }
    free(want);
    if (rank == 0 && nrealloc > 0) {
        fprintf(stderr, "rank 0: %d of %d re-allocated receive buffers at the old address\n",
                nsame, nrealloc);
    }
    if (expect_direct()) {
        cap_t c;
        cap_read(&c);
        if (need_direct && c.ndirect == 0) {
            FAIL(42, "direct path expected: this rank copied into a node peer's "
                     "rmacoll_mem_alloc buffer without logging that it maps it");
        }
        if (!any_recv_allocated && c.ndirect != 0) {
            FAIL(43, "no receive buffer came from rmacoll_mem_alloc, yet: %s", c.direct);
        }
        if (rank == 0 && c.ndirect > 0) {
            fprintf(stderr, "rank 0: %s\n", c.direct);
        }
    }
    return 0;
}

static const variant_t all_variants[] = {V_NONE,          V_RECV,  V_SEND,    V_BOTH,
                                         V_RECV_AT_START, V_MIXED, V_REALLOC, V_REALLOC_KINDS};
#define NALL ((int)(sizeof(all_variants) / sizeof(all_variants[0])))

static rmacoll_case_t *random_case(int nnodes, const int *sizes, const char *dist, int64_t base,
                                   uint64_t seed, rmacoll_datatype_t dt)
{
    rmacoll_case_dist_t d;
    rmacoll_case_t *c = NULL;

    assert_int_equal(rmacoll_case_dist_parse(dist, &d), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_case_random(nnodes, sizes, &d, base, seed, dt, &c),
                     RMACOLL_SUCCESS);
    return c;
}

static void run_calls(int nranks, const int *node_of, const group_t *groups, int ngroups,
                      const variant_t *variants, int nvariants, int ncalls, int eager)
{
    rmacoll_config_t cfg = base_config(eager);
    scen_t sc = {groups, ngroups, variants, nvariants, ncalls, eager, node_of};
    run_opts_t o = {nranks, node_of, &cfg, calls_body, NULL, &sc};

    for (int g = 0; g < ngroups; g++) {
        for (int k = 0; k < groups[g].ncases; k++) {
            assert_int_equal(groups[g].cases[k]->nranks, nranks);
        }
    }
    print_message("%d ranks, %d groups x %d variants x %d calls, eager %s\n", nranks, ngroups,
                  nvariants, ncalls, eager ? "on" : "off");
    run_ranks(&o);
}

/* One node of 4: counts of the 4-rank case files (their topology aside)
 * and random ones, large (blocks above the node eager limit), sparse
 * (zero counts) and int8 (odd byte lengths); eager paths on and off. */
static void test_one_node(void **state)
{
    static const int node_of[4] = {0, 0, 0, 0}, one[1] = {4};
    rmacoll_case_t *sym = load("symmetric_small_2x2.txt"), *zero = load("all_zero.txt");
    rmacoll_case_t *big = random_case(1, one, "random", 12000, 1, RMACOLL_FLOAT32);
    rmacoll_case_t *sparse = random_case(1, one, "sparse:0.4", 3000, 2, RMACOLL_INT8);
    group_t groups[] = {{{sym}, 1}, {{zero}, 1}, {{big}, 1}, {{sparse, big}, 2}};

    (void)state;
    run_calls(4, node_of, groups, 4, all_variants, NALL, 3, 0);
    run_calls(4, node_of, groups, 4, all_variants, NALL, 2, 1);
    rmacoll_case_free(sym);
    rmacoll_case_free(zero);
    rmacoll_case_free(big);
    rmacoll_case_free(sparse);
}

/* Two virtual nodes of 2, relay on: cross-node blocks reach a receiver
 * through its rail peer's relay, which copies them into its node peer's
 * buffer. */
static void test_two_nodes_2_2(void **state)
{
    static const int sizes[2] = {2, 2};
    rmacoll_case_t *sym = load("symmetric_small_2x2.txt"), *zero = load("all_zero.txt");
    rmacoll_case_t *big = random_case(2, sizes, "random", 12000, 3, RMACOLL_FLOAT32);
    rmacoll_case_t *sparse = random_case(2, sizes, "sparse:0.4", 2000, 4, RMACOLL_INT8);
    group_t groups[] = {{{sym}, 1}, {{zero}, 1}, {{big}, 1}, {{sparse, big}, 2}};

    (void)state;
    run_calls(4, sym->node_of, groups, 4, all_variants, NALL, 3, 0);
    run_calls(4, sym->node_of, groups, 4, all_variants, NALL, 2, 1);
    rmacoll_case_free(sym);
    rmacoll_case_free(zero);
    rmacoll_case_free(big);
    rmacoll_case_free(sparse);
}

/* Uneven nodes 3 + 2, relay on. */
static void test_two_nodes_3_2(void **state)
{
    static const int sizes[2] = {3, 2};
    rmacoll_case_t *un = load("uneven_nodes_3_2.txt");
    rmacoll_case_t *big = random_case(2, sizes, "zipf:1.2", 10000, 5, RMACOLL_FLOAT64);
    rmacoll_case_t *sparse = random_case(2, sizes, "sparse:0.3", 500, 6, RMACOLL_INT8);
    group_t groups[] = {{{un}, 1}, {{big, sparse}, 2}};

    (void)state;
    run_calls(5, un->node_of, groups, 2, all_variants, NALL, 3, 0);
    run_calls(5, un->node_of, groups, 2, all_variants, NALL, 2, 1);
    rmacoll_case_free(un);
    rmacoll_case_free(big);
    rmacoll_case_free(sparse);
}

/* More case files: a lone rank on its node (1 + 4: four relays forward into
 * node 1's buffers) and a receiver of nothing (3 + 3, one column zero). */
static void test_more_cases(void **state)
{
    static const variant_t vs[] = {V_RECV, V_BOTH, V_MIXED, V_REALLOC_KINDS};
    rmacoll_case_t *lone = load("single_rank_node_1_4.txt");
    rmacoll_case_t *col = load("one_column_zero.txt");
    group_t g1[] = {{{lone}, 1}}, g2[] = {{{col}, 1}};

    (void)state;
    run_calls(5, lone->node_of, g1, 1, vs, 4, 3, 0);
    run_calls(6, col->node_of, g2, 1, vs, 4, 2, 0);
    rmacoll_case_free(lone);
    rmacoll_case_free(col);
}

/* ---- 4. a count mismatch with allocated buffers ---- */

/* Every rank fails with RMACOLL_ERR_MISMATCH, as with malloc'd buffers,
 * and no byte of any receive allocation changes (calls_body checks the
 * whole allocation, guards included); the good call after it succeeds on
 * the same buffers. One node, 2 x 2 (the case file), 3 + 2. */
static void test_mismatch(void **state)
{
    static const variant_t vs[] = {V_NONE, V_RECV, V_BOTH, V_MIXED};
    static const int one_node[4] = {0, 0, 0, 0}, one[1] = {4}, sizes32[2] = {3, 2};
    rmacoll_case_t *mm = load("mismatch_2x2.txt");
    rmacoll_case_t *good1 = random_case(1, one, "random", 9000, 7, RMACOLL_FLOAT32);
    rmacoll_case_t *bad1 = random_case(1, one, "random", 9000, 7, RMACOLL_FLOAT32);
    rmacoll_case_t *good2 = random_case(2, sizes32, "random", 9000, 8, RMACOLL_INT32);
    rmacoll_case_t *bad2 = random_case(2, sizes32, "random", 9000, 8, RMACOLL_INT32);
    rmacoll_case_t *good3;

    (void)state;
    assert_true(mm->has_mismatch);
    bad1->recv[1 * 4 + 2] += 1; /* rank 2 expects one more from rank 1 */
    rmacoll_case_update_mismatch(bad1);
    bad2->recv[4 * 5 + 0] -= 1; /* rank 0 expects one less from rank 4 */
    rmacoll_case_update_mismatch(bad2);
    assert_true(bad1->has_mismatch && bad2->has_mismatch);
    /* the file's counts, agreed: the good call after the bad one */
    good3 = load("mismatch_2x2.txt");
    memcpy(good3->recv, good3->send, 16 * sizeof(int64_t));
    rmacoll_case_update_mismatch(good3);
    assert_false(good3->has_mismatch);
    {
        group_t g1[] = {{{bad1, good1}, 2}}, g2[] = {{{mm, good3}, 2}},
                g3[] = {{{bad2, good2}, 2}};
        run_calls(4, one_node, g1, 1, vs, 4, 4, 0);
        run_calls(4, mm->node_of, g2, 1, vs, 4, 4, 0);
        run_calls(5, good2->node_of, g3, 1, vs, 4, 2, 1);
    }
    rmacoll_case_free(mm);
    rmacoll_case_free(good1);
    rmacoll_case_free(bad1);
    rmacoll_case_free(good2);
    rmacoll_case_free(bad2);
    rmacoll_case_free(good3);
}

/* ---- 5. destroy with live allocations ---- */

#define LIVE_A 4096
#define LIVE_B 100

static unsigned char *live_a, *live_b; /* reachable: no leak report */
static int64_t live_rc[4], live_rd[4];

/* A call into a live allocation, checked; then both left live for destroy. */
static int live_body(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    int64_t sc[4], sd[4];
    unsigned char sbuf[4 * 200];
    rmacoll_check_report_t rep;
    void *a = NULL, *b = NULL;
    rmacoll_status_t st;

    (void)arg;
    if (rmacoll_mem_alloc(comm, LIVE_A, &a) != RMACOLL_SUCCESS ||
        rmacoll_mem_alloc(comm, LIVE_B, &b) != RMACOLL_SUCCESS) {
        FAIL(50, "mem_alloc failed");
    }
    live_a = a;
    live_b = b;
    for (int j = 0; j < nranks; j++) {
        sc[j] = 150 + 10 * j + rank; /* a different count per pair */
        live_rc[j] = 150 + 10 * rank + j;
    }
    rmacoll_displs_gapped(nranks, sc, 1, sd);
    rmacoll_displs_gapped(nranks, live_rc, 3, live_rd);
    rmacoll_fill_send(sbuf, sizeof(sbuf), 1, rank, nranks, sc, sd, 77);
    memset(live_a, SENT, LIVE_A);
    st = rmacoll_alltoallv(sbuf, sc, sd, live_a + GUARD_LO, live_rc, live_rd, RMACOLL_UINT8,
                           comm, NULL);
    if (st != RMACOLL_SUCCESS) {
        FAIL(51, "call: %s: %s", rmacoll_status_name(st), rmacoll_comm_last_error(comm));
    }
    if (first_not(live_a, GUARD_LO, SENT) >= 0 ||
        rmacoll_check_recv(live_a + GUARD_LO, LIVE_A - GUARD_LO, 1, rank, nranks, live_rc,
                           live_rd, 77, &rep) != 0) {
        FAIL(52, "before destroy: %s", rep.msg);
    }
    pat_fill(live_b, LIVE_B, 9);
    cap_reset();
    return 0;
}

/* After destroy: one WARN naming the rank, the two allocations and their
 * bytes; both still hold their bytes and take new ones. */
static int live_after(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    rmacoll_check_report_t rep;
    char want[64];
    cap_t c;

    (void)comm;
    (void)arg;
    cap_read(&c);
    snprintf(want, sizeof(want), "rank %d", rank);
    if (c.nwarn_unfreed != 1 || strstr(c.unfreed, want) == NULL ||
        strstr(c.unfreed, "2 allocation") == NULL || strstr(c.unfreed, "4196") == NULL) {
        FAIL(53, "destroy logged %d WARN lines about live allocations: \"%s\" (expected one "
                 "naming %s, 2 allocations, 4196 bytes)", c.nwarn_unfreed, c.unfreed, want);
    }
    if (first_not(live_a, GUARD_LO, SENT) >= 0 ||
        rmacoll_check_recv(live_a + GUARD_LO, LIVE_A - GUARD_LO, 1, rank, nranks, live_rc,
                           live_rd, 77, &rep) != 0) {
        FAIL(54, "after destroy the received bytes changed: %s", rep.msg);
    }
    if (pat_check(live_b, LIVE_B, 9) != -1) {
        FAIL(55, "after destroy the second allocation changed");
    }
    pat_fill(live_a, LIVE_A, 10);
    pat_fill(live_b, LIVE_B, 11);
    if (pat_check(live_a, LIVE_A, 10) != -1 || pat_check(live_b, LIVE_B, 11) != -1) {
        FAIL(56, "after destroy the allocations do not keep what is written");
    }
    return 0;
}

static void test_destroy_live(void **state)
{
    static const int node_of[3] = {0, 0, 1};
    rmacoll_config_t cfg = base_config(0);
    run_opts_t o = {3, node_of, &cfg, live_body, live_after, NULL};

    (void)state;
    run_ranks(&o);
}

/* ---- what only the direct path shows ---- */

/* With RMACOLL_TEST_EXPECT_DIRECT=1: every rank that copied into a node
 * peer's allocation logged (DEBUG, transport) that it maps it "for direct
 * copies"; no rank logs it when no receive buffer is an allocation; the
 * first allocation is not an ordinary one, and of 300 at once only those
 * beyond the 256 slots are (props_body). Skipped otherwise. */
static void test_direct_path(void **state)
{
    static const variant_t with[] = {V_RECV, V_REALLOC, V_MIXED}, without[] = {V_NONE, V_SEND};
    static const int node_of[4] = {0, 0, 0, 0}, one[1] = {4}, sizes[2] = {2, 2};
    rmacoll_case_t *big1, *big2;

    (void)state;
    if (!expect_direct()) {
        print_message("RMACOLL_TEST_EXPECT_DIRECT is not 1: the direct path is not asserted\n");
        skip();
    }
    big1 = random_case(1, one, "random", 12000, 11, RMACOLL_FLOAT32);
    big2 = random_case(2, sizes, "random", 12000, 12, RMACOLL_FLOAT32);
    {
        group_t g1[] = {{{big1}, 1}}, g2[] = {{{big2}, 1}};
        run_calls(4, node_of, g1, 1, with, 3, 3, 0);
        run_calls(4, big2->node_of, g2, 1, with, 3, 3, 0);
        run_calls(4, node_of, g1, 1, without, 2, 2, 0);
        test_properties(state);
    }
    rmacoll_case_free(big1);
    rmacoll_case_free(big2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_properties),
        cmocka_unit_test(test_one_node),
        cmocka_unit_test(test_two_nodes_2_2),
        cmocka_unit_test(test_two_nodes_3_2),
        cmocka_unit_test(test_more_cases),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_destroy_live),
        cmocka_unit_test(test_direct_path),
    };

    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);
    if (getenv("RMACOLL_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("RMACOLL_TEST_FILTER")); /* one test, by name */
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
