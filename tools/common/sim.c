/*
 * sim.c - fabric model and plan-replaying simulator (see sim.h and
 * docs/sim.md). Discrete events over fluid flows: a flow's rate is the
 * smallest bandwidth / active-flows over its links, re-evaluated whenever a
 * flow joins or leaves one of them.
 *
 * Two queues: flow ends (an indexed heap, one entry per flow in flight,
 * moved in place when the flow's rate changes) and the other events (a
 * heap). Simultaneous events run in one fixed order (ev_before), whatever
 * the heaps' layout, so results do not depend on how they are stored.
 *
 * Each rank executes its plan's flow (core/plan/flow.h: lanes of steps)
 * as the runtime does: one thread issues one step at a time, the ready
 * step whose first task comes first in the plan (rank_step).
 */
#include "sim.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cyaml/cyaml.h>

#include "core/plan/flow.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "planin.h"

/* ------------------------------------------------------------- model */

void sim_model_defaults(sim_model_t *m)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "H200 + ConnectX-7, rail-only (defaults)");
    m->nic_bw = 48.5e9;      /* CX-7 400 Gb/s, measured RDMA write bandwidth */
    m->nic_lat = 3.0e-6;     /* RDMA write + completion, a few us */
    m->pcie_bw = 53.0e9;     /* PCIe Gen5 x16, practical */
    m->ce_bw = 395.0e9;      /* H200 copy engine over NVLink, one way */
    m->ce_bidir_bw = 652.0e9;  /* both ways together */
    m->ce_lat = 9.5e-6;      /* one small copy: submission to completion seen by the host (measured, docs/sim.md) */
    m->ce_copy_s = 3.7e-6;   /* each further copy of one submission (measured, docs/sim.md) */
    m->ce_kernel_s = 9.5e-6; /* one nvlink_kernel launch: assumed as one copy (docs/sim.md) */
    m->self_bw = 1500.0e9;   /* device-local copy (assumed) */
    m->put_s = 0.3e-6;       /* proxy: post one work request */
    m->batch_s = 0.5e-6;     /* executor: issue one step (core/plan/flow.h) */
}

typedef struct yaml_link {
    char *bandwidth_GBps, *bidir_GBps, *latency_us, *copy_us, *kernel_us;
} yaml_link_t;

typedef struct yaml_host {
    char *put_us, *batch_us, *call_us;
} yaml_host_t;

typedef struct yaml_model {
    char *name;
    yaml_link_t *nic, *pcie, *nvlink, *self;
    yaml_host_t *host;
} yaml_model_t;

static const cyaml_schema_field_t yaml_link_fields[] = {
    CYAML_FIELD_STRING_PTR("bandwidth_GBps", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_link_t, bandwidth_GBps, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR("bidir_GBps", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_link_t, bidir_GBps, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR("latency_us", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_link_t, latency_us, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR("copy_us", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_link_t, copy_us, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR("kernel_us", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_link_t, kernel_us, 0, CYAML_UNLIMITED),
    CYAML_FIELD_END
};

static const cyaml_schema_field_t yaml_host_fields[] = {
    CYAML_FIELD_STRING_PTR("put_us", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_host_t, put_us, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR("batch_us", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_host_t, batch_us, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR("call_us", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_host_t, call_us, 0, CYAML_UNLIMITED),
    CYAML_FIELD_END
};

static const cyaml_schema_field_t yaml_model_fields[] = {
    CYAML_FIELD_STRING_PTR("name", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                           yaml_model_t, name, 0, CYAML_UNLIMITED),
    CYAML_FIELD_MAPPING_PTR("nic", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                            yaml_model_t, nic, yaml_link_fields),
    CYAML_FIELD_MAPPING_PTR("pcie", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                            yaml_model_t, pcie, yaml_link_fields),
    CYAML_FIELD_MAPPING_PTR("nvlink", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                            yaml_model_t, nvlink, yaml_link_fields),
    CYAML_FIELD_MAPPING_PTR("self", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                            yaml_model_t, self, yaml_link_fields),
    CYAML_FIELD_MAPPING_PTR("host", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
                            yaml_model_t, host, yaml_host_fields),
    CYAML_FIELD_END
};

static const cyaml_schema_value_t yaml_model_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, yaml_model_t, yaml_model_fields),
};

/* A number >= 0 (> 0 when positive); scale converts to SI. */
static int yaml_num(const char *path, const char *key, const char *s,
                    double scale, int positive, double *out, char *err,
                    size_t errlen)
{
    char *end;
    double v;

    if (s == NULL) {
        return 0;
    }
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < 0 ||
        (positive && v == 0)) {
        snprintf(err, errlen, "%s: %s: expected a %s number, got '%s'", path,
                 key, positive ? "positive" : "non-negative", s);
        return -1;
    }
    *out = v * scale;
    return 0;
}

rmacoll_status_t sim_model_load(const char *path, sim_model_t *m, char *err,
                                size_t errlen)
{
    static const cyaml_config_t cfg = {
        .log_fn = NULL, .mem_fn = cyaml_mem, .log_level = CYAML_LOG_ERROR,
    };
    yaml_model_t *y = NULL;
    cyaml_err_t e;
    int bad = 0;

    e = cyaml_load_file(path, &cfg, &yaml_model_schema, (cyaml_data_t **)&y, NULL);
    if (e != CYAML_OK) {
        snprintf(err, errlen, "%s: %s", path, cyaml_strerror(e));
        return RMACOLL_ERR_CONFIG;
    }
    if (y->name != NULL) {
        snprintf(m->name, sizeof(m->name), "%s", y->name);
    }
    if (y->nic) {
        bad |= yaml_num(path, "nic.bandwidth_GBps", y->nic->bandwidth_GBps, 1e9, 1, &m->nic_bw, err, errlen);
        bad |= yaml_num(path, "nic.latency_us", y->nic->latency_us, 1e-6, 0, &m->nic_lat, err, errlen);
        bad |= y->nic->bidir_GBps ? (snprintf(err, errlen, "%s: nic.bidir_GBps: not a key of nic", path), -1) : 0;
        bad |= y->nic->copy_us ? (snprintf(err, errlen, "%s: nic.copy_us: not a key of nic", path), -1) : 0;
        bad |= y->nic->kernel_us ? (snprintf(err, errlen, "%s: nic.kernel_us: not a key of nic", path), -1) : 0;
    }
    if (y->pcie) {
        bad |= yaml_num(path, "pcie.bandwidth_GBps", y->pcie->bandwidth_GBps, 1e9, 0, &m->pcie_bw, err, errlen);
    }
    if (y->nvlink) {
        bad |= yaml_num(path, "nvlink.bandwidth_GBps", y->nvlink->bandwidth_GBps, 1e9, 1, &m->ce_bw, err, errlen);
        bad |= yaml_num(path, "nvlink.bidir_GBps", y->nvlink->bidir_GBps, 1e9, 0, &m->ce_bidir_bw, err, errlen);
        bad |= yaml_num(path, "nvlink.latency_us", y->nvlink->latency_us, 1e-6, 0, &m->ce_lat, err, errlen);
        bad |= yaml_num(path, "nvlink.copy_us", y->nvlink->copy_us, 1e-6, 0, &m->ce_copy_s, err, errlen);
        bad |= yaml_num(path, "nvlink.kernel_us", y->nvlink->kernel_us, 1e-6, 0, &m->ce_kernel_s, err, errlen);
    }
    if (y->self) {
        bad |= yaml_num(path, "self.bandwidth_GBps", y->self->bandwidth_GBps, 1e9, 1, &m->self_bw, err, errlen);
    }
    if (y->host) {
        bad |= yaml_num(path, "host.put_us", y->host->put_us, 1e-6, 0, &m->put_s, err, errlen);
        bad |= yaml_num(path, "host.batch_us", y->host->batch_us, 1e-6, 0, &m->batch_s, err, errlen);
        bad |= yaml_num(path, "host.call_us", y->host->call_us, 1e-6, 0, &m->call_s, err, errlen);
    }
    cyaml_free(&cfg, &yaml_model_schema, y, 0);
    return bad ? RMACOLL_ERR_CONFIG : RMACOLL_SUCCESS;
}

void sim_model_print(FILE *out, const sim_model_t *m)
{
    fprintf(out,
            "name: \"%s\"\n"
            "nic: {bandwidth_GBps: %g, latency_us: %g}\n"
            "pcie: {bandwidth_GBps: %g}\n"
            "nvlink: {bandwidth_GBps: %g, bidir_GBps: %g, latency_us: %g, copy_us: %g, "
            "kernel_us: %g}\n"
            "self: {bandwidth_GBps: %g}\n"
            "host: {put_us: %g, batch_us: %g, call_us: %g}\n",
            m->name, m->nic_bw / 1e9, m->nic_lat * 1e6, m->pcie_bw / 1e9,
            m->ce_bw / 1e9, m->ce_bidir_bw / 1e9, m->ce_lat * 1e6, m->ce_copy_s * 1e6,
            m->ce_kernel_s * 1e6,
            m->self_bw / 1e9, m->put_s * 1e6, m->batch_s * 1e6, m->call_s * 1e6);
}

const char *sim_class_name(int cls)
{
    static const char *const names[SIM_NCLASSES] = {
        "nic_tx", "nic_rx", "pcie_tx", "pcie_rx", "nvl_tx", "nvl_rx", "nvl_bi", "self"};

    return cls >= 0 && cls < SIM_NCLASSES ? names[cls] : "?";
}

void sim_opts_init(sim_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->scheduler = "node_shift";
    o->cfg.relay_enabled = 1;
    o->cfg.relay_buffer_bytes = 64ull << 20;
    o->cfg.relay_slots = 4;
    o->cfg.max_task_bytes = 1ull << 30;
    o->cfg.merge_max_puts = 256;
    o->trace_ranks = 8;
    o->feed_load = 1;
}

/* ------------------------------------------------------------- state */

typedef struct sim_task {
    uint64_t bytes;
    uint32_t sig_value;
    uint32_t sig;             /* UINT32_MAX: a wait written on an unsimulated
                               * rail, taken as holding */
    int32_t peer;
    int32_t round;
    uint16_t flags;
    uint8_t op, path;
} sim_task_t;

/* One step of a rank's flow (core/plan/flow.h): one WAIT, or PUTs of one
 * path and round, tasks t[first .. first + count). */
typedef struct sim_step {
    uint32_t first, count;
    uint32_t key;             /* plan index of its first task: the pick order */
    uint8_t wait, path;
} sim_step_t;

/* The flow whose signal made a wait hold (for the critical path). */
typedef struct sim_cause {
    double t;                 /* when; -1: none yet */
    int32_t rank, rec;        /* its poster: simulated rank, record */
    float xfer, queue, lat;
    uint8_t ce;               /* a CE flow (else proxy) */
} sim_cause_t;

/* One record per step the thread issued, in issue order, and a last one
 * for the end of the FINAL lane: for the critical path. */
typedef struct sim_srec {
    double start, end;        /* end: CE puts done (CE step), else start */
    float xfer, queue, lat;   /* woke: the signalling flow */
    int32_t crank, crec;      /* woke: its poster */
    uint8_t woke;             /* 0: thread's previous record + step cost;
                               * 1: a wait became true (proxy flow), 2 (CE) */
    uint8_t ce;               /* a CE step */
    uint8_t final;            /* the end of the FINAL lane, not a step */
} sim_srec_t;

typedef struct sim_rank {
    int id;
    sim_task_t *t;            /* [nt] the plan's tasks in flow order */
    uint32_t nt;
    uint32_t *ppos;           /* [nt] index in t of the plan's task k */
    sim_step_t *st;
    uint32_t nst;
    uint32_t *lane_step;      /* [nlanes + 1]; the last lane is FINAL */
    uint32_t nlanes, lanes_open;  /* lanes before FINAL not finished */
    uint32_t *lcur;           /* [nlanes] each lane's next step */
    sim_cause_t *lcause;      /* [nlanes] what satisfied its latest wait */
    uint32_t *ready;          /* heap of lanes whose head step is ready */
    uint32_t nready;
    sim_srec_t *rec;          /* [nst + 1] */
    uint32_t nrec;
    uint32_t *ce_list;        /* [nt] the CE submission running: its tasks */
    uint32_t ce_i, ce_n;      /* its next task to start, its length */
    uint32_t ce_active;       /* its copies started, not done */
    int ce_kern;              /* it runs as nvlink_kernel launches */
    uint32_t *aside;          /* [nlanes] merging: the other ready lanes */
    uint32_t *mstamp, mseq;   /* [nlanes] merging: lanes taken (== mseq) */
    int step_ev, blocked, final_done;
    uint32_t nsig;
    uint32_t *sig;
    int32_t *whead, *wnext;   /* per word, per lane: lanes whose head waits */
    int proxy_out;            /* proxy puts issued, not yet finished */
    double end, final_t, post_free, blocked_since;
    sim_cause_t wake;         /* the latest wait that became true */
    /* queue pairs with a flow in flight: dst rank, tail flow */
    int32_t *qdst, *qtail;
    int nq, qcap;
} sim_rank_t;

typedef struct sim_flow {
    double rem, rate, last, post, start, done;
    int32_t link[4], lpos[4];
    int32_t hpos;             /* place in the end queue, -1 = not in it */
    int32_t rk, task, rec, dst, qnext;  /* poster: rank, task, record */
    uint32_t mark;            /* last link change that settled / rescheduled it */
    uint32_t sig;             /* the task's signal word and flags */
    uint16_t flags;
    uint8_t nl, path, active, joined;
    uint8_t mirror;           /* a proxy put on the skipped PCIe links */
} sim_flow_t;

typedef struct sim_event {
    double t;
    uint32_t kind, a, b, c;
} sim_event_t;

/* A flow's end is not an event of this list: it is kept in the end queue
 * (one entry per flow in flight, moved when its rate changes). */
enum { EV_FLOW_DONE = 0, EV_SIGNAL, EV_POST, EV_CE_START, EV_STEP };

/* End queue entry: a flow in flight and when it ends at its rate now. */
typedef struct sim_fend {
    double t;
    int32_t id;
} sim_fend_t;

typedef struct sim_trace_iv {
    double t0, t1;
    int32_t row;
    uint8_t kind;
} sim_trace_iv_t;

typedef struct sim {
    const sim_model_t *m;
    const rmacoll_topo_t *topo;
    rmacoll_topo_t *topo_own;
    int n, nsim;
    int G, equal;             /* largest node size; all nodes that size */
    sim_rank_t *rk;
    int32_t *sim_of;          /* [n] global rank -> simulated index, -1 */
    /* links [n * SIM_NCLASSES] */
    double *bw, *busy_since, *busy;
    double *share;            /* bw / flows on the link (when it has some) */
    /* A rank's PCIe links carry the same flows as its NIC links; with
     * pcie_bw >= nic_bw they never set a rate, so flows skip them and
     * their busy time is the NIC's (pcie_mirror). */
    int pcie_links, pcie_mirror;
    uint32_t mark;            /* link changes so far */
    int32_t *nfl, *flcap;
    int32_t **fl;
    uint64_t *lbytes;
    /* flows */
    sim_flow_t *f;
    size_t nf, fcap;
    int32_t *ffree;
    size_t nfree, ffree_cap;
    /* events; flow ends */
    sim_event_t *ev;
    size_t nev, evcap;
    sim_fend_t *fh;
    size_t nfh, fhcap;
    uint64_t nevents, nflows;
    double now;
    int failed;
    uint32_t merge_max;       /* merge_max_puts of the options' cfg */
    uint64_t kernel_max;      /* the options' kernel_max_bytes */
    /* trace */
    int32_t *trace_row;       /* [n] first row of a traced rank, -1 */
    int ntrace;
    sim_trace_iv_t *iv;
    size_t niv, ivcap;
    int32_t *aff;             /* scratch: affected flows */
    size_t naff, affcap;
} sim_t;

/* ------------------------------------------------------------- heap */

/* Event order: time, then kind (flow ends, signals, posts, CE starts,
 * a rank's thread picking its next step), then the event's fields:
 * simultaneous events run in an order that does not depend on how the
 * queue stores them. */
static int ev_before(const sim_event_t *x, const sim_event_t *y)
{
    if (x->t != y->t) {
        return x->t < y->t;
    }
    if (x->kind != y->kind) {
        return x->kind < y->kind;
    }
    if (x->a != y->a) {
        return x->a < y->a;
    }
    if (x->b != y->b) {
        return x->b < y->b;
    }
    return x->c < y->c;
}

static int ev_push3(sim_t *s, double t, uint32_t kind, uint32_t a, uint32_t b,
                    uint32_t c)
{
    sim_event_t ne = {t, kind, a, b, c};
    size_t i;

    if (s->nev == s->evcap) {
        size_t cap = s->evcap ? 2 * s->evcap : 1024;
        sim_event_t *e = realloc(s->ev, cap * sizeof(*e));
        if (e == NULL) {
            s->failed = 1;
            return -1;
        }
        s->ev = e;
        s->evcap = cap;
    }
    i = s->nev++;
    s->nevents++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_before(&ne, &s->ev[p])) {
            break;
        }
        s->ev[i] = s->ev[p];
        i = p;
    }
    s->ev[i] = ne;
    return 0;
}

static int ev_push(sim_t *s, double t, uint32_t kind, uint32_t a, uint32_t b)
{
    return ev_push3(s, t, kind, a, b, 0);
}

static sim_event_t ev_pop(sim_t *s)
{
    sim_event_t top = s->ev[0], last = s->ev[--s->nev];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nev) {
            break;
        }
        if (c + 1 < s->nev && ev_before(&s->ev[c + 1], &s->ev[c])) {
            c++;
        }
        if (!ev_before(&s->ev[c], &last)) {
            break;
        }
        s->ev[i] = s->ev[c];
        i = c;
    }
    if (s->nev > 0) {
        s->ev[i] = last;
    }
    return top;
}

