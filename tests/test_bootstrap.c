/*
 * test_bootstrap.c - the TCP rendezvous with ranks as forked processes on
 * loopback (from a unique id and from launcher variables), its failure
 * paths (missing rank, killed rank, wrong magic, duplicate rank, size
 * mismatch, unreachable root), the root thread's exit, the oob wrapper
 * with an in-process fake, and the id's hex text.
 *
 * Children never call CMocka asserts: each checks its own results and
 * exits with a code (0 = all good) that the parent asserts. Every child
 * runs under alarm() and the parent reaps with a bounded wait, killing
 * stragglers.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "core/oob/bootstrap.h"
#include "core/base/log.h"
#include "mprun.h"

#define MAX_CHILDREN 16
#define CHILD_ALARM_S 30
#define REAP_BOUND_MS 40000

/* exit codes of children */
enum {
    C_OK = 0,
    C_CREATE = 10,
    C_ALLGATHER = 11,
    C_BYTES = 12,
    C_BARRIER = 13,
    C_STATUS = 14, /* a failure came with the wrong status */
    C_LOG = 15,    /* the log did not name the rank */
    C_TIME = 16,   /* failed too early or too late */
    C_ENV = 17,
    C_REJECTED = 18
};

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- log capture (each child has its own copy of this buffer) ---- */

static char captured[16384];

static void capture_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys,
                        const char *msg)
{
    size_t used = strlen(captured);

    (void)ctx;
    (void)level;
    (void)subsys;
    snprintf(captured + used, sizeof(captured) - used, "%s\n", msg);
}

static void capture_logger(rmacoll__logger_t *lg, int rank)
{
    captured[0] = '\0';
    lg->fn = capture_log;
    lg->ctx = NULL;
    lg->level = RMACOLL_LOG_ERROR;
    lg->subsys = RMACOLL_LOG_SUBSYS_ALL;
    lg->rank = rank;
}

/* ---- fork helpers ---- */

typedef int (*child_fn_t)(int idx, void *arg);

/* Forks n children running fn(idx, arg); reaps them within REAP_BOUND_MS
 * (then SIGKILL). status[i] is the waitpid status. */
static void run_children(int n, child_fn_t fn, void *arg, int *status)
{
    pid_t pids[MAX_CHILDREN];
    int done[MAX_CHILDREN] = {0};
    int left = n;
    uint64_t deadline = now_ms() + REAP_BOUND_MS;

    assert_true(n <= MAX_CHILDREN);
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(CHILD_ALARM_S);
            _exit(fn(i, arg));
        }
    }
    while (left > 0 && now_ms() < deadline) {
        for (int i = 0; i < n; i++) {
            if (!done[i] && waitpid(pids[i], &status[i], WNOHANG) == pids[i]) {
                done[i] = 1;
                left--;
            }
        }
        if (left > 0) {
            sleep_ms(5);
        }
    }
    for (int i = 0; i < n; i++) {
        if (!done[i]) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], &status[i], 0);
            fail_msg("child %d did not finish within %d ms", i, REAP_BOUND_MS);
        }
    }
}

static void assert_exit(int status, int code, int idx)
{
    if (!WIFEXITED(status)) {
        fail_msg("child %d did not exit normally (signal %d)", idx,
                 WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    }
    if (WEXITSTATUS(status) != code) {
        fail_msg("child %d exited with %d, expected %d", idx, WEXITSTATUS(status), code);
    }
}

static int count_threads(void)
{
    return mprun_count_entries("/proc/self/task");
}

/* Waits (bounded) until the process has `want` threads. */
static void assert_threads_return_to(int want)
{
    uint64_t deadline = now_ms() + 8000;

    while (count_threads() != want && now_ms() < deadline) {
        sleep_ms(10);
    }
    assert_int_equal(count_threads(), want);
}

static unsigned free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned port;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static unsigned id_port(const rmacoll_unique_id_t *id)
{
    char buf[64];
    const char *colon;

    assert_int_equal(rmacoll__unique_id_addr(id, buf, sizeof(buf)), RMACOLL_SUCCESS);
    colon = strrchr(buf, ':');
    assert_non_null(colon);
    return (unsigned)atoi(colon + 1);
}

static int port_refuses(unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int rc;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    close(fd);
    return rc != 0 && errno == ECONNREFUSED;
}

/* ---- the data the ranks exchange ---- */

static uint8_t pattern(int rank, size_t k, int iter, size_t bytes)
{
    return (uint8_t)(rank * 131 + (int)(k * 7) + iter * 13 + (int)bytes + (int)(k >> 8));
}

/* Allgathers of several sizes (0 B .. 1 MiB), in place too, and barriers;
 * checks every byte. */
static int exchange(rmacoll__bootstrap_t *bs, int rank, int n, int iters)
{
    static const size_t sizes[] = {0, 1, 7, 4096, 65537, 1u << 20};
    uint8_t *send = malloc(1u << 20);
    uint8_t *recv = malloc((size_t)n << 20);
    int rc = C_OK;

    if (send == NULL || recv == NULL) {
        rc = C_ALLGATHER;
        goto out;
    }
    for (int it = 0; it < iters && rc == C_OK; it++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && rc == C_OK; s++) {
            size_t b = sizes[s];
            int inplace = (it + (int)s) % 2;
            uint8_t *src = inplace ? recv + (size_t)rank * b : send;
            memset(recv, 0xee, (size_t)n << 20);
            for (size_t k = 0; k < b; k++) {
                src[k] = pattern(rank, k, it, b);
            }
            rmacoll_status_t st = rmacoll__bootstrap_allgather(bs, src, recv, b);
            if (st != RMACOLL_SUCCESS) {
                fprintf(stderr, "rank %d: allgather of %zu bytes (iteration %d): %s\n",
                        rank, b, it, rmacoll_status_name(st));
                rc = C_ALLGATHER;
                break;
            }
            for (int r = 0; r < n && rc == C_OK; r++) {
                for (size_t k = 0; k < b; k++) {
                    if (recv[(size_t)r * b + k] != pattern(r, k, it, b)) {
                        rc = C_BYTES;
                        break;
                    }
                }
            }
            /* nothing beyond n * b was written */
            if (rc == C_OK && b < (1u << 20) && recv[(size_t)n * b] != 0xee) {
                rc = C_BYTES;
            }
        }
        if (rc == C_OK && rmacoll__bootstrap_barrier(bs) != RMACOLL_SUCCESS) {
            rc = C_BARRIER;
        }
    }
out:
    free(send);
    free(recv);
    return rc;
}

