/*
 * usage.c - rmacoll-perf: the checks of --relay/--scheduler/--intra/
 * --inter against this build, and the node map of every rank (--nodes,
 * --topology, -np/--ppn or the matrix file); used by the spawner before
 * any rank starts and by every rank.
 */
#include <errno.h>
#include <unistd.h>

#include "perf_tool.h"

/* 1 when name is one of the comma-separated list. */
static int perf_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);

        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = e != NULL ? e + 1 : NULL;
    }
    return 0;
}

/* A transport loaded from a shared object (transports.*: plugin:PATH, as
 * the config takes it): 1, 0 when t is no plugin: value, -1 (err names
 * the option and the path) when PATH cannot be read. */
static int perf_plugin(const char *opt, const char *t, char *err, size_t len)
{
    const char *path;

    if (strncmp(t, "plugin:", 7) != 0)
        return 0;
    path = t + 7;
    if (path[0] == '\0' || access(path, R_OK) != 0) {
        snprintf(err, len, "%s %s: cannot read the transport plugin '%s': %s", opt, t,
                 path, path[0] == '\0' ? "no path after plugin:" : strerror(errno));
        return -1;
    }
    return 1;
}

/* Applies --relay/--scheduler/--intra/--inter to cfg and checks the names
 * against what is built in (a plugin:PATH transport: that PATH can be
 * read; the library checks the rest when it loads it); err names the
 * option. 0 or -1. */
/* --intra/--inter win over the file and the environment: given to the
 * configuration loader as the environment variables (which override the
 * file), so a plugin named there declares its keys before the file and the
 * environment are read, and spawned ranks inherit the choice. */
void perf_transport_env(const rmacoll_perf_opts_t *o)
{
    if (o->intra_node[0] != '\0')
        setenv("RMACOLL_TRANSPORTS_INTRA_NODE", o->intra_node, 1);
    if (o->inter_node[0] != '\0')
        setenv("RMACOLL_TRANSPORTS_INTER_NODE", o->inter_node, 1);
}

int perf_apply_config(const rmacoll_perf_opts_t *o,
                      rmacoll_config_t *cfg, char *err, size_t len)
{
    int intra_plugin, inter_plugin;

    if (o->relay >= 0)
        cfg->relay_enabled = o->relay;
    if (o->scheduler[0] != '\0')
        snprintf(cfg->scheduler, sizeof(cfg->scheduler), "%s", o->scheduler);
    if (o->intra_node[0] != '\0')
        snprintf(cfg->intra_node, sizeof(cfg->intra_node), "%s", o->intra_node);
    if (o->inter_node[0] != '\0')
        snprintf(cfg->inter_node, sizeof(cfg->inter_node), "%s", o->inter_node);
    intra_plugin = perf_plugin(o->intra_node[0] ? "--intra" : "transports.intra_node",
                               cfg->intra_node, err, len);
    inter_plugin = perf_plugin(o->inter_node[0] ? "--inter" : "transports.inter_node",
                               cfg->inter_node, err, len);
    if (intra_plugin < 0 || inter_plugin < 0)
        return -1;
    if (!intra_plugin && strcmp(cfg->intra_node, "auto") != 0 &&
        (!perf_in_list(rmacoll_build_transports(), cfg->intra_node) ||
         !strcmp(cfg->intra_node, "ofi") || !strcmp(cfg->intra_node, "verbs"))) {
        snprintf(err, len, "%s %s: not a node transport of this build (ce, "
                 "nvlink_kernel, auto or plugin:PATH; built: %s)",
                 o->intra_node[0] ? "--intra" : "transports.intra_node",
                 cfg->intra_node, rmacoll_build_transports());
        return -1;
    }
    if (!inter_plugin && (!perf_in_list(rmacoll_build_transports(), cfg->inter_node) ||
        !strcmp(cfg->inter_node, "ce") ||
        !strcmp(cfg->inter_node, "nvlink_kernel"))) {
        snprintf(err, len, "%s %s: not a network transport of this build "
                 "(ofi, verbs or plugin:PATH; built: %s)",
                 o->inter_node[0] ? "--inter" : "transports.inter_node",
                 cfg->inter_node, rmacoll_build_transports());
        return -1;
    }
    if (cfg->scheduler_plugin[0] == '\0' &&
        !perf_in_list(rmacoll_build_schedulers(), cfg->scheduler)) {
        snprintf(err, len, "%s %s: no such scheduler (built: %s; or "
                 "scheduler_plugin in the config)",
                 o->scheduler[0] ? "--scheduler" : "scheduler", cfg->scheduler,
                 rmacoll_build_schedulers());
        return -1;
    }
    return 0;
}

/* The virtual node of every rank from --nodes, --topology or -np/--ppn, or
 * from the matrix file when no topology option was given (c may be NULL).
 * 0, or -1 with err naming the option. */
int perf_node_map(const rmacoll_perf_opts_t *o, const rmacoll_case_t *c,
                  int *node_of, int *nranks, char *err, size_t len)
{
    int sizes[RMACOLL_LAUNCH_MAX_RANKS];
    int nnodes = 0;
    rmacoll_status_t st;

    if (o->nodes[0] != '\0') {
        if (rmacoll_perf_parse_nodes(o->nodes, node_of,
                                     RMACOLL_LAUNCH_MAX_RANKS, nranks) != 0) {
            snprintf(err, len, "bad --nodes %.200s (node of every rank, e.g. "
                     "0,1,0,1)", o->nodes);
            return -1;
        }
        if (o->np_given && o->np != *nranks) {
            snprintf(err, len, "--nodes %.200s names %d ranks but -np is %d",
                     o->nodes, *nranks, o->np);
            return -1;
        }
    } else if (c != NULL && !o->topology_given) {
        /* A matrix file brings its own topology. */
        if (c->nranks > RMACOLL_LAUNCH_MAX_RANKS) {
            snprintf(err, len, "%.200s: too many ranks (%d)", o->dist + 7,
                     c->nranks);
            return -1;
        }
        *nranks = c->nranks;
        memcpy(node_of, c->node_of, (size_t)c->nranks * sizeof(int));
        return 0;
    } else {
        if (o->topology[0] != '\0')
            st = rmacoll_launch_parse_topology(o->topology, sizes,
                                               RMACOLL_LAUNCH_MAX_RANKS,
                                               &nnodes, nranks);
        else
            st = rmacoll_launch_even_topology(o->np, o->ppn, sizes,
                                              RMACOLL_LAUNCH_MAX_RANKS,
                                              &nnodes, nranks);
        if (st != RMACOLL_SUCCESS) {
            snprintf(err, len, "bad topology (%.200s)",
                     o->topology[0] ? o->topology : "-np/--ppn");
            return -1;
        }
        for (int nd = 0, r = 0; nd < nnodes; nd++)
            for (int k = 0; k < sizes[nd]; k++)
                node_of[r++] = nd;
    }
    if (c != NULL && c->nranks != *nranks) {
        snprintf(err, len, "%.200s has %d ranks, but the topology options give "
                 "%d (leave out -np/--ppn/--topology/--nodes to use the "
                 "file's)", o->dist + 7, c->nranks, *nranks);
        return -1;
    }
    return 0;
}
