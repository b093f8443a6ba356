/*
 * main.c - a program built against an installed rmacoll (CMake package,
 * pkg-config, static archive), run by .ci/run: rank 0 makes a unique id,
 * forks NRANKS-1 more ranks on two virtual nodes, every rank runs one
 * AlltoAllV of uneven counts and checks every received byte and the
 * sentinel gaps between blocks. Exit 0 only if every rank saw exact bytes.
 */
#include <rmacoll.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRANKS 4
#define GAP 3              /* sentinel elements between receive blocks */
#define SENTINEL 0xa5u

/* Elements rank i sends to rank j: uneven, some zero. */
static int64_t count_of(int i, int j)
{
    return (i * 7 + j * 3) % 5 == 0 ? 0 : 1 + (i * 13 + j * 5) % 9;
}

static uint32_t value_of(int i, int j, int64_t k)
{
    return ((uint32_t)i << 24) | ((uint32_t)j << 16) | (uint32_t)k;
}

static int run_rank(int rank, const rmacoll_unique_id_t *id)
{
    rmacoll_comm_params_t p;
    rmacoll_comm_t *comm = NULL;
    int64_t sc[NRANKS], sd[NRANKS], rc[NRANKS], rd[NRANKS], so = 0, ro = 0;
    uint32_t *send, *recv;
    unsigned char *bytes;
    int bad = 0, version = 0;
    char node[16];
    rmacoll_status_t st;

    snprintf(node, sizeof(node), "%d", rank / 2);   /* two virtual nodes */
    setenv("RMACOLL_NODE_ID", node, 1);
    for (int j = 0; j < NRANKS; j++) {
        sc[j] = count_of(rank, j);
        sd[j] = so;
        so += sc[j];
        rc[j] = count_of(j, rank);
        rd[j] = ro;
        ro += rc[j] + GAP;
    }
    send = malloc((size_t)(so + 1) * sizeof(*send));
    recv = malloc((size_t)(ro + 1) * sizeof(*recv));
    if (send == NULL || recv == NULL)
        return 1;
    for (int j = 0; j < NRANKS; j++)
        for (int64_t k = 0; k < sc[j]; k++)
            send[sd[j] + k] = value_of(rank, j, k);
    memset(recv, SENTINEL, (size_t)(ro + 1) * sizeof(*recv));

    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.rank = rank;
    p.nranks = NRANKS;
    p.unique_id = id;
    st = rmacoll_comm_create(&p, &comm);
    if (st == RMACOLL_SUCCESS)
        st = rmacoll_alltoallv(send, sc, sd, recv, rc, rd, RMACOLL_UINT32,
                               comm, NULL);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "consumer: rank %d: %s: %s\n", rank,
                rmacoll_status_name(st), rmacoll_comm_last_error(comm));
        rmacoll_comm_destroy(comm);
        return 1;
    }
    bytes = (unsigned char *)recv;
    for (int j = 0; j < NRANKS; j++) {
        for (int64_t k = 0; k < rc[j]; k++)
            if (recv[rd[j] + k] != value_of(j, rank, k))
                bad++;
        for (int64_t k = 0; k < GAP; k++)
            for (size_t b = 0; b < sizeof(*recv); b++)
                if (bytes[(size_t)(rd[j] + rc[j] + k) * sizeof(*recv) + b] !=
                    SENTINEL)
                    bad++;
    }
    if (rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS)
        bad++;
    rmacoll_get_version(&version);
    printf("consumer: rank %d: rmacoll %s (%d): %lld elements received, %d "
           "wrong\n", rank, rmacoll_version_string(), version,
           (long long)(ro - NRANKS * GAP), bad);
    fflush(stdout);   /* forked ranks leave by _exit */
    free(send);
    free(recv);
    return bad != 0;
}

int main(void)
{
    rmacoll_unique_id_t id;
    pid_t pids[NRANKS];
    int failed = 0;

    if (rmacoll_get_unique_id(&id) != RMACOLL_SUCCESS) {
        fprintf(stderr, "consumer: rmacoll_get_unique_id failed\n");
        return 1;
    }
    fflush(NULL);
    for (int r = 1; r < NRANKS; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(run_rank(r, &id));
        if (pids[r] < 0)
            return 1;
    }
    failed = run_rank(0, &id);
    for (int r = 1; r < NRANKS; r++) {
        int ws = 0;

        if (waitpid(pids[r], &ws, 0) < 0 || !WIFEXITED(ws) ||
            WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "consumer: rank %d failed\n", r);
            failed = 1;
        }
    }
    printf("consumer: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
