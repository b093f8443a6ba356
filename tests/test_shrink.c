/*
 * test_shrink.c - rmacoll_comm_shrink (issue 33 item 4): ranks as
 * processes on virtual nodes (ce host inside a node, libfabric tcp;ofi_rxm
 * on loopback between nodes). One exact call, then a rank is killed
 * (SIGKILL), stopped (SIGSTOP) or aborts (rmacoll_comm_abort), or nothing
 * happens; every survivor's second call fails (except with nothing), every
 * survivor shrinks, gets the agreed size and its rank in old rank order,
 * and makes an exact alltoallv on the new communicator (gapped blocks,
 * sentinel gaps, every byte checked); both communicators are destroyed and
 * no /dev/shm entry of any rank's process is left.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cases.h"
#include "mprun.h"
#include "rmacoll.h"

enum { HOW_NONE, HOW_KILL, HOW_STOP, HOW_ABORT, HOW_LATE, HOW_ROOT };
static const char *how_name[] = {"nothing", "kill -9", "SIGSTOP", "abort", "late",
                                 "root killed"};

/* the victim is left out of the new communicator */
#define EXCLUDES(how) ((how) == HOW_KILL || (how) == HOW_STOP || (how) == HOW_LATE)

typedef struct shr_shared {
    _Atomic int pid[16];
    _Atomic int ready;      /* ranks done with the first call */
    _Atomic int done;       /* survivors done with the new communicator */
    _Atomic int newrank[16];
    _Atomic int newsize[16];
    _Atomic uint64_t shrink_ms[16];
    _Atomic int late_rc;    /* the stopped rank, resumed: 0 ok */
} shr_shared_t;

typedef struct shr_arg {
    shr_shared_t *sh;
    int how;
    int victim;
    uint64_t timeout_ms;
} shr_arg_t;

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static rmacoll_config_t base_config(uint64_t timeout_ms, const char *heartbeat_ms)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = timeout_ms;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "tcp;ofi_rxm");
    assert_int_equal(rmacoll_config_set(&cfg, "heartbeat_ms", heartbeat_ms), RMACOLL_SUCCESS);
    return cfg;
}

/* Elements rank src sends rank dst (some zero). */
static int64_t count_of(int src, int dst)
{
    return (src + 2 * dst) % 5 == 0 ? 0 : 40 + 17 * src + 29 * dst;
}

/* One exact int32 alltoallv on comm (rank of n), blocks apart by a gap:
 * 0, or 2 (the call failed), 4 (a wrong element or gap byte). */
static int exact_call(rmacoll_comm_t *comm, int rank, int n, uint64_t iter)
{
    int64_t sc[16], sd[16], rc[16], rd[16], so = 0, ro = 0;
    unsigned char *send, *recv;
    rmacoll_check_report_t rep;
    rmacoll_status_t st;
    int ret = 0;

    for (int j = 0; j < n; j++) {
        sc[j] = count_of(rank, j);
        sd[j] = so + 3;
        so = sd[j] + sc[j];
        rc[j] = count_of(j, rank);
        rd[j] = ro + 5;
        ro = rd[j] + rc[j];
    }
    send = malloc((size_t)(so + 3) * 4);
    recv = malloc((size_t)(ro + 5) * 4);
    if (send == NULL || recv == NULL) {
        free(send);
        free(recv);
        return 3;
    }
    rmacoll_fill_send(send, (size_t)(so + 3) * 4, 4, rank, n, sc, sd, iter);
    memset(recv, RMACOLL_FILL_SENTINEL, (size_t)(ro + 5) * 4);
    st = rmacoll_alltoallv(send, sc, sd, recv, rc, rd, RMACOLL_INT32, comm, NULL);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d of %d: exact call: %s: %s\n", rank, n,
                rmacoll_status_name(st), rmacoll_comm_last_error(comm));
        ret = 2;
    } else if (rmacoll_check_recv(recv, (size_t)(ro + 5) * 4, 4, rank, n, rc, rd, iter,
                                  &rep) != 0) {
        fprintf(stderr, "rank %d of %d: exact call: %s\n", rank, n, rep.msg);
        ret = 4;
    }
    free(send);
    free(recv);
    return ret;
}