/* End queue order: time, then flow id (the order of EV_FLOW_DONE events
 * by ev_before: they come before every other kind at the same time). */
static int fend_before(const sim_fend_t *x, const sim_fend_t *y)
{
    return x->t < y->t || (x->t == y->t && x->id < y->id);
}

static void fend_place(sim_t *s, size_t i, sim_fend_t e)
{
    s->fh[i] = e;
    s->f[e.id].hpos = (int32_t)i;
}

/* Moves entry i towards the root or the leaves until the order holds. */
static void fend_sift(sim_t *s, size_t i)
{
    sim_fend_t e = s->fh[i];

    while (i > 0 && fend_before(&e, &s->fh[(i - 1) / 2])) {
        fend_place(s, i, s->fh[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nfh) {
            break;
        }
        if (c + 1 < s->nfh && fend_before(&s->fh[c + 1], &s->fh[c])) {
            c++;
        }
        if (!fend_before(&s->fh[c], &e)) {
            break;
        }
        fend_place(s, i, s->fh[c]);
        i = c;
    }
    fend_place(s, i, e);
}

/* Flow id ends at t: enters the end queue, or moves in it. Counts as one
 * event scheduled. */
static void fend_set(sim_t *s, int32_t id, double t)
{
    int32_t pos = s->f[id].hpos;

    s->nevents++;
    if (pos >= 0) {
        if (s->fh[pos].t != t) {
            s->fh[pos].t = t;
            fend_sift(s, (size_t)pos);
        }
        return;
    }
    if (s->nfh == s->fhcap) {
        size_t cap = s->fhcap ? 2 * s->fhcap : 1024;
        sim_fend_t *p = realloc(s->fh, cap * sizeof(*p));
        if (p == NULL) {
            s->failed = 1;
            return;
        }
        s->fh = p;
        s->fhcap = cap;
    }
    s->fh[s->nfh].t = t;
    s->fh[s->nfh].id = id;
    s->nfh++;
    fend_sift(s, s->nfh - 1);
}

/* Takes the first flow end out of the queue. */
static int32_t fend_pop(sim_t *s)
{
    int32_t id = s->fh[0].id;

    s->f[id].hpos = -1;
    if (--s->nfh > 0) {
        fend_place(s, 0, s->fh[s->nfh]);
        fend_sift(s, 0);
    }
    return id;
}

/* ------------------------------------------------------------- flows */

static int32_t flow_alloc(sim_t *s)
{
    if (s->nfree > 0) {
        return s->ffree[--s->nfree];
    }
    if (s->nf == s->fcap) {
        size_t cap = s->fcap ? 2 * s->fcap : 1024;
        sim_flow_t *f = realloc(s->f, cap * sizeof(*f));
        if (f == NULL) {
            s->failed = 1;
            return -1;
        }
        s->f = f;
        s->fcap = cap;
    }
    return (int32_t)s->nf++;
}

static void flow_free(sim_t *s, int32_t id)
{
    if (s->nfree == s->ffree_cap) {
        size_t cap = s->ffree_cap ? 2 * s->ffree_cap : 1024;
        int32_t *p = realloc(s->ffree, cap * sizeof(*p));
        if (p == NULL) {
            s->failed = 1;
            return;
        }
        s->ffree = p;
        s->ffree_cap = cap;
    }
    s->ffree[s->nfree++] = id;
}

static void aff_add(sim_t *s, int32_t id)
{
    if (s->naff == s->affcap) {
        size_t cap = s->affcap ? 2 * s->affcap : 256;
        int32_t *p = realloc(s->aff, cap * sizeof(*p));
        if (p == NULL) {
            s->failed = 1;
            return;
        }
        s->aff = p;
        s->affcap = cap;
    }
    s->aff[s->naff++] = id;
}

static void trace_add(sim_t *s, int32_t row, double t0, double t1, int kind)
{
    if (s->niv == s->ivcap) {
        size_t cap = s->ivcap ? 2 * s->ivcap : 1024;
        sim_trace_iv_t *p;
        if (cap > 400000) {
            return;  /* enough for a picture */
        }
        p = realloc(s->iv, cap * sizeof(*p));
        if (p == NULL) {
            return;
        }
        s->iv = p;
        s->ivcap = cap;
    }
    s->iv[s->niv].t0 = t0;
    s->iv[s->niv].t1 = t1;
    s->iv[s->niv].row = row;
    s->iv[s->niv].kind = (uint8_t)kind;
    s->niv++;
}

/* Trace rows of a traced rank: nic_tx, nic_rx, nvl_tx, nvl_rx, wait. */
#define SIM_TRACE_ROWS 5

static int trace_row_of_link(const sim_t *s, int32_t link)
{
    int r = link / SIM_NCLASSES, cls = link % SIM_NCLASSES;
    int base = s->trace_row ? s->trace_row[r] : -1;

    if (base < 0) {
        return -1;
    }
    switch (cls) {
    case SIM_NIC_TX: return base;
    case SIM_NIC_RX: return base + 1;
    case SIM_NVL_TX: return base + 2;
    case SIM_NVL_RX: return base + 3;
    default: return -1;
    }
}

static inline void settle(sim_t *s, sim_flow_t *g)
{
    g->rem -= g->rate * (s->now - g->last);
    if (g->rem < 0) {
        g->rem = 0;
    }
    g->last = s->now;
}

static void rate_update(sim_t *s, int32_t id)
{
    sim_flow_t *g = &s->f[id];
    double r = INFINITY;

    for (int k = 0; k < g->nl; k++) {
        double x = s->share[g->link[k]];
        r = x < r ? x : r;
    }
    g->rate = r;
    fend_set(s, id, s->now + g->rem / r);
}

static void link_busy(sim_t *s, int32_t L, int delta)
{
    if (s->nfl[L] == 0 && delta > 0) {
        s->busy_since[L] = s->now;
    } else if (s->nfl[L] == 1 && delta < 0) {
        s->busy[L] += s->now - s->busy_since[L];
    }
}

/* Adds (join = 1) or removes flow id on its links, rescheduling every flow
 * whose share changes. A flow on several of these links is settled and
 * rescheduled once (again would change nothing) but counted each time. */
static void flow_links(sim_t *s, int32_t id, int join)
{
    sim_flow_t *f = &s->f[id];
    uint32_t mark = ++s->mark;

    s->naff = 0;
    for (int k = 0; k < f->nl; k++) {
        int32_t L = f->link[k];
        for (int32_t q = 0; q < s->nfl[L]; q++) {
            sim_flow_t *g = &s->f[s->fl[L][q]];
            if (g->mark != mark) {
                g->mark = mark;
                settle(s, g);
            }
        }
    }
    for (int k = 0; k < f->nl; k++) {
        int32_t L = f->link[k];
        link_busy(s, L, join ? 1 : -1);
        if (join) {
            if (s->nfl[L] == s->flcap[L]) {
                int32_t cap = s->flcap[L] ? 2 * s->flcap[L] : 4;
                int32_t *p = realloc(s->fl[L], (size_t)cap * sizeof(*p));
                if (p == NULL) {
                    s->failed = 1;
                    return;
                }
                s->fl[L] = p;
                s->flcap[L] = cap;
            }
            f->lpos[k] = s->nfl[L];
            s->fl[L][s->nfl[L]++] = id;
        } else {
            int32_t pos = f->lpos[k], last = s->fl[L][--s->nfl[L]];
            s->fl[L][pos] = last;
            /* fix the moved flow's position for this link */
            for (int k2 = 0; k2 < s->f[last].nl; k2++) {
                if (s->f[last].link[k2] == L) {
                    s->f[last].lpos[k2] = pos;
                }
            }
        }
        if (s->nfl[L] > 0) {
            s->share[L] = s->bw[L] / (double)s->nfl[L];
        }
    }
    mark = ++s->mark;
    if (f->mirror) {
        /* the reschedules the PCIe links would have added (same flows) */
        s->nevents += (uint64_t)s->nfl[f->link[0]] + (uint64_t)s->nfl[f->link[1]];
    }
    for (int k = 0; k < f->nl; k++) {
        int32_t L = f->link[k];
        for (int32_t q = 0; q < s->nfl[L]; q++) {
            int32_t g = s->fl[L][q];
            if (s->f[g].mark != mark) {
                s->f[g].mark = mark;
                aff_add(s, g);
            } else {
                s->nevents++;
            }
        }
    }
    for (size_t q = 0; q < s->naff; q++) {
        rate_update(s, s->aff[q]);
    }
}

static void flow_start(sim_t *s, int32_t id)
{
    sim_flow_t *f = &s->f[id];

    f->start = s->now;
    f->last = s->now;
    f->active = 1;
    s->nflows++;
    if (f->rem <= 0 || f->nl == 0) {
        f->rem = 0;
        fend_set(s, id, s->now);
        return;
    }
    f->joined = 1;
    flow_links(s, id, 1);
}

static void deliver_signal(sim_t *s, int32_t id);
static void ce_next(sim_t *s, sim_rank_t *r);

/* Creates the flow of task k of rank r, issued by its record rec. */
static int32_t flow_make(sim_t *s, sim_rank_t *r, uint32_t k, uint32_t rec)
{
    const sim_task_t *t = &r->t[k];
    int32_t id = flow_alloc(s);
    sim_flow_t *f;
    int src = r->id, dst = t->peer;

    if (id < 0) {
        return -1;
    }
    f = &s->f[id];
    memset(f, 0, sizeof(*f));
    f->hpos = -1;
    f->rem = (double)t->bytes;
    f->post = s->now;
    f->rk = (int32_t)(r - s->rk);
    f->task = (int32_t)k;
    f->rec = (int32_t)rec;
    f->dst = dst;
    f->qnext = -1;
    f->path = t->path;
    f->sig = t->sig;
    f->flags = t->flags;
    if (t->flags & RMACOLL__TASK_SELF) {
        f->link[f->nl++] = src * SIM_NCLASSES + SIM_SELF;
    } else if (t->path == RMACOLL__PATH_PROXY) {
        f->link[f->nl++] = src * SIM_NCLASSES + SIM_NIC_TX;
        f->link[f->nl++] = dst * SIM_NCLASSES + SIM_NIC_RX;
        f->mirror = (uint8_t)s->pcie_mirror;
        if (s->pcie_links) {
            f->link[f->nl++] = src * SIM_NCLASSES + SIM_PCIE_TX;
            f->link[f->nl++] = dst * SIM_NCLASSES + SIM_PCIE_RX;
        }
    } else {
        f->link[f->nl++] = src * SIM_NCLASSES + SIM_NVL_TX;
        f->link[f->nl++] = dst * SIM_NCLASSES + SIM_NVL_RX;
        if (s->m->ce_bidir_bw > 0) {
            f->link[f->nl++] = src * SIM_NCLASSES + SIM_NVL_BI;
            f->link[f->nl++] = dst * SIM_NCLASSES + SIM_NVL_BI;
        }
    }
    return id;
}

/* Proxy put k of rank r is posted now: FIFO per (src, dst) queue pair
 * (r->proxy_out counted it when its step was issued). */
static void post_proxy(sim_t *s, sim_rank_t *r, uint32_t k, uint32_t rec)
{
    int32_t id = flow_make(s, r, k, rec);
    int dst = r->t[k].peer;

    if (id < 0) {
        return;
    }
    for (int q = 0; q < r->nq; q++) {
        if (r->qdst[q] == dst) {
            s->f[r->qtail[q]].qnext = id;
            r->qtail[q] = id;
            return;
        }
    }
    if (r->nq == r->qcap) {
        int cap = r->qcap ? 2 * r->qcap : 8;
        int32_t *a = realloc(r->qdst, (size_t)cap * sizeof(*a));
        int32_t *b = a ? realloc(r->qtail, (size_t)cap * sizeof(*b)) : NULL;
        if (a) {
            r->qdst = a;
        }
        if (b == NULL) {
            s->failed = 1;
            return;
        }
        r->qtail = b;
        r->qcap = cap;
    }
    r->qdst[r->nq] = dst;
    r->qtail[r->nq] = id;
    r->nq++;
    flow_start(s, id);
}

static void flow_done(sim_t *s, int32_t id)
{
    sim_flow_t *f = &s->f[id];
    sim_rank_t *r = &s->rk[f->rk];
    uint16_t flags = f->flags;

    if (f->joined) {
        flow_links(s, id, 0);
    }
    f = &s->f[id];
    f->done = s->now;
    f->active = 0;
    for (int k = 0; k < f->nl && s->trace_row; k++) {
        int row = trace_row_of_link(s, f->link[k]);
        if (row >= 0 && s->now > f->start) {
            trace_add(s, row, f->start, s->now,
                      (flags & RMACOLL__TASK_FORWARD) ? 2
                      : (flags & RMACOLL__TASK_TO_RELAY) ? 1
                      : (flags & RMACOLL__TASK_SELF) ? 3 : 0);
        }
    }
    if (f->path == RMACOLL__PATH_PROXY) {
        int32_t next = f->qnext;
        r->proxy_out--;
        if (next >= 0) {
            flow_start(s, next);
        } else {
            for (int q = 0; q < r->nq; q++) {
                if (r->qdst[q] == f->dst) {
                    r->qdst[q] = r->qdst[r->nq - 1];
                    r->qtail[q] = r->qtail[r->nq - 1];
                    r->nq--;
                    break;
                }
            }
        }
        if (flags & RMACOLL__TASK_SIGNAL) {
            ev_push(s, s->now + s->m->nic_lat, EV_SIGNAL, (uint32_t)id, 0);
        } else {
            flow_free(s, id);
        }
        if (r->proxy_out == 0 && r->final_done) {
            r->end = s->now > r->final_t ? s->now : r->final_t;
        }
    } else {
        r->ce_active--;
        if (flags & RMACOLL__TASK_SIGNAL) {
            deliver_signal(s, id);
        } else {
            flow_free(s, id);
        }
        ce_next(s, r);
    }
}

/* ------------------------------------------------------- a rank's flow */

/* Ready lanes: a heap by the plan index of their head step's first task
 * (the runtime's pick, core/plan/flow.h); a lane is in it at most once. */
static int ready_before(const sim_rank_t *r, uint32_t a, uint32_t b)
{
    return r->st[r->lcur[a]].key < r->st[r->lcur[b]].key;
}

static void ready_push(sim_rank_t *r, uint32_t l)
{
    uint32_t i = r->nready++;

    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!ready_before(r, l, r->ready[p])) {
            break;
        }
        r->ready[i] = r->ready[p];
        i = p;
    }
    r->ready[i] = l;
}

