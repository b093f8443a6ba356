/*
 * cases_parse.c - the text forms of tools/common/cases.h: the count-matrix
 * case format (tests/cases/README.md; rmacoll_case_parse, _load), the
 * topology specs "4,4" / "NxG" (rmacoll_case_parse_topology) and sizes
 * with K/M/G/T suffixes and fractions (rmacoll_parse_size).
 */
#include "cases.h"
#include "cases_int.h"

#include "core/config/config_internal.h" /* rmacoll__config_parse_size */

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void case_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void case_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Parses a comma-separated list of non-negative ints; returns count or -1. */
static int case_parse_intlist(const char *s, int *vals, int max, char *why,
                              size_t whylen)
{
    int n = 0;
    const char *p = s;

    while (*p != '\0') {
        char *end;
        long v;

        while (isspace((unsigned char)*p)) {
            p++;
        }
        errno = 0;
        v = strtol(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || v > CASE_MAX_RANKS) {
            snprintf(why, whylen, "expected a non-negative integer at '%s'",
                     p);
            return -1;
        }
        if (n >= max) {
            snprintf(why, whylen, "more than %d values", max);
            return -1;
        }
        vals[n++] = (int)v;
        p = end;
        while (isspace((unsigned char)*p)) {
            p++;
        }
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                snprintf(why, whylen, "trailing comma");
                return -1;
            }
        } else if (*p != '\0') {
            snprintf(why, whylen, "unexpected '%c'", *p);
            return -1;
        }
    }
    if (n == 0) {
        snprintf(why, whylen, "empty list");
    }
    return n == 0 ? -1 : n;
}

rmacoll_status_t rmacoll_case_parse_topology(const char *spec, int *node_of,
                                             int max_ranks, int *nranks_out)
{
    int sizes[1024];
    char why[128];
    int n, r = 0, xn, xg;
    char xc;

    if (sscanf(spec, "%dx%d%c", &xn, &xg, &xc) == 2) { /* NxG: N nodes of G ranks */
        if (xn < 1 || xg < 1 || (int64_t)xn * xg > max_ranks) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        for (int k = 0; k < xn * xg; k++) {
            node_of[k] = k / xg;
        }
        *nranks_out = xn * xg;
        return RMACOLL_SUCCESS;
    }
    n = case_parse_intlist(spec, sizes, 1024, why, sizeof(why));
    if (n < 0) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 1 || r + sizes[k] > max_ranks) {
            return RMACOLL_ERR_INVALID_ARG;
        }
        for (int l = 0; l < sizes[k]; l++) {
            node_of[r++] = k;
        }
    }
    *nranks_out = r;
    return RMACOLL_SUCCESS;
}

/* Renumbers arbitrary node keys by lowest rank (as the library does). */
static int case_renumber_nodes(int *node_of, int n)
{
    int *map = malloc((size_t)n * sizeof(int));
    int *keys = malloc((size_t)n * sizeof(int));
    int nnodes = 0;

    if (map == NULL || keys == NULL) {
        free(map);
        free(keys);
        return -1;
    }
    for (int r = 0; r < n; r++) {
        int k;

        for (k = 0; k < nnodes && keys[k] != node_of[r]; k++) {
        }
        if (k == nnodes) {
            keys[nnodes++] = node_of[r];
        }
        map[r] = k;
    }
    memcpy(node_of, map, (size_t)n * sizeof(int));
    free(map);
    free(keys);
    return nnodes;
}

/* Parser state. */
typedef struct case_parser {
    const char *name;
    int line;
    int nranks;
    int *node_of;
    int have_dtype;
    rmacoll_datatype_t dtype;
    int64_t *mat[2];       /* send, recv */
    int cur;               /* matrix being read: 0 send, 1 recv, -1 none */
    int rows[2];           /* rows read so far */
    int key_line[2];       /* line of the "send:"/"recv:" key */
    char *err;
    size_t errlen;
} case_parser_t;

