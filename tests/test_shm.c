/*
 * test_shm.c - named shared-memory segments: create/attach across fork
 * with contents visible both ways, attach retrying until the owner
 * creates, attach timeouts (missing, too small), unlink and destroy, name
 * checks, exclusive create, a size /dev/shm cannot hold.
 *
 * Children never call CMocka asserts; they exit with a code the parent
 * asserts, run under alarm(), and are reaped with a bounded wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/base/proc.h"
#include "core/base/shm.h"
#include "transports/common/tproc.h"

#define SEG_BYTES 8192

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A name unique to this process and test. */
static void test_name(int tag, char *name)
{
    rmacoll__shm_name(0x7e57000000000000ull | ((uint64_t)getpid() << 8), tag, name, 64);
}

static int name_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);

    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return 0;
}

/* Bounded reap; kills the child when it overruns. Returns exit code or -1. */
static int reap(pid_t pid, unsigned bound_ms)
{
    uint64_t deadline = now_ms() + bound_ms;
    int status;

    while (now_ms() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* Reads one byte from fd within ms; 0 on success. */
static int wait_token(int fd, unsigned ms)
{
    uint64_t deadline = now_ms() + ms;
    char c;

    while (now_ms() < deadline) {
        ssize_t n = read(fd, &c, 1);
        if (n == 1) {
            return 0;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            return -1;
        }
        sleep_ms(2);
    }
    return -1;
}

static void test_name_format(void **state)
{
    char name[64];

    (void)state;
    rmacoll__shm_name(0x0123456789abcdefull, 7, name, sizeof(name));
    assert_string_equal(name, "/rmacoll-0123456789abcdef-7");
    rmacoll__shm_name(0, 1023, name, sizeof(name));
    assert_string_equal(name, "/rmacoll-0000000000000000-1023");
}

/* RMACOLL_SHM_TAG: unset or empty gives "", a valid tag itself, anything
 * but 1-24 letters, digits or '_' -1 with the value (for the message). */
static void test_tag(void **state)
{
    const char *saved = getenv("RMACOLL_SHM_TAG");
    char *keep = saved ? strdup(saved) : NULL;
    const char *tag = NULL;

    (void)state;
    unsetenv("RMACOLL_SHM_TAG");
    assert_int_equal(rmacoll__shm_tag(&tag), 0);
    assert_string_equal(tag, "");
    setenv("RMACOLL_SHM_TAG", "", 1);
    assert_int_equal(rmacoll__shm_tag(&tag), 0);
    assert_string_equal(tag, "");
    setenv("RMACOLL_SHM_TAG", "ct0123abcd_Z", 1);
    assert_int_equal(rmacoll__shm_tag(&tag), 0);
    assert_string_equal(tag, "ct0123abcd_Z");
    setenv("RMACOLL_SHM_TAG", "a/b", 1);
    assert_int_equal(rmacoll__shm_tag(&tag), -1);
    assert_string_equal(tag, "a/b");
    setenv("RMACOLL_SHM_TAG", "a.b", 1);
    assert_int_equal(rmacoll__shm_tag(&tag), -1);
    setenv("RMACOLL_SHM_TAG", "abcdefghijklmnopqrstuvwxy", 1); /* 25 */
    assert_int_equal(rmacoll__shm_tag(&tag), -1);
    setenv("RMACOLL_SHM_TAG", "abcdefghijklmnopqrstuvwx", 1); /* 24 */
    assert_int_equal(rmacoll__shm_tag(&tag), 0);
    if (keep != NULL) {
        setenv("RMACOLL_SHM_TAG", keep, 1);
        free(keep);
    } else {
        unsetenv("RMACOLL_SHM_TAG");
    }
}

/* Owner and peer see each other's writes; unlink keeps the mappings. */
static void test_fork_both_ways(void **state)
{
    char name[64];
    rmacoll__shm_t seg;
    int to_child[2], to_parent[2];
    pid_t pid;

    (void)state;
    test_name(1, name);
    assert_int_equal(rmacoll__shm_create(name, SEG_BYTES, &seg), RMACOLL_SUCCESS);
    assert_non_null(seg.addr);
    assert_int_equal(seg.bytes, SEG_BYTES);
    assert_int_equal(seg.owner, 1);
    assert_string_equal(seg.name, name);
    uint8_t *p = seg.addr;
    for (size_t k = 0; k < SEG_BYTES; k++) {
        assert_int_equal(p[k], 0); /* zero-filled */
    }
    for (size_t k = 0; k < SEG_BYTES / 2; k++) {
        p[k] = (uint8_t)(k * 3 + 1);
    }
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(to_parent), 0);
    fcntl(to_child[0], F_SETFL, O_NONBLOCK);
    fcntl(to_parent[0], F_SETFL, O_NONBLOCK);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rmacoll__shm_t peer;
        alarm(20);
        if (rmacoll__shm_attach(name, SEG_BYTES, 2000, &peer) != RMACOLL_SUCCESS) {
            _exit(10);
        }
        if (peer.owner != 0 || peer.bytes != SEG_BYTES) {
            _exit(11);
        }
        uint8_t *q = peer.addr;
        for (size_t k = 0; k < SEG_BYTES / 2; k++) {
            if (q[k] != (uint8_t)(k * 3 + 1)) {
                _exit(12);
            }
        }
        for (size_t k = SEG_BYTES / 2; k < SEG_BYTES; k++) {
            q[k] = (uint8_t)(k * 5 + 2);
        }
        if (write(to_parent[1], "a", 1) != 1 || wait_token(to_child[0], 5000) != 0) {
            _exit(13);
        }
        if (q[0] != 0xab) {
            _exit(14); /* the owner's write after the unlink */
        }
        rmacoll__shm_destroy(&peer); /* not the owner: must not unlink */
        if (peer.addr != NULL) {
            _exit(15);
        }
        _exit(write(to_parent[1], "b", 1) == 1 ? 0 : 16);
    }
    assert_int_equal(wait_token(to_parent[0], 5000), 0);
    for (size_t k = SEG_BYTES / 2; k < SEG_BYTES; k++) {
        assert_int_equal(p[k], (uint8_t)(k * 5 + 2));
    }
    assert_true(name_exists(name));
    rmacoll__shm_unlink(&seg); /* the peer attached */
    assert_false(name_exists(name));
    assert_int_equal(seg.owner, 0);
    rmacoll__shm_unlink(&seg); /* twice is harmless */
    p[0] = 0xab;
    assert_int_equal(write(to_child[1], "x", 1), 1);
    assert_int_equal(wait_token(to_parent[0], 5000), 0);
    assert_int_equal(reap(pid, 10000), 0);
    assert_int_equal(p[SEG_BYTES - 1], (uint8_t)((SEG_BYTES - 1) * 5 + 2));
    rmacoll__shm_destroy(&seg);
    assert_null(seg.addr);
    assert_int_equal(seg.bytes, 0);
    close(to_child[0]);
    close(to_child[1]);
    close(to_parent[0]);
    close(to_parent[1]);
}

