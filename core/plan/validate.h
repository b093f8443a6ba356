/*
 * validate.h - local checks of the AlltoAllV arguments of one rank, before
 * anything is planned, registered or sent: datatype, NULL arrays and
 * buffers, negative or overflowing counts and displacements, overlapping
 * receive blocks. Also returns the byte extents of both buffers, which is
 * what memory registration needs.
 *
 * The cross-rank check (sendcounts of i for j == recvcounts of j for i,
 * RMACOLL_ERR_MISMATCH) needs the peers' counts and is done by the plan.
 */
#ifndef RMACOLL_CORE_VALIDATE_H
#define RMACOLL_CORE_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll.h"

/**
 * Checks the arguments of rmacoll_alltoallv on one rank.
 *
 * Shapes: sendcounts, sdispls, recvcounts, rdispls hold nranks int64
 * values each, in elements of dtype. scratch is caller-provided working
 * memory of 2 * nranks int64 values (its contents on return are
 * unspecified); no memory is allocated, so this may run on the data path.
 *
 * Checks, in this order (the first failure is returned):
 *  RMACOLL_ERR_DATATYPE     dtype unknown
 *  RMACOLL_ERR_INVALID_ARG  nranks < 1, rank outside [0, nranks), a NULL
 *                           count or displacement array, NULL scratch
 *  RMACOLL_ERR_OVERFLOW     a negative count or displacement (checked for
 *                           empty blocks too), or (displ + count) * element
 *                           size above INT64_MAX bytes; send side first
 *  RMACOLL_ERR_NULL_BUFFER  NULL sendbuf with a non-zero send count, or
 *                           NULL recvbuf with a non-zero receive count
 *  RMACOLL_ERR_OVERLAP      two non-empty receive blocks share a byte, or
 *                           a non-empty send block shares a byte with a
 *                           non-empty receive block (in-place use, e.g.
 *                           sendbuf == recvbuf with one layout);
 *                           O(nranks log nranks) (heap sort of scratch)
 * Empty blocks never overlap anything and may sit anywhere. Send blocks
 * may overlap each other (they are only read).
 *
 * errbuf (may be NULL) receives one line naming the rank and the argument,
 * e.g. "rank 3: recvcounts[2] = 5 with rdispls[2] = 10 overlaps
 * rdispls[4] = 12 (block of 4)"; it is "" on success.
 *
 * send_extent / recv_extent (may be NULL) receive, on success, the number
 * of bytes of each buffer actually addressed: max over non-empty blocks of
 * (displ + count) * element size, 0 when every block is empty. They are
 * left untouched on failure.
 *
 * Thread-safe (touches only its arguments).
 */
rmacoll_status_t rmacoll__validate_args(int nranks, int rank,
                                        const void *sendbuf,
                                        const int64_t *sendcounts,
                                        const int64_t *sdispls,
                                        const void *recvbuf,
                                        const int64_t *recvcounts,
                                        const int64_t *rdispls,
                                        rmacoll_datatype_t dtype,
                                        int64_t *scratch,
                                        uint64_t *send_extent,
                                        uint64_t *recv_extent,
                                        char *errbuf, size_t errlen);

#endif /* RMACOLL_CORE_VALIDATE_H */
