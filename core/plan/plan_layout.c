/*
 * plan_layout.c - the layout of one rank's relay buffer and signal words:
 * incoming relay channels (nin, channel of a sender), slot size and offset,
 * the relay buffer rule, the signal-word indices DATA / CREDIT / XDATA /
 * ARRIVE (plan.h lists them), and the signal state (sigstate) that carries
 * the signal values from one call to the next.
 */
#include "core/plan/plan_priv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan/topo.h"

/* ---------------------------------------------------------------- layout */

int rmacoll__plan_nin(const rmacoll_topo_t *topo,
                      const rmacoll__plan_cfg_t *cfg, int r)
{
    int node = topo->node_of[r];
    int n = 0;

    if (!cfg->relay_enabled) {
        return 0;
    }
    for (int i = 0; i < topo->nranks; i++) {
        if (topo->node_of[i] != node && rmacoll__topo_relay(topo, i, node) == r) {
            n++;
        }
    }
    return n;
}

int rmacoll__plan_chan_src(const rmacoll_topo_t *topo, int r, int c)
{
    int node = topo->node_of[r];

    for (int i = 0; i < topo->nranks; i++) {
        if (topo->node_of[i] != node && rmacoll__topo_relay(topo, i, node) == r) {
            if (c-- == 0) {
                return i;
            }
        }
    }
    return -1;
}

int rmacoll__plan_chan_index(const rmacoll_topo_t *topo, int r, int i)
{
    int node = topo->node_of[r];
    int c = 0;

    if (topo->node_of[i] == node || rmacoll__topo_relay(topo, i, node) != r) {
        return -1;
    }
    for (int k = 0; k < i; k++) {
        if (topo->node_of[k] != node && rmacoll__topo_relay(topo, k, node) == r) {
            c++;
        }
    }
    return c;
}

uint64_t rmacoll__plan_slot_bytes(const rmacoll_topo_t *topo,
                                  const rmacoll__plan_cfg_t *cfg, int r)
{
    int nin = rmacoll__plan_nin(topo, cfg, r);

    if (nin == 0 || cfg->relay_slots == 0) {
        return 0;
    }
    return (cfg->relay_buffer_bytes / ((uint64_t)nin * cfg->relay_slots)) &
           ~(uint64_t)7;
}

int rmacoll__plan_relay_rule(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg,
                             rmacoll__relay_rule_t *out, char *msg, size_t len)
{
    rmacoll__relay_rule_t r = {0, -1, 1, 0};
    int ok;

    if (topo == NULL) {
        r.slot_bytes = cfg->relay_slots ? cfg->relay_buffer_bytes / cfg->relay_slots : 0;
        r.min_buffer_bytes = (uint64_t)RMACOLL__MIN_SLOT_BYTES * cfg->relay_slots;
        ok = cfg->relay_slots > 0 && r.slot_bytes >= RMACOLL__MIN_SLOT_BYTES;
        if (!ok && msg != NULL) {
            snprintf(msg, len, "relay.buffer_bytes = %" PRIu64 " over relay.slots = %" PRIu32
                     " gives slots of %" PRIu64 " bytes, below %u (one element of the "
                     "widest type)", cfg->relay_buffer_bytes, cfg->relay_slots,
                     r.slot_bytes, RMACOLL__MIN_SLOT_BYTES);
        }
    } else {
        r.nin = 0;
        for (int k = 0; cfg->relay_enabled && k < topo->nranks; k++) {
            int nin = rmacoll__plan_nin(topo, cfg, k);
            if (nin > r.nin) {
                r.nin = nin;
                r.relay = k;
            }
        }
        r.min_buffer_bytes = (uint64_t)RMACOLL__MIN_SLOT_BYTES * cfg->relay_slots *
                             (uint64_t)r.nin;
        r.slot_bytes = r.relay >= 0 ? rmacoll__plan_slot_bytes(topo, cfg, r.relay) : 0;
        ok = r.relay < 0 || (cfg->relay_slots > 0 &&
                             cfg->relay_buffer_bytes >= r.min_buffer_bytes);
        if (!ok && msg != NULL) {
            snprintf(msg, len, "relay.buffer_bytes = %" PRIu64 " is too small for this "
                     "topology: rank %d relays for %d senders with %" PRIu32 " slots "
                     "each, leaving %" PRIu64 "-byte slots (at least %u needed: "
                     "relay.buffer_bytes >= %" PRIu64 ")", cfg->relay_buffer_bytes,
                     r.relay, r.nin, cfg->relay_slots, r.slot_bytes,
                     RMACOLL__MIN_SLOT_BYTES, r.min_buffer_bytes);
        }
    }
    if (out != NULL) {
        *out = r;
    }
    return ok;
}