/* The peer starts attaching before the owner creates. */
static void test_attach_waits_for_create(void **state)
{
    char name[64];
    rmacoll__shm_t seg;
    pid_t pid;

    (void)state;
    test_name(2, name);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rmacoll__shm_t peer;
        alarm(20);
        uint64_t t0 = now_ms();
        if (rmacoll__shm_attach(name, SEG_BYTES, 5000, &peer) != RMACOLL_SUCCESS) {
            _exit(10);
        }
        if (now_ms() - t0 < 100) {
            _exit(11); /* it cannot have existed before */
        }
        volatile uint64_t *w = peer.addr;
        uint64_t deadline = now_ms() + 5000;
        while (w[1] != 0x1234 && now_ms() < deadline) {
            sleep_ms(1);
        }
        if (w[1] != 0x1234) {
            _exit(12);
        }
        w[2] = 0x5678;
        rmacoll__shm_destroy(&peer);
        _exit(0);
    }
    sleep_ms(300);
    assert_int_equal(rmacoll__shm_create(name, SEG_BYTES, &seg), RMACOLL_SUCCESS);
    ((volatile uint64_t *)seg.addr)[1] = 0x1234;
    assert_int_equal(reap(pid, 10000), 0);
    assert_int_equal(((volatile uint64_t *)seg.addr)[2], 0x5678);
    rmacoll__shm_destroy(&seg); /* owner, not unlinked yet: unlinks */
    assert_false(name_exists(name));
}

static void test_attach_timeout_missing(void **state)
{
    char name[64];
    rmacoll__shm_t seg;
    uint64_t t0, took;

    (void)state;
    test_name(3, name);
    t0 = now_ms();
    assert_int_equal(rmacoll__shm_attach(name, SEG_BYTES, 200, &seg), RMACOLL_ERR_TIMEOUT);
    took = now_ms() - t0;
    assert_true(took >= 200 && took < 1500);
    assert_null(seg.addr);
}

