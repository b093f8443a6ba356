/*
 * run_stream.c - the device-memory runner on one node: everything is
 * enqueued on the user's stream, with no host synchronisation. Node peers'
 * receive buffers are exported in the metadata and mapped after planning;
 * READY words order a writer's stream after its reader's previous call.
 *
 * Graph mode (RMACOLL_CUDA_GRAPH=1 in the environment, read once per
 * process): a call may be issued while its stream is being captured into a
 * CUDA graph, and every replay of the graph must give the call's result
 * again. The values a call's stream operations write and wait for are
 * fixed when they are enqueued (captured), so a replay would find its
 * words already past them. Graph mode therefore returns every word a call
 * waited on to 0 on the stream, right after the wait: a READY word right
 * after the READY wait (before this rank's puts: the writer's next READY
 * can only come after it saw this rank's data), the data words after the
 * call's last waits (their next writers first wait for this rank's next
 * READY, which the stream enqueues after the reset). Every wait of a call
 * then starts from 0 and is raised by that call's own signals, whatever
 * epoch they carry: a replay waits for the values of the captured call,
 * an ordinary call for its own, and both interleave on one stream. Cost:
 * two more batches of stream writes per call. Host-memory calls on the
 * same communicator leave their words raised and must not be mixed with
 * replays (rmacoll.h says what may change between replays).
 *
 * Signal words. When the communicator has device-resident signal words
 * (comm->dsig, set up at create by comm_xport.c: every rank of the node has an
 * array in its device memory and has mapped every other's), every index
 * this runner hands the transports carries RMACOLL_SIG_DEVICE: READY and
 * data words are stored and polled in device memory, and no stream write,
 * stream wait or kernel poll crosses PCIe into the host control window.
 * The choice is per communicator and alike on every rank, so the writer of
 * a word and its reader always agree (the one-launch path and the split
 * path may differ between ranks of one call; their words do not). Graph
 * mode resets the device words as it would the host words.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/exec/call.h"
#include "core/exec/state.h"
#include "core/plan/topo.h"

static int graph_mode_on;
static pthread_once_t graph_mode_once = PTHREAD_ONCE_INIT;

static void graph_mode_read(void)
{
    graph_mode_on = rmacoll__env_bool("RMACOLL_CUDA_GRAPH", 0);
}

/* RMACOLL_CUDA_GRAPH=1|yes|on|true: graph mode (see the top of the file). */
static int graph_mode(void)
{
    pthread_once(&graph_mode_once, graph_mode_read);
    return graph_mode_on;
}

/* The transport's probe (post_puts_stream with no puts) fails with
 * RMACOLL_ERR_UNSUPPORTED while the stream is being captured; allow_capture
 * accepts that case (graph mode, this runner only). */
static rmacoll_status_t stream_probe(rmacoll__call_t *c, int allow_capture)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st;

    /* device memory: a transport bound to node peers x CUDA memory */
    if (ctl == NULL) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: stream: device buffers need a transport "
                 "for node peers in CUDA memory (RMACOLL_TCAP_MEM_CUDA), which this build "
                 "lacks (the copy-engine transport has one when built with CUDA)", comm->rank);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    /* n == 0 checks the stream can take work (not being captured) */
    st = ctl->ops->stream.post_puts_stream(ctl->tp, NULL, 0, c->stream);
    if (st == RMACOLL_ERR_UNSUPPORTED && allow_capture) {
        return RMACOLL_SUCCESS; /* being captured: graph mode records the call */
    }
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: stream: cannot enqueue on this "
                 "stream%s: %s", comm->rank,
                 st != RMACOLL_ERR_UNSUPPORTED ? ""
                 : c->runner->caps & RMACOLL__RUNNER_GRAPH
                     ? " (being captured into a CUDA graph: that needs RMACOLL_CUDA_GRAPH=1)"
                     : " (being captured into a CUDA graph: supported on one node only)",
                 rmacoll_status_string(st));
    }
    return st;
}

rmacoll_status_t rmacoll__stream_usable(rmacoll__call_t *c)
{
    return stream_probe(c, 0);
}