static uint32_t ready_pop(sim_rank_t *r)
{
    uint32_t top = r->ready[0], last = r->ready[--r->nready], i = 0;

    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= r->nready) {
            break;
        }
        if (c + 1 < r->nready && ready_before(r, r->ready[c + 1], r->ready[c])) {
            c++;
        }
        if (!ready_before(r, r->ready[c], last)) {
            break;
        }
        r->ready[i] = r->ready[c];
        i = c;
    }
    if (r->nready > 0) {
        r->ready[i] = last;
    }
    return top;
}

static int wait_holds(const sim_rank_t *r, const sim_task_t *t)
{
    return t->sig >= r->nsig || r->sig[t->sig] >= t->sig_value;
}

/* Lane l's next step becomes its head: ready at once (a put, or a wait
 * that holds), or a wait registered on its signal word. */
static void lane_arm(sim_rank_t *r, uint32_t l)
{
    const sim_step_t *p = &r->st[r->lcur[l]];
    const sim_task_t *t = &r->t[p->first];

    if (!p->wait || wait_holds(r, t)) {
        ready_push(r, l);
        return;
    }
    r->wnext[l] = r->whead[t->sig];
    r->whead[t->sig] = (int32_t)l;
}

/* Lane l's head step is done (a wait consumed, puts issued): the next one
 * becomes its head; the FINAL lane's turn comes once every other lane is
 * done. */