static void test_attach_timeout_too_small(void **state)
{
    char name[64];
    rmacoll__shm_t seg, peer;
    uint64_t t0, took;

    (void)state;
    test_name(4, name);
    assert_int_equal(rmacoll__shm_create(name, 4096, &seg), RMACOLL_SUCCESS);
    t0 = now_ms();
    assert_int_equal(rmacoll__shm_attach(name, SEG_BYTES, 200, &peer), RMACOLL_ERR_TIMEOUT);
    took = now_ms() - t0;
    assert_true(took >= 200 && took < 1500);
    assert_null(peer.addr);
    /* a smaller view of it is fine */
    assert_int_equal(rmacoll__shm_attach(name, 1024, 200, &peer), RMACOLL_SUCCESS);
    ((uint8_t *)seg.addr)[1000] = 77;
    assert_int_equal(((uint8_t *)peer.addr)[1000], 77);
    rmacoll__shm_destroy(&peer);
    assert_true(name_exists(name));
    rmacoll__shm_destroy(&seg);
    assert_false(name_exists(name));
    /* after the unlink nobody attaches any more */
    assert_int_equal(rmacoll__shm_attach(name, 1024, 50, &peer), RMACOLL_ERR_TIMEOUT);
}

static void test_create_exclusive(void **state)
{
    char name[64];
    rmacoll__shm_t a, b;

    (void)state;
    test_name(5, name);
    assert_int_equal(rmacoll__shm_create(name, 4096, &a), RMACOLL_SUCCESS);
    ((uint8_t *)a.addr)[0] = 9;
    assert_int_equal(rmacoll__shm_create(name, 4096, &b), RMACOLL_ERR_INVALID_ARG);
    assert_null(b.addr);
    /* the failed create did not remove the first one's name */
    assert_true(name_exists(name));
    assert_int_equal(((uint8_t *)a.addr)[0], 9);
    rmacoll__shm_destroy(&a);
    assert_false(name_exists(name));
}

