/*
 * trace.h - ranges for profilers: NVTX (Nsight Systems, and any tool that
 * injects itself through NVTX_INJECTION64_PATH) when the build found the
 * header-only nvtx3 (RMACOLL_HAVE_NVTX); no-ops otherwise. A range is one
 * public call on this thread: its message "rmacoll:alltoallv" (the call's
 * name), its payload the bytes this rank sends (uint64). Without a tool
 * attached a push costs one indirect call. Thread-safe.
 */
#ifndef RMACOLL_CORE_TRACE_H
#define RMACOLL_CORE_TRACE_H

#include <stdint.h>

/** Non-zero when ranges can reach a tool: the build has NVTX and a tool is
 *  attached (NVTX_INJECTION64_PATH set, as Nsight Systems sets it; read
 *  once). Callers compute a range's payload only then. */
int rmacoll__trace_on(void);

/** Opens a range named `name` (a string literal) with `bytes` as payload. */
void rmacoll__trace_push(const char *name, uint64_t bytes);

/** Closes the innermost range this thread opened. */
void rmacoll__trace_pop(void);

#endif /* RMACOLL_CORE_TRACE_H */
