/*
 * ofi_ipc_warm.c - the first CUDA IPC write of libfabric shm, made at init
 * (ofi.hmem_device_only, issue 32).
 *
 * With FI_HMEM_DEVICE_ONLY, shm moves device memory over CUDA IPC: the
 * target's progress engine copies from the source's mapped buffer, and its
 * first such copy in a process creates libfabric's pool of 128 CUDA
 * streams and events (cuda_ipc_event_pool_init, src/hmem_cuda.c). On the
 * GPU machine (2026-12-07) that creation did not return while the rank's
 * own device call waited (the calling thread in cudaStreamSynchronize, the
 * call's stream in a wait on a signal that needed that copy): the stacks
 * of the stalled ranks (scripts/gpu/shm_ipc_stacks.sh) end in cuStreamCreate
 * under smr_progress_ipc, and the peers saw the rank's heartbeat stop. So
 * every rank receives one IPC write here, while nothing of rmacoll waits on
 * the GPU: rank r writes 8 bytes of a device buffer into rank r + 1's, and
 * each drives its completion queue until its write completed and the
 * incoming one landed. A failure on any rank fails init on every rank
 * (RMACOLL_ERR_TRANSPORT, saying to turn ofi.hmem_device_only off): a
 * write or completion of the warm-up may still come, into a completion
 * queue the transport would then misread. Not yet run on a GPU (no device
 * time was left in the session that wrote it): scripts/gpu/shm_ipc_stacks.sh
 * runs it.
 */
#include "transports/ofi/ofi_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#ifdef RMACOLL_OFI_CUDA
#include "transports/common/cuda_common.h"
#include "transports/common/tclock.h"

typedef struct warm_addr {
    uint64_t addr, key;
} warm_addr_t;

/* One read of the CQ: this rank's write completed (*sent), the incoming
 * one landed (*got); -1 on a failed completion. */
static int warm_poll(rmacoll_transport_t *tp, void *ctx, int *sent, int *got)
{
    struct fi_cq_data_entry ent[8];
    ssize_t n = fi_cq_read(tp->cq, ent, 8);

    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;

        memset(&err, 0, sizeof(err));
        fi_cq_readerr(tp->cq, &err, 0);
        OFI_LOG(tp, RMACOLL_LOG_WARN, "ofi: the CUDA IPC warm-up write failed: %s",
                fi_strerror(err.err));
        return -1;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (ent[i].op_context == ctx) {
            *sent = 1;
        } else if (ent[i].flags & FI_REMOTE_CQ_DATA) {
            *got = 1;
        }
    }
    return 0;
}

/* Polls until both came (0), a failure or the deadline (-1). */
static int warm_drive(rmacoll_transport_t *tp, void *ctx, int *sent, int *got,
                      uint64_t deadline_ns)
{
    while (!*sent || !*got) {
        if (warm_poll(tp, ctx, sent, got) != 0) {
            return -1;
        }
        if (rmacoll__tclock_ns() > deadline_ns) {
            OFI_LOG(tp, RMACOLL_LOG_WARN, "ofi: the CUDA IPC warm-up write did not %s in "
                    "time", !*sent ? "complete" : "arrive");
            return -1;
        }
    }
    return 0;
}

rmacoll_status_t rmacoll__ofi_ipc_warm(rmacoll_transport_t *tp)
{
    const rmacoll_transport_env_t *env = &tp->env;
    int n = env->nranks, me = env->rank, next = (me + 1) % n, ok = 1, sent = 0, got = 0;
    int wrote = 0;
    int device = -1;
    void *buf = NULL, *desc;
    struct fid_mr *mr = NULL;
    warm_addr_t mine, *all = NULL;
    struct fi_context2 ctx;
    int32_t verdict, *verdicts = NULL;

    if (!tp->hmem || !(tp->hmem_flags & FI_HMEM_DEVICE_ONLY) || n < 2 ||
        strcmp(tp->info->fabric_attr->prov_name, "shm") != 0) {
        return RMACOLL_SUCCESS;
    }
    memset(&mine, 0, sizeof(mine));
    buf = rmacoll__cu_probe_alloc(4096, &device);
    ok = buf != NULL && rmacoll__ofi_mr_open(tp, buf, 4096, RMACOLL_MEM_CUDA, device, &mr) == 0;
    if (ok && (tp->mr_mode & FI_MR_ENDPOINT)) {
        ok = fi_mr_bind(mr, &tp->ep->fid, 0) == 0 && fi_mr_enable(mr) == 0;
    }
    if (ok) {
        mine.key = fi_mr_key(mr);
        mine.addr = (tp->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
    }
    all = calloc((size_t)n, sizeof(*all));
    verdicts = calloc((size_t)n, sizeof(*verdicts));
    /* collective from here on: every rank takes part in both allgathers */
    if (all == NULL || verdicts == NULL ||
        env->allgather(env->oob_ctx, &mine, all, sizeof(mine)) != RMACOLL_SUCCESS) {
        ok = 0;
    }
    if (ok) {
        uint64_t deadline = rmacoll__tclock_ns() + (tp->timeout_ns < 10000000000ull
                                                        ? tp->timeout_ns
                                                        : 10000000000ull);
        struct iovec iov = {.iov_base = buf, .iov_len = 8};
        struct fi_rma_iov rma = {.addr = all[next].addr, .len = 8, .key = all[next].key};
        struct fi_msg_rma msg;
        ssize_t ret;

        desc = fi_mr_desc(mr);
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.desc = &desc;
        msg.iov_count = 1;
        msg.addr = tp->peers[next].addr;
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &ctx;
        msg.data = 0;
        do {
            ret = fi_writemsg(tp->ep, &msg,
                              FI_COMPLETION | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA);
        } while (ret == -FI_EAGAIN && warm_poll(tp, &ctx, &sent, &got) == 0 &&
                 rmacoll__tclock_ns() < deadline);
        wrote = ret == 0;
        ok = wrote && warm_drive(tp, &ctx, &sent, &got, deadline) == 0;
    }
    /* the same outcome everywhere: init fails on every rank if any rank failed */
    verdict = ok;
    if (verdicts == NULL ||
        env->allgather(env->oob_ctx, &verdict, verdicts, sizeof(verdict)) != RMACOLL_SUCCESS) {
        ok = 0;
    }
    for (int r = 0; r < n && ok; r++) {
        ok = verdicts[r];
    }
    if (!ok) {
        /* a write or a completion may still come: the endpoint is closed by
         * the failed init rather than left with a completion queue that may
         * hold this function's entries */
        OFI_LOG(tp, RMACOLL_LOG_ERROR, "ofi: rank %d: the CUDA IPC warm-up of shm failed on "
                "this or another rank (ofi.hmem_device_only): turn it off "
                "(RMACOLL_OFI_HMEM_DEVICE_ONLY=0), and device memory goes through shm's "
                "host bounce buffers", me);
    } else {
        OFI_LOG(tp, RMACOLL_LOG_INFO, "ofi: rank %d: CUDA IPC warm-up of shm done (rank %d "
                "wrote here)", me, (me + n - 1) % n);
    }
    if (ok || !wrote || (sent && got)) {
        if (mr != NULL) {
            fi_close(&mr->fid);
        }
        rmacoll__cu_probe_free(buf); /* NULL-safe */
    } /* else a write may still be in flight: 4 KiB left to the process */
    free(all);
    free(verdicts);
    return ok ? RMACOLL_SUCCESS : RMACOLL_ERR_TRANSPORT;
}
#endif
