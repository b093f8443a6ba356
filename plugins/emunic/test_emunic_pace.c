/*
 * test_emunic_pace.c - the emulated NIC's rate and latency model
 * (emunic_pace.h) at chosen clock values: exact nanoseconds, no sleeping.
 * Plain C (the plugin's standalone build has no test framework): each
 * CHECK prints the expression and the values it compared.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "emunic_pace.h"

static int failures;

#define CHECK_EQ(a, b)                                                                   \
    do {                                                                                 \
        uint64_t a_ = (a), b_ = (b);                                                     \
        if (a_ != b_) {                                                                  \
            fprintf(stderr, "%s:%d: %s == %" PRIu64 ", expected %s == %" PRIu64 "\n",    \
                    __FILE__, __LINE__, #a, a_, #b, b_);                                 \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* Wire time: bytes / rate, rounded up; no cap is 0; no overflow. */
static void test_wire(void)
{
    CHECK_EQ(emunic_wire_ns(1000, 1000000000ull), 1000);     /* 1 GB/s: 1 ns per byte */
    CHECK_EQ(emunic_wire_ns(1, 3000000000ull), 1);           /* 0.33 ns rounds up */
    CHECK_EQ(emunic_wire_ns(0, 48500000000ull), 0);
    CHECK_EQ(emunic_wire_ns(1 << 20, 0), 0);                 /* no cap */
    /* 64 MiB at 48.5 GB/s: 67108864 / 48.5 = 1383687.9 ns */
    CHECK_EQ(emunic_wire_ns(64ull << 20, 48500000000ull), 1383688);
    /* 256 MiB at 1 B/s: 2.68e17 ns, beyond 64 bits only in the product */
    CHECK_EQ(emunic_wire_ns(256ull << 20, 1), 268435456000000000ull);
}

/* Back-to-back puts on one direction go at the rate: each leaves
 * bytes / rate after the previous one, from when the first was offered. */
static void test_bucket_rate(void)
{
    emunic_bucket_t b = {1000000000ull, 0}; /* 1 GB/s, no burst */
    uint64_t tat = 0;

    CHECK_EQ(emunic_bucket_take(&b, &tat, 5000, 1000), 6000);
    CHECK_EQ(emunic_bucket_take(&b, &tat, 5000, 1000), 7000); /* queued behind */
    CHECK_EQ(emunic_bucket_take(&b, &tat, 5500, 500), 7500);
    CHECK_EQ(tat, 7500);
    /* idle until 20000: the next starts when offered, not at tat */
    CHECK_EQ(emunic_bucket_take(&b, &tat, 20000, 2000), 22000);
    /* a zero-byte put (a signal) waits for the bytes before it */
    CHECK_EQ(emunic_bucket_take(&b, &tat, 21000, 0), 22000);
}

/* Burst: after idling, up to `burst` bytes leave at once, then the rate. */
static void test_bucket_burst(void)
{
    emunic_bucket_t b = {1000000000ull, 4000}; /* 1 GB/s, 4000 bytes at once */
    uint64_t tat = 0;

    CHECK_EQ(emunic_bucket_take(&b, &tat, 100000, 3000), 100000); /* within the burst */
    CHECK_EQ(emunic_bucket_take(&b, &tat, 100000, 1000), 100000); /* burst used up */
    CHECK_EQ(emunic_bucket_take(&b, &tat, 100000, 1000), 101000); /* now the rate */
    CHECK_EQ(tat, 105000);
}

/* No cap: everything leaves when offered. */
static void test_bucket_nocap(void)
{
    emunic_bucket_t b = {0, 0};
    uint64_t tat = 0;

    CHECK_EQ(emunic_bucket_take(&b, &tat, 777, 1ull << 30), 777);
    CHECK_EQ(emunic_bucket_take(&b, &tat, 778, 1ull << 30), 778);
}

/* Incast: two writers into one target share its receive direction, so
 * the second put's bytes arrive after the first's, though each writer's
 * send direction is idle; the signal waits for the later end plus the
 * latency. */
static void test_incast_and_latency(void)
{
    emunic_bucket_t b = {2000000000ull, 0}; /* 2 GB/s: 0.5 ns per byte */
    uint64_t tx_a = 0, tx_b = 0, rx = 0, ta, ra, tb, rb;

    ta = emunic_bucket_take(&b, &tx_a, 1000, 4000);
    ra = emunic_bucket_take_shared(&b, &rx, 1000, 4000);
    tb = emunic_bucket_take(&b, &tx_b, 1000, 4000);
    rb = emunic_bucket_take_shared(&b, &rx, 1000, 4000);
    CHECK_EQ(ta, 3000);
    CHECK_EQ(ra, 3000);
    CHECK_EQ(tb, 3000);
    CHECK_EQ(rb, 5000); /* behind writer A's bytes at the target */
    CHECK_EQ(emunic_deliver_at(ta, ra, 3000), 6000);
    CHECK_EQ(emunic_deliver_at(tb, rb, 3000), 8000);
    /* the bound of a rail that carries 1 GiB at 48.5 GB/s */
    CHECK_EQ(emunic_bound_ns(1ull << 30, 48500000000ull), 22139007);
}

int main(void)
{
    test_wire();
    test_bucket_rate();
    test_bucket_burst();
    test_bucket_nocap();
    test_incast_and_latency();
    if (failures != 0) {
        fprintf(stderr, "test_emunic_pace: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_emunic_pace: all checks passed\n");
    return 0;
}
