/*
 * tclock.h - the monotonic clock of the transports (deadlines, stall and
 * timeout checks), written once. Inline: the transports built as their own
 * module (verbs) use it with this header alone. Thread-safe.
 */
#ifndef RMACOLL_TRANSPORTS_COMMON_TCLOCK_H
#define RMACOLL_TRANSPORTS_COMMON_TCLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, in nanoseconds. */
static inline uint64_t rmacoll__tclock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC, in milliseconds (rounded down). */
static inline uint64_t rmacoll__tclock_ms(void)
{
    return rmacoll__tclock_ns() / 1000000u;
}

#endif /* RMACOLL_TRANSPORTS_COMMON_TCLOCK_H */
