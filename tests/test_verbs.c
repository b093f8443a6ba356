/*
 * test_verbs.c - the ibverbs transport tested through its boundary with a
 * fake device (tests/support_verbs/fake_verbs.c; no RDMA hardware here).
 *
 * Two "ranks" run in one process: two transport instances whose init runs
 * in two threads joined by an allgather stub, each with its own signal
 * array. Posted work requests are recorded by the fake and played back by
 * its wire (bytes copied to the region found by rkey + remote_addr with
 * NIC-style checks; WRITE_WITH_IMM yields a receive completion carrying
 * the immediate). Checks are exact: bytes, signal words, rkeys, offsets,
 * immediates, QP attributes, error strings.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef RMACOLL_TEST_HAVE_VERBS

int main(void)
{
    printf("verbs transport not built; skipping\n");
    return 77;
}

#else

#include <arpa/inet.h>
#include <sys/stat.h>

#include "fake_verbs.h"
#include "rmacoll_transport.h"
#include "transports/verbs/verbs_internal.h"

extern const rmacoll_transport_ops_t rmacoll_transport_verbs_ops;
#define OPS (&rmacoll_transport_verbs_ops)

#define VT_NSIG 16
#define VT_MAXR 2

typedef struct vt_world vt_world_t;

typedef struct vt_rank {
    vt_world_t *w;
    int rank;
    rmacoll_config_t cfg;
    rmacoll_transport_env_t env;
    uint8_t peers[VT_MAXR];
    volatile uint64_t signals[VT_NSIG];
    char log[16384];
    size_t loglen;
    rmacoll_transport_t *tp;
    rmacoll_status_t init_st;
} vt_rank_t;

struct vt_world {
    int nranks;
    int node_of[VT_MAXR];
    int local_rank[VT_MAXR];
    int node_size[VT_MAXR];
    int node_first[VT_MAXR + 1];
    int node_members[VT_MAXR];
    rmacoll_topo_t topo;
    vt_rank_t r[VT_MAXR];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    int gen;
    const void *send[VT_MAXR];
    void *recv[VT_MAXR];
    size_t bytes[VT_MAXR];
};

/* ----------------------------------------------------------- harness */

static void vt_log(void *ctx, rmacoll_log_level_t level, uint32_t subsys, const char *fmt, ...)
{
    vt_rank_t *r = ctx;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(r->log + r->loglen, sizeof(r->log) - r->loglen, fmt, ap);
    va_end(ap);
    if (n > 0) {
        r->loglen += (size_t)n;
        if (r->loglen >= sizeof(r->log) - 1) {
            r->loglen = sizeof(r->log) - 2;
        }
        r->log[r->loglen++] = '\n';
        r->log[r->loglen] = '\0';
    }
    if (getenv("VT_VERBOSE") != NULL) {
        fprintf(stderr, "[rank %d] %s", r->rank, r->log + r->loglen - (size_t)n - 1);
    }
}

/* Collective over the world's ranks (threads); times out after 10 s. */
static rmacoll_status_t vt_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    vt_rank_t *r = ctx;
    vt_world_t *w = r->w;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    pthread_mutex_lock(&w->mu);
    w->send[r->rank] = send;
    w->recv[r->rank] = recv;
    w->bytes[r->rank] = bytes;
    if (++w->arrived == w->nranks) {
        for (int d = 0; d < w->nranks; d++) {
            for (int s = 0; s < w->nranks; s++) {
                if (w->bytes[s] != bytes) {
                    st = RMACOLL_ERR_BOOTSTRAP;
                    continue;
                }
                memcpy((char *)w->recv[d] + (size_t)s * bytes, w->send[s], bytes);
            }
        }
        w->arrived = 0;
        w->gen++;
        pthread_cond_broadcast(&w->cv);
    } else {
        int gen = w->gen;
        struct timespec dl;

        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 10;
        while (w->gen == gen) {
            if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT) {
                st = RMACOLL_ERR_BOOTSTRAP;
                break;
            }
        }
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

static void vt_default_config(rmacoll_config_t *c)
{
    memset(c, 0, sizeof(*c));
    c->struct_size = sizeof(*c);
    c->verbs_port = 1;
    c->verbs_gid_index = -1;
    c->verbs_max_inflight = 16;
    c->timeout_ms = 5000;
}

static void vt_fake_default(fake_verbs_config_t *f, int ndev)
{
    static const char *const names[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};

    memset(f, 0, sizeof(*f));
    f->ndevices = ndev;
    for (int i = 0; i < ndev && i < 4; i++) {
        f->names[i] = names[i];
    }
    f->link_layer = IBV_LINK_LAYER_INFINIBAND;
    f->active_mtu = IBV_MTU_4096;
    f->max_msg_sz = 1u << 30;
    f->port_state = IBV_PORT_ACTIVE;
}

/* A world of n ranks, each on its own node, with local ranks given. */
static void vt_world_prepare(vt_world_t *w, int n, const int *local_rank)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->nranks = n;
    for (int i = 0; i < n; i++) {
        w->node_of[i] = i;
        w->local_rank[i] = local_rank != NULL ? local_rank[i] : 0;
        w->node_size[i] = 1;
        w->node_first[i] = i;
        w->node_members[i] = i;
    }
    w->node_first[n] = n;
    w->topo.nranks = n;
    w->topo.nnodes = n;
    w->topo.node_of = w->node_of;
    w->topo.local_rank = w->local_rank;
    w->topo.node_size = w->node_size;
    w->topo.node_first = w->node_first;
    w->topo.node_members = w->node_members;
    for (int i = 0; i < n; i++) {
        vt_rank_t *r = &w->r[i];

        r->w = w;
        r->rank = i;
        vt_default_config(&r->cfg);
        for (int j = 0; j < n; j++) {
            r->peers[j] = (uint8_t)(j != i);
        }
        r->env.struct_size = sizeof(r->env);
        r->env.rank = i;
        r->env.nranks = n;
        r->env.topo = &w->topo;
        r->env.config = &r->cfg;
        r->env.peers = r->peers;
        r->env.signals = r->signals;
        r->env.nsignals = VT_NSIG;
        r->env.allgather = vt_allgather;
        r->env.oob_ctx = r;
        r->env.log = vt_log;
        r->env.log_ctx = r;
    }
}

static void *vt_init_thread(void *arg)
{
    vt_rank_t *r = arg;

    r->init_st = OPS->base->init(&r->env, &r->tp);
    return NULL;
}

static void vt_world_init(vt_world_t *w)
{
    pthread_t th[VT_MAXR];

    for (int i = 0; i < w->nranks; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, vt_init_thread, &w->r[i]), 0);
    }
    for (int i = 0; i < w->nranks; i++) {
        pthread_join(th[i], NULL);
    }
}

