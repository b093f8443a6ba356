/*
 * mpi_alltoallv_perf.c - MPI_Alltoallv baseline for rmacoll-perf.
 *
 * Runs the same benchmark loop (tools/common/perfrun.h) as rmacoll-perf:
 * same options, same count matrices (same generator and seed), same fill
 * pattern and check, same timing and columns and JSON; only the
 * collective is MPI's. Launch it with mpirun, e.g.
 *   mpirun -np 4 mpi_alltoallv_perf -b 1K -e 64M -f 4 --dist zipf:1.2
 * The launch and runtime options of rmacoll-perf (-np, --ppn, --topology,
 * --relay, ...) are accepted and ignored: MPI chooses its own transports
 * (with Open MPI inside one host: the vader shared-memory BTL). With
 * -R 1|2 the send and receive buffers come from MPI_Alloc_mem, MPI's
 * allocator of memory for communication, as rmacoll-perf's come from
 * rmacoll_mem_alloc.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "perfrun.h"

#define MPI_PERF_NAME "rmacoll-mpi-perf"  /* the executable (mpi_alltoallv_perf: a link) */

typedef struct mpi_perf {
    int n;
    int *sc, *sd, *rc, *rd;  /* the row's counts as int (MPI-3 counts) */
} mpi_perf_t;

static rmacoll_status_t mpi_perf_err(int code, const char *what, char *err,
                                     size_t errlen)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    MPI_Error_string(code, msg, &len);
    snprintf(err, errlen, "%s: %s", what, msg);
    return RMACOLL_ERR_TRANSPORT;
}

static MPI_Datatype mpi_perf_type(rmacoll_datatype_t d)
{
    switch (d) {
    case RMACOLL_INT8: return MPI_INT8_T;
    case RMACOLL_UINT8: return MPI_UINT8_T;
    case RMACOLL_INT32: return MPI_INT32_T;
    case RMACOLL_UINT32: return MPI_UINT32_T;
    case RMACOLL_INT64: return MPI_INT64_T;
    case RMACOLL_UINT64: return MPI_UINT64_T;
    /* Only moved, never reduced: 16-bit floats travel as uint16. */
    case RMACOLL_FLOAT16: return MPI_UINT16_T;
    case RMACOLL_BFLOAT16: return MPI_UINT16_T;
    case RMACOLL_FLOAT32: return MPI_FLOAT;
    case RMACOLL_FLOAT64: return MPI_DOUBLE;
    case RMACOLL_BOOL: return MPI_UINT8_T;
    case RMACOLL_INT16: return MPI_INT16_T;
    case RMACOLL_UINT16: return MPI_UINT16_T;
    case RMACOLL_COMPLEX64: return MPI_C_FLOAT_COMPLEX;
    case RMACOLL_COMPLEX128: return MPI_C_DOUBLE_COMPLEX;
    case RMACOLL_FLOAT8_E4M3: return MPI_UINT8_T;
    case RMACOLL_FLOAT8_E5M2: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static int mpi_perf_narrow(const int64_t *in, int *out, int n)
{
    for (int i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] > INT_MAX)
            return -1;
        out[i] = (int)in[i];
    }
    return 0;
}

