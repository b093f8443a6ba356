/*
 * ofi_mr.c - memory registration of the libfabric transport: a cache of
 * OFI_MR_CACHE_MAX registrations keyed by address range (least recently
 * used unreferenced entry evicted; device entries told apart by their CUDA
 * buffer id), host memory with fi_mr_reg, device memory with fi_mr_regattr
 * (FI_HMEM_CUDA), the rkey handed to peers, and mem_revoke.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "transports/ofi/ofi_internal.h"

/* Device ordinal and CUDA buffer id of a device range to register. */
static rmacoll_status_t ofi_device_of(rmacoll_transport_t *tp, const void *addr,
                                      size_t bytes, int *device, uint64_t *buffer_id)
{
    if (!tp->hmem) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: cannot register %zu bytes of cuda memory at "
                "%p: provider '%s' was opened without FI_HMEM", bytes, addr,
                tp->info->fabric_attr->prov_name);
        return RMACOLL_ERR_UNSUPPORTED;
    }
#ifdef RMACOLL_OFI_CUDA
    if (rmacoll__cu_pointer_info(addr, device, buffer_id) == 0) {
        return RMACOLL_SUCCESS;
    }
#endif
    OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: %zu bytes at %p registered as cuda memory are "
            "not device memory", bytes, addr);
    return RMACOLL_ERR_INVALID_ARG;
}

/* Opens a registration: fi_mr_reg for host memory, fi_mr_regattr with
 * iface FI_HMEM_CUDA on `device` for device memory. */
int rmacoll__ofi_mr_open(rmacoll_transport_t *tp, void *addr, size_t bytes,
                         rmacoll_memtype_t type, int device, struct fid_mr **mr)
{
    uint64_t key = (tp->mr_mode & FI_MR_PROV_KEY) ? 0 : tp->next_key++;
    struct iovec iov = {.iov_base = addr, .iov_len = bytes};
    struct fi_mr_attr attr;

    if (type == RMACOLL_MEM_HOST) {
        return fi_mr_reg(tp->domain, addr, bytes, FI_REMOTE_WRITE | FI_WRITE, 0, key, 0,
                         mr, NULL);
    }
    memset(&attr, 0, sizeof(attr));
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_REMOTE_WRITE | FI_WRITE;
    attr.requested_key = key;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    /* ofi.hmem_device_only: FI_HMEM_DEVICE_ONLY (device memory proper,
     * cudaMalloc, never managed: ofi_device_of) lets shm move it GPU to
     * GPU over CUDA IPC instead of bouncing it through host memory (its
     * SAR protocol); off by default: with it, shm puts stalled on the GPU
     * machine (docs/transport-ofi.md) */
    return fi_mr_regattr(tp->domain, &attr, tp->hmem_flags, mr);
}

static void ofi_fill_rkey(const struct rmacoll_mem *m, const void *addr,
                          size_t bytes, int virt, rmacoll_rkey_t *rkey)
{
    memset(rkey, 0, sizeof(*rkey));
    rkey->addr = virt ? (uint64_t)(uintptr_t)addr
                      : (uint64_t)((const char *)addr - m->addr);
    rkey->bytes = bytes;
    rkey->len = sizeof(m->key);
    memcpy(rkey->key, &m->key, sizeof(m->key));
}

/* The cached registration of `type` covering [a, a + bytes), else NULL
 * with *slot a free slot (NULL: none) and *lru the least recently used
 * entry nobody references (NULL: none). A device entry covers the range
 * only with the same buffer id; one with another id and no references
 * (the range was freed and allocated again) is closed on the way. */