static void vt_world_fini(vt_world_t *w)
{
    for (int i = 0; i < w->nranks; i++) {
        if (w->r[i].tp != NULL) {
            OPS->base->finalize(w->r[i].tp);
            w->r[i].tp = NULL;
        }
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    assert_int_equal(fake_verbs_counts().live_objects, 0);
}

/* Drives progress on every rank until nothing is pending (bounded). */
static void vt_settle(vt_world_t *w)
{
    int quiet = 0;

    for (int it = 0; it < 200000 && quiet < 4; it++) {
        size_t pend = 0;

        for (int i = 0; i < w->nranks; i++) {
            assert_int_equal(OPS->base->progress(w->r[i].tp), RMACOLL_SUCCESS);
            pend += OPS->base->pending(w->r[i].tp);
        }
        quiet = pend == 0 ? quiet + 1 : 0;
    }
    assert_true(quiet >= 4);
}

static uint32_t vt_rkey_value(const rmacoll_rkey_t *rk)
{
    uint32_t v;

    assert_int_equal(rk->len, 4);
    memcpy(&v, rk->key, sizeof(v));
    return v;
}

/* QP of the given device (rail tests put rank i on mlx5_i). */
static fake_verbs_qp_info_t vt_qp_on(const char *dev)
{
    fake_verbs_qp_info_t q[8];
    size_t n = fake_verbs_qps(q, 8);

    for (size_t i = 0; i < n; i++) {
        if (strcmp(q[i].device, dev) == 0) {
            return q[i];
        }
    }
    fail_msg("no qp on %s", dev);
    return q[0];
}

/* A connected two-rank world: rank i on device mlx5_i (rail). */
static void vt_pair(vt_world_t *w, const fake_verbs_config_t *f, uint32_t max_inflight)
{
    static const int lr[2] = {0, 1};

    fake_verbs_reset(f);
    vt_world_prepare(w, 2, lr);
    for (int i = 0; i < 2; i++) {
        w->r[i].cfg.verbs_max_inflight = max_inflight;
    }
    vt_world_init(w);
    assert_int_equal(w->r[0].init_st, RMACOLL_SUCCESS);
    assert_int_equal(w->r[1].init_st, RMACOLL_SUCCESS);
}

static void vt_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(i * 7u + seed);
    }
}

static rmacoll_put_t vt_put(int peer, const void *src, rmacoll_mem_t *src_mem, const void *dst,
                            const rmacoll_rkey_t *rk, uint64_t bytes, uint32_t sig, uint64_t val)
{
    rmacoll_put_t p;

    memset(&p, 0, sizeof(p));
    p.peer = peer;
    p.src = src;
    p.src_mem = src_mem;
    p.dst_addr = (uint64_t)(uintptr_t)dst;
    p.dst_rkey = rk;
    p.bytes = bytes;
    p.sig_index = sig;
    p.sig_value = val;
    return p;
}

/* ------------------------------------------------------------- tests */

static void test_ops_table(void **state)
{
    (void)state;
    assert_int_equal(OPS->abi_version, RMACOLL_TRANSPORT_ABI_VERSION);
    assert_int_equal(OPS->struct_size, sizeof(rmacoll_transport_ops_t));
    assert_string_equal(OPS->name, "verbs");
    assert_int_equal(OPS->caps, RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST |
                                    RMACOLL_TCAP_MEM_CUDA | RMACOLL_TCAP_HMEM);
    assert_non_null(OPS->base->init);
    assert_non_null(OPS->base->finalize);
    assert_non_null(OPS->mem->mem_register);
    assert_non_null(OPS->mem->mem_deregister);
    assert_non_null(OPS->host->post_puts);
    assert_non_null(OPS->base->progress);
    assert_non_null(OPS->base->pending);
    assert_non_null(OPS->base->error_peer);
}

static void test_no_device(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;

    (void)state;
    vt_fake_default(&f, 0);
    fake_verbs_reset(&f);
    vt_world_prepare(&w, 1, NULL);
    vt_world_init(&w);
    assert_int_equal(w.r[0].init_st, RMACOLL_ERR_NO_DEVICE);
    assert_null(w.r[0].tp);
    assert_non_null(strstr(w.r[0].log,
                           "no RDMA device found (ibv_get_device_list returned 0 devices)"));
    assert_int_equal(fake_verbs_counts().open_device, 0);
    vt_world_fini(&w);
}

/* The real libibverbs on a machine without RDMA devices: a clean
 * RMACOLL_ERR_NO_DEVICE, never a crash. Skipped where a device exists. */
static void test_real_library_no_device(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    struct ibv_device **list;
    int n = 0;

    (void)state;
    vt_fake_default(&f, 0);
    fake_verbs_reset(&f);
    fake_verbs_real_device_list(1);
    list = ibv_get_device_list(&n);
    if (list != NULL) {
        ibv_free_device_list(list);
    }
    if (n > 0) {
        fake_verbs_real_device_list(0);
        skip();
    }
    vt_world_prepare(&w, 1, NULL);
    vt_world_init(&w);
    assert_int_equal(w.r[0].init_st, RMACOLL_ERR_NO_DEVICE);
    assert_null(w.r[0].tp);
    assert_non_null(strstr(w.r[0].log, "no RDMA device found (ibv_get_device_list returned 0 devices)"));
    fake_verbs_real_device_list(0);
    vt_world_fini(&w);
}

static void test_named_device_missing(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;

    (void)state;
    vt_fake_default(&f, 2);
    fake_verbs_reset(&f);
    vt_world_prepare(&w, 1, NULL);
    snprintf(w.r[0].cfg.verbs_device, sizeof(w.r[0].cfg.verbs_device), "mlx5_9");
    vt_world_init(&w);
    assert_int_equal(w.r[0].init_st, RMACOLL_ERR_NO_DEVICE);
    assert_non_null(strstr(w.r[0].log, "verbs device 'mlx5_9'"));
    assert_non_null(strstr(w.r[0].log, "found 2: mlx5_0, mlx5_1"));
    assert_int_equal(fake_verbs_counts().open_device, 0);
    vt_world_fini(&w);
}

static void test_named_device_found(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    fake_verbs_qp_info_t q[4];

    (void)state;
    vt_fake_default(&f, 3);
    fake_verbs_reset(&f);
    vt_world_prepare(&w, 2, NULL);   /* both local rank 0: rail would pick mlx5_0 */
    for (int i = 0; i < 2; i++) {
        snprintf(w.r[i].cfg.verbs_device, sizeof(w.r[i].cfg.verbs_device), "mlx5_2");
    }
    vt_world_init(&w);
    assert_int_equal(w.r[0].init_st, RMACOLL_SUCCESS);
    assert_int_equal(w.r[1].init_st, RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_qps(q, 4), 2);
    assert_string_equal(q[0].device, "mlx5_2");
    assert_string_equal(q[1].device, "mlx5_2");
    vt_world_fini(&w);
}

/* A rank that fails locally still takes part in the exchange, so its
 * peer returns an error naming it instead of hanging. */
