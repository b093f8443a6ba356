/*
 * comm_shrink.c - rmacoll_comm_shrink (issue 33 item 4, after MPI ULFM's
 * MPI_Comm_shrink): the survivors agree on who is alive through the
 * bootstrap root (core/oob/bootstrap_shrink.c) and make a new communicator
 * of the survivors, renumbered in old rank order, with the old one's
 * configuration, node keys and logger, over the new rendezvous the root
 * started. The old communicator stays, marked shrunk: its destroy is local.
 */
#include "core/comm/comm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/ctrl/ctrl.h"
#include "core/oob/bootstrap.h"

/* The rank a failure of this communicator named as silent (a heartbeat or
 * silence timeout: the abort word's code is TIMEOUT), or -1. A rank that
 * aborted or whose call failed otherwise is not a suspect: if alive, it
 * takes part in the shrink. */
static int comm_silent_rank(const rmacoll_comm_t *comm)
{
    uint64_t w;

    if (comm->ctrl.addr == NULL) {
        return -1;
    }
    w = __atomic_load_n((volatile uint64_t *)((char *)comm->ctrl.addr +
                                              RMACOLL__CTRL_ABORT_OFF), __ATOMIC_ACQUIRE);
    if (w == 0 || rmacoll__abort_code(w) != RMACOLL_ERR_TIMEOUT) {
        return -1;
    }
    return rmacoll__abort_culprit(w);
}

/* The survivors' communicator: the old one's settings, the new rendezvous. */
static rmacoll_status_t comm_shrink_create(rmacoll_comm_t *comm, const rmacoll_unique_id_t *id,
                                           int newrank, int newn, rmacoll_comm_t **newcomm)
{
    rmacoll_comm_params_t p;

    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.rank = newrank;
    p.nranks = newn;
    p.unique_id = id;
    p.config = &comm->cfg;
    p.node_key = comm->node_key;
    p.log_fn = comm->log.fn;
    p.log_ctx = comm->log.ctx;
    return rmacoll_comm_create(&p, newcomm);
}

rmacoll_status_t rmacoll_comm_shrink(rmacoll_comm_t *comm, rmacoll_comm_t **newcomm)
{
    /* Long because: the checks of a shrink's preconditions, each with its
     * own message, then the agreement and the new communicator, each
     * failure recorded with what the rank knows at that point. */
    rmacoll_unique_id_t id;
    char why[400] = "no reason given";
    uint8_t *flags;
    int silent, newrank = -1, newn = 0;
    uint64_t t0 = rmacoll__now_ms();
    rmacoll_status_t st;

    if (comm == NULL || newcomm == NULL) {
        return RMACOLL_ERR_INVALID_ARG;
    }
    *newcomm = NULL;
    if (comm->shrunk) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_INVALID_ARG,
                             "rank %d: rmacoll_comm_shrink: this communicator was shrunk "
                             "already (shrink its successor)", comm->rank);
    }
    if (atomic_exchange_explicit(&comm->entered, 1, memory_order_acquire)) {
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_IN_PROGRESS,
                             "rank %d: rmacoll_comm_shrink: a call on this communicator "
                             "is in progress in another thread", comm->rank);
    }
    if (comm->async.busy) {
        rmacoll__leave(comm);
        return rmacoll__fail(&comm->fail, RMACOLL_ERR_IN_PROGRESS,
                             "rank %d: rmacoll_comm_shrink: a started call is in flight "
                             "(wait for it first)", comm->rank);
    }
    flags = calloc((size_t)comm->nranks * 2, 1);
    if (flags == NULL) {
        rmacoll__leave(comm);
        return RMACOLL_ERR_NO_MEMORY;
    }
    silent = comm_silent_rank(comm);
    if (silent >= 0 && silent < comm->nranks && silent != comm->rank) {
        flags[silent] = 1;
    }
    st = rmacoll__bootstrap_shrink(comm->bs, flags, comm->cfg.timeout_ms, &id, &newrank,
                                   &newn, flags + comm->nranks, why, sizeof(why));
    free(flags);
    if (st != RMACOLL_SUCCESS) {
        /* excluded, or no root: this communicator is over (destroy is
         * local); without the built-in bootstrap nothing changed */
        comm->broken |= st != RMACOLL_ERR_UNSUPPORTED;
        rmacoll__leave(comm);
        return rmacoll__fail(&comm->fail, st, "rank %d: rmacoll_comm_shrink: no agreement "
                             "on the survivors: %s", comm->rank, why);
    }
    /* the old communicator is done with: its calls fail, destroy is local */
    comm->shrunk = 1;
    comm->broken = 1;
    rmacoll__leave(comm);
    rmacoll__log(&comm->log, RMACOLL_LOG_INFO, RMACOLL_LOG_SUBSYS_CORE,
                 "rank %d: rmacoll_comm_shrink: rank %d of %d survivors (of %d) after "
                 "%llu ms", comm->rank, newrank, newn, comm->nranks,
                 (unsigned long long)(rmacoll__now_ms() - t0));
    st = comm_shrink_create(comm, &id, newrank, newn, newcomm);
    if (st != RMACOLL_SUCCESS) {
        return rmacoll__fail(&comm->fail, st, "rank %d: rmacoll_comm_shrink: the survivors' "
                             "communicator (rank %d of %d) could not be created: %s",
                             comm->rank, newrank, newn, rmacoll_status_name(st));
    }
    return RMACOLL_SUCCESS;
}
