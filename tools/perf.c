/*
 * perf.c - rmacoll-perf: AlltoAllV benchmark in the style of nccl-tests'
 * alltoall_perf (sizes, columns, checking), on rmacoll.
 *
 * Started by hand it is its own launcher: it makes a unique id and
 * fork+execs itself as -np ranks on virtual nodes (RMACOLL_NODE_ID), then
 * waits for them (tools/common/launch.h). Under mpirun/srun/torchrun it
 * spawns nothing and bootstraps with rmacoll_comm_create_from_env. The
 * benchmark loop itself is shared with the MPI baseline
 * (tools/common/perfrun.h), so both measure exactly the same thing.
 *
 * --buffers cuda (built with the CUDA runtime, RMACOLL_PERF_HAVE_CUDA):
 * every rank picks GPU local_rank % device count before creating the
 * communicator (CUDA is first touched here, in the exec'd child, never in
 * the spawning parent), allocates its buffers with cudaMalloc and calls
 * rmacoll_alltoallv on a stream of its own; time is taken with CUDA events
 * on that stream. --baseline nccl (RMACOLL_PERF_HAVE_NCCL) times NCCL's
 * grouped ncclSend/ncclRecv (what PyTorch's all_to_all_single does) on the
 * same counts and buffers. See docs/perf.md and docs/gpu.md.
 *
 * --gemm N (RMACOLL_PERF_HAVE_CUBLAS): SM interference. Each rank also
 * makes a second stream and a cuBLAS handle on it, allocates bf16 N x N
 * A, B, C and hands perfrun a load (a batch of --gemm-iters cublasGemmEx
 * between two events on that stream), which is timed alone and while the
 * alltoallv (rmacoll, then NCCL) loops on the collective's stream.
 *
 * The pieces (tools/perf/, linked into rmacoll-perf only, so the CUDA,
 * NCCL and cuBLAS switches of tools/extra.cmake reach all of them):
 * perf_tool.h the per-rank state and what the pieces share; hooks.c
 * rmacoll's calls as perfrun's backend; cuda.c the device hooks of
 * --buffers cuda; gemm.c the --gemm load; nccl.c --baseline nccl;
 * usage.c the option checks and node map of the spawner and the ranks;
 * rank.c one rank, from devices to perfrun's rows. This file: the
 * spawning parent and main.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_tool.h"
#include "core/oob/bootstrap.h" /* unique id <-> hex text for spawned ranks */

/* ---- parent: spawn the ranks ---- */

/* One rank's exit code in words: the rmacoll status it failed with
 * (RMACOLL_PERF_EXIT_OF), the data check, a usage error, a signal. */
static void perf_code_name(int code, char *buf, size_t len)
{
    if (code == -1)
        snprintf(buf, len, "stopped by the launcher");
    else if (code == 0)
        snprintf(buf, len, "ok");
    else if (code > RMACOLL_PERF_EXIT_STATUS && code < RMACOLL_PERF_EXIT_STATUS + 28)
        snprintf(buf, len, "%s",
                 rmacoll_status_name((rmacoll_status_t)(code - RMACOLL_PERF_EXIT_STATUS)));
    else if (code == 2)
        snprintf(buf, len, "data check failed");
    else if (code == RMACOLL_PERF_EXIT_USAGE)
        snprintf(buf, len, "usage error (exit 64)");
    else if (code > 128)
        snprintf(buf, len, "signal %d (%s)", code - 128, strsignal(code - 128));
    else
        snprintf(buf, len, "exit %d", code);
}

/* "ranks 0-2 RMACOLL_ERR_MISMATCH, rank 3 ok": runs of equal codes. */
static void perf_rank_codes(const int *codes, int n, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int r = 0; r < n && off + 1 < len;) {
        int e = r;
        char what[96];

        while (e + 1 < n && codes[e + 1] == codes[r])
            e++;
        perf_code_name(codes[r], what, sizeof(what));
        if (e > r)
            off += (size_t)snprintf(buf + off, len - off, "%sranks %d-%d %s",
                                    off ? ", " : "", r, e, what);
        else
            off += (size_t)snprintf(buf + off, len - off, "%srank %d %s",
                                    off ? ", " : "", r, what);
        r = e + 1;
    }
}

/* Every usage error is found here, once, before any rank starts: the
 * matrix file, the node map (node_of[*nranks]), the configuration and the
 * transport and scheduler names. 0, or PERF_EXIT_USAGE with it said. */