static void test_peer_failure_no_hang(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;

    (void)state;
    vt_fake_default(&f, 1);
    fake_verbs_reset(&f);
    vt_world_prepare(&w, 2, NULL);
    snprintf(w.r[1].cfg.verbs_device, sizeof(w.r[1].cfg.verbs_device), "nope0");
    vt_world_init(&w);
    assert_int_equal(w.r[1].init_st, RMACOLL_ERR_NO_DEVICE);
    assert_int_equal(w.r[0].init_st, RMACOLL_ERR_PEER);
    assert_non_null(strstr(w.r[0].log, "rank 1 failed to set up verbs: required device not found"));
    vt_world_fini(&w);
}

static void test_bad_mtu_config(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;

    (void)state;
    vt_fake_default(&f, 1);
    fake_verbs_reset(&f);
    vt_world_prepare(&w, 1, NULL);
    w.r[0].cfg.verbs_mtu = 1000;
    vt_world_init(&w);
    assert_int_equal(w.r[0].init_st, RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(w.r[0].log, "verbs_mtu 1000"));
    vt_world_fini(&w);
}

/* Rail: local rank i opens device i mod n; QPs are cross-connected. */
static void test_connect_ib_rail(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    static const int lr[2] = {0, 1};
    fake_verbs_qp_info_t a, b;

    (void)state;
    vt_fake_default(&f, 2);
    fake_verbs_reset(&f);
    vt_world_prepare(&w, 2, lr);
    for (int i = 0; i < 2; i++) {
        /* rank 1 allows less: the path MTU is the smaller of the two */
        w.r[i].cfg.verbs_mtu = i ? 1024 : 2048;
        w.r[i].cfg.verbs_service_level = 3;
        w.r[i].cfg.verbs_traffic_class = 5;
        w.r[i].cfg.verbs_max_inflight = 16;
    }
    vt_world_init(&w);
    assert_int_equal(w.r[0].init_st, RMACOLL_SUCCESS);
    assert_int_equal(w.r[1].init_st, RMACOLL_SUCCESS);
    a = vt_qp_on("mlx5_0");   /* rank 0's QP to rank 1 */
    b = vt_qp_on("mlx5_1");   /* rank 1's QP to rank 0 */
    for (int k = 0; k < 2; k++) {
        fake_verbs_qp_info_t *me = k ? &b : &a;
        fake_verbs_qp_info_t *other = k ? &a : &b;

        assert_int_equal(me->state, IBV_QPS_RTS);
        assert_int_equal(me->rtr_attr.dest_qp_num, other->qpn);
        assert_int_equal(me->rtr_attr.rq_psn, other->rts_attr.sq_psn);
        assert_int_equal(me->rtr_attr.path_mtu, IBV_MTU_1024);
        assert_int_equal(me->rtr_attr.ah_attr.dlid, k ? 0x10 : 0x11);
        assert_int_equal(me->rtr_attr.ah_attr.sl, 3);
        assert_int_equal(me->rtr_attr.ah_attr.is_global, 0);
        assert_int_equal(me->rtr_attr.ah_attr.port_num, 1);
        assert_true(me->init_attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE);
        assert_int_equal(me->cap.max_send_wr, 16);
        assert_int_equal(me->recv_posted, 64);   /* max(64, 2 * max_inflight) */
        assert_int_equal(me->rts_attr.rnr_retry, 7);
    }
    vt_world_fini(&w);
}

static void test_connect_roce(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    static const int lr[2] = {0, 1};
    fake_verbs_qp_info_t a, b;

    (void)state;
    for (int explicit_gid = 0; explicit_gid < 2; explicit_gid++) {
        vt_fake_default(&f, 2);
        f.link_layer = IBV_LINK_LAYER_ETHERNET;
        f.active_mtu = IBV_MTU_1024;
        fake_verbs_reset(&f);
        vt_world_prepare(&w, 2, lr);
        for (int i = 0; i < 2; i++) {
            w.r[i].cfg.verbs_traffic_class = 106;
            w.r[i].cfg.verbs_gid_index = explicit_gid ? 1 : -1;
        }
        vt_world_init(&w);
        assert_int_equal(w.r[0].init_st, RMACOLL_SUCCESS);
        assert_int_equal(w.r[1].init_st, RMACOLL_SUCCESS);
        a = vt_qp_on("mlx5_0");
        b = vt_qp_on("mlx5_1");
        for (int k = 0; k < 2; k++) {
            fake_verbs_qp_info_t *me = k ? &b : &a;
            int other_dev = k ? 0 : 1;
            /* auto: index 3 = RoCE v2, IPv4-mapped 10.0.0.(dev+1) */
            int gi = explicit_gid ? 1 : 3;
            uint8_t want[16];

            memset(want, 0, sizeof(want));
            if (gi == 3) {
                want[10] = 0xff;
                want[11] = 0xff;
                want[12] = 10;
            } else {
                want[0] = 0xfe;
                want[1] = 0x80;
            }
            want[14] = (uint8_t)gi;
            want[15] = (uint8_t)(other_dev + 1);
            assert_int_equal(me->rtr_attr.ah_attr.is_global, 1);
            assert_int_equal(me->rtr_attr.ah_attr.grh.sgid_index, gi);
            assert_int_equal(me->rtr_attr.ah_attr.grh.traffic_class, 106);
            assert_memory_equal(me->rtr_attr.ah_attr.grh.dgid.raw, want, 16);
            assert_int_equal(me->rtr_attr.path_mtu, IBV_MTU_1024);
        }
        vt_world_fini(&w);
    }
}

