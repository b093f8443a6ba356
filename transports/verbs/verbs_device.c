/*
 * verbs_device.c - the device of the ibverbs transport: the CUDA entry
 * points (runtime linked, driver resolved through it; tests inject fakes),
 * the choice of the RDMA device (the config's name, else the one closest to
 * this rank's GPU by PCI path, else local rank mod devices: rails) and its
 * port's attributes, GID and MTU.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RMACOLL_VERBS_CUDA
#include "transports/common/cuda_common.h"
#endif
#include "transports/verbs/verbs_priv.h"

static rmacoll_status_t verbs_mtu_from_bytes(uint32_t bytes, enum ibv_mtu *mtu)
{
    switch (bytes) {
    case 256: *mtu = IBV_MTU_256; return RMACOLL_SUCCESS;
    case 512: *mtu = IBV_MTU_512; return RMACOLL_SUCCESS;
    case 1024: *mtu = IBV_MTU_1024; return RMACOLL_SUCCESS;
    case 2048: *mtu = IBV_MTU_2048; return RMACOLL_SUCCESS;
    case 4096: *mtu = IBV_MTU_4096; return RMACOLL_SUCCESS;
    default: return RMACOLL_ERR_CONFIG;
    }
}

/* ------------------------------------------------------------ CUDA glue */

#ifdef RMACOLL_VERBS_CUDA
/* The runtime calls, in the CUDA-free types of verbs_cuda_ops_t. */
static int verbs_cuda_device_count(int *count)
{
    return (int)cudaGetDeviceCount(count);
}

static int verbs_cuda_device(int *device)
{
    return (int)cudaGetDevice(device);
}

static int verbs_cuda_bus_id(char *bus_id, int len, int device)
{
    return (int)cudaDeviceGetPCIBusId(bus_id, len, device);
}
#endif

/* Fills the CUDA entry points once: the runtime (linked in a CUDA build)
 * and the driver's entry points through it (rmacoll__cu_entry of
 * transports/common/cuda_common.h; libcuda is never linked, so the module
 * loads on machines without a GPU driver). A driver entry point that does
 * not resolve stays NULL, which is normal on CPU-only machines and silent.
 * Built without CUDA, every entry point stays NULL: device memory is
 * registered with ibv_reg_mr and the device is chosen without a GPU. */
void rmacoll__verbs_cuda_load(rmacoll_transport_t *tp)
{
    if (tp->cuda_tried) {
        return;
    }
    tp->cuda_tried = 1;
#ifdef RMACOLL_VERBS_CUDA
    {
        void *fn = NULL;

        tp->cuda.get_device_count = verbs_cuda_device_count;
        tp->cuda.get_device = verbs_cuda_device;
        tp->cuda.device_get_pci_bus_id = verbs_cuda_bus_id;
        /* void * to a function pointer: POSIX allows it, memcpy says it
         * without a function-pointer cast; the CUDA-free types of
         * verbs_cuda_ops_t have the driver functions' ABI */
        if (rmacoll__cu_entry(&fn, "cuMemGetHandleForAddressRange", 12000) == 0) {
            memcpy(&tp->cuda.mem_get_handle_for_address_range, &fn, sizeof(fn));
        }
        if (rmacoll__cu_entry(&fn, "cuPointerGetAttribute", 12000) == 0) {
            memcpy(&tp->cuda.pointer_get_attribute, &fn, sizeof(fn));
        }
    }
    VERBS_LOG(tp, RMACOLL_LOG_DEBUG, "cuda: dma-buf export %s, buffer ids %s",
              tp->cuda.mem_get_handle_for_address_range ? "available" : "unavailable",
              tp->cuda.pointer_get_attribute ? "available" : "unavailable");
#else
    VERBS_LOG(tp, RMACOLL_LOG_DEBUG, "built without CUDA: device memory will use "
              "ibv_reg_mr");
#endif
}

void rmacoll__verbs_set_cuda_ops(rmacoll_transport_t *tp,
                                 const verbs_cuda_ops_t *ops)
{
    tp->cuda_tried = 1;
    if (ops != NULL) {
        tp->cuda = *ops;
    } else {
        memset(&tp->cuda, 0, sizeof(tp->cuda));
    }
}

