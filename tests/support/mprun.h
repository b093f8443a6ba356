/*
 * mprun.h - multi-process test harness: forks one process per rank, gives
 * each a communicator made through the built-in bootstrap (unique id made
 * by the parent), with virtual nodes from a node map, runs a body, and
 * collects every rank's result. Bounded: children run under alarm(), the
 * parent kills stragglers after a deadline.
 */
#ifndef RMACOLL_TESTS_MPRUN_H
#define RMACOLL_TESTS_MPRUN_H

#include <sys/types.h>
#include <time.h>

#include "rmacoll.h"

/* Body run by every rank; its return value (0..255) is the rank's exit code. */
typedef int (*mprun_fn_t)(rmacoll_comm_t *comm, int rank, int nranks, void *arg);

typedef struct mprun_opts {
    int nranks;
    const int *node_of;            /* [nranks] virtual node of every rank */
    const rmacoll_config_t *config; /* NULL: defaults + environment */
    unsigned timeout_s;            /* whole run, per child (alarm) */
    int kill_rank;                 /* >= 0: this rank exits right after create */
} mprun_opts_t;

/**
 * Makes a unique id in a forked child that then hosts the bootstrap root
 * (so the caller, which forks ranks, never has a live thread); returns the
 * child's pid (kill it with SIGKILL and reap it when the ranks are done),
 * or -1. The child gives up after timeout_s seconds.
 */
pid_t mprun_root(rmacoll_unique_id_t *id, unsigned timeout_s);

/* When set (by a test, before mprun), rank r creates its communicator
 * with mprun_rank_config[r] instead of opts->config: a configuration that
 * differs between ranks. */
extern const rmacoll_config_t *const *mprun_rank_config;

/* When non-zero, rank 0 makes the unique id, so that the bootstrap root
 * runs in rank 0's process (a program without a launcher); else a root
 * process of its own does (mprun_root). */
extern int mprun_root_in_rank0;

/* When set, rank r puts mprun_rank_env[r] ("KEY=VALUE", or NULL for
 * nothing) into its environment before creating its communicator; with a
 * NULL mprun_rank_config[r] the library then loads that environment
 * (rmacoll_comm_params_t.config = NULL). */
extern const char *const *mprun_rank_env;

/* When set, rank r calls mprun_rank_setup(r, nranks) in its process
 * right after the fork, before creating its communicator: a GPU test picks
 * the rank's device there (the communicator's GPU transports take the
 * device current at create). Non-zero ends the rank with
 * MPRUN_CREATE_FAILED. */
extern int (*mprun_rank_setup)(int rank, int nranks);

/**
 * Runs fn in a forked child (bounded by alarm(timeout_s)) and returns what
 * it returned (0..255), or -1 when the child did not exit normally: a GPU
 * probe, say, so that the caller, which forks ranks later, never starts
 * CUDA itself.
 */
int mprun_forked(int (*fn)(void), unsigned timeout_s);

/* Entries of a directory other than . and .. (/proc/self/task: this
 * process's threads; /proc/self/fd: its descriptors, the one that lists
 * them included), or -1 when it cannot be read. */
int mprun_count_entries(const char *dir);

/* The process hosting the bootstrap root of the current mprun (set before
 * the ranks are forked: a rank may kill it to test a lost root). */
extern pid_t mprun_root_pid;

/**
 * Waits for the nranks children pids[] (a reaped one's entry becomes 0):
 * codes[r] gets its exit code, or 128 + signal number; at deadline the
 * ones left are killed (SIGKILL) and get 255. 8 s before the deadline
 * (before the ranks' own alarm, about 5 s before it), the stacks of every
 * rank still running go to stderr (gdb, when /usr/bin/gdb exists;
 * MPRUN_NO_STACKS=1 turns it off).
 */
void mprun_reap(pid_t *pids, int nranks, time_t deadline, int *codes);

/* Exit code of a child that could not create its communicator. */
#define MPRUN_CREATE_FAILED 200

/**
 * Runs fn on every rank; codes[nranks] receives each exit code (or 128 +
 * signal number, or 255 after the parent's deadline). Returns the number
 * of ranks with a non-zero code, not counting kill_rank.
 */
int mprun(const mprun_opts_t *opts, mprun_fn_t fn, void *arg, int *codes);

#endif