/* The PCI-distance rule on a fake sysfs tree. */
static void test_closest_device(void **state)
{
    char root[] = "/tmp/rmacoll_verbs_sysfs_XXXXXX";
    char p[512], t[512];
    const char *names[3] = {"mlx5_0", "mlx5_1", "mlx5_2"};
    const char *dirs[] = {
        "devices/pci0000:00/0000:00:01.0/0000:1b:00.0",   /* GPU */
        "devices/pci0000:00/0000:00:01.0/0000:02:00.0",   /* NIC under the GPU's switch */
        "devices/pci0000:80/0000:80:01.0/0000:81:00.0",   /* NIC on the other socket */
        "devices/pci0000:00/0000:00:02.0/0000:03:00.0",   /* NIC on the GPU's root complex */
    };

    (void)state;
    assert_non_null(mkdtemp(root));
    for (size_t i = 0; i < 4; i++) {
        char cmd[700];

        snprintf(cmd, sizeof(cmd), "mkdir -p %s/%s", root, dirs[i]);
        assert_int_equal(system(cmd), 0);
    }
    snprintf(p, sizeof(p), "mkdir -p %s/bus/pci/devices %s/class/infiniband/mlx5_0 "
             "%s/class/infiniband/mlx5_1 %s/class/infiniband/mlx5_2", root, root, root, root);
    assert_int_equal(system(p), 0);
    snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:1b:00.0", root);
    snprintf(t, sizeof(t), "%s/%s", root, dirs[0]);
    assert_int_equal(symlink(t, p), 0);
    /* mlx5_0: other socket; mlx5_1: same root complex; mlx5_2: same switch */
    snprintf(p, sizeof(p), "%s/class/infiniband/mlx5_0/device", root);
    snprintf(t, sizeof(t), "%s/%s", root, dirs[2]);
    assert_int_equal(symlink(t, p), 0);
    snprintf(p, sizeof(p), "%s/class/infiniband/mlx5_1/device", root);
    snprintf(t, sizeof(t), "%s/%s", root, dirs[3]);
    assert_int_equal(symlink(t, p), 0);
    snprintf(p, sizeof(p), "%s/class/infiniband/mlx5_2/device", root);
    snprintf(t, sizeof(t), "%s/%s", root, dirs[1]);
    assert_int_equal(symlink(t, p), 0);

    assert_int_equal(rmacoll__verbs_closest_device(root, "0000:1b:00.0", names, 3, 0), 2);
    /* upper-case bus id as cudaDeviceGetPCIBusId prints it; rail ignored without ties */
    assert_int_equal(rmacoll__verbs_closest_device(root, "0000:1B:00.0", names, 3, 5), 2);
    /* without mlx5_2: mlx5_1 (same root complex) beats the other socket */
    assert_int_equal(rmacoll__verbs_closest_device(root, "0000:1b:00.0", names, 2, 0), 1);
    /* ties (two equally far NICs) go by rail */
    {
        const char *two[2] = {"mlx5_0", "mlx5_0"};

        assert_int_equal(rmacoll__verbs_closest_device(root, "0000:1b:00.0", two, 2, 0), 0);
        assert_int_equal(rmacoll__verbs_closest_device(root, "0000:1b:00.0", two, 2, 1), 1);
    }
    assert_int_equal(rmacoll__verbs_closest_device(root, "0000:99:00.0", names, 3, 0), -1);
    snprintf(p, sizeof(p), "rm -rf %s", root);
    assert_int_equal(system(p), 0);
}

/* Bytes, rkeys, offsets, immediates and signal words, exactly. */
static void test_put_signal_exchange(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    enum { N = 4096 };
    uint8_t *src0 = malloc(N), *dst0 = malloc(N), *src1 = malloc(N), *dst1 = malloc(N);
    uint8_t *want1 = malloc(N);
    rmacoll_mem_t *ms0, *md0, *ms1, *md1;
    rmacoll_rkey_t rk0, rk1, rk_unused;
    rmacoll_put_t p[5];
    const fake_verbs_wr_rec_t *rec;
    size_t nrec;
    fake_verbs_qp_info_t a, b;

    (void)state;
    vt_fake_default(&f, 2);
    vt_pair(&w, &f, 16);
    a = vt_qp_on("mlx5_0");
    b = vt_qp_on("mlx5_1");
    vt_fill(src0, N, 3);
    vt_fill(src1, N, 101);
    memset(dst0, 0xee, N);
    memset(dst1, 0xee, N);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src0, N, RMACOLL_MEM_HOST, &ms0, &rk_unused),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, dst0, N, RMACOLL_MEM_HOST, &md0, &rk0),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, src1, N, RMACOLL_MEM_HOST, &ms1, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst1, N, RMACOLL_MEM_HOST, &md1, &rk1),
                     RMACOLL_SUCCESS);
    assert_int_equal(rk1.addr, (uint64_t)(uintptr_t)dst1);
    assert_int_equal(rk1.bytes, N);
    assert_int_not_equal(vt_rkey_value(&rk1), vt_rkey_value(&rk0));

    fake_verbs_clear_wrs();
    p[0] = vt_put(1, src0 + 16, ms0, dst1 + 8, &rk1, 100, 3, 1);
    p[1] = vt_put(1, NULL, NULL, NULL, NULL, 0, 5, 1);               /* signal only */
    p[2] = vt_put(1, src0 + 500, ms0, dst1 + 1000, &rk1, 200, RMACOLL_NO_SIGNAL, 0);
    p[3] = vt_put(1, src0, ms0, dst1 + 3000, &rk1, 50, 3, 2);
    p[4] = vt_put(1, NULL, NULL, NULL, NULL, 0, RMACOLL_NO_SIGNAL, 0); /* nothing */
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, p, 5), RMACOLL_SUCCESS);
    {
        rmacoll_put_t back = vt_put(0, src1, ms1, dst0, &rk0, N, 0, 1);

        assert_int_equal(OPS->host->post_puts(w.r[1].tp, &back, 1), RMACOLL_SUCCESS);
    }

    rec = fake_verbs_wrs(&nrec);
    assert_int_equal(nrec, 5);
    {
        static const enum ibv_wr_opcode op[4] = {IBV_WR_RDMA_WRITE_WITH_IMM,
                                                 IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE,
                                                 IBV_WR_RDMA_WRITE_WITH_IMM};
        const uint8_t *laddr[4] = {src0 + 16, NULL, src0 + 500, src0};
        const uint8_t *raddr[4] = {dst1 + 8, NULL, dst1 + 1000, dst1 + 3000};
        static const uint32_t len[4] = {100, 0, 200, 50};
        static const uint32_t imm[4] = {3, 5, 0, 3};

        for (int i = 0; i < 4; i++) {
            assert_int_equal(rec[i].qpn, a.qpn);
            assert_int_equal(rec[i].dest_qpn, b.qpn);
            assert_int_equal(rec[i].opcode, op[i]);
            assert_int_equal(rec[i].length, len[i]);
            assert_int_equal(rec[i].num_sge, len[i] ? 1 : 0);
            if (len[i] > 0) {
                assert_int_equal(rec[i].laddr, (uint64_t)(uintptr_t)laddr[i]);
                assert_int_equal(rec[i].remote_addr, (uint64_t)(uintptr_t)raddr[i]);
                assert_int_equal(rec[i].rkey, vt_rkey_value(&rk1));
            }
            if (op[i] == IBV_WR_RDMA_WRITE_WITH_IMM) {
                assert_int_equal(rec[i].imm_host, imm[i]);
            }
        }
        assert_true(rec[3].send_flags & IBV_SEND_SIGNALED);   /* the chain's last */
        assert_int_equal(rec[4].qpn, b.qpn);
        assert_int_equal(rec[4].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
        assert_int_equal(rec[4].remote_addr, (uint64_t)(uintptr_t)dst0);
        assert_int_equal(rec[4].rkey, vt_rkey_value(&rk0));
        assert_int_equal(rec[4].length, N);
        assert_int_equal(rec[4].imm_host, 0);
    }
    assert_int_equal(OPS->base->pending(w.r[0].tp), 4);

    vt_settle(&w);

    memset(want1, 0xee, N);
    memcpy(want1 + 8, src0 + 16, 100);
    memcpy(want1 + 1000, src0 + 500, 200);
    memcpy(want1 + 3000, src0, 50);
    assert_memory_equal(dst1, want1, N);
    assert_memory_equal(dst0, src1, N);
    for (int s = 0; s < VT_NSIG; s++) {
        assert_int_equal(w.r[1].signals[s], s == 3 ? 2 : s == 5 ? 1 : 0);
        assert_int_equal(w.r[0].signals[s], s == 0 ? 1 : 0);
    }
    assert_int_equal(OPS->base->pending(w.r[0].tp), 0);
    assert_int_equal(OPS->base->error_peer(w.r[0].tp), -1);
    assert_int_equal(OPS->base->error_peer(w.r[1].tp), -1);
    /* every consumed receive was re-posted */
    assert_int_equal(vt_qp_on("mlx5_1").recv_posted, 64);
    assert_int_equal(fake_verbs_counts().cq_overflows, 0);

    assert_int_equal(OPS->mem->mem_deregister(w.r[0].tp, ms0), RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_deregister(w.r[0].tp, md0), RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_deregister(w.r[1].tp, ms1), RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_deregister(w.r[1].tp, md1), RMACOLL_SUCCESS);
    vt_world_fini(&w);
    free(src0);
    free(dst0);
    free(src1);
    free(dst1);
    free(want1);
}

