/*
 * comm.h - what the files of core/comm share.
 *
 * core/comm - the public API's entry points (README):
 *   owns   the communicator's life: rmacoll_comm_create / _destroy and the
 *          small accessors (comm.c), the steps of creation (bootstrap,
 *          topology, config agreement, control windows, transports, the
 *          device path: comm_setup.c, comm_xport.c), the NCCL-id
 *          bootstrap (nccl_oob.c, which only calls the public API).
 *   calls  every layer below: base, config, oob, plan, xport, ctrl, exec
 *          (the communicator's state is exec/state.h). Nothing calls comm/.
 */
#ifndef RMACOLL_CORE_COMM_H
#define RMACOLL_CORE_COMM_H

#include "core/exec/state.h"

#endif /* RMACOLL_CORE_COMM_H */
