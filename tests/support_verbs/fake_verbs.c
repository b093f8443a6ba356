/*
 * fake_verbs.c - the fake ibverbs device of fake_verbs.h: __wrap_ibv_*
 * replacements for the exported verbs, an ops table for the inline data
 * path, and a wire that plays recorded work requests back like an RC NIC.
 */
#include "fake_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_OBJ 64
#define FAKE_MAX_MR 256
#define FAKE_MAX_WRS 65536
#define FAKE_RQ_MAX 4096

typedef struct fake_ctx {
    struct ibv_context ctx;
    int dev;                 /* index into the device table */
    int live;
} fake_ctx_t;

typedef struct fake_pd {
    struct ibv_pd pd;
    int live;
} fake_pd_t;

typedef struct fake_cqe {
    struct ibv_wc wc;
    struct fake_qp *sq_owner;   /* send completion: frees SQ slots when polled */
    uint64_t sq_pos;            /* 1-based position of the WR in its SQ */
} fake_cqe_t;

typedef struct fake_cq {
    struct ibv_cq cq;
    fake_cqe_t *q;
    size_t cap, head, count;
    int live;
} fake_cq_t;

typedef struct fake_swr {
    fake_verbs_wr_rec_t rec;
    uint64_t sq_pos;
} fake_swr_t;

typedef struct fake_qp {
    struct ibv_qp qp;
    int live;
    struct ibv_qp_cap cap;
    struct ibv_qp_attr init_attr, rtr_attr, rts_attr;
    fake_swr_t *sq;               /* pending send WRs (ring) */
    size_t sq_cap, sq_head, sq_count;
    uint64_t sq_posted, sq_freed;
    uint64_t rq[FAKE_RQ_MAX];     /* posted receive wr_ids (ring) */
    size_t rq_head, rq_count;
    uint32_t max_outstanding, post_rejects;
} fake_qp_t;

typedef struct fake_mr {
    struct ibv_mr mr;
    int live;
    int access;
    uint64_t iova;
} fake_mr_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_verbs_config_t g_cfg;
static struct ibv_device g_devs[FAKE_VERBS_MAX_DEVICES];
static fake_ctx_t *g_ctx[FAKE_MAX_OBJ];
static fake_pd_t *g_pd[FAKE_MAX_OBJ];
static fake_cq_t *g_cq[FAKE_MAX_OBJ];
static fake_qp_t *g_qp[FAKE_MAX_OBJ];
static fake_mr_t *g_mr[FAKE_MAX_MR];
static int g_nctx, g_npd, g_ncq, g_nqp, g_nmr;
static fake_verbs_wr_rec_t *g_wrs;
static size_t g_nwrs;
static fake_verbs_counts_t g_counts;
static int g_budget = 1000000;
static enum ibv_wc_status g_fail_next = IBV_WC_SUCCESS;
static int g_fail_reg;
static fake_verbs_dmabuf_rec_t g_dmabuf;
static int g_passthrough;                 /* device list from the real libibverbs */
static struct ibv_device **g_real_list;

/* ------------------------------------------------------------ helpers */

static void fake_free_all(void)
{
    for (int i = 0; i < g_nctx; i++) {
        free(g_ctx[i]);
    }
    for (int i = 0; i < g_npd; i++) {
        free(g_pd[i]);
    }
    for (int i = 0; i < g_ncq; i++) {
        free(g_cq[i]->q);
        free(g_cq[i]);
    }
    for (int i = 0; i < g_nqp; i++) {
        free(g_qp[i]->sq);
        free(g_qp[i]);
    }
    for (int i = 0; i < g_nmr; i++) {
        free(g_mr[i]);
    }
    g_nctx = g_npd = g_ncq = g_nqp = g_nmr = 0;
    free(g_wrs);
    g_wrs = NULL;
    g_nwrs = 0;
}

static fake_qp_t *fake_qp_by_num(uint32_t qpn)
{
    for (int i = 0; i < g_nqp; i++) {
        if (g_qp[i]->live && g_qp[i]->qp.qp_num == qpn) {
            return g_qp[i];
        }
    }
    return NULL;
}

static fake_mr_t *fake_mr_by_key(struct ibv_pd *pd, uint32_t key, int remote)
{
    for (int i = 0; i < g_nmr; i++) {
        fake_mr_t *m = g_mr[i];

        if (m->live && m->mr.pd == pd && (remote ? m->mr.rkey : m->mr.lkey) == key) {
            return m;
        }
    }
    return NULL;
}