static rmacoll_status_t case_fail(case_parser_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static rmacoll_status_t case_fail(case_parser_t *p, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    case_err(p->err, p->errlen, "%s:%d: %s", p->name, p->line, msg);
    return RMACOLL_ERR_INVALID_ARG;
}

static rmacoll_status_t case_end_matrix(case_parser_t *p)
{
    static const char *names[2] = {"send", "recv"};

    if (p->cur >= 0 && p->rows[p->cur] != p->nranks) {
        return case_fail(p, "%s: matrix (from line %d) has %d rows, expected %d",
                         names[p->cur], p->key_line[p->cur], p->rows[p->cur],
                         p->nranks);
    }
    p->cur = -1;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t case_row(case_parser_t *p, char *s)
{
    int64_t *row;
    int n = 0;
    char *q = s;

    if (p->cur < 0) {
        return case_fail(p, "numbers outside a send:/recv: matrix");
    }
    if (p->rows[p->cur] >= p->nranks) {
        return case_fail(p, "matrix has more than %d rows", p->nranks);
    }
    row = p->mat[p->cur] + (size_t)p->rows[p->cur] * (size_t)p->nranks;
    while (*q != '\0') {
        char *end;
        long long v;

        errno = 0;
        v = strtoll(q, &end, 10);
        if (end == q || errno != 0 ||
            (*end != '\0' && !isspace((unsigned char)*end))) {
            return case_fail(p, "bad count '%.*s'",
                             (int)strcspn(q, " \t"), q);
        }
        if (v < 0) {
            return case_fail(p, "negative count %lld", v);
        }
        if (n >= p->nranks) {
            return case_fail(p, "row has more than %d counts", p->nranks);
        }
        row[n++] = (int64_t)v;
        q = end;
        while (isspace((unsigned char)*q)) {
            q++;
        }
    }
    if (n != p->nranks) {
        return case_fail(p, "row has %d counts, expected %d", n, p->nranks);
    }
    p->rows[p->cur]++;
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t case_set_ranks(case_parser_t *p, int *nodes, int n)
{
    size_t nn = (size_t)n * (size_t)n;

    if (p->nranks > 0) {
        return case_fail(p, "topology given twice (topology: and nodes: "
                            "are exclusive)");
    }
    p->nranks = n;
    p->node_of = malloc((size_t)n * sizeof(int));
    p->mat[0] = calloc(nn, sizeof(int64_t));
    p->mat[1] = calloc(nn, sizeof(int64_t));
    if (p->node_of == NULL || p->mat[0] == NULL || p->mat[1] == NULL) {
        return case_fail(p, "out of memory for %d ranks", n);
    }
    memcpy(p->node_of, nodes, (size_t)n * sizeof(int));
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t case_key(case_parser_t *p, char *key, char *val)
{
    int *vals;
    int n;
    char why[128];
    rmacoll_status_t st;

    if (strcmp(key, "send") == 0 || strcmp(key, "recv") == 0) {
        int m = key[0] == 's' ? 0 : 1;

        if (p->nranks == 0) {
            return case_fail(p, "%s: before topology:", key);
        }
        if (*val != '\0') {
            return case_fail(p, "%s: expects its rows on the next lines", key);
        }
        if (p->key_line[m] != 0) {
            return case_fail(p, "%s: given twice (first at line %d)", key,
                             p->key_line[m]);
        }
        p->cur = m;
        p->key_line[m] = p->line;
        return RMACOLL_SUCCESS;
    }
    if (strcmp(key, "dtype") == 0) {
        if (p->have_dtype) {
            return case_fail(p, "dtype: given twice");
        }
        if (rmacoll_datatype_from_name(val, &p->dtype) != RMACOLL_SUCCESS) {
            return case_fail(p, "unknown dtype '%s'", val);
        }
        p->have_dtype = 1;
        return RMACOLL_SUCCESS;
    }
    if (strcmp(key, "topology") == 0 || strcmp(key, "nodes") == 0) {
        vals = malloc(CASE_MAX_RANKS * sizeof(int));
        if (vals == NULL) {
            return case_fail(p, "out of memory");
        }
        n = case_parse_intlist(val, vals, CASE_MAX_RANKS, why, sizeof(why));
        if (n < 0) {
            free(vals);
            return case_fail(p, "%s: %s", key, why);
        }
        if (key[0] == 't') {
            int *node_of = malloc(CASE_MAX_RANKS * sizeof(int));
            int r = 0;

            for (int k = 0; node_of != NULL && k < n; k++) {
                if (vals[k] < 1 || r + vals[k] > CASE_MAX_RANKS) {
                    int bad = vals[k];

                    free(vals);
                    free(node_of);
                    return case_fail(p, "topology: node %d has %d ranks "
                                        "(need 1..%d in all)",
                                     k, bad, CASE_MAX_RANKS);
                }
                for (int l = 0; l < vals[k]; l++) {
                    node_of[r++] = k;
                }
            }
            if (node_of == NULL) {
                free(vals);
                return case_fail(p, "out of memory");
            }
            st = case_set_ranks(p, node_of, r);
            free(node_of);
        } else {
            if (case_renumber_nodes(vals, n) < 0) {
                free(vals);
                return case_fail(p, "out of memory");
            }
            st = case_set_ranks(p, vals, n);
        }
        free(vals);
        return st;
    }
    return case_fail(p, "unknown key '%s' (expected topology, nodes, dtype, "
                        "send, recv)", key);
}

static rmacoll_status_t case_line(case_parser_t *p, char *s)
{
    char *hash = strchr(s, '#');
    char *end;
    char *colon;

    if (hash != NULL) {
        *hash = '\0';
    }
    while (isspace((unsigned char)*s)) {
        s++;
    }
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) {
        *--end = '\0';
    }
    if (*s == '\0') {
        return RMACOLL_SUCCESS;
    }
    if (isdigit((unsigned char)*s) || *s == '-' || *s == '+') {
        return case_row(p, s);
    }
    colon = strchr(s, ':');
    if (colon == NULL) {
        return case_fail(p, "expected 'key: value' or a row of counts, "
                            "got '%s'", s);
    }
    *colon = '\0';
    for (end = colon; end > s && isspace((unsigned char)end[-1]);) {
        *--end = '\0';
    }
    colon++;
    while (isspace((unsigned char)*colon)) {
        colon++;
    }
    if (p->cur >= 0) {
        rmacoll_status_t st = case_end_matrix(p);

        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    return case_key(p, s, colon);
}

rmacoll_status_t rmacoll_case_parse(const char *text, const char *name,
                                    rmacoll_case_t **out, char *err,
                                    size_t errlen)
{
    case_parser_t p;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    char *copy;
    char *line;
    rmacoll_case_t *c = NULL;

    *out = NULL;
    memset(&p, 0, sizeof(p));
    p.name = name != NULL ? name : "<string>";
    p.cur = -1;
    p.dtype = RMACOLL_FLOAT32;
    p.err = err;
    p.errlen = errlen;
    copy = strdup(text);
    if (copy == NULL) {
        case_err(err, errlen, "%s: out of memory", p.name);
        return RMACOLL_ERR_NO_MEMORY;
    }
    line = copy;
    while (line != NULL && st == RMACOLL_SUCCESS) {
        char *nl = strchr(line, '\n');

        if (nl != NULL) {
            *nl = '\0';
        }
        p.line++;
        st = case_line(&p, line);
        line = nl != NULL && nl[1] != '\0' ? nl + 1 : NULL;
    }
    if (st == RMACOLL_SUCCESS) {
        st = case_end_matrix(&p);
    }
    if (st == RMACOLL_SUCCESS && p.nranks == 0) {
        st = case_fail(&p, "missing topology: (or nodes:)");
    }
    if (st == RMACOLL_SUCCESS && p.key_line[0] == 0) {
        st = case_fail(&p, "missing send: matrix");
    }
    if (st == RMACOLL_SUCCESS) {
        st = rmacoll_case_create(p.nranks, p.node_of, p.dtype, &c);
        if (st != RMACOLL_SUCCESS) {
            case_fail(&p, "cannot build case: %s", rmacoll_status_string(st));
        }
    }
    if (st == RMACOLL_SUCCESS) {
        size_t nn = (size_t)p.nranks * (size_t)p.nranks * sizeof(int64_t);
        const char *base = strrchr(p.name, '/');

        memcpy(c->send, p.mat[0], nn);
        memcpy(c->recv, p.key_line[1] != 0 ? p.mat[1] : p.mat[0], nn);
        rmacoll_case_update_mismatch(c);
        snprintf(c->name, sizeof(c->name), "%s", base != NULL ? base + 1
                                                              : p.name);
        *out = c;
        if (err != NULL && errlen > 0) {
            err[0] = '\0';
        }
    }
    free(copy);
    free(p.node_of);
    free(p.mat[0]);
    free(p.mat[1]);
    return st;
}

rmacoll_status_t rmacoll_case_load(const char *path, rmacoll_case_t **c,
                                   char *err, size_t errlen)
{
    FILE *f;
    char *text;
    long len;
    size_t got;
    rmacoll_status_t st;

    *c = NULL;
    f = fopen(path, "rb");
    if (f == NULL) {
        case_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        case_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        fclose(f);
        return RMACOLL_ERR_INVALID_ARG;
    }
    text = malloc((size_t)len + 1);
    if (text == NULL) {
        fclose(f);
        case_err(err, errlen, "%s: out of memory (%ld bytes)", path, len);
        return RMACOLL_ERR_NO_MEMORY;
    }
    got = fread(text, 1, (size_t)len, f);
    fclose(f);
    text[got] = '\0';
    if (strlen(text) != got) {
        free(text);
        case_err(err, errlen, "%s: contains a NUL byte", path);
        return RMACOLL_ERR_INVALID_ARG;
    }
    st = rmacoll_case_parse(text, path, c, err, errlen);
    free(text);
    return st;
}

rmacoll_status_t rmacoll_parse_size(const char *s, uint64_t *out)
{
    const char *dot;

    if (s == NULL || out == NULL || !isdigit((unsigned char)*s)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    dot = strchr(s, '.');
    if (dot == NULL) {
        /* The library's parser (configuration files use the same). */
        return rmacoll__config_parse_size(s, out) == RMACOLL_SUCCESS
                   ? RMACOLL_SUCCESS
                   : RMACOLL_ERR_INVALID_ARG;
    }
    {
        /* A fraction, as nccl-tests takes them ("-b 1.5M"): the integer
         * and the fraction digits as one integer, scaled by the unit, then
         * divided by 10^digits (rounded down). */
        char digits[40], unit[24];
        size_t nd = 0, nf = 0;
        const char *p = s;
        uint64_t whole, div = 1;
        unsigned __int128 v;

        for (; isdigit((unsigned char)*p) && nd < sizeof(digits) - 1; p++)
            digits[nd++] = *p;
        if (*p != '.')
            return RMACOLL_ERR_INVALID_ARG;
        for (p++; isdigit((unsigned char)*p) && nd < sizeof(digits) - 1 &&
                  nf < 18;
             p++, nf++) {
            digits[nd++] = *p;
            div *= 10;
        }
        digits[nd] = '\0';
        if (nf == 0 || strlen(p) >= sizeof(unit) - 2)
            return RMACOLL_ERR_INVALID_ARG;
        /* "1" + unit gives the unit's multiplier through the same parser. */
        snprintf(unit, sizeof(unit), "1%s", p);
        if (rmacoll__config_parse_size(unit, &whole) != RMACOLL_SUCCESS)
            return RMACOLL_ERR_INVALID_ARG;
        errno = 0;
        v = (unsigned __int128)strtoull(digits, NULL, 10) * whole / div;
        if (errno != 0 || v > UINT64_MAX)
            return RMACOLL_ERR_INVALID_ARG;
        *out = (uint64_t)v;
        return RMACOLL_SUCCESS;
    }
}
