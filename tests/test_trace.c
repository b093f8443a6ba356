/*
 * test_trace.c - NVTX ranges of the public calls (core/base/trace.h): one
 * range per call, named after it, its payload the bytes the rank sends.
 * A one-rank communicator; the ranges are read back from the NVTX tool
 * tests/plugins/nvtx_record.c, which the NVTX loader in librmacoll injects
 * from NVTX_INJECTION64_PATH at the first range.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rmacoll.h"

#ifdef RMACOLL_TEST_NVTX_TOOL
static void test_ranges(void **state)
{
    rmacoll_unique_id_t id;
    rmacoll_comm_params_t p;
    rmacoll_comm_t *comm;
    int64_t cnt[1] = {5}, dsp[1] = {0}, cnt2[1] = {7}, dsp2[1] = {3};
    int32_t s[5] = {1, 2, 3, 4, 5}, r[5];
    double sd[3] = {1, 2, 3}, rd[3];
    unsigned char io[16];
    int (*events)(char *, size_t);
    void *h;
    char got[1024];

    (void)state;
    assert_int_equal(rmacoll_get_unique_id(&id), RMACOLL_SUCCESS);
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.rank = 0;
    p.nranks = 1;
    p.unique_id = &id;
    assert_int_equal(rmacoll_comm_create(&p, &comm), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_alltoallv(s, cnt, dsp, r, cnt, dsp, RMACOLL_INT32, comm, NULL),
                     RMACOLL_SUCCESS);
    assert_memory_equal(r, s, sizeof(s));
    assert_int_equal(rmacoll_alltoall(sd, rd, 3, RMACOLL_FLOAT64, comm, NULL),
                     RMACOLL_SUCCESS);
    memset(io, 0xA5, sizeof(io));
    assert_int_equal(rmacoll_alltoallv(RMACOLL_IN_PLACE, NULL, NULL, io, cnt2, dsp2,
                                       RMACOLL_UINT8, comm, NULL),
                     RMACOLL_SUCCESS);
    /* a failing call has its range too: the bytes it was asked to send */
    cnt[0] = 6;
    assert_int_equal(rmacoll_alltoallv(s, cnt, dsp, r, cnt2, dsp, RMACOLL_INT32, comm, NULL),
                     RMACOLL_ERR_MISMATCH);
    assert_int_equal(rmacoll_comm_destroy(comm), RMACOLL_SUCCESS);

    h = dlopen(RMACOLL_TEST_NVTX_TOOL, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h); /* the library's NVTX loader opened the tool */
    *(void **)&events = dlsym(h, "nvtx_record_events");
    assert_non_null(events);
    events(got, sizeof(got));
    print_message("%s", got);
    assert_string_equal(got, "push rmacoll:alltoallv 20\npop\n"
                             "push rmacoll:alltoall 24\npop\n"
                             "push rmacoll:alltoallv 7\npop\n"
                             "push rmacoll:alltoallv 24\npop\n");
    dlclose(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),
    };

    setenv("NVTX_INJECTION64_PATH", RMACOLL_TEST_NVTX_TOOL, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    fprintf(stderr, "test_trace: built without nvtx3 headers: skipped\n");
    return 77;
}
#endif