/* ---- id path ---- */

typedef struct id_arg {
    rmacoll_unique_id_t id;
    rmacoll_unique_id_t id2;
    int n;
} id_arg_t;

static int child_id(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__bootstrap_t *bs = NULL;
    int rc;

    rmacoll_status_t st = rmacoll__bootstrap_create(&a->id, idx, a->n, 10000, &bs);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: create: %s\n", idx, rmacoll_status_name(st));
        return C_CREATE;
    }
    if (rmacoll__bootstrap_rank(bs) != idx || rmacoll__bootstrap_nranks(bs) != a->n) {
        return C_CREATE;
    }
    rc = exchange(bs, idx, a->n, 2);
    if (rc == C_OK && rmacoll__bootstrap_barrier(bs) != RMACOLL_SUCCESS) {
        rc = C_BARRIER;
    }
    rmacoll__bootstrap_destroy(bs);
    return rc;
}

static void run_id(int n)
{
    id_arg_t a = {.n = n};
    int status[MAX_CHILDREN];
    int base;

    /* a root thread of an earlier test may still be on its way out: let
     * the process settle to its main thread before taking the baseline */
    assert_threads_return_to(1);
    base = count_threads();

    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    assert_int_equal(count_threads(), base + 1); /* the root thread */
    run_children(n, child_id, &a, status);
    for (int i = 0; i < n; i++) {
        assert_exit(status[i], C_OK, i);
    }
    /* The root exits once every rank left, and stops listening. */
    assert_threads_return_to(base);
    assert_true(port_refuses(id_port(&a.id)));
}

static void test_id_n1(void **state) { (void)state; run_id(1); }
static void test_id_n2(void **state) { (void)state; run_id(2); }
static void test_id_n5(void **state) { (void)state; run_id(5); }
static void test_id_n8(void **state) { (void)state; run_id(8); }

/* ---- launcher variables path ---- */

static void clear_launcher_env(void)
{
    static const char *const vars[] = {
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
        "RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID",
        "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "RMACOLL_BOOTSTRAP_ADDR"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
}

typedef struct env_arg {
    int n;
    unsigned port;
} env_arg_t;

static int child_env(int idx, void *p)
{
    env_arg_t *a = p;
    char buf[64];
    rmacoll_unique_id_t id;
    rmacoll__bootstrap_t *bs = NULL;
    int rank = -1, n = -1, rc;

    clear_launcher_env();
    snprintf(buf, sizeof(buf), "%d", idx);
    setenv("RANK", buf, 1);
    snprintf(buf, sizeof(buf), "%d", a->n);
    setenv("WORLD_SIZE", buf, 1);
    snprintf(buf, sizeof(buf), "127.0.0.1:%u", a->port);
    setenv("RMACOLL_BOOTSTRAP_ADDR", buf, 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id) != RMACOLL_SUCCESS ||
        rank != idx || n != a->n) {
        return C_ENV;
    }
    if (rmacoll__bootstrap_create(&id, rank, n, 10000, &bs) != RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    rc = exchange(bs, rank, n, 1);
    if (rc == C_OK && rmacoll__bootstrap_barrier(bs) != RMACOLL_SUCCESS) {
        rc = C_BARRIER;
    }
    rmacoll__bootstrap_destroy(bs);
    return rc;
}

static void run_env(int n)
{
    env_arg_t a = {.n = n, .port = free_port()};
    int status[MAX_CHILDREN];

    run_children(n, child_env, &a, status);
    for (int i = 0; i < n; i++) {
        assert_exit(status[i], C_OK, i);
    }
}

static void test_env_n1(void **state) { (void)state; run_env(1); }
static void test_env_n2(void **state) { (void)state; run_env(2); }
static void test_env_n5(void **state) { (void)state; run_env(5); }
static void test_env_n8(void **state) { (void)state; run_env(8); }

/* Which variables win, MASTER_PORT + 1, identical ids on every rank. */
static int child_env_vars(int idx, void *p)
{
    rmacoll_unique_id_t id1, id2;
    char addr[64];
    int rank, n;

    (void)idx;
    (void)p;
    clear_launcher_env();
    if (rmacoll__bootstrap_from_env(&rank, &n, &id1) != RMACOLL_ERR_INVALID_ARG) {
        return 1; /* no variables at all */
    }
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id1) != RMACOLL_ERR_INVALID_ARG) {
        return 2; /* no address */
    }
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id1) != RMACOLL_SUCCESS ||
        rank != 1 || n != 4) {
        return 3; /* torchrun's RANK beats SLURM_PROCID */
    }
    if (rmacoll__unique_id_addr(&id1, addr, sizeof(addr)) != RMACOLL_SUCCESS ||
        strcmp(addr, "127.0.0.1:29501") != 0) {
        return 4;
    }
    setenv("RANK", "2", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id2) != RMACOLL_SUCCESS || rank != 2 ||
        memcmp(&id1, &id2, sizeof(id1)) != 0) {
        return 5; /* every rank derives the same id */
    }
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id2) != RMACOLL_SUCCESS ||
        rank != 3 || n != 6) {
        return 6; /* mpirun's variables come first */
    }
    setenv("OMPI_COMM_WORLD_RANK", "6", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id2) != RMACOLL_ERR_INVALID_ARG) {
        return 7; /* rank >= size */
    }
    setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id2) != RMACOLL_ERR_INVALID_ARG) {
        return 8;
    }
    unsetenv("OMPI_COMM_WORLD_SIZE");
    if (rmacoll__bootstrap_from_env(&rank, &n, &id2) != RMACOLL_ERR_INVALID_ARG) {
        return 9; /* half a pair */
    }
    clear_launcher_env();
    setenv("PMI_RANK", "1", 1);
    setenv("PMI_SIZE", "2", 1);
    setenv("RMACOLL_BOOTSTRAP_ADDR", "127.0.0.1:4567", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    if (rmacoll__bootstrap_from_env(&rank, &n, &id2) != RMACOLL_SUCCESS ||
        rank != 1 || n != 2 ||
        rmacoll__unique_id_addr(&id2, addr, sizeof(addr)) != RMACOLL_SUCCESS ||
        strcmp(addr, "127.0.0.1:4567") != 0) {
        return 10; /* RMACOLL_BOOTSTRAP_ADDR beats MASTER_ADDR */
    }
    return 0;
}

