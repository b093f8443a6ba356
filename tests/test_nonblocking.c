/*
 * test_nonblocking.c - rmacoll_alltoallv_start + rmacoll_test / rmacoll_wait
 * end to end: ranks as processes on virtual nodes (ce inside a node, ofi
 * between nodes). While a started call runs on communicator A, every rank
 * makes a blocking call on a second communicator B over the same ranks and
 * does host work; both receive buffers are checked byte for byte. Rank 0
 * starts A before its call on B, the others after theirs: a start that
 * did not return before A completes would deadlock (and time out) here. A call
 * on A while its request is in flight is refused without harm; argument
 * errors come back from rmacoll_wait on every rank, nothing written.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "case_file.h"

#include "cases.h"
#include "mprun.h"

typedef struct nb_arg {
    const rmacoll_case_t *c;
    const int *node_of;
    const rmacoll_config_t *cfg;
    rmacoll_unique_id_t id_b;   /* communicator B */
    int ncalls;
    int use_wait;               /* complete with rmacoll_wait, else poll rmacoll_test */
} nb_arg_t;

/* One rank's buffers of one call of case c. */
typedef struct nb_bufs {
    int64_t *sc, *sd, *rc, *rd;
    char *sbuf, *rbuf;
    size_t sbytes, rbytes, es;
    int64_t sext, rext;
} nb_bufs_t;

static int nb_make(nb_bufs_t *b, const rmacoll_case_t *c, int rank, int n, uint64_t seed)
{
    b->es = rmacoll_datatype_size(c->dtype);
    b->sc = calloc((size_t)n, 8);
    b->sd = calloc((size_t)n, 8);
    b->rc = calloc((size_t)n, 8);
    b->rd = calloc((size_t)n, 8);
    if (!b->sc || !b->sd || !b->rc || !b->rd) {
        return -1;
    }
    for (int j = 0; j < n; j++) {
        b->sc[j] = c->send[(size_t)rank * n + j];
        b->rc[j] = c->recv[(size_t)j * n + rank];
    }
    b->sext = rmacoll_displs_contiguous(n, b->sc, b->sd);
    b->rext = rmacoll_displs_gapped(n, b->rc, 3, b->rd);
    b->sbytes = (size_t)b->sext * b->es;
    b->rbytes = (size_t)b->rext * b->es;
    b->sbuf = malloc(b->sbytes + 1);
    b->rbuf = malloc(b->rbytes + 1);
    if (b->sbuf == NULL || b->rbuf == NULL) {
        return -1;
    }
    rmacoll_fill_send(b->sbuf, b->sbytes, b->es, rank, n, b->sc, b->sd, seed);
    memset(b->rbuf, RMACOLL_FILL_SENTINEL, b->rbytes);
    return 0;
}

static void nb_free(nb_bufs_t *b)
{
    free(b->sc);
    free(b->sd);
    free(b->rc);
    free(b->rd);
    free(b->sbuf);
    free(b->rbuf);
}

/* 0: exact; else prints why. */
static int nb_check(const nb_bufs_t *b, int rank, int n, uint64_t seed, const char *what)
{
    rmacoll_check_report_t rep;

    if (rmacoll_check_recv(b->rbuf, b->rbytes, b->es, rank, n, b->rc, b->rd, seed, &rep) != 0) {
        fprintf(stderr, "rank %d %s: %s\n", rank, what, rep.msg);
        return 1;
    }
    return 0;
}

/* Host work between start and completion: a checksum of the send buffer. */
static uint64_t nb_host_work(const nb_bufs_t *b)
{
    uint64_t h = 1469598103934665603ull;

    for (int pass = 0; pass < 64; pass++) {
        for (size_t i = 0; i < b->sbytes; i++) {
            h = (h ^ (unsigned char)b->sbuf[i]) * 1099511628211ull;
        }
    }
    return h;
}

