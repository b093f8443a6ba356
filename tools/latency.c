/*
 * latency.c - rmacoll-latency: per-call time of device-memory AlltoAll at
 * small sizes, ranks as threads of one process (one CUDA context, no
 * time-slicing between processes), in the nccl-tests way (n calls back to
 * back between two events on the rank's stream, time per call in us, the
 * slowest rank), for each device path:
 *
 *   ce            copy engine + stream memory operations
 *   nvlink_kernel copy kernel + stream memory operations
 *   one_launch    nvlink_kernel's one kernel per call (RMACOLL_NVL_ONE_LAUNCH=1)
 *   graph_ce      --graph-calls calls captured into one CUDA graph
 *                 (RMACOLL_CUDA_GRAPH=1) and replayed, time per call
 *   graph_one_launch  the same over the one-launch path
 *   device_counts rmacoll_alltoallv_device_counts (issue 31): the counts in
 *                 device memory, read by its one kernel (nvlink_kernel),
 *                 the receive counts produced on the device
 *   graph_device_counts  --graph-calls of those captured and replayed (no
 *                 RMACOLL_CUDA_GRAPH needed)
 *
 * beside a floor measured in the same process: one empty kernel launch
 * plus one event record on the same stream (pipelined), and the same with
 * an event synchronisation after each. Each path runs in a forked child
 * (its environment switches are read once per process); the parent never
 * initialises CUDA. The receive buffer is checked once per size after the
 * timed calls (every byte; "ok" or "WRONG"); the last column says where
 * the calls' signal words were (rmacoll_comm_get_stats: "device" memory,
 * or the "host" control window, e.g. under RMACOLL_DEVICE_SIGNALS=0).
 *
 *   rmacoll-latency [-np N] [-b MIN] [-e MAX] [-f F] [-n ITERS] [-w WARMUP]
 *                   [--graph-calls G] [--path NAME[,NAME...]]
 *
 * Sizes are bytes sent per rank in total (as nccl-tests), block = size / N.
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cases.h"
#include "rmacoll.h"

#define MAXR 16

typedef struct opts {
    int np, iters, warmup, gcalls;
    size_t minb, maxb;
    int factor;
    char paths[256];
} opts_t;

/* --help: the options (the man page is generated from this text,
 * scripts/gen_man.py); built with or without CUDA. */
static void usage(FILE *out)
{
    fprintf(out,
            "usage: rmacoll-latency [-np N] [-b MIN] [-e MAX] [-f F] [-n ITERS] [-w WARMUP]\n"
            "                       [--graph-calls G] [--path NAME[,NAME...]]\n"
            "Per-call time of device-memory AlltoAll (int32) at small sizes, ranks as\n"
            "threads of one process, nccl-tests' way: n calls back to back between two\n"
            "events, time per call in us, the slowest rank; beside the floor of one\n"
            "empty kernel launch plus one event record. Needs CUDA and a GPU.\n"
            "  -np N                ranks (threads; GPU rank %% device count), 2..%d\n"
            "                       (default 2)\n"
            "  -b MIN               smallest bytes sent per rank in total (default 8K)\n"
            "  -e MAX               largest (default 512K); sizes take K/M/G suffixes\n"
            "  -f F                 multiply the size by F per row (default 8)\n"
            "  -n ITERS             timed calls per size (default 1000)\n"
            "  -w WARMUP            warm-up calls per size (default 100)\n"
            "  --graph-calls G      calls captured into one CUDA graph by the graph_*\n"
            "                       paths, time per call (default 100)\n"
            "  --path NAME[,NAME...]  device paths to time, each in its own child\n"
            "                       process (default all): ce (copy engine + stream\n"
            "                       memory operations), nvlink_kernel (copy kernel),\n"
            "                       one_launch (RMACOLL_NVL_ONE_LAUNCH=1), graph_ce\n"
            "                       (RMACOLL_CUDA_GRAPH=1), graph_one_launch,\n"
            "                       device_counts (rmacoll_alltoallv_device_counts, counts\n"
            "                       in device memory), graph_device_counts\n"
            "  -h, --help           this text\n"
            "Exit status: 0 ok, 1 a path failed (or wrong data), 2 bad usage or no CUDA.\n",
            MAXR);
}