static void lane_next(sim_rank_t *r, uint32_t l)
{
    uint32_t fin = r->nlanes - 1;

    if (++r->lcur[l] < r->lane_step[l + 1]) {
        lane_arm(r, l);
        return;
    }
    if (l != fin && --r->lanes_open == 0 && r->lcur[fin] < r->lane_step[fin + 1]) {
        lane_arm(r, fin);
    }
}

/* The thread is blocked with nothing ready: a signal that makes a head
 * wait hold lets it pick again (after every signal of this instant). */
static void rank_wake(sim_t *s, sim_rank_t *r)
{
    if (r->blocked && !r->step_ev) {
        r->step_ev = 1;
        ev_push(s, s->now, EV_STEP, (uint32_t)(r - s->rk), 0);
    }
}

static void deliver_signal(sim_t *s, int32_t id)
{
    sim_flow_t *f = &s->f[id];
    int32_t ti = s->sim_of[f->dst];
    sim_rank_t *r;
    sim_cause_t c;
    uint32_t w;
    int32_t *pp;

    if (ti < 0) {
        flow_free(s, id);
        return;  /* an unsimulated rail */
    }
    r = &s->rk[ti];
    w = f->sig;
    if (w >= r->nsig) {
        flow_free(s, id);
        return;
    }
    r->sig[w]++;
    c.t = s->now;
    c.rank = f->rk;
    c.rec = f->rec;
    c.xfer = (float)(f->done - f->start);
    c.queue = (float)(f->start - f->post);
    c.lat = (float)(s->now - f->done);
    c.ce = f->path != RMACOLL__PATH_PROXY;
    pp = &r->whead[w];
    while (*pp >= 0) {
        int32_t l = *pp;
        if (r->t[r->st[r->lcur[l]].first].sig_value <= r->sig[w]) {
            *pp = r->wnext[l];
            r->lcause[l] = c;
            r->wake = c;
            ready_push(r, (uint32_t)l);
            rank_wake(s, r);
        } else {
            pp = &r->wnext[l];
        }
    }
    flow_free(s, id);
}

/* A record of r's thread now: a step issued, or the end of its FINAL
 * lane. woke: the thread was blocked, and lane l's wait (or another that
 * became true this instant) let it go on. */
static sim_srec_t *rank_record(sim_t *s, sim_rank_t *r, int woke, uint32_t l)
{
    sim_srec_t *rec = &r->rec[r->nrec++];
    const sim_cause_t *c = r->lcause[l].t == s->now ? &r->lcause[l] : &r->wake;

    memset(rec, 0, sizeof(*rec));
    rec->start = s->now;
    rec->end = s->now;
    if (woke && c->t == s->now) {
        rec->woke = c->ce ? 2 : 1;
        rec->crank = c->rank;
        rec->crec = c->rec;
        rec->xfer = c->xfer;
        rec->queue = c->queue;
        rec->lat = c->lat;
    }
    if (r->blocked && s->trace_row && s->trace_row[r->id] >= 0 && s->now > r->blocked_since) {
        trace_add(s, s->trace_row[r->id] + 4, r->blocked_since, s->now, 4);
    }
    r->blocked = 0;
    return rec;
}

/* Proxy puts of step p posted one after the other (put_s each, on the
 * proxy's thread), each started when its queue pair is free. */
static void post_step(sim_t *s, sim_rank_t *r, const sim_step_t *p, uint32_t rn)
{
    uint32_t ri = (uint32_t)(r - s->rk);

    for (uint32_t k = p->first; k < p->first + p->count; k++) {
        r->proxy_out++;
        if (s->m->put_s > 0) {
            double t = (s->now > r->post_free ? s->now : r->post_free) + s->m->put_s;
            r->post_free = t;
            ev_push3(s, t, EV_POST, ri, k, rn);
        } else {
            post_proxy(s, r, k, rn);
        }
    }
}

static int lane_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Takes lane l's head step into the submission being built (flow.h
 * "Merging"): a proxy step is posted; a CE step's tasks join r->ce_list,
 * and so do the lane's further CE steps while *n stays within max (the
 * first step of a submission always whole). The lane moves on. */
static void take_lane(sim_t *s, sim_rank_t *r, uint32_t l, uint32_t rn, uint32_t max,
                      uint32_t *n)
{
    const sim_step_t *p = &r->st[r->lcur[l]];

    r->mstamp[l] = r->mseq;
    if (p->path == RMACOLL__PATH_PROXY) {
        post_step(s, r, p, rn);
        *n += p->count;
        lane_next(r, l);
        return;
    }
    for (;;) {
        uint32_t nx = r->lcur[l] + 1;
        for (uint32_t k = p->first; k < p->first + p->count; k++) {
            r->ce_list[(*n)++] = k;
        }
        if (nx < r->lane_step[l + 1] && !r->st[nx].wait && r->st[nx].path == p->path &&
            (uint64_t)*n + r->st[nx].count <= max) {
            r->lcur[l] = nx;
            p = &r->st[nx];
            continue;
        }
        lane_next(r, l);
        return;
    }
}

/*
 * Issues lane l's head put step and, merged with it, the head put steps of
 * the other ready lanes on its path (core/plan/flow.h "Merging", the
 * runtime's issue_merged): ready waits met on the way are consumed, as the
 * runtime's scan passes them. CE: one submission, its copies started
 * ce_lat after the issue and ce_copy_s apart, the thread busy until the
 * last is done and the step cost after; proxy: posted, the thread free
 * again the step cost later.
 */
static void rank_issue(sim_t *s, sim_rank_t *r, uint32_t l, sim_srec_t *rec)
{
    uint32_t ri = (uint32_t)(r - s->rk), rn = (uint32_t)(rec - r->rec);
    uint32_t max = s->merge_max, n = 0, nc = 0;
    int path = r->st[r->lcur[l]].path, back = 0;

    r->mseq++;
    take_lane(s, r, l, rn, max, &n);
    /* the other lanes that can move, in lane order (as the runtime scans) */
    while (max > 1 && r->nready > 0) {
        uint32_t m = ready_pop(r);
        if (r->mstamp[m] == r->mseq) {
            back = 1;                 /* l again: its next step waits its turn */
        } else if (r->st[r->lcur[m]].wait) {
            lane_next(r, m);
        } else {
            r->aside[nc++] = m;
        }
    }
    qsort(r->aside, nc, sizeof(*r->aside), lane_cmp);
    for (uint32_t k = 0; k < nc; k++) {
        uint32_t m = r->aside[k];
        const sim_step_t *q = &r->st[r->lcur[m]];
        if (q->path == path &&
            (path == RMACOLL__PATH_PROXY || (uint64_t)n + q->count <= max)) {
            take_lane(s, r, m, rn, path == RMACOLL__PATH_PROXY ? UINT32_MAX : max, &n);
        } else {
            ready_push(r, m);
        }
    }
    if (back) {
        ready_push(r, l);
    }
    if (path != RMACOLL__PATH_PROXY) {
        uint64_t big = 0;

        for (uint32_t k = 0; k < n; k++) {
            big = r->t[r->ce_list[k]].bytes > big ? r->t[r->ce_list[k]].bytes : big;
        }
        rec->ce = 1;
        r->ce_i = 0;
        r->ce_n = n;
        r->ce_active = 0;
        /* the runtime binds a submission by its largest put */
        r->ce_kern = s->kernel_max != 0 && big <= s->kernel_max;
        ev_push(s, s->now + (r->ce_kern ? s->m->ce_kernel_s : s->m->ce_lat), EV_CE_START,
                ri, 0);
        return;
    }
    r->step_ev = 1;
    ev_push(s, s->now + s->m->batch_s, EV_STEP, ri, 0);
}

/* The next copy of r's CE submission starts now, the one after it
 * ce_copy_s later; as nvlink_kernel launches, the next SIM_KERNEL_PUTS
 * copies start now together, the next launch's ce_kernel_s later. */
static void ce_start(sim_t *s, sim_rank_t *r)
{
    uint32_t last = r->ce_kern ? r->ce_i + SIM_KERNEL_PUTS : r->ce_i + 1;

    if (last > r->ce_n) {
        last = r->ce_n;
    }
    while (r->ce_i < last) {
        int32_t id = flow_make(s, r, r->ce_list[r->ce_i++], r->nrec - 1);

        if (id >= 0) {
            r->ce_active++;
            flow_start(s, id);
        }
    }
    if (r->ce_i < r->ce_n) {
        ev_push(s, s->now + (r->ce_kern ? s->m->ce_kernel_s : s->m->ce_copy_s), EV_CE_START,
                (uint32_t)(r - s->rk), 0);
    }
}

/* A copy ended: once every copy of the submission is done, the thread
 * picks again the step cost later. */
static void ce_next(sim_t *s, sim_rank_t *r)
{
    if (r->ce_active > 0 || r->ce_i < r->ce_n) {
        return;
    }
    r->rec[r->nrec - 1].end = s->now;
    r->step_ev = 1;
    ev_push(s, s->now + s->m->batch_s, EV_STEP, (uint32_t)(r - s->rk), 0);
}

/*
 * r's thread is free and picks (core/plan/flow.h): among the lanes whose
 * head step is ready, the step whose first task comes first in the plan;
 * a wait that holds is consumed at no cost, a put step is issued. Nothing
 * ready: the thread blocks until a signal makes a head wait hold. Every
 * other lane done and the FINAL lane's waits held: the rank is done (once
 * its proxy puts are flushed).
 */
