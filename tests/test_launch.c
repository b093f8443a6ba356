/*
 * test_launch.c - rmacoll-perf's launcher and its ranks: when the
 * launcher dies (SIGKILL, no chance to clean up), every rank it spawned
 * dies with it instead of running on as an orphan.
 *
 * The test process makes itself a child subreaper (PR_SET_CHILD_SUBREAPER)
 * so the orphaned ranks are re-parented to it and can be counted and
 * reaped; every wait is bounded, and stragglers are killed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define NRANKS 4

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Children of `parent` found in /proc, up to max; returns their count. */
static int children_of(pid_t parent, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL && n < max) {
        char path[288], buf[512];
        FILE *f;
        long ppid = -1;

        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        if (fgets(buf, sizeof(buf), f) != NULL) {
            /* pid (comm) state ppid ...: comm may hold spaces, skip to ')' */
            char *p = strrchr(buf, ')');
            if (p != NULL) {
                sscanf(p + 1, " %*c %ld", &ppid);
            }
        }
        fclose(f);
        if (ppid == (long)parent) {
            out[n++] = (pid_t)atol(e->d_name);
        }
    }
    closedir(d);
    return n;
}

/* Forks rmacoll-perf -np 4 --ppn 2 at `size` per rank, calls enough to
 * outlast the test, its launcher deadline `timeout` seconds; stdout to
 * /dev/null, stderr to errfd (-1: inherited). Returns the launcher's pid. */
static pid_t spawn_perf(const char *size, const char *timeout, int errfd)
{
    pid_t launcher = fork();

    assert_true(launcher >= 0);
    if (launcher == 0) {
        char *argv[] = {RMACOLL_BUILD_DIR "/tools/rmacoll-perf", "-np", "4", "--ppn", "2",
                        "-b", (char *)size, "-e", (char *)size, "-n", "100000000", "-w", "0",
                        "--timeout", (char *)timeout, "-q", NULL};
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
        }
        if (errfd >= 0) {
            dup2(errfd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    return launcher;
}

static void test_ranks_die_with_launcher(void **state)
{
    pid_t ranks[64];
    pid_t launcher;
    int nranks = 0, reaped = 0, status;
    double t0;

    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    launcher = spawn_perf("64K", "300", -1);
    /* wait (bounded) until the launcher has spawned every rank */
    t0 = now_s();
    while (now_s() - t0 < 30 && (nranks = children_of(launcher, ranks, 64)) < NRANKS) {
        usleep(50 * 1000);
    }
    assert_int_equal(nranks, NRANKS);
    usleep(500 * 1000); /* let the ranks reach their calls */

    assert_int_equal(kill(launcher, SIGKILL), 0);
    assert_int_equal(waitpid(launcher, &status, 0), launcher);
    assert_true(WIFSIGNALED(status));

    /* the orphaned ranks are now ours: each must exit promptly */
    t0 = now_s();
    while (reaped < nranks && now_s() - t0 < 10) {
        pid_t w = waitpid(-1, &status, WNOHANG);

        if (w > 0) {
            reaped++;
        } else if (w < 0 && errno == ECHILD) {
            break;
        } else {
            usleep(20 * 1000);
        }
    }
    if (reaped < nranks) {
        for (int r = 0; r < nranks; r++) {
            kill(ranks[r], SIGKILL);
        }
        while (waitpid(-1, NULL, 0) > 0) {
        }
    }
    fprintf(stderr, "%d of %d ranks exited within %.1f s of the launcher's death\n", reaped,
            nranks, now_s() - t0);
    assert_int_equal(reaped, nranks);
}

/* One rank killed with SIGKILL: the others fail (they name it), and the
 * launcher's last line names the rank that died and its signal, counts
 * the ranks that failed on their own and those it stopped, and adds up. */
static void test_dead_rank_named(void **state)
{
    pid_t ranks[64], launcher;
    int nranks = 0, status, fd[2];
    char out[16384];
    size_t len = 0;
    ssize_t k;
    double t0;
    char want[128];

    (void)state;
    assert_int_equal(pipe(fd), 0);
    launcher = spawn_perf("1K", "120", fd[1]);
    close(fd[1]);
    t0 = now_s();
    while (now_s() - t0 < 30 && (nranks = children_of(launcher, ranks, 64)) < NRANKS) {
        usleep(50 * 1000);
    }
    assert_int_equal(nranks, NRANKS);
    usleep(1000 * 1000); /* the ranks are in their calls */
    /* children_of lists /proc in pid order, not rank order: kill the
     * highest pid and find its rank in the launcher's own line */
    pid_t victim = ranks[0];
    for (int r = 1; r < nranks; r++) {
        victim = ranks[r] > victim ? ranks[r] : victim;
    }
    assert_int_equal(kill(victim, SIGKILL), 0);
    while (len < sizeof(out) - 1 && (k = read(fd[0], out + len, sizeof(out) - 1 - len)) > 0) {
        len += (size_t)k; /* until the launcher exits (write end closed) */
    }
    out[len] = '\0';
    close(fd[0]);
    assert_int_equal(waitpid(launcher, &status, 0), launcher);
    fprintf(stderr, "%s", out);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    {
        const char *m = strstr(out, "launch: rank ");
        int rank = -1;
        while (m != NULL && sscanf(m, "launch: rank %d killed by signal 9", &rank) != 1) {
            m = strstr(m + 1, "launch: rank ");
        }
        assert_true(rank >= 0 && rank < NRANKS);
        snprintf(want, sizeof(want), "rank %d died by signal 9 (Killed); 4 of 4 rank(s) failed, "
                 "0 stopped by the launcher", rank);
        if (strstr(out, want) == NULL) {
            /* a rank that outlived the linger was stopped: still adds up */
            snprintf(want, sizeof(want), "rank %d died by signal 9 (Killed); ", rank);
            assert_non_null(strstr(out, want));
            assert_true(strstr(out, "3 of 4 rank(s) failed, 1 stopped") != NULL ||
                        strstr(out, "2 of 4 rank(s) failed, 2 stopped") != NULL ||
                        strstr(out, "1 of 4 rank(s) failed, 3 stopped") != NULL);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_die_with_launcher),
        cmocka_unit_test(test_dead_rank_named),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
