/*
 * rx_mem.c - the reference executor's memory: provenance intervals (which
 * rank's block, at which offset, a byte came from) and the simulated
 * windows with their guard bytes (refexec_int.h).
 */
#include "refexec.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctrl/ctrl.h"
#include "core/ctrl/paths.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "refexec_int.h"

/* ------------------------------------------------- provenance intervals */

static int iv_reserve(rx_ivlist_t *l, size_t n)
{
    if (l->n + n > l->cap) {
        size_t cap = l->cap ? l->cap : 16;
        rx_iv_t *v;

        while (cap < l->n + n) {
            cap *= 2;
        }
        v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL) {
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    return 0;
}

/* Removes the coverage of [off, off+len). */
static int iv_remove(rx_ivlist_t *l, uint64_t off, uint64_t len)
{
    uint64_t end = off + len;
    size_t w = 0;
    rx_iv_t *out;

    if (len == 0 || l->n == 0) {
        return 0;
    }
    out = malloc((l->n + 2) * sizeof(*out));
    if (out == NULL) {
        return -1;
    }
    for (size_t k = 0; k < l->n; k++) {
        rx_iv_t a = l->v[k];
        uint64_t aend = a.off + a.len;

        if (aend <= off || a.off >= end) {
            out[w++] = a;
            continue;
        }
        if (a.off < off) {
            rx_iv_t left = a;

            left.len = off - a.off;
            out[w++] = left;
        }
        if (aend > end) {
            rx_iv_t right = a;

            right.off = end;
            right.len = aend - end;
            right.ooff = a.ooff + (end - a.off);
            out[w++] = right;
        }
    }
    if (iv_reserve(l, w > l->n ? w - l->n : 0) != 0) {
        free(out);
        return -1;
    }
    memcpy(l->v, out, w * sizeof(*out));
    l->n = w;
    free(out);
    return 0;
}

/* Inserts non-overlapping pieces (sorted by off) after removing their range;
 * merges neighbours that continue each other. */
int iv_write(rx_ivlist_t *l, uint64_t off, uint64_t len,
                    const rx_iv_t *pieces, size_t np)
{
    size_t pos;

    if (iv_remove(l, off, len) != 0 || iv_reserve(l, np) != 0) {
        return -1;
    }
    for (size_t k = 0; k < np; k++) {
        rx_iv_t p = pieces[k];

        for (pos = 0; pos < l->n && l->v[pos].off < p.off; pos++) {
        }
        if (pos > 0) {
            rx_iv_t *q = &l->v[pos - 1];

            if (q->off + q->len == p.off && q->origin == p.origin &&
                q->ooff + q->len == p.ooff) {
                q->len += p.len;
                continue;
            }
        }
        memmove(&l->v[pos + 1], &l->v[pos], (l->n - pos) * sizeof(rx_iv_t));
        l->v[pos] = p;
        l->n++;
    }
    /* one merge pass with the right neighbours */
    for (size_t k = 0; k + 1 < l->n;) {
        rx_iv_t *q = &l->v[k], *r = &l->v[k + 1];

        if (q->off + q->len == r->off && q->origin == r->origin &&
            q->ooff + q->len == r->ooff) {
            q->len += r->len;
            memmove(r, r + 1, (l->n - k - 2) * sizeof(rx_iv_t));
            l->n--;
        } else {
            k++;
        }
    }
    return 0;
}

/* Pieces of [off, off+len) shifted by delta; returns uncovered bytes. */
uint64_t iv_extract(const rx_ivlist_t *l, uint64_t off, uint64_t len,
                           uint64_t to, rx_iv_t **out, size_t *nout)
{
    uint64_t end = off + len, covered = 0;
    size_t n = 0;
    rx_iv_t *v = malloc((l->n + 1) * sizeof(*v));

    *out = v;
    *nout = 0;
    if (v == NULL) {
        return len;
    }
    for (size_t k = 0; k < l->n; k++) {
        const rx_iv_t *a = &l->v[k];
        uint64_t lo = a->off > off ? a->off : off;
        uint64_t hi = a->off + a->len < end ? a->off + a->len : end;

        if (lo >= hi) {
            continue;
        }
        v[n].off = to + (lo - off);
        v[n].len = hi - lo;
        v[n].origin = a->origin;
        v[n].ooff = a->ooff + (lo - a->off);
        covered += hi - lo;
        n++;
    }
    *nout = n;
    return len - covered;
}

/* ----------------------------------------------------------- windows */

void win_free(rx_win_t *w)
{
    free(w->mem);
    free(w->iv.v);
    memset(w, 0, sizeof(*w));
}

int win_alloc(refexec_t *ex, rx_win_t *w, uint64_t size)
{
    size_t g = ex->opts.guard_bytes;

    win_free(w);
    w->size = size;
    if (ex->opts.virtual_mode) {
        return 0;
    }
    w->mem = malloc((size_t)size + 2 * g);
    if (w->mem == NULL) {
        return -1;
    }
    memset(w->mem, RMACOLL_FILL_SENTINEL, (size_t)size + 2 * g);
    return 0;
}

unsigned char *win_ptr(refexec_t *ex, rx_win_t *w, uint64_t off)
{
    return w->mem + ex->opts.guard_bytes + off;
}

/* First guard byte that is not the sentinel, or -1. */
int64_t win_guard_bad(refexec_t *ex, const rx_win_t *w)
{
    size_t g = ex->opts.guard_bytes;

    if (w->mem == NULL) {
        return -1;
    }
    for (size_t k = 0; k < g; k++) {
        if (w->mem[k] != RMACOLL_FILL_SENTINEL) {
            return (int64_t)k;
        }
        if (w->mem[g + w->size + k] != RMACOLL_FILL_SENTINEL) {
            return (int64_t)(g + w->size + k);
        }
    }
    return -1;
}

const char *win_name(int w)
{
    return rmacoll__win_name(w);
}