/* Puts above the port's max message size are split; only the last
 * piece carries the signal. */
static void test_split_large_put(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    enum { N = 16384, B = 10000 };
    uint8_t *src = malloc(N), *dst = malloc(N), *want = malloc(N);
    rmacoll_mem_t *ms, *md;
    rmacoll_rkey_t rk;
    rmacoll_put_t p;
    const fake_verbs_wr_rec_t *rec;
    size_t nrec;

    (void)state;
    vt_fake_default(&f, 2);
    f.max_msg_sz = 4096;
    vt_pair(&w, &f, 16);
    vt_fill(src, N, 9);
    memset(dst, 0, N);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src, N, RMACOLL_MEM_HOST, &ms, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, N, RMACOLL_MEM_HOST, &md, &rk),
                     RMACOLL_SUCCESS);
    fake_verbs_clear_wrs();
    p = vt_put(1, src + 1, ms, dst + 100, &rk, B, 9, 1);
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_SUCCESS);
    rec = fake_verbs_wrs(&nrec);
    assert_int_equal(nrec, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rec[i].laddr, (uint64_t)(uintptr_t)(src + 1 + 4096 * i));
        assert_int_equal(rec[i].remote_addr, (uint64_t)(uintptr_t)(dst + 100 + 4096 * i));
        assert_int_equal(rec[i].length, i < 2 ? 4096 : B - 8192);
        assert_int_equal(rec[i].opcode, i < 2 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM);
    }
    assert_int_equal(rec[2].imm_host, 9);
    vt_settle(&w);
    memset(want, 0, N);
    memcpy(want + 100, src + 1, B);
    assert_memory_equal(dst, want, N);
    assert_int_equal(w.r[1].signals[9], 1);
    OPS->mem->mem_deregister(w.r[0].tp, ms);
    OPS->mem->mem_deregister(w.r[1].tp, md);
    vt_world_fini(&w);
    free(src);
    free(dst);
    free(want);
}

/* max_inflight bounds the send queue; 50 puts still all arrive. */
static void test_backpressure(void **state)
{
    static const uint32_t limits[2] = {2, 8};

    (void)state;
    for (int li = 0; li < 2; li++) {
        fake_verbs_config_t f;
        vt_world_t w;
        enum { NP = 50, SZ = 64 };
        uint8_t *src = malloc(NP * SZ), *dst = malloc(NP * SZ);
        rmacoll_mem_t *ms, *md;
        rmacoll_rkey_t rk;
        rmacoll_put_t p[NP];
        size_t nrec;
        const fake_verbs_wr_rec_t *rec;
        fake_verbs_qp_info_t a;
        int nsig = 0;

        vt_fake_default(&f, 2);
        vt_pair(&w, &f, limits[li]);
        fake_verbs_set_wire_budget(1);   /* the NIC executes one WR per poll */
        vt_fill(src, NP * SZ, 21);
        memset(dst, 0, NP * SZ);
        assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src, NP * SZ, RMACOLL_MEM_HOST, &ms, NULL),
                         RMACOLL_SUCCESS);
        assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, NP * SZ, RMACOLL_MEM_HOST, &md, &rk),
                         RMACOLL_SUCCESS);
        fake_verbs_clear_wrs();
        for (int i = 0; i < NP; i++) {
            p[i] = vt_put(1, src + i * SZ, ms, dst + (NP - 1 - i) * SZ, &rk, SZ, 7,
                          (uint64_t)i + 1);
        }
        assert_int_equal(OPS->host->post_puts(w.r[0].tp, p, NP), RMACOLL_SUCCESS);
        vt_settle(&w);
        for (int i = 0; i < NP; i++) {
            assert_memory_equal(dst + (NP - 1 - i) * SZ, src + i * SZ, SZ);
        }
        assert_int_equal(w.r[1].signals[7], NP);
        a = vt_qp_on("mlx5_0");
        assert_int_equal(a.max_outstanding, limits[li]);   /* reached, never exceeded */
        assert_int_equal(a.post_rejects, 0);
        assert_int_equal(fake_verbs_counts().cq_overflows, 0);
        rec = fake_verbs_wrs(&nrec);
        assert_int_equal(nrec, NP);
        for (size_t i = 0; i < nrec; i++) {
            nsig += (rec[i].send_flags & IBV_SEND_SIGNALED) != 0;
        }
        assert_true(rec[nrec - 1].send_flags & IBV_SEND_SIGNALED);
        if (limits[li] == 2) {
            assert_int_equal(nsig, NP);   /* signal_every = 1 */
        } else {
            assert_true(nsig < NP);       /* selective signalling */
            assert_true(nsig >= NP / 4);
        }
        OPS->mem->mem_deregister(w.r[0].tp, ms);
        OPS->mem->mem_deregister(w.r[1].tp, md);
        vt_world_fini(&w);
        free(src);
        free(dst);
    }
}

