/* plan_print.c - the readable text rendering of a plan, with totals per
 * round and per link (peer, path), and the names of queues, windows and
 * task kinds. Used by rmacoll-plan and logging; rmacoll-plan's JSON
 * rendering is tools/common/planjson.c (the library writes no JSON). */
#include <inttypes.h>
#include <stdlib.h>

#include "core/plan/plan.h"

static const char *const queue_names[RMACOLL__NQUEUES] = {"proxyPut", "cePut",
                                                          "proxyWait", "ceWait"};
static const char *const win_names[] = {"-", "SEND", "RECV", "RELAY", "EAGER", "NODE_EAGER"};

const char *rmacoll__queue_name(int q)
{
    return (q >= 0 && q < RMACOLL__NQUEUES) ? queue_names[q] : "?";
}

const char *rmacoll__win_name(int w)
{
    return (w >= 0 && w <= RMACOLL__WIN_NODE_EAGER) ? win_names[w] : "?";
}

const char *rmacoll__task_kind(const rmacoll__task_t *t)
{
    if (t->flags & RMACOLL__TASK_SELF) {
        return "self";
    }
    if (t->flags & RMACOLL__TASK_TO_RELAY) {
        return "to_relay";
    }
    if (t->flags & RMACOLL__TASK_EAGER) {
        return "eager";
    }
    if (t->flags & RMACOLL__TASK_FORWARD) {
        return "forward";
    }
    if (t->flags & RMACOLL__TASK_CREDIT) {
        return "credit";
    }
    if (t->flags & RMACOLL__TASK_ARRIVAL) {
        return "arrival";
    }
    if (t->flags & RMACOLL__TASK_DATA) {
        return "data";
    }
    return "direct";
}

/* bytes[peer * 2 + path] put by this rank; NULL on allocation failure. */
static uint64_t *link_totals(const rmacoll__plan_t *plan, int nranks)
{
    uint64_t *links = calloc((size_t)nranks * 2, sizeof(uint64_t));

    for (size_t k = 0; links != NULL && k < plan->ntasks; k++) {
        const rmacoll__task_t *t = &plan->tasks[k];
        if (t->op == RMACOLL__OP_PUT) {
            links[(size_t)t->peer * 2 + t->path] += t->bytes;
        }
    }
    return links;
}

static uint64_t batch_bytes(const rmacoll__plan_t *plan,
                            const rmacoll__batch_t *b, int q)
{
    uint64_t sum = 0;

    for (uint32_t k = 0; k < b->count[q]; k++) {
        sum += plan->tasks[b->first[q] + k].bytes;
    }
    return sum;
}

void rmacoll__plan_print_text(FILE *out, const rmacoll__plan_t *plan,
                              const rmacoll_topo_t *topo)
{
    uint64_t *links = link_totals(plan, topo->nranks);

    fprintf(out, "rank %d (node %d, local %d): %zu tasks in %zu batches\n",
            plan->rank, topo->node_of[plan->rank], topo->local_rank[plan->rank],
            plan->ntasks, plan->nbatches);
    for (size_t bi = 0; bi < plan->nbatches; bi++) {
        const rmacoll__batch_t *b = &plan->batches[bi];
        fprintf(out, "  round %d:", b->round);
        for (int q = 0; q < RMACOLL__NQUEUES; q++) {
            if (b->count[q]) {
                fprintf(out, " %s %u (%" PRIu64 " B)", queue_names[q], b->count[q],
                        batch_bytes(plan, b, q));
            }
        }
        fputc('\n', out);
        for (int q = 0; q < RMACOLL__NQUEUES; q++) {
            for (uint32_t k = 0; k < b->count[q]; k++) {
                const rmacoll__task_t *t = &plan->tasks[b->first[q] + k];
                if (t->op == RMACOLL__OP_PUT) {
                    fprintf(out,
                            "    %-9s %-8s -> %-3d %s+%" PRIu64 " -> %s+%" PRIu64
                            " %" PRIu64 " B",
                            queue_names[q], rmacoll__task_kind(t), t->peer,
                            win_names[t->src_win], t->src_off,
                            win_names[t->dst_win], t->dst_off, t->bytes);
                } else {
                    fprintf(out, "    %-9s %-8s <- %-3d", queue_names[q],
                            rmacoll__task_kind(t), t->peer);
                }
                if (t->sig != RMACOLL__NO_SIG) {
                    fprintf(out, " sig[%u]%s%" PRIu64, t->sig,
                            t->op == RMACOLL__OP_PUT ? "=" : ">=", t->sig_value);
                }
                if (t->origin != plan->rank) {
                    fprintf(out, " origin %d", t->origin);
                }
                if (t->flags & (RMACOLL__TASK_TO_RELAY | RMACOLL__TASK_FORWARD |
                                RMACOLL__TASK_CREDIT | RMACOLL__TASK_ARRIVAL)) {
                    fprintf(out, " seq %" PRIu64, t->seq);
                }
                fputc('\n', out);
            }
        }
    }
    fprintf(out, "  links (bytes put by rank %d):", plan->rank);
    for (int p = 0; links != NULL && p < topo->nranks; p++) {
        for (int path = 0; path < 2; path++) {
            uint64_t n = links[(size_t)p * 2 + path];
            if (n) {
                fprintf(out, " ->%d/%s %" PRIu64, p, path ? "ce" : "proxy", n);
            }
        }
    }
    fputc('\n', out);
    free(links);
}