static int nb_body(rmacoll_comm_t *comm, int rank, int n, void *argp)
{
    const nb_arg_t *arg = argp;
    rmacoll_comm_params_t p;
    rmacoll_comm_t *comm_b = NULL;
    char key[32];
    int rcode = 0;

    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.rank = rank;
    p.nranks = n;
    p.unique_id = &arg->id_b;
    p.config = arg->cfg;
    snprintf(key, sizeof(key), "vnode-%d", arg->node_of[rank]);
    p.node_key = key;
    if (rmacoll_comm_create(&p, &comm_b) != RMACOLL_SUCCESS) {
        return 4;
    }
    for (int call = 0; call < arg->ncalls && rcode == 0; call++) {
        nb_bufs_t a, b;
        rmacoll_request_t *req = NULL, *req2 = NULL;
        rmacoll_status_t st;
        int done = 0;
        uint64_t seed_a = 2 * (uint64_t)call, seed_b = 2 * (uint64_t)call + 1;
        volatile uint64_t sink;

        memset(&a, 0, sizeof(a));
        memset(&b, 0, sizeof(b));
        if (nb_make(&a, arg->c, rank, n, seed_a) != 0 || nb_make(&b, arg->c, rank, n, seed_b)) {
            return 3;
        }
        for (int step = 0; step < 2; step++) {
            if (step == (rank == 0 ? 0 : 1)) {
                /* rank 0 first, the others after their call on B */
                st = rmacoll_alltoallv_start(a.sext ? a.sbuf : NULL, a.sc, a.sd,
                                             a.rext ? a.rbuf : NULL, a.rc, a.rd,
                                             arg->c->dtype, comm, &req);
                if (st != RMACOLL_SUCCESS || req == NULL) {
                    fprintf(stderr, "rank %d: start: %s\n", rank, rmacoll_status_name(st));
                    return 2;
                }
                /* A is busy: another call on it is refused and starts nothing */
                if (rmacoll_alltoallv(b.sbuf, b.sc, b.sd, b.rbuf, b.rc, b.rd, arg->c->dtype,
                                      comm, NULL) != RMACOLL_ERR_INVALID_ARG ||
                    rmacoll_alltoallv_start(b.sbuf, b.sc, b.sd, b.rbuf, b.rc, b.rd,
                                            arg->c->dtype, comm,
                                            &req2) != RMACOLL_ERR_INVALID_ARG ||
                    req2 != NULL) {
                    fprintf(stderr, "rank %d: a second call on a busy communicator was "
                            "not refused\n", rank);
                    rcode = 2;
                }
                continue;
            }
            /* a whole blocking call on B (overlapped with A on rank 0) */
            st = rmacoll_alltoallv(b.sext ? b.sbuf : NULL, b.sc, b.sd, b.rext ? b.rbuf : NULL,
                                   b.rc, b.rd, arg->c->dtype, comm_b, NULL);
            if (st != RMACOLL_SUCCESS) {
                fprintf(stderr, "rank %d: call on B: %s: %s\n", rank,
                        rmacoll_status_name(st), rmacoll_comm_last_error(comm_b));
                rcode = 2;
            }
        }
        sink = nb_host_work(&a); /* host work while A runs */
        (void)sink;
        if (arg->use_wait) {
            st = rmacoll_wait(req);
        } else {
            time_t end = time(NULL) + 60;
            do {
                st = rmacoll_test(req, &done);
            } while (st == RMACOLL_SUCCESS && !done && time(NULL) < end);
            if (!done) {
                fprintf(stderr, "rank %d: rmacoll_test never reported completion\n", rank);
                rcode = 2;
            }
        }
        if (st != RMACOLL_SUCCESS) {
            fprintf(stderr, "rank %d: call on A: %s: %s\n", rank, rmacoll_status_name(st),
                    rmacoll_comm_last_error(comm));
            rcode = 2;
        }
        /* the request is released: using it again is an error */
        if (rcode == 0 && rmacoll_wait(req) != RMACOLL_ERR_INVALID_ARG) {
            fprintf(stderr, "rank %d: a released request was accepted\n", rank);
            rcode = 2;
        }
        if (rcode == 0) {
            rcode = nb_check(&a, rank, n, seed_a, "A (started)") |
                    nb_check(&b, rank, n, seed_b, "B (overlapped)");
        }
        nb_free(&a);
        nb_free(&b);
    }
    if (rmacoll_comm_destroy(comm_b) != RMACOLL_SUCCESS && rcode == 0) {
        rcode = 5;
    }
    return rcode;
}

/* A second rendezvous for communicator B: a process that made the id and
 * keeps its listener until killed. */
