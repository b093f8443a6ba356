/*
 * test_cases.c - the count-matrix case reader (every shared case loads;
 * malformed input fails with file:line), the generators (deterministic per
 * seed, shapes of each distribution), displacement helpers, and the fill
 * pattern / checker (a single flipped byte is caught).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include "refexec.h"

#ifndef RMACOLL_EXTRA_CASES_DIRS
#define RMACOLL_EXTRA_CASES_DIRS ""
#endif

static void test_shared_cases_load(void **state)
{
    DIR *d = opendir(RMACOLL_CASES_DIR);
    struct dirent *e;
    int nfiles = 0, nmismatch = 0;

    (void)state;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char path[1024], err[256];
        rmacoll_case_t *c;
        size_t len = strlen(e->d_name);

        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, e->d_name);
        assert_int_equal(rmacoll_case_load(path, &c, err, sizeof(err)),
                         RMACOLL_SUCCESS);
        assert_string_equal(c->name, e->d_name);
        assert_true(c->nranks >= 1);
        nfiles++;
        nmismatch += c->has_mismatch;
        rmacoll_case_free(c);
    }
    closedir(d);
    assert_true(nfiles >= 10);
    assert_int_equal(nmismatch, 1);
}

static void test_shared_case_values(void **state)
{
    char err[256];
    rmacoll_case_t *c;

    (void)state;
    assert_int_equal(rmacoll_case_load(RMACOLL_CASES_DIR "/uneven_nodes_3_2.txt",
                                       &c, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(c->nranks, 5);
    assert_int_equal(c->nnodes, 2);
    assert_int_equal(c->node_of[2], 0);
    assert_int_equal(c->node_of[3], 1);
    assert_int_equal(c->dtype, RMACOLL_FLOAT32);
    assert_int_equal(c->send[0], 99);
    assert_int_equal(c->send[1 * 5 + 4], 696);
    assert_int_equal(c->send[4 * 5 + 4], 798);
    assert_int_equal(c->recv[4 * 5 + 4], 798);
    assert_false(c->has_mismatch);
    rmacoll_case_free(c);

    assert_int_equal(rmacoll_case_load(RMACOLL_CASES_DIR "/mismatch_2x2.txt",
                                       &c, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_true(c->has_mismatch);
    assert_int_equal(c->send[0 * 4 + 1], 41);
    assert_int_equal(c->recv[0 * 4 + 1], 40);
    assert_int_equal(c->recv[3 * 4 + 3], 50);
    rmacoll_case_free(c);
}

static void test_nodes_extension(void **state)
{
    char err[256];
    rmacoll_case_t *c;
    const char *text = "nodes: 7,3,7,3\n"
                       "dtype: int8\n"
                       "send:\n"
                       "1 2 3 4\n5 6 7 8\n9 10 11 12\n13 14 15 16\n";

    (void)state;
    assert_int_equal(rmacoll_case_parse(text, "x", &c, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(c->nnodes, 2);
    assert_int_equal(c->node_of[0], 0);
    assert_int_equal(c->node_of[1], 1);
    assert_int_equal(c->node_of[2], 0);
    assert_int_equal(c->node_of[3], 1);
    assert_int_equal(c->dtype, RMACOLL_INT8);
    assert_int_equal(c->send[15], 16);
    rmacoll_case_free(c);
}

/* Each malformed text must fail naming "bad:LINE:" and a cause. */
static void test_parse_errors(void **state)
{
    static const struct {
        const char *text;
        const char *want;
    } bad[] = {
        {"topology: 2\ndtype: float32\nsend:\n1 2\n3\n", "bad:5: row has 1 counts, expected 2"},
        {"topology: 2\nsend:\n1 2\n3 4\n5 6\n", "bad:5: matrix has more than 2 rows"},
        {"topology: 2\nsend:\n1 2\nrecv:\n1 2\n3 4\n", "bad:4: send: matrix (from line 2) has 1 rows, expected 2"},
        {"topology: 1,1\n# c\n\ndtype: float33\n", "bad:4: unknown dtype 'float33'"},
        {"topology: 1,x\n", "bad:1: topology: "},
        {"topology: 1,0\n", "bad:1: topology: node 1 has 0 ranks"},
        {"send:\n1\n", "bad:1: send: before topology:"},
        {"topology: 1\nsend:\n-1\n", "bad:3: negative count -1"},
        {"topology: 1\nsend:\n1x\n", "bad:3: bad count '1x'"},
        {"topology: 1\ncolour: red\n", "bad:2: unknown key 'colour'"},
        {"topology: 1\n", "bad:1: missing send: matrix"},
        {"dtype: int8\n", "bad:1: missing topology:"},
        {"topology: 1\nnodes: 0\n", "bad:2: topology given twice"},
        {"topology: 1\nsend: 1\n", "bad:2: send: expects its rows"},
        {"topology: 1\n5\n", "bad:2: numbers outside a send:/recv: matrix"},
        {"topology: 1\nhello\n", "bad:2: expected 'key: value'"},
        {"topology: 1\nsend:\n1\nsend:\n1\n", "bad:4: send: given twice (first at line 2)"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char err[256] = "";
        rmacoll_case_t *c = (rmacoll_case_t *)1;

        assert_int_equal(rmacoll_case_parse(bad[k].text, "bad", &c, err,
                                            sizeof(err)),
                         RMACOLL_ERR_INVALID_ARG);
        assert_null(c);
        if (strncmp(err, bad[k].want, strlen(bad[k].want)) != 0) {
            fail_msg("case %zu: got '%s', want prefix '%s'", k, err,
                     bad[k].want);
        }
    }
}

static void test_load_missing_file(void **state)
{
    char err[256];
    rmacoll_case_t *c;

    (void)state;
    assert_int_equal(rmacoll_case_load("/nonexistent/x.txt", &c, err,
                                       sizeof(err)),
                     RMACOLL_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "/nonexistent/x.txt: cannot open"));
}