static struct rmacoll_mem *ofi_mr_lookup(rmacoll_transport_t *tp, const char *a,
                                         size_t bytes, rmacoll_memtype_t type,
                                         uint64_t buffer_id, struct rmacoll_mem **slot,
                                         struct rmacoll_mem **lru)
{
    *slot = NULL;
    *lru = NULL;
    for (int i = 0; i < OFI_MR_CACHE_MAX; i++) {
        struct rmacoll_mem *e = &tp->mrs[i];
        if (!e->used) {
            if (*slot == NULL) {
                *slot = e;
            }
            continue;
        }
        if (e->revoked) {
            continue; /* never handed out again; freed at refs 0 */
        }
        if (e->type == type && e->addr <= a && (size_t)(a - e->addr) + bytes <= e->bytes) {
            if (type == RMACOLL_MEM_CUDA && e->buffer_id != buffer_id) {
                /* the range was freed and allocated again: a new buffer */
                if (e->refs == 0) {
                    OFI_LOG(tp, RMACOLL_LOG_DEBUG, "ofi: cached registration of %zu bytes "
                            "at %p is stale (cuda buffer id %" PRIu64 ", now %" PRIu64
                            "); registering again", e->bytes, (void *)e->addr,
                            e->buffer_id, buffer_id);
                    fi_close(&e->mr->fid);
                    e->used = 0;
                    if (*slot == NULL) {
                        *slot = e;
                    }
                }
                continue;
            }
            return e;
        }
        if (e->refs == 0 && (*lru == NULL || e->last_use < (*lru)->last_use)) {
            *lru = e;
        }
    }
    return NULL;
}

/* Registers [addr, addr + bytes) into the cache entry m (zeroed here):
 * opens it, binds it to the endpoint (FI_MR_ENDPOINT), takes its key and
 * descriptor. On failure m stays unused. */