uint64_t rmacoll__plan_slot_off(const rmacoll_topo_t *topo,
                                const rmacoll__plan_cfg_t *cfg, int r, int c,
                                uint32_t s)
{
    return ((uint64_t)c * cfg->relay_slots + s) *
           rmacoll__plan_slot_bytes(topo, cfg, r);
}

uint32_t rmacoll__sig_data(int p)
{
    return (uint32_t)p;
}

uint32_t rmacoll__sig_credit(const rmacoll_topo_t *topo, int node)
{
    return (uint32_t)(topo->nranks + node);
}

int rmacoll__plan_has_xdata(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg)
{
    return cfg->relay_enabled && cfg->direct_min_bytes != 0 && topo->nnodes >= 2;
}

uint32_t rmacoll__sig_xdata(const rmacoll_topo_t *topo, const rmacoll__plan_cfg_t *cfg, int p)
{
    (void)cfg;
    return (uint32_t)(topo->nranks + topo->nnodes + p);
}

uint32_t rmacoll__sig_arrive(const rmacoll_topo_t *topo,
                             const rmacoll__plan_cfg_t *cfg, int c, uint32_t s)
{
    return (uint32_t)(topo->nranks + topo->nnodes) +
           (rmacoll__plan_has_xdata(topo, cfg) ? (uint32_t)topo->nranks : 0) +
           (uint32_t)c * cfg->relay_slots + s;
}

uint32_t rmacoll__sig_count(const rmacoll_topo_t *topo,
                            const rmacoll__plan_cfg_t *cfg, int r)
{
    return rmacoll__sig_arrive(topo, cfg, rmacoll__plan_nin(topo, cfg, r), 0);
}

/* ----------------------------------------------------------- signal state */

rmacoll_status_t rmacoll__sigstate_create(const rmacoll_topo_t *topo,
                                          const rmacoll__plan_cfg_t *cfg,
                                          int rank, rmacoll__sigstate_t **out)
{
    rmacoll__sigstate_t *st = calloc(1, sizeof(*st));

    if (st == NULL) {
        return RMACOLL_ERR_NO_MEMORY;
    }
    st->nranks = topo->nranks;
    st->nnodes = topo->nnodes;
    st->nin = rmacoll__plan_nin(topo, cfg, rank);
    st->local_size = topo->node_size[topo->node_of[rank]];
    st->data_in = calloc((size_t)st->nranks, sizeof(uint64_t));
    st->data_out = calloc((size_t)st->nranks, sizeof(uint64_t));
    st->fwd_out = calloc((size_t)st->nin * st->local_size + 1, sizeof(uint64_t));
    st->chan_out = calloc((size_t)st->nnodes, sizeof(uint64_t));
    st->chan_in = calloc((size_t)st->nin + 1, sizeof(uint64_t));
    st->xdata_in = calloc((size_t)st->nranks, sizeof(uint64_t));
    st->xdata_out = calloc((size_t)st->nranks, sizeof(uint64_t));
    if (!st->data_in || !st->data_out || !st->fwd_out || !st->chan_out ||
        !st->chan_in || !st->xdata_in || !st->xdata_out) {
        rmacoll__sigstate_destroy(st);
        return RMACOLL_ERR_NO_MEMORY;
    }
    *out = st;
    return RMACOLL_SUCCESS;
}

void rmacoll__sigstate_destroy(rmacoll__sigstate_t *st)
{
    if (st == NULL) {
        return;
    }
    free(st->data_in);
    free(st->data_out);
    free(st->fwd_out);
    free(st->chan_out);
    free(st->chan_in);
    free(st->xdata_in);
    free(st->xdata_out);
    free(st);
}

void rmacoll__sigstate_copy(rmacoll__sigstate_t *dst,
                            const rmacoll__sigstate_t *src)
{
    if (dst == src) {
        return;
    }
    memcpy(dst->data_in, src->data_in, (size_t)src->nranks * sizeof(uint64_t));
    memcpy(dst->data_out, src->data_out, (size_t)src->nranks * sizeof(uint64_t));
    memcpy(dst->fwd_out, src->fwd_out,
           (size_t)src->nin * src->local_size * sizeof(uint64_t));
    memcpy(dst->chan_out, src->chan_out, (size_t)src->nnodes * sizeof(uint64_t));
    memcpy(dst->chan_in, src->chan_in, (size_t)src->nin * sizeof(uint64_t));
    memcpy(dst->xdata_in, src->xdata_in, (size_t)src->nranks * sizeof(uint64_t));
    memcpy(dst->xdata_out, src->xdata_out, (size_t)src->nranks * sizeof(uint64_t));
}
