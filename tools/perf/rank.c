/*
 * rank.c - rmacoll-perf: one rank, spawned or under a launcher: --dry-run,
 * devices, configuration, communicator, the header of the configuration
 * in effect, perfrun's rows, the debug counters and the close.
 */
#include <unistd.h>

#include "perf_tool.h"
#include "core/oob/bootstrap.h" /* unique id from the spawner's hex text */

/* Test hooks of the launcher, honoured in --dry-run only:
 * RMACOLL_PERF_TEST_EXIT=R:CODE makes rank R exit with CODE,
 * RMACOLL_PERF_TEST_HANG=R makes rank R sleep until killed. */
static int perf_dry_run(const rmacoll_launch_env_t *env)
{
    const char *ex = getenv("RMACOLL_PERF_TEST_EXIT");
    const char *hang = getenv("RMACOLL_PERF_TEST_HANG");
    int r, code;

    printf("rank %d/%d node %d launch %s id %.40s%s\n", env->rank,
           env->nranks, env->node, rmacoll_launch_kind_name(env->kind),
           env->id_hex != NULL ? env->id_hex : "-",
           env->id_hex != NULL ? "..." : "");
    fflush(stdout);
    if (ex != NULL && sscanf(ex, "%d:%d", &r, &code) == 2 && r == env->rank)
        return code;
    if (hang != NULL && atoi(hang) == env->rank)
        for (;;)
            pause();
    return 0;
}

/* What a rank needs before its communicator: the CUDA device (--buffers
 * cuda), and the baseline and load of this build. -1 to go on, else the
 * exit status. */
static int perf_rank_devices(const rmacoll_perf_opts_t *o,
                             const rmacoll_launch_env_t *env, perf_rmacoll_t *p)
{
    (void)p;
    if (o->memory == RMACOLL_PERF_MEM_CUDA) {
#ifdef RMACOLL_PERF_HAVE_CUDA
        /* Before any NCCL init: NVLS (NVLink SHARP) off, unless asked. */
        setenv("NCCL_NVLS_ENABLE", "0", 0);
        /* -G: rmacoll records calls under capture only in graph mode, read
         * at the process's first call */
        if (o->graph_launches > 0)
            setenv("RMACOLL_CUDA_GRAPH", "1", 1);
        if (perf_cuda_setup(p, env) != 0)
            return 1;
#else
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": --buffers cuda: built without the "
                    "CUDA runtime (reconfigure with the CUDA toolkit)\n");
        return 1;
#endif
    }
#ifndef RMACOLL_PERF_HAVE_NCCL
    if (!strcmp(o->baseline, "nccl")) {
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": --baseline nccl: built without NCCL "
                    "(nccl.h/libnccl not found at configure time)\n");
        return 1;
    }
#endif
#ifndef RMACOLL_PERF_HAVE_CUBLAS
    if (o->gemm_n > 0) {
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": --gemm: built without cuBLAS "
                    "(CUDA::cublas not found at configure time)\n");
        return 1;
    }
#endif
    return -1;
}

/* The rank's configuration, loaded as the library loads it, under the
 * options. A load that fails is said by this rank (*cfg_bad = 1), then
 * the library is left to load the same configuration itself at create,
 * where a bad value on some ranks fails every rank at once, naming them
 * (under a launcher only this rank may have it). -1 to go on, else the
 * exit status. */
static int perf_rank_config(const rmacoll_perf_opts_t *o,
                            const rmacoll_launch_env_t *env,
                            rmacoll_config_t *cfg, int *cfg_bad)
{
    char err[512] = "";
    rmacoll_status_t st;

    cfg->struct_size = sizeof(*cfg);
    perf_transport_env(o);
    st = rmacoll_config_load(o->config_path[0] ? o->config_path : NULL, cfg,
                             err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rank %d: config: %s (%s)\n", env->rank, err,
                rmacoll_status_name(st));
        *cfg_bad = 1;
        if (o->config_path[0])
            setenv("RMACOLL_CONFIG", o->config_path, 1);
    }
    if (!*cfg_bad && perf_apply_config(o, cfg, err, sizeof(err)) != 0) {
        if (env->rank == 0)
            fprintf(stderr, PERF_NAME ": %s\n", err);
        return PERF_EXIT_USAGE;
    }
    return -1;
}

/* The communicator (p->comm): from the spawner's unique id, or from the
 * launcher's environment. 0, or 1 with the failure said. */
