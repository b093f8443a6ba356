/*
 * test_bind.c - the transport interface as the core sees it (core/
 * transport.c: ABI and size checks, capabilities against ops, typed stubs)
 * and the bindings (core/xport/bind.c), over fake ops tables: no transport runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/xport/bind.h"
#include "core/xport/transport.h"

static rmacoll_status_t f_init(const rmacoll_transport_env_t *env, rmacoll_transport_t **tp)
{
    return RMACOLL_SUCCESS;
}

static void f_finalize(rmacoll_transport_t *tp)
{
}

static rmacoll_status_t f_reg(rmacoll_transport_t *tp, void *a, size_t b, rmacoll_memtype_t t,
                              rmacoll_mem_t **m, rmacoll_rkey_t *k)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_dereg(rmacoll_transport_t *tp, rmacoll_mem_t *m)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_export(rmacoll_transport_t *tp, void *a, size_t b, void *blob)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_import(rmacoll_transport_t *tp, int p, const void *blob, uint64_t *a)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_puts(rmacoll_transport_t *tp, const rmacoll_put_t *p, size_t n)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_puts_s(rmacoll_transport_t *tp, const rmacoll_put_t *p, size_t n,
                                 void *s)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_wait_s(rmacoll_transport_t *tp, const uint32_t *i, const uint64_t *v,
                                 size_t n, void *s)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_sig_s(rmacoll_transport_t *tp, int p, uint32_t i, uint64_t v, void *s)
{
    return RMACOLL_SUCCESS;
}

static rmacoll_status_t f_type_cuda(rmacoll_transport_t *tp, const void *addr,
                                    rmacoll_memtype_t *type)
{
    *type = RMACOLL_MEM_CUDA;
    return RMACOLL_SUCCESS;
}

static const rmacoll_transport_base_ops_t base = {sizeof(base), f_init, f_finalize, NULL, NULL,
                                                  NULL, NULL, NULL};
static const rmacoll_transport_mem_ops_t mem_all = {sizeof(mem_all), f_reg, f_dereg, f_export,
                                                    f_import, NULL, NULL, NULL, NULL, NULL};
static const rmacoll_transport_mem_ops_t mem_reg = {sizeof(mem_reg), f_reg, f_dereg, NULL, NULL,
                                                    NULL, NULL, NULL, NULL, NULL};
static const rmacoll_transport_host_ops_t host = {sizeof(host), f_puts};
static const rmacoll_transport_stream_ops_t stream = {sizeof(stream), f_puts_s, f_wait_s,
                                                      f_sig_s, NULL, NULL, NULL, NULL};

static rmacoll_transport_ops_t table(const char *name, uint64_t caps)
{
    rmacoll_transport_ops_t t;

    memset(&t, 0, sizeof(t));
    t.abi_version = RMACOLL_TRANSPORT_ABI_VERSION;
    t.struct_size = sizeof(t);
    t.name = name;
    t.desc = "fake";
    t.caps = caps;
    t.base = &base;
    t.mem = &mem_all;
    t.host = &host;
    t.stream = &stream;
    return t;
}

#define CE_HOST (RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_HOST)
#define NET (RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST)

static void test_adopt_stubs(void **state)
{
    rmacoll_transport_ops_t t = table("net", NET);
    rmacoll__tops_t o;
    char err[256];

    (void)state;
    t.mem = &mem_reg;
    t.stream = NULL;
    assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_string_equal(o.name, "net");
    assert_string_equal(o.spec, "net");
    /* missing ops are typed stubs, never NULL */
    assert_int_equal(o.base.progress(NULL), RMACOLL_SUCCESS);
    assert_int_equal(o.base.pending(NULL), 0);
    assert_int_equal(o.base.error_peer(NULL), -1);
    assert_int_equal(o.mem.mem_export(NULL, NULL, 0, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_int_equal(o.mem.mem_import(NULL, 0, NULL, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_int_equal(o.stream.post_puts_stream(NULL, NULL, 0, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_int_equal(o.stream.wait_stream(NULL, NULL, NULL, 0, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_int_equal(o.stream.signal_stream(NULL, 0, 0, 0, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_int_equal(o.mem.mem_revoke(NULL, NULL), RMACOLL_ERR_UNSUPPORTED);
    assert_ptr_equal(o.host.post_puts, f_puts);
}

static void expect_refused(const rmacoll_transport_ops_t *t, const char *words)
{
    rmacoll__tops_t o;
    char err[256];

    assert_int_equal(rmacoll__tops_adopt(t, &o, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    if (strstr(err, words) == NULL) {
        fail_msg("'%s' lacks '%s'", err, words);
    }
}

static void test_adopt_refusals(void **state)
{
    rmacoll_transport_ops_t t;
    rmacoll_transport_base_ops_t short_base = base;

    (void)state;
    t = table("x", NET);
    t.abi_version = 1;
    expect_refused(&t, "ABI mismatch: its ops table has abi_version 1");
    t = table("x", NET);
    t.struct_size = 16;
    expect_refused(&t, "ABI mismatch: its ops table has struct_size 16");
    t = table("x", NET);
    t.host = NULL;
    expect_refused(&t, "claims RMACOLL_TCAP_MEM_HOST but has no host.post_puts");
    t = table("x", NET);
    t.mem = NULL;
    expect_refused(&t, "claims RMACOLL_TCAP_PROXY but has no mem.mem_register");
    t = table("x", CE_HOST | RMACOLL_TCAP_MEM_CUDA);
    t.stream = NULL;
    expect_refused(&t, "claims RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA but has no "
                       "stream.post_puts_stream");
    t = table("x", CE_HOST | RMACOLL_TCAP_MEM_CUDA);
    t.mem = &mem_reg;
    expect_refused(&t, "has no mem.mem_export");
    t = table("x", NET | RMACOLL_TCAP_MEM_CUDA);
    expect_refused(&t, "without RMACOLL_TCAP_HMEM");
    t = table("x", RMACOLL_TCAP_MEM_HOST);
    expect_refused(&t, "neither RMACOLL_TCAP_CE nor RMACOLL_TCAP_PROXY");
    t = table("x", NET);
    short_base.size = 2;
    t.base = &short_base;
    expect_refused(&t, "ops group base has size 2");
    /* a shorter (older) group is fine: what it lacks is a stub */
    t = table("x", NET);
    short_base = base;
    short_base.size = offsetof(rmacoll_transport_base_ops_t, progress);
    short_base.progress = NULL;
    t.base = &short_base;
    {
        rmacoll__tops_t o;
        char err[256];
        assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
        assert_int_equal(o.base.pending(NULL), 0);
    }
    /* a mem group built before mem_revoke was appended: the stub */
    {
        static rmacoll_transport_mem_ops_t old_mem;
        rmacoll__tops_t o;
        char err[256];
        t = table("x", NET);
        old_mem = mem_reg;
        old_mem.size = offsetof(rmacoll_transport_mem_ops_t, mem_revoke);
        old_mem.mem_revoke = f_dereg; /* beyond its size: not read */
        t.mem = &old_mem;
        assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
        assert_int_equal(o.mem.mem_revoke(NULL, NULL), RMACOLL_ERR_UNSUPPORTED);
        assert_ptr_equal(o.mem.mem_register, f_reg);
    }
    /* a mem group built before mem_type was appended (rmacoll_mem_register
     * asks it): the stub, "cannot tell"; one that has it: its own */
    {
        static rmacoll_transport_mem_ops_t old_mem;
        rmacoll__tops_t o;
        rmacoll_memtype_t mt = RMACOLL_MEM_HOST;
        char err[256];
        t = table("x", NET);
        old_mem = mem_reg;
        old_mem.size = offsetof(rmacoll_transport_mem_ops_t, mem_type);
        old_mem.mem_type = f_type_cuda; /* beyond its size: not read */
        t.mem = &old_mem;
        assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
        assert_int_equal(o.mem.mem_type(NULL, &mt, &mt), RMACOLL_ERR_UNSUPPORTED);
        assert_int_equal(mt, RMACOLL_MEM_HOST);
        old_mem.size = sizeof(old_mem);
        assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
        assert_int_equal(o.mem.mem_type(NULL, &mt, &mt), RMACOLL_SUCCESS);
        assert_int_equal(mt, RMACOLL_MEM_CUDA);
    }
}

/* avail: ce-like (CE|HOST|CUDA), small (CE|CUDA, small_max_key), two nets. */
static void make_avail(rmacoll__tops_t *avail, int with_cuda)
{
    rmacoll_transport_ops_t t[4];
    char err[256];

    t[0] = table("copy", CE_HOST | (with_cuda ? RMACOLL_TCAP_MEM_CUDA : 0));
    t[1] = table("kern", RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA);
    t[1].small_max_key = "nvlink_kernel_threshold";
    t[2] = table("netA", NET);
    t[3] = table("netB", NET | RMACOLL_TCAP_MEM_CUDA | RMACOLL_TCAP_HMEM);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rmacoll__tops_adopt(&t[i], &avail[i], err, sizeof(err)),
                         RMACOLL_SUCCESS);
        avail[i].name = t[i].name; /* literals: outlive the local tables */
    }
}

static rmacoll_config_t cfg_with(const char *intra, const char *inter)
{
    rmacoll_config_t cfg;

    rmacoll_config_init(&cfg);
    strcpy(cfg.intra_node, intra);
    strcpy(cfg.inter_node, inter);
    cfg.nvlink_kernel_threshold = 4096;
    return cfg;
}

static const char *bound(const rmacoll__bind_plan_t *bp, int path, int mem, uint64_t largest)
{
    int i = rmacoll__bind_pick(&bp->bind[path][mem], largest);
    return i < 0 ? "-" : bp->ops[i]->name;
}

static void test_resolve(void **state)
{
    rmacoll__tops_t avail[4];
    rmacoll__bind_plan_t bp;
    rmacoll_config_t cfg;
    char err[256];

    (void)state;
    make_avail(avail, 1);
    /* a named CE transport: it serves everything it can */
    cfg = cfg_with("copy", "netA");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(bp.ninst, 2);
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_HOST, 1), "copy");
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 1), "copy");
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 1u << 30), "copy");
    assert_string_equal(bound(&bp, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST, 1), "netA");
    assert_string_equal(bound(&bp, RMACOLL__PATH_PROXY, RMACOLL_MEM_CUDA, 1), "-");
    assert_int_equal(bp.path[1], RMACOLL__PATH_PROXY);
    /* auto: the small transport up to its size key, the copy engine above */
    cfg = cfg_with("auto", "netB");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_int_equal(bp.ninst, 3);
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_HOST, 1), "copy");
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 0), "kern");
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 4096), "kern");
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 4097), "copy");
    assert_string_equal(bp.ops[bp.bind[RMACOLL__PATH_CE][RMACOLL_MEM_CUDA].ctl]->name, "copy");
    assert_string_equal(bound(&bp, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST, 1), "netB");
    /* a named device-only transport: every device queue, host by the copy one */
    cfg = cfg_with("kern", "netA");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 0, 0, &bp, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_HOST, 1), "copy");
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 1u << 30), "kern");
    assert_string_equal(bp.ops[bp.bind[RMACOLL__PATH_CE][RMACOLL_MEM_CUDA].ctl]->name, "copy");
    /* one node: no network transport is made */
    assert_string_equal(bound(&bp, RMACOLL__PATH_PROXY, RMACOLL_MEM_HOST, 1), "-");
    assert_int_equal(bp.ninst, 2);
    /* a host-only build: no device binding at all */
    make_avail(avail, 0);
    cfg = cfg_with("copy", "netA");
    assert_int_equal(rmacoll__bind_resolve(avail, 1, &cfg, 0, 0, &bp, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    assert_string_equal(bound(&bp, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA, 1), "-");
    assert_int_equal(bp.bind[RMACOLL__PATH_CE][RMACOLL_MEM_CUDA].ctl, -1);
}

static void test_resolve_errors(void **state)
{
    rmacoll__tops_t avail[4];
    rmacoll__bind_plan_t bp;
    rmacoll_config_t cfg;
    char err[256];

    (void)state;
    make_avail(avail, 1);
    cfg = cfg_with("nope", "netA");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 3, &bp, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "rank 3: transports.intra_node 'nope' is not built in"));
    cfg = cfg_with("netA", "netA");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "does not serve node peers"));
    cfg = cfg_with("copy", "kern");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "transports.inter_node 'kern' does not serve network peers"));
    cfg = cfg_with("copy", "absent");
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "transports.inter_node 'absent' is not built in"));
    /* the same config is fine on one node: no network transport needed */
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 0, 0, &bp, err, sizeof(err)),
                     RMACOLL_SUCCESS);
    /* nothing serves node peers in host memory */
    cfg = cfg_with("auto", "netA");
    assert_int_equal(rmacoll__bind_resolve(avail + 1, 3, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "no transport for node peers in host memory"));
    /* a size key that is not one */
    avail[1].small_max_key = "relay.slots";
    assert_int_equal(rmacoll__bind_resolve(avail, 4, &cfg, 1, 0, &bp, err, sizeof(err)),
                     RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "names size key 'relay.slots'"));
}