/* A stalled peer: post_puts returns RMACOLL_ERR_TIMEOUT naming it. */
static void test_backpressure_timeout(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    uint8_t src[640], dst[640];
    rmacoll_mem_t *ms, *md;
    rmacoll_rkey_t rk;
    rmacoll_put_t p[10];
    const fake_verbs_wr_rec_t *rec;
    size_t nrec;

    (void)state;
    vt_fake_default(&f, 2);
    fake_verbs_reset(&f);
    {
        static const int lr[2] = {0, 1};

        vt_world_prepare(&w, 2, lr);
        for (int i = 0; i < 2; i++) {
            w.r[i].cfg.verbs_max_inflight = 2;
            w.r[i].cfg.timeout_ms = 100;
        }
        vt_world_init(&w);
        assert_int_equal(w.r[0].init_st, RMACOLL_SUCCESS);
    }
    vt_fill(src, sizeof(src), 1);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src, sizeof(src), RMACOLL_MEM_HOST, &ms, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, sizeof(dst), RMACOLL_MEM_HOST, &md, &rk),
                     RMACOLL_SUCCESS);
    fake_verbs_set_wire_budget(0);   /* nothing is ever delivered */
    fake_verbs_clear_wrs();
    for (int i = 0; i < 10; i++) {
        p[i] = vt_put(1, src + i * 64, ms, dst + i * 64, &rk, 64, 1, (uint64_t)i + 1);
    }
    {
        time_t t0 = time(NULL);

        assert_int_equal(OPS->host->post_puts(w.r[0].tp, p, 10), RMACOLL_ERR_TIMEOUT);
        assert_true(time(NULL) - t0 < 5);
    }
    assert_non_null(strstr(w.r[0].log, "timed out after 100 ms"));
    assert_non_null(strstr(w.r[0].log, "to rank 1"));
    assert_int_equal(OPS->base->error_peer(w.r[0].tp), 1);
    rec = fake_verbs_wrs(&nrec);
    assert_int_equal(nrec, 2);   /* never more than max_inflight */
    (void)rec;
    /* the NIC comes back: what was posted drains */
    fake_verbs_set_wire_budget(1000);
    vt_settle(&w);
    assert_int_equal(w.r[1].signals[1], 2);
    OPS->mem->mem_deregister(w.r[0].tp, ms);
    OPS->mem->mem_deregister(w.r[1].tp, md);
    vt_world_fini(&w);
}

/* A wrong rkey is refused by the "NIC"; the error names peer, QP and status. */
static void test_error_completion_rkey(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    uint8_t src[256], dst[256];
    rmacoll_mem_t *ms, *md;
    rmacoll_rkey_t rk, bad;
    rmacoll_put_t p;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    fake_verbs_qp_info_t a;
    char want[64];
    size_t nrec;
    uint32_t key;

    (void)state;
    vt_fake_default(&f, 2);
    vt_pair(&w, &f, 16);
    a = vt_qp_on("mlx5_0");
    memset(dst, 0x5a, sizeof(dst));
    vt_fill(src, sizeof(src), 4);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src, sizeof(src), RMACOLL_MEM_HOST, &ms, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, sizeof(dst), RMACOLL_MEM_HOST, &md, &rk),
                     RMACOLL_SUCCESS);
    bad = rk;
    key = vt_rkey_value(&rk) + 1;
    memcpy(bad.key, &key, sizeof(key));
    p = vt_put(1, src, ms, dst, &bad, 128, 2, 1);
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_SUCCESS);
    for (int i = 0; i < 1000 && st == RMACOLL_SUCCESS; i++) {
        st = OPS->base->progress(w.r[0].tp);
    }
    assert_int_equal(st, RMACOLL_ERR_TRANSPORT);
    assert_int_equal(OPS->base->error_peer(w.r[0].tp), 1);
    assert_non_null(strstr(w.r[0].log, "remote access error"));
    snprintf(want, sizeof(want), "to rank 1 failed on qp %u", a.qpn);
    assert_non_null(strstr(w.r[0].log, want));
    assert_int_equal(OPS->base->pending(w.r[0].tp), 0);
    /* nothing landed, no signal */
    for (size_t i = 0; i < sizeof(dst); i++) {
        assert_int_equal(dst[i], 0x5a);
    }
    assert_int_equal(w.r[1].signals[2], 0);
    /* later posts to that peer fail at once, posting nothing */
    fake_verbs_clear_wrs();
    p = vt_put(1, src, ms, dst, &rk, 16, 2, 1);
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_ERR_TRANSPORT);
    fake_verbs_wrs(&nrec);
    assert_int_equal(nrec, 0);
    /* the error stays visible to the proxy thread */
    assert_int_equal(OPS->base->progress(w.r[0].tp), RMACOLL_ERR_TRANSPORT);
    /* the target's QP failed too (responder error): its receives flush */
    st = RMACOLL_SUCCESS;
    for (int i = 0; i < 10 && st == RMACOLL_SUCCESS; i++) {
        st = OPS->base->progress(w.r[1].tp);
    }
    assert_int_equal(st, RMACOLL_ERR_TRANSPORT);
    assert_int_equal(OPS->base->error_peer(w.r[1].tp), 0);
    assert_non_null(strstr(w.r[1].log, "Work Request Flushed Error"));
    OPS->mem->mem_deregister(w.r[0].tp, ms);
    OPS->mem->mem_deregister(w.r[1].tp, md);
    vt_world_fini(&w);
}

static void test_error_completion_retry(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    rmacoll_put_t p;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    (void)state;
    vt_fake_default(&f, 2);
    vt_pair(&w, &f, 16);
    fake_verbs_fail_next(IBV_WC_RETRY_EXC_ERR);
    p = vt_put(1, NULL, NULL, NULL, NULL, 0, 4, 1);
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_SUCCESS);
    for (int i = 0; i < 1000 && st == RMACOLL_SUCCESS; i++) {
        st = OPS->base->progress(w.r[0].tp);
    }
    assert_int_equal(st, RMACOLL_ERR_TRANSPORT);
    assert_int_equal(OPS->base->error_peer(w.r[0].tp), 1);
    assert_non_null(strstr(w.r[0].log, "transport retry counter exceeded"));
    assert_int_equal(w.r[1].signals[4], 0);
    vt_world_fini(&w);
}

/* An immediate naming a word the target does not have is an error. */
static void test_bad_signal_index(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    rmacoll_put_t p;
    rmacoll_status_t st = RMACOLL_SUCCESS;

    (void)state;
    vt_fake_default(&f, 2);
    vt_pair(&w, &f, 16);
    p = vt_put(1, NULL, NULL, NULL, NULL, 0, VT_NSIG, 1);
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_SUCCESS);
    for (int i = 0; i < 100 && st == RMACOLL_SUCCESS; i++) {
        assert_int_equal(OPS->base->progress(w.r[0].tp), RMACOLL_SUCCESS);
        st = OPS->base->progress(w.r[1].tp);
    }
    assert_int_equal(st, RMACOLL_ERR_TRANSPORT);
    assert_int_equal(OPS->base->error_peer(w.r[1].tp), 0);
    assert_non_null(strstr(w.r[1].log, "rank 0 signalled word 16"));
    for (int s = 0; s < VT_NSIG; s++) {
        assert_int_equal(w.r[1].signals[s], 0);
    }
    vt_world_fini(&w);
}