static void fake_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc, fake_qp_t *owner,
                         uint64_t sq_pos)
{
    fake_cq_t *c = (fake_cq_t *)cq;
    fake_cqe_t *e;

    if (c->count == c->cap) {
        g_counts.cq_overflows++;
        return;
    }
    e = &c->q[(c->head + c->count) % c->cap];
    e->wc = *wc;
    e->sq_owner = owner;
    e->sq_pos = sq_pos;
    c->count++;
}

/* Moves q to the error state: its posted receives flush. */
static void fake_qp_error(fake_qp_t *q)
{
    if (q->qp.state == IBV_QPS_ERR) {
        return;
    }
    q->qp.state = IBV_QPS_ERR;
    while (q->rq_count > 0) {
        struct ibv_wc wc;

        memset(&wc, 0, sizeof(wc));
        wc.wr_id = q->rq[q->rq_head];
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.qp_num = q->qp.qp_num;
        fake_cq_push(q->qp.recv_cq, &wc, NULL, 0);
        q->rq_head = (q->rq_head + 1) % FAKE_RQ_MAX;
        q->rq_count--;
    }
}

static void fake_send_completion(fake_qp_t *s, const fake_swr_t *w, enum ibv_wc_status st)
{
    struct ibv_wc wc;

    if (st == IBV_WC_SUCCESS && !(w->rec.send_flags & IBV_SEND_SIGNALED)) {
        return;   /* unsignalled success: no CQE */
    }
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = w->rec.wr_id;
    wc.status = st;
    wc.opcode = IBV_WC_RDMA_WRITE;
    wc.qp_num = s->qp.qp_num;
    wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x42;
    fake_cq_push(s->qp.send_cq, &wc, s, w->sq_pos);
}

/* Executes the head WR of s. Returns 1 if it ran, 0 if it must wait (RNR). */
static int fake_execute(fake_qp_t *s)
{
    fake_swr_t *w = &s->sq[s->sq_head];
    fake_qp_t *t = fake_qp_by_num(w->rec.dest_qpn);
    enum ibv_wc_status st = IBV_WC_SUCCESS;
    fake_mr_t *lm = NULL;
    fake_mr_t *rm = NULL;
    int imm = w->rec.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

    if (s->qp.state == IBV_QPS_ERR) {
        st = IBV_WC_WR_FLUSH_ERR;
    } else if (g_fail_next != IBV_WC_SUCCESS) {
        st = g_fail_next;
        g_fail_next = IBV_WC_SUCCESS;
    } else if (t == NULL || t->qp.state < IBV_QPS_RTR || t->rtr_attr.dest_qp_num != s->qp.qp_num) {
        st = IBV_WC_RETRY_EXC_ERR;   /* nobody answers */
    } else if (t->qp.state == IBV_QPS_ERR) {
        st = IBV_WC_REM_OP_ERR;
    } else if (w->rec.length > 0) {
        lm = fake_mr_by_key(s->qp.pd, w->rec.lkey, 0);
        rm = fake_mr_by_key(t->qp.pd, w->rec.rkey, 1);
        if (lm == NULL || w->rec.laddr < (uint64_t)(uintptr_t)lm->mr.addr ||
            w->rec.laddr + w->rec.length > (uint64_t)(uintptr_t)lm->mr.addr + lm->mr.length) {
            st = IBV_WC_LOC_PROT_ERR;
        } else if (rm == NULL || !(rm->access & IBV_ACCESS_REMOTE_WRITE) ||
                   w->rec.remote_addr < rm->iova ||
                   w->rec.remote_addr + w->rec.length > rm->iova + rm->mr.length) {
            st = IBV_WC_REM_ACCESS_ERR;
        }
    }
    if (st == IBV_WC_SUCCESS && imm && t->rq_count == 0) {
        return 0;   /* receiver not ready: RNR NAK, retried later */
    }
    if (st != IBV_WC_SUCCESS) {
        fake_send_completion(s, w, st);
        if (st != IBV_WC_WR_FLUSH_ERR) {
            fake_qp_error(s);
            if (t != NULL && st == IBV_WC_REM_ACCESS_ERR) {
                fake_qp_error(t);   /* responder error: the target QP fails too */
            }
        }
    } else {
        if (w->rec.length > 0) {
            memcpy((void *)(uintptr_t)w->rec.remote_addr, (const void *)(uintptr_t)w->rec.laddr,
                   w->rec.length);
        }
        if (imm) {
            struct ibv_wc wc;

            memset(&wc, 0, sizeof(wc));
            wc.wr_id = t->rq[t->rq_head];
            t->rq_head = (t->rq_head + 1) % FAKE_RQ_MAX;
            t->rq_count--;
            wc.status = IBV_WC_SUCCESS;
            wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
            wc.wc_flags = IBV_WC_WITH_IMM;
            wc.imm_data = htonl(w->rec.imm_host);
            wc.byte_len = w->rec.length;
            wc.qp_num = t->qp.qp_num;
            wc.src_qp = s->qp.qp_num;
            fake_cq_push(t->qp.recv_cq, &wc, NULL, 0);
        }
        fake_send_completion(s, w, IBV_WC_SUCCESS);
    }
    s->sq_head = (s->sq_head + 1) % s->sq_cap;
    s->sq_count--;
    return 1;
}