/* GPU of this rank, as a PCI bus id, when CUDA is loadable and has one. */
static int verbs_gpu_bus_id(rmacoll_transport_t *tp, char *bus, int len)
{
    int count = 0;
    int dev = 0;

    rmacoll__verbs_cuda_load(tp);
    if (tp->cuda.get_device_count == NULL || tp->cuda.get_device == NULL ||
        tp->cuda.device_get_pci_bus_id == NULL) {
        return -1;
    }
    if (tp->cuda.get_device_count(&count) != 0 || count <= 0 ||
        tp->cuda.get_device(&dev) != 0 ||
        tp->cuda.device_get_pci_bus_id(bus, len, dev) != 0) {
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------ device selection */

static int verbs_common_components(const char *a, const char *b)
{
    int n = 0;

    while (*a != '\0' && *a == *b) {
        if (*a == '/' ) {
            n++;
        }
        a++;
        b++;
    }
    if ((*a == '\0' || *a == '/') && (*b == '\0' || *b == '/')) {
        n++;   /* the last component matched whole */
    }
    return n;
}

int rmacoll__verbs_closest_device(const char *sysfs_root,
                                  const char *gpu_bus_id,
                                  const char *const *names, int n,
                                  int local_rank)
{
    char path[PATH_MAX];
    char gpu_real[PATH_MAX];
    char nic_real[PATH_MAX];
    char bus[64];
    int best = -1;
    int nties = 0;
    int ties[64];

    if (sysfs_root == NULL || gpu_bus_id == NULL || names == NULL || n <= 0) {
        return -1;
    }
    snprintf(bus, sizeof(bus), "%s", gpu_bus_id);
    for (char *c = bus; *c != '\0'; c++) {
        *c = (char)tolower((unsigned char)*c);
    }
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root, bus);
    if (realpath(path, gpu_real) == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int score;

        snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", sysfs_root,
                 names[i]);
        if (realpath(path, nic_real) == NULL) {
            continue;
        }
        score = verbs_common_components(gpu_real, nic_real);
        if (score > best) {
            best = score;
            nties = 0;
        }
        if (score == best && nties < (int)(sizeof(ties) / sizeof(ties[0]))) {
            ties[nties++] = i;
        }
    }
    if (nties == 0) {
        return -1;
    }
    return ties[(local_rank < 0 ? 0 : local_rank) % nties];
}

/* Opens the device: config name, else closest to the GPU, else by rail. */
rmacoll_status_t rmacoll__verbs_open_device(rmacoll_transport_t *tp)
{
    const rmacoll_config_t *cfg = tp->env->config;
    const char *want = (cfg != NULL) ? cfg->verbs_device : "";
    struct ibv_device **list;
    const char *names[64];
    int local_rank = 0;
    int ndev = 0;
    int pick = -1;
    char bus[64];

    if (tp->env->topo != NULL && tp->env->topo->local_rank != NULL) {
        local_rank = tp->env->topo->local_rank[tp->env->rank];
    }
    list = ibv_get_device_list(&ndev);
    if (list == NULL || ndev <= 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                  "no RDMA device found (ibv_get_device_list returned 0 devices)%s%s",
                  list == NULL ? "; libibverbs says: " : "", list == NULL ? strerror(errno) : "");
        if (list != NULL) {
            ibv_free_device_list(list);
        }
        return RMACOLL_ERR_NO_DEVICE;
    }
    if (ndev > (int)(sizeof(names) / sizeof(names[0]))) {
        ndev = (int)(sizeof(names) / sizeof(names[0]));
    }
    for (int i = 0; i < ndev; i++) {
        names[i] = ibv_get_device_name(list[i]);
        if (names[i] == NULL) {
            names[i] = "?";
        }
    }
    if (want[0] != '\0') {
        for (int i = 0; i < ndev && pick < 0; i++) {
            if (strcmp(names[i], want) == 0) {
                pick = i;
            }
        }
        if (pick < 0) {
            char found[512];
            size_t off = 0;

            found[0] = '\0';
            for (int i = 0; i < ndev && off < sizeof(found); i++) {
                int w = snprintf(found + off, sizeof(found) - off, "%s%s",
                                 i ? ", " : "", names[i]);
                off += (w > 0) ? (size_t)w : 0;
            }
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "verbs device '%s' (config verbs_device) not found; "
                      "ibv_get_device_list found %d: %s", want, ndev, found);
            ibv_free_device_list(list);
            return RMACOLL_ERR_NO_DEVICE;
        }
    } else if (verbs_gpu_bus_id(tp, bus, (int)sizeof(bus)) == 0) {
        /* Hook: the NIC closest to this rank's GPU by PCI path. */
        pick = rmacoll__verbs_closest_device("/sys", bus, names, ndev, local_rank);
        if (pick >= 0) {
            VERBS_LOG(tp, RMACOLL_LOG_INFO, "rank %d: picked %s as closest to gpu %s",
                      tp->env->rank, names[pick], bus);
        }
    }
    if (pick < 0) {
        pick = local_rank % ndev;   /* rail: local rank i uses device i mod n */
    }
    snprintf(tp->dev_name, sizeof(tp->dev_name), "%s", names[pick]);
    tp->ctx = ibv_open_device(list[pick]);
    ibv_free_device_list(list);
    if (tp->ctx == NULL) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_open_device(%s) failed: %s",
                  tp->dev_name, strerror(errno));
        return RMACOLL_ERR_NO_DEVICE;
    }
    return RMACOLL_SUCCESS;
}