static void test_put_argument_checks(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    uint8_t src[64], dst[64];
    rmacoll_mem_t *ms, *md;
    rmacoll_rkey_t rk;
    rmacoll_put_t p;
    size_t nrec;

    (void)state;
    vt_fake_default(&f, 2);
    vt_pair(&w, &f, 16);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src, sizeof(src), RMACOLL_MEM_HOST, &ms, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, sizeof(dst), RMACOLL_MEM_HOST, &md, &rk),
                     RMACOLL_SUCCESS);
    fake_verbs_clear_wrs();
    p = vt_put(1, src, ms, dst + 1, &rk, 64, 0, 1);    /* one byte past the region */
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_ERR_INVALID_ARG);
    p = vt_put(1, src + 1, ms, dst, &rk, 64, 0, 1);    /* source past its registration */
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_ERR_INVALID_ARG);
    p = vt_put(0, src, ms, dst, &rk, 8, 0, 1);         /* self is not a verbs peer */
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_ERR_INVALID_ARG);
    p = vt_put(2, src, ms, dst, &rk, 8, 0, 1);         /* no such rank */
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_ERR_INVALID_ARG);
    fake_verbs_wrs(&nrec);
    assert_int_equal(nrec, 0);
    OPS->mem->mem_deregister(w.r[0].tp, ms);
    OPS->mem->mem_deregister(w.r[1].tp, md);
    vt_world_fini(&w);
}

static rmacoll_transport_t *vt_single(vt_world_t *w)
{
    fake_verbs_config_t f;

    vt_fake_default(&f, 1);
    fake_verbs_reset(&f);
    vt_world_prepare(w, 1, NULL);
    vt_world_init(w);
    assert_int_equal(w->r[0].init_st, RMACOLL_SUCCESS);
    return w->r[0].tp;
}

/* Host cache: hits while registered; after the last deregister the range
 * is registered afresh (a freed and re-used range never gets a stale MR). */