/* A network instance that finds HMEM at init (as ofi with a provider
 * reporting FI_HMEM): the extra bits, nothing else, and its account. */
static uint64_t f_caps_hmem(rmacoll_transport_t *tp, char *desc, size_t len)
{
    snprintf(desc, len, "FI_HMEM registration (provider shm)");
    return RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA | RMACOLL_TCAP_CE; /* CE: ignored */
}

static uint64_t f_caps_cuda_only(rmacoll_transport_t *tp, char *desc, size_t len)
{
    return RMACOLL_TCAP_MEM_CUDA; /* without HMEM: not for a PROXY transport */
}

static void test_instance_caps(void **state)
{
    rmacoll_transport_base_ops_t b = base;
    rmacoll_transport_ops_t t = table("net", NET);
    rmacoll__tops_t o;
    char err[256], desc[128];

    (void)state;
    assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
    memset(desc, 'x', sizeof(desc));
    /* no op: the table's caps, an empty account */
    assert_int_equal(rmacoll__tops_instance_caps(&o, NULL, desc, sizeof(desc)), NET);
    assert_string_equal(desc, "");
    b.instance_caps = f_caps_hmem;
    t.base = &b;
    assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__tops_instance_caps(&o, NULL, desc, sizeof(desc)),
                     NET | RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA);
    assert_string_equal(desc, "FI_HMEM registration (provider shm)");
    b.instance_caps = f_caps_cuda_only;
    assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_SUCCESS);
    assert_int_equal(rmacoll__tops_instance_caps(&o, NULL, desc, sizeof(desc)), NET);
    /* a pair or neither: mem_alloc without mem_free is a stub */
    assert_int_equal(o.mem.mem_alloc(NULL, 64, RMACOLL_MEM_CUDA, (void **)&t.name),
                     RMACOLL_ERR_UNSUPPORTED);
    assert_null(t.name);
    assert_int_equal(o.mem.mem_unshare(NULL, NULL, 0), RMACOLL_ERR_UNSUPPORTED); /* the stub */
    /* HOST_CUDA names host.post_puts */
    t = table("ce2", RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA | RMACOLL_TCAP_HOST_CUDA);
    t.host = NULL;
    assert_int_equal(rmacoll__tops_adopt(&t, &o, err, sizeof(err)), RMACOLL_ERR_CONFIG);
    assert_non_null(strstr(err, "HOST_CUDA"));
}

