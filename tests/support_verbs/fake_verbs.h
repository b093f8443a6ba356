/*
 * fake_verbs.h - a fake ibverbs device for tests/test_verbs.c, linked only
 * into that test. The exported verbs functions the transport calls are
 * replaced through `ld --wrap` (__wrap_ibv_*); the data-path verbs
 * (ibv_post_send, ibv_post_recv, ibv_poll_cq) are static inline in
 * <infiniband/verbs.h> and dispatch through ibv_context.ops, so the fake
 * context carries an ops table whose entries record the work requests.
 *
 * A "wire" plays recorded send WRs back in order, per QP, as an RC NIC
 * would: RDMA_WRITE copies the bytes into the region found by (rkey,
 * remote_addr) after checking the rkey, the protection domain, the access
 * flags and the bounds (IBV_WC_REM_ACCESS_ERR otherwise), and
 * WRITE_WITH_IMM consumes a receive WR at the target QP and produces a
 * receive completion carrying the immediate (no receive posted: the WR
 * waits, like an RNR retry). Send queues are bounded by max_send_wr, with
 * slots freed only when a signalled completion is polled, as on hardware.
 *
 * All state is global (test code) and guarded by one mutex, so two
 * transport instances may run init from two threads.
 */
#ifndef RMACOLL_TESTS_FAKE_VERBS_H
#define RMACOLL_TESTS_FAKE_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define FAKE_VERBS_MAX_DEVICES 8

typedef struct fake_verbs_config {
    int ndevices;                               /* 0: ibv_get_device_list finds none */
    const char *names[FAKE_VERBS_MAX_DEVICES];
    uint8_t link_layer;                         /* IBV_LINK_LAYER_INFINIBAND / _ETHERNET */
    enum ibv_mtu active_mtu;
    uint32_t max_msg_sz;                        /* port's max message size */
    enum ibv_port_state port_state;
} fake_verbs_config_t;

/* One posted send WR, as recorded at ibv_post_send. */
typedef struct fake_verbs_wr_rec {
    uint32_t qpn;            /* posting QP */
    uint32_t dest_qpn;       /* the QP it is connected to */
    enum ibv_wr_opcode opcode;
    unsigned int send_flags;
    uint64_t wr_id;
    int num_sge;
    uint64_t laddr;          /* sg_list[0] */
    uint32_t length;
    uint32_t lkey;
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t imm_host;       /* ntohl(imm_data) */
} fake_verbs_wr_rec_t;

/* What the fake knows about one QP. */
typedef struct fake_verbs_qp_info {
    uint32_t qpn;
    const char *device;      /* name of its context's device */
    enum ibv_qp_state state;
    struct ibv_qp_cap cap;
    struct ibv_qp_attr init_attr;   /* as given to the INIT transition */
    struct ibv_qp_attr rtr_attr;    /* ... RTR */
    struct ibv_qp_attr rts_attr;    /* ... RTS */
    uint32_t recv_posted;           /* receive WRs currently posted */
    uint32_t max_outstanding;       /* most send WRs ever outstanding */
    uint32_t post_rejects;          /* ibv_post_send calls refused (queue full) */
} fake_verbs_qp_info_t;

typedef struct fake_verbs_counts {
    int open_device, close_device;
    int alloc_pd, dealloc_pd;
    int create_cq, destroy_cq;
    int create_qp, destroy_qp;
    int reg_mr, reg_dmabuf_mr, dereg_mr;
    int cq_overflows;
    int live_objects;        /* contexts + pds + cqs + qps + mrs not yet freed */
} fake_verbs_counts_t;

/* Resets everything (frees all fake objects) and sets the devices. */
void fake_verbs_reset(const fake_verbs_config_t *cfg);

/* WRs executed by each ibv_poll_cq before it returns completions
 * (0 = the wire is stalled: nothing is delivered). Default 1000000. */
void fake_verbs_set_wire_budget(int per_poll);

/* Executes up to max pending send WRs now; returns how many ran. */
int fake_verbs_wire_step(int max);

/* The next WR the wire executes fails with this status (its QP and the
 * target QP go to the error state, as on an RC responder error). */
void fake_verbs_fail_next(enum ibv_wc_status status);

/* on != 0: ibv_get_device_list / ibv_free_device_list go to the real
 * libibverbs (the rest stays fake); reset turns it off. */
void fake_verbs_real_device_list(int on);

/* Makes the next ibv_reg_mr fail with errno err. */
void fake_verbs_fail_next_reg(int err);

/* Recorded send WRs, in posting order. */
const fake_verbs_wr_rec_t *fake_verbs_wrs(size_t *n);
void fake_verbs_clear_wrs(void);

/* QPs in creation order; returns the number written (at most max). */
size_t fake_verbs_qps(fake_verbs_qp_info_t *out, size_t max);

fake_verbs_counts_t fake_verbs_counts(void);

/* Last ibv_reg_dmabuf_mr arguments. */
typedef struct fake_verbs_dmabuf_rec {
    uint64_t offset;
    size_t length;
    uint64_t iova;
    int fd;
    int access;
} fake_verbs_dmabuf_rec_t;
fake_verbs_dmabuf_rec_t fake_verbs_last_dmabuf(void);

#endif /* RMACOLL_TESTS_FAKE_VERBS_H */
