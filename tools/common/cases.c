/*
 * cases.c - count-matrix cases in memory (see cases.h): create, free, the
 * node sizes and mismatch flag, the random generators (uniform, random,
 * zipf, sparse) and the displacement helpers. The text format (case
 * files, topology specs, sizes) is cases_parse.c; the fill and check
 * pattern of the data is cases_fill.c.
 */
#include "cases.h"
#include "cases_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rmacoll_case_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1). */
static double case_rand01(uint64_t *state)
{
    return (double)(rmacoll_case_rand(state) >> 11) * 0x1.0p-53;
}

void rmacoll_case_free(rmacoll_case_t *c)
{
    if (c == NULL) {
        return;
    }
    free(c->node_of);
    free(c->send);
    free(c->recv);
    free(c);
}

rmacoll_status_t rmacoll_case_create(int nranks, const int *node_of,
                                     rmacoll_datatype_t dtype,
                                     rmacoll_case_t **out)
{
    rmacoll_case_t *c;
    int maxnode = 0;

    *out = NULL;
    if (nranks < 1 || nranks > CASE_MAX_RANKS ||
        rmacoll_datatype_size(dtype) == 0) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (int r = 0; node_of != NULL && r < nranks; r++) {
        if (node_of[r] < 0 || node_of[r] >= nranks) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (node_of[r] > maxnode) {
            maxnode = node_of[r];
        }
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    c->nranks = nranks;
    c->dtype = dtype;
    c->node_of = calloc((size_t)nranks, sizeof(int));
    c->send = calloc((size_t)nranks * (size_t)nranks, sizeof(int64_t));
    c->recv = calloc((size_t)nranks * (size_t)nranks, sizeof(int64_t));
    if (c->node_of == NULL || c->send == NULL || c->recv == NULL) {
        rmacoll_case_free(c);
        return RMACOLL_ERR_NO_MEMORY;
    }
    if (node_of != NULL) {
        memcpy(c->node_of, node_of, (size_t)nranks * sizeof(int));
    }
    c->nnodes = maxnode + 1;
    for (int n = 0; n < c->nnodes; n++) {
        if (rmacoll_case_node_size(c, n) == 0) {
            rmacoll_case_free(c);
            return RMACOLL_ERR_INVALID_ARG;
        }
    }
    snprintf(c->name, sizeof(c->name), "generated");
    *out = c;
    return RMACOLL_SUCCESS;
}

int rmacoll_case_node_size(const rmacoll_case_t *c, int node)
{
    int n = 0;

    for (int r = 0; r < c->nranks; r++) {
        n += (c->node_of[r] == node);
    }
    return n;
}

void rmacoll_case_update_mismatch(rmacoll_case_t *c)
{
    size_t nn = (size_t)c->nranks * (size_t)c->nranks;

    c->has_mismatch = memcmp(c->send, c->recv, nn * sizeof(int64_t)) != 0;
}

/* ---- generators ---- */

rmacoll_status_t rmacoll_case_dist_parse(const char *spec,
                                         rmacoll_case_dist_t *dist)
{
    char *end;

    if (spec == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    dist->param = 0.0;
    if (strcmp(spec, "uniform") == 0) {
        dist->kind = RMACOLL_CASE_UNIFORM;
        return RMACOLL_SUCCESS;
    }
    if (strcmp(spec, "random") == 0) {
        dist->kind = RMACOLL_CASE_RANDOM;
        return RMACOLL_SUCCESS;
    }
    if (strncmp(spec, "zipf:", 5) == 0) {
        dist->kind = RMACOLL_CASE_ZIPF;
        dist->param = strtod(spec + 5, &end);
        return (end != spec + 5 && *end == '\0' && dist->param >= 0.0 &&
                dist->param <= 100.0)
                   ? RMACOLL_SUCCESS
                   : RMACOLL_ERR_INVALID_ARG;
    }
    if (strncmp(spec, "sparse:", 7) == 0) {
        dist->kind = RMACOLL_CASE_SPARSE;
        dist->param = strtod(spec + 7, &end);
        return (end != spec + 7 && *end == '\0' && dist->param >= 0.0 &&
                dist->param <= 1.0)
                   ? RMACOLL_SUCCESS
                   : RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_ERR_INVALID_ARG;
}

/* Zipf(a) counts: every sender's row weights the receivers by one random
 * popularity order (Fisher-Yates), with ±20% noise per pair. */
static rmacoll_status_t case_random_zipf(rmacoll_case_t *c, double a,
                                         int64_t base, uint64_t *rs)
{
    int nranks = c->nranks;
    int *pos = malloc((size_t)nranks * sizeof(int));
    double *w = malloc((size_t)nranks * sizeof(double));
    double wsum = 0.0;

    if (pos == NULL || w == NULL) {
        free(pos);
        free(w);
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int j = 0; j < nranks; j++) {
        pos[j] = j;
    }
    for (int j = nranks - 1; j > 0; j--) {  /* Fisher-Yates */
        int k = (int)(rmacoll_case_rand(rs) % (uint64_t)(j + 1));
        int t = pos[j];

        pos[j] = pos[k];
        pos[k] = t;
    }
    for (int j = 0; j < nranks; j++) {
        w[j] = 1.0 / pow((double)(pos[j] + 1), a);
        wsum += w[j];
    }
    for (int i = 0; i < nranks; i++) {
        for (int j = 0; j < nranks; j++) {
            double noise = 0.8 + 0.4 * case_rand01(rs);
            double v = (double)base * nranks * w[j] / wsum * noise;

            c->send[(size_t)i * nranks + j] = (int64_t)llround(v);
        }
    }
    free(pos);
    free(w);
    return RMACOLL_SUCCESS;
}

/* Uniform, random or sparse counts: each pair drawn on its own. */
static void case_random_pairs(rmacoll_case_t *c, const rmacoll_case_dist_t *dist,
                              int64_t base, uint64_t *rs)
{
    int nranks = c->nranks;

    for (size_t k = 0; k < (size_t)nranks * (size_t)nranks; k++) {
        int64_t v = base;

        if (dist->kind == RMACOLL_CASE_RANDOM) {
            v = (int64_t)(rmacoll_case_rand(rs) %
                          (uint64_t)(2 * base + 1));
        } else if (dist->kind == RMACOLL_CASE_SPARSE) {
            if (case_rand01(rs) < dist->param) {
                v = 1 + (int64_t)(rmacoll_case_rand(rs) %
                                  (uint64_t)(2 * base > 1 ? 2 * base : 1));
            } else {
                v = 0;
            }
        }
        c->send[k] = v;
    }
}

rmacoll_status_t rmacoll_case_random(int nnodes, const int *node_sizes,
                                     const rmacoll_case_dist_t *dist,
                                     int64_t base, uint64_t seed,
                                     rmacoll_datatype_t dtype,
                                     rmacoll_case_t **out)
{
    int nranks = 0;
    int *node_of;
    rmacoll_case_t *c;
    rmacoll_status_t st;
    uint64_t rs = seed ^ 0x5eedcafe12345678ull;
    int n;

    *out = NULL;
    if (nnodes < 1 || base < 0 || dist == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (int k = 0; k < nnodes; k++) {
        if (node_sizes[k] < 1 || nranks + node_sizes[k] > CASE_MAX_RANKS) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        nranks += node_sizes[k];
    }
    node_of = malloc((size_t)nranks * sizeof(int));
    if (node_of == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    n = 0;
    for (int k = 0; k < nnodes; k++) {
        for (int l = 0; l < node_sizes[k]; l++) {
            node_of[n++] = k;
        }
    }
    st = rmacoll_case_create(nranks, node_of, dtype, &c);
    free(node_of);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (dist->kind == RMACOLL_CASE_ZIPF) {
        if (case_random_zipf(c, dist->param, base, &rs) != RMACOLL_SUCCESS) {
            rmacoll_case_free(c);
            return RMACOLL_ERR_NO_MEMORY;
        }
    } else {
        case_random_pairs(c, dist, base, &rs);
    }
    memcpy(c->recv, c->send,
           (size_t)nranks * (size_t)nranks * sizeof(int64_t));
    c->has_mismatch = 0;
    snprintf(c->name, sizeof(c->name), "random(seed=%" PRIu64 ")", seed);
    *out = c;
    return RMACOLL_SUCCESS;
}

/* ---- displacements ---- */

int64_t rmacoll_displs_contiguous(int n, const int64_t *counts,
                                  int64_t *displs)
{
    int64_t off = 0;

    for (int k = 0; k < n; k++) {
        displs[k] = off;
        off += counts[k];
    }
    return off;
}

int64_t rmacoll_displs_gapped(int n, const int64_t *counts, int64_t gap,
                              int64_t *displs)
{
    int64_t off = 0;

    for (int k = n - 1; k >= 0; k--) {
        off += gap;
        displs[k] = off;
        off += counts[k];
    }
    return off + gap;
}

