/*
 * transport.c - a transport's ops as the core uses them (transport.h):
 * ABI and size checks, capabilities against ops, typed stubs, built-in
 * lookup and plugins loaded from a shared object (newest entry first, as
 * NCCL loads net plugins; ABI 1 is adapted).
 */
#define _GNU_SOURCE /* dladdr */

#include "core/xport/transport.h"

#include "core/config/config_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#define PLUGIN_PREFIX "plugin:"

/* ---- typed stubs: what an op the transport does not provide does ---- */

static rmacoll_status_t stub_progress(rmacoll_transport_t *tp)
{
    return RMACOLL_SUCCESS; /* nothing to drive */
}

static size_t stub_pending(rmacoll_transport_t *tp)
{
    return 0;
}

static int stub_error_peer(rmacoll_transport_t *tp)
{
    return -1;
}

static rmacoll_status_t stub_mem_register(rmacoll_transport_t *tp, void *addr,
                                          size_t bytes, rmacoll_memtype_t type,
                                          rmacoll_mem_t **mem, rmacoll_rkey_t *rkey)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_mem_deregister(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static uint64_t stub_instance_caps(rmacoll_transport_t *tp, char *desc, size_t len)
{
    return 0; /* the table's caps only */
}

static void stub_local_nic(rmacoll_transport_t *tp, char *name, size_t len)
{
    if (len > 0) {
        name[0] = '\0'; /* unknown */
    }
}

static rmacoll_status_t stub_mem_alloc(rmacoll_transport_t *tp, size_t bytes,
                                       rmacoll_memtype_t type, void **addr)
{
    *addr = NULL;
    return RMACOLL_ERR_UNSUPPORTED;
}

static void stub_mem_free(rmacoll_transport_t *tp, void *addr, rmacoll_memtype_t type)
{
}

static rmacoll_status_t stub_mem_export(rmacoll_transport_t *tp, void *addr,
                                        size_t bytes, void *blob)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_mem_import(rmacoll_transport_t *tp, int peer,
                                        const void *blob, uint64_t *addr)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_mem_revoke(rmacoll_transport_t *tp, rmacoll_mem_t *mem)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_mem_type(rmacoll_transport_t *tp, const void *addr,
                                      rmacoll_memtype_t *type)
{
    return RMACOLL_ERR_UNSUPPORTED; /* cannot tell: the core takes host memory */
}

static rmacoll_status_t stub_mem_unshare(rmacoll_transport_t *tp, void *addr, size_t bytes)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_post_puts(rmacoll_transport_t *tp, const rmacoll_put_t *puts,
                                       size_t n)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_post_puts_stream(rmacoll_transport_t *tp,
                                              const rmacoll_put_t *puts, size_t n,
                                              void *stream)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_wait_stream(rmacoll_transport_t *tp, const uint32_t *idx,
                                         const uint64_t *values, size_t n, void *stream)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_signal_stream(rmacoll_transport_t *tp, int peer,
                                           uint32_t idx, uint64_t value, void *stream)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

static rmacoll_status_t stub_set_device_signals(rmacoll_transport_t *tp,
                                                const uint64_t *addr, const uint32_t *nwords)
{
    return RMACOLL_ERR_UNSUPPORTED;
}

/* Copies the first `size` bytes a transport gives of a group (a group of
 * an older header is shorter; a newer one's extra ops are not known here). */
static int copy_group(void *dst, size_t dst_size, const void *src, size_t src_size,
                      const char *tname, const char *group, char *err, size_t len)
{
    memset(dst, 0, dst_size);
    if (src == NULL) {
        return 0;
    }
    if (src_size < sizeof(size_t)) {
        snprintf(err, len, "transport '%s': ops group %s has size %zu (at least %zu "
                 "expected: ABI mismatch)", tname, group, src_size, sizeof(size_t));
        return -1;
    }
    memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
    *(size_t *)dst = dst_size;
    return 0;
}

#define CE_CUDA (RMACOLL_TCAP_CE | RMACOLL_TCAP_MEM_CUDA)

/* Requires base.init and base.finalize, a consistent set of caps, and
 * every op a capability names. */
static rmacoll_status_t check_required(const rmacoll__tops_t *t, char *err, size_t len)
{
    struct {
        uint64_t cap;
        const char *capname;
        const char *opname;
        const void *op;
    } need[] = {
        {RMACOLL_TCAP_PROXY, "PROXY", "mem.mem_register", (const void *)t->mem.mem_register},
        {RMACOLL_TCAP_PROXY, "PROXY", "mem.mem_deregister", (const void *)t->mem.mem_deregister},
        {RMACOLL_TCAP_MEM_HOST, "MEM_HOST", "host.post_puts", (const void *)t->host.post_puts},
        {CE_CUDA, "CE | RMACOLL_TCAP_MEM_CUDA", "mem.mem_export",
         (const void *)t->mem.mem_export},
        {CE_CUDA, "CE | RMACOLL_TCAP_MEM_CUDA", "mem.mem_import",
         (const void *)t->mem.mem_import},
        {CE_CUDA, "CE | RMACOLL_TCAP_MEM_CUDA", "stream.post_puts_stream",
         (const void *)t->stream.post_puts_stream},
        {CE_CUDA, "CE | RMACOLL_TCAP_MEM_CUDA", "stream.wait_stream",
         (const void *)t->stream.wait_stream},
        {CE_CUDA, "CE | RMACOLL_TCAP_MEM_CUDA", "stream.signal_stream",
         (const void *)t->stream.signal_stream},
        {RMACOLL_TCAP_HMEM, "HMEM", "mem.mem_register", (const void *)t->mem.mem_register},
        {RMACOLL_TCAP_HOST_CUDA, "HOST_CUDA", "host.post_puts", (const void *)t->host.post_puts},
    };

    if (t->base.init == NULL || t->base.finalize == NULL) {
        snprintf(err, len, "transport '%s': base.init and base.finalize are required",
                 t->name);
        return RMACOLL_ERR_CONFIG;
    }
    if ((t->caps & (RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_CUDA)) ==
            (RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_CUDA) &&
        !(t->caps & RMACOLL_TCAP_HMEM)) {
        snprintf(err, len, "transport '%s': claims RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_CUDA "
                 "without RMACOLL_TCAP_HMEM (a network transport moves device memory by "
                 "registering it)", t->name);
        return RMACOLL_ERR_CONFIG;
    }
    if (!(t->caps & (RMACOLL_TCAP_CE | RMACOLL_TCAP_PROXY))) {
        snprintf(err, len, "transport '%s': caps name neither RMACOLL_TCAP_CE nor "
                 "RMACOLL_TCAP_PROXY", t->name);
        return RMACOLL_ERR_CONFIG;
    }
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if ((t->caps & need[i].cap) == need[i].cap && need[i].op == NULL) {
            snprintf(err, len, "transport '%s': claims RMACOLL_TCAP_%s but has no %s",
                     t->name, need[i].capname, need[i].opname);
            return RMACOLL_ERR_CONFIG;
        }
    }
    return RMACOLL_SUCCESS;
}

