/*
 * validate.c - local checks of the AlltoAllV arguments (see validate.h).
 * No allocation: the overlap check heap-sorts (displacement, index) pairs
 * in caller-provided scratch memory (Williams' heapsort, CACM 7(6), 1964),
 * so it is O(n log n) in time and O(1) in extra space.
 */
#include "core/plan/validate.h"

#define RMACOLL__MAX_EXTENT (1ull << 48)

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/base/text.h"

/*
 * Checks one side (send or receive): no negative values, no byte offset
 * above INT64_MAX, and computes the extent of the non-empty blocks.
 * *any_nonzero tells whether some count is non-zero.
 */
static rmacoll_status_t validate_side(int nranks, int rank, const char *cname,
                                      const char *dname, const int64_t *counts,
                                      const int64_t *displs, int64_t esize,
                                      uint64_t *extent, int *any_nonzero,
                                      int *first_nonzero, char *errbuf,
                                      size_t errlen)
{
    uint64_t ext = 0;

    *any_nonzero = 0;
    *first_nonzero = -1;
    for (int j = 0; j < nranks; j++) {
        int64_t c = counts[j];
        int64_t d = displs[j];

        if (c < 0) {
            rmacoll__errbuf_printf(errbuf, errlen, "rank %d: %s[%d] = %" PRId64 " is negative",
                                   rank, cname, j, c);
            return RMACOLL_ERR_OVERFLOW;
        }
        if (d < 0) {
            rmacoll__errbuf_printf(errbuf, errlen, "rank %d: %s[%d] = %" PRId64 " is negative",
                                   rank, dname, j, d);
            return RMACOLL_ERR_OVERFLOW;
        }
        /* Both are in [0, INT64_MAX]: d + c fits in uint64_t. */
        uint64_t end = (uint64_t)d + (uint64_t)c;
        if (end > (uint64_t)INT64_MAX / (uint64_t)esize) {
            rmacoll__errbuf_printf(errbuf, errlen,
                                   "rank %d: %s[%d] = %" PRId64 " + %s[%d] = %" PRId64
                                   " elements of %" PRId64 " bytes overflow a 64-bit byte offset",
                                   rank, dname, j, d, cname, j, c, esize);
            return RMACOLL_ERR_OVERFLOW;
        }
        if (c > 0) {
            if (!*any_nonzero) {
                *first_nonzero = j;
            }
            *any_nonzero = 1;
            if (end * (uint64_t)esize > ext) {
                ext = end * (uint64_t)esize;
            }
        }
    }
    *extent = ext;
    return RMACOLL_SUCCESS;
}

/* Pair k of scratch: (displacement, index). Order: displacement, then index. */
static int pair_less(const int64_t *p, size_t a, size_t b)
{
    if (p[2 * a] != p[2 * b]) {
        return p[2 * a] < p[2 * b];
    }
    return p[2 * a + 1] < p[2 * b + 1];
}

static void pair_swap(int64_t *p, size_t a, size_t b)
{
    int64_t d = p[2 * a];
    int64_t i = p[2 * a + 1];

    p[2 * a] = p[2 * b];
    p[2 * a + 1] = p[2 * b + 1];
    p[2 * b] = d;
    p[2 * b + 1] = i;
}

static void heap_sift_down(int64_t *p, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;

        if (child >= n) {
            return;
        }
        if (child + 1 < n && pair_less(p, child, child + 1)) {
            child++;
        }
        if (!pair_less(p, root, child)) {
            return;
        }
        pair_swap(p, root, child);
        root = child;
    }
}

static void heap_sort_pairs(int64_t *p, size_t n)
{
    for (size_t i = n / 2; i-- > 0;) {
        heap_sift_down(p, i, n);
    }
    for (size_t end = n; end-- > 1;) {
        pair_swap(p, 0, end);
        heap_sift_down(p, 0, end);
    }
}

/* A non-empty send block that shares a byte with a non-empty receive block
 * (sendbuf == recvbuf with the same layout, or any accidental overlap):
 * the call would overwrite data it has still to send. sorted[2 * nr]
 * holds the non-empty receive blocks as (rdispl, index) pairs sorted by
 * displacement and known not to overlap, so their ends are sorted too and
 * each send block needs one binary search: O(nranks log nranks). */
