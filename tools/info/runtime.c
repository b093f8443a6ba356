/*
 * runtime.c - rmacoll-info's run-time report (rmacoll-info; rmacoll-info
 * --runtime [--json]): what this machine has, as fi_info / ucx_info -d do.
 * Every library is opened with dlopen, so the report works whatever this
 * build links, and a missing library is reported rather than fatal:
 * libfabric providers and FI_HMEM, RDMA devices (libibverbs), GPUs and
 * their NVLink links (CUDA runtime, NVML), library versions, and every
 * environment variable rmacoll reads (core/config/env.c) with its value
 * here.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_internal.h"
#include "core/config/env.h"
#include "info_tool.h"
#include "rmacoll.h"
#include "tjson.h"

#if defined(__has_include)
#if __has_include(<rdma/fabric.h>)
#include <rdma/fabric.h>
#define INFO_HAVE_FABRIC_H 1
#endif
#endif

/* A function of a dlopen'ed library (POSIX: void * converts to it). */
#define INFO_SYM(h, type, name, var)                                                   \
    do {                                                                               \
        void *s_ = (h) != NULL ? dlsym((h), (name)) : NULL;                           \
        memcpy(&(var), &s_, sizeof(s_));                                               \
        (void)sizeof(type);                                                            \
    } while (0)

static void *info_open(const char *const *names, const char **which)
{
    for (int i = 0; names[i] != NULL; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            *which = names[i];
            return h;
        }
    }
    *which = NULL;
    return NULL;
}

typedef struct info_out {
    cJSON *doc;   /* JSON: the report's object; NULL: text */
} info_out_t;

/* A section: its heading (text), or its array in the report (JSON; NULL
 * for text). */
static cJSON *info_begin(info_out_t *o, const char *section)
{
    if (o->doc == NULL) {
        printf("\n%s:\n", section);
        return NULL;
    }
    return cJSON_AddArrayToObject(o->doc, section);
}

