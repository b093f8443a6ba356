/*
 * launch.h - process launcher of the benchmark tools.
 *
 * Two ways a tool process learns who it is:
 *  - spawned by the tool itself (rmacoll-perf -np 4 --ppn 2): the parent
 *    makes a unique id and fork+execs one copy of the tool per rank, with
 *    RMACOLL_RANK, RMACOLL_NRANKS, RMACOLL_NODE_ID (virtual node) and
 *    RMACOLL_UNIQUE_ID (hex of the id bytes) in the environment;
 *  - started by an external launcher: mpirun (OMPI_COMM_WORLD_RANK/SIZE),
 *    MPICH (PMI_RANK/SIZE), torchrun (RANK/WORLD_SIZE) or srun
 *    (SLURM_PROCID/NTASKS); the tool
 *    then spawns nothing and lets rmacoll_comm_create_from_env bootstrap.
 *
 * The spawner waits for every child with a deadline. When one fails, the
 * others get a short linger to exit by themselves (a rank reporting wrong
 * data should not get its peers killed inside their collective destroy),
 * then they are stopped (SIGTERM, then SIGKILL after a grace period); so
 * are all of them when the deadline passes. It reports which rank failed
 * and how. It allocates the children's environments before fork, so the
 * children only call execve
 * (safe even when the parent runs a bootstrap listener thread).
 *
 * Not thread-safe (changes no global state, but waits on child pids).
 */
#ifndef RMACOLL_TOOLS_LAUNCH_H
#define RMACOLL_TOOLS_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#include "rmacoll.h"

/* Environment variables of a spawned rank. */
#define RMACOLL_LAUNCH_ENV_RANK "RMACOLL_RANK"
#define RMACOLL_LAUNCH_ENV_NRANKS "RMACOLL_NRANKS"
#define RMACOLL_LAUNCH_ENV_NODE "RMACOLL_NODE_ID"
#define RMACOLL_LAUNCH_ENV_ID "RMACOLL_UNIQUE_ID"

/* Largest number of ranks the spawner starts on one host. */
#define RMACOLL_LAUNCH_MAX_RANKS 1024

typedef enum rmacoll_launch_kind {
    RMACOLL_LAUNCH_NONE = 0,  /* no variables: this process is the parent */
    RMACOLL_LAUNCH_SPAWNED,   /* child of the tool's own spawner */
    RMACOLL_LAUNCH_MPI,       /* OMPI_COMM_WORLD_RANK / _SIZE */
    RMACOLL_LAUNCH_PMI,       /* PMI_RANK / PMI_SIZE (MPICH, Intel MPI) */
    RMACOLL_LAUNCH_TORCHRUN,  /* RANK / WORLD_SIZE */
    RMACOLL_LAUNCH_SLURM      /* SLURM_PROCID / SLURM_NTASKS */
} rmacoll_launch_kind_t;

typedef struct rmacoll_launch_env {
    rmacoll_launch_kind_t kind;
    int rank;        /* -1 when kind is NONE */
    int nranks;      /* 0 when kind is NONE */
    int node;        /* RMACOLL_NODE_ID of a spawned rank, else -1 */
    const char *id_hex; /* RMACOLL_UNIQUE_ID of a spawned rank, else NULL */
} rmacoll_launch_env_t;

/**
 * Reads the launcher variables, first match wins (the order of
 * rmacoll_comm_create_from_env): RMACOLL_RANK (spawned by the tool),
 * OMPI_COMM_WORLD_RANK, PMI_RANK, RANK, SLURM_PROCID (last: sbatch
 * exports it to every launcher). The matching size variable must be
 * present too.
 * Errors: RMACOLL_ERR_INVALID_ARG when a variable is present but not a
 * number, or the rank is outside [0, nranks), or the size is missing;
 * errbuf (may be NULL) says which.
 */
rmacoll_status_t rmacoll_launch_detect(rmacoll_launch_env_t *env,
                                       char *errbuf, size_t errbuf_len);

