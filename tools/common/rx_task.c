/*
 * rx_task.c - the reference executor runs one task of a rank's plan: where
 * a put reads (send window, relay slot, eager and node payloads) and
 * writes, what it may touch, and the signals it raises (refexec_int.h).
 */
#include "refexec.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctrl/ctrl.h"
#include "core/ctrl/paths.h"
#include "core/plan/sched_registry.h"
#include "core/plan/topo.h"
#include "refexec_int.h"

/* ------------------------------------------------------------ execute */

/* Slot (c, s) of relay r holding [off, off+len), or -1. */
static int rx_find_slot(refexec_t *ex, int r, uint64_t off, uint64_t len,
                        int *c, uint32_t *s)
{
    rx_rank_t *k = &ex->rk[r];
    uint32_t S = ex->cfg.relay_slots;

    for (int ch = 0; ch < k->nin; ch++) {
        for (uint32_t sl = 0; sl < S; sl++) {
            uint64_t o = rmacoll__plan_slot_off(ex->topo, &ex->cfg, r, ch, sl);

            if (off >= o && off < o + k->slot_bytes) {
                *c = ch;
                *s = sl;
                return off + len <= o + k->slot_bytes ? 0 : -1;
            }
        }
    }
    return -1;
}

void rx_describe(char *buf, size_t len, int me,
                        const rmacoll__task_t *t)
{
    snprintf(buf, len, "rank %d round %d %s %s peer %d origin %d %s+%" PRIu64
             " -> %s+%" PRIu64 " %" PRIu64 " B sig %d=%" PRIu64 " seq %" PRIu64,
             me, t->round, t->op == RMACOLL__OP_PUT ? "put" : "wait",
             (t->flags & RMACOLL__TASK_SELF)       ? "self"
             : (t->flags & RMACOLL__TASK_TO_RELAY) ? "to_relay"
             : (t->flags & RMACOLL__TASK_FORWARD)  ? "forward"
             : (t->flags & RMACOLL__TASK_CREDIT)   ? "credit"
                                                   : "direct",
             t->peer, t->origin, win_name(t->src_win), t->src_off,
             win_name(t->dst_win), t->dst_off, t->bytes,
             t->sig == RMACOLL__NO_SIG ? -1 : (int)t->sig, t->sig_value,
             t->seq);
}

/*
 * Where the bytes of an eager copy come from: the origin's metadata record
 * carries its blocks for this rank's node in local-rank order, contiguous,
 * taken from its send buffer; each receiver copies its own block out.
 * Sets *off to the offset in the origin's send window; fails when the copy
 * is not into this rank, the origin is on this node, its stream is not
 * eager (over eager_max_bytes, or empty) or the range is not inside this
 * rank's block.
 */
static int rx_eager_src(refexec_t *ex, int me, const rmacoll__task_t *t, const char *desc,
                        uint64_t *off)
{
    const rmacoll_topo_t *topo = ex->topo;
    int A = topo->node_of[me], o = t->origin;
    uint64_t pos = 0, total = 0;
    int found = 0;
    rmacoll__plan_paths_t lim;

    if (!(t->flags & RMACOLL__TASK_EAGER) || o < 0 || o >= ex->n ||
        topo->node_of[o] == A || t->peer != me) {
        rx_fail(ex, "%s: reads an eager payload that is not addressed to this rank", desc);
        return -1;
    }
    /* relay on: the origin's blocks for this node in local-rank order (the
     * record to its relay here); relay off: this rank's block alone */
    for (int l = 0; l < topo->node_size[A]; l++) {
        int m = ex->cfg.relay_enabled ? rmacoll__topo_rank(topo, A, l) : me;
        uint64_t b = (uint64_t)ex->rk[o].sendcounts[m] * ex->esize;
        if (!ex->cfg.relay_enabled && l > 0) {
            break;
        }
        if (m == me && t->src_off >= pos && t->src_off + t->bytes <= pos + b) {
            *off = (uint64_t)ex->rk[o].sdispls[m] * ex->esize + (t->src_off - pos);
            found = 1;
        }
        pos += b;
        total += b;
    }
    rmacoll__ctrl_host_paths(topo, &ex->cfg, &lim);
    if (total > lim.eager_max) {
        rx_fail(ex, "%s: eager payload of %" PRIu64 " bytes over eager_max_bytes", desc, total);
        return -1;
    }
    if (!found) {
        rx_fail(ex, "%s: not inside rank %d's block of rank %d's eager payload", desc, me, o);
        return -1;
    }
    return 0;
}

