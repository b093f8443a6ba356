/*
 * transport.h - the core's view of a transport's ops: checked against the
 * ABI and the capabilities, and completed with typed stubs, so that the
 * core calls every op without testing it for NULL. Built-in transports
 * come from the table CMake generates; plugins from a shared object
 * (rmacoll__tops_load).
 */
#ifndef RMACOLL_CORE_TRANSPORT_H
#define RMACOLL_CORE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rmacoll_transport.h"

/* The flat ops table of ABI version 1, frozen: plugins built against it
 * are adapted. */
typedef struct rmacoll__transport_ops_v1 {
    uint32_t abi_version;   /* 1 */
    uint32_t struct_size;
    const char *name;
    const char *desc;
    uint64_t caps;
    rmacoll_status_t (*init)(const rmacoll_transport_env_t *env,
                             rmacoll_transport_t **tp);
    void (*finalize)(rmacoll_transport_t *tp);
    rmacoll_status_t (*mem_register)(rmacoll_transport_t *tp, void *addr,
                                     size_t bytes, rmacoll_memtype_t type,
                                     rmacoll_mem_t **mem, rmacoll_rkey_t *rkey);
    rmacoll_status_t (*mem_deregister)(rmacoll_transport_t *tp, rmacoll_mem_t *mem);
    rmacoll_status_t (*post_puts)(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                  size_t n);
    rmacoll_status_t (*progress)(rmacoll_transport_t *tp);
    size_t (*pending)(rmacoll_transport_t *tp);
    int (*error_peer)(rmacoll_transport_t *tp);
    rmacoll_status_t (*mem_export)(rmacoll_transport_t *tp, void *addr, size_t bytes,
                                   void *blob);
    rmacoll_status_t (*mem_import)(rmacoll_transport_t *tp, int peer, const void *blob,
                                   uint64_t *addr);
    rmacoll_status_t (*post_puts_stream)(rmacoll_transport_t *tp,
                                         const rmacoll_put_t *puts, size_t n,
                                         void *stream);
    rmacoll_status_t (*wait_stream)(rmacoll_transport_t *tp, const uint32_t *idx,
                                    const uint64_t *values, size_t n, void *stream);
    rmacoll_status_t (*signal_stream)(rmacoll_transport_t *tp, int peer, uint32_t idx,
                                      uint64_t value, void *stream);
} rmacoll__transport_ops_v1_t;

/* A transport's ops, complete (no NULL op). */
typedef struct rmacoll__tops {
    const char *name;
    const char *desc;
    uint64_t caps;
    const char *small_max_key;       /* see rmacoll_transport_ops_t */
    uint32_t abi_version;            /* of the table it came from */
    const rmacoll_transport_key_t *keys;
    size_t nkeys;
    rmacoll_transport_base_ops_t base;
    rmacoll_transport_mem_ops_t mem;
    rmacoll_transport_host_ops_t host;
    rmacoll_transport_stream_ops_t stream;
    char spec[RMACOLL_CONFIG_STR_MAX]; /* how the config names it: name or plugin:PATH */
    void *dl;                         /* dlopen handle of a plugin, or NULL */
} rmacoll__tops_t;

/**
 * Checks ops (ABI version and struct size, each group's size, the
 * capabilities against the ops given) and completes it into *out.
 * RMACOLL_ERR_CONFIG with a message in err naming the transport and the
 * mismatch. Pure; thread-safe.
 */
rmacoll_status_t rmacoll__tops_adopt(const rmacoll_transport_ops_t *ops,
                                     rmacoll__tops_t *out, char *err, size_t len);
/** The same for a table of ABI version 1 (adapted to the groups). */
rmacoll_status_t rmacoll__tops_adopt_v1(const rmacoll__transport_ops_v1_t *ops,
                                        rmacoll__tops_t *out, char *err, size_t len);

/**
 * Finds the transport the config names by `spec`: a built-in name, or
 * "plugin:PATH" (dlopen PATH, then the newest entry symbol it defines).
 * RMACOLL_ERR_CONFIG with a message naming the key `what` (e.g.
 * "transports.inter_node") when it is not built in, cannot be loaded, or
 * fails the checks. Release with rmacoll__tops_release.
 */
rmacoll_status_t rmacoll__tops_find(const char *spec, const char *what,
                                    rmacoll__tops_t *out, char *err, size_t len);
void rmacoll__tops_release(rmacoll__tops_t *t);

/**
 * Finds the loadable module of in-tree transport `name` ([a-z0-9_]+):
 * librmacoll-<name>.so next to the object holding librmacoll's code
 * (librmacoll.so, or the program linking librmacoll.a), then in the
 * install libdir, then through the dynamic linker's search. 0 with the
 * path (or the bare file name the linker finds) in path; -1 if none.
 */
int rmacoll__tops_module_path(const char *name, char *path, size_t len);

/**
 * The capabilities of instance tp of t after its init: t's caps, and the
 * RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA bits its base.instance_caps
 * reports (MEM_CUDA on the PROXY path only together with HMEM); desc (len
 * bytes) receives the transport's one-line account of them, or "".
 */
uint64_t rmacoll__tops_instance_caps(const rmacoll__tops_t *t, rmacoll_transport_t *tp,
                                     char *desc, size_t len);

/** Names of the built-in transports, comma-separated (static storage). */
const char *rmacoll__tops_builtin_names(void);

#endif /* RMACOLL_CORE_TRANSPORT_H */