/* The options: -1 to go on, else the exit status (--help: 0). */
static int parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"np", required_argument, NULL, 'p'},   {"graph-calls", required_argument, NULL, 'g'},
        {"path", required_argument, NULL, 'P'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    opts_t d = {2, 1000, 100, 100, 8192, 512 * 1024, 8, ""};
    int c;
    char *tok;
    uint64_t v;

    *o = d;
    snprintf(o->paths, sizeof(o->paths), "ce,nvlink_kernel,one_launch,graph_ce,"
             "graph_one_launch,device_counts,graph_device_counts");
    while ((c = getopt_long_only(argc, argv, "b:e:f:n:w:h", lo, NULL)) != -1) {
        switch (c) {
        case 'p': o->np = atoi(optarg); break;
        case 'g': o->gcalls = atoi(optarg); break;
        case 'P': snprintf(o->paths, sizeof(o->paths), "%s", optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'f': o->factor = atoi(optarg); break;
        case 'b':
        case 'e':
            if (rmacoll_parse_size(optarg, &v) != RMACOLL_SUCCESS) {
                fprintf(stderr, "rmacoll-latency: -%c: bad size '%s'\n", c, optarg);
                return 2;
            }
            *(c == 'b' ? &o->minb : &o->maxb) = (size_t)v;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o->np < 2 || o->np > MAXR || o->iters < 1 || o->warmup < 0 || o->gcalls < 1 ||
        o->minb < 1 || o->maxb < o->minb) {
        fprintf(stderr, "rmacoll-latency: -np 2..%d, -n >= 1, -w >= 0, --graph-calls >= 1, "
                "1 <= -b <= -e\n", MAXR);
        return 2;
    }
    {
        char copy[256], *sv = NULL;

        snprintf(copy, sizeof(copy), "%s", o->paths);
        for (tok = strtok_r(copy, ",", &sv); tok != NULL; tok = strtok_r(NULL, ",", &sv)) {
            if (strcmp(tok, "ce") && strcmp(tok, "nvlink_kernel") &&
                strcmp(tok, "one_launch") && strcmp(tok, "graph_ce") &&
                strcmp(tok, "graph_one_launch") && strcmp(tok, "device_counts") &&
                strcmp(tok, "graph_device_counts")) {
                fprintf(stderr, "rmacoll-latency: --path: unknown path '%s'\n", tok);
                return 2;
            }
        }
    }
    return -1;
}

#ifndef RMACOLL_LATENCY_HAVE_CUDA

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts(argc, argv, &o);

    if (rc >= 0) {
        return rc;
    }
    fprintf(stderr, "rmacoll-latency: built without CUDA (needs the CUDA toolkit at "
            "configure time)\n");
    return 2;
}

#else

#include <pthread.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "cuda_graph.h"

typedef struct shared {
    const opts_t *o;
    const char *path;
    int graph;
    int dcounts; /* rmacoll_alltoallv_device_counts */
    rmacoll_unique_id_t id;
    rmacoll_config_t cfg;
    pthread_barrier_t bar;
    double t_pipe[MAXR], t_sync[MAXR];
    double floor_pipe, floor_sync;
    int bad[MAXR];
    int dsig; /* rank 0's communicator: device-resident signal words */
} shared_t;

typedef struct targ {
    shared_t *sh;
    int rank;
} targ_t;

/* The floor's empty kernel, JIT-compiled from PTX through the driver entry
 * points (the tool needs no nvcc). */
static const char empty_ptx[] = ".version 7.0\n.target sm_52\n.address_size 64\n"
                                ".visible .entry rmacoll_empty()\n{\n\tret;\n}\n";

static CUfunction empty_fn;
static PFN_cuLaunchKernel_v4000 launch_fn;

static int load_empty(void)
{
    PFN_cuModuleLoadData_v2000 load = NULL;
    PFN_cuModuleGetFunction_v2000 get = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CUmodule mod;
    void *fn;

    if (cudaGetDriverEntryPointByVersion("cuModuleLoadData", &fn, 2000, cudaEnableDefault,
                                         &q) != cudaSuccess || fn == NULL)
        return -1;
    memcpy(&load, &fn, sizeof(fn));
    if (cudaGetDriverEntryPointByVersion("cuModuleGetFunction", &fn, 2000,
                                         cudaEnableDefault, &q) != cudaSuccess || fn == NULL)
        return -1;
    memcpy(&get, &fn, sizeof(fn));
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 4000, cudaEnableDefault,
                                         &q) != cudaSuccess || fn == NULL)
        return -1;
    memcpy(&launch_fn, &fn, sizeof(fn));
    if (load(&mod, empty_ptx) != CUDA_SUCCESS || get(&empty_fn, mod, "rmacoll_empty") !=
                                                      CUDA_SUCCESS)
        return -1;
    return 0;
}