static void rank_step(sim_t *s, sim_rank_t *r)
{
    uint32_t fin = r->nlanes - 1;
    int woke = r->blocked;

    r->step_ev = 0;
    while (r->nready > 0) {
        uint32_t l = ready_pop(r);
        const sim_step_t *p = &r->st[r->lcur[l]];
        if (p->wait) {
            lane_next(r, l);
            continue;
        }
        rank_issue(s, r, l, rank_record(s, r, woke, l));
        return;
    }
    if (r->lanes_open == 0 && r->lcur[fin] == r->lane_step[fin + 1]) {
        rank_record(s, r, woke, fin)->final = 1;
        r->final_done = 1;
        r->final_t = s->now;
        if (r->proxy_out == 0) {
            r->end = s->now;
        }
        return;
    }
    if (!r->blocked) {
        r->blocked = 1;
        r->blocked_since = s->now;
    }
}

/* Every lane's first step becomes its head (the FINAL lane's when it is
 * the only one), and the thread picks at time 0. */
static void rank_begin(sim_t *s, sim_rank_t *r)
{
    uint32_t fin = r->nlanes - 1;

    r->lanes_open = 0;
    for (uint32_t l = 0; l < r->nlanes; l++) {
        r->lcur[l] = r->lane_step[l];
        if (l != fin && r->lcur[l] < r->lane_step[l + 1]) {
            r->lanes_open++;
            lane_arm(r, l);
        }
    }
    if (r->lanes_open == 0 && r->lcur[fin] < r->lane_step[fin + 1]) {
        lane_arm(r, fin);
    }
    r->step_ev = 1;
    ev_push(s, 0.0, EV_STEP, (uint32_t)(r - s->rk), 0);
}

/* ----------------------------------------------------------- planning */

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Adds put t of rank src to the links' byte counts. */
static void count_bytes(sim_t *s, int src, const rmacoll__task_t *t)
{
    int dst = t->peer;

    if (t->flags & RMACOLL__TASK_SELF) {
        s->lbytes[src * SIM_NCLASSES + SIM_SELF] += t->bytes;
    } else if (t->path == RMACOLL__PATH_PROXY) {
        s->lbytes[src * SIM_NCLASSES + SIM_NIC_TX] += t->bytes;
        s->lbytes[dst * SIM_NCLASSES + SIM_NIC_RX] += t->bytes;
        s->lbytes[src * SIM_NCLASSES + SIM_PCIE_TX] += t->bytes;
        s->lbytes[dst * SIM_NCLASSES + SIM_PCIE_RX] += t->bytes;
    } else {
        s->lbytes[src * SIM_NCLASSES + SIM_NVL_TX] += t->bytes;
        s->lbytes[dst * SIM_NCLASSES + SIM_NVL_RX] += t->bytes;
        s->lbytes[src * SIM_NCLASSES + SIM_NVL_BI] += t->bytes;
        s->lbytes[dst * SIM_NCLASSES + SIM_NVL_BI] += t->bytes;
    }
}

/* Converts plan p of rank r into its flow (core/plan/flow.h, built in fl)
 * as compact tasks in flow order, steps and lanes; a wait whose writer is
 * not simulated (another rail) holds at once. */
static rmacoll_status_t convert_plan(sim_t *s, sim_rank_t *r, const rmacoll__plan_t *p,
                                     rmacoll__flow_t *fl)
{
    rmacoll_status_t st = rmacoll__flow_build(fl, p, s->topo);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    r->nt = (uint32_t)fl->ntasks;
    r->nst = (uint32_t)fl->nsteps;
    r->nlanes = (uint32_t)fl->nlanes;
    r->t = malloc((r->nt + 1) * sizeof(*r->t));
    r->ppos = malloc((r->nt + 1) * sizeof(*r->ppos));
    r->st = malloc((r->nst + 1) * sizeof(*r->st));
    r->rec = malloc((r->nst + 1) * sizeof(*r->rec));
    r->lane_step = malloc((r->nlanes + 1) * sizeof(*r->lane_step));
    r->lcur = calloc(r->nlanes + 1, sizeof(*r->lcur));
    r->lcause = malloc((r->nlanes + 1) * sizeof(*r->lcause));
    r->ready = malloc((r->nlanes + 1) * sizeof(*r->ready));
    r->wnext = malloc((r->nlanes + 1) * sizeof(*r->wnext));
    r->ce_list = malloc((r->nt + 1) * sizeof(*r->ce_list));
    r->aside = malloc((r->nlanes + 1) * sizeof(*r->aside));
    r->mstamp = calloc(r->nlanes + 1, sizeof(*r->mstamp));
    if (!r->t || !r->ppos || !r->st || !r->rec || !r->lane_step || !r->lcur ||
        !r->lcause || !r->ready || !r->wnext || !r->ce_list || !r->aside || !r->mstamp) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (uint32_t k = 0; k < r->nt; k++) {
        const rmacoll__task_t *t = &fl->tasks[k];
        sim_task_t *o = &r->t[k];
        o->bytes = t->bytes;
        o->sig_value = (uint32_t)t->sig_value;
        o->sig = t->op == RMACOLL__OP_WAIT && s->sim_of[t->peer] < 0 ? UINT32_MAX : t->sig;
        o->peer = t->peer;
        o->round = t->round;
        o->flags = (uint16_t)t->flags;
        o->op = t->op;
        o->path = t->path;
        r->ppos[fl->order[k]] = k;
        if (t->op == RMACOLL__OP_PUT) {
            count_bytes(s, r->id, t);
        }
    }
    for (uint32_t i = 0; i < r->nst; i++) {
        const rmacoll__flow_step_t *q = &fl->steps[i];
        r->st[i].first = q->first;
        r->st[i].count = q->count;
        r->st[i].key = fl->order[q->first];
        r->st[i].wait = q->wait;
        r->st[i].path = q->path;
    }
    memcpy(r->lane_step, fl->lane_step, (r->nlanes + 1) * sizeof(*r->lane_step));
    for (uint32_t l = 0; l < r->nlanes; l++) {
        r->lcause[l].t = -1;
    }
    r->wake.t = -1;
    return RMACOLL_SUCCESS;
}

/* Node-to-node bytes of the case: [A * nnodes + B]. */
static uint64_t *node_bytes(const rmacoll_case_t *c, const rmacoll_topo_t *topo)
{
    size_t nn = (size_t)topo->nnodes, n = (size_t)c->nranks;
    size_t es = rmacoll_datatype_size(c->dtype);
    uint64_t *m = calloc(nn * nn, sizeof(uint64_t));

    for (size_t i = 0; m != NULL && i < n; i++) {
        size_t A = (size_t)topo->node_of[i];
        for (size_t j = 0; j < n; j++) {
            m[A * nn + (size_t)topo->node_of[j]] += (uint64_t)c->send[i * n + j] * es;
        }
    }
    return m;
}

/* The K rails with the most NIC bytes (TX or RX of one of their ranks). */
static int pick_rails(const rmacoll_case_t *c, const rmacoll_topo_t *topo,
                      int K, int *rail_on)
{
    int n = c->nranks, G = topo->node_size[0];
    double *tx = calloc((size_t)n, sizeof(double)), *rx = calloc((size_t)n, sizeof(double));
    double *load = calloc((size_t)G, sizeof(double));

    if (!tx || !rx || !load) {
        free(tx);
        free(rx);
        free(load);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            int B = topo->node_of[j];
            if (B == topo->node_of[i]) {
                continue;
            }
            tx[i] += (double)c->send[(size_t)i * n + j];
            rx[rmacoll__topo_relay(topo, i, B)] += (double)c->send[(size_t)i * n + j];
        }
    }
    for (int i = 0; i < n; i++) {
        int l = topo->local_rank[i];
        load[l] = tx[i] > load[l] ? tx[i] : load[l];
        load[l] = rx[i] > load[l] ? rx[i] : load[l];
    }
    for (int l = 0; l < G; l++) {
        rail_on[l] = 0;
    }
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int l = 0; l < G; l++) {
            if (!rail_on[l] && (best < 0 || load[l] > load[best])) {
                best = l;
            }
        }
        rail_on[best] = 1;
    }
    free(tx);
    free(rx);
    free(load);
    return 0;
}

/* ------------------------------------------------------------- pictures */

static void svg_color(double x, char *buf, size_t len)
{
    /* white -> orange -> dark red */
    int r, g, b;
    if (x < 0) x = 0;
    if (x > 1) x = 1;
    if (x < 0.5) {
        r = 255; g = (int)(255 - 90 * x * 2); b = (int)(255 - 255 * x * 2);
    } else {
        r = (int)(255 - 120 * (x - 0.5) * 2); g = (int)(165 - 165 * (x - 0.5) * 2); b = 0;
    }
    snprintf(buf, len, "#%02x%02x%02x", r, g, b);
}

static int write_gantt(const sim_t *s, const char *path, const sim_result_t *res,
                       const char *title)
{
    static const char *const kcolor[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728"};
    static const char *const kname[] = {"direct put", "put to relay", "relay forward (CE)",
                                        "self copy", "rank waits (nothing ready)"};
    static const char *const rname[] = {"nic tx", "nic rx", "nvl tx", "nvl rx", "waits"};
    FILE *f = fopen(path, "w");
    int rows = s->ntrace * SIM_TRACE_ROWS, W = 1100, left = 150, top = 40, rh = 12;
    double T = res->makespan > 0 ? res->makespan : 1;
    int H = top + rows * rh + 90;

    if (f == NULL) {
        return -1;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"10\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"10\" y=\"16\" font-size=\"13\">%s</text>\n", title);
    fprintf(f, "<text x=\"10\" y=\"30\">makespan %.1f us, bound %.1f us (ratio %.3f); "
               "one row per link of the traced ranks</text>\n",
            res->makespan * 1e6, res->bound * 1e6, res->ratio);
    for (int r = 0; r < s->n; r++) {
        int base = s->trace_row[r];
        if (base < 0) {
            continue;
        }
        for (int k = 0; k < SIM_TRACE_ROWS; k++) {
            int y = top + (base + k) * rh;
            fprintf(f, "<text x=\"4\" y=\"%d\">rank %d %s</text>\n", y + rh - 3, r, rname[k]);
            fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n",
                    left, W - 10, y + rh, y + rh);
        }
    }
    for (size_t i = 0; i < s->niv; i++) {
        const sim_trace_iv_t *v = &s->iv[i];
        double x0 = left + (W - 10 - left) * v->t0 / T;
        double w = (W - 10 - left) * (v->t1 - v->t0) / T;
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                   "fill-opacity=\"0.55\"/>\n",
                x0, top + v->row * rh + 1, w < 0.3 ? 0.3 : w, rh - 2, kcolor[v->kind]);
    }
    for (int k = 0; k < 5; k++) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">%s</text>\n",
                left + k * 190, top + rows * rh + 20, kcolor[k], left + k * 190 + 14,
                top + rows * rh + 29, kname[k]);
    }
    for (int k = 0; k <= 10; k++) {
        int x = left + (W - 10 - left) * k / 10;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.0f us</text>\n", x,
                top + rows * rh + 55, T * 1e6 * k / 10);
    }
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Text in an SVG: the XML specials escaped (a case file's path is in the
 * title). */