/* Port attributes, GID, MTU. */
rmacoll_status_t rmacoll__verbs_query_port(rmacoll_transport_t *tp)
{
    const rmacoll_config_t *cfg = tp->env->config;
    int32_t gid_cfg = cfg != NULL ? cfg->verbs_gid_index : -1;
    int rc;

    rc = ibv_query_port(tp->ctx, tp->port, &tp->port_attr);
    if (rc != 0) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_query_port(%s, port %u) failed: %s",
                  tp->dev_name, (unsigned)tp->port, strerror(rc));
        return RMACOLL_ERR_NO_DEVICE;
    }
    if (tp->port_attr.state != IBV_PORT_ACTIVE) {
        VERBS_LOG(tp, RMACOLL_LOG_ERROR, "port %u of %s is not active (state %d)",
                  (unsigned)tp->port, tp->dev_name, (int)tp->port_attr.state);
        return RMACOLL_ERR_NO_DEVICE;
    }
    tp->max_msg = tp->port_attr.max_msg_sz;
    if (tp->max_msg == 0 || tp->max_msg > VERBS_MAX_MSG_CAP) {
        tp->max_msg = VERBS_MAX_MSG_CAP;
    }
    tp->mtu = tp->port_attr.active_mtu;
    if (cfg != NULL && cfg->verbs_mtu != 0) {
        enum ibv_mtu want;

        if (verbs_mtu_from_bytes(cfg->verbs_mtu, &want) != RMACOLL_SUCCESS) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR,
                      "verbs_mtu %u is not one of 256, 512, 1024, 2048, 4096",
                      cfg->verbs_mtu);
            return RMACOLL_ERR_CONFIG;
        }
        if (want < tp->mtu) {
            tp->mtu = want;
        }
    }

    tp->use_grh = 0;
    tp->gid_index = gid_cfg;
    if (tp->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET && gid_cfg < 0) {
        /* RoCE, auto: the first RoCE v2 GID with an IPv4-mapped address,
         * else the first RoCE v2 GID, else index 0. */
        int first_v2 = -1;
        int v4 = -1;

        for (int i = 0; i < tp->port_attr.gid_tbl_len && v4 < 0; i++) {
            struct ibv_gid_entry e;
            static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

            if (ibv_query_gid_ex(tp->ctx, tp->port, (uint32_t)i, &e, 0) != 0 ||
                e.gid_type != IBV_GID_TYPE_ROCE_V2) {
                continue;
            }
            if (first_v2 < 0) {
                first_v2 = i;
            }
            if (memcmp(e.gid.raw, v4_prefix, sizeof(v4_prefix)) == 0) {
                v4 = i;
            }
        }
        tp->gid_index = v4 >= 0 ? v4 : (first_v2 >= 0 ? first_v2 : 0);
    }
    if (tp->gid_index >= 0) {
        tp->use_grh = 1;
        rc = ibv_query_gid(tp->ctx, tp->port, tp->gid_index, &tp->gid);
        if (rc != 0) {
            VERBS_LOG(tp, RMACOLL_LOG_ERROR, "ibv_query_gid(%s, port %u, index %d) failed: %s",
                      tp->dev_name, (unsigned)tp->port, tp->gid_index, strerror(errno));
            return RMACOLL_ERR_TRANSPORT;
        }
    }
    return RMACOLL_SUCCESS;
}