static int perf_rank_comm(const rmacoll_launch_env_t *env,
                          const rmacoll_config_t *cfg, int cfg_bad,
                          perf_rmacoll_t *p)
{
    rmacoll_comm_t *comm = NULL;
    rmacoll_status_t st;

    if (env->kind == RMACOLL_LAUNCH_SPAWNED) {
        rmacoll_unique_id_t id;
        rmacoll_comm_params_t params;

        if (rmacoll__unique_id_from_hex(env->id_hex, &id) != RMACOLL_SUCCESS) {
            fprintf(stderr, PERF_NAME ": rank %d: bad or missing %s\n",
                    env->rank, RMACOLL_LAUNCH_ENV_ID);
            return 1;
        }
        memset(&params, 0, sizeof(params));
        params.struct_size = sizeof(params);
        params.rank = env->rank;
        params.nranks = env->nranks;
        params.unique_id = &id;
        params.config = cfg_bad ? NULL : cfg;
        params.node_key = NULL; /* RMACOLL_NODE_ID, set by the launcher */
        st = rmacoll_comm_create(&params, &comm);
    } else {
        st = rmacoll_comm_create_from_env(cfg_bad ? NULL : cfg, &comm);
    }
    if (st == RMACOLL_SUCCESS && cfg_bad) { /* cannot be: the same load failed here */
        rmacoll_comm_destroy(comm);
        return 1;
    }
    if (st != RMACOLL_SUCCESS) {
        fprintf(stderr, PERF_NAME ": rank %d: communicator create failed: %s\n",
                env->rank, rmacoll_status_name(st));
#ifdef RMACOLL_PERF_HAVE_CUDA
        perf_cuda_teardown(p);
#endif
        return RMACOLL_PERF_EXIT_OF(st);
    }
    p->comm = comm;
    return 0;
}

/* The scratch of the barrier and gather, the NCCL baseline and the GEMM
 * load: 0, or 1 with the failure said. */
static int perf_rank_alloc(const rmacoll_perf_opts_t *o, perf_rmacoll_t *p)
{
    (void)o;
    rmacoll_comm_rank(p->comm, &p->rank);
    rmacoll_comm_size(p->comm, &p->nranks);
    p->counts = calloc((size_t)p->nranks * 4, sizeof(int64_t));
    p->bar_send = calloc((size_t)p->nranks, 1);
    p->bar_recv = calloc((size_t)p->nranks, 1);
    if (p->counts == NULL || p->bar_send == NULL || p->bar_recv == NULL) {
        fprintf(stderr, PERF_NAME ": rank %d: out of memory\n", p->rank);
        return 1;
    }
#ifdef RMACOLL_PERF_HAVE_NCCL
    if (!strcmp(o->baseline, "nccl") && perf_nccl_setup(p) != 0)
        return 1;
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
    if (o->gemm_n > 0 && perf_gemm_setup(p, o->gemm_n, o->gemm_iters) != 0)
        return 1;
#endif
    return 0;
}

/* The communicator's device path, where its signal words of device calls
 * live and its direct streams' threshold (rmacoll_comm_get_stats). 0, or
 * PERF_EXIT_USAGE when -G cannot run on it. */
static int perf_rank_paths(const rmacoll_perf_opts_t *o, const perf_rmacoll_t *p,
                           const char **devpath, int *dsig, uint64_t *direct_min)
{
    rmacoll_comm_stats_t cs;

    memset(&cs, 0, sizeof(cs));
    cs.struct_size = sizeof(cs);
    rmacoll_comm_get_stats(p->comm, &cs);
    *devpath = cs.device_path == RMACOLL_DEVICE_PATH_HMEM     ? "hmem (registered, no staging)"
               : cs.device_path == RMACOLL_DEVICE_PATH_STAGED ? "staged (pinned host buffers)"
                                                              : "none (one node)";
    *dsig = cs.device_signals;
    *direct_min = cs.direct_min_bytes;
    /* The tool's barrier and gather are host-memory calls on the same
     * communicator; between graph replays they are safe only when the
     * device calls' signal words are device-resident (their own words,
     * which graph mode resets: docs/gpu.md). */
    if (o->graph_launches > 0 && (cs.device_path != RMACOLL_DEVICE_PATH_NONE || !*dsig)) {
        if (p->rank == 0)
            fprintf(stderr, PERF_NAME ": -G %d: CUDA graphs need one node and device-"
                    "resident signal words (%s)\n", o->graph_launches,
                    cs.device_path != RMACOLL_DEVICE_PATH_NONE
                        ? "device calls across nodes cannot be captured"
                        : "this communicator keeps them in the host window: see the "
                          "INFO log of creation");
        return PERF_EXIT_USAGE;
    }
    return 0;
}

