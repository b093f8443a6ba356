/*
 * tops.h - writing an in-tree transport's ops table (rmacoll_transport.h)
 * once. A transport keeps one flat table whose groups are written in
 * place with these initialisers: each fills the group's size (which the
 * core checks, and which a copied table gets wrong without a warning) and
 * takes the ops as designated initialisers, so that an op left out is
 * NULL, and so the core's typed stub (rmacoll_transport.h):
 *
 *   const rmacoll_transport_ops_t rmacoll_transport_x_ops = {
 *       RMACOLL__TOPS_ABI,
 *       .name = "x", .desc = "...", .caps = RMACOLL_TCAP_PROXY | RMACOLL_TCAP_MEM_HOST,
 *       .base = RMACOLL__TOPS_BASE(.init = x_init, .finalize = x_finalize,
 *                                  .progress = x_progress, .error_peer = x_error_peer),
 *       .mem = RMACOLL__TOPS_MEM(.mem_register = x_reg, .mem_deregister = x_dereg),
 *       .host = RMACOLL__TOPS_HOST(.post_puts = x_post_puts),
 *   };
 *
 * The groups are compound literals at file scope (static storage, C99
 * 6.5.2.5), so the table may be a constant. Plugins, built against the
 * public header alone, write the groups out (tests/plugins/).
 */
#ifndef RMACOLL_TRANSPORTS_COMMON_TOPS_H
#define RMACOLL_TRANSPORTS_COMMON_TOPS_H

#include <stdlib.h>

#include "rmacoll_transport.h"

/* abi_version and struct_size of this build's rmacoll_transport_ops_t */
#define RMACOLL__TOPS_ABI                                                      \
    .abi_version = RMACOLL_TRANSPORT_ABI_VERSION,                             \
    .struct_size = sizeof(rmacoll_transport_ops_t)

/* A group of ops of type T with its size filled; the rest: designators. */
#define RMACOLL__TOPS_GROUP(T, ...) (&(const T){.size = sizeof(T), __VA_ARGS__})
#define RMACOLL__TOPS_BASE(...) RMACOLL__TOPS_GROUP(rmacoll_transport_base_ops_t, __VA_ARGS__)
#define RMACOLL__TOPS_MEM(...) RMACOLL__TOPS_GROUP(rmacoll_transport_mem_ops_t, __VA_ARGS__)
#define RMACOLL__TOPS_HOST(...) RMACOLL__TOPS_GROUP(rmacoll_transport_host_ops_t, __VA_ARGS__)
#define RMACOLL__TOPS_STREAM(...)                                              \
    RMACOLL__TOPS_GROUP(rmacoll_transport_stream_ops_t, __VA_ARGS__)

/*
 * Defines `static int fn(rmacoll_transport_t *tp)`, the base.error_peer of
 * a transport whose instance keeps the rank of the peer whose failure
 * caused the last error in its int member `field` (-1: none); a NULL
 * instance has none either.
 */
#define RMACOLL__TOPS_ERROR_PEER_FN(fn, field)                                 \
    static int fn(rmacoll_transport_t *tp)                                     \
    {                                                                          \
        return tp != NULL ? tp->field : -1;                                    \
    }

/*
 * The start of base.init: checks the arguments and allocates the
 * instance. Sets *tpp to NULL (when tpp is given); returns a zeroed
 * instance of `bytes` (sizeof the transport's struct rmacoll_transport),
 * or NULL with *st = RMACOLL_ERR_INVALID_ARG unless env is a whole
 * environment of this build (struct_size), 0 <= rank < nranks, the peers
 * are given and, for a transport whose init is collective (`collective`),
 * so is allgather; *st = RMACOLL_ERR_NO_MEMORY when the allocation fails.
 */
static inline void *rmacoll__tops_new(const rmacoll_transport_env_t *env,
                                      rmacoll_transport_t **tpp, int collective,
                                      size_t bytes, rmacoll_status_t *st)
{
    void *tp;

    *st = RMACOLL_ERR_INVALID_ARG;
    if (tpp == NULL) {
        return NULL;
    }
    *tpp = NULL;
    if (env == NULL || env->struct_size < sizeof(*env) || env->nranks < 1 ||
        env->rank < 0 || env->rank >= env->nranks || env->peers == NULL ||
        (collective && env->allgather == NULL)) {
        return NULL;
    }
    tp = calloc(1, bytes);
    *st = tp != NULL ? RMACOLL_SUCCESS : RMACOLL_ERR_NO_MEMORY;
    return tp;
}

#endif /* RMACOLL_TRANSPORTS_COMMON_TOPS_H */
