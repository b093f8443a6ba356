/*
 * test_gpu_e2e.c - multi-process tests of rmacoll_alltoallv on CUDA device
 * memory (CTest label "gpu"). Ranks are forked processes (tests/support/
 * mprun.h); each touches CUDA only after the fork, inside the body, and
 * uses GPU rank % device count, so several ranks share a GPU. The GPU path
 * is single-node for now: every case runs with all ranks on one virtual
 * node, and across virtual nodes through the relay (host staging).
 *
 * Cases: every count-matrix file of the shared cases directory (mismatch
 * included: every rank fails, no byte of a receive buffer changes); stream
 * order (stale NaNs written on the stream just before the real data must
 * never arrive); back-to-back calls with changing counts and no host
 * synchronisation; CUDA graph capture refused; cross-node relay, staged
 * through host memory (counted: rmacoll_comm_get_stats) and registered
 * with libfabric's shm provider by FI_HMEM (no byte staged); and, when the
 * library has NCCL, a communicator made from an NCCL one.
 *
 * Exits 77 (skipped) when no GPU is usable: the probe runs in a forked
 * child, so the parent never initialises CUDA before forking ranks.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "cases.h"
#include "gpu_try.h"
#include "mprun.h"
#include "rmacoll.h"
#ifdef RMACOLL_TEST_HAVE_NCCL
#include "rmacoll_nccl.h"
#endif

#define GPU_MAX_RANKS 64
#define GPU_MAX_CALLS 8

/* Body exit codes. */
enum { GPU_OK = 0, GPU_WRONG_DATA = 1, GPU_WRONG_STATUS = 2, GPU_CUDA = 3,
       GPU_NO_HMEM = 4 /* the comm stages though the test wants FI_HMEM */ };

typedef enum gpu_mode {
    GPU_MODE_CASE,        /* each call: upload, call, sync, check */
    GPU_MODE_NAN,         /* NaN memset + async copy on the stream, call */
    GPU_MODE_BACK2BACK,   /* all calls queued, one sync at the end */
    GPU_MODE_CAPTURE,     /* call inside stream capture: UNSUPPORTED */
    GPU_MODE_NCCL,        /* rmacoll_comm_create_from_nccl, then calls */
    GPU_MODE_MIXED,       /* host-memory and device-memory calls alternate */
    GPU_MODE_USERREG      /* CASE with buffers of rmacoll_mem_register */
} gpu_mode_t;

typedef struct gpu_arg {
    gpu_mode_t mode;
    const rmacoll_case_t *cases[GPU_MAX_CALLS]; /* call k uses cases[k % ncases] */
    int ncases;
    int ncalls;
    rmacoll_status_t expect;  /* every call's status (CASE mode) */
    /* not NONE: the device path the communicator must take across nodes,
     * checked with its counters after the calls (STAGED: exactly the
     * successful calls' bytes staged; HMEM: nothing staged, device bytes
     * registered) */
    rmacoll_device_path_t path;
} gpu_arg_t;

static int gpu_ndevices; /* from the forked probe */

/* In a rank: what its successful calls moved (send + receive bytes). */
static uint64_t gpu_moved_bytes;
static uint64_t gpu_calls_ok;

#define GPU_TRY(call) RMACOLL_TEST_CUDA_TRY(call, GPU_CUDA)

/* One call's buffers and counts on one rank. */
typedef struct gpu_call {
    int64_t sc[GPU_MAX_RANKS], sd[GPU_MAX_RANKS];
    int64_t rc[GPU_MAX_RANKS], rd[GPU_MAX_RANKS];
    size_t es, sbytes, rbytes;
    void *hs, *hr;        /* host (pinned): fill, check */
    void *ds, *dr;        /* device */
    rmacoll_datatype_t dtype;
    uint64_t iter;        /* fill stamp */
} gpu_call_t;

/* Counts of rank `rank` in case c, gapped receive blocks, pinned host and
 * device buffers; the send buffer filled on the host for stamp iter, the
 * receive buffers (host and device) set to the sentinel. */
