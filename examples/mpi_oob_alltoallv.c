/*
 * mpi_oob_alltoallv.c - embedding rmacoll in an MPI program with custom
 * out-of-band callbacks: rmacoll's wire-up runs over MPI_Allgather and
 * MPI_Barrier on the application's own communicator (rmacoll_oob_t), so
 * no unique id, rendezvous address or launcher variable is involved.
 *
 *   mpirun -np 4 ./mpi_oob_alltoallv
 *
 * Each rank sends (i + j) % 3 + 1 int32 elements to rank j, and checks
 * every received element and the sentinels between the blocks.
 */
#include <mpi.h>
#include <rmacoll.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* allgather: every rank gives `bytes`, recv gets nranks * bytes. */
static rmacoll_status_t oob_allgather(void *ctx, const void *send, void *recv,
                                      size_t bytes)
{
    MPI_Comm comm = *(MPI_Comm *)ctx;

    if (bytes > (size_t)0x7fffffff)
        return RMACOLL_ERR_OVERFLOW;
    return MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes,
                         MPI_BYTE, comm) == MPI_SUCCESS
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_BOOTSTRAP;
}

static rmacoll_status_t oob_barrier(void *ctx)
{
    return MPI_Barrier(*(MPI_Comm *)ctx) == MPI_SUCCESS
               ? RMACOLL_SUCCESS
               : RMACOLL_ERR_BOOTSTRAP;
}

int main(int argc, char **argv)
{
    MPI_Comm comm;
    rmacoll_oob_t oob;
    rmacoll_comm_params_t p;
    rmacoll_comm_t *rc = NULL;
    rmacoll_status_t st;
    int rank, n, bad = 0, allbad = 0;
    int64_t *sc, *sd, *rcnt, *rd, so = 0, ro = 0;
    int32_t *send, *recv;

    MPI_Init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);

    oob.allgather = oob_allgather;
    oob.barrier = oob_barrier;
    oob.ctx = &comm;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.rank = rank;
    p.nranks = n;
    p.oob = &oob;
    st = rmacoll_comm_create(&p, &rc);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: rmacoll_comm_create: %s\n", rank,
                rmacoll_status_name(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    sc = calloc((size_t)n * 4, sizeof(int64_t));
    if (sc == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    sd = sc + n;
    rcnt = sc + 2 * n;
    rd = sc + 3 * n;
    for (int j = 0; j < n; j++) {
        sc[j] = (rank + j) % 3 + 1;
        sd[j] = so;
        so += sc[j];
        rcnt[j] = (j + rank) % 3 + 1;
        rd[j] = ro;
        ro += rcnt[j] + 1;            /* one sentinel after each block */
    }
    send = malloc((size_t)so * sizeof(*send));
    recv = malloc((size_t)ro * sizeof(*recv));
    if (send == NULL || recv == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int j = 0; j < n; j++)
        for (int64_t k = 0; k < sc[j]; k++)
            send[sd[j] + k] = rank * 1000000 + j * 1000 + (int32_t)k;
    for (int64_t k = 0; k < ro; k++)
        recv[k] = -1;

    st = rmacoll_alltoallv(send, sc, sd, recv, rcnt, rd, RMACOLL_INT32, rc,
                           NULL);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: rmacoll_alltoallv: %s: %s\n", rank,
                rmacoll_status_name(st), rmacoll_comm_last_error(rc));
        bad = 1;
    } else {
        for (int j = 0; j < n; j++) {
            for (int64_t k = 0; k < rcnt[j]; k++)
                bad += recv[rd[j] + k] != j * 1000000 + rank * 1000 + (int32_t)k;
            bad += recv[rd[j] + rcnt[j]] != -1;
        }
    }
    if (rmacoll_comm_destroy(rc) != RMACOLL_SUCCESS)
        bad++;
    MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, comm);
    if (rank == 0)
        printf("mpi_oob_alltoallv: %d ranks, rmacoll %s: %s (%d wrong)\n", n,
               rmacoll_version_string(), allbad ? "FAILED" : "ok", allbad);
    free(send);
    free(recv);
    free(sc);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return allbad != 0;
}