/*
 * Where the bytes of a node eager copy come from: the origin (a node peer
 * of this rank) put its blocks for its node peers into its node payload
 * (rmacoll__plan_node_eager_bytes); this rank copies its own block out.
 * Sets *off to the offset in the origin's send window; fails when the
 * origin sends no node payload, the copy is not this rank's own or the
 * range is not inside this rank's block.
 */
static int rx_node_eager_src(refexec_t *ex, int me, const rmacoll__task_t *t,
                             const char *desc, uint64_t *off)
{
    const rmacoll_topo_t *topo = ex->topo;
    int A = topo->node_of[me], o = t->origin;
    int ls = topo->node_size[A];
    const int *members = topo->node_members + topo->node_first[A];
    uint64_t *offs, b, total;

    if (!(t->flags & RMACOLL__TASK_EAGER) || o < 0 || o >= ex->n || o == me ||
        topo->node_of[o] != A || t->peer != me) {
        rx_fail(ex, "%s: node eager copy that is not from a node peer into this rank", desc);
        return -1;
    }
    offs = calloc((size_t)ls, sizeof(uint64_t));
    if (offs == NULL) {
        rx_fail(ex, "out of memory");
        return -1;
    }
    total = rmacoll__plan_node_eager_bytes(ex->rk[o].sendcounts, members, ls,
                                           topo->local_rank[o], ex->esize,
                                           rmacoll__ctrl_node_eager_cap(topo, &ex->cfg), offs);
    b = offs[topo->local_rank[me]];
    free(offs);
    if (total == 0 || b == RMACOLL__NO_EAGER) {
        rx_fail(ex, "%s: rank %d sends no node payload with a block for this rank", desc, o);
        return -1;
    }
    if (t->src_off < b || t->src_off + t->bytes > b + (uint64_t)ex->rk[o].sendcounts[me] *
                                                          ex->esize) {
        rx_fail(ex, "%s: not inside this rank's block of rank %d's node payload", desc, o);
        return -1;
    }
    *off = (uint64_t)ex->rk[o].sdispls[me] * ex->esize + (t->src_off - b);
    return 0;
}

/* Copies the bytes of a put (data or provenance). */
static void rx_copy(refexec_t *ex, int me, const rmacoll__task_t *t,
                    const char *desc)
{
    int eager = t->src_win == RMACOLL__WIN_EAGER || t->src_win == RMACOLL__WIN_NODE_EAGER;
    rx_win_t *src = &ex->rk[me].win[eager ? RMACOLL__WIN_SEND : t->src_win];
    rx_win_t *dst = &ex->rk[t->peer].win[t->dst_win];
    uint64_t src_off = t->src_off;
    int src_rank = me;

    if (t->bytes == 0) {
        return;
    }
    if (eager) {
        if ((t->src_win == RMACOLL__WIN_EAGER ? rx_eager_src(ex, me, t, desc, &src_off)
                                              : rx_node_eager_src(ex, me, t, desc,
                                                                  &src_off)) != 0) {
            return;
        }
        src_rank = t->origin;
        src = &ex->rk[src_rank].win[RMACOLL__WIN_SEND];
    }
    if (!ex->opts.virtual_mode) {
        memmove(win_ptr(ex, dst, t->dst_off), win_ptr(ex, src, src_off),
                (size_t)t->bytes);
        return;
    }
    if (t->src_win == RMACOLL__WIN_SEND || eager) {
        rx_iv_t p = {t->dst_off, t->bytes, src_rank, src_off};

        if (iv_write(&dst->iv, t->dst_off, t->bytes, &p, 1) != 0) {
            rx_fail(ex, "out of memory for provenance");
        }
    } else {
        rx_iv_t *pieces;
        size_t np;
        uint64_t missing = iv_extract(&src->iv, t->src_off, t->bytes,
                                      t->dst_off, &pieces, &np);

        if (missing != 0) {
            rx_fail(ex, "%s: reads %" PRIu64 " bytes that were never written",
                    desc, missing);
        } else if (iv_write(&dst->iv, t->dst_off, t->bytes, pieces, np) != 0) {
            rx_fail(ex, "out of memory for provenance");
        }
        free(pieces);
    }
}