static void svg_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* The width a label takes at font size fs, on the safe side (0.62 em a
 * character: wider than the average of the usual sans-serif fonts), so
 * that the picture can be made wide enough for it. */
static double svg_text_w(const char *s, int fs)
{
    return (double)strlen(s) * fs * 0.62;
}

#define HEAT_MAX_TICKS 9
#define HEAT_SCALE_W 200

/* Heat map: NIC tx / rx bytes per round of the traced ranks; cols
 * = rounds (grouped, per rounds a column, when there are more than 240).
 * Row labels on the left, one tick at the centre of each of up to 9
 * columns spread from the first to the last (the first and last round of
 * the column when it groups several), and a colour scale from 0 B (white,
 * as an empty cell) to the largest cell's bytes (darkest). Each cell
 * carries its rank, direction, rounds and bytes in a <title>. The picture
 * is as wide as its widest label needs (viewBox = width x height). */
static int write_heat(const sim_t *s, const char *path, const uint64_t *heat,
                      int nrounds, int ncols, int per, const char *title)
{
    FILE *f = fopen(path, "w");
    int rows = s->ntrace * 2, left = 150, top = 40, cw, rh = 12, W, H;
    int axis_y, scale_y, nt, tick_col[HEAT_MAX_TICKS + 1];
    int *row_rank = NULL;
    uint64_t mx = 0;
    double need;
    char col[16], lab[96], sub[160], mxl[48];

    if (f == NULL) {
        return -1;
    }
    row_rank = malloc(sizeof(int) * (size_t)(rows > 0 ? rows : 1));
    if (row_rank == NULL) {
        fclose(f);
        return -1;
    }
    for (int r = 0; r < s->n; r++) {
        if (s->trace_row[r] >= 0) {
            int base = s->trace_row[r] / SIM_TRACE_ROWS * 2;
            row_rank[base] = row_rank[base + 1] = r;
        }
    }
    cw = ncols > 0 ? (900 / ncols > 1 ? 900 / ncols : 1) : 1;
    for (size_t i = 0; i < (size_t)rows * ncols; i++) {
        mx = heat[i] > mx ? heat[i] : mx;
    }
    /* ticks: every step-th column from the first, and the last (in place
     * of the tick before it when that one is less than step / 2 away) */
    {
        int step = ncols > HEAT_MAX_TICKS ? (ncols - 1 + HEAT_MAX_TICKS - 2) / (HEAT_MAX_TICKS - 1) : 1;
        nt = 0;
        for (int c = 0; c < ncols; c += step) {
            tick_col[nt++] = c;
        }
        if (nt > 0 && tick_col[nt - 1] != ncols - 1) {
            if (2 * (ncols - 1 - tick_col[nt - 1]) < step && nt > 1) {
                nt--;
            }
            tick_col[nt++] = ncols - 1;
        }
    }
    axis_y = top + rows * rh;
    scale_y = axis_y + 44;
    H = scale_y + 32;
    snprintf(sub, sizeof(sub), "bytes per round on each NIC direction of the traced ranks "
             "(%d rounds, %d per column)", nrounds, per);
    snprintf(mxl, sizeof(mxl), "%" PRIu64 " B", mx);
    /* width: the cells, and every label that reaches further right */
    need = left + (double)cw * ncols + 20;
    need = fmax(need, 10 + svg_text_w(title, 13) + 10);
    need = fmax(need, 10 + svg_text_w(sub, 10) + 10);
    need = fmax(need, left + HEAT_SCALE_W + 10);
    for (int k = 0; k < nt; k++) {
        int c = tick_col[k], a = c * per, b = (c + 1) * per < nrounds ? (c + 1) * per : nrounds;
        if (per > 1) {
            snprintf(lab, sizeof(lab), "%d-%d", a, b - 1);
        } else {
            snprintf(lab, sizeof(lab), "%d", a);
        }
        need = fmax(need, left + (c + 0.5) * cw + svg_text_w(lab, 10) / 2 + 10);
    }
    W = (int)ceil(need);

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"10\">\n",
            W, H, W, H);
    fprintf(f, "<defs><linearGradient id=\"heat-scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">");
    for (int k = 0; k <= 2; k++) {
        /* svg_color is linear between 0, 0.5 and 1: three stops draw it */
        svg_color(k / 2.0, col, sizeof(col));
        fprintf(f, "<stop offset=\"%.1f\" stop-color=\"%s\"/>", k / 2.0, col);
    }
    fprintf(f, "</linearGradient></defs>\n");
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"10\" y=\"16\" font-size=\"13\">");
    svg_text(f, title);
    fprintf(f, "</text>\n<text x=\"10\" y=\"30\">%s</text>\n", sub);
    fprintf(f, "<g id=\"row-labels\">\n");
    for (int row = 0; row < rows; row++) {
        fprintf(f, "<text x=\"4\" y=\"%d\">rank %d nic %s</text>\n", top + row * rh + rh - 3,
                row_rank[row], row % 2 ? "rx" : "tx");
    }
    fprintf(f, "</g>\n<g id=\"cells\" data-rows=\"%d\" data-columns=\"%d\" "
               "data-rounds=\"%d\" data-rounds-per-column=\"%d\">\n", rows, ncols, nrounds, per);
    for (int row = 0; row < rows; row++) {
        for (int cI = 0; cI < ncols; cI++) {
            uint64_t v = heat[(size_t)row * ncols + cI];
            int a = cI * per, b = (cI + 1) * per < nrounds ? (cI + 1) * per : nrounds;
            if (v == 0) {
                continue;
            }
            svg_color((double)v / (double)mx, col, sizeof(col));
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\">",
                    left + cI * cw, top + row * rh, cw, rh - 1, col);
            if (per > 1) {
                fprintf(f, "<title>rank %d nic %s, rounds %d-%d: %" PRIu64 " B</title></rect>\n",
                        row_rank[row], row % 2 ? "rx" : "tx", a, b - 1, v);
            } else {
                fprintf(f, "<title>rank %d nic %s, round %d: %" PRIu64 " B</title></rect>\n",
                        row_rank[row], row % 2 ? "rx" : "tx", a, v);
            }
        }
    }
    fprintf(f, "</g>\n<g id=\"x-ticks\">\n");
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n", left,
            left + cw * ncols, axis_y, axis_y);
    for (int k = 0; k < nt; k++) {
        int c = tick_col[k], a = c * per, b = (c + 1) * per < nrounds ? (c + 1) * per : nrounds;
        double x = left + (c + 0.5) * cw;
        if (per > 1) {
            snprintf(lab, sizeof(lab), "%d-%d", a, b - 1);
        } else {
            snprintf(lab, sizeof(lab), "%d", a);
        }
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" data-column=\"%d\">%s</text>\n",
                x, x, axis_y, axis_y + 4, x, axis_y + 15, c, lab);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n</g>\n", left, axis_y + 29,
            per > 1 ? "rounds (first-last of each column)" : "round");
    fprintf(f, "<g id=\"colour-scale\">\n<text x=\"4\" y=\"%d\">bytes per cell</text>\n"
               "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" fill=\"url(#heat-scale)\" "
               "stroke=\"#999\"/>\n", scale_y + 9, left, scale_y, HEAT_SCALE_W);
    fprintf(f, "<text class=\"scale-min\" x=\"%d\" y=\"%d\" data-bytes=\"0\">0 B</text>\n",
            left, scale_y + 22);
    fprintf(f, "<text class=\"scale-max\" x=\"%d\" y=\"%d\" text-anchor=\"end\" "
               "data-bytes=\"%" PRIu64 "\">%s</text>\n</g>\n",
            left + HEAT_SCALE_W, scale_y + 22, mx, mxl);
    fprintf(f, "</svg>\n");
    free(row_rank);
    return fclose(f) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------- run */

static void sim_free(sim_t *s)
{
    for (int i = 0; s->rk != NULL && i < s->nsim; i++) {
        sim_rank_t *r = &s->rk[i];
        free(r->t);
        free(r->ppos);
        free(r->st);
        free(r->rec);
        free(r->lane_step);
        free(r->lcur);
        free(r->lcause);
        free(r->ready);
        free(r->sig);
        free(r->whead);
        free(r->wnext);
        free(r->qdst);
        free(r->qtail);
        free(r->ce_list);
        free(r->aside);
        free(r->mstamp);
    }
    free(s->rk);
    free(s->sim_of);
    free(s->bw);
    free(s->share);
    free(s->busy_since);
    free(s->busy);
    free(s->nfl);
    free(s->flcap);
    for (size_t L = 0; s->fl != NULL && L < (size_t)s->n * SIM_NCLASSES; L++) {
        free(s->fl[L]);
    }
    free(s->fl);
    free(s->lbytes);
    free(s->f);
    free(s->ffree);
    free(s->ev);
    free(s->fh);
    free(s->trace_row);
    free(s->iv);
    free(s->aff);
    rmacoll__topo_destroy(s->topo_own);
}

/* Static per-round loads: merges the simulated ranks' plans by round.
 * Fills the peak link load per round and the heat rows. */
