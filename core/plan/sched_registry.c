/*
 * sched_registry.c - scheduler lookup (built-in table or dlopen'ed
 * plugin), binding to a topology, and the contract checker. See
 * sched_registry.h.
 *
 * A plugin's table is copied into a registry-owned wrapper whose first
 * member is the table itself, so rmacoll__sched_t keeps only {ops, state}
 * and calls go straight to the plugin; the wrapper also keeps the dlopen
 * handle, released by rmacoll__sched_close. Built-in tables are static
 * and never freed; close tells the two apart by looking the pointer up in
 * rmacoll__builtin_schedulers[].
 */
#include "core/plan/sched_registry.h"

#include <pthread.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"

/* A loaded plugin: a copy of its v1 table, then its handle. */
typedef struct sched_reg_plugin {
    rmacoll_sched_ops_t ops;   /* first member: &p->ops == p */
    void *handle;              /* from dlopen */
} sched_reg_plugin_t;

const rmacoll_sched_ops_t *rmacoll__sched_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; rmacoll__builtin_schedulers[i] != NULL; i++)
        if (strcmp(rmacoll__builtin_schedulers[i]->name, name) == 0)
            return rmacoll__builtin_schedulers[i];
    return NULL;
}

static int sched_reg_is_builtin(const rmacoll_sched_ops_t *ops)
{
    for (size_t i = 0; rmacoll__builtin_schedulers[i] != NULL; i++)
        if (rmacoll__builtin_schedulers[i] == ops)
            return 1;
    return 0;
}

/* "a, b, c" of the built-in names into buf. */
static void sched_reg_known(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; rmacoll__builtin_schedulers[i] != NULL; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                         rmacoll__builtin_schedulers[i]->name);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}

rmacoll_status_t rmacoll__sched_check(const rmacoll__sched_t *s,
                                      const rmacoll_topo_t *topo,
                                      char *errbuf, size_t errlen)
{
    const char *name = s->ops->name ? s->ops->name : "(unnamed)";
    int nr = s->ops->nrounds(s->state, topo);
    if (nr < 1) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "scheduler '%s' reports %d rounds for %d ranks, needs >= 1",
                               name, nr, topo->nranks);
        return RMACOLL_ERR_PLUGIN;
    }
    for (int i = 0; i < topo->nranks; i++) {
        for (int j = 0; j < topo->nranks; j++) {
            if (j == i)
                continue;
            int r = s->ops->round(s->state, topo, i, j);
            if (r < 0 || r >= nr) {
                rmacoll__errbuf_printf(errbuf, errlen,
                                       "scheduler '%s' puts rank %d -> peer %d in round %d, "
                                       "outside [0, %d)", name, i, j, r, nr);
                return RMACOLL_ERR_PLUGIN;
            }
            int again = s->ops->round(s->state, topo, i, j);
            if (again != r) {
                rmacoll__errbuf_printf(errbuf, errlen,
                                       "scheduler '%s' is not deterministic: rank %d -> "
                                       "peer %d gave round %d, then %d", name, i, j, r,
                                       again);
                return RMACOLL_ERR_PLUGIN;
            }
        }
    }
    return RMACOLL_SUCCESS;
}

/* Loads and validates the plugin table; *p on success. */
static rmacoll_status_t sched_reg_load(const char *path,
                                       sched_reg_plugin_t **p, char *errbuf,
                                       size_t errlen)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        rmacoll__errbuf_printf(errbuf, errlen, "cannot load scheduler plugin '%s': %s",
                               path, why ? why : "unknown dlopen error");
        return RMACOLL_ERR_PLUGIN;
    }
    dlerror();
    const rmacoll_sched_ops_t *ops = dlsym(h, RMACOLL_SCHED_PLUGIN_SYMBOL);
    const char *bad = NULL;
    char why[160];
    if (ops == NULL) {
        snprintf(why, sizeof(why), "does not export %s",
                 RMACOLL_SCHED_PLUGIN_SYMBOL);
        bad = why;
    } else if (ops->abi_version != RMACOLL_SCHED_ABI_VERSION) {
        snprintf(why, sizeof(why), "has abi_version %u, this build needs %d",
                 (unsigned)ops->abi_version, RMACOLL_SCHED_ABI_VERSION);
        bad = why;
    } else if (ops->struct_size < RMACOLL_SCHED_OPS_V1_SIZE) {
        snprintf(why, sizeof(why),
                 "has struct_size %u, smaller than the v1 table (%zu bytes)",
                 (unsigned)ops->struct_size, (size_t)RMACOLL_SCHED_OPS_V1_SIZE);
        bad = why;
    } else if (ops->name == NULL || ops->name[0] == '\0') {
        bad = "has no name";
    } else if (ops->nrounds == NULL) {
        bad = "has no nrounds op";
    } else if (ops->round == NULL) {
        bad = "has no round op";
    }
    if (bad != NULL) {
        rmacoll__errbuf_printf(errbuf, errlen, "scheduler plugin '%s' %s", path, bad);
        dlclose(h);
        return RMACOLL_ERR_PLUGIN;
    }
    sched_reg_plugin_t *pl = malloc(sizeof(*pl));
    if (pl == NULL) {
        rmacoll__errbuf_printf(errbuf, errlen,
                               "out of memory loading scheduler plugin '%s'", path);
        dlclose(h);
        return RMACOLL_ERR_NO_MEMORY;
    }
    /* what the plugin has of this build's table; appended members it
     * lacks stay NULL */
    memset(&pl->ops, 0, sizeof(pl->ops));
    memcpy(&pl->ops, ops, ops->struct_size < sizeof(pl->ops) ? ops->struct_size
                                                            : sizeof(pl->ops));
    pl->ops.struct_size = sizeof(pl->ops);
    pl->handle = h;
    *p = pl;
    return RMACOLL_SUCCESS;
}

