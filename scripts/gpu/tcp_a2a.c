/*
 * tcp_a2a.c - the loopback TCP ceiling of an alltoall (issue 30: what the
 * one kernel TCP stack of a host lets every virtual NIC move at once).
 *
 * NP processes (one per rank, forked), a TCP connection on 127.0.0.1
 * between every two ranks on different virtual nodes (PPN ranks each;
 * PPN 1: every pair, as Open MPI's TCP BTL does), and each iteration every
 * rank writes BYTES to each of those peers and reads BYTES from each, with
 * non-blocking sockets and poll(2): no protocol, no copy but the kernel's.
 * Ranks meet at a barrier (shared memory) before each iteration; the time
 * of an iteration is the slowest rank's. Prints the median time and the
 * TCP bytes per second of the host (all ranks' writes).
 *
 *   cc -O2 -o tcp_a2a scripts/gpu/tcp_a2a.c
 *   ./tcp_a2a NP PPN BYTES_PER_PAIR ITERS
 * Output: "np N ppn P pair_bytes B peers K iters I median_us T host_GBps G"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXNP 64
#define MAXIT 1000

typedef struct {
    atomic_int arrived[MAXIT + 2];
    double us[MAXNP][MAXIT];
} shared_t;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void barrier(shared_t *sh, int k, int np)
{
    atomic_fetch_add(&sh->arrived[k], 1);
    while (atomic_load(&sh->arrived[k]) < np) {
        sched_yield();
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s NP PPN BYTES_PER_PAIR ITERS\n", argv[0]);
        return 2;
    }
    int np = atoi(argv[1]), ppn = atoi(argv[2]), iters = atoi(argv[4]);
    size_t bytes = strtoull(argv[3], NULL, 10);
    if (np < 2 || np > MAXNP || ppn < 1 || np % ppn || iters < 1 || iters > MAXIT ||
        bytes == 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int lfd[MAXNP], port[MAXNP];
    if (sh == MAP_FAILED)
        die("mmap");
    for (int r = 0; r < np; r++) { /* every rank's listener, made before the fork */
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        lfd[r] = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd[r] < 0 || bind(lfd[r], (struct sockaddr *)&a, sizeof(a)) ||
            listen(lfd[r], MAXNP) || getsockname(lfd[r], (struct sockaddr *)&a, &len))
            die("listen");
        port[r] = ntohs(a.sin_port);
    }
    for (int me = 0; me < np; me++) {
        if (fork() != 0)
            continue;
        int fd[MAXNP], npeer = 0;
        for (int j = 0; j < np; j++) {
            fd[j] = -1;
            if (j / ppn == me / ppn)
                continue; /* same virtual node: not over TCP */
            npeer++;
            if (j > me) { /* the lower rank connects, sending its rank */
                struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port[j]),
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                fd[j] = socket(AF_INET, SOCK_STREAM, 0);
                if (fd[j] < 0 || connect(fd[j], (struct sockaddr *)&a, sizeof(a)) ||
                    write(fd[j], &me, sizeof(me)) != sizeof(me))
                    die("connect");
            }
        }
        int lower = 0; /* the lower ranks of other nodes connect to this one */
        for (int j = 0; j < me; j++)
            lower += j / ppn != me / ppn;
        for (int k = 0; k < lower; k++) {
            int who = -1, s = accept(lfd[me], NULL, NULL);
            if (s < 0 || read(s, &who, sizeof(who)) != sizeof(who) || who < 0 || who >= np)
                die("accept");
            fd[who] = s;
        }
        char *sbuf = malloc(bytes), *rbuf = malloc(bytes);
        size_t *sent = calloc(np, sizeof(size_t)), *got = calloc(np, sizeof(size_t));
        struct pollfd *pf = calloc(np, sizeof(*pf));
        int *pr = calloc(np, sizeof(int));
        if (!sbuf || !rbuf || !sent || !got || !pf || !pr)
            die("malloc");
        memset(sbuf, me, bytes);
        for (int j = 0; j < np; j++) {
            if (fd[j] >= 0) {
                int one = 1;
                setsockopt(fd[j], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                fcntl(fd[j], F_SETFL, O_NONBLOCK);
            }
        }
        barrier(sh, 0, np);
        for (int it = 0; it < iters; it++) {
            barrier(sh, it + 1, np);
            double t0 = now_us();
            int left = 2 * npeer;
            memset(sent, 0, np * sizeof(size_t));
            memset(got, 0, np * sizeof(size_t));
            while (left > 0) {
                int n = 0;
                for (int j = 0; j < np; j++) {
                    if (fd[j] < 0 || (sent[j] == bytes && got[j] == bytes))
                        continue;
                    pf[n].fd = fd[j];
                    pf[n].events = (sent[j] < bytes ? POLLOUT : 0) | (got[j] < bytes ? POLLIN : 0);
                    pr[n++] = j;
                }
                if (poll(pf, n, 10000) <= 0)
                    die("poll");
                for (int k = 0; k < n; k++) {
                    int j = pr[k];
                    if ((pf[k].revents & POLLOUT) && sent[j] < bytes) {
                        ssize_t w = write(fd[j], sbuf + sent[j], bytes - sent[j]);
                        if (w < 0 && errno != EAGAIN)
                            die("write");
                        if (w > 0 && (sent[j] += (size_t)w) == bytes)
                            left--;
                    }
                    if ((pf[k].revents & (POLLIN | POLLHUP)) && got[j] < bytes) {
                        ssize_t r = read(fd[j], rbuf + got[j], bytes - got[j]);
                        if (r == 0 || (r < 0 && errno != EAGAIN))
                            die("read");
                        if (r > 0 && (got[j] += (size_t)r) == bytes)
                            left--;
                    }
                }
            }
            sh->us[me][it] = now_us() - t0;
        }
        _exit(0);
    }
    for (int r = 0; r < np; r++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "a rank failed\n");
            return 1;
        }
    }
    double t[MAXIT];
    int npeer = 0;
    for (int j = 0; j < np; j++)
        npeer += j / ppn != 0;
    for (int it = 0; it < iters; it++) {
        t[it] = 0;
        for (int r = 0; r < np; r++)
            t[it] = sh->us[r][it] > t[it] ? sh->us[r][it] : t[it];
    }
    qsort(t, iters, sizeof(double), cmp);
    double med = t[iters / 2];
    printf("np %d ppn %d pair_bytes %zu peers %d iters %d median_us %.1f host_GBps %.2f\n", np,
           ppn, bytes, npeer, iters, med, (double)np * npeer * bytes / med / 1e3);
    return 0;
}