/* Fills every op a transport left NULL with its stub. */
static void fill_stubs(rmacoll__tops_t *t)
{
    if (t->base.progress == NULL) {
        t->base.progress = stub_progress;
    }
    if (t->base.pending == NULL) {
        t->base.pending = stub_pending;
    }
    if (t->base.error_peer == NULL) {
        t->base.error_peer = stub_error_peer;
    }
    if (t->mem.mem_register == NULL) {
        t->mem.mem_register = stub_mem_register;
    }
    if (t->mem.mem_deregister == NULL) {
        t->mem.mem_deregister = stub_mem_deregister;
    }
    if (t->base.instance_caps == NULL) {
        t->base.instance_caps = stub_instance_caps;
    }
    if (t->base.local_nic == NULL) {
        t->base.local_nic = stub_local_nic;
    }
    if (t->mem.mem_alloc == NULL || t->mem.mem_free == NULL) {
        t->mem.mem_alloc = stub_mem_alloc; /* a pair, or neither */
        t->mem.mem_free = stub_mem_free;
    }
    if (t->mem.mem_export == NULL) {
        t->mem.mem_export = stub_mem_export;
    }
    if (t->mem.mem_import == NULL) {
        t->mem.mem_import = stub_mem_import;
    }
    if (t->mem.mem_revoke == NULL) {
        t->mem.mem_revoke = stub_mem_revoke;
    }
    if (t->mem.mem_unshare == NULL) {
        t->mem.mem_unshare = stub_mem_unshare;
    }
    if (t->mem.mem_type == NULL) {
        t->mem.mem_type = stub_mem_type;
    }
    if (t->host.post_puts == NULL) {
        t->host.post_puts = stub_post_puts;
    }
    if (t->stream.post_puts_stream == NULL) {
        t->stream.post_puts_stream = stub_post_puts_stream;
    }
    if (t->stream.wait_stream == NULL) {
        t->stream.wait_stream = stub_wait_stream;
    }
    if (t->stream.signal_stream == NULL) {
        t->stream.signal_stream = stub_signal_stream;
    }
    if (t->stream.set_device_signals == NULL) {
        t->stream.set_device_signals = stub_set_device_signals;
    }
}