rmacoll_status_t rmacoll__stream_export_recv(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__local_rec_t *lr = rmacoll__ctrl_local(comm->ctrl.addr, &comm->lay, c->par);
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st = RMACOLL_SUCCESS;

    if (c->recv_extent > 0) {
        st = ctl->ops->mem.mem_export(ctl->tp, c->recvbuf, c->recv_extent, lr->recv_blob);
        if (st != RMACOLL_SUCCESS) {
            snprintf(c->msg, sizeof(c->msg), "rank %d: recvbuf: cannot export the device "
                     "receive buffer (%llu bytes): %s", comm->rank,
                     (unsigned long long)c->recv_extent, rmacoll_status_string(st));
        }
    }
    return st;
}

static rmacoll_status_t stream_prepare(rmacoll__call_t *c)
{
    rmacoll_status_t st = stream_probe(c, graph_mode());

    return st == RMACOLL_SUCCESS ? rmacoll__stream_export_recv(c) : st;
}

rmacoll_status_t rmacoll__stream_map_peer(rmacoll__call_t *c, int j)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll__local_rec_t *lr = rmacoll__ctrl_local(comm->peer_ctrl[j].addr,
                                                   &comm->peer_lay[j], c->par);
    rmacoll_status_t st = ctl->ops->mem.mem_import(ctl->tp, j, lr->recv_blob,
                                                   &comm->peer_recv_addr[j]);

    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: cannot map the device receive "
                 "buffer of rank %d: %s", comm->rank, j, rmacoll_status_string(st));
    }
    return st;
}

/* Maps node peers' device receive buffers (those this rank writes). */
static rmacoll_status_t stream_planned(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll_topo_t *topo = comm->topo;
    int A = topo->node_of[comm->rank];
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (int l = 0; l < topo->node_size[A] && st == RMACOLL_SUCCESS; l++) {
        int j = rmacoll__topo_rank(topo, A, l);
        if (j != comm->rank && c->sendcounts[j] != 0) {
            st = rmacoll__stream_map_peer(c, j);
        }
    }
    return st;
}

