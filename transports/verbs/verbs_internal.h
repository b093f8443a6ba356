/*
 * verbs_internal.h - internals of the ibverbs transport that its unit test
 * (tests/test_verbs.c) reaches: the CUDA driver entry points it resolves at
 * run time, and the NIC-to-GPU distance rule. Not part of any public API.
 */
#ifndef RMACOLL_TRANSPORTS_VERBS_INTERNAL_H
#define RMACOLL_TRANSPORTS_VERBS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll_transport.h"

/* CUDA constants, copied from cuda.h / driver_types.h so that the
 * transport builds without the toolkit (values are part of the CUDA ABI). */
#define VERBS_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 0x1
#define VERBS_CU_POINTER_ATTRIBUTE_BUFFER_ID 7

/**
 * CUDA entry points the transport uses: in a CUDA build the runtime's
 * (libcudart, linked) and the driver's resolved through it
 * (rmacoll__cu_entry, transports/common/cuda_common.h; libcuda is never
 * linked); without CUDA none. Any member may be NULL (that feature is then
 * skipped). Return values are cudaError_t / CUresult (0 = success).
 */
typedef struct verbs_cuda_ops {
    int (*get_device_count)(int *count);                      /* cudaGetDeviceCount */
    int (*get_device)(int *device);                           /* cudaGetDevice */
    int (*device_get_pci_bus_id)(char *bus_id, int len, int device); /* cudaDeviceGetPCIBusId */
    /* cuMemGetHandleForAddressRange(handle, dptr, size, type, flags) */
    int (*mem_get_handle_for_address_range)(void *handle, unsigned long long dptr,
                                            size_t size, int type,
                                            unsigned long long flags);
    /* cuPointerGetAttribute(data, attribute, ptr) */
    int (*pointer_get_attribute)(void *data, int attribute, unsigned long long ptr);
} verbs_cuda_ops_t;

/**
 * Replaces the CUDA entry points of tp (tests inject fakes; ops == NULL
 * disables CUDA: device memory is then registered with ibv_reg_mr).
 * Not thread-safe: call before any mem_register on tp.
 */
void rmacoll__verbs_set_cuda_ops(rmacoll_transport_t *tp,
                                 const verbs_cuda_ops_t *ops);

/**
 * Picks the RDMA device closest to a GPU by PCI path: the device whose
 * resolved `<sysfs_root>/class/infiniband/<name>/device` shares the most
 * leading path components with `<sysfs_root>/bus/pci/devices/<gpu_bus_id>`
 * (bus id as "0000:3b:00.0", any case). Ties go by rail:
 * the (local_rank mod ties)-th of the tied devices, in list order.
 * Returns the index into names[n], or -1 when the GPU path or no device
 * path resolves. Thread-safe.
 */
int rmacoll__verbs_closest_device(const char *sysfs_root,
                                  const char *gpu_bus_id,
                                  const char *const *names, int n,
                                  int local_rank);

#endif /* RMACOLL_TRANSPORTS_VERBS_INTERNAL_H */
