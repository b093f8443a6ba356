/*
 * ce_shared.c - host memory the ce transport shares with its node peers
 * (mem_alloc of RMACOLL_MEM_HOST, behind rmacoll_mem_alloc), and the
 * direct copies into it.
 *
 * An allocation is a memfd (memfd_create(2)) mapped MAP_SHARED in the
 * owner. The owner lists its allocations in a directory: one more memfd,
 * of CE_DIR_SLOTS slots {address, length, serial, fd}, whose fd number goes
 * to every rank in init's allgather. A node peer that puts into the owner's
 * address space first looks the destination range up in the owner's
 * directory (mapped read-only on first use); when an allocation holds the
 * whole range, the peer maps that memfd too (pidfd_open(2) and
 * pidfd_getfd(2) duplicate the owner's fd: Linux >= 5.6, under the ptrace
 * access check that cross-memory attach already passed at init) and the put
 * becomes a memcpy into the mapping instead of process_vm_writev(2): the
 * same single copy, without the system call and its pinning of the
 * target's pages. Anything else (no directory, an older kernel, a range
 * outside every allocation, a slot changing meanwhile) takes the
 * cross-memory path as before.
 *
 * Consistency: each slot carries a sequence number, odd while the owner
 * changes the slot (seqlock). A reader takes a slot only when it reads the
 * same even number before and after reading the fields, and again after
 * duplicating the fd and mapping it: the owner closes an allocation's fd
 * only after making its slot odd, so while the number holds, the fd names
 * that allocation. A mapping is cached by (peer, serial); a new mapping
 * that overlaps a cached one of the same peer replaces it (the owner freed
 * the old allocation), and the cache holds CE_MAP_MAX mappings (the oldest
 * goes first), so a freed allocation's pages live on in a peer at most
 * until one of those happens or the peer finalizes.
 *
 * Threads: alloc and free run on the user's threads (dir_lock); lookups
 * run inside post_puts (one thread at a time, as every put op).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rmacoll_transport.h"
#include "transports/ce/ce.h"

#define CE_DIR_MAGIC 0x726d61636f6c6c64ull /* "rmacolld" */

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

typedef struct ce_dir_slot {
    uint64_t seq;    /* even: stable, odd: the owner is changing the slot */
    uint64_t addr;   /* in the owner's address space; 0: free slot */
    uint64_t bytes;  /* mapped length (whole pages) */
    uint64_t serial; /* unique per allocation of the owner */
    int64_t fd;      /* the allocation's memfd in the owner's fd table */
} ce_dir_slot_t;

struct rmacoll__ce_dir {
    uint64_t magic;
    uint64_t nused;  /* slots [0, nused) may be taken */
    ce_dir_slot_t slot[CE_DIR_SLOTS];
};

/* State of a peer's directory in this rank. */
enum { CE_PEER_UNSEEN = 0, CE_PEER_MAPPED = 1, CE_PEER_OFF = 2 };

static uint64_t ld_acq(const volatile uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static size_t page_round(size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t p = page > 0 ? (size_t)page : 4096;

    return (bytes + p - 1) / p * p;
}

rmacoll_status_t rmacoll__ce_shared_init(rmacoll_transport_t *tp)
{
    int fd;
    void *m;

    struct rlimit rl;

    tp->dir_fd = -1;
    tp->dir = NULL;
    tp->owner_pid = getpid();
    for (int k = 0; k < CE_DIR_SLOTS; k++) {
        tp->own[k].addr = NULL;
        tp->own[k].fd = -1;
    }
    /* every allocation holds a file descriptor: leave most of them to the
     * application and the other transports */
    tp->slot_cap = CE_DIR_SLOTS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 < (rlim_t)CE_DIR_SLOTS) {
        tp->slot_cap = (int)(rl.rlim_cur / 4);
    }
    pthread_mutex_init(&tp->dir_lock, NULL);
    tp->peer_dir = calloc((size_t)tp->nranks, sizeof(*tp->peer_dir));
    tp->peer_dir_state = calloc((size_t)tp->nranks, sizeof(*tp->peer_dir_state));
    tp->peer_dir_fd = calloc((size_t)tp->nranks, sizeof(*tp->peer_dir_fd));
    tp->pidfd = malloc((size_t)tp->nranks * sizeof(*tp->pidfd));
    if (tp->peer_dir == NULL || tp->peer_dir_state == NULL || tp->peer_dir_fd == NULL ||
        tp->pidfd == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int p = 0; p < tp->nranks; p++) {
        tp->pidfd[p] = -1;
        tp->peer_dir_fd[p] = -1;
        tp->peer_dir_state[p] = CE_PEER_OFF; /* until _peer gives its directory */
    }
    fd = (int)memfd_create("rmacoll-ce-dir", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)sizeof(struct rmacoll__ce_dir)) != 0) {
        CE_LOG(tp, RMACOLL_LOG_INFO,
               "ce: no shared host memory (memfd: %s): rmacoll_mem_alloc makes ordinary "
               "allocations", strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return RMACOLL_SUCCESS;
    }
    m = mmap(NULL, sizeof(struct rmacoll__ce_dir), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return RMACOLL_SUCCESS;
    }
    tp->dir = m;
    tp->dir->magic = CE_DIR_MAGIC;
    tp->dir_fd = fd;
    return RMACOLL_SUCCESS;
}