static rmacoll_status_t grow_waits(rmacoll_comm_t *comm, size_t n)
{
    if (n > comm->wait_cap) {
        uint32_t *wi = realloc(comm->wait_idx, n * sizeof(*wi));
        uint64_t *wv = wi ? realloc(comm->wait_val, n * sizeof(*wv)) : NULL;
        int *wp;

        if (wi) {
            comm->wait_idx = wi;
        }
        if (wv == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        comm->wait_val = wv;
        wp = realloc(comm->wait_peer, n * sizeof(*wp));
        if (wp == NULL) {
            return RMACOLL_ERR_NO_MEMORY;
        }
        comm->wait_peer = wp;
        comm->wait_cap = n;
    }
    return RMACOLL_SUCCESS;
}

#define RESET_CHUNK 64

/* Graph mode: own words idx[0, n) back to 0 on the stream, as signal-only
 * puts to this rank (one batch of stream writes per RESET_CHUNK words). */
static rmacoll_status_t reset_words(rmacoll_comm_t *comm, rmacoll__tinst_t *ctl,
                                    const uint32_t *idx, size_t n, void *stream)
{
    rmacoll_put_t p[RESET_CHUNK];
    rmacoll_status_t st = RMACOLL_SUCCESS;

    for (size_t k = 0; k < n && st == RMACOLL_SUCCESS; k += RESET_CHUNK) {
        size_t m = n - k < RESET_CHUNK ? n - k : RESET_CHUNK;

        memset(p, 0, sizeof(p));
        for (size_t i = 0; i < m; i++) {
            p[i].peer = comm->rank;
            p[i].sig_index = idx[k + i];
            p[i].sig_value = 0;
        }
        st = ctl->ops->stream.post_puts_stream(ctl->tp, p, m, stream);
    }
    return st;
}

/* idx as this runner hands it to the transports: with RMACOLL_SIG_DEVICE
 * when the communicator's words are device-resident. */
static uint32_t sig_word(const rmacoll_comm_t *comm, uint32_t idx)
{
    return comm->dsig ? idx | RMACOLL_SIG_DEVICE : idx;
}

static void translate_puts(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll__plan_t *plan = &comm->plan;

    for (size_t k = 0; k < plan->ntasks; k++) {
        if (plan->tasks[k].op == RMACOLL__OP_PUT) {
            rmacoll_put_t *p = &comm->puts[k];

            rmacoll__translate(comm, RMACOLL_MEM_CUDA, &plan->tasks[k], c->sendbuf,
                               c->recvbuf, NULL, p);
            if (p->sig_index != RMACOLL_NO_SIGNAL) {
                p->sig_index = sig_word(comm, p->sig_index);
            }
        }
    }
}

#define ONE_MAX 64 /* node peers of the whole-call path */

/*
 * The whole call handed to one transport at once (its stream.call_stream,
 * e.g. one kernel launch) when every queue of puts binds to
 * that transport and every wait comes after the last puts.
 * RMACOLL_ERR_UNSUPPORTED: not taken, nothing enqueued, comm->puts to be
 * translated again (compacted here).
 */
/* Long because: the eligibility scan, the READY lists and the compaction
 * fill one rmacoll_stream_call_t and share its bounds (ONE_MAX); read top to
 * bottom it is the call as one launch sees it. */
static rmacoll_status_t stream_whole_call(rmacoll__call_t *c, int graph,
                                          rmacoll__tinst_t **tip)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll__plan_t *plan = &comm->plan;
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank, A = topo->node_of[me];
    rmacoll__tinst_t *ti = NULL;
    rmacoll_put_t ready[ONE_MAX];
    uint32_t ridx[ONE_MAX];
    int *wpeer = comm->wait_peer;
    uint64_t rval[ONE_MAX];
    int rpeer[ONE_MAX], seen_wait = 0;
    size_t nr = 0, nrw = 0, np = 0, nw = 0;
    rmacoll_stream_call_t call;

    for (size_t b = 0; b < plan->nbatches; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];
        uint32_t n = bt->count[RMACOLL__Q_CE_PUT];

        if (bt->count[RMACOLL__Q_PROXY_PUT] || bt->count[RMACOLL__Q_PROXY_WAIT]) {
            return RMACOLL_ERR_UNSUPPORTED;
        }
        if (n) {
            rmacoll__tinst_t *t = rmacoll__inst_bound(
                comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA,
                &plan->tasks[bt->first[RMACOLL__Q_CE_PUT]], n);
            if (seen_wait || t == NULL || (ti != NULL && t != ti)) {
                return RMACOLL_ERR_UNSUPPORTED;
            }
            ti = t;
        }
        seen_wait |= bt->count[RMACOLL__Q_CE_WAIT] != 0;
    }
    if (ti == NULL || ti->ops->stream.call_stream == NULL) {
        return RMACOLL_ERR_UNSUPPORTED;
    }
    memset(ready, 0, sizeof(ready));
    for (int l = 0; l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);

        if (p == me) {
            continue;
        }
        if (c->recvcounts[p] != 0) {
            if (nr == ONE_MAX) {
                return RMACOLL_ERR_UNSUPPORTED;
            }
            ready[nr].peer = p;
            ready[nr].sig_index = sig_word(comm, rmacoll__ctrl_sig_ready(&comm->peer_lay[p],
                                                                          me));
            ready[nr++].sig_value = comm->epoch;
        }
        if (c->sendcounts[p] != 0) {
            if (nrw == ONE_MAX) {
                return RMACOLL_ERR_UNSUPPORTED;
            }
            ridx[nrw] = sig_word(comm, rmacoll__ctrl_sig_ready(&comm->lay, p));
            rval[nrw] = comm->epoch;
            rpeer[nrw++] = p;
        }
    }
    for (size_t b = 0; b < plan->nbatches; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];

        for (uint32_t k = 0; k < bt->count[RMACOLL__Q_CE_PUT]; k++) {
            comm->puts[np++] = comm->puts[bt->first[RMACOLL__Q_CE_PUT] + k];
        }
        for (uint32_t k = 0; k < bt->count[RMACOLL__Q_CE_WAIT]; k++) {
            const rmacoll__task_t *t = &plan->tasks[bt->first[RMACOLL__Q_CE_WAIT] + k];
            wpeer[nw] = t->peer;
            comm->wait_idx[nw] = sig_word(comm, t->sig);
            comm->wait_val[nw++] = t->sig_value;
        }
    }
    memset(&call, 0, sizeof(call));
    call.struct_size = sizeof(call);
    call.ready = ready;
    call.nready = nr;
    call.ready_idx = ridx;
    call.ready_val = rval;
    call.ready_peer = rpeer;
    call.nready_wait = nrw;
    call.puts = comm->puts;
    call.nputs = np;
    call.wait_idx = comm->wait_idx;
    call.wait_val = comm->wait_val;
    call.nwait = nw;
    call.reset = graph;
    call.wait_peer = wpeer;
    *tip = ti;
    return ti->ops->stream.call_stream(ti->tp, &call, c->stream);
}

