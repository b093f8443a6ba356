/*
 * test_memreg.c - rmacoll_mem_register / rmacoll_mem_deregister
 * (include/rmacoll.h): host memory the caller allocated, registered once
 * with the network transport (libfabric tcp;ofi_rxm on loopback between
 * virtual nodes, the ce host backend inside a node, relay on, eager paths
 * off so that every block crosses as a put).
 *
 * Every call's blocks are gapped (tools/common/cases.h) and sit at a
 * different offset inside a larger region each call, the rest of which
 * holds the sentinel; every byte of the region is checked after every call,
 * and the send region must come back unchanged. The counters of
 * rmacoll_comm_get_stats say which buffers borrowed a user registration
 * (memreg_buffers) and which were registered for the call
 * (call_registrations): the same calls without registration, after
 * deregistration, and with a buffer only half inside a registration must
 * register per call, so the checks fail if the lookup does nothing or too
 * much. A receive buffer at an offset inside a registration is written
 * through the registration's rkey advanced by that offset: a wrong
 * advance puts the blocks in the wrong place and the byte checks fail.
 *
 * test_lru: with registrations held, more calls on fresh buffers than the
 * ofi registration cache holds (OFI_MR_CACHE_MAX, 256) force it to evict
 * (its DEBUG line is counted: the test asserts it happened), and calls on
 * the registered regions afterwards are still exact and still register
 * nothing: an evicted (closed) registration would make the peers' writes
 * fail.
 *
 * test_threads: non-blocking calls (rmacoll_alltoallv_start) borrow as
 * blocking ones do, and calls stay exact, and keep borrowing, while another
 * thread of the rank registers and deregisters other memory 300 times
 * (rmacoll_mem_register is thread-safe beside calls).
 *
 * Ranks are forked processes (tests/support/mprun.h's root), each with a
 * log function that records ERROR lines, the WARN of registrations left at
 * destroy and ofi's eviction lines.
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
#define ES 8                    /* element size: RMACOLL_UINT64 */
#define REGION (256u * 1024u)   /* bytes of each registered region */
#define RANK_TIMEOUT_S 150

/* ---- what every rank's log function records ---- */

typedef struct cap {
    pthread_mutex_t lock;
    int nerror, nwarn_left, nevict;
    char errors[4096];
    char left[512];
} cap_t;

static cap_t cap = {.lock = PTHREAD_MUTEX_INITIALIZER};
static int cap_rank = -1;

static void cap_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys, const char *msg)
{
    cap_t *c = ctx;

    (void)subsys;
    pthread_mutex_lock(&c->lock);
    if (level == RMACOLL_LOG_ERROR) {
        size_t n = strlen(c->errors);
        c->nerror++;
        if (n + strlen(msg) + 2 < sizeof(c->errors)) {
            snprintf(c->errors + n, sizeof(c->errors) - n, "%s\n", msg);
        }
    }
    if (level == RMACOLL_LOG_WARN && strstr(msg, "not deregistered") != NULL &&
        c->nwarn_left++ == 0) {
        snprintf(c->left, sizeof(c->left), "%s", msg);
    }
    if (level == RMACOLL_LOG_DEBUG && strstr(msg, "registration cache full") != NULL &&
        strstr(msg, "evicting") != NULL) {
        c->nevict++;
    }
    pthread_mutex_unlock(&c->lock);
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
    cap.nerror = cap.nwarn_left = cap.nevict = 0;
    cap.errors[0] = cap.left[0] = '\0';
    pthread_mutex_unlock(&cap.lock);
}

