/*
 * nccl.c - rmacoll-perf --baseline nccl: NCCL's grouped
 * ncclSend/ncclRecv on the same counts and buffers, and the NCCL
 * communicator over the same ranks. Compiled to nothing without
 * RMACOLL_PERF_HAVE_NCCL.
 */
#include "perf_tool.h"

#ifdef RMACOLL_PERF_HAVE_NCCL
static ncclDataType_t perf_nccl_type(rmacoll_datatype_t d)
{
    switch (d) {
    case RMACOLL_INT8: return ncclInt8;
    case RMACOLL_UINT8: return ncclUint8;
    case RMACOLL_INT32: return ncclInt32;
    case RMACOLL_UINT32: return ncclUint32;
    case RMACOLL_INT64: return ncclInt64;
    case RMACOLL_UINT64: return ncclUint64;
    case RMACOLL_FLOAT16: return ncclFloat16;
    case RMACOLL_BFLOAT16: return ncclBfloat16;
    case RMACOLL_FLOAT32: return ncclFloat32;
    case RMACOLL_FLOAT64: return ncclFloat64;
    /* Moved, never reduced: the others travel as an NCCL type of their
     * size (perf_nccl_mult gives the count factor of complex128). */
    case RMACOLL_BOOL: return ncclUint8;
    case RMACOLL_INT16: return ncclFloat16;
    case RMACOLL_UINT16: return ncclFloat16;
    case RMACOLL_COMPLEX64: return ncclUint64;
    case RMACOLL_COMPLEX128: return ncclUint64;
    default: return ncclUint8;
    }
}

/* NCCL elements per rmacoll element. */
static size_t perf_nccl_mult(rmacoll_datatype_t d)
{
    return d == RMACOLL_COMPLEX128 ? 2 : 1;
}

/* AlltoAllV as PyTorch's all_to_all_single with splits: one group of
 * ncclSend/ncclRecv, skipping zero counts. */
rmacoll_status_t perf_nccl_a2av(void *ctx, const void *sendbuf,
                                const int64_t *sendcounts,
                                const int64_t *sdispls, void *recvbuf,
                                const int64_t *recvcounts,
                                const int64_t *rdispls,
                                rmacoll_datatype_t dtype, char *err,
                                size_t errlen)
{
    perf_rmacoll_t *p = ctx;
    size_t es = rmacoll_datatype_size(dtype);
    ncclDataType_t t = perf_nccl_type(dtype);
    size_t m = perf_nccl_mult(dtype);
    cudaStream_t s = (cudaStream_t)p->stream;
    ncclResult_t nr, nr2;

    nr = ncclGroupStart();
    for (int j = 0; j < p->nranks && nr == ncclSuccess; j++) {
        if (sendcounts[j] > 0)
            nr = ncclSend((const char *)sendbuf + (size_t)sdispls[j] * es,
                          (size_t)sendcounts[j] * m, t, j, p->nccl, s);
        if (nr == ncclSuccess && recvcounts[j] > 0)
            nr = ncclRecv((char *)recvbuf + (size_t)rdispls[j] * es,
                          (size_t)recvcounts[j] * m, t, j, p->nccl, s);
    }
    nr2 = ncclGroupEnd();
    if (nr == ncclSuccess)
        nr = nr2;
    if (nr != ncclSuccess) {
        snprintf(err, errlen, "rank %d: nccl send/recv group: %s (%s)",
                 p->rank, ncclGetErrorString(nr), ncclGetLastError(p->nccl));
        return RMACOLL_ERR_TRANSPORT;
    }
    return RMACOLL_SUCCESS;
}

/* NCCL communicator over the same ranks: rank 0 makes the id (after fork,
 * in this process) and sends it to every rank with a host AlltoAllV in
 * which only rank 0 sends. */
int perf_nccl_setup(perf_rmacoll_t *p)
{
    ncclUniqueId id;
    int n = p->nranks;
    int64_t *sc = p->counts, *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    unsigned char msg[1 + sizeof(ncclUniqueId)];
    size_t msg_bytes;
    unsigned char *all = NULL;
    rmacoll_status_t st;
    ncclResult_t nr = ncclSuccess;

    if (p->local_size > p->ndevices) {
        if (p->rank == 0)
            fprintf(stderr, PERF_NAME ": --baseline nccl needs one rank per "
                    "GPU (NCCL rejects two ranks on one device): %d local "
                    "ranks, %d GPUs; use -np %d\n", p->local_size,
                    p->ndevices, p->ndevices);
        return 1;
    }
    /* msg = [ok byte][id]: a failed ncclGetUniqueId stops every rank
     * instead of leaving them in ncclCommInitRank. */
    msg_bytes = 1 + sizeof(id);
    memset(msg, 0, sizeof(msg));
    if (p->rank == 0) {
        nr = ncclGetUniqueId(&id);
        if (nr != ncclSuccess)
            fprintf(stderr, PERF_NAME ": rank 0: ncclGetUniqueId: %s\n",
                    ncclGetErrorString(nr));
        msg[0] = nr == ncclSuccess;
        memcpy(msg + 1, &id, sizeof(id));
        all = calloc((size_t)n, msg_bytes);
        if (all == NULL)
            msg[0] = 0;   /* sends nothing useful; the others stop too */
        else
            for (int j = 0; j < n; j++)
                memcpy(all + (size_t)j * msg_bytes, msg, msg_bytes);
    }
    for (int j = 0; j < n; j++) {
        sc[j] = p->rank == 0 && all != NULL ? (int64_t)msg_bytes : 0;
        sd[j] = p->rank == 0 ? (int64_t)((size_t)j * msg_bytes) : 0;
        rc[j] = j == 0 ? (int64_t)msg_bytes : 0;
        rd[j] = 0;
    }
    if (p->rank == 0 && all == NULL) {
        /* Cannot send: fail the exchange on every rank (count mismatch). */
        fprintf(stderr, PERF_NAME ": rank 0: out of memory for the nccl id\n");
    }
    st = rmacoll_alltoallv(all, sc, sd, msg, rc, rd, RMACOLL_UINT8, p->comm,
                           NULL);
    free(all);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rank %d: nccl id exchange failed: %s\n",
                p->rank, rmacoll_comm_last_error(p->comm));
        return 1;
    }
    if (msg[0] != 1) {
        fprintf(stderr, PERF_NAME ": rank %d: rank 0 has no nccl id\n",
                p->rank);
        return 1;
    }
    memcpy(&id, msg + 1, sizeof(id));
    nr = ncclCommInitRank(&p->nccl, n, id, p->rank);
    if (nr != ncclSuccess) {
        fprintf(stderr, PERF_NAME ": rank %d: ncclCommInitRank on device %d: "
                "%s\n", p->rank, p->device, ncclGetErrorString(nr));
        p->nccl = NULL;
        return 1;
    }
    return 0;
}
#endif /* RMACOLL_PERF_HAVE_NCCL */
