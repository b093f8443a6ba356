/*
 * copy_floor.c - what one copy costs between processes of one host, the
 * floor under a one-node AlltoAllV: NP processes, each writing SIZE bytes
 * into the next one's buffer per round, no synchronisation inside the
 * timed loop, slowest process's time per round.
 *
 *   cc -O2 -o /tmp/copy_floor scripts/bench/copy_floor.c
 *   /tmp/copy_floor NP SIZE ROUNDS MODE
 *
 * MODE 0: memcpy within the process (the lower bound: no second process);
 * 1: process_vm_writev(2) into the next process (cross-memory attach, what
 * the ce transport does for ordinary buffers); 2: memcpy into the next
 * process's memfd, mapped here through pidfd_getfd(2) (what it does for
 * rmacoll_mem_alloc memory). docs/transport-ce.md quotes its figures.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXP 64

typedef struct shared {
    char *dst[MAXP];
    pid_t pid[MAXP];
    int fd[MAXP];
    volatile int ready;
    double us[MAXP];
} shared_t;

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void meet(shared_t *sh, int n)
{
    __sync_fetch_and_add(&sh->ready, 1);
    while (sh->ready < n)
        sched_yield();
}

static int copy(int mode, char *src, char *own, char *peer_map, pid_t pid, char *peer_dst,
                size_t size)
{
    if (mode == 1) {
        struct iovec l = {src, size}, r = {peer_dst, size};

        return process_vm_writev(pid, &l, 1, &r, 1, 0) == (ssize_t)size ? 0 : -1;
    }
    memcpy(mode == 2 ? peer_map : own, src, size);
    return 0;
}

int main(int argc, char **argv)
{
    shared_t *sh;
    int np, rounds, mode;
    size_t size;
    double worst = 0;

    if (argc != 5 || (np = atoi(argv[1])) < 2 || np > MAXP ||
        (size = strtoull(argv[2], NULL, 0)) == 0 || (rounds = atoi(argv[3])) < 1 ||
        (mode = atoi(argv[4])) < 0 || mode > 2) {
        fprintf(stderr, "usage: %s NP(2..64) SIZE ROUNDS MODE(0 memcpy, 1 cma, 2 shared)\n",
                argv[0]);
        return 2;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    for (int r = 0; r < np; r++) {
        if (fork() == 0) {
            int peer = (r + 1) % np, fd = memfd_create("copy_floor", 0);
            char *src = malloc(size), *dst, *map = NULL;
            double t0;

            if (fd < 0 || src == NULL || ftruncate(fd, (off_t)size) != 0)
                _exit(1);
            dst = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (dst == MAP_FAILED)
                _exit(1);
            memset(src, r + 1, size);
            memset(dst, 0, size);
            sh->dst[r] = dst;
            sh->pid[r] = getpid();
            sh->fd[r] = fd;
            meet(sh, np);
            if (mode == 2) {
                int pfd = (int)syscall(SYS_pidfd_open, sh->pid[peer], 0);
                int lfd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, sh->fd[peer], 0);

                if (lfd < 0) {
                    perror("pidfd_getfd");
                    _exit(1);
                }
                map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
                if (map == MAP_FAILED)
                    _exit(1);
            }
            for (int w = 0; w < rounds / 10 + 1; w++) /* warm-up: fault everything in */
                if (copy(mode, src, dst, map, sh->pid[peer], sh->dst[peer], size) != 0)
                    _exit(1);
            meet(sh, 2 * np);
            t0 = now();
            for (int i = 0; i < rounds; i++)
                if (copy(mode, src, dst, map, sh->pid[peer], sh->dst[peer], size) != 0)
                    _exit(1);
            sh->us[r] = (now() - t0) / rounds * 1e6;
            meet(sh, 3 * np); /* nobody exits while a peer still writes into it */
            _exit(0);
        }
    }
    for (int r = 0; r < np; r++) {
        int st;

        wait(&st);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "a process failed\n");
            return 1;
        }
    }
    for (int r = 0; r < np; r++)
        worst = sh->us[r] > worst ? sh->us[r] : worst;
    printf("np %d size %zu %s: %.1f us per round (slowest process)\n", np, size,
           mode == 0 ? "memcpy (own)" : mode == 1 ? "process_vm_writev" : "memcpy (peer's memfd)",
           worst);
    return 0;
}
