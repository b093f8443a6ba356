/*
 * env.c - the table of environment variables outside the configuration
 * keys, and the warning about unknown RMACOLL_* variables (see env.h).
 */
#include "core/config/env.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/config/config_internal.h"

extern char **environ;

static const rmacoll__env_var_t env_vars[] = {
    {"RMACOLL_CONFIG", "library", "YAML configuration file read by rmacoll_config_load(NULL)"},
    {"RMACOLL_LOG_FILE", "library",
     "log to this file instead of stderr; %h = host name, %p = pid (as NCCL_DEBUG_FILE)"},
    {"RMACOLL_NODE_ID", "library",
     "node of this process (any text; ranks with equal ids share a node); default: host name"},
    {"RMACOLL_BOOTSTRAP_ADDR", "library",
     "host:port of the TCP rendezvous: rmacoll_get_unique_id listens there; "
     "rmacoll_comm_create_from_env uses it instead of PMIx or MASTER_ADDR"},
    {"RMACOLL_NCCL_LIBRARY", "library",
     "libnccl that rmacoll_comm_create_from_nccl opens (default libnccl.so.2)"},
    {"RMACOLL_PMIX_LIBRARY", "library",
     "libpmix opened under a PMIx launcher (default libpmix.so.2, then the build's PMIx libdir)"},
    {"RMACOLL_OFI_MAX_MSG_SIZE", "library",
     "libfabric transport: largest message posted at once (bytes, with an optional K/M/G or "
     "KiB/MiB/GiB suffix; default: the provider's); anything else fails init naming the variable"},
    {"RMACOLL_CUDA_GRAPH", "library",
     "1: calls on device memory may be captured into CUDA graphs on one node (opt-in, docs/gpu.md)"},
    {"RMACOLL_DEVICE_SIGNALS", "library",
     "0: device calls on one node keep their signal words in the host control window instead of device memory (default 1, docs/gpu.md)"},
    {"RMACOLL_DEVICE_COUNTS_ACROSS_NODES", "library",
     "1: rmacoll_alltoallv_device_counts with a stream runs across nodes, stream-triggered (experimental: run on a GPU in its test only; docs/gpu.md)"},
    {"RMACOLL_DCX_EMULATE_STREAM", "library",
     "1 (tests): the stream steps of device-count calls across nodes run on the calling thread with host memory (test_dcx; docs/gpu.md)"},
    {"RMACOLL_NVL_ONE_LAUNCH", "library",
     "1: the NVLink kernel transport runs a whole small call in one kernel launch (opt-in, docs/gpu.md)"},
    {"RMACOLL_TRACE_STREAM", "library",
     "1: one stderr line per stream operation, IPC import and device-word array of the CUDA transports (diagnostics; scripts/stream_trace_check.py reads them); ring: the same lines into an in-memory ring of the last 2048, printed by rmacoll__cu_ring_dump (test_gpu_threads does when a stream never drains)"},
    {"RMACOLL_LARGEST_FIRST_LOAD", "library",
     "traffic profile (node-to-node byte matrix) read by the largest_first scheduler (docs/sim.md)"},
    {"RMACOLL_SHM_TAG", "library",
     "text (1-24 letters, digits, '_') appended as .TAG to the names of the /dev/shm files rmacoll "
     "creates (control windows, libfabric shm regions); ranks of a node must agree; the test suite "
     "sets one per build so that its /dev/shm check (tests/cmake/devshm_check.cmake) sees only its "
     "own files"},
    {"RMACOLL_LIBRARY", "python", "path of librmacoll.so (or its folder) for the Python package"},
    {"RMACOLL_RANK", "rmacoll-perf", "rank of a process the tool spawned itself"},
    {"RMACOLL_NRANKS", "rmacoll-perf", "ranks the tool spawned"},
    {"RMACOLL_UNIQUE_ID", "rmacoll-perf", "hex unique id handed to spawned ranks"},
    {"RMACOLL_PERF_TEST_EXIT", "rmacoll-perf", "test hook (--dry-run only): R:CODE makes rank R exit with CODE"},
    {"RMACOLL_PERF_TEST_HANG", "rmacoll-perf", "test hook (--dry-run only): rank R sleeps until killed"},
    {"RMACOLL_PERF_TEST_CORRUPT", "rmacoll-perf",
     "test hook: rank R flips the first byte it received before each check (the check must fail)"},
    {"RMACOLL_TEST_*", "tests", "test-suite variables; ignored by the library"},
    {"OMPI_COMM_WORLD_RANK", "library", "rank and size (with OMPI_COMM_WORLD_SIZE) under Open MPI's mpirun"},
    {"PMI_RANK", "library", "rank and size (with PMI_SIZE) under MPICH/Intel MPI"},
    {"RANK", "library", "rank and size (with WORLD_SIZE) under torchrun"},
    {"SLURM_PROCID", "library", "rank and size (with SLURM_NTASKS) under srun; SLURM_JOB_ID salts the id"},
    {"PMIX_RANK", "library",
     "PMIx present (also PMIX_NAMESPACE): the rendezvous id travels by PMIx_Put/Fence/Get"},
    {"MASTER_ADDR", "library",
     "torchrun: rendezvous host; the bootstrap listens on MASTER_PORT + 1; TORCHELASTIC_RUN_ID salts the id"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "rmacoll-perf",
     "local rank for the GPU choice (also MPI_LOCALRANKID, LOCAL_RANK, SLURM_LOCALID)"},
    {"NCCL_NVLS_ENABLE", "rmacoll-perf", "set to 0 before NCCL starts (--baseline nccl) unless already set"},
    {"FI_*", "libfabric", "libfabric's own (FI_PROVIDER, FI_TCP_IFACE, FI_LOG_LEVEL, ...)"},
};

