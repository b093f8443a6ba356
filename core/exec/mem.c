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
 *
 * rmacoll_mem_register / rmacoll_mem_deregister: memory the caller
 * allocated, registered once with the network transport (the proxy's
 * instance) and remembered; a call's send or receive buffer inside a live
 * registration borrows it (rmacoll__call_register) instead of registering
 * per call: the same rmacoll_mem_t, and the registration's rkey advanced
 * to the buffer's start (the transport header's rkey contract). The
 * memory type comes from the instances' mem_type op (none can tell: host).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec/state.h"
#include "core/base/log.h"
#include "core/ctrl/proxy.h"

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

/* ---- user registrations (rmacoll_mem_register) ---- */

struct rmacoll_memreg {
    void *ptr;
    size_t bytes;
    rmacoll_memtype_t type;
    rmacoll_mem_t *mem;          /* the network registration, or NULL: tracked only */
    rmacoll_rkey_t rkey;         /* of [ptr, ptr + bytes) (mem != NULL) */
    struct rmacoll_memreg *next;
};

static const char *type_name(rmacoll_memtype_t t)
{
    return t == RMACOLL_MEM_CUDA ? "device" : "host";
}

/* The memory type of p: the first instance that can tell, else host. */
static rmacoll_memtype_t mem_type_of(rmacoll_comm_t *comm, const void *p)
{
    for (int i = 0; i < comm->bp.ninst; i++) {
        rmacoll__tinst_t *t = &comm->inst[i];
        rmacoll_memtype_t type = RMACOLL_MEM_HOST;

        if (t->tp != NULL && t->ops->mem.mem_type(t->tp, p, &type) == RMACOLL_SUCCESS) {
            return type == RMACOLL_MEM_CUDA ? RMACOLL_MEM_CUDA : RMACOLL_MEM_HOST;
        }
    }
    return RMACOLL_MEM_HOST;
}

rmacoll_status_t rmacoll_mem_register(rmacoll_comm_t *comm, void *ptr, size_t bytes,
                                      rmacoll_memreg_t **handle)
{
    rmacoll__proxy_t *px;
    rmacoll_memreg_t *r;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    const char *why = NULL;
    int net;

    if (handle != NULL) {
        *handle = NULL;
    }
    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    why = handle == NULL                      ? "handle is NULL"
          : ptr == NULL                       ? "ptr is NULL"
          : bytes == 0                        ? "bytes is 0"
          : (uintptr_t)ptr + bytes < (uintptr_t)ptr ? "ptr + bytes wraps around the "
                                                      "address space"
                                              : NULL;
    if (why != NULL) {
        rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_mem_register: %s", comm->rank, why);
        return RMACOLL_ERR_INVALID_ARG;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    r->ptr = ptr;
    r->bytes = bytes;
    r->type = mem_type_of(comm, ptr);
    px = &comm->proxy;
    /* device memory goes to the network only where device calls cross
     * nodes registered (hmem); staged calls never register it */
    net = px->tp != NULL && (r->type == RMACOLL_MEM_HOST || comm->hmem);
    if (net) {
        st = rmacoll__proxy_register_type(px, ptr, bytes, r->type, &r->mem, &r->rkey);
        if (st != RMACOLL_SUCCESS) {
            rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                         "rank %d: rmacoll_mem_register: cannot register %zu bytes of %s "
                         "memory at %p with %s: %s", comm->rank, bytes, type_name(r->type),
                         ptr, px->ops->name, rmacoll_status_string(st));
            free(r);
            return st;
        }
        if (r->type == RMACOLL_MEM_CUDA) {
            atomic_fetch_add(&comm->stats.device_registered_bytes, bytes);
        }
    }
    rmacoll__log(&comm->log, RMACOLL_LOG_DEBUG, RMACOLL_LOG_SUBSYS_CORE,
                 "rank %d: rmacoll_mem_register: %zu bytes of %s memory at %p %s", comm->rank,
                 bytes, type_name(r->type), ptr,
                 net ? "registered with the network transport"
                     : px->tp == NULL ? "tracked (no network transport)"
                                      : "tracked (device calls across nodes are staged)");
    pthread_mutex_lock(&comm->mem_lock);
    r->next = comm->memregs;
    comm->memregs = r;
    pthread_mutex_unlock(&comm->mem_lock);
    atomic_fetch_add(&comm->stats.memreg_handles, 1);
    atomic_fetch_add(&comm->stats.memreg_bytes, bytes);
    *handle = r;
    return RMACOLL_SUCCESS;
}

