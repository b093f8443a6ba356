/*
 * verbs_mr.c - memory registration of the ibverbs transport: a cache of
 * registrations under reg_lock (host entries live while referenced; CUDA
 * entries may stay idle, trusted while the allocation's buffer id holds),
 * CUDA memory through dma-buf first then ibv_reg_mr (nvidia-peermem), the
 * rkey handed to peers, and mem_revoke.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transports/verbs/verbs_priv.h"

static uint64_t verbs_cuda_buffer_id(rmacoll_transport_t *tp, uintptr_t addr)
{
    unsigned long long id = 0;

    if (tp->cuda.pointer_get_attribute == NULL ||
        tp->cuda.pointer_get_attribute(&id, VERBS_CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                       (unsigned long long)addr) != 0) {
        return 0;
    }
    return (uint64_t)id;
}

static void verbs_mem_free_entry(rmacoll_transport_t *tp, rmacoll_mem_t *m)
{
    rmacoll_mem_t **pp = &tp->regs;

    while (*pp != NULL && *pp != m) {
        pp = &(*pp)->next;
    }
    if (*pp == m) {
        *pp = m->next;
    }
    if (m->idle) {
        tp->idle_cuda--;
    }
    if (!m->revoked) {
        ibv_dereg_mr(m->mr);
    }
    free(m);
}

/* Registers CUDA memory: dma-buf first, then ibv_reg_mr (nvidia-peermem). */
static struct ibv_mr *verbs_reg_cuda(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                     int *dmabuf)
{
    struct ibv_mr *mr = NULL;

    *dmabuf = 0;
    if (tp->cuda.mem_get_handle_for_address_range != NULL) {
        long page = sysconf(_SC_PAGESIZE);
        uintptr_t ps = (uintptr_t)(page > 0 ? page : 4096);
        uintptr_t base = (uintptr_t)addr & ~(ps - 1);
        uintptr_t end = ((uintptr_t)addr + bytes + ps - 1) & ~(ps - 1);
        int fd = -1;
        int cr;

        cr = tp->cuda.mem_get_handle_for_address_range(&fd, (unsigned long long)base,
                                                        (size_t)(end - base),
                                                        VERBS_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                                        0);
        if (cr == 0 && fd >= 0) {
            mr = ibv_reg_dmabuf_mr(tp->pd, (uint64_t)((uintptr_t)addr - base), bytes,
                                   (uint64_t)(uintptr_t)addr, fd, VERBS_ACCESS);
            if (mr == NULL) {
                VERBS_LOG(tp, RMACOLL_LOG_DEBUG,
                          "ibv_reg_dmabuf_mr of %zu bytes at %p failed (%s); trying ibv_reg_mr",
                          bytes, addr, strerror(errno));
            } else {
                *dmabuf = 1;
            }
            close(fd);   /* the MR holds its own reference to the dma-buf */
        } else {
            VERBS_LOG(tp, RMACOLL_LOG_DEBUG,
                      "cuMemGetHandleForAddressRange(dma-buf) of %zu bytes at %p failed "
                      "(CUresult %d); trying ibv_reg_mr", bytes, addr, cr);
        }
    }
    if (mr == NULL) {
        mr = ibv_reg_mr(tp->pd, addr, bytes, VERBS_ACCESS);
    }
    return mr;
}

/* The descriptor of [a, a + bytes), which lies in m: the range asked for,
 * not m's whole region (the core addresses byte k of a registered range
 * as rkey->addr + k, rmacoll_transport.h; a cache hit on a larger region
 * starting below a would otherwise shift every write into it). */
static void verbs_fill_rkey(const rmacoll_mem_t *m, uintptr_t a, size_t bytes,
                            rmacoll_rkey_t *rkey)
{
    uint32_t key;

    if (rkey == NULL) {
        return;
    }
    memset(rkey, 0, sizeof(*rkey));
    rkey->addr = (uint64_t)a;
    rkey->bytes = (uint64_t)bytes;
    rkey->len = (uint32_t)sizeof(key);
    key = m->mr->rkey;
    memcpy(rkey->key, &key, sizeof(key));
}

/* Cache lookup, under reg_lock: a live entry of `type` covering
 * [a, a + bytes), taken (refs + 1, no longer idle), or NULL. Host entries
 * exist only while registered (refs > 0). CUDA entries may stay idle, and
 * are trusted only if the allocation's buffer id is unchanged (a freed and
 * re-allocated range gets a new id): a stale idle one is freed on the way. */
static rmacoll_mem_t *verbs_mem_lookup(rmacoll_transport_t *tp, uintptr_t a, size_t bytes,
                                       rmacoll_memtype_t type, uint64_t buffer_id)
{
    rmacoll_mem_t *m;

    for (m = tp->regs; m != NULL;) {
        rmacoll_mem_t *next = m->next;

        if (!m->revoked && m->type == type && a >= m->addr &&
            a + bytes <= m->addr + m->bytes) {
            if (type == RMACOLL_MEM_CUDA && m->buffer_id != buffer_id) {
                if (m->refs == 0) {
                    VERBS_LOG(tp, RMACOLL_LOG_DEBUG,
                              "cached registration at %p (%zu bytes) is stale "
                              "(buffer id %llu, now %llu); re-registering",
                              (void *)m->addr, m->bytes, (unsigned long long)m->buffer_id,
                              (unsigned long long)buffer_id);
                    verbs_mem_free_entry(tp, m);
                }
                m = next;
                continue;
            }
            if (m->idle) {
                m->idle = 0;
                tp->idle_cuda--;
            }
            m->refs++;
            return m;
        }
        m = next;
    }
    return NULL;
}

