/*
 * cuda_graph.h - a tool's calls captured into one CUDA graph and replayed
 * (rmacoll-latency's graph paths, rmacoll-perf -G / --graph): begin a
 * capture on the stream (thread-local mode: other threads' CUDA calls are
 * not affected), enqueue the calls, end and instantiate, then launch the
 * graph n times on the stream. rmacoll records a call under capture only
 * with its graph mode on (RMACOLL_CUDA_GRAPH=1 in the environment before
 * the process's first call; docs/gpu.md). Header-only (static inline functions):
 * the tools' support library is built without CUDA, and only tools built
 * with the CUDA runtime include this. Not thread-safe per graph.
 */
#ifndef RMACOLL_TOOLS_CUDA_GRAPH_H
#define RMACOLL_TOOLS_CUDA_GRAPH_H

#include <stddef.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

typedef struct rmacoll_tool_graph {
    cudaGraph_t graph;     /* NULL: none */
    cudaGraphExec_t exec;
} rmacoll_tool_graph_t;

/* Releases the graph (no-op for none). */
static inline void rmacoll_tool_graph_free(rmacoll_tool_graph_t *tg)
{
    if (tg->exec != NULL)
        cudaGraphExecDestroy(tg->exec);
    if (tg->graph != NULL)
        cudaGraphDestroy(tg->graph);
    tg->exec = NULL;
    tg->graph = NULL;
}

/* Starts capturing s. 0, or -1 with err filled. */
static inline int rmacoll_tool_graph_begin(cudaStream_t s, char *err, size_t len)
{
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);

    if (e != cudaSuccess) {
        snprintf(err, len, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* Ends the capture of s (always, so s is usable again) and, when the calls
 * enqueued succeeded (ok != 0), instantiates it into *tg (whose previous
 * graph is released first). 0, or -1 with err filled. */
static inline int rmacoll_tool_graph_end(rmacoll_tool_graph_t *tg, cudaStream_t s, int ok, char *err,
                                  size_t len)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &g);

    rmacoll_tool_graph_free(tg);
    if (e != cudaSuccess || !ok) {
        if (g != NULL)
            cudaGraphDestroy(g);
        if (e != cudaSuccess)
            snprintf(err, len, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
        else
            snprintf(err, len, "a call under capture failed");
        return -1;
    }
    e = cudaGraphInstantiate(&tg->exec, g, 0);
    if (e != cudaSuccess) {
        cudaGraphDestroy(g);
        tg->exec = NULL;
        snprintf(err, len, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
        return -1;
    }
    tg->graph = g;
    return 0;
}

/* Enqueues n launches of tg on s. 0, or -1 with err filled. */
static inline int rmacoll_tool_graph_launch(const rmacoll_tool_graph_t *tg, cudaStream_t s, int n,
                                     char *err, size_t len)
{
    for (int i = 0; i < n; i++) {
        cudaError_t e = cudaGraphLaunch(tg->exec, s);

        if (e != cudaSuccess) {
            snprintf(err, len, "cudaGraphLaunch: %s", cudaGetErrorString(e));
            return -1;
        }
    }
    return 0;
}

#endif /* RMACOLL_TOOLS_CUDA_GRAPH_H */