static rmacoll_status_t check_send_recv_overlap(int nranks, int rank, const void *sendbuf,
                                                const int64_t *sendcounts,
                                                const int64_t *sdispls, uint64_t sext,
                                                const void *recvbuf,
                                                const int64_t *recvcounts,
                                                const int64_t *rdispls, uint64_t rext,
                                                int64_t esize, const int64_t *sorted,
                                                size_t nr, char *errbuf, size_t errlen)
{
    uintptr_t s0 = (uintptr_t)sendbuf, r0 = (uintptr_t)recvbuf;

    if (sext == 0 || rext == 0 || s0 >= r0 + rext || r0 >= s0 + sext) {
        return RMACOLL_SUCCESS; /* the addressed ranges are disjoint */
    }
    /* Ranges intersect, so |s0 - r0| < max(sext, rext) <= 2^63: the send
     * blocks' byte offsets relative to recvbuf fit in int64. */
    int64_t d = s0 >= r0 ? (int64_t)(s0 - r0) : -(int64_t)(r0 - s0);

    for (int j = 0; j < nranks; j++) {
        if (sendcounts[j] <= 0) {
            continue;
        }
        int64_t lo = d + sdispls[j] * esize;
        int64_t hi = lo + sendcounts[j] * esize;
        size_t a = 0, b = nr;

        /* first receive block whose end lies past lo */
        while (a < b) {
            size_t m = a + (b - a) / 2;
            int k = (int)sorted[2 * m + 1];

            if ((rdispls[k] + recvcounts[k]) * esize <= lo) {
                a = m + 1;
            } else {
                b = m;
            }
        }
        if (a < nr) {
            int k = (int)sorted[2 * a + 1];

            if (rdispls[k] * esize < hi) {
                rmacoll__errbuf_printf(errbuf, errlen,
                                       "rank %d: send block %d (sendcounts[%d] = %" PRId64
                                       ", sdispls[%d] = %" PRId64 ") overlaps receive block %d "
                                       "(recvcounts[%d] = %" PRId64 ", rdispls[%d] = %" PRId64
                                       "): send and receive buffers must not overlap",
                                       rank, j, j, sendcounts[j], j, sdispls[j], k, k,
                                       recvcounts[k], k, rdispls[k]);
                return RMACOLL_ERR_OVERLAP;
            }
        }
    }
    return RMACOLL_SUCCESS;
}

/* The rank, and the argument arrays (none may be NULL). */
static rmacoll_status_t check_rank_and_arrays(int nranks, int rank,
                                              const int64_t *sendcounts,
                                              const int64_t *sdispls,
                                              const int64_t *recvcounts,
                                              const int64_t *rdispls,
                                              const int64_t *scratch,
                                              char *errbuf, size_t errlen)
{
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        rmacoll__errbuf_printf(errbuf, errlen, "rank %d: rank outside [0, %d)", rank, nranks);
        return RMACOLL_ERR_INVALID_ARG;
    }
    const struct {
        const void *ptr;
        const char *name;
    } arrays[] = {
        {sendcounts, "sendcounts"}, {sdispls, "sdispls"},
        {recvcounts, "recvcounts"}, {rdispls, "rdispls"},
        {scratch, "scratch"},
    };
    for (size_t a = 0; a < sizeof(arrays) / sizeof(arrays[0]); a++) {
        if (arrays[a].ptr == NULL) {
            rmacoll__errbuf_printf(errbuf, errlen, "rank %d: %s is NULL", rank, arrays[a].name);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    return RMACOLL_SUCCESS;
}

/* A NULL buffer is fine only when its side moves nothing; any/first: the
 * side has a non-empty block, the first one (validate_side). */
static rmacoll_status_t check_null_buffer(int rank, const void *buf, const char *bufname,
                                          const char *countsname, const int64_t *counts,
                                          int any, int first, char *errbuf, size_t errlen)
{
    if (buf == NULL && any) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "rank %d: %s is NULL but %s[%d] = %" PRId64,
                               rank, bufname, countsname, first, counts[first]);
        return RMACOLL_ERR_NULL_BUFFER;
    }
    return RMACOLL_SUCCESS;
}