static pid_t id_server(rmacoll_unique_id_t *id)
{
    int fds[2];
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(600);
        if (rmacoll_get_unique_id(id) != RMACOLL_SUCCESS ||
            write(fds[1], id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
            _exit(1);
        }
        close(fds[1]);
        for (;;) {
            pause();
        }
    }
    close(fds[1]);
    assert_true(pid > 0);
    assert_int_equal(read(fds[0], id, sizeof(*id)), (ssize_t)sizeof(*id));
    close(fds[0]);
    return pid;
}

static void run_overlap(const char *file, int relay, int use_wait)
{
    rmacoll_case_t *c = load(file);
    rmacoll_config_t cfg;
    char err[256];
    nb_arg_t arg;
    int codes[64] = {0};
    mprun_opts_t o;
    pid_t server;
    int failed;

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    cfg.relay_enabled = relay;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "tcp;ofi_rxm");
    memset(&arg, 0, sizeof(arg));
    arg.c = c;
    arg.node_of = c->node_of;
    arg.cfg = &cfg;
    arg.ncalls = 3;
    arg.use_wait = use_wait;
    server = id_server(&arg.id_b);
    o = (mprun_opts_t){c->nranks, c->node_of, &cfg, 240, -1};
    print_message("case %s, relay %s, %s\n", file, relay ? "on" : "off",
                  use_wait ? "rmacoll_wait" : "rmacoll_test");
    failed = mprun(&o, nb_body, &arg, codes);
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    for (int r = 0; failed && r < c->nranks; r++) {
        print_message("rank %d exit %d\n", r, codes[r]);
    }
    rmacoll_case_free(c);
    assert_int_equal(failed, 0);
}

static void test_overlap_wait(void **state)
{
    (void)state;
    run_overlap("uneven_nodes_3_2.txt", 1, 1);
    run_overlap("moe_zipf_2x4.txt", 0, 1);
}

static void test_overlap_test(void **state)
{
    (void)state;
    run_overlap("symmetric_small_2x2.txt", 1, 0);
    run_overlap("single_rank_node_1_4.txt", 1, 0);
}

/* Errors of a started call come back from rmacoll_wait, the same on every
 * rank, with the receive buffer untouched. */
static int nb_error_body(rmacoll_comm_t *comm, int rank, int n, void *argp)
{
    const rmacoll_case_t *c = argp;
    nb_bufs_t a;
    rmacoll_request_t *req = NULL;
    rmacoll_status_t st;
    int rcode = 0;

    memset(&a, 0, sizeof(a));
    if (nb_make(&a, c, rank, n, 7) != 0) {
        return 3;
    }
    st = rmacoll_alltoallv_start(a.sext ? a.sbuf : NULL, a.sc, a.sd, a.rext ? a.rbuf : NULL,
                                 a.rc, a.rd, c->dtype, comm, &req);
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll_wait(req);
    }
    if (st != RMACOLL_ERR_MISMATCH) {
        fprintf(stderr, "rank %d: %s, expected RMACOLL_ERR_MISMATCH\n", rank,
                rmacoll_status_name(st));
        rcode = 2;
    }
    for (size_t i = 0; rcode == 0 && i < a.rbytes; i++) {
        if ((unsigned char)a.rbuf[i] != RMACOLL_FILL_SENTINEL) {
            fprintf(stderr, "rank %d: failed call wrote byte %zu\n", rank, i);
            rcode = 1;
        }
    }
    /* the communicator stays usable: a blocking call with NULL req args */
    if (rcode == 0 && rmacoll_alltoallv_start(NULL, a.sc, a.sd, NULL, a.rc, a.rd, c->dtype,
                                              comm, NULL) != RMACOLL_ERR_INVALID_ARG) {
        rcode = 2;
    }
    nb_free(&a);
    return rcode;
}

static void test_error_from_wait(void **state)
{
    rmacoll_case_t *c = load("mismatch_2x2.txt");
    rmacoll_config_t cfg;
    char err[256];
    int codes[64] = {0};
    mprun_opts_t o;

    (void)state;
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    o = (mprun_opts_t){c->nranks, c->node_of, &cfg, 120, -1};
    assert_int_equal(mprun(&o, nb_error_body, c, codes), 0);
    rmacoll_case_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_from_wait),
        cmocka_unit_test(test_overlap_wait),
        cmocka_unit_test(test_overlap_test),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
