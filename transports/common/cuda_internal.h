/*
 * cuda_internal.h - private to the files of transports/common/ that
 * implement cuda_common.h:
 *
 *   cuda_common.c  stream tracing, error logging, process-wide pointer and
 *                  context helpers (network transports' registration caches)
 *   cuda_open.c    opening a transport's GPU part: entry points, the node's
 *                  signal windows registered for the GPU, the own stream
 *   cuda_ipc.c     device ranges, IPC export/import (cached by handle),
 *                  device-resident signal words
 *   cuda_stream.c  signal words' device addresses, put checks, stream waits
 *                  and signals as memory operations, host-driven progress
 */
#ifndef RMACOLL_TRANSPORTS_COMMON_CUDA_INTERNAL_H
#define RMACOLL_TRANSPORTS_COMMON_CUDA_INTERNAL_H

#include "transports/common/cuda_common.h"
#include "transports/common/tlog.h"

#define CU_DRIVER_VERSION 12000u /* ABI of the stream memory operation entry points */

/* Logs through the environment of cu's transport (tlog.h). */
#define CU_LOG(cu_, lvl, ...) RMACOLL__TLOG((cu_)->env, lvl, __VA_ARGS__)

#endif /* RMACOLL_TRANSPORTS_COMMON_CUDA_INTERNAL_H */
