/*
 * test_proxy.c - the proxy thread (core/ctrl/proxy.c) over a counting fake
 * transport: while a calling thread drives, the proxy thread stays off
 * the transport, parked on the driving word; the last driver's stop
 * (rmacoll__proxy_drive(px, 0)) wakes it and it posts what was handed
 * over; a blocking call's end (rmacoll__proxy_drive_end) and the next
 * blocking call's start do not wake it, a call no thread drives (a
 * stream call: rmacoll__proxy_set_active) does; nested drivers keep it off until the last one stops; fini wakes
 * and joins a parked thread.
 *
 * The park bound is raised to 60 s, so a job posted within the bounded
 * waits below was posted because of a wake-up, not because the park
 * timed out. Every wait is bounded (10 s); no assertion is on speed.
 */
#include <dirent.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/ctrl/proxy.h"

#define LONG_PARK_NS (60L * 1000000000L)
#define BOUND_MS 10000u

struct rmacoll_transport {
    _Atomic int posted;     /* post_puts calls */
    _Atomic int puts;       /* puts in them */
    _Atomic int progressed; /* progress calls */
};

static rmacoll_status_t fake_post(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                  size_t n)
{
    (void)puts;
    atomic_fetch_add(&tp->puts, (int)n);
    atomic_fetch_add(&tp->posted, 1);
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t fake_progress(rmacoll_transport_t *tp)
{
    atomic_fetch_add(&tp->progressed, 1);
    return RMACOLL_SUCCESS;
}

static size_t fake_pending(rmacoll_transport_t *tp)
{
    (void)tp;
    return 0;
}

static int fake_error_peer(rmacoll_transport_t *tp)
{
    (void)tp;
    return -1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000u, (long)(ms % 1000u) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Waits (bounded) until *w reaches v; returns 1 if it did. */
static int wait_at_least(_Atomic int *w, int v)
{
    uint64_t start = now_ms();

    while (atomic_load(w) < v) {
        if (now_ms() - start > BOUND_MS) {
            return 0;
        }
        sched_yield();
    }
    return 1;
}

typedef struct fixture {
    rmacoll__tops_t ops;
    struct rmacoll_transport tp;
    rmacoll__proxy_t px;
    rmacoll__logger_t log;
    char err[256];
    rmacoll_put_t put[3];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = test_calloc(1, sizeof(*f));

    f->ops.name = "fake";
    f->ops.base.progress = fake_progress;
    f->ops.base.pending = fake_pending;
    f->ops.base.error_peer = fake_error_peer;
    f->ops.host.post_puts = fake_post;
    f->log.level = RMACOLL_LOG_WARN;
    rmacoll__proxy_init(&f->px, 0, 5000, &f->log, f->err, sizeof(f->err));
    f->px.park_ns = LONG_PARK_NS;
    assert_int_equal(rmacoll__proxy_start(&f->px, &f->ops, &f->tp), RMACOLL_SUCCESS);
    /* the thread runs: it polls the idle transport */
    assert_true(wait_at_least(&f->tp.progressed, 1));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;

    rmacoll__proxy_fini(&f->px);
    test_free(f);
    return 0;
}

/* 1 when another thread of this process sleeps in futex(2) now
 * (/proc/self/task/T/syscall starts with the number of the system call
 * a blocked thread is in): the proxy thread, the only other one. */
static int other_thread_in_futex(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    long me = syscall(SYS_gettid);
    int found = 0;

    if (d == NULL) {
        return 0;
    }
    while (!found && (e = readdir(d)) != NULL) {
        char path[288];
        long nr = -1;
        FILE *fp;
        if (e->d_name[0] == '.' || atol(e->d_name) == me) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", e->d_name);
        fp = fopen(path, "r");
        if (fp != NULL) {
            found = fscanf(fp, "%ld", &nr) == 1 && nr == SYS_futex;
            fclose(fp);
        }
    }
    closedir(d);
    return found;
}

/* Drives (on = 1) and waits, bounded, until the proxy thread is parked:
 * its flag set and the thread inside the futex wait (between the two, a
 * change of the driving word makes the wait return at once, by design). */
static void drive_until_parked(fixture_t *f)
{
    uint64_t start = now_ms();

    rmacoll__proxy_drive(&f->px, 1);
    assert_true(wait_at_least(&f->px.parked, 1));
    while (!other_thread_in_futex()) {
        assert_true(now_ms() - start < BOUND_MS);
        sched_yield();
    }
}

static void test_stop_wakes_parked_thread(void **state)
{
    fixture_t *f = *state;
    int before;

    drive_until_parked(f);
    before = atomic_load(&f->tp.progressed);
    assert_int_equal(rmacoll__proxy_submit(&f->px, f->put, 3), RMACOLL_SUCCESS);
    /* parked: nothing is posted or progressed while a thread drives */
    sleep_ms(50);
    assert_int_equal(atomic_load(&f->tp.posted), 0);
    assert_int_equal(atomic_load(&f->tp.progressed), before);
    assert_int_equal(atomic_load(&f->px.parked), 1);
    /* the last driver stops: woken at once (the park lasts 60 s) */
    rmacoll__proxy_drive(&f->px, 0);
    assert_true(wait_at_least(&f->tp.posted, 1));
    assert_int_equal(atomic_load(&f->tp.puts), 3);
    assert_int_equal(atomic_load(&f->px.jobs_done), 1);
    assert_true(wait_at_least(&f->tp.progressed, before + 1));
}

static void test_call_end_does_not_wake(void **state)
{
    fixture_t *f = *state;

    drive_until_parked(f);
    assert_int_equal(rmacoll__proxy_submit(&f->px, f->put, 1), RMACOLL_SUCCESS);
    rmacoll__proxy_drive_end(&f->px);
    assert_int_equal(atomic_load(&f->px.driving), 0);
    /* still parked: a call's end is no reason for a context switch */
    sleep_ms(50);
    assert_int_equal(atomic_load(&f->tp.posted), 0);
    assert_int_equal(atomic_load(&f->px.parked), 1);
    /* the next driver's stop wakes it, and the job goes out */
    rmacoll__proxy_drive(&f->px, 1);
    rmacoll__proxy_drive(&f->px, 0);
    assert_true(wait_at_least(&f->tp.posted, 1));
    assert_int_equal(atomic_load(&f->tp.puts), 1);
}

static void test_undriven_call_wakes(void **state)
{
    fixture_t *f = *state;

    drive_until_parked(f);
    rmacoll__proxy_drive_end(&f->px); /* a blocking call ended */
    /* a blocking call starts: it drives first, then marks itself active,
     * and the thread sleeps on */
    rmacoll__proxy_drive(&f->px, 1);
    rmacoll__proxy_set_active(&f->px, 1);
    assert_int_equal(rmacoll__proxy_submit(&f->px, f->put, 1), RMACOLL_SUCCESS);
    sleep_ms(50);
    assert_int_equal(atomic_load(&f->tp.posted), 0);
    rmacoll__proxy_drive_end(&f->px);
    sleep_ms(50);
    assert_int_equal(atomic_load(&f->tp.posted), 0);
    /* a stream call, which no thread drives, needs the thread at once */
    rmacoll__proxy_set_active(&f->px, 1);
    assert_true(wait_at_least(&f->tp.posted, 1));
    assert_int_equal(atomic_load(&f->tp.puts), 1);
    rmacoll__proxy_set_active(&f->px, 0);
}

static void test_nested_drivers(void **state)
{
    fixture_t *f = *state;

    drive_until_parked(f);
    rmacoll__proxy_drive(&f->px, 1); /* a wait inside the call */
    assert_int_equal(rmacoll__proxy_submit(&f->px, f->put, 2), RMACOLL_SUCCESS);
    rmacoll__proxy_drive(&f->px, 0); /* that wait ends: one driver left */
    sleep_ms(50);
    assert_int_equal(atomic_load(&f->tp.posted), 0);
    assert_int_equal(atomic_load(&f->px.driving), 1);
    rmacoll__proxy_drive(&f->px, 0);
    assert_true(wait_at_least(&f->tp.posted, 1));
    assert_int_equal(atomic_load(&f->tp.puts), 2);
}

static void test_fini_joins_parked_thread(void **state)
{
    fixture_t *f = *state;
    uint64_t start;

    drive_until_parked(f);
    rmacoll__proxy_drive_end(&f->px);
    start = now_ms();
    rmacoll__proxy_fini(&f->px); /* woken, not after the 60 s park */
    assert_true(now_ms() - start < BOUND_MS);
    assert_int_equal(f->px.started, 0);
    /* teardown's fini again is a no-op on a stopped proxy */
    pthread_mutex_init(&f->px.lock, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stop_wakes_parked_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_end_does_not_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undriven_call_wakes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_drivers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fini_joins_parked_thread, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