const rmacoll__env_var_t *rmacoll__env_vars(size_t *n)
{
    if (n != NULL) {
        *n = sizeof(env_vars) / sizeof(env_vars[0]);
    }
    return env_vars;
}

/* "relay.slots" -> "RMACOLL_RELAY_SLOTS" */
static void env_key_name(const char *key, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "RMACOLL_");

    for (const char *k = key; *k != '\0' && o + 1 < len; k++) {
        out[o++] = *k == '.' ? '_' : (char)toupper((unsigned char)*k);
    }
    out[o < len ? o : len - 1] = '\0';
}

static int env_match(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);

    if (n > 0 && pattern[n - 1] == '*') {
        return strncmp(pattern, name, n - 1) == 0;
    }
    return strcmp(pattern, name) == 0;
}

int rmacoll__env_known(const char *name)
{
    size_t nkeys = 0;
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&nkeys);
    char buf[96];

    if (name == NULL) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
        if (env_match(env_vars[i].name, name)) {
            return 1;
        }
    }
    for (size_t i = 0; i < nkeys; i++) {
        env_key_name(keys[i].key, buf, sizeof(buf));
        if (strcmp(buf, name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Edit distance of two short names (for "did you mean"). */
static size_t env_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[97];

    if (la > 96 || lb > 96) {
        return (size_t)-1;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t best = prev + (a[i - 1] != b[j - 1]);

            if (row[j] + 1 < best) {
                best = row[j] + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

/* The known name closest to name, into out ("" when none is close). */
static void env_closest(const char *name, char *out, size_t len)
{
    size_t nkeys = 0, best = 4;  /* suggest only within 3 edits */
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&nkeys);
    char buf[96];

    out[0] = '\0';
    for (size_t i = 0; i < nkeys; i++) {
        size_t d;

        env_key_name(keys[i].key, buf, sizeof(buf));
        d = env_distance(name, buf);
        if (d < best) {
            best = d;
            snprintf(out, len, "%s", buf);
        }
    }
    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
        size_t d;

        if (strncmp(env_vars[i].name, "RMACOLL_", 8) != 0 ||
            strchr(env_vars[i].name, '*') != NULL) {
            continue;
        }
        d = env_distance(name, env_vars[i].name);
        if (d < best) {
            best = d;
            snprintf(out, len, "%s", env_vars[i].name);
        }
    }
}

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static int env_checked;
static int env_unknown;

int rmacoll__env_warn_unknown(const rmacoll__logger_t *lg)
{
    int n;

    pthread_mutex_lock(&env_lock);
    if (!env_checked) {
        env_checked = 1;
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            char name[96], near[96];
            size_t len = strcspn(*e, "=");

            if (strncmp(*e, "RMACOLL_", 8) != 0 || len >= sizeof(name)) {
                continue;
            }
            memcpy(name, *e, len);
            name[len] = '\0';
            if (rmacoll__env_known(name)) {
                continue;
            }
            env_unknown++;
            env_closest(name, near, sizeof(near));
            rmacoll__log(lg, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_CONFIG,
                         "unknown environment variable %s ignored%s%s%s (rmacoll-info "
                         "lists every variable rmacoll reads)",
                         name, near[0] ? " (did you mean " : "", near,
                         near[0] ? "?)" : "");
        }
    }
    n = env_unknown;
    pthread_mutex_unlock(&env_lock);
    return n;
}