/* Long because: the split path's stream order (READY, READY waits, per
 * batch puts then waits, graph-mode resets) in one place: the order is the
 * protocol, and it reads as a list. */
static rmacoll_status_t stream_enqueue(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    const rmacoll__plan_t *plan = &comm->plan;
    const rmacoll_topo_t *topo = comm->topo;
    int me = comm->rank, A = topo->node_of[me];
    void *stream = c->stream;
    rmacoll__tinst_t *ctl = rmacoll__inst_ctl(comm, RMACOLL__PATH_CE, RMACOLL_MEM_CUDA);
    rmacoll_status_t st = rmacoll__grow_puts(comm, plan->ntasks);
    size_t nw = 0, nreset = 0;
    int graph = graph_mode();
    uint32_t *reset_idx; /* graph mode: data words waited on, [ntasks, 2 ntasks) */
    rmacoll__tinst_t *one = NULL;

    if (st == RMACOLL_SUCCESS) {
        st = grow_waits(comm, 2 * plan->ntasks + 1);
    }
    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    reset_idx = comm->wait_idx + plan->ntasks;
    translate_puts(c);
    st = stream_whole_call(c, graph, &one);
    if (st == RMACOLL_SUCCESS) {
        if (comm->dsig) {
            atomic_fetch_add(&comm->stats.device_calls_dsig, 1);
        }
        return st;
    }
    if (st != RMACOLL_ERR_UNSUPPORTED) {
        int peer = one != NULL ? one->ops->base.error_peer(one->tp) : -1;

        if (peer >= 0) {
            comm->fail_culprit = peer;
            return rmacoll__fail(&comm->fail, st, "rank %d: enqueueing the call on the stream "
                                 "(one launch) failed: %s (an earlier call's kernel "
                                 "waited in vain for rank %d)", me,
                                 rmacoll_status_string(st), peer);
        }
        return rmacoll__fail(&comm->fail, st, "rank %d: enqueueing the call on the stream "
                             "(one launch) failed: %s", me, rmacoll_status_string(st));
    }
    translate_puts(c); /* the whole-call attempt compacted them */
    st = RMACOLL_SUCCESS;
    /* READY: my stream reached this call; writers may fill my buffer. Then
     * wait until every node peer I write reached it too. */
    for (int l = 0; st == RMACOLL_SUCCESS && l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (p != me && c->recvcounts[p] != 0) {
            st = ctl->ops->stream.signal_stream(
                ctl->tp, p, sig_word(comm, rmacoll__ctrl_sig_ready(&comm->peer_lay[p], me)),
                comm->epoch, stream);
        }
    }
    for (int l = 0; l < topo->node_size[A]; l++) {
        int p = rmacoll__topo_rank(topo, A, l);
        if (p != me && c->sendcounts[p] != 0) {
            comm->wait_idx[nw] = sig_word(comm, rmacoll__ctrl_sig_ready(&comm->lay, p));
            comm->wait_val[nw++] = comm->epoch;
        }
    }
    if (st == RMACOLL_SUCCESS && nw) {
        st = ctl->ops->stream.wait_stream(ctl->tp, comm->wait_idx, comm->wait_val, nw, stream);
    }
    if (st == RMACOLL_SUCCESS && nw && graph) {
        st = reset_words(comm, ctl, comm->wait_idx, nw, stream);
    }
    for (size_t b = 0; b < plan->nbatches && st == RMACOLL_SUCCESS; b++) {
        const rmacoll__batch_t *bt = &plan->batches[b];
        uint32_t n = bt->count[RMACOLL__Q_CE_PUT];
        uint32_t f = bt->first[RMACOLL__Q_CE_PUT];

        if (bt->count[RMACOLL__Q_PROXY_PUT] || bt->count[RMACOLL__Q_PROXY_WAIT]) {
            return RMACOLL_ERR_INTERNAL; /* excluded before the call */
        }
        if (n) { /* the binding picks by the queue's largest put */
            rmacoll__tinst_t *ti = rmacoll__inst_bound(comm, RMACOLL__PATH_CE,
                                                       RMACOLL_MEM_CUDA, &plan->tasks[f], n);
            st = ti->ops->stream.post_puts_stream(ti->tp, &comm->puts[f], n, stream);
        }
        nw = 0;
        for (uint32_t k = 0; k < bt->count[RMACOLL__Q_CE_WAIT]; k++) {
            const rmacoll__task_t *t = &plan->tasks[bt->first[RMACOLL__Q_CE_WAIT] + k];
            comm->wait_idx[nw] = sig_word(comm, t->sig);
            comm->wait_val[nw++] = t->sig_value;
        }
        if (st == RMACOLL_SUCCESS && nw) {
            st = ctl->ops->stream.wait_stream(ctl->tp, comm->wait_idx, comm->wait_val, nw,
                                           stream);
        }
        if (graph) { /* the words waited on, reset after the last batch */
            for (size_t k = 0; k < nw; k++) {
                reset_idx[nreset + k] = comm->wait_idx[k];
            }
            nreset += nw;
        }
    }
    if (st == RMACOLL_SUCCESS && nreset) {
        st = reset_words(comm, ctl, reset_idx, nreset, stream);
    }
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: enqueueing the call on the stream "
                             "failed: %s", me, rmacoll_status_string(st));
    }
    if (comm->dsig) {
        atomic_fetch_add(&comm->stats.device_calls_dsig, 1);
    }
    return RMACOLL_SUCCESS;
}