/* The "# cuda: ..." line of the header with --buffers cuda, else "". */
static void perf_rank_gpu(const perf_rmacoll_t *p, char *gpu, size_t len)
{
    (void)p;
    gpu[0] = '\0';
#ifdef RMACOLL_PERF_HAVE_CUDA
    if (p->stream != NULL) {
        int rt = 0;

        cudaRuntimeGetVersion(&rt);
        snprintf(gpu, len,
                 "# cuda: runtime %d, %d device(s), rank 0 on device %d "
                 "(device = local rank %% %d)%s\n",
                 rt, p->ndevices, p->device, p->ndevices,
                 getenv("NCCL_NVLS_ENABLE") && !strcmp(getenv("NCCL_NVLS_ENABLE"), "0")
                     ? ", NCCL_NVLS_ENABLE=0" : "");
    }
#endif
}

/* The header lines of the configuration in effect (perfrun prints them). */
static void perf_rank_header(const rmacoll_perf_opts_t *o, const perf_rmacoll_t *p,
                             const rmacoll_config_t *cfg, const char *devpath,
                             int dsig, uint64_t direct_min, char *header,
                             size_t len)
{
    char gpu[256], eager_max[64], node_eager_max[64], direct_str[64];
    char auto_thr[96] = "";

    perf_rank_gpu(p, gpu, sizeof(gpu));
    if (!strcmp(cfg->intra_node, "auto"))
        snprintf(auto_thr, sizeof(auto_thr), " (auto: nvlink_kernel up to "
                 "%llu B per queue, ce above)",
                 (unsigned long long)cfg->nvlink_kernel_threshold);
    snprintf(direct_str, sizeof(direct_str), "%llu B (relay.direct_min_bytes)",
             (unsigned long long)direct_min);
    if (rmacoll_config_get(cfg, "eager_max_bytes", eager_max, sizeof(eager_max)) !=
        RMACOLL_SUCCESS) {
        snprintf(eager_max, sizeof(eager_max), "?");
    }
    if (rmacoll_config_get(cfg, "node_eager_max_bytes", node_eager_max,
                           sizeof(node_eager_max)) != RMACOLL_SUCCESS) {
        snprintf(node_eager_max, sizeof(node_eager_max), "?");
    }
    snprintf(header, len,
             "%s# transports: intra_node %s%s, inter_node %s (built: %s)\n"
             "# device buffers across nodes: %s\n"
             "# signal words of device calls on one node: %s\n"
             "# relay: %s (buffer %llu B, %u slots; direct streams %s%s)\n"
             "# scheduler: %s%s%s (seed %llu)\n"
             "# max_task_bytes %llu, eager_max_bytes %s, node_eager_max_bytes %s, "
             "timeout_ms %llu, config %s\n",
             gpu, cfg->intra_node, auto_thr, cfg->inter_node,
             rmacoll_build_transports(), devpath,
             dsig ? "device memory" : "host control window",
             cfg->relay_enabled ? "on" : "off",
             (unsigned long long)cfg->relay_buffer_bytes, cfg->relay_slots,
             direct_min ? "from " : "off", direct_min ? direct_str : "",
             cfg->scheduler, cfg->scheduler_plugin[0] ? ", plugin " : "",
             cfg->scheduler_plugin, (unsigned long long)cfg->scheduler_seed,
             (unsigned long long)cfg->max_task_bytes, eager_max, node_eager_max,
             (unsigned long long)cfg->timeout_ms,
             o->config_path[0] ? o->config_path
             : getenv("RMACOLL_CONFIG") ? getenv("RMACOLL_CONFIG")
                                        : "defaults + environment");
}

/* The configuration's members of the JSON output. */
static void perf_rank_json(const rmacoll_config_t *cfg, char *json, size_t len)
{
    snprintf(json, len,
             "\"intra_node\": \"%s\", \"inter_node\": \"%s\", "
             "\"relay\": %s, \"relay_buffer_bytes\": %llu, "
             "\"relay_slots\": %u, \"scheduler\": \"%s\", "
             "\"max_task_bytes\": %llu, \"nvlink_kernel_threshold\": %llu",
             cfg->intra_node, cfg->inter_node,
             cfg->relay_enabled ? "true" : "false",
             (unsigned long long)cfg->relay_buffer_bytes, cfg->relay_slots,
             cfg->scheduler, (unsigned long long)cfg->max_task_bytes,
             (unsigned long long)cfg->nvlink_kernel_threshold);
}

