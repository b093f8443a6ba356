/*
 * test_threads.c - several ranks in one process, one rank per thread (as
 * with ncclCommInitRank from threads): host memory, virtual nodes, the ce
 * host backend inside a node and libfabric between nodes. Every count
 * matrix of tests/cases, every receive byte checked (tests/support/e2e_body.c).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "e2e_body.h"

#define MAXR 16

typedef struct thread_arg {
    int rank;
    const rmacoll_unique_id_t *id;
    const rmacoll_config_t *cfg;
    const rmacoll_case_t *c;
    int ncalls;
    int result;   /* e2e_body's code, or 200 when create failed */
} thread_arg_t;

static void *rank_main(void *p)
{
    thread_arg_t *a = p;
    rmacoll_comm_params_t prm;
    rmacoll_comm_t *comm = NULL;
    char key[32];
    e2e_arg_t arg = {a->c, 1, a->ncalls,
                     a->c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS, 1};

    memset(&prm, 0, sizeof(prm));
    prm.struct_size = sizeof(prm);
    prm.rank = a->rank;
    prm.nranks = a->c->nranks;
    prm.unique_id = a->id;
    prm.config = a->cfg;
    snprintf(key, sizeof(key), "thread-node-%d", a->c->node_of[a->rank]);
    prm.node_key = key;
    if (rmacoll_comm_create(&prm, &comm) != RMACOLL_SUCCESS) {
        a->result = 200;
        return NULL;
    }
    a->result = e2e_body(comm, a->rank, a->c->nranks, &arg);
    if (rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS && a->result == 0) {
        a->result = 201;
    }
    return NULL;
}

static void run_case(const char *file, const char *provider)
{
    char path[512], err[256];
    rmacoll_case_t *c = NULL;
    rmacoll_config_t cfg;
    rmacoll_unique_id_t id;
    pthread_t th[MAXR];
    thread_arg_t ta[MAXR];

    snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, file);
    if (rmacoll_case_load(path, &c, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fail_msg("%s", err);
    }
    assert_true(c->nranks <= MAXR);
    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)), RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", provider);
    assert_int_equal(rmacoll_get_unique_id(&id), RMACOLL_SUCCESS);
    for (int r = 0; r < c->nranks; r++) {
        ta[r] = (thread_arg_t){r, &id, &cfg, c, 3, -1};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &ta[r]), 0);
    }
    for (int r = 0; r < c->nranks; r++) {
        pthread_join(th[r], NULL);
    }
    for (int r = 0; r < c->nranks; r++) {
        if (ta[r].result != 0) {
            print_message("%s over %s: rank %d result %d\n", file, provider, r,
                          ta[r].result);
        }
        assert_int_equal(ta[r].result, 0);
    }
    rmacoll_case_free(c);
}

static const char *const cases[] = {
    "symmetric_small_2x2.txt", "moe_zipf_2x4.txt", "uneven_nodes_3_2.txt",
    "single_rank_node_1_4.txt", "sparse_two_cross.txt", "half_idle.txt",
    "one_column_zero.txt", "all_zero.txt", "mismatch_2x2.txt", "incast_16_to_0.txt",
};

static void test_cases_tcp(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        run_case(cases[k], "tcp;ofi_rxm");
    }
}

static void test_cases_shm(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        run_case(cases[k], "shm");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_tcp),
        cmocka_unit_test(test_cases_shm),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