static void stream_release(rmacoll__call_t *c)
{
}

const rmacoll__runner_t rmacoll__run_stream = {
    .name = "stream",
    .mem = RMACOLL_MEM_CUDA,
    .caps = RMACOLL__RUNNER_GRAPH,
    .prepare = stream_prepare,
    .planned = stream_planned,
    .run = stream_enqueue,
    .release = stream_release,
};

/* ---- device-count calls (rmacoll_alltoallv_device_counts) -------------- */

/*
 * The pipeline runs a device-count call with zero host counts (exec.c):
 * validation, the control exchange and the agreement make every rank
 * return the same host-side error with nothing enqueued, and carry each
 * rank's receive buffer export (recv_capacity elements, or none) to its
 * node peers. This runner checks the device-count arguments (prepare),
 * maps the node peers' receive buffers (planned) and hands the whole call
 * to the transport's stream.dcounts_stream (run): one kernel that reads
 * the counts on the device (the transport says how). Its flags live in each rank's region
 * after its device-resident signal words (state.h: rmacoll__dc_region_off),
 * distinct from every word of the other runners.
 */

/* The instance that runs device-count calls: the first that offers them. */
static rmacoll__tinst_t *dc_inst(rmacoll_comm_t *comm)
{
    for (int i = 0; i < comm->bp.ninst; i++) {
        rmacoll__tinst_t *ti = &comm->inst[i];

        if (ti->tp != NULL && ti->ops->stream.dcounts_stream != NULL &&
            ti->ops->stream.dcounts_report != NULL) {
            return ti;
        }
    }
    return NULL;
}

/* Host-side checks of the arguments that need no GPU; c->msg names the
 * rank and the argument. */
static rmacoll_status_t dc_check_args(rmacoll__call_t *c)
{
    const rmacoll__dcounts_t *dc = c->dc;
    int what;

    if (c->stream == NULL) { /* the host form does not come here (dcx.c) */
        snprintf(c->msg, sizeof(c->msg), "rank %d: rmacoll_alltoallv_device_counts: stream "
                 "is NULL", c->comm->rank);
        return RMACOLL_ERR_INVALID_ARG;
    }
    what = rmacoll__dc_arg_check(c->sendbuf, dc->sendcounts, dc->send_capacity, c->recvbuf,
                                 dc->recvcounts, dc->recv_capacity, dc->mode, dc->status,
                                 c->esize);
    if (what != 0) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: rmacoll_alltoallv_device_counts: %s",
                 c->comm->rank, rmacoll__dc_arg_text(what));
    }
    return rmacoll__dc_arg_status(what);
}