static void test_generators(void **state)
{
    static const char *dists[] = {"uniform", "random", "zipf:1.2",
                                  "sparse:0.25"};
    int sizes[3] = {3, 1, 2};

    (void)state;
    for (size_t d = 0; d < 4; d++) {
        rmacoll_case_dist_t dist;
        rmacoll_case_t *a, *b, *o;
        size_t nn = 36;
        int64_t zeros = 0, total = 0;

        assert_int_equal(rmacoll_case_dist_parse(dists[d], &dist),
                         RMACOLL_SUCCESS);
        assert_int_equal(rmacoll_case_random(3, sizes, &dist, 100, 42,
                                             RMACOLL_INT32, &a), 0);
        assert_int_equal(rmacoll_case_random(3, sizes, &dist, 100, 42,
                                             RMACOLL_INT32, &b), 0);
        assert_int_equal(rmacoll_case_random(3, sizes, &dist, 100, 43,
                                             RMACOLL_INT32, &o), 0);
        assert_int_equal(a->nranks, 6);
        assert_int_equal(a->nnodes, 3);
        assert_int_equal(a->node_of[3], 1);
        assert_int_equal(a->node_of[4], 2);
        assert_memory_equal(a->send, b->send, nn * sizeof(int64_t));
        assert_memory_equal(a->send, a->recv, nn * sizeof(int64_t));
        assert_false(a->has_mismatch);
        if (d > 0) {
            assert_true(memcmp(a->send, o->send, nn * sizeof(int64_t)) != 0);
        }
        for (size_t k = 0; k < nn; k++) {
            zeros += a->send[k] == 0;
            total += a->send[k];
            assert_true(a->send[k] >= 0);
            if (d == 0) {
                assert_int_equal(a->send[k], 100);
            }
        }
        if (d == 3) {
            assert_true(zeros > 10 && zeros < 36);
        }
        if (d == 2) {  /* about base * N per sender */
            assert_true(total > 36 * 100 * 8 / 10 && total < 36 * 100 * 12 / 10);
        }
        rmacoll_case_free(a);
        rmacoll_case_free(b);
        rmacoll_case_free(o);
    }
}

static void test_dist_parse(void **state)
{
    rmacoll_case_dist_t d;

    (void)state;
    assert_int_equal(rmacoll_case_dist_parse("zipf:1.5", &d), 0);
    assert_int_equal(d.kind, RMACOLL_CASE_ZIPF);
    assert_true(d.param > 1.49 && d.param < 1.51);
    assert_int_equal(rmacoll_case_dist_parse("sparse:1.5", &d),
                     RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_case_dist_parse("zipf:", &d),
                     RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_case_dist_parse("gauss", &d),
                     RMACOLL_ERR_INVALID_ARG);
}

