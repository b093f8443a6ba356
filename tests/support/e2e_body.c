/* e2e_body.c - per-rank body of the integration tests (see e2e_body.h). */
#include "e2e_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int e2e_body(rmacoll_comm_t *comm, int rank, int nranks, void *argp)
{
    const e2e_arg_t *arg = argp;
    int64_t *sc = calloc((size_t)nranks, 8), *sd = calloc((size_t)nranks, 8);
    int64_t *rc = calloc((size_t)nranks, 8), *rd = calloc((size_t)nranks, 8);
    int rcode = 0;

    if (!sc || !sd || !rc || !rd) {
        return 3;
    }
    for (int call = 0; call < arg->ncalls && rcode == 0; call++) {
        const rmacoll_case_t *c = &arg->cases[call % arg->ncases];
        size_t es = rmacoll_datatype_size(c->dtype);
        int64_t sext, rext;
        size_t sbytes, rbytes;
        char *sbuf, *rbuf;
        rmacoll_status_t st;
        rmacoll_check_report_t rep;

        for (int j = 0; j < nranks; j++) {
            sc[j] = c->send[(size_t)rank * nranks + j];
            rc[j] = c->recv[(size_t)j * nranks + rank];
        }
        sext = rmacoll_displs_contiguous(nranks, sc, sd);
        rext = arg->gapped ? rmacoll_displs_gapped(nranks, rc, 3, rd)
                           : rmacoll_displs_contiguous(nranks, rc, rd);
        sbytes = (size_t)sext * es;
        rbytes = (size_t)rext * es;
        sbuf = malloc(sbytes + 1);
        rbuf = malloc(rbytes + 1);
        if (sbuf == NULL || rbuf == NULL) {
            fprintf(stderr, "rank %d call %d (%s): out of memory for %zu + %zu bytes\n", rank,
                    call, c->name, sbytes + 1, rbytes + 1);
            free(sbuf);
            free(rbuf);
            return 3;
        }
        rmacoll_fill_send(sbuf, sbytes, es, rank, nranks, sc, sd, (uint64_t)call);
        memset(rbuf, RMACOLL_FILL_SENTINEL, rbytes);
        st = rmacoll_alltoallv(sext ? sbuf : NULL, sc, sd, rext ? rbuf : NULL, rc, rd,
                               c->dtype, comm, NULL);
        if (st != arg->expect) {
            fprintf(stderr, "rank %d call %d (%s): status %s, expected %s: %s\n", rank,
                    call, c->name, rmacoll_status_name(st), rmacoll_status_name(arg->expect),
                    rmacoll_comm_last_error(comm));
            rcode = 2;
        } else if (st != RMACOLL_SUCCESS) {
            for (size_t b = 0; b < rbytes; b++) {
                if ((unsigned char)rbuf[b] != RMACOLL_FILL_SENTINEL) {
                    fprintf(stderr, "rank %d call %d: failed call wrote byte %zu\n", rank,
                            call, b);
                    rcode = 1;
                    break;
                }
            }
        } else if (rmacoll_check_recv(rbuf, rbytes, es, rank, nranks, rc, rd,
                                      (uint64_t)call, &rep) != 0) {
            fprintf(stderr, "rank %d call %d (%s): %s\n", rank, call, c->name, rep.msg);
            rcode = 1;
        }
        free(sbuf);
        free(rbuf);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    return rcode;
}