static int fake_wire_step_locked(int max)
{
    int ran = 0;
    int progress = 1;

    while (ran < max && progress) {
        progress = 0;
        for (int i = 0; i < g_nqp && ran < max; i++) {
            fake_qp_t *q = g_qp[i];

            if (q->live && q->sq_count > 0 && fake_execute(q)) {
                ran++;
                progress = 1;
            }
        }
    }
    return ran;
}

/* ------------------------------------------------------ data-path ops */

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    fake_qp_t *q = (fake_qp_t *)qp;
    int rc = 0;

    pthread_mutex_lock(&g_lock);
    for (; wr != NULL; wr = wr->next) {
        fake_swr_t *w;

        if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) {
            rc = EINVAL;
        } else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge ||
                   (wr->opcode != IBV_WR_RDMA_WRITE &&
                    wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)) {
            rc = EINVAL;
        } else if (q->sq_posted - q->sq_freed >= q->cap.max_send_wr) {
            q->post_rejects++;
            rc = ENOMEM;
        }
        if (rc != 0) {
            *bad = wr;
            break;
        }
        if (q->sq_count == q->sq_cap) {
            size_t ncap = q->sq_cap ? 2 * q->sq_cap : 64;
            fake_swr_t *n = calloc(ncap, sizeof(*n));

            for (size_t i = 0; i < q->sq_count; i++) {
                n[i] = q->sq[(q->sq_head + i) % q->sq_cap];
            }
            free(q->sq);
            q->sq = n;
            q->sq_cap = ncap;
            q->sq_head = 0;
        }
        w = &q->sq[(q->sq_head + q->sq_count) % q->sq_cap];
        memset(w, 0, sizeof(*w));
        w->rec.qpn = q->qp.qp_num;
        w->rec.dest_qpn = q->rtr_attr.dest_qp_num;
        w->rec.opcode = wr->opcode;
        w->rec.send_flags = (unsigned)wr->send_flags;
        w->rec.wr_id = wr->wr_id;
        w->rec.num_sge = wr->num_sge;
        if (wr->num_sge > 0) {
            w->rec.laddr = wr->sg_list[0].addr;
            w->rec.length = wr->sg_list[0].length;
            w->rec.lkey = wr->sg_list[0].lkey;
        }
        w->rec.remote_addr = wr->wr.rdma.remote_addr;
        w->rec.rkey = wr->wr.rdma.rkey;
        w->rec.imm_host = ntohl(wr->imm_data);
        w->sq_pos = ++q->sq_posted;
        q->sq_count++;
        if (q->sq_posted - q->sq_freed > q->max_outstanding) {
            q->max_outstanding = (uint32_t)(q->sq_posted - q->sq_freed);
        }
        if (g_nwrs < FAKE_MAX_WRS) {
            g_wrs[g_nwrs++] = w->rec;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    fake_qp_t *q = (fake_qp_t *)qp;
    int rc = 0;

    pthread_mutex_lock(&g_lock);
    for (; wr != NULL; wr = wr->next) {
        if (q->qp.state == IBV_QPS_RESET) {
            rc = EINVAL;
        } else if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_recv_sge) {
            rc = EINVAL;
        } else if (q->rq_count >= q->cap.max_recv_wr || q->rq_count >= FAKE_RQ_MAX) {
            rc = ENOMEM;
        }
        if (rc != 0) {
            *bad = wr;
            break;
        }
        if (q->qp.state == IBV_QPS_ERR) {
            struct ibv_wc wc;

            memset(&wc, 0, sizeof(wc));
            wc.wr_id = wr->wr_id;
            wc.status = IBV_WC_WR_FLUSH_ERR;
            wc.qp_num = q->qp.qp_num;
            fake_cq_push(q->qp.recv_cq, &wc, NULL, 0);
            continue;
        }
        q->rq[(q->rq_head + q->rq_count) % FAKE_RQ_MAX] = wr->wr_id;
        q->rq_count++;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    fake_cq_t *c = (fake_cq_t *)cq;
    int got = 0;

    pthread_mutex_lock(&g_lock);
    if (g_budget > 0) {
        fake_wire_step_locked(g_budget);
    }
    while (got < n && c->count > 0) {
        fake_cqe_t *e = &c->q[c->head];

        wc[got++] = e->wc;
        if (e->sq_owner != NULL && e->sq_pos > e->sq_owner->sq_freed) {
            e->sq_owner->sq_freed = e->sq_pos;   /* SQ slots up to this WR are free */
        }
        c->head = (c->head + 1) % c->cap;
        c->count--;
    }
    pthread_mutex_unlock(&g_lock);
    return got;
}

