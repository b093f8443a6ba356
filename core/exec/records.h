/*
 * records.h - where this call's control records are: a node peer's local
 * record (in its control window, mapped here), this rank's network records
 * (inbox and outbox) and the record of a rank of the other node held by a
 * node peer (two nodes, the one-round verdict). Header-only: meta.c,
 * verdict.c and put.c read them on every call.
 */
#ifndef RMACOLL_CORE_RECORDS_H
#define RMACOLL_CORE_RECORDS_H

#include "core/ctrl/ctrl.h"
#include "core/exec/state.h"

/* Node peer j's local record of parity par. */
static inline rmacoll__local_rec_t *rmacoll__rec_local(rmacoll_comm_t *comm, int j, int par)
{
    return rmacoll__ctrl_local(comm->peer_ctrl[j].addr, &comm->peer_lay[j], par);
}

/* Own network record k of `kind`, in the inbox or the outbox. */
static inline void *rmacoll__rec_own(rmacoll_comm_t *comm, rmacoll__rec_kind_t kind, int outbox,
                                     int k, int par)
{
    return (char *)comm->ctrl.addr + rmacoll__ctrl_rec_off(&comm->lay, kind, outbox, k, par);
}

/* The metadata record of rank a of the other node in the inbox of its
 * holder on this node (comm->rec_holder), and the word its arrival raises. */
static inline rmacoll__net_rec_t *rmacoll__rec_held(rmacoll_comm_t *comm, int a, int par)
{
    int b = comm->rec_holder[a];

    return (rmacoll__net_rec_t *)((char *)comm->peer_ctrl[b].addr +
                                  rmacoll__ctrl_rec_off(&comm->peer_lay[b], RMACOLL__REC_META,
                                                        0, comm->rec_slot[a], par));
}

static inline const volatile uint64_t *rmacoll__rec_held_word(rmacoll_comm_t *comm, int a)
{
    int b = comm->rec_holder[a];

    return &comm->peer_signals[b][rmacoll__ctrl_sig_rec(&comm->peer_lay[b], RMACOLL__REC_META,
                                                        comm->rec_slot[a])];
}

#endif /* RMACOLL_CORE_RECORDS_H */