static void test_displs(void **state)
{
    int64_t counts[4] = {2, 0, 5, 1};
    int64_t d[4];

    (void)state;
    assert_int_equal(rmacoll_displs_contiguous(4, counts, d), 8);
    assert_int_equal(d[0], 0);
    assert_int_equal(d[1], 2);
    assert_int_equal(d[2], 2);
    assert_int_equal(d[3], 7);
    /* reverse order, gap 3: |3|c3=1|3|c2=5|3|c1=0|3|c0=2|3 */
    assert_int_equal(rmacoll_displs_gapped(4, counts, 3, d), 23);
    assert_int_equal(d[3], 3);
    assert_int_equal(d[2], 7);
    assert_int_equal(d[1], 15);
    assert_int_equal(d[0], 18);
}

static void test_fill_distinct(void **state)
{
    (void)state;
    for (size_t esize = 1; esize <= 8; esize *= 2) {
        uint64_t mask = esize == 8 ? ~0ull : (1ull << (8 * esize)) - 1;
        int same_src = 0;

        for (int64_t i = 0; i < 1000; i++) {
            /* neighbours always differ */
            assert_true((rmacoll_fill_value(1, 2, i, 0) & mask) !=
                        (rmacoll_fill_value(1, 2, i + 1, 0) & mask));
            same_src += (rmacoll_fill_value(1, 2, i, 0) & mask) ==
                        (rmacoll_fill_value(3, 2, i, 0) & mask);
        }
        /* sources and iterations differ with high probability */
        assert_true(same_src < (esize == 1 ? 30 : 2));
        assert_true(rmacoll_fill_value(1, 2, 5, 0) !=
                    rmacoll_fill_value(1, 2, 5, 1));
        assert_true(rmacoll_fill_value(1, 2, 5, 0) !=
                    rmacoll_fill_value(2, 1, 5, 0));
    }
}

/* Builds a correct receive buffer of rank 1 (3 ranks, gapped), then flips
 * single bytes: each flip must be reported exactly. */
static void test_checker(void **state)
{
    static const size_t sizes[] = {1, 2, 4, 8};
    int64_t counts[3] = {4, 0, 3};

    (void)state;
    for (size_t z = 0; z < 4; z++) {
        size_t es = sizes[z];
        int64_t displs[3];
        int64_t ext = rmacoll_displs_gapped(3, counts, 2, displs);
        size_t bytes = (size_t)ext * es;
        unsigned char *buf = malloc(bytes);
        rmacoll_check_report_t rep;

        memset(buf, RMACOLL_FILL_SENTINEL, bytes);
        for (int i = 0; i < 3; i++) {
            rmacoll_fill_block(buf + displs[i] * es, es, i, 1, 0, counts[i], 7);
        }
        assert_int_equal(rmacoll_check_recv(buf, bytes, es, 1, 3, counts,
                                            displs, 7, &rep), 0);
        assert_string_equal(rep.msg, "");
        /* wrong iteration: everything is wrong */
        assert_int_equal(rmacoll_check_recv(buf, bytes, es, 1, 3, counts,
                                            displs, 8, &rep), 7);
        /* flip one byte in element 2 of the block from rank 2 */
        buf[displs[2] * es + 2 * es + (es - 1)] ^= 0x10;
        assert_int_equal(rmacoll_check_recv(buf, bytes, es, 1, 3, counts,
                                            displs, 7, &rep), 1);
        assert_int_equal(rep.nwrong, 1);
        assert_int_equal(rep.first_src, 2);
        assert_int_equal(rep.first_index, 2);
        assert_int_equal(rep.rank, 1);
        assert_true(rep.expected != rep.got);
        assert_int_equal(rep.expected ^ rep.got, 0x10ull << (8 * (es - 1)));
        assert_non_null(strstr(rep.msg, "element 2 from rank 2"));
        buf[displs[2] * es + 2 * es + (es - 1)] ^= 0x10;
        /* a byte in a gap */
        buf[1] = 0;
        assert_int_equal(rmacoll_check_recv(buf, bytes, es, 1, 3, counts,
                                            displs, 7, &rep), 1);
        assert_int_equal(rep.ngap_wrong, 1);
        assert_int_equal(rep.first_gap_off, 1);
        assert_non_null(strstr(rep.msg, "outside every receive block"));
        free(buf);
    }
}

