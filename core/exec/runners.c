/*
 * runners.c - the communicator's runner table (state.h: comm->runner),
 * filled once at bind time: which executor takes a call on host buffers
 * and which on device buffers. The pipeline then picks by the memory type
 * of the call's buffers alone (exec.c).
 */
#include "core/exec/call.h"
#include "core/exec/state.h"

void rmacoll__runners_bind(rmacoll_comm_t *comm)
{
    comm->runner[RMACOLL_MEM_HOST] = &rmacoll__run_host;
    /* device buffers: enqueued on the stream on one node; across nodes
     * registered with the network (hmem) or staged, as bound at create */
    comm->runner[RMACOLL_MEM_CUDA] = comm->topo->nnodes == 1 ? &rmacoll__run_stream
                                     : comm->hmem              ? &rmacoll__run_hmem
                                                               : &rmacoll__run_staged;
}
