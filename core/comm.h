/*
 * comm.h - the communicator object and the pieces of the runtime that
 * share it: creation (comm.c), the call executor (exec.c) and the proxy
 * thread (proxy.c).
 *
 * Control window (host shared memory, mapped by node peers, registered
 * with the network transport), laid out by ctrl_layout():
 *   header | signal words | local metadata [2 parities]
 *   | inbox [2][nnet] | inbox2 [2][nnet] | outbox [2][nnet] | outbox2 [2][nnet]
 * Signal words: the planner's (plan.h), then META_A(k) and META_B(k) for
 * each network peer k (metadata record / agreement record arrived), then
 * READY(p) for every rank p: p's stream reached call e, so this rank's
 * stream may write into p's device receive buffer (device memory only),
 * then STAGE_GO, STAGE_DONE, STAGE_COPIED (device memory across nodes:
 * send buffer staged to host / host data phase done / receive blocks
 * copied back to the device).
 */
#ifndef RMACOLL_CORE_COMM_H
#define RMACOLL_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/bootstrap.h"
#include "core/log.h"
#include "core/plan.h"
#include "core/shm.h"
#include "rmacoll_transport.h"

/* A status travelling between ranks: the error of the lowest rank wins. */
typedef struct rmacoll__status_rec {
    int32_t code;    /* rmacoll_status_t; 0 = success */
    int32_t rank;    /* the rank that found it */
    char msg[248];
} rmacoll__status_rec_t;

/* Per-call metadata a rank publishes to its node peers (one per parity),
 * followed by int64 recvcounts[nranks] and rdispls[nranks]. */
typedef struct rmacoll__local_rec {
    _Atomic uint64_t epoch_a;   /* e + 1: recv_addr, counts, st_a valid */
    _Atomic uint64_t epoch_b;   /* e + 1: st_b valid (after planning) */
    _Atomic uint64_t epoch_c;   /* e + 1: st_c valid (after the rail round) */
    uint64_t recv_addr;         /* receive buffer in the owner's address space */
    rmacoll__status_rec_t st_a, st_b, st_c;
    uint8_t recv_blob[RMACOLL_EXPORT_BYTES]; /* device receive buffer export */
} rmacoll__local_rec_t;

/* Per-call record a rank sends to each network peer, followed by int64
 * sendcounts[max node size]: the sender's counts for the receiver's node
 * members by local rank. */
typedef struct rmacoll__net_rec {
    uint64_t epoch;
    rmacoll__status_rec_t st;
    int64_t rcount;             /* sender's recvcounts[receiver] */
    int64_t rdispl;             /* sender's rdispls[receiver] */
    rmacoll_rkey_t recv_rkey;   /* sender's receive buffer */
} rmacoll__net_rec_t;

typedef struct rmacoll__ctrl_layout {
    uint32_t nsig_plan;   /* planner's words */
    uint32_t nsig;        /* + META_A + META_B */
    int nnet;
    size_t local_rec_bytes, net_rec_bytes, status_rec_bytes;
    size_t off_sig, off_local, off_inbox, off_inbox2, off_outbox, off_outbox2;
    size_t bytes;
} rmacoll__ctrl_layout_t;

#define RMACOLL__PROXY_RING 1024

typedef struct rmacoll__proxy_job {
    const rmacoll_put_t *puts;
    size_t n;
} rmacoll__proxy_job_t;

struct rmacoll_comm {
    int rank, nranks;
    rmacoll_config_t cfg;
    rmacoll__logger_t log;
    rmacoll__bootstrap_t *bs;
    rmacoll_topo_t *topo;
    rmacoll__plan_cfg_t pcfg;
    rmacoll__sched_t sched;
    int sched_open;
    uint64_t comm_id;
    uint64_t epoch;                 /* calls made (successful or not) */
    int broken;                     /* a data phase failed: comm unusable */
    char last_error[512];

    /* control windows */
    rmacoll__ctrl_layout_t lay;     /* own */
    rmacoll__shm_t ctrl;            /* own segment */
    rmacoll__shm_t *peer_ctrl;      /* [nranks]: node peers' segments */
    volatile uint64_t **peer_signals; /* [nranks] */
    volatile uint64_t *signals;     /* own */

    /* relay buffer (own) */
    void *relay_buf;
    uint64_t relay_bytes;
    int nin;

    rmacoll__ctrl_layout_t *peer_lay; /* [nranks]: node and network peers */
    uint32_t *peer_nsig;              /* [nranks]: their signal-word counts */

    /* network peers (symmetric set), sorted */
    int nnet;
    int *net_list;
    int *net_slot_at;               /* [nnet]: my index in that peer's list */
    int *net_index;                 /* [nranks]: index in net_list or -1 */