static void test_reg_cache_host(void **state)
{
    vt_world_t w;
    rmacoll_transport_t *tp = vt_single(&w);
    uint8_t *buf = malloc(8192);
    rmacoll_mem_t *m1, *m2, *m3, *m4;
    rmacoll_rkey_t r1, r2, r3;

    (void)state;
    rmacoll__verbs_set_cuda_ops(tp, NULL);
    assert_int_equal(OPS->mem->mem_register(tp, buf, 8192, RMACOLL_MEM_HOST, &m1, &r1), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_mr, 1);
    /* a sub-range of a live registration: cache hit */
    assert_int_equal(OPS->mem->mem_register(tp, buf + 100, 50, RMACOLL_MEM_HOST, &m2, &r2),
                     RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_mr, 1);
    assert_ptr_equal(m1, m2);
    assert_int_equal(vt_rkey_value(&r2), vt_rkey_value(&r1));
    /* the rkey describes the range asked for (the core writes byte k of it
     * at rkey.addr + k), not the cached region holding it */
    assert_int_equal(r1.addr, (uint64_t)(uintptr_t)buf);
    assert_int_equal(r1.bytes, 8192);
    assert_int_equal(r2.addr, (uint64_t)(uintptr_t)(buf + 100));
    assert_int_equal(r2.bytes, 50);
    /* a range that sticks out by one byte is not a hit */
    assert_int_equal(OPS->mem->mem_register(tp, buf + 4096, 4097, RMACOLL_MEM_HOST, &m4, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_mr, 2);
    assert_ptr_not_equal(m4, m1);
    assert_int_equal(OPS->mem->mem_deregister(tp, m4), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, 1);

    assert_int_equal(OPS->mem->mem_deregister(tp, m2), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, 1);
    assert_int_equal(OPS->mem->mem_deregister(tp, m1), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, 2);

    /* the same range again (think: freed, malloc returned it again) */
    assert_int_equal(OPS->mem->mem_register(tp, buf, 8192, RMACOLL_MEM_HOST, &m3, &r3), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_mr, 3);
    assert_int_not_equal(vt_rkey_value(&r3), vt_rkey_value(&r1));
    assert_int_equal(OPS->mem->mem_deregister(tp, m3), RMACOLL_SUCCESS);

    /* registration failure is reported with the size and the cause */
    {
        rmacoll_mem_t *mx = NULL;

        fake_verbs_fail_next_reg(ENOMEM);
        assert_int_equal(OPS->mem->mem_register(tp, buf, 8192, RMACOLL_MEM_HOST, &mx, NULL),
                         RMACOLL_ERR_TRANSPORT);
        assert_non_null(strstr(w.r[0].log, "registering 8192 bytes of host memory"));
    }
    assert_int_equal(OPS->mem->mem_register(tp, NULL, 8, RMACOLL_MEM_HOST, &m3, NULL),
                     RMACOLL_ERR_INVALID_ARG);
    assert_int_equal(OPS->mem->mem_register(tp, buf, 0, RMACOLL_MEM_HOST, &m3, NULL),
                     RMACOLL_ERR_INVALID_ARG);
    vt_world_fini(&w);
    free(buf);
}

/* mem_revoke (issue 10): the MR is deregistered at once although the core
 * still holds its reference; a late RDMA WRITE with the old rkey fails at
 * the writer (remote access error) and not one byte lands; the range is
 * registered afresh (new rkey) next time; the last deregister frees the
 * entry without a second ibv_dereg_mr. */
static void test_revoke(void **state)
{
    fake_verbs_config_t f;
    vt_world_t w;
    uint8_t src[256], dst[256];
    rmacoll_mem_t *ms, *md, *md2;
    rmacoll_rkey_t rk, rk2;
    rmacoll_put_t p;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    int dereg0;

    (void)state;
    vt_fake_default(&f, 2);
    vt_pair(&w, &f, 16);
    memset(dst, 0x5a, sizeof(dst));
    vt_fill(src, sizeof(src), 4);
    assert_int_equal(OPS->mem->mem_register(w.r[0].tp, src, sizeof(src), RMACOLL_MEM_HOST, &ms, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, sizeof(dst), RMACOLL_MEM_HOST, &md, &rk),
                     RMACOLL_SUCCESS);
    assert_non_null(OPS->mem->mem_revoke);
    dereg0 = fake_verbs_counts().dereg_mr;
    assert_int_equal(OPS->mem->mem_revoke(w.r[1].tp, md), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, dereg0 + 1);
    assert_non_null(strstr(w.r[1].log, "revoked the registration of 256 bytes"));
    /* again: nothing more to do */
    assert_int_equal(OPS->mem->mem_revoke(w.r[1].tp, md), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, dereg0 + 1);
    /* the late writer's put is refused by the "NIC" */
    p = vt_put(1, src, ms, dst, &rk, 128, 2, 1);
    assert_int_equal(OPS->host->post_puts(w.r[0].tp, &p, 1), RMACOLL_SUCCESS);
    for (int i = 0; i < 1000 && st == RMACOLL_SUCCESS; i++) {
        st = OPS->base->progress(w.r[0].tp);
    }
    assert_int_equal(st, RMACOLL_ERR_TRANSPORT);
    assert_int_equal(OPS->base->error_peer(w.r[0].tp), 1);
    assert_non_null(strstr(w.r[0].log, "remote access error"));
    for (size_t i = 0; i < sizeof(dst); i++) {
        assert_int_equal(dst[i], 0x5a);
    }
    assert_int_equal(w.r[1].signals[2], 0);
    /* the cache does not hand the revoked entry out again */
    assert_int_equal(OPS->mem->mem_register(w.r[1].tp, dst, sizeof(dst), RMACOLL_MEM_HOST, &md2,
                                            &rk2), RMACOLL_SUCCESS);
    assert_ptr_not_equal(md2, md);
    assert_int_not_equal(vt_rkey_value(&rk2), vt_rkey_value(&rk));
    /* the last deregister frees the revoked entry, no second dereg */
    assert_int_equal(OPS->mem->mem_deregister(w.r[1].tp, md), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, dereg0 + 1);
    assert_int_equal(OPS->mem->mem_deregister(w.r[1].tp, md2), RMACOLL_SUCCESS);
    OPS->mem->mem_deregister(w.r[0].tp, ms);
    vt_world_fini(&w);
}

/* Fake CUDA driver: dma-buf export and buffer ids. */
static unsigned long long g_cu_buffer_id = 1;
static int g_cu_handle_fail;
static int g_cu_last_fd = -1;
static unsigned long long g_cu_last_dptr;
static size_t g_cu_last_size;

static int vt_cu_get_handle(void *handle, unsigned long long dptr, size_t size, int type,
                            unsigned long long flags)
{
    int fd;

    (void)flags;
    if (g_cu_handle_fail || type != VERBS_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) {
        return 1;   /* CUDA_ERROR_INVALID_VALUE */
    }
    fd = open("/dev/null", O_RDONLY);
    if (fd < 0) {
        return 2;
    }
    g_cu_last_fd = fd;
    g_cu_last_dptr = dptr;
    g_cu_last_size = size;
    memcpy(handle, &fd, sizeof(fd));
    return 0;
}

static int vt_cu_attr(void *data, int attribute, unsigned long long ptr)
{
    (void)ptr;
    if (attribute != VERBS_CU_POINTER_ATTRIBUTE_BUFFER_ID) {
        return 1;
    }
    memcpy(data, &g_cu_buffer_id, sizeof(g_cu_buffer_id));
    return 0;
}

static void test_reg_cuda_dmabuf(void **state)
{
    vt_world_t w;
    rmacoll_transport_t *tp = vt_single(&w);
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *dev = aligned_alloc((size_t)ps, 4 * (size_t)ps);   /* stands in for device memory */
    verbs_cuda_ops_t cu;
    rmacoll_mem_t *m1, *m2, *m3, *m4;
    rmacoll_rkey_t r1, r2, r3;
    fake_verbs_dmabuf_rec_t d;

    (void)state;
    memset(&cu, 0, sizeof(cu));
    cu.mem_get_handle_for_address_range = vt_cu_get_handle;
    cu.pointer_get_attribute = vt_cu_attr;
    rmacoll__verbs_set_cuda_ops(tp, &cu);
    g_cu_buffer_id = 41;
    g_cu_handle_fail = 0;

    assert_int_equal(OPS->mem->mem_register(tp, dev + 100, 5000, RMACOLL_MEM_CUDA, &m1, &r1),
                     RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_dmabuf_mr, 1);
    assert_int_equal(fake_verbs_counts().reg_mr, 0);
    d = fake_verbs_last_dmabuf();
    /* the exported range is page-aligned around the buffer */
    assert_int_equal(g_cu_last_dptr, (unsigned long long)(uintptr_t)dev);
    assert_int_equal(g_cu_last_size, (((size_t)100 + 5000 + (size_t)ps - 1) / (size_t)ps) * (size_t)ps);
    assert_int_equal(d.offset, 100);
    assert_int_equal(d.length, 5000);
    assert_int_equal(d.iova, (uint64_t)(uintptr_t)(dev + 100));
    assert_int_equal(d.fd, g_cu_last_fd);
    assert_true(d.access & IBV_ACCESS_REMOTE_WRITE);
    assert_int_equal(fcntl(g_cu_last_fd, F_GETFD), -1);   /* fd closed after registering */
    assert_int_equal(r1.addr, (uint64_t)(uintptr_t)(dev + 100));

    /* deregistered but cached: the same buffer id hits */
    assert_int_equal(OPS->mem->mem_deregister(tp, m1), RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().dereg_mr, 0);
    assert_int_equal(OPS->mem->mem_register(tp, dev + 200, 1000, RMACOLL_MEM_CUDA, &m2, &r2),
                     RMACOLL_SUCCESS);
    assert_ptr_equal(m2, m1);
    assert_int_equal(vt_rkey_value(&r2), vt_rkey_value(&r1));
    assert_int_equal(fake_verbs_counts().reg_dmabuf_mr, 1);
    assert_int_equal(OPS->mem->mem_deregister(tp, m2), RMACOLL_SUCCESS);

    /* cudaFree + cudaMalloc at the same address: new buffer id, re-register */
    g_cu_buffer_id = 42;
    assert_int_equal(OPS->mem->mem_register(tp, dev + 100, 5000, RMACOLL_MEM_CUDA, &m3, &r3),
                     RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_dmabuf_mr, 2);
    assert_int_equal(fake_verbs_counts().dereg_mr, 1);   /* the stale one went */
    assert_int_not_equal(vt_rkey_value(&r3), vt_rkey_value(&r1));
    assert_int_equal(OPS->mem->mem_deregister(tp, m3), RMACOLL_SUCCESS);

    /* no dma-buf export: falls back to ibv_reg_mr (nvidia-peermem) */
    g_cu_handle_fail = 1;
    g_cu_buffer_id = 43;
    assert_int_equal(OPS->mem->mem_register(tp, dev, 4096, RMACOLL_MEM_CUDA, &m4, NULL),
                     RMACOLL_SUCCESS);
    assert_int_equal(fake_verbs_counts().reg_mr, 1);
    assert_int_equal(fake_verbs_counts().reg_dmabuf_mr, 2);
    assert_int_equal(OPS->mem->mem_deregister(tp, m4), RMACOLL_SUCCESS);
    vt_world_fini(&w);   /* idle cached entries are released by finalize */
    free(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_table),
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_real_library_no_device),
        cmocka_unit_test(test_named_device_missing),
        cmocka_unit_test(test_named_device_found),
        cmocka_unit_test(test_peer_failure_no_hang),
        cmocka_unit_test(test_bad_mtu_config),
        cmocka_unit_test(test_connect_ib_rail),
        cmocka_unit_test(test_connect_roce),
        cmocka_unit_test(test_closest_device),
        cmocka_unit_test(test_put_signal_exchange),
        cmocka_unit_test(test_split_large_put),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_backpressure_timeout),
        cmocka_unit_test(test_error_completion_rkey),
        cmocka_unit_test(test_error_completion_retry),
        cmocka_unit_test(test_bad_signal_index),
        cmocka_unit_test(test_put_argument_checks),
        cmocka_unit_test(test_reg_cache_host),
        cmocka_unit_test(test_revoke),
        cmocka_unit_test(test_reg_cuda_dmabuf),
    };

    alarm(120);   /* never hang */
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif /* RMACOLL_TEST_HAVE_VERBS */