static rmacoll_status_t ofi_mr_create(rmacoll_transport_t *tp, struct rmacoll_mem *m,
                                      void *addr, size_t bytes, rmacoll_memtype_t type,
                                      int device, uint64_t buffer_id)
{
    int ret;

    memset(m, 0, sizeof(*m));
    ret = rmacoll__ofi_mr_open(tp, addr, bytes, type, device, &m->mr);
    if (ret == 0 && type == RMACOLL_MEM_CUDA && !(tp->hmem_flags & FI_HMEM_DEVICE_ONLY)) {
        tp->dev_fence = 1; /* sticky: cheap, and a peer may still write it */
    }
    if (ret != 0) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: %s of %zu bytes of %s memory at %p "
                "failed: %s", type == RMACOLL_MEM_CUDA ? "fi_mr_regattr" : "fi_mr_reg",
                bytes, type == RMACOLL_MEM_CUDA ? "cuda" : "host", addr,
                fi_strerror(-ret));
        return RMACOLL_ERR_TRANSPORT;
    }
    if (tp->mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(m->mr, &tp->ep->fid, 0);
        if (ret == 0) {
            ret = fi_mr_enable(m->mr);
        }
        if (ret != 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR,
                    "ofi: binding the registration of %zu bytes failed: %s", bytes,
                    fi_strerror(-ret));
            fi_close(&m->mr->fid);
            return RMACOLL_ERR_TRANSPORT;
        }
    }
    m->key = fi_mr_key(m->mr);
    if (m->key == FI_KEY_NOTAVAIL) {
        OFI_LOG(tp, RMACOLL_LOG_ERROR,
                "ofi: provider gave no 64-bit key for %zu bytes (FI_MR_RAW unsupported)",
                bytes);
        fi_close(&m->mr->fid);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    m->desc = fi_mr_desc(m->mr);
    m->addr = addr;
    m->bytes = bytes;
    m->type = type;
    m->buffer_id = buffer_id;
    m->used = 1;
    if (type == RMACOLL_MEM_CUDA) {
        OFI_LOG(tp, RMACOLL_LOG_DEBUG, "ofi: registered %zu bytes of cuda memory at %p "
                "(device %d, buffer id %" PRIu64 ")", bytes, addr, device, buffer_id);
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ofi_mem_register(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                           rmacoll_memtype_t type, rmacoll_mem_t **mem,
                                           rmacoll_rkey_t *rkey)
{
    struct rmacoll_mem *m, *lru, *slot;
    int virt = (tp->mr_mode & FI_MR_VIRT_ADDR) != 0;
    int device = -1;
    uint64_t buffer_id = 0;

    if (addr == NULL || bytes == 0 || mem == NULL ||
        (type != RMACOLL_MEM_HOST && type != RMACOLL_MEM_CUDA)) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    OFI_CU_BIND(tp);
    if (type == RMACOLL_MEM_CUDA) {
        rmacoll_status_t st = ofi_device_of(tp, addr, bytes, &device, &buffer_id);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    tp->use_clock++;
    m = ofi_mr_lookup(tp, addr, bytes, type, buffer_id, &slot, &lru);
    if (m == NULL) {
        rmacoll_status_t st;

        if (slot == NULL) {
            if (lru == NULL) {
                OFI_LOG(tp, RMACOLL_LOG_ERROR,
                        "ofi: registration cache full (%d regions in use), cannot "
                        "register %zu bytes", OFI_MR_CACHE_MAX, bytes);
                return RMACOLL_ERR_NO_MEMORY;
            }
            /* only an entry nobody references: a live registration (a
             * call's, or one held for rmacoll_mem_register) never goes */
            OFI_LOG(tp, RMACOLL_LOG_DEBUG, "ofi: registration cache full (%d regions): "
                    "evicting the least recently used unreferenced one, %zu bytes at %p",
                    OFI_MR_CACHE_MAX, lru->bytes, (void *)lru->addr);
            fi_close(&lru->mr->fid);
            lru->used = 0;
            slot = lru;
        }
        m = slot;
        st = ofi_mr_create(tp, m, addr, bytes, type, device, buffer_id);
        if (st != RMACOLL_SUCCESS) {
            return st;
        }
    }
    m->refs++;
    m->last_use = tp->use_clock;
    if (rkey != NULL) {
        ofi_fill_rkey(m, addr, bytes, virt, rkey);
    }
    *mem = m;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__ofi_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    if (mem == NULL || mem < &tp->mrs[0] || mem >= &tp->mrs[OFI_MR_CACHE_MAX] ||
        !mem->used || mem->refs == 0) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    OFI_CU_BIND(tp);
    /* device registrations whose buffer id is known stay cached: the id
     * catches a range freed and allocated again */
    if (--mem->refs == 0 &&
        (mem->revoked || (!tp->keep_unused_mr &&
                          !(mem->type == RMACOLL_MEM_CUDA && mem->buffer_id != 0)))) {
        if (!mem->revoked) {
            fi_close(&mem->mr->fid);
        }
        mem->used = 0;
        mem->revoked = 0;
    }
    return RMACOLL_SUCCESS;
}

/* Revokes mem (the transport interface's mem_revoke). Closing the MR stops
 * new writes to it, but a provider that copies on the target keeps writing
 * a message it already matched to the MR: libfabric 1.17 tcp;ofi_rxm
 * completed a 64 MiB write, all of it landing, after the target had closed
 * the MR halfway through (docs/transport-ofi.md). Those providers copy
 * only while this process drives progress, so the instance also stops
 * driving it (cut off): nothing is read from the network any more, and a
 * writer's puts stall or fail at the writer. Closing the endpoint instead
 * would cut the connections too, but rxm's endpoint close crashed when a
 * write was in flight both ways. The core revokes only when the
 * communicator broke, so nothing else is lost; finalize closes the rest. */
rmacoll_status_t rmacoll__ofi_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    int ret;

    if (mem == NULL || mem < &tp->mrs[0] || mem >= &tp->mrs[OFI_MR_CACHE_MAX] ||
        !mem->used) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    tp->cut_off = 1;
    ofi_fail(tp, RMACOLL_ERR_PEER, -1);
    if (!mem->revoked) {
        ret = fi_close(&mem->mr->fid);
        if (ret != 0) {
            OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: closing the registration of %zu bytes "
                    "at %p failed: %s", mem->bytes, (void *)mem->addr, fi_strerror(-ret));
            return RMACOLL_ERR_TRANSPORT;
        }
        mem->revoked = 1;
        mem->mr = NULL;
        mem->desc = NULL;
    }
    OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: rank %d: registration of %zu bytes revoked, "
            "progress stopped: no remote write lands here any more", tp->env.rank,
            mem->bytes);
    return RMACOLL_SUCCESS;
}