/* The call's rmacoll_dcounts_call_t without the peers' addresses. */
static void dc_fill(rmacoll__call_t *c, rmacoll_dcounts_call_t *dcall, char *msg,
                    size_t len)
{
    const rmacoll__dcounts_t *dc = c->dc;

    memset(dcall, 0, sizeof(*dcall));
    dcall->struct_size = sizeof(*dcall);
    dcall->given = dc->mode == RMACOLL_RECV_GIVEN;
    dcall->esize = (uint32_t)c->esize;
    dcall->sendbuf = c->sendbuf;
    dcall->sendcounts = dc->sendcounts;
    dcall->send_capacity = dc->send_capacity;
    dcall->recvbuf = c->recvbuf;
    dcall->recvcounts = dc->recvcounts;
    dcall->recv_capacity = dc->recv_capacity;
    dcall->status = dc->status;
    dcall->msg = msg;
    dcall->msg_len = len;
}

static rmacoll_status_t dc_prepare(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    int me = comm->rank;
    rmacoll__tinst_t *ti;
    rmacoll_dcounts_call_t dcall;
    char why[320] = "";
    rmacoll_status_t st = dc_check_args(c);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    if (comm->topo->nnodes != 1) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: rmacoll_alltoallv_device_counts: "
                 "sendcounts in device memory across nodes (this communicator spans %d "
                 "nodes) is experimental and off (one GPU run, in a test); "
                 "RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1 turns it on (docs/gpu.md), or pass "
                 "host counts to rmacoll_alltoallv", me, comm->topo->nnodes);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    if (comm->nranks > RMACOLL_DCOUNTS_MAX_RANKS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: rmacoll_alltoallv_device_counts: "
                 "sendcounts in device memory: at most %d ranks (this communicator has %d)",
                 me, RMACOLL_DCOUNTS_MAX_RANKS, comm->nranks);
        return RMACOLL_ERR_UNSUPPORTED;
    }
    ti = dc_inst(comm);
    if (ti == NULL || !comm->dsig) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: rmacoll_alltoallv_device_counts: "
                 "sendcounts in device memory: %s", me,
                 ti == NULL ? "no transport of this communicator runs device-count calls "
                              "(transports.intra_node must name one whose ops offer "
                              "stream.dcounts_stream: docs/gpu.md lists them)"
                            : "the communicator has no device-resident signal words "
                              "(rmacoll_comm_get_stats: device_signals = 0; its log says "
                              "why at create)");
        return RMACOLL_ERR_UNSUPPORTED;
    }
    dc_fill(c, &dcall, why, sizeof(why));
    dcall.check_only = 1;
    st = ti->ops->stream.dcounts_stream(ti->tp, &dcall, c->stream);
    if (st != RMACOLL_SUCCESS) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: rmacoll_alltoallv_device_counts: %s", me,
                 why[0] != '\0' ? why : rmacoll_status_string(st));
        return st;
    }
    /* the receive buffer, exported for the node peers (none: a zero blob) */
    c->recv_extent = (uint64_t)c->dc->recv_capacity * c->esize;
    if (c->recv_extent == 0) {
        rmacoll__local_rec_t *lr = rmacoll__ctrl_local(comm->ctrl.addr, &comm->lay, c->par);

        memset(lr->recv_blob, 0, sizeof(lr->recv_blob));
        return RMACOLL_SUCCESS;
    }
    return rmacoll__stream_export_recv(c);
}