static void rx_signal(refexec_t *ex, int me, const rmacoll__task_t *t,
                      const char *desc)
{
    rx_rank_t *tk = &ex->rk[t->peer];
    uint64_t cur;

    if (t->sig >= tk->nsig) {
        rx_fail(ex, "%s: signal word %u outside rank %d's %u words", desc,
                t->sig, t->peer, tk->nsig);
        return;
    }
    if (tk->writer[t->sig] >= 0 && tk->writer[t->sig] != me) {
        rx_fail(ex, "%s: signal word %u of rank %d has two writers (%d and %d)",
                desc, t->sig, t->peer, tk->writer[t->sig], me);
        return;
    }
    tk->writer[t->sig] = me;
    cur = tk->sig[t->sig];
    if (t->sig_value != cur + 1) {
        rx_fail(ex, "%s: signal word %u of rank %d goes from %" PRIu64
                " to %" PRIu64 " (must rise by exactly 1)", desc, t->sig,
                t->peer, cur, t->sig_value);
        return;
    }
    tk->sig[t->sig] = t->sig_value;
    ex->stats.signals++;
}

void rx_put(refexec_t *ex, int me, const rmacoll__task_t *t)
{
    const rmacoll_topo_t *topo = ex->topo;
    rx_rank_t *k = &ex->rk[me];
    rx_rank_t *tk;
    uint32_t S = ex->cfg.relay_slots;
    char desc[320];
    int c;
    uint32_t s;

    rx_describe(desc, sizeof(desc), me, t);
    if (t->peer < 0 || t->peer >= ex->n) {
        rx_fail(ex, "%s: target rank out of range", desc);
        return;
    }
    tk = &ex->rk[t->peer];
    if ((t->path == RMACOLL__PATH_CE) !=
        (topo->node_of[t->peer] == topo->node_of[me])) {
        rx_fail(ex, "%s: path %s to a rank on %s node", desc,
                t->path == RMACOLL__PATH_CE ? "ce" : "proxy",
                topo->node_of[t->peer] == topo->node_of[me] ? "the same"
                                                            : "another");
        return;
    }
    if (t->bytes > 0) {
        if (t->src_win != RMACOLL__WIN_SEND && t->src_win != RMACOLL__WIN_RELAY &&
            t->src_win != RMACOLL__WIN_EAGER && t->src_win != RMACOLL__WIN_NODE_EAGER) {
            rx_fail(ex, "%s: bad source window", desc);
            return;
        }
        if (t->dst_win != RMACOLL__WIN_RECV && t->dst_win != RMACOLL__WIN_RELAY) {
            rx_fail(ex, "%s: writes a %s window", desc, win_name(t->dst_win));
            return;
        }
        if (t->src_win != RMACOLL__WIN_EAGER && t->src_win != RMACOLL__WIN_NODE_EAGER &&
            (t->src_off > k->win[t->src_win].size ||
             t->bytes > k->win[t->src_win].size - t->src_off)) {
            rx_fail(ex, "%s: reads outside its %s window (%" PRIu64 " bytes)",
                    desc, win_name(t->src_win), k->win[t->src_win].size);
            return;
        }
        if (t->dst_off > tk->win[t->dst_win].size ||
            t->bytes > tk->win[t->dst_win].size - t->dst_off) {
            rx_fail(ex, "%s: writes outside rank %d's %s window (%" PRIu64
                    " bytes): guard hit", desc, t->peer, win_name(t->dst_win),
                    tk->win[t->dst_win].size);
            return;
        }
        if (t->origin < 0 || t->origin >= ex->n) {
            rx_fail(ex, "%s: origin out of range", desc);
            return;
        }
    }
    if (t->bytes > 0 && t->dst_win == RMACOLL__WIN_RECV) {
        int o = t->origin;

        if (tk->done) {
            rx_fail(ex, "%s: writes rank %d's receive buffer after its call "
                    "returned", desc, t->peer);
            return;
        }
        uint64_t b0 = (uint64_t)tk->rdispls[o] * ex->esize;
        uint64_t bl = (uint64_t)tk->recvcounts[o] * ex->esize;

        if (t->dst_off < b0 || t->dst_off + t->bytes > b0 + bl) {
            rx_fail(ex, "%s: writes outside rank %d's receive block for rank "
                    "%d ([%" PRIu64 ", %" PRIu64 "))", desc, t->peer, o, b0,
                    b0 + bl);
            return;
        }
        if ((t->flags & (RMACOLL__TASK_FORWARD | RMACOLL__TASK_EAGER)) == 0 && o != me) {
            rx_fail(ex, "%s: a direct put carries another rank's data", desc);
            return;
        }
        tk->recv_written += t->bytes;
    }
    if (t->bytes > 0 && t->dst_win == RMACOLL__WIN_RELAY) {
        rx_slot_t *sl;

        if (!(t->flags & RMACOLL__TASK_TO_RELAY) ||
            t->src_win != RMACOLL__WIN_SEND) {
            rx_fail(ex, "%s: writes a relay buffer but is not a stream chunk",
                    desc);
            return;
        }
        c = rmacoll__plan_chan_index(topo, t->peer, me);
        if (c < 0) {
            rx_fail(ex, "%s: rank %d is not this rank's relay", desc, t->peer);
            return;
        }
        if (rx_find_slot(ex, t->peer, t->dst_off, t->bytes, &c, &s) != 0 ||
            c != rmacoll__plan_chan_index(topo, t->peer, me)) {
            rx_fail(ex, "%s: does not fit in one slot of its channel", desc);
            return;
        }
        sl = &tk->slots[(size_t)c * S + s];
        if (sl->state == RX_FULL) {
            rx_fail(ex, "%s: slot overwritten before credit (channel %d slot "
                    "%u of relay %d)", desc, c, s, t->peer);
            return;
        }
        if (sl->state == RX_FREE) {
            if (tk->arrived[c] % S != s) {
                rx_fail(ex, "%s: chunk written to slot %u, but the next chunk "
                        "of channel %d (%" PRIu64 ") belongs in slot %" PRIu64,
                        desc, s, c, tk->arrived[c], tk->arrived[c] % S);
                return;
            }
            sl->state = RX_FILLING;
            sl->filled = 0;
            sl->forwarded = 0;
        }
        sl->filled += t->bytes;
    }
    if (t->bytes > 0 && t->src_win == RMACOLL__WIN_RELAY) {
        rx_slot_t *sl;

        if (!(t->flags & RMACOLL__TASK_FORWARD)) {
            rx_fail(ex, "%s: reads the relay buffer but is not a forward", desc);
            return;
        }
        if (rx_find_slot(ex, me, t->src_off, t->bytes, &c, &s) != 0) {
            rx_fail(ex, "%s: forward source is not inside one slot", desc);
            return;
        }
        sl = &k->slots[(size_t)c * S + s];
        if (sl->state != RX_FULL) {
            rx_fail(ex, "%s: forward before arrival (channel %d slot %u is %s)",
                    desc, c, s, sl->state == RX_FREE ? "free" : "filling");
            return;
        }
        if (rmacoll__plan_chan_src(topo, me, c) != t->origin) {
            rx_fail(ex, "%s: forwards channel %d (from rank %d) as rank %d's "
                    "data", desc, c, rmacoll__plan_chan_src(topo, me, c),
                    t->origin);
            return;
        }
        sl->forwarded += t->bytes;
    }
    rx_copy(ex, me, t, desc);
    if (ex->failed) {
        return;
    }
    ex->stats.puts++;
    if (t->path == RMACOLL__PATH_PROXY) {
        ex->stats.bytes_proxy += t->bytes;
    } else {
        ex->stats.bytes_ce += t->bytes;
    }
    if (t->flags & RMACOLL__TASK_SELF) {
        ex->stats.bytes_self += t->bytes;
    } else if (t->flags & RMACOLL__TASK_TO_RELAY) {
        ex->stats.bytes_to_relay += t->bytes;
    } else if (t->flags & RMACOLL__TASK_FORWARD) {
        ex->stats.bytes_forward += t->bytes;
    } else {
        ex->stats.bytes_direct += t->bytes;
    }
    if (!(t->flags & RMACOLL__TASK_SIGNAL)) {
        if (t->flags & RMACOLL__TASK_CREDIT) {
            rx_fail(ex, "%s: credit without a signal", desc);
        }
        return;
    }
    /* which word, by kind */
    if (t->flags & RMACOLL__TASK_TO_RELAY) {
        rx_slot_t *sl;

        if (rx_find_slot(ex, t->peer, t->dst_off, t->bytes ? t->bytes : 1, &c,
                         &s) != 0 ||
            t->sig != rmacoll__sig_arrive(topo, &ex->cfg, c, s)) {
            rx_fail(ex, "%s: chunk signals word %u, not the ARRIVE word of "
                    "its slot", desc, t->sig);
            return;
        }
        sl = &tk->slots[(size_t)c * S + s];
        if (sl->state != RX_FILLING) {
            rx_fail(ex, "%s: ARRIVE on a %s slot", desc,
                    sl->state == RX_FULL ? "full" : "empty");
            return;
        }
        sl->state = RX_FULL;
        tk->arrived[c]++;
    } else if (t->flags & RMACOLL__TASK_CREDIT) {
        rx_slot_t *sl;

        c = rmacoll__plan_chan_index(topo, me, t->peer);
        if (c < 0 || t->sig != rmacoll__sig_credit(topo, topo->node_of[me])) {
            rx_fail(ex, "%s: credit to a rank that has no channel here, or on "
                    "the wrong word", desc);
            return;
        }
        s = (uint32_t)(k->credited[c] % S);
        sl = &k->slots[(size_t)c * S + s];
        if (sl->state != RX_FULL) {
            rx_fail(ex, "%s: credit for channel %d slot %u, which is %s", desc,
                    c, s, sl->state == RX_FREE ? "free" : "still filling");
            return;
        }
        if (sl->forwarded != sl->filled) {
            rx_fail(ex, "%s: credit for channel %d slot %u after forwarding %"
                    PRIu64 " of its %" PRIu64 " bytes", desc, c, s,
                    sl->forwarded, sl->filled);
            return;
        }
        sl->state = RX_FREE;
        k->credited[c]++;
    } else if (t->sig != rmacoll__sig_data(t->origin) &&
               !(rmacoll__plan_has_xdata(ex->topo, &ex->cfg) && t->origin == me &&
                 t->sig == rmacoll__sig_xdata(ex->topo, &ex->cfg, me) &&
                 ex->topo->node_of[t->peer] != ex->topo->node_of[me] &&
                 rmacoll__topo_relay(ex->topo, me, ex->topo->node_of[t->peer]) != t->peer)) {
        /* XDATA(me): a direct stream's own put to a rank other than the
         * relay (plan.h) */
        rx_fail(ex, "%s: data of rank %d signals word %u, not DATA(%d)", desc,
                t->origin, t->sig, t->origin);
        return;
    }
    rx_signal(ex, me, t, desc);
}