static void test_fill_send(void **state)
{
    int64_t counts[2] = {2, 3}, displs[2];
    unsigned char buf[64];
    uint64_t v;

    (void)state;
    rmacoll_displs_gapped(2, counts, 1, displs);
    rmacoll_fill_send(buf, sizeof(buf), 4, 5, 2, counts, displs, 3);
    assert_int_equal(buf[0], RMACOLL_FILL_SENTINEL);
    memcpy(&v, buf + displs[0] * 4 + 4, 4);  /* element 1 of block 5->0 */
    assert_int_equal(v & 0xffffffffu, rmacoll_fill_value(5, 0, 1, 3) & 0xffffffffu);
    assert_int_equal(buf[63], RMACOLL_FILL_SENTINEL);
}

static void test_parse_size(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(rmacoll_parse_size("64", &v), 0);
    assert_int_equal(v, 64);
    assert_int_equal(rmacoll_parse_size("4K", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(rmacoll_parse_size("64MiB", &v), 0);
    assert_int_equal(v, 64ull << 20);
    assert_int_equal(rmacoll_parse_size("2g", &v), 0);
    assert_int_equal(v, 2ull << 30);
    assert_int_equal(rmacoll_parse_size("2X", &v), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_parse_size("-1", &v), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_parse_size("", &v), RMACOLL_ERR_INVALID_ARG);
    /* nccl-tests' fractions: -b 1.5M */
    assert_int_equal(rmacoll_parse_size("1.5M", &v), 0);
    assert_int_equal(v, 1572864);
    assert_int_equal(rmacoll_parse_size("0.5K", &v), 0);
    assert_int_equal(v, 512);
    assert_int_equal(rmacoll_parse_size("2.25", &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(rmacoll_parse_size("1.", &v), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_parse_size("1.5X", &v), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll_parse_size(".5M", &v), RMACOLL_ERR_INVALID_ARG);
}

/* Extra case folders: -DRMACOLL_EXTRA_CASES_DIRS=a;b at configure time
 * and/or RMACOLL_TEST_CASES_DIRS=a:b at run time. Every *.txt there must
 * load and run exactly through the reference executor (data checked,
 * mismatch cases failing on every rank); skipped when none is given. */
static void test_extra_cases(void **state)
{
    char dirs[4096], *save = NULL;
    const char *env = getenv("RMACOLL_TEST_CASES_DIRS");
    int ncases = 0;

    (void)state;
    snprintf(dirs, sizeof(dirs), "%s:%s", RMACOLL_EXTRA_CASES_DIRS, env ? env : "");
    for (char *dir = strtok_r(dirs, ":;", &save); dir != NULL;
         dir = strtok_r(NULL, ":;", &save)) {
        DIR *d = opendir(dir);
        struct dirent *e;

        if (d == NULL)
            fail_msg("extra cases folder %s: cannot open", dir);
        while ((e = readdir(d)) != NULL) {
            char path[2048], err[256];
            size_t len = strlen(e->d_name);
            rmacoll_case_t *c;
            refexec_opts_t o;
            refexec_result_t res;
            rmacoll_status_t st;

            if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if (rmacoll_case_load(path, &c, err, sizeof(err)) != RMACOLL_SUCCESS)
                fail_msg("%s", err);
            refexec_opts_init(&o);
            o.ncalls = 2;
            st = refexec_run(&o, c, &res);
            if (st != RMACOLL_SUCCESS || !res.ok)
                fail_msg("%s: %s (status %s)", path, res.msg,
                         rmacoll_status_name(res.status));
            assert_int_equal(res.status, c->has_mismatch ? RMACOLL_ERR_MISMATCH
                                                         : RMACOLL_SUCCESS);
            rmacoll_case_free(c);
            ncases++;
        }
        closedir(d);
    }
    if (ncases == 0)
        skip();
    print_message("%d extra case(s) checked\n", ncases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_cases_load),
        cmocka_unit_test(test_shared_case_values),
        cmocka_unit_test(test_nodes_extension),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_generators),
        cmocka_unit_test(test_dist_parse),
        cmocka_unit_test(test_displs),
        cmocka_unit_test(test_fill_distinct),
        cmocka_unit_test(test_checker),
        cmocka_unit_test(test_fill_send),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_extra_cases),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