static int launch_empty(cudaStream_t s)
{
    return launch_fn(empty_fn, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, NULL, NULL) ==
                   CUDA_SUCCESS
               ? 0
               : -1;
}

/* Floor on rank 0's stream: pipelined launches + one event each, and each
 * followed by an event synchronisation; us per launch. */
static void measure_floor(shared_t *sh, cudaStream_t s)
{
    cudaEvent_t a, b, ev;
    float ms = 0;
    int n = sh->o->iters;

    if (load_empty() != 0) {
        fprintf(stderr, "rmacoll-latency: cannot load the floor's empty kernel\n");
        return;
    }
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    for (int i = 0; i < 100; i++)
        launch_empty(s);
    cudaStreamSynchronize(s);
    cudaEventRecord(a, s);
    for (int i = 0; i < n; i++) {
        launch_empty(s);
        cudaEventRecord(ev, s);
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    sh->floor_pipe = 1e3 * ms / n;
    {
        struct timespec t0, t1;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n; i++) {
            launch_empty(s);
            cudaEventRecord(ev, s);
            cudaEventSynchronize(ev);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        sh->floor_sync = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
                         1e3 / n;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaEventDestroy(ev);
}

/* A failure before the ranks' barriers: the whole path (this child) ends. */
static void fatal(int rank, const char *what)
{
    fprintf(stderr, "rmacoll-latency: rank %d: %s failed (%s)\n", rank, what,
            cudaGetErrorString(cudaGetLastError()));
    fflush(stderr);
    _exit(1);
}

static double now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* One size on one rank: fill, warm up, time, check. */
static int one_size(shared_t *sh, rmacoll_comm_t *comm, int rank, cudaStream_t s,
                    size_t size)
{
    const opts_t *o = sh->o;
    int np = o->np;
    int64_t count = (int64_t)(size / (size_t)np / 4), cnt[MAXR], dsp[MAXR];
    size_t bytes = (size_t)count * 4 * (size_t)np;
    void *hs = NULL, *hr = NULL, *ds = NULL, *dr = NULL;
    int64_t *dcnt = NULL, *drcnt = NULL; /* device_counts: the counts on the device */
    int32_t *dstat = NULL, hstat = -1;
    cudaEvent_t a = NULL, b = NULL;
    rmacoll_tool_graph_t tg = {NULL, NULL};
    char gerr[160];
    float ms = 0;
    int rc = 0, reps = 0;
    rmacoll_check_report_t rep;

    memset(&rep, 0, sizeof(rep));
    if (count < 1)
        count = 1, bytes = 4 * (size_t)np;
    for (int j = 0; j < np; j++) {
        cnt[j] = count;
        dsp[j] = (int64_t)j * count;
    }
    if (cudaMallocHost(&hs, bytes) != cudaSuccess || cudaMallocHost(&hr, bytes) !=
                                                         cudaSuccess ||
        cudaMalloc(&ds, bytes) != cudaSuccess || cudaMalloc(&dr, bytes) != cudaSuccess ||
        cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
        fatal(rank, "allocating buffers");
    rmacoll_fill_send(hs, bytes, 4, rank, np, cnt, dsp, 1);
    cudaMemcpy(ds, hs, bytes, cudaMemcpyHostToDevice);
    cudaMemset(dr, RMACOLL_FILL_SENTINEL, bytes);
    if (sh->dcounts) {
        if (cudaMalloc((void **)&dcnt, sizeof(cnt)) != cudaSuccess ||
            cudaMalloc((void **)&drcnt, sizeof(cnt)) != cudaSuccess ||
            cudaMalloc((void **)&dstat, sizeof(*dstat)) != cudaSuccess)
            fatal(rank, "allocating the device counts");
        cudaMemcpy(dcnt, cnt, sizeof(cnt), cudaMemcpyHostToDevice);
        cudaMemset(dstat, 0xff, sizeof(*dstat));
    }
    cudaStreamSynchronize(0); /* not the device: other ranks' streams */
#define CALL()                                                                            \
    (sh->dcounts ? rmacoll_alltoallv_device_counts(ds, dcnt, count * np, dr, drcnt,       \
                                                   count * np, RMACOLL_RECV_PRODUCE,      \
                                                   RMACOLL_INT32, comm, s, dstat)         \
                 : rmacoll_alltoall(ds, dr, count, RMACOLL_INT32, comm, s))
    for (int i = 0; i < o->warmup && rc == 0; i++)
        rc = CALL() != RMACOLL_SUCCESS;
    if (rc == 0 && sh->graph) {
        rmacoll_status_t st = RMACOLL_SUCCESS;

        if (rmacoll_tool_graph_begin(s, gerr, sizeof(gerr)) != 0)
            fatal(rank, gerr);
        for (int i = 0; i < o->gcalls && st == RMACOLL_SUCCESS; i++)
            st = CALL();
        if (rmacoll_tool_graph_end(&tg, s, st == RMACOLL_SUCCESS, gerr, sizeof(gerr)) != 0) {
            fprintf(stderr, "rank %d: capture failed: %s: %s\n", rank, gerr,
                    rmacoll_comm_last_error(comm));
            fatal(rank, "capturing the calls");
        }
        reps = (o->iters + o->gcalls - 1) / o->gcalls;
        rmacoll_tool_graph_launch(&tg, s, 3, gerr, sizeof(gerr));
    }
    cudaStreamSynchronize(s);
    pthread_barrier_wait(&sh->bar);
    cudaEventRecord(a, s);
    if (sh->graph) {
        rc |= rmacoll_tool_graph_launch(&tg, s, reps, gerr, sizeof(gerr)) != 0;
    } else {
        for (int i = 0; i < o->iters && rc == 0; i++)
            rc = CALL() != RMACOLL_SUCCESS;
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    sh->t_pipe[rank] = 1e3 * ms / (sh->graph ? (double)reps * o->gcalls : o->iters);
    /* synced: host in the loop, one call (or one graph) then a sync */
    pthread_barrier_wait(&sh->bar);
    {
        int n = sh->graph ? reps : o->iters / 4 + 1;
        double t0 = now_us();

        for (int i = 0; i < n && rc == 0; i++) {
            rc = sh->graph ? rmacoll_tool_graph_launch(&tg, s, 1, gerr, sizeof(gerr)) != 0
                           : CALL() != RMACOLL_SUCCESS;
            cudaStreamSynchronize(s);
        }
        sh->t_sync[rank] = (now_us() - t0) / (sh->graph ? (double)n * o->gcalls : n);
    }
    cudaMemcpy(hr, dr, bytes, cudaMemcpyDeviceToHost);
    sh->bad[rank] = rc != 0 || rmacoll_check_recv(hr, bytes, 4, rank, np, cnt, dsp, 1,
                                                  &rep) != 0;
    if (sh->dcounts && rc == 0 && !sh->bad[rank]) {
        int64_t got[MAXR];

        cudaMemcpy(got, drcnt, sizeof(got[0]) * (size_t)np, cudaMemcpyDeviceToHost);
        cudaMemcpy(&hstat, dstat, sizeof(hstat), cudaMemcpyDeviceToHost);
        for (int j = 0; j < np; j++)
            sh->bad[rank] |= got[j] != count;
        sh->bad[rank] |= hstat != 0 || rmacoll_device_counts_check(comm) != RMACOLL_SUCCESS;
        if (sh->bad[rank])
            snprintf(rep.msg, sizeof(rep.msg), "device counts: status %d, receive counts "
                     "or the device report wrong", (int)hstat);
    }
    if (sh->bad[rank] && rc == 0)
        fprintf(stderr, "rank %d: %s\n", rank, rep.msg);
    else if (rc != 0)
        fprintf(stderr, "rank %d: a call failed: %s\n", rank, rmacoll_comm_last_error(comm));
#undef CALL
    rmacoll_tool_graph_free(&tg);
    if (a != NULL)
        cudaEventDestroy(a);
    if (b != NULL)
        cudaEventDestroy(b);
    cudaFreeHost(hs);
    cudaFreeHost(hr);
    cudaFree(ds);
    cudaFree(dr);
    cudaFree(dcnt);
    cudaFree(drcnt);
    cudaFree(dstat);
    if (rc != 0)
        sh->bad[rank] = 1;
    return rc;
}

static void *rank_main(void *p)
{
    targ_t *t = p;
    shared_t *sh = t->sh;
    const opts_t *o = sh->o;
    rmacoll_comm_params_t prm;
    rmacoll_comm_t *comm = NULL;
    cudaStream_t s = NULL;
    int ndev = 1, rank = t->rank;

    cudaGetDeviceCount(&ndev);
    cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    memset(&prm, 0, sizeof(prm));
    prm.struct_size = sizeof(prm);
    prm.rank = rank;
    prm.nranks = o->np;
    prm.unique_id = &sh->id;
    prm.config = &sh->cfg;
    prm.node_key = "latency-node";
    if (rmacoll_comm_create(&prm, &comm) != RMACOLL_SUCCESS) {
        fatal(rank, "rmacoll_comm_create");
    }
    if (rank == 0) {
        rmacoll_comm_stats_t cs;

        memset(&cs, 0, sizeof(cs));
        cs.struct_size = sizeof(cs);
        sh->dsig = rmacoll_comm_get_stats(comm, &cs) == RMACOLL_SUCCESS && cs.device_signals;
        measure_floor(sh, s);
    }
    for (size_t size = o->minb; size <= o->maxb; size *= (size_t)o->factor) {
        int bad = 0;
        double tp = 0, ts = 0;

        pthread_barrier_wait(&sh->bar);
        one_size(sh, comm, rank, s, size);
        pthread_barrier_wait(&sh->bar);
        if (rank == 0) {
            for (int r = 0; r < o->np; r++) {
                tp = sh->t_pipe[r] > tp ? sh->t_pipe[r] : tp;
                ts = sh->t_sync[r] > ts ? sh->t_sync[r] : ts;
                bad |= sh->bad[r];
            }
            printf("%-17s %10zu %10zu %12.2f %12.2f %10.2f %10.2f  %-5s  %s\n", sh->path,
                   size, size / (size_t)o->np, tp, ts, sh->floor_pipe, sh->floor_sync,
                   bad ? "WRONG" : "ok", sh->dsig ? "device" : "host");
            fflush(stdout);
        }
        pthread_barrier_wait(&sh->bar);
        if (o->factor < 2)
            break;
    }
    rmacoll_comm_destroy(comm);
    cudaStreamDestroy(s);
    return NULL;
}

/* One path in this (forked) process. */
static int run_path(const opts_t *o, const char *path)
{
    shared_t *sh = calloc(1, sizeof(*sh));
    pthread_t th[MAXR];
    targ_t ta[MAXR];
    char err[256];
    int bad = 0;

    if (cudaGetDeviceCount(&bad) != cudaSuccess || bad < 1) {
        fprintf(stderr, "rmacoll-latency: no usable CUDA device\n");
        return 1;
    }
    bad = 0;
    alarm(600); /* a stream wait that never completes ends the path */
    sh->o = o;
    sh->path = path;
    if (strcmp(path, "one_launch") == 0 || strcmp(path, "graph_one_launch") == 0)
        setenv("RMACOLL_NVL_ONE_LAUNCH", "1", 1);
    else
        unsetenv("RMACOLL_NVL_ONE_LAUNCH");
    sh->graph = strncmp(path, "graph_", 6) == 0;
    sh->dcounts = strstr(path, "device_counts") != NULL;
    if (sh->graph && !sh->dcounts)
        setenv("RMACOLL_CUDA_GRAPH", "1", 1);
    else
        unsetenv("RMACOLL_CUDA_GRAPH");
    if (rmacoll_config_load(NULL, &sh->cfg, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, "rmacoll-latency: %s\n", err);
        return 1;
    }
    snprintf(sh->cfg.intra_node, sizeof(sh->cfg.intra_node), "%s",
             strcmp(path, "ce") == 0 || strcmp(path, "graph_ce") == 0 ? "ce"
                                                                       : "nvlink_kernel");
    if (rmacoll_get_unique_id(&sh->id) != RMACOLL_SUCCESS)
        return 1;
    pthread_barrier_init(&sh->bar, NULL, (unsigned)o->np);
    for (int r = 0; r < o->np; r++) {
        ta[r] = (targ_t){sh, r};
        pthread_create(&th[r], NULL, rank_main, &ta[r]);
    }
    for (int r = 0; r < o->np; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < o->np; r++)
        bad |= sh->bad[r];
    pthread_barrier_destroy(&sh->bar);
    free(sh);
    return bad;
}

int main(int argc, char **argv)
{
    opts_t o;
    int fails = 0, rc = parse_opts(argc, argv, &o);
    char *save = NULL, *tok;

    if (rc >= 0) {
        return rc;
    }
    /* ranks' streams on their own hardware queues (a stream wait blocks
     * the streams sharing its queue); inherited by the children */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    printf("# rmacoll-latency: %d ranks as threads of one process (GPU rank %% device "
           "count), alltoall int32, n = %d, warmup %d, %d calls per graph\n", o.np, o.iters,
           o.warmup, o.gcalls);
    printf("# time: us per call, slowest rank; pipelined = n calls between two events, "
           "synced = host waits after each call (graph: each replay)\n");
    printf("# floor: one empty kernel + one event on the same stream (pipelined, and "
           "with an event synchronisation)\n");
    printf("%-17s %10s %10s %12s %12s %10s %10s  %-5s  %s\n", "# path", "size", "per-peer",
           "pipelined", "synced", "floor", "floor-sync", "check", "words");
    fflush(stdout);
    for (tok = strtok_r(o.paths, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        pid_t pid;
        int status = 0;

        fflush(stdout);
        pid = fork();
        if (pid == 0)
            _exit(run_path(&o, tok));
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "rmacoll-latency: path %s failed\n", tok);
            fails++;
        }
    }
    return fails ? 1 : 0;
}

#endif
