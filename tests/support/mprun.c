/* mprun.c - fork-per-rank harness for integration tests (see mprun.h). */
#include "mprun.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The rendezvous root runs as a thread of the process that makes the id.
 * Forking ranks from a process with a live thread can hand them a lock
 * held at fork time (seen under ASan), so a separate child makes the id
 * and hosts the root; the caller stays single-threaded. */
pid_t mprun_root(rmacoll_unique_id_t *id, unsigned timeout_s)
{
    int idpipe[2];
    pid_t root;

    if (pipe(idpipe) != 0) {
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    root = fork();
    if (root == 0) {
        int ok;
        close(idpipe[0]);
        alarm(timeout_s);
        ok = rmacoll_get_unique_id(id) == RMACOLL_SUCCESS;
        if (!ok || write(idpipe[1], id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
            _exit(1);
        }
        close(idpipe[1]);
        for (;;) {
            pause(); /* the caller kills this process when the ranks are done */
        }
    }
    close(idpipe[1]);
    if (root < 0 || read(idpipe[0], id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
        close(idpipe[0]);
        if (root > 0) {
            kill(root, SIGKILL);
            waitpid(root, NULL, 0);
        }
        return -1;
    }
    close(idpipe[0]);
    return root;
}

/* Every thread's stack of a rank process that has not ended in time, on
 * stderr, through gdb where it is installed (CI installs it): a hang then
 * says where it was. MPRUN_NO_STACKS=1 turns it off. */
static void mprun_dump_stacks(pid_t pid)
{
    char cmd[200];
    const char *off = getenv("MPRUN_NO_STACKS");

    if ((off != NULL && off[0] == '1') || access("/usr/bin/gdb", X_OK) != 0) {
        return;
    }
    fprintf(stderr, "mprun: rank process %d has not ended 8 s before its deadline; "
            "its threads' stacks:\n", (int)pid);
    fflush(stderr);
    snprintf(cmd, sizeof(cmd), "timeout -s KILL 60 /usr/bin/gdb -p %d -batch -nx "
             "-ex 'thread apply all bt' </dev/null 1>&2 2>/dev/null", (int)pid);
    if (system(cmd) != 0) {
        fprintf(stderr, "mprun: gdb could not read process %d\n", (int)pid);
    }
}

void mprun_reap(pid_t *pids, int nranks, time_t deadline, int *codes)
{
    int left = nranks, dumped = 0;

    while (left > 0) {
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w > 0) {
            for (int r = 0; r < nranks; r++) {
                if (pids[r] == w) {
                    codes[r] = WIFEXITED(status) ? WEXITSTATUS(status)
                                                 : 128 + WTERMSIG(status);
                    pids[r] = 0;
                    left--;
                }
            }
            continue;
        }
        /* the ranks' alarm fires about 5 s before the deadline: read the
         * stacks of those still running before it does */
        if (!dumped && time(NULL) >= deadline - 8) {
            dumped = 1;
            for (int r = 0; r < nranks; r++) {
                if (pids[r] > 0) {
                    mprun_dump_stacks(pids[r]);
                }
            }
            continue;
        }
        if (time(NULL) > deadline) {
            for (int r = 0; r < nranks; r++) {
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
}

int mprun_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

int (*mprun_rank_setup)(int rank, int nranks);

int mprun_forked(int (*fn)(void), unsigned timeout_s)
{
    pid_t pid;
    int status = 0;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        alarm(timeout_s);
        _exit(fn() & 0xff);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

const rmacoll_config_t *const *mprun_rank_config;
const char *const *mprun_rank_env;
int mprun_root_in_rank0;

/* With mprun_root_in_rank0: rank 0 makes the unique id (so the bootstrap
 * root runs in its process, as in a program with no launcher) and hands
 * it to the others through shared memory. */
typedef struct mprun_shared_id {
    volatile int ready;
    rmacoll_unique_id_t id;
} mprun_shared_id_t;

static int mprun_rank0_id(mprun_shared_id_t *sh, int r, rmacoll_unique_id_t *id)
{
    if (r == 0) {
        if (rmacoll_get_unique_id(&sh->id) != RMACOLL_SUCCESS) {
            return -1;
        }
        __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
    }
    while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) {
        usleep(1000);
    }
    *id = sh->id;
    return 0;
}
pid_t mprun_root_pid;

int mprun(const mprun_opts_t *opts, mprun_fn_t fn, void *arg, int *codes)
{
    rmacoll_unique_id_t id;
    pid_t *pids = calloc((size_t)opts->nranks, sizeof(pid_t));
    pid_t root;
    int failed = 0;
    time_t deadline;
    mprun_shared_id_t *shid = NULL;

    if (pids == NULL) {
        return opts->nranks;
    }
    if (mprun_root_in_rank0) {
        shid = mmap(NULL, sizeof(*shid), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                    -1, 0);
        root = -1;
        if (shid == MAP_FAILED) {
            free(pids);
            return opts->nranks;
        }
        shid->ready = 0;
    } else if ((root = mprun_root(&id, opts->timeout_s + 30)) < 0) {
        free(pids);
        return opts->nranks;
    }
    mprun_root_pid = root;
    for (int r = 0; r < opts->nranks; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            rmacoll_comm_params_t p;
            rmacoll_comm_t *comm = NULL;
            char key[32];
            int rc;
            alarm(opts->timeout_s);
            if (mprun_rank_setup != NULL && mprun_rank_setup(r, opts->nranks) != 0) {
                _exit(MPRUN_CREATE_FAILED);
            }
            if (shid != NULL && mprun_rank0_id(shid, r, &id) != 0) {
                _exit(MPRUN_CREATE_FAILED);
            }
            memset(&p, 0, sizeof(p));
            p.struct_size = sizeof(p);
            p.rank = r;
            p.nranks = opts->nranks;
            p.unique_id = &id;
            p.config = mprun_rank_config != NULL ? mprun_rank_config[r] : opts->config;
            if (mprun_rank_env != NULL && mprun_rank_env[r] != NULL) {
                putenv((char *)mprun_rank_env[r]);
            }
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
    mprun_reap(pids, opts->nranks, deadline, codes);
    if (root > 0) {
        kill(root, SIGKILL);
        waitpid(root, NULL, 0);
    }
    if (shid != NULL) {
        munmap(shid, sizeof(*shid));
    }
    for (int r = 0; r < opts->nranks; r++) {
        if (codes[r] != 0 && r != opts->kill_rank) {
            failed++;
        }
    }
    free(pids);
    return failed;
}
