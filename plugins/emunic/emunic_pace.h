/*
 * emunic_pace.h - the emulated NIC's rate and latency model, as pure
 * functions of a clock value (nanoseconds), so that CPU tests check them
 * with chosen times and no sleeping.
 *
 * Each direction of each rail (a rank's NIC: send at the writer, receive
 * at the target) is a token bucket on bytes in its virtual-time form (the
 * GCRA of ATM, ITU-T I.371): `tat` is the time at which the bucket would
 * be full again, i.e. when the bytes accepted so far have left the wire
 * at `rate` bytes/s. A put of b bytes offered at `now` takes
 *     tat' = max(tat, now) + b / rate
 * and its last byte leaves at max(now, tat' - burst / rate): up to
 * `burst` bytes go at once after an idle spell, then the rate holds. A
 * rate of 0 is no cap (b / rate = 0). The put's signal is raised at
 *     max(send side, receive side) + latency
 * (both ends' buckets: incast is bound by the target's receive rate, fan-
 * out by the writer's send rate), and never before the copy that carries
 * its bytes has completed; signals to one peer are raised in post order.
 */
#ifndef RMACOLL_EMUNIC_PACE_H
#define RMACOLL_EMUNIC_PACE_H

#include <stdint.h>

typedef struct emunic_bucket {
    uint64_t rate;     /* bytes per second; 0 = no cap */
    uint64_t burst;    /* bytes that may leave at once after idling */
} emunic_bucket_t;

/* Nanoseconds b bytes occupy a wire of `rate` bytes/s (rounded up; 0 for
 * no cap). 128-bit product: 256 MiB at 1 B/s does not overflow. */
static inline uint64_t emunic_wire_ns(uint64_t bytes, uint64_t rate)
{
    if (rate == 0) {
        return 0;
    }
    return (uint64_t)(((unsigned __int128)bytes * 1000000000u + rate - 1) / rate);
}

/* Advances one direction's tat by a put of `bytes` offered at `now`;
 * returns when its last byte has left (see the header comment). */
static inline uint64_t emunic_bucket_take(const emunic_bucket_t *b, uint64_t *tat,
                                          uint64_t now, uint64_t bytes)
{
    uint64_t t = (*tat > now ? *tat : now) + emunic_wire_ns(bytes, b->rate);
    uint64_t slack = emunic_wire_ns(b->burst, b->rate);

    *tat = t;
    return t - slack > now && t > slack ? t - slack : now;
}

/* The same on a tat shared with other processes (the target's receive
 * direction, in its shared segment): compare-and-swap until it holds. */
static inline uint64_t emunic_bucket_take_shared(const emunic_bucket_t *b, uint64_t *tat,
                                                 uint64_t now, uint64_t bytes)
{
    uint64_t old = __atomic_load_n(tat, __ATOMIC_RELAXED);

    for (;;) {
        uint64_t t = old, done = emunic_bucket_take(b, &t, now, bytes);
        if (__atomic_compare_exchange_n(tat, &old, t, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            return done;
        }
    }
}

/* When a put's signal may be raised: both ends' last byte, plus latency. */
static inline uint64_t emunic_deliver_at(uint64_t tx_done, uint64_t rx_done,
                                         uint64_t latency_ns)
{
    return (tx_done > rx_done ? tx_done : rx_done) + latency_ns;
}

/* The emulated NIC bound of an AlltoAllV exchange (rmacoll-perf's "NIC
 * bound", scripts/gpu/emunic.sh): the time the busiest rail direction
 * needs, bytes / rate, in nanoseconds. */
static inline uint64_t emunic_bound_ns(uint64_t max_rail_bytes, uint64_t rate)
{
    return emunic_wire_ns(max_rail_bytes, rate);
}

#endif /* RMACOLL_EMUNIC_PACE_H */