/* Requires every op a capability names; fills the rest with stubs. */
static rmacoll_status_t complete(rmacoll__tops_t *t, char *err, size_t len)
{
    rmacoll_status_t st = check_required(t, err, len);

    if (st != RMACOLL_SUCCESS) {
        return st;
    }
    fill_stubs(t);
    return RMACOLL_SUCCESS;
}

static void tops_clear(rmacoll__tops_t *out, const char *name)
{
    memset(out, 0, sizeof(*out));
    out->name = name != NULL ? name : "?";
    snprintf(out->spec, sizeof(out->spec), "%s", out->name);
}

rmacoll_status_t rmacoll__tops_adopt(const rmacoll_transport_ops_t *ops,
                                     rmacoll__tops_t *out, char *err, size_t len)
{
    tops_clear(out, ops != NULL ? ops->name : NULL);
    if (ops == NULL || ops->name == NULL) {
        snprintf(err, len, "transport ops without a name");
        return RMACOLL_ERR_CONFIG;
    }
    if (ops->abi_version != RMACOLL_TRANSPORT_ABI_VERSION) {
        snprintf(err, len, "transport '%s': ABI mismatch: its ops table has abi_version "
                 "%u, this library reads version %d here", ops->name, ops->abi_version,
                 RMACOLL_TRANSPORT_ABI_VERSION);
        return RMACOLL_ERR_CONFIG;
    }
    if (ops->struct_size < sizeof(rmacoll_transport_ops_t)) {
        snprintf(err, len, "transport '%s': ABI mismatch: its ops table has struct_size "
                 "%u, version %d needs at least %zu", ops->name, ops->struct_size,
                 RMACOLL_TRANSPORT_ABI_VERSION, sizeof(rmacoll_transport_ops_t));
        return RMACOLL_ERR_CONFIG;
    }
    out->desc = ops->desc != NULL ? ops->desc : "";
    out->caps = ops->caps;
    out->small_max_key = ops->small_max_key;
    out->abi_version = ops->abi_version;
    out->keys = ops->keys;
    out->nkeys = ops->keys != NULL ? ops->nkeys : 0;
    if (ops->base == NULL) {
        snprintf(err, len, "transport '%s': no base ops", ops->name);
        return RMACOLL_ERR_CONFIG;
    }
    if (copy_group(&out->base, sizeof(out->base), ops->base, ops->base->size, ops->name,
                   "base", err, len) != 0 ||
        copy_group(&out->mem, sizeof(out->mem), ops->mem, ops->mem ? ops->mem->size : 0,
                   ops->name, "mem", err, len) != 0 ||
        copy_group(&out->host, sizeof(out->host), ops->host,
                   ops->host ? ops->host->size : 0, ops->name, "host", err, len) != 0 ||
        copy_group(&out->stream, sizeof(out->stream), ops->stream,
                   ops->stream ? ops->stream->size : 0, ops->name, "stream", err,
                   len) != 0) {
        return RMACOLL_ERR_CONFIG;
    }
    return complete(out, err, len);
}