/* Maps every node peer's receive buffer (those with a capacity). */
static rmacoll_status_t dc_planned(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll_status_t st = RMACOLL_SUCCESS;
    static const uint8_t zero[RMACOLL_EXPORT_BYTES];

    for (int j = 0; j < comm->nranks && st == RMACOLL_SUCCESS; j++) {
        const rmacoll__local_rec_t *lr;

        comm->peer_recv_addr[j] = 0;
        if (j == comm->rank) {
            comm->peer_recv_addr[j] = (uint64_t)(uintptr_t)c->recvbuf;
            continue;
        }
        lr = rmacoll__ctrl_local(comm->peer_ctrl[j].addr, &comm->peer_lay[j], c->par);
        if (memcmp(lr->recv_blob, zero, sizeof(zero)) != 0) {
            st = rmacoll__stream_map_peer(c, j);
        }
    }
    return st;
}

static rmacoll_status_t dc_run(rmacoll__call_t *c)
{
    rmacoll_comm_t *comm = c->comm;
    rmacoll__tinst_t *ti = dc_inst(comm);
    rmacoll_dcounts_call_t dcall;
    uint64_t *region = comm->wait_val; /* [nranks], grown below */
    char why[320] = "";
    rmacoll_status_t st = grow_waits(comm, (size_t)comm->nranks);

    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: device-count call: no memory",
                             comm->rank);
    }
    region = comm->wait_val;
    for (int p = 0; p < comm->nranks; p++) {
        region[p] = comm->dsig_addr[p] + rmacoll__dc_region_off(comm->dsig_n[p]);
    }
    dc_fill(c, &dcall, why, sizeof(why));
    dcall.region = region;
    dcall.recv_addr = comm->peer_recv_addr;
    st = ti->ops->stream.dcounts_stream(ti->tp, &dcall, c->stream);
    if (st != RMACOLL_SUCCESS) {
        int peer = ti->ops->base.error_peer(ti->tp);

        if (peer >= 0) {
            comm->fail_culprit = peer;
        }
        return rmacoll__fail(&comm->fail, st, "rank %d: enqueueing the device-count call "
                             "failed: %s%s", comm->rank, rmacoll_status_string(st),
                             st == RMACOLL_ERR_TIMEOUT ? " (an earlier device-count call "
                                                         "waited in vain on the GPU)"
                                                       : "");
    }
    atomic_fetch_add(&comm->stats.device_counts_calls, 1);
    return RMACOLL_SUCCESS;
}

const rmacoll__runner_t rmacoll__run_dcounts = {
    .name = "dcounts",
    .mem = RMACOLL_MEM_CUDA,
    .caps = RMACOLL__RUNNER_GRAPH,
    .prepare = dc_prepare,
    .planned = dc_planned,
    .run = dc_run,
    .release = stream_release,
};

/* rmacoll_device_counts_check's work, comm entered. */
rmacoll_status_t rmacoll__dcounts_check(rmacoll_comm_t *comm)
{
    static const char *const why[] = {
        "", "a negative count", "more elements to send than send_capacity",
        "more elements to receive than recv_capacity", "a sum of counts past INT64_MAX",
        "a receive count that differs from its sender's count",
        "a peer's kernel that never arrived"};
    rmacoll__tinst_t *ti = dc_inst(comm);
    rmacoll_dcounts_report_t r;
    char peer[32] = "";

    if (ti == NULL || ti->ops->stream.dcounts_report(ti->tp, &r) != RMACOLL_SUCCESS ||
        r.seq == 0) {
        return RMACOLL_SUCCESS;
    }
    if (r.reason == RMACOLL_DCOUNTS_WHY_TIMEOUT) {
        return rmacoll__fail(&comm->fail, r.code, "rank %d: device-count call %llu failed "
                             "on the device: rank %d waited in vain for rank %d",
                             comm->rank, (unsigned long long)r.seq, r.rank, r.peer);
    }
    if (r.peer >= 0) {
        snprintf(peer, sizeof(peer), " (peer: rank %d)", r.peer);
    }
    return rmacoll__fail(&comm->fail, r.code, "rank %d: device-count call %llu failed on "
                         "the device: rank %d: %s%s: %lld against %lld elements; no "
                         "receive buffer was written", comm->rank, (unsigned long long)r.seq,
                         r.rank,
                         r.reason > 0 && r.reason < (int)(sizeof(why) / sizeof(why[0]))
                             ? why[r.reason]
                             : "unknown reason",
                         peer, (long long)r.need, (long long)r.have);
}
