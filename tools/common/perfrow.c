/*
 * perfrow.c - one size row of the AlltoAllV benchmark: buffers, timed and
 * checked calls, the per-rank figures reduced on rank 0, and where every
 * rank runs (see perfrun.h, perf_internal.h).
 */
#include "perfrun.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_internal.h"

/* ---- helpers ---- */

static double perf_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

int64_t rmacoll_perf_node_key(void)
{
    const char *id = getenv("RMACOLL_NODE_ID");
    char host[256] = "";
    uint32_t h = 2166136261u;

    if (id != NULL && *id != '\0') {
        char *end = NULL;
        long long v = strtoll(id, &end, 10);

        if (end != id && *end == '\0' && v >= 0 && v < (1ll << 40))
            return v;
        for (const char *p = id; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        return (int64_t)h;
    }
    gethostname(host, sizeof(host) - 1);
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return (int64_t)h;
}






/* Stamps the send buffer for `iter` and puts it where the call reads it. */
rmacoll_status_t perf_put_send(perf_state_t *s, perf_bufs_t *b,
                                      uint64_t iter)
{
    const rmacoll_perf_devops_t *dev = s->dev;

    rmacoll_fill_send(b->hs, b->sbytes, b->esize, s->rank, s->n,
                      s->sendcounts, s->sdispls, iter);
    if (dev == NULL || b->sbytes == 0)
        return RMACOLL_SUCCESS;
    return dev->upload(s->be->ctx, b->ds, b->hs, b->sbytes, s->err,
                       sizeof(s->err));
}

/* Resets the receive buffer to the sentinel, where the call writes it. */
rmacoll_status_t perf_reset_recv(perf_state_t *s, perf_bufs_t *b)
{
    const rmacoll_perf_devops_t *dev = s->dev;

    memset(b->hr, RMACOLL_FILL_SENTINEL, b->rbytes);
    if (dev == NULL || b->rbytes == 0)
        return RMACOLL_SUCCESS;
    return dev->upload(s->be->ctx, b->dr, b->hr, b->rbytes, s->err,
                       sizeof(s->err));
}

/* Device memory: events on the stream, or with -C 1 the host clock after
 * the stream has drained (nccl-tests' report_cputime). */
static rmacoll_status_t perf_timer_start(perf_state_t *s, double *t0)
{
    if (s->dev != NULL && !s->o->cputime)
        return s->dev->timer_start(s->be->ctx, s->err, sizeof(s->err));
    *t0 = perf_now_us();
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t perf_timer_stop(perf_state_t *s, double t0,
                                        double *us)
{
    if (s->dev != NULL && !s->o->cputime)
        return s->dev->timer_stop(s->be->ctx, us, s->err, sizeof(s->err));
    if (s->dev != NULL) {
        rmacoll_status_t st = s->dev->sync(s->be->ctx, s->err,
                                           sizeof(s->err));

        if (st != RMACOLL_SUCCESS)
            return st;
    }
    *us = perf_now_us() - t0;
    return RMACOLL_SUCCESS;
}

/* One call, then with -z 1 and device memory a wait for its completion
 * (nccl-tests' blocking mode; host-memory calls always block). */
static rmacoll_status_t perf_call(perf_state_t *s, perf_bufs_t *b,
                                  rmacoll_perf_a2av_fn_t fn,
                                  rmacoll_datatype_t dtype)
{
    rmacoll_status_t st;

    st = fn(s->be->ctx, b->ds, s->sendcounts, s->sdispls, b->dr,
            s->recvcounts, s->rdispls, dtype, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && s->o->blocking && s->dev != NULL)
        st = s->dev->sync(s->be->ctx, s->err, sizeof(s->err));
    return st;
}

/* The calls of one timed iteration: agg_iters calls, or with -G the
 * launches of the graph of them (captured by perf_measure). */
static rmacoll_status_t perf_iteration(perf_state_t *s, perf_bufs_t *b,
                                       rmacoll_perf_a2av_fn_t fn, rmacoll_datatype_t dtype,
                                       int times)
{
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (s->o->graph_launches > 0)
        return s->dev->graph_launch(s->be->ctx, s->o->graph_launches * times, s->err,
                                    sizeof(s->err));
    for (long a = 0; a < (long)s->o->agg_iters * times && st == RMACOLL_SUCCESS; a++)
        st = perf_call(s, b, fn, dtype);
    return st;
}

/* Byte offset of the first received element (the first receiver slot
 * with a nonzero count), 0 when nothing is received. */
static size_t perf_first_recv(const perf_state_t *s, const perf_bufs_t *b)
{
    for (int p = 0; p < s->n; p++)
        if (s->recvcounts[p] > 0)
            return (size_t)s->rdispls[p] * b->esize;
    return 0;
}

/* One checked iteration: a fresh stamp (row_id, it + 1) in the send
 * buffer, the receive buffer reset to the sentinel (both copied to the
 * device when there is one), a barrier, the call (timed into *us when
 * timed), the receive buffer downloaded and checked; the wrong elements
 * are added to *wrong and the first bad iteration reported once. */
static rmacoll_status_t perf_checked(perf_state_t *s, perf_bufs_t *b,
                                     rmacoll_perf_a2av_fn_t fn,
                                     rmacoll_datatype_t dtype, const char *label,
                                     uint64_t row_id, int it, int timed,
                                     double *us, uint64_t *wrong, int *reported)
{
    const rmacoll_perf_backend_t *be = s->be;
    uint64_t iter = (row_id << 32) | (uint64_t)(it + 1);
    rmacoll_check_report_t rep;
    rmacoll_status_t st;
    double t0 = 0;
    uint64_t bad;

    st = perf_put_send(s, b, iter);
    if (st == RMACOLL_SUCCESS)
        st = perf_reset_recv(s, b);
    if (st == RMACOLL_SUCCESS)
        st = be->barrier(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && timed)
        st = perf_timer_start(s, &t0);
    if (st == RMACOLL_SUCCESS)
        st = perf_iteration(s, b, fn, dtype, 1);
    if (st == RMACOLL_SUCCESS && timed)
        st = perf_timer_stop(s, t0, us);
    if (st == RMACOLL_SUCCESS && !timed && s->dev != NULL)
        st = s->dev->sync(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && s->dev != NULL && b->rbytes > 0)
        st = s->dev->download(be->ctx, b->hr, b->dr, b->rbytes,
                              s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        return st;
    /* Test hook: RMACOLL_PERF_TEST_CORRUPT=R flips the first received byte
     * on rank R, so a test can see the check fail. */
    if (b->rbytes > 0 && getenv("RMACOLL_PERF_TEST_CORRUPT") != NULL &&
        atoi(getenv("RMACOLL_PERF_TEST_CORRUPT")) == s->rank)
        ((unsigned char *)b->hr)[perf_first_recv(s, b)] ^= 0x5a;
    bad = rmacoll_check_recv(b->hr, b->rbytes, b->esize, s->rank, s->n,
                             s->recvcounts, s->rdispls, iter, &rep);
    if (bad != 0 && !*reported) {
        fprintf(stderr, "%s: rank %d: %s: %llu wrong in %s iteration %d: %s\n",
                be->name, s->rank, label, (unsigned long long)bad,
                timed ? "timed" : "checked", it, rep.msg);
        *reported = 1;
    }
    *wrong += bad;
    return RMACOLL_SUCCESS;
}

/* Runs one collective on the row's buffers: warm-ups, then the timed
 * iterations, checked or not; fills g[PERF_G_N]. With -G the agg_iters
 * calls of an iteration are captured into one CUDA graph after the
 * warm-ups (the buffers and counts stay those of the row), and each
 * iteration launches it graph_launches times. */
rmacoll_status_t perf_measure(perf_state_t *s, perf_bufs_t *b,
                                     rmacoll_perf_a2av_fn_t fn,
                                     const char *label,
                                     rmacoll_datatype_t dtype,
                                     uint64_t row_id, double *g)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_opts_t *o = s->o;
    rmacoll_status_t st;
    double total_us = 0, t0 = 0, us = 0;
    uint64_t wrong = 0;
    int reported = 0;

    /* Warm-ups: one fill, no check (they also fault the pages in). */
    st = perf_put_send(s, b, row_id << 32);
    if (st == RMACOLL_SUCCESS)
        st = perf_reset_recv(s, b);
    for (int it = 0; it < o->warmup && st == RMACOLL_SUCCESS; it++)
        st = perf_call(s, b, fn, dtype);
    if (st == RMACOLL_SUCCESS && s->dev != NULL)
        st = s->dev->sync(be->ctx, s->err, sizeof(s->err));
    if (st == RMACOLL_SUCCESS && o->graph_launches > 0) {
        rmacoll_status_t cst;

        st = s->dev->graph_begin(be->ctx, s->err, sizeof(s->err));
        if (st == RMACOLL_SUCCESS) {
            char keep[sizeof(s->err)];

            for (int a = 0; a < o->agg_iters && st == RMACOLL_SUCCESS; a++)
                st = perf_call(s, b, fn, dtype);
            /* the capture always ends; a failed call's message wins */
            memcpy(keep, s->err, sizeof(keep));
            cst = s->dev->graph_end(be->ctx, st == RMACOLL_SUCCESS, s->err, sizeof(s->err));
            if (st != RMACOLL_SUCCESS)
                memcpy(s->err, keep, sizeof(keep));
            else
                st = cst;
        }
    }
    if (st != RMACOLL_SUCCESS)
        return st;

    if (o->check_every) {
        /* --check-every: every iteration a fresh stamp, the receive buffer
         * reset to the sentinel (both copied to the device when there is
         * one), a barrier (so fill/check skew is not timed), the call
         * alone timed (device: events around it on the stream; -m:
         * agg_iters calls on the same buffers, which give the same bytes),
         * then the check. */
        for (int it = 0; it < o->iters; it++) {
            st = perf_checked(s, b, fn, dtype, label, row_id, it, 1, &us,
                              &wrong, &reported);
            if (st != RMACOLL_SUCCESS)
                return st;
            total_us += us;
        }
    } else {
        /* As nccl-tests: the timed iterations back to back on the warm-up's
         * data, then o->check checked iterations, each with a fresh stamp
         * (so bytes left by a timed call fail it), not timed. */
        st = be->barrier(be->ctx, s->err, sizeof(s->err));
        if (st == RMACOLL_SUCCESS)
            st = perf_timer_start(s, &t0);
        if (st == RMACOLL_SUCCESS)
            st = perf_iteration(s, b, fn, dtype, o->iters);
        if (st == RMACOLL_SUCCESS)
            st = perf_timer_stop(s, t0, &total_us);
        for (int c = 0; c < o->check && st == RMACOLL_SUCCESS; c++)
            st = perf_checked(s, b, fn, dtype, label, row_id, c, 0, &us,
                              &wrong, &reported);
        if (st != RMACOLL_SUCCESS)
            return st;
    }
    g[PERF_G_TIME] = total_us / ((double)o->iters * o->agg_iters *
                                 (o->graph_launches > 0 ? o->graph_launches : 1));
    g[PERF_G_SENT] = (double)b->sbytes;
    g[PERF_G_RECV] = (double)b->rbytes;
    g[PERF_G_WRONG] = (double)wrong;
    return RMACOLL_SUCCESS;
}

/* One host buffer of a row: at least 1 byte (a rank may send or receive
 * nothing), from the backend's host_alloc with -R, else page-aligned. */
static rmacoll_status_t perf_host_alloc(perf_state_t *s, size_t bytes,
                                        void **p)
{
    const rmacoll_perf_backend_t *be = s->be;

    *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (s->o->local_register)
        return be->host_alloc(be->ctx, bytes, p, s->err, sizeof(s->err));
    if (posix_memalign(p, 4096, bytes) != 0) {
        *p = NULL;
        snprintf(s->err, sizeof(s->err), "no memory for %zu bytes of buffers",
                 bytes);
        return RMACOLL_ERR_NO_MEMORY;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t perf_host_free(perf_state_t *s, void *p, char *err,
                                       size_t errlen)
{
    if (p == NULL)
        return RMACOLL_SUCCESS;
    if (s->o->local_register)
        return s->be->host_free(s->be->ctx, p, err, errlen);
    free(p);
    return RMACOLL_SUCCESS;
}

/* Releases the buffers of a row. Returns st when it is an error (s->err
 * kept), else the first error of freeing (s->err filled). */
rmacoll_status_t perf_bufs_close(perf_state_t *s, perf_bufs_t *b,
                                        rmacoll_status_t st)
{
    char scratch[sizeof(s->err)];
    char *err = st == RMACOLL_SUCCESS ? s->err : scratch;
    rmacoll_status_t fs, fr;

    if (s->dev != NULL) {
        if (b->ds != NULL)
            s->dev->release(s->be->ctx, b->ds);
        if (b->dr != NULL)
            s->dev->release(s->be->ctx, b->dr);
    }
    fs = perf_host_free(s, b->hs, err, sizeof(s->err));
    fr = perf_host_free(s, b->hr, fs == RMACOLL_SUCCESS ? err : scratch,
                        sizeof(s->err));
    memset(b, 0, sizeof(*b));
    if (st != RMACOLL_SUCCESS)
        return st;
    return fs != RMACOLL_SUCCESS ? fs : fr;
}

/* Sets this rank's counts from case c and allocates the buffers of one
 * row (host, and device twins with device memory); on failure everything
 * is released. */
rmacoll_status_t perf_bufs_open(perf_state_t *s,
                                       const rmacoll_case_t *c,
                                       rmacoll_datatype_t dtype,
                                       perf_bufs_t *bp)
{
    const rmacoll_perf_backend_t *be = s->be;
    const rmacoll_perf_devops_t *dev = s->dev;
    int n = s->n, r = s->rank;
    int64_t sext, rext;
    perf_bufs_t b;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    memset(&b, 0, sizeof(b));
    memset(bp, 0, sizeof(*bp));
    b.esize = rmacoll_datatype_size(dtype);
    for (int j = 0; j < n; j++) {
        s->sendcounts[j] = c->send[(size_t)r * n + j];
        s->recvcounts[j] = c->recv[(size_t)j * n + r];
    }
    sext = rmacoll_displs_contiguous(n, s->sendcounts, s->sdispls);
    rext = rmacoll_displs_contiguous(n, s->recvcounts, s->rdispls);
    b.sbytes = (size_t)sext * b.esize;
    b.rbytes = (size_t)rext * b.esize;
    st = perf_host_alloc(s, b.sbytes, &b.hs);
    if (st == RMACOLL_SUCCESS)
        st = perf_host_alloc(s, b.rbytes, &b.hr);
    if (st != RMACOLL_SUCCESS) {
        perf_bufs_close(s, &b, st);
        return st;
    }
    b.ds = b.hs;
    b.dr = b.hr;
    if (dev != NULL) {
        b.ds = b.dr = NULL;
        st = dev->alloc(be->ctx, b.sbytes ? b.sbytes : 1, &b.ds, s->err,
                        sizeof(s->err));
        if (st == RMACOLL_SUCCESS)
            st = dev->alloc(be->ctx, b.rbytes ? b.rbytes : 1, &b.dr, s->err,
                            sizeof(s->err));
    }
    *bp = b;
    if (st == RMACOLL_SUCCESS && be->prepare != NULL)
        st = be->prepare(be->ctx, s->sendcounts, s->sdispls, s->recvcounts,
                         s->rdispls, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS)
        perf_bufs_close(s, bp, st);
    return st;
}

/* Times one row on every collective (the primary, then the baseline, on
 * the same counts and buffers); fills mine[ncoll * PERF_G_N]. */
rmacoll_status_t perf_row(perf_state_t *s, const rmacoll_case_t *c,
                                 rmacoll_datatype_t dtype, uint64_t row_id,
                                 double *mine)
{
    const rmacoll_perf_backend_t *be = s->be;
    perf_bufs_t b;
    rmacoll_status_t st;

    st = perf_bufs_open(s, c, dtype, &b);
    if (st != RMACOLL_SUCCESS)
        return st;
    st = perf_measure(s, &b, be->alltoallv,
                      be->coll_name ? be->coll_name : be->name, dtype, row_id,
                      mine);
    if (st == RMACOLL_SUCCESS && s->ncoll > 1)
        st = perf_measure(s, &b, be->baseline_alltoallv, be->baseline_name,
                          dtype, row_id, mine + PERF_G_N);
    return perf_bufs_close(s, &b, st);
}

/* Reduces collective k of the gathered records into row. */
void perf_reduce(const perf_state_t *s, int k, perf_row_t *row)
{
    int n = s->n;

    double sum = 0;

    row->buf_bytes = 0;
    row->time_us = 0;
    row->time_min_us = -1;
    row->max_bytes = 0;
    row->wrong = 0;
    for (int i = 0; i < n; i++) {
        const double *g = s->gathered +
                          ((size_t)i * (size_t)s->ncoll + (size_t)k) * PERF_G_N;
        double b = g[PERF_G_SENT] > g[PERF_G_RECV] ? g[PERF_G_SENT]
                                                   : g[PERF_G_RECV];

        if (g[PERF_G_TIME] > row->time_us)
            row->time_us = g[PERF_G_TIME];
        if (row->time_min_us < 0 || g[PERF_G_TIME] < row->time_min_us)
            row->time_min_us = g[PERF_G_TIME];
        sum += g[PERF_G_TIME];
        if (b > row->max_bytes)
            row->max_bytes = b;
        if (g[PERF_G_SENT] + g[PERF_G_RECV] > row->buf_bytes)
            row->buf_bytes = g[PERF_G_SENT] + g[PERF_G_RECV];
        row->wrong += g[PERF_G_WRONG];
    }
    /* -a (nccl-tests' average): 0 rank 0, 1 mean, 2 min, 3 max (default). */
    switch (s->o->average) {
    case 0: row->time_us = s->gathered[(size_t)k * PERF_G_N + PERF_G_TIME]; break;
    case 1: row->time_us = sum / n; break;
    case 2: row->time_us = row->time_min_us; break;
    default: break;
    }
    /* bytes / us / 1e3 = GB/s with 1 GB = 1e9 bytes (as nccl-tests). */
    row->algbw = row->time_us > 0 ? row->max_bytes / row->time_us / 1e3 : 0;
    row->busbw = row->algbw * (double)(n - 1) / (double)n;
}

/* Node sizes in order of first appearance; *contig = 0 when a node's
 * ranks are not contiguous. */
int perf_nodes(const double *keys, int n, int *sizes, int max,
                      int *contig)
{
    int nn = 0;
    double seen[RMACOLL_PERF_MAX_NODES];

    *contig = 1;
    for (int i = 0; i < n; i++) {
        int k;

        for (k = 0; k < nn; k++)
            if (seen[k] == keys[i])
                break;
        if (k == nn) {
            if (nn == max)
                return -1;
            seen[nn] = keys[i];
            sizes[nn++] = 0;
        }
        if (i > 0 && keys[i] != keys[i - 1] && sizes[k] > 0)
            *contig = 0;
        sizes[k]++;
    }
    return nn;
}

const char *perf_dtype_name(rmacoll_datatype_t d)
{
    const char *s = rmacoll_datatype_name(d);

    return s != NULL ? s : "?";
}

/* A number in `width` columns with as many decimals as fit (nccl-tests'
 * layout: 2 decimals while they fit, then 1, then none, then %e). */
void perf_num(double v, int width, char *buf, size_t len)
{
    int digits = 1;

    for (double p = 10; v >= p && digits < 30; p *= 10)
        digits++;
    if (digits < width - 2)
        snprintf(buf, len, "%*.2f", width, v);
    else if (digits < width - 1)
        snprintf(buf, len, "%*.1f", width, v);
    else if (digits <= width)
        snprintf(buf, len, "%*.0f", width, v);
    else
        snprintf(buf, len, "%*.1e", width, v);
}

const char *perf_average_name(int average)
{
    static const char *const names[] = {"rank 0", "mean", "min", "max"};

    return average >= 0 && average < 4 ? names[average] : "max";
}

/* Where the host send and receive buffers come from (header, JSON). */
const char *perf_host_alloc_name(const rmacoll_perf_opts_t *o,
                                        const rmacoll_perf_backend_t *be)
{
    if (!o->local_register)
        return "posix_memalign";
    return be->host_alloc_name != NULL ? be->host_alloc_name : "host_alloc";
}

/* Per-rank record of the "Using devices" lines: pid, device, then the
 * text "host\tbusid\tname" one byte per double (gather_f64 is all the
 * backends have). */
#define PERF_INFO_CHARS 192

rmacoll_status_t perf_gather_info(perf_state_t *s, double *keys,
                                         char **lines)
{
    const rmacoll_perf_backend_t *be = s->be;
    double mine[3 + PERF_INFO_CHARS], *all = NULL;
    char host[64] = "", bus[32] = "host", name[96] = "host memory";
    char text[PERF_INFO_CHARS];
    int device = -1, k = 3 + PERF_INFO_CHARS;
    size_t cap;
    rmacoll_status_t st;

    *lines = NULL;
    gethostname(host, sizeof(host) - 1);
    if (be->describe != NULL)
        be->describe(be->ctx, &device, bus, sizeof(bus), name, sizeof(name));
    snprintf(text, sizeof(text), "%s\t%s\t%s", host, bus, name);
    memset(mine, 0, sizeof(mine));
    mine[0] = (double)rmacoll_perf_node_key();
    mine[1] = (double)getpid();
    mine[2] = (double)device;
    for (int i = 0; i < PERF_INFO_CHARS && text[i] != '\0'; i++)
        mine[3 + i] = (double)(unsigned char)text[i];
    if (s->rank == 0) {
        all = calloc((size_t)s->n * (size_t)k, sizeof(double));
        if (all == NULL) {
            snprintf(s->err, sizeof(s->err), "no memory for %d rank records",
                     s->n);
            /* still take part, so that the others are not left waiting */
        }
    }
    st = be->gather_f64(be->ctx, mine, k, all, s->err, sizeof(s->err));
    if (st != RMACOLL_SUCCESS || s->rank != 0) {
        free(all);
        return st;
    }
    if (all == NULL)
        return RMACOLL_ERR_NO_MEMORY;
    cap = (size_t)s->n * (PERF_INFO_CHARS + 64) + 1;
    *lines = calloc(1, cap);
    for (int r = 0; r < s->n; r++) {
        const double *g = all + (size_t)r * (size_t)k;
        char t[PERF_INFO_CHARS + 1], *h = t, *b, *nm;
        size_t used = *lines ? strlen(*lines) : 0;

        keys[r] = g[0];
        for (int i = 0; i < PERF_INFO_CHARS; i++)
            t[i] = (char)(int)g[3 + i];
        t[PERF_INFO_CHARS] = '\0';
        b = strchr(h, '\t');
        if (b != NULL)
            *b++ = '\0';
        nm = b != NULL ? strchr(b, '\t') : NULL;
        if (nm != NULL)
            *nm++ = '\0';
        if (*lines != NULL)
            snprintf(*lines + used, cap - used,
                     "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n",
                     r, (int)g[1], h, (int)g[2], b ? b : "?", nm ? nm : "?");
    }
    free(all);
    return *lines != NULL ? RMACOLL_SUCCESS : RMACOLL_ERR_NO_MEMORY;
}