/* Overlap: sort the non-empty receive blocks by displacement; with
 * starts sorted, some pair overlaps iff some neighbour pair does. Leaves
 * the sorted (rdispl, rank) pairs in scratch and their number in *nout. */
static rmacoll_status_t check_recv_overlap(int nranks, int rank, const int64_t *recvcounts,
                                           const int64_t *rdispls, int64_t *scratch,
                                           size_t *nout, char *errbuf, size_t errlen)
{
    size_t n = 0;
    for (int j = 0; j < nranks; j++) {
        if (recvcounts[j] > 0) {
            scratch[2 * n] = rdispls[j];
            scratch[2 * n + 1] = j;
            n++;
        }
    }
    heap_sort_pairs(scratch, n);
    *nout = n;
    for (size_t k = 0; k + 1 < n; k++) {
        int a = (int)scratch[2 * k + 1];
        int b = (int)scratch[2 * k + 3];

        /* Cannot overflow: displ + count was checked above. */
        if (rdispls[a] + recvcounts[a] > rdispls[b]) {
            rmacoll__errbuf_printf(errbuf, errlen,
                                   "rank %d: recvcounts[%d] = %" PRId64 " with rdispls[%d] = %" PRId64
                                   " overlaps rdispls[%d] = %" PRId64 " (block of %" PRId64 ")",
                                   rank, a, recvcounts[a], a, rdispls[a], b, rdispls[b],
                                   recvcounts[b]);
            return RMACOLL_ERR_OVERLAP;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Larger than any node's memory (256 TiB): a caller's error, not something
 * to plan for (the plan would need bytes / max_task_bytes tasks). */
static rmacoll_status_t check_extents(int rank, uint64_t sext, uint64_t rext,
                                      char *errbuf, size_t errlen)
{
    if (sext > RMACOLL__MAX_EXTENT || rext > RMACOLL__MAX_EXTENT) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "rank %d: %s buffer extent of %" PRIu64 " bytes exceeds any "
                               "node's memory (2^48 bytes)", rank,
                               sext > RMACOLL__MAX_EXTENT ? "send" : "receive",
                               sext > RMACOLL__MAX_EXTENT ? sext : rext);
        return RMACOLL_ERR_OVERFLOW;
    }
    return RMACOLL_SUCCESS;
}

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
                                        char *errbuf, size_t errlen)
{
    size_t esize_u = rmacoll_datatype_size(dtype);
    uint64_t sext = 0;
    uint64_t rext = 0;
    int s_any = 0;
    int r_any = 0;
    int s_first = -1;
    int r_first = -1;
    size_t n = 0;
    rmacoll_status_t st;

    rmacoll__errbuf_printf(errbuf, errlen, "%s", "");
    if (esize_u == 0) {
        rmacoll__errbuf_printf(errbuf, errlen, "rank %d: unknown datatype %d", rank, (int)dtype);
        return RMACOLL_ERR_DATATYPE;
    }
    st = check_rank_and_arrays(nranks, rank, sendcounts, sdispls, recvcounts, rdispls,
                               scratch, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }

    int64_t esize = (int64_t)esize_u;
    st = validate_side(nranks, rank, "sendcounts", "sdispls", sendcounts, sdispls,
                       esize, &sext, &s_any, &s_first, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = validate_side(nranks, rank, "recvcounts", "rdispls", recvcounts, rdispls,
                       esize, &rext, &r_any, &r_first, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = check_null_buffer(rank, sendbuf, "sendbuf", "sendcounts", sendcounts, s_any,
                           s_first, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = check_null_buffer(rank, recvbuf, "recvbuf", "recvcounts", recvcounts, r_any,
                           r_first, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = check_recv_overlap(nranks, rank, recvcounts, rdispls, scratch, &n, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    st = check_extents(rank, sext, rext, errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    /* after the extent check: both extents are below 2^48 */
    st = check_send_recv_overlap(nranks, rank, sendbuf, sendcounts, sdispls, sext,
                                 recvbuf, recvcounts, rdispls, rext, esize, scratch, n,
                                 errbuf, errlen);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }

    if (send_extent != NULL) {
        *send_extent = sext;
    }
    if (recv_extent != NULL) {
        *recv_extent = rext;
    }
    return RMACOLL_SUCCESS;
}
