/*
 * test_emunic_maps.c - the writer's CUDA IPC mapping cache of the emulated
 * NIC (emunic_maps.h): which mappings of a peer go before one of its
 * slots is opened. The failure it prevents needs a GPU (a second
 * cudaIpcOpenMemHandle of a range the writer still maps: "resource
 * already mapped", seen in test_gpu_e2e's test_cross_node_emunic when a
 * rank freed its receive buffer and the next call's cudaMalloc returned
 * the same addresses); the decision itself is plain data, checked here.
 * Plain C, like test_emunic_pace.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emunic_maps.h"

static int failures;

#define CHECK_EQ(a, b)                                                                   \
    do {                                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);                              \
        if (a_ != b_) {                                                                  \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__,         \
                    __LINE__, #a, a_, #b, b_);                                           \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#define N 8
static char mapped[N]; /* distinct non-NULL addresses */

static void set(emunic_map_t *m, int t, uint64_t gen, uint64_t base, uint64_t size)
{
    m[t].gen = gen;
    m[t].base = base;
    m[t].size = size;
    m[t].ptr = &mapped[t];
}

/* The bytes of close_out as a bit mask, slot t = bit t. */
static unsigned mask_of(const unsigned char *c)
{
    unsigned m = 0;

    for (int t = 0; t < N; t++) {
        CHECK_EQ(c[t] <= 1, 1);
        m |= (unsigned)c[t] << t;
    }
    return m;
}

/* The failing sequence: slot 0 held the receive buffer of call 1 at
 * 0x7f0000000000 (2 MiB); the peer freed it and call 2's cudaMalloc gave
 * the same addresses, published in slot 1: slot 0's mapping must close.
 * The relay buffer (slot 2, elsewhere) stays mapped. */
static void test_reused_addresses(void)
{
    emunic_map_t m[N];
    unsigned char c[N];

    memset(m, 0, sizeof(m));
    memset(c, 0xee, sizeof(c));
    set(m, 0, 2, 0x7f0000000000ull, 2u << 20);
    set(m, 2, 2, 0x7e0000000000ull, 64u << 20);
    CHECK_EQ(emunic_maps_stale(m, N, 1, 2, 0x7f0000000000ull, 2u << 20, c), 1);
    CHECK_EQ(mask_of(c), 0x1);
    /* a larger allocation over the old one's tail, and one inside it */
    CHECK_EQ(emunic_maps_stale(m, N, 1, 2, 0x7f0000100000ull, 4u << 20, c), 1);
    CHECK_EQ(mask_of(c), 0x1);
    CHECK_EQ(emunic_maps_stale(m, N, 1, 2, 0x7f0000001000ull, 4096, c), 1);
    CHECK_EQ(mask_of(c), 0x1);
    /* adjacent, not overlapping: both stay */
    CHECK_EQ(emunic_maps_stale(m, N, 1, 2, 0x7f0000200000ull, 2u << 20, c), 0);
    CHECK_EQ(mask_of(c), 0x0);
    CHECK_EQ(emunic_maps_stale(m, N, 1, 2, 0x7effffe00000ull, 2u << 20, c), 0);
    CHECK_EQ(mask_of(c), 0x0);
    /* one new allocation over two old ones */
    set(m, 3, 2, 0x7f0000200000ull, 2u << 20);
    CHECK_EQ(emunic_maps_stale(m, N, 1, 2, 0x7f0000000000ull, 4u << 20, c), 2);
    CHECK_EQ(mask_of(c), 0x9);
}

/* The slot's own mapping: kept at its generation, closed when the slot
 * was republished (another generation), whatever its range. */
static void test_own_slot(void)
{
    emunic_map_t m[N];
    unsigned char c[N];

    memset(m, 0, sizeof(m));
    set(m, 4, 6, 0x1000000, 1u << 20);
    CHECK_EQ(emunic_maps_stale(m, N, 4, 6, 0x1000000, 1u << 20, c), 0);
    CHECK_EQ(mask_of(c), 0x0);
    CHECK_EQ(emunic_maps_stale(m, N, 4, 8, 0x1000000, 1u << 20, c), 1);
    CHECK_EQ(mask_of(c), 0x10);
    CHECK_EQ(emunic_maps_stale(m, N, 4, 8, 0x9000000, 1u << 20, c), 1);
    CHECK_EQ(mask_of(c), 0x10);
}

/* Nothing mapped, or only empty ranges: nothing to close. */
static void test_nothing(void)
{
    emunic_map_t m[N];
    unsigned char c[N];

    memset(m, 0, sizeof(m));
    CHECK_EQ(emunic_maps_stale(m, N, 0, 2, 0, 1u << 30, c), 0);
    CHECK_EQ(mask_of(c), 0x0);
    m[5].base = 0x1000; /* an entry without a mapping, over the range */
    m[5].size = 0x1000;
    CHECK_EQ(emunic_maps_stale(m, N, 0, 2, 0, 1u << 30, c), 0);
    CHECK_EQ(emunic_ranges_overlap(0x1000, 0, 0x1000, 16), 0);
    CHECK_EQ(emunic_ranges_overlap(0x1000, 16, 0x100f, 1), 1);
    CHECK_EQ(emunic_ranges_overlap(0x1000, 16, 0x1010, 1), 0);
}

int main(void)
{
    test_reused_addresses();
    test_own_slot();
    test_nothing();
    if (failures != 0) {
        fprintf(stderr, "test_emunic_maps: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_emunic_maps: all checks passed\n");
    return 0;
}