static void test_env_vars(void **state)
{
    int status;

    (void)state;
    run_children(1, child_env_vars, NULL, &status);
    assert_exit(status, 0, 0);
}

/* ---- a rank that never connects ---- */

#define MISSING_TIMEOUT_MS 1500

static int child_missing(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    uint64_t t0;
    rmacoll_status_t st;
    uint64_t took;

    if (idx == a->n - 1) {
        return C_OK; /* the last rank never shows up */
    }
    capture_logger(&lg, idx);
    t0 = now_ms();
    st = rmacoll__bootstrap_create_ex(&a->id, idx, a->n, MISSING_TIMEOUT_MS, &lg, &bs);
    took = now_ms() - t0;
    if (st == RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    if (st != RMACOLL_ERR_TIMEOUT) {
        return C_STATUS;
    }
    char want[64];
    snprintf(want, sizeof(want), "rank(s) %d to connect", a->n - 1);
    if (strstr(captured, want) == NULL) {
        fprintf(stderr, "child %d log: %s\n", idx, captured);
        return C_LOG;
    }
    /* The root gives up at the earliest rank's deadline; a rank that got
     * there later (a loaded machine) sees less than the full timeout. The
     * upper bound is loose: a loaded 2-core box stalls processes for
     * seconds; alarm() is the guard against a hang. */
    if (took < MISSING_TIMEOUT_MS / 2 || took > MISSING_TIMEOUT_MS + 20000) {
        fprintf(stderr, "child %d failed after %llu ms\n", idx, (unsigned long long)took);
        return C_TIME;
    }
    return C_OK;
}

static void test_missing_rank(void **state)
{
    id_arg_t a = {.n = 4};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(a.n, child_missing, &a, status);
    for (int i = 0; i < a.n; i++) {
        assert_exit(status[i], C_OK, i);
    }
    assert_threads_return_to(base); /* the root gave up and cleaned up */
}

/* ---- a rank killed mid-run ---- */

#define KILL_TIMEOUT_MS 60000

static int child_killed(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    uint64_t v = (uint64_t)idx, all[MAX_CHILDREN];
    rmacoll_status_t st = RMACOLL_SUCCESS;
    uint64_t t0;

    capture_logger(&lg, idx);
    if (rmacoll__bootstrap_create_ex(&a->id, idx, a->n, KILL_TIMEOUT_MS, &lg, &bs) !=
        RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    for (int it = 0; it < 3; it++) {
        if (rmacoll__bootstrap_allgather(bs, &v, all, sizeof(v)) != RMACOLL_SUCCESS) {
            return C_ALLGATHER;
        }
    }
    if (idx == 2) {
        raise(SIGKILL);
    }
    t0 = now_ms();
    for (int it = 0; it < 3 && st == RMACOLL_SUCCESS; it++) {
        st = rmacoll__bootstrap_allgather(bs, &v, all, sizeof(v));
    }
    uint64_t took = now_ms() - t0;
    /* sticky: later calls fail at once with the same status */
    if (rmacoll__bootstrap_barrier(bs) != st) {
        return C_STATUS;
    }
    rmacoll__bootstrap_destroy(bs);
    if (st != RMACOLL_ERR_BOOTSTRAP) {
        return C_STATUS;
    }
    if (strstr(captured, "rank 2 disconnected") == NULL) {
        fprintf(stderr, "child %d log: %s\n", idx, captured);
        return C_LOG;
    }
    if (took > KILL_TIMEOUT_MS / 4) {
        return C_TIME; /* found by the EOF, not by the timeout */
    }
    return C_OK;
}

static void test_killed_rank(void **state)
{
    id_arg_t a = {.n = 4};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(a.n, child_killed, &a, status);
    for (int i = 0; i < a.n; i++) {
        if (i == 2) {
            assert_true(WIFSIGNALED(status[i]) && WTERMSIG(status[i]) == SIGKILL);
        } else {
            assert_exit(status[i], C_OK, i);
        }
    }
    assert_threads_return_to(base);
}

/* A rank that stays alive but never enters the allgather: a timeout that
 * names it. */
static int child_silent(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    uint64_t v = 7, all[MAX_CHILDREN];
    rmacoll_status_t st;

    capture_logger(&lg, idx);
    if (rmacoll__bootstrap_create_ex(&a->id, idx, a->n, MISSING_TIMEOUT_MS, &lg, &bs) !=
        RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    if (idx == 1) {
        sleep_ms(MISSING_TIMEOUT_MS + 1500);
        rmacoll__bootstrap_destroy(bs);
        return C_OK;
    }
    uint64_t t0 = now_ms();
    st = rmacoll__bootstrap_allgather(bs, &v, all, sizeof(v));
    uint64_t took = now_ms() - t0;
    rmacoll__bootstrap_destroy(bs);
    if (st != RMACOLL_ERR_TIMEOUT) {
        return C_STATUS;
    }
    if (strstr(captured, "rank(s) 1 to enter allgather #0") == NULL) {
        fprintf(stderr, "child %d log: %s\n", idx, captured);
        return C_LOG;
    }
    if (took < MISSING_TIMEOUT_MS / 2 || took > MISSING_TIMEOUT_MS + 20000) {
        fprintf(stderr, "child %d failed after %llu ms\n", idx, (unsigned long long)took);
        return C_TIME;
    }
    return C_OK;
}

static void test_silent_rank(void **state)
{
    id_arg_t a = {.n = 3};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(a.n, child_silent, &a, status);
    for (int i = 0; i < a.n; i++) {
        assert_exit(status[i], C_OK, i);
    }
    assert_threads_return_to(base);
}

/* ---- the timeout counts silence (issue 10, item 4) ---- */

#define STAGGER_TIMEOUT_MS 2000
#define STAGGER_GAP_MS 1200 /* between ranks: each gap below the timeout, */
                            /* the whole spread (2 gaps) above it */

/* Ranks arrive one gap apart at the rendezvous, at an allgather and at a
 * barrier (then in reverse order): every wait is shorter than the timeout
 * since the last arrival, though the spread is longer than the timeout,
 * so all succeed, with exact bytes. */
static int child_stagger(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    uint64_t v = 0x5eed0000u + (uint64_t)idx, all[MAX_CHILDREN];
    uint64_t t0 = now_ms();

    capture_logger(&lg, idx);
    sleep_ms((unsigned)idx * STAGGER_GAP_MS);
    if (rmacoll__bootstrap_create_ex(&a->id, idx, a->n, STAGGER_TIMEOUT_MS, &lg, &bs) !=
        RMACOLL_SUCCESS) {
        fprintf(stderr, "child %d: create: %s\n", idx, captured);
        return C_CREATE;
    }
    sleep_ms((unsigned)idx * STAGGER_GAP_MS);
    memset(all, 0xa5, sizeof(all));
    if (rmacoll__bootstrap_allgather(bs, &v, all, sizeof(v)) != RMACOLL_SUCCESS) {
        fprintf(stderr, "child %d: allgather: %s\n", idx, captured);
        return C_ALLGATHER;
    }
    for (int r = 0; r < a->n; r++) {
        if (all[r] != 0x5eed0000u + (uint64_t)r) {
            return C_BYTES;
        }
    }
    if (all[a->n] != 0xa5a5a5a5a5a5a5a5ull) {
        return C_BYTES;
    }
    sleep_ms((unsigned)(a->n - 1 - idx) * STAGGER_GAP_MS);
    if (rmacoll__bootstrap_barrier(bs) != RMACOLL_SUCCESS) {
        fprintf(stderr, "child %d: barrier: %s\n", idx, captured);
        return C_BARRIER;
    }
    rmacoll__bootstrap_destroy(bs);
    /* the point of the test: the spread was longer than the timeout (the
     * barrier ends about 3 (n - 1) gaps after the first fork; a child forked
     * later measures a little less, so the bound keeps a gap's margin) */
    if (now_ms() - t0 < (3u * (uint64_t)(a->n - 1) - 1) * STAGGER_GAP_MS) {
        return C_TIME;
    }
    return C_OK;
}

static void test_stagger_silence(void **state)
{
    id_arg_t a = {.n = 3};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_true((a.n - 1) * STAGGER_GAP_MS > STAGGER_TIMEOUT_MS);
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(a.n, child_stagger, &a, status);
    for (int i = 0; i < a.n; i++) {
        assert_exit(status[i], C_OK, i);
    }
    assert_threads_return_to(base);
}

/* ---- a barrier waits for the ranks still away, not the first to leave ---- */

#define LEAVE_TIMEOUT_MS 1500 /* the bootstrap's; the barrier's silence is twice it */
#define LEAVE_FIRST_MS 800    /* rank 1 leaves without entering */
#define LEAVE_LAST_MS 2400    /* rank 2 leaves: the barrier can never complete */

/* Rank 0 enters a barrier with a silence limit of 2 * LEAVE_TIMEOUT_MS
 * (rmacoll__bootstrap_barrier_for: what rmacoll_comm_destroy does); ranks
 * 1 and 2 leave without entering, LEAVE_FIRST_MS and LEAVE_LAST_MS after
 * the rendezvous (a peer's failed call, then destroy on a broken
 * communicator). The barrier must outlast the first departure (a rank
 * still away may be in a call writing into rank 0) and fail at the last,
 * naming both, well before its silence limit. */
static int child_leave(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    rmacoll_status_t st;
    uint64_t t0, took;

    capture_logger(&lg, idx);
    if (rmacoll__bootstrap_create_ex(&a->id, idx, a->n, LEAVE_TIMEOUT_MS, &lg, &bs) !=
        RMACOLL_SUCCESS) {
        fprintf(stderr, "child %d: create: %s\n", idx, captured);
        return C_CREATE;
    }
    t0 = now_ms();
    if (idx > 0) {
        sleep_ms(idx == 1 ? LEAVE_FIRST_MS : LEAVE_LAST_MS);
        rmacoll__bootstrap_destroy(bs);
        return C_OK;
    }
    st = rmacoll__bootstrap_barrier_for(bs, 2 * LEAVE_TIMEOUT_MS);
    took = now_ms() - t0;
    rmacoll__bootstrap_destroy(bs);
    fprintf(stderr, "child 0: barrier %s after %llu ms: %s", rmacoll_status_name(st),
            (unsigned long long)took, captured);
    if (st != RMACOLL_ERR_BOOTSTRAP) {
        return C_BARRIER;
    }
    if (strstr(captured, "rank(s) 1,2 left without entering allgather") == NULL) {
        return C_LOG;
    }
    /* not at the first departure, nor at the silence limit after the last */
    if (took < LEAVE_LAST_MS - 200 || took >= LEAVE_LAST_MS + 2 * LEAVE_TIMEOUT_MS - 500) {
        return C_TIME;
    }
    return C_OK;
}

static void test_barrier_until_all_left(void **state)
{
    id_arg_t a = {.n = 3};
    int status[MAX_CHILDREN];

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(a.n, child_leave, &a, status);
    for (int i = 0; i < a.n; i++) {
        assert_exit(status[i], C_OK, i);
    }
}

/* ---- rejected connections ---- */

typedef struct reject_arg {
    rmacoll_unique_id_t id;
    int mode; /* 0: wrong magic, 1: duplicate rank, 2: nranks differ */
} reject_arg_t;

/* Ranks 0..2 of 3 are good (rank 2 comes 500 ms late so the intruder
 * arrives while the rendezvous is open); child 3 is the intruder. */
static int child_reject(int idx, void *p)
{
    reject_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    rmacoll_unique_id_t id = a->id;
    rmacoll_status_t st;
    int rank = idx, n = 3;

    capture_logger(&lg, idx);
    if (idx == 3) {
        if (a->mode == 0) {
            id.internal[8] ^= 0x5a; /* the magic */
            rank = 0;
        } else if (a->mode == 1) {
            rank = 1;
        } else {
            rank = 1;
            n = 4;
        }
        sleep_ms(100);
        uint64_t t0 = now_ms();
        st = rmacoll__bootstrap_create_ex(&id, rank, n, 5000, &lg, &bs);
        if (st == RMACOLL_SUCCESS) {
            return C_CREATE;
        }
        if (st != RMACOLL_ERR_BOOTSTRAP) {
            return C_STATUS;
        }
        /* rejected at once, not left to time out (status BOOTSTRAP, and
         * well before the 5 s timeout unless the machine stalls) */
        if (now_ms() - t0 > 4500) {
            return C_TIME;
        }
        static const char *const want[] = {"wrong magic", "duplicate rank 1",
                                           "says 4 ranks, others said 3"};
        if (strstr(captured, want[a->mode]) == NULL) {
            fprintf(stderr, "intruder log: %s\n", captured);
            return C_LOG;
        }
        return C_REJECTED;
    }
    if (idx == 2) {
        sleep_ms(600);
    }
    uint64_t t0 = now_ms();
    st = rmacoll__bootstrap_create(&id, rank, n, 10000, &bs);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: create: %s after %llu ms\n", rank,
                rmacoll_status_name(st), (unsigned long long)(now_ms() - t0));
        return C_CREATE;
    }
    int rc = exchange(bs, rank, n, 1);
    rmacoll__bootstrap_destroy(bs);
    return rc;
}

static void run_reject(int mode)
{
    reject_arg_t a = {.mode = mode};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(4, child_reject, &a, status);
    /* The first rank 1 may be the intruder's twin: with a duplicate, one of
     * children 1 and 3 is rejected, whichever came second. */
    if (mode == 1 && WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == C_CREATE) {
        fail_msg("the earlier rank 1 was rejected instead of the duplicate");
    }
    for (int i = 0; i < 3; i++) {
        assert_exit(status[i], C_OK, i);
    }
    assert_exit(status[3], C_REJECTED, 3);
    assert_threads_return_to(base);
}

static void test_wrong_magic(void **state) { (void)state; run_reject(0); }
static void test_duplicate_rank(void **state) { (void)state; run_reject(1); }
static void test_nranks_differ(void **state) { (void)state; run_reject(2); }

/* ---- sizes differing between ranks ---- */

static int child_mismatch(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    uint8_t send[16] = {0}, recv[64];
    rmacoll_status_t st;

    capture_logger(&lg, idx);
    if (rmacoll__bootstrap_create_ex(&a->id, idx, a->n, 5000, &lg, &bs) != RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    st = rmacoll__bootstrap_allgather(bs, send, recv, idx == 1 ? 16 : 8);
    rmacoll__bootstrap_destroy(bs);
    if (st != RMACOLL_ERR_BOOTSTRAP) {
        return C_STATUS;
    }
    if (strstr(captured, "bytes to allgather #0") == NULL) {
        fprintf(stderr, "child %d log: %s\n", idx, captured);
        return C_LOG;
    }
    return C_OK;
}

static void test_size_mismatch(void **state)
{
    id_arg_t a = {.n = 3};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(a.n, child_mismatch, &a, status);
    for (int i = 0; i < a.n; i++) {
        assert_exit(status[i], C_OK, i);
    }
    assert_threads_return_to(base);
}

/* ---- two ids, two roots, one process ---- */

static int child_two(int idx, void *p)
{
    id_arg_t *a = p;
    rmacoll__bootstrap_t *b1 = NULL, *b2 = NULL;
    uint32_t v1 = 1000u + (uint32_t)idx, v2 = 2000u + (uint32_t)idx;
    uint32_t all1[MAX_CHILDREN], all2[MAX_CHILDREN];

    if (rmacoll__bootstrap_create(&a->id, idx, a->n, 10000, &b1) != RMACOLL_SUCCESS ||
        rmacoll__bootstrap_create(&a->id2, a->n - 1 - idx, a->n, 10000, &b2) !=
            RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    for (int it = 0; it < 4; it++) {
        rmacoll__bootstrap_t *x = (it % 2) ? b2 : b1;
        uint32_t *all = (it % 2) ? all2 : all1;
        uint32_t *v = (it % 2) ? &v2 : &v1;
        if (rmacoll__bootstrap_allgather(x, v, all, sizeof(*v)) != RMACOLL_SUCCESS) {
            return C_ALLGATHER;
        }
    }
    for (int r = 0; r < a->n; r++) {
        /* in the second, rank r is child n-1-r */
        if (all1[r] != 1000u + (uint32_t)r ||
            all2[r] != 2000u + (uint32_t)(a->n - 1 - r)) {
            return C_BYTES;
        }
    }
    if (rmacoll__bootstrap_barrier(b1) != RMACOLL_SUCCESS ||
        rmacoll__bootstrap_barrier(b2) != RMACOLL_SUCCESS) {
        return C_BARRIER;
    }
    rmacoll__bootstrap_destroy(b2);
    rmacoll__bootstrap_destroy(b1);
    return C_OK;
}

/* A unique id used again after its communicator was destroyed (issue 33:
 * some ranks waited out the whole timeout). The process that made the id
 * (its root ran here) fails at once, naming the reason, and turns the
 * other ranks away for as long as they would wait: a rank in another
 * process (forked before the communicator ended, so it cannot know) fails
 * well within its 10 s timeout with the same reason. */
static void test_id_reused(void **state)
{
    id_arg_t a = {.n = 2};
    int status[MAX_CHILDREN], pfd[2], st_late = 0, base;
    rmacoll__logger_t lg;
    rmacoll__bootstrap_t *bs = NULL;
    pid_t late;
    uint64_t t0;

    (void)state;
    assert_threads_return_to(1);
    base = count_threads();
    assert_int_equal(pipe(pfd), 0);
    fflush(NULL);
    /* forked before the id exists: it holds none of the root's sockets and
     * cannot know the communicator ended; the id comes through the pipe */
    late = fork();
    assert_true(late >= 0);
    if (late == 0) {
        rmacoll_unique_id_t id;

        close(pfd[1]);
        alarm(CHILD_ALARM_S);
        if (read(pfd[0], &id, sizeof(id)) != (ssize_t)sizeof(id)) {
            _exit(C_CREATE);
        }
        capture_logger(&lg, 1);
        t0 = now_ms();
        rmacoll_status_t st = rmacoll__bootstrap_create_ex(&id, 1, 2, 10000, &lg, &bs);
        if (st == RMACOLL_SUCCESS) {
            _exit(C_CREATE);
        }
        if (st != RMACOLL_ERR_BOOTSTRAP) {
            fprintf(stderr, "late rank: %s after %llu ms: %s\n", rmacoll_status_name(st),
                    (unsigned long long)(now_ms() - t0), captured);
            _exit(C_STATUS);
        }
        if (now_ms() - t0 > 5000) {
            _exit(C_TIME);
        }
        if (strstr(captured, "communicator has been destroyed") == NULL) {
            fprintf(stderr, "late rank's log: %s\n", captured);
            _exit(C_LOG);
        }
        _exit(C_REJECTED);
    }
    close(pfd[0]);
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    run_children(2, child_id, &a, status); /* the id's communicator, made and destroyed */
    assert_exit(status[0], C_OK, 0);
    assert_exit(status[1], C_OK, 1);
    assert_threads_return_to(base);
    capture_logger(&lg, 0);
    t0 = now_ms();
    assert_int_equal(rmacoll__bootstrap_create_ex(&a.id, 0, 2, 3000, &lg, &bs),
                     RMACOLL_ERR_BOOTSTRAP);
    assert_true(now_ms() - t0 < 1000);
    assert_non_null(strstr(captured, "served a communicator that has been destroyed"));
    assert_int_equal(write(pfd[1], &a.id, sizeof(a.id)), (ssize_t)sizeof(a.id));
    assert_int_equal(waitpid(late, &st_late, 0), late);
    close(pfd[1]);
    assert_exit(st_late, C_REJECTED, 1);
    assert_threads_return_to(base); /* the turning-away root ends after 3 s */
}

static void test_two_ids(void **state)
{
    id_arg_t a = {.n = 3};
    int status[MAX_CHILDREN];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&a.id), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_get_unique_id(&a.id2), RMACOLL_SUCCESS);
    assert_memory_not_equal(&a.id, &a.id2, sizeof(a.id));
    assert_int_equal(count_threads(), base + 2);
    run_children(a.n, child_two, &a, status);
    for (int i = 0; i < a.n; i++) {
        assert_exit(status[i], C_OK, i);
    }
    assert_threads_return_to(base);
}

/* ---- unreachable root, bad arguments ---- */

static void test_unreachable_root(void **state)
{
    char buf[64];
    rmacoll_unique_id_t id;
    rmacoll__bootstrap_t *bs = NULL;
    rmacoll__logger_t lg;
    int rank, n;
    uint64_t t0, took;
    rmacoll_status_t st;

    (void)state;
    /* An id from launcher variables of rank 1: nobody listens there. */
    snprintf(buf, sizeof(buf), "127.0.0.1:%u", free_port());
    setenv("RMACOLL_BOOTSTRAP_ADDR", buf, 1);
    setenv("PMI_RANK", "1", 1);
    setenv("PMI_SIZE", "2", 1);
    st = rmacoll__bootstrap_from_env(&rank, &n, &id);
    unsetenv("RMACOLL_BOOTSTRAP_ADDR");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    assert_int_equal(st, RMACOLL_SUCCESS);
    capture_logger(&lg, 1);
    t0 = now_ms();
    st = rmacoll__bootstrap_create_ex(&id, 1, 2, 300, &lg, &bs);
    took = now_ms() - t0;
    assert_int_equal(st, RMACOLL_ERR_TIMEOUT);
    assert_null(bs);
    assert_true(took >= 250 && took < 6000);
    assert_non_null(strstr(captured, "could not reach the root"));
}

static void test_bad_args(void **state)
{
    rmacoll_unique_id_t id;
    rmacoll__bootstrap_t *bs = NULL;
    rmacoll__logger_t lg;

    (void)state;
    memset(&id, 0, sizeof(id));
    capture_logger(&lg, 0);
    assert_int_equal(rmacoll__bootstrap_create_ex(&id, 0, 1, 100, &lg, &bs),
                     RMACOLL_ERR_INVALID_ARG); /* not an id */
    assert_int_equal(rmacoll__bootstrap_create(&id, 2, 2, 100, &bs), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__bootstrap_create(&id, 0, 0, 100, &bs), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__bootstrap_create(&id, -1, 2, 100, &bs), RMACOLL_ERR_INVALID_ARG);
    assert_null(bs);
    assert_int_equal(rmacoll_get_unique_id(NULL), RMACOLL_ERR_INVALID_ARG);
    rmacoll__bootstrap_destroy(NULL);
}

/* ---- hex text of an id ---- */

static void test_hex(void **state)
{
    rmacoll_unique_id_t id, back;
    char hex[RMACOLL__UNIQUE_ID_HEX_LEN + 1];
    char addr[64];

    (void)state;
    for (int i = 0; i < RMACOLL_UNIQUE_ID_BYTES; i++) {
        id.internal[i] = (char)(i * 37 + 5);
    }
    rmacoll__unique_id_to_hex(&id, hex);
    assert_int_equal(strlen(hex), RMACOLL__UNIQUE_ID_HEX_LEN);
    assert_memory_equal(hex, "052a4f74", 8); /* 5, 42, 79, 116 */
    assert_int_equal(rmacoll__unique_id_from_hex(hex, &back), RMACOLL_SUCCESS);
    assert_memory_equal(&id, &back, sizeof(id));
    for (int i = 0; hex[i]; i++) {
        if (hex[i] >= 'a') {
            hex[i] = (char)(hex[i] - 'a' + 'A');
        }
    }
    memset(&back, 0, sizeof(back));
    assert_int_equal(rmacoll__unique_id_from_hex(hex, &back), RMACOLL_SUCCESS);
    assert_memory_equal(&id, &back, sizeof(id));
    hex[17] = 'g';
    assert_int_equal(rmacoll__unique_id_from_hex(hex, &back), RMACOLL_ERR_INVALID_ARG);
    hex[17] = '0';
    hex[RMACOLL__UNIQUE_ID_HEX_LEN - 1] = '\0';
    assert_int_equal(rmacoll__unique_id_from_hex(hex, &back), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__unique_id_from_hex(NULL, &back), RMACOLL_ERR_INVALID_ARG);
    /* not an id at all */
    assert_int_equal(rmacoll__unique_id_addr(&id, addr, sizeof(addr)),
                     RMACOLL_ERR_INVALID_ARG);
}

/* A real id survives the trip through text (as the launcher passes it). */
static int child_hex(int idx, void *p)
{
    const char *hex = p;
    rmacoll_unique_id_t id;
    rmacoll__bootstrap_t *bs = NULL;
    uint16_t v = (uint16_t)(idx + 40), all[2];

    if (rmacoll__unique_id_from_hex(hex, &id) != RMACOLL_SUCCESS) {
        return C_ENV;
    }
    if (rmacoll__bootstrap_create(&id, idx, 2, 5000, &bs) != RMACOLL_SUCCESS) {
        return C_CREATE;
    }
    if (rmacoll__bootstrap_allgather(bs, &v, all, sizeof(v)) != RMACOLL_SUCCESS) {
        return C_ALLGATHER;
    }
    rmacoll__bootstrap_destroy(bs);
    return (all[0] == 40 && all[1] == 41) ? C_OK : C_BYTES;
}

static void test_hex_real_id(void **state)
{
    rmacoll_unique_id_t id;
    char hex[RMACOLL__UNIQUE_ID_HEX_LEN + 1];
    char addr[64];
    int status[2];
    int base = (assert_threads_return_to(1), count_threads()); /* settle first */

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&id), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__unique_id_addr(&id, addr, sizeof(addr)), RMACOLL_SUCCESS);
    assert_memory_equal(addr, "127.0.0.1:", 10);
    assert_true(id_port(&id) > 0);
    rmacoll__unique_id_to_hex(&id, hex);
    run_children(2, child_hex, hex, status);
    assert_exit(status[0], C_OK, 0);
    assert_exit(status[1], C_OK, 1);
    assert_threads_return_to(base);
}

