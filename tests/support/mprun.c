/* mprun.c - fork-per-rank harness for integration tests (see mprun.h). */
#include "mprun.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int mprun(const mprun_opts_t *opts, mprun_fn_t fn, void *arg, int *codes)
{
    rmacoll_unique_id_t id;
    pid_t *pids = calloc((size_t)opts->nranks, sizeof(pid_t));
    int failed = 0, left;
    time_t deadline;

    if (pids == NULL || rmacoll_get_unique_id(&id) != RMACOLL_SUCCESS) {
        free(pids);
        return opts->nranks;
    }
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < opts->nranks; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            rmacoll_comm_params_t p;
            rmacoll_comm_t *comm = NULL;
            char key[32];
            int rc;
            alarm(opts->timeout_s);
            memset(&p, 0, sizeof(p));
            p.struct_size = sizeof(p);
            p.rank = r;
            p.nranks = opts->nranks;
            p.unique_id = &id;
            p.config = opts->config;
            snprintf(key, sizeof(key), "vnode-%d", opts->node_of ? opts->node_of[r] : 0);
            p.node_key = key;
            if (rmacoll_comm_create(&p, &comm) != RMACOLL_SUCCESS) {
                _exit(MPRUN_CREATE_FAILED);
            }
            if (r == opts->kill_rank) {
                _exit(0); /* dies without destroying: peers must time out */
            }
            rc = fn(comm, r, opts->nranks, arg);
            if (rmacoll_comm_destroy(comm) != RMACOLL_SUCCESS && rc == 0) {
                rc = 201;
            }
            fflush(stdout);
            _exit(rc);
        }
        pids[r] = pid;
    }
    deadline = time(NULL) + (time_t)opts->timeout_s + 5;
    left = opts->nranks;
    while (left > 0) {
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w > 0) {
            for (int r = 0; r < opts->nranks; r++) {
                if (pids[r] == w) {
                    codes[r] = WIFEXITED(status) ? WEXITSTATUS(status)
                                                 : 128 + WTERMSIG(status);
                    pids[r] = 0;
                    left--;
                }
            }
            continue;
        }
        if (time(NULL) > deadline) {
            for (int r = 0; r < opts->nranks; r++) {
                if (pids[r] > 0) {
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    codes[r] = 255;
                    left--;
                }
            }
            break;
        }
        usleep(2000);
    }
    for (int r = 0; r < opts->nranks; r++) {
        if (codes[r] != 0 && r != opts->kill_rank) {
            failed++;
        }
    }
    free(pids);
    return failed;
}
