/*
 * comm.h - what the files of core/comm share.
 *
 * core/comm - the public API's entry points (README):
 *   owns   the communicator's life: rmacoll_comm_create / _destroy and the
 *          small accessors (comm.c), the steps of creation (bootstrap,
 *          topology, config agreement, control windows, transports, the
 *          device path: comm_setup.c, comm_xport.c), the NCCL-id
 *          bootstrap (nccl_oob.c, which only calls the public API), the
 *          survivors' communicator after a failure (comm_shrink.c).
 *   calls  every layer below: base, config, oob, plan, xport, ctrl, exec
 *          (the communicator's state is exec/state.h). Nothing calls comm/.
 */
#ifndef RMACOLL_CORE_COMM_H
#define RMACOLL_CORE_COMM_H

#include "core/exec/state.h"

/* ---- creation steps before the transports (comm_setup.c) ---- */

/** Node keys of all ranks (params->node_key, RMACOLL_NODE_ID or the host
 * name) -> comm->topo. */
rmacoll_status_t rmacoll__comm_topology(rmacoll_comm_t *comm,
                                        const rmacoll_comm_params_t *params);
/** Every rank must run with the same, valid configuration: cfg_st /
 * cfg_err are this rank's validation outcome; a bad value on one rank
 * fails every rank, naming that rank and the key. Sets comm->comm_id. */
rmacoll_status_t rmacoll__comm_check_config(rmacoll_comm_t *comm, rmacoll_status_t cfg_st,
                                            const char *cfg_err);
/** Every relay's slots hold one element of the widest type (the planner's
 * relay rule on this topology); alike on every rank. */
rmacoll_status_t rmacoll__comm_check_relay(rmacoll_comm_t *comm);
/** Own control window, then the node peers' (between two barriers). */
rmacoll_status_t rmacoll__comm_setup_ctrl(rmacoll_comm_t *comm);
/** The network peers, the records' slots and holders. */
rmacoll_status_t rmacoll__comm_setup_net_peers(rmacoll_comm_t *comm);
/** Keeps direct streams only where every rank of each node names one
 * network interface (after the transports are up). */
rmacoll_status_t rmacoll__comm_setup_direct(rmacoll_comm_t *comm);

/* ---- creation steps of the transports (comm_xport.c) ---- */

/** The transports to choose from, the bindings, one instance each. */
rmacoll_status_t rmacoll__comm_setup_transports(rmacoll_comm_t *comm);
/** How device buffers cross nodes (comm->hmem), agreed by every rank. */
rmacoll_status_t rmacoll__comm_setup_device_path(rmacoll_comm_t *comm);
/** Device-resident signal words for device calls on one node (comm->dsig). */
rmacoll_status_t rmacoll__comm_setup_device_signals(rmacoll_comm_t *comm);
/** The control window and relay buffers registered with the network; every
 * rank's keys to all. */
rmacoll_status_t rmacoll__comm_setup_registrations(rmacoll_comm_t *comm);

#endif /* RMACOLL_CORE_COMM_H */