static rmacoll_status_t round_loads(sim_t *s, sim_result_t *res, uint64_t **heat_out,
                                    int *ncols_out, int *per_out)
{
    int n = s->n, R = res->nrounds;
    uint64_t *acc = calloc((size_t)n * SIM_NCLASSES, sizeof(uint64_t));
    int32_t *touched = malloc((size_t)n * SIM_NCLASSES * sizeof(int32_t));
    uint32_t *seen = calloc((size_t)n * SIM_NCLASSES, sizeof(uint32_t));
    uint32_t *cur = calloc((size_t)s->nsim + 1, sizeof(uint32_t));
    int ncols = R < 240 ? R : 240, per = (R + ncols - 1) / (ncols ? ncols : 1);
    uint64_t *heat;

    ncols = ncols ? (R + per - 1) / per : 0;
    heat = calloc((size_t)(s->ntrace * 2 + 1) * (size_t)(ncols + 1), sizeof(uint64_t));
    if (!acc || !touched || !seen || !cur || !heat) {
        free(seen);
        free(acc);
        free(touched);
        free(cur);
        free(heat);
        return RMACOLL_ERR_NO_MEMORY;
    }
    res->peak_round_link_bytes = 0;
    for (int round = -1; round < R; round++) {
        size_t nt = 0;
        for (int i = 0; i < s->nsim; i++) {
            sim_rank_t *r = &s->rk[i];
            /* the plan's tasks in its order (ascending rounds) */
            while (cur[i] < r->nt && r->t[r->ppos[cur[i]]].round <= round) {
                const sim_task_t *t = &r->t[r->ppos[cur[i]++]];
                int32_t l1, l2;
                if (t->op != RMACOLL__OP_PUT || (t->flags & RMACOLL__TASK_SELF)) {
                    continue;
                }
                l1 = r->id * SIM_NCLASSES + (t->path == RMACOLL__PATH_PROXY ? SIM_NIC_TX : SIM_NVL_TX);
                l2 = t->peer * SIM_NCLASSES + (t->path == RMACOLL__PATH_PROXY ? SIM_NIC_RX : SIM_NVL_RX);
                /* listed once per round, in the order first touched
                 * (a zero-byte put used to list its links again) */
                if (seen[l1] != (uint32_t)(round + 2)) {
                    seen[l1] = (uint32_t)(round + 2);
                    touched[nt++] = l1;
                }
                acc[l1] += t->bytes;
                if (seen[l2] != (uint32_t)(round + 2)) {
                    seen[l2] = (uint32_t)(round + 2);
                    touched[nt++] = l2;
                }
                acc[l2] += t->bytes;
            }
        }
        for (size_t q = 0; q < nt; q++) {
            int32_t L = touched[q];
            int rank = L / SIM_NCLASSES, cls = L % SIM_NCLASSES;
            if (acc[L] > res->peak_round_link_bytes) {
                res->peak_round_link_bytes = acc[L];
                res->peak_round = round;
                res->peak_round_rank = rank;
                res->peak_round_class = cls;
            }
            if (round >= 0 && s->trace_row[rank] >= 0 && (cls == SIM_NIC_TX || cls == SIM_NIC_RX)) {
                int row = s->trace_row[rank] / SIM_TRACE_ROWS * 2 + (cls == SIM_NIC_RX);
                heat[(size_t)row * ncols + round / per] += acc[L];
            }
            acc[L] = 0;
        }
    }
    free(seen);
    free(acc);
    free(touched);
    free(cur);
    *heat_out = heat;
    *ncols_out = ncols;
    *per_out = per;
    return RMACOLL_SUCCESS;
}

/*
 * Walks back from the rank that finished last, record by record: a step
 * (or the end of the FINAL lane) that started when a wait became true
 * jumps to the step that posted the signalling flow (its transfer,
 * queueing behind other flows of its queue pair, latency, and the time
 * from that step's start to the post: posting, or the CE launches and
 * copies before it, are charged); any other goes to the thread's previous
 * step, whose CE puts (if any) and the step cost are charged. The
 * segments add up to the makespan.
 */
static void critical_path(sim_t *s, sim_result_t *res)
{
    int ri = -1;
    int32_t i;
    double worst = -1, T;

    for (int k = 0; k < s->nsim; k++) {
        if (s->rk[k].nst > 0 && s->rk[k].end > worst) {
            worst = s->rk[k].end;
            ri = k;
        }
    }
    res->cp_last_rank = ri >= 0 ? s->rk[ri].id : -1;
    if (ri < 0) {
        return;
    }
    i = (int32_t)s->rk[ri].nrec - 1;
    T = s->rk[ri].rec[i].end;
    /* the flush after the end of the FINAL lane */
    res->cp_nic += s->rk[ri].end - T;
    while (i >= 0) {
        const sim_srec_t *rec = &s->rk[ri].rec[i];
        /* from the record's start to T: its CE puts, or posting */
        if (rec->ce) {
            res->cp_ce += T - rec->start;
        } else {
            res->cp_host += T - rec->start;
        }
        res->cp_steps += !rec->final;
        if (rec->woke) {
            T = rec->start - rec->lat - rec->xfer - rec->queue;
            if (rec->woke == 1) {
                res->cp_nic += rec->xfer;
            } else {
                res->cp_ce += rec->xfer;
            }
            res->cp_queue += rec->queue;
            res->cp_lat += rec->lat;
            if (rec->crank != ri) {
                res->cp_hops++;
            }
            ri = rec->crank;
            i = rec->crec;
            continue;
        }
        /* the thread's previous record, plus the step cost */
        T = i > 0 ? s->rk[ri].rec[i - 1].end : 0;
        res->cp_host += rec->start - T;
        i--;
    }
}

/* Topology, scheduler (given the case's node-to-node bytes when it takes
 * them) and the largest node size (the rails). */
