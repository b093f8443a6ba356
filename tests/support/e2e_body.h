/*
 * e2e_body.h - the body integration tests run on every rank: one or more
 * AlltoAllV calls of a count-matrix case with filled, gapped buffers,
 * checked byte for byte (see tools/common/cases.h for the fill pattern).
 */
#ifndef RMACOLL_TESTS_E2E_BODY_H
#define RMACOLL_TESTS_E2E_BODY_H

#include "cases.h"
#include "rmacoll.h"

typedef struct e2e_arg {
    const rmacoll_case_t *cases;  /* ncases cases, call k uses cases[k % ncases] */
    int ncases;
    int ncalls;
    rmacoll_status_t expect;      /* status every call must return */
    int gapped;                   /* gapped, reverse-order receive blocks */
} e2e_arg_t;

/* mprun body: 0 = every call returned `expect` and data (or, on an
 * expected error, the untouched buffer) is exact; 1 = wrong data;
 * 2 = wrong status; 3 = out of memory. */
int e2e_body(rmacoll_comm_t *comm, int rank, int nranks, void *arg);

#endif