/* ------------------------------------------------------- control API */

void fake_verbs_reset(const fake_verbs_config_t *cfg)
{
    pthread_mutex_lock(&g_lock);
    fake_free_all();
    memset(&g_counts, 0, sizeof(g_counts));
    memset(g_devs, 0, sizeof(g_devs));
    g_cfg = *cfg;
    if (g_cfg.ndevices > FAKE_VERBS_MAX_DEVICES) {
        g_cfg.ndevices = FAKE_VERBS_MAX_DEVICES;
    }
    for (int i = 0; i < g_cfg.ndevices; i++) {
        strncpy(g_devs[i].name, g_cfg.names[i], sizeof(g_devs[i].name) - 1);
        g_devs[i].node_type = IBV_NODE_CA;
        g_devs[i].transport_type = IBV_TRANSPORT_IB;
    }
    g_wrs = calloc(FAKE_MAX_WRS, sizeof(*g_wrs));
    g_budget = 1000000;
    g_fail_next = IBV_WC_SUCCESS;
    g_fail_reg = 0;
    g_passthrough = 0;
    memset(&g_dmabuf, 0, sizeof(g_dmabuf));
    pthread_mutex_unlock(&g_lock);
}

void fake_verbs_set_wire_budget(int per_poll)
{
    pthread_mutex_lock(&g_lock);
    g_budget = per_poll;
    pthread_mutex_unlock(&g_lock);
}

int fake_verbs_wire_step(int max)
{
    int ran;

    pthread_mutex_lock(&g_lock);
    ran = fake_wire_step_locked(max);
    pthread_mutex_unlock(&g_lock);
    return ran;
}

void fake_verbs_fail_next(enum ibv_wc_status status)
{
    pthread_mutex_lock(&g_lock);
    g_fail_next = status;
    pthread_mutex_unlock(&g_lock);
}

void fake_verbs_fail_next_reg(int err)
{
    pthread_mutex_lock(&g_lock);
    g_fail_reg = err;
    pthread_mutex_unlock(&g_lock);
}

const fake_verbs_wr_rec_t *fake_verbs_wrs(size_t *n)
{
    *n = g_nwrs;
    return g_wrs;
}

void fake_verbs_clear_wrs(void)
{
    pthread_mutex_lock(&g_lock);
    g_nwrs = 0;
    pthread_mutex_unlock(&g_lock);
}

