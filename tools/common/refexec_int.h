/*
 * refexec_int.h - what the parts of the reference executor share
 * (refexec.c, rx_exec.c, rx_mem.c, rx_task.c, rx_check.c): its state and
 * the helpers one part calls in another. Not an interface of the tools
 * (refexec.h).
 */
#ifndef RMACOLL_TOOLS_REFEXEC_INT_H
#define RMACOLL_TOOLS_REFEXEC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/plan/flow.h"
#include "core/plan/plan.h"
#include "refexec.h"

#define RX_NWIN 4

/* Provenance interval (virtual mode): bytes [off, off+len) of a window
 * came from origin's send buffer at [ooff, ooff+len). */
typedef struct rx_iv {
    uint64_t off, len;
    int origin;
    uint64_t ooff;
} rx_iv_t;

typedef struct rx_ivlist {
    rx_iv_t *v;
    size_t n, cap;
} rx_ivlist_t;

typedef struct rx_win {
    uint64_t size;          /* window bytes, guards excluded */
    unsigned char *mem;     /* data mode: guard | size | guard */
    rx_ivlist_t iv;         /* virtual mode */
} rx_win_t;

enum { RX_FREE = 0, RX_FILLING = 1, RX_FULL = 2 };

typedef struct rx_slot {
    int state;
    uint64_t filled, forwarded;
} rx_slot_t;

typedef struct rx_rank {
    rmacoll__plan_t plan;
    int plan_ok;
    rmacoll__sigstate_t *st, *stn;    /* before / after the call */
    uint64_t *sig;                    /* [nsig] signal words */
    int *writer;                      /* [nsig] the only writer, or -1 */
    uint32_t nsig;
    rx_win_t win[RX_NWIN];
    int nin;
    uint64_t slot_bytes;
    rx_slot_t *slots;                 /* [nin * S] */
    uint64_t *arrived, *credited;     /* [nin] chunks per channel */
    int64_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    int64_t *peer_rcount, *peer_rdispl;
    int64_t *chan_sendcount, *chan_rcount, *chan_rdispl;
    uint64_t *node_eager_off;         /* [own node size] planner input */
    uint64_t *eager_in_off;           /* [nranks] planner input */
    uint8_t *direct_in;               /* [nranks] planner input */
    uint64_t recv_written;            /* bytes put into RECV this call */
    /* execution: the plan's dataflow order (core/plan/flow.h); per lane,
     * its current step and the puts of that step issued so far */
    rmacoll__flow_t flow;
    uint32_t *lstep;                  /* [flow.nlanes] */
    uint32_t *lput;                   /* [flow.nlanes] */
    size_t lcap;
    int done;
} rx_rank_t;

struct refexec {
    refexec_opts_t opts;
    rmacoll__plan_cfg_t cfg;
    rmacoll_topo_t *topo;
    rmacoll__sched_t sched;
    int n;
    rx_rank_t *rk;
    size_t esize;
    const rmacoll_case_t *c;     /* the prepared case */
    int prepared;
    uint64_t iter;               /* calls executed: fill iteration */
    uint64_t rng;
    int failed;
    refexec_result_t *res;
    refexec_stats_t stats;
};

/* refexec.c: the first failure of the call (later ones are dropped). */
void rx_fail(refexec_t *ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* rx_mem.c */
uint64_t iv_extract(const rx_ivlist_t *l, uint64_t off, uint64_t len, uint64_t to,
                    rx_iv_t **out, size_t *nout);
int iv_write(rx_ivlist_t *l, uint64_t off, uint64_t len, const rx_iv_t *pieces, size_t np);
void win_free(rx_win_t *w);
int win_alloc(refexec_t *ex, rx_win_t *w, uint64_t size);
unsigned char *win_ptr(refexec_t *ex, rx_win_t *w, uint64_t off);
int64_t win_guard_bad(refexec_t *ex, const rx_win_t *w);
const char *win_name(int w);

/* rx_task.c */
void rx_describe(char *buf, size_t len, int me, const rmacoll__task_t *t);
void rx_put(refexec_t *ex, int me, const rmacoll__task_t *t);

/* rx_check.c */
void rx_check_plan_shape(refexec_t *ex, int r);
void rx_check_recv_done(refexec_t *ex, int r);
void rx_check_end(refexec_t *ex);

#endif /* RMACOLL_TOOLS_REFEXEC_INT_H */