#define DN_NET (NET | RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA)
#define DN_CE (CE_HOST | RMACOLL_TCAP_MEM_CUDA | RMACOLL_TCAP_HOST_CUDA)

/* The device path across nodes from faked capabilities and the config:
 * the choice and the line logged at INFO. */
static void test_device_net(void **state)
{
    static const struct {
        const char *net;
        uint64_t net_caps;
        const char *desc;
        const char *ce;
        uint64_t ce_caps;
        rmacoll__devnet_mode_t mode;
        rmacoll_status_t st;
        int hmem;
        const char *why;
    } cases[] = {
        /* a provider that registers CUDA memory, a CE transport with a
         * host data path for it: registered, with the transport's account */
        {"ofi", DN_NET, "FI_HMEM registration (provider shm)", "ce", DN_CE,
         RMACOLL__DEVNET_AUTO, RMACOLL_SUCCESS, 1,
         "device path across nodes: FI_HMEM registration (provider shm)"},
        /* a static HMEM claim (verbs), no account */
        {"verbs", DN_NET, "", "ce", DN_CE, RMACOLL__DEVNET_AUTO, RMACOLL_SUCCESS, 1,
         "device path across nodes: device memory registered with transport verbs"},
        /* the provider lacks FI_HMEM: staged, with its reason */
        {"ofi", NET, "provider tcp lacks FI_HMEM", "ce", DN_CE, RMACOLL__DEVNET_AUTO,
         RMACOLL_SUCCESS, 0, "device path across nodes: host staging (provider tcp lacks "
                             "FI_HMEM)"},
        {"net", NET, "", "ce", DN_CE, RMACOLL__DEVNET_AUTO, RMACOLL_SUCCESS, 0,
         "device path across nodes: host staging (transport net does not register device "
         "memory: no RMACOLL_TCAP_HMEM)"},
        /* HMEM on the network, but the node side cannot copy for a host thread */
        {"ofi", DN_NET, "x", "nvlink_kernel", RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA,
         RMACOLL__DEVNET_AUTO, RMACOLL_SUCCESS, 0,
         "device path across nodes: host staging (transport nvlink_kernel cannot copy "
         "device memory for a host thread: no RMACOLL_TCAP_HOST_CUDA)"},
        {"ofi", DN_NET, "x", NULL, 0, RMACOLL__DEVNET_AUTO, RMACOLL_SUCCESS, 0,
         "device path across nodes: host staging (no transport for node peers in device "
         "memory)"},
        /* the config forces staging, or requires registration */
        {"ofi", DN_NET, "x", "ce", DN_CE, RMACOLL__DEVNET_STAGED, RMACOLL_SUCCESS, 0,
         "device path across nodes: host staging (transports.device_inter_node = staged)"},
        {"ofi", DN_NET, "x", "ce", DN_CE, RMACOLL__DEVNET_HMEM, RMACOLL_SUCCESS, 1,
         "device path across nodes: x"},
        {"ofi", NET, "provider tcp lacks FI_HMEM", "ce", DN_CE, RMACOLL__DEVNET_HMEM,
         RMACOLL_ERR_CONFIG, 0, "transports.device_inter_node = hmem, but provider tcp "
                                "lacks FI_HMEM"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[512];
        int hmem = -1;

        assert_int_equal(rmacoll__bind_device_net(cases[i].net, cases[i].net_caps,
                                                  cases[i].desc, cases[i].ce,
                                                  cases[i].ce_caps, cases[i].mode, &hmem,
                                                  why, sizeof(why)),
                         cases[i].st);
        assert_int_equal(hmem, cases[i].hmem);
        assert_string_equal(why, cases[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adopt_stubs),
        cmocka_unit_test(test_instance_caps),
        cmocka_unit_test(test_device_net),
        cmocka_unit_test(test_adopt_refusals),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_resolve_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