void rmacoll__ce_shared_peer(rmacoll_transport_t *tp, int peer, int64_t dir_fd)
{
    tp->peer_dir_fd[peer] = dir_fd;
    tp->peer_dir_state[peer] = dir_fd >= 0 ? CE_PEER_UNSEEN : CE_PEER_OFF;
}

/* Duplicates the peer's fd into this process, or -1 (errno set). */
static int peer_fd(rmacoll_transport_t *tp, int peer, int64_t fd)
{
    if (tp->pidfd[peer] < 0) {
        tp->pidfd[peer] = (int)syscall(SYS_pidfd_open, tp->pids[peer], 0);
        if (tp->pidfd[peer] < 0) {
            return -1;
        }
    }
    return (int)syscall(SYS_pidfd_getfd, tp->pidfd[peer], (int)fd, 0);
}

static void peer_off(rmacoll_transport_t *tp, int peer, const char *what, int err)
{
    tp->peer_dir_state[peer] = CE_PEER_OFF;
    CE_LOG(tp, RMACOLL_LOG_INFO,
           "ce: rank %d: no direct copies into peer %d's shared allocations (%s: %s); "
           "cross-memory attach as for any buffer", tp->rank, peer, what, strerror(err));
}

static const struct rmacoll__ce_dir *peer_directory(rmacoll_transport_t *tp, int peer)
{
    int lfd;
    void *m;

    if (tp->peer_dir_state[peer] == CE_PEER_MAPPED) {
        return tp->peer_dir[peer];
    }
    if (tp->peer_dir_state[peer] == CE_PEER_OFF) {
        return NULL;
    }
    lfd = peer_fd(tp, peer, tp->peer_dir_fd[peer]);
    if (lfd < 0) {
        peer_off(tp, peer, "pidfd_getfd of its directory", errno);
        return NULL;
    }
    m = mmap(NULL, sizeof(struct rmacoll__ce_dir), PROT_READ, MAP_SHARED, lfd, 0);
    close(lfd);
    if (m == MAP_FAILED) {
        peer_off(tp, peer, "mmap of its directory", errno);
        return NULL;
    }
    if (((const struct rmacoll__ce_dir *)m)->magic != CE_DIR_MAGIC) {
        munmap(m, sizeof(struct rmacoll__ce_dir));
        peer_off(tp, peer, "its directory", EPROTO);
        return NULL;
    }
    tp->peer_dir[peer] = m;
    tp->peer_dir_state[peer] = CE_PEER_MAPPED;
    return m;
}

static void map_drop(rmacoll_transport_t *tp, int i)
{
    munmap(tp->maps[i].local, (size_t)tp->maps[i].bytes);
    tp->maps[i] = tp->maps[--tp->nmaps];
}

/* Maps slot s (read at sequence seq) of peer's directory d; NULL when the
 * slot changed meanwhile or the mapping fails (the put then takes CMA). */
static void *map_slot(rmacoll_transport_t *tp, int peer, const struct rmacoll__ce_dir *d,
                      int s, uint64_t seq, uint64_t addr, uint64_t bytes, uint64_t serial,
                      int64_t fd)
{
    struct stat sb;
    int lfd = peer_fd(tp, peer, fd);
    void *m;

    if (lfd < 0) {
        if (errno == ENOSYS || errno == EPERM) {
            peer_off(tp, peer, "pidfd_getfd", errno);
        }
        return NULL;
    }
    if (fstat(lfd, &sb) != 0 || (uint64_t)sb.st_size < bytes) {
        close(lfd);
        return NULL;
    }
    m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
    close(lfd);
    if (m == MAP_FAILED) {
        return NULL;
    }
    if (ld_acq(&d->slot[s].seq) != seq) { /* freed or replaced meanwhile */
        munmap(m, (size_t)bytes);
        return NULL;
    }
    /* a cached mapping of this peer overlapping the new one is of a freed
     * allocation: the owner's address range is now another's */
    for (int i = tp->nmaps - 1; i >= 0; i--) {
        if (tp->maps[i].peer == peer && tp->maps[i].raddr < addr + bytes &&
            addr < tp->maps[i].raddr + tp->maps[i].bytes) {
            map_drop(tp, i);
        }
    }
    if (tp->nmaps == CE_MAP_MAX) {
        map_drop(tp, 0); /* the oldest */
    }
    tp->maps[tp->nmaps].peer = peer;
    tp->maps[tp->nmaps].serial = serial;
    tp->maps[tp->nmaps].raddr = addr;
    tp->maps[tp->nmaps].bytes = bytes;
    tp->maps[tp->nmaps].local = m;
    tp->nmaps++;
    CE_LOG(tp, RMACOLL_LOG_DEBUG,
           "ce: rank %d maps peer %d's allocation %llu (%llu bytes at 0x%llx) for direct "
           "copies", tp->rank, peer, (unsigned long long)serial, (unsigned long long)bytes,
           (unsigned long long)addr);
    return m;
}

