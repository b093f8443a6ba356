/*
 * cases_fill.c - the data pattern of tools/common/cases.h that everything
 * checking data shares: the value of every element (source, destination,
 * index, iteration), filling send buffers (sentinel in the gaps) and
 * checking receive buffers, with the first wrong element in words.
 */
#include "cases.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fill_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static void fill_params(int src, int dst, uint64_t iter, uint64_t *basev,
                        uint64_t *step)
{
    uint64_t k = ((uint64_t)(uint32_t)src << 32) ^ (uint64_t)(uint32_t)dst;
    uint64_t h = fill_mix(k ^ fill_mix(iter + 0x1234567ull));

    *basev = h;
    *step = fill_mix(h + 0x9e3779b97f4a7c15ull) | 1u;
}

uint64_t rmacoll_fill_value(int src, int dst, int64_t index, uint64_t iter)
{
    uint64_t b, s;

    fill_params(src, dst, iter, &b, &s);
    return b + (uint64_t)index * s;
}

static void fill_store(unsigned char *out, size_t esize, uint64_t v)
{
    for (size_t b = 0; b < esize; b++) {
        out[b] = (unsigned char)(v >> (8 * (b & 7)));
    }
}

static uint64_t fill_load(const unsigned char *in, size_t esize)
{
    uint64_t v = 0;

    for (size_t b = 0; b < esize && b < 8; b++) {
        v |= (uint64_t)in[b] << (8 * b);
    }
    return v;
}

void rmacoll_fill_block(void *out, size_t esize, int src, int dst,
                        int64_t first, int64_t count, uint64_t iter)
{
    uint64_t b, s;
    unsigned char *p = out;

    fill_params(src, dst, iter, &b, &s);
    for (int64_t k = 0; k < count; k++) {
        fill_store(p + (size_t)k * esize, esize,
                   b + (uint64_t)(first + k) * s);
    }
}

void rmacoll_fill_send(void *buf, size_t bytes, size_t esize, int src,
                       int nranks, const int64_t *sendcounts,
                       const int64_t *sdispls, uint64_t iter)
{
    unsigned char *p = buf;

    memset(p, RMACOLL_FILL_SENTINEL, bytes);
    for (int j = 0; j < nranks; j++) {
        if (sendcounts[j] > 0) {
            rmacoll_fill_block(p + (size_t)sdispls[j] * esize, esize, src, j,
                               0, sendcounts[j], iter);
        }
    }
}

/* Block i of rank dst's buffer (count elements at byte off): every wrong
 * element counted in rep, the first one kept. */
static void check_block(const unsigned char *p, size_t off, size_t esize,
                        int i, int dst, int64_t count, uint64_t iter,
                        rmacoll_check_report_t *rep)
{
    uint64_t b, s;
    uint64_t emask = esize >= 8 ? ~0ull : ((1ull << (8 * esize)) - 1);

    fill_params(i, dst, iter, &b, &s);
    for (int64_t k = 0; k < count; k++) {
        uint64_t want = (b + (uint64_t)k * s) & emask;
        uint64_t got = fill_load(p + off + (size_t)k * esize, esize);

        if (esize > 8) {
            unsigned char tmp[16];

            fill_store(tmp, esize, b + (uint64_t)k * s);
            if (memcmp(tmp, p + off + (size_t)k * esize, esize) == 0) {
                continue;
            }
        } else if (want == got) {
            continue;
        }
        if (rep->nwrong == 0 && rep->first_src < 0) {
            rep->first_src = i;
            rep->first_index = k;
            rep->expected = want;
            rep->got = got;
        }
        rep->nwrong++;
    }
}

/* rep->msg: the first wrong element, else the first wrong gap byte. */
static void check_message(const unsigned char *p, int dst,
                          rmacoll_check_report_t *rep)
{
    if (rep->first_src >= 0) {
        snprintf(rep->msg, sizeof(rep->msg),
                 "rank %d: element %" PRId64 " from rank %d is 0x%" PRIx64
                 ", expected 0x%" PRIx64 " (%" PRIu64 " wrong elements, %"
                 PRIu64 " wrong gap bytes)",
                 dst, rep->first_index, rep->first_src, rep->got,
                 rep->expected, rep->nwrong, rep->ngap_wrong);
    } else if (rep->ngap_wrong > 0) {
        snprintf(rep->msg, sizeof(rep->msg),
                 "rank %d: byte %" PRId64 " outside every receive block was "
                 "written (0x%02x; %" PRIu64 " such bytes)",
                 dst, rep->first_gap_off, p[rep->first_gap_off],
                 rep->ngap_wrong);
    }
}

uint64_t rmacoll_check_recv(const void *buf, size_t bytes, size_t esize,
                            int dst, int nranks, const int64_t *recvcounts,
                            const int64_t *rdispls, uint64_t iter,
                            rmacoll_check_report_t *rep)
{
    const unsigned char *p = buf;
    unsigned char *covered;
    rmacoll_check_report_t local;

    if (rep == NULL) {
        rep = &local;
    }
    memset(rep, 0, sizeof(*rep));
    rep->rank = dst;
    rep->first_src = -1;
    rep->first_gap_off = -1;
    covered = calloc(bytes > 0 ? bytes : 1, 1);
    if (covered == NULL) {
        snprintf(rep->msg, sizeof(rep->msg), "rank %d: out of memory to check",
                 dst);
        rep->nwrong = 1;
        return 1;
    }
    for (int i = 0; i < nranks; i++) {
        size_t off = (size_t)rdispls[i] * esize;

        if (recvcounts[i] <= 0) {
            continue;
        }
        if (off + (size_t)recvcounts[i] * esize > bytes) {
            rep->nwrong += (uint64_t)recvcounts[i];
            if (rep->first_src < 0) {
                rep->first_src = i;
                rep->first_index = 0;
            }
            continue;
        }
        memset(covered + off, 1, (size_t)recvcounts[i] * esize);
        check_block(p, off, esize, i, dst, recvcounts[i], iter, rep);
    }
    for (size_t k = 0; k < bytes; k++) {
        if (!covered[k] && p[k] != RMACOLL_FILL_SENTINEL) {
            if (rep->ngap_wrong == 0) {
                rep->first_gap_off = (int64_t)k;
            }
            rep->ngap_wrong++;
        }
    }
    free(covered);
    check_message(p, dst, rep);
    return rep->nwrong + rep->ngap_wrong;
}