rmacoll_status_t rmacoll__verbs_mem_register(rmacoll_transport_t *tp, void *addr,
                                             size_t bytes, rmacoll_memtype_t type,
                                             rmacoll_mem_t **memp, rmacoll_rkey_t *rkey)
{
    uintptr_t a = (uintptr_t)addr;
    uint64_t buffer_id = 0;
    rmacoll_mem_t *m;
    struct ibv_mr *mr;
    int dmabuf = 0;

    if (tp == NULL || addr == NULL || bytes == 0 || memp == NULL ||
        (type != RMACOLL_MEM_HOST && type != RMACOLL_MEM_CUDA) || a + bytes < a) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&tp->reg_lock);
    if (type == RMACOLL_MEM_CUDA) {
        rmacoll__verbs_cuda_load(tp);
        buffer_id = verbs_cuda_buffer_id(tp, a);
    }
    m = verbs_mem_lookup(tp, a, bytes, type, buffer_id);
    if (m != NULL) {
        verbs_fill_rkey(m, a, bytes, rkey);
        *memp = m;
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_SUCCESS;
    }

    if (type == RMACOLL_MEM_CUDA) {
        mr = verbs_reg_cuda(tp, addr, bytes, &dmabuf);
    } else {
        mr = ibv_reg_mr(tp->pd, addr, bytes, VERBS_ACCESS);
    }
    if (mr == NULL) {
        int err = errno;

        pthread_mutex_unlock(&tp->reg_lock);
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "registering %zu bytes of %s memory at %p on %s failed: %s",
                  bytes, type == RMACOLL_MEM_CUDA ? "cuda" : "host", addr, tp->dev_name,
                  strerror(err));
        return RMACOLL_ERR_TRANSPORT;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        ibv_dereg_mr(mr);
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_ERR_NO_MEMORY;
    }
    m->addr = a;
    m->bytes = bytes;
    m->type = type;
    m->mr = mr;
    m->refs = 1;
    m->gen = ++tp->reg_gen;
    m->buffer_id = buffer_id;
    m->dmabuf = dmabuf;
    m->next = tp->regs;
    tp->regs = m;
    verbs_fill_rkey(m, a, bytes, rkey);
    *memp = m;
    pthread_mutex_unlock(&tp->reg_lock);
    VERBS_LOG(tp, RMACOLL_LOG_DEBUG,
              "registered %zu bytes of %s memory at %p%s: lkey 0x%x rkey 0x%x gen %llu",
              bytes, type == RMACOLL_MEM_CUDA ? "cuda" : "host", addr,
              dmabuf ? " (dma-buf)" : "", mr->lkey, mr->rkey, (unsigned long long)m->gen);
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__verbs_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    if (tp == NULL || mem == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&tp->reg_lock);
    if (mem->refs == 0) {
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (--mem->refs == 0) {
        if (mem->revoked) {
            verbs_mem_free_entry(tp, mem);
            pthread_mutex_unlock(&tp->reg_lock);
            return RMACOLL_SUCCESS;
        }
        /* Host memory: deregister now, so a freed and re-used range is
         * registered afresh (new MR, new rkey, new generation) and never
         * served by an MR pinning the old pages. CUDA memory with a known
         * buffer id may stay cached idle: the id catches reuse. */
        if (mem->type == RMACOLL_MEM_CUDA && mem->buffer_id != 0 &&
            tp->idle_cuda < VERBS_IDLE_CUDA_MAX) {
            mem->idle = 1;
            tp->idle_cuda++;
        } else {
            verbs_mem_free_entry(tp, mem);
        }
    }
    pthread_mutex_unlock(&tp->reg_lock);
    return RMACOLL_SUCCESS;
}

/* Revokes mem (the transport interface's mem_revoke): ibv_dereg_mr now,
 * whatever its references; the HCA then refuses the rkey (a late RDMA
 * WRITE fails at the writer with a remote access error). The entry leaves
 * the cache and is freed at its last mem_deregister. Not verified on
 * hardware here: that a write already in progress is cut off rests on the
 * HCA checking the key of every packet against the invalidated MR. */
rmacoll_status_t rmacoll__verbs_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    int rc = 0;

    if (tp == NULL || mem == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&tp->reg_lock);
    if (mem->refs == 0 && !mem->idle) {
        pthread_mutex_unlock(&tp->reg_lock);
        return RMACOLL_ERR_INVALID_ARG;
    }
    if (!mem->revoked) {
        rc = ibv_dereg_mr(mem->mr);
        if (rc == 0) {
            mem->revoked = 1;
            mem->mr = NULL;
        }
    }
    pthread_mutex_unlock(&tp->reg_lock);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "revoking the registration of %zu bytes at %p "
                  "on %s failed: %s", mem->bytes, (void *)mem->addr, tp->dev_name,
                  strerror(rc > 0 ? rc : errno));
        return RMACOLL_ERR_TRANSPORT;
    }
    VERBS_LOG(tp, RMACOLL_LOG_INFO, "revoked the registration of %zu bytes at %p",
              mem->bytes, (void *)mem->addr);
    return RMACOLL_SUCCESS;
}