static void wait_count(_Atomic int *v, int want, uint64_t limit_ms)
{
    for (uint64_t t0 = mono_ms(); atomic_load(v) < want && mono_ms() - t0 < limit_ms;) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The resumed stopped rank: its call and its shrink fail promptly, its
 * old communicator is destroyed by mprun afterwards. */
static int late_rank(rmacoll_comm_t *comm, int rank, int nranks)
{
    rmacoll_comm_t *nc = NULL;
    uint64_t t0 = mono_ms();
    rmacoll_status_t st = exact_call(comm, rank, nranks, 2) == 0 ? RMACOLL_SUCCESS
                                                                 : RMACOLL_ERR_PEER;
    rmacoll_status_t ss = rmacoll_comm_shrink(comm, &nc);
    uint64_t dt = mono_ms() - t0;

    fprintf(stderr, "rank %d (resumed or late): call %s, shrink %s in %llu ms: %s\n", rank,
            rmacoll_status_name(st), rmacoll_status_name(ss), (unsigned long long)dt,
            rmacoll_comm_last_error(comm));
    return st == RMACOLL_SUCCESS ? 20 : ss == RMACOLL_SUCCESS || nc != NULL ? 21
           : ss != RMACOLL_ERR_BOOTSTRAP ? 22 : dt > 10000 ? 23
           : strstr(rmacoll_comm_last_error(comm), "excluded from the shrink") == NULL ? 24
                                                                                     : 0;
}

/* The victim's part before the survivors' second call. */
static int victim_act(rmacoll_comm_t *comm, const shr_arg_t *a, int rank, int nranks)
{
    wait_count(&a->sh->ready, nranks, 20000);
    if (a->how == HOW_KILL) {
        raise(SIGKILL);
    }
    if (a->how == HOW_STOP) {
        raise(SIGSTOP);
        return late_rank(comm, rank, nranks); /* resumed by the last survivor */
    }
    if (a->how == HOW_ABORT) {
        assert_int_equal(rmacoll_comm_abort(comm), RMACOLL_SUCCESS);
    }
    if (a->how == HOW_LATE) {
        /* alive but silent: asks only after the survivors are done */
        wait_count(&a->sh->done, nranks - 1, 60000);
        return late_rank(comm, rank, nranks);
    }
    return -1; /* goes on as a survivor */
}

/* The root's process is killed after the first call: every rank's shrink
 * fails with BOOTSTRAP, saying so, within a few seconds; the old
 * communicator is then destroyed locally (by mprun). */
static int root_lost(rmacoll_comm_t *comm, const shr_arg_t *a, int rank, int nranks)
{
    rmacoll_comm_t *nc = NULL;
    uint64_t t0;
    rmacoll_status_t st;

    wait_count(&a->sh->ready, nranks, 20000);
    if (rank == 0) {
        kill(mprun_root_pid, SIGKILL);
    }
    atomic_fetch_add(&a->sh->done, 1);
    wait_count(&a->sh->done, nranks, 20000);
    t0 = mono_ms();
    st = rmacoll_comm_shrink(comm, &nc);
    atomic_store(&a->sh->shrink_ms[rank], mono_ms() - t0);
    fprintf(stderr, "rank %d: shrink without a root: %s in %llu ms: %s\n", rank,
            rmacoll_status_name(st), (unsigned long long)(mono_ms() - t0),
            rmacoll_comm_last_error(comm));
    return st != RMACOLL_ERR_BOOTSTRAP || nc != NULL ? 30
           : mono_ms() - t0 > 15000 ? 31
           : strstr(rmacoll_comm_last_error(comm), "the process that made the unique id") == NULL
               ? 32 : 0;
}

static int shrink_body(rmacoll_comm_t *comm, int rank, int nranks, void *p)
{
    /* Long because: one rank's whole scenario in order (first call, the
     * victim's act, the failing call, the shrink and its checks, the new
     * communicator's call, the resume of a stopped rank). */
    const shr_arg_t *a = p;
    int survivors = EXCLUDES(a->how) ? nranks - 1 : nranks;
    rmacoll_comm_t *nc = NULL;
    int rc = exact_call(comm, rank, nranks, 1), nr = -1, nn = -1, want_rank;
    uint64_t t0;
    rmacoll_status_t st;

    atomic_store(&a->sh->pid[rank], (int)getpid());
    atomic_fetch_add(&a->sh->ready, 1);
    if (rc != 0) {
        return rc;
    }
    if (a->how == HOW_ROOT) {
        return root_lost(comm, a, rank, nranks);
    }
    if (rank == a->victim && a->how != HOW_NONE) {
        int v = victim_act(comm, a, rank, nranks);
        if (v >= 0) {
            atomic_store(&a->sh->late_rc, v);
            return v;
        }
    }
    if (a->how != HOW_NONE && a->how != HOW_LATE) {
        /* the second call fails everywhere (the abort word, the root's
         * report or the heartbeat) */
        if (a->how == HOW_ABORT && rank != a->victim) {
            wait_count(&a->sh->ready, nranks, 20000);
        }
        if (exact_call(comm, rank, nranks, 2) == 0) {
            return 10;
        }
    }
    t0 = mono_ms();
    st = rmacoll_comm_shrink(comm, &nc);
    atomic_store(&a->sh->shrink_ms[rank], mono_ms() - t0);
    if (st != RMACOLL_SUCCESS || nc == NULL) {
        fprintf(stderr, "rank %d: shrink: %s: %s\n", rank, rmacoll_status_name(st),
                rmacoll_comm_last_error(comm));
        return 11;
    }
    if (rmacoll_comm_rank(nc, &nr) != RMACOLL_SUCCESS ||
        rmacoll_comm_size(nc, &nn) != RMACOLL_SUCCESS) {
        return 12;
    }
    atomic_store(&a->sh->newrank[rank], nr);
    atomic_store(&a->sh->newsize[rank], nn);
    want_rank = EXCLUDES(a->how) && rank > a->victim ? rank - 1 : rank;
    if (a->how == HOW_LATE && mono_ms() - t0 + 500 < a->timeout_ms) {
        return 17; /* the root waits timeout_ms for a rank nobody named */
    }
    if (nn != survivors || nr != want_rank) {
        fprintf(stderr, "rank %d: new rank %d of %d, want %d of %d\n", rank, nr, nn,
                want_rank, survivors);
        return 13;
    }
    /* a second shrink of the old one is refused; its calls fail */
    {
        rmacoll_comm_t *again = NULL;
        if (rmacoll_comm_shrink(comm, &again) != RMACOLL_ERR_INVALID_ARG || again != NULL) {
            return 14;
        }
    }
    rc = exact_call(nc, nr, nn, 3);
    if (rc == 0) {
        rc = exact_call(nc, nr, nn, 4) ? 15 : 0;
    }
    if (rmacoll_comm_destroy(nc) != RMACOLL_SUCCESS && rc == 0) {
        rc = 16;
    }
    if (atomic_fetch_add(&a->sh->done, 1) + 1 == survivors && a->how == HOW_STOP) {
        int pid = atomic_load(&a->sh->pid[a->victim]);
        if (pid > 0) {
            kill(pid, SIGCONT);
        }
    }
    return rc; /* mprun destroys the old communicator: local, must succeed */
}

/* Entries "rmacoll-<pid>-..." in /dev/shm (removed after counting). */
static int shm_left(int pid)
{
    char prefix[32], path[300];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int found = 0;

    snprintf(prefix, sizeof(prefix), "rmacoll-%d-", pid);
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            print_message("left behind by pid %d: /dev/shm/%s\n", pid, e->d_name);
            snprintf(path, sizeof(path), "/%s", e->d_name);
            shm_unlink(path);
            found++;
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

static void run_shrink(const int *node_of, int nranks, int how, int victim,
                       uint64_t timeout_ms, const char *heartbeat_ms)
{
    shr_shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shr_arg_t a = {sh, how, victim, timeout_ms};
    rmacoll_config_t cfg = base_config(timeout_ms, heartbeat_ms);
    mprun_opts_t o = {nranks, node_of, &cfg, 120, -1};
    int codes[16] = {0}, leaked = 0;
    uint64_t worst = 0;

    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    (void)mprun(&o, shrink_body, &a, codes);
    for (int r = 0; r < nranks; r++) {
        int want = how == HOW_KILL && r == victim ? 128 + SIGKILL : 0;
        int excluded = EXCLUDES(how) && r == victim;
        excluded |= how == HOW_ROOT;
        print_message("%s, rank %d: exit %d, new rank %d of %d, shrink %llu ms\n",
                      how_name[how], r, codes[r], excluded ? -1 : atomic_load(&sh->newrank[r]),
                      excluded ? 0 : atomic_load(&sh->newsize[r]),
                      (unsigned long long)atomic_load(&sh->shrink_ms[r]));
        assert_int_equal(codes[r], want);
        if (!excluded && atomic_load(&sh->shrink_ms[r]) > worst) {
            worst = atomic_load(&sh->shrink_ms[r]);
        }
        leaked += shm_left(atomic_load(&sh->pid[r]));
    }
    print_message("%s on %d ranks: slowest shrink (agreement + new communicator) %llu ms\n",
                  how_name[how], nranks, (unsigned long long)worst);
    munmap(sh, sizeof(*sh));
    assert_int_equal(leaked, 0);
}

static const int two_nodes[4] = {0, 0, 1, 1}, one_node[4] = {0, 0, 0, 0};

/* kill -9 of one rank after a call: the root saw its connection close */
static void test_shrink_killed(void **state)
{
    (void)state;
    run_shrink(two_nodes, 4, HOW_KILL, 1, 20000, "500");
    run_shrink(one_node, 4, HOW_KILL, 2, 20000, "500");
    run_shrink(two_nodes, 4, HOW_KILL, 0, 20000, "500"); /* rank 0: renumbering */
}

/* SIGSTOP: the heartbeat (or on one node the silence timeout) names it,
 * the survivors name it silent, the root excludes it without waiting;
 * resumed, its call and shrink fail at once */
static void test_shrink_stopped(void **state)
{
    (void)state;
    run_shrink(two_nodes, 4, HOW_STOP, 2, 20000, "500");
    /* one node, no heartbeat: the silence timeout (2 s) names it */
    run_shrink(one_node, 4, HOW_STOP, 1, 2000, "0");
}

/* rmacoll_comm_abort on one rank: it is alive and shrinks with the others
 * (as ULFM's revoke): the new communicator has every rank */
static void test_shrink_aborted(void **state)
{
    (void)state;
    run_shrink(two_nodes, 4, HOW_ABORT, 1, 20000, "500");
}

/* a live rank that does not ask (nobody named it): the others' shrink
 * ends timeout_ms (3 s here) after the first ask without it; its own late
 * ask fails at once (excluded), its communicator is destroyed locally */
static void test_shrink_late_rank(void **state)
{
    (void)state;
    run_shrink(two_nodes, 4, HOW_LATE, 3, 3000, "500");
}

/* the root's process died: no agreement is possible, said at once */
static void test_shrink_root_lost(void **state)
{
    (void)state;
    run_shrink(two_nodes, 4, HOW_ROOT, -1, 20000, "0");
}

/* nobody failed: a same-size communicator that works */
static void test_shrink_healthy(void **state)
{
    (void)state;
    run_shrink(two_nodes, 4, HOW_NONE, -1, 20000, "500");
    run_shrink(one_node, 4, HOW_NONE, -1, 20000, "0");
}

/* an embedder's out-of-band allgather: no agreement possible */
static rmacoll_status_t one_rank_allgather(void *ctx, const void *send, void *recv,
                                           size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return RMACOLL_SUCCESS;
}

static void test_shrink_oob_unsupported(void **state)
{
    rmacoll_oob_t oob = {0};
    rmacoll_comm_params_t p = {0};
    rmacoll_config_t cfg = base_config(5000, "0");
    rmacoll_comm_t *comm = NULL, *nc = (rmacoll_comm_t *)&p;

    (void)state;
    oob.allgather = one_rank_allgather;
    p.struct_size = sizeof(p);
    p.rank = 0;
    p.nranks = 1;
    p.oob = &oob;
    p.config = &cfg;
    assert_int_equal(rmacoll_comm_create(&p, &comm), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_comm_shrink(comm, &nc), RMACOLL_ERR_UNSUPPORTED);
    assert_null(nc);
    assert_non_null(strstr(rmacoll_comm_last_error(comm), "out-of-band allgather"));
    assert_int_equal(rmacoll_comm_shrink(NULL, &nc), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_comm_shrink(comm, NULL), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_comm_destroy(comm), RMACOLL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shrink_oob_unsupported),
        cmocka_unit_test(test_shrink_healthy),
        cmocka_unit_test(test_shrink_killed),
        cmocka_unit_test(test_shrink_stopped),
        cmocka_unit_test(test_shrink_aborted),
        cmocka_unit_test(test_shrink_late_rank),
        cmocka_unit_test(test_shrink_root_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