size_t fake_verbs_qps(fake_verbs_qp_info_t *out, size_t max)
{
    size_t n = 0;

    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nqp && n < max; i++) {
        fake_qp_t *q = g_qp[i];
        fake_verbs_qp_info_t *o = &out[n++];

        memset(o, 0, sizeof(*o));
        o->qpn = q->qp.qp_num;
        o->device = g_devs[((fake_ctx_t *)q->qp.context)->dev].name;
        o->state = q->live ? q->qp.state : IBV_QPS_UNKNOWN;
        o->cap = q->cap;
        o->init_attr = q->init_attr;
        o->rtr_attr = q->rtr_attr;
        o->rts_attr = q->rts_attr;
        o->recv_posted = (uint32_t)q->rq_count;
        o->max_outstanding = q->max_outstanding;
        o->post_rejects = q->post_rejects;
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

fake_verbs_counts_t fake_verbs_counts(void)
{
    fake_verbs_counts_t c;
    int live = 0;

    pthread_mutex_lock(&g_lock);
    c = g_counts;
    for (int i = 0; i < g_nctx; i++) {
        live += g_ctx[i]->live;
    }
    for (int i = 0; i < g_npd; i++) {
        live += g_pd[i]->live;
    }
    for (int i = 0; i < g_ncq; i++) {
        live += g_cq[i]->live;
    }
    for (int i = 0; i < g_nqp; i++) {
        live += g_qp[i]->live;
    }
    for (int i = 0; i < g_nmr; i++) {
        live += g_mr[i]->live;
    }
    c.live_objects = live;
    pthread_mutex_unlock(&g_lock);
    return c;
}

fake_verbs_dmabuf_rec_t fake_verbs_last_dmabuf(void)
{
    return g_dmabuf;
}

/* ------------------------------------------------- wrapped exported verbs */

struct ibv_device **__wrap_ibv_get_device_list(int *num);
void __wrap_ibv_free_device_list(struct ibv_device **list);
const char *__wrap_ibv_get_device_name(struct ibv_device *dev);
struct ibv_context *__wrap_ibv_open_device(struct ibv_device *dev);
int __wrap_ibv_close_device(struct ibv_context *ctx);
int __wrap_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr);
int __wrap_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr);
int __wrap_ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
int __wrap__ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                             struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *ctx);
int __wrap_ibv_dealloc_pd(struct ibv_pd *pd);
struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                    struct ibv_comp_channel *channel, int comp_vector);
int __wrap_ibv_destroy_cq(struct ibv_cq *cq);
struct ibv_qp *__wrap_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int __wrap_ibv_destroy_qp(struct ibv_qp *qp);
struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                       uint64_t iova, unsigned int access);
struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                        uint64_t iova, int fd, int access);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);

struct ibv_device **__real_ibv_get_device_list(int *num);
void __real_ibv_free_device_list(struct ibv_device **list);

void fake_verbs_real_device_list(int on)
{
    pthread_mutex_lock(&g_lock);
    g_passthrough = on;
    pthread_mutex_unlock(&g_lock);
}

struct ibv_device **__wrap_ibv_get_device_list(int *num)
{
    struct ibv_device **list;

    pthread_mutex_lock(&g_lock);
    if (g_passthrough) {
        pthread_mutex_unlock(&g_lock);
        list = __real_ibv_get_device_list(num);
        g_real_list = list;
        return list;
    }
    list = calloc((size_t)g_cfg.ndevices + 1, sizeof(*list));
    for (int i = 0; list != NULL && i < g_cfg.ndevices; i++) {
        list[i] = &g_devs[i];
    }
    if (num != NULL) {
        *num = g_cfg.ndevices;
    }
    pthread_mutex_unlock(&g_lock);
    return list;
}

void __wrap_ibv_free_device_list(struct ibv_device **list)
{
    if (list != NULL && list == g_real_list) {
        g_real_list = NULL;
        __real_ibv_free_device_list(list);
        return;
    }
    free(list);
}

const char *__wrap_ibv_get_device_name(struct ibv_device *dev)
{
    return dev->name;
}

struct ibv_context *__wrap_ibv_open_device(struct ibv_device *dev)
{
    fake_ctx_t *c;

