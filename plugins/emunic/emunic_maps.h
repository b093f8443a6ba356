/*
 * emunic_maps.h - which of a writer's cached CUDA IPC mappings of one peer
 * must be closed before that peer's slot is opened, as a pure function of
 * the cache (no CUDA), so that CPU tests check it.
 *
 * A writer maps a peer's published device allocation once
 * (cudaIpcOpenMemHandle) and keeps the mapping, by slot and generation.
 * The peer may free that allocation (the user's cudaFree after the call)
 * and allocate again at the same addresses: cudaMalloc reuses them. The
 * new allocation is published in another slot; opening its handle while
 * the old mapping is still open fails with cudaErrorAlreadyMapped
 * ("resource already mapped": the writer's context still holds the freed
 * range of that peer). So before a slot is opened, every mapping of the
 * same peer whose allocation overlaps the new one, in the peer's
 * addresses, is closed: the peer cannot have two live allocations that
 * overlap, so such a mapping is of memory the peer freed (or of the same
 * allocation published again, which the new mapping replaces). The slot's
 * own mapping of an older generation goes too (the slot was republished).
 *
 * Where it may run: in a context whose streams wait for nothing of the
 * user's. cudaIpcCloseMemHandle in the user's context waited for that
 * context, where the user's stream waited (a stream memory wait) for the
 * very data phase that closed: the rank hung, untimed (seen on the GPU
 * machine, issue 32). So the mappings live in emunic's own context
 * (emunic_cuda.c), whose streams carry emunic's copies only.
 * The rule covers one peer rank's mappings: a peer process with several
 * ranks (threads), or several emunic instances in this process sharing
 * the context (IPC mappings are counted per context), can still hold an
 * overlapping mapping that this close does not reach; the open then
 * fails with cudaErrorAlreadyMapped, reported as such.
 */
#ifndef RMACOLL_EMUNIC_MAPS_H
#define RMACOLL_EMUNIC_MAPS_H

#include <stdint.h>

/* A writer's mapping of one slot of one peer; ptr NULL = none. */
typedef struct emunic_map {
    uint64_t gen;      /* the slot's generation when it was opened */
    uint64_t base;     /* the peer's allocation, in the peer's addresses */
    uint64_t size;
    void *ptr;         /* local address of base */
} emunic_map_t;

/* Whether [a, a + as) and [b, b + bs) share a byte. */
static inline int emunic_ranges_overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return as > 0 && bs > 0 && a < b + bs && b < a + as;
}

/* Marks in close_out[0, n) the mappings of maps[0, n) (one peer's, by
 * slot) to close before slot `slot` (generation gen, the peer's
 * allocation [base, base + size)) is opened; returns how many. A mapping
 * of `slot` itself at generation gen is kept (then nothing needs opening:
 * the caller checks that first). */
static inline int emunic_maps_stale(const emunic_map_t *maps, int n, int slot, uint64_t gen,
                                    uint64_t base, uint64_t size, unsigned char *close_out)
{
    int k = 0;

    for (int t = 0; t < n; t++) {
        const emunic_map_t *m = &maps[t];
        int stale = 0;

        if (m->ptr != NULL) {
            stale = t == slot ? m->gen != gen
                              : emunic_ranges_overlap(m->base, m->size, base, size);
        }
        close_out[t] = (unsigned char)stale;
        k += stale;
    }
    return k;
}

#endif