static void sched_reg_unload(sched_reg_plugin_t *p)
{
    void *h = p->handle;
    free(p);
    dlclose(h);
}

rmacoll_status_t rmacoll__sched_open(const char *name, const char *plugin_path,
                                     const rmacoll_topo_t *topo, uint64_t seed,
                                     rmacoll__sched_t *out, char *errbuf,
                                     size_t errlen)
{
    if (out == NULL)
        return RMACOLL_ERR_INVALID_ARG;
    out->ops = NULL;
    out->state = NULL;
    if (topo == NULL || topo->nranks < 1) {
        rmacoll__errbuf_printf(errbuf, errlen, "scheduler needs a topology of >= 1 rank");
        return RMACOLL_ERR_INVALID_ARG;
    }

    int is_plugin = plugin_path != NULL && plugin_path[0] != '\0';
    sched_reg_plugin_t *plugin = NULL;
    const rmacoll_sched_ops_t *ops;
    if (is_plugin) {
        rmacoll_status_t st = sched_reg_load(plugin_path, &plugin, errbuf, errlen);
        if (st != RMACOLL_SUCCESS)
            return st;
        ops = &plugin->ops;
    } else {
        ops = rmacoll__sched_find(name);
        if (ops == NULL) {
            char known[256];
            sched_reg_known(known, sizeof(known));
            rmacoll__errbuf_printf(errbuf, errlen, "unknown scheduler '%s' (known: %s)",
                                   name ? name : "", known);
            return RMACOLL_ERR_CONFIG;
        }
    }

    rmacoll__sched_t s = {ops, NULL};
    if (ops->create != NULL) {
        rmacoll_status_t st = ops->create(topo, seed, &s.state);
        if (st != RMACOLL_SUCCESS) {
            rmacoll__errbuf_printf(errbuf, errlen,
                                   "scheduler '%s' create for %d ranks failed: %s",
                                   ops->name, topo->nranks, rmacoll_status_string(st));
            if (plugin != NULL)
                sched_reg_unload(plugin);
            return st;
        }
    }
    if (is_plugin) {
        rmacoll_status_t st = rmacoll__sched_check(&s, topo, errbuf, errlen);
        if (st != RMACOLL_SUCCESS) {
            if (ops->destroy != NULL && s.state != NULL)
                ops->destroy(s.state);
            sched_reg_unload(plugin);
            return st;
        }
    }
    *out = s;
    return RMACOLL_SUCCESS;
}

void rmacoll__sched_close(rmacoll__sched_t *s)
{
    if (s == NULL || s->ops == NULL)
        return;
    if (s->ops->destroy != NULL && s->state != NULL)
        s->ops->destroy(s->state);
    if (!sched_reg_is_builtin(s->ops))
        sched_reg_unload((sched_reg_plugin_t *)s->ops);
    s->ops = NULL;
    s->state = NULL;
}

/* "shift,node_shift,..." from the generated table, made once. */
static pthread_once_t sched_names_once = PTHREAD_ONCE_INIT;
static char sched_names[512];

static void sched_names_make(void)
{
    size_t off = 0;

    for (size_t i = 0; rmacoll__builtin_schedulers[i] != NULL && off < sizeof(sched_names);
         i++) {
        int n = snprintf(sched_names + off, sizeof(sched_names) - off, "%s%s",
                         i ? "," : "", rmacoll__builtin_schedulers[i]->name);
        off += n > 0 ? (size_t)n : 0;
    }
}

const char *rmacoll__sched_builtin_names(void)
{
    pthread_once(&sched_names_once, sched_names_make);
    return sched_names;
}