rmacoll_status_t rmacoll__tops_adopt_v1(const rmacoll__transport_ops_v1_t *ops,
                                        rmacoll__tops_t *out, char *err, size_t len)
{
    tops_clear(out, ops != NULL ? ops->name : NULL);
    if (ops == NULL || ops->name == NULL) {
        snprintf(err, len, "transport ops without a name");
        return RMACOLL_ERR_CONFIG;
    }
    if (ops->abi_version != 1 || ops->struct_size < sizeof(*ops)) {
        snprintf(err, len, "transport '%s': ABI mismatch: its version-1 table has "
                 "abi_version %u and struct_size %u (1 and at least %zu expected)",
                 ops->name, ops->abi_version, ops->struct_size, sizeof(*ops));
        return RMACOLL_ERR_CONFIG;
    }
    out->desc = ops->desc != NULL ? ops->desc : "";
    out->caps = ops->caps;
    out->abi_version = 1;
    out->base.size = sizeof(out->base);
    out->base.init = ops->init;
    out->base.finalize = ops->finalize;
    out->base.progress = ops->progress;
    out->base.pending = ops->pending;
    out->base.error_peer = ops->error_peer;
    out->mem.size = sizeof(out->mem);
    out->mem.mem_register = ops->mem_register;
    out->mem.mem_deregister = ops->mem_deregister;
    out->mem.mem_export = ops->mem_export;
    out->mem.mem_import = ops->mem_import;
    out->host.size = sizeof(out->host);
    out->host.post_puts = ops->post_puts;
    out->stream.size = sizeof(out->stream);
    out->stream.post_puts_stream = ops->post_puts_stream;
    out->stream.wait_stream = ops->wait_stream;
    out->stream.signal_stream = ops->signal_stream;
    return complete(out, err, len);
}

uint64_t rmacoll__tops_instance_caps(const rmacoll__tops_t *t, rmacoll_transport_t *tp,
                                     char *desc, size_t len)
{
    uint64_t extra;

    if (len > 0) {
        desc[0] = '\0';
    }
    extra = t->base.instance_caps(tp, desc, len) & (RMACOLL_TCAP_HMEM | RMACOLL_TCAP_MEM_CUDA);
    if (len > 0) {
        desc[len - 1] = '\0';
    }

    /* HMEM names mem_register, which every PROXY transport has; device
     * memory on the PROXY path is HMEM (the rule complete() applies) */
    if ((t->caps & RMACOLL_TCAP_PROXY) && !(extra & RMACOLL_TCAP_HMEM)) {
        extra &= ~RMACOLL_TCAP_MEM_CUDA;
    }
    return t->caps | extra;
}

static char builtin_names[256];
static pthread_once_t builtin_names_once = PTHREAD_ONCE_INIT;

static void builtin_names_make(void)
{
    size_t off = 0;

    builtin_names[0] = '\0';
    for (int i = 0; rmacoll__builtin_transports[i] != NULL && off < sizeof(builtin_names);
         i++) {
        int n = snprintf(builtin_names + off, sizeof(builtin_names) - off, "%s%s",
                         i ? "," : "", rmacoll__builtin_transports[i]->name);
        off += n > 0 ? (size_t)n : 0;
    }
}

const char *rmacoll__tops_builtin_names(void)
{
    pthread_once(&builtin_names_once, builtin_names_make);
    return builtin_names;
}

static rmacoll_status_t load_plugin(const char *path, const char *spec, const char *what,
                                    rmacoll__tops_t *out, char *err, size_t len)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const void *sym;
    rmacoll_status_t st;

    if (dl == NULL) {
        const char *why = dlerror();
        snprintf(err, len, "%s: cannot load transport plugin '%s': %s", what, path,
                 why != NULL ? why : "unknown error");
        return RMACOLL_ERR_CONFIG;
    }
    /* newest first */
    sym = dlsym(dl, "rmacoll_transport_plugin_v2");
    if (sym != NULL) {
        st = rmacoll__tops_adopt(sym, out, err, len);
    } else if ((sym = dlsym(dl, "rmacoll_transport_plugin_v1")) != NULL) {
        st = rmacoll__tops_adopt_v1(sym, out, err, len);
    } else {
        char name[64];
        int found = -1;
        for (int v = 0; v <= 9 && found < 0; v++) {
            snprintf(name, sizeof(name), "rmacoll_transport_plugin_v%d", v);
            if (dlsym(dl, name) != NULL) {
                found = v;
            }
        }
        if (found >= 0) {
            snprintf(err, len, "%s: transport plugin '%s' was built against transport "
                     "ABI version %d (symbol rmacoll_transport_plugin_v%d); this library "
                     "loads versions 2 and 1: rebuild it against this rmacoll_transport.h",
                     what, path, found, found);
        } else {
            snprintf(err, len, "%s: '%s' is not a transport plugin (it defines neither "
                     "rmacoll_transport_plugin_v2 nor rmacoll_transport_plugin_v1)", what,
                     path);
        }
        dlclose(dl);
        return RMACOLL_ERR_CONFIG;
    }
    if (st != RMACOLL_SUCCESS) {
        char inner[384];
        snprintf(inner, sizeof(inner), "%s", err);
        snprintf(err, len, "%s: transport plugin '%s' refused: %s", what, path, inner);
        dlclose(dl);
        return st;
    }
    out->dl = dl;
    snprintf(out->spec, sizeof(out->spec), "%s", spec);
    /* its keys become configurable ("<name>.<key>") */
    rmacoll__config_add_keys(out->name, out->keys, out->nkeys);
    return RMACOLL_SUCCESS;
}