/* ---- oob path with an in-process fake (threads as ranks) ---- */

#define OOB_N 3

typedef struct fake_world {
    pthread_barrier_t bar;
    uint8_t buf[OOB_N * 4096];
    int allgathers;
    int barriers;
    pthread_mutex_t lock;
} fake_world_t;

typedef struct fake_rank {
    fake_world_t *w;
    int rank;
    int use_barrier;
    int rc;
} fake_rank_t;

static rmacoll_status_t fake_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    fake_rank_t *fr = ctx;

    if (bytes > 4096) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    memcpy(fr->w->buf + (size_t)fr->rank * bytes, send, bytes);
    pthread_barrier_wait(&fr->w->bar);
    memcpy(recv, fr->w->buf, OOB_N * bytes);
    pthread_barrier_wait(&fr->w->bar);
    pthread_mutex_lock(&fr->w->lock);
    fr->w->allgathers++;
    pthread_mutex_unlock(&fr->w->lock);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t fake_barrier(void *ctx)
{
    fake_rank_t *fr = ctx;

    pthread_barrier_wait(&fr->w->bar);
    pthread_mutex_lock(&fr->w->lock);
    fr->w->barriers++;
    pthread_mutex_unlock(&fr->w->lock);
    return RMACOLL_SUCCESS;
}

