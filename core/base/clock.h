/*
 * clock.h - the monotonic clock of core/ (CLOCK_MONOTONIC), in nanoseconds
 * and milliseconds: deadlines, timeouts and stage timing. Not for ids or
 * seeds (those read CLOCK_REALTIME where they are made). Thread-safe.
 */
#ifndef RMACOLL_CORE_CLOCK_H
#define RMACOLL_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

/** Nanoseconds since an arbitrary start (CLOCK_MONOTONIC). */
static inline uint64_t rmacoll__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/** Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
static inline uint64_t rmacoll__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif /* RMACOLL_CORE_CLOCK_H */
