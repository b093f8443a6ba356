/*
 * mem.c - rmacoll_mem_alloc / rmacoll_mem_free: host memory for buffers of
 * a communicator's calls.
 *
 * The intra-node transport that carries host puts (the ce path's binding
 * for host memory) is asked first, through its mem_alloc op with
 * RMACOLL_MEM_HOST: memory it can share with its node peers, so that they
 * write into it without a system call. When it cannot (the op is missing,
 * the kernel lacks what it needs, its slots are taken) the core makes an
 * ordinary page-aligned, zero-filled allocation, which calls treat as any
 * buffer. Each allocation is remembered with who made it, so that free
 * returns it to the same place.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec/state.h"
#include "core/base/log.h"

typedef struct rmacoll__alloc {
    void *ptr;
    size_t bytes;
    int inst;                    /* index in comm->inst, or -1: posix_memalign */
    struct rmacoll__alloc *next;
} rmacoll__alloc_t;

static int inst_index(rmacoll_comm_t *comm, const rmacoll__tinst_t *t)
{
    return t == NULL ? -1 : (int)(t - comm->inst);
}

rmacoll_status_t rmacoll_mem_alloc(rmacoll_comm_t *comm, size_t bytes, void **ptr)
{
    rmacoll__tinst_t *t;
    rmacoll__alloc_t *a;
    rmacoll_status_t st = RMACOLL_ERR_UNSUPPORTED;
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;

    if (ptr != NULL) {
        *ptr = NULL;
    }
    if (comm == NULL || ptr == NULL || bytes == 0) {
        if (comm != NULL) {
            rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: rmacoll_mem_alloc: %s", comm->rank,
                         ptr == NULL ? "ptr is NULL" : "bytes is 0");
        }
        return RMACOLL_ERR_INVALID_ARG;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    t = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_HOST);
    if (t != NULL && t->tp != NULL) {
        st = t->ops->mem.mem_alloc(t->tp, bytes, RMACOLL_MEM_HOST, &p);
    }
    if (st == RMACOLL_SUCCESS && p != NULL) {
        a->inst = inst_index(comm, t);
    } else {
        rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_mem_alloc(%zu bytes): an ordinary allocation "
                     "(%s%s%s): node peers write into it as into any buffer",
                     comm->rank, bytes, t != NULL ? t->ops->name : "no intra-node transport",
                     t != NULL ? " cannot share host memory: " : "",
                     t != NULL ? rmacoll_status_string(st) : "");
        if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytes) != 0) {
            free(a);
            return RMACOLL_ERR_NO_MEMORY;
        }
        memset(p, 0, bytes);
        a->inst = -1;
    }
    a->ptr = p;
    a->bytes = bytes;
    pthread_mutex_lock(&comm->mem_lock);
    a->next = comm->allocs;
    comm->allocs = a;
    pthread_mutex_unlock(&comm->mem_lock);
    *ptr = p;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll_mem_free(rmacoll_comm_t *comm, void *ptr)
{
    rmacoll__alloc_t **pp, *a = NULL;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (ptr == NULL) {
        return RMACOLL_SUCCESS;
    }
    pthread_mutex_lock(&comm->mem_lock);
    for (pp = &comm->allocs; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->ptr == ptr) {
            a = *pp;
            *pp = a->next;
            break;
        }
    }
    pthread_mutex_unlock(&comm->mem_lock);
    if (a == NULL) {
        rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_mem_free: %p is not the start of a live "
                     "allocation of this communicator", comm->rank, ptr);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (a->inst >= 0) {
        rmacoll__tinst_t *t = &comm->inst[a->inst];

        t->ops->mem.mem_free(t->tp, a->ptr, RMACOLL_MEM_HOST);
    } else {
        free(a->ptr);
    }
    free(a);
    return RMACOLL_SUCCESS;
}

int rmacoll__mem_shared(rmacoll_comm_t *comm, const void *p, size_t bytes)
{
    uintptr_t lo = (uintptr_t)p;
    int shared = 0;

    if (p == NULL || bytes == 0) {
        return 0;
    }
    pthread_mutex_lock(&comm->mem_lock);
    for (const rmacoll__alloc_t *a = comm->allocs; a != NULL && !shared; a = a->next) {
        uintptr_t base = (uintptr_t)a->ptr;
        shared = a->inst >= 0 && lo >= base && bytes <= a->bytes && lo - base <= a->bytes - bytes;
    }
    pthread_mutex_unlock(&comm->mem_lock);
    return shared;
}

void rmacoll__mem_fini(rmacoll_comm_t *comm)
{
    rmacoll__alloc_t *a = comm->allocs, *next;
    size_t n = 0, bytes = 0;

    for (; a != NULL; a = next) {
        next = a->next;
        n++;
        bytes += a->bytes;
        free(a); /* the memory itself stays mapped: the caller may still use it */
    }
    comm->allocs = NULL;
    if (n > 0) {
        rmacoll__log(&comm->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_comm_destroy: %zu allocation(s) of "
                     "rmacoll_mem_alloc (%zu bytes) not freed; they stay mapped",
                     comm->rank, n, bytes);
    }
}