static void *oob_rank_main(void *p)
{
    fake_rank_t *fr = p;
    rmacoll_oob_t oob = {.allgather = fake_allgather,
                         .barrier = fr->use_barrier ? fake_barrier : NULL,
                         .ctx = fr};
    rmacoll__bootstrap_t *bs = NULL;
    static const size_t sizes[] = {1, 5, 1000, 4096};
    uint8_t send[4096], recv[OOB_N * 4096];

    fr->rc = C_CREATE;
    if (rmacoll__bootstrap_create_oob(&oob, fr->rank, OOB_N, &bs) != RMACOLL_SUCCESS) {
        return NULL;
    }
    fr->rc = C_OK;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && fr->rc == C_OK; s++) {
        size_t b = sizes[s];
        for (size_t k = 0; k < b; k++) {
            send[k] = pattern(fr->rank, k, 0, b);
        }
        if (rmacoll__bootstrap_allgather_cb(bs, send, recv, b) != RMACOLL_SUCCESS) {
            fr->rc = C_ALLGATHER;
            break;
        }
        for (int r = 0; r < OOB_N; r++) {
            for (size_t k = 0; k < b; k++) {
                if (recv[(size_t)r * b + k] != pattern(r, k, 0, b)) {
                    fr->rc = C_BYTES;
                }
            }
        }
        if (rmacoll__bootstrap_barrier(bs) != RMACOLL_SUCCESS) {
            fr->rc = C_BARRIER;
        }
    }
    /* 0 bytes is a barrier, never a 0-byte callback */
    if (fr->rc == C_OK && rmacoll__bootstrap_allgather(bs, NULL, NULL, 0) != RMACOLL_SUCCESS) {
        fr->rc = C_ALLGATHER;
    }
    rmacoll__bootstrap_destroy(bs);
    return NULL;
}