/* Where this code lives (dladdr): librmacoll.so, or a program linking
 * librmacoll.a. */
static const char tops_anchor = 0;

int rmacoll__tops_module_path(const char *name, char *path, size_t len)
{
    Dl_info info;
    const char *dirs[2] = {NULL, NULL};
    int ndirs = 0;

    if (name == NULL || name[0] == '\0' || len == 0) {
        return -1;
    }
    for (const char *p = name; *p != '\0'; p++) {
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '_') {
            return -1; /* a transport name, not a path */
        }
    }
    memset(&info, 0, sizeof(info));
    if (dladdr(&tops_anchor, &info) != 0 && info.dli_fname != NULL &&
        strchr(info.dli_fname, '/') != NULL) {
        dirs[ndirs++] = info.dli_fname;
    }
#ifdef RMACOLL_INSTALL_LIBDIR
    dirs[ndirs++] = RMACOLL_INSTALL_LIBDIR "/";
#endif
    for (int d = 0; d < ndirs; d++) {
        const char *slash = strrchr(dirs[d], '/');
        int n = snprintf(path, len, "%.*s/librmacoll-%s.so", (int)(slash - dirs[d]), dirs[d],
                         name);
        if (n > 0 && (size_t)n < len && access(path, R_OK) == 0) {
            return 0;
        }
    }
    /* the dynamic linker's search (LD_LIBRARY_PATH, the program's RUNPATH) */
    snprintf(path, len, "librmacoll-%s.so", name);
    {
        void *dl = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (dl == NULL) {
            dl = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        }
        if (dl != NULL) {
            dlclose(dl);
            return 0;
        }
        (void)dlerror();
    }
    path[0] = '\0';
    return -1;
}

rmacoll_status_t rmacoll__tops_find(const char *spec, const char *what,
                                    rmacoll__tops_t *out, char *err, size_t len)
{
    size_t np = strlen(PLUGIN_PREFIX);

    if (strncmp(spec, PLUGIN_PREFIX, np) == 0) {
        return load_plugin(spec + np, spec, what, out, err, len);
    }
    for (int i = 0; rmacoll__builtin_transports[i] != NULL; i++) {
        const rmacoll_transport_ops_t *ops = rmacoll__builtin_transports[i];
        if (ops->name != NULL && strcmp(ops->name, spec) == 0) {
            return rmacoll__tops_adopt(ops, out, err, len);
        }
    }
    {
        /* an in-tree transport built as a loadable module (its own
         * third-party dependencies stay out of librmacoll) */
        char path[1024];
        if (rmacoll__tops_module_path(spec, path, sizeof(path)) == 0) {
            return load_plugin(path, spec, what, out, err, len);
        }
    }
    tops_clear(out, NULL);
    snprintf(err, len, "%s '%s' is not built in (built: %s; no module librmacoll-%s.so "
             "found; or plugin:PATH)", what, spec, rmacoll__tops_builtin_names(), spec);
    return RMACOLL_ERR_CONFIG;
}

void rmacoll__tops_release(rmacoll__tops_t *t)
{
    if (t != NULL && t->dl != NULL) {
        dlclose(t->dl);
        t->dl = NULL;
    }
}