/* Releases r's network registration; r is off the list. */
static void memreg_release(rmacoll_comm_t *comm, rmacoll_memreg_t *r)
{
    rmacoll__proxy_deregister(&comm->proxy, r->mem); /* NULL: tracked only */
    atomic_fetch_sub(&comm->stats.memreg_handles, 1);
    atomic_fetch_sub(&comm->stats.memreg_bytes, r->bytes);
    free(r);
}

rmacoll_status_t rmacoll_mem_deregister(rmacoll_comm_t *comm, rmacoll_memreg_t *handle)
{
    rmacoll_memreg_t **pp, *r = NULL;

    if (comm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (handle == NULL) {
        rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_mem_deregister: handle is NULL", comm->rank);
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&comm->mem_lock);
    for (pp = &comm->memregs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == handle) {
            r = *pp;
            *pp = r->next;
            break;
        }
    }
    pthread_mutex_unlock(&comm->mem_lock);
    if (r == NULL) {
        /* not dereferenced: it may be freed memory */
        rmacoll__log(&comm->log, RMACOLL_LOG_ERROR, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_mem_deregister: handle %p is not a live registration "
                     "of this communicator (deregistered already, or made on another)",
                     comm->rank, (void *)handle);
        return RMACOLL_ERR_INVALID_ARG;
    }
    memreg_release(comm, r);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__call_register(rmacoll_comm_t *comm, const void *buf, uint64_t bytes,
                                        rmacoll_memtype_t type, rmacoll_mem_t **mem,
                                        rmacoll_rkey_t *rkey, uint8_t *user)
{
    rmacoll__proxy_t *px = &comm->proxy;
    uintptr_t lo = (uintptr_t)buf;
    const rmacoll_memreg_t *hit = NULL;
    rmacoll_status_t st;

    *user = 0;
    if (px->tp == NULL || bytes == 0 || buf == NULL) {
        return RMACOLL_SUCCESS; /* as rmacoll__proxy_register: nothing to register */
    }
    pthread_mutex_lock(&comm->mem_lock);
    for (const rmacoll_memreg_t *r = comm->memregs; r != NULL && hit == NULL; r = r->next) {
        uintptr_t base = (uintptr_t)r->ptr;

        if (r->mem != NULL && r->type == type && lo >= base && bytes <= r->bytes &&
            lo - base <= r->bytes - bytes) {
            hit = r;
            *mem = r->mem;
            if (rkey != NULL) {
                *rkey = r->rkey;
                rkey->addr += lo - base;
                rkey->bytes = bytes;
            }
        }
    }
    pthread_mutex_unlock(&comm->mem_lock);
    if (hit != NULL) {
        *user = 1;
        atomic_fetch_add(&comm->stats.memreg_buffers, 1);
        return RMACOLL_SUCCESS;
    }
    st = rmacoll__proxy_register_type(px, buf, bytes, type, mem, rkey);
    if (st == RMACOLL_SUCCESS) {
        atomic_fetch_add(&comm->stats.call_registrations, 1);
    }
    return st;
}

void rmacoll__call_deregister(rmacoll_comm_t *comm, rmacoll_mem_t *mem, uint8_t user)
{
    if (!user) {
        rmacoll__proxy_deregister(&comm->proxy, mem);
    }
}

void rmacoll__memreg_fini(rmacoll_comm_t *comm)
{
    rmacoll_memreg_t *r = comm->memregs, *next;
    size_t n = 0, bytes = 0;

    comm->memregs = NULL;
    for (; r != NULL; r = next) {
        next = r->next;
        n++;
        bytes += r->bytes;
        memreg_release(comm, r);
    }
    if (n > 0) {
        rmacoll__log(&comm->log, RMACOLL_LOG_WARN, RMACOLL_LOG_SUBSYS_CORE,
                     "rank %d: rmacoll_comm_destroy: %zu registration(s) of "
                     "rmacoll_mem_register (%zu bytes) not deregistered; released",
                     comm->rank, n, bytes);
    }
}