/**
 * Rank among the ranks of this host, and how many share it, for picking a
 * GPU (device = local_rank % device count). Spawned ranks all run on this
 * host (virtual nodes included): local_rank = rank, local_size = nranks.
 * Otherwise the launcher's variables: OMPI_COMM_WORLD_LOCAL_RANK/_SIZE,
 * MPI_LOCALRANKID/MPI_LOCALNRANKS (MPICH), LOCAL_RANK/LOCAL_WORLD_SIZE
 * (torchrun), SLURM_LOCALID/SLURM_NTASKS_PER_NODE; when none is set,
 * local_rank = rank and local_size = 0 (unknown).
 */
void rmacoll_launch_local(const rmacoll_launch_env_t *env, int *local_rank,
                          int *local_size);

/** Name of a launch kind ("spawned", "mpirun", ...); never NULL. */
const char *rmacoll_launch_kind_name(rmacoll_launch_kind_t kind);

/**
 * Parses a topology "3,2" (ranks per node, in rank order) into
 * sizes[max_nodes]; *nnodes and *nranks receive the counts.
 * Errors: RMACOLL_ERR_INVALID_ARG (empty, non-numeric or zero entry,
 * more than max_nodes nodes or RMACOLL_LAUNCH_MAX_RANKS ranks).
 */
rmacoll_status_t rmacoll_launch_parse_topology(const char *spec, int *sizes,
                                               int max_nodes, int *nnodes,
                                               int *nranks);

/**
 * Even topology: np ranks, ppn per node (the last node may be smaller),
 * node = rank / ppn. Same outputs and errors as parse_topology (ppn < 1
 * or np < 1 is invalid).
 */
rmacoll_status_t rmacoll_launch_even_topology(int np, int ppn, int *sizes,
                                              int max_nodes, int *nnodes,
                                              int *nranks);

typedef struct rmacoll_launch_spec {
    int nranks;              /* children to start, 1..RMACOLL_LAUNCH_MAX_RANKS */
    const int *node_of_rank; /* [nranks] virtual node id of each rank */
    const char *exe;         /* program to exec; NULL = /proc/self/exe */
    char *const *argv;       /* its argv (argv[0] included), NULL-terminated */
    const char *id_hex;      /* RMACOLL_UNIQUE_ID value; NULL = not set */
    double timeout_s;        /* deadline for all children; <= 0 = none */
    double grace_s;          /* SIGTERM -> SIGKILL delay; <= 0 = 2 s */
    double linger_s;         /* after a failure, time the others get to
                              * exit by themselves; <= 0 = 1 s */
    int *rank_codes;         /* NULL, or [nranks]: each rank's own exit code
                              * (128 + signal when a signal of its own ended
                              * it), -1 for a rank the launcher stopped or
                              * never started */
} rmacoll_launch_spec_t;

typedef struct rmacoll_launch_result {
    int nfailed;        /* children that exited non-zero or by a signal of
                         * their own (not those the launcher stopped) */
    int first_rank;     /* first rank reaped failing, -1 if none (ranks that
                         * fail within milliseconds of each other are
                         * reaped in rank order: not necessarily the cause) */
    int first_status;   /* its exit code, or 128 + signal */
    int signal_rank;    /* first rank killed by a signal not from the
                         * launcher (a crash, kill -9), -1 if none */
    int signal_num;     /* that signal */
    int timed_out;      /* 1 if the deadline passed */
    int killed;         /* children the launcher had to kill */
} rmacoll_launch_result_t;

/**
 * Starts spec->nranks children and waits for all of them.
 * Errors: RMACOLL_ERR_INVALID_ARG (bad spec), RMACOLL_ERR_NO_MEMORY,
 * RMACOLL_ERR_INTERNAL (fork failed: the children already started are
 * killed), RMACOLL_ERR_TIMEOUT (deadline passed; the rest were killed),
 * RMACOLL_ERR_PEER (a child failed; the rest were killed). res (may be
 * NULL) is filled in every case once children were started. Messages go
 * to stderr, one line each, naming the rank and the cause.
 */
rmacoll_status_t rmacoll_launch_spawn(const rmacoll_launch_spec_t *spec,
                                      rmacoll_launch_result_t *res);

#endif /* RMACOLL_TOOLS_LAUNCH_H */
