/*
 * rmacoll_nccl.h - create an rmacoll communicator from an existing NCCL
 * communicator: NCCL is the out-of-band bootstrap (rmacoll_oob_t), so an
 * application or framework that already has an ncclComm_t (PyTorch's
 * ProcessGroupNCCL, a Megatron/DeepSpeed job) needs no unique id, no
 * rendezvous port and no launcher variables.
 *
 * Built only when NCCL was found at build time (RMACOLL_HAVE_NCCL, see
 * cmake/nccl.cmake); including this header needs nccl.h and
 * cuda_runtime_api.h on the include path.
 *
 * Lifetime: the out-of-band state (a device scratch buffer, the stream,
 * the NCCL communicator handle) is used by rmacoll_comm_create, by
 * rmacoll_comm_destroy (its closing barrier) and possibly inside calls
 * (any out-of-band exchange the core needs), so it must live as long as
 * the rmacoll communicator. rmacoll_comm_create_from_nccl therefore hands
 * out both; destroy them together with rmacoll_comm_destroy_nccl (NOT
 * rmacoll_comm_destroy followed by nothing: that leaks the oob state).
 * The NCCL communicator stays the caller's: it must outlive the rmacoll
 * communicator and is never destroyed by rmacoll.
 *
 * Ordering: every out-of-band step is an ncclAllGather on the NCCL
 * communicator, issued by all ranks at the same point of their program
 * (create, destroy, the same call), so it interleaves with the caller's own
 * NCCL operations in program order, as NCCL requires. Like NCCL itself,
 * the NCCL communicator must not be used by another thread meanwhile.
 */
#ifndef RMACOLL_NCCL_H
#define RMACOLL_NCCL_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "rmacoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Out-of-band state over NCCL; opaque. */
typedef struct rmacoll_nccl_oob rmacoll_nccl_oob_t;

/**
 * Creates an rmacoll communicator over the ranks of `nccl`; collective
 * over all of them (every rank calls it at the same point).
 *
 * rank and nranks are ncclCommUserRank / ncclCommCount of `nccl`; nodes
 * are found as in rmacoll_comm_create (RMACOLL_NODE_ID, else the host
 * name). Out-of-band allgathers run as ncclAllGather of a small device
 * scratch buffer (on the device of `nccl`, grown as needed) on `stream`,
 * with a host->device copy before and a device->host copy and
 * cudaStreamSynchronize after; the barrier is a 1-byte allgather.
 * stream: a cudaStream_t on the device of `nccl`; NULL makes rmacoll create
 * (and later destroy) its own non-blocking stream. The current device of
 * the calling thread is restored after every out-of-band step.
 * config: may be NULL (rmacoll_config_load(NULL)).
 * *comm and *oob receive the communicator and its out-of-band state; pass
 * both to rmacoll_comm_destroy_nccl.
 *
 * Errors: RMACOLL_ERR_INVALID_ARG (NULL nccl/comm/oob), RMACOLL_ERR_CUDA
 * (a CUDA runtime call failed), RMACOLL_ERR_BOOTSTRAP (an NCCL call failed;
 * the NCCL error string is logged; or libnccl could not be loaded: librmacoll
 * does not link libnccl but opens it at the first call, from
 * RMACOLL_NCCL_LIBRARY when set, else libnccl.so.2, which is the process's
 * own copy when the application links NCCL), RMACOLL_ERR_NO_MEMORY, and every error
 * of rmacoll_comm_create. On error *comm and *oob are NULL and nothing is
 * owed. Thread-safety: as rmacoll_comm_create.
 */
rmacoll_status_t rmacoll_comm_create_from_nccl(ncclComm_t nccl,
                                               cudaStream_t stream,
                                               const rmacoll_config_t *config,
                                               rmacoll_comm_t **comm,
                                               rmacoll_nccl_oob_t **oob);

/**
 * Destroys comm (collective, as rmacoll_comm_destroy; its closing barrier
 * runs over NCCL), then frees oob. Either may be NULL. Returns the status
 * of rmacoll_comm_destroy (oob is freed in every case).
 */
rmacoll_status_t rmacoll_comm_destroy_nccl(rmacoll_comm_t *comm,
                                           rmacoll_nccl_oob_t *oob);

#ifdef __cplusplus
}
#endif

#endif /* RMACOLL_NCCL_H */
