/*
 * launch.c - process launcher of the benchmark tools: launcher variable
 * detection, topology strings, and fork+exec of N local
 * ranks with a deadline (see launch.h).
 */
#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int launch_parse_int(const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    long v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static rmacoll_status_t launch_from_vars(rmacoll_launch_env_t *env,
                                         rmacoll_launch_kind_t kind,
                                         const char *rank_var,
                                         const char *size_var, char *errbuf,
                                         size_t errbuf_len)
{
    const char *r = getenv(rank_var);
    const char *n = getenv(size_var);

    if (n == NULL) {
        if (errbuf != NULL)
            snprintf(errbuf, errbuf_len, "%s is set but %s is not", rank_var,
                     size_var);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (launch_parse_int(n, 1, INT_MAX, &env->nranks) != 0 ||
        launch_parse_int(r, 0, env->nranks - 1, &env->rank) != 0) {
        if (errbuf != NULL)
            snprintf(errbuf, errbuf_len, "bad launcher variables %s=%s %s=%s",
                     rank_var, r, size_var, n);
        return RMACOLL_ERR_INVALID_ARG;
    }
    env->kind = kind;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_launch_detect(rmacoll_launch_env_t *env,
                                       char *errbuf, size_t errbuf_len)
{
    rmacoll_status_t st;
    const char *node;

    env->kind = RMACOLL_LAUNCH_NONE;
    env->rank = -1;
    env->nranks = 0;
    env->node = -1;
    env->id_hex = NULL;
    if (errbuf != NULL && errbuf_len > 0)
        errbuf[0] = '\0';

    if (getenv(RMACOLL_LAUNCH_ENV_RANK) != NULL) {
        st = launch_from_vars(env, RMACOLL_LAUNCH_SPAWNED,
                              RMACOLL_LAUNCH_ENV_RANK,
                              RMACOLL_LAUNCH_ENV_NRANKS, errbuf, errbuf_len);
        if (st != RMACOLL_SUCCESS)
            return st;
        node = getenv(RMACOLL_LAUNCH_ENV_NODE);
        if (node != NULL && launch_parse_int(node, 0, INT_MAX, &env->node))
            env->node = -1;
        env->id_hex = getenv(RMACOLL_LAUNCH_ENV_ID);
        return RMACOLL_SUCCESS;
    }
    if (getenv("OMPI_COMM_WORLD_RANK") != NULL)
        return launch_from_vars(env, RMACOLL_LAUNCH_MPI,
                                "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                errbuf, errbuf_len);
    if (getenv("PMI_RANK") != NULL)
        return launch_from_vars(env, RMACOLL_LAUNCH_PMI, "PMI_RANK",
                                "PMI_SIZE", errbuf, errbuf_len);
    if (getenv("RANK") != NULL)
        return launch_from_vars(env, RMACOLL_LAUNCH_TORCHRUN, "RANK",
                                "WORLD_SIZE", errbuf, errbuf_len);
    /* Last: an sbatch script exports SLURM_PROCID to everything it runs. */
    if (getenv("SLURM_PROCID") != NULL)
        return launch_from_vars(env, RMACOLL_LAUNCH_SLURM, "SLURM_PROCID",
                                "SLURM_NTASKS", errbuf, errbuf_len);
    return RMACOLL_SUCCESS;
}

void rmacoll_launch_local(const rmacoll_launch_env_t *env, int *local_rank,
                          int *local_size)
{
    static const char *const vars[][2] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
        {"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
        {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    };

    *local_rank = env->rank < 0 ? 0 : env->rank;
    *local_size = 0;
    if (env->kind == RMACOLL_LAUNCH_SPAWNED) {
        *local_size = env->nranks;
        return;
    }
    for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++) {
        int lr, ls;

        if (launch_parse_int(getenv(vars[k][0]), 0, INT_MAX, &lr) != 0)
            continue;
        *local_rank = lr;
        /* SLURM_NTASKS_PER_NODE may read "2(x3)": the leading number. */
        if (getenv(vars[k][1]) != NULL &&
            sscanf(getenv(vars[k][1]), "%d", &ls) == 1 && ls > lr)
            *local_size = ls;
        return;
    }
}

const char *rmacoll_launch_kind_name(rmacoll_launch_kind_t kind)
{
    switch (kind) {
    case RMACOLL_LAUNCH_NONE: return "none";
    case RMACOLL_LAUNCH_SPAWNED: return "spawned";
    case RMACOLL_LAUNCH_MPI: return "mpirun";
    case RMACOLL_LAUNCH_PMI: return "pmi";
    case RMACOLL_LAUNCH_SLURM: return "srun";
    case RMACOLL_LAUNCH_TORCHRUN: return "torchrun";
    }
    return "unknown";
}

rmacoll_status_t rmacoll_launch_parse_topology(const char *spec, int *sizes,
                                               int max_nodes, int *nnodes,
                                               int *nranks)
{
    const char *p = spec;
    int n = 0, total = 0;

    if (spec == NULL || *spec == '\0' || max_nodes < 1)
        return RMACOLL_ERR_INVALID_ARG;
    while (*p != '\0') {
        char *end = NULL;
        long v;

        errno = 0;
        v = strtol(p, &end, 10);
        if (errno != 0 || end == p || v < 1 ||
            v > RMACOLL_LAUNCH_MAX_RANKS || n >= max_nodes)
            return RMACOLL_ERR_INVALID_ARG;
        sizes[n++] = (int)v;
        total += (int)v;
        if (total > RMACOLL_LAUNCH_MAX_RANKS)
            return RMACOLL_ERR_INVALID_ARG;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return RMACOLL_ERR_INVALID_ARG;
        p = end;
    }
    *nnodes = n;
    *nranks = total;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_launch_even_topology(int np, int ppn, int *sizes,
                                              int max_nodes, int *nnodes,
                                              int *nranks)
{
    int n = 0, left = np;

    if (np < 1 || ppn < 1 || np > RMACOLL_LAUNCH_MAX_RANKS)
        return RMACOLL_ERR_INVALID_ARG;
    while (left > 0) {
        if (n >= max_nodes)
            return RMACOLL_ERR_INVALID_ARG;
        sizes[n++] = left < ppn ? left : ppn;
        left -= ppn;
    }
    *nnodes = n;
    *nranks = np;
    return RMACOLL_SUCCESS;
}

/* ---- spawner ---- */

static double launch_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void launch_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int launch_is_ours(const char *entry)
{
    static const char *const ours[] = {
        RMACOLL_LAUNCH_ENV_RANK "=", RMACOLL_LAUNCH_ENV_NRANKS "=",
        RMACOLL_LAUNCH_ENV_NODE "=", RMACOLL_LAUNCH_ENV_ID "="};

    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
        if (strncmp(entry, ours[i], strlen(ours[i])) == 0)
            return 1;
    return 0;
}

/* One child's environment: the parent's, minus our variables, plus them
 * set for this rank. Strings live in `strs` (4 entries of 64 bytes plus
 * the id), freed by the caller with the array. */
static char **launch_child_env(const rmacoll_launch_spec_t *spec, int rank,
                               char *strs, size_t strs_len)
{
    size_t n = 0, k = 0;
    char **envp;

    while (environ != NULL && environ[n] != NULL)
        n++;
    envp = calloc(n + 5, sizeof(*envp));
    if (envp == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!launch_is_ours(environ[i]))
            envp[k++] = environ[i];
    snprintf(strs, 64, RMACOLL_LAUNCH_ENV_RANK "=%d", rank);
    snprintf(strs + 64, 64, RMACOLL_LAUNCH_ENV_NRANKS "=%d", spec->nranks);
    snprintf(strs + 128, 64, RMACOLL_LAUNCH_ENV_NODE "=%d",
             spec->node_of_rank[rank]);
    envp[k++] = strs;
    envp[k++] = strs + 64;
    envp[k++] = strs + 128;
    if (spec->id_hex != NULL) {
        snprintf(strs + 192, strs_len - 192, RMACOLL_LAUNCH_ENV_ID "=%s",
                 spec->id_hex);
        envp[k++] = strs + 192;
    }
    envp[k] = NULL;
    return envp;
}

static void launch_describe(int rank, int wstatus, int *code)
{
    if (WIFEXITED(wstatus)) {
        *code = WEXITSTATUS(wstatus);
        if (*code != 0)
            fprintf(stderr, "launch: rank %d exited with status %d\n", rank,
                    *code);
    } else if (WIFSIGNALED(wstatus)) {
        *code = 128 + WTERMSIG(wstatus);
        fprintf(stderr, "launch: rank %d killed by signal %d (%s)\n", rank,
                WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    } else {
        *code = 1;
    }
}

/* Sends sig to every child still running. */
static int launch_signal_all(const pid_t *pids, const int *done, int n,
                             int sig)
{
    int count = 0;

    for (int i = 0; i < n; i++) {
        if (!done[i] && pids[i] > 0 && kill(pids[i], sig) == 0)
            count++;
    }
    return count;
}

/* Reaps what has exited; returns the number still running. */
static int launch_reap(const pid_t *pids, int *done, int n,
                       rmacoll_launch_result_t *res, int quiet, int *codes)
{
    int running = 0;

    for (int i = 0; i < n; i++) {
        int wstatus = 0, code = 0;
        pid_t p;

        if (done[i])
            continue;
        p = waitpid(pids[i], &wstatus, WNOHANG);
        if (p == 0 || (p < 0 && errno == EINTR)) {
            running++;
            continue;
        }
        done[i] = 1;
        if (p < 0) {
            code = 1;
            fprintf(stderr, "launch: waitpid of rank %d failed: %s\n", i,
                    strerror(errno));
        } else if (quiet) {
            continue; /* stopped by the launcher: counted in killed */
        } else {
            launch_describe(i, wstatus, &code);
            if (WIFSIGNALED(wstatus) && res->signal_rank < 0) {
                res->signal_rank = i;
                res->signal_num = WTERMSIG(wstatus);
            }
        }
        if (codes != NULL) {
            codes[i] = code;
        }
        if (code != 0) {
            res->nfailed++;
            if (res->first_rank < 0) {
                res->first_rank = i;
                res->first_status = code;
            }
        }
    }
    return running;
}

/* Stops the children still running: SIGTERM, then SIGKILL after grace. */
static void launch_stop(const pid_t *pids, int *done, int n, double grace_s,
                        rmacoll_launch_result_t *res)
{
    double until;

    res->killed += launch_signal_all(pids, done, n, SIGTERM);
    until = launch_now() + grace_s;
    while (launch_reap(pids, done, n, res, 1, NULL) > 0) {
        if (launch_now() >= until) {
            launch_signal_all(pids, done, n, SIGKILL);
            /* SIGKILL cannot be ignored: these waits return. */
            for (int i = 0; i < n; i++) {
                if (!done[i]) {
                    while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                        ;
                    done[i] = 1;
                }
            }
            break;
        }
        launch_sleep_ms(10);
    }
}

rmacoll_status_t rmacoll_launch_spawn(const rmacoll_launch_spec_t *spec,
                                      rmacoll_launch_result_t *res)
{
    rmacoll_launch_result_t local;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    const char *exe;
    size_t strs_len;
    pid_t *pids = NULL;
    int *done = NULL;
    char **envp = NULL, *strs = NULL;
    double deadline, grace, linger, fail_at = 0;
    int n, started = 0;
    pid_t self;

    if (res == NULL)
        res = &local;
    memset(res, 0, sizeof(*res));
    res->first_rank = -1;
    res->signal_rank = -1;
    if (spec == NULL || spec->argv == NULL || spec->argv[0] == NULL ||
        spec->node_of_rank == NULL || spec->nranks < 1 ||
        spec->nranks > RMACOLL_LAUNCH_MAX_RANKS)
        return RMACOLL_ERR_INVALID_ARG;
    n = spec->nranks;
    exe = spec->exe != NULL ? spec->exe : "/proc/self/exe";
    grace = spec->grace_s > 0 ? spec->grace_s : 2.0;
    linger = spec->linger_s > 0 ? spec->linger_s : 1.0;
    strs_len = 192 + sizeof(RMACOLL_LAUNCH_ENV_ID) + 1 +
               (spec->id_hex != NULL ? strlen(spec->id_hex) : 0) + 1;

    pids = calloc((size_t)n, sizeof(*pids));
    done = calloc((size_t)n, sizeof(*done));
    strs = malloc(strs_len);
    if (pids == NULL || done == NULL || strs == NULL) {
        st = RMACOLL_ERR_NO_MEMORY;
        goto out;
    }
    for (int r = 0; spec->rank_codes != NULL && r < n; r++)
        spec->rank_codes[r] = -1; /* until reaped: stopped or never started */
    self = getpid();
    fflush(NULL); /* no duplicated stdio buffers in the children */
    for (int r = 0; r < n; r++) {
        envp = launch_child_env(spec, r, strs, strs_len);
        if (envp == NULL) {
            st = RMACOLL_ERR_NO_MEMORY;
            break;
        }
        pids[r] = fork();
        if (pids[r] == 0) {
            /* die with the launcher (a killed launcher cannot stop its
             * ranks): the signal survives execve; the getppid() check
             * closes the window in which the launcher died before prctl */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != self)
                _exit(126);
            execve(exe, spec->argv, envp);
            /* write(2) only: this process may share locks with threads it
             * no longer has. */
            {
                static const char msg[] = "launch: execve failed\n";
                ssize_t w = write(2, msg, sizeof(msg) - 1);
                (void)w;
            }
            _exit(127);
        }
        free(envp);
        envp = NULL;
        if (pids[r] < 0) {
            fprintf(stderr, "launch: fork of rank %d failed: %s\n", r,
                    strerror(errno));
            st = RMACOLL_ERR_INTERNAL;
            break;
        }
        started++;
    }
    if (st != RMACOLL_SUCCESS) {
        for (int r = started; r < n; r++)
            done[r] = 1;
        launch_stop(pids, done, n, grace, res);
        goto out;
    }

    deadline = spec->timeout_s > 0 ? launch_now() + spec->timeout_s : 0;
    for (;;) {
        int running = launch_reap(pids, done, n, res, 0, spec->rank_codes);

        if (res->nfailed > 0 && fail_at == 0)
            fail_at = launch_now();
        if (res->nfailed > 0 && running > 0 &&
            launch_now() - fail_at >= linger) {
            fprintf(stderr,
                    "launch: rank %d failed; stopping %d other rank(s)\n",
                    res->first_rank, running);
            launch_stop(pids, done, n, grace, res);
            running = 0;
        }
        if (running == 0) {
            if (res->nfailed > 0)
                st = RMACOLL_ERR_PEER;
            break;
        }
        if (deadline > 0 && launch_now() >= deadline) {
            fprintf(stderr,
                    "launch: deadline of %.0f s passed with %d rank(s) "
                    "running; killing them\n",
                    spec->timeout_s, running);
            res->timed_out = 1;
            launch_stop(pids, done, n, grace, res);
            st = RMACOLL_ERR_TIMEOUT;
            break;
        }
        launch_sleep_ms(5);
    }
out:
    free(envp);
    free(strs);
    free(done);
    free(pids);
    return st;
}
