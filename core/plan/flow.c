/*
 * flow.c - the dataflow order of a plan (flow.h): each task's lane, each
 * lane's order, and the steps a walker issues.
 */
#include "core/plan/flow.h"

#include <stdlib.h>
#include <string.h>

void rmacoll__flow_init(rmacoll__flow_t *f)
{
    memset(f, 0, sizeof(*f));
}

void rmacoll__flow_fini(rmacoll__flow_t *f)
{
    free(f->tasks);
    free(f->order);
    free(f->steps);
    free(f->lane_step);
    free(f->lane_kind);
    free(f->scratch);
    free(f->keys);
    rmacoll__flow_init(f);
}

rmacoll__lane_kind_t rmacoll__flow_lane_of(const rmacoll__task_t *t,
                                           const rmacoll_topo_t *topo, int *key)
{
    *key = 0;
    if (t->op == RMACOLL__OP_WAIT) {
        if (t->flags & RMACOLL__TASK_CREDIT) {        /* sender: a slot freed */
            *key = topo->node_of[t->peer];
            return RMACOLL__LANE_OUT;
        }
        if (t->flags & RMACOLL__TASK_ARRIVAL) {       /* relay: a chunk in */
            *key = t->origin;
            return RMACOLL__LANE_IN;
        }
        return RMACOLL__LANE_FINAL;                   /* data, and anything else */
    }
    if (t->flags & RMACOLL__TASK_TO_RELAY) {
        *key = topo->node_of[t->peer];
        return RMACOLL__LANE_OUT;
    }
    if (t->flags & RMACOLL__TASK_FORWARD) {
        *key = t->origin;
        return RMACOLL__LANE_IN;
    }
    if (t->flags & RMACOLL__TASK_CREDIT) {            /* the relay returns a slot */
        *key = t->peer;
        return RMACOLL__LANE_IN;
    }
    return t->path == RMACOLL__PATH_CE ? RMACOLL__LANE_FREE_CE : RMACOLL__LANE_FREE_PROXY;
}

/* Order inside an IN lane: by chunk, then arrival, forwards, credit. */
static int in_rank(const rmacoll__task_t *t)
{
    return t->op == RMACOLL__OP_WAIT ? 0 : (t->flags & RMACOLL__TASK_FORWARD) ? 1 : 2;
}

typedef struct in_key {
    uint64_t seq;
    uint32_t rank;  /* in_rank */
    uint32_t pos;   /* plan order, for stability */
} in_key_t;