static void info_rt_versions(info_out_t *o)
{
    static const char *const fab[] = {"libfabric.so.1", "libfabric.so", NULL};
    static const char *const cud[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", NULL};
    static const char *const ncc[] = {"libnccl.so.2", "libnccl.so", NULL};
    const char *w = NULL;
    char fabv[32] = "", rtv[32] = "", drv[32] = "", ncv[32] = "";
    void *h;

    h = info_open(fab, &w);
    if (h != NULL) {
        uint32_t (*fv)(void) = NULL;
        INFO_SYM(h, uint32_t, "fi_version", fv);
        if (fv != NULL) {
            uint32_t v = fv();
            snprintf(fabv, sizeof(fabv), "%u.%u", v >> 16, v & 0xffff);
        }
    }
    h = info_open(cud, &w);
    if (h != NULL) {
        int (*rt)(int *) = NULL, (*dr)(int *) = NULL;
        int v = 0;
        INFO_SYM(h, int, "cudaRuntimeGetVersion", rt);
        INFO_SYM(h, int, "cudaDriverGetVersion", dr);
        if (rt != NULL && rt(&v) == 0)
            snprintf(rtv, sizeof(rtv), "%d.%d", v / 1000, (v % 1000) / 10);
        if (dr != NULL && dr(&v) == 0 && v > 0)
            snprintf(drv, sizeof(drv), "%d.%d", v / 1000, (v % 1000) / 10);
    }
    h = info_open(ncc, &w);
    if (h != NULL) {
        int (*gv)(int *) = NULL;
        int v = 0;
        INFO_SYM(h, int, "ncclGetVersion", gv);
        if (gv != NULL && gv(&v) == 0)
            snprintf(ncv, sizeof(ncv), "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    }
    if (o->doc != NULL) {
        cJSON *v = cJSON_AddObjectToObject(o->doc, "versions");
        if (v != NULL) {
            tjson_str(v, "rmacoll", rmacoll_version_string());
            tjson_str(v, "libfabric", fabv);
            tjson_str(v, "cuda_runtime", rtv);
            tjson_str(v, "cuda_driver", drv);
            tjson_str(v, "nccl", ncv);
        }
    } else {
        printf("\nversions:\n");
        printf("  rmacoll       %s (header %d.%d.%d)\n", rmacoll_version_string(),
               RMACOLL_VERSION_MAJOR, RMACOLL_VERSION_MINOR, RMACOLL_VERSION_PATCH);
        printf("  libfabric     %s\n", fabv[0] ? fabv : "not found");
        printf("  CUDA runtime  %s\n", rtv[0] ? rtv : "not found");
        printf("  CUDA driver   %s\n", drv[0] ? drv : "not found (no GPU driver)");
        printf("  NCCL          %s\n", ncv[0] ? ncv : "not found");
    }
}

static void info_rt_fabric(info_out_t *o)
{
    static const char *const fab[] = {"libfabric.so.1", "libfabric.so", NULL};
    const char *w = NULL;
    void *h = info_open(fab, &w);
    int n = 0;
    cJSON *arr = info_begin(o, "libfabric_providers");

#ifdef INFO_HAVE_FABRIC_H
    if (h != NULL) {
        int (*gi)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                  struct fi_info **) = NULL;
        void (*fr)(struct fi_info *) = NULL;
        uint32_t (*fv)(void) = NULL;
        struct fi_info *list = NULL;
        char seen[64][96];
        int nseen = 0;

        INFO_SYM(h, int, "fi_getinfo", gi);
        INFO_SYM(h, int, "fi_freeinfo", fr);
        INFO_SYM(h, int, "fi_version", fv);
        if (gi != NULL && fr != NULL && fv != NULL && gi(fv(), NULL, NULL, 0, NULL, &list) == 0) {
            for (struct fi_info *i = list; i != NULL; i = i->next) {
                const char *prov = i->fabric_attr && i->fabric_attr->prov_name
                                       ? i->fabric_attr->prov_name : "?";
                const char *dom = i->domain_attr && i->domain_attr->name
                                      ? i->domain_attr->name : "?";
                int hmem = (i->caps & FI_HMEM) != 0;
                char id[96];
                int dup = 0;

                snprintf(id, sizeof(id), "%s|%s|%d", prov, dom, hmem);
                for (int k = 0; k < nseen; k++)
                    dup |= strcmp(seen[k], id) == 0;
                if (dup || nseen == 64)
                    continue;
                snprintf(seen[nseen++], sizeof(seen[0]), "%s", id);
                if (o->doc != NULL) {
                    cJSON *e = cJSON_CreateObject();
                    if (e != NULL) {
                        tjson_str(e, "provider", prov);
                        tjson_str(e, "domain", dom);
                        cJSON_AddBoolToObject(e, "fi_hmem", hmem);
                        cJSON_AddItemToArray(arr, e);
                    }
                } else {
                    printf("  %-22s domain %-16s FI_HMEM %s\n", prov, dom, hmem ? "yes" : "no");
                }
                n++;
            }
            fr(list);
        }
    }
#endif
    (void)arr;
    if (o->doc == NULL && n == 0)
        printf("  (none: %s)\n", h == NULL ? "libfabric not found" : "fi_getinfo found no provider");
}

static void info_rt_rdma(info_out_t *o)
{
    static const char *const ibv[] = {"libibverbs.so.1", "libibverbs.so", NULL};
    const char *w = NULL;
    void *h = info_open(ibv, &w);
    int n = 0;
    cJSON *arr = info_begin(o, "rdma_devices");

    if (h != NULL) {
        void **(*list)(int *) = NULL;
        void (*freel)(void **) = NULL;
        const char *(*name)(void *) = NULL;
        void **devs;
        int num = 0;

        INFO_SYM(h, int, "ibv_get_device_list", list);
        INFO_SYM(h, int, "ibv_free_device_list", freel);
        INFO_SYM(h, int, "ibv_get_device_name", name);
        devs = list != NULL ? list(&num) : NULL;
        for (int i = 0; devs != NULL && i < num; i++) {
            const char *nm = name != NULL ? name(devs[i]) : "?";
            if (o->doc != NULL) {
                cJSON_AddItemToArray(arr, cJSON_CreateString(nm));
            } else {
                printf("  %s\n", nm);
            }
            n++;
        }
        if (devs != NULL && freel != NULL)
            freel(devs);
    }
    if (o->doc == NULL && n == 0)
        printf("  (none%s)\n", h == NULL ? ": libibverbs not found" : "");
}

static void info_rt_gpus(info_out_t *o)
{
    static const char *const cud[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", NULL};
    static const char *const nvml[] = {"libnvidia-ml.so.1", NULL};
    const char *w = NULL;
    void *h = info_open(cud, &w), *hn = info_open(nvml, &w);
    int (*count)(int *) = NULL, (*bus)(char *, int, int) = NULL;
    int (*peer)(int *, int, int) = NULL;
    int (*ninit)(void) = NULL, (*nhandle)(unsigned, void **) = NULL;
    int (*nlink)(void *, unsigned, int *) = NULL;
    int ndev = 0;

    INFO_SYM(h, int, "cudaGetDeviceCount", count);
    INFO_SYM(h, int, "cudaDeviceGetPCIBusId", bus);
    INFO_SYM(h, int, "cudaDeviceCanAccessPeer", peer);
    INFO_SYM(hn, int, "nvmlInit_v2", ninit);
    INFO_SYM(hn, int, "nvmlDeviceGetHandleByIndex_v2", nhandle);
    INFO_SYM(hn, int, "nvmlDeviceGetNvLinkState", nlink);
    cJSON *arr;

    if (count == NULL || count(&ndev) != 0)
        ndev = 0;
    if (ninit == NULL || ninit() != 0)
        nhandle = NULL;
    arr = info_begin(o, "gpus");
    for (int d = 0; d < ndev; d++) {
        char id[32] = "?", peers[256] = "";
        int links = -1;
        size_t off = 0;
        void *nd = NULL;

        if (bus != NULL)
            bus(id, sizeof(id), d);
        for (int e = 0; peer != NULL && e < ndev; e++) {
            int can = 0;
            if (e != d && peer(&can, d, e) == 0 && can && off < sizeof(peers) - 8)
                off += (size_t)snprintf(peers + off, sizeof(peers) - off, "%s%d", off ? "," : "", e);
        }
        if (nhandle != NULL && nlink != NULL && nhandle((unsigned)d, &nd) == 0) {
            links = 0;
            for (unsigned l = 0; l < 18; l++) {
                int active = 0;
                if (nlink(nd, l, &active) == 0 && active)
                    links++;
            }
        }
        if (o->doc != NULL) {
            cJSON *e = cJSON_CreateObject();
            cJSON *pa = cJSON_CreateArray();
            for (const char *p = peers; pa != NULL && *p != '\0'; p += strspn(p, ",")) {
                tjson_push_i64(pa, strtol(p, NULL, 10));
                p += strcspn(p, ",");
            }
            if (e != NULL) {
                tjson_i64(e, "device", d);
                tjson_str(e, "pci_bus_id", id);
                cJSON_AddItemToObject(e, "p2p_peers", pa);
                tjson_i64(e, "nvlink_active_links", links);
                cJSON_AddItemToArray(arr, e);
            } else {
                cJSON_Delete(pa);
            }
        } else {
            printf("  GPU %d  %s  peers (CUDA P2P): %s  NVLink links up: %s%d\n", d, id,
                   peers[0] ? peers : "none", links < 0 ? "unknown " : "", links < 0 ? 0 : links);
        }
    }
    if (o->doc == NULL && ndev == 0)
        printf("  (none%s)\n", h == NULL ? ": CUDA runtime not found" : "");
}

static void info_rt_env(info_out_t *o)
{
    size_t nv = 0, nkeys = 0;
    const rmacoll__env_var_t *v = rmacoll__env_vars(&nv);
    const rmacoll__config_key_t *keys = rmacoll__config_keys(&nkeys);
    cJSON *arr = info_begin(o, "environment");

    for (size_t i = 0; i < nkeys + nv; i++) {
        char name[96];
        const char *reader = "library", *meaning, *val;

        if (i < nkeys) {
            info_env_name(keys[i].key, name, sizeof(name));
            meaning = keys[i].meaning;
        } else {
            snprintf(name, sizeof(name), "%s", v[i - nkeys].name);
            reader = v[i - nkeys].reader;
            meaning = v[i - nkeys].meaning;
        }
        val = strchr(name, '*') == NULL ? getenv(name) : NULL;
        if (o->doc != NULL) {
            cJSON *e = cJSON_CreateObject();
            if (e != NULL) {
                tjson_str(e, "name", name);
                tjson_str(e, "read_by", reader);
                cJSON_AddBoolToObject(e, "config_key", i < nkeys);
                tjson_str(e, "meaning", meaning);
                tjson_str(e, "value", val);
                cJSON_AddItemToArray(arr, e);
            }
        } else {
            printf("  %-28s %-12s %s%s%s\n", name, reader, val ? "= " : "", val ? val : "",
                   val ? "" : "(unset)");
        }
    }
    if (o->doc == NULL) {
        /* unknown RMACOLL_* variables set here */
        extern char **environ;
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            char name[96];
            size_t len = strcspn(*e, "=");
            if (strncmp(*e, "RMACOLL_", 8) != 0 || len >= sizeof(name))
                continue;
            memcpy(name, *e, len);
            name[len] = '\0';
            if (!rmacoll__env_known(name))
                printf("  %-28s UNKNOWN: rmacoll does not read it (misspelt?)\n", name);
        }
    }
}

/* The whole run-time report, text or one JSON object. */
void info_runtime(int json)
{
    info_out_t o = {json ? cJSON_CreateObject() : NULL};

    if (o.doc == NULL)
        printf("\nrun time (this machine):");
    info_rt_versions(&o);
    info_rt_fabric(&o);
    info_rt_rdma(&o);
    info_rt_gpus(&o);
    info_rt_env(&o);
    if (o.doc != NULL)
        tjson_print(stdout, o.doc, 0, 1);
    else
        printf("\n");
}