static rmacoll_status_t sim_open(sim_t *s, const rmacoll_case_t *c, const sim_opts_t *o,
                                 rmacoll__sched_t *sched, sim_result_t *res)
{
    rmacoll_status_t st;
    char err[512];

    st = rmacoll__topo_create(c->nranks, c->node_of, &s->topo_own);
    if (st != RMACOLL_SUCCESS) {
        snprintf(res->msg, sizeof(res->msg), "cannot make the topology");
        return st;
    }
    s->topo = s->topo_own;
    s->G = s->topo->node_size[0];
    s->equal = 1;
    for (int B = 0; B < s->topo->nnodes; B++) {
        s->equal &= s->topo->node_size[B] == s->G;
        s->G = s->topo->node_size[B] > s->G ? s->topo->node_size[B] : s->G;
    }
    res->rails = s->G;
    st = rmacoll__sched_open(o->scheduler, o->scheduler_plugin, s->topo, o->sched_seed,
                             sched, err, sizeof(err));
    if (st != RMACOLL_SUCCESS) {
        snprintf(res->msg, sizeof(res->msg), "%s", err);
        return st;
    }
    if (o->feed_load && sched->ops->struct_size > RMACOLL_SCHED_OPS_V1_SIZE &&
        sched->ops->set_load != NULL) {
        uint64_t *nb = node_bytes(c, s->topo);
        if (nb == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        st = sched->ops->set_load(sched->state, s->topo, nb);
        free(nb);
        if (st != RMACOLL_SUCCESS) {
            snprintf(res->msg, sizeof(res->msg), "scheduler %s: set_load failed: %s",
                     sched->ops->name, rmacoll_status_name(st));
            return st;
        }
    }
    return RMACOLL_SUCCESS;
}

/* The simulated ranks (every rank, or the K most loaded rails), the
 * traced ones (the lowest simulated rail, on the first nodes), and the
 * per-rank and per-link arrays. */
static rmacoll_status_t sim_pick_ranks(sim_t *s, const rmacoll_case_t *c,
                                       const sim_opts_t *o, sim_result_t *res)
{
    const rmacoll_topo_t *topo = s->topo;
    int n = s->n, G = s->G, rail = -1;
    int *rail_on = calloc((size_t)G + 1, sizeof(int));

    s->sim_of = malloc((size_t)n * sizeof(int32_t));
    s->trace_row = malloc((size_t)n * sizeof(int32_t));
    if (!rail_on || !s->sim_of || !s->trace_row) {
        free(rail_on);
        return RMACOLL_ERR_NO_MEMORY;
    }
    if (o->rails > 0 && o->rails < G) {
        if (!s->equal || !o->cfg.relay_enabled) {
            snprintf(res->msg, sizeof(res->msg), "--rails %d needs nodes of equal "
                     "size and the relay on (every rank's network traffic then "
                     "stays on its rail)", o->rails);
            free(rail_on);
            return RMACOLL_ERR_INVALID_ARG;
        }
        if (pick_rails(c, topo, o->rails, rail_on) != 0) {
            free(rail_on);
            return RMACOLL_ERR_NO_MEMORY;
        }
        res->rails_sim = o->rails;
    } else {
        for (int l = 0; l < G; l++) {
            rail_on[l] = 1;
        }
        res->rails_sim = G;
    }
    for (int r = 0; r < n; r++) {
        s->sim_of[r] = rail_on[topo->local_rank[r]] ? s->nsim++ : -1;
        s->trace_row[r] = -1;
    }
    res->nranks_sim = s->nsim;
    for (int l = 0; l < G && rail < 0; l++) {
        rail = rail_on[l] ? l : -1;
    }
    free(rail_on);
    for (int B = 0; B < topo->nnodes && s->ntrace < o->trace_ranks; B++) {
        if (rail < topo->node_size[B]) {
            s->trace_row[rmacoll__topo_rank(topo, B, rail)] = s->ntrace++ * SIM_TRACE_ROWS;
        }
    }
    s->rk = calloc((size_t)s->nsim + 1, sizeof(sim_rank_t));
    s->lbytes = calloc((size_t)n * SIM_NCLASSES, sizeof(uint64_t));
    return s->rk && s->lbytes ? RMACOLL_SUCCESS : RMACOLL_ERR_NO_MEMORY;
}

/* Plans simulated rank r (the runtime's planner) into s->rk. */
static rmacoll_status_t sim_plan_rank(sim_t *s, int r, const sim_opts_t *o,
                                      planin_ctx_t *ctx, planin_t *pi,
                                      rmacoll__plan_t *plan, rmacoll__flow_t *fl,
                                      sim_result_t *res)
{
    sim_rank_t *k = &s->rk[s->sim_of[r]];
    rmacoll__sigstate_t *st0 = NULL, *st1 = NULL;
    rmacoll_status_t st;

    k->id = r;
    if ((st = planin_fill(pi, ctx, r)) != RMACOLL_SUCCESS ||
        (st = rmacoll__sigstate_create(s->topo, &o->cfg, r, &st0)) != RMACOLL_SUCCESS ||
        (st = rmacoll__sigstate_create(s->topo, &o->cfg, r, &st1)) != RMACOLL_SUCCESS) {
        rmacoll__sigstate_destroy(st0);
        return st;
    }
    st = rmacoll__plan_build(&pi->in, st0, st1, plan);
    rmacoll__sigstate_destroy(st0);
    rmacoll__sigstate_destroy(st1);
    if (st != RMACOLL_SUCCESS) {
        snprintf(res->msg, sizeof(res->msg), "rank %d: %s", r, plan->errmsg);
        return st;
    }
    res->ntasks += plan->ntasks;
    for (size_t q = 0; q < plan->ntasks; q++) {
        if (plan->tasks[q].round + 1 > res->nrounds) {
            res->nrounds = plan->tasks[q].round + 1;
        }
    }
    if ((st = convert_plan(s, k, plan, fl)) != RMACOLL_SUCCESS) {
        return st;
    }
    k->nsig = rmacoll__sig_count(s->topo, &o->cfg, r) + 1;
    k->sig = calloc(k->nsig, sizeof(uint32_t));
    k->whead = malloc(k->nsig * sizeof(int32_t));
    if (!k->sig || !k->whead) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (uint32_t w = 0; w < k->nsig; w++) {
        k->whead[w] = -1;
    }
    return RMACOLL_SUCCESS;
}

/* Plans every simulated rank of the case. */
static rmacoll_status_t sim_plan_all(sim_t *s, const rmacoll_case_t *c, const sim_opts_t *o,
                                     rmacoll__sched_t *sched, sim_result_t *res)
{
    rmacoll__plan_t plan;
    rmacoll__flow_t flow;
    planin_ctx_t ctx;
    planin_t pi;
    rmacoll_status_t st;

    memset(&ctx, 0, sizeof(ctx));
    rmacoll__plan_init(&plan);
    rmacoll__flow_init(&flow);
    planin_init(&pi);
    st = planin_ctx_create(&ctx, c, s->topo, &o->cfg, sched, 0);
    for (int r = 0; r < s->n && st == RMACOLL_SUCCESS; r++) {
        if (s->sim_of[r] >= 0) {
            st = sim_plan_rank(s, r, o, &ctx, &pi, &plan, &flow, res);
        }
    }
    rmacoll__flow_fini(&flow);
    rmacoll__plan_fini(&plan);
    planin_fini(&pi);
    planin_ctx_destroy(&ctx);
    return st;
}

/* Link bandwidths. Other rails' forwards into a GPU are not simulated;
 * each relay's CE queue is serial, so G relays of a node mostly hit
 * distinct receivers: NVLink ingress keeps its full bandwidth (optimistic
 * when they collide; docs/sim.md compares with all rails). */
static rmacoll_status_t sim_links(sim_t *s)
{
    const sim_model_t *m = s->m;
    size_t NL = (size_t)s->n * SIM_NCLASSES;

    s->pcie_links = m->pcie_bw > 0 && m->pcie_bw < m->nic_bw;
    s->pcie_mirror = m->pcie_bw > 0 && !s->pcie_links;
    s->bw = malloc(NL * sizeof(double));
    s->share = calloc(NL, sizeof(double));
    s->busy_since = calloc(NL, sizeof(double));
    s->busy = calloc(NL, sizeof(double));
    s->nfl = calloc(NL, sizeof(int32_t));
    s->flcap = calloc(NL, sizeof(int32_t));
    s->fl = calloc(NL, sizeof(int32_t *));
    if (!s->bw || !s->share || !s->busy_since || !s->busy || !s->nfl || !s->flcap || !s->fl) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (size_t L = 0; L < NL; L++) {
        switch (L % SIM_NCLASSES) {
        case SIM_NIC_TX: case SIM_NIC_RX: s->bw[L] = m->nic_bw; break;
        case SIM_PCIE_TX: case SIM_PCIE_RX: s->bw[L] = m->pcie_bw > 0 ? m->pcie_bw : 1e30; break;
        case SIM_NVL_TX: case SIM_NVL_RX: s->bw[L] = m->ce_bw; break;
        case SIM_NVL_BI: s->bw[L] = m->ce_bidir_bw > 0 ? m->ce_bidir_bw : 1e30; break;
        default: s->bw[L] = m->self_bw; break;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Lower bounds: the most loaded NIC direction, the most loaded GPU's
 * NVLink (one way, and both ways); with --rails, NVLink ingress counts
 * the unsimulated rails' share. */
static void sim_bounds(const sim_t *s, sim_result_t *res)
{
    const sim_model_t *m = s->m;

    for (int r = 0; r < s->n; r++) {
        const uint64_t *lb = &s->lbytes[(size_t)r * SIM_NCLASSES];
        double nic = (double)(lb[SIM_NIC_TX] > lb[SIM_NIC_RX] ? lb[SIM_NIC_TX] : lb[SIM_NIC_RX]);
        double rx = (double)lb[SIM_NVL_RX] * s->G / res->rails_sim;
        double tx = (double)lb[SIM_NVL_TX];
        double nvl = (tx > rx ? tx : rx) / m->ce_bw;
        if (m->ce_bidir_bw > 0 && (tx + rx) / m->ce_bidir_bw > nvl) {
            nvl = (tx + rx) / m->ce_bidir_bw;
        }
        if (nic > res->max_nic_bytes) {
            res->max_nic_bytes = nic;
        }
        if (nic / m->nic_bw > res->bound_nic) {
            res->bound_nic = nic / m->nic_bw;
        }
        if (nvl > res->bound_nvl) {
            res->bound_nvl = nvl;
        }
    }
    res->bound = res->bound_nic > res->bound_nvl ? res->bound_nic : res->bound_nvl;
}

/* Why rank r did not finish: the first lane whose head waits. */
static void deadlock_msg(const sim_rank_t *r, sim_result_t *res)
{
    uint32_t l = 0;

    while (l + 1 < r->nlanes && (r->lcur[l] == r->lane_step[l + 1] || !r->st[r->lcur[l]].wait)) {
        l++;
    }
    if (r->lcur[l] == r->lane_step[l + 1]) {
        snprintf(res->msg, sizeof(res->msg), "rank %d stopped with %u lanes open: "
                 "the model deadlocked", r->id, r->lanes_open);
        return;
    }
    snprintf(res->msg, sizeof(res->msg), "rank %d stopped with %u lanes open, lane %u "
             "waiting for signal %u >= %u from rank %d (round %d): the model deadlocked",
             r->id, r->lanes_open, l, r->t[r->st[r->lcur[l]].first].sig,
             r->t[r->st[r->lcur[l]].first].sig_value, r->t[r->st[r->lcur[l]].first].peer,
             r->t[r->st[r->lcur[l]].first].round);
}

/* Runs the events to the end; the makespan, or a deadlock. */
static rmacoll_status_t sim_events(sim_t *s, sim_result_t *res)
{
    for (int i = 0; i < s->nsim; i++) {
        if (s->rk[i].nst > 0) {
            rank_begin(s, &s->rk[i]);
        } else {
            s->rk[i].final_done = 1;
        }
    }
    while ((s->nev > 0 || s->nfh > 0) && !s->failed) {
        sim_event_t e;
        if (s->nfh > 0 && (s->nev == 0 || s->fh[0].t <= s->ev[0].t)) {
            int32_t id;
            s->now = s->fh[0].t;
            id = fend_pop(s);
            settle(s, &s->f[id]);
            flow_done(s, id);
            continue;
        }
        e = ev_pop(s);
        s->now = e.t;
        switch (e.kind) {
        case EV_SIGNAL:
            deliver_signal(s, (int32_t)e.a);
            break;
        case EV_POST:
            post_proxy(s, &s->rk[e.a], e.b, e.c);
            break;
        case EV_CE_START:
            ce_start(s, &s->rk[e.a]);
            break;
        case EV_STEP:
            rank_step(s, &s->rk[e.a]);
            break;
        }
    }
    if (s->failed) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < s->nsim; i++) {
        sim_rank_t *r = &s->rk[i];
        if (!r->final_done) {
            deadlock_msg(r, res);
            return RMACOLL_ERR_INTERNAL;
        }
        if (r->end > res->makespan) {
            res->makespan = r->end;
        }
    }
    return RMACOLL_SUCCESS;
}

/* The link with the longest busy time (ties: more bytes). */
static void sim_busiest(sim_t *s, sim_result_t *res)
{
    for (size_t L = 0; s->pcie_mirror && L < (size_t)s->n * SIM_NCLASSES; L += SIM_NCLASSES) {
        s->busy[L + SIM_PCIE_TX] = s->busy[L + SIM_NIC_TX];
        s->busy[L + SIM_PCIE_RX] = s->busy[L + SIM_NIC_RX];
    }
    res->busiest_rank = -1;
    for (size_t L = 0; L < (size_t)s->n * SIM_NCLASSES; L++) {
        double bb = res->busiest_busy;
        if (s->busy[L] > bb * (1 + 1e-9) ||
            (s->busy[L] >= bb * (1 - 1e-9) && s->busy[L] > 0 && s->lbytes[L] > res->busiest_bytes)) {
            res->busiest_busy = s->busy[L];
            res->busiest_rank = (int)(L / SIM_NCLASSES);
            res->busiest_class = (int)(L % SIM_NCLASSES);
            res->busiest_bytes = s->lbytes[L];
        }
    }
}

/* Per-round loads, and the pictures asked for. */
static rmacoll_status_t sim_pictures(sim_t *s, const rmacoll_case_t *c, const sim_opts_t *o,
                                     const char *sched_name, sim_result_t *res)
{
    uint64_t *heat = NULL;
    int ncols = 0, per = 1;
    const char *bad = NULL;
    char title[256];
    rmacoll_status_t st = round_loads(s, res, &heat, &ncols, &per);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    snprintf(title, sizeof(title), "%s: %d ranks, %d nodes, scheduler %s",
             c->name, s->n, s->topo->nnodes, sched_name);
    if (o->gantt_svg && write_gantt(s, o->gantt_svg, res, title) != 0) {
        bad = o->gantt_svg;
    }
    if (o->heat_svg &&
        write_heat(s, o->heat_svg, heat, res->nrounds, ncols, per, title) != 0) {
        bad = o->heat_svg;
    }
    free(heat);
    if (bad != NULL) {
        snprintf(res->msg, sizeof(res->msg), "cannot write the picture %s: %s", bad,
                 strerror(errno));
        return RMACOLL_ERR_INVALID_ARG;
    }
    return RMACOLL_SUCCESS;
}

rmacoll_status_t sim_run(const rmacoll_case_t *c, const sim_model_t *m,
                         const sim_opts_t *o, sim_result_t *res)
{
    sim_t s;
    rmacoll__sched_t sched = {NULL, NULL};
    rmacoll_status_t st;
    double t0 = wall_now();

    memset(res, 0, sizeof(*res));
    memset(&s, 0, sizeof(s));
    s.m = m;
    s.merge_max = o->cfg.merge_max_puts > 0 ? o->cfg.merge_max_puts : 1;
    s.kernel_max = o->kernel_max_bytes;
    s.n = c->nranks;
    if (c->has_mismatch) {
        snprintf(res->msg, sizeof(res->msg), "the case has a count mismatch: "
                 "the call fails on every rank, nothing to simulate");
        return RMACOLL_ERR_INVALID_ARG;
    }
    if ((st = sim_open(&s, c, o, &sched, res)) != RMACOLL_SUCCESS ||
        (st = sim_pick_ranks(&s, c, o, res)) != RMACOLL_SUCCESS ||
        (st = sim_plan_all(&s, c, o, &sched, res)) != RMACOLL_SUCCESS) {
        goto out;
    }
    res->plan_s = wall_now() - t0;
    t0 = wall_now();
    if ((st = sim_links(&s)) != RMACOLL_SUCCESS) {
        goto out;
    }
    sim_bounds(&s, res);
    if ((st = sim_events(&s, res)) != RMACOLL_SUCCESS) {
        goto out;
    }
    /* the metadata and agreement phase before the data rounds */
    res->makespan += m->call_s;
    res->ratio = res->bound > 0 ? res->makespan / res->bound : 0;
    res->nevents = s.nevents;
    res->nflows = s.nflows;
    sim_busiest(&s, res);
    critical_path(&s, res);
    res->cp_host += m->call_s;
    if ((st = sim_pictures(&s, c, o, sched.ops->name, res)) != RMACOLL_SUCCESS) {
        goto out;
    }
    res->sim_s = wall_now() - t0;
out:
    sim_free(&s);
    rmacoll__sched_close(&sched);
    if (st != RMACOLL_SUCCESS && res->msg[0] == '\0') {
        snprintf(res->msg, sizeof(res->msg), "%s", rmacoll_status_string(st));
    }
    return st;
}