static int in_cmp(const void *a, const void *b)
{
    const in_key_t *x = a, *y = b;

    if (x->seq != y->seq) {
        return x->seq < y->seq ? -1 : 1;
    }
    if (x->rank != y->rank) {
        return x->rank < y->rank ? -1 : 1;
    }
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Makes room for n elements; the capacity at least doubles, so that
 * growing one step at a time (make_steps) stays O(n) overall (growing to
 * exactly n made each step a realloc: quadratic copying, seconds for a
 * 16k-chunk relay under ASan). */
static int grow(void **p, size_t *cap, size_t n, size_t esize)
{
    size_t want = *cap * 2 > n ? *cap * 2 : n;
    void *q;

    if (n <= *cap) {
        return 0;
    }
    q = realloc(*p, want * esize);
    if (q == NULL) {
        return -1;
    }
    *p = q;
    *cap = want;
    return 0;
}

/* Lane numbers: FREE_PROXY 0, FREE_CE 1, OUT(B) 2 + B, IN(i) 2 + nnodes
 * + i, FINAL last; compacted to the lanes in use. */
static uint32_t lane_number(const rmacoll__task_t *t, const rmacoll_topo_t *topo)
{
    int key;
    rmacoll__lane_kind_t k = rmacoll__flow_lane_of(t, topo, &key);

    switch (k) {
    case RMACOLL__LANE_FREE_PROXY: return 0;
    case RMACOLL__LANE_FREE_CE: return 1;
    case RMACOLL__LANE_OUT: return 2 + (uint32_t)key;
    case RMACOLL__LANE_IN: return 2 + (uint32_t)topo->nnodes + (uint32_t)key;
    default: return 2 + (uint32_t)topo->nnodes + (uint32_t)topo->nranks;
    }
}

static rmacoll__lane_kind_t kind_of_number(uint32_t l, const rmacoll_topo_t *topo)
{
    uint32_t nn = (uint32_t)topo->nnodes;

    return l == 0 ? RMACOLL__LANE_FREE_PROXY
           : l == 1 ? RMACOLL__LANE_FREE_CE
           : l < 2 + nn ? RMACOLL__LANE_OUT
           : l < 2 + nn + (uint32_t)topo->nranks ? RMACOLL__LANE_IN
                                                 : RMACOLL__LANE_FINAL;
}

/* Sorts the IN lanes' segments of f->order (chunk order, flow.h). */
static rmacoll_status_t sort_in_lanes(rmacoll__flow_t *f, const rmacoll__plan_t *plan,
                                      const uint32_t *seg, uint32_t nlane,
                                      const rmacoll_topo_t *topo)
{
    for (uint32_t l = 0; l < nlane; l++) {
        size_t n = seg[l + 1] - seg[l];
        in_key_t *keys;

        if (kind_of_number(l, topo) != RMACOLL__LANE_IN || n < 2) {
            continue;
        }
        if (grow(&f->keys, &f->keys_cap, n, sizeof(*keys))) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        keys = f->keys;
        for (size_t k = 0; k < n; k++) {
            const rmacoll__task_t *t = &plan->tasks[f->order[seg[l] + k]];
            keys[k].seq = t->seq;
            keys[k].rank = (uint32_t)in_rank(t);
            keys[k].pos = f->order[seg[l] + k];
        }
        qsort(keys, n, sizeof(*keys), in_cmp);
        for (size_t k = 0; k < n; k++) {
            f->order[seg[l] + k] = keys[k].pos;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Cuts the lanes into steps; f->order and f->tasks are in lane order,
 * seg[] the lanes' bounds (nlane numbered lanes). */
static rmacoll_status_t make_steps(rmacoll__flow_t *f, const uint32_t *seg, uint32_t nlane,
                                   const rmacoll_topo_t *topo)
{
    size_t used = 0;

    for (uint32_t l = 0; l < nlane; l++) {
        used += seg[l + 1] > seg[l] || l + 1 == nlane;
    }
    if (used + 1 > f->lanes_cap) {
        /* both arrays get the new capacity */
        size_t cap = f->lanes_cap;
        uint8_t *kind;

        if (grow((void **)&f->lane_step, &cap, used + 1, sizeof(uint32_t))) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        kind = realloc(f->lane_kind, cap);
        if (kind == NULL) {
            return RMACOLL_ERR_NO_MEMORY; /* lanes_cap unchanged: retried */
        }
        f->lane_kind = kind;
        f->lanes_cap = cap;
    }
    f->nlanes = 0;
    f->nsteps = 0;
    for (uint32_t l = 0; l < nlane; l++) {
        if (seg[l + 1] == seg[l] && l + 1 != nlane) {
            continue;
        }
        f->lane_kind[f->nlanes] = (uint8_t)kind_of_number(l, topo);
        f->lane_step[f->nlanes] = (uint32_t)f->nsteps;
        for (uint32_t k = seg[l]; k < seg[l + 1]; k++) {
            const rmacoll__task_t *t = &f->tasks[k];
            rmacoll__flow_step_t *s = f->nsteps ? &f->steps[f->nsteps - 1] : NULL;
            int join = s != NULL && s->lane == f->nlanes && !s->wait &&
                       t->op == RMACOLL__OP_PUT && s->path == t->path &&
                       f->tasks[s->first].round == t->round;

            if (join) {
                s->count++;
                continue;
            }
            if (grow((void **)&f->steps, &f->steps_cap, f->nsteps + 1,
                     sizeof(*f->steps))) {
                return RMACOLL_ERR_NO_MEMORY;
            }
            s = &f->steps[f->nsteps++];
            s->first = k;
            s->count = 1;
            s->lane = (uint32_t)f->nlanes;
            s->wait = t->op == RMACOLL__OP_WAIT;
            s->path = t->path;
        }
        f->nlanes++;
    }
    f->lane_step[f->nlanes] = (uint32_t)f->nsteps;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__flow_build(rmacoll__flow_t *f, const rmacoll__plan_t *plan,
                                     const rmacoll_topo_t *topo)
{
    size_t n = plan->ntasks;
    uint32_t nlane = 3 + (uint32_t)topo->nnodes + (uint32_t)topo->nranks;
    uint32_t *seg, *lane;
    rmacoll_status_t st;

    f->ntasks = 0;
    f->nsteps = 0;
    f->nlanes = 0;
    if (n > f->tasks_cap) {
        /* both arrays get the new capacity */
        size_t cap = f->tasks_cap;
        uint32_t *order;

        if (grow((void **)&f->tasks, &cap, n, sizeof(*f->tasks))) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        order = realloc(f->order, cap * sizeof(*order));
        if (order == NULL) {
            return RMACOLL_ERR_NO_MEMORY; /* tasks_cap unchanged: retried */
        }
        f->order = order;
        f->tasks_cap = cap;
    }
    if (grow((void **)&f->scratch, &f->scratch_cap, (n + nlane + 2) / 2 + 1,
             sizeof(uint64_t))) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    /* scratch: seg[nlane + 1], then each task's lane [n] */
    seg = (uint32_t *)f->scratch;
    lane = seg + nlane + 1;
    memset(seg, 0, (nlane + 1) * sizeof(*seg));
    for (size_t k = 0; k < n; k++) {
        lane[k] = lane_number(&plan->tasks[k], topo);
        seg[lane[k] + 1]++;
    }
    for (uint32_t l = 0; l < nlane; l++) {
        seg[l + 1] += seg[l];
    }
    /* stable scatter (plan order inside a lane); seg[l] moves to the end
     * of lane l, then back */
    for (size_t k = 0; k < n; k++) {
        f->order[seg[lane[k]]++] = (uint32_t)k;
    }
    for (uint32_t l = nlane; l > 0; l--) {
        seg[l] = seg[l - 1];
    }
    seg[0] = 0;
    st = sort_in_lanes(f, plan, seg, nlane, topo);
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    for (size_t k = 0; k < n; k++) {
        f->tasks[k] = plan->tasks[f->order[k]];
    }
    f->ntasks = n;
    st = make_steps(f, seg, nlane, topo);
    if (st != RMACOLL_SUCCESS) {
        f->ntasks = f->nsteps = f->nlanes = 0;
    }
    return st;
}
