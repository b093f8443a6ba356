/*
 * planjson.c - one rank's plan as a JSON object, with cJSON (planjson.h).
 */
#include "planjson.h"

#include <stdlib.h>

#include "tjson.h"

/* {"win":W,"off":X} */
static cJSON *plan_json_at(int win, uint64_t off)
{
    cJSON *o = cJSON_CreateObject();

    if (o != NULL) {
        tjson_str(o, "win", rmacoll__win_name(win));
        tjson_u64(o, "off", off);
    }
    return o;
}

static cJSON *plan_json_task(const rmacoll__task_t *t)
{
    cJSON *o = cJSON_CreateObject();

    if (o == NULL) {
        return NULL;
    }
    tjson_str(o, "op", t->op == RMACOLL__OP_PUT ? "put" : "wait");
    tjson_str(o, "kind", rmacoll__task_kind(t));
    tjson_i64(o, "peer", t->peer);
    tjson_i64(o, "origin", t->origin);
    cJSON_AddItemToObject(o, "src", plan_json_at(t->src_win, t->src_off));
    cJSON_AddItemToObject(o, "dst", plan_json_at(t->dst_win, t->dst_off));
    tjson_u64(o, "bytes", t->bytes);
    tjson_u64(o, "seq", t->seq);
    if (t->sig != RMACOLL__NO_SIG) {
        cJSON *sig = cJSON_AddObjectToObject(o, "signal");
        if (sig != NULL) {
            tjson_u64(sig, "index", t->sig);
            tjson_u64(sig, "value", t->sig_value);
        }
    }
    return o;
}

/* One batch: its round, its queues' tasks, and the bytes its puts move. */
static cJSON *plan_json_batch(const rmacoll__plan_t *plan, const rmacoll__batch_t *b)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *queues;
    uint64_t bytes = 0;

    if (o == NULL) {
        return NULL;
    }
    tjson_i64(o, "round", b->round);
    queues = cJSON_AddObjectToObject(o, "queues");
    for (int q = 0; q < RMACOLL__NQUEUES && queues != NULL; q++) {
        cJSON *arr = cJSON_AddArrayToObject(queues, rmacoll__queue_name(q));
        for (uint32_t k = 0; k < b->count[q]; k++) {
            const rmacoll__task_t *t = &plan->tasks[b->first[q] + k];
            cJSON_AddItemToArray(arr, plan_json_task(t));
            if (q == RMACOLL__Q_PROXY_PUT || q == RMACOLL__Q_CE_PUT) {
                bytes += t->bytes;
            }
        }
    }
    tjson_u64(o, "bytes", bytes);
    return o;
}

/* The bytes this rank puts to each peer, by path, in (peer, path) order. */
static cJSON *plan_json_links(const rmacoll__plan_t *plan, const rmacoll_topo_t *topo)
{
    uint64_t *links = calloc((size_t)topo->nranks * 2, sizeof(uint64_t));
    cJSON *arr = cJSON_CreateArray();

    for (size_t k = 0; links != NULL && k < plan->ntasks; k++) {
        const rmacoll__task_t *t = &plan->tasks[k];
        if (t->op == RMACOLL__OP_PUT) {
            links[(size_t)t->peer * 2 + t->path] += t->bytes;
        }
    }
    for (int p = 0; links != NULL && arr != NULL && p < topo->nranks; p++) {
        for (int path = 0; path < 2; path++) {
            uint64_t n = links[(size_t)p * 2 + path];
            cJSON *o = n != 0 ? cJSON_CreateObject() : NULL;
            if (o != NULL) {
                tjson_i64(o, "src", plan->rank);
                tjson_i64(o, "dst", p);
                tjson_str(o, "path", path ? "ce" : "proxy");
                tjson_u64(o, "bytes", n);
                cJSON_AddItemToArray(arr, o);
            }
        }
    }
    free(links);
    return arr;
}

void planjson_print(FILE *out, const rmacoll__plan_t *plan, const rmacoll_topo_t *topo)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *batches;

    if (doc == NULL) {
        return;
    }
    tjson_i64(doc, "rank", plan->rank);
    tjson_i64(doc, "node", topo->node_of[plan->rank]);
    tjson_i64(doc, "local_rank", topo->local_rank[plan->rank]);
    batches = cJSON_AddArrayToObject(doc, "batches");
    for (size_t bi = 0; bi < plan->nbatches && batches != NULL; bi++) {
        cJSON_AddItemToArray(batches, plan_json_batch(plan, &plan->batches[bi]));
    }
    cJSON_AddItemToObject(doc, "links", plan_json_links(plan, topo));
    tjson_print(out, doc, 0, 1);
}