void *rmacoll__ce_shared_lookup(rmacoll_transport_t *tp, int peer, uint64_t dst,
                                uint64_t bytes)
{
    const struct rmacoll__ce_dir *d;
    uint64_t nused;

    if (tp->peer_dir_state == NULL || tp->peer_dir_state[peer] == CE_PEER_OFF) {
        return NULL;
    }
    d = peer_directory(tp, peer);
    if (d == NULL) {
        return NULL;
    }
    nused = ld_acq(&d->nused);
    for (uint64_t s = 0; s < nused && s < CE_DIR_SLOTS; s++) {
        const ce_dir_slot_t *e = &d->slot[s];
        uint64_t seq = ld_acq(&e->seq), addr, len, serial;
        int64_t fd;

        if (seq & 1) {
            continue;
        }
        addr = __atomic_load_n(&e->addr, __ATOMIC_RELAXED);
        len = __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
        serial = __atomic_load_n(&e->serial, __ATOMIC_RELAXED);
        fd = __atomic_load_n(&e->fd, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq || addr == 0 ||
            dst < addr || dst + bytes > addr + len || dst + bytes < dst) {
            continue;
        }
        for (int i = 0; i < tp->nmaps; i++) {
            if (tp->maps[i].peer == peer && tp->maps[i].serial == serial) {
                return (char *)tp->maps[i].local + (dst - addr);
            }
        }
        {
            char *m = map_slot(tp, peer, d, (int)s, seq, addr, len, serial, fd);

            return m != NULL ? m + (dst - addr) : NULL;
        }
    }
    return NULL;
}

/* Publishes own slot s in the directory (or, with addr 0, withdraws it). */
static void dir_publish(rmacoll_transport_t *tp, int s, uint64_t addr, uint64_t bytes, int fd)
{
    ce_dir_slot_t *e = &tp->dir->slot[s];

    __atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELAXED); /* odd */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (addr != 0) {
        __atomic_store_n(&e->bytes, bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&e->serial, ++tp->dir_serial, __ATOMIC_RELAXED);
        __atomic_store_n(&e->fd, (int64_t)fd, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&e->addr, addr, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE); /* even */
    if (addr != 0 && (uint64_t)s + 1 > tp->dir->nused) {
        __atomic_store_n(&tp->dir->nused, (uint64_t)s + 1, __ATOMIC_RELEASE);
    }
}

rmacoll_status_t rmacoll__ce_shared_alloc(rmacoll_transport_t *tp, size_t bytes, void **addr)
{
    size_t len = page_round(bytes);
    int s, fd;
    void *m;

    if (tp->dir == NULL || tp->unshared || getpid() != tp->owner_pid) {
        return RMACOLL_ERR_UNSUPPORTED; /* none, unshared, or a forked child */
    }
    pthread_mutex_lock(&tp->dir_lock);
    for (s = 0; s < tp->slot_cap && tp->own[s].addr != NULL; s++) {
    }
    if (s == tp->slot_cap) {
        pthread_mutex_unlock(&tp->dir_lock);
        CE_LOG(tp, RMACOLL_LOG_INFO,
               "ce: all %d shared allocation slots are taken (at most %d, and a quarter of "
               "RLIMIT_NOFILE: each holds a file descriptor)", tp->slot_cap, CE_DIR_SLOTS);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    fd = (int)memfd_create("rmacoll-mem", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        int err = errno;

        pthread_mutex_unlock(&tp->dir_lock);
        if (fd >= 0) {
            close(fd);
        }
        CE_LOG(tp, RMACOLL_LOG_INFO, "ce: memfd of %zu bytes: %s", len, strerror(err));
        return err == ENOMEM || err == ENOSPC ? RMACOLL_ERR_NO_MEMORY : RMACOLL_ERR_UNSUPPORTED;
    }
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        pthread_mutex_unlock(&tp->dir_lock);
        close(fd);
        return RMACOLL_ERR_NO_MEMORY;
    }
    /* huge pages where shmem allows them on request
     * (/sys/kernel/mm/transparent_hugepage/shmem_enabled = advise); a no-op
     * otherwise */
    (void)madvise(m, len, MADV_HUGEPAGE);
    tp->own[s].addr = m;
    tp->own[s].bytes = len;
    tp->own[s].fd = fd;
    tp->own[s].unshared = 0;
    dir_publish(tp, s, (uint64_t)(uintptr_t)m, (uint64_t)len, fd);
    pthread_mutex_unlock(&tp->dir_lock);
    *addr = m;
    return RMACOLL_SUCCESS;
}