static int gpu_call_init(gpu_call_t *k, const rmacoll_case_t *c, int rank,
                         int nranks, uint64_t iter)
{
    int64_t sext, rext;

    memset(k, 0, sizeof(*k));
    k->dtype = c->dtype;
    k->es = rmacoll_datatype_size(c->dtype);
    k->iter = iter;
    for (int j = 0; j < nranks; j++) {
        k->sc[j] = c->send[(size_t)rank * nranks + j];
        k->rc[j] = c->recv[(size_t)j * nranks + rank];
    }
    sext = rmacoll_displs_contiguous(nranks, k->sc, k->sd);
    rext = rmacoll_displs_gapped(nranks, k->rc, 3, k->rd);
    k->sbytes = (size_t)sext * k->es;
    k->rbytes = (size_t)rext * k->es;
    if (cudaMallocHost(&k->hs, k->sbytes + 1) != cudaSuccess ||
        cudaMallocHost(&k->hr, k->rbytes + 1) != cudaSuccess ||
        cudaMalloc(&k->ds, k->sbytes + 1) != cudaSuccess ||
        cudaMalloc(&k->dr, k->rbytes + 1) != cudaSuccess) {
        fprintf(stderr, "rank %d: no memory for %zu + %zu bytes\n", rank,
                k->sbytes, k->rbytes);
        return GPU_CUDA;
    }
    rmacoll_fill_send(k->hs, k->sbytes, k->es, rank, nranks, k->sc, k->sd,
                      iter);
    memset(k->hr, RMACOLL_FILL_SENTINEL, k->rbytes + 1);
    /* cudaMemset may run asynchronously on the legacy stream, which does
     * not order the tests' non-blocking streams: wait for it here. */
    if (cudaMemset(k->dr, RMACOLL_FILL_SENTINEL, k->rbytes + 1) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
        return GPU_CUDA;
    return GPU_OK;
}

static void gpu_call_free(gpu_call_t *k)
{
    if (k->hs != NULL)
        cudaFreeHost(k->hs);
    if (k->hr != NULL)
        cudaFreeHost(k->hr);
    if (k->ds != NULL)
        cudaFree(k->ds);
    if (k->dr != NULL)
        cudaFree(k->dr);
    memset(k, 0, sizeof(*k));
}

static rmacoll_status_t gpu_call_run(gpu_call_t *k, rmacoll_comm_t *comm,
                                     cudaStream_t stream)
{
    int nranks = 0;
    rmacoll_status_t st = rmacoll_alltoallv(k->sbytes ? k->ds : NULL, k->sc, k->sd,
                                            k->rbytes ? k->dr : NULL, k->rc, k->rd,
                                            k->dtype, comm, stream);

    rmacoll_comm_size(comm, &nranks);
    if (st == RMACOLL_SUCCESS) {
        for (int j = 0; j < nranks; j++)
            gpu_moved_bytes += (uint64_t)(k->sc[j] + k->rc[j]) * k->es;
        gpu_calls_ok++;
    }
    return st;
}

/* After the calls: the communicator's device path and its counters. */
static int gpu_check_path(rmacoll_comm_t *comm, int rank, const gpu_arg_t *arg)
{
    rmacoll_comm_stats_t s;
    const char *dsig_env = getenv("RMACOLL_DEVICE_SIGNALS");
    int dsig_want = dsig_env == NULL || strcmp(dsig_env, "0") != 0;

    memset(&s, 0xa5, sizeof(s));
    s.struct_size = sizeof(s);
    if (rmacoll_comm_get_stats(comm, &s) != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: rmacoll_comm_get_stats failed\n", rank);
        return GPU_WRONG_STATUS;
    }
    if (arg->path == RMACOLL_DEVICE_PATH_NONE) {
        /* one node: the signal words are device-resident (every rank has
         * a GPU and maps its node peers' arrays, by IPC across processes),
         * and every successful call of this rank was enqueued with them */
        if (s.device_signals != dsig_want ||
            (dsig_want ? s.device_calls_device_signals < gpu_calls_ok
                       : s.device_calls_device_signals != 0)) {
            fprintf(stderr, "rank %d: device signal words %d (expected %d), %llu calls "
                    "with them of %llu successful\n", rank, (int)s.device_signals,
                    dsig_want, (unsigned long long)s.device_calls_device_signals,
                    (unsigned long long)gpu_calls_ok);
            return GPU_WRONG_STATUS;
        }
        return GPU_OK;
    }
    if (s.device_path != arg->path) {
        fprintf(stderr, "rank %d: device path %d, expected %d\n", rank,
                (int)s.device_path, (int)arg->path);
        return arg->path == RMACOLL_DEVICE_PATH_HMEM &&
                       s.device_path == RMACOLL_DEVICE_PATH_STAGED &&
                       getenv("RMACOLL_TEST_REQUIRE_HMEM") == NULL
                   ? GPU_NO_HMEM
                   : GPU_WRONG_STATUS;
    }
    if (arg->path == RMACOLL_DEVICE_PATH_STAGED &&
        (s.staged_bytes != gpu_moved_bytes || s.device_calls_staged != gpu_calls_ok ||
         s.device_calls_hmem != 0)) {
        fprintf(stderr, "rank %d: staged %llu bytes in %llu calls (%llu registered), "
                "expected %llu bytes in %llu calls\n", rank,
                (unsigned long long)s.staged_bytes,
                (unsigned long long)s.device_calls_staged,
                (unsigned long long)s.device_calls_hmem,
                (unsigned long long)gpu_moved_bytes, (unsigned long long)gpu_calls_ok);
        return GPU_WRONG_STATUS;
    }
    if (arg->path == RMACOLL_DEVICE_PATH_HMEM &&
        (s.staged_bytes != 0 || s.device_registered_bytes == 0 ||
         s.device_calls_hmem != gpu_calls_ok || s.device_calls_staged != 0)) {
        fprintf(stderr, "rank %d: hmem path staged %llu bytes (must be 0), registered "
                "%llu device bytes (must be > 0), %llu/%llu calls registered/staged, "
                "expected %llu\n", rank, (unsigned long long)s.staged_bytes,
                (unsigned long long)s.device_registered_bytes,
                (unsigned long long)s.device_calls_hmem,
                (unsigned long long)s.device_calls_staged, (unsigned long long)gpu_calls_ok);
        return GPU_WRONG_STATUS;
    }
    return GPU_OK;
}

/* After the stream drained: the device receive buffer, copied back, must
 * hold exactly the expected blocks (st == SUCCESS) or be all sentinel (the
 * guard byte past the end included). */
static int gpu_host_check(gpu_call_t *k, rmacoll_status_t st, int rank,
                          int nranks, const char *what);

static int gpu_call_check(gpu_call_t *k, rmacoll_status_t st, int rank,
                          int nranks, const char *what)
{
    if (cudaMemcpy(k->hr, k->dr, k->rbytes + 1, cudaMemcpyDeviceToHost) !=
        cudaSuccess)
        return GPU_CUDA;
    return gpu_host_check(k, st, rank, nranks, what);
}

/* The same check on the host receive buffer k->hr itself (a host call's,
 * or the device buffer copied back). */
static int gpu_host_check(gpu_call_t *k, rmacoll_status_t st, int rank,
                          int nranks, const char *what)
{
    rmacoll_check_report_t rep;

    if (((unsigned char *)k->hr)[k->rbytes] != RMACOLL_FILL_SENTINEL) {
        fprintf(stderr, "rank %d (%s): byte past the receive buffer written\n",
                rank, what);
        return GPU_WRONG_DATA;
    }
    if (st != RMACOLL_SUCCESS) {
        for (size_t b = 0; b < k->rbytes; b++) {
            if (((unsigned char *)k->hr)[b] != RMACOLL_FILL_SENTINEL) {
                fprintf(stderr, "rank %d (%s): failed call wrote byte %zu\n",
                        rank, what, b);
                return GPU_WRONG_DATA;
            }
        }
        return GPU_OK;
    }
    if (rmacoll_check_recv(k->hr, k->rbytes, k->es, rank, nranks, k->rc, k->rd,
                           k->iter, &rep) != 0) {
        fprintf(stderr, "rank %d (%s): %s\n", rank, what, rep.msg);
        return GPU_WRONG_DATA;
    }
    return GPU_OK;
}

static int gpu_status(rmacoll_status_t st, rmacoll_status_t expect, int rank,
                      rmacoll_comm_t *comm, const char *what)
{
    if (st == expect)
        return GPU_OK;
    fprintf(stderr, "rank %d (%s): status %s, expected %s: %s\n", rank, what,
            rmacoll_status_name(st), rmacoll_status_name(expect),
            rmacoll_comm_last_error(comm));
    return GPU_WRONG_STATUS;
}

/* One device call of k: upload (blocking), call on the stream, sync,
 * status (expect) and receive buffer checked. */
static int gpu_device_call(gpu_call_t *k, rmacoll_comm_t *comm, cudaStream_t stream,
                           rmacoll_status_t expect, int rank, int nranks, const char *what)
{
    rmacoll_status_t st;
    int rcode;

    if (cudaMemcpy(k->ds, k->hs, k->sbytes + 1, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
        return GPU_CUDA;
    st = gpu_call_run(k, comm, stream);
    rcode = gpu_status(st, expect, rank, comm, what);
    if (cudaStreamSynchronize(stream) != cudaSuccess)
        rcode = GPU_CUDA;
    if (rcode == GPU_OK)
        rcode = gpu_call_check(k, st, rank, nranks, what);
    return rcode;
}

/* CASE: per call, upload (blocking), call on the stream, sync, check. */
static int gpu_mode_case(rmacoll_comm_t *comm, int rank, int nranks,
                         const gpu_arg_t *arg, cudaStream_t stream)
{
    int rcode = GPU_OK;

    for (int call = 0; call < arg->ncalls && rcode == GPU_OK; call++) {
        const rmacoll_case_t *c = arg->cases[call % arg->ncases];
        gpu_call_t k;

        rcode = gpu_call_init(&k, c, rank, nranks, (uint64_t)call + 1);
        if (rcode == GPU_OK)
            rcode = gpu_device_call(&k, comm, stream, arg->expect, rank, nranks, c->name);
        gpu_call_free(&k);
    }
    return rcode;
}

/* MIXED: on one communicator, even calls on host memory (no stream),
 * odd calls on device memory (the stream), each checked. Across two
 * nodes a host call needs no agreement round and a device call runs one:
 * the agreement's signal words must still agree after the host calls. */
static int gpu_mode_mixed(rmacoll_comm_t *comm, int rank, int nranks,
                          const gpu_arg_t *arg, cudaStream_t stream)
{
    int rcode = GPU_OK;

    for (int call = 0; call < arg->ncalls && rcode == GPU_OK; call++) {
        const rmacoll_case_t *c = arg->cases[call % arg->ncases];
        gpu_call_t k;
        rmacoll_status_t st;

        rcode = gpu_call_init(&k, c, rank, nranks, 200 + (uint64_t)call);
        if (rcode == GPU_OK && call % 2 == 0) {
            st = rmacoll_alltoallv(k.sbytes ? k.hs : NULL, k.sc, k.sd, k.rbytes ? k.hr : NULL,
                                   k.rc, k.rd, k.dtype, comm, NULL);
            rcode = gpu_status(st, RMACOLL_SUCCESS, rank, comm, "mixed: host call");
            if (rcode == GPU_OK)
                rcode = gpu_host_check(&k, st, rank, nranks, "mixed: host call");
        } else if (rcode == GPU_OK) {
            rcode = gpu_device_call(&k, comm, stream, RMACOLL_SUCCESS, rank, nranks,
                                    "mixed: device call");
        }
        gpu_call_free(&k);
    }
    return rcode;
}

static int gpu_stats(rmacoll_comm_t *comm, rmacoll_comm_stats_t *s)
{
    memset(s, 0xa5, sizeof(*s));
    s->struct_size = sizeof(*s);
    return rmacoll_comm_get_stats(comm, s) == RMACOLL_SUCCESS ? GPU_OK : GPU_WRONG_STATUS;
}

/* USERREG: CASE on device buffers the caller allocated and registered
 * with rmacoll_mem_register (as torch's caching allocator's segments):
 * each call must find both buffers inside the registrations (stats
 * memreg_buffers +1 per non-empty buffer across nodes) and make no
 * registration of its own (call_registrations unchanged); the path check
 * after the calls (HMEM: 0 bytes staged) as for every mode. */
static int gpu_mode_userreg(rmacoll_comm_t *comm, int rank, int nranks,
                            const gpu_arg_t *arg, cudaStream_t stream)
{
    int rcode = GPU_OK;
    rmacoll_comm_stats_t sp;

    /* the user's registrations are used only on the registered (hmem)
     * path: a provider that cannot register CUDA memory stages instead,
     * which the parent reports as a skip (as test_cross_node_hmem) */
    rcode = gpu_stats(comm, &sp);
    if (rcode == GPU_OK && sp.device_path != arg->path) {
        return gpu_check_path(comm, rank, arg);
    }
    for (int call = 0; call < arg->ncalls && rcode == GPU_OK; call++) {
        const rmacoll_case_t *c = arg->cases[call % arg->ncases];
        rmacoll_memreg_t *hs = NULL, *hr = NULL;
        rmacoll_comm_stats_t s0, s1;
        gpu_call_t k;
        uint64_t want;

        rcode = gpu_call_init(&k, c, rank, nranks, 300 + (uint64_t)call);
        if (rcode == GPU_OK &&
            (rmacoll_mem_register(comm, k.ds, k.sbytes + 1, &hs) != RMACOLL_SUCCESS ||
             rmacoll_mem_register(comm, k.dr, k.rbytes + 1, &hr) != RMACOLL_SUCCESS)) {
            fprintf(stderr, "rank %d: rmacoll_mem_register of device buffers failed\n", rank);
            rcode = GPU_WRONG_STATUS;
        }
        if (rcode == GPU_OK)
            rcode = gpu_stats(comm, &s0);
        if (rcode == GPU_OK)
            rcode = gpu_device_call(&k, comm, stream, RMACOLL_SUCCESS, rank, nranks,
                                    "userreg");
        if (rcode == GPU_OK)
            rcode = gpu_stats(comm, &s1);
        want = (k.sbytes > 0) + (k.rbytes > 0);
        if (rcode == GPU_OK && (s1.call_registrations != s0.call_registrations ||
                                s1.memreg_buffers - s0.memreg_buffers != want ||
                                s1.memreg_handles != 2)) {
            fprintf(stderr, "rank %d: userreg call %d: %llu buffers found registered "
                    "(expected %llu), %llu registered for the call (expected 0), %llu "
                    "handles (expected 2)\n", rank, call,
                    (unsigned long long)(s1.memreg_buffers - s0.memreg_buffers),
                    (unsigned long long)want,
                    (unsigned long long)(s1.call_registrations - s0.call_registrations),
                    (unsigned long long)s1.memreg_handles);
            rcode = GPU_WRONG_STATUS;
        }
        if ((hs != NULL && rmacoll_mem_deregister(comm, hs) != RMACOLL_SUCCESS) ||
            (hr != NULL && rmacoll_mem_deregister(comm, hr) != RMACOLL_SUCCESS))
            rcode = rcode == GPU_OK ? GPU_WRONG_STATUS : rcode;
        gpu_call_free(&k);
    }
    return rcode;
}

/* NAN: the send buffer is set to NaN by a memset on the stream, then the
 * real data is copied in by cudaMemcpyAsync on the same stream, then the
 * call: only stream order keeps the NaNs out. Repeated with fresh stamps. */
static int gpu_mode_nan(rmacoll_comm_t *comm, int rank, int nranks,
                        const gpu_arg_t *arg, cudaStream_t stream)
{
    int rcode = GPU_OK;

    for (int call = 0; call < arg->ncalls && rcode == GPU_OK; call++) {
        const rmacoll_case_t *c = arg->cases[call % arg->ncases];
        gpu_call_t k;
        rmacoll_status_t st;

        rcode = gpu_call_init(&k, c, rank, nranks, 100 + (uint64_t)call);
        if (rcode != GPU_OK) {
            gpu_call_free(&k);
            break;
        }
        GPU_TRY(cudaStreamSynchronize(stream));
        GPU_TRY(cudaMemsetAsync(k.ds, 0xFF, k.sbytes + 1, stream)); /* NaN */
        GPU_TRY(cudaMemcpyAsync(k.ds, k.hs, k.sbytes, cudaMemcpyHostToDevice,
                                stream));
        st = gpu_call_run(&k, comm, stream);
        rcode = gpu_status(st, RMACOLL_SUCCESS, rank, comm, "nan");
        GPU_TRY(cudaStreamSynchronize(stream));
        if (rcode == GPU_OK)
            rcode = gpu_call_check(&k, st, rank, nranks, "nan");
    out:
        gpu_call_free(&k);
    }
    return rcode;
}

/* BACK2BACK: distinct buffers per call; each call's send data copied in
 * asynchronously right before it; no host synchronisation until all are
 * queued; then every receive buffer checked. */
static int gpu_mode_back2back(rmacoll_comm_t *comm, int rank, int nranks,
                              const gpu_arg_t *arg, cudaStream_t stream)
{
    gpu_call_t k[GPU_MAX_CALLS];
    rmacoll_status_t st[GPU_MAX_CALLS];
    int rcode = GPU_OK, n = arg->ncalls;

    memset(k, 0, sizeof(k));
    for (int c = 0; c < GPU_MAX_CALLS; c++)
        st[c] = RMACOLL_ERR_INTERNAL;
    for (int c = 0; c < n && rcode == GPU_OK; c++)
        rcode = gpu_call_init(&k[c], arg->cases[c % arg->ncases], rank, nranks,
                              1000 + (uint64_t)c);
    if (rcode != GPU_OK)
        goto out;
    GPU_TRY(cudaDeviceSynchronize());
    for (int c = 0; c < n; c++) {
        GPU_TRY(cudaMemcpyAsync(k[c].ds, k[c].hs, k[c].sbytes,
                                cudaMemcpyHostToDevice, stream));
        st[c] = gpu_call_run(&k[c], comm, stream);
        if (st[c] != RMACOLL_SUCCESS) {
            rcode = gpu_status(st[c], RMACOLL_SUCCESS, rank, comm, "back2back");
            break;
        }
    }
    GPU_TRY(cudaStreamSynchronize(stream));
    for (int c = 0; c < n && rcode == GPU_OK; c++)
        rcode = gpu_call_check(&k[c], st[c], rank, nranks, "back2back");
out:
    for (int c = 0; c < n; c++)
        gpu_call_free(&k[c]);
    return rcode;
}

/* CAPTURE: a call while the stream is being captured into a CUDA graph
 * must be refused with RMACOLL_ERR_UNSUPPORTED (nothing enqueued, no
 * receive byte written); the communicator stays usable afterwards. */
static int gpu_mode_capture(rmacoll_comm_t *comm, int rank, int nranks,
                            const gpu_arg_t *arg, cudaStream_t stream)
{
    gpu_call_t k;
    cudaGraph_t graph = NULL;
    rmacoll_status_t st;
    int rcode;

    rcode = gpu_call_init(&k, arg->cases[0], rank, nranks, 7);
    if (rcode != GPU_OK)
        goto out;
    GPU_TRY(cudaMemcpy(k.ds, k.hs, k.sbytes + 1, cudaMemcpyHostToDevice));
    GPU_TRY(cudaDeviceSynchronize());
    GPU_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    st = gpu_call_run(&k, comm, stream);
    GPU_TRY(cudaStreamEndCapture(stream, &graph));
    if (graph != NULL)
        cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    rcode = gpu_status(st, RMACOLL_ERR_UNSUPPORTED, rank, comm, "capture");
    GPU_TRY(cudaStreamSynchronize(stream));
    if (rcode == GPU_OK)
        rcode = gpu_call_check(&k, st, rank, nranks, "capture");
    if (rcode != GPU_OK)
        goto out;
    /* Still usable: the same call outside capture succeeds. */
    st = gpu_call_run(&k, comm, stream);
    rcode = gpu_status(st, RMACOLL_SUCCESS, rank, comm, "after capture");
    GPU_TRY(cudaStreamSynchronize(stream));
    if (rcode == GPU_OK)
        rcode = gpu_call_check(&k, st, rank, nranks, "after capture");
out:
    gpu_call_free(&k);
    return rcode;
}

#ifdef RMACOLL_TEST_HAVE_NCCL
/* NCCL: an NCCL communicator over the same ranks (id from rank 0 through a
 * host AlltoAllV on the harness's communicator), then an rmacoll
 * communicator made from it; device calls on that one must be exact. */
static int gpu_mode_nccl(rmacoll_comm_t *comm, int rank, int nranks,
                         const gpu_arg_t *arg, cudaStream_t stream)
{
    ncclUniqueId id;
    ncclComm_t nccl = NULL;
    rmacoll_comm_t *c2 = NULL;
    rmacoll_nccl_oob_t *oob = NULL;
    unsigned char all[GPU_MAX_RANKS * sizeof(ncclUniqueId)];
    int64_t sc[GPU_MAX_RANKS], sd[GPU_MAX_RANKS], rc[GPU_MAX_RANKS],
        rd[GPU_MAX_RANKS];
    rmacoll_config_t cfg;
    rmacoll_status_t st;
    int rcode = GPU_OK, r2 = -1, n2 = -1;

    memset(&id, 0, sizeof(id));
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        return GPU_CUDA;
    for (int j = 0; j < nranks; j++) {
        if (rank == 0)
            memcpy(all + (size_t)j * sizeof(id), &id, sizeof(id));
        sc[j] = rank == 0 ? (int64_t)sizeof(id) : 0;
        sd[j] = rank == 0 ? (int64_t)(j * sizeof(id)) : 0;
        rc[j] = j == 0 ? (int64_t)sizeof(id) : 0;
        rd[j] = 0;
    }
    st = rmacoll_alltoallv(rank == 0 ? all : NULL, sc, sd, &id, rc, rd,
                           RMACOLL_UINT8, comm, NULL);
    if (st != RMACOLL_SUCCESS)
        return gpu_status(st, RMACOLL_SUCCESS, rank, comm, "nccl id");
    if (ncclCommInitRank(&nccl, nranks, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
        return GPU_CUDA;
    }
    rmacoll_config_init(&cfg);
    cfg.timeout_ms = 20000;
    st = rmacoll_comm_create_from_nccl(nccl, stream, &cfg, &c2, &oob);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, "rank %d: rmacoll_comm_create_from_nccl: %s\n", rank,
                rmacoll_status_name(st));
        rcode = GPU_WRONG_STATUS;
        goto out;
    }
    rmacoll_comm_rank(c2, &r2);
    rmacoll_comm_size(c2, &n2);
    if (r2 != rank || n2 != nranks) {
        fprintf(stderr, "rank %d: nccl comm gives rank %d of %d\n", rank, r2,
                n2);
        rcode = GPU_WRONG_STATUS;
        goto out;
    }
    rcode = gpu_mode_case(c2, rank, nranks, arg, stream);
    if (rcode == GPU_OK) /* the calls ran on c2: its counters, not comm's */
        rcode = gpu_check_path(c2, rank, arg);
out:
    if (c2 != NULL || oob != NULL) {
        st = rmacoll_comm_destroy_nccl(c2, oob);
        if (st != RMACOLL_SUCCESS && rcode == GPU_OK) {
            fprintf(stderr, "rank %d: rmacoll_comm_destroy_nccl: %s\n", rank,
                    rmacoll_status_name(st));
            rcode = GPU_WRONG_STATUS;
        }
    }
    if (nccl != NULL)
        ncclCommDestroy(nccl);
    return rcode;
}
#endif

/* mprun body: CUDA is first touched here, after the fork. */
static int gpu_body(rmacoll_comm_t *comm, int rank, int nranks, void *argp)
{
    const gpu_arg_t *arg = argp;
    cudaStream_t stream = NULL;
    int ndev = 0, rcode = GPU_OK;

    if (nranks > GPU_MAX_RANKS)
        return GPU_CUDA;
    GPU_TRY(cudaGetDeviceCount(&ndev));
    GPU_TRY(cudaSetDevice(rank % ndev));
    GPU_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    switch (arg->mode) {
    case GPU_MODE_CASE:
        rcode = gpu_mode_case(comm, rank, nranks, arg, stream);
        break;
    case GPU_MODE_NAN:
        rcode = gpu_mode_nan(comm, rank, nranks, arg, stream);
        break;
    case GPU_MODE_BACK2BACK:
        rcode = gpu_mode_back2back(comm, rank, nranks, arg, stream);
        break;
    case GPU_MODE_CAPTURE:
        rcode = gpu_mode_capture(comm, rank, nranks, arg, stream);
        break;
    case GPU_MODE_MIXED:
        rcode = gpu_mode_mixed(comm, rank, nranks, arg, stream);
        break;
    case GPU_MODE_USERREG:
        rcode = gpu_mode_userreg(comm, rank, nranks, arg, stream);
        break;
    case GPU_MODE_NCCL:
#ifdef RMACOLL_TEST_HAVE_NCCL
        rcode = gpu_mode_nccl(comm, rank, nranks, arg, stream);
#else
        rcode = GPU_WRONG_STATUS;
#endif
        break;
    }
    if (rcode == GPU_OK && arg->mode != GPU_MODE_NCCL) /* NCCL: checked on its comm */
        rcode = gpu_check_path(comm, rank, arg);
out:
    if (stream != NULL)
        cudaStreamDestroy(stream);
    return rcode;
}

/* ---- parent side (never touches CUDA) ---- */

static rmacoll_config_t base_config(void)
{
    rmacoll_config_t cfg;
    char err[256];

    assert_int_equal(rmacoll_config_load(NULL, &cfg, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    cfg.timeout_ms = 20000;
    return cfg;
}

/* Runs arg on nranks ranks placed by node_of (NULL: all on node 0), with
 * cfgp (NULL: base_config()). */
static void run_cfg(const gpu_arg_t *arg, int nranks, const int *node_of,
                    const rmacoll_config_t *cfgp)
{
    static const int one_node[GPU_MAX_RANKS];
    rmacoll_config_t cfg = cfgp ? *cfgp : base_config();
    int codes[GPU_MAX_RANKS] = {0};
    mprun_opts_t o = {nranks, node_of ? node_of : one_node, &cfg, 240, -1};
    int failed, no_hmem = 0;

    assert_true(nranks <= GPU_MAX_RANKS);
    failed = mprun(&o, gpu_body, (void *)arg, codes);
    for (int r = 0; r < nranks; r++)
        no_hmem += codes[r] == GPU_NO_HMEM;
    if (failed && no_hmem == nranks) {
        print_message("libfabric's provider '%s' cannot register CUDA memory (FI_HMEM): "
                      "skipped (scripts/gpu/hmem-check.sh builds one that can; "
                      "RMACOLL_TEST_REQUIRE_HMEM=1 makes this a failure)\n",
                      cfg.ofi_provider);
        skip();
    }
    if (failed) {
        for (int r = 0; r < nranks; r++)
            print_message("rank %d exit %d\n", r, codes[r]);
    }
    assert_int_equal(failed, 0);
}

static void run(const gpu_arg_t *arg, int nranks, const int *node_of)
{
    run_cfg(arg, nranks, node_of, NULL);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every case file, all ranks on one node, two calls each (the mismatch
 * case: every rank RMACOLL_ERR_MISMATCH, receive buffers untouched). */
static void test_cases_one_node(void **state)
{
    DIR *d = opendir(RMACOLL_CASES_DIR);
    char *names[256];
    int nn = 0, nmismatch = 0;
    struct dirent *e;

    (void)state;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL && nn < 256) {
        size_t l = strlen(e->d_name);

        if (l > 4 && strcmp(e->d_name + l - 4, ".txt") == 0)
            names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    assert_true(nn > 0);
    qsort(names, (size_t)nn, sizeof(names[0]), by_name);
    for (int k = 0; k < nn; k++) {
        char path[1024], err[256];
        rmacoll_case_t *c = NULL;
        gpu_arg_t arg;

        snprintf(path, sizeof(path), "%s/%s", RMACOLL_CASES_DIR, names[k]);
        if (rmacoll_case_load(path, &c, err, sizeof(err)) != RMACOLL_SUCCESS)
            fail_msg("%s", err);
        print_message("case %s: %d ranks on one node\n", names[k], c->nranks);
        memset(&arg, 0, sizeof(arg));
        arg.mode = GPU_MODE_CASE;
        arg.cases[0] = c;
        arg.ncases = 1;
        arg.ncalls = 2;
        arg.expect = c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS;
        nmismatch += c->has_mismatch;
        run(&arg, c->nranks, NULL);
        rmacoll_case_free(c);
        free(names[k]);
    }
    assert_true(nmismatch > 0); /* the mismatch case was among them */
}

static rmacoll_case_t *gen(int nranks, const char *dist, int64_t base,
                           uint64_t seed, rmacoll_datatype_t dtype)
{
    rmacoll_case_dist_t d;
    rmacoll_case_t *c = NULL;

    assert_int_equal(rmacoll_case_dist_parse(dist, &d), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_case_random(1, &nranks, &d, base, seed, dtype, &c),
                     RMACOLL_SUCCESS);
    return c;
}

/* Stale NaNs on the stream before the real data: 4 ranks, 1 MiB blocks
 * (uniform) and a zipf split, float32 (0xFFFFFFFF is a NaN). */
static void test_stream_order_nan(void **state)
{
    rmacoll_case_t *u = gen(4, "uniform", 256 * 1024, 1, RMACOLL_FLOAT32);
    rmacoll_case_t *z = gen(4, "zipf:1.2", 256 * 1024, 2, RMACOLL_FLOAT32);
    gpu_arg_t arg;

    (void)state;
    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_NAN;
    arg.cases[0] = u;
    arg.cases[1] = z;
    arg.ncases = 2;
    arg.ncalls = 4;
    run(&arg, 4, NULL);
    rmacoll_case_free(u);
    rmacoll_case_free(z);
}

/* Six calls with changing counts, dtypes and distinct buffers queued back
 * to back on cfgp (NULL: base_config()), one sync at the end; path: the
 * device path across nodes to check (NONE on one node). */
static void back2back_on(const rmacoll_config_t *cfgp, const int *node_of,
                         rmacoll_device_path_t path, uint64_t seed)
{
    static const char *const dists[] = {"random", "zipf:1.2", "sparse:0.3",
                                        "uniform", "random", "zipf:2"};
    rmacoll_case_t *cs[6];
    gpu_arg_t arg;

    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_BACK2BACK;
    arg.path = path;
    for (int k = 0; k < 6; k++) {
        cs[k] = gen(4, dists[k], 1000 + 4000 * k, seed + (uint64_t)k,
                    k % 3 == 1 ? RMACOLL_INT8 : RMACOLL_FLOAT32);
        arg.cases[k] = cs[k];
    }
    arg.ncases = 6;
    arg.ncalls = 6;
    run_cfg(&arg, 4, node_of, cfgp);
    for (int k = 0; k < 6; k++)
        rmacoll_case_free(cs[k]);
}

/* Calls with changing counts queued back to back, one sync at the end. */
static void test_back_to_back(void **state)
{
    (void)state;
    back2back_on(NULL, NULL, RMACOLL_DEVICE_PATH_NONE, 10);
}

/* nvlink_kernel's one-launch path opted in (RMACOLL_NVL_ONE_LAUNCH=1,
 * inherited by the forked ranks) with ranks as separate processes: on one
 * GPU (no MPS assumed) the ranks must detect the shared device and take
 * the split path; on two GPUs 2 ranks are on distinct devices and may take
 * it. Either way: every call checked, no hang (small and 1 MiB blocks). */
static void test_one_launch_processes(void **state)
{
    rmacoll_case_t *small = gen(2, "random", 3000, 21, RMACOLL_FLOAT32);
    rmacoll_case_t *big = gen(2, "uniform", 256 * 1024, 22, RMACOLL_FLOAT32);
    rmacoll_case_t *c4 = gen(4, "zipf:1.2", 5000, 23, RMACOLL_INT8);
    rmacoll_config_t cfg = base_config();
    gpu_arg_t arg;

    (void)state;
    snprintf(cfg.intra_node, sizeof(cfg.intra_node), "nvlink_kernel");
    setenv("RMACOLL_NVL_ONE_LAUNCH", "1", 1);
    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_CASE;
    arg.cases[0] = small;
    arg.cases[1] = big;
    arg.ncases = 2;
    arg.ncalls = 4;
    arg.expect = RMACOLL_SUCCESS;
    run_cfg(&arg, 2, NULL, &cfg);
    arg.cases[0] = c4;
    arg.ncases = 1;
    arg.ncalls = 2;
    run_cfg(&arg, 4, NULL, &cfg);
    unsetenv("RMACOLL_NVL_ONE_LAUNCH");
    rmacoll_case_free(small);
    rmacoll_case_free(big);
    rmacoll_case_free(c4);
}

/* Graph capture is refused, on 2 and on 4 ranks (2 per GPU on 2 GPUs). */
static void test_graph_capture(void **state)
{
    rmacoll_case_t *c2 = gen(2, "random", 5000, 3, RMACOLL_FLOAT32);
    rmacoll_case_t *c4 = gen(4, "random", 5000, 4, RMACOLL_FLOAT32);
    gpu_arg_t arg;

    (void)state;
    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_CAPTURE;
    arg.ncases = 1;
    arg.ncalls = 1;
    arg.cases[0] = c2;
    run(&arg, 2, NULL);
    arg.cases[0] = c4;
    run(&arg, 4, NULL);
    rmacoll_case_free(c2);
    rmacoll_case_free(c4);
}

static void cases_on(const rmacoll_config_t *cfg, rmacoll_device_path_t path);

/* Random and skewed counts, 4 ranks as 2 virtual nodes x 2, four calls on
 * cfg, then again with relay slots far smaller than the data; path: the
 * device path the communicators must take (checked with their counters). */
static void cross_node_random(rmacoll_config_t cfg, rmacoll_device_path_t path)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_case_t *c1 = gen(4, "random", 30000, 5, RMACOLL_FLOAT32);
    rmacoll_case_t *c2 = gen(4, "zipf:1.2", 50000, 6, RMACOLL_BFLOAT16);
    gpu_arg_t arg;

    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_CASE;
    arg.cases[0] = c1;
    arg.cases[1] = c2;
    arg.ncases = 2;
    arg.ncalls = 4;
    arg.expect = RMACOLL_SUCCESS;
    arg.path = path;
    run_cfg(&arg, 4, node_of, &cfg);
    cfg.relay_buffer_bytes = 4096; /* many slot reuses per call */
    run_cfg(&arg, 4, node_of, &cfg);
    rmacoll_case_free(c1);
    rmacoll_case_free(c2);
}

/* ofi over cfg's provider; skipped without ofi in the build. */
static rmacoll_config_t ofi_config(const char *provider)
{
    rmacoll_config_t cfg = base_config();

    if (strstr(rmacoll_build_transports(), "ofi") == NULL) {
        print_message("no ofi transport in this build: skipped\n");
        skip();
    }
    snprintf(cfg.inter_node, sizeof(cfg.inter_node), "ofi");
    snprintf(cfg.ofi_provider, sizeof(cfg.ofi_provider), "%s", provider);
    return cfg;
}

/* Device memory across (virtual) nodes: the relay through pinned host
 * staging, ofi over loopback TCP between the nodes (no FI_HMEM: every
 * byte staged, and counted). 4 ranks on 2 GPUs as 2 virtual nodes with
 * random and skewed counts (relay slots far smaller than the data, too),
 * then every shared case with its own topology. */
static void test_cross_node_relay(void **state)
{
    rmacoll_config_t cfg = ofi_config("tcp;ofi_rxm");

    (void)state;
    cross_node_random(cfg, RMACOLL_DEVICE_PATH_STAGED);
    cases_on(&cfg, RMACOLL_DEVICE_PATH_STAGED);
}

/* Every case file with its own topology on cfg; path: the device path the
 * communicators must take (checked with their counters). */
static void cases_on(const rmacoll_config_t *cfg, rmacoll_device_path_t path)
{
    DIR *d = opendir(RMACOLL_CASES_DIR);
    struct dirent *e;
    gpu_arg_t arg;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char p[1024], err[256];
        rmacoll_case_t *c = NULL;
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".txt") != 0)
            continue;
        /* RMACOLL_TEST_CASES=SUBSTRING: only the case files whose name has it */
        if (getenv("RMACOLL_TEST_CASES") != NULL &&
            strstr(e->d_name, getenv("RMACOLL_TEST_CASES")) == NULL)
            continue;
        snprintf(p, sizeof(p), "%s/%s", RMACOLL_CASES_DIR, e->d_name);
        if (rmacoll_case_load(p, &c, err, sizeof(err)) != RMACOLL_SUCCESS)
            fail_msg("%s", err);
        if (c->nranks > GPU_MAX_RANKS) {
            rmacoll_case_free(c);
            continue;
        }
        print_message("case %s: %d ranks on %d nodes, device memory, %s\n", e->d_name,
                      c->nranks, c->nnodes, cfg->relay_enabled ? "relay" : "direct");
        memset(&arg, 0, sizeof(arg));
        arg.mode = GPU_MODE_CASE;
        arg.cases[0] = c;
        arg.ncases = 1;
        arg.ncalls = 2;
        arg.expect = c->has_mismatch ? RMACOLL_ERR_MISMATCH : RMACOLL_SUCCESS;
        arg.path = c->nnodes > 1 ? path : RMACOLL_DEVICE_PATH_NONE;
        run_cfg(&arg, c->nranks, c->node_of, cfg);
        rmacoll_case_free(c);
    }
    closedir(d);
}

/* Device memory across (virtual) nodes without staging: ofi over the shm
 * provider, which registers CUDA memory (FI_HMEM) when libfabric is built
 * with CUDA (skipped otherwise, a failure with RMACOLL_TEST_REQUIRE_HMEM).
 * 2 virtual nodes x 2 ranks (one GPU: all four share it), random and
 * skewed counts, relay slots far smaller than the data, direct puts
 * (relay off), back-to-back calls without host synchronisation, then
 * every case file with its own topology; every receive byte checked, the
 * staging counter 0, device bytes registered. */
static void test_cross_node_hmem(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_config_t cfg = ofi_config("shm");

    (void)state;
    /* the registered path is opt-in (default staged) */
    assert_int_equal(rmacoll_config_set(&cfg, "transports.device_inter_node", "auto"),
                     RMACOLL_SUCCESS);
    cross_node_random(cfg, RMACOLL_DEVICE_PATH_HMEM);
    back2back_on(&cfg, node_of, RMACOLL_DEVICE_PATH_HMEM, 30);
    cases_on(&cfg, RMACOLL_DEVICE_PATH_HMEM);
    cfg.relay_enabled = 0; /* every cross-node block put directly */
    cross_node_random(cfg, RMACOLL_DEVICE_PATH_HMEM);
    back2back_on(&cfg, node_of, RMACOLL_DEVICE_PATH_HMEM, 40);
}

/* Device buffers the caller registered (rmacoll_mem_register, as
 * Communicator.register / TorchSegments do for torch tensors) on the
 * registered path over shm (FI_HMEM; skipped as test_cross_node_hmem where
 * libfabric lacks it): 2 virtual nodes x 2, random and zipf:1.2 counts,
 * relay on and off; each call finds its buffers registered and registers
 * nothing (counters), 0 bytes staged, every receive byte checked. */
static void test_cross_node_hmem_userreg(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_case_t *c1 = gen(4, "random", 30000, 21, RMACOLL_FLOAT32);
    rmacoll_case_t *c2 = gen(4, "zipf:1.2", 70000, 22, RMACOLL_BFLOAT16);
    rmacoll_config_t cfg = ofi_config("shm");
    gpu_arg_t arg;

    (void)state;
    assert_int_equal(rmacoll_config_set(&cfg, "transports.device_inter_node", "auto"),
                     RMACOLL_SUCCESS);
    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_USERREG;
    arg.cases[0] = c1;
    arg.cases[1] = c2;
    arg.ncases = 2;
    arg.ncalls = 4;
    arg.path = RMACOLL_DEVICE_PATH_HMEM;
    run_cfg(&arg, 4, node_of, &cfg);
    cfg.relay_enabled = 0;
    run_cfg(&arg, 4, node_of, &cfg);
    rmacoll_case_free(c1);
    rmacoll_case_free(c2);
}

/* Device memory across (virtual) nodes over the emulated GPUDirect NIC
 * (plugins/emunic: CUDA IPC copies on its own streams, a token bucket per
 * direction, signals after the copy), registered, never staged: the same
 * runs as test_cross_node_hmem, at the default rate (48.5 GB/s, 3 us) and
 * uncapped. Skipped in a build without the plugin. */
static void test_cross_node_emunic(void **state)
{
#ifdef RMACOLL_TEST_EMUNIC_PLUGIN
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_config_t cfg = base_config();

    (void)state;
    assert_int_equal(rmacoll_config_set(&cfg, "transports.inter_node",
                                        "plugin:" RMACOLL_TEST_EMUNIC_PLUGIN),
                     RMACOLL_SUCCESS);
    assert_int_equal(rmacoll_config_set(&cfg, "transports.device_inter_node", "hmem"),
                     RMACOLL_SUCCESS);
    cross_node_random(cfg, RMACOLL_DEVICE_PATH_HMEM);
    back2back_on(&cfg, node_of, RMACOLL_DEVICE_PATH_HMEM, 30);
    cases_on(&cfg, RMACOLL_DEVICE_PATH_HMEM);
    assert_int_equal(rmacoll_config_set(&cfg, "emunic.rate", "0"), RMACOLL_SUCCESS);
    cfg.relay_enabled = 0;
    cross_node_random(cfg, RMACOLL_DEVICE_PATH_HMEM);
    back2back_on(&cfg, node_of, RMACOLL_DEVICE_PATH_HMEM, 40);
#else
    (void)state;
    print_message("built without the emunic plugin: skipped\n");
    skip();
#endif
}

/* Host-memory and device-memory calls alternating on one communicator
 * across 2 virtual nodes x 2 (host calls need no agreement round, device
 * calls run one: a device call after a host call used to wait for an
 * agreement word that lagged one behind, until the timeout), staged over
 * tcp;ofi_rxm, and registered over shm where libfabric has FI_HMEM. */
static void test_cross_node_mixed(void **state)
{
    static const int node_of[4] = {0, 0, 1, 1};
    rmacoll_case_t *c1 = gen(4, "random", 3000, 7, RMACOLL_FLOAT32);
    rmacoll_case_t *c2 = gen(4, "zipf:1.2", 5000, 8, RMACOLL_INT32);
    rmacoll_config_t cfg = ofi_config("tcp;ofi_rxm");
    gpu_arg_t arg;

    (void)state;
    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_MIXED;
    arg.cases[0] = c1;
    arg.cases[1] = c2;
    arg.ncases = 2;
    arg.ncalls = 6;
    arg.path = RMACOLL_DEVICE_PATH_STAGED;
    run_cfg(&arg, 4, node_of, &cfg);
    if (getenv("RMACOLL_TEST_REQUIRE_HMEM") != NULL) {
        cfg = ofi_config("shm");
        assert_int_equal(rmacoll_config_set(&cfg, "transports.device_inter_node", "hmem"),
                         RMACOLL_SUCCESS);
        arg.path = RMACOLL_DEVICE_PATH_HMEM;
        run_cfg(&arg, 4, node_of, &cfg);
    }
    rmacoll_case_free(c1);
    rmacoll_case_free(c2);
}

/* rmacoll_comm_create_from_nccl: one rank per GPU (NCCL's rule). */
static void test_from_nccl(void **state)
{
#ifdef RMACOLL_TEST_HAVE_NCCL
    int n = gpu_ndevices >= 2 ? 2 : 1;
    rmacoll_case_t *c = gen(n, "zipf:1.2", 20000, 6, RMACOLL_BFLOAT16);
    gpu_arg_t arg;

    (void)state;
    memset(&arg, 0, sizeof(arg));
    arg.mode = GPU_MODE_NCCL;
    arg.cases[0] = c;
    arg.ncases = 1;
    arg.ncalls = 3;
    run(&arg, n, NULL);
    rmacoll_case_free(c);
#else
    (void)state;
    skip();
#endif
}

/* Device count from a forked child (CUDA must not start in the parent,
 * which forks the ranks): 0 when CUDA fails. */
static int gpu_probe(void)
{
    int n = mprun_forked(rmacoll_test_gpu_count, 60);

    return n < 0 ? 0 : n;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_one_node),
        cmocka_unit_test(test_stream_order_nan),
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_graph_capture),
        cmocka_unit_test(test_one_launch_processes),
        cmocka_unit_test(test_cross_node_relay),
        cmocka_unit_test(test_cross_node_hmem),
        cmocka_unit_test(test_cross_node_hmem_userreg),
        cmocka_unit_test(test_cross_node_mixed),
        cmocka_unit_test(test_cross_node_emunic),
        cmocka_unit_test(test_from_nccl),
    };

    gpu_ndevices = gpu_probe();
    if (gpu_ndevices < 1) {
        printf("test_gpu_e2e: no usable CUDA device: skipped\n");
        return 77;
    }
    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    /* RMACOLL_TEST_FILTER=test_cross_node_*: a subset (scripts/gpu/hmem-check.sh) */
    if (getenv("RMACOLL_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("RMACOLL_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