static void test_bad_args(void **state)
{
    rmacoll__shm_t s;
    /* longer than rmacoll__shm_t's name buffer, shorter than NAME_MAX (so
     * only the library's own check can refuse it; 80 fitted once the
     * buffer grew to 96, and the test then created and leaked the file) */
    char longname[sizeof(s.name) + 32];

    (void)state;
    memset(longname, 'a', sizeof(longname) - 1);
    longname[0] = '/';
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(rmacoll__shm_create("noslash", 64, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_create("/a/b", 64, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_create("/", 64, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_create(longname, 64, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_create(NULL, 64, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_create("/rmacoll-zero", 0, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_create("/rmacoll-x", 64, NULL), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_attach("noslash", 64, 10, &s), RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(rmacoll__shm_attach("/rmacoll-x", 0, 10, &s), RMACOLL_ERR_INVALID_ARG);
    rmacoll__shm_destroy(NULL);
    memset(&s, 0, sizeof(s));
    rmacoll__shm_destroy(&s); /* zeroed is accepted */
    rmacoll__shm_unlink(&s);
}

/* More than /dev/shm can hold fails at create, not with SIGBUS later,
 * and leaves no name behind. */
static void test_too_big(void **state)
{
    char name[64];
    rmacoll__shm_t s;
    struct statvfs vfs;

    (void)state;
    if (statvfs("/dev/shm", &vfs) != 0 || vfs.f_blocks == 0) {
        skip(); /* no size-limited /dev/shm here */
    }
    uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    size_t ask = (size_t)(total * 2 + (1ull << 30));
    test_name(6, name);
    assert_int_equal(rmacoll__shm_create(name, ask, &s), RMACOLL_ERR_NO_MEMORY);
    assert_null(s.addr);
    assert_false(name_exists(name));
}

/* transports/common/tproc.h: a process is gone when reaped, a zombie or
 * exiting (PF_EXITING), unless other threads of it live; the stat lines
 * are of a fault campaign's ranks (a survivor, a killed rank between
 * closing its sockets and becoming a zombie). */
static void test_proc_gone(void **state)
{
    static const char live[] = "30765 (python3) R 30759 30241 22535 0 -1 4194304 22246 0 0 0 "
                               "28 25 0 0 20 0 1 0 5639498 159334400 26";
    static const char exiting[] = "30762 (python3) R 30759 30241 22535 0 -1 4195340 23331 0 0 "
                                  "0 30 28 0 0 20 0 1 0 5639496 0 0 18446744";
    static const char zombie[] = "41 (rank (x) 1) Z 40 41 40 0 -1 4194316 0 0 0 0 0 0 0 0 "
                                 "20 0 1 0 99 0 0";
    static const char leader_left[] = "42 (app) Z 40 42 40 0 -1 4194316 0 0 0 0 0 0 0 0 20 0 "
                                      "3 0 99 0 0";
    static const char exiting_threads[] = "43 (app) S 40 43 40 0 -1 4194308 0 0 0 0 0 0 0 0 "
                                          "20 0 2 0 99 0 0";
    static const char cut[] = "44 (app) Z 40 44 40 0 -1 4194316 0 0";
    int st = 0;
    pid_t child;

    (void)state;
    assert_int_equal(rmacoll__proc_stat_gone(live), 0);
    assert_int_equal(rmacoll__proc_stat_gone(exiting), 1);
    assert_int_equal(rmacoll__proc_stat_gone(zombie), 1);      /* comm with ") " in it */
    assert_int_equal(rmacoll__proc_stat_gone(leader_left), 0); /* 3 threads go on */
    assert_int_equal(rmacoll__proc_stat_gone(exiting_threads), 0);
    assert_int_equal(rmacoll__proc_stat_gone(cut), 0);
    assert_int_equal(rmacoll__proc_stat_gone("no parenthesis"), 0);
    assert_int_equal(rmacoll__proc_gone((long)getpid()), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    assert_int_equal(rmacoll__proc_gone((long)child), 0);
    kill(child, SIGKILL);
    for (int i = 0; i < 2000 && !rmacoll__proc_gone((long)child); i++) {
        usleep(1000); /* exiting, then a zombie (not reaped yet) */
    }
    assert_int_equal(rmacoll__proc_gone((long)child), 1);
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_int_equal(rmacoll__proc_gone((long)child), 1); /* reaped */
}

/* The watch on a node peer's process (core/base/proc.h): opened only for
 * the process that started at the given time; silent while it lives;
 * readable once it is killed (a zombie, not reaped), and still after it
 * is reaped. */
static void test_proc_watch(void **state)
{
    uint64_t self = rmacoll__proc_start_ticks(0), ns = rmacoll__proc_pidns(), start;
    int fds[3] = {-1, -1, -1}, st = 0, probe;
    pid_t child;

    (void)state;
    assert_true(self > 0);
    assert_true(ns != 0);
    assert_true(rmacoll__proc_start_ticks((long)getpid()) == self);
    assert_int_equal(rmacoll__proc_exited((long)getpid(), self), 0);
    assert_int_equal(rmacoll__proc_exited((long)getpid(), self + 1), 1); /* pid reused */
    assert_int_equal(rmacoll__proc_watch_open(0, self, ns), -1);
    assert_int_equal(rmacoll__proc_watch_open((long)getpid(), 0, ns), -1); /* unknown start */
    assert_int_equal(rmacoll__proc_watch_open((long)getpid(), self, 0), -1); /* unknown ns */
    /* a peer of another PID namespace: its pid means another process here */
    assert_int_equal(rmacoll__proc_watch_open((long)getpid(), self, ns + 1), -1);
    assert_int_equal(rmacoll__proc_watch_exited(fds, 3), -1); /* no watch */
#ifdef SYS_pidfd_open
    probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
#else
    probe = -1;
#endif
    if (probe < 0) {
        skip(); /* no pidfd_open here (kernel < 5.3, a seccomp filter, old headers) */
    }
    close(probe);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    start = rmacoll__proc_start_ticks((long)child);
    assert_true(start > 0);
    /* a process that started at another time (a reused pid) is not watched */
    assert_int_equal(rmacoll__proc_watch_open((long)child, start + 1, ns), -1);
    fds[2] = rmacoll__proc_watch_open((long)child, start, ns);
    assert_true(fds[2] >= 0);
    fds[0] = rmacoll__proc_watch_open((long)getpid(), self, ns); /* alive all along */
    assert_true(fds[0] >= 0);
    assert_int_equal(rmacoll__proc_watch_exited(fds, 3), -1);
    assert_int_equal(rmacoll__proc_exited((long)child, start), 0);
    kill(child, SIGKILL);
    for (int i = 0; i < 5000 && rmacoll__proc_watch_exited(fds, 3) < 0; i++) {
        usleep(1000);
    }
    assert_int_equal(rmacoll__proc_watch_exited(fds, 3), 2);
    assert_int_equal(rmacoll__proc_exited((long)child, start), 1); /* a zombie */
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_int_equal(rmacoll__proc_watch_exited(fds, 3), 2);
    assert_int_equal(rmacoll__proc_exited((long)child, start), 1); /* reaped */
    close(fds[0]);
    close(fds[2]);
    /* an fd that is no longer open is no exit */
    assert_int_equal(rmacoll__proc_watch_exited(fds, 1), -1);
}

/* A control window whose creator was killed before unlinking it is removed
 * by the sweep; one whose creator lives, one without the magic (still being
 * created) and one under another name are left alone. */
static void test_sweep_stale(void **state)
{
    enum { MAGIC_OFF = 0, PID_OFF = 16 };
    const uint64_t magic = 0x726d61636f6c6c31ull;
    char dead[64], live[64], nomagic[64], other[64];
    rmacoll__shm_t seg;
    int to_child[2], from_child[2];
    pid_t child, sleeper;
    char c;

    (void)state;
    rmacoll__shm_name(0x5eeda11ull << 20 | (uint64_t)getpid(), 1, dead, sizeof(dead));
    rmacoll__shm_name(0x5eeda11ull << 20 | (uint64_t)getpid(), 2, live, sizeof(live));
    rmacoll__shm_name(0x5eeda11ull << 20 | (uint64_t)getpid(), 3, nomagic, sizeof(nomagic));
    snprintf(other, sizeof(other), "/rmacoll-sweeptest-%d", (int)getpid());

    /* a child creates `dead` with its pid and dies without unlinking */
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (rmacoll__shm_create(dead, 4096, &seg) != RMACOLL_SUCCESS) {
            _exit(1);
        }
        *(uint64_t *)((char *)seg.addr + PID_OFF) = (uint64_t)getpid();
        *(uint64_t *)((char *)seg.addr + MAGIC_OFF) = magic;
        _exit(0);
    }
    assert_int_equal(waitpid(child, NULL, 0), child);
    /* a second child creates `live` and stays alive until told */
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    sleeper = fork();
    assert_true(sleeper >= 0);
    if (sleeper == 0) {
        if (rmacoll__shm_create(live, 4096, &seg) != RMACOLL_SUCCESS) {
            _exit(1);
        }
        *(uint64_t *)((char *)seg.addr + PID_OFF) = (uint64_t)getpid();
        *(uint64_t *)((char *)seg.addr + MAGIC_OFF) = magic;
        if (write(from_child[1], "r", 1) != 1 || read(to_child[0], &c, 1) != 1) {
            _exit(1);
        }
        rmacoll__shm_destroy(&seg);
        _exit(0);
    }
    assert_int_equal(read(from_child[0], &c, 1), 1);
    /* no magic: a window being created; its pid word holds a dead pid */
    assert_int_equal(rmacoll__shm_create(nomagic, 4096, &seg), RMACOLL_SUCCESS);
    *(uint64_t *)((char *)seg.addr + PID_OFF) = (uint64_t)child;
    rmacoll__shm_t oseg;
    assert_int_equal(rmacoll__shm_create(other, 4096, &oseg), RMACOLL_SUCCESS);
    *(uint64_t *)((char *)oseg.addr + PID_OFF) = (uint64_t)child;
    *(uint64_t *)oseg.addr = magic;

    assert_true(name_exists(dead) && name_exists(live) && name_exists(nomagic));
    assert_true(rmacoll__shm_sweep_stale(magic, PID_OFF) >= 1);
    assert_false(name_exists(dead));
    assert_true(name_exists(live));
    assert_true(name_exists(nomagic));
    assert_true(name_exists(other));

    assert_int_equal(write(to_child[1], "x", 1), 1);
    assert_int_equal(waitpid(sleeper, NULL, 0), sleeper);
    assert_false(name_exists(live)); /* the live owner unlinked its own */
    rmacoll__shm_destroy(&seg);
    rmacoll__shm_destroy(&oseg);
    assert_false(name_exists(nomagic));
    assert_false(name_exists(other));
    close(to_child[0]);
    close(to_child[1]);
    close(from_child[0]);
    close(from_child[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_format),
        cmocka_unit_test(test_tag),
        cmocka_unit_test(test_fork_both_ways),
        cmocka_unit_test(test_attach_waits_for_create),
        cmocka_unit_test(test_attach_timeout_missing),
        cmocka_unit_test(test_attach_timeout_too_small),
        cmocka_unit_test(test_create_exclusive),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_sweep_stale),
        cmocka_unit_test(test_proc_gone),
        cmocka_unit_test(test_proc_watch),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