    pthread_mutex_lock(&g_lock);
    if (g_nctx == FAKE_MAX_OBJ) {
        pthread_mutex_unlock(&g_lock);
        errno = ENOMEM;
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    c->dev = (int)(dev - g_devs);
    c->live = 1;
    c->ctx.device = dev;
    c->ctx.abi_compat = NULL;   /* not extended: inline verbs use the exported symbols */
    c->ctx.ops.post_send = fake_post_send;
    c->ctx.ops.post_recv = fake_post_recv;
    c->ctx.ops.poll_cq = fake_poll_cq;
    c->ctx.cmd_fd = -1;
    c->ctx.async_fd = -1;
    g_ctx[g_nctx++] = c;
    g_counts.open_device++;
    pthread_mutex_unlock(&g_lock);
    return &c->ctx;
}

int __wrap_ibv_close_device(struct ibv_context *ctx)
{
    pthread_mutex_lock(&g_lock);
    ((fake_ctx_t *)ctx)->live = 0;
    g_counts.close_device++;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int __wrap_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
    memset(attr, 0, sizeof(*attr));
    attr->max_qp = 1 << 16;
    attr->max_qp_wr = 32768;
    attr->max_sge = 30;
    attr->max_cq = 1 << 16;
    attr->max_cqe = 4194303;
    attr->max_mr = 1 << 20;
    attr->max_pd = 1 << 16;
    attr->phys_port_cnt = 1;
    return 0;
}

int __wrap_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
    /* The inline ibv_query_port passes a whole struct ibv_port_attr. */
    struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)attr;
    fake_ctx_t *c = (fake_ctx_t *)ctx;

    if (port != 1) {
        return EINVAL;
    }
    memset(a, 0, sizeof(*a));
    a->state = g_cfg.port_state;
    a->max_mtu = IBV_MTU_4096;
    a->active_mtu = g_cfg.active_mtu;
    a->gid_tbl_len = 4;
    a->max_msg_sz = g_cfg.max_msg_sz;
    a->lid = g_cfg.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : (uint16_t)(0x10 + c->dev);
    a->link_layer = g_cfg.link_layer;
    a->pkey_tbl_len = 1;
    return 0;
}

/* GID table of device d: 0 = RoCE v1 link-local, 1 = RoCE v2 link-local,
 * 2 = RoCE v1 IPv4-mapped, 3 = RoCE v2 IPv4-mapped 10.0.0.(d+1). */
static void fake_gid(int dev, int index, union ibv_gid *gid, uint32_t *type)
{
    memset(gid, 0, sizeof(*gid));
    if (index < 2) {
        gid->raw[0] = 0xfe;
        gid->raw[1] = 0x80;
        gid->raw[15] = (uint8_t)(dev + 1);
    } else {
        gid->raw[10] = 0xff;
        gid->raw[11] = 0xff;
        gid->raw[12] = 10;
        gid->raw[15] = (uint8_t)(dev + 1);
    }
    gid->raw[14] = (uint8_t)index;
    if (type != NULL) {
        *type = (index % 2) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
    }
}

int __wrap_ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    if (port != 1 || index < 0 || index >= 4) {
        errno = EINVAL;
        return -1;
    }
    fake_gid(((fake_ctx_t *)ctx)->dev, index, gid, NULL);
    return 0;
}

int __wrap__ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                             struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    if (port != 1 || index >= 4) {
        return EINVAL;
    }
    memset(entry, 0, entry_size);
    fake_gid(((fake_ctx_t *)ctx)->dev, (int)index, &entry->gid, &entry->gid_type);
    entry->gid_index = index;
    entry->port_num = port;
    return 0;
}

struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *ctx)
{
    fake_pd_t *p;

    pthread_mutex_lock(&g_lock);
    p = calloc(1, sizeof(*p));
    p->pd.context = ctx;
    p->live = 1;
    g_pd[g_npd++] = p;
    g_counts.alloc_pd++;
    pthread_mutex_unlock(&g_lock);
    return &p->pd;
}

int __wrap_ibv_dealloc_pd(struct ibv_pd *pd)
{
    pthread_mutex_lock(&g_lock);
    ((fake_pd_t *)pd)->live = 0;
    g_counts.dealloc_pd++;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                    struct ibv_comp_channel *channel, int comp_vector)
{
    fake_cq_t *c;

    if (cqe <= 0) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    c = calloc(1, sizeof(*c));
    c->cq.context = ctx;
    c->cq.cqe = cqe;
    c->cap = (size_t)cqe;
    c->q = calloc(c->cap, sizeof(*c->q));
    c->live = 1;
    g_cq[g_ncq++] = c;
    g_counts.create_cq++;
    pthread_mutex_unlock(&g_lock);
    return &c->cq;
}

