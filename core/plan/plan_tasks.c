/*
 * plan_tasks.c - the planner's task list: growing it, adding a task or a
 * PUT cut into pieces of at most max_task_bytes, the round of a put from
 * the scheduler, and the final ordering: the stable sort by (round, queue)
 * and the batches (one per round, four queues each).
 */
#include "core/plan/plan_priv.h"

#include <stdlib.h>
#include <string.h>

static rmacoll_status_t plan_reserve(rmacoll__plan_t *plan, size_t n)
{
    rmacoll__task_t *t, *s;
    size_t cap;

    if (plan->ntasks + n <= plan->tasks_cap) {
        return RMACOLL_SUCCESS;
    }
    cap = plan->tasks_cap ? plan->tasks_cap : 64;
    while (cap < plan->ntasks + n) {
        cap *= 2;
    }
    t = realloc(plan->tasks, cap * sizeof(*t));
    if (t == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    plan->tasks = t;
    s = realloc(plan->scratch, cap * sizeof(*s));
    if (s == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    plan->scratch = s;
    plan->tasks_cap = cap;
    return RMACOLL_SUCCESS;
}

static int task_queue(const rmacoll__task_t *t)
{
    if (t->op == RMACOLL__OP_PUT) {
        return t->path == RMACOLL__PATH_PROXY ? RMACOLL__Q_PROXY_PUT
                                              : RMACOLL__Q_CE_PUT;
    }
    return t->path == RMACOLL__PATH_PROXY ? RMACOLL__Q_PROXY_WAIT
                                          : RMACOLL__Q_CE_WAIT;
}

void rmacoll__plan_add_task(rmacoll__plan_ctx_t *ctx, const rmacoll__task_t *t)
{
    if (ctx->status != RMACOLL_SUCCESS) {
        return;
    }
    ctx->status = plan_reserve(ctx->plan, 1);
    if (ctx->status != RMACOLL_SUCCESS) {
        return;
    }
    ctx->plan->tasks[ctx->plan->ntasks++] = *t;
    if (t->round > ctx->max_round) {
        ctx->max_round = t->round;
    }
}

/*
 * Adds a PUT, split into pieces of at most max_task_bytes; only the last
 * piece carries the signal (if the template has one).
 */
void rmacoll__plan_add_put(rmacoll__plan_ctx_t *ctx, const rmacoll__task_t *tmpl)
{
    uint64_t max = ctx->in->cfg->max_task_bytes;
    uint64_t done = 0;
    rmacoll__task_t t = *tmpl;

    if (max == 0) {
        max = UINT64_MAX;
    }
    /* keep pieces whole elements so a receiver never sees half of one */
    if (max >= ctx->in->esize) {
        max -= max % ctx->in->esize;
    }
    do {
        uint64_t n = tmpl->bytes - done;
        if (n > max) {
            n = max;
        }
        t.src_off = tmpl->src_off + done;
        t.dst_off = tmpl->dst_off + done;
        t.bytes = n;
        done += n;
        if (done < tmpl->bytes) {
            t.flags = tmpl->flags & ~RMACOLL__TASK_SIGNAL;
            t.sig = RMACOLL__NO_SIG;
            t.sig_value = 0;
        } else {
            t.flags = tmpl->flags;
            t.sig = tmpl->sig;
            t.sig_value = tmpl->sig_value;
        }
        rmacoll__plan_add_task(ctx, &t);
    } while (done < tmpl->bytes);
}

int rmacoll__plan_sched_round(const rmacoll__plan_input_t *in, int rank, int peer)
{
    return in->sched->ops->round(in->sched->state, in->topo, rank, peer);
}

/* Stable counting sort by (round, queue): order inside a queue is the
 * order the planner emitted, which the signal contract relies on.
 * O(tasks + rounds). */
rmacoll_status_t rmacoll__plan_sort_tasks(rmacoll__plan_t *plan, int max_round)
{
    rmacoll__task_t *a = plan->tasks, *b = plan->scratch;
    int lo = 0;  /* a credit wait may sit one round before round 0 */
    size_t nb;
    uint32_t *cnt;
    uint32_t sum = 0;

    for (size_t k = 0; k < plan->ntasks; k++) {
        lo = a[k].round < lo ? a[k].round : lo;
    }
    nb = ((size_t)(max_round - lo) + 1) * RMACOLL__NQUEUES + 1;

    if (nb > plan->bucket_cap) {
        cnt = realloc(plan->bucket, nb * sizeof(*cnt));
        if (cnt == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        plan->bucket = cnt;
        plan->bucket_cap = nb;
    }
    cnt = plan->bucket;
    memset(cnt, 0, nb * sizeof(*cnt));
    for (size_t k = 0; k < plan->ntasks; k++) {
        cnt[(size_t)(a[k].round - lo) * RMACOLL__NQUEUES + task_queue(&a[k])]++;
    }
    for (size_t k = 0; k < nb; k++) {
        uint32_t c = cnt[k];
        cnt[k] = sum;
        sum += c;
    }
    for (size_t k = 0; k < plan->ntasks; k++) {
        b[cnt[(size_t)(a[k].round - lo) * RMACOLL__NQUEUES + task_queue(&a[k])]++] = a[k];
    }
    plan->tasks = b;
    plan->scratch = a;
    return RMACOLL_SUCCESS;
}

rmacoll_status_t rmacoll__plan_make_batches(rmacoll__plan_t *plan)
{
    size_t nb = 0;

    for (size_t k = 0; k < plan->ntasks; k++) {
        if (k == 0 || plan->tasks[k].round != plan->tasks[k - 1].round) {
            nb++;
        }
    }
    if (nb > plan->batches_cap) {
        rmacoll__batch_t *b = realloc(plan->batches, nb * sizeof(*b));
        if (b == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        plan->batches = b;
        plan->batches_cap = nb;
    }
    plan->nbatches = 0;
    for (size_t k = 0; k < plan->ntasks; k++) {
        rmacoll__batch_t *b;
        int q = task_queue(&plan->tasks[k]);
        if (k == 0 || plan->tasks[k].round != plan->tasks[k - 1].round) {
            b = &plan->batches[plan->nbatches++];
            memset(b, 0, sizeof(*b));
            b->round = plan->tasks[k].round;
            for (int i = 0; i < RMACOLL__NQUEUES; i++) {
                b->first[i] = (uint32_t)k;
            }
        }
        b = &plan->batches[plan->nbatches - 1];
        if (b->count[q] == 0) {
            b->first[q] = (uint32_t)k;
        }
        b->count[q]++;
    }
    return RMACOLL_SUCCESS;
}