static rmacoll_status_t mpi_perf_prepare(void *ctx, const int64_t *sendcounts,
                                         const int64_t *sdispls,
                                         const int64_t *recvcounts,
                                         const int64_t *rdispls, char *err,
                                         size_t errlen)
{
    mpi_perf_t *m = ctx;

    if (mpi_perf_narrow(sendcounts, m->sc, m->n) ||
        mpi_perf_narrow(sdispls, m->sd, m->n) ||
        mpi_perf_narrow(recvcounts, m->rc, m->n) ||
        mpi_perf_narrow(rdispls, m->rd, m->n)) {
        snprintf(err, errlen,
                 "a count or displacement exceeds INT_MAX elements "
                 "(MPI_Alltoallv takes int; use a larger -d)");
        return RMACOLL_ERR_OVERFLOW;
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t mpi_perf_a2av(void *ctx, const void *sendbuf,
                                      const int64_t *sendcounts,
                                      const int64_t *sdispls, void *recvbuf,
                                      const int64_t *recvcounts,
                                      const int64_t *rdispls,
                                      rmacoll_datatype_t dtype, char *err,
                                      size_t errlen)
{
    mpi_perf_t *m = ctx;
    MPI_Datatype t = mpi_perf_type(dtype);
    int code;

    (void)sendcounts, (void)sdispls, (void)recvcounts, (void)rdispls;
    code = MPI_Alltoallv(sendbuf, m->sc, m->sd, t, recvbuf, m->rc, m->rd, t,
                         MPI_COMM_WORLD);
    if (code != MPI_SUCCESS)
        return mpi_perf_err(code, "MPI_Alltoallv", err, errlen);
    return RMACOLL_SUCCESS;
}

/* -R 1|2: the host buffers from MPI_Alloc_mem / MPI_Free_mem. */
static rmacoll_status_t mpi_perf_alloc(void *ctx, size_t bytes, void **ptr,
                                       char *err, size_t errlen)
{
    int code;

    (void)ctx;
    *ptr = NULL;
    if (bytes > (size_t)PTRDIFF_MAX) {
        snprintf(err, errlen, "MPI_Alloc_mem: %zu bytes exceed MPI_Aint", bytes);
        return RMACOLL_ERR_OVERFLOW;
    }
    code = MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, ptr);
    if (code != MPI_SUCCESS) {
        *ptr = NULL;
        return mpi_perf_err(code, "MPI_Alloc_mem", err, errlen);
    }
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t mpi_perf_free(void *ctx, void *ptr, char *err,
                                      size_t errlen)
{
    int code = MPI_Free_mem(ptr);

    (void)ctx;
    if (code != MPI_SUCCESS)
        return mpi_perf_err(code, "MPI_Free_mem", err, errlen);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t mpi_perf_barrier(void *ctx, char *err, size_t errlen)
{
    int code = MPI_Barrier(MPI_COMM_WORLD);

    (void)ctx;
    if (code != MPI_SUCCESS)
        return mpi_perf_err(code, "MPI_Barrier", err, errlen);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t mpi_perf_gather(void *ctx, const double *mine, int k,
                                        double *all, char *err, size_t errlen)
{
    int code = MPI_Gather(mine, k, MPI_DOUBLE, all, k, MPI_DOUBLE, 0,
                          MPI_COMM_WORLD);

    (void)ctx;
    if (code != MPI_SUCCESS)
        return mpi_perf_err(code, "MPI_Gather", err, errlen);
    return RMACOLL_SUCCESS;
}

int main(int argc, char **argv)
{
    rmacoll_perf_opts_t o;
    rmacoll_perf_backend_t be;
    mpi_perf_t m;
    char err[512] = "", header[512], json[512], version[MPI_MAX_LIBRARY_VERSION_STRING];
    const char *vader;
    int rank, n, pr, rc, vlen = 0;

    rmacoll_perf_opts_init(&o);
    pr = rmacoll_perf_opts_parse(argc, argv, &o, stdout, err, sizeof(err));
    if (pr == 1)
        return 0;
    if (pr < 0) {
        /* before MPI_Init: every rank prints it; 64 as --help says (2 is
         * wrong data) */
        fprintf(stderr, MPI_PERF_NAME ": %s\n", err);
        return RMACOLL_PERF_EXIT_USAGE;
    }

    MPI_Init(&argc, &argv);
    /* Errors come back as codes, so a failure is reported, not aborted. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* MPI_Alloc_mem / MPI_Free_mem (-R) raise errors on MPI_COMM_WORLD
     * (MPI-3.1, Open MPI 4) or MPI_COMM_SELF (MPI-4.0): codes on both. */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    memset(&m, 0, sizeof(m));
    m.n = n;
    m.sc = calloc((size_t)n * 4, sizeof(int));
    if (m.sc == NULL) {
        fprintf(stderr, MPI_PERF_NAME ": rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    m.sd = m.sc + n;
    m.rc = m.sc + 2 * n;
    m.rd = m.sc + 3 * n;

    MPI_Get_library_version(version, &vlen);
    version[strcspn(version, "\n,")] = '\0';
    vader = getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
    snprintf(header, sizeof(header),
             "# mpi: %s\n# btl: %s, vader single copy: %s\n", version,
             getenv("OMPI_MCA_btl") ? getenv("OMPI_MCA_btl") : "default",
             vader ? vader : "default");
    snprintf(json, sizeof(json),
             "\"mpi\": \"%s\", \"btl\": \"%s\", \"vader_single_copy\": \"%s\"",
             version, getenv("OMPI_MCA_btl") ? getenv("OMPI_MCA_btl") : "default",
             vader ? vader : "default");

    memset(&be, 0, sizeof(be));
    be.name = MPI_PERF_NAME;
    be.rank = rank;
    be.nranks = n;
    be.ctx = &m;
    be.prepare = mpi_perf_prepare;
    be.alltoallv = mpi_perf_a2av;
    be.barrier = mpi_perf_barrier;
    be.gather_f64 = mpi_perf_gather;
    be.header = header;
    be.json_config = json;
    be.launch = "mpirun";
    be.host_alloc = mpi_perf_alloc;
    be.host_free = mpi_perf_free;
    be.host_alloc_name = "MPI_Alloc_mem";
    rc = rmacoll_perf_run(&o, &be);

    free(m.sc);
    MPI_Finalize();
    return rc;
}