int __wrap_ibv_destroy_cq(struct ibv_cq *cq)
{
    pthread_mutex_lock(&g_lock);
    ((fake_cq_t *)cq)->live = 0;
    g_counts.destroy_cq++;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

struct ibv_qp *__wrap_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    fake_qp_t *q;

    if (attr->qp_type != IBV_QPT_RC || attr->send_cq == NULL || attr->recv_cq == NULL ||
        attr->cap.max_send_wr == 0 || attr->cap.max_send_wr > 32768 ||
        attr->cap.max_recv_wr > FAKE_RQ_MAX) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    q = calloc(1, sizeof(*q));
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = attr->send_cq;
    q->qp.recv_cq = attr->recv_cq;
    q->qp.qp_num = 0x2a0 + (uint32_t)g_nqp * 0x31;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = IBV_QPT_RC;
    q->cap = attr->cap;
    q->live = 1;
    g_qp[g_nqp++] = q;
    g_counts.create_qp++;
    pthread_mutex_unlock(&g_lock);
    return &q->qp;
}

int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    fake_qp_t *q = (fake_qp_t *)qp;
    int need;
    int rc = 0;

    pthread_mutex_lock(&g_lock);
    if (!(mask & IBV_QP_STATE)) {
        rc = EINVAL;
    } else if (attr->qp_state == IBV_QPS_INIT) {
        need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        if (q->qp.state != IBV_QPS_RESET || (mask & need) != need || attr->port_num != 1) {
            rc = EINVAL;
        } else {
            q->init_attr = *attr;
        }
    } else if (attr->qp_state == IBV_QPS_RTR) {
        need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        if (q->qp.state != IBV_QPS_INIT || (mask & need) != need) {
            rc = EINVAL;
        } else {
            q->rtr_attr = *attr;
        }
    } else if (attr->qp_state == IBV_QPS_RTS) {
        need = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC;
        if (q->qp.state != IBV_QPS_RTR || (mask & need) != need) {
            rc = EINVAL;
        } else {
            q->rts_attr = *attr;
        }
    } else if (attr->qp_state != IBV_QPS_ERR && attr->qp_state != IBV_QPS_RESET) {
        rc = EINVAL;
    }
    if (rc == 0) {
        if (attr->qp_state == IBV_QPS_ERR) {
            fake_qp_error(q);
        }
        q->qp.state = attr->qp_state;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int __wrap_ibv_destroy_qp(struct ibv_qp *qp)
{
    pthread_mutex_lock(&g_lock);
    ((fake_qp_t *)qp)->live = 0;
    g_counts.destroy_qp++;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static struct ibv_mr *fake_new_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                  int access)
{
    fake_mr_t *m;

    if (g_fail_reg != 0) {
        errno = g_fail_reg;
        g_fail_reg = 0;
        return NULL;
    }
    if (g_nmr == FAKE_MAX_MR) {
        errno = ENOMEM;
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.lkey = 0x1000u + (uint32_t)g_nmr * 0x11u;
    m->mr.rkey = 0x80000u + (uint32_t)g_nmr * 0x1013u;
    m->iova = iova;
    m->access = access;
    m->live = 1;
    g_mr[g_nmr++] = m;
    return &m->mr;
}

struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    struct ibv_mr *mr;

    pthread_mutex_lock(&g_lock);
    g_counts.reg_mr++;
    mr = fake_new_mr(pd, addr, length, (uint64_t)(uintptr_t)addr, access);
    pthread_mutex_unlock(&g_lock);
    return mr;
}

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                       uint64_t iova, unsigned int access)
{
    struct ibv_mr *mr;

    pthread_mutex_lock(&g_lock);
    g_counts.reg_mr++;
    mr = fake_new_mr(pd, addr, length, iova, (int)access);
    pthread_mutex_unlock(&g_lock);
    return mr;
}

struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                        uint64_t iova, int fd, int access)
{
    struct ibv_mr *mr;

    if (fcntl(fd, F_GETFD) == -1) {
        errno = EBADF;
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    g_counts.reg_dmabuf_mr++;
    g_dmabuf.offset = offset;
    g_dmabuf.length = length;
    g_dmabuf.iova = iova;
    g_dmabuf.fd = fd;
    g_dmabuf.access = access;
    /* The fake "device memory" is host memory at iova. */
    mr = fake_new_mr(pd, (void *)(uintptr_t)iova, length, iova, access);
    pthread_mutex_unlock(&g_lock);
    return mr;
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
    pthread_mutex_lock(&g_lock);
    ((fake_mr_t *)mr)->live = 0;
    g_counts.dereg_mr++;
    pthread_mutex_unlock(&g_lock);
    return 0;
}