    /* transports */
    const rmacoll_transport_ops_t *ce_ops, *net_ops, *nvl_ops;
    rmacoll_transport_t *ce, *net, *nvl;
    rmacoll_transport_env_t ce_env, net_env, nvl_env;
    uint8_t *ce_peers, *net_peers;
    rmacoll_mem_t *ctrl_mem, *relay_mem;
    rmacoll_rkey_t *peer_ctrl_rkey;   /* [nranks] */
    rmacoll_rkey_t *peer_relay_rkey;  /* [nranks] */

    /* per-call state (sized at create; the data path does not malloc
     * except to grow the plan and put arrays) */
    int64_t *scratch;                 /* 2 * nranks */
    int64_t *uniform;                 /* 2 * nranks: rmacoll_alltoall's arrays */
    int64_t *peer_rcount, *peer_rdispl; /* [nranks] */
    uint64_t *peer_recv_addr;         /* [nranks] */
    rmacoll_rkey_t *peer_recv_rkey;   /* [nranks] */
    int64_t *chan_sendcount, *chan_rcount, *chan_rdispl; /* [nin * ls] */
    rmacoll__sigstate_t *sig;         /* state before the call */
    rmacoll__sigstate_t *sig_next;    /* state after it, kept on success */
    rmacoll__plan_t plan;
    rmacoll_put_t *puts;
    size_t puts_cap;
    uint32_t *wait_idx;               /* stream waits of one batch */
    uint64_t *wait_val;
    size_t wait_cap;
    rmacoll_put_t *meta_puts;         /* [2][nranks]: metadata, agreement */

    /* device memory across nodes: host staging and its worker thread */
    void *stage_send, *stage_recv;
    uint64_t stage_send_bytes, stage_recv_bytes;
    rmacoll_mem_t *stage_send_pin, *stage_recv_pin; /* pinned by ce */
    rmacoll_mem_t *stage_send_mem, *stage_recv_mem; /* network registrations of the call */
    pthread_t stage_thread;
    int stage_started;
    pthread_mutex_t stage_lock;
    pthread_cond_t stage_cond;
    uint64_t stage_job;               /* epoch handed to the worker, 0 = none */
    uint64_t stage_last;              /* epoch of the last staged call */
    int stage_stop;
    _Atomic uint64_t stage_finished;  /* last epoch the worker completed */
    _Atomic int stage_status;         /* first error of the worker */

    /* proxy thread: owns progress of the network transport */
    pthread_t proxy;
    int proxy_started;
    pthread_mutex_t net_lock;         /* every call into the network transport */
    _Atomic int proxy_stop;
    _Atomic int proxy_active;         /* a call is in flight: poll hard */
    _Atomic uint64_t jobs_posted;     /* written by the caller */
    _Atomic uint64_t jobs_done;       /* written by the proxy */
    _Atomic int proxy_status;         /* first error of the proxy */
    _Atomic int proxy_err_peer;
    rmacoll__proxy_job_t ring[RMACOLL__PROXY_RING];
};

/* comm.c */
void rmacoll__ctrl_layout(const rmacoll_topo_t *topo,
                          const rmacoll__plan_cfg_t *pcfg, int rank,
                          rmacoll__ctrl_layout_t *lay);
int rmacoll__net_peers(const rmacoll_topo_t *topo,
                       const rmacoll__plan_cfg_t *pcfg, int rank, int *list);
rmacoll_status_t rmacoll__comm_fail(rmacoll_comm_t *comm, rmacoll_status_t st,
                                    const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* proxy.c */
rmacoll_status_t rmacoll__proxy_start(rmacoll_comm_t *comm);
void rmacoll__proxy_stop(rmacoll_comm_t *comm);
/* Hands a queue of puts to the proxy thread, in order. */
rmacoll_status_t rmacoll__proxy_submit(rmacoll_comm_t *comm,
                                       const rmacoll_put_t *puts, size_t n);
/* Drives the network once from a waiting thread, if the proxy thread is
 * not doing it right now (trylock). */
void rmacoll__proxy_poll(rmacoll_comm_t *comm);
/* Waits until the proxy posted every job and the transport has no
 * pending put (sources reusable). */
rmacoll_status_t rmacoll__proxy_flush(rmacoll_comm_t *comm);

/* exec.c: the staging worker of device calls across nodes. stage_wait
 * waits until the previous staged call's receive blocks are back on the
 * device (its stream reached them); stage_stop joins the worker. */
rmacoll_status_t rmacoll__stage_wait(rmacoll_comm_t *comm);
void rmacoll__stage_stop(rmacoll_comm_t *comm);

/* exec.c: waits until *word >= value; names `peer` and `what` on timeout. */
rmacoll_status_t rmacoll__wait_word(rmacoll_comm_t *comm,
                                    const volatile uint64_t *word,
                                    uint64_t value, int peer, const char *what);

#endif /* RMACOLL_CORE_COMM_H */
