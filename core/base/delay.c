/*
 * delay.c - randomised test delays (delay.h).
 */
#include "core/base/delay.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long delay_max_us;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

static void delay_read(void)
{
    const char *v = getenv("RMACOLL_TEST_DELAY_US");

    delay_max_us = v != NULL ? strtoul(v, NULL, 10) : 0;
}

void rmacoll__test_delay(void)
{
    static __thread uint64_t x;
    uint64_t r;

    pthread_once(&delay_once, delay_read);
    if (__builtin_expect(delay_max_us == 0, 1)) {
        return;
    }
    if (x == 0) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&x;
        x |= 1;
    }
    x ^= x << 13; /* xorshift64 */
    x ^= x >> 7;
    x ^= x << 17;
    r = x % (delay_max_us + 1);
    if (r > 0) {
        struct timespec d = {(time_t)(r / 1000000u), (long)(r % 1000000u) * 1000};
        nanosleep(&d, NULL);
    }
}