static void run_oob(int use_barrier)
{
    fake_world_t w;
    fake_rank_t fr[OOB_N];
    pthread_t th[OOB_N];

    memset(&w, 0, sizeof(w));
    pthread_barrier_init(&w.bar, NULL, OOB_N);
    pthread_mutex_init(&w.lock, NULL);
    alarm(CHILD_ALARM_S); /* a hung fake would otherwise hang the test */
    for (int r = 0; r < OOB_N; r++) {
        fr[r] = (fake_rank_t){.w = &w, .rank = r, .use_barrier = use_barrier};
        assert_int_equal(pthread_create(&th[r], NULL, oob_rank_main, &fr[r]), 0);
    }
    for (int r = 0; r < OOB_N; r++) {
        pthread_join(th[r], NULL);
        assert_int_equal(fr[r].rc, C_OK);
    }
    alarm(0);
    if (use_barrier) {
        assert_int_equal(w.allgathers, OOB_N * 4);
        assert_int_equal(w.barriers, OOB_N * 5);
    } else {
        /* each barrier became a 1-byte allgather */
        assert_int_equal(w.allgathers, OOB_N * 9);
        assert_int_equal(w.barriers, 0);
    }
    pthread_barrier_destroy(&w.bar);
    pthread_mutex_destroy(&w.lock);
}