/* The communicator's counters at log level debug. */
static void perf_rank_stats(const perf_rmacoll_t *p, const char *devpath)
{
    rmacoll_comm_stats_t cs;

    memset(&cs, 0, sizeof(cs));
    cs.struct_size = sizeof(cs);
    if (rmacoll_comm_get_stats(p->comm, &cs) == RMACOLL_SUCCESS)
        printf("# rank %d stats: device path %s, %llu bytes staged through host "
               "memory, %llu bytes of device memory registered with the network, "
               "%llu staged / %llu registered device calls across nodes\n",
               p->rank, devpath, (unsigned long long)cs.staged_bytes,
               (unsigned long long)cs.device_registered_bytes,
               (unsigned long long)cs.device_calls_staged,
               (unsigned long long)cs.device_calls_hmem);
    if (rmacoll_comm_get_stats(p->comm, &cs) == RMACOLL_SUCCESS)
        printf("# rank %d stats: eager path: %llu bytes sent in metadata records, "
               "%llu bytes copied out of them; node eager path: %llu bytes sent in "
               "the node payload, %llu bytes copied out of node peers'\n", p->rank,
               (unsigned long long)cs.eager_bytes_sent,
               (unsigned long long)cs.eager_bytes_copied,
               (unsigned long long)cs.node_eager_bytes_sent,
               (unsigned long long)cs.node_eager_bytes_copied);
    if (rmacoll_comm_get_stats(p->comm, &cs) == RMACOLL_SUCCESS)
        printf("# rank %d stats: direct streams: relay.direct_min_bytes %llu in effect "
               "(0: none), %llu bytes of streams that went straight to other nodes\n",
               p->rank, (unsigned long long)cs.direct_min_bytes,
               (unsigned long long)cs.direct_bytes_sent);
}

/* Frees what the rank set up and destroys its communicator: rc, or 1 when
 * rc was 0 and the destroy failed. */
static int perf_rank_close(perf_rmacoll_t *p, int rc)
{
    rmacoll_status_t st;

#ifdef RMACOLL_PERF_HAVE_NCCL
    if (p->nccl != NULL) {
        if (p->stream != NULL)
            cudaStreamSynchronize((cudaStream_t)p->stream);
        ncclCommDestroy(p->nccl);
    }
#endif
#ifdef RMACOLL_PERF_HAVE_CUBLAS
    perf_gemm_teardown(p);
#endif
    free(p->counts);
    free(p->bar_send);
    free(p->bar_recv);
    st = rmacoll_comm_destroy(p->comm);
    if (st != RMACOLL_SUCCESS && rc == 0) {
        fprintf(stderr, PERF_NAME ": rank %d: destroy failed: %s\n", p->rank,
                rmacoll_status_name(st));
        rc = 1;
    }
#ifdef RMACOLL_PERF_HAVE_CUDA
    perf_cuda_teardown(p);
#endif
    return rc;
}

/* One rank: devices, configuration, communicator, then perfrun's rows. */
int perf_rank(const rmacoll_perf_opts_t *o,
              const rmacoll_launch_env_t *env)
{
    rmacoll_config_t cfg;
    perf_rmacoll_t p;
    rmacoll_perf_backend_t be;
    char header[4096], json[2048];
    const char *devpath = "none (one node)";
    int rc, dsig = 0, cfg_bad = 0;
    uint64_t direct_min = 0;

    if (o->dry_run)
        return perf_dry_run(env);
    memset(&p, 0, sizeof(p));
    rc = perf_rank_devices(o, env, &p);
    if (rc >= 0)
        return rc;
    rc = perf_rank_config(o, env, &cfg, &cfg_bad);
    if (rc >= 0)
        return rc;
    rc = perf_rank_comm(env, &cfg, cfg_bad, &p);
    if (rc != 0)
        return rc;
    rc = perf_rank_alloc(o, &p);
    if (rc == 0)
        rc = perf_rank_paths(o, &p, &devpath, &dsig, &direct_min);
    if (rc == 0) {
        perf_rank_header(o, &p, &cfg, devpath, dsig, direct_min, header,
                         sizeof(header));
        perf_rank_json(&cfg, json, sizeof(json));
        perf_rank_backend(env, &p, header, json, &be);
        rc = rmacoll_perf_run(o, &be);
        if (cfg.log_level >= RMACOLL_LOG_DEBUG)
            perf_rank_stats(&p, devpath);
    }
    return perf_rank_close(&p, rc);
}