static int perf_spawn_check(const rmacoll_perf_opts_t *o, int *node_of,
                            int *nranks)
{
    rmacoll_case_t *c = NULL;
    rmacoll_config_t cfg;
    char err[512] = "";
    int bad;
    rmacoll_status_t st;

    if (strncmp(o->dist, "matrix:", 7) == 0 &&
        rmacoll_case_load(o->dist + 7, &c, err, sizeof(err)) !=
            RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    bad = perf_node_map(o, c, node_of, nranks, err, sizeof(err));
    rmacoll_case_free(c);
    if (bad) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    cfg.struct_size = sizeof(cfg);
    perf_transport_env(o);
    st = rmacoll_config_load(o->config_path[0] ? o->config_path : NULL,
                             &cfg, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": config: %s (%s)\n", err,
                rmacoll_status_name(st));
        return PERF_EXIT_USAGE;
    }
    if (perf_apply_config(o, &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    return 0;
}

/* The exit status of a launch that failed with st (res: what the
 * launcher saw, codes: each rank's exit code or NULL), with the failure
 * said: each rank's own code (st, the launcher's, is ERR_PEER for any
 * failed rank: not what the rank said). */
static int perf_spawn_verdict(rmacoll_status_t st, const rmacoll_launch_result_t *res,
                              const int *codes, int nranks)
{
    char own[2048] = "not known";

    /* A rank's own code when it reported wrong data (2), else 1. Exit 2 is
     * rank 0's verdict over every rank's check (the rank that found the
     * wrong values named them above): not a failure of the launch. */
    if (res->first_status == 2 && res->nfailed == 1 && !res->timed_out && !res->killed) {
        return 2;   /* rank 0 said "data check failed" */
    }
    (void)st;
    if (codes != NULL) {
        perf_rank_codes(codes, nranks, own, sizeof(own));
    }
    /* a rank killed by a signal of its own (a crash, kill -9) is the likely
     * cause; otherwise the ranks' own messages above say which failed
     * first (the launcher reaps ranks that fail together in rank order) */
    if (res->signal_rank >= 0) {
        fprintf(stderr, PERF_NAME ": rank %d died by signal %d (%s); %d of %d rank(s) "
                "failed%s, %d stopped by the launcher; each rank's own code: %s\n",
                res->signal_rank, res->signal_num,
                strsignal(res->signal_num), res->nfailed, nranks,
                res->timed_out ? ", deadline passed" : "", res->killed, own);
    } else {
        fprintf(stderr, PERF_NAME ": %d of %d rank(s) failed%s, %d stopped by the "
                "launcher; each rank's own code: %s (the ranks' messages above name "
                "the first failure)\n", res->nfailed, nranks,
                res->timed_out ? ", deadline passed" : "", res->killed, own);
    }
    return 1;
}

static int perf_spawn(const rmacoll_perf_opts_t *o, int argc, char **argv)
{
    int node_of[RMACOLL_LAUNCH_MAX_RANKS];
    int nranks = 0, *codes, rc;
    rmacoll_unique_id_t id;
    char hex[2 * RMACOLL_UNIQUE_ID_BYTES + 1];
    rmacoll_launch_spec_t spec;
    rmacoll_launch_result_t res;
    rmacoll_status_t st;
    char **cargv;

    if (perf_spawn_check(o, node_of, &nranks) != 0)
        return PERF_EXIT_USAGE;
    st = rmacoll_get_unique_id(&id);
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rmacoll_get_unique_id failed: %s\n",
                rmacoll_status_name(st));
        return 1;
    }
    rmacoll__unique_id_to_hex(&id, hex);

    /* The children run the same command line; --spawn is dropped by
     * nothing: RMACOLL_RANK takes precedence over every other variable. */
    cargv = calloc((size_t)argc + 1, sizeof(*cargv));
    if (cargv == NULL) {
        fprintf(stderr, PERF_NAME ": out of memory\n");
        return 1;
    }
    for (int i = 0; i < argc; i++)
        cargv[i] = argv[i];

    memset(&spec, 0, sizeof(spec));
    spec.nranks = nranks;
    spec.node_of_rank = node_of;
    spec.exe = NULL; /* /proc/self/exe */
    spec.argv = cargv;
    spec.id_hex = hex;
    spec.timeout_s = o->timeout_s;
    codes = calloc((size_t)nranks, sizeof(*codes));
    spec.rank_codes = codes;
    st = rmacoll_launch_spawn(&spec, &res);
    free(cargv);
    if (st == RMACOLL_SUCCESS) {
        free(codes);
        return 0;
    }
    rc = perf_spawn_verdict(st, &res, codes, nranks);
    free(codes);
    return rc;
}

int main(int argc, char **argv)
{
    rmacoll_perf_opts_t o;
    rmacoll_launch_env_t env;
    char err[512] = "";
    int pr;

    rmacoll_perf_opts_init(&o);
    pr = rmacoll_perf_opts_parse(argc, argv, &o, stdout, err, sizeof(err));
    if (pr == 1)
        return 0;
    if (pr < 0) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    if (rmacoll_launch_detect(&env, err, sizeof(err)) != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    if (o.force_spawn && env.kind != RMACOLL_LAUNCH_SPAWNED)
        env.kind = RMACOLL_LAUNCH_NONE;
    if (env.kind == RMACOLL_LAUNCH_NONE)
        return perf_spawn(&o, argc, argv);
    if (env.kind != RMACOLL_LAUNCH_SPAWNED && o.topology_given) {
        /* Under a launcher, --ppn/--topology/--nodes make virtual nodes on
         * the launcher's ranks (RMACOLL_NODE_ID of this process), e.g.
         * mpirun -np 4 rmacoll-perf --ppn 2: two nodes of two ranks. */
        static int node_of[RMACOLL_LAUNCH_MAX_RANKS];
        int n = 0;
        char id[32];

        if (!o.np_given)
            o.np = env.nranks;
        if (perf_node_map(&o, NULL, node_of, &n, err, sizeof(err)) != 0 ||
            (n != env.nranks &&
             snprintf(err, sizeof(err), "the topology options give %d ranks "
                      "but %s started %d", n,
                      rmacoll_launch_kind_name(env.kind), env.nranks) > 0)) {
            if (env.rank == 0)
                fprintf(stderr, PERF_NAME ": %s\n", err);
            return PERF_EXIT_USAGE;
        }
        snprintf(id, sizeof(id), "%d", node_of[env.rank]);
        setenv(RMACOLL_LAUNCH_ENV_NODE, id, 1);
        env.node = node_of[env.rank];
    }
    return perf_rank(&o, &env);
}