int rmacoll__ce_shared_free(rmacoll_transport_t *tp, void *addr)
{
    int s;

    if (tp->dir == NULL || addr == NULL) {
        return 0;
    }
    pthread_mutex_lock(&tp->dir_lock);
    for (s = 0; s < CE_DIR_SLOTS && tp->own[s].addr != addr; s++) {
    }
    if (s < CE_DIR_SLOTS) {
        /* a forked child frees only its own view: the directory (shared
         * with the parent) and the parent's allocation stay */
        if (getpid() == tp->owner_pid && !tp->own[s].unshared) {
            dir_publish(tp, s, 0, 0, -1);
        }
        munmap(addr, tp->own[s].bytes);
        if (tp->own[s].fd >= 0) {
            close(tp->own[s].fd); /* after the slot changed: see the file comment */
        }
        tp->own[s].addr = NULL;
        tp->own[s].fd = -1;
    }
    pthread_mutex_unlock(&tp->dir_lock);
    return s < CE_DIR_SLOTS;
}

rmacoll_status_t rmacoll__ce_shared_unshare(rmacoll_transport_t *tp, void *addr, size_t bytes)
{
    rmacoll_status_t st = RMACOLL_SUCCESS;
    uintptr_t lo = (uintptr_t)addr, hi = lo + bytes;

    if (tp->dir == NULL || getpid() != tp->owner_pid) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&tp->dir_lock);
    tp->unshared = 1;
    for (int s = 0; s < CE_DIR_SLOTS; s++) {
        void *a = tp->own[s].addr, *copy;
        size_t len = tp->own[s].bytes;

        if (a == NULL || tp->own[s].unshared || (uintptr_t)a >= hi ||
            (uintptr_t)a + len <= lo) {
            continue; /* not in the range: other threads may be using it */
        }
        dir_publish(tp, s, 0, 0, -1); /* no peer maps it any more */
        /* private pages with the same contents replace the shared ones at
         * the same address (mremap is atomic for this process): peers'
         * mappings keep the memfd's pages, which nobody here reads */
        copy = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy == MAP_FAILED) {
            st = RMACOLL_ERR_NO_MEMORY;
            continue;
        }
        memcpy(copy, a, len);
        if (mremap(copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a) == MAP_FAILED) {
            munmap(copy, len);
            st = RMACOLL_ERR_NO_MEMORY;
            continue;
        }
        close(tp->own[s].fd);
        tp->own[s].fd = -1;
        tp->own[s].unshared = 1;
    }
    pthread_mutex_unlock(&tp->dir_lock);
    if (st != RMACOLL_SUCCESS) {
        CE_LOG(tp, RMACOLL_LOG_ERROR,
               "ce: rank %d: could not replace every shared allocation by a private copy "
               "(%s): a stopped node peer may still write into it", tp->rank,
               rmacoll_status_string(st));
    }
    return st;
}

void rmacoll__ce_shared_finalize(rmacoll_transport_t *tp)
{
    while (tp->nmaps > 0) {
        map_drop(tp, tp->nmaps - 1);
    }
    for (int p = 0; tp->peer_dir != NULL && p < tp->nranks; p++) {
        if (tp->peer_dir[p] != NULL) {
            munmap((void *)tp->peer_dir[p], sizeof(struct rmacoll__ce_dir));
        }
        if (tp->pidfd[p] >= 0) {
            close(tp->pidfd[p]);
        }
    }
    if (tp->dir != NULL) {
        /* allocations still live stay mapped (the core logged them); only
         * their fds close: the mappings keep the memory */
        for (int s = 0; s < CE_DIR_SLOTS; s++) {
            if (tp->own[s].addr != NULL && tp->own[s].fd >= 0) {
                close(tp->own[s].fd);
            }
        }
        munmap(tp->dir, sizeof(*tp->dir));
        close(tp->dir_fd);
    }
    free(tp->peer_dir);
    free(tp->peer_dir_state);
    free(tp->peer_dir_fd);
    free(tp->pidfd);
    tp->peer_dir = NULL;
    tp->peer_dir_state = NULL;
    tp->peer_dir_fd = NULL;
    tp->pidfd = NULL;
    tp->dir = NULL;
    pthread_mutex_destroy(&tp->dir_lock);
}