static void test_oob(void **state) { (void)state; run_oob(1); }
static void test_oob_no_barrier(void **state) { (void)state; run_oob(0); }

static void test_oob_bad_args(void **state)
{
    rmacoll_oob_t oob = {.allgather = NULL, .barrier = fake_barrier, .ctx = NULL};
    rmacoll_oob_t ok = {.allgather = fake_allgather, .barrier = NULL, .ctx = NULL};
    rmacoll__bootstrap_t *bs = NULL;
    uint8_t x = 0;

    (void)state;
    assert_int_equal(rmacoll__bootstrap_create_oob(&oob, 0, 1, &bs), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__bootstrap_create_oob(NULL, 0, 1, &bs), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__bootstrap_create_oob(&ok, 1, 1, &bs), RMACOLL_ERR_INVALID_ARG);
    assert_null(bs);
    assert_int_equal(rmacoll__bootstrap_create_oob(&ok, 0, 1, &bs), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__bootstrap_allgather(bs, NULL, &x, 1), RMACOLL_ERR_NULL_BUFFER);
    assert_int_equal(rmacoll__bootstrap_allgather(bs, &x, &x,
                                                  (size_t)RMACOLL__BOOTSTRAP_MAX_BYTES + 1),
                     RMACOLL_ERR_INVALID_ARG);
    rmacoll__bootstrap_destroy(bs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_oob),
        cmocka_unit_test(test_oob_no_barrier),
        cmocka_unit_test(test_oob_bad_args),
        cmocka_unit_test(test_id_n1),
        cmocka_unit_test(test_id_n2),
        cmocka_unit_test(test_id_n5),
        cmocka_unit_test(test_id_n8),
        cmocka_unit_test(test_hex_real_id),
        cmocka_unit_test(test_env_vars),
        cmocka_unit_test(test_env_n1),
        cmocka_unit_test(test_env_n2),
        cmocka_unit_test(test_env_n5),
        cmocka_unit_test(test_env_n8),
        cmocka_unit_test(test_two_ids),
        cmocka_unit_test(test_id_reused),
        cmocka_unit_test(test_missing_rank),
        cmocka_unit_test(test_silent_rank),
        cmocka_unit_test(test_stagger_silence),
        cmocka_unit_test(test_barrier_until_all_left),
        cmocka_unit_test(test_killed_rank),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_duplicate_rank),
        cmocka_unit_test(test_nranks_differ),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_unreachable_root),
    };

    signal(SIGPIPE, SIG_DFL); /* MSG_NOSIGNAL must make this harmless */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