#define FAIL(code, ...)                                                                \
    do {                                                                               \
        fprintf(stderr, "rank %d: ", rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fprintf(stderr, "\n");                                                         \
        return (code);                                                                 \
    } while (0)

/* ---- the harness: one forked process per rank ---- */

typedef int (*body_fn_t)(rmacoll_comm_t *comm, int rank, int nranks, const void *arg);

typedef struct run_opts {
    int nranks;
    const int *node_of;
    const rmacoll_config_t *cfg;
    body_fn_t body;
    body_fn_t after_destroy;          /* NULL, or run after rmacoll_comm_destroy */
} run_opts_t;

static rmacoll_config_t base_config(void)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    cfg.relay_enabled = 1;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "tcp;ofi_rxm");
    cfg.log_level = RMACOLL_LOG_DEBUG; /* ofi's eviction line is DEBUG */
    cfg.log_subsystems = RMACOLL_LOG_SUBSYS_ALL;
    /* every block a put into the receiver's buffer (no payload in records) */
    assert_int_equal(rmacoll_config_set(&cfg, "eager_max_bytes", "0"), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_config_set(&cfg, "node_eager_max_bytes", "0"), RMACOLL_SUCCESS);
    return cfg;
}

static const rmacoll_config_t *run_cfg;

static void run_ranks(const run_opts_t *o)
{
    rmacoll_unique_id_t id;
    pid_t pid[16], root;
    int codes[16], failed = 0;
    time_t deadline;

    assert_true(o->nranks <= 16);
    root = mprun_root(&id, RANK_TIMEOUT_S + 30);
    assert_true(root > 0);
    run_cfg = o->cfg;
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
            snprintf(key, sizeof(key), "regnode-%d", o->node_of[r]);
            p.node_key = key;
            p.log_fn = cap_log;
            p.log_ctx = &cap;
            st = rmacoll_comm_create(&p, &comm);
            if (st != RMACOLL_SUCCESS) {
                fprintf(stderr, "rank %d: create: %s\n", r, rmacoll_status_name(st));
                _exit(MPRUN_CREATE_FAILED);
            }
            rc = o->body(comm, r, o->nranks, NULL);
            st = rmacoll_comm_destroy(comm);
            if (st != RMACOLL_SUCCESS && rc == 0) {
                fprintf(stderr, "rank %d: destroy: %s\n", r, rmacoll_status_name(st));
                rc = 201;
            }
            if (rc == 0 && o->after_destroy != NULL) {
                rc = o->after_destroy(NULL, r, o->nranks, NULL);
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

/* ---- one checked call ---- */

static int64_t count_of(int src, int dst, uint64_t iter)
{
    return 64 + (int64_t)((src * 7 + dst * 13 + (int)iter * 5) % 50) * 16;
}

static rmacoll_comm_stats_t stats_of(rmacoll_comm_t *comm)
{
    rmacoll_comm_stats_t s;

    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    if (rmacoll_comm_get_stats(comm, &s) != RMACOLL_SUCCESS) {
        memset(&s, 0xff, sizeof(s));
    }
    return s;
}

static long first_not(const unsigned char *b, size_t n, unsigned char v)
{
    for (size_t k = 0; k < n; k++) {
        if (b[k] != v) {
            return (long)k;
        }
    }
    return -1;
}

static int use_start; /* one_call through rmacoll_alltoallv_start / rmacoll_wait */

/* One AlltoAllV call iter with the send blocks at sreg + soff and the
 * receive blocks at rreg + roff (regions of rbytes / sbytes); checks every
 * byte of both regions. 0 or an exit code. */
static int one_call(rmacoll_comm_t *comm, int rank, int n, unsigned char *sreg, size_t sbytes,
                    size_t soff, unsigned char *rreg, size_t rbytes, size_t roff, uint64_t iter)
{
    int64_t sc[16], sd[16], rc[16], rd[16], sext, rext;
    unsigned char *copy;
    rmacoll_check_report_t rep;
    rmacoll_status_t st;
    long bad;

    for (int j = 0; j < n; j++) {
        sc[j] = count_of(rank, j, iter);
        rc[j] = count_of(j, rank, iter);
    }
    sext = rmacoll_displs_gapped(n, sc, 5, sd);
    rext = rmacoll_displs_gapped(n, rc, 3, rd);
    if (soff + (size_t)sext * ES > sbytes || roff + (size_t)rext * ES > rbytes) {
        FAIL(90, "call %llu does not fit its regions", (unsigned long long)iter);
    }
    memset(sreg, SENT, sbytes);
    rmacoll_fill_send(sreg + soff, (size_t)sext * ES, ES, rank, n, sc, sd, iter);
    memset(rreg, SENT, rbytes);
    copy = malloc(sbytes);
    if (copy == NULL) {
        return 91;
    }
    memcpy(copy, sreg, sbytes);
    if (use_start) { /* non-blocking: the same runner's prepare and release */
        rmacoll_request_t *req = NULL;

        st = rmacoll_alltoallv_start(sreg + soff, sc, sd, rreg + roff, rc, rd, RMACOLL_UINT64,
                                     comm, &req);
        if (st == RMACOLL_SUCCESS) {
            st = rmacoll_wait(req);
        }
    } else {
        st = rmacoll_alltoallv(sreg + soff, sc, sd, rreg + roff, rc, rd, RMACOLL_UINT64, comm,
                               NULL);
    }
    if (st != RMACOLL_SUCCESS) {
        free(copy);
        FAIL(92, "call %llu: %s: %s", (unsigned long long)iter, rmacoll_status_name(st),
             rmacoll_comm_last_error(comm));
    }
    bad = memcmp(copy, sreg, sbytes) != 0;
    free(copy);
    if (bad) {
        FAIL(93, "call %llu changed its send region", (unsigned long long)iter);
    }
    if (rmacoll_check_recv(rreg + roff, (size_t)rext * ES, ES, rank, n, rc, rd, iter, &rep) !=
        0) {
        FAIL(94, "call %llu (receive offset %zu): %s", (unsigned long long)iter, roff,
             rep.msg);
    }
    bad = first_not(rreg, roff, SENT);
    if (bad < 0) {
        size_t end = roff + (size_t)rext * ES;

        bad = first_not(rreg + end, rbytes - end, SENT);
        bad = bad < 0 ? -1 : (long)end + bad;
    }
    if (bad >= 0) {
        FAIL(95, "call %llu wrote byte %ld of its receive region, outside the receive "
                 "buffer at offset %zu", (unsigned long long)iter, bad, roff);
    }
    return 0;
}

/* Checks the counters moved by exactly (buffers, regs) since *before. */
#define EXPECT_DELTA(code, comm, before, buffers, regs, what)                          \
    do {                                                                               \
        rmacoll_comm_stats_t now_ = stats_of(comm);                                    \
        if (now_.memreg_buffers - (before).memreg_buffers != (uint64_t)(buffers) ||    \
            now_.call_registrations - (before).call_registrations != (uint64_t)(regs)) \
            FAIL(code, "%s: memreg_buffers +%llu (want %d), call_registrations +%llu " \
                       "(want %d)", what,                                              \
                 (unsigned long long)(now_.memreg_buffers - (before).memreg_buffers),  \
                 (int)(buffers),                                                       \
                 (unsigned long long)(now_.call_registrations -                        \
                                      (before).call_registrations),                    \
                 (int)(regs));                                                         \
    } while (0)

static unsigned char *region(void)
{
    void *p = NULL;

    return posix_memalign(&p, 4096, REGION) == 0 ? p : NULL;
}

/* ---- argument errors, another communicator, one node ---- */

static int errors_body(rmacoll_comm_t *comm, int rank)
{
    char want[32], buf[64];
    rmacoll_memreg_t *h = (rmacoll_memreg_t *)(void *)buf, *h2;
    rmacoll_status_t st;
    cap_t c;

    snprintf(want, sizeof(want), "rank %d", rank);
    if (rmacoll_mem_register(NULL, buf, sizeof(buf), &h) != RMACOLL_ERR_INVALID_ARG ||
        h != NULL) {
        FAIL(10, "mem_register(NULL comm) did not fail with INVALID_ARG and a NULL handle");
    }
    if (rmacoll_mem_deregister(NULL, NULL) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(11, "mem_deregister(NULL comm) did not fail with INVALID_ARG");
    }
    {
        static const struct {
            int null_ptr, null_handle;
            size_t bytes;
            const char *arg;
        } bad[] = {
            {1, 0, 64, "ptr"},
            {0, 1, 64, "handle"},
            {0, 0, 0, "bytes"},
            {0, 0, SIZE_MAX, "wraps"},
        };
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
            h = (rmacoll_memreg_t *)(void *)buf;
            cap_reset();
            st = rmacoll_mem_register(comm, bad[k].null_ptr ? NULL : buf, bad[k].bytes,
                                      bad[k].null_handle ? NULL : &h);
            cap_read(&c);
            if (st != RMACOLL_ERR_INVALID_ARG || (!bad[k].null_handle && h != NULL)) {
                FAIL(12, "mem_register with a bad %s: %s", bad[k].arg,
                     rmacoll_status_name(st));
            }
            if (c.nerror != 1 || strstr(c.errors, want) == NULL ||
                strstr(c.errors, "rmacoll_mem_register") == NULL ||
                strstr(c.errors, bad[k].arg) == NULL) {
                FAIL(13, "mem_register with a bad %s logged %d errors: \"%s\"", bad[k].arg,
                     c.nerror, c.errors);
            }
        }
    }
    cap_reset();
    if (rmacoll_mem_deregister(comm, NULL) != RMACOLL_ERR_INVALID_ARG) {
        FAIL(14, "mem_deregister(NULL handle) did not fail with INVALID_ARG");
    }
    cap_read(&c);
    if (c.nerror != 1 || strstr(c.errors, want) == NULL || strstr(c.errors, "handle") == NULL) {
        FAIL(15, "mem_deregister(NULL handle) logged %d errors: \"%s\"", c.nerror, c.errors);
    }
    /* double deregister: refused and logged, the other handle untouched */
    if (rmacoll_mem_register(comm, buf, sizeof(buf), &h) != RMACOLL_SUCCESS ||
        rmacoll_mem_register(comm, buf, sizeof(buf), &h2) != RMACOLL_SUCCESS || h == h2) {
        FAIL(16, "two registrations of one range did not give two handles");
    }
    if (stats_of(comm).memreg_handles != 2 || stats_of(comm).memreg_bytes != 2 * sizeof(buf)) {
        FAIL(17, "stats after two registrations: %llu handles, %llu bytes",
             (unsigned long long)stats_of(comm).memreg_handles,
             (unsigned long long)stats_of(comm).memreg_bytes);
    }
    if (rmacoll_mem_deregister(comm, h) != RMACOLL_SUCCESS) {
        FAIL(18, "mem_deregister failed");
    }
    cap_reset();
    st = rmacoll_mem_deregister(comm, h);
    cap_read(&c);
    if (st != RMACOLL_ERR_INVALID_ARG || c.nerror != 1 || strstr(c.errors, want) == NULL ||
        strstr(c.errors, "handle") == NULL || strstr(c.errors, "not a live registration") ==
                                                  NULL) {
        FAIL(19, "double deregister: %s, logged %d errors: \"%s\"", rmacoll_status_name(st),
             c.nerror, c.errors);
    }
    if (stats_of(comm).memreg_handles != 1 || rmacoll_mem_deregister(comm, h2) !=
                                                  RMACOLL_SUCCESS ||
        stats_of(comm).memreg_handles != 0 || stats_of(comm).memreg_bytes != 0) {
        FAIL(20, "the second handle did not survive the first's double deregister");
    }
    return 0;
}

/* A one-rank communicator of this process: a handle of it is refused by
 * comm; it accepts registrations (no network transport: tracked only)
 * and its calls register nothing. */
static int other_comm_body(rmacoll_comm_t *comm, int rank)
{
    rmacoll_unique_id_t id;
    rmacoll_comm_params_t p;
    rmacoll_comm_t *one = NULL;
    rmacoll_memreg_t *h = NULL;
    rmacoll_comm_stats_t s0, s1;
    unsigned char *sr = region(), *rr = region();
    rmacoll_status_t st;
    int rc = 0;
    cap_t c;

    if (sr == NULL || rr == NULL) {
        return 30;
    }
    if (rmacoll_get_unique_id(&id) != RMACOLL_SUCCESS) {
        FAIL(31, "no unique id for a one-rank communicator");
    }
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.rank = 0;
    p.nranks = 1;
    p.unique_id = &id;
    p.config = run_cfg;
    p.log_fn = cap_log;
    p.log_ctx = &cap;
    if (rmacoll_comm_create(&p, &one) != RMACOLL_SUCCESS) {
        FAIL(32, "one-rank communicator: create failed");
    }
    if (rmacoll_mem_register(one, rr, REGION, &h) != RMACOLL_SUCCESS || h == NULL) {
        FAIL(33, "mem_register on a one-rank communicator failed");
    }
    cap_reset();
    st = rmacoll_mem_deregister(comm, h); /* another communicator's handle */
    cap_read(&c);
    if (st != RMACOLL_ERR_INVALID_ARG || c.nerror != 1 || strstr(c.errors, "handle") == NULL) {
        FAIL(34, "deregistering another communicator's handle: %s, logged \"%s\"",
             rmacoll_status_name(st), c.errors);
    }
    s0 = stats_of(one);
    if (s0.memreg_handles != 1 || s0.memreg_bytes != REGION) {
        FAIL(35, "one-rank communicator: %llu handles, %llu bytes",
             (unsigned long long)s0.memreg_handles, (unsigned long long)s0.memreg_bytes);
    }
    for (uint64_t it = 1; it <= 2 && rc == 0; it++) {
        rc = one_call(one, 0, 1, sr, REGION, 8 * it, rr, REGION, 24 * it, 40 + it);
    }
    if (rc != 0) {
        FAIL(rc, "(the one-rank communicator's call)");
    }
    s1 = stats_of(one);
    if (s1.memreg_buffers != 0 || s1.call_registrations != 0) {
        FAIL(36, "one-rank communicator registered for its calls: memreg_buffers %llu, "
                 "call_registrations %llu", (unsigned long long)s1.memreg_buffers,
             (unsigned long long)s1.call_registrations);
    }
    if (rmacoll_mem_deregister(one, h) != RMACOLL_SUCCESS ||
        rmacoll_comm_destroy(one) != RMACOLL_SUCCESS) {
        FAIL(37, "one-rank communicator: deregister / destroy failed");
    }
    free(sr);
    free(rr);
    return 0;
}

/* ---- two nodes x two ranks: the calls ---- */

static int calls_body(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    unsigned char *sr = region(), *rr = region();
    rmacoll_memreg_t *hs = NULL, *hr = NULL, *hhalf = NULL;
    rmacoll_comm_stats_t before;
    uint64_t iter = 0;
    int rc;

    (void)arg;
    if (sr == NULL || rr == NULL) {
        return 3;
    }
    if ((rc = errors_body(comm, rank)) != 0 || (rc = other_comm_body(comm, rank)) != 0) {
        return rc;
    }
    if (stats_of(comm).struct_size != sizeof(rmacoll_comm_stats_t)) {
        FAIL(40, "get_stats wrote %zu bytes of %zu", stats_of(comm).struct_size,
             sizeof(rmacoll_comm_stats_t));
    }
    /* without registration: both buffers of every call registered for it */
    before = stats_of(comm);
    for (int k = 0; k < 3; k++) {
        if ((rc = one_call(comm, rank, nranks, sr, REGION, 64, rr, REGION, 128, ++iter)) != 0) {
            return rc;
        }
    }
    EXPECT_DELTA(41, comm, before, 0, 6, "3 calls without registration");
    /* registered: every buffer borrows, at any offset inside the regions */
    if (rmacoll_mem_register(comm, sr, REGION, &hs) != RMACOLL_SUCCESS ||
        rmacoll_mem_register(comm, rr, REGION, &hr) != RMACOLL_SUCCESS) {
        FAIL(42, "mem_register of the regions failed");
    }
    if (stats_of(comm).memreg_handles != 2 || stats_of(comm).memreg_bytes != 2 * REGION) {
        FAIL(43, "stats after registering: %llu handles, %llu bytes",
             (unsigned long long)stats_of(comm).memreg_handles,
             (unsigned long long)stats_of(comm).memreg_bytes);
    }
    before = stats_of(comm);
    for (int k = 0; k < 4; k++) {
        size_t soff = (size_t)k * 4104, roff = (size_t)(3 - k) * 12296 + 8 * (size_t)rank;

        if ((rc = one_call(comm, rank, nranks, sr, REGION, soff, rr, REGION, roff, ++iter)) !=
            0) {
            return rc;
        }
    }
    EXPECT_DELTA(44, comm, before, 8, 0, "4 calls on registered regions");
    /* the receive region registered only in its first half: a buffer
     * across the middle is registered per call, one inside borrows */
    if (rmacoll_mem_deregister(comm, hr) != RMACOLL_SUCCESS ||
        rmacoll_mem_register(comm, rr, REGION / 2, &hhalf) != RMACOLL_SUCCESS) {
        FAIL(45, "re-registering half the receive region failed");
    }
    before = stats_of(comm);
    if ((rc = one_call(comm, rank, nranks, sr, REGION, 0, rr, REGION, REGION / 2 - 4096,
                       ++iter)) != 0) {
        return rc;
    }
    EXPECT_DELTA(46, comm, before, 1, 1, "a receive buffer across the registration's end");
    before = stats_of(comm);
    if ((rc = one_call(comm, rank, nranks, sr, REGION, 0, rr, REGION, 256, ++iter)) != 0) {
        return rc;
    }
    EXPECT_DELTA(47, comm, before, 2, 0, "a receive buffer inside the registered half");
    /* deregistered: per call again, still exact */
    if (rmacoll_mem_deregister(comm, hs) != RMACOLL_SUCCESS ||
        rmacoll_mem_deregister(comm, hhalf) != RMACOLL_SUCCESS) {
        FAIL(48, "mem_deregister failed");
    }
    if (stats_of(comm).memreg_handles != 0 || stats_of(comm).memreg_bytes != 0) {
        FAIL(49, "stats after deregistering: %llu handles, %llu bytes",
             (unsigned long long)stats_of(comm).memreg_handles,
             (unsigned long long)stats_of(comm).memreg_bytes);
    }
    before = stats_of(comm);
    for (int k = 0; k < 2; k++) {
        if ((rc = one_call(comm, rank, nranks, sr, REGION, 8, rr, REGION, 16, ++iter)) != 0) {
            return rc;
        }
    }
    EXPECT_DELTA(50, comm, before, 0, 4, "2 calls after deregistering");
    /* one left registered: destroy releases it and says so */
    if (rmacoll_mem_register(comm, rr, REGION, &hr) != RMACOLL_SUCCESS) {
        FAIL(51, "mem_register failed");
    }
    cap_reset();
    return 0;
}

static int calls_after(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    char want[32];
    cap_t c;

    (void)comm;
    (void)nranks;
    (void)arg;
    cap_read(&c);
    snprintf(want, sizeof(want), "rank %d", rank);
    if (c.nwarn_left != 1 || strstr(c.left, want) == NULL ||
        strstr(c.left, "1 registration(s)") == NULL ||
        strstr(c.left, "rmacoll_mem_register") == NULL) {
        FAIL(60, "destroy with one registration left logged %d WARN lines: \"%s\"",
             c.nwarn_left, c.left);
    }
    if (c.nerror != 0) {
        FAIL(61, "destroy logged errors: %s", c.errors);
    }
    return 0;
}

static void test_two_nodes(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    run_opts_t o = {4, node_of, &cfg, calls_body, calls_after};

    (void)state;
    run_ranks(&o);
}

/* ---- the ofi cache's eviction leaves user registrations alone ---- */

#define NCHURN 140 /* calls on fresh buffers: 280 registrations > 256 */

static int lru_body(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    unsigned char *sr = region(), *rr = region();
    unsigned char *fresh[2 * NCHURN];
    rmacoll_memreg_t *hs = NULL, *hr = NULL;
    rmacoll_comm_stats_t before;
    uint64_t iter = 100;
    int rc = 0;
    cap_t c;

    (void)arg;
    if (sr == NULL || rr == NULL) {
        return 3;
    }
    if (rmacoll_mem_register(comm, sr, REGION, &hs) != RMACOLL_SUCCESS ||
        rmacoll_mem_register(comm, rr, REGION, &hr) != RMACOLL_SUCCESS) {
        FAIL(70, "mem_register of the regions failed");
    }
    if ((rc = one_call(comm, rank, nranks, sr, REGION, 0, rr, REGION, 8, ++iter)) != 0) {
        return rc;
    }
    cap_reset();
    /* every call on buffers at new addresses (all kept: no reuse) */
    before = stats_of(comm);
    for (int k = 0; k < NCHURN && rc == 0; k++) {
        void *a = NULL, *b = NULL;

        if (posix_memalign(&a, 64, 40960) != 0 || posix_memalign(&b, 64, 40960) != 0) {
            return 4;
        }
        fresh[2 * k] = a;
        fresh[2 * k + 1] = b;
        rc = one_call(comm, rank, nranks, a, 40960, 0, b, 40960, 0, ++iter);
    }
    if (rc != 0) {
        return rc;
    }
    EXPECT_DELTA(71, comm, before, 0, 2 * NCHURN, "calls on fresh buffers");
    cap_read(&c);
    if (c.nevict == 0) {
        FAIL(72, "%d calls on fresh buffers made ofi evict nothing: the test did not "
                 "exercise the cache's eviction", NCHURN);
    }
    /* the registered regions: exact, nothing registered for them */
    before = stats_of(comm);
    for (int k = 0; k < 3 && rc == 0; k++) {
        rc = one_call(comm, rank, nranks, sr, REGION, 4096 * (size_t)k, rr, REGION,
                      8192 * (size_t)k + 16, ++iter);
    }
    if (rc != 0) {
        FAIL(rc, "(a call on the registered regions after %d evictions)", c.nevict);
    }
    EXPECT_DELTA(73, comm, before, 6, 0, "calls on the registered regions after eviction");
    if (rmacoll_mem_deregister(comm, hs) != RMACOLL_SUCCESS ||
        rmacoll_mem_deregister(comm, hr) != RMACOLL_SUCCESS) {
        FAIL(74, "mem_deregister failed");
    }
    for (int k = 0; k < 2 * NCHURN; k++) {
        free(fresh[k]);
    }
    free(sr);
    free(rr);
    return 0;
}

static void test_lru(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    run_opts_t o = {4, node_of, &cfg, lru_body, NULL};

    (void)state;
    run_ranks(&o);
}

/* ---- registrations from another thread while calls run; non-blocking ---- */

#define NTHREAD_REGS 300

typedef struct churn {
    rmacoll_comm_t *comm;
    unsigned char *bufs[4];
    int failed;          /* the first failing register / deregister: its index + 1 */
    int done;            /* registrations made */
} churn_t;

static void *churn_main(void *p)
{
    churn_t *c = p;

    for (int k = 0; k < NTHREAD_REGS && !c->failed; k++) {
        rmacoll_memreg_t *h = NULL;
        unsigned char *b = c->bufs[k % 4];

        if (rmacoll_mem_register(c->comm, b + (k % 7) * 64, 4096 + (size_t)k, &h) !=
                RMACOLL_SUCCESS ||
            rmacoll_mem_deregister(c->comm, h) != RMACOLL_SUCCESS) {
            c->failed = k + 1;
        }
        c->done++;
    }
    return NULL;
}

static int threads_body(rmacoll_comm_t *comm, int rank, int nranks, const void *arg)
{
    unsigned char *sr = region(), *rr = region();
    rmacoll_memreg_t *hs = NULL, *hr = NULL;
    rmacoll_comm_stats_t before;
    churn_t c;
    pthread_t th;
    uint64_t iter = 500;
    int rc = 0, ncalls = 0;

    (void)arg;
    memset(&c, 0, sizeof(c));
    c.comm = comm;
    for (int k = 0; k < 4; k++) {
        c.bufs[k] = region();
        if (c.bufs[k] == NULL) {
            return 3;
        }
    }
    if (sr == NULL || rr == NULL) {
        return 3;
    }
    if (rmacoll_mem_register(comm, sr, REGION, &hs) != RMACOLL_SUCCESS ||
        rmacoll_mem_register(comm, rr, REGION, &hr) != RMACOLL_SUCCESS) {
        FAIL(80, "mem_register of the regions failed");
    }
    /* non-blocking calls borrow too (prepare and release on the call's path) */
    before = stats_of(comm);
    use_start = 1;
    for (int k = 0; k < 2 && rc == 0; k++) {
        rc = one_call(comm, rank, nranks, sr, REGION, 64 * (size_t)k, rr, REGION,
                      4096 + 8 * (size_t)k, ++iter);
    }
    use_start = 0;
    if (rc != 0) {
        return rc;
    }
    EXPECT_DELTA(81, comm, before, 4, 0, "2 non-blocking calls on registered regions");
    /* another thread registers and deregisters other memory all along */
    before = stats_of(comm);
    if (pthread_create(&th, NULL, churn_main, &c) != 0) {
        return 4;
    }
    for (int k = 0; k < 20 && rc == 0; k++, ncalls++) {
        rc = one_call(comm, rank, nranks, sr, REGION, 8 * (size_t)(k % 5), rr, REGION,
                      16 * (size_t)(k % 9), ++iter);
    }
    pthread_join(th, NULL);
    if (rc != 0) {
        FAIL(rc, "(a call while another thread registered %d regions)", c.done);
    }
    if (c.failed) {
        FAIL(82, "the other thread's registration %d failed", c.failed - 1);
    }
    EXPECT_DELTA(83, comm, before, 2 * ncalls, 0, "calls beside the registering thread");
    if (stats_of(comm).memreg_handles != 2 || stats_of(comm).memreg_bytes != 2 * REGION) {
        FAIL(84, "after the other thread: %llu handles, %llu bytes",
             (unsigned long long)stats_of(comm).memreg_handles,
             (unsigned long long)stats_of(comm).memreg_bytes);
    }
    if (rmacoll_mem_deregister(comm, hs) != RMACOLL_SUCCESS ||
        rmacoll_mem_deregister(comm, hr) != RMACOLL_SUCCESS) {
        FAIL(85, "mem_deregister failed");
    }
    for (int k = 0; k < 4; k++) {
        free(c.bufs[k]);
    }
    free(sr);
    free(rr);
    return 0;
}

static void test_threads(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();
    run_opts_t o = {4, node_of, &cfg, threads_body, NULL};

    (void)state;
    run_ranks(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_nodes),
        cmocka_unit_test(test_lru),
        cmocka_unit_test(test_threads),
    };

    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);
    if (getenv("RMACOLL_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("RMACOLL_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
